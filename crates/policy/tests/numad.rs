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
    Topology::uniform(2, 4, 8 << 20, 20)
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
            ppid: 1,
            comm: format!("p{pid}"),
            tids: (pid..pid + threads).collect(),
            kernel_owned: 0,
            rss_bytes: mem_by_node.iter().sum(),
            mem_by_node,
            shared_by_node: vec![],
            shared_objects: vec![],
            growth_bytes_per_s: 0.0,
            cpu_rate: cpu,
            pinned: false,
            confined: None,
            mem_policy_pinned: false,
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
    // numad computes it in integer seconds: 5 / 2 = 2 s.
    assert_eq!(numad.next_interval_ns(&m), 2 * SEC);
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
    // A huge interval (a tunables file `validate` would refuse) saturates instead of overflowing.
    m.tunables.numad_interval_max_s = u64::MAX;
    assert_eq!(numad.next_interval_ns(&m), u64::MAX);
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
    // Nor is a process confined to a cpuset (not pinned: its threads are as wide as the cpuset).
    add(&mut m, 602, 1, [0, 2048], 2.0, 4);
    m.procs.get_mut(&602).unwrap().confined = Some(numapilot_model::Confinement {
        cpus: numapilot_topology::CpuSet::parse_list("0").unwrap(),
        nodes: nodes(&[0, 1]),
    });
    m.now_ns += 301 * SEC;
    assert!(numad.decide(&m).actions.is_empty());
    assert!(!numad.bindings().contains_key(&(602, 1)));
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

/// A machine of `nodes` nodes of `cores` cores x `smt` threads, `dist` as the distance matrix.
/// CPU ids as Linux numbers them on one package per node: node n, thread t, core k is
/// n x cores x smt + t x cores + k.
fn machine_smt(nodes: u32, cores: u32, smt: u32, dist: Vec<Vec<u32>>, mem_kb: u64) -> Topology {
    let per = cores * smt;
    let mut ns = Vec::new();
    let mut cs = Vec::new();
    for n in 0..nodes {
        let set: CpuSet = (n * per..(n + 1) * per).collect();
        for t in 0..smt {
            for k in 0..cores {
                let id = n * per + t * cores + k;
                cs.push(Cpu {
                    id,
                    node: n,
                    package: n,
                    die: 0,
                    core: k,
                    siblings: (0..smt).map(|u| n * per + u * cores + k).collect(),
                    llc: Some(set.clone()),
                    online: true,
                });
            }
        }
        ns.push(Node {
            id: n,
            cpus: set,
            mem_total_kb: mem_kb,
            mem_free_kb: mem_kb,
            mem_total_unknown: false,
            mem_free_unknown: false,
        });
    }
    cs.sort_by_key(|c| c.id);
    Topology { possible: (0..nodes).collect(), nodes: ns, distances: dist, cpus: cs, devices: vec![] }
}

/// A model on `topo` with node CPU demand and free MiB as given, each node `total_mib` large.
fn model_on(topo: Topology, demand: &[f64], free_mib: &[u64], total_mib: u64) -> Model {
    let mut m = Model::new(topo, Tunables::default());
    m.now_ns = 10 * SEC;
    m.updates = 2;
    for (i, n) in m.nodes.iter_mut().enumerate() {
        n.cpu_demand = demand[i];
        n.mem_total_bytes = total_mib * MIB;
        n.mem_free_bytes = free_mib[i] * MIB;
    }
    m
}

/// Adds a process with `mem_mib` on each node in order.
fn add_on(m: &mut Model, pid: u32, mem_mib: &[u64], cpu: f64, threads: u32) {
    let mem_by_node: Vec<u64> = mem_mib.iter().map(|x| x * MIB).collect();
    add(m, pid, 1, [0, 0], cpu, threads);
    let p = m.procs.get_mut(&pid).unwrap();
    p.rss_bytes = mem_by_node.iter().sum();
    p.mem_by_node = mem_by_node;
}

fn two_node_dist() -> Vec<Vec<u32>> {
    vec![vec![10, 20], vec![20, 10]]
}

#[test]
fn hyperthreads_count_at_twenty_percent_so_a_busy_process_needs_both_smt_nodes() {
    // 2 nodes of 6 cores x SMT2 (12 CPUs each), 16 GiB. Process: 12 threads at 10.2 CPUs, 4 GiB on
    // node 0; node 0's demand is its own 10.2, node 1 idle.
    // Request: min(10.2 / 0.85, 12 threads) = 12 CPUs.
    // numad -t 20: a node counts 6 x 1 + 6 x 0.2 = 7.2 CPUs; flex = 15 x 7.2 / 200 = 0.54;
    //   nodes needed = ceil((12 - 0.54) / 7.2) = ceil(1.59) = 2: bound to both (no memory moves).
    // Were siblings full CPUs (htt 100): 12 CPUs a node, flex 0.9, ceil(11.1 / 12) = 1 node, and
    //   node 0 (its memory x 17/16 counts as free there) is chosen.
    let topo = machine_smt(2, 6, 2, two_node_dist(), 16 << 20);
    let mut m = model_on(topo, &[10.2, 0.0], &[12000, 16000], 16384);
    add_on(&mut m, 900, &[4096, 0], 10.2, 12);
    assert_eq!(m.tunables.numad_htt_pct, 20);
    assert_eq!(summary(&m, &Numad::new().decide(&m)), [(900, "affinity 0-1".into())]);
    m.tunables.numad_htt_pct = 100;
    assert_eq!(summary(&m, &Numad::new().decide(&m)), [(900, "affinity 0".into())]);
}

#[test]
fn the_node_count_follows_cpu_net_of_the_flex() {
    // 2 nodes of 4 CPUs: flex = (100 - 85) x 4 / 200 = 0.3 CPU. Process: 400 MiB on node 0, 8
    // threads; node 0's demand is its own CPU, so both nodes have 4 free CPUs as numad sees them.
    //   3.5 CPUs: request 4.118, (4.118 - 0.3) / 4 = 0.95 -> 1 node (2 without the flex): node 0.
    //   3.8 CPUs: request 4.471, (4.471 - 0.3) / 4 = 1.04 -> 2 nodes.
    // The reason counts them in words that agree ("node(s) needed" before).
    let mut m = model(10, [3.5, 0.0], [6000, 6000]);
    add(&mut m, 910, 1, [400, 0], 3.5, 8);
    let plan = Numad::new().decide(&m);
    assert_eq!(summary(&m, &plan), [(910, "affinity 0".into())]);
    assert!(plan.actions[0].reason.detail.ends_with(", 1 node needed"), "{}", plan.actions[0].reason.detail);
    let mut m = model(10, [3.8, 0.0], [6000, 6000]);
    add(&mut m, 910, 1, [400, 0], 3.8, 8);
    let plan = Numad::new().decide(&m);
    assert_eq!(summary(&m, &plan), [(910, "affinity 0-1".into())]);
    assert!(plan.actions[0].reason.detail.ends_with(", 2 nodes needed"), "{}", plan.actions[0].reason.detail);
}

#[test]
fn the_100_mib_margin_decides_whether_one_node_holds_the_request() {
    // Process: 1600 MiB on node 0, 1 CPU, 2 threads. Request 1600 / 0.85 = 1882.4 MiB, 1.18 CPUs.
    // Node 1 is CPU-saturated (demand 4: 0.01 CPU free), so node 0 is the start (magnitude far
    // larger) and one node is needed. Node 0's free MiB, own memory x 17/16 = 1700 added:
    //   250 + 1700 = 1950 < 1882.4 + 100: it gives 1850, 32.4 MiB remain -> node 1 is taken too;
    //   350 + 1700 = 2050 >= 1982.4: node 0 alone.
    // (Without the margin 1950 would hold the request on node 0 alone.)
    let mut m = model(10, [1.0, 4.0], [250, 8000]);
    add(&mut m, 920, 1, [1600, 0], 1.0, 2);
    assert_eq!(summary(&m, &Numad::new().decide(&m)), [(920, "affinity 0-1".into())]);
    let mut m = model(10, [1.0, 4.0], [350, 8000]);
    add(&mut m, 920, 1, [1600, 0], 1.0, 2);
    assert_eq!(summary(&m, &Numad::new().decide(&m)), [(920, "affinity 0".into())]);
}

#[test]
fn the_start_node_weighs_magnitude_by_distance_squared() {
    // 4 nodes of 4 CPUs and 8192 MiB; pairs {0,1} and {2,3} at distance 16, across pairs 22.
    // Process: 400 MiB on node 0, 4.25 CPUs, 8 threads: request 5 CPUs, 470.6 MiB, so
    // k = ceil((5 - 0.3) / 4) = 2 nodes (CPU-driven). Node 0's demand is its own 4.25 (credited
    // back: 4 free CPUs, capped), the others idle: every node has 4 free CPUs, so the CPU factor is
    // 4 x 6 = 24 everywhere, and magnitude = 24 x (470.6 x 10 + (free - 470.6) x 4)
    //                                      = 24 x (4 x free + 2823.5), free counting node 0's own
    // 400 x 17/16 = 425 MiB. Start score of n: the 2 nodes closest to n, magnitude / distance^2.
    let dist = vec![vec![10, 16, 22, 22], vec![16, 10, 22, 22], vec![22, 22, 10, 16], vec![22, 22, 16, 10]];
    let topo = || machine_smt(4, 4, 1, dist.clone(), 8 << 20);
    // Case A, free 7000 / 7000 / 8000 / 500 (node 0: 6575 + 425):
    //   M = 739.8k, 739.8k, 835.8k, 115.8k
    //   start 0: 739764/100 + 739764/256 = 7397.6 + 2889.7 = 10287.3  (start 1 the same; 0 first)
    //   start 2: 835764/100 + 115764/256 = 8357.6 +  452.2 =  8809.8
    //   start 3: 115764/100 + 835764/256 = 1157.6 + 3264.7 =  4422.3
    // -> {0, 1}, although node 2 alone has the largest magnitude.
    let mut m = model_on(topo(), &[4.25, 0.0, 0.0, 0.0], &[6575, 7000, 8000, 500], 8192);
    add_on(&mut m, 930, &[400, 0, 0, 0], 4.25, 8);
    assert_eq!(summary(&m, &Numad::new().decide(&m)), [(930, "affinity 0-1".into())]);
    // Case B, free 6000 / 6000 / 6500 / 5000 (node 0: 5575 + 425): M = 643.8k, 643.8k, 691.8k,
    // 547.8k.
    //   start 0: 6437.6 + 643764/256 = 6437.6 + 2514.7 = 8952.3
    //   start 2: 6917.6 + 547764/256 = 6917.6 + 2139.7 = 9057.3   -> {2, 3}; the memory goes to the
    //   chosen node holding the least of it, ties to the higher-numbered (numad's ">="): node 3.
    // Dividing by the distance once instead would pick start 0 (104611.7 against 103411.7).
    let mut m = model_on(topo(), &[4.25, 0.0, 0.0, 0.0], &[5575, 6000, 6500, 5000], 8192);
    add_on(&mut m, 930, &[400, 0, 0, 0], 4.25, 8);
    assert_eq!(summary(&m, &Numad::new().decide(&m)), [(930, "affinity 2-3".into()), (930, "migrate 0 -> 3".into())]);
}

#[test]
fn memory_moves_one_source_at_a_time_to_the_target_holding_the_least() {
    // 4 nodes of 4 CPUs and 4096 MiB, distances as above. Process: 5120 MiB (3072 on node 0, 1024
    // on each of nodes 2 and 3), 1 CPU, 2 threads. Request 6023.5 MiB: ceil(6023.5 / 4096) = 2
    // nodes. Free MiB with its own x 17/16: 500 + 3264 = 3764, 4000, 100 + 1088 = 1188 (x2); free
    // CPUs (own CPU credited by memory share: 0.6 / 0 / 0.2 / 0.2): 3.6, 4, 4, 4.
    //   M = 10 x free x (6 x 1.176 + free - 1.176): 356.8k, 395.2k, 117.4k, 117.4k
    //   start 1: 3952 + 356.8k/256 = 5346 > start 0: 3568 + 395.2k/256 = 5112 > start 2, 3
    //   take node 1 (3900 MiB with the 100 MiB margin; 2123 left), then node 0: {0, 1}.
    // numad moves memory source by source: node 2 (1024, ties to the lower) to the chosen node
    // holding the least (node 1: 0), then node 3 to the least again (node 1: 1024 < 3072):
    // 3072 / 2048 MiB at the end -- not every source to every target at once.
    let dist = vec![vec![10, 16, 22, 22], vec![16, 10, 22, 22], vec![22, 22, 10, 16], vec![22, 22, 16, 10]];
    let mut m = model_on(machine_smt(4, 4, 1, dist, 4 << 20), &[1.0, 0.0, 0.0, 0.0], &[500, 4000, 100, 100], 4096);
    add_on(&mut m, 940, &[3072, 0, 1024, 1024], 1.0, 2);
    assert_eq!(
        summary(&m, &Numad::new().decide(&m)),
        [(940, "affinity 0-1".into()), (940, "migrate 2 -> 1".into()), (940, "migrate 3 -> 1".into())]
    );
}

#[test]
fn the_cpu_figure_is_the_largest_of_the_last_eight_passes() {
    // Process 950 runs 1 CPU on pass 1 and none after; it is too small (200 MiB) to be a
    // candidate until its RSS reaches 1 GiB. numad judges CPU by the largest of its last 8 passes
    // (RING_BUF_SIZE): grown on pass 8, the 1-CPU pass is still in the window and it is bound;
    // grown on pass 9, the window holds eight zeros and it is left alone.
    for (grow_at, bound) in [(8, true), (9, false)] {
        let mut m = model(10, [1.0, 1.0], [6000, 6000]);
        add(&mut m, 950, 1, [200, 0], 1.0, 2);
        let mut numad = Numad::new();
        for pass in 1..=grow_at {
            if pass == 2 {
                m.procs.get_mut(&950).unwrap().cpu_rate = 0.0;
            }
            if pass == grow_at {
                let p = m.procs.get_mut(&950).unwrap();
                p.mem_by_node = vec![1024 * MIB, 0];
                p.rss_bytes = 1024 * MIB;
            }
            m.now_ns += 15 * SEC;
            let plan = numad.decide(&m);
            if pass < grow_at {
                assert!(plan.actions.is_empty(), "pass {pass}: {plan:?}");
            } else {
                assert_eq!(!plan.actions.is_empty(), bound, "grown on pass {grow_at}: {plan:?}");
            }
        }
    }
}

/// Launch advice awaiting its process, as the policy's bookkeeping counts it.
fn launched(n: &Numad) -> usize {
    let mut out = Vec::new();
    Policy::bookkeeping(n, &mut out);
    out.iter().find(|(k, _)| *k == "numad.launched").map(|(_, v)| *v).unwrap()
}

/// Launch advice for a pid (`numad -w`, the launcher naming the process it will exec): the
/// process that shows within the wait counts as bound to the advice; advice for one that never
/// shows is dropped after `LAUNCH_ADVICE_WAIT_NS` (it was kept for good: a process that got the pid
/// an hour later was taken as bound by it), and the bookkeeping says so.
#[test]
fn launch_advice_waits_for_its_process_for_a_bounded_time() {
    use numapilot_policy::numad::LAUNCH_ADVICE_WAIT_NS;
    use numapilot_policy::LaunchRequest;
    let req = |pid: u32| LaunchRequest {
        pid: Some(pid),
        name: format!("vm{pid}"),
        cpus: 1.0,
        mem_bytes: 512 * MIB,
        nodes_now: vec![],
        reach_cpus: None,
    };
    let mut m = model(10, [1.0, 1.0], [6000, 7000]);
    let mut numad = Numad::new();
    let shown = numad.advise_launch(&m, m.now_ns, &req(900)).expect("advice").nodes;
    assert!(numad.advise_launch(&m, m.now_ns, &req(901)).is_ok());
    assert_eq!(launched(&numad), 2);
    // 900 shows within the wait: bound to its advice.
    m.now_ns += 5 * SEC;
    add(&mut m, 900, 7, [512, 0], 1.0, 1);
    numad.decide(&m);
    assert_eq!(numad.bindings().get(&(900, 7)).map(|b| b.nodes.clone()), Some(shown));
    assert_eq!(launched(&numad), 1, "901 still awaited");
    // 901 never shows: still awaited just before the wait ends, gone after it.
    m.now_ns = 10 * SEC + LAUNCH_ADVICE_WAIT_NS - SEC;
    numad.decide(&m);
    assert_eq!(launched(&numad), 1);
    m.now_ns = 10 * SEC + LAUNCH_ADVICE_WAIT_NS;
    numad.decide(&m);
    assert_eq!(launched(&numad), 0, "advice for a process that never showed kept");
    // A process that gets the pid later is a candidate like any other, not bound by that advice.
    // (Bound only by an action of numad's own pass, as any unbound process is.)
    add(&mut m, 901, 50, [1024, 0], 1.0, 2);
    let plan = numad.decide(&m);
    let acted = plan.actions.iter().any(|a| a.target.pid == 901);
    assert_eq!(numad.bindings().contains_key(&(901, 50)), acted, "{:?}", summary(&m, &plan));
}

/// Launch advice asked in a loop between two passes is held to `LAUNCH_ADVICE_KEPT` entries (the
/// oldest dropped) and advice past its wait is dropped at the next request, not only at a pass.
#[test]
fn launch_advice_between_passes_is_bounded() {
    use numapilot_policy::numad::{LAUNCH_ADVICE_KEPT, LAUNCH_ADVICE_WAIT_NS};
    use numapilot_policy::LaunchRequest;
    let req = |pid: u32| LaunchRequest {
        pid: Some(pid),
        name: "vm".into(),
        cpus: 1.0,
        mem_bytes: MIB,
        nodes_now: vec![],
        reach_cpus: None,
    };
    let m = model(10, [1.0, 1.0], [6000, 7000]);
    let mut numad = Numad::new();
    for pid in 0..LAUNCH_ADVICE_KEPT as u32 + 10 {
        assert!(numad.advise_launch(&m, m.now_ns + u64::from(pid), &req(10_000 + pid)).is_ok());
    }
    assert_eq!(launched(&numad), LAUNCH_ADVICE_KEPT);
    // One request after the wait: every earlier advice is past it.
    let later = m.now_ns + LAUNCH_ADVICE_WAIT_NS + 2 * LAUNCH_ADVICE_KEPT as u64;
    assert!(numad.advise_launch(&m, later, &req(1)).is_ok());
    assert_eq!(launched(&numad), 1);
}
