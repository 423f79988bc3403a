//! The affinity graph: co-access, communication, decay, tiers, grace period.
//!
//! Defaults used in the traces: half-life h = 10 s, rise half-life r = 1 s, period 1 s, so every
//! edge is first multiplied by d = 2^(-0.1) = 0.933033, then, when this period's f is above it,
//! rises by half the gap (g = 1 - 2^(-1) = 0.5): s = s d; if f > s { s += (f - s) / 2 }.
//! Tiers: weak 0.05, medium 0.2, strong 0.5; zero below 0.01; grace 30 s.

mod common;

use common::*;
use numapilot_model::{Model, Tier};
use numapilot_observe::Sample;
use numapilot_topology::Topology;

/// Process 10 with threads 11 and 12 (and 13 idle), both sampling bucket BUF `n` times at `t`.
fn both(topo: &Topology, t: u64, n: u32) -> Sample {
    let mut b = Sb::new(topo, t)
        .proc(10, 5, "app", &[GIB, 0])
        .thread(10, 11, 0, 0, 0)
        .thread(10, 12, 0, 0, 0)
        .thread(10, 13, 0, 0, 0);
    if n > 0 {
        b = b.access(10, 11, BUF, 0, n, t).access(10, 12, BUF + 4096, 0, n, t);
    }
    b.build()
}

fn strength(m: &Model, a: (u32, u32), b: (u32, u32)) -> Option<f64> {
    m.graph.edges.get(&(key(a.0, a.1), key(b.0, b.1))).map(|e| e.strength)
}

/// Trace: t=1 s first sample (no period, no edge). From t=2 s every period f = 10/10 = 1:
/// s_1 = 0.5 (strong at once: an intense relation groups within one period), then
/// s_n = s_{n-1} d + (1 - s_{n-1} d) / 2: 0.733258, 0.842077, 0.892843, 0.916526, towards the
/// fixed point 0.5 / (1 - d / 2) = 0.937236.
#[test]
fn co_access_builds_weak_medium_strong() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    m.update(&both(&topo, SEC, 10));
    assert!(m.graph.edges.is_empty());
    let expect = [0.5, 0.733258, 0.842077, 0.892843, 0.916526];
    for (n, want) in expect.iter().enumerate() {
        m.update(&both(&topo, (n as u64 + 2) * SEC, 10));
        let s = strength(&m, (10, 11), (10, 12)).unwrap();
        assert!((s - want).abs() < 1e-6, "n={}: {s}", n + 1);
        assert_eq!(m.graph.edges[&(key(10, 11), key(10, 12))].tier, Some(Tier::Strong));
    }
    for n in 6..=40u64 {
        m.update(&both(&topo, (n + 1) * SEC, 10));
    }
    let s = strength(&m, (10, 11), (10, 12)).unwrap();
    assert!((s - 0.937236).abs() < 1e-6, "{s}");
    // The idle thread has no edge; the prior makes it related to both, weakly.
    assert_eq!(m.graph.edges.len(), 1);
    assert_eq!(m.graph.strength(key(10, 13), key(10, 11), 0.1), 0.1);
    assert_eq!(m.graph.strength(key(10, 12), key(10, 11), 0.1), strength(&m, (10, 11), (10, 12)).unwrap());
}

/// After building an edge, one update 10 s later (no samples) halves it exactly; another 20 s
/// later quarters it.
#[test]
fn decay_halves_per_half_life() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    for i in 1..=5 {
        m.update(&both(&topo, i * SEC, 10));
    }
    let s0 = strength(&m, (10, 11), (10, 12)).unwrap();
    m.update(&both(&topo, 15 * SEC, 0));
    let s1 = strength(&m, (10, 11), (10, 12)).unwrap();
    assert!((s1 - s0 / 2.0).abs() < 1e-12, "{s0} -> {s1}");
    m.update(&both(&topo, 35 * SEC, 0));
    let s2 = strength(&m, (10, 11), (10, 12)).unwrap();
    assert!((s2 - s0 / 8.0).abs() < 1e-12, "{s0} -> {s2}");
}

/// One observation: s = 0.5. Then updates 10 s apart: 0.25, 0.125, 0.0625, 0.03125, 0.015625,
/// 0.0078 (< 0.01: zero since t=62 s), kept at t=72 s and 82 s (10 s and 20 s into the grace),
/// dropped at t=92 s (30 s).
#[test]
fn zero_edge_kept_for_grace_then_dropped() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    m.update(&both(&topo, SEC, 10));
    m.update(&both(&topo, 2 * SEC, 10));
    let k = (key(10, 11), key(10, 12));
    assert!(m.graph.edges[&k].zero_since_ns.is_none());
    let z = Some(62 * SEC);
    for (t, zero_since) in [(12, None), (22, None), (32, None), (42, None), (52, None), (62, z), (72, z), (82, z)] {
        m.update(&both(&topo, t * SEC, 0));
        let e = &m.graph.edges[&k];
        assert_eq!(e.zero_since_ns, zero_since, "t={t}: {e:?}");
        assert_eq!(e.last_seen_ns, 2 * SEC);
    }
    assert_eq!(m.graph.edges[&k].tier, None);
    m.update(&both(&topo, 92 * SEC, 0));
    assert!(m.graph.edges.is_empty());
}

/// Normalisation: thread 11 has 10 samples in bucket A; thread 12 has 2 in A and 8 in B.
/// co = min(10, 2) = 2; min(S) = min(10, 10) = 10: f = 0.2, so s = 0.2 x 0.5 = 0.1 after one
/// period.
#[test]
fn co_access_is_normalised_by_the_smaller_sample_count() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = |t| {
        Sb::new(&topo, t)
            .proc(10, 5, "app", &[GIB, 0])
            .thread(10, 11, 0, 0, 0)
            .thread(10, 12, 0, 0, 0)
            .access(10, 11, BUF, 0, 10, t)
            .access(10, 12, BUF, 0, 2, t)
            .access(10, 12, BUF + (64 << 20), 0, 8, t)
            .build()
    };
    m.update(&s(SEC));
    m.update(&s(2 * SEC));
    let e = strength(&m, (10, 11), (10, 12)).unwrap();
    assert!((e - 0.1).abs() < 1e-12, "{e}");
}

/// Accesses to the same bucket 3 s apart (window 1 s) are not a co-access; 0.5 s apart across a
/// period boundary they are (the window carries the earlier accessor).
#[test]
fn co_access_needs_the_window() {
    let topo = machine(2, 2, 16);
    let base = |t| Sb::new(&topo, t).proc(10, 5, "app", &[GIB, 0]).thread(10, 11, 0, 0, 0).thread(10, 12, 0, 0, 0);
    let mut m = model(topo.clone());
    m.update(&base(SEC).build());
    m.update(&base(2 * SEC).access(10, 11, BUF, 0, 5, 2 * SEC).build());
    m.update(&base(5 * SEC).access(10, 12, BUF, 0, 5, 5 * SEC).build());
    assert!(m.graph.edges.is_empty(), "{:?}", m.graph.edges);

    let mut m = model(topo.clone());
    m.update(&base(SEC).build());
    m.update(&base(2 * SEC).access(10, 11, BUF, 0, 5, 2 * SEC).build());
    m.update(&base(3 * SEC).access(10, 12, BUF, 0, 5, 2 * SEC + SEC / 2).build());
    assert!(strength(&m, (10, 11), (10, 12)).is_some());
}

/// Shared memory between processes: the same physical bucket at different virtual addresses.
#[test]
fn physical_identity_relates_processes() {
    use numapilot_observe::AccessSample;
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
        for (pid, addr) in [(10, 0x1000_0000u64), (20, 0x5000_0000)] {
            s.accesses.push(AccessSample {
                pid,
                tid: pid,
                addr,
                phys: Some(0x8_0000_0000),
                node: 0,
                count: 4,
                last_ns: t,
            });
        }
        m.update(&s);
    }
    assert!(strength(&m, (10, 10), (20, 20)).is_some());
}

/// Communication: 500 wake-ups per second between two processes' threads: f = 0.5.
/// Period 1: 0.25 (medium at once); after 10 periods s = 0.25 + s d / 2 has reached 0.468389
/// (fixed point 0.25 / (1 - d / 2) = 0.468618). Co-access channel stays 0.
#[test]
fn communication_makes_an_edge() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = |t| {
        Sb::new(&topo, t)
            .proc(10, 5, "server", &[GIB, 0])
            .thread(10, 10, 0, 0, 0)
            .proc(20, 5, "client", &[0, GIB])
            .thread(20, 20, 0, 0, 0)
            .comm((20, 20), (10, 10), 300)
            .comm((10, 10), (20, 20), 200)
            .build()
    };
    for i in 0..=10 {
        m.update(&s((i + 1) * SEC));
    }
    let e = &m.graph.edges[&(key(10, 10), key(20, 20))];
    assert!((e.comm - 0.468389).abs() < 1e-6, "{e:?}");
    assert_eq!(e.coaccess, 0.0);
    assert_eq!(e.tier, Some(Tier::Medium));
}

/// A vanished thread leaves no edge; a reused pid does not inherit the old process's edges.
#[test]
fn vanished_and_reborn_tasks_lose_their_edges() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    for i in 1..=3 {
        m.update(&both(&topo, i * SEC, 10));
    }
    assert_eq!(m.graph.edges.len(), 1);
    m.update(&Sb::new(&topo, 4 * SEC).proc(10, 5, "app", &[GIB, 0]).thread(10, 11, 0, 0, 0).build());
    assert!(m.graph.edges.is_empty());

    let mut m = model(topo.clone());
    for i in 1..=3 {
        m.update(&both(&topo, i * SEC, 10));
    }
    // pid 10 reused by a new process (start time 400) with tids 11 and 12 again.
    let s =
        Sb::new(&topo, 4 * SEC).proc(10, 400, "new", &[GIB, 0]).thread(10, 11, 0, 0, 0).thread(10, 12, 0, 0, 0).build();
    m.update(&s);
    assert!(m.graph.edges.is_empty(), "{:?}", m.graph.edges);
}

/// Guards that edges rise faster than they decay: a client/server pair at 2000 wake-ups/s (f = 1)
/// observed at the 100 ms settle cadence. Rise gain per period 1 - 2^-0.1 = 0.066967, decay
/// d = 2^-0.01 = 0.993092: s = 0.066967, 0.129018, 0.186513, 0.239788 -> medium (joins) after
/// 4 periods = 0.4 s (one shared rate needed 3.2 s), and the two are one group.
#[test]
fn a_chatty_pair_reaches_the_join_tier_within_half_a_second() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let ms = 1_000_000u64;
    let s = |t: u64| {
        Sb::new(&topo, t)
            .proc(10, 5, "server", &[GIB, 0])
            .thread(10, 10, 0, 0, 0)
            .proc(20, 5, "client", &[0, GIB])
            .thread(20, 20, 0, 0, 2)
            .comm((20, 20), (10, 10), 200)
            .build()
    };
    m.update(&s(SEC));
    let mut got = vec![];
    for n in 1..=4u64 {
        m.update(&s(SEC + n * 100 * ms));
        got.push(strength(&m, (10, 10), (20, 20)).unwrap());
    }
    for (g, want) in got.iter().zip([0.066967, 0.129018, 0.186513, 0.239788]) {
        assert!((g - want).abs() < 1e-6, "{got:?}");
    }
    assert_eq!(m.graph.edges[&(key(10, 10), key(20, 20))].tier, Some(Tier::Medium));
    assert_eq!(m.groups.groups.len(), 1);
}

/// Guards the NUMA-group co-access source (no access samples, fault statistics only: the usual
/// live case without a PMU). Four threads of one process fault 60 private + 40 shared (f = 0.4
/// each) and the kernel put threads 10, 11, 12 in numa group 7; thread 13 has no group. Chain
/// (10,11), (11,12) at f = 0.4: s = 0.2 after one period (medium): {10, 11, 12} are one group,
/// 13 stays alone. (Without the group id, every thread stayed a singleton forever.)
#[test]
fn threads_of_one_kernel_numa_group_are_related() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    for i in 1..=2u64 {
        let mut b = Sb::new(&topo, i * SEC).proc(10, 5, "db", &[GIB, 0]);
        for t in 0..4 {
            b = b.thread(10, 10 + t, i * SEC / 2, 0, 0).faults(10, 10 + t, &[60, 0]);
        }
        let mut s = b.build();
        for t in &mut s.processes[0].threads {
            let numa = t.sched.as_mut().unwrap().numa.as_mut().unwrap();
            numa.faults[0].task_shared = 40;
            numa.group_id = (t.tid != 13).then_some(7);
        }
        m.update(&s);
    }
    assert!((strength(&m, (10, 10), (10, 11)).unwrap() - 0.2).abs() < 1e-12);
    assert!((strength(&m, (10, 11), (10, 12)).unwrap() - 0.2).abs() < 1e-12);
    assert_eq!(strength(&m, (10, 10), (10, 12)), None, "chained, not all pairs");
    assert_eq!(strength(&m, (10, 12), (10, 13)), None);
    let sets: Vec<Vec<u32>> = m.groups.groups.values().map(|g| g.tasks.iter().map(|k| k.tid).collect()).collect();
    assert_eq!(sets, vec![vec![10, 11, 12], vec![13]]);
}

/// Guards process-level communication (tid = pid: only the processes are known, e.g. a socket
/// pair). Server 10 has an idle main thread 10 and workers 11 (0.3 CPU) and 12 (0.6 CPU); client
/// 50 is single-threaded; the server's threads have per-thread fault statistics (no NUMA group),
/// so they are not grouped by the prior. The end (10, 10) stands for the busiest thread, 12: the
/// edge is (10,12)-(50,50), so the client's group is {12, 50}, not the idle main thread.
#[test]
fn process_level_communication_ties_the_busiest_threads() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    for i in 1..=3u64 {
        let s = Sb::new(&topo, i * SEC)
            .proc(10, 5, "server", &[GIB, 0])
            .thread(10, 10, 0, 0, 0)
            .faults(10, 10, &[10, 0])
            .thread(10, 11, i * 300_000_000, 0, 0)
            .faults(10, 11, &[10, 0])
            .thread(10, 12, i * 600_000_000, 0, 1)
            .faults(10, 12, &[10, 0])
            .proc(50, 5, "client", &[0, GIB])
            .thread(50, 50, i * SEC, 0, 2)
            .comm((10, 10), (50, 50), 5000)
            .build();
        m.update(&s);
    }
    assert!(m.graph.edges.contains_key(&(key(10, 12), key(50, 50))), "{:?}", m.graph.edges.keys());
    assert!(!m.graph.edges.contains_key(&(key(10, 10), key(50, 50))));
    let g = m.group_of(&key(50, 50)).unwrap();
    assert_eq!(g.tasks, vec![key(10, 12), key(50, 50)]);
}

/// Guards who pairs in a crowded bucket: 20 threads sample one bucket at t = 2 s - k ms (k = tid
/// minus 100). Only the coaccess_max_accessors = 16 most recent (tids 100..=115) are paired:
/// 16 x 15 / 2 = 120 edges, none touching tids 116..=119. In the next period thread 119 samples the bucket
/// again at 3 s. The window remembers the 16 most recent (2 s - k ms, k <= 15); within the 1 s
/// co-access window of 3 s is only k = 0 (3 s - (2 s - k ms) = 1 s + k ms): 119 pairs with tid 100
/// only.
#[test]
fn a_crowded_bucket_pairs_only_its_most_recent_accessors() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let ms = 1_000_000u64;
    let s = |t: u64, acc: &[(u32, u64)]| crowd(&topo, t, 100..120, acc);
    m.update(&s(SEC, &[]));
    let first: Vec<(u32, u64)> = (100..120).map(|tid| (tid, 2 * SEC - u64::from(tid - 100) * ms)).collect();
    m.update(&s(2 * SEC, &first));
    assert_eq!(m.graph.edges.len(), 120);
    assert!(m.graph.edges.keys().all(|(a, b)| a.tid < 116 && b.tid < 116));
    m.update(&s(3 * SEC, &[(119, 3 * SEC)]));
    let with_119: Vec<u32> = m
        .graph
        .edges
        .iter()
        .filter(|((a, b), e)| (a.tid == 119 || b.tid == 119) && e.last_seen_ns == 3 * SEC)
        .map(|((a, b), _)| if a.tid == 119 { b.tid } else { a.tid })
        .collect();
    assert_eq!(with_119, vec![100]);
}

/// A connected socket pair as the live source reports it (events = 1 per cycle: 0.001 of a full
/// relation on the rate scale) is observed at `comm_socket_strength` = 0.4: s = 0.2 after the
/// first 1 s period (medium), settling at 0.376 (medium, never strong); once the connection is
/// gone it decays: 0.376 x 0.933^n falls below the medium mark after 10 periods.
#[test]
fn a_connected_socket_pair_reaches_the_medium_tier() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = |t, connected: bool| {
        let b = Sb::new(&topo, t)
            .proc(10, 5, "server", &[GIB, 0])
            .thread(10, 10, 0, 0, 0)
            .thread(10, 11, 0, 0, 0)
            .proc(20, 5, "client", &[0, GIB])
            .thread(20, 20, 0, 0, 0);
        if connected {
            b.socket((10, 10), (20, 20)).build()
        } else {
            b.build()
        }
    };
    m.update(&s(SEC, true));
    m.update(&s(2 * SEC, true));
    let e = &m.graph.edges[&(key(10, 10), key(20, 20))];
    assert_eq!(e.tier, Some(Tier::Medium), "{e:?}");
    for i in 3..=20 {
        m.update(&s(i * SEC, true));
    }
    let e = &m.graph.edges[&(key(10, 10), key(20, 20))];
    assert!((e.comm - 0.376).abs() < 0.01 && e.tier == Some(Tier::Medium), "{e:?}");
    assert_eq!(m.group_of(&key(10, 10)).map(|g| g.id), m.group_of(&key(20, 20)).map(|g| g.id));
    for i in 21..=31 {
        m.update(&s(i * SEC, false));
    }
    let e = &m.graph.edges[&(key(10, 10), key(20, 20))];
    assert!(e.tier < Some(Tier::Medium), "a closed connection decays: {e:?}");

    // Wake-ups keep the rate scale: one wake-up per second stays below the weak tier.
    let mut m = model(topo.clone());
    for i in 1..=5 {
        m.update(
            &Sb::new(&topo, i * SEC)
                .proc(10, 5, "a", &[GIB, 0])
                .thread(10, 10, 0, 0, 0)
                .proc(20, 5, "b", &[0, GIB])
                .thread(20, 20, 0, 0, 0)
                .comm((10, 10), (20, 20), 1)
                .build(),
        );
    }
    assert!(m.graph.edges.values().all(|e| e.tier.is_none()), "{:?}", m.graph.edges);
}

/// Two processes mapping one memfd (512 MiB of 1 GiB resident each: f = 0.5) are joined through
/// their busiest threads (process-level ends) and end in one group; the shared channel is its own.
#[test]
fn processes_sharing_a_memfd_end_in_one_group() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = |t: u64| {
        Sb::new(&topo, t)
            .proc(10, 5, "producer", &[GIB, 0])
            .thread(10, 10, 0, 0, 0)
            .thread(10, 11, t / 2, 0, 0)
            .proc(20, 5, "consumer", &[0, GIB])
            .thread(20, 20, t / 4, 0, 2)
            .shared(7, "/memfd:ring (deleted)", &[(10, GIB / 2), (20, GIB / 2)])
            .build()
    };
    for i in 1..=4 {
        m.update(&s(i * SEC));
    }
    // Thread 11 is process 10's busiest.
    let k = (key(10, 11), key(20, 20));
    let e = &m.graph.edges[&k];
    assert_eq!((e.coaccess, e.comm), (0.0, 0.0), "{e:?}");
    let sh = m.graph.shared[&k];
    assert!(sh > 0.4 && e.strength == sh && e.tier == Some(Tier::Medium), "{sh} {e:?}");
    let g = m.group_of(&key(10, 11)).expect("grouped");
    assert!(g.tasks.contains(&key(20, 20)), "{g:?}");
}

/// A library mapped by 30 processes (more than `shared_max_users` = 8) adds nothing; a memfd of
/// two of them in the same samples does.
#[test]
fn a_library_mapped_by_thirty_processes_adds_nothing() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = |t: u64| {
        let mut b = Sb::new(&topo, t);
        for pid in 100..130u32 {
            b = b.proc(pid, 5, "svc", &[64 << 20, 0]).thread(pid, pid, 0, 0, 0);
        }
        let users: Vec<(u32, u64)> = (100..130u32).map(|p| (p, 60 << 20)).collect();
        b.shared(9, "/usr/lib/x86_64-linux-gnu/libc.so.6", &users).shared(
            10,
            "/memfd:pair (deleted)",
            &[(100, 32 << 20), (101, 32 << 20)],
        )
    };
    for i in 1..=3 {
        m.update(&s(i * SEC).build());
    }
    let keys: Vec<_> = m.graph.edges.keys().copied().collect();
    assert_eq!(keys, vec![(key(100, 100), key(101, 101))]);
}
