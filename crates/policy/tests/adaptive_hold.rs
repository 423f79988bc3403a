//! Hysteresis (the hold), and what the policy must never touch: pinned processes, vanished or
//! reused pids, tasks of processes the model does not list.

mod adaptive_common;

use adaptive_common::*;
use numapilot_model::TaskKey;
use numapilot_policy::{Action, ActionKind, Adaptive, Outcome, Plan, Policy, TaskRef};
use numapilot_topology::CpuSet;

/// app (pid 10): 4 x 1.0 CPU on node 1, 2048 MiB on node 0 -> CPU follows memory to node 0.
fn app() -> B {
    let mut b = B::new("autonuma-2s12c-24g");
    b.proc(10, "app", &[(1, 1.0); 4], &[2048, 0]);
    b.group_proc(1, 10);
    b
}

/// The model after the period-1 move was applied and the memory then moved to node 1 (by first
/// touch, say): the same group now prefers node 1.
fn after_move(b: &mut B) {
    b.allow(10, &[0]).run_on(10, 0).mem(10, &[0, 2048]).group_proc(1, 10);
}

/// ```text
///   period 1: cpu-follows-memory -> SetAffinity(10, node 0), applied (load 4.0 CPUs)
///   memory then moves to node 1: the group prefers node 1 (2048 MiB, 100%)
///   periods 2..10 (< 10 periods after the move, load 4.0 unchanged): held, no SetAffinity
///   period 11 (10 periods after): SetAffinity(10, node 1), cpu-follows-memory
/// ```
#[test]
fn nothing_moves_back_within_hold_periods() {
    let mut b = app();
    let mut p = Adaptive::new();
    let plan = p.decide(&b.m);
    assert_eq!(affinities(&b.m, &plan), vec![(10, None, "0".into(), "cpu-follows-memory".into())]);
    applied(&mut p, &b.m, &plan);
    after_move(&mut b);
    for period in 2..=10 {
        let plan = p.decide(&b.m);
        check_conservation(&b.m, &plan);
        assert!(affinities(&b.m, &plan).is_empty(), "period {period}: {plan:#?}");
    }
    let plan = p.decide(&b.m);
    assert_eq!(p.periods(), 11);
    assert_eq!(affinities(&b.m, &plan), vec![(10, None, "1".into(), "cpu-follows-memory".into())]);
}

/// ```text
///   period 1 as above; period 2: the group's load fell from 4.0 to 1.6 CPUs (-60% > 50%): the hold
///   is lifted and the group follows its memory at once -> SetAffinity(10, node 1)
/// ```
#[test]
fn the_hold_is_lifted_when_the_load_changes() {
    let mut b = app();
    let mut p = Adaptive::new();
    let plan = p.decide(&b.m);
    applied(&mut p, &b.m, &plan);
    after_move(&mut b);
    b.rate(10, 0.4).group_proc(1, 10);
    let plan = p.decide(&b.m);
    assert_eq!(affinities(&b.m, &plan), vec![(10, None, "1".into(), "cpu-follows-memory".into())]);
}

/// A plan that was not applied (refused, or a dry run) starts no hold.
#[test]
fn an_unapplied_move_starts_no_hold() {
    let mut b = app();
    let mut p = Adaptive::new();
    let plan = p.decide(&b.m);
    let refused: Vec<Outcome> = plan.actions.iter().map(|_| Outcome::Refused { message: "EPERM".into() }).collect();
    p.observe_outcomes(&b.m, &plan, &refused);
    b.mem(10, &[0, 2048]).group_proc(1, 10);
    let plan = p.decide(&b.m);
    assert_eq!(affinities(&b.m, &plan), vec![(10, None, "1".into(), "cpu-follows-memory".into())]);
    let e = p.explain(&b.m, 10).unwrap();
    assert!(matches!(e.last_actions[0].outcome, Some(Outcome::Refused { .. })), "{e:#?}");
}

/// ```text
///   period 1: app (pid 10) 4 x 1.0 on node 1, 600 MiB on node 0; node 0's memory bandwidth is a
///             bottleneck, so the threads do not follow the memory there (stays on node 1)
///             -> SetAffinity(10, node 1) (refused: no CPU hold), MigratePages(0 -> 1, max 153600)
///             (applied: memory hold to node 1 at 4.0 CPUs)
///   period 2: it runs on node 0 now, memory 300/300: it stays on node 0 (SetAffinity) and memory
///             follows CPU would send 50% to node 0 -> held: no MigratePages
/// ```
#[test]
fn memory_does_not_move_back_within_hold_periods() {
    let mut b = B::new("autonuma-2s12c-24g");
    b.proc(10, "app", &[(1, 1.0); 4], &[600, 0]);
    b.group_proc(1, 10);
    b.m.nodes[0].mem_bw.bottleneck = true;
    let mut p = Adaptive::new();
    let plan = p.decide(&b.m);
    assert_eq!(plan.actions.len(), 2, "{plan:#?}");
    assert!(matches!(plan.actions[1].kind, ActionKind::MigratePages { max_pages: Some(153_600), .. }), "{plan:#?}");
    let outcomes = vec![Outcome::Refused { message: "EINVAL".into() }, Outcome::Applied { pages_moved: 153_600 }];
    p.observe_outcomes(&b.m, &plan, &outcomes);
    b.run_on(10, 0).mem(10, &[300, 300]).group_proc(1, 10);
    b.m.nodes[0].mem_bw.bottleneck = false;
    let plan = p.decide(&b.m);
    assert_eq!(affinities(&b.m, &plan), vec![(10, None, "0".into(), "stay-current-node".into())]);
    assert_eq!(plan.actions.len(), 1, "{plan:#?}");
    // Without the hold (a fresh policy) the memory would follow.
    let plan = Adaptive::new().decide(&b.m);
    assert_eq!(plan.actions.len(), 2, "{plan:#?}");
}

/// Pinned processes are never touched, even on a bottleneck node with all their memory remote;
/// a process the policy narrowed itself is not "pinned" for it.
#[test]
fn pinned_processes_are_never_touched() {
    let mut b = B::new("autonuma-2s12c-24g");
    b.proc(5, "pinned", &[(1, 1.0); 4], &[2048, 0]).pinned(5);
    b.proc(10, "app", &[(1, 1.0); 4], &[2048, 0]);
    b.group_proc(1, 5).group_proc(2, 10).bottleneck(1, 0.99);
    let mut p = Adaptive::new();
    let plan = p.decide(&b.m);
    check_conservation(&b.m, &plan);
    assert!(plan.actions.iter().all(|a| a.target.pid != 5), "{plan:#?}");
    assert_eq!(affinities(&b.m, &plan), vec![(10, None, "0".into(), "cpu-follows-memory".into())]);
    assert!(p.explain(&b.m, 5).unwrap().pinned);
    // Our own SetAffinity makes the model call pid 10 pinned (narrowed CPUs): still ours.
    applied(&mut p, &b.m, &plan);
    b.allow(10, &[0]).run_on(10, 0).pinned(10);
    assert!(!p.explain(&b.m, 10).unwrap().pinned);
    // Narrowed by someone else to other CPUs: foreign.
    b.allow(10, &[1]);
    assert!(p.explain(&b.m, 10).unwrap().pinned);
    let plan = p.decide(&b.m);
    assert!(plan.actions.iter().all(|a| a.target.pid != 10), "{plan:#?}");
}

/// A child inherits its parent's CPU mask at fork. A child of a process this policy placed, whose
/// threads all carry that mask, is ours to manage; with an explicit memory policy, another mask,
/// or a parent the policy never placed, it stays pinned by someone else.
///
/// ```text
///   period 1: app (pid 10), 4 x 1.0 CPU on node 1, 2048 MiB on node 0
///             -> SetAffinity(10, node 0) cpu-follows-memory, applied
///   pid 10 forks pid 20 ("child": 2 x 1.0 CPU running on node 0, mask = node 0's CPUs,
///   2048 MiB first touched... on node 1 (say, moved there by an operator's migratepages):
///   the model calls 20 pinned (narrowed CPUs)
///   period 2: 20 is ours through its parent -> SetAffinity(20, node 1) cpu-follows-memory
///   the same child with an explicit memory policy, or under pid 5 (never placed): untouched
/// ```
#[test]
fn children_inheriting_our_mask_are_ours() {
    let mut b = B::new("autonuma-2s12c-24g");
    b.proc(10, "app", &[(1, 1.0); 4], &[2048, 0]);
    b.group_proc(1, 10);
    let mut p = Adaptive::new();
    let plan = p.decide(&b.m);
    assert_eq!(affinities(&b.m, &plan), vec![(10, None, "0".into(), "cpu-follows-memory".into())]);
    applied(&mut p, &b.m, &plan);
    b.allow(10, &[0]).run_on(10, 0).pinned(10);
    b.proc(20, "child", &[(1, 1.0); 2], &[0, 2048]).parent(20, 10).allow(20, &[0]).run_on(20, 0).pinned(20);
    b.group_proc(2, 20);
    assert!(!p.explain(&b.m, 20).unwrap().pinned, "inherited mask counted as foreign");
    // (check_conservation's "no pinned process touched" reads the model's flag, which is set for
    // 20: the point of the rule is that the policy overrules it for a mask that is its own.)
    let plan = p.decide(&b.m);
    let child: Vec<_> = affinities(&b.m, &plan).into_iter().filter(|a| a.0 == 20).collect();
    assert_eq!(child, vec![(20, None, "1".into(), "cpu-follows-memory".into())], "{plan:#?}");

    // The same child with its own memory policy: placed by someone, untouched.
    let mut c = B { m: b.m.clone() };
    c.mem_policy(20);
    assert!(p.explain(&c.m, 20).unwrap().pinned);
    assert!(p.decide(&c.m).actions.iter().all(|a| a.target.pid != 20));
    // A mask the policy never set on the parent (node 1's CPUs): foreign.
    let mut c = B { m: b.m.clone() };
    c.allow(20, &[1]);
    assert!(p.explain(&c.m, 20).unwrap().pinned);
    // A parent the policy never placed (pid 5, same mask): foreign.
    let mut c = B { m: b.m.clone() };
    c.proc(5, "shell", &[(1, 0.1)], &[16, 0]).parent(20, 5);
    assert!(p.explain(&c.m, 20).unwrap().pinned);
}

/// A process that vanished yields no action and its state is forgotten; a reused pid starts
/// fresh; tasks of a pid the model lists no process for are never named.
#[test]
fn vanished_reused_and_unknown_processes_yield_no_action() {
    let mut b = B::new("autonuma-2s12c-24g");
    b.proc(10, "app", &[(1, 1.0); 4], &[2048, 0]);
    b.proc(11, "gone", &[(1, 1.0); 4], &[2048, 0]);
    b.group_proc(1, 10).group_proc(2, 11);
    let mut p = Adaptive::new();
    let plan = p.decide(&b.m);
    assert!(plan.actions.iter().any(|a| a.target.pid == 11));
    applied(&mut p, &b.m, &plan);
    // pid 11 exits; its tasks linger in the groups of a stale model (and one task has no process).
    b.m.procs.remove(&11);
    let plan = p.decide(&b.m);
    check_conservation(&b.m, &plan);
    assert!(plan.actions.iter().all(|a| a.target.pid != 11), "{plan:#?}");
    assert!(p.explain(&b.m, 11).is_none());
    // pid 10 is reused by a new process (another start time): no journal, fork rule applies.
    b.m.procs.get_mut(&10).unwrap().starttime = 999;
    b.m.procs.get_mut(&10).unwrap().age_at_first_seen_ns = 1_000_000;
    b.m.procs.get_mut(&10).unwrap().first_seen_ns = b.m.now_ns;
    let e = p.explain(&b.m, 10).unwrap();
    assert!(e.last_actions.is_empty(), "{e:#?}");
    let plan = p.decide(&b.m);
    check_conservation(&b.m, &plan);
    assert!(plan.actions.iter().all(|a| a.target.starttime == 999 || a.target.pid != 10));
    assert!(plan.actions.iter().any(|a| a.target.pid == 10 && a.reason.rule == "fork-spread"), "{plan:#?}");
    assert!(b.m.tasks.contains_key(&TaskKey { pid: 11, tid: 1100 }));
}

/// The cadence: every settle_interval_ms (100) while a process worth settling is younger than
/// new_process_age_ms (2000), every interval_ms (1000) otherwise. Worth settling: at least
/// new_process_min_rss_mib (16) resident or busy (>= min_group_cpu, 0.1 CPUs).
///
/// ```text
///   old (10): 1.0 CPU, 100 MiB, an hour old                      -> 1000 ms
///   + sh (12): new, idle, 1 MiB (a shell, a probe), first look    -> 100 ms (one look), no fork-spread
///     100 ms later, still idle                                    -> 1000 ms, no fork-spread for it
///   + sh (12) busy at its second look (0.5 CPUs)                  -> 100 ms, fork-spread for it
///   (without the threshold: 100 ms and a fork-spread for the idle 1 MiB shell)
///   young (11): new, idle, 64 MiB                                  -> 100 ms until 2.0 s old
/// ```
#[test]
fn decisions_come_faster_while_a_process_is_young() {
    let mut b = B::new("autonuma-2s12c-24g");
    b.proc(10, "old", &[(0, 1.0)], &[100, 0]);
    let mut p = Adaptive::new();
    assert_eq!(p.next_interval_ns(&b.m), 1_000_000_000);
    b.new_proc(12, "sh", &[(0, 0.0)], &[1, 0]);
    // Seen for the first time (no CPU rate yet): one look at the settle cadence.
    assert_eq!(p.next_interval_ns(&b.m), 100_000_000);
    let plan = p.decide(&b.m);
    assert!(plan.actions.iter().all(|a| a.target.pid != 12), "a small idle new process was placed: {plan:#?}");
    b.m.now_ns += 100_000_000;
    assert_eq!(p.next_interval_ns(&b.m), 1_000_000_000, "a small idle new process holds the settle cadence");
    let plan = p.decide(&b.m);
    assert!(plan.actions.iter().all(|a| a.target.pid != 12), "a small idle new process was placed: {plan:#?}");
    b.rate(12, 0.5);
    assert_eq!(p.next_interval_ns(&b.m), 100_000_000);
    let plan = p.decide(&b.m);
    assert!(plan.actions.iter().any(|a| a.target.pid == 12 && a.reason.rule == "fork-spread"), "{plan:#?}");
    b.m.procs.remove(&12);
    let p = Adaptive::new();
    b.new_proc(11, "young", &[(0, 0.0)], &[64, 0]);
    assert_eq!(p.next_interval_ns(&b.m), 100_000_000);
    // 100 ms old when first seen; 1.9 s later it is 2.0 s old: no longer young.
    b.m.now_ns += 1_899_000_000;
    assert_eq!(p.next_interval_ns(&b.m), 100_000_000);
    b.m.now_ns += 1_000_000;
    assert_eq!(p.next_interval_ns(&b.m), 1_000_000_000);
}

/// A range moved by MoveRanges is not moved again within hold_periods (threads on two nodes that
/// sample a shared buffer would bounce it).
///
/// ```text
///   numa02 shape (adaptive_rules), node 0's memory bandwidth a bottleneck (so t2, t3 stay on
///   node 1 rather than join their memory): t2, t3 on node 1 sample ranges on node 0 -> MoveRanges(4 ranges
///   -> node 1), applied. Next period the (stale) model still shows them on node 0: not moved again;
///   10 periods after the move they may move again.
/// ```
#[test]
fn a_moved_range_is_not_moved_again_within_hold_periods() {
    let mut b = B::new("autonuma-2s12c-24g");
    b.proc(10, "numa02", &[(0, 1.0), (0, 1.0), (1, 1.0), (1, 1.0)], &[1024, 0]);
    for i in 0..4u32 {
        b.access(10, i, &[1.0, 0.0]);
        b.hot(10, i, 0x4000_0000 + u64::from(i) * 256 * MIB, 2 * MIB, 0, 20);
        b.group(u64::from(i) + 1, &[tk(10, i)]);
    }
    b.m.nodes[0].mem_bw.bottleneck = true;
    let moves = |plan: &numapilot_policy::Plan| {
        plan.actions.iter().filter(|a| matches!(a.kind, ActionKind::MoveRanges { .. })).count()
    };
    let mut p = Adaptive::new();
    let plan = p.decide(&b.m);
    assert_eq!(moves(&plan), 1, "{plan:#?}");
    applied(&mut p, &b.m, &plan);
    b.allow(10, &[0, 1]);
    for period in 2..=10 {
        let plan = p.decide(&b.m);
        assert_eq!(moves(&plan), 0, "period {period}: {plan:#?}");
    }
    let plan = p.decide(&b.m);
    assert_eq!(moves(&plan), 1, "{plan:#?}");
}

/// An action refused (a read error) or reported vanished while the process lives on: the policy
/// neither forgets it nor holds it; a CPU mask the host applied to some threads before the error
/// is the policy's own, not a foreign pin.
///
/// ```text
///   period 1: app -> SetAffinity(10, node 0) cpu-follows-memory; outcome Refused ("numa_maps
///             read: EINVAL"); the host had narrowed threads 0 and 1 to node 0 (model: pinned)
///   period 2: app still managed: SetAffinity for threads 2, 3 to node 0 (again)
///   period 2 outcome Vanished (not confirmed gone: still in the model) -> period 3 plans it again
/// ```
#[test]
fn refused_or_vanished_actions_are_planned_again_while_the_process_lives() {
    let mut b = app();
    let mut p = Adaptive::new();
    let plan = p.decide(&b.m);
    assert_eq!(affinities(&b.m, &plan), vec![(10, None, "0".into(), "cpu-follows-memory".into())]);
    let refused = vec![Outcome::Refused { message: "numa_maps read: EINVAL".into() }];
    p.observe_outcomes(&b.m, &plan, &refused);
    let cpus0 = std::sync::Arc::new(b.node_cpus(0));
    for tid in [1000, 1001] {
        b.m.tasks.get_mut(&TaskKey { pid: 10, tid }).unwrap().cpus_allowed = cpus0.clone();
    }
    b.pinned(10);
    // (No check_conservation here: it treats the model's pinned flag as untouchable, which is
    // exactly the flag the policy must see through for the mask it tried itself.)
    let plan = p.decide(&b.m);
    assert!(!plan.actions.is_empty(), "held out after a refusal: {plan:#?}");
    assert!(
        plan.actions
            .iter()
            .all(|a| a.target.pid == 10
                && matches!(&a.kind, ActionKind::SetAffinity { cpus } if *cpus == b.node_cpus(0))),
        "{plan:#?}"
    );
    let vanished: Vec<Outcome> = plan.actions.iter().map(|_| Outcome::Vanished).collect();
    p.observe_outcomes(&b.m, &plan, &vanished);
    let again = p.decide(&b.m);
    assert_eq!(again.actions.len(), plan.actions.len(), "{again:#?}");
    let e = p.explain(&b.m, 10).unwrap();
    assert!(e.last_actions.iter().any(|a| matches!(a.outcome, Some(Outcome::Vanished))), "{e:#?}");
}

/// Rule "moves-in-flight": a page move the host runs in the background (`Outcome::Started`) is
/// not asked for again while it runs, however many decisions come meanwhile, and the process's
/// threads keep their placement; when the move ends (`observe_finished`) the process is planned
/// as usual again.
///
/// ```text
///   the rig's 2-node numa01 (bottleneck-leaves' scene): A (10) to node 0, B (11) to node 1,
///   B's 37 MiB follows: MigratePages(11, 0 -> 1) -> Started (the mover copies)
///   12 more decisions on the same model (more than hold_periods = 10), B's load up 50%:
///     no page action for B, no CPU action for B (its hold kept fresh)
///     (without the rule: the same MigratePages each decision, and after 10 the hold is gone)
///   the move ends (Applied): the next decision plans B's memory again (the model still has it
///   on node 0)
/// ```
#[test]
fn a_background_move_is_not_asked_again_and_holds_until_it_ends() {
    let mut b = B::fixture("rig-6.12-2node");
    b.proc(10, "numa01", &[(1, 0.02), (1, 1.0), (1, 1.0)], &[37, 0]);
    b.proc(11, "numa01", &[(0, 0.02), (0, 0.85), (0, 0.85)], &[37, 0]);
    b.group_proc(1, 10).group_proc(2, 11);
    b.bottleneck(1, 1.0);
    b.m.nodes[1].cpu.interference = 0.44;
    let mut pol = Adaptive::new();
    let plan = pol.decide(&b.m);
    let mig = plan
        .actions
        .iter()
        .position(|a| a.target.pid == 11 && matches!(a.kind, ActionKind::MigratePages { .. }))
        .expect("B's memory follows it");
    started_at(&mut pol, &b.m, &plan, mig);
    // Applied: B runs on node 1 now (its memory still on node 0), A on node 0.
    b.run_on(10, 0).run_on(11, 1);
    b.allow(10, &[0]).allow(11, &[1]);
    b.m.nodes[1].cpu.bottleneck = false;
    b.rate(11, 1.3);
    for round in 0..12 {
        b.m.now_ns += 200_000_000;
        b.m.updates += 1;
        let plan = pol.decide(&b.m);
        check_conservation(&b.m, &plan);
        assert!(plan.actions.iter().all(|a| a.target.pid != 11), "decision {round} acted on B mid-move: {plan:#?}");
        let applied: Vec<Outcome> = plan.actions.iter().map(|_| Outcome::Applied { pages_moved: 0 }).collect();
        pol.observe_outcomes(&b.m, &plan, &applied);
    }
    let started = plan.actions[mig].clone();
    let done = numapilot_policy::FinishedMove {
        action: started,
        outcome: Outcome::Applied { pages_moved: 9472 },
        started_ns: 0,
        ended_ns: 1,
        ran_on: None,
        threads: 1,
    };
    pol.observe_finished(&b.m, &[done]);
    b.m.now_ns += 200_000_000;
    b.m.updates += 1;
    let plan = pol.decide(&b.m);
    assert!(
        plan.actions.iter().any(|a| a.target.pid == 11 && matches!(a.kind, ActionKind::MigratePages { .. })),
        "after the move B is planned as usual (the model still has its memory on node 0): {plan:#?}"
    );
}

/// hold-change-floor: a load change lifts a hold only when it is also more than `min_group_cpu`
/// (0.1 CPUs): a light thread's swing from 0.07 to 0.0 CPUs is its wake-ups, not a phase change
/// (the rig's 4-node numa01 main thread, moved by the balancer and back at the next decision;
/// `fixtures/rig-6.12-4node`, 2 CPUs a node).
///
/// ```text
///   P (pid 10): main t0 0.07 + workers 2 x 1.0 on node 0 (allowed there only: placed long
///   ago, no group hold), 37 MiB there; node 0 flagged
///   decide 1: managed 2.07 > 2.06 -> t0 to node 1 (balance-weakest-first), applied
///   t0 reads 0.0 on node 1, the workers 0.95 each: node 0 with t0 (1.9 + 0.07) / 2 < 1
///   decisions 2-10: t0's hold stands (a change of 0.07 CPUs, under 0.1): no action moves it
///             (without the floor: 100% > 50% lifts it, t0 back to node 0 at decision 2)
///   decisions 11-13: the hold is over; node 0 with t0 and the balancer's slack (3 tasks x 0.02):
///             (1.9 + 0.07 + 0.06) / 2 = 1.015 > 1 -> t0 stays on node 1 (balance-stays-band: the
///             workers' 0.95 is within the band the balancer left before moving t0 out; without
///             the band, 0.985 <= 1 brought it back, the rig's out-and-back every few seconds)
///   the workers slow to 0.9 each: (1.8 + 0.07 + 0.06) / 2 = 0.965 -> t0 comes back
/// ```
#[test]
fn a_light_threads_swing_does_not_lift_its_hold() {
    let mut b = B::fixture("rig-6.12-4node");
    b.proc(10, "numa01", &[(0, 0.07), (0, 1.0), (0, 1.0)], &[37, 0, 0, 0]);
    // Placed on node 0 long ago: no group action, so no fresh group hold covers t0.
    b.group_proc(1, 10).allow(10, &[0]);
    b.bottleneck(0, 1.035);
    let mut p = Adaptive::new();
    let plan = p.decide(&b.m);
    check_conservation(&b.m, &plan);
    assert_eq!(plan.actions.len(), 1, "{plan:#?}");
    assert!(
        plan.actions.iter().any(|a| a.target.tid == Some(1000) && a.reason.rule == "balance-weakest-first"),
        "{plan:#?}"
    );
    applied(&mut p, &b.m, &plan);
    b.allow(10, &[0]);
    b.thread_on(10, 0, 1);
    b.thread_rate(10, 0, 0.0).thread_rate(10, 1, 0.95).thread_rate(10, 2, 0.95);
    b.m.nodes[0].cpu.load = 0.95;
    b.m.nodes[0].cpu.bottleneck = false;
    let touches_t0 = |plan: &numapilot_policy::Plan| {
        plan.actions.iter().any(|a| a.target.pid == 10 && (a.target.tid.is_none() || a.target.tid == Some(1000)))
    };
    for d in 2..=10 {
        let plan = p.decide(&b.m);
        check_conservation(&b.m, &plan);
        assert!(!touches_t0(&plan), "decision {d}: t0 pulled back within its hold: {plan:#?}");
        applied(&mut p, &b.m, &plan);
    }
    for d in 11..=13 {
        let plan = p.decide(&b.m);
        check_conservation(&b.m, &plan);
        assert!(!touches_t0(&plan), "decision {d}: t0 pulled back within the balancer's band: {plan:#?}");
        applied(&mut p, &b.m, &plan);
    }
    b.thread_rate(10, 1, 0.9).thread_rate(10, 2, 0.9);
    b.m.nodes[0].cpu.load = 0.9;
    let plan = p.decide(&b.m);
    check_conservation(&b.m, &plan);
    assert!(touches_t0(&plan), "with room beyond the band t0 comes back to its unit's node: {plan:#?}");
}

/// hold-change-floor for a balancer's move: a task the balancer moved alone keeps its hold unless
/// its CPU changes by more than the balancer's own tolerance on a node (`imbalance` x the CPUs of
/// the node it went to: 0.25 x 2 = 0.5 CPUs here). The rig's hotplug run (2-node guest, 2 CPUs a
/// node): rig-toucher 668's thread 671, moved off node 0 at 0.37 CPUs (step 28), read about 0.15
/// on node 1, where it no longer waited behind the others; a change of 59% and 0.22 CPUs lifted
/// its hold, and at step 30 its group's placement (stay-current-node) took it back.
///
/// ```text
///   P (pid 10): t0 0.37 + 2 workers x 1.0 on node 0 (allowed there only: placed long ago, no
///   group hold), 34 MiB there; node 0 flagged
///   decide 1: 2.37 > 2.06 -> t0 to node 1 (balance-weakest-first), applied
///   t0 reads 0.15 on node 1; the workers 0.7 each: node 0 with t0 at its moved load and the
///   balancer's slack, (1.4 + 0.37 + 0.06) / 2 = 0.915 <= 1 (balance-stays lets it back)
///   decisions 2-10: t0's hold stands (0.22 CPUs is under 0.5): no action moves it
///             (without the floor: 0.22 > 50% of 0.37 and > 0.1 lifts it, and t0 goes back
///             to node 0 at decision 2, as at the rig's step 30)
///   decision 11: the hold is over; node 0 has room for it: t0 comes back
///   heavy change instead, at decision 2: t0 reads 1.0 (a change of 0.63 > 0.5), the workers
///             0.4 each: (0.8 + 1.0 + 0.06) / 2 = 0.93 -> the hold is lifted, t0 comes back
///             (the same node 0 with t0 at 0.15 keeps it held)
/// ```
#[test]
fn a_balancer_move_is_held_through_a_light_threads_change() {
    let touches_t0 = |plan: &numapilot_policy::Plan| {
        plan.actions.iter().any(|a| a.target.pid == 10 && (a.target.tid.is_none() || a.target.tid == Some(1000)))
    };
    // Decision 1 (t0 moved off node 0, applied), then t0 at `t0` on node 1 and the workers at
    // `workers` each.
    let moved = |t0: f64, workers: f64| {
        let mut b = B::fixture("rig-6.12-2node");
        b.proc(10, "rig-toucher", &[(0, 0.37), (0, 1.0), (0, 1.0)], &[34, 0]);
        b.group_proc(1, 10).allow(10, &[0]);
        b.bottleneck(0, 1.185);
        let mut p = Adaptive::new();
        let plan = p.decide(&b.m);
        check_conservation(&b.m, &plan);
        let moved: Vec<_> = affinities(&b.m, &plan).into_iter().filter(|a| a.1 == Some(1000)).collect();
        assert_eq!(moved, vec![(10, Some(1000), "1".into(), "balance-weakest-first".into())], "{plan:#?}");
        applied(&mut p, &b.m, &plan);
        b.allow(10, &[0]);
        b.thread_on(10, 0, 1);
        b.thread_rate(10, 0, t0).thread_rate(10, 1, workers).thread_rate(10, 2, workers);
        b.m.nodes[0].cpu.load = workers;
        b.m.nodes[0].cpu.bottleneck = false;
        (b, p)
    };
    let (b, mut p) = moved(0.15, 0.7);
    for d in 2..=10 {
        let plan = p.decide(&b.m);
        check_conservation(&b.m, &plan);
        assert!(!touches_t0(&plan), "decision {d}: t0 pulled back within its hold: {plan:#?}");
        applied(&mut p, &b.m, &plan);
    }
    let plan = p.decide(&b.m);
    check_conservation(&b.m, &plan);
    assert!(touches_t0(&plan), "decision 11: the hold is over and node 0 has room: t0 comes back: {plan:#?}");

    let (b, mut p) = moved(0.15, 0.4);
    let plan = p.decide(&b.m);
    check_conservation(&b.m, &plan);
    assert!(!touches_t0(&plan), "t0 at 0.15: held, however free node 0 is: {plan:#?}");
    let (b, mut p) = moved(1.0, 0.4);
    let plan = p.decide(&b.m);
    check_conservation(&b.m, &plan);
    assert!(touches_t0(&plan), "t0 at 1.0: a change that matters lifts the hold, and node 0 has room: {plan:#?}");
}

/// Rule "moves-in-flight" for a unit without a hold (the fork rule starts none): while its memory
/// moves to the node it runs on, its threads stay there, even when that node is short of room.
///
/// ```text
///   the rig's 4-node guest (2 CPUs a node): A (10) main 0.32 + 2 workers x 1.0 on node 0, its
///   37 MiB there; B (11) main 0.01 + 2 workers x 0.72 on node 1 (allowed there only: placed
///   long ago, no hold), its 37 MiB on node 0
///   decision 1: B stays on node 1 (node 0 full with A), its memory follows: MigratePages
///               0 -> 1, Started (the mover copies)
///   B's workers now at 1.0 each; 0.3 CPUs of load nobody explains on node 1 (the race's
///   sampler): node 1 has 1.7 of 2.0 CPUs left for B's 2.01
///   decision 2: B's threads stay on node 1 (moves-in-flight)
///               (without the rule: next-best-node, B's workers to node 3 while the memory
///               goes to node 1: the race at 91fe989, 4-node numa01 repetition 3, never local)
///   B's threads found on node 2 instead (a failed CPU change): sent to node 1 (moves-in-flight)
/// ```
#[test]
fn threads_stay_where_their_memory_moves_while_it_moves() {
    let (mut b, mut pol, _) = numa01_pair_moving(&[(0, 0.32), (0, 1.0), (0, 1.0)], &[(1, 0.01), (1, 0.72), (1, 0.72)]);
    b.thread_rate(11, 1, 1.0).thread_rate(11, 2, 1.0);
    b.m.nodes[1].cpu_demand += 0.3;
    b.m.now_ns += 500_000_000;
    b.m.updates += 1;
    let plan = pol.decide(&b.m);
    check_conservation(&b.m, &plan);
    assert!(
        plan.actions.iter().all(|a| a.target.pid != 11 || !matches!(a.kind, ActionKind::SetAffinity { .. })),
        "B's threads moved away from where its memory goes: {plan:#?}"
    );

    // Its threads not where the memory goes (the CPU change failed; they run on node 2): they
    // are sent to node 1, not held on node 2.
    b.run_on(11, 2).allow(11, &[0, 1, 2, 3]);
    b.m.now_ns += 500_000_000;
    b.m.updates += 1;
    let plan = pol.decide(&b.m);
    check_conservation(&b.m, &plan);
    let a = plan.actions.iter().find(|a| a.target.pid == 11).unwrap_or_else(|| panic!("B is placed: {plan:#?}"));
    assert_eq!(a.reason.rule, "moves-in-flight", "{plan:#?}");
    assert!(matches!(&a.kind, ActionKind::SetAffinity { cpus } if cpus.is_subset(&b.node_cpus(1))), "{plan:#?}");

    // Its threads on a CPU no node lists (a reserved one: `TaskView::node` is None): not taken for
    // on target (held where they are), sent to node 1 too.
    for tid in b.m.procs[&11].tids.clone() {
        b.m.tasks.get_mut(&TaskKey { pid: 11, tid }).unwrap().node = None;
    }
    b.m.now_ns += 500_000_000;
    b.m.updates += 1;
    let plan = pol.decide(&b.m);
    check_conservation(&b.m, &plan);
    let a = plan.actions.iter().find(|a| a.target.pid == 11).unwrap_or_else(|| panic!("B is placed: {plan:#?}"));
    assert_eq!(a.reason.rule, "moves-in-flight", "{plan:#?}");
    assert!(matches!(&a.kind, ActionKind::SetAffinity { cpus } if cpus.is_subset(&b.node_cpus(1))), "{plan:#?}");
}

/// Rule "stalled-by-own-move": while a process's pages move, its threads wait on them and read
/// near idle; the plan counts them at their demand when the move started, so their node is not
/// taken for empty.
///
/// ```text
///   the rig's 4-node guest (2 CPUs a node, node 1 at distance 11 from node 0, nodes 2-3 at 20):
///   A (10) main 0.05 + 2 workers x 1.0 on node 0, its 37 MiB there; B (11) main 0.01 + 2 workers
///   x 1.0 on node 1 (allowed there only), its 37 MiB on node 0
///   decision 1: B's memory follows it: MigratePages 0 -> 1, Started; floors 0.01, 1.0, 1.0
///   during the copy: B's workers read 0.05 each (waiting on their pages); A's main thread reads
///   0.3, node 0 at 2.3 / 2 = 1.15, flagged
///   decision 2: A's main thread is moved off node 0 (balance-weakest-first) to node 2 or 3:
///               node 1 counts B at 2.01 and has no room (without the rule: node 1 reads 0.11,
///               the nearest node with room, and A's main thread goes there, to be moved out
///               again when B's workers wake: the race at 3d6dbf5)
/// ```
#[test]
fn a_node_whose_threads_wait_on_their_moving_pages_is_not_taken_for_idle() {
    let (mut b, mut pol, plan) = numa01_pair_moving(&[(0, 0.05), (0, 1.0), (0, 1.0)], &[(1, 0.01), (1, 1.0), (1, 1.0)]);
    let started = plan
        .actions
        .iter()
        .find(|a| a.target.pid == 11 && matches!(a.kind, ActionKind::MigratePages { .. }))
        .unwrap()
        .clone();
    b.thread_rate(11, 1, 0.05).thread_rate(11, 2, 0.05).thread_rate(10, 0, 0.3);
    b.bottleneck(0, 1.15);
    b.m.now_ns += 500_000_000;
    b.m.updates += 1;
    let plan = pol.decide(&b.m);
    check_conservation(&b.m, &plan);
    let main: Vec<_> = affinities(&b.m, &plan).into_iter().filter(|a| a.0 == 10 && a.1 == Some(1000)).collect();
    assert_eq!(main.len(), 1, "A's main thread is moved off node 0: {plan:#?}");
    assert!(main[0].2 == "2" || main[0].2 == "3", "not onto node 1, where B's threads wait on their pages: {main:?}");
    assert_eq!(main[0].3, "balance-weakest-first");

    // B's main thread busy meanwhile (0.33): node 1 counts 2.34 of 2 CPUs, flagged. B's threads
    // stay where its memory goes until the move ends (without the skip: B's main thread is sent
    // towards node 0, where its access shares still say its memory is, into A's node).
    b.thread_rate(11, 0, 0.33);
    b.bottleneck(1, 1.17);
    b.m.now_ns += 500_000_000;
    b.m.updates += 1;
    let plan = pol.decide(&b.m);
    check_conservation(&b.m, &plan);
    assert!(
        plan.actions.iter().all(|a| a.target.pid != 11 || !matches!(a.kind, ActionKind::SetAffinity { .. })),
        "a thread of B moved while B's pages move: {plan:#?}"
    );

    // The move ends; the decision that sees it end still has the period's rates, the wait in
    // them: B counts at its floor once more, A's main thread does not go to node 1.
    let main_to = |m: &numapilot_model::Model, plan: &numapilot_policy::Plan| -> Vec<String> {
        affinities(m, plan).into_iter().filter(|a| a.0 == 10 && a.1 == Some(1000)).map(|a| a.2).collect()
    };
    let done = numapilot_policy::FinishedMove {
        action: started,
        outcome: Outcome::Applied { pages_moved: 9472 },
        started_ns: 0,
        ended_ns: 1,
        ran_on: None,
        threads: 2,
    };
    pol.observe_finished(&b.m, &[done]);
    b.thread_rate(11, 0, 0.01);
    b.m.nodes[1].cpu.bottleneck = false;
    b.m.now_ns += 500_000_000;
    b.m.updates += 1;
    let plan = pol.decide(&b.m);
    check_conservation(&b.m, &plan);
    assert!(main_to(&b.m, &plan).iter().all(|n| n != "1"), "onto node 1 in the step that saw the move end: {plan:#?}");
    // A decision later the floors are gone: B's workers reading 0.05 for a whole period are idle,
    // and node 1, nearest with room, takes A's main thread.
    b.m.now_ns += 500_000_000;
    b.m.updates += 1;
    let plan = pol.decide(&b.m);
    check_conservation(&b.m, &plan);
    assert_eq!(main_to(&b.m, &plan), vec!["1".to_string()], "{plan:#?}");
}

/// Rule "moves-in-flight" holds a unit for the move of the process that carries most of its CPU,
/// not for a light member's: a group of a busy process and a light one whose memory is moving is
/// placed as usual.
///
/// ```text
///   the rig's 4-node guest: busy (10) 2 x 0.9 CPUs on node 1, 200 MiB there; light (11) 1 x 0.15
///   on node 1, 37 MiB on node 0; one group of all three threads, allowed on node 1 only (placed
///   long ago: no hold)
///   decision 1: the group stays on node 1; light's memory follows: MigratePages 0 -> 1, Started
///   node 1 then carries 1.2 CPUs nobody explains: 3.15 > 2.0 + slack, over by more than
///   locality pays for
///   decision 2: the group is placed as usual and moved off node 1 (without the majority
///   condition: held on node 1 by light's move, no action)
/// ```
#[test]
fn a_light_members_move_does_not_hold_its_group() {
    let mut b = B::fixture("rig-6.12-4node");
    b.proc(10, "busy", &[(1, 0.9), (1, 0.9)], &[0, 200, 0, 0]);
    b.proc(11, "light", &[(1, 0.15)], &[37, 0, 0, 0]);
    // Placed on node 1 long ago: no group action in decision 1, so no hold.
    b.group(1, &[tk(10, 0), tk(10, 1), tk(11, 0)]).allow(10, &[1]).allow(11, &[1]);
    let mut pol = Adaptive::new();
    let plan = pol.decide(&b.m);
    check_conservation(&b.m, &plan);
    start_move_to(&mut pol, &b.m, &plan, 11, "1");
    b.m.nodes[1].cpu_demand += 1.2;
    b.m.now_ns += 500_000_000;
    b.m.updates += 1;
    let plan = pol.decide(&b.m);
    check_conservation(&b.m, &plan);
    assert!(
        plan.actions.iter().any(|a| a.target.pid == 10 && matches!(a.kind, ActionKind::SetAffinity { .. })),
        "the group is placed as usual, off node 1: {plan:#?}"
    );
}

/// Tells the policy every action of `plan` was applied, except action `mig`, a page move the host
/// runs in the background (`Outcome::Started`).
fn started_at(pol: &mut Adaptive, m: &numapilot_model::Model, plan: &numapilot_policy::Plan, mig: usize) {
    let outcomes: Vec<Outcome> = (0..plan.actions.len())
        .map(|i| if i == mig { Outcome::Started { pages: 9472 } } else { Outcome::Applied { pages_moved: 0 } })
        .collect();
    pol.observe_outcomes(m, plan, &outcomes);
}

/// The rig's 4-node numa01 as two hand traces start it: process A (pid 10) with threads `a` on
/// node 0, B (pid 11) with threads `b` on node 1, each a group, both 37 MiB on node 0; the first
/// decision, checked for conservation, with B's memory move to node 1 started.
fn numa01_pair_moving(a: &[(u32, f64)], b: &[(u32, f64)]) -> (B, Adaptive, numapilot_policy::Plan) {
    let mut m = B::fixture("rig-6.12-4node");
    m.proc(10, "numa01", a, &[37, 0, 0, 0]);
    m.proc(11, "numa01", b, &[37, 0, 0, 0]);
    m.group_proc(1, 10).group_proc(2, 11).allow(10, &[0]).allow(11, &[1]);
    let mut pol = Adaptive::new();
    let plan = pol.decide(&m.m);
    check_conservation(&m.m, &plan);
    start_move_to(&mut pol, &m.m, &plan, 11, "1");
    (m, pol, plan)
}

/// [`started_at`] for `pid`'s MigratePages to `to` in `plan` (which must have one).
fn start_move_to(pol: &mut Adaptive, m: &numapilot_model::Model, plan: &numapilot_policy::Plan, pid: u32, to: &str) {
    let mig = plan
        .actions
        .iter()
        .position(|a| {
            a.target.pid == pid && matches!(&a.kind, ActionKind::MigratePages { to: t, .. } if t.to_string() == to)
        })
        .unwrap_or_else(|| panic!("process {pid}'s memory follows it to node {to}: {plan:#?}"));
    started_at(pol, m, plan, mig);
}

/// A process-wide move covers every unit of the process, and each unit's hold is checked against
/// that unit's own load. The move used to record the first unit's load for every thread, so a
/// heavier unit read as "changed" at the next decision and its hold was lifted at once.
///
/// ```text
///   app (pid 10), 8192 MiB on node 0, threads on node 1:
///     unit 1 = thread 0 (0.5 CPUs, 2048 MiB by thread share)
///     unit 2 = threads 1-3 (1.0 CPU each: 3.0 CPUs, 6144 MiB)
///   period 1: both units follow their memory to node 0 -> one SetAffinity(10, node 0), applied;
///             holds: unit 1 at 0.5 CPUs, unit 2 at 3.0 CPUs
///   memory then moves to node 1: both units prefer node 1
///   period 2: loads unchanged (0.5 and 3.0): both held, no SetAffinity
///             (recorded at 0.5 for unit 2: |3.0 - 0.5| > 50% of 0.5 and > 0.1, lifted, and
///             unit 2's threads went back to node 1 while unit 1 stayed)
/// ```
#[test]
fn a_process_wide_move_holds_each_unit_at_its_own_load() {
    let mut b = B::new("autonuma-2s12c-24g");
    b.proc(10, "app", &[(1, 0.5), (1, 1.0), (1, 1.0), (1, 1.0)], &[8192, 0]);
    let units = |b: &mut B| {
        b.group(1, &[tk(10, 0)]).group(2, &[tk(10, 1), tk(10, 2), tk(10, 3)]);
    };
    units(&mut b);
    let mut p = Adaptive::new();
    let plan = p.decide(&b.m);
    assert_eq!(affinities(&b.m, &plan), vec![(10, None, "0".into(), "cpu-follows-memory".into())]);
    applied(&mut p, &b.m, &plan);
    b.allow(10, &[0]).run_on(10, 0).mem(10, &[0, 8192]);
    units(&mut b);
    let plan = p.decide(&b.m);
    check_conservation(&b.m, &plan);
    assert!(affinities(&b.m, &plan).is_empty(), "{plan:#?}");
}

/// held-task-booked-where-held: a task held on its own nodes (here by the balancer's move) is
/// booked on those nodes, not with its unit, so the units placed after it see the room it left.
///
/// ```text
///   app (pid 10): 13 x 1.0 CPU on node 0 (12 CPUs), allowed there only (placed long ago),
///   64 MiB there, one group; node 0 a CPU bottleneck (load 1.08)
///   decide 1: node 0 13/12 = 1.08 (> capacity), node 1 0.00 -> one task to node 1
///             (balance-weakest-first), applied; it runs on node 1 now
///   then every app thread reads 0.9 CPUs (the moved one's hold stands: a change of 0.1, not
///   more than min_group_cpu) and node 0 is no longer a bottleneck (load 0.9); db (pid 20), seen now: 1 x 1.0 CPU on node 1, 2048 MiB on node 0
///   decide 2: app's unit stays on node 0 with 12 x 0.9 = 10.8 there; its moved task is held on
///             node 1 (0.9 booked there); db follows its memory: node 0 10.8 + 1.0 = 11.8 of 12
///             -> SetAffinity(20, node 0), cpu-follows-memory
///             (the held task booked with its unit: node 0 11.7 + 1.0 > 12, db refused node 0)
/// ```
#[test]
fn a_held_task_is_booked_where_it_is_held() {
    let mut b = B::new("autonuma-2s12c-24g");
    b.proc(10, "app", &[(0, 1.0); 13], &[64, 0]);
    b.group_proc(1, 10).allow(10, &[0]);
    b.bottleneck(0, 1.08);
    let mut p = Adaptive::new();
    let plan = p.decide(&b.m);
    check_conservation(&b.m, &plan);
    let moved: Vec<u32> =
        plan.actions.iter().filter(|a| a.reason.rule == "balance-weakest-first").filter_map(|a| a.target.tid).collect();
    assert_eq!(moved.len(), 1, "{plan:#?}");
    applied(&mut p, &b.m, &plan);
    b.thread_on(10, moved[0] - 1000, 1).rate(10, 0.9).group_proc(1, 10);
    b.proc(20, "db", &[(1, 1.0)], &[2048, 0]).group_proc(2, 20);
    b.m.nodes[0].cpu.load = 0.9;
    b.m.nodes[0].cpu.bottleneck = false;
    let plan = p.decide(&b.m);
    check_conservation(&b.m, &plan);
    assert_eq!(affinities(&b.m, &plan), vec![(20, None, "0".into(), "cpu-follows-memory".into())], "{plan:#?}");
}

/// A task the balancer moved alone holds itself, not its unit (unit-hold-is-the-units): the
/// unit's hold is a move of the unit. Taken for the unit's hold when the moved task became the
/// unit's heaviest, that move's load (the task's) was compared with the unit's, and under the
/// balancer's floor (hold-change-floor) the whole unit was held, and booked, on the node the
/// task went to while its other threads ran where they were.
///
/// ```text
///   autonuma-2s12c-24g (12 CPUs a node)
///   app (pid 10): t0 0.3 + 12 workers x 1.0 on node 0 (allowed there only: placed long ago),
///   32 MiB there, one group; node 0 flagged
///   decide 1: t0 to node 1 (balance-weakest-first), applied
///   app's workers then read 0.2 each: t0 (0.3) is the unit's heaviest task, the unit 2.7 CPUs;
///   busy (pid 11), seen now: 10 x 0.95 on node 1, 64 MiB there; db (pid 12), seen now: 1 x 1.0
///   on node 0, 2048 MiB on node 1
///   decide 2: busy stays on node 1 (9.5); app's unit is placed as usual, on node 0, t0 held
///             alone on node 1 (0.3 booked there); db follows its memory: node 1 9.5 + 0.3 + 1.0
///             = 10.8 of 12 -> SetAffinity(12, node 1), cpu-follows-memory
///             (with t0's move as the unit's hold: 2.7 - 0.3 = 2.4 CPUs is under the floor of
///             0.25 x 12 = 3, the unit is held on node 1 and booked there whole: 9.5 + 2.7 +
///             1.0 > 12, db refused node 1)
/// ```
#[test]
fn a_task_the_balancer_moved_does_not_hold_its_unit() {
    let mut b = B::new("autonuma-2s12c-24g");
    let mut threads = vec![(0u32, 0.3)];
    threads.extend([(0u32, 1.0); 12]);
    b.proc(10, "app", &threads, &[32, 0]);
    b.group_proc(1, 10).allow(10, &[0]);
    b.bottleneck(0, 1.02);
    let mut p = Adaptive::new();
    let plan = p.decide(&b.m);
    check_conservation(&b.m, &plan);
    let moved: Vec<_> = affinities(&b.m, &plan).into_iter().filter(|a| a.1 == Some(1000)).collect();
    assert_eq!(moved, vec![(10, Some(1000), "1".into(), "balance-weakest-first".into())], "{plan:#?}");
    applied(&mut p, &b.m, &plan);
    b.thread_on(10, 0, 1).rate(10, 0.2).thread_rate(10, 0, 0.3).group_proc(1, 10);
    b.m.nodes[0].cpu.load = 0.2;
    b.m.nodes[0].cpu.bottleneck = false;
    b.proc(11, "busy", &[(1, 0.95); 10], &[0, 64]).group_proc(2, 11).allow(11, &[1]);
    b.proc(12, "db", &[(0, 1.0)], &[0, 1100]).group_proc(3, 12);
    let plan = p.decide(&b.m);
    check_conservation(&b.m, &plan);
    assert_eq!(affinities(&b.m, &plan), vec![(12, None, "1".into(), "cpu-follows-memory".into())], "{plan:#?}");
    assert!(plan.actions.iter().all(|a| a.target.pid != 10), "app stays as it is, memory too: {plan:#?}");
}

/// A host whose CPU 3 is reserved (`isolcpus=3`: every process's default mask is 0-2, the usable
/// CPUs): P's threads run under that mask on node 0 (2 CPUs), overloaded; the balancer moves one
/// thread to node 1 (mask 2), and the model then calls the process pinned (one thread narrower
/// than its nodes). Its other threads' mask 0-2 is every usable CPU, no pin of someone else's:
/// the policy still counts the process as its own (explain: not pinned). Compared with "every
/// online CPU", 0-2 read as a foreign pin and the process was never planned for again.
#[test]
fn a_default_mask_without_the_reserved_cpus_is_no_foreign_pin() {
    let mut topo = numapilot_topology::Topology::uniform(2, 2, 16 << 20, 20);
    topo.reserve(&std::iter::once(3).collect());
    let mut b = B::with_topology(topo, traced_tunables());
    b.proc(10, "app", &[(0, 1.0), (0, 1.0), (0, 1.0)], &[64, 0]);
    let usable = std::sync::Arc::new(b.m.topo.usable_cpus());
    for tid in b.m.procs[&10].tids.clone() {
        b.m.tasks.get_mut(&TaskKey { pid: 10, tid }).unwrap().cpus_allowed = usable.clone();
    }
    b.bottleneck(0, 1.5);
    let mut p = Adaptive::new();
    let plan = p.decide(&b.m);
    check_conservation(&b.m, &plan);
    let moved: Vec<u32> = plan
        .actions
        .iter()
        .filter(|a| a.target.pid == 10 && matches!(a.kind, ActionKind::SetAffinity { .. }))
        .filter_map(|a| a.target.tid)
        .collect();
    assert_eq!(moved.len(), 1, "one thread moved off the overloaded node: {plan:#?}");
    for a in &plan.actions {
        if let ActionKind::SetAffinity { cpus } = &a.kind {
            assert!(!cpus.contains(3), "a mask with the reserved CPU: {a:?}");
        }
    }
    applied(&mut p, &b.m, &plan);
    b.thread_on(10, moved[0] - 1000, 1).pinned(10);
    let e = p.explain(&b.m, 10).unwrap();
    assert!(!e.pinned, "the process is still the policy's own: {e:?}");
}

/// A process that lives for weeks and keeps starting and ending threads (a pool, a thread per
/// connection), with threads this policy placed one by one: the mask of one that exited is not
/// kept per thread (the policy kept one for every thread it ever placed: review helper-33), it
/// moves to the process's few tried masks, so a child forked under it still reads as under a
/// mask of ours, not as pinned by its program.
#[test]
fn a_placed_thread_that_exits_leaves_no_mask_behind() {
    let mut b = B::new("autonuma-2s12c-24g");
    b.proc(10, "pool", &[(0, 1.0), (0, 1.0), (0, 1.0)], &[64, 0]);
    let tids = b.m.procs[&10].tids.clone();
    let st = b.m.procs[&10].starttime;
    let (node0, node1) = (b.node_cpus(0), b.node_cpus(1));
    let mut p = Adaptive::new();
    let _ = p.decide(&b.m);
    // Thread 1 kept on node 0, thread 2 to node 1, each a mask of its own.
    for (&tid, cpus) in tids[1..].iter().zip([&node0, &node1]) {
        let target = TaskRef { pid: 10, tid: Some(tid), starttime: st };
        applied(&mut p, &b.m, &set_affinity_plan(target, cpus.clone()));
    }
    assert_eq!(table(&p, "policy.own_task_cpus"), 2);
    // The last thread ends; the next decision sees the process without it.
    let gone = TaskKey { pid: 10, tid: tids[2] };
    b.m.tasks.remove(&gone);
    b.m.procs.get_mut(&10).unwrap().tids.retain(|&t| t != gone.tid);
    let _ = p.decide(&b.m);
    assert_eq!(table(&p, "policy.own_task_cpus"), 1, "the exited thread's mask is still kept per thread");
    // A child the exited thread forked, under its mask: ours, inherited, not a pin of its own.
    b.proc(20, "child", &[(1, 0.5)], &[0, 16]).parent(20, 10).allow(20, &[1]).pinned(20);
    assert!(!p.explain(&b.m, 20).unwrap().pinned, "the child's inherited mask read as its own pin");
}

/// A pid reused by another process between two decisions: the old process's holds on its
/// threads go with it (kept while the model knew a task of that pid and tid, they held the new
/// process's thread where the old one had been moved).
#[test]
fn a_reused_pid_inherits_no_thread_holds() {
    let mut b = B::new("autonuma-2s12c-24g");
    b.proc(10, "old", &[(0, 1.0), (0, 1.0)], &[64, 0]);
    let tids = b.m.procs[&10].tids.clone();
    let st = b.m.procs[&10].starttime;
    let mut p = Adaptive::new();
    let moves = |p: &Adaptive| table(p, "policy.task_moves");
    let _ = p.decide(&b.m);
    let target = TaskRef { pid: 10, tid: Some(tids[1]), starttime: st };
    applied(&mut p, &b.m, &set_affinity_plan(target, b.node_cpus(1)));
    assert_eq!(moves(&p), 1);
    let _ = p.decide(&b.m);
    assert_eq!(moves(&p), 1, "the same process keeps its hold");
    // Same pid and tids, another process.
    b.m.procs.get_mut(&10).unwrap().starttime = st + 1000;
    let _ = p.decide(&b.m);
    assert_eq!(moves(&p), 0, "the new process under the old pid inherited a hold");
}

/// Rule refusal-backs-off: a process whose actions the host keeps refusing (a security module
/// denying the move, numa_maps unreadable) is planned again after 1, 2, 4 ... decisions, at most
/// `refused_backoff_max_decisions` apart, instead of at every decision (one journal line a
/// decision, and a loop that never backed off; review helper-34); explain says so, and one
/// applied action ends the wait.
#[test]
fn a_process_the_host_keeps_refusing_is_planned_less_and_less_often() {
    let mut b = B::new("autonuma-2s12c-24g");
    // Its threads on node 0, its memory on node 1: CPU follows memory, every decision.
    b.proc(10, "denied", &[(0, 1.0), (0, 1.0)], &[0, 2048]);
    let mut p = Adaptive::new();
    let mut planned_at = Vec::new();
    for decision in 1..=40u64 {
        let plan = p.decide(&b.m);
        let ours: Vec<Outcome> = plan
            .actions
            .iter()
            .map(|a| {
                if a.target.pid == 10 {
                    Outcome::Refused { message: "EPERM (test)".into() }
                } else {
                    Outcome::Applied { pages_moved: 0 }
                }
            })
            .collect();
        if plan.actions.iter().any(|a| a.target.pid == 10) {
            planned_at.push(decision);
        }
        p.observe_outcomes(&b.m, &plan, &ours);
    }
    assert_eq!(planned_at, [1, 2, 4, 8, 16, 32], "decisions that planned the refused process");
    let e = p.explain(&b.m, 10).unwrap();
    assert!(e.why.contains("refusal-backs-off"), "{}", e.why);
    // Once the wait is over and the host takes the action, the process is managed as before.
    let mut applied = false;
    for _ in 0..40 {
        let plan = p.decide(&b.m);
        let outcomes: Vec<Outcome> = plan.actions.iter().map(|_| Outcome::Applied { pages_moved: 0 }).collect();
        applied |= plan.actions.iter().any(|a| a.target.pid == 10);
        p.observe_outcomes(&b.m, &plan, &outcomes);
        if applied {
            break;
        }
    }
    assert!(applied, "never planned again");
    assert_eq!(table(&p, "policy.refusals"), 0);
}

/// A process-wide mask that replaces masks this policy set on single threads: until the next
/// observation the model still shows a thread under its old mask of ours, and that is no pin of
/// anyone else's (the rig's hotplug test once read "placed by someone else" from an `explain`
/// between the step that moved the whole process and the one after).
#[test]
fn a_thread_still_under_a_replaced_mask_of_ours_is_no_foreign_pin() {
    let mut b = B::new("autonuma-2s12c-24g");
    b.proc(10, "app", &[(0, 1.0), (0, 1.0)], &[64, 0]);
    let tids = b.m.procs[&10].tids.clone();
    let st = b.m.procs[&10].starttime;
    let node_cpus = |b: &B, n: usize| b.m.topo.nodes[n].cpus.clone();
    let mut p = Adaptive::new();
    let one = |target: TaskRef, cpus: CpuSet| Plan {
        actions: vec![Action {
            target,
            kind: ActionKind::SetAffinity { cpus },
            reason: numapilot_policy::Reason::new("balance-weakest-first", "test"),
        }],
        ..Plan::default()
    };
    // A thread alone to node 1, then the whole process to node 0.
    let _ = p.decide(&b.m);
    applied(&mut p, &b.m, &one(TaskRef { pid: 10, tid: Some(tids[1]), starttime: st }, node_cpus(&b, 1)));
    b.thread_on(10, tids[1] - 1000, 1).pinned(10);
    assert!(!p.explain(&b.m, 10).unwrap().pinned, "the thread's mask is ours");
    applied(&mut p, &b.m, &one(TaskRef { pid: 10, tid: None, starttime: st }, node_cpus(&b, 0)));
    // The model has not read the threads again: one still shows node 1's CPUs.
    assert!(!p.explain(&b.m, 10).unwrap().pinned, "a replaced mask of ours is still ours");
}

/// One decision; every SetAffinity applied, every page action of `pid` moving nothing (`moved`
/// pages when given), the others in full. Returns the plan's page actions of `pid`.
fn decide_unmoved(p: &mut Adaptive, m: &numapilot_model::Model, pid: u32, moved: Option<u64>) -> Vec<Action> {
    let plan = p.decide(m);
    check_conservation(m, &plan);
    let page = |a: &Action| !matches!(a.kind, ActionKind::SetAffinity { .. });
    let outcomes: Vec<Outcome> = plan
        .actions
        .iter()
        .map(|a| Outcome::Applied {
            pages_moved: if a.target.pid == pid && page(a) { moved.unwrap_or(0) } else { pages_of(a) },
        })
        .collect();
    p.observe_outcomes(m, &plan, &outcomes);
    plan.actions.into_iter().filter(|a| a.target.pid == pid && page(a)).collect()
}

/// Rule futile-move-backs-off: a memory move the host applied but that moved nothing (a child
/// forked without exec that never wrote its inherited heap: numa_maps shows it anonymous, the
/// kernel moves no page another process maps too) is not asked for again at the next decision;
/// it is asked again when the back-off ends (1, then 3, then 7 ... decisions), when its memory by
/// node changes by more than `futile_move_memory_change`, or when its threads are placed
/// elsewhere (a move to other nodes); explain says why it waits, with the pages asked and moved.
///
/// ```text
///   app (10): 4 x 1.0 CPU on node 1 (4 nodes of 24 CPUs), 512 MiB on node 0 (a memory bandwidth
///             bottleneck: the threads do not follow the memory there)
///   decision 1: MigratePages(0 -> 1, 131072 pages) -> Applied, 0 pages moved
///   decision 2: none (without the rule: the same MigratePages, every decision)
///   decision 3: asked again (the back-off is over) -> 0 moved again: 3 decisions wait
///   decision 4: none; then 64 MiB more on node 0 (12% of its memory)
///   decision 5: asked again (its memory changed) -> 0 moved: 7 decisions wait
///   decision 6: none; then its threads are placed on node 2
///   decision 7: MigratePages(0 -> 2): another move -> it moves what it asks: the record ends
///   decision 8: nothing left to move (its memory on node 2 now)
/// ```
#[test]
fn a_move_that_moved_nothing_waits_until_something_changes() {
    let mut b = B::new("article-4n96");
    b.proc(10, "forked", &[(1, 1.0); 4], &[512, 0, 0, 0]);
    // Node 0's memory bandwidth is a bottleneck: the threads stay, the memory is to follow them.
    b.group_proc(1, 10);
    b.m.nodes[0].mem_bw.bottleneck = true;
    let mut p = Adaptive::new();
    let first = decide_unmoved(&mut p, &b.m, 10, None);
    assert!(
        matches!(&first[..], [a] if matches!(&a.kind, ActionKind::MigratePages { to, max_pages: Some(131_072), .. } if to.to_list() == "1")),
        "{first:#?}"
    );
    // Its threads were placed on node 1 (or stayed there): the model says so from now on.
    b.allow(10, &[1]);
    assert_eq!(decide_unmoved(&mut p, &b.m, 10, None), vec![], "decision 2 asked for the same move again");
    let e = p.explain(&b.m, 10).unwrap();
    assert!(
        matches!(&e.moves_waiting[..], [w] if w.contains("futile-move-backs-off") && w.contains("asked 131072 pages and moved 0")),
        "{e:#?}"
    );
    assert!(e.to_string().contains("page move waiting: [futile-move-backs-off]"), "{e}");
    let again = decide_unmoved(&mut p, &b.m, 10, None);
    assert!(
        matches!(&again[..], [a] if a.reason.detail.contains("[futile-move-backs-off] asked again: the back-off is over")
            && a.reason.detail.contains("asked 131072 pages and moved 0, 1 in a row")),
        "decision 3: {again:#?}"
    );
    assert_eq!(decide_unmoved(&mut p, &b.m, 10, None), vec![], "decision 4");
    b.mem(10, &[576, 0, 0, 0]).group_proc(1, 10);
    let changed = decide_unmoved(&mut p, &b.m, 10, None);
    assert!(
        matches!(&changed[..], [a] if a.reason.detail.contains("its own memory by node changed by 64.0 MiB")
            && a.reason.detail.contains("2 in a row")),
        "decision 5: {changed:#?}"
    );
    assert_eq!(decide_unmoved(&mut p, &b.m, 10, None), vec![], "decision 6");
    assert_eq!(table(&p, "policy.futile"), 1);
    // Its threads placed on node 2 (a move of this policy's, applied): a move of its memory there
    // is another move, asked at once.
    let target = TaskRef { pid: 10, tid: None, starttime: b.m.procs[&10].starttime };
    applied(&mut p, &b.m, &set_affinity_plan(target, b.node_cpus(2)));
    b.allow(10, &[2]).run_on(10, 2).group_proc(1, 10);
    let elsewhere = decide_unmoved(&mut p, &b.m, 10, Some(147_456));
    assert!(
        matches!(&elsewhere[..], [a] if matches!(&a.kind, ActionKind::MigratePages { to, .. } if to.to_list() == "2")
            && !a.reason.detail.contains("futile")),
        "decision 7: {elsewhere:#?}"
    );
    assert_eq!(table(&p, "policy.futile"), 0, "a move of the kind that moved ends the record");
    b.mem(10, &[0, 0, 576, 0]).group_proc(1, 10);
    assert_eq!(decide_unmoved(&mut p, &b.m, 10, None), vec![], "decision 8: its memory is local");
    assert!(p.explain(&b.m, 10).unwrap().moves_waiting.is_empty());
}

/// Rule futile-move-backs-off for a move the host runs in the background: judged when it ends
/// (`observe_finished`), against what the host let it move (`Started`'s pages): a move the host's
/// budget cut to 1,000 pages that moved 900 is no futile move; one that ends having moved nothing,
/// or stopped (`Refused`) before moving any, is, and the next decision does not ask for it.
#[test]
fn a_background_move_is_judged_when_it_ends_against_what_the_host_let_it_move() {
    let mut b = B::new("article-4n96");
    b.proc(10, "forked", &[(1, 1.0); 4], &[512, 0, 0, 0]);
    b.group_proc(1, 10);
    b.m.nodes[0].mem_bw.bottleneck = true;
    let mut p = Adaptive::new();
    let step = |p: &mut Adaptive, b: &B, allowance: u64, end: Outcome| -> bool {
        let plan = p.decide(&b.m);
        let page = |a: &Action| !matches!(a.kind, ActionKind::SetAffinity { .. });
        let outcomes: Vec<Outcome> = plan
            .actions
            .iter()
            .map(|a| if page(a) { Outcome::Started { pages: allowance } } else { Outcome::Applied { pages_moved: 0 } })
            .collect();
        p.observe_outcomes(&b.m, &plan, &outcomes);
        let started: Vec<_> = plan.actions.iter().filter(|a| page(a)).cloned().collect();
        let finished: Vec<numapilot_policy::FinishedMove> = started
            .iter()
            .map(|a| numapilot_policy::FinishedMove {
                action: a.clone(),
                outcome: end.clone(),
                started_ns: 0,
                ended_ns: 1,
                ran_on: None,
                threads: 1,
            })
            .collect();
        p.observe_finished(&b.m, &finished);
        !started.is_empty()
    };
    assert!(step(&mut p, &b, 1000, Outcome::Applied { pages_moved: 900 }), "decision 1 moves its memory");
    // Its threads narrowed to node 1 by decision 1's SetAffinity, as a host applies it: the hold
    // that keeps them there is of a move that placed them (follows-placed-threads).
    b.allow(10, &[1]);
    assert!(
        step(&mut p, &b, 1000, Outcome::Applied { pages_moved: 900 }),
        "900 of the 1,000 allowed is no futile move"
    );
    assert!(step(&mut p, &b, 1000, Outcome::Applied { pages_moved: 0 }));
    assert!(
        !step(&mut p, &b, 1000, Outcome::Applied { pages_moved: 0 }),
        "a move that moved nothing is not asked again at once"
    );
    let e = p.explain(&b.m, 10).unwrap();
    assert!(
        matches!(&e.moves_waiting[..], [w] if w.contains("asked 1000 pages and moved 0")),
        "judged against the allowance: {e:#?}"
    );
    assert!(step(&mut p, &b, 1000, Outcome::Refused { message: "stopped: the daemon is stopping".into() }));
    assert!(
        !step(&mut p, &b, 1000, Outcome::Applied { pages_moved: 0 }),
        "a move stopped before any page moved is futile too"
    );
}

/// The partner scenario: on the rig's 4-node machine, a client (pid 20, 1 thread at 0.16 CPUs,
/// 12 MiB on node 2) and two servers with 64 MiB each, server 10 on node 0 and server 30 on
/// node 1 (2 threads each, 0.1 CPUs in all). Each decision the client talks to the other server
/// (its group is the client and that server; the other server is a group of its own).
fn partners() -> (B, Adaptive) {
    let mut b = B::fixture("rig-6.12-4node");
    b.proc(10, "server-a", &[(0, 0.0), (0, 0.1)], &[64, 0, 0, 0]);
    b.proc(30, "server-b", &[(1, 0.0), (1, 0.1)], &[0, 64, 0, 0]);
    b.proc(20, "client", &[(2, 0.16)], &[0, 0, 12, 0]);
    b.group_proc(1, 10).group_proc(2, 20).group_proc(3, 30);
    (b, Adaptive::new())
}

/// The client tied to `server` (10 or 30) by communication, the other server alone.
fn partner_tie(b: &mut B, server: u32) {
    let other = if server == 10 { 30 } else { 10 };
    b.m.groups.groups.clear();
    b.m.groups.of_task.clear();
    b.m.graph.edges.remove(&(tk(other, 1).min(tk(20, 0)), tk(other, 1).max(tk(20, 0))));
    b.comm_edge(tk(server, 1), tk(20, 0), 0.38, numapilot_model::Tier::Medium);
    b.group(1, &[tk(server, 0), tk(server, 1), tk(20, 0)]);
    b.group_proc(2, other);
}

/// Carries `plan` out on the model as a host would: threads narrowed to the nodes of their new
/// CPUs and run there, pages moved whole to their target nodes; the policy told it was applied.
fn carry_out(b: &mut B, p: &mut Adaptive, plan: &Plan) {
    applied(p, &b.m, plan);
    for a in &plan.actions {
        let pid = a.target.pid;
        match &a.kind {
            ActionKind::SetAffinity { cpus } => {
                let node = b.m.topo.nodes_of_cpus(cpus).iter().next().unwrap();
                let tids: Vec<u32> = match a.target.tid {
                    Some(tid) => vec![tid],
                    None => b.m.procs[&pid].tids.clone(),
                };
                for tid in tids {
                    b.thread_on(pid, tid - pid * 100, node);
                }
            }
            ActionKind::MigratePages { to, .. } => {
                let node = to.iter().next().unwrap();
                let total = b.m.procs[&pid].rss_bytes / MIB;
                let mut mem = vec![0; b.m.topo.nodes.len()];
                mem[b.m.node_idx(node).unwrap()] = total;
                b.mem(pid, &mem);
            }
            other => panic!("no such action expected here: {other:?}"),
        }
    }
    b.m.now_ns += b.m.period_ns;
    b.m.updates += 1;
}

/// Rule hold-gains-member does not make a client whose partner changes every decision follow
/// each new partner (`partners`: two servers of 64 MiB on nodes 0 and 1, the client tied to each
/// in turn for 20 decisions, every plan carried out on the model):
///
/// ```text
///   decision 1: each process a group of its own; the client stays on node 2
///   decision 2, tied to server-a: the server joined (hold-gains-member lifts the client's hold),
///     84% of the group's bytes on node 0: the client goes there (cpu-follows-memory) and its
///     12 MiB follow (3072 pages): a memory move, held hold_periods decisions
///   decision 3, tied to server-b: server-b joined (the hold is lifted again, once for this
///     member), 84% of the bytes on node 1, but the client's memory moves to node 0 within its
///     hold ("memory already moves here"): the group stays on node 0, server-b's threads are
///     narrowed there and its 64 MiB follow (16384 pages)
///   decisions 4-21: all three on node 0, whoever the client talks to: nothing moves
/// ```
///
/// What bounds it is the memory hold (`Planner::memory_follows`): without it (tried), decision 3
/// sent the client to node 1 after server-b's memory (the new member lifted the thread hold) and
/// decision 14 back to node 0: three moves in 20 decisions, its 12 MiB copied each time. Allowed
/// here: a move of the client at most once per `hold_periods`, and no process's memory copied
/// twice.
#[test]
fn a_client_whose_partner_alternates_does_not_follow_each_partner() {
    let (mut b, mut p) = partners();
    let plan = p.decide(&b.m);
    check_conservation(&b.m, &plan);
    carry_out(&mut b, &mut p, &plan);
    let mut client_moves = Vec::new();
    let mut copies = Vec::new();
    for d in 2..=21u32 {
        partner_tie(&mut b, if d % 2 == 0 { 10 } else { 30 });
        let plan = p.decide(&b.m);
        check_conservation(&b.m, &plan);
        client_moves.extend(affinities(&b.m, &plan).into_iter().filter(|a| a.0 == 20).map(|a| (d, a.2, a.3)));
        copies.extend(
            plan.actions
                .iter()
                .filter(|a| !matches!(a.kind, ActionKind::SetAffinity { .. }))
                .map(|a| (d, a.target.pid, pages_of(a))),
        );
        carry_out(&mut b, &mut p, &plan);
    }
    let hold = b.m.tunables.hold_periods as usize;
    assert!(client_moves.len() <= 20usize.div_ceil(hold), "the client moves with its partners: {client_moves:?}");
    assert_eq!(client_moves, vec![(2, "0".to_string(), "cpu-follows-memory".to_string())]);
    assert_eq!(copies, vec![(2, 20, 3072), (3, 30, 16384)], "each process's memory copied once at most");
    for pid in [10, 20, 30] {
        assert_eq!(b.m.procs[&pid].mem_by_node[0], b.m.procs[&pid].rss_bytes, "{pid} ends with its memory on node 0");
    }
}
