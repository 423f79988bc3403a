//! Rule "confined-within-cpuset": a process an operator or a container runtime confined to a
//! cpuset (its threads as wide as the cpuset, the model's `confined`) is placed within it: only
//! on nodes its cpuset reaches (a CPU of it there, memory allowed there), with a CPU mask cut to
//! the cpuset, sized by the cpuset's CPUs on each node, and its memory only to nodes the cpuset
//! allows.

mod adaptive_common;

use adaptive_common::*;
use numapilot_policy::{ActionKind, Adaptive, Policy};

/// app (pid 10): 4 x 1.0 CPU on node 1, 2048 MiB on node 0 (autonuma-2s12c-24g: node 0 has CPUs
/// 0-5,12-17, node 1 6-11,18-23). Unconfined, its CPU follows its memory to node 0.
fn app() -> B {
    let mut b = B::new("autonuma-2s12c-24g");
    b.proc(10, "app", &[(1, 1.0); 4], &[2048, 0]);
    b.group_proc(1, 10);
    b
}

/// `SetAffinity` actions as (pid, CPU list, rule).
fn masks(plan: &numapilot_policy::Plan) -> Vec<(u32, String, String)> {
    plan.actions
        .iter()
        .filter_map(|a| match &a.kind {
            ActionKind::SetAffinity { cpus } => Some((a.target.pid, cpus.to_list(), a.reason.rule.to_string())),
            _ => None,
        })
        .collect()
}

fn memory_moves(plan: &numapilot_policy::Plan) -> Vec<String> {
    plan.actions
        .iter()
        .filter_map(|a| match &a.kind {
            ActionKind::MigratePages { to, .. } => Some(format!("migrate to {to}")),
            ActionKind::MoveRanges { to, .. } => Some(format!("ranges to {to}")),
            ActionKind::Interleave { nodes, .. } => Some(format!("interleave over {nodes}")),
            ActionKind::SetAffinity { .. } => None,
        })
        .collect()
}

/// ```text
///   unconfined: cpu-follows-memory -> SetAffinity(10, 0-5,12-17)
///   in a cpuset of CPUs 0-3,6-9 (four of each node): the same rule, the mask cut to its cpuset
///   on node 0 -> SetAffinity(10, 0-3)
/// ```
#[test]
fn the_mask_is_cut_to_the_cpuset() {
    let b = app();
    let plan = Adaptive::new().decide(&b.m);
    assert_eq!(masks(&plan), vec![(10, "0-5,12-17".into(), "cpu-follows-memory".into())]);
    let mut b = app();
    b.confine(10, "0-3,6-9", "0-1");
    let plan = Adaptive::new().decide(&b.m);
    check_conservation(&b.m, &plan);
    assert_eq!(masks(&plan), vec![(10, "0-3".into(), "cpu-follows-memory".into())]);
}

/// ```text
///   in a cpuset of node 1 (CPUs 6-11,18-23, mems 1), its 2048 MiB on node 0 (left from before
///   the cpuset was narrowed): node 0 is outside it, so the threads stay on node 1 and the
///   memory follows them there (the only node it may hold memory on)
/// ```
#[test]
fn a_node_outside_the_cpuset_is_never_chosen() {
    let mut b = app();
    b.confine(10, "6-11,18-23", "1");
    let plan = Adaptive::new().decide(&b.m);
    check_conservation(&b.m, &plan);
    assert!(affinities(&b.m, &plan).is_empty(), "{plan:#?}");
    let moves = memory_moves(&plan);
    assert!(!moves.is_empty() && moves.iter().all(|m| m.ends_with(" 1")), "{moves:?}");
}

/// ```text
///   in a cpuset of CPUs 0-2,6-11 (three of node 0): 4 CPUs of demand fit node 0's CPUs but not
///   its cpuset's three there, so node 0 has no room for it; node 1 next, where it runs, with
///   its cpuset's CPUs there -> SetAffinity(10, 6-11), next-best-node; no memory goes anywhere
///   but node 1
/// ```
#[test]
fn room_is_counted_in_the_cpusets_cpus() {
    let mut b = app();
    b.confine(10, "0-2,6-11", "0-1");
    let plan = Adaptive::new().decide(&b.m);
    check_conservation(&b.m, &plan);
    assert_eq!(masks(&plan), vec![(10, "6-11".into(), "next-best-node".into())]);
    assert!(memory_moves(&plan).iter().all(|m| m.ends_with(" 1")), "{plan:#?}");
}

/// ```text
///   a new process (pid 20, 2 threads) in a cpuset of CPUs 3-5,6-8 while node 0 is idle and
///   node 1 carries 8 CPUs of another process: the fork rule sends it to the least loaded node
///   its cpuset reaches (node 0) with a mask of its cpuset's CPUs there (3-5)
///   the same in a cpuset of node 1's CPUs only: node 1, mask 6-8
/// ```
#[test]
fn the_fork_rule_spreads_within_the_cpuset() {
    let run = |cpus: &str| {
        let mut b = B::new("autonuma-2s12c-24g");
        b.proc(30, "busy", &[(1, 1.0); 8], &[0, 512]);
        b.group_proc(3, 30);
        b.new_proc(20, "job", &[(1, 0.0); 2], &[0, 64]);
        b.confine(20, cpus, "0-1");
        let plan = Adaptive::new().decide(&b.m);
        check_conservation(&b.m, &plan);
        masks(&plan).into_iter().filter(|a| a.0 == 20).collect::<Vec<_>>()
    };
    assert_eq!(run("3-8"), vec![(20, "3-5".into(), "fork-spread".into())]);
    assert_eq!(run("6-8"), vec![]);
}

/// ```text
///   in a cpuset of CPUs 0-22 but memory node 1 only, ten light threads (0.015 CPUs each) running
///   on node 0 with their memory there (left from before the cpuset was narrowed): node 0 is
///   outside its reach (no memory allowed there), so no rule keeps or puts its threads there; it
///   goes to node 1's part of its cpuset and its memory may follow only there
/// ```
#[test]
fn staying_is_only_within_the_reach() {
    let mut b = B::new("autonuma-2s12c-24g");
    b.proc(10, "light", &[(0, 0.015); 10], &[512, 0]);
    b.group_proc(1, 10);
    b.confine(10, "0-22", "1");
    let plan = Adaptive::new().decide(&b.m);
    check_conservation(&b.m, &plan);
    let node1 = b.node_cpus(1);
    for (pid, cpus, rule) in masks(&plan) {
        let set = numapilot_topology::CpuSet::parse_list(&cpus).unwrap();
        assert!(set.is_subset(&node1), "{pid} to {cpus} ({rule}): outside the nodes its cpuset reaches");
    }
    assert!(memory_moves(&plan).iter().all(|m| m.ends_with(" 1")), "{plan:#?}");
}

/// ```text
///   period 1: in a cpuset of CPUs 0-3,6-9, SetAffinity(10, 0-3), applied
///   the operator narrows the cpuset to 2-3,6-9: the kernel cuts the threads' mask to 2-3, which
///   the model reads as narrower than the cpuset (pinned); the cut mask is still this policy's
///   own, so the process stays managed (not "placed by someone else")
/// ```
#[test]
fn a_mask_of_ours_cut_by_the_kernel_to_a_narrowed_cpuset_stays_ours() {
    let mut b = app();
    b.confine(10, "0-3,6-9", "0-1");
    let mut p = Adaptive::new();
    let plan = p.decide(&b.m);
    assert_eq!(masks(&plan), vec![(10, "0-3".into(), "cpu-follows-memory".into())]);
    applied(&mut p, &b.m, &plan);
    b.confine(10, "2-3,6-9", "0-1").run_on(10, 0);
    let cut = std::sync::Arc::new(numapilot_topology::CpuSet::parse_list("2-3").unwrap());
    for tid in b.m.procs[&10].tids.clone() {
        b.m.tasks.get_mut(&numapilot_model::TaskKey { pid: 10, tid }).unwrap().cpus_allowed = cut.clone();
    }
    b.pinned(10);
    let e = p.explain(&b.m, 10).unwrap();
    assert!(!e.pinned, "{e}");
}
