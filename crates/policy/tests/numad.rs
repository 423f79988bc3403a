//! The numad-like baseline on hand-built models: each rule of numad's heuristic with its expected
//! trace worked out by hand in the comments.
//!
//! The machine: 2 nodes of 4 CPUs and 8 GiB (8192 MiB), distance 10 local, 20 remote. Default
//! tunables: RSS > 300 MiB, CPU > 0.5, target utilisation 85%, interval 5..15 s, re-evaluation
//! after 300 s, in place at >= 90% of the memory on the bound nodes.

use numapilot_model::{Model, ProcView, ProcessClass, Tunables};
use numapilot_policy::{Action, ActionKind, Numad, Outcome, Plan, Policy};
use numapilot_topology::{Cpu, CpuSet, Node, NodeSet, Topology};

const MIB: u64 = 1 << 20;
const SEC: u64 = 1_000_000_000;

fn machine() -> Topology {
    let (nodes, cpus, mem_kb) = (2u32, 4u32, 8u64 << 20);
    let mut ns = Vec::new();
    let mut cs = Vec::new();
    for n in 0..nodes {
        let set: CpuSet = (n * cpus..(n + 1) * cpus).collect();
        for c in n * cpus..(n + 1) * cpus {
            cs.push(Cpu {
                id: c,
                node: n,
                package: n,
                die: 0,
                core: c,
                siblings: std::iter::once(c).collect(),
                llc: Some(set.clone()),
                online: true,
            });
        }
        ns.push(Node { id: n, cpus: set, mem_total_kb: mem_kb, mem_free_kb: mem_kb });
    }
    let distances = (0..nodes).map(|i| (0..nodes).map(|j| if i == j { 10 } else { 20 }).collect()).collect();
    Topology { possible: (0..nodes).collect(), nodes: ns, distances, cpus: cs, devices: vec![] }
}

/// A model at time `now_s` with node CPU demand and free memory (MiB) as given.
fn model(now_s: u64, demand: [f64; 2], free_mib: [u64; 2]) -> Model {
    let mut m = Model::new(machine(), Tunables::default());
    m.now_ns = now_s * SEC;
    m.updates = 2;
    for (i, n) in m.nodes.iter_mut().enumerate() {
        n.cpu_demand = demand[i];
        n.mem_total_bytes = 8192 * MIB;
        n.mem_free_bytes = free_mib[i] * MIB;
    }
    m
}

/// Adds a process: `mem_mib` per node, `cpu` CPUs over `threads` threads.
fn add(m: &mut Model, pid: u32, starttime: u64, mem_mib: [u64; 2], cpu: f64, threads: u32) {
    let mem_by_node: Vec<u64> = mem_mib.iter().map(|x| x * MIB).collect();
    m.procs.insert(
        pid,
        ProcView {
            pid,
            starttime,
            comm: format!("p{pid}"),
            tids: (pid..pid + threads).collect(),
            rss_bytes: mem_by_node.iter().sum(),
            mem_by_node,
            growth_bytes_per_s: 0.0,
            cpu_rate: cpu,
            pinned: false,
            class: ProcessClass::Unclassified,
            hot: Vec::new(),
            first_seen_ns: 0,
            age_at_first_seen_ns: 0,
            history_ns: 0,
            traffic_bytes_per_s_per_thread: 0.0,
        },
    );
}

fn nodes(ids: &[u32]) -> NodeSet {
    ids.iter().copied().collect()
}

/// (pid, kind, nodes) of every action: `affinity` with the CPUs' nodes, `migrate` with from -> to.
fn summary(m: &Model, plan: &Plan) -> Vec<(u32, String)> {
    plan.actions
        .iter()
        .map(|a: &Action| {
            let what = match &a.kind {
                ActionKind::SetAffinity { cpus } => format!("affinity {}", m.topo.nodes_of_cpus(cpus)),
                ActionKind::MigratePages { from, to, max_pages } => {
                    assert_eq!(*max_pages, None, "numad migrates everything");
                    format!("migrate {from} -> {to}")
                }
                other => panic!("numad only binds and migrates, not {other:?}"),
            };
            assert!(a.target.tid.is_none(), "numad binds whole processes");
            assert!(a.reason.rule.starts_with("numad-") && a.reason.detail.contains("MiB"), "{:?}", a.reason);
            (a.target.pid, what)
        })
        .collect()
}

#[test]
fn thresholds_exclude_small_and_idle_processes() {
    // 200 MiB at 2 CPUs: under the 300 MiB threshold. 1 GiB at 0.3 CPUs: under 50% of a CPU.
    // 300 MiB exactly: numad's test is strictly greater ("MBs_used > MEMORY_THRESHOLD").
    let mut m = model(10, [2.0, 1.0], [6000, 7000]);
    add(&mut m, 100, 1, [200, 0], 2.0, 4);
    add(&mut m, 101, 1, [1024, 0], 0.3, 4);
    add(&mut m, 102, 1, [300, 0], 1.0, 4);
    let mut numad = Numad::new();
    assert!(numad.decide(&m).actions.is_empty());
    assert!(numad.bindings().is_empty());
    // A 1 GiB process at 1 CPU passes both thresholds and is bound.
    add(&mut m, 103, 1, [1024, 0], 1.0, 2);
    let plan = numad.decide(&m);
    assert_eq!(summary(&m, &plan), [(103, "affinity 0".to_string())]);
}

#[test]
fn the_node_with_the_larger_magnitude_wins_and_memory_follows() {
    // Process 200: 2048 MiB (512 on node 0, 1536 on node 1), 1.5 CPUs, 4 threads, unbound.
    // Request: 2048 / 0.85 = 2409.4 MiB, 1.5 / 0.85 = 1.765 CPUs.
    // Its own use counts as free where it is (unbound: memory x 17/16, CPU by memory share):
    //   node 0: MiB 5000 + 544 = 5544, CPUs (4 - 1.0) + 0.375 = 3.375
    //   node 1: MiB 4000 + 1632 = 5632, CPUs (4 - 2.5) + 1.125 = 2.625
    // magnitude = (need_mem x 10 + excess_mem x 4) x (need_cpu x 6 + excess_cpu):
    //   node 0: (24094 + 12538) x (10.59 + 1.61) = 36632 x 12.20 = 446.8k
    //   node 1: (24094 + 12890) x (10.59 + 0.86) = 36984 x 11.45 = 423.4k
    // One node is needed (2409 MiB < 8192, (1.765 - 0.3 flex) / 4 CPUs < 1): node 0 wins on free
    // CPU although most of the memory is on node 1; the memory moves to node 0.
    let mut m = model(10, [1.0, 2.5], [5000, 4000]);
    add(&mut m, 200, 7, [512, 1536], 1.5, 4);
    let mut numad = Numad::new();
    let plan = numad.decide(&m);
    assert_eq!(summary(&m, &plan), [(200, "affinity 0".into()), (200, "migrate 1 -> 0".into())]);
    assert_eq!(plan.actions[0].target.starttime, 7);

    // Node 1 as idle as node 0 (demand 1.0): its CPUs free 3 + 1.125 = 4.125, cpu factor
    // 10.59 + 2.36 = 12.95, magnitude 36984 x 12.95 = 478.9k > 446.8k: stay on node 1, pull the
    // 512 MiB from node 0.
    let mut m = model(10, [1.0, 1.0], [5000, 4000]);
    add(&mut m, 200, 7, [512, 1536], 1.5, 4);
    let plan = Numad::new().decide(&m);
    assert_eq!(summary(&m, &plan), [(200, "affinity 1".into()), (200, "migrate 0 -> 1".into())]);
}

#[test]
fn a_process_larger_than_a_node_gets_the_nodes_it_needs() {
    // 7000 MiB / 0.85 = 8235 MiB > one node's 8192: two nodes. Bound to both, nothing to migrate.
    let mut m = model(10, [1.0, 1.0], [1000, 8000]);
    add(&mut m, 300, 1, [7000, 0], 2.0, 8);
    let plan = Numad::new().decide(&m);
    assert_eq!(summary(&m, &plan), [(300, "affinity 0-1".into())]);
}

#[test]
fn one_process_per_pass_the_most_deserving_first() {
    // Unbound candidates by CPU x RSS: 400 (2.0 x 2048) before 401 (1.0 x 1024). One bind per pass.
    let mut m = model(10, [3.0, 0.0], [4000, 8000]);
    add(&mut m, 401, 1, [1024, 0], 1.0, 2);
    add(&mut m, 400, 1, [2048, 0], 2.0, 2);
    let mut numad = Numad::new();
    let first = numad.decide(&m);
    assert!(!first.actions.is_empty() && first.actions.iter().all(|a| a.target.pid == 400), "{first:?}");
    m.now_ns += 5 * SEC;
    let second = numad.decide(&m);
    assert!(!second.actions.is_empty() && second.actions.iter().all(|a| a.target.pid == 401), "{second:?}");
    // Both bound less than 300 s ago: nothing to do.
    m.now_ns += 5 * SEC;
    assert!(numad.decide(&m).actions.is_empty());
    assert_eq!(numad.bindings().len(), 2);
}

#[test]
fn the_interval_shortens_after_a_move_and_lengthens_while_idle() {
    let mut m = model(10, [1.0, 1.0], [6000, 6000]);
    let mut numad = Numad::new();
    // First pass: no rates yet in numad's eyes; numad's start-up round trip is half the minimum.
    assert!(numad.decide(&m).actions.is_empty());
    assert_eq!(numad.next_interval_ns(&m), 2_500_000_000);
    // Idle pass: the maximum, 15 s.
    assert!(numad.decide(&m).actions.is_empty());
    assert_eq!(numad.next_interval_ns(&m), 15 * SEC);
    // A pass that binds: the minimum, 5 s.
    add(&mut m, 500, 1, [1024, 0], 1.0, 2);
    assert!(!numad.decide(&m).actions.is_empty());
    assert_eq!(numad.next_interval_ns(&m), 5 * SEC);
    // Nothing left to move: back to 15 s.
    assert!(numad.decide(&m).actions.is_empty());
    assert_eq!(numad.next_interval_ns(&m), 15 * SEC);
    // The interval follows the tunables.
    m.tunables.numad_interval_min_s = 2;
    m.tunables.numad_interval_max_s = 20;
    assert_eq!(numad.next_interval_ns(&m), 20 * SEC);
}

#[test]
fn a_bound_process_in_place_is_left_alone() {
    let mut m = model(10, [1.0, 1.0], [6000, 7000]);
    add(&mut m, 600, 1, [1024, 0], 1.0, 2);
    let mut numad = Numad::new();
    assert_eq!(summary(&m, &numad.decide(&m)), [(600, "affinity 0".into())]);
    assert_eq!(numad.bindings()[&(600, 1)].nodes, nodes(&[0]));
    // 301 s later it is re-evaluated: the same node is still best and all its memory is there
    // (0% elsewhere <= 10%): no action, the bind time is refreshed.
    m.now_ns += 301 * SEC;
    assert!(numad.decide(&m).actions.is_empty());
    assert_eq!(numad.bindings()[&(600, 1)].at_ns, m.now_ns);
    // A process that placed itself (pinned) and that numad did not bind is never touched.
    add(&mut m, 601, 1, [0, 2048], 2.0, 4);
    m.procs.get_mut(&601).unwrap().pinned = true;
    m.now_ns += 301 * SEC;
    assert!(numad.decide(&m).actions.is_empty());
    assert!(!numad.bindings().contains_key(&(601, 1)));
}

#[test]
fn a_bound_process_whose_memory_strayed_is_bound_again_after_the_delay() {
    let mut m = model(10, [1.0, 1.0], [6000, 6000]);
    add(&mut m, 700, 1, [1024, 0], 1.0, 2);
    let mut numad = Numad::new();
    assert_eq!(summary(&m, &numad.decide(&m)), [(700, "affinity 0".into())]);
    // Half its memory is now on node 1 (50% > 10% elsewhere). Within 300 s: left alone.
    m.procs.get_mut(&700).unwrap().mem_by_node = vec![512 * MIB, 512 * MIB];
    m.now_ns += 100 * SEC;
    assert!(numad.decide(&m).actions.is_empty());
    // After the delay it is evaluated as a bound process (its memory x 5/4 counts as free, its
    // bound node gets their average free CPU with its own use added back):
    //   node 0: MiB 6000 + 640 = 6640, CPUs (1.0 + 3) / 1 = 4     magnitude 33788 x 9.88 = 333.9k
    //   node 1: MiB 6000 + 640 = 6640, CPUs 3                      magnitude 33788 x 8.88 = 300.1k
    // Node 0 again, but only 50% of its memory is there (< 90%): re-bound, the stray half pulled
    // back.
    m.now_ns += 201 * SEC;
    assert_eq!(summary(&m, &numad.decide(&m)), [(700, "affinity 0".into()), (700, "migrate 1 -> 0".into())]);
}

#[test]
fn a_vanished_process_is_skipped_and_forgotten() {
    let mut m = model(10, [1.0, 1.0], [6000, 7000]);
    add(&mut m, 800, 1, [1024, 0], 1.0, 2);
    let mut numad = Numad::new();
    let plan = numad.decide(&m);
    assert_eq!(numad.bindings().len(), 1);
    // The host found it gone when applying: forgotten.
    let outcomes: Vec<Outcome> = plan.actions.iter().map(|_| Outcome::Vanished).collect();
    numad.observe_outcomes(&m, &plan, &outcomes);
    assert!(numad.bindings().is_empty());
    // Bound again, then gone from the model: nothing planned for it, its binding dropped.
    numad.decide(&m);
    assert_eq!(numad.bindings().len(), 1);
    m.procs.clear();
    m.now_ns += 5 * SEC;
    assert!(numad.decide(&m).actions.is_empty());
    assert!(numad.bindings().is_empty());
    // The pid reused by a new process (another start time) is a new, unbound candidate.
    add(&mut m, 800, 99, [0, 1024], 1.0, 2);
    let plan = numad.decide(&m);
    assert_eq!(summary(&m, &plan), [(800, "affinity 1".into())]);
    assert_eq!(plan.actions[0].target.starttime, 99);
}
