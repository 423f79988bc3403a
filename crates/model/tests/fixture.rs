//! The model over real captures: fixtures/rig-6.12-4node (a 4-node 6.12 guest with NUMA
//! balancing on; process 240's threads have NUMA-fault statistics, the others have none), and the
//! same checks over every other capture in fixtures/.

mod common;

use std::path::PathBuf;

use numapilot_model::{AccessSource, Model, Tunables};
use numapilot_observe::{ReadOptions, Reader, SchedMode};
use numapilot_topology::Topology;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

#[test]
fn derived_views_of_the_4node_capture_are_sane() {
    let any_faults = check(&fixtures().join("rig-6.12-4node"));
    assert!(any_faults, "pid 240 has faults");
}

#[test]
fn derived_views_of_every_capture_are_sane() {
    let mut n = 0;
    for e in std::fs::read_dir(fixtures()).unwrap() {
        let p = e.unwrap().path();
        if p.join("proc").is_dir() && p.join("sys").is_dir() {
            check(&p);
            n += 1;
        }
    }
    assert!(n >= 4, "only {n} captures");
}

/// Runs two updates over the capture and checks the views; returns whether any thread had
/// fault-based access shares.
fn check(root: &std::path::Path) -> bool {
    let topo = Topology::from_sysfs(root).unwrap();
    let reader = Reader::with_options(root, ReadOptions { sched: SchedMode::Always, ..ReadOptions::default() });
    let s0 = reader.sample().unwrap();
    let mut m = Model::new(topo.clone(), Tunables::default());
    m.update(&s0);
    // A second observation one second later with the same counters: rates are 0, loads known.
    let mut s1 = s0.clone();
    s1.monotonic_ns += 1_000_000_000;
    s1.boottime_ns += 1_000_000_000;
    for p in &mut s1.processes {
        p.read_ns += 1_000_000_000;
    }
    m.update(&s1);

    let user_threads: usize = s0.processes.iter().filter(|p| !p.kernel_thread).map(|p| p.threads.len()).sum();
    assert!(user_threads > 0);
    assert_eq!(m.tasks.len(), user_threads);
    assert_eq!(m.procs.len(), s0.processes.iter().filter(|p| !p.kernel_thread).count());
    for (k, t) in &m.tasks {
        let th = s0.process(k.pid).unwrap().threads.iter().find(|x| x.tid == k.tid).unwrap();
        let faults: u64 = th
            .sched
            .as_ref()
            .and_then(|s| s.numa.as_ref())
            .map_or(0, |n| n.faults.iter().map(|f| f.task_private + f.task_shared).sum());
        if faults > 0 {
            assert_eq!(t.access_source, AccessSource::NumaFaults, "{k:?}");
            assert_eq!(t.access_samples, faults);
        } else {
            assert_eq!(t.access_source, AccessSource::Residency, "{k:?}");
        }
        let sum: f64 = t.access.iter().sum();
        assert!(sum == 0.0 || (sum - 1.0).abs() < 1e-9, "{k:?}: {:?}", t.access);
        assert_eq!(t.cpu_rate, 0.0);
        assert_eq!(t.node, topo.cpu(th.last_cpu()).map(|c| c.node));
    }
    for p in m.procs.values() {
        let sp = s0.process(p.pid).unwrap();
        let numa_maps: u64 = sp.node_usage.iter().map(|u| u.total_kb() * 1024).sum();
        assert_eq!(p.mem_by_node.iter().sum::<u64>(), numa_maps);
        assert_eq!(p.rss_bytes, sp.rss_kb.unwrap() * 1024);
        assert!(p.age_at_first_seen_ns > 0);
    }
    // Groups cover every task once; memory adds up.
    let count: usize = m.groups.groups.values().map(|g| g.tasks.len()).sum();
    assert_eq!(count, m.tasks.len());
    let mem: u64 = m.groups.groups.values().map(|g| g.mem_bytes).sum();
    let rss: u64 = m.procs.values().filter(|p| !p.tids.is_empty()).map(|p| p.rss_bytes).sum();
    assert_eq!(mem, rss);
    // Nodes: memory from nodeN/meminfo, CPU known on nodes with CPUs (idle between two equal
    // counters: /proc/stat did not move, so the load falls back to task rates: 0).
    for n in &m.nodes {
        let i = topo.node_idx(n.node).unwrap();
        let ns = s0.nodes.iter().find(|x| x.node == n.node).unwrap();
        assert_eq!(n.mem_total_bytes, ns.meminfo.mem_total_kb().unwrap() * 1024);
        // Free = MemFree + Inactive(file) + SReclaimable from the real node meminfo.
        let get = |k: &str| ns.meminfo.get(k).unwrap();
        let free = get("MemFree") + get("Inactive(file)") + get("SReclaimable");
        assert_eq!(n.mem_free_bytes, free.min(get("MemTotal")) * 1024);
        assert!(n.mem_free_bytes > ns.mem_free_kb().unwrap() * 1024, "a live capture has some page cache");
        assert!(n.mem_capacity.known && n.mem_capacity.load > 0.0 && n.mem_capacity.load < 1.0);
        assert_eq!(n.cpu.known, !topo.nodes[i].cpus.is_empty());
        assert_eq!(n.cpu.load, 0.0);
    }
    m.tasks.values().any(|t| t.access_source == AccessSource::NumaFaults)
}
