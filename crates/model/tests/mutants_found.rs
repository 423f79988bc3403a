//! Behaviour that mutation testing (cargo-mutants over this crate) found no test pinning down.
//!
//! Each test names the rule or tunable it holds and the mutant it was written against; each was
//! checked to fail with its mutant applied and to pass without it.

mod common;

use common::*;
use numapilot_model::Model;
use numapilot_observe::{AccessSample, Sample};
use numapilot_topology::Topology;

fn edge(m: &Model, a: (u32, u32), b: (u32, u32)) -> Option<f64> {
    m.graph.edges.get(&(key(a.0, a.1), key(b.0, b.1))).map(|e| e.strength)
}

fn bookkeeping(m: &Model, name: &str) -> usize {
    let mut out = Vec::new();
    m.bookkeeping(&mut out);
    out.into_iter().find(|(n, _)| *n == name).map(|(_, v)| v).unwrap()
}

/// Process 10 with threads 11 and 12 (idle), no samples.
fn pair(topo: &Topology, t: u64) -> Sb {
    Sb::new(topo, t).proc(10, 5, "app", &[GIB, 0]).thread(10, 11, 0, 0, 0).thread(10, 12, 0, 0, 0)
}

fn phys(pid: u32, tid: u32, addr: u64, phys: Option<u64>, count: u32, last_ns: u64) -> AccessSample {
    AccessSample { pid, tid, addr, phys, node: 0, count, last_ns }
}

// ---------------------------------------------------------------------------------------------
// affinity.rs
// ---------------------------------------------------------------------------------------------

// Pins: `AffinityGraph::strength` finds the stored (a < b) edge when asked in key order, not only
// in reverse (callers pass the two tasks in either order). Kills affinity.rs:141 `a < b` -> `a == b`.
#[test]
fn strength_reads_the_stored_edge_in_either_argument_order() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    for i in 1..=3 {
        m.update(&pair(&topo, i * SEC).access(10, 11, BUF, 0, 10, i * SEC).access(10, 12, BUF, 0, 10, i * SEC).build());
    }
    let s = edge(&m, (10, 11), (10, 12)).unwrap();
    assert!(s > 0.5, "{s}");
    assert_eq!(m.graph.strength(key(10, 11), key(10, 12), 0.1), s);
    assert_eq!(m.graph.strength(key(10, 12), key(10, 11), 0.1), s);
}

// Pins: the address-space prior relates two *threads of one process* only: never two processes,
// never a task with itself. Kills affinity.rs:143 `&&` -> `||`.
#[test]
fn address_space_prior_is_only_between_two_threads_of_one_process() {
    let g = numapilot_model::AffinityGraph::default();
    assert_eq!(g.strength(key(10, 11), key(10, 12), 0.1), 0.1);
    assert_eq!(g.strength(key(10, 11), key(20, 21), 0.1), 0.0, "different processes");
    assert_eq!(g.strength(key(10, 11), key(10, 11), 0.1), 0.0, "a task with itself");
}

// Pins: `model.coaccess_accessors` bookkeeping counts the remembered accessors (the metric that
// shows the co-access window is bounded in a long-running daemon). Kills affinity.rs:192
// `CoaccessWindow::accessors` -> 0 and -> 1.
#[test]
fn bookkeeping_counts_the_coaccess_windows_accessors() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    m.update(&pair(&topo, SEC).build());
    let t = 2 * SEC;
    m.update(&pair(&topo, t).access(10, 11, BUF, 0, 3, t).access(10, 12, BUF, 0, 3, t).build());
    assert_eq!(bookkeeping(&m, "model.coaccess_buckets"), 1);
    assert_eq!(bookkeeping(&m, "model.coaccess_accessors"), 2);
}

// Pins: a physical (machine-wide) bucket is 2^coaccess_bucket_shift bytes of physical memory: two
// processes touching different cache lines of one 2 MiB region are related. Kills affinity.rs:237
// `phys >> shift` -> `phys << shift`.
#[test]
fn a_physical_bucket_spans_two_to_the_shift_bytes() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    for i in 1..=2u64 {
        let t = i * SEC;
        let mut s = Sb::new(&topo, t)
            .proc(10, 5, "a", &[GIB, 0])
            .thread(10, 10, 0, 0, 0)
            .proc(20, 5, "b", &[GIB, 0])
            .thread(20, 20, 0, 0, 0)
            .build();
        s.accesses.push(phys(10, 10, 0x1000_0000, Some(0x8_0000_0000), 4, t));
        s.accesses.push(phys(20, 20, 0x5000_0000, Some(0x8_0000_0000 + 0x1_0040), 4, t));
        m.update(&s);
    }
    assert!(edge(&m, (10, 10), (20, 20)).is_some());
}

// Pins: per-address-space buckets never share a key with machine-wide (physical) ones, even for
// pid 1: a virtual address of one process equal to another's physical address relates nothing.
// Kills affinity.rs:238 `pid + 1` -> `pid - 1` (pid 1's virtual buckets would land in the
// physical namespace).
#[test]
fn virtual_buckets_never_collide_with_physical_ones() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let addr = 0x8_0000_0000u64;
    for i in 1..=2u64 {
        let t = i * SEC;
        let mut s = Sb::new(&topo, t)
            .proc(1, 5, "init", &[GIB, 0])
            .thread(1, 1, 0, 0, 0)
            .proc(20, 5, "b", &[GIB, 0])
            .thread(20, 20, 0, 0, 0)
            .build();
        s.accesses.push(phys(1, 1, addr, None, 4, t));
        s.accesses.push(phys(20, 20, 0x5000_0000, Some(addr), 4, t));
        m.update(&s);
    }
    assert!(m.graph.edges.is_empty(), "{:?}", m.graph.edges);
}

// Pins: one thread's several samples in one bucket are merged into one accessor (samples summed):
// it is never paired with itself (no self edge), and the pair's co-access is min of the sums.
// Kills affinity.rs:248 the merge guard -> `false`.
#[test]
fn a_threads_samples_in_one_bucket_merge_into_one_accessor() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    m.update(&pair(&topo, SEC).build());
    let t = 2 * SEC;
    // 11: 5 + 5 samples at two lines of one bucket; 12: 10 samples elsewhere in it.
    m.update(
        &pair(&topo, t)
            .access(10, 11, BUF, 0, 5, t)
            .access(10, 11, BUF + 64, 0, 5, t)
            .access(10, 12, BUF + 128, 0, 10, t)
            .build(),
    );
    assert_eq!(m.graph.edges.keys().collect::<Vec<_>>(), vec![&(key(10, 11), key(10, 12))]);
    assert!(m.graph.edges.keys().all(|(a, b)| a != b));
    // f = min(10, 10) / min(10, 10) = 1: s = 0.5 after one period.
    assert!((edge(&m, (10, 11), (10, 12)).unwrap() - 0.5).abs() < 1e-12);
}

// Pins: a bucket with exactly coaccess_max_accessors + 1 accessors this period (the smallest
// crowd that is cut) pairs the 16 most recent and does not panic. Kills affinity.rs:284
// `max_acc - 1` -> `max_acc + 1` (an out-of-range selection index).
#[test]
fn a_bucket_one_accessor_over_the_cap_keeps_the_most_recent() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let ms = 1_000_000u64;
    let s = |t: u64, acc: &[(u32, u64)]| crowd(&topo, t, 100..117, acc);
    m.update(&s(SEC, &[]));
    // 17 accessors, thread 100 the most recent, 116 the oldest.
    let acc: Vec<(u32, u64)> = (100..117).map(|tid| (tid, 2 * SEC - u64::from(tid - 100) * ms)).collect();
    m.update(&s(2 * SEC, &acc));
    assert_eq!(m.graph.edges.len(), 16 * 15 / 2);
    assert!(m.graph.edges.keys().all(|(a, b)| a.tid < 116 && b.tid < 116));
    assert_eq!(bookkeeping(&m, "model.coaccess_accessors"), 16);
}

// Pins: an access sample with count 0 is no access: it leaves nothing in the co-access window
// (where it would take one of the coaccess_max_accessors slots of real accessors). Kills
// affinity.rs:234 `a.count > 0` -> `>= 0`.
#[test]
fn a_zero_count_sample_is_no_access() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    m.update(&pair(&topo, SEC).build());
    let t = 2 * SEC;
    m.update(&pair(&topo, t).access(10, 11, BUF, 0, 0, t).access(10, 12, BUF, 0, 0, t).build());
    assert_eq!(bookkeeping(&m, "model.coaccess_buckets"), 0);
    assert_eq!(bookkeeping(&m, "model.coaccess_accessors"), 0);
    assert!(m.graph.edges.is_empty());
}

// Pins: communication of a task with itself (a process-level end resolving to the very thread at
// the other end) relates nothing: no self edge. Kills affinity.rs:359 first `||` -> `&&`.
#[test]
fn communication_with_itself_makes_no_edge() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    for i in 1..=2u64 {
        // (10, 10) stands for process 10's busiest thread, 11: the same task as the other end.
        let s = Sb::new(&topo, i * SEC)
            .proc(10, 5, "app", &[GIB, 0])
            .thread(10, 10, 0, 0, 0)
            .thread(10, 11, i * SEC / 2, 0, 0)
            .comm((10, 10), (10, 11), 5000)
            .build();
        m.update(&s);
    }
    assert!(m.graph.edges.is_empty(), "{:?}", m.graph.edges);
}

// Pins: communication with an end that is not a live task (exited, or never a user thread)
// makes no edge: the graph holds live tasks only. Kills affinity.rs:359 second `||` -> `&&`.
#[test]
fn communication_with_a_dead_end_makes_no_edge() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    for i in 1..=2u64 {
        let s = pair(&topo, i * SEC).comm((10, 11), (99, 100), 5000).build();
        m.update(&s);
    }
    assert!(m.graph.edges.is_empty(), "{:?}", m.graph.edges);
}

/// Processes 10, 20, 30 (one thread each, 1 GiB resident) and the shared objects given.
fn three_procs(topo: &Topology, t: u64, rss: [u64; 3], objects: &[&[(u32, u64)]]) -> Sample {
    let mut b = Sb::new(topo, t);
    for (k, pid) in [10u32, 20, 30].into_iter().enumerate() {
        b = b.proc(pid, 5, "p", &[rss[k], 0]).thread(pid, pid, 0, 0, 0);
    }
    for (i, users) in objects.iter().enumerate() {
        b = b.shared(100 + i as u64, "/dev/shm/seg", users);
    }
    b.build()
}

// Pins: a shared object with more than two users (up to shared_max_users) relates every pair of
// them. Kills affinity.rs:409 `len() < 2` -> `len() > 2`.
#[test]
fn a_segment_shared_by_three_processes_relates_all_three_pairs() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let users: &[(u32, u64)] = &[(10, GIB / 2), (20, GIB / 2), (30, GIB / 2)];
    for i in 1..=2 {
        m.update(&three_procs(&topo, i * SEC, [GIB; 3], &[users]));
    }
    let keys: Vec<_> = m.graph.edges.keys().map(|(a, b)| (a.pid, b.pid)).collect();
    assert_eq!(keys, vec![(10, 20), (10, 30), (20, 30)]);
}

// Pins: shared_max_users is inclusive: an object with exactly that many users still counts (the
// cut is for libraries mapped by more). Kills affinity.rs:409 `len() > max_users` -> `>=`.
#[test]
fn shared_max_users_is_inclusive() {
    let topo = machine(2, 2, 16);
    let tun = numapilot_model::Tunables { shared_max_users: 3, ..numapilot_model::Tunables::default() };
    let mut m = Model::new(topo.clone(), tun);
    let users: &[(u32, u64)] = &[(10, GIB / 2), (20, GIB / 2), (30, GIB / 2)];
    for i in 1..=2 {
        m.update(&three_procs(&topo, i * SEC, [GIB; 3], &[users]));
    }
    assert_eq!(m.graph.edges.len(), 3);
}

// Pins: a process with no resident memory adds no shared-memory relation (the fraction's
// denominator is min(RSS); 0 must not become a full-strength edge). Kills affinity.rs:427
// `rss == 0 || b == 0` -> `&&`.
#[test]
fn a_process_without_resident_memory_shares_nothing() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let users: &[(u32, u64)] = &[(10, GIB / 2), (20, GIB / 2)];
    for i in 1..=2 {
        m.update(&three_procs(&topo, i * SEC, [GIB, 0, GIB], &[users]));
    }
    assert!(m.graph.edges.is_empty(), "{:?}", m.graph.edges);
}

// Pins: a process with no live thread (nothing to stand for it) gets no shared-memory edge,
// whichever end of the pair it is (lower or higher pid), so the graph never names a task that
// does not exist. Kills affinity.rs:431 `a == z || !contains(a) || !contains(z)`: first `||` ->
// `&&` (thread-less lower pid) and second `||` -> `&&` (either).
#[test]
fn a_process_without_threads_shares_nothing() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    for i in 1..=2u64 {
        let s = Sb::new(&topo, i * SEC)
            .proc(5, 5, "a", &[GIB, 0])
            .proc(10, 5, "b", &[GIB, 0])
            .thread(10, 10, 0, 0, 0)
            .proc(20, 5, "c", &[GIB, 0])
            .shared(7, "/dev/shm/seg", &[(5, GIB / 2), (10, GIB / 2)])
            .shared(8, "/dev/shm/other", &[(10, GIB / 2), (20, GIB / 2)])
            .build();
        m.update(&s);
    }
    assert!(m.procs.contains_key(&5) && m.procs.contains_key(&20), "the processes themselves are known");
    assert!(m.graph.edges.is_empty(), "{:?}", m.graph.edges);
}

/// Process 10, threads 10, 11, 12 in kernel NUMA group 7, each faulting 60 private + 40 shared
/// (f = 0.4), except the threads in `no_faults`, which have no fault statistics at all.
fn numa_group(topo: &Topology, t: u64, no_faults: &[u32]) -> Sample {
    let mut b = Sb::new(topo, t).proc(10, 5, "db", &[GIB, 0]);
    for tid in 10..13 {
        let f = if no_faults.contains(&tid) { 0 } else { 60 };
        b = b.thread(10, tid, t / 2, 0, 0).faults(10, tid, &[f, 0]);
    }
    let mut s = b.build();
    for th in &mut s.processes[0].threads {
        let numa = th.sched.as_mut().unwrap().numa.as_mut().unwrap();
        if !no_faults.contains(&th.tid) {
            numa.faults[0].task_shared = 40;
        }
        numa.group_id = Some(7);
    }
    s
}

// Pins: a thread without fault statistics has no shared-fault fraction and is left out of its
// kernel NUMA group's chain (the chain links its neighbours instead). Kills affinity.rs:465
// `all > 0` -> `all >= 0` (a 0/0 fraction that f64::min then ignores).
#[test]
fn a_numa_group_member_without_faults_is_left_out_of_the_chain() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    for i in 1..=2 {
        m.update(&numa_group(&topo, i * SEC, &[11]));
    }
    let keys: Vec<_> = m.graph.edges.keys().map(|(a, b)| (a.tid, b.tid)).collect();
    assert_eq!(keys, vec![(10, 12)]);
}

// Pins: a reborn thread (its tid now names a new thread) takes no part in its kernel NUMA group's
// chain in the update it is reborn, like the other co-access sources: the affinity graph forgets
// the old task's relations and starts the new one from nothing. Kills affinity.rs:457
// `!tasks.contains_key || reborn.contains` -> `&&`.
#[test]
fn a_reborn_thread_is_left_out_of_its_numa_group_chain() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    m.update(&numa_group(&topo, SEC, &[]));
    m.update(&numa_group(&topo, 2 * SEC, &[]));
    assert_eq!(m.graph.edges.len(), 2);
    let mut s = numa_group(&topo, 3 * SEC, &[]);
    s.processes[0].threads[1].stat.starttime = 999;
    m.update(&s);
    let keys: Vec<_> = m.graph.edges.keys().map(|(a, b)| (a.tid, b.tid)).collect();
    assert_eq!(keys, vec![(10, 12)]);
}

// Pins: the shared-memory channel decays like the others (s / 2^(dt/h), affinity_half_life_ms =
// 10 s) once the mapping is gone: 10 s later it is exactly half. Kills affinity.rs:506
// `*s *= d` -> `*s /= d`.
#[test]
fn the_shared_memory_channel_halves_per_half_life() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let users: &[(u32, u64)] = &[(10, GIB / 2), (20, GIB / 2)];
    for i in 1..=3 {
        m.update(&three_procs(&topo, i * SEC, [GIB; 3], &[users]));
    }
    let k = (key(10, 10), key(20, 20));
    let s0 = m.graph.shared[&k];
    assert!(s0 > 0.3, "{s0}");
    m.update(&three_procs(&topo, 13 * SEC, [GIB; 3], &[]));
    let s1 = m.graph.shared[&k];
    assert!((s1 - s0 / 2.0).abs() < 1e-12, "{s0} -> {s1}");
    assert_eq!(m.graph.edges[&k].strength, s1);
}

/// Tunables under which an edge's strength is exactly this period's frequency: decay and rise
/// half-lives of 1 ms against 1 s periods (2^-1000 is 0 next to any f).
fn instant() -> numapilot_model::Tunables {
    numapilot_model::Tunables {
        affinity_half_life_ms: 1,
        affinity_rise_half_life_ms: 1,
        edge_grace_ms: 2_000,
        ..numapilot_model::Tunables::default()
    }
}

/// Two single-thread processes 10 and 20; wake-ups between them at `events` per 1 s period
/// (f = events / comm_full_events_per_s = events / 1000).
fn talk(topo: &Topology, i: u64, events: u64) -> Sample {
    let b = Sb::new(topo, i * SEC)
        .proc(10, 5, "server", &[GIB, 0])
        .thread(10, 10, 0, 0, 0)
        .proc(20, 5, "client", &[0, GIB])
        .thread(20, 20, 0, 0, 2);
    if events > 0 {
        b.comm((10, 10), (20, 20), events).build()
    } else {
        b.build()
    }
}

// Pins: edge_zero is a strict lower mark: an edge exactly at edge_zero is not "zero" (its grace
// period does not start). Kills affinity.rs:557 `strength < edge_zero` -> `<=`.
#[test]
fn an_edge_exactly_at_edge_zero_is_not_zero() {
    let topo = machine(2, 2, 16);
    let mut m = Model::new(topo.clone(), instant());
    m.update(&talk(&topo, 1, 0));
    m.update(&talk(&topo, 2, 10));
    let e = &m.graph.edges[&(key(10, 10), key(20, 20))];
    assert_eq!(e.strength, m.tunables.edge_zero, "setup: exactly at the mark");
    assert_eq!(e.zero_since_ns, None);
}

// Pins: group_keep_strength is a strict lower mark: a group whose internal edge sits exactly at
// it is never cut, however long (only "below the keep mark for edge_grace_ms" splits). Kills
// affinity.rs:554 `strength < keep_mark` -> `<=`.
#[test]
fn an_edge_exactly_at_the_keep_mark_keeps_its_group() {
    let topo = machine(2, 2, 16);
    let mut m = Model::new(topo.clone(), instant());
    m.update(&talk(&topo, 1, 0));
    m.update(&talk(&topo, 2, 500));
    assert_eq!(m.groups.groups.len(), 1, "joined at f = 0.5");
    for i in 3..=8 {
        m.update(&talk(&topo, i, 50));
        let e = &m.graph.edges[&(key(10, 10), key(20, 20))];
        assert_eq!(e.strength, m.tunables.group_keep_strength, "setup: exactly at the mark");
        assert_eq!(bookkeeping(&m, "model.weak_edges"), 0, "step {i}");
        assert_eq!(m.groups.groups.len(), 1, "step {i}");
    }
}

// Pins: the cap allows RATE_SLACK_CPU_PER_TASK (0.02 CPU) per member for tick rounding: three
// talking single-thread processes of 1.0, 1.0 and 0.04 CPUs (2.04) merge into one group on a
// 2-CPU node (cap 2.0 + 3 x 0.02 = 2.06). Kills groups.rs:142 `SLACK * tasks` -> `SLACK / tasks`.
#[test]
fn the_rate_slack_grows_with_the_members() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = |i: u64| {
        let run = |cpu: f64| ((i - 1) as f64 * cpu * SEC as f64) as u64;
        Sb::new(&topo, i * SEC)
            .proc(10, 5, "a", &[GIB, 0])
            .thread(10, 10, run(1.0), 0, 0)
            .proc(20, 5, "b", &[GIB, 0])
            .thread(20, 20, run(1.0), 0, 1)
            .proc(30, 5, "c", &[GIB, 0])
            .thread(30, 30, run(0.04), 0, 1)
            .comm((10, 10), (20, 20), 1000)
            .comm((20, 20), (30, 30), 1000)
            .build()
    };
    m.update(&s(1));
    m.update(&s(2));
    assert_eq!(m.groups.refused_merges, 0);
    assert_eq!(m.groups.groups.len(), 1);
    assert!((m.group_of(&key(10, 10)).unwrap().cpu - 2.04).abs() < 1e-9);
}

// Pins: the cap's hysteresis (group_split_margin, 0.1) holds for memory as for CPU: a
// signal-less process grown from 14 GiB to 15 GiB on 16 GiB nodes (cap 0.9 x 16 = 14.4 GiB,
// upper mark 15.84 GiB) stays one group; at 16 GiB it is cut. Kills groups.rs:144
// `m * (1.0 + margin)` -> `m + (..)`, `m / (..)`, `m * (1.0 - margin)`.
#[test]
fn the_memory_cap_has_the_split_margin_too() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = |i: u64, rss_gib: u64| {
        Sb::new(&topo, i * SEC)
            .proc(10, 5, "db", &[rss_gib * GIB / 2, rss_gib * GIB / 2])
            .thread(10, 10, 0, 0, 0)
            .thread(10, 11, 0, 0, 0)
            .build()
    };
    m.update(&s(1, 14));
    m.update(&s(2, 14));
    assert_eq!(m.groups.groups.len(), 1, "14 GiB fits the plain cap");
    m.update(&s(3, 15));
    assert_eq!(m.groups.groups.len(), 1, "15 GiB is between the marks: kept whole");
    m.update(&s(4, 16));
    assert_eq!(m.groups.groups.len(), 2, "16 GiB is above the upper mark: cut");
}

// Pins: the split margin is for members that were already together; a new thread joins its
// signal-less process's group only within the plain cap. Process of 14 GiB and two threads (one
// group under the 14.4 GiB cap) gains a third thread and 1 GiB: 15 GiB would be within the upper
// mark (15.84) but not the plain cap, so the new thread stays out. Kills groups.rs:250
// `fresh[i] || fresh[j]` -> `&&`.
#[test]
fn a_new_thread_joins_its_process_group_only_within_the_plain_cap() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = |i: u64, rss_gib: u64, tids: &[u32]| {
        let mut b = Sb::new(&topo, i * SEC).proc(10, 5, "db", &[rss_gib * GIB / 2, rss_gib * GIB / 2]);
        for &tid in tids {
            b = b.thread(10, tid, 0, 0, 0);
        }
        b.build()
    };
    m.update(&s(1, 14, &[10, 11]));
    m.update(&s(2, 14, &[10, 11]));
    assert_eq!(m.groups.groups.len(), 1);
    m.update(&s(3, 15, &[10, 11, 12]));
    let sets: Vec<Vec<u32>> = m.groups.groups.values().map(|g| g.tasks.iter().map(|k| k.tid).collect()).collect();
    assert_eq!(sets, vec![vec![10, 11], vec![12]]);
}

/// Single-thread processes `pids` (1 GiB each, idle) and wake-ups at 1000/s (f = 1) between the
/// pairs in `talking`.
fn procs_talking(topo: &Topology, i: u64, pids: &[u32], talking: &[(u32, u32)]) -> Sample {
    let mut b = Sb::new(topo, i * SEC);
    for &p in pids {
        b = b.proc(p, 5, "p", &[GIB, 0]).thread(p, p, 0, 0, 0);
    }
    for &(a, z) in talking {
        b = b.comm((a, a), (z, z), 1000);
    }
    b.build()
}

// Pins: in a split the largest part keeps the group's id, also when the part that leaves holds
// the group's smallest task (which wins only ties of size); the leaving part gets the next fresh
// id and ids are never handed out twice. Kills groups.rs:274 `y.1 - y.0` -> `y.1 + y.0` (part
// order; it shows only behind another group in the sorted components, hence process 5) and
// groups.rs:280 `next_id - 1` -> `next_id + 1` / `next_id / 1` (new part's id).
#[test]
fn a_split_leaves_the_id_with_the_largest_part_and_hands_out_the_next_id() {
    let topo = machine(2, 4, 16);
    let mut m = Model::new(topo.clone(), instant());
    let pids = [5, 10, 20, 30];
    m.update(&procs_talking(&topo, 1, &pids, &[]));
    m.update(&procs_talking(&topo, 2, &pids, &[(10, 20), (20, 30)]));
    assert_eq!(m.groups.groups.len(), 2);
    let id = m.group_of(&key(10, 10)).unwrap().id;
    assert!(id > m.group_of(&key(5, 5)).unwrap().id);
    let next = m.groups.next_id;
    // 10-20 falls silent: below the keep mark from t = 3 s, cut edge_grace_ms = 2 s later.
    for i in 3..=5 {
        m.update(&procs_talking(&topo, i, &pids, &[(20, 30)]));
    }
    assert_eq!(m.groups.groups.len(), 3);
    assert_eq!(m.group_of(&key(20, 20)).unwrap().id, id);
    assert_eq!(m.group_of(&key(30, 30)).unwrap().id, id);
    assert_eq!(m.group_of(&key(10, 10)).unwrap().id, next);
    assert_eq!(m.groups.next_id, next + 1);
    // A process appearing now gets the following id, distinct from every group's.
    m.update(&procs_talking(&topo, 6, &[5, 10, 20, 30, 40], &[(20, 30)]));
    assert_eq!(m.group_of(&key(40, 40)).unwrap().id, next + 1);
    assert_eq!(m.groups.groups.len(), 4);
}

// Pins: the merge direction weighs memory as a share of the largest node's memory (load = cpu /
// CPUs_max + mem / mem_max), not in bytes: a busy small-memory task (0.8 CPU, 0.5 GiB: 0.23)
// outweighs an idle larger one (0.2 CPU, 1 GiB: 0.11) and keeps its id. Kills groups.rs:330
// `x.mem / mem_max` -> `x.mem % mem_max`.
#[test]
fn the_merge_direction_weighs_memory_by_the_nodes_size() {
    let topo = machine(2, 4, 16);
    let mut m = model(topo.clone());
    let s = |i: u64| {
        let run = |cpu: f64| ((i - 1) as f64 * cpu * SEC as f64) as u64;
        Sb::new(&topo, i * SEC)
            .proc(10, 5, "idle", &[GIB, 0])
            .thread(10, 10, run(0.2), 0, 0)
            .proc(20, 5, "busy", &[GIB / 2, 0])
            .thread(20, 20, run(0.8), 0, 1)
            .comm((10, 10), (20, 20), 1000)
            .build()
    };
    m.update(&s(1));
    let busy_id = m.group_of(&key(20, 20)).unwrap().id;
    m.update(&s(2));
    let g = m.group_of(&key(10, 10)).unwrap();
    assert_eq!(g.tasks, vec![key(10, 10), key(20, 20)]);
    assert_eq!(g.id, busy_id, "the busier group keeps its id");
}

// Pins: a merge of two groups of equal load keeps the smaller id, also when the edge's first
// task (lower key) is in the group with the larger id. Kills groups.rs:332 `la > lb` -> `>=`.
#[test]
fn an_equal_load_merge_keeps_the_smaller_id() {
    let topo = machine(2, 4, 16);
    let mut m = model(topo.clone());
    // 50 first (id 0), then 10 (id 1): the edge (10, 50) starts at the larger id.
    m.update(&procs_talking(&topo, 1, &[50], &[]));
    m.update(&procs_talking(&topo, 2, &[10, 50], &[]));
    assert_eq!(m.group_of(&key(50, 50)).unwrap().id, 0);
    assert_eq!(m.group_of(&key(10, 10)).unwrap().id, 1);
    m.update(&procs_talking(&topo, 3, &[10, 50], &[(10, 50)]));
    let g = m.group_of(&key(10, 10)).unwrap();
    assert_eq!(g.tasks, vec![key(10, 10), key(50, 50)]);
    assert_eq!(g.id, 0);
}

// Pins: a group's access shares are its members' shares weighted by their CPU (the busy thread's
// memory is where the group's accesses go): 0.8 CPU on node 0's memory and 0.2 CPU on node 1's
// give [0.8, 0.2], not the unweighted [0.5, 0.5]. Kills groups.rs:367 `cpu > 0.0` -> `cpu < 0.0`.
#[test]
fn group_access_shares_are_weighted_by_member_cpu() {
    let topo = machine(2, 4, 16);
    let mut m = model(topo.clone());
    let s = |i: u64| {
        let run = |cpu: f64| ((i - 1) as f64 * cpu * SEC as f64) as u64;
        Sb::new(&topo, i * SEC)
            .proc(10, 5, "app", &[GIB, GIB])
            .thread(10, 11, run(0.8), 0, 0)
            .faults(10, 11, &[100, 0])
            .thread(10, 12, run(0.2), 0, 1)
            .faults(10, 12, &[0, 100])
            .comm((10, 11), (10, 12), 1000)
            .build()
    };
    for i in 1..=3 {
        m.update(&s(i));
    }
    let g = m.group_of(&key(10, 11)).unwrap();
    assert_eq!(g.tasks, vec![key(10, 11), key(10, 12)]);
    assert!((g.access[0] - 0.8).abs() < 1e-9 && (g.access[1] - 0.2).abs() < 1e-9, "{:?}", g.access);
}

// Pins: without access samples, a process's memory is shared over its threads by their NUMA
// fault counts (not equally): faults 300 : 100 split 4 GiB into 3 GiB and 1 GiB. Kills
// groups.rs:538 `any(x > 0)` -> `any(x >= 0)` / `any(x == 0)` and groups.rs:543
// `access_source == NumaFaults` -> `!=`.
#[test]
fn memory_is_attributed_by_fault_counts_without_samples() {
    let topo = machine(2, 4, 16);
    let mut m = model(topo.clone());
    for i in 1..=2 {
        let s = Sb::new(&topo, i * SEC)
            .proc(10, 5, "app", &[4 * GIB, 0])
            .thread(10, 11, 0, 0, 0)
            .faults(10, 11, &[300, 0])
            .thread(10, 12, 0, 0, 1)
            .faults(10, 12, &[100, 0])
            .build();
        m.update(&s);
    }
    let (a, b) = (m.group_of(&key(10, 11)).unwrap(), m.group_of(&key(10, 12)).unwrap());
    assert_ne!(a.id, b.id, "no edge: two groups");
    assert_eq!((a.mem_bytes, b.mem_bytes), (3 * GIB, GIB));
    assert_eq!((a.mem_by_node[0], b.mem_by_node[0]), (3 * GIB, GIB));
}

// Pins: `NodeLoad::resource` returns the node's own state of each resource (what the policy
// reads per resource). Kills load.rs:148 `resource` -> a default state.
#[test]
fn node_load_resource_returns_the_nodes_state() {
    use numapilot_model::{NodeLoad, Resource, ResourceState};
    let st = |load: f64| ResourceState { known: true, load, interference: 0.0, bottleneck: false };
    let n = NodeLoad { cpu: st(0.1), mem_bw: st(0.2), mem_capacity: st(0.3), io: st(0.4), ..NodeLoad::new(3) };
    assert_eq!(n.resource(Resource::Cpu), &n.cpu);
    assert_eq!(n.resource(Resource::MemBandwidth), &n.mem_bw);
    assert_eq!(n.resource(Resource::MemCapacity), &n.mem_capacity);
    assert_eq!(n.resource(Resource::Io), &n.io);
}

// Pins: `NodeLoad::any_bottleneck` is true exactly when at least one resource is flagged, each
// on its own. Kills load.rs:158 `any_bottleneck` -> true / false and each `||` -> `&&`.
#[test]
fn any_bottleneck_is_any_one_resource() {
    use numapilot_model::NodeLoad;
    let clear = NodeLoad::new(0);
    assert!(!clear.any_bottleneck());
    for r in 0..4 {
        let mut n = NodeLoad::new(0);
        let s = [&mut n.cpu, &mut n.mem_bw, &mut n.mem_capacity, &mut n.io];
        s.into_iter().nth(r).unwrap().bottleneck = true;
        assert!(n.any_bottleneck(), "resource {r}");
    }
}

// Pins: CPU_BASE_MIN_TICKS_PER_CPU (5) is per CPU of the node: a base 4 ticks per CPU before the
// sample (8 on a 2-CPU node) is too short, and the load is measured over the whole period.
// Kills load.rs:226 `MIN_TICKS * ncpus` -> `MIN_TICKS + ncpus`.
#[test]
fn the_cpu_base_window_is_counted_per_cpu() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    m.update(&Sb::new(&topo, SEC).cpu_ticks(&[(0, 0); 4]).build());
    // Sample: 30 busy of 60 per CPU since the first; base 4 ticks per CPU earlier, all busy.
    let base = Sb::new(&topo, 2 * SEC).cpu_ticks(&[(26, 30), (26, 30), (0, 56), (0, 56)]).build().cpu;
    let mut s = Sb::new(&topo, 2 * SEC).cpu_ticks(&[(30, 30), (30, 30), (0, 60), (0, 60)]).build();
    s.cpu_base = base;
    m.update(&s);
    assert!((m.nodes[0].cpu.load - 0.5).abs() < 1e-12, "{:?}", m.nodes[0].cpu);
}

// Pins: /proc/stat counters that went backwards (busy ticks fewer than last time: a CPU's
// counters left the sum) give no tick delta; the CPU load falls back to the tasks' rates
// (1.0 CPU on a 2-CPU node: 0.5). Kills load.rs:235 the guard `t1 > t0 && b1 >= b0` -> `true`.
#[test]
fn cpu_ticks_that_went_backwards_fall_back_to_task_rates() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = |i: u64, ticks: &[(u64, u64)]| {
        Sb::new(&topo, i * SEC).cpu_ticks(ticks).proc(10, 5, "a", &[GIB, 0]).thread(10, 10, (i - 1) * SEC, 0, 0).build()
    };
    m.update(&s(1, &[(100, 100); 4]));
    m.update(&s(2, &[(50, 250); 4]));
    assert!(m.nodes[0].cpu.known);
    assert!((m.nodes[0].cpu.load - 0.5).abs() < 1e-12, "{:?}", m.nodes[0].cpu);
}

// Pins: a period with no tick elapsed (the same /proc/stat twice) gives no tick delta; the CPU
// load comes from the tasks' rates instead of 0/0. Kills load.rs:235 `t1 > t0` -> `t1 >= t0`.
#[test]
fn cpu_ticks_that_did_not_move_fall_back_to_task_rates() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = |i: u64| {
        Sb::new(&topo, i * SEC)
            .cpu_ticks(&[(100, 100); 4])
            .proc(10, 5, "a", &[GIB, 0])
            .thread(10, 10, (i - 1) * SEC, 0, 0)
            .build()
    };
    m.update(&s(1));
    m.update(&s(2));
    assert!((m.nodes[0].cpu.load - 0.5).abs() < 1e-12, "{:?}", m.nodes[0].cpu);
}

/// A PSI record whose `some avg10` is `v` percent (any f64, also non-finite).
fn psi_raw(v: f64) -> numapilot_observe::Psi {
    let mut p = numapilot_observe::parse::psi::parse_psi(
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
    )
    .unwrap();
    p.some.avg10 = v;
    p
}

// Pins: a node with no memory (MemTotal 0) has no memory-capacity resource (known = false), not
// a 0/0 figure. Kills load.rs:256 `total > 0` -> `total >= 0`.
#[test]
fn a_node_without_memory_has_no_capacity_figure() {
    let mut topo = machine(2, 2, 16);
    topo.nodes[1].mem_total_kb = 0;
    topo.nodes[1].mem_free_kb = 0;
    let mut m = model(topo.clone());
    m.update(&Sb::new(&topo, SEC).build());
    assert!(m.nodes[0].mem_capacity.known);
    assert!(!m.nodes[1].mem_capacity.known, "{:?}", m.nodes[1].mem_capacity);
}

// Pins: an uncore reading with a zero window or a zero capacity is no bandwidth figure (known =
// false), not a division by zero. Kills load.rs:264 `window_ns > 0 && capacity > 0` -> `||`,
// `window_ns > 0` -> `>= 0` and `capacity > 0` -> `>= 0`.
#[test]
fn a_bandwidth_reading_without_window_or_capacity_is_unknown() {
    use numapilot_observe::MemBandwidth;
    let topo = machine(1, 2, 16);
    for (window_ns, capacity) in [(0, 10_000_000_000), (SEC, 0)] {
        let mut m = model(topo.clone());
        let mut s = Sb::new(&topo, SEC).build();
        s.nodes[0].mem_bw = Some(MemBandwidth {
            bytes: 1_000_000_000,
            window_ns,
            saturated_ns: 0,
            capacity_bytes_per_s: capacity,
            migrate_bytes: 0,
        });
        m.update(&s);
        assert!(!m.nodes[0].mem_bw.known, "window {window_ns} capacity {capacity}: {:?}", m.nodes[0].mem_bw);
    }
}

// Pins: a controller that moved no bytes but was saturated part of the window gives all its
// saturated time to the workload (share 1, not 0/0): 30% saturated -> interference 0.3. Kills
// load.rs:272 `b.bytes > 0` -> `>= 0`.
#[test]
fn saturation_without_bytes_is_the_workloads() {
    use numapilot_observe::MemBandwidth;
    let topo = machine(1, 2, 16);
    let mut m = model(topo.clone());
    let mut s = Sb::new(&topo, SEC).build();
    s.nodes[0].mem_bw = Some(MemBandwidth {
        bytes: 0,
        window_ns: SEC,
        saturated_ns: 300_000_000,
        capacity_bytes_per_s: 10_000_000_000,
        migrate_bytes: 0,
    });
    m.update(&s);
    assert!((m.nodes[0].mem_bw.interference - 0.3).abs() < 1e-12, "{:?}", m.nodes[0].mem_bw);
}

// Pins: a non-finite input (an infinite PSI value) zeroes the resource's figures and flags no
// bottleneck. Kills load.rs:296 `known && load.is_finite()` -> `known || ..`.
#[test]
fn an_infinite_pressure_reading_flags_nothing() {
    use numapilot_topology::{DeviceClass, PciDevice};
    let mut topo = machine(1, 2, 16);
    topo.devices.push(PciDevice {
        address: "0000:3b:00.0".into(),
        class: DeviceClass::Nvme,
        class_code: 0x010802,
        node: Some(0),
        names: vec!["nvme0".into()],
    });
    let mut m = model(topo.clone());
    let mut s = Sb::new(&topo, SEC).build();
    s.psi.io = Some(psi_raw(f64::INFINITY));
    m.update(&s);
    let io = m.nodes[0].io;
    assert!(io.known && io.load == 0.0 && io.interference == 0.0 && !io.bottleneck, "{io:?}");
}

// Pins: a non-finite load zeroes the interference figure too (the whole resource reads 0): a NaN
// CPU demand of unmanaged processes beside a task that waited 0.6 s of 1 s. Kills load.rs:296
// `load.is_finite() && interference.is_finite()` -> `||`.
#[test]
fn a_non_finite_cpu_load_zeroes_its_interference_too() {
    let topo = machine(1, 2, 16);
    let mut m = model(topo.clone());
    let s = |i: u64| {
        let mut s = Sb::new(&topo, i * SEC)
            .proc(10, 5, "a", &[GIB, 0])
            .thread(10, 10, (i - 1) * SEC / 2, (i - 1) * 600_000_000, 0)
            .build();
        s.unmanaged_cpu = vec![numapilot_observe::CpuUse { cpu: 1, cpus: f64::NAN }];
        s
    };
    m.update(&s(1));
    m.update(&s(2));
    let cpu = m.nodes[0].cpu;
    assert!(cpu.known && cpu.load == 0.0 && cpu.interference == 0.0 && !cpu.bottleneck, "{cpu:?}");
}

// Pins: the bottleneck flag leaves only strictly below both low marks: a CPU at exactly
// cpu_load_low (0.75) stays flagged, and so does one at exactly cpu_interference_low (here
// 0.125) with a low load. Kills load.rs:307 `load < low` -> `<=` and `interference < ilow` ->
// `<=`.
#[test]
fn the_bottleneck_flag_leaves_only_below_the_low_marks() {
    let topo = machine(1, 2, 16);
    let tun = numapilot_model::Tunables { cpu_interference_low: 0.125, ..numapilot_model::Tunables::default() };
    let mut m = Model::new(topo.clone(), tun);
    // Per step: busy ticks per CPU of 100, cumulative run delay of the one task (ns).
    let steps = [(0, 0), (95, 0), (75, 0), (50, 250_000_000), (50, 0)];
    let (mut busy, mut wait, mut t) = (0u64, 0u64, 0u64);
    let mut flags = Vec::new();
    for (i, &(b, w)) in steps.iter().enumerate() {
        let i = i as u64 + 1;
        if i > 1 {
            busy += b;
            wait += w;
            t += 100;
        }
        let s = Sb::new(&topo, i * SEC)
            .cpu_ticks(&[(busy, t - busy); 2])
            .proc(10, 5, "a", &[GIB, 0])
            .thread(10, 10, 0, wait, 0)
            .build();
        m.update(&s);
        flags.push(m.nodes[0].cpu.bottleneck);
    }
    // Step 3: load 0.75 = low; step 4: load 0.5, interference 0.25 s / 2 CPUs = 0.125 = ilow.
    assert_eq!(flags, vec![false, true, true, true, false]);
}

// ---------------------------------------------------------------------------------------------
// lib.rs, tasks.rs, classify.rs, tunables.rs
// ---------------------------------------------------------------------------------------------

// Pins: `Model::node_idx` maps a kernel node id to its dense index (sparse ids: nodes 0 and 2),
// None for an unknown node. Kills lib.rs:207 `node_idx` -> Some(0) / Some(1) and `==` -> `!=`.
#[test]
fn node_idx_maps_kernel_ids_to_dense_indices() {
    let mut topo = machine(2, 2, 16);
    topo.nodes[1].id = 2;
    let m = model(topo);
    assert_eq!(m.node_idx(0), Some(0));
    assert_eq!(m.node_idx(2), Some(1));
    assert_eq!(m.node_idx(1), None);
}

// Pins: `Model::set_topology` (CPU hotplug) adopts the new topology; with the same node set it
// keeps what was learned (tasks, node loads), with another node set it starts the per-node
// loads and task views afresh for the new ids. Kills lib.rs:160 `set_topology` -> () and
// `node_ids() != ..` -> `==`.
#[test]
fn set_topology_keeps_tasks_unless_the_node_set_changed() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    m.update(&pair(&topo, SEC).build());
    assert_eq!(m.tasks.len(), 2);
    // CPU 1 goes offline: same nodes.
    let mut fewer = topo.clone();
    fewer.nodes[0].cpus = [0].into_iter().collect();
    m.set_topology(fewer.clone());
    assert_eq!(m.topo.nodes[0].cpus, fewer.nodes[0].cpus);
    assert_eq!(m.tasks.len(), 2, "same node set: tasks kept");
    // Node 1 goes away and node 2 comes: another node set.
    let mut other = topo.clone();
    other.nodes[1].id = 2;
    m.set_topology(other);
    assert!(m.tasks.is_empty(), "new node set: task views start afresh");
    assert_eq!(m.nodes.iter().map(|n| n.node).collect::<Vec<_>>(), vec![0, 2]);
}

// Pins: StaticLarge is judged against the smallest node *with memory* (large_rss_node_frac x
// that node): a memory-less node (CPUs only) does not make every process small. 8 GiB flat on
// 16 GiB nodes beside a memory-less one is StaticLarge once the class window (10 s) has passed.
// Kills classify.rs:77 `filter(b > 0)` -> `filter(b >= 0)`.
#[test]
fn a_memoryless_node_does_not_hide_static_large_processes() {
    let mut topo = machine(3, 2, 16);
    topo.nodes[2].mem_total_kb = 0;
    topo.nodes[2].mem_free_kb = 0;
    let mut m = model(topo.clone());
    for t in 0..=10u64 {
        m.update(&Sb::new(&topo, t * SEC).proc(10, 5, "db", &[8 * GIB, 0]).thread(10, 10, t * SEC / 2, 0, 0).build());
    }
    assert_eq!(m.procs[&10].class, numapilot_model::ProcessClass::StaticLarge);
}

// Pins: BandwidthBound counts the nodes a process *ran* on: an idle thread (rate 0) whose last
// CPU is on another node does not make a one-node streamer span two nodes
// (bandwidth_bound_min_nodes = 2), nor halve its traffic per running thread. Kills classify.rs:97
// `cpu_rate > 0.0` -> `>= 0.0` and tasks.rs:760 (running threads) `cpu_rate > 0.0` -> `>= 0.0`.
#[test]
fn an_idle_thread_does_not_spread_a_process_over_nodes() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    for t in 0..=10u64 {
        let s = Sb::new(&topo, t * SEC)
            .proc(10, 5, "stream", &[GIB, GIB])
            .thread(10, 10, t * SEC / 2, 0, 0)
            .thread(10, 11, 0, 0, 2)
            .access(10, 10, 0x1000_0000, 0, 2048, t * SEC)
            .build();
        m.update(&s);
    }
    let p = &m.procs[&10];
    // 2048 samples x 640,000 B per second over the one *running* thread: 1250 MiB/s.
    let want = 2048.0 * 640_000.0;
    assert!((p.traffic_bytes_per_s_per_thread - want).abs() < 1.0, "{}", p.traffic_bytes_per_s_per_thread);
    assert_eq!(p.class, numapilot_model::ProcessClass::Unclassified);
}

// Pins: a process's confinement is read from its leader thread (tid = pid), not from another
// thread that happens to have other bounds. Kills tasks.rs:254 `t.tid == p.pid` -> `!=`.
#[test]
fn confinement_is_read_from_the_leader_thread() {
    use numapilot_model::Confinement;
    use std::sync::Arc;
    let topo = machine(2, 2, 16);
    let mut s =
        Sb::new(&topo, SEC).proc(10, 5, "app", &[GIB, 0]).thread(10, 10, 0, 0, 0).thread(10, 11, 0, 0, 0).build();
    s.processes[0].threads[0].mems_allowed = Arc::new([0].into_iter().collect());
    let c = Confinement::of(&topo, &s.processes[0]).expect("the leader is bound to node 0");
    assert_eq!(c.nodes, [0].into_iter().collect());
    assert_eq!(c.cpus, [0, 1].into_iter().collect());
}

// Pins: a cpuset that is the whole machine, or that leaves no online CPU, is no confinement
// (None): only real bounds are reported. Kills tasks.rs:267 `cpus.is_empty() || (..)` -> `&&`.
#[test]
fn a_whole_machine_or_empty_cpuset_is_no_confinement() {
    use numapilot_model::Confinement;
    let topo = machine(2, 2, 16);
    let with = |cpus: &[u32]| {
        Sb::new(&topo, SEC).proc(10, 5, "app", &[GIB, 0]).thread(10, 10, 0, 0, 0).cpuset(10, cpus).build()
    };
    assert_eq!(Confinement::of(&topo, &with(&[0, 1, 2, 3]).processes[0]), None, "whole machine");
    assert_eq!(Confinement::of(&topo, &with(&[9]).processes[0]), None, "no online CPU");
    assert!(Confinement::of(&topo, &with(&[0, 1]).processes[0]).is_some());
}

// Pins: a confinement admits a node only if its memory may go there AND it has a CPU there (or
// the node has none): CPUs on a node whose memory is not allowed do not admit it. Kills
// tasks.rs:277 `nodes.contains(id) && ..` -> `||`.
#[test]
fn a_confinement_admits_only_allowed_memory_nodes() {
    use numapilot_model::Confinement;
    let topo = machine(2, 2, 16);
    let c = Confinement { cpus: [0, 1, 2, 3].into_iter().collect(), nodes: [0].into_iter().collect() };
    assert!(c.admits(&topo, 0));
    assert!(!c.admits(&topo, 1), "CPUs there, memory not allowed");
}

// Pins: a process's age grows with host time from when it was first seen (age at first sight +
// now - first_seen). Kills tasks.rs:288 `ProcView::age_ns` -> 0 / 1.
#[test]
fn a_process_ages_with_host_time() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    m.update(&pair(&topo, SEC).build());
    let p = &m.procs[&10];
    let a = p.age_ns(SEC);
    assert_eq!(p.age_ns(6 * SEC), a + 5 * SEC);
    assert_eq!(a, p.age_at_first_seen_ns);
}

// Pins: after `set_topology` a settled, carried thread's view is derived again for the new CPUs:
// a thread allowed CPU 0 and node 0 only is pinned (narrower than node 0's CPUs 0, 1) until
// CPU 1 goes offline, then it is not, even though the observer carried its read unchanged.
// Kills tasks.rs:322 `unsettle_all` -> (); and, while carried, the settled thread keeps its
// process pinned: tasks.rs:666 `any_narrow |= h.narrow` -> `&=`.
#[test]
fn set_topology_rederives_settled_threads() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    // The same read (read_ns 1 s, same counters) handed again every update: a carried thread.
    let s = |t: u64, topo: &Topology| {
        let mut s = Sb::new(topo, t)
            .proc(10, 5, "app", &[GIB, 0])
            .thread(10, 10, 0, 0, 0)
            .allowed(10, 10, &[0])
            .mems(10, &[0])
            .build();
        s.processes[0].read_ns = SEC;
        for th in &mut s.processes[0].threads {
            th.schedstat = None;
        }
        s
    };
    for i in 1..=3 {
        m.update(&s(i * SEC, &topo));
    }
    assert!(m.procs[&10].pinned);
    let mut fewer = topo.clone();
    fewer.nodes[0].cpus = [0].into_iter().collect();
    for c in fewer.cpus.iter_mut().filter(|c| c.id == 1) {
        c.online = false;
    }
    m.set_topology(fewer.clone());
    m.update(&s(4 * SEC, &fewer));
    assert!(!m.procs[&10].pinned, "CPU 0 is all of node 0 now");
}

// Pins: without schedstat, a thread's CPU rate comes from its utime+stime ticks at the sample's
// clock_ticks_per_sec (100): 50 ticks in 1 s = 0.5 CPU. Kills every tasks.rs:430-433
// `ticks_to_ns` mutant (-> 0, -> 1, `hz == 0` -> `!=`, `* 1e9` -> `+` / `/`, `/ hz` -> `%` / `*`).
#[test]
fn cpu_rate_from_ticks_without_schedstat() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    for i in 1..=2u64 {
        let mut s =
            Sb::new(&topo, i * SEC).proc(10, 5, "app", &[GIB, 0]).thread(10, 10, (i - 1) * SEC / 2, 0, 0).build();
        s.processes[0].threads[0].schedstat = None;
        m.update(&s);
    }
    let r = m.tasks[&key(10, 10)].cpu_rate;
    assert!((r - 0.5).abs() < 1e-9, "{r}");
}

// Pins: a thread of a process with no resident memory has all-zero access shares (normalise of
// a zero vector), never NaN. Kills tasks.rs:439 `s > 0.0 && s.is_finite()` -> `||`, and `>` ->
// `>=`.
#[test]
fn no_memory_means_zero_access_shares_not_nan() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    for i in 1..=2 {
        m.update(&Sb::new(&topo, i * SEC).proc(10, 5, "app", &[0, 0]).thread(10, 10, 0, 0, 0).build());
    }
    assert_eq!(m.tasks[&key(10, 10)].access, vec![0.0, 0.0]);
    assert_eq!(m.group_of(&key(10, 10)).unwrap().access, vec![0.0, 0.0]);
}

// Pins: on a machine with no node memory known at all, nothing is StaticLarge (the size rule has
// no node to compare with). Kills classify.rs:133 `smallest_node_bytes > 0` -> `>= 0`.
#[test]
fn without_node_memory_nothing_is_static_large() {
    let topo = machine(2, 2, 0);
    let mut m = model(topo.clone());
    for t in 0..=10u64 {
        m.update(&Sb::new(&topo, t * SEC).proc(10, 5, "db", &[8 * GIB, 0]).thread(10, 10, t * SEC / 2, 0, 0).build());
    }
    assert_eq!(m.procs[&10].class, numapilot_model::ProcessClass::Unclassified);
}

// Pins: a process's hot bucket sampled on two nodes (its threads touching pages on both) is
// placed on the node with more samples: 3 on node 0, 7 on node 1 -> node 1. Kills tasks.rs:502
// `later > kept` -> `<` and -> `==`.
#[test]
fn a_process_hot_bucket_is_on_the_node_with_more_samples() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    for i in 1..=2u64 {
        let t = i * SEC;
        m.update(&pair(&topo, t).access(10, 11, BUF, 0, 3, t).access(10, 12, BUF + 4096, 1, 7, t).build());
    }
    let hot = &m.procs[&10].hot;
    assert_eq!(hot.len(), 1, "{hot:?}");
    assert_eq!(hot[0].node, 1, "{hot:?}");
}

// Pins: the hot bucket's node is the one with the most samples over all the process's threads,
// each node's rows summed first: 3 samples on node 0 from one thread against 2 + 2 on node 1 from
// two others is node 1 (it was node 0: each row was compared with the sum merged before it; found
// by mutation testing, helper-45).
#[test]
fn a_hot_bucket_goes_to_the_node_with_the_most_samples_over_all_threads() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    for i in 1..=2u64 {
        let t = i * SEC;
        let s = pair(&topo, t)
            .thread(10, 13, 0, 0, 0)
            .access(10, 11, BUF, 0, 3, t)
            .access(10, 12, BUF + 4096, 1, 2, t)
            .access(10, 13, BUF + 8192, 1, 2, t)
            .build();
        m.update(&s);
    }
    let hot = &m.procs[&10].hot;
    assert_eq!(hot.len(), 1, "{hot:?}");
    assert_eq!(hot[0].node, 1, "{hot:?}");
}

// Pins: a process whose numa_maps shows a bound VMA with no resident page is not pinned by
// memory policy (no resident memory: no share to judge), the rest of its memory default. Kills
// tasks.rs:535 `total > 0` -> `total >= 0`.
#[test]
fn a_policy_on_no_resident_memory_pins_nothing() {
    use numapilot_observe::parse::numa_maps::parse_numa_maps;
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let mut s = Sb::new(&topo, SEC).proc(90, 5, "bound", &[0, 0]).thread(90, 90, 0, 0, 0).build();
    s.processes[0].numa_maps = Some(parse_numa_maps("7f0000000000 bind:1\n7f1000000000 default\n").unwrap());
    m.update(&s);
    assert!(!m.procs[&90].mem_policy_pinned);
    assert!(!m.procs[&90].pinned);
}

// Pins: a thread's CPU rate comes from schedstat's run time (ns) when it has one, not from its
// coarser utime+stime ticks: run 0.5 s in 1 s with ticks that did not move is 0.5 CPU. Kills
// tasks.rs:685 deleting the `(Some(x), Some(y))` (schedstat) arm.
#[test]
fn cpu_rate_prefers_schedstat_over_ticks() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    for i in 1..=2u64 {
        let mut s =
            Sb::new(&topo, i * SEC).proc(10, 5, "app", &[GIB, 0]).thread(10, 10, (i - 1) * SEC / 2, 0, 0).build();
        s.processes[0].threads[0].stat.utime = 0;
        m.update(&s);
    }
    let r = m.tasks[&key(10, 10)].cpu_rate;
    assert!((r - 0.5).abs() < 1e-9, "{r}");
}

// Pins: sampled access shares are smoothed only against earlier *sampled* shares: a thread whose
// first samples arrive after it had residency-based shares takes the samples' shares as they
// are. Kills tasks.rs:719 `source == Samples && len == nn` -> `||`.
#[test]
fn first_samples_replace_residency_shares_outright() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = |i: u64| {
        let b = Sb::new(&topo, i * SEC).proc(10, 5, "app", &[GIB, 0]).thread(10, 10, 0, 0, 0);
        if i >= 3 {
            b.access(10, 10, BUF, 1, 10, i * SEC).build()
        } else {
            b.build()
        }
    };
    m.update(&s(1));
    m.update(&s(2));
    assert_eq!(m.tasks[&key(10, 10)].access, vec![1.0, 0.0], "residency: all on node 0");
    m.update(&s(3));
    let t = &m.tasks[&key(10, 10)];
    assert_eq!(t.access_source, numapilot_model::AccessSource::Samples);
    assert_eq!(t.access, vec![0.0, 1.0]);
}

// Pins: a thread that ran is not "settled": when the observer then carries its read unchanged
// (same counters, same read time) its rate is derived again and is 0, not last period's. Kills
// tasks.rs:758 `cpu_rate == 0.0` -> `!=` and `cpu_rate == 0.0 && ..` -> `||`.
#[test]
fn a_carried_read_after_a_running_period_reads_as_idle() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = |t: u64, run: u64, read_ns: u64| {
        let mut s = Sb::new(&topo, t).proc(10, 5, "app", &[GIB, 0]).thread(10, 10, run, 0, 0).build();
        s.processes[0].read_ns = read_ns;
        s.processes[0].threads[0].schedstat = None;
        s
    };
    m.update(&s(SEC, 0, SEC));
    m.update(&s(2 * SEC, SEC / 2, 2 * SEC));
    assert!((m.tasks[&key(10, 10)].cpu_rate - 0.5).abs() < 1e-9);
    m.update(&s(3 * SEC, SEC / 2, 2 * SEC));
    assert_eq!(m.tasks[&key(10, 10)].cpu_rate, 0.0);
}

// Pins: a thread's view follows the thread when it renames itself (comm) and when its CPU
// affinity changes (cpus_allowed): the view is updated in place, not left with the old values.
// Kills tasks.rs:767 `v.comm != comm` -> `==` and tasks.rs:778 deleting `!` before `Arc::ptr_eq`.
#[test]
fn a_thread_view_follows_renames_and_affinity_changes() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    m.update(&Sb::new(&topo, SEC).proc(10, 5, "app", &[GIB, 0]).thread(10, 10, 0, 0, 0).build());
    let mut s =
        Sb::new(&topo, 2 * SEC).proc(10, 5, "app", &[GIB, 0]).thread(10, 10, 0, 0, 0).allowed(10, 10, &[0]).build();
    s.processes[0].threads[0].stat.comm = "worker".into();
    m.update(&s);
    let t = &m.tasks[&key(10, 10)];
    assert_eq!(t.comm, "worker");
    assert_eq!(*t.cpus_allowed, [0].into_iter().collect());
}

// Pins: a process's RSS history is pruned to the class window (the points growth is judged on
// stay bounded): 30 updates 1 s apart with a 10 s window keep at most 12 points. Kills
// tasks.rs:833 `rss.len() > 2` -> `== 2`.
#[test]
fn the_rss_history_is_bounded_by_the_class_window() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    for i in 1..=30u64 {
        m.update(&Sb::new(&topo, i * SEC).proc(10, 5, "app", &[GIB, 0]).thread(10, 10, 0, 0, 0).build());
    }
    assert!(m.rss_history_points() <= 12, "{}", m.rss_history_points());
    assert!(m.rss_history_points() >= 10, "{}", m.rss_history_points());
}

// Pins: traffic per running thread (rule for BandwidthBound) is samples x access_sample_bytes per
// second of the period, 0 on the first sample, and an exponential average with the class window
// as half-life: 2 s periods of 1000 samples give X = 1000 x 640,000 / 2; a silent period then
// leaves X x 2^(-2/10). Kills tasks.rs:847 `dt > 0` -> `>=`, tasks.rs:849 `/ dt` -> `* dt`,
// tasks.rs:853 `1 - d` -> `1 + d` / `1 / d`, tasks.rs:855 `history_ns > 0` -> `==` / `<`, and
// tasks.rs:857 `+` -> `-`, `*` -> `+`, `-` -> `/`.
#[test]
fn traffic_is_an_average_over_the_class_window() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = |t: u64, samples: u32| {
        let b = Sb::new(&topo, t * SEC).proc(10, 5, "stream", &[GIB, 0]).thread(10, 10, t * SEC / 2, 0, 0);
        if samples > 0 {
            b.access(10, 10, BUF, 0, samples, t * SEC).build()
        } else {
            b.build()
        }
    };
    m.update(&s(0, 1000));
    assert_eq!(m.procs[&10].traffic_bytes_per_s_per_thread, 0.0, "no period yet");
    let x = 1000.0 * m.tunables.access_sample_bytes as f64 / 2.0;
    for t in [2, 4] {
        m.update(&s(t, 1000));
        let got = m.procs[&10].traffic_bytes_per_s_per_thread;
        assert!((got - x).abs() < 1e-6 * x, "t={t}: {got} vs {x}");
    }
    m.update(&s(6, 0));
    let d = (-2000.0 / m.tunables.class_window_ms as f64).exp2();
    let got = m.procs[&10].traffic_bytes_per_s_per_thread;
    assert!((got - x * d).abs() < 1e-6 * x, "{got} vs {}", x * d);
}

// Pins: a process's parent pid is its leader thread's (tid = pid). Kills tasks.rs:871
// `t.tid == p.pid` -> `!=`.
#[test]
fn a_processs_ppid_is_its_leaders() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let mut s =
        Sb::new(&topo, SEC).proc(10, 5, "app", &[GIB, 0]).thread(10, 10, 0, 0, 0).thread(10, 11, 0, 0, 0).build();
    s.processes[0].threads[0].stat.ppid = 42;
    m.update(&s);
    assert_eq!(m.procs[&10].ppid, 42);
}

// Pins: the duration bound is inclusive: exactly one day (86,400,000 ms, the documented maximum)
// is a valid duration tunable. Kills tunables.rs:685 `v > MAX_DURATION_MS` -> `>=`.
#[test]
fn a_duration_of_exactly_one_day_is_valid() {
    let t = numapilot_model::Tunables { edge_grace_ms: 86_400_000, ..numapilot_model::Tunables::default() };
    assert_eq!(t.validate(), Ok(()));
    let t = numapilot_model::Tunables { edge_grace_ms: 86_400_001, ..numapilot_model::Tunables::default() };
    assert!(t.validate().is_err());
}

// Pins: the tiers must rise strictly (a tier_weak or tier_strong equal to tier_medium would make
// two tiers one). Kills tunables.rs:735 `tier_weak < tier_medium` -> `<=` and
// `tier_medium < tier_strong` -> `<=`.
#[test]
fn equal_tiers_are_refused() {
    let d = numapilot_model::Tunables::default();
    let weak = numapilot_model::Tunables { tier_weak: d.tier_medium, ..d.clone() };
    assert_eq!(weak.validate().map_err(|e| e.field), Err("tier_medium"));
    let strong = numapilot_model::Tunables { tier_strong: d.tier_medium, ..d.clone() };
    assert_eq!(strong.validate().map_err(|e| e.field), Err("tier_medium"));
}

// Pins: a low (leave) mark may equal its high (enter) mark ("must not exceed": hysteresis off is
// a valid setting), only above it is refused. Kills tunables.rs:765 `low > high` -> `>=`.
#[test]
fn a_low_mark_equal_to_its_high_mark_is_valid() {
    let d = numapilot_model::Tunables::default();
    let equal = numapilot_model::Tunables { cpu_load_low: d.cpu_load_high, ..d.clone() };
    assert_eq!(equal.validate(), Ok(()));
    let above = numapilot_model::Tunables { cpu_load_low: d.cpu_load_high + 0.01, ..d.clone() };
    assert_eq!(above.validate().map_err(|e| e.field), Err("cpu_load_low"));
}

// Pins: the edges of `Tunables::validate`'s documented ranges, each inclusive where its message
// says so and refused just past it (a file at the edge must load; one past must name the field).
// Kills tunables.rs:782 and 785 `&&` -> `||`, 788, 791 `< 2` -> `<= 2`, 797 `< 2` -> `> 2`,
// 804, 807, 819 (new_thread_cpu) `>` -> `>=`, 838 `>` -> `==` / `>=`, 841 `>` -> `==` / `>=`,
// 844 `>` -> `>=`.
#[test]
fn tunables_range_edges() {
    use numapilot_model::Tunables;
    let d = Tunables::default();
    let ok: Vec<(&str, Tunables)> = vec![
        ("static = growing", Tunables { static_mib_per_s: d.growing_mib_per_s, ..d.clone() }),
        ("min_group_cpu 0", Tunables { min_group_cpu: 0.0, ..d.clone() }),
        ("shared_max_users 2", Tunables { shared_max_users: 2, ..d.clone() }),
        ("coaccess_max_accessors 2", Tunables { coaccess_max_accessors: 2, ..d.clone() }),
        ("bandwidth_bound_min_nodes 3", Tunables { bandwidth_bound_min_nodes: 3, ..d.clone() }),
        ("settle = interval", Tunables { settle_interval_ms: d.interval_ms, ..d.clone() }),
        ("first_touch = settle", Tunables { first_touch_interval_ms: d.settle_interval_ms, ..d.clone() }),
        ("numad_interval_max_s one day", Tunables { numad_interval_max_s: 86_400, ..d.clone() }),
        ("numad_htt_pct 100", Tunables { numad_htt_pct: 100, ..d.clone() }),
        ("numad min = max", Tunables { numad_interval_min_s: d.numad_interval_max_s, ..d.clone() }),
    ];
    for (what, t) in ok {
        assert_eq!(t.validate(), Ok(()), "{what}");
    }
    let bad: Vec<(&str, Tunables)> = vec![
        ("static_mib_per_s", Tunables { static_mib_per_s: d.growing_mib_per_s + 1.0, ..d.clone() }),
        ("static_mib_per_s", Tunables { static_mib_per_s: -1.0, ..d.clone() }),
        ("min_group_cpu", Tunables { min_group_cpu: -1.0, ..d.clone() }),
        ("min_group_cpu", Tunables { min_group_cpu: f64::INFINITY, ..d.clone() }),
        ("bandwidth_bound_min_nodes", Tunables { bandwidth_bound_min_nodes: 1, ..d.clone() }),
        ("new_thread_cpu", Tunables { new_thread_cpu: 0.0, ..d.clone() }),
        ("numad_interval_max_s", Tunables { numad_interval_max_s: 86_401, ..d.clone() }),
        ("numad_htt_pct", Tunables { numad_htt_pct: 101, ..d.clone() }),
    ];
    for (field, t) in bad {
        assert_eq!(t.validate().map_err(|e| e.field), Err(field), "{t:?}");
    }
}

// Pins: sampled access shares go stale (access_stale_ms, 30 s) also for a thread the observer
// keeps carrying: a once-sampled idle thread falls back to residency shares after 30 s without
// samples, it is never frozen as "settled" on its old sampled shares. Kills tasks.rs:758
// `source != Samples` -> `==`.
#[test]
fn sampled_shares_go_stale_under_carried_reads() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = |i: u64| {
        let b = Sb::new(&topo, i * SEC).proc(10, 5, "app", &[GIB, 0]).thread(10, 10, 0, 0, 0);
        let mut s = if i == 2 { b.access(10, 10, BUF, 1, 1, i * SEC).build() } else { b.build() };
        s.processes[0].read_ns = SEC;
        s.processes[0].threads[0].schedstat = None;
        s
    };
    for i in 1..=3 {
        m.update(&s(i));
    }
    assert_eq!(m.tasks[&key(10, 10)].access_source, numapilot_model::AccessSource::Samples);
    assert_eq!(m.tasks[&key(10, 10)].access, vec![0.0, 1.0]);
    for i in 4..=40 {
        m.update(&s(i));
    }
    assert_eq!(m.tasks[&key(10, 10)].access_source, numapilot_model::AccessSource::Residency);
    assert_eq!(m.tasks[&key(10, 10)].access, vec![1.0, 0.0]);
}
