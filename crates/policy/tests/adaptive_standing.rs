//! Rule "new-threads-follow-memory" (crates/policy/src/adaptive/standing.rs): the standing order a
//! plan carries for a young process's threads, worked out by hand on the rig's 4-node shape
//! (4 nodes of 2 CPUs, as `rig/guest` 4node) and on a 2-socket preset.

mod adaptive_common;

use adaptive_common::*;
use numapilot_policy::{Action, ActionKind, Adaptive, Outcome, Plan, Policy};
use numapilot_topology::Topology;

const RULE: &str = "new-threads-follow-memory";

/// The rig's 4-node guest: 4 nodes of 2 CPUs, 1 GiB each.
fn rig4() -> B {
    B::with_topology(Topology::uniform(4, 2, 1 << 20, 20), traced_tunables())
}

fn orders_for(plan: &Plan, pid: u32) -> Vec<&Action> {
    plan.standing.iter().filter(|a| a.target.pid == pid).collect()
}

/// numa02's setup on the rig: the main thread (idle now, on node 1) has first-touched 64 MiB on
/// node 0 under a binding (`--force-node 0`) and waits for "go". The plan touches nothing of it
/// (it is held by its memory policy) but carries the order: threads it starts go to node 0's
/// CPUs 0-1.
#[test]
fn a_young_process_held_by_its_first_touch_binding_gets_an_order_for_its_threads() {
    let mut b = rig4();
    b.new_proc(10, "numa02", &[(1, 0.0)], &[64, 0, 0, 0]).mem_policy(10);
    let mut p = Adaptive::new();
    let plan = p.decide(&b.m);
    assert!(plan.actions.iter().all(|a| a.target.pid != 10), "{:?}", plan.actions);
    let o = orders_for(&plan, 10);
    assert_eq!(o.len(), 1, "{:?}", plan.standing);
    assert_eq!(o[0].reason.rule, RULE);
    assert_eq!(o[0].target.tid, None);
    assert_eq!(o[0].target.starttime, 100);
    match &o[0].kind {
        ActionKind::SetAffinity { cpus } => assert_eq!(cpus.to_list(), "0-1"),
        k => panic!("{k:?}"),
    }
    assert!(o[0].reason.detail.contains("64 of its 64 MiB on node 0"), "{}", o[0].reason.detail);
    // Seen early in its touch (the rig's repetition at 2026-11-29): 16 MiB of data on node 0, its
    // binary's and libraries' 5 MiB on node 1: 76%, a majority.
    let mut b = rig4();
    b.new_proc(10, "numa02", &[(1, 1.0)], &[16, 5, 0, 0]).mem_policy(10);
    let plan = Adaptive::new().decide(&b.m);
    let o = orders_for(&plan, 10);
    assert_eq!(o.len(), 1, "{:?}", plan.standing);
    assert!(matches!(&o[0].kind, ActionKind::SetAffinity { cpus } if cpus.to_list() == "0-1"), "{o:?}");
}

/// No order: memory spread (40 of 80 MiB on one node, no majority: new_threads_memory_share 0.5); too little
/// memory to be worth settling (8 MiB, under new_process_min_rss_mib, one idle thread); an old
/// process; CPUs narrowed by someone (a thread's own mask); threads already within the node.
#[test]
fn no_order_for_spread_small_old_narrowed_or_already_placed_processes() {
    let mut b = rig4();
    b.new_proc(10, "spread", &[(1, 0.0)], &[40, 24, 16, 0]).mem_policy(10);
    b.new_proc(11, "small", &[(1, 0.0)], &[8, 0, 0, 0]).mem_policy(11);
    b.proc(12, "old", &[(1, 0.0)], &[64, 0, 0, 0]).mem_policy(12);
    b.new_proc(13, "narrowed", &[(1, 0.0), (1, 0.0)], &[64, 0, 0, 0]).mem_policy(13).thread_on(13, 1, 1);
    b.new_proc(14, "there", &[(0, 0.0)], &[0, 0, 64, 0]).mem_policy(14).allow(14, &[2]);
    let mut p = Adaptive::new();
    let plan = p.decide(&b.m);
    assert!(plan.standing.is_empty(), "{:?}", plan.standing);
}

/// No order for a process whose threads may run on that node's CPUs only already (a cpuset of
/// node 0's CPUs, as wide as its threads: confined, not pinned): its new threads start there anyway.
#[test]
fn no_order_for_threads_that_start_there_anyway() {
    let mut b = rig4();
    b.new_proc(14, "there", &[(0, 0.0)], &[64, 0, 0, 0]).mem_policy(14).confine(14, "0-1", "0-3");
    let plan = Adaptive::new().decide(&b.m);
    assert!(orders_for(&plan, 14).is_empty(), "{:?}", plan.standing);
    // Confined to nodes 0-1's CPUs, it gets one (node 0's CPUs, within its cpuset).
    let mut b = rig4();
    b.new_proc(14, "there", &[(0, 0.0)], &[64, 0, 0, 0]).mem_policy(14).confine(14, "0-3", "0-3");
    assert_eq!(orders_for(&Adaptive::new().decide(&b.m), 14).len(), 1);
}

/// No order onto a node without a CPU to spare after the plan: node 0 carries an old process's
/// two busy threads (2.0 of its 2.0 CPUs).
#[test]
fn no_order_onto_a_full_node() {
    let mut b = rig4();
    b.proc(20, "busy", &[(0, 1.0), (0, 1.0)], &[100, 0, 0, 0]);
    b.new_proc(10, "numa02", &[(1, 0.0)], &[64, 0, 0, 0]).mem_policy(10);
    let mut p = Adaptive::new();
    let plan = p.decide(&b.m);
    assert!(orders_for(&plan, 10).is_empty(), "{:?}", plan.standing);
    // With the node free, the same process gets one.
    let mut b = rig4();
    b.new_proc(10, "numa02", &[(1, 0.0)], &[64, 0, 0, 0]).mem_policy(10);
    assert_eq!(orders_for(&Adaptive::new().decide(&b.m), 10).len(), 1);
}

/// Two young processes whose memory is on the same 2-CPU node (the rig's numa01 on 2 nodes, both
/// first-touched on node 0, the daemon and the judge's sampler at 0.3 CPUs there): the first in
/// pid order gets the order, the second does not (1.7 CPUs left, one new thread ordered there
/// already, 0.7 left for a second); on a node with room for both, both do.
#[test]
fn orders_onto_one_node_count_each_other() {
    let mut b = rig4();
    b.proc(30, "sampler", &[(0, 0.3)], &[1, 0, 0, 0]);
    b.new_proc(10, "numa01", &[(1, 0.0)], &[32, 0, 0, 0]).mem_policy(10);
    b.new_proc(11, "numa01", &[(2, 0.0)], &[32, 0, 0, 0]).mem_policy(11);
    let plan = Adaptive::new().decide(&b.m);
    assert_eq!(orders_for(&plan, 10).len(), 1, "{:?}", plan.standing);
    assert!(orders_for(&plan, 11).is_empty(), "{:?}", plan.standing);
    let mut b = B::new("autonuma-2s12c-24g");
    b.new_proc(10, "numa01", &[(1, 0.0)], &[32, 0]).mem_policy(10);
    b.new_proc(11, "numa01", &[(1, 0.0)], &[32, 0]).mem_policy(11);
    let plan = Adaptive::new().decide(&b.m);
    assert_eq!(plan.standing.len(), 2, "{:?}", plan.standing);
}

/// Carried out, the order places the process as the fork rule would have: the next decision,
/// which sees its new worker (rate unknown) under node 0's mask and its binding dropped, neither
/// reads the mask as someone else's pin nor has the fork rule send the process to an emptier node
/// on its worst-case estimate (2 threads x new_thread_cpu: node 0 with it would be 0.25 above the
/// empty nodes), and it gets no second order.
#[test]
fn an_order_carried_out_counts_as_the_fork_rules_placement() {
    // A little load on node 0 (a shell at 0.3 CPUs), so the fork rule's own choice would be an
    // empty node.
    let shell = |b: &mut B| {
        b.proc(30, "sh", &[(0, 0.3)], &[1, 0, 0, 0]);
    };
    let mut b = rig4();
    shell(&mut b);
    b.new_proc(10, "numa02", &[(1, 0.0)], &[64, 0, 0, 0]).mem_policy(10);
    let mut p = Adaptive::new();
    let plan = p.decide(&b.m);
    let order = orders_for(&plan, 10)[0].clone();
    let carried = Plan { actions: vec![order], ..Plan::default() };
    p.observe_outcomes(&b.m, &carried, &[Outcome::Applied { pages_moved: 0 }]);
    // The next sample: binding dropped, a worker started on node 0 under the mask.
    let mut b = rig4();
    shell(&mut b);
    b.new_proc(10, "numa02", &[(0, 0.0), (0, 0.0)], &[64, 0, 0, 0]);
    b.first_seen_now(10, 1).allow(10, &[0]).pinned(10);
    b.m.now_ns += 20_000_000;
    let next = p.decide(&b.m);
    let moved: Vec<_> = next.actions.iter().filter(|a| a.target.pid == 10).collect();
    assert!(moved.is_empty(), "{moved:?}");
    assert!(orders_for(&next, 10).is_empty(), "{:?}", next.standing);
    let e = p.explain(&b.m, 10).expect("known");
    assert!(!e.pinned, "{e:?}");
}

/// A dry plan on a 2-socket machine: the order names the node holding the memory (node 1 here),
/// within the process's cpuset when confined.
#[test]
fn the_order_keeps_within_a_cpuset() {
    let mut b = B::new("autonuma-2s12c-24g");
    let node1 = b.node_cpus(1);
    let first_half: Vec<u32> = node1.iter().take(node1.len() / 2).collect();
    let list = format!("0-5,{}-{}", first_half[0], first_half[first_half.len() - 1]);
    b.new_proc(10, "job", &[(0, 0.0)], &[0, 256]).mem_policy(10).confine(10, &list, "0-1");
    let plan = Adaptive::new().decide(&b.m);
    let o = orders_for(&plan, 10);
    assert_eq!(o.len(), 1, "{:?}", plan.standing);
    match &o[0].kind {
        ActionKind::SetAffinity { cpus } => {
            assert_eq!(cpus.iter().collect::<Vec<_>>(), first_half, "{}", cpus.to_list())
        }
        k => panic!("{k:?}"),
    }
}
