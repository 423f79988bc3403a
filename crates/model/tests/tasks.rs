//! Per-thread and per-process views from hand-built samples.

mod common;

use common::*;
use numapilot_model::{AccessSource, Model};
use numapilot_topology::NodeSet;

/// Two samples 1 s apart. Thread 11 ran 0.5 s (schedstat) and waited 0.1 s: rate 0.5, delay 0.1.
/// Thread 12 ran 0.25 s on CPU 2 (node 1). Process 10 has 3 GiB on node 0 and 1 GiB on node 1:
/// residency shares 0.75 / 0.25 for both threads (no samples, no faults).
#[test]
fn rates_run_delay_node_and_residency_shares() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s0 = Sb::new(&topo, 10 * SEC)
        .proc(10, 100, "app", &[3 * GIB, GIB])
        .thread(10, 11, 1_000_000_000, 0, 0)
        .thread(10, 12, 0, 0, 0)
        .build();
    m.update(&s0);
    assert_eq!(m.tasks.len(), 2);
    assert_eq!(m.tasks[&key(10, 11)].cpu_rate, 0.0, "no rate from one sample");
    let s1 = Sb::new(&topo, 11 * SEC)
        .proc(10, 100, "app", &[3 * GIB, GIB])
        .thread(10, 11, 1_500_000_000, 100_000_000, 1)
        .thread(10, 12, 250_000_000, 0, 2)
        .build();
    m.update(&s1);
    let t11 = &m.tasks[&key(10, 11)];
    assert!((t11.cpu_rate - 0.5).abs() < 1e-12, "{t11:?}");
    assert!((t11.run_delay.unwrap() - 0.1).abs() < 1e-12);
    assert_eq!(t11.node, Some(0));
    assert_eq!(t11.access_source, AccessSource::Residency);
    assert_eq!(t11.access, vec![0.75, 0.25]);
    let t12 = &m.tasks[&key(10, 12)];
    assert!((t12.cpu_rate - 0.25).abs() < 1e-12);
    assert_eq!(t12.node, Some(1));
    assert_eq!(t12.first_seen_ns, 10 * SEC);
    let p = &m.procs[&10];
    assert_eq!(p.tids, vec![11, 12]);
    assert_eq!(p.rss_bytes, 4 * GIB);
    assert_eq!(p.mem_by_node, vec![3 * GIB, GIB]);
    assert!((p.cpu_rate - 0.75).abs() < 1e-12);
    assert!(!p.pinned);
    // Started at tick 100 (1 s after boot), first seen at boottime 10 s: 9 s old.
    assert_eq!(p.age_at_first_seen_ns, 9 * SEC);
    assert_eq!(p.first_seen_ns, 10 * SEC);
}

/// Sources, best first: samples (thread 21: 3 on node 1, 1 on node 0 -> 0.25 / 0.75) beat faults;
/// faults (thread 22: 10 / 30 -> 0.25 / 0.75) beat residency (thread 23: all on node 0).
#[test]
fn access_source_preference() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = |t| {
        Sb::new(&topo, t)
            .proc(20, 5, "db", &[GIB, 0])
            .thread(20, 21, 0, 0, 0)
            .faults(20, 21, &[50, 50])
            .thread(20, 22, 0, 0, 0)
            .faults(20, 22, &[10, 30])
            .thread(20, 23, 0, 0, 0)
            .access(20, 21, 0x1000_0000, 1, 3, t)
            .access(20, 21, 0x2000_0000, 0, 1, t)
            .build()
    };
    m.update(&s(SEC));
    let t21 = &m.tasks[&key(20, 21)];
    assert_eq!(t21.access_source, AccessSource::Samples);
    assert_eq!(t21.access, vec![0.25, 0.75]);
    assert_eq!(t21.access_samples, 4);
    let t22 = &m.tasks[&key(20, 22)];
    assert_eq!(t22.access_source, AccessSource::NumaFaults);
    assert_eq!(t22.access, vec![0.25, 0.75]);
    let t23 = &m.tasks[&key(20, 23)];
    assert_eq!(t23.access_source, AccessSource::Residency);
    assert_eq!(t23.access, vec![1.0, 0.0]);
    // Hot ranges: two 2 MiB buckets, the one with 3 samples first.
    let hot = &m.procs[&20].hot;
    assert_eq!(hot.len(), 2);
    assert_eq!((hot[0].start, hot[0].samples, hot[0].node), (0x1000_0000, 3, 1));
    assert_eq!((hot[1].start, hot[1].samples, hot[1].len), (0x2000_0000, 1, 2 * MIB));
    // Per thread: only thread 21 sampled, so only it has hot ranges.
    assert_eq!(m.tasks[&key(20, 21)].hot, *hot);
    assert!(m.tasks[&key(20, 22)].hot.is_empty());
}

/// Sampled shares are smoothed with half-life 2 s: after 2 s with every sample on node 0, a thread
/// that was 100% on node 1 is at 0.5 / 0.5 (a = 1 - 2^-1 = 0.5). Without samples it keeps its
/// shares (until access_stale_ms).
#[test]
fn sampled_shares_are_smoothed_and_kept_through_a_pause() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = |t, node: Option<u32>| {
        let b = Sb::new(&topo, t).proc(30, 5, "x", &[GIB, GIB]).thread(30, 31, 0, 0, 0);
        match node {
            Some(n) => b.access(30, 31, 0x4000_0000, n, 10, t).build(),
            None => b.build(),
        }
    };
    m.update(&s(SEC, Some(1)));
    assert_eq!(m.tasks[&key(30, 31)].access, vec![0.0, 1.0]);
    m.update(&s(3 * SEC, Some(0)));
    let a = &m.tasks[&key(30, 31)].access;
    assert!((a[0] - 0.5).abs() < 1e-12 && (a[1] - 0.5).abs() < 1e-12, "{a:?}");
    m.update(&s(4 * SEC, None));
    let t = &m.tasks[&key(30, 31)];
    assert_eq!(t.access_source, AccessSource::Samples);
    assert!((t.access[0] - 0.5).abs() < 1e-12);
    assert_eq!(t.access_samples, 0);
    // 30 s after the last sample: back to residency (0.5 / 0.5 from the process's memory).
    m.update(&s(40 * SEC, None));
    assert_eq!(m.tasks[&key(30, 31)].access_source, AccessSource::Residency);
}

/// Growth: RSS 1 GiB at t=0, 1.5 GiB at t=5 s: 512 MiB / 5 s.
#[test]
fn growth_over_the_window() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    m.update(&Sb::new(&topo, 0).proc(40, 5, "jvm", &[GIB, 0]).thread(40, 40, 0, 0, 0).build());
    m.update(&Sb::new(&topo, 5 * SEC).proc(40, 5, "jvm", &[GIB + 512 * MIB, 0]).thread(40, 40, 0, 0, 0).build());
    let p = &m.procs[&40];
    assert!((p.growth_bytes_per_s - (512 * MIB) as f64 / 5.0).abs() < 1e-6, "{}", p.growth_bytes_per_s);
    assert_eq!(p.history_ns, 5 * SEC);
}

/// A pid whose start time changed is a new process: first-seen time, growth and rates restart.
#[test]
fn pid_reuse_resets_history() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    m.update(&Sb::new(&topo, 0).proc(50, 5, "old", &[GIB, 0]).thread(50, 50, 0, 0, 0).build());
    m.update(&Sb::new(&topo, SEC).proc(50, 5, "old", &[2 * GIB, 0]).thread(50, 50, 500_000_000, 0, 0).build());
    assert!(m.procs[&50].growth_bytes_per_s > 0.0);
    // Same pid, new start time; its counter is lower than the old one's.
    m.update(&Sb::new(&topo, 2 * SEC).proc(50, 190, "new", &[GIB, 0]).thread(50, 50, 100_000_000, 0, 0).build());
    let p = &m.procs[&50];
    assert_eq!(p.comm, "new");
    assert_eq!(p.first_seen_ns, 2 * SEC);
    assert_eq!(p.growth_bytes_per_s, 0.0);
    assert_eq!(p.history_ns, 0);
    assert_eq!(m.tasks[&key(50, 50)].cpu_rate, 0.0, "no rate across two different processes");
    assert_eq!(m.tasks[&key(50, 50)].first_seen_ns, 2 * SEC);
}

/// Threads that vanish are forgotten; kernel threads are never tasks.
#[test]
fn vanished_and_kernel_threads() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let mut s = Sb::new(&topo, 0)
        .proc(2, 1, "kthreadd", &[0, 0])
        .thread(2, 2, 0, 0, 0)
        .proc(60, 5, "a", &[GIB, 0])
        .thread(60, 60, 0, 0, 0)
        .thread(60, 61, 0, 0, 0)
        .build();
    s.processes[0].kernel_thread = true;
    m.update(&s);
    assert_eq!(m.tasks.keys().copied().collect::<Vec<_>>(), vec![key(60, 60), key(60, 61)]);
    assert!(!m.procs.contains_key(&2));
    m.update(&Sb::new(&topo, SEC).proc(60, 5, "a", &[GIB, 0]).thread(60, 60, 0, 0, 0).build());
    assert_eq!(m.tasks.keys().copied().collect::<Vec<_>>(), vec![key(60, 60)]);
    assert_eq!(m.procs[&60].tids, vec![60]);
    m.update(&Sb::new(&topo, 2 * SEC).build());
    assert!(m.tasks.is_empty() && m.procs.is_empty());
}

/// A zombie (exited, not yet reaped, no thread left) is no process to the model: one held as a
/// task, a process and a group member is forgotten once it is one, as an exited process is, and
/// its node's CPU demand goes with it; a process whose leader exited while a thread runs on (a
/// zombie leader with threads) stays.
#[test]
fn a_zombie_is_forgotten_as_an_exited_process() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let at = |i: u64, zombie: bool| {
        let mut s = Sb::new(&topo, i * SEC)
            .proc(10, 5, "done", &[GIB, 0])
            // Its CPU time stops where it exited.
            .thread(10, 10, i.min(3) * SEC / 2, 0, 0)
            .proc(20, 5, "leader-gone", &[GIB, 0])
            .thread(20, 20, SEC, 0, 2)
            .thread(20, 21, i * SEC / 4, 0, 2)
            .build();
        // Process 20's leader exited (pthread_exit) while thread 21 runs on.
        let p20 = s.processes.iter_mut().find(|p| p.pid == 20).unwrap();
        p20.stat.state = 'Z';
        p20.stat.num_threads = 2;
        if zombie {
            // As the observer reads a zombie: state Z, one thread (itself), no memory.
            let p10 = s.processes.iter_mut().find(|p| p.pid == 10).unwrap();
            p10.stat.state = 'Z';
            p10.stat.num_threads = 1;
            p10.node_usage.clear();
            p10.rss_kb = Some(0);
            p10.threads[0].stat.state = 'Z';
        }
        s
    };
    let table = |m: &Model, name: &str| {
        let mut out = Vec::new();
        m.bookkeeping(&mut out);
        out.into_iter().find(|(k, _)| *k == name).map(|(_, v)| v).unwrap()
    };
    for i in 1..=3 {
        m.update(&at(i, false));
    }
    assert!(m.procs.contains_key(&10) && m.group_of(&key(10, 10)).is_some());
    assert!(m.nodes[0].cpu_demand > 0.4, "{}", m.nodes[0].cpu_demand);
    assert_eq!((table(&m, "model.procs"), table(&m, "model.tasks")), (2, 3));
    m.update(&at(4, true));
    assert!(!m.procs.contains_key(&10), "a zombie is still a process of the model");
    assert!(!m.tasks.contains_key(&key(10, 10)) && m.group_of(&key(10, 10)).is_none());
    assert!(m.groups.groups.values().all(|g| !g.pids.contains(&10)));
    assert_eq!(m.nodes[0].cpu_demand, 0.0);
    assert_eq!((table(&m, "model.procs"), table(&m, "model.tasks")), (1, 2));
    assert_eq!(m.procs[&20].tids, vec![20, 21], "a zombie leader whose thread runs on is a live process");
}

/// Pinned: a thread whose allowed CPUs do not cover its allowed nodes' CPUs (taskset -c 0-1 on a
/// 2 x 2-CPU machine with both nodes allowed) makes its process pinned, also beside an unpinned
/// thread (a program pinning one worker placed itself: the daemon refuses such a process, so the
/// policy must not plan it); a process none of whose threads is narrowed is not.
#[test]
fn pinned_by_cpu_affinity() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = Sb::new(&topo, 0)
        .proc(70, 5, "pinned", &[GIB, 0])
        .thread(70, 70, 0, 0, 0)
        .allowed(70, 70, &[0, 1])
        .thread(70, 71, 0, 0, 0)
        .allowed(70, 71, &[0, 1])
        .proc(80, 5, "half", &[GIB, 0])
        .thread(80, 80, 0, 0, 0)
        .allowed(80, 80, &[0, 1])
        .thread(80, 81, 0, 0, 0)
        .proc(90, 5, "free", &[GIB, 0])
        .thread(90, 90, 0, 0, 0)
        .thread(90, 91, 0, 0, 0)
        .build();
    m.update(&s);
    assert!(m.procs[&70].pinned);
    assert!(m.procs[&80].pinned, "one self-pinned thread pins its process");
    assert!(!m.procs[&90].pinned);
}

/// Confined, not pinned: a process whose threads are as wide as a narrow cpuset (a container
/// given CPUs 1-2, half of each node of a 2 x 2-CPU machine) placed nothing itself; the model
/// says where its cpuset lets it go. Without the cpuset read the same masks still count as a pin
/// (nothing tells them apart), and a thread narrower than its cpuset pins its process. A cpuset
/// of one node's memory (mems 0, CPUs of node 0) confines a process without pinning it.
#[test]
fn confined_by_a_cpuset_is_not_pinned() {
    let topo = machine(2, 2, 16);
    assert_eq!(topo.cpus_of_nodes(&NodeSet::parse_list("1").unwrap()).to_list(), "2-3");
    let mut m = model(topo.clone());
    let s = Sb::new(&topo, 0)
        .proc(70, 5, "container", &[GIB, 0])
        .thread(70, 70, 0, 0, 1)
        .allowed(70, 70, &[1, 2])
        .thread(70, 71, 0, 0, 2)
        .allowed(70, 71, &[1, 2])
        .cpuset(70, &[1, 2])
        .proc(71, 5, "unread", &[GIB, 0])
        .thread(71, 71, 0, 0, 1)
        .allowed(71, 71, &[1, 2])
        .proc(72, 5, "narrower", &[GIB, 0])
        .thread(72, 72, 0, 0, 1)
        .allowed(72, 72, &[1])
        .thread(72, 73, 0, 0, 1)
        .allowed(72, 73, &[1, 2])
        .cpuset(72, &[1, 2])
        .proc(74, 5, "node0", &[GIB, 0])
        .thread(74, 74, 0, 0, 0)
        .allowed(74, 74, &[0, 1])
        .mems(74, &[0])
        .proc(76, 5, "apart", &[GIB, 0])
        .thread(76, 76, 0, 0, 2)
        .allowed(76, 76, &[2])
        .mems(76, &[0])
        .cpuset(76, &[2, 3])
        .proc(90, 5, "free", &[GIB, 0])
        .thread(90, 90, 0, 0, 0)
        .build();
    m.update(&s);
    assert!(m.procs[&76].pinned, "CPUs on node 1, memory on node 0: a thread narrower than its cpuset's CPUs");
    let c = m.procs[&70].confined.as_ref().expect("confined");
    assert!(!m.procs[&70].pinned);
    assert_eq!((c.cpus.to_list(), c.nodes.to_list()), ("1-2".to_string(), "0-1".to_string()));
    assert!(c.admits(&topo, 0) && c.admits(&topo, 1));
    assert!(m.procs[&71].pinned, "no cpuset read: a mask narrower than its nodes is a pin");
    assert!(m.procs[&72].pinned, "a thread narrower than its cpuset pins its process");
    assert!(!m.procs[&74].pinned);
    let c = m.procs[&74].confined.as_ref().expect("confined to node 0");
    assert_eq!((c.cpus.to_list(), c.nodes.to_list()), ("0-1".to_string(), "0".to_string()));
    assert!(c.admits(&topo, 0) && !c.admits(&topo, 1));
    assert_eq!(m.procs[&90].confined, None);
}

/// Odd input never panics: time going backwards, counters going backwards, a CPU and nodes the
/// topology does not know, an empty sample, a process without threads.
#[test]
fn odd_input_does_not_panic() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let a = Sb::new(&topo, 10 * SEC)
        .proc(10, 5, "a", &[GIB, GIB])
        .thread(10, 10, 5 * SEC, SEC, 0)
        .access(10, 10, 0x1000, 7, 3, 10 * SEC)
        .comm((10, 10), (99, 99), 5)
        .build();
    m.update(&a);
    let mut b = Sb::new(&topo, 3 * SEC)
        .proc(10, 5, "a", &[GIB, GIB])
        .thread(10, 10, SEC, 0, 999)
        .proc(11, 5, "empty", &[0, 0])
        .access(10, 10, 0x1000, 1, 3, SEC)
        .cpu_ticks(&[(5, 5), (5, 5)])
        .build();
    b.nodes.clear();
    m.update(&b);
    let t = &m.tasks[&key(10, 10)];
    assert_eq!(t.cpu_rate, 0.0);
    assert_eq!(t.run_delay, None);
    assert_eq!(t.node, None);
    assert!(m.procs[&11].tids.is_empty());
    m.update(&Sb::new(&topo, 0).build());
    assert!(m.tasks.is_empty() && m.groups.groups.is_empty() && m.graph.edges.is_empty());
}

/// Pinned by memory policy: `numactl --membind=1` shows `bind:1` on every VMA (the task policy);
/// 1000 of 1200 resident pages under bind = 0.83 >= 0.5: pinned. One mbind'ed buffer of 100 of
/// 1100 pages (0.09) is not. numa_maps lines as the kernel writes them (fs/proc/task_mmu.c).
#[test]
fn pinned_by_memory_policy() {
    use numapilot_observe::parse::numa_maps::parse_numa_maps;
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let mut s = Sb::new(&topo, 0)
        .proc(90, 5, "bound", &[0, GIB])
        .thread(90, 90, 0, 0, 0)
        .proc(91, 5, "mbind", &[GIB, 0])
        .thread(91, 91, 0, 0, 0)
        .build();
    s.processes[0].numa_maps = Some(
        parse_numa_maps(
            "7f0000000000 bind:1 anon=1000 dirty=1000 N1=1000 kernelpagesize_kB=4\n\
             7f1000000000 default file=/usr/lib/libc.so.6 mapped=200 N0=200 kernelpagesize_kB=4\n",
        )
        .unwrap(),
    );
    s.processes[1].numa_maps = Some(
        parse_numa_maps(
            "7f0000000000 interleave:0-1 anon=100 dirty=100 N0=50 N1=50 kernelpagesize_kB=4\n\
             7f1000000000 default anon=1000 dirty=1000 N0=1000 kernelpagesize_kB=4\n",
        )
        .unwrap(),
    );
    m.update(&s);
    assert!(m.procs[&90].pinned);
    assert!(!m.procs[&91].pinned);
}

/// The memory of a process that other processes map too (numa_maps' `mapmax` > 1, carried as
/// `NodeUsage::shared_kb`) is kept per node beside its resident memory, and its own memory is the
/// rest: the part a page move of this process can move.
#[test]
fn memory_other_processes_map_too_is_kept_apart() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let mut s = Sb::new(&topo, SEC).proc(10, 5, "a", &[GIB, 2 * GIB]).thread(10, 10, 0, 0, 0).build();
    for u in &mut s.processes[0].node_usage {
        u.shared_kb = if u.node == 1 { GIB / 1024 } else { 0 };
    }
    m.update(&s);
    let p = &m.procs[&10];
    assert_eq!(p.mem_by_node, vec![GIB, 2 * GIB]);
    assert_eq!(p.shared_by_node, vec![0, GIB]);
    assert_eq!(p.own_mem_by_node(), vec![GIB, GIB]);
    // None shared: nothing kept, all of it its own.
    let s = Sb::new(&topo, 2 * SEC).proc(10, 5, "a", &[GIB, 2 * GIB]).thread(10, 10, 0, 0, 0).build();
    m.update(&s);
    let p = &m.procs[&10];
    assert!(p.shared_by_node.is_empty());
    assert_eq!(p.own_mem_by_node(), vec![GIB, 2 * GIB]);
}

/// Guards the saturating sums: two communication records of u64::MAX events for one pair (a
/// checked sum panics in debug builds, wraps in release), and two processes of RSS ~u64::MAX / 2
/// bytes: saturated, the pair is a full-strength edge, and the merge the edge asks for is refused
/// by the memory cap (no node holds 2^63 bytes), not computed with a wrapped sum.
#[test]
fn huge_counts_saturate_instead_of_overflowing() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    for i in 1..=6u64 {
        let mut s = Sb::new(&topo, i * SEC)
            .proc(10, 5, "a", &[GIB, 0])
            .thread(10, 10, 0, 0, 0)
            .proc(20, 5, "b", &[GIB, 0])
            .thread(20, 20, 0, 0, 0)
            .comm((10, 10), (20, 20), u64::MAX)
            .comm((20, 20), (10, 10), u64::MAX)
            .build();
        for p in &mut s.processes {
            p.rss_kb = Some(u64::MAX / 2048);
        }
        m.update(&s);
    }
    let e = &m.graph.edges[&(key(10, 10), key(20, 20))];
    assert!(e.comm > 0.2 && e.comm <= 1.0, "{e:?}");
    let g = m.group_of(&key(10, 10)).unwrap();
    assert_eq!(g.tasks.len(), 1);
    assert_eq!(g.mem_bytes, (u64::MAX / 2048) * 1024);
    assert_eq!(m.groups.refused_merges, 1);
}

/// Guards that the smoothing weight follows the age of the old estimate, not the model period.
/// Thread sampled 100% on node 1 at t = 1 s, then 20 sample-less periods of 1 s, then 100% on
/// node 0 at t = 22 s. The old estimate is 21 s = 10.5 half-lives (2 s) old: it weighs
/// 2^-10.5 = 0.000691, so access = [1 - 0.000691, 0.000691] (with the period as dt it would be
/// [0.29, 0.71]).
#[test]
fn smoothing_weighs_the_old_estimate_by_its_age() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = |t: u64, node: Option<u32>| {
        let b = Sb::new(&topo, t).proc(30, 5, "x", &[GIB, GIB]).thread(30, 31, 0, 0, 0);
        match node {
            Some(n) => b.access(30, 31, 0x4000_0000, n, 10, t).build(),
            None => b.build(),
        }
    };
    m.update(&s(SEC, Some(1)));
    for t in 2..=21 {
        m.update(&s(t * SEC, None));
    }
    assert_eq!(m.tasks[&key(30, 31)].access, vec![0.0, 1.0], "kept through the pause");
    m.update(&s(22 * SEC, Some(0)));
    let a = &m.tasks[&key(30, 31)].access;
    assert!((a[1] - 0.000_690_533_966).abs() < 1e-9, "{a:?}");
    assert!((a[0] + a[1] - 1.0).abs() < 1e-12);
}

/// Guards the bound on the RSS history: a replay whose clock stands still (50 samples all at
/// t = 5 s) or goes back keeps one point per distinct time inside the window, not one per update.
#[test]
fn rss_history_stays_bounded_when_the_clock_stands_still() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = |t: u64| Sb::new(&topo, t).proc(10, 5, "a", &[GIB, 0]).thread(10, 10, 0, 0, 0).build();
    m.update(&s(4 * SEC));
    for _ in 0..50 {
        m.update(&s(5 * SEC));
    }
    assert_eq!(m.rss_history_points(), 2, "t = 4 s and 5 s");
    m.update(&s(3 * SEC));
    assert_eq!(m.rss_history_points(), 1, "the clock went back: only t = 3 s");
}

/// Model::try_new names the bad tunable; the defaults pass.
#[test]
fn try_new_rejects_invalid_tunables() {
    let topo = machine(2, 2, 16);
    let bad = numapilot_model::Tunables { comm_full_events_per_s: 0.0, ..numapilot_model::Tunables::default() };
    let e = numapilot_model::Model::try_new(topo.clone(), bad).unwrap_err();
    assert_eq!(e.field, "comm_full_events_per_s");
    assert!(numapilot_model::Model::try_new(topo, numapilot_model::Tunables::default()).is_ok());
}

/// Guards the per-thread CPU clamp: run_ns advances 1.5 s over a 1 s interval (read skew): the
/// thread's rate is 1.0 (one thread, one CPU), and so is its process's.
#[test]
fn a_threads_cpu_rate_is_at_most_one() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    for (i, run) in [(1u64, 0u64), (2, 1_500_000_000)] {
        m.update(&Sb::new(&topo, i * SEC).proc(10, 5, "a", &[GIB, 0]).thread(10, 10, run, 0, 0).build());
    }
    assert_eq!(m.tasks[&key(10, 10)].cpu_rate, 1.0);
    assert_eq!(m.procs[&10].cpu_rate, 1.0);
}

/// Hot ranges decay with the access half-life (2 s: x 2^-0.5 per 1 s period) and are dropped once
/// they round to 0 samples. At t = 1 s thread 11 draws 40 samples in bucket A (node 1) and 10 in
/// bucket B (node 0), never again. A: 40, 28.28, 20, 14.14, 10, ... 40 x 2^-6 = 0.625 (rounds to 1)
/// at t = 13 s, 0.442 at t = 14 s: gone. B: 10 x 2^-4 = 0.625 at t = 9 s, 0.442 at t = 10 s: gone.
/// The process's and the thread's lists agree (one thread), hottest first.
#[test]
fn hot_ranges_decay_and_are_dropped() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let (a, b) = (0x7f00_0000_0000u64, 0x7f00_4000_0000u64);
    for t in 1..=14u64 {
        let mut s = Sb::new(&topo, t * SEC).proc(10, 5, "x", &[GIB, GIB]).thread(10, 11, 0, 0, 0);
        if t == 1 {
            s = s.access(10, 11, a, 1, 40, SEC).access(10, 11, b, 0, 10, SEC);
        }
        m.update(&s.build());
        let hot: Vec<(u64, u32, u64)> = m.procs[&10].hot.iter().map(|h| (h.start, h.node, h.samples)).collect();
        let want: Vec<(u64, u32, u64)> = match t {
            1 => vec![(a, 1, 40), (b, 0, 10)],
            3 => vec![(a, 1, 20), (b, 0, 5)],
            9 => vec![(a, 1, 3), (b, 0, 1)],
            10 => vec![(a, 1, 2)],
            13 => vec![(a, 1, 1)],
            14 => vec![],
            _ => continue,
        };
        assert_eq!(hot, want, "t = {t} s");
        let thread: Vec<(u64, u32, u64)> =
            m.tasks[&key(10, 11)].hot.iter().map(|h| (h.start, h.node, h.samples)).collect();
        assert_eq!(thread, want);
        assert!(m.procs[&10].hot.iter().all(|h| h.len == 2 << 20));
    }
}

/// The live observer carries a process that did not run: the same thread counters again, under
/// the `read_ns` of their read. Worked by hand (process 30, 3 GiB on node 0 and 1 GiB on node 1):
/// at 0 s and 1 s thread 31 is read (0.5 s of CPU, 0.1 s of delay over 1 s: rate 0.5, delay 0.1);
/// at 2 s and 3 s the same read is carried (rate 0 over no interval, no delay, shares 0.75 /
/// 0.25; the view of 3 s equals that of 2 s); at 4 s still carried but numa_maps moved the memory
/// to 1 GiB / 3 GiB (shares 0.25 / 0.75: a settled view follows its process's memory); at 5 s it
/// is read again with 0.8 s more CPU since its read at 1 s (rate 0.8 / 4 = 0.2: the carried
/// updates kept the counters of 1 s). Fails if a carried read is given a rate, if a settled view
/// misses a memory change, or if the carried updates lose the counters' time.
#[test]
fn carried_reads_settle_follow_memory_and_keep_the_counters_time() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let at = |t: u64, read: u64, run: u64, wait: u64, mem: [u64; 2]| {
        let mut s = Sb::new(&topo, t * SEC).proc(30, 100, "app", &mem).thread(30, 31, run, wait, 1).build();
        s.processes[0].read_ns = read * SEC;
        s
    };
    let first = [3 * GIB, GIB];
    m.update(&at(0, 0, 1_000_000_000, 0, first));
    m.update(&at(1, 1, 1_500_000_000, 100_000_000, first));
    let t = &m.tasks[&key(30, 31)];
    assert!((t.cpu_rate - 0.5).abs() < 1e-12 && (t.run_delay.unwrap() - 0.1).abs() < 1e-12, "{t:?}");
    m.update(&at(2, 1, 1_500_000_000, 100_000_000, first));
    let carried = m.tasks[&key(30, 31)].clone();
    assert_eq!(carried.cpu_rate, 0.0);
    assert_eq!(carried.run_delay, None);
    assert_eq!(carried.access, vec![0.75, 0.25]);
    assert_eq!(m.procs[&30].cpu_rate, 0.0);
    m.update(&at(3, 1, 1_500_000_000, 100_000_000, first));
    assert_eq!(m.tasks[&key(30, 31)], carried, "a carried read leaves a settled view as it was");
    assert_eq!(m.procs[&30].tids, vec![31]);
    m.update(&at(4, 1, 1_500_000_000, 100_000_000, [GIB, 3 * GIB]));
    assert_eq!(m.tasks[&key(30, 31)].access, vec![0.25, 0.75], "the shares follow the process's memory");
    m.update(&at(5, 5, 2_300_000_000, 100_000_000, [GIB, 3 * GIB]));
    let t = &m.tasks[&key(30, 31)];
    assert!((t.cpu_rate - 0.2).abs() < 1e-12, "0.8 s of CPU over the 4 s since the read at 1 s: {t:?}");
    assert_eq!(t.run_delay, Some(0.0));
    assert_eq!(t.first_seen_ns, 0);
}
