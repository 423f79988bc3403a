//! A tiny policy driven only through `numapilot_policy::Host`, against `SimHost`.

use numapilot_policy::{Action, ActionKind, Host, Outcome, Reason, TaskRef};
use numapilot_sim::engine::{Baseline, Machine, Sim, SimOptions};
use numapilot_sim::workload::autonuma_bench;
use numapilot_sim::SimHost;
use numapilot_topology::NodeSet;

/// "Memory follows the threads": for each process, the node where most of its threads last ran;
/// pin the process there and migrate its pages from every other node. Uses only the Host trait.
fn follow_threads(host: &mut dyn Host) -> Vec<Outcome> {
    let sample = host.sample().unwrap();
    let topo = host.topology().clone();
    let mut plan = Vec::new();
    for (i, p) in sample.processes.iter().enumerate() {
        // numa01 has two processes: send them to different nodes, as a placement policy would.
        let node = topo.nodes[i % topo.nodes.len()].id;
        let others: NodeSet = topo.node_ids().iter().filter(|&n| n != node).collect();
        let target = TaskRef { pid: p.pid, tid: None, starttime: p.starttime };
        let cpus = topo.cpus_of_nodes(&[node].into_iter().collect());
        plan.push(Action {
            target,
            kind: ActionKind::SetAffinity { cpus },
            reason: Reason::new("test", format!("process {} to node {node}", p.pid)),
        });
        plan.push(Action {
            target,
            kind: ActionKind::MigratePages { from: others, to: [node].into_iter().collect(), max_pages: None },
            reason: Reason::new("test", "memory follows"),
        });
    }
    plan.iter().map(|a| host.apply(a)).collect()
}

fn host(policy: Baseline) -> SimHost {
    let m = Machine::preset("autonuma-2s12c-24g").unwrap();
    let spec = autonuma_bench::spec("numa01", &m.topo, 0.05).unwrap();
    SimHost::new(Sim::new(&m, &spec, policy, 1, &SimOptions::default()).unwrap())
}

#[test]
fn sample_looks_like_the_live_system() {
    let mut h = host(Baseline::Default);
    h.advance(1_000_000_000);
    let s = h.sample().unwrap();
    assert_eq!(s.processes.len(), 2);
    assert_eq!(s.clock_ticks_per_sec, 100);
    let p = &s.processes[0];
    assert_eq!(p.threads.len(), 12);
    assert_eq!(p.stat.num_threads, 12);
    // numa01 starts all memory on node 0: 3 GiB = 786432 pages there.
    let maps = p.numa_maps.as_ref().unwrap();
    assert_eq!(maps.vmas.len(), 1);
    let kb: u64 = p.node_usage.iter().filter(|u| u.node == 0).map(|u| u.total_kb()).sum();
    assert_eq!(kb, 3 << 20);
    assert_eq!(p.rss_kb, Some(3 << 20));
    // About one second of CPU per thread after one simulated second (100 ticks).
    for t in &p.threads {
        assert!((95..=100).contains(&t.stat.utime), "utime {}", t.stat.utime);
        assert!(t.cpus_allowed().contains(t.last_cpu()));
    }
    let used: u64 = s.nodes.iter().map(|n| n.meminfo.get("MemUsed").unwrap_or(0)).sum();
    assert_eq!(used, 6 << 20);
    assert!(p.threads[0].sched.is_none(), "no NUMA block without balancing");
}

#[test]
fn autonuma_runs_show_sched_numa_blocks() {
    let mut h = host(Baseline::AutoNuma);
    h.advance(3_000_000_000);
    let s = h.sample().unwrap();
    let sched = s.processes[0].threads[0].sched.as_ref().expect("sched file with the NUMA block");
    let numa = sched.numa.as_ref().expect("NUMA block");
    assert_eq!(numa.faults.len(), 2);
    assert_eq!(s.numa_balancing, Some(1));
    assert!(s.vmstat.get("numa_hint_faults").unwrap_or(0) > 0);
}

#[test]
fn a_policy_through_the_trait_makes_accesses_local() {
    let mut h = host(Baseline::Default);
    h.advance(500_000_000);
    let before = h.sim().local_access_pct();
    let outcomes = follow_threads(&mut h);
    assert_eq!(outcomes.len(), 4);
    assert_eq!(outcomes[0], Outcome::Applied { pages_moved: 0 });
    // Process 0 already has all its memory on node 0; process 1 moves its 3 GiB to node 1.
    assert_eq!(outcomes[1], Outcome::Applied { pages_moved: 0 });
    assert_eq!(outcomes[3], Outcome::Applied { pages_moved: 3 << 18 });
    assert_eq!(h.sim().kernel.pages_migrated, 3 << 18);
    // The copies cost time: process 1's threads stall.
    assert!(h.sim().kernel.tasks[12..].iter().all(|t| t.stall_ns > 0));
    h.sim().check_invariants().unwrap();
    h.advance(1_000_000_000);
    let s = h.sample().unwrap();
    for t in &s.processes[1].threads {
        assert!(h.topology().cpu(t.last_cpu()).unwrap().node == 1);
    }
    let after = h.sim().local_access_pct();
    assert!(after > before, "local access {before:.1}% -> {after:.1}%");
}

#[test]
fn stale_and_bad_actions_are_vanished_or_refused() {
    let mut h = host(Baseline::Default);
    h.advance(100_000_000);
    let s = h.sample().unwrap();
    let p = &s.processes[0];
    let stale = TaskRef { pid: p.pid, tid: None, starttime: p.starttime + 1 };
    let a = Action {
        target: stale,
        kind: ActionKind::SetAffinity { cpus: numapilot_topology::CpuSet::parse_list("0").unwrap() },
        reason: Reason::new("t", ""),
    };
    assert_eq!(h.apply(&a), Outcome::Vanished);
    let good = TaskRef { pid: p.pid, tid: Some(p.threads[0].tid), starttime: p.starttime };
    let a = Action {
        target: good,
        kind: ActionKind::SetAffinity { cpus: numapilot_topology::CpuSet::parse_list("100").unwrap() },
        reason: Reason::new("t", ""),
    };
    assert!(matches!(h.apply(&a), Outcome::Refused { .. }));
    let a = Action {
        target: good,
        kind: ActionKind::MoveRanges { ranges: vec![(0x1000, 8192)], to: 1 },
        reason: Reason::new("t", ""),
    };
    assert_eq!(h.apply(&a), Outcome::Partial { pages_moved: 0, failed: vec![("EFAULT".into(), 2)] });
    // A range inside the buffer moves the regions it overlaps (2 MiB granules).
    let base = p.numa_maps.as_ref().unwrap().vmas[0].start;
    let a = Action {
        target: good,
        kind: ActionKind::MoveRanges { ranges: vec![(base + 4096, 3 << 20)], to: 1 },
        reason: Reason::new("t", ""),
    };
    assert_eq!(h.apply(&a), Outcome::Applied { pages_moved: 1024 });
}
