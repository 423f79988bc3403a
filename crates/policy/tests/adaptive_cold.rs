//! The cold-memory rule ("cold-memory-stays", `adaptive/cold.rs`) with its expected trace worked
//! out by hand, and the same scenario with the rule off, which the rule changes.
//!
//! Machine `autonuma-2s12c-24g`: 2 nodes x 12 CPUs (node 0 = 0-5,12-17, node 1 = 6-11,18-23),
//! 12 GiB each. Tunables: the tests' builder (budget 1280 MiB/s x 1 s = 327680 pages, capacity
//! in CPUs), otherwise defaults: cold_memory_share_min 0.3, CPU follows memory from 1024 MiB and
//! 80%, stay margin 0.1, remote share 0.25, copy cost 2 us/page, horizon 10 s, reserve 10%.

mod adaptive_common;

use adaptive_common::*;
use numapilot_model::{ProcessClass, Tunables};
use numapilot_policy::{ActionKind, Adaptive, Policy};

/// A VM as QEMU runs one: 4 vCPUs on node 1, guest RAM first-touched by the main thread on node 0
/// (7680 MiB, idle), the working set touched by the vCPUs: 128 MiB each for vCPUs 0 and 1 on
/// node 1, 64 MiB each for vCPUs 2 and 3 spilled to node 0. Watched 100 s (>= the 2 s half-life).
fn vm(b: &mut B) {
    b.proc(30, "qemu-vm", &[(1, 1.0); 4], &[7680 + 128, 256]);
    b.access(30, 0, &[0.0, 1.0]).access(30, 1, &[0.0, 1.0]);
    b.access(30, 2, &[0.8, 0.2]).access(30, 3, &[0.8, 0.2]);
    b.hot(30, 0, 0x1000_0000, 128 * MIB, 1, 50).hot(30, 1, 0x1800_0000, 128 * MIB, 1, 50);
    b.hot(30, 2, 0x2000_0000, 64 * MIB, 0, 30).hot(30, 3, 0x2400_0000, 64 * MIB, 0, 20);
    b.class(30, ProcessClass::StaticLarge);
    b.group_proc(1, 30);
}

/// ```text
///   qemu-vm (30): RSS 7808 + 256 = 8064 MiB; hot ranges 128 + 128 (node 1) + 64 + 64 (node 0)
///        = 384 MiB, none sampled only once or twice (50, 50, 30, 20 samples): Chao's F = D,
///        accessed 384 MiB -> cold 1 - 384 / 8064 = 95% >= 30%: the rule applies
///   class static-large (from its RSS) does not apply -> no class unit; its group is the unit
///   unit: 4.0 CPUs, memory = accessed memory [128, 256] MiB (not [7808, 256]);
///         shares (CPU-weighted mean of the threads') node 0 40%, node 1 60%; runs on node 1
///   candidates: 384 MiB < 1024 MiB: no CPU follows memory; node 1 60% >= best 60% - 10%
///        -> stays on node 1 (stay-current-node); its allowed CPUs are all -> SetAffinity(node 1)
///   memory: not split; remote 40% >= 25%; remote pages = accessed memory off node 1
///        = 128 MiB = 32768 pages; benefit 0.4 x 4 x 10 = 16 CPU-s > 0.066 s
///        -> hot ranges off node 1, hottest first: (0x2000_0000, 64 MiB) [30 samples],
///           (0x2400_0000, 64 MiB) [20]  -> MoveRanges(to 1)
///        the 7680 MiB of cold memory on node 0 stays: no MigratePages
///   plan: SetAffinity(30, 6-11,18-23) [stay-current-node], MoveRanges(2 ranges -> 1)
///         [memory-follows-cpu], both reasons naming cold-memory-stays
///
///   rule off (cold_memory_share_min 1.0): class unit static-large with 8064 MiB, 97% on node 0
///        >= 80% and >= 1024 MiB -> cpu-follows-memory: SetAffinity(node 0), away from the
///        working set; then class-bind-memory copies what is on node 1 to node 0
/// ```
#[test]
fn cold_memory_stays_and_does_not_pull_threads_or_size_units() {
    let mut b = B::new("autonuma-2s12c-24g");
    vm(&mut b);
    let plan = Adaptive::new().decide(&b.m);
    check_conservation(&b.m, &plan);
    assert_eq!(plan.actions.len(), 2, "{plan:#?}");
    let a = &plan.actions[0];
    assert_eq!((a.target.pid, a.target.tid), (30, None));
    assert_eq!(a.kind, ActionKind::SetAffinity { cpus: b.node_cpus(1) });
    assert_eq!(a.reason.rule, "stay-current-node");
    assert!(
        a.reason.detail.contains("cold-memory-stays: sized by its 384 MiB of accessed memory, of 8064 MiB resident"),
        "{}",
        a.reason.detail
    );
    let m = &plan.actions[1];
    assert_eq!(
        m.kind,
        ActionKind::MoveRanges { ranges: vec![(0x2000_0000, 64 * MIB), (0x2400_0000, 64 * MIB)], to: 1 }
    );
    assert_eq!(m.reason.rule, "memory-follows-cpu");
    assert!(m.reason.detail.contains("(32768 pages)"), "{}", m.reason.detail);
    assert!(m.reason.detail.contains("[cold-memory-stays] 95% of its 8064 MiB is cold"), "{}", m.reason.detail);
    assert_eq!(plan.actions.iter().map(pages_of).sum::<u64>(), 32_768);

    // The same VM with the rule off: its idle RAM pulls the vCPUs to node 0.
    let t = Tunables { cold_memory_share_min: 1.0, ..traced_tunables() };
    let mut off = B::with("autonuma-2s12c-24g", t);
    vm(&mut off);
    let plan = Adaptive::new().decide(&off.m);
    assert_eq!(plan.actions[0].kind, ActionKind::SetAffinity { cpus: off.node_cpus(0) }, "{plan:#?}");
    assert_eq!(plan.actions[0].reason.rule, "cpu-follows-memory");
    assert!(plan.actions.iter().any(|a| a.reason.rule == "class-bind-memory"), "{plan:#?}");
}

/// Not watched long enough (first seen 1 s ago < access_half_life_ms 2 s): its hot set has not
/// built up, nothing is cold yet, and the rule does not apply (the unit is sized by residency:
/// the plan is the rule-off plan's first action).
///
/// ```text
///   qemu-vm as above, first seen 1 s before the decision -> not cold-aware
///   class static-large unit, 8064 MiB, 97% on node 0 -> cpu-follows-memory: SetAffinity(node 0)
/// ```
#[test]
fn cold_memory_needs_a_built_up_hot_set() {
    let mut b = B::new("autonuma-2s12c-24g");
    vm(&mut b);
    b.m.procs.get_mut(&30).unwrap().first_seen_ns = b.m.now_ns - 1_000_000_000;
    let plan = Adaptive::new().decide(&b.m);
    assert_eq!(plan.actions[0].kind, ActionKind::SetAffinity { cpus: b.node_cpus(0) }, "{plan:#?}");
    assert_eq!(plan.actions[0].reason.rule, "cpu-follows-memory");
}

/// The estimate of the accessed memory (Chao's, from buckets sampled once and twice): a pool read
/// at random whose sampled buckets cover a fifth of it is not cold.
///
/// ```text
///   db (40): 4 threads x 1.0 CPU on node 1, 1024 MiB on node 0, static-large, accesses 100% on
///        node 0; 100 hot 2 MiB buckets seen (200 MiB), 90 of them once, 10 twice
///   F = 100 + 90^2 / (2 x 10) = 505 buckets = 1010 MiB -> cold 1 - 1010 / 1024 = 1% < 30%:
///        the rule does not apply (counting only the buckets seen, 80% would read as cold)
///   class unit, 1024 MiB, 100% on node 0 (>= 1024 MiB, >= 80%) -> cpu-follows-memory:
///        SetAffinity(40, node 0)
/// ```
#[test]
fn a_pool_read_at_random_is_not_cold() {
    let mut b = B::new("autonuma-2s12c-24g");
    b.proc(40, "db", &[(1, 1.0); 4], &[1024, 0]);
    for i in 0..4 {
        b.access(40, i, &[1.0, 0.0]);
    }
    for k in 0..100u64 {
        b.hot(40, (k % 4) as u32, 0x1_0000_0000 + k * 2 * MIB, 2 * MIB, 0, if k < 90 { 1 } else { 2 });
    }
    b.class(40, ProcessClass::StaticLarge);
    b.group_proc(1, 40);
    let plan = Adaptive::new().decide(&b.m);
    check_conservation(&b.m, &plan);
    let a = &plan.actions[0];
    assert_eq!((a.target.pid, a.target.tid), (40, None));
    assert_eq!(a.kind, ActionKind::SetAffinity { cpus: b.node_cpus(0) }, "{plan:#?}");
    assert_eq!(a.reason.rule, "cpu-follows-memory");
    assert!(!a.reason.detail.contains("cold-memory-stays"), "{}", a.reason.detail);
}

/// Rule hot-within-own: a mostly-cold process's accessed memory on a node counts for a move at
/// most its own memory there. The VM above with its guest RAM in a file a vhost-user backend maps
/// too (numa_maps: `mapmax` > 1, the model's `shared_by_node`): the working set its vCPUs 2 and 3
/// spilled to node 0 lies in that shared RAM, and a move of QEMU's pages leaves every page the
/// backend maps where it is.
///
/// ```text
///   qemu-vm (30) as above; node 0: 7808 MiB resident, all of it shared -> own 0 MiB there
///   accessed off node 1: 128 MiB, of which own: min(128, 0) = 0 pages -> no memory action
///   (before: MoveRanges(0x2000_0000, 0x2400_0000 -> 1), 32768 pages no move could take, asked
///    again after every hold)
///   node 1's 256 MiB are its own: the plan is the SetAffinity alone
/// ```
#[test]
fn hot_memory_a_move_cannot_take_is_not_asked_for() {
    let mut b = B::new("autonuma-2s12c-24g");
    vm(&mut b);
    b.m.procs.get_mut(&30).unwrap().shared_by_node = vec![(7680 + 128) * MIB, 0];
    let plan = Adaptive::new().decide(&b.m);
    check_conservation(&b.m, &plan);
    assert_eq!(plan.actions.len(), 1, "{plan:#?}");
    assert_eq!(plan.actions[0].kind, ActionKind::SetAffinity { cpus: b.node_cpus(1) });
    // Own memory there again (half of it): the hot ranges move, as in the first test.
    b.m.procs.get_mut(&30).unwrap().shared_by_node = vec![3900 * MIB, 0];
    let plan = Adaptive::new().decide(&b.m);
    assert!(plan.actions.iter().any(|a| matches!(a.kind, ActionKind::MoveRanges { to: 1, .. })), "{plan:#?}");
}
