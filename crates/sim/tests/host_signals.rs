//! The signals `SimHost::sample()` adds beyond the process files: `/proc/stat`, per-thread
//! schedstat, emulated precise access samples, communication pairs, memory-controller bandwidth,
//! PSI; and the `Interleave` action. Small machines, short runs (debug builds).

use std::collections::{BTreeMap, BTreeSet};

use numapilot_observe::{CommKind, Sample};
use numapilot_policy::{Action, ActionKind, Host, Outcome, Reason, TaskRef};
use numapilot_sim::engine::{Baseline, Machine, Sim, SimOptions};
use numapilot_sim::host::{MAX_SAMPLES_PER_CPU, PMU_SAMPLE_COST_NS, SAMPLE_PERIOD_LINES};
use numapilot_sim::kernel::REGION_BYTES;
use numapilot_sim::workload::{
    autonuma_bench, client_server, Access, FirstTouch, MemPolicySpec, Pattern, ProcessSpec, RegionSpec, Slice, Spec,
    ThreadGroup, Work,
};
use numapilot_sim::SimHost;
use numapilot_topology::{CpuSet, NodeSet};

const MIB: u64 = 1 << 20;
const MS: u64 = 1_000_000;
/// Nanoseconds per USER_HZ tick.
const TICK: u64 = 10 * MS;

fn machine() -> Machine {
    Machine::preset("autonuma-2s12c-24g").unwrap()
}

fn process(name: &str, threads: u32, bytes: u64, touch: FirstTouch, slice: Slice, cpus: Option<&str>) -> ProcessSpec {
    ProcessSpec {
        cpuset: None,
        name: name.into(),
        count: 1,
        start_s: 0.0,
        cpus: cpus.map(|c| CpuSet::parse_list(c).unwrap()),
        policy: MemPolicySpec::Local,
        regions: vec![RegionSpec { name: "mem".into(), bytes, touch, policy: None, grow: None }],
        threads: vec![ThreadGroup {
            name: "w".into(),
            count: threads,
            cpus: None,
            work: Work { total: None, unit: "bytes".into(), bytes_per_unit: 1.0, compute_ns: 0.0, duty: 1.0 },
            accesses: vec![Access { region: "mem".into(), weight: 1.0, slice, pattern: Pattern::Stream, write: true }],
        }],
        phases: vec![],
        launch_advice: false,
    }
}

fn spec(processes: Vec<ProcessSpec>) -> Spec {
    Spec {
        name: "t".into(),
        description: String::new(),
        duration_s: Some(10.0),
        pacing: vec![],
        throughput_from: None,
        throughput_unit: None,
        processes,
    }
}

fn host_of(spec: &Spec, policy: Baseline) -> SimHost {
    SimHost::new(Sim::new(&machine(), spec, policy, 3, &SimOptions::default()).unwrap())
}

/// 4 threads, each first-touching and streaming through its own quarter of 64 MiB (8 regions).
fn sliced() -> SimHost {
    host_of(&spec(vec![process("p", 4, 64 * MIB, FirstTouch::Threads, Slice::PerThread, None)]), Baseline::Default)
}

#[test]
fn own_slice_accesses_name_only_that_slice_and_its_nodes() {
    let mut h = sliced();
    h.advance(300 * MS);
    let s = h.sample().unwrap();
    let p = &s.processes[0];
    let base = p.numa_maps.as_ref().unwrap().vmas[0].start;
    let mut nodes_seen = BTreeSet::new();
    for (i, t) in p.threads.iter().enumerate() {
        let lo = base + 8 * i as u64 * REGION_BYTES;
        let hi = lo + 8 * REGION_BYTES;
        let mine: Vec<_> = s.accesses.iter().filter(|a| a.tid == t.tid).collect();
        assert!(!mine.is_empty(), "thread {} has samples", t.tid);
        let cpu_node = h.topology().cpu(t.last_cpu()).unwrap().node;
        let mut regions = BTreeSet::new();
        for a in &mine {
            assert_eq!(a.pid, p.pid);
            assert!((lo..hi).contains(&a.addr), "thread {i}: {:#x} outside its slice {lo:#x}..{hi:#x}", a.addr);
            let g = (a.phys.unwrap() >> 21) as usize;
            assert_eq!(a.node, h.sim().kernel.regions[g].node, "node is the region's");
            assert_eq!(a.node, cpu_node, "first touched by the thread: on its node");
            assert_eq!(a.addr, base + (g - h.sim().kernel.procs[0].first_region) as u64 * REGION_BYTES);
            regions.insert(a.addr);
        }
        assert!(regions.len() >= 6, "samples spread over the slice's 8 regions: {}", regions.len());
        nodes_seen.insert(cpu_node);
    }
    assert_eq!(nodes_seen.len(), 2, "threads (and so their slices) on both nodes");
    // Sorted, one entry per (thread, region).
    let keys: Vec<_> = s.accesses.iter().map(|a| (a.pid, a.tid, a.addr)).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(keys, sorted);
}

#[test]
fn sample_counts_follow_the_bytes_and_are_capped() {
    let mut h = sliced();
    let tasks = 0..4;
    let mut counts = Vec::new();
    for window in [200 * MS, 400 * MS] {
        let before = h.sim().work_done();
        h.advance(window);
        let after = h.sim().work_done();
        let s = h.sample().unwrap();
        let mut per_thread = Vec::new();
        for t in tasks.clone() {
            let tid = h.sim().kernel.tasks[t].tid;
            let n: u64 = s.accesses.iter().filter(|a| a.tid == tid).map(|a| a.count as u64).sum();
            // One sample per SAMPLE_PERIOD_LINES lines (bytes_per_unit is 1: units are bytes).
            let want = (after[t] - before[t]) / 64.0 / SAMPLE_PERIOD_LINES;
            assert!(want > 100.0 && want < MAX_SAMPLES_PER_CPU as f64, "below the cap: {want}");
            assert!((n as f64 - want).abs() <= 0.02 * want + 8.0, "thread {t}: {n} samples for {want:.0} expected");
            per_thread.push(n);
        }
        counts.push(per_thread);
    }
    // Twice the window, twice the bytes, twice the samples.
    for t in tasks.clone() {
        let r = counts[1][t] as f64 / counts[0][t] as f64;
        assert!((r - 2.0).abs() < 0.1, "thread {t}: {:?} -> ratio {r}", (counts[0][t], counts[1][t]));
    }
    // A long window hits the per-thread cap (the buffer is full), and no thread exceeds it.
    h.advance(3000 * MS);
    let s = h.sample().unwrap();
    for t in tasks {
        let tid = h.sim().kernel.tasks[t].tid;
        let n: u64 = s.accesses.iter().filter(|a| a.tid == tid).map(|a| a.count as u64).sum();
        assert!(n <= MAX_SAMPLES_PER_CPU && n + 2 >= MAX_SAMPLES_PER_CPU, "thread {t}: {n}");
    }
}

#[test]
fn threads_sharing_a_cpu_share_its_ring() {
    // The daemon's rings are per CPU: two threads time-sharing CPU 0 fill one ring between them,
    // while two threads on CPUs 0 and 1 fill one each. Over 3 s every thread samples far more than
    // a ring holds, so the pair on one CPU gets one ring's worth, about half each, and the pair
    // on two CPUs twice that.
    let per_thread = |cpus: &str| {
        let mut h = host_of(
            &spec(vec![process("p", 2, 64 * MIB, FirstTouch::Threads, Slice::PerThread, Some(cpus))]),
            Baseline::Default,
        );
        h.advance(3000 * MS);
        let s = h.sample().unwrap();
        assert!(s.access_fill > 1.0, "the window overflows the ring: {}", s.access_fill);
        let k = &h.sim().kernel;
        k.procs[0]
            .tasks
            .iter()
            .map(|&t| {
                let tid = k.tasks[t].tid;
                s.accesses.iter().filter(|a| a.tid == tid).map(|a| a.count as u64).sum::<u64>()
            })
            .collect::<Vec<u64>>()
    };
    let shared = per_thread("0");
    let apart = per_thread("0-1");
    let cap = MAX_SAMPLES_PER_CPU;
    assert!(shared.iter().sum::<u64>() <= cap && shared.iter().sum::<u64>() + 4 >= cap, "one ring: {shared:?}");
    assert!(shared.iter().all(|&n| n.abs_diff(cap / 2) <= cap / 10), "about half each: {shared:?}");
    assert!(apart.iter().all(|&n| n <= cap && n + 4 >= cap), "a ring each: {apart:?}");
}
#[test]
fn shared_memory_has_one_physical_identity_in_both_processes() {
    let m = machine();
    let spec = client_server::redis_set(&m.topo);
    let mut h = SimHost::new(Sim::new(&m, &spec, Baseline::Default, 1, &SimOptions::default()).unwrap());
    h.advance(500 * MS);
    let s = h.sample().unwrap();
    let server = s.processes.iter().find(|p| p.comm == "redis-server").unwrap().pid;
    // phys -> (pids that sampled it, (addr, node) pairs reported for it)
    type Seen = (BTreeSet<u32>, BTreeSet<(u64, u32)>);
    let mut by_phys: BTreeMap<u64, Seen> = BTreeMap::new();
    for a in &s.accesses {
        let e = by_phys.entry(a.phys.unwrap()).or_default();
        e.0.insert(a.pid);
        e.1.insert((a.addr, a.node));
    }
    let shared: Vec<_> = by_phys.iter().filter(|(_, (pids, _))| pids.len() > 1).collect();
    assert!(!shared.is_empty(), "the clients and the server sample the same buffer pages");
    for (phys, (pids, places)) in shared {
        assert!(pids.contains(&server), "{phys:#x} is the server's buffer");
        assert_eq!(places.len(), 1, "{phys:#x}: one address and one node whoever samples it: {places:?}");
    }
}

#[test]
fn comm_pairs_connect_the_server_with_every_client() {
    let m = machine();
    let spec = client_server::redis_set(&m.topo);
    let mut h = SimHost::new(Sim::new(&m, &spec, Baseline::Default, 1, &SimOptions::default()).unwrap());
    for _ in 0..2 {
        let before = h.sim().work_done();
        h.advance(300 * MS);
        let after = h.sim().work_done();
        let s = h.sample().unwrap();
        let server = s.processes.iter().find(|p| p.comm == "redis-server").unwrap();
        let client = s.processes.iter().find(|p| p.comm != "redis-server").unwrap();
        let server_end = (server.pid, server.threads[0].tid);
        let clients: BTreeSet<(u32, u32)> = client.threads.iter().map(|t| (client.pid, t.tid)).collect();
        assert!(!s.comm.is_empty());
        assert!(s.comm.iter().all(|c| c.a == server_end && c.kind == CommKind::Socket && c.events > 0));
        let peers: BTreeSet<(u32, u32)> = s.comm.iter().map(|c| c.b).collect();
        assert_eq!(peers, clients, "every client thread talks to the server");
        // Events are this window's requests (not cumulative): the server's units in the window.
        let st = h.sim().task_of_tid(server_end.1).unwrap();
        let served = after[st] - before[st];
        let events: u64 = s.comm.iter().map(|c| c.events).sum();
        assert!((events as f64 - served).abs() <= clients.len() as f64, "{events} events, {served:.0} requests");
    }
}

#[test]
fn proc_stat_conserves_cpu_time_per_node() {
    // numa02_SMT under hard bind: 12 threads, 6 per node, never leaving their node; half the CPUs idle.
    let m = machine();
    let spec = autonuma_bench::spec("numa02_SMT", &m.topo, 0.05).unwrap();
    let mut h = SimHost::new(Sim::new(&m, &spec, Baseline::HardBind, 1, &SimOptions::default()).unwrap());
    h.advance(1000 * MS);
    let s = h.sample().unwrap();
    let stat = s.cpu.as_ref().expect("/proc/stat");
    assert_eq!(stat.cpus.len(), 24);
    let now_ticks = h.now_ns() / TICK;
    for c in &stat.cpus {
        assert!(c.times.total().abs_diff(now_ticks) <= 1, "cpu{}: {} of {now_ticks} ticks", c.cpu, c.times.total());
    }
    let total_busy: u64 = stat.cpus.iter().map(|c| c.times.busy()).sum();
    assert_eq!(stat.total.busy(), total_busy);
    let k = &h.sim().kernel;
    let mut any_idle = false;
    for n in &s.nodes {
        let cpu_ticks = s.node_cpu_times(n.node).unwrap().busy();
        let task_ns: u64 = k.tasks.iter().filter(|t| n.cpus.contains(t.cpu)).map(|t| t.utime_ns + t.stime_ns).sum();
        let ncpus = n.cpus.len() as u64;
        assert!(task_ns > 0);
        assert!(cpu_ticks.abs_diff(task_ns / TICK) <= ncpus, "node {}: {cpu_ticks} vs {}", n.node, task_ns / TICK);
        // The threads' own stat ticks tell the same (each rounds down by under a tick).
        let thread_ticks: u64 = s
            .processes
            .iter()
            .flat_map(|p| &p.threads)
            .filter(|t| n.cpus.contains(t.last_cpu()))
            .map(|t| t.stat.utime + t.stat.stime)
            .sum();
        let threads = s.processes.iter().flat_map(|p| &p.threads).filter(|t| n.cpus.contains(t.last_cpu())).count();
        assert!(cpu_ticks.abs_diff(thread_ticks) <= ncpus + threads as u64);
        any_idle |= n.cpus.iter().any(|c| stat.cpus.iter().any(|l| l.cpu == c && l.times.idle > now_ticks / 2));
    }
    assert!(any_idle, "12 threads on 24 CPUs leave CPUs idle");
}

#[test]
fn schedstat_wait_exactly_when_the_cpu_is_shared() {
    // 4 threads allowed only CPUs 0-1 (each gets half a CPU), and one thread alone on CPU 5.
    let mut h = host_of(
        &spec(vec![
            process("crowd", 4, 8 * MIB, FirstTouch::Main, Slice::PerThread, Some("0-1")),
            process("alone", 1, 8 * MIB, FirstTouch::Main, Slice::Whole, Some("5")),
        ]),
        Baseline::Default,
    );
    h.advance(500 * MS);
    let s = h.sample().unwrap();
    for p in &s.processes {
        for t in &p.threads {
            let st = t.schedstat.expect("schedstat");
            if p.comm == "crowd" {
                // Wanted 500 ms, got 250: waited 250.
                assert!(st.wait_ns.abs_diff(250 * MS) <= MS, "{} waited {}", t.tid, st.wait_ns);
                assert!(st.run_ns.abs_diff(250 * MS) <= MS, "{} ran {}", t.tid, st.run_ns);
                assert!(st.timeslices >= 250 * MS / 3_000_000, "switched in once per 3 ms slice: {}", st.timeslices);
            } else {
                assert_eq!(st.wait_ns, 0, "alone on its CPU: never waits");
                assert!(st.run_ns.abs_diff(500 * MS) <= MS);
            }
        }
    }
    let psi = s.psi.cpu.expect("cpu pressure");
    assert!(psi.some.total_us > 0 && psi.some.avg10 > 0.0);
    // Under-subscribed: no wait anywhere, no CPU pressure.
    let mut h = sliced();
    h.advance(300 * MS);
    let s = h.sample().unwrap();
    assert!(s.processes.iter().flat_map(|p| &p.threads).all(|t| t.schedstat.unwrap().wait_ns == 0));
    assert_eq!(s.psi.cpu.unwrap().some.total_us, 0);
}

#[test]
fn memory_controller_bandwidth_per_node() {
    // numa02 (default): all memory on the main thread's node, 24 threads streaming from it:
    // that controller saturates, the other carries nothing.
    let m = machine();
    let spec = autonuma_bench::spec("numa02", &m.topo, 0.05).unwrap();
    let mut h = SimHost::new(Sim::new(&m, &spec, Baseline::Default, 1, &SimOptions::default()).unwrap());
    h.advance(500 * MS);
    let s = h.sample().unwrap();
    let home = s.processes[0].node_usage.iter().find(|u| u.total_kb() > 0).unwrap().node;
    for n in &s.nodes {
        let bw = n.mem_bw.expect("controller figures");
        assert_eq!(bw.window_ns, 500 * MS);
        assert_eq!(bw.capacity_bytes_per_s, 16_000_000_000);
        if n.node == home {
            // At capacity (within the contention model's convergence) and saturated nearly all along.
            let cap = bw.capacity_bytes_per_s as f64 * 0.5;
            assert!((bw.bytes as f64 - cap).abs() < 0.05 * cap, "{} bytes of {cap}", bw.bytes);
            assert!(bw.saturated_ns >= 400 * MS, "saturated {} ns", bw.saturated_ns);
        } else {
            assert_eq!((bw.bytes, bw.saturated_ns), (0, 0));
        }
    }
    // The next window starts from zero.
    h.advance(100 * MS);
    let s = h.sample().unwrap();
    assert!(s.nodes.iter().all(|n| n.mem_bw.unwrap().window_ns == 100 * MS));
}

#[test]
fn sample_round_trips_through_json() {
    let m = machine();
    let spec = client_server::redis_set(&m.topo);
    let mut h = SimHost::new(Sim::new(&m, &spec, Baseline::Default, 1, &SimOptions::default()).unwrap());
    h.advance(300 * MS);
    let s = h.sample().unwrap();
    assert!(!s.accesses.is_empty() && !s.comm.is_empty() && s.cpu.is_some() && s.nodes[0].mem_bw.is_some());
    let json = serde_json::to_string(&s).unwrap();
    let back: Sample = serde_json::from_str(&json).unwrap();
    assert_eq!(back, s);
}

#[test]
fn sampling_does_not_change_the_run() {
    // Observation alone, without the sampling's charged cost (see the next test).
    let mut a = sliced();
    let mut b = sliced();
    a.set_sample_cost_ns(0);
    b.set_sample_cost_ns(0);
    for _ in 0..5 {
        a.advance(100 * MS);
        a.sample().unwrap();
    }
    b.advance(500 * MS);
    assert_eq!(a.sim().work_done(), b.sim().work_done());
    // Same seed, same samples.
    let mut c = sliced();
    c.set_sample_cost_ns(0);
    for _ in 0..5 {
        c.advance(100 * MS);
        c.sample().unwrap();
    }
    a.advance(100 * MS);
    c.advance(100 * MS);
    assert_eq!(a.sample().unwrap(), c.sample().unwrap());
}

fn interleave(h: &mut SimHost, nodes: &str, weights: Vec<u32>, max_pages: Option<u64>) -> Outcome {
    let s = h.sample().unwrap();
    let p = &s.processes[0];
    h.apply(&Action {
        target: TaskRef { pid: p.pid, tid: None, starttime: p.starttime },
        kind: ActionKind::Interleave { ranges: vec![], nodes: NodeSet::parse_list(nodes).unwrap(), weights, max_pages },
        reason: Reason::new("test", "interleave"),
    })
}

#[test]
fn interleave_action_follows_the_weights_and_the_budget() {
    // numa02: 1 GiB = 512 regions, all on the main thread's node.
    let m = machine();
    let spec = autonuma_bench::spec("numa02", &m.topo, 0.05).unwrap();
    let mut h = SimHost::new(Sim::new(&m, &spec, Baseline::Default, 1, &SimOptions::default()).unwrap());
    h.advance(100 * MS);
    let regions = |h: &SimHost| -> Vec<u32> {
        let pr = &h.sim().kernel.procs[0];
        h.sim().kernel.regions[pr.regions[0].0..pr.regions[0].1].iter().map(|r| r.node).collect()
    };
    let home = regions(&h)[0];
    assert!(regions(&h).iter().all(|&n| n == home));
    // Weights 2:1 over nodes 0,1: in address order two regions on node 0, one on node 1, and so on.
    // A budget of 10 regions moves exactly 10 of those that must move, the lowest addresses first.
    let budget = 10 * 512;
    assert_eq!(interleave(&mut h, "0-1", vec![2, 1], Some(budget)), Outcome::Applied { pages_moved: budget });
    let want = |i: usize| if i % 3 < 2 { 0 } else { 1 };
    let now = regions(&h);
    let misplaced: Vec<usize> = (0..now.len()).filter(|&i| now[i] != want(i)).collect();
    let must_move = (0..now.len()).filter(|&i| want(i) != home).count();
    assert_eq!(misplaced.len(), must_move - 10);
    h.sim().check_invariants().unwrap();
    // Without a budget the rest moves: 2/3 of the regions on node 0, 1/3 on node 1, alternating.
    let out = interleave(&mut h, "0-1", vec![2, 1], None);
    assert_eq!(out, Outcome::Applied { pages_moved: (must_move as u64 - 10) * 512 });
    let now = regions(&h);
    assert!((0..now.len()).all(|i| now[i] == want(i)), "{:?}", &now[..12]);
    assert_eq!(now.iter().filter(|&&n| n == 1).count(), 512 / 3);
    // Bad node, weights that do not match the nodes, all-zero weights: refused, nothing moves.
    let before = h.sim().kernel.pages_migrated;
    match interleave(&mut h, "0,7", vec![], None) {
        Outcome::Refused { message } => assert!(message.contains("node 7"), "{message}"),
        o => panic!("{o:?}"),
    }
    assert!(matches!(interleave(&mut h, "0-1", vec![1], None), Outcome::Refused { .. }));
    assert!(matches!(interleave(&mut h, "0-1", vec![0, 0], None), Outcome::Refused { .. }));
    assert_eq!(h.sim().kernel.pages_migrated, before);
}

#[test]
fn memory_pressure_comes_from_migration_stalls() {
    // numa02: 1 GiB on one node; moving it all makes the process's threads stall on the copies.
    let m = machine();
    let spec = autonuma_bench::spec("numa02", &m.topo, 0.05).unwrap();
    let mut h = SimHost::new(Sim::new(&m, &spec, Baseline::Default, 1, &SimOptions::default()).unwrap());
    h.advance(200 * MS);
    let s = h.sample().unwrap();
    let mem = s.psi.memory.expect("memory pressure");
    assert_eq!((mem.some.total_us, mem.full.unwrap().total_us), (0, 0), "nothing stalled yet");
    let p = &s.processes[0];
    let home = p.node_usage.iter().find(|u| u.total_kb() > 0).unwrap().node;
    let other = h.topology().node_ids().iter().find(|&n| n != home).unwrap();
    let out = h.apply(&Action {
        target: TaskRef { pid: p.pid, tid: None, starttime: p.starttime },
        kind: ActionKind::MigratePages {
            from: [home].into_iter().collect(),
            to: [other].into_iter().collect(),
            max_pages: None,
        },
        reason: Reason::new("test", "move it all"),
    });
    assert_eq!(out, Outcome::Applied { pages_moved: 512 * 512 });
    h.advance(200 * MS);
    let s = h.sample().unwrap();
    let mem = s.psi.memory.unwrap();
    // 512 regions x ~1.08 ms of copy = ~0.55 s of stall over 24 threads: ~23 ms each, all of it
    // inside the 200 ms window, every CPU busy: about 11% of the window, alone on each CPU (full).
    assert!(mem.some.total_us > 15_000 && mem.some.total_us < 40_000, "{:?}", mem.some);
    assert!(mem.some.avg10 > 0.0);
    assert_eq!(mem.full.unwrap().total_us, mem.some.total_us, "one task per CPU: some is full");
    // The stalls are system time in /proc/stat and in the threads' stat.
    assert!(s.cpu.unwrap().total.system > 0);
    assert!(s.processes[0].threads.iter().all(|t| t.stat.stime > 0));
}

#[test]
fn binding_a_process_spreads_its_threads_over_the_allowed_cpus() {
    // 4 threads started on CPUs 0-3 (node 0), then bound to CPUs 20-23 (node 1): each displaced
    // thread goes to the least-loaded allowed CPU counting those placed before it, so one thread
    // per CPU -- not all four on CPU 20 (the least-loaded CPU before any was placed).
    let mut h = host_of(
        &spec(vec![process("p", 4, 64 * MIB, FirstTouch::Threads, Slice::PerThread, Some("0-3"))]),
        Baseline::Default,
    );
    h.advance(100_000_000);
    let s = h.sample().unwrap();
    let p = &s.processes[0];
    let cpus = CpuSet::parse_list("20-23").unwrap();
    let a = Action {
        target: TaskRef { pid: p.pid, tid: None, starttime: p.starttime },
        kind: ActionKind::SetAffinity { cpus: cpus.clone() },
        reason: Reason::new("t", ""),
    };
    assert_eq!(h.apply(&a), Outcome::Applied { pages_moved: 0 });
    let k = &h.sim().kernel;
    let mut on: Vec<u32> = k.procs[0].tasks.iter().map(|&t| k.tasks[t].cpu).collect();
    on.sort_unstable();
    assert_eq!(on, [20, 21, 22, 23]);
    assert!(k.procs[0].tasks.iter().all(|&t| k.tasks[t].allowed == cpus));
}

/// System time of the process's threads so far, ns (the stalls they paid).
fn stime(h: &SimHost) -> u64 {
    let k = &h.sim().kernel;
    k.procs[0].tasks.iter().map(|&t| k.tasks[t].stime_ns).sum()
}

#[test]
fn access_samples_are_charged_to_the_sampled_threads() {
    // The sampling's cost is paid as the work is done: after 500 ms each thread's system time is
    // about its samples x PMU_SAMPLE_COST_NS (this workload migrates nothing, so no other stall;
    // the last epoch's samples are paid in the next one), none with the cost set to 0, and the
    // charged run does less work.
    let mut a = sliced();
    let mut b = sliced();
    b.set_sample_cost_ns(0);
    a.advance(500 * MS);
    b.advance(500 * MS);
    let sa = a.sample().unwrap();
    let mut per_tid: BTreeMap<u32, u64> = BTreeMap::new();
    for x in &sa.accesses {
        *per_tid.entry(x.tid).or_default() += u64::from(x.count);
    }
    assert_eq!(per_tid.len(), 4, "{per_tid:?}");
    assert!(per_tid.values().all(|&n| n > 100), "{per_tid:?}");
    let k = &a.sim().kernel;
    for &t in &k.procs[0].tasks {
        let n = per_tid[&k.tasks[t].tid];
        let paid = k.tasks[t].stime_ns as f64 / PMU_SAMPLE_COST_NS as f64;
        assert!((paid / n as f64 - 1.0).abs() < 0.15, "tid {}: paid for {paid:.0} samples, {n} taken", k.tasks[t].tid);
    }
    assert_eq!(stime(&b), 0, "no cost, no system time");
    assert!(a.sim().work_done()[0] < b.sim().work_done()[0]);
}

#[test]
fn a_stretched_sampling_period_emits_and_charges_fewer_samples() {
    // The engine's sampling stretch (numapilot_policy::cadence): at stretch 4 the same 500 ms of
    // the same work gives about a quarter of the samples, and a quarter of the stall.
    let mut a = sliced();
    let mut b = sliced();
    b.set_sampling_stretch(4);
    a.advance(500 * MS);
    b.advance(500 * MS);
    let total = |s: &Sample| s.accesses.iter().map(|x| u64::from(x.count)).sum::<u64>();
    let (sa, sb) = (a.sample().unwrap(), b.sample().unwrap());
    let (na, nb) = (total(&sa), total(&sb));
    assert!(na > 400, "enough samples at the base period to compare: {na}");
    let ratio = nb as f64 / na as f64;
    assert!((0.2..0.3).contains(&ratio), "stretch 4: {nb} of {na} samples ({ratio:.3})");
    assert_eq!((sa.access_period_scale, sb.access_period_scale), (1, 4), "the samples name their period");
    let paid = stime(&b) as f64 / stime(&a) as f64;
    assert!((0.2..0.3).contains(&paid), "stretch 4: {paid:.3} of the stall");
    // Back to 1 (0 counts as 1): the base period again.
    b.set_sampling_stretch(0);
    a.advance(500 * MS);
    b.advance(500 * MS);
    let (na, nb) = (total(&a.sample().unwrap()), total(&b.sample().unwrap()));
    let ratio = nb as f64 / na as f64;
    assert!((0.9..1.1).contains(&ratio), "stretch back to 1: {nb} against {na} samples");
}

#[test]
fn samples_the_cap_drops_are_still_charged() {
    // A real PMU interrupts for every record, also for those a full ring then drops (perf counts
    // them as lost), so the cap bounds what the engine sees, not what the sampling costs. One
    // 500 ms window against one 10 s window (the whole run) of the same work: the long one's
    // samples stop at the cap while its stall goes on growing with the work sampled (about 20
    // times the short one's).
    let mut a = sliced();
    let mut b = sliced();
    a.advance(500 * MS);
    b.advance(10_000 * MS);
    let per_tid = |s: &Sample| {
        let mut m: BTreeMap<u32, u64> = BTreeMap::new();
        for x in &s.accesses {
            *m.entry(x.tid).or_default() += u64::from(x.count);
        }
        m
    };
    let (sa, sb) = (per_tid(&a.sample().unwrap()), per_tid(&b.sample().unwrap()));
    assert!(sb.values().all(|&n| n <= MAX_SAMPLES_PER_CPU), "capped: {sb:?}");
    let short: u64 = sa.values().sum();
    let long: u64 = sb.values().sum();
    assert!(long < short * 20 / 2, "the cap held the long window's samples down: {long} vs {short}");
    let ratio = stime(&b) as f64 / stime(&a) as f64;
    let work = b.sim().work_done()[0] / a.sim().work_done()[0];
    assert!(
        (0.85..1.15).contains(&(ratio / work)),
        "the long window pays for every sample taken: {ratio:.1} x the stall for {work:.1} x the work"
    );
}

#[test]
fn a_small_range_keeps_a_sample_when_the_cap_scales_a_thread_down() {
    // Each thread streams its slice of 64 MiB and, 2 bytes in 10 000, a small 4 MiB buffer: a few
    // raw samples on the small buffer beside ~15 000 on the slice over 3 s. Scaling to the
    // 4096 cap with a plain floor (3 x 4096 / 15 000 = 0.8 -> 0) would drop the small buffer from
    // the signal; every range a thread touched keeps at least one sample, within the cap.
    let mut p = process("p", 4, 64 * MIB, FirstTouch::Threads, Slice::PerThread, None);
    p.regions.push(RegionSpec {
        name: "small".into(),
        bytes: 4 * MIB,
        touch: FirstTouch::Main,
        policy: None,
        grow: None,
    });
    p.threads[0].accesses.push(Access {
        region: "small".into(),
        weight: 2e-4,
        slice: Slice::Whole,
        pattern: Pattern::Stream,
        write: false,
    });
    let mut h = host_of(&spec(vec![p]), Baseline::Default);
    h.advance(3000 * MS);
    let s = h.sample().unwrap();
    let small_base = {
        let k = &h.sim().kernel;
        let pr = &k.procs[0];
        pr.addrs[1]
    };
    for t in 0..4 {
        let tid = h.sim().kernel.tasks[t].tid;
        let mine: Vec<_> = s.accesses.iter().filter(|a| a.tid == tid).collect();
        let n: u64 = mine.iter().map(|a| a.count as u64).sum();
        assert!(n <= MAX_SAMPLES_PER_CPU && n + 4 >= MAX_SAMPLES_PER_CPU, "thread {t}: {n}");
        let small: u64 = mine.iter().filter(|a| a.addr >= small_base).map(|a| a.count as u64).sum();
        assert!(small >= 1, "thread {t}: no sample on the small buffer");
    }
}

#[test]
fn a_range_at_the_top_of_the_address_space_is_no_panic() {
    // A policy's range may end past u64::MAX (addr + len overflows): clipped, nothing panics, and
    // nothing of the process lies there, so nothing moves (its unmapped pages: EFAULT, as in
    // move_pages).
    let mut h = sliced();
    h.advance(100 * MS);
    let s = h.sample().unwrap();
    let p = &s.processes[0];
    let a = Action {
        target: TaskRef { pid: p.pid, tid: None, starttime: p.starttime },
        kind: ActionKind::MoveRanges { ranges: vec![(u64::MAX - 4095, 1 << 30)], to: 1 },
        reason: Reason::new("t", ""),
    };
    let o = h.apply(&a);
    assert!(
        matches!(
            &o,
            Outcome::Applied { pages_moved: 0 } | Outcome::Partial { pages_moved: 0, .. } | Outcome::Refused { .. }
        ),
        "{o:?}"
    );
}
