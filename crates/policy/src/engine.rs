//! The engine: one observe -> model -> decide -> act step, the same on a live kernel and in the
//! simulator.
//!
//! ```text
//!   step(host):  sample = host.sample()          observe (live: /proc, /sys; sim: its own files)
//!                model.update(&sample)           derive (rates, affinity, groups, load, classes)
//!                plan = policy.decide(&model)    decide (pure; each action with its reason)
//!                outcome_i = host.apply(a_i)     act (skipped in a dry run)
//!                policy.observe_outcomes(...)    learn what happened (holds, failure counts)
//! ```
//!
//! The caller owns the clock: it calls `step` again after [`Engine::next_interval_ns`] (the daemon
//! sleeps, the simulator advances simulated time). There is exactly one implementation of every
//! policy; the simulator runs this same `step`.

use numapilot_model::{Model, Tunables};
use numapilot_topology::Topology;
use serde::{Deserialize, Serialize};

use crate::action::{Action, ActionKind, Outcome, Plan, Reason};
use crate::adaptive::Explanation;
use crate::host::{FinishedMove, Host, HostError};

/// A placement policy: reads the model, returns a plan. Pure (no I/O).
pub trait Policy: std::fmt::Debug {
    /// Short name (`numapilot`, `numad`), as the simulator and the journal show it.
    fn name(&self) -> &'static str;

    /// Time to wait before the next decision, ns (numad varies its interval; the adaptive policy
    /// uses `Tunables::interval_ms`).
    fn next_interval_ns(&self, model: &Model) -> u64;

    /// The plan for the machine as the model sees it now.
    fn decide(&mut self, model: &Model) -> Plan;

    /// What became of the last plan's actions (same order as `plan.actions`); an empty slice in a
    /// dry run. The default ignores them.
    fn observe_outcomes(&mut self, model: &Model, plan: &Plan, outcomes: &[Outcome]) {
        let _ = (model, plan, outcomes);
    }

    /// Background page moves ([`Outcome::Started`]) that ended since the last decision, before
    /// the next one. The default ignores them.
    fn observe_finished(&mut self, model: &Model, finished: &[FinishedMove]) {
        let _ = (model, finished);
    }

    /// The machine changed under the policy (CPU hotplug): `model.topo` is the new topology.
    /// Called before the model takes the sample read after the change. The default ignores it.
    fn machine_changed(&mut self, model: &Model) {
        let _ = model;
    }

    /// How many entries each of the policy's per-process, per-thread and per-range memories holds
    /// now, by name, appended to `out` ([`Engine::bookkeeping`]). The default: none.
    fn bookkeeping(&self, out: &mut Vec<(&'static str, usize)>) {
        let _ = out;
    }

    /// What the policy believes about `pid` and what it did to it, for `numapilot explain`.
    /// `None` when the policy does not know the process (or, as the default, cannot explain).
    fn explain(&self, model: &Model, pid: u32) -> Option<Explanation> {
        let _ = (model, pid);
        None
    }

    /// The launch stage: a node set for a process about to start, from what its launcher says it
    /// needs (`Err`: no advice, the process starts where the kernel puts it; with the figures the
    /// policy chose among when it says them). The default gives none. A policy that answers
    /// remembers what it promised: the model shows the process only at the next step.
    fn advise_launch(
        &mut self,
        model: &Model,
        now_ns: u64,
        req: &LaunchRequest,
    ) -> Result<LaunchAdvice, NoLaunchAdvice> {
        let _ = (model, now_ns, req);
        Err(NoLaunchAdvice::default())
    }

    /// The launch advice still counted against the free capacity at host time `now_ns`, one line
    /// each ("pid P on nodes N: C CPUs, M MiB, given T s ago"), for `status` and a refused
    /// `advise`. The default: none.
    fn launch_promises(&self, now_ns: u64) -> Vec<String> {
        let _ = now_ns;
        Vec::new()
    }
}

/// A process about to start, as its launcher describes it (rule "launch-advice"). A VM manager
/// knows a VM's vCPUs and memory before the VM exists: libvirt's `placement='auto'` asks numad
/// (`numad -w NCPUS:MB`) for a node set and starts QEMU on it, and the VM mapping paper's first
/// stage maps each VM on arrival from its request (shared/seeds/004, "Stage 1").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchRequest {
    /// The process's pid when the launcher knows it already (forked, not yet running), else `None`.
    pub pid: Option<u32>,
    /// Name, for the reason.
    pub name: String,
    /// CPUs it will keep busy (a VM: its vCPUs).
    pub cpus: f64,
    /// Memory it will hold, bytes (a VM: its guest RAM).
    pub mem_bytes: u64,
    /// Free CPUs and memory per node measured when asking (numad answers each `-w` after
    /// `update_nodes()`, numad.c's message handler; `numapilot advise` measures the same way);
    /// empty: the policy goes by its model of the last step.
    #[serde(default)]
    pub nodes_now: Vec<crate::advise::NodeFree>,
    /// The CPUs the job may use (its launcher's affinity within its cpuset), when fewer than the
    /// machine's: `nodes_now` counts only these, and the policy counts a node's CPUs within both
    /// these and its own usable ones (a reserved CPU is in the first, not the second). `None`: every
    /// CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reach_cpus: Option<numapilot_topology::CpuSet>,
}

/// The answer to a [`LaunchRequest`]: start its threads on these nodes' CPUs and prefer these
/// nodes' memory (`numactl --cpunodebind=NODES --preferred-many=NODES`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchAdvice {
    /// The nodes.
    pub nodes: numapilot_topology::NodeSet,
    /// Why (rule, figures).
    pub reason: Reason,
    /// Each node the policy chose among, with the free CPUs and memory it chose by (the measurement
    /// within its usable CPUs and the job's reach, less its promises to earlier launches), so a
    /// client shows the figures of the advice, not its own measurement; empty from a policy that
    /// does not say (numad, whose figures are SMT-discounted) or a daemon from before this field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub free: Vec<crate::advise::NodeFree>,
}

/// No advice for a [`LaunchRequest`]: no node set has the room (or the policy gives none).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NoLaunchAdvice {
    /// Each node the policy chose among, with the free CPUs and memory it went by, as
    /// [`LaunchAdvice::free`], so a client shows why nothing fits in the policy's figures, not its
    /// own measurement; empty from a policy that does not say (numad) or gives no advice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub free: Vec<crate::advise::NodeFree>,
}

/// What one step did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepReport {
    /// Host time of the sample, ns.
    pub at_ns: u64,
    /// The plan.
    pub plan: Plan,
    /// The outcome of each action (empty in a dry run).
    pub outcomes: Vec<Outcome>,
    /// Base pages moved by this step's actions.
    pub pages_moved: u64,
    /// Base pages that could not be moved (all causes).
    pub pages_failed: u64,
    /// Actions whose target had vanished (or was another process with the same pid).
    pub vanished: u64,
    /// Actions the host refused.
    pub refused: u64,
    /// Page actions handed to the host's mover this step ([`Outcome::Started`]).
    pub moves_started: u64,
    /// Background page moves that ended since the last step (their pages are counted in
    /// `pages_moved` and `pages_failed` here, not in the step that started them).
    pub finished: Vec<FinishedMove>,
    /// Host time spent observing and updating the model (from the step's start), ns.
    #[serde(default)]
    pub observe_ns: u64,
    /// Host time spent deciding (the policy's plan), ns.
    #[serde(default)]
    pub decide_ns: u64,
    /// Host time spent applying the plan (every action's checks and syscalls), ns.
    #[serde(default)]
    pub act_ns: u64,
    /// The machine changed under the engine before this step's model update (CPU hotplug, from
    /// [`Host::take_topology_change`]): the online CPUs before and after and each node's CPUs
    /// now, e.g. `online CPUs 0-3 -> 0-1 (node 0: CPUs 0-1, memory 3968 MiB, node 1: CPUs none,
    /// memory 4096 MiB)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_change: Option<String>,
    /// How full the access sampler's fullest buffer was over this step's window
    /// (`Sample::access_fill`), for the cadence's sampling density.
    #[serde(default)]
    pub access_fill: f64,
}

impl StepReport {
    /// Adds one outcome to the step's counts.
    fn count(&mut self, outcome: &Outcome) {
        match outcome {
            Outcome::Applied { pages_moved } => self.pages_moved += pages_moved,
            Outcome::Partial { pages_moved, failed } => {
                self.pages_moved += pages_moved;
                self.pages_failed += failed.iter().map(|(_, n)| n).sum::<u64>();
            }
            Outcome::Started { .. } => self.moves_started += 1,
            Outcome::Vanished => self.vanished += 1,
            Outcome::Refused { .. } => self.refused += 1,
        }
    }
}

/// Totals over the engine's life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Steps taken.
    pub steps: u64,
    /// Actions planned.
    pub actions: u64,
    /// Base pages moved.
    pub pages_moved: u64,
    /// Base pages that failed to move.
    pub pages_failed: u64,
    /// Actions on vanished targets.
    pub vanished: u64,
    /// Actions refused.
    pub refused: u64,
    /// Page actions handed to a background mover.
    #[serde(default)]
    pub moves_started: u64,
}

/// The model and a policy, stepped against a host.
#[derive(Debug)]
pub struct Engine {
    /// The model, updated by every step.
    pub model: Model,
    /// The policy.
    pub policy: Box<dyn Policy>,
    /// When true, plans are made and returned but never applied.
    pub dry_run: bool,
    /// Totals so far.
    pub totals: Totals,
    /// The last plan's standing orders not carried out yet ([`Plan::standing`]).
    standing: Vec<Action>,
    /// The plan before's, for processes the last plan neither ordered nor acted on: a thread
    /// created while the last step ran is heard of only after it (see [`Engine::on_new_threads`]).
    standing_before: Vec<Action>,
    /// Background moves that ended before a step whose sample failed: the host hands each over
    /// once ([`Host::finished_moves`]), so they wait here for the next step, which gives them to
    /// the policy and counts their pages. Dropped, the policy never heard the move end: it kept
    /// the process's pages "in flight" (no page action, holds kept fresh) for as long as the
    /// process lived, and never judged what the move did.
    unheard: Vec<FinishedMove>,
}

impl Engine {
    /// An engine for `topo` running `policy`.
    pub fn new(topo: Topology, tunables: Tunables, policy: Box<dyn Policy>) -> Self {
        Self {
            model: Model::new(topo, tunables),
            policy,
            dry_run: false,
            totals: Totals::default(),
            standing: Vec::new(),
            standing_before: Vec::new(),
            unheard: Vec::new(),
        }
    }

    /// How many entries each table the engine keeps between steps holds now (the model's, the
    /// policy's, the standing orders), by name: what `numapilot status` reports as bookkeeping. A
    /// daemon that runs for weeks among short-lived processes must keep these to what is alive;
    /// `crates/sim/tests/bounded_state.rs` checks it under churn.
    pub fn bookkeeping(&self) -> Vec<(&'static str, usize)> {
        let mut out = Vec::new();
        self.model.bookkeeping(&mut out);
        self.policy.bookkeeping(&mut out);
        out.push(("engine.standing", self.standing.len() + self.standing_before.len()));
        out.push(("engine.unheard", self.unheard.len()));
        out
    }

    /// Time until the next step should run, ns.
    pub fn next_interval_ns(&self) -> u64 {
        self.policy.next_interval_ns(&self.model)
    }

    /// The launch stage for a process about to start ([`Policy::advise_launch`]), on the model as of
    /// the last step; `now_ns` is the host's clock.
    pub fn advise_launch(&mut self, now_ns: u64, req: &LaunchRequest) -> Result<LaunchAdvice, NoLaunchAdvice> {
        self.policy.advise_launch(&self.model, now_ns, req)
    }

    /// The policy's outstanding launch promises ([`Policy::launch_promises`]).
    pub fn launch_promises(&self, now_ns: u64) -> Vec<String> {
        self.policy.launch_promises(now_ns)
    }

    /// Process `tgid` started a thread (the host heard it as it happened): the last plan's
    /// standing order for it, if any, is carried out now, once, and the policy hears its outcome
    /// as it hears a step's. A thread created while a step ran is heard of after it, and that
    /// step's plan may have seen the thread (its rate unknown, reserving a CPU where the kernel
    /// started it) and given no order: the plan before's order for the process then stands, unless
    /// the last plan acted on the process, ordered it otherwise, or ordered another process onto
    /// any of its CPUs (the rig's 4-node numa02, once: the workers started 10 ms into a 200 ms
    /// step, which replaced the order with none, and ran remote until the step after).
    ///
    /// `None` when there was none. The order and what became of it are returned for the journal:
    /// `Some(outcome)` when carried out (the daemon journals and counts only an order applied),
    /// `None` in a dry run, which carries out nothing (the order is taken all the same, once, so
    /// the daemon logs what it would have done).
    pub fn on_new_threads(&mut self, host: &mut dyn Host, tgid: u32) -> Option<(Action, Option<Outcome>)> {
        let action = match self.standing.iter().position(|a| a.target.pid == tgid) {
            Some(i) => self.standing.swap_remove(i),
            None => {
                let i = self.standing_before.iter().position(|a| a.target.pid == tgid)?;
                self.standing_before.swap_remove(i)
            }
        };
        if self.dry_run {
            self.totals.actions += 1;
            return Some((action, None));
        }
        let outcome = host.apply(&action);
        // Only what was done reaches the policy and the totals: an order is conditional, and one
        // refused (the process still binds its memory, as one started under `numactl --membind`
        // does for good, or was excluded since) or whose process is gone is an order whose
        // condition did not hold, not a failed action; the process stays as the last decision saw
        // it.
        if matches!(outcome, Outcome::Applied { .. } | Outcome::Partial { .. }) {
            let plan = Plan { actions: vec![action.clone()], ..Plan::default() };
            self.policy.observe_outcomes(&self.model, &plan, std::slice::from_ref(&outcome));
            self.totals.actions += 1;
        }
        Some((action, Some(outcome)))
    }

    /// Drops every standing order: the configuration was reloaded (orders made under the old
    /// tunables), or a step failed (no decision stands behind them any more).
    pub fn forget_standing(&mut self) {
        self.standing.clear();
        self.standing_before.clear();
    }

    /// Drops the standing order for `pid`, if any: the process executed a new program, and the
    /// memory its order was made for is gone with the old one.
    pub fn drop_standing(&mut self, pid: u32) {
        self.standing.retain(|a| a.target.pid != pid);
        self.standing_before.retain(|a| a.target.pid != pid);
    }

    /// What the policy says of `pid` ([`Policy::explain`]), with its standing order if the last
    /// plan gave one that is not carried out yet.
    pub fn explain(&self, pid: u32) -> Option<Explanation> {
        let mut e = self.policy.explain(&self.model, pid)?;
        e.standing = self.standing.iter().chain(&self.standing_before).find(|a| a.target.pid == pid).cloned();
        Some(e)
    }

    /// The standing orders not carried out yet ([`Plan::standing`] of the last step).
    pub fn standing(&self) -> &[Action] {
        &self.standing
    }

    /// One step: observe, update the model, decide, act (unless dry run).
    pub fn step(&mut self, host: &mut dyn Host) -> Result<StepReport, HostError> {
        // Background moves that ended since the last step, taken before the observation: a host
        // reads the moved processes' memory again in it (the live host's carried numa_maps are
        // from before the move; read after, the policy asked for the same move once more). The
        // policy hears of them before it decides, and their pages count now.
        let t0 = host.now_ns();
        let mut finished = std::mem::take(&mut self.unheard);
        finished.extend(host.finished_moves());
        let sample = match host.sample() {
            Ok(sample) => sample,
            Err(e) => {
                self.unheard = finished;
                return Err(e);
            }
        };
        let topology_change = host.take_topology_change().map(|topo| {
            let what = topo.cpu_change_from(&self.model.topo);
            self.model.set_topology(topo);
            self.policy.machine_changed(&self.model);
            what
        });
        self.model.update(&sample);
        let at_ns = sample.monotonic_ns;
        let access_fill = sample.access_fill;
        host.recycle(sample);
        if !finished.is_empty() {
            self.policy.observe_finished(&self.model, &finished);
        }
        let t1 = host.now_ns();
        let plan = self.policy.decide(&self.model);
        let t2 = host.now_ns();
        let mut report = StepReport {
            at_ns,
            observe_ns: t1.saturating_sub(t0),
            decide_ns: t2.saturating_sub(t1),
            topology_change,
            access_fill,
            ..StepReport::default()
        };
        for f in finished {
            report.count(&f.outcome);
            report.finished.push(f);
        }
        if !self.dry_run {
            for action in &plan.actions {
                let outcome = host.apply(action);
                report.count(&outcome);
                report.outcomes.push(outcome);
            }
        }
        report.act_ns = host.now_ns().saturating_sub(t2);
        // The orders this plan replaces stay for one wait for the processes it leaves alone, and
        // only where it orders no other process (its capacity check counts its own orders only).
        let cpus_of = |a: &Action| match &a.kind {
            ActionKind::SetAffinity { cpus } => Some(cpus.clone()),
            _ => None,
        };
        let mut before = std::mem::take(&mut self.standing);
        before.retain(|o| {
            let pid = o.target.pid;
            let mine = cpus_of(o);
            !plan.actions.iter().any(|a| a.target.pid == pid)
                && !plan.standing.iter().any(|a| {
                    a.target.pid == pid
                        || matches!((&mine, cpus_of(a)), (Some(m), Some(c)) if !m.intersection(&c).is_empty())
                })
        });
        self.standing_before = before;
        self.standing = plan.standing.clone();
        self.policy.observe_outcomes(&self.model, &plan, &report.outcomes);
        host.step_done();
        self.totals.steps += 1;
        self.totals.actions += plan.actions.len() as u64;
        self.totals.pages_moved += report.pages_moved;
        self.totals.pages_failed += report.pages_failed;
        self.totals.vanished += report.vanished;
        self.totals.refused += report.refused;
        self.totals.moves_started += report.moves_started;
        report.plan = plan;
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use numapilot_observe::Sample;
    use numapilot_topology::CpuSet;

    use super::*;
    use crate::action::TaskRef;

    /// Plays back scripted plans.
    #[derive(Debug)]
    struct Script(VecDeque<Plan>);

    impl Policy for Script {
        fn name(&self) -> &'static str {
            "script"
        }
        fn next_interval_ns(&self, _: &Model) -> u64 {
            1
        }
        fn decide(&mut self, _: &Model) -> Plan {
            self.0.pop_front().unwrap_or_default()
        }
    }

    /// An empty machine a second apart; records what it is asked to do.
    struct Recorder {
        topo: Topology,
        t: u64,
        applied: Vec<Action>,
    }

    impl Host for Recorder {
        fn topology(&self) -> &Topology {
            &self.topo
        }
        fn now_ns(&self) -> u64 {
            self.t
        }
        fn sample(&mut self) -> Result<Sample, HostError> {
            self.t += 1_000_000_000;
            Ok(Sample::empty_at(self.t))
        }
        fn apply(&mut self, a: &Action) -> Outcome {
            self.applied.push(a.clone());
            Outcome::Applied { pages_moved: 0 }
        }
    }

    fn set(pid: u32, cpus: &str, rule: &str) -> Action {
        Action {
            target: TaskRef { pid, tid: None, starttime: 1 },
            kind: ActionKind::SetAffinity { cpus: CpuSet::parse_list(cpus).unwrap() },
            reason: Reason::new(rule, "test"),
        }
    }

    fn order(pid: u32, cpus: &str) -> Plan {
        Plan { actions: vec![], standing: vec![set(pid, cpus, "new-threads-follow-memory")] }
    }

    fn run(plans: Vec<Plan>) -> (Engine, Recorder) {
        let topo = Topology::uniform(2, 2, 1 << 20, 20);
        let mut host = Recorder { topo: topo.clone(), t: 0, applied: vec![] };
        let mut e = Engine::new(topo, Tunables::default(), Box::new(Script(plans.clone().into())));
        for _ in &plans {
            e.step(&mut host).unwrap();
        }
        (e, host)
    }

    /// An order is carried out once; a later plan without one for the process leaves the order
    /// before it standing for one wait (threads created during that step), not two.
    #[test]
    fn an_order_stands_one_plan_longer_for_a_process_the_next_plan_leaves_alone() {
        let (mut e, mut host) = run(vec![order(7, "0-1")]);
        assert!(e.on_new_threads(&mut host, 8).is_none());
        let (a, o) = e.on_new_threads(&mut host, 7).expect("the order");
        assert_eq!((a.target.pid, o), (7, Some(Outcome::Applied { pages_moved: 0 })));
        assert!(e.on_new_threads(&mut host, 7).is_none(), "carried out once");
        assert_eq!(e.totals.actions, 1);

        // Given, then a plan that says nothing of 7: still carried out after it.
        let (mut e, mut host) = run(vec![order(7, "0-1"), Plan::default()]);
        assert!(e.explain(7).is_none(), "the script explains nothing");
        assert!(e.on_new_threads(&mut host, 7).is_some());
        assert_eq!(host.applied.len(), 1);
        // Two plans later it is gone.
        let (mut e, mut host) = run(vec![order(7, "0-1"), Plan::default(), Plan::default()]);
        assert!(e.on_new_threads(&mut host, 7).is_none());
        assert!(host.applied.is_empty());
    }

    /// A dry run takes the order (once) but carries out nothing; a step that fails, a reload and
    /// an exec drop orders.
    #[test]
    fn dry_runs_carry_out_nothing_and_orders_are_dropped_when_their_ground_goes() {
        let (mut e, mut host) = run(vec![order(7, "0-1")]);
        e.dry_run = true;
        let (a, o) = e.on_new_threads(&mut host, 7).expect("taken");
        assert_eq!((a.target.pid, o), (7, None));
        assert!(host.applied.is_empty());
        assert!(e.on_new_threads(&mut host, 7).is_none());
        let (mut e, mut host) = run(vec![order(7, "0-1"), Plan::default()]);
        e.forget_standing();
        assert!(e.on_new_threads(&mut host, 7).is_none());
        let (mut e, mut host) = run(vec![order(7, "0-1"), order(8, "2-3")]);
        e.drop_standing(7);
        assert!(e.on_new_threads(&mut host, 7).is_none());
        assert!(e.on_new_threads(&mut host, 8).is_some());
    }

    /// A later plan that acts on the process, orders it elsewhere, or orders another process onto
    /// its CPUs, replaces the order before.
    #[test]
    fn a_plan_that_acts_on_the_process_or_orders_it_anew_ends_the_order_before() {
        let other = Plan { actions: vec![], standing: vec![set(8, "1-2", "new-threads-follow-memory")] };
        let (mut e, mut host) = run(vec![order(7, "0-1"), other]);
        assert!(e.on_new_threads(&mut host, 7).is_none(), "node 0's spare CPU went to 8's order");
        let elsewhere = Plan { actions: vec![], standing: vec![set(8, "2-3", "new-threads-follow-memory")] };
        let (mut e, mut host) = run(vec![order(7, "0-1"), elsewhere]);
        assert!(e.on_new_threads(&mut host, 7).is_some(), "8's order is on other CPUs");
        let acted = Plan { actions: vec![set(7, "2-3", "fork-spread")], standing: vec![] };
        let (mut e, mut host) = run(vec![order(7, "0-1"), acted]);
        assert!(e.on_new_threads(&mut host, 7).is_none());
        assert_eq!(host.applied.len(), 1, "only the plan's own action");
        let (mut e, mut host) = run(vec![order(7, "0-1"), order(7, "2-3")]);
        let (a, _) = e.on_new_threads(&mut host, 7).unwrap();
        assert!(matches!(a.kind, ActionKind::SetAffinity { ref cpus } if cpus.to_list() == "2-3"), "{a:?}");
        assert!(e.on_new_threads(&mut host, 7).is_none(), "the order before went with the new one");
    }

    /// Hears the background moves that end; plans nothing.
    #[derive(Debug, Default)]
    struct Listener {
        heard: std::rc::Rc<std::cell::RefCell<Vec<FinishedMove>>>,
    }

    impl Policy for Listener {
        fn name(&self) -> &'static str {
            "listener"
        }
        fn next_interval_ns(&self, _: &Model) -> u64 {
            1
        }
        fn decide(&mut self, _: &Model) -> Plan {
            Plan::default()
        }
        fn observe_finished(&mut self, _: &Model, finished: &[FinishedMove]) {
            self.heard.borrow_mut().extend_from_slice(finished);
        }
    }

    /// A host whose mover reports one ended move, once, and whose first sample fails.
    struct Flaky {
        topo: Topology,
        t: u64,
        ended: Vec<FinishedMove>,
        fail: bool,
    }

    impl Host for Flaky {
        fn topology(&self) -> &Topology {
            &self.topo
        }
        fn now_ns(&self) -> u64 {
            self.t
        }
        fn sample(&mut self) -> Result<Sample, HostError> {
            self.t += 1_000_000_000;
            if std::mem::take(&mut self.fail) {
                return Err(HostError::Unavailable("/proc unreadable (test)".into()));
            }
            Ok(Sample::empty_at(self.t))
        }
        fn apply(&mut self, _: &Action) -> Outcome {
            Outcome::Applied { pages_moved: 0 }
        }
        fn finished_moves(&mut self) -> Vec<FinishedMove> {
            std::mem::take(&mut self.ended)
        }
    }

    /// A background move that ends before a step whose sample fails reaches the policy, and the
    /// totals, at the next step: the host gives each ended move once, and the step that failed
    /// dropped it (the adaptive policy then kept the process's pages "in flight" for good).
    #[test]
    fn a_move_that_ends_before_a_failed_sample_is_heard_at_the_next_step() {
        let topo = Topology::uniform(2, 2, 1 << 20, 20);
        let action = Action {
            target: TaskRef { pid: 7, tid: None, starttime: 1 },
            kind: ActionKind::MigratePages {
                from: std::iter::once(0).collect(),
                to: std::iter::once(1).collect(),
                max_pages: Some(10),
            },
            reason: Reason::new("memory-follows-cpu", "test"),
        };
        let done = FinishedMove {
            action,
            outcome: Outcome::Applied { pages_moved: 10 },
            started_ns: 0,
            ended_ns: 1,
            ran_on: None,
            threads: 1,
        };
        let mut host = Flaky { topo: topo.clone(), t: 0, ended: vec![done.clone()], fail: true };
        let listener = Listener::default();
        let heard = listener.heard.clone();
        let mut e = Engine::new(topo, Tunables::default(), Box::new(listener));
        assert!(e.step(&mut host).is_err());
        assert!(heard.borrow().is_empty());
        let report = e.step(&mut host).unwrap();
        assert_eq!(*heard.borrow(), vec![done.clone()], "the policy hears the move end");
        assert_eq!((report.finished, report.pages_moved, e.totals.pages_moved), (vec![done], 10, 10));
        assert!(e.bookkeeping().contains(&("engine.unheard", 0)));
        e.step(&mut host).unwrap();
        assert_eq!(heard.borrow().len(), 1, "heard once");
    }
}
