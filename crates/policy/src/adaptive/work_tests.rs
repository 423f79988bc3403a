//! How the decision's work grows with the load, counted (`crate::work`), not timed: each test
//! decides on a synthetic load at two sizes and checks that the counted work grows in
//! proportion (a loop over every task per task grows with the square and fails by far).

use std::sync::Arc;

use numapilot_model::{HotRange, Model, Tunables};
use numapilot_observe::{
    CommKind, CommSample, NodeSample, NodeUsage, ProcessSample, Sample, SchedStat, TaskStat, ThreadSample,
};
use numapilot_topology::{NodeSet, Topology};

use crate::{Adaptive, Policy};

/// A load of `procs` processes x `threads` threads on 4 nodes x 8 CPUs, every thread busy 30%
/// of a CPU, all on node 0's CPUs; step `step` (1 s apart). Process start times are 1 s after
/// boot, so every process is young at the first steps. With `pairs`, the first half of each
/// process's threads wake each other in pairs (an affinity edge each), the others have none.
fn sample(topo: &Topology, step: u64, procs: u32, threads: u32, pairs: bool) -> Sample {
    let t = step * 1_000_000_000;
    let all_cpus = Arc::new(topo.online_cpus());
    let all_nodes: Arc<NodeSet> = Arc::new(topo.node_ids());
    let stat = |pid: u32, ticks: u64, cpu: u32| TaskStat {
        pid,
        comm: "worker".into(),
        state: 'R',
        ppid: 1,
        utime: ticks,
        priority: 20,
        num_threads: threads,
        starttime: 100,
        processor: cpu,
        ..TaskStat::default()
    };
    let mut comm = Vec::new();
    let processes = (0..procs)
        .map(|p| {
            let pid = 1000 + p * (threads + 1);
            let run = step * 300_000_000;
            let ts = (0..threads)
                .map(|k| ThreadSample {
                    tid: pid + k,
                    stat: stat(pid + k, run / 10_000_000, (p * threads + k) % 8),
                    cpus_allowed: all_cpus.clone(),
                    mems_allowed: all_nodes.clone(),
                    voluntary_ctxt_switches: None,
                    nonvoluntary_ctxt_switches: None,
                    sched: None,
                    schedstat: Some(SchedStat { run_ns: run, wait_ns: step * 10_000_000, timeslices: 1 }),
                })
                .collect();
            if pairs {
                for k in (0..threads / 2).step_by(2) {
                    comm.push(CommSample {
                        a: (pid, pid + k),
                        b: (pid, pid + k + 1),
                        kind: CommKind::Wakeup,
                        events: 700,
                    });
                }
            }
            let node_usage = topo
                .nodes
                .iter()
                .map(|n| NodeUsage {
                    node: n.id,
                    huge_kb: 0,
                    heap_kb: 0,
                    stack_kb: 0,
                    anon_kb: 64 * 1024,
                    file_kb: 0,
                    shared_kb: 0,
                })
                .collect();
            ProcessSample {
                pid,
                starttime: 100,
                comm: "worker".into(),
                kernel_thread: false,
                read_ns: t,
                stat: stat(pid, 0, 0),
                rss_kb: Some(256 * 1024),
                numa_maps: None,
                numa_maps_error: None,
                node_usage,
                threads: ts,
                cpuset_cpus: None,
            }
        })
        .collect();
    let nodes = topo.nodes.iter().map(NodeSample::from_topology).collect();
    Sample { processes, nodes, numa_balancing: Some(0), comm, ..Sample::empty_at(t) }
}

/// The work counted over the first four decisions on the load (its processes young in the first
/// three).
/// With `cold`, every process has one hot 2 MiB bucket, sampled 3 times, of its 256 MiB: its
/// memory is mostly cold (rule cold-memory-stays), so its units are sized by accessed memory.
fn work(procs: u32, threads: u32, pairs: bool) -> std::collections::BTreeMap<&'static str, u64> {
    work_with(procs, threads, pairs, false)
}

fn work_with(procs: u32, threads: u32, pairs: bool, cold: bool) -> std::collections::BTreeMap<&'static str, u64> {
    work_on(Topology::uniform(4, 8, 64 << 20, 21), procs, threads, pairs, cold)
}

fn work_on(
    mut topo: Topology,
    procs: u32,
    threads: u32,
    pairs: bool,
    cold: bool,
) -> std::collections::BTreeMap<&'static str, u64> {
    for n in &mut topo.nodes {
        n.mem_free_kb = 32 << 20;
    }
    let mut model = Model::new(topo.clone(), Tunables::default());
    let mut policy = Adaptive::new();
    crate::work::take();
    let mut actions = 0;
    for step in 1..5 {
        model.update(&sample(&topo, step, procs, threads, pairs));
        if cold {
            for p in model.procs.values_mut() {
                p.hot = vec![HotRange { start: 0x7f00_0000_0000, len: 2 << 20, node: 0, samples: 3 }];
            }
        }
        actions += policy.decide(&model).actions.len();
    }
    assert!(actions > 0, "the load is one the policy acts on");
    crate::work::take()
}

/// `name`'s count at 4 x the size over its count at the size: about 4 when linear, 16 when
/// quadratic. Both counts must be non-zero (the loop measured ran).
fn growth(
    small: &std::collections::BTreeMap<&'static str, u64>,
    large: &std::collections::BTreeMap<&'static str, u64>,
    name: &str,
) -> f64 {
    let (s, l) = (small.get(name).copied().unwrap_or(0), large.get(name).copied().unwrap_or(0));
    assert!(s > 0 && l > 0, "{name}: counted {s} and {l}: the loop did not run");
    l as f64 / s as f64
}

#[test]
fn balancing_one_process_of_many_threads_works_per_move() {
    // One process of 150 and of 600 threads, 45 and 180 CPUs of demand on 32 CPUs, all on node
    // 0: the balancer moves threads off the busiest node one at a time. A quarter of the threads
    // have an edge each. Looking at every candidate on the node, scoring each against every mate
    // and formatting each one's explanation grew with the threads at each move: per move, the
    // candidates looked at and the edges looked up must not grow with the threads, and one
    // explanation is written.
    let small = work(1, 150, true);
    let large = work(1, 600, true);
    let per_move = |w: &std::collections::BTreeMap<&'static str, u64>, name: &str| {
        let moves = w.get("balance.moves").copied().unwrap_or(0);
        assert!(moves > 0, "the balancer moved threads: {w:?}");
        w.get(name).copied().unwrap_or(0) as f64 / moves as f64
    };
    for w in [&small, &large] {
        assert_eq!(per_move(w, "balance.explanations"), 1.0, "{w:?}");
    }
    for name in ["balance.mate_terms", "balance.candidates"] {
        let (s, l) = (per_move(&small, name), per_move(&large, name));
        assert!(s > 0.0, "{name}: none counted ({small:?})");
        assert!(l < 2.0 * s, "{name} per move: {s:.1} at 150 threads, {l:.1} at 600 ({small:?} -> {large:?})");
    }
}

#[test]
fn balancing_threads_without_edges_looks_up_no_edge() {
    // Without edges a thread's mean strength to its mates is the prior times the share of them
    // in its process: counted, not looked up pair by pair.
    let w = work(1, 300, false);
    assert!(w.get("balance.moves").copied().unwrap_or(0) > 0, "the balancer moved threads: {w:?}");
    assert_eq!(w.get("balance.mate_terms"), None, "{w:?}");
}

#[test]
fn standing_orders_grow_linearly_with_processes() {
    // 200 and 800 young processes of 2 threads: each is checked for a standing order, which
    // skips the processes the plan acts on. Looking through the plan's actions for each process
    // grew with processes x actions.
    let small = work(200, 2, false);
    let large = work(800, 2, false);
    let g = growth(&small, &large, "standing.actions_looked_at");
    assert!(g < 6.0, "standing.actions_looked_at grew {g:.1} x for 4 x the processes ({small:?} -> {large:?})");
}

#[test]
fn units_of_one_process_walk_its_threads_once() {
    // One process of 150 and of 600 threads with mostly cold memory, in groups of a node's size:
    // each group's memory is its share of the process's accessed memory, by CPU. Every group
    // walked all the process's threads for the total: groups x threads.
    let small = work_with(1, 150, false, true);
    let large = work_with(1, 600, false, true);
    let g = growth(&small, &large, "units.process_threads");
    assert!(g < 6.0, "units.process_threads grew {g:.1} x for 4 x the threads ({small:?} -> {large:?})");
}

#[test]
fn capacity_grows_with_the_cpus_not_nodes_times_cpus() {
    // 16 nodes of 8 CPUs and 64 of 8: each node's cores are counted from its own CPUs. Walking
    // every CPU of the machine for each node grew with nodes x CPUs (16 x for 4 x the machine).
    let small = work_on(Topology::uniform(16, 8, 64 << 20, 21), 20, 2, false, false);
    let large = work_on(Topology::uniform(64, 8, 64 << 20, 21), 20, 2, false, false);
    let g = growth(&small, &large, "capacity.cpus_looked_at");
    assert!(g < 6.0, "capacity.cpus_looked_at grew {g:.1} x for 4 x the CPUs ({small:?} -> {large:?})");
}

#[test]
fn a_balanced_machine_costs_the_balancer_one_sum() {
    // 5 processes of 2 threads, 3 CPUs of demand on node 0 of 4 nodes of 8 CPUs, no node over
    // its capacity: the balancer adds up each node's demand and stops, without the tables a move
    // needs (built for every task, they made a decision that moved nothing 10-25% slower at
    // 10,000 processes).
    let w = work(5, 2, false);
    assert_eq!(w.get("balance.moves"), None, "{w:?}");
    assert_eq!(w.get("balance.prepared"), None, "{w:?}");
}
