//! Inputs the fuzzing review of the engine found (review helper-40, randomized models on odd
//! machines: one node, memory-only and memoryless nodes, 1-CPU nodes, 64 nodes x 1024 CPUs, sparse
//! ids, reserved and offline CPUs), each a panic or a broken figure before.

mod adaptive_common;
use adaptive_common::*;
use numapilot_policy::{ActionKind, Adaptive, Policy};

/// Two processes in disjoint cpusets share a group (they talk), so the group may go nowhere (rule
/// confined-within-cpuset: no node), while the first process's other thread is placed on node 0.
/// The first process is split over the node sets {none, 0}, and its thread in the empty set
/// sampled a hot range on node 1: a range job to no node indexed the empty set (a panic in release
/// builds too, a daemon crash loop on a host of two containers that talk). Now such a set takes no
/// pages.
#[test]
fn a_unit_that_may_go_nowhere_moves_no_pages() {
    let mut b = B::new("autonuma-2s12c-24g");
    let c0 = b.node_cpus(0).to_string();
    let c1 = b.node_cpus(1).to_string();
    b.proc(10, "app", &[(0, 1.0), (0, 1.0)], &[2048, 0]);
    b.proc(11, "peer", &[(1, 1.0)], &[0, 512]);
    b.confine(10, &c0, "0").confine(11, &c1, "1");
    b.group(1, &[tk(10, 0), tk(11, 0)]).group(2, &[tk(10, 1)]);
    b.access(10, 0, &[0.2, 0.8]);
    b.hot(10, 0, 0x7f00_0000_0000, 2 << 20, 1, 100);
    let plan = Adaptive::new().decide(&b.m);
    for a in &plan.actions {
        if let ActionKind::MoveRanges { to, .. } = &a.kind {
            assert!(b.m.topo.node(*to).is_some(), "{a:#?}");
        }
    }
}

/// A small process whose per-node memory (an older numa_maps read, carried by the live observer's
/// tiers) is larger than its RSS now (it shrank since): its remote share is at most 100%. It read
/// 6000%, a benefit that put a tiny process ahead of real work for the page budget.
#[test]
fn a_remote_share_is_never_above_all_of_it() {
    let mut b = B::new("autonuma-2s12c-24g");
    b.proc(9, "busy", &[(0, 1.0); 12], &[100, 0]);
    b.proc(10, "small", &[(1, 1.0)], &[60, 0]);
    b.m.procs.get_mut(&10).unwrap().rss_bytes = 1 << 20;
    b.group_proc(1, 9).group_proc(2, 10);
    let plan = Adaptive::new().decide(&b.m);
    for a in &plan.actions {
        for word in a.reason.detail.split_whitespace() {
            if let Some(p) = word.strip_suffix('%').and_then(|p| p.parse::<f64>().ok()) {
                assert!(p <= 100.0, "{}", a.reason.detail);
            }
        }
    }
}

/// Launch advice when nothing fits, with free-memory figures at the top of u64 (a control-socket
/// client's, which the request check accepts): the error's total saturates instead of overflowing.
#[test]
fn nothing_fits_with_huge_free_figures_is_an_error_not_an_overflow() {
    use numapilot_policy::advise::{advise, check_nodes_now, AdviseError, NodeFree};
    let topo = numapilot_topology::Topology::uniform(2, 4, 1 << 20, 20);
    let free = vec![
        NodeFree { node: 0, cpus: 4, free_cpus: 0.0, mem_free_bytes: 1 << 63 },
        NodeFree { node: 1, cpus: 4, free_cpus: 0.0, mem_free_bytes: 1 << 63 },
    ];
    check_nodes_now(&free).unwrap();
    match advise(&topo, &free, 8.0, 1) {
        Err(AdviseError::NothingFits { free_mib, .. }) => assert_eq!(free_mib, u64::MAX >> 20),
        other => panic!("{other:?}"),
    }
}

/// A node with CPUs and no memory (MemTotal 0 in sysfs, as some machines show): node 0 full with
/// one process, another running on node 1 with all its memory on node 0. Memory follows CPU aimed
/// at node 1, where the kernel refuses it; now a page action names only nodes with memory (rule
/// memory-onto-memory-nodes), for the adaptive policy and numad alike.
#[test]
fn memory_is_never_sent_to_a_node_without_memory() {
    let mut topo = numapilot_topology::Topology::uniform(2, 12, 24 << 20, 20);
    topo.nodes[1].mem_total_kb = 0;
    topo.nodes[1].mem_free_kb = 0;
    let mut b = B::with_topology(topo, traced_tunables());
    b.proc(10, "numa01", &[(0, 1.0); 12], &[3072, 0]);
    b.proc(11, "numa01", &[(1, 1.0); 12], &[3072, 0]);
    b.group_proc(1, 10).group_proc(2, 11);
    let mem = b.m.topo.memory_nodes();
    let check = |plan: &numapilot_policy::Plan, who: &str| {
        for a in &plan.actions {
            match &a.kind {
                ActionKind::MigratePages { to, .. } => assert!(to.difference(&mem).is_empty(), "{who}: {a:#?}"),
                ActionKind::MoveRanges { to, .. } => assert!(mem.contains(*to), "{who}: {a:#?}"),
                ActionKind::Interleave { nodes, .. } => assert!(nodes.difference(&mem).is_empty(), "{who}: {a:#?}"),
                ActionKind::SetAffinity { .. } => {}
            }
        }
    };
    check(&Adaptive::new().decide(&b.m), "adaptive");
    let mut numad = numapilot_policy::numad::Numad::new();
    for _ in 0..3 {
        check(&numad.decide(&b.m), "numad");
    }
}

/// The rule on a plan as policies hand it over: a range move to a node without memory goes to the
/// nearest node with memory, an interleave leaves such nodes out, a migration whose only
/// destination was its source is dropped.
#[test]
fn page_actions_are_mapped_onto_nodes_with_memory() {
    use numapilot_policy::{Action, Plan, Reason, TaskRef};
    use numapilot_topology::NodeSet;
    let mut topo = numapilot_topology::Topology::uniform(3, 2, 1 << 20, 20);
    topo.nodes[2].mem_total_kb = 0;
    let t = TaskRef { pid: 1, tid: None, starttime: 1 };
    let act = |kind| Action { target: t, kind, reason: Reason::new("r", "d") };
    let set = |v: &[u32]| v.iter().copied().collect::<NodeSet>();
    let mut plan = Plan {
        actions: vec![
            act(ActionKind::MoveRanges { ranges: vec![(0, 4096)], to: 2 }),
            act(ActionKind::Interleave { ranges: vec![], nodes: set(&[0, 2]), weights: vec![3, 1], max_pages: None }),
            act(ActionKind::MigratePages { from: set(&[0]), to: set(&[2]), max_pages: None }),
            act(ActionKind::MigratePages { from: set(&[1]), to: set(&[0]), max_pages: None }),
        ],
        ..Plan::default()
    };
    plan.memory_onto_memory_nodes(&topo);
    let kinds: Vec<&ActionKind> = plan.actions.iter().map(|a| &a.kind).collect();
    assert_eq!(kinds.len(), 3, "{kinds:#?}");
    assert!(matches!(kinds[0], ActionKind::MoveRanges { to: 0, .. }), "{kinds:#?}");
    assert!(
        matches!(kinds[1], ActionKind::Interleave { nodes, weights, .. } if *nodes == set(&[0]) && *weights == [3]),
        "{kinds:#?}"
    );
    assert!(matches!(kinds[2], ActionKind::MigratePages { to, .. } if *to == set(&[0])), "{kinds:#?}");
    assert!(plan.actions[0].reason.detail.contains("memory-onto-memory-nodes"));
}
