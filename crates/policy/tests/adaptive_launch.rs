//! Rule "launch-advice" and rule "launch-holds" (policy `adaptive/launch.rs`): a node set for a
//! process before it starts, promises that keep two launches in a row apart, the launched process
//! adopted as the policy's own, and left where it was started until its threads wait for CPUs. numad's answer to the same requests (`numad -w`) for comparison. Expected
//! traces worked out by hand in each test's comment.

mod adaptive_common;

use adaptive_common::*;
use numapilot_policy::advise::NodeFree;
use numapilot_policy::{Adaptive, LaunchRequest, Numad, Policy, LAUNCH_WAIT_DECISIONS};
use numapilot_topology::Topology;

/// 4 nodes of 8 CPUs and 32 GiB, all at distance 21.
fn machine() -> B {
    B::with_topology(Topology::uniform(4, 8, 32 << 20, 21), traced_tunables())
}

fn req(pid: u32, cpus: f64, mem_gib: u64) -> LaunchRequest {
    LaunchRequest {
        pid: Some(pid),
        name: format!("vm{pid}"),
        cpus,
        mem_bytes: mem_gib * GIB,
        nodes_now: vec![],
        reach_cpus: None,
    }
}

fn ids(n: &numapilot_topology::NodeSet) -> Vec<u32> {
    n.iter().collect()
}

/// ```text
///   node 0 busy: pid 10, 8 threads at 1.0 CPU, 4 GiB   -> free: 0 / 8 / 8 / 8 CPUs, 28 / 32 / 32 / 32 GiB
///   vm50  4 CPUs, 8 GiB   -> node 1 (one node fits; nodes 1-3 tie on free CPUs x MiB: lowest id)
///   vm51  4 CPUs, 8 GiB   -> node 2: vm50's promise (4 CPUs, 8 GiB) makes node 1's magnitude
///                            4 x 24 GiB, below nodes 2 and 3 (8 x 32 GiB); no step in between
///   vm52 12 CPUs, 20 GiB  -> two nodes: no node has 12 free CPUs; {3} plus its nearest (all at
///                            21; larger magnitude first: node 1 with 4 free CPUs left, node 2
///                            with 4) -> {1,3} (8 + 4 = 12 CPUs; ties by magnitude then lower ids)
///   vm53 40 CPUs          -> nothing fits (28 - 4 - 4 - 12 = 8 free CPUs left): no advice
///   numad, the same vm50 and vm51 from the same snapshot: the same node twice (numad -w answers
///   each request from update_nodes() alone and reserves nothing)
/// ```
#[test]
fn launch_advice_takes_the_smallest_set_and_keeps_its_promises_apart() {
    let mut b = machine();
    b.proc(10, "busy", &[(0, 1.0); 8], &[4096, 0, 0, 0]);
    let mut policy = Adaptive::new();
    let now = b.m.now_ns;
    let a50 = policy.advise_launch(&b.m, now, &req(50, 4.0, 8)).expect("vm50 fits a node");
    assert_eq!(ids(&a50.nodes), vec![1], "{}", a50.reason.detail);
    assert_eq!(a50.reason.rule, "launch-advice");
    assert!(a50.reason.detail.contains("4.0 CPUs and 8192 MiB asked"), "{}", a50.reason.detail);
    let a51 = policy.advise_launch(&b.m, now, &req(51, 4.0, 8)).expect("vm51 fits a node");
    assert_eq!(ids(&a51.nodes), vec![2], "{}", a51.reason.detail);
    assert!(a51.reason.detail.contains("promised before and not yet seen: pid 50 on 1"), "{}", a51.reason.detail);
    let a52 = policy.advise_launch(&b.m, now, &req(52, 12.0, 20)).expect("vm52 fits two nodes");
    assert_eq!(a52.nodes.len(), 2, "{}", a52.reason.detail);
    assert!(!a52.nodes.contains(0), "node 0 has no free CPU: {}", a52.reason.detail);
    assert!(policy.advise_launch(&b.m, now, &req(53, 40.0, 1)).is_err());

    let mut numad = Numad::new();
    let n50 = numad.advise_launch(&b.m, now, &req(50, 4.0, 8)).expect("numad advises vm50");
    let n51 = numad.advise_launch(&b.m, now, &req(51, 4.0, 8)).expect("numad advises vm51");
    assert_eq!(n50.nodes, n51.nodes, "numad reserves nothing between two answers");
    assert!(!n50.nodes.contains(0), "{}", n50.reason.detail);
    assert_eq!(n50.reason.rule, "numad-advice");
}

/// A measurement taken when asking (`nodes_now`) wins over the model of the last step: the model
/// says node 0 is busy, the measurement says node 0 is idle and nodes 1-3 are full.
#[test]
fn launch_advice_goes_by_the_measurement_taken_when_asking() {
    let mut b = machine();
    b.proc(10, "busy", &[(0, 1.0); 8], &[4096, 0, 0, 0]);
    let now = b.m.now_ns;
    let nodes_now: Vec<NodeFree> = (0..4u32)
        .map(|n| NodeFree {
            node: n,
            cpus: 8,
            free_cpus: if n == 0 { 8.0 } else { 0.0 },
            mem_free_bytes: if n == 0 { 30 * GIB } else { GIB },
        })
        .collect();
    let r = LaunchRequest { nodes_now: nodes_now.clone(), ..req(50, 4.0, 8) };
    let a = Adaptive::new().advise_launch(&b.m, now, &r).expect("node 0 fits");
    assert_eq!(ids(&a.nodes), vec![0], "{}", a.reason.detail);
    let n = Numad::new().advise_launch(&b.m, now, &r).expect("numad: node 0 fits");
    assert_eq!(ids(&n.nodes), vec![0], "{}", n.reason.detail);
}

/// A client's measurement counts a node's reserved CPUs (`reserved_cpus`: sysfs lists them; the
/// client does not read the daemon's config): node 1's 8 CPUs are all reserved, and idle. The
/// advice goes by the CPUs the model's topology gives each node: node 1 has none, so a 4-CPU job
/// goes to node 2, never to the reserved CPUs.
#[test]
fn launch_advice_never_counts_reserved_cpus_a_client_measured() {
    let mut topo = Topology::uniform(4, 8, 32 << 20, 21);
    topo.reserve(&(8..16).collect());
    let b = B::with_topology(topo, traced_tunables());
    let nodes_now: Vec<NodeFree> = (0..4u32)
        .map(|n| NodeFree {
            node: n,
            cpus: 8,
            free_cpus: if n == 1 {
                8.0
            } else if n == 2 {
                6.0
            } else {
                1.0
            },
            mem_free_bytes: 30 * GIB,
        })
        .collect();
    let r = LaunchRequest { nodes_now, ..req(50, 4.0, 8) };
    let a = Adaptive::new().advise_launch(&b.m, b.m.now_ns, &r).expect("node 2 fits");
    assert_eq!(ids(&a.nodes), vec![2], "{}", a.reason.detail);
}

/// Rule "launch-holds" on the process the advice placed:
///
/// ```text
///   vm50 advised node 0 (an empty machine: the lowest of four equal nodes), then seen: 4 threads
///   at 1.0 CPU on node 0 (CPUs narrowed to node 0 by its launcher: the model calls it pinned),
///   its 6 GiB on node 2 (spilled)
///   (a) the policy that advised it: no action (its own placement, held: no CPU-follows-memory to
///       node 2, which it would get unheld); explain says launch-holds
///   (b) node 0 oversubscribed (run delay 0.5 >= cpu_interference_high 0.25; no per-thread run
///       delay known) at LAUNCH_WAIT_DECISIONS (3) decisions in a row: held at the first two, then
///       the hold ends and the other rules take it: an action for vm50
///   (b') per-thread run delay known: vm50's own threads' waiting decides, not the node's
///   (e) waits broken by a quiet decision count again from 0
///   (d) seen before its launcher applied the advice (CPUs not narrowed): held while launching,
///       LAUNCH_PROMISE_NS after the advice managed like any process
///   (c) a policy that did not advise it: the narrowed CPUs are someone else's, never touched,
///       oversubscribed or not
/// ```
#[test]
fn a_launched_process_is_held_where_it_started_until_it_waits_for_cpus() {
    let build_with = |interference: f64, run_delay: Option<f64>| {
        let mut b = machine();
        b.proc(50, "vm50", &[(0, 1.0); 4], &[0, 0, 6144, 0]);
        b.allow(50, &[0]).pinned(50).group_proc(1, 50);
        b.m.nodes[0].cpu.known = true;
        b.m.nodes[0].cpu.interference = interference;
        for t in b.m.tasks.values_mut().filter(|t| t.key.pid == 50) {
            t.run_delay = run_delay;
        }
        b
    };
    let build = |interference: f64| build_with(interference, None);
    let advised = || {
        let empty = machine();
        let mut p = Adaptive::new();
        let a = p.advise_launch(&empty.m, empty.m.now_ns, &req(50, 4.0, 6)).expect("advice");
        assert_eq!(ids(&a.nodes), vec![0], "{}", a.reason.detail);
        p
    };
    // (a)
    let b = build(0.0);
    let mut p = advised();
    let plan = p.decide(&b.m);
    check_conservation(&b.m, &plan);
    assert!(plan.actions.iter().all(|a| a.target.pid != 50), "{plan:#?}");
    let e = p.explain(&b.m, 50).expect("known");
    assert!(!e.pinned, "the policy's own placement, not someone else's");
    assert!(e.why.starts_with("[launch-holds] started on nodes 0"), "{}", e.why);
    // (b) held while it has waited at fewer than LAUNCH_WAIT_DECISIONS decisions in a row.
    let b = build(0.5);
    let mut p = advised();
    for n in 1..LAUNCH_WAIT_DECISIONS {
        let plan = p.decide(&b.m);
        assert!(plan.actions.iter().all(|a| a.target.pid != 50), "waited at {n} decisions: {plan:#?}");
        let why = p.explain(&b.m, 50).expect("known").why;
        let decisions = if n == 1 { "1 decision".to_string() } else { format!("{n} decisions") };
        assert!(why.contains(&format!("(it waited at the last {decisions})")), "{why}");
    }
    let plan = p.decide(&b.m);
    // The conservation check reads the model's `pinned` as "someone else's"; this narrowing is the
    // policy's own (its advice), so the check runs with it cleared.
    let mut own = b.m.clone();
    own.procs.get_mut(&50).unwrap().pinned = false;
    check_conservation(&own, &plan);
    assert!(plan.actions.iter().any(|a| a.target.pid == 50 && a.reason.rule == "cpu-follows-memory"), "{plan:#?}");
    // (b') with schedstat, its own threads' waiting decides: node 0 waits 50% (another process's
    // threads), vm50's own 5%: held; its own 50%: released.
    let b = build_with(0.5, Some(0.05));
    let mut p = advised();
    for _ in 0..LAUNCH_WAIT_DECISIONS {
        let plan = p.decide(&b.m);
        assert!(plan.actions.iter().all(|a| a.target.pid != 50), "{plan:#?}");
    }
    let b = build_with(0.0, Some(0.5));
    let mut p = advised();
    let plans: Vec<_> = (0..LAUNCH_WAIT_DECISIONS).map(|_| p.decide(&b.m)).collect();
    assert!(plans[plans.len() - 1].actions.iter().any(|a| a.target.pid == 50), "{plans:#?}");
    // (e) a quiet decision between waits: the count starts again, held throughout.
    let quiet = build_with(0.0, Some(0.05));
    let mut p = advised();
    for i in 0..2 * LAUNCH_WAIT_DECISIONS - 1 {
        let m = if i == LAUNCH_WAIT_DECISIONS - 1 { &quiet.m } else { &b.m };
        let plan = p.decide(m);
        assert!(plan.actions.iter().all(|a| a.target.pid != 50), "decision {i}: {plan:#?}");
    }
    // (d) its launcher has not applied the advice yet (a shell before it execs numactl: CPUs not
    // narrowed): left alone within LAUNCH_PROMISE_NS of the advice, managed after it.
    let unnarrowed = |later_ns: u64| {
        let mut b = machine();
        b.proc(50, "sh", &[(0, 1.0); 4], &[0, 0, 6144, 0]);
        b.group_proc(1, 50);
        b.m.now_ns += later_ns;
        b
    };
    let b = unnarrowed(0);
    let mut p = advised();
    let plan = p.decide(&b.m);
    assert!(plan.actions.iter().all(|a| a.target.pid != 50), "still launching: {plan:#?}");
    let b = unnarrowed(numapilot_policy::LAUNCH_PROMISE_NS);
    let mut p = advised();
    let plan = p.decide(&b.m);
    assert!(plan.actions.iter().any(|a| a.target.pid == 50), "the launch never came: {plan:#?}");
    // (c)
    for interference in [0.0, 0.5] {
        let b = build(interference);
        let mut p = Adaptive::new();
        let plan = p.decide(&b.m);
        assert!(plan.actions.iter().all(|a| a.target.pid != 50), "{plan:#?}");
        assert!(p.explain(&b.m, 50).expect("known").pinned);
    }
}

/// The rig's case (2-node daemon-safety guest, a busy TCG machine): a job launched on advice for
/// node 0, one thread, seen at its first decision with 2 MiB resident, all of it on node 1 (its
/// executable's pages, copied there before it started), its own thread waiting half the period
/// (its start-up on a busy machine). Released at that first wait, cpu-follows-memory moved it to
/// node 1 ("moving 1 thread is cheaper than copying 512 remote pages") before its buffer was
/// touched on node 0. Held now until it has waited at LAUNCH_WAIT_DECISIONS decisions in a row.
///
/// ```text
///   decision 1..LAUNCH_WAIT_DECISIONS-1   waits 0.5: held, no action for it
///   decision LAUNCH_WAIT_DECISIONS        still waiting: released; cpu-follows-memory takes it
/// ```
#[test]
fn a_launched_jobs_first_waits_do_not_undo_its_advice() {
    let mut b = machine();
    b.proc(50, "launched-t", &[(0, 0.8)], &[0, 2, 0, 0]);
    b.allow(50, &[0]).pinned(50).group_proc(1, 50);
    for t in b.m.tasks.values_mut().filter(|t| t.key.pid == 50) {
        t.run_delay = Some(0.5);
    }
    let empty = machine();
    let mut p = Adaptive::new();
    let a = p.advise_launch(&empty.m, empty.m.now_ns, &req(50, 1.0, 1)).expect("advice");
    assert_eq!(ids(&a.nodes), vec![0], "{}", a.reason.detail);
    // Its first decision, waiting: held (the rig's fault released it here).
    let plan = p.decide(&b.m);
    assert!(plan.actions.iter().all(|a| a.target.pid != 50), "its first wait released it: {plan:#?}");
    for n in 2..LAUNCH_WAIT_DECISIONS {
        b.m.now_ns += 1_000_000_000;
        let plan = p.decide(&b.m);
        assert!(plan.actions.iter().all(|a| a.target.pid != 50), "its first waits ({n}) released it: {plan:#?}");
    }
    b.m.now_ns += 1_000_000_000;
    let plan = p.decide(&b.m);
    let moved = plan.actions.iter().find(|a| a.target.pid == 50).expect("released after waiting throughout");
    assert_eq!(moved.reason.rule, "cpu-follows-memory", "{moved:#?}");
}

/// A promise stops counting once the model has seen its process twice (its CPUs and memory are
/// then in the node figures), and a promise whose pid never shows ends after LAUNCH_PROMISE_NS.
#[test]
fn promises_end_when_the_process_is_seen_or_never_shows() {
    let mut b = machine();
    let mut p = Adaptive::new();
    let now = b.m.now_ns;
    let a = p.advise_launch(&b.m, now, &req(50, 8.0, 8)).expect("advice");
    assert_eq!(ids(&a.nodes), vec![0]);
    // vm50 seen on node 0 (all its CPUs busy now): two decisions later node 0 counts once.
    b.new_proc(50, "vm50", &[(0, 1.0); 8], &[8192, 0, 0, 0]);
    b.allow(50, &[0]).pinned(50);
    let _ = p.decide(&b.m);
    let a = p.advise_launch(&b.m, now, &req(51, 1.0, 1)).expect("advice");
    assert!(a.reason.detail.contains("pid 50 on 0"), "still promised after one look: {}", a.reason.detail);
    let _ = p.decide(&b.m);
    let a = p.advise_launch(&b.m, now, &req(52, 1.0, 1)).expect("advice");
    assert!(!a.reason.detail.contains("pid 50"), "taken up after two looks: {}", a.reason.detail);
    // vm60 never starts: its promise holds node 1 until LAUNCH_PROMISE_NS has passed.
    let mut b2 = machine();
    let mut p = Adaptive::new();
    let t0 = b2.m.now_ns;
    let a = p.advise_launch(&b2.m, t0, &req(60, 8.0, 8)).expect("advice");
    assert_eq!(ids(&a.nodes), vec![0]);
    b2.m.now_ns = t0 + numapilot_policy::LAUNCH_PROMISE_NS / 2;
    let _ = p.decide(&b2.m);
    let a = p.advise_launch(&b2.m, b2.m.now_ns, &req(61, 8.0, 8)).expect("advice");
    assert_eq!(ids(&a.nodes), vec![1], "vm60's node is still promised: {}", a.reason.detail);
    // What is promised is listed (status, a refused advise): vm60 and vm61, with their figures.
    let listed = p.launch_promises(b2.m.now_ns);
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(listed[0].starts_with("pid 60 on nodes 0: 8 CPUs, 8192 MiB, given 2.5 s ago"), "{listed:?}");
    assert!(listed[0].contains("until it is seen, at most 2.5 s more"), "{listed:?}");
    assert!(listed[1].starts_with("pid 61 on nodes 1"), "{listed:?}");
    b2.m.now_ns = t0 + numapilot_policy::LAUNCH_PROMISE_NS;
    let _ = p.decide(&b2.m);
    let a = p.advise_launch(&b2.m, b2.m.now_ns, &req(62, 8.0, 8)).expect("advice");
    assert!(!a.reason.detail.contains("pid 60"), "vm60's promise has ended: {}", a.reason.detail);
    assert!(!p.launch_promises(b2.m.now_ns).iter().any(|l| l.starts_with("pid 60")), "no longer listed");
    // A launch without a pid is listed for LAUNCH_PROMISE_NS.
    let anon = LaunchRequest { pid: None, ..req(0, 1.0, 1) };
    let now = b2.m.now_ns;
    p.advise_launch(&b2.m, now, &anon).expect("advice");
    assert!(p.launch_promises(now).iter().any(|l| l.starts_with("a launch without a pid on nodes")));
    assert!(!p.launch_promises(now + numapilot_policy::LAUNCH_PROMISE_NS).iter().any(|l| l.starts_with("a launch")));
}

/// A launcher that asked and died before it started its job: a process that took its pid after
/// the advice is not the job advised (it started later than the asking), so it is neither held
/// there nor placed by the advice, and the promise ends (a promise kept by pid alone was taken up
/// by whatever reused the pid within 5 s; review helper-33).
#[test]
fn a_process_that_took_a_dead_launchers_pid_is_not_the_advised_job() {
    let mut b = machine();
    let mut p = Adaptive::new();
    let t0 = b.m.now_ns;
    let a = p.advise_launch(&b.m, t0, &req(70, 8.0, 8)).expect("advice");
    assert_eq!(ids(&a.nodes), vec![0]);
    // One second later pid 70 is a process 100 ms old, narrowed as the advice would have it.
    b.m.now_ns = t0 + 1_000_000_000;
    b.new_proc(70, "other", &[(0, 1.0); 8], &[8192, 0, 0, 0]);
    b.allow(70, &[0]).pinned(70);
    let _ = p.decide(&b.m);
    let e = p.explain(&b.m, 70).unwrap();
    assert!(!e.why.contains("launch-holds"), "held on another process's advice: {}", e.why);
    assert!(e.pinned, "its narrowing is not the advice's, so it is its own");
    let a = p.advise_launch(&b.m, b.m.now_ns, &req(71, 1.0, 1)).expect("advice");
    assert!(!a.reason.detail.contains("pid 70"), "the promise outlived its launcher: {}", a.reason.detail);
}

/// A client's measurement the machine could not give (a review of 2026-11-30): a node listed twice
/// or free CPUs that are NaN, negative or above the node's CPUs are refused with an error naming
/// the entry; a node the machine does not have is no candidate (it was advised for a memory-only
/// job); free memory near 2^63 bytes on two nodes sums without overflow (a panic in a debug build).
#[test]
fn a_measurement_no_machine_gives_is_refused_or_ignored() {
    use numapilot_policy::advise::check_nodes_now;
    let f = |node: u32, free_cpus: f64, mem_free_bytes: u64| NodeFree { node, cpus: 8, free_cpus, mem_free_bytes };
    assert!(check_nodes_now(&[f(0, 8.0, GIB), f(1, 0.0, GIB)]).is_ok());
    for (bad, says) in [
        (vec![f(0, 1.0, GIB), f(0, 1.0, GIB)], "node 0 is listed twice"),
        (vec![f(2, f64::NAN, GIB)], "node 2: free_cpus NaN"),
        (vec![f(1, -1.0, GIB)], "node 1: free_cpus -1"),
        (vec![f(3, 9.0, GIB)], "node 3: free_cpus 9"),
    ] {
        let e = check_nodes_now(&bad).unwrap_err().to_string();
        assert!(e.contains(says), "{e}");
    }
    let b = machine();
    let now = b.m.now_ns;
    let mem_only = LaunchRequest { cpus: 0.0, mem_bytes: 1, ..req(50, 0.0, 0) };
    let r = LaunchRequest { nodes_now: vec![f(7, 0.0, 64 * GIB)], ..mem_only.clone() };
    assert!(Adaptive::new().advise_launch(&b.m, now, &r).is_err(), "node 7 is not this machine's");
    let huge = 1u64 << 63;
    let r = LaunchRequest { nodes_now: vec![f(0, 8.0, huge), f(1, 8.0, huge)], ..req(50, 12.0, 0) };
    let r = LaunchRequest { mem_bytes: huge + 1, ..r };
    let a = Adaptive::new().advise_launch(&b.m, now, &r).expect("two nodes' free memory, summed without overflow");
    assert_eq!(ids(&a.nodes), vec![0, 1], "{}", a.reason.detail);
}

/// A launcher's measurement (`nodes_now`) names the nodes its job may use (its memory nodes), and
/// `reach_cpus` the CPUs; the advice stays within both, and says the figures it was made from.
///
/// ```text
///   nodes 1-3 idle in the model; measured: node 0 only, 2 of its 8 CPUs (reach CPUs 0-1), idle
///     4 CPUs asked  -> nothing fits (2 within reach), never nodes 1-3
///   CPU 1 reserved, reach CPUs 0-1: node 0 has one usable CPU the job may use (CPU 0)
///     2 CPUs asked  -> nothing fits (node 0 was counted min(2 measured, 7 usable) = 2)
///     1 CPU asked   -> node 0; its figures: node 0 with 1 CPU, 1.0 free, node 1 with none
///     then 0 CPUs and 1 GiB -> its figures less the first promise: node 0 0.0 CPUs free
/// ```
#[test]
fn launch_advice_stays_within_the_launchers_reach_and_says_its_figures() {
    let f = |node: u32, cpus: u32, free_cpus: f64| NodeFree { node, cpus, free_cpus, mem_free_bytes: 16 * GIB };
    let reach: numapilot_topology::CpuSet = (0..2).collect();
    let b = machine();
    let r = LaunchRequest { nodes_now: vec![f(0, 2, 2.0)], reach_cpus: Some(reach.clone()), ..req(50, 4.0, 0) };
    assert!(Adaptive::new().advise_launch(&b.m, b.m.now_ns, &r).is_err(), "2 CPUs within reach");

    let mut topo = Topology::uniform(4, 8, 32 << 20, 21);
    topo.reserve(&std::iter::once(1).collect());
    let b = B::with_topology(topo, traced_tunables());
    let now = b.m.now_ns;
    let measured = vec![f(0, 2, 2.0), f(1, 0, 0.0)];
    let r = LaunchRequest { nodes_now: measured, reach_cpus: Some(reach), pid: None, ..req(50, 2.0, 0) };
    let mut policy = Adaptive::new();
    // Refused, with the figures it went by: node 0's one usable CPU within reach, not the 2 measured.
    let no = policy.advise_launch(&b.m, now, &r).expect_err("one usable CPU within reach");
    let no0 = no.free.iter().find(|f| f.node == 0).cloned().unwrap();
    assert_eq!((no0.cpus, no0.free_cpus, no.free.len()), (1, 1.0, 2), "{:?}", no.free);
    let a = policy.advise_launch(&b.m, now, &LaunchRequest { cpus: 1.0, ..r.clone() }).expect("CPU 0 is free");
    assert_eq!(ids(&a.nodes), vec![0], "{}", a.reason.detail);
    let node = |a: &numapilot_policy::LaunchAdvice, id: u32| a.free.iter().find(|f| f.node == id).cloned().unwrap();
    assert_eq!((node(&a, 0).cpus, node(&a, 0).free_cpus, node(&a, 1).cpus), (1, 1.0, 0), "{:?}", a.free);
    let a = policy.advise_launch(&b.m, now, &LaunchRequest { cpus: 0.0, mem_bytes: GIB, ..r.clone() }).expect("memory");
    assert_eq!(node(&a, 0).free_cpus, 0.0, "the first promise is taken off: {:?}", a.free);
    // Refused while both promises hold: its figures are less them too.
    let no = policy.advise_launch(&b.m, now, &LaunchRequest { cpus: 0.5, ..r }).expect_err("CPU 0 promised");
    let no0 = no.free.iter().find(|f| f.node == 0).cloned().unwrap();
    assert_eq!((no0.cpus, no0.free_cpus), (1, 0.0), "{:?}", no.free);
    assert!(no0.mem_free_bytes < 16 * GIB - GIB / 2, "the promised GiB is taken off: {:?}", no.free);
}

/// numad's answer within a launcher's measurement (`nodes_now`: its memory nodes) and reach
/// (`reach_cpus`), as the adaptive policy's (the daemon runs that one; the contract is the same).
///
/// ```text
///   nodes 1-3 idle in the model; measured: node 0 only, 2 of its 8 CPUs (reach CPUs 0-1), idle
///     4 CPUs asked  -> node 0 (oversubscribed: by memory), never 1-3 (they kept their model
///                      figures and one was advised)
///   measured: node 0 with 2 of 8 CPUs, node 1 with all 8 (reach 0-1 and 8-15), both idle
///     4 CPUs asked  -> node 1 (node 0 was credited 8 free: its SMT discount taken as 2 - 8 = -6)
/// ```
#[test]
fn numad_launch_advice_stays_within_the_launchers_measurement_and_reach() {
    let f = |node: u32, cpus: u32, free_cpus: f64| NodeFree { node, cpus, free_cpus, mem_free_bytes: 16 * GIB };
    let b = machine();
    let now = b.m.now_ns;
    let reach: numapilot_topology::CpuSet = (0..2).collect();
    let r = LaunchRequest { nodes_now: vec![f(0, 2, 2.0)], reach_cpus: Some(reach), ..req(50, 4.0, 0) };
    let n = Numad::new().advise_launch(&b.m, now, &r).expect("numad places by memory");
    assert_eq!(ids(&n.nodes), vec![0], "{}", n.reason.detail);
    let wider: numapilot_topology::CpuSet = (0..2).chain(8..16).collect();
    let r = LaunchRequest { nodes_now: vec![f(0, 2, 2.0), f(1, 8, 8.0)], reach_cpus: Some(wider), ..r };
    let n = Numad::new().advise_launch(&b.m, now, &r).expect("node 1 fits");
    assert_eq!(ids(&n.nodes), vec![1], "{}", n.reason.detail);
}
