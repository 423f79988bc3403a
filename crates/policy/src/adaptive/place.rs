//! Units, capacity, the fork rule and the global placement (rules 1, 2 and 5's CPU side).
//!
//! A *unit* is what gets placed as a whole: an affinity group (minus tasks of pinned, new or
//! classified processes), a classified process, or the ungrouped tasks of one process. Every unit
//! is placed against one capacity table, heaviest first:
//!
//! ```text
//!   capacity[n] = C(n) x node_cpu_target  -  fixed demand on n (tasks of no unit)
//!     C(n) = cores(n) x max(1, D / cores)  capped at CPUs(n)     (smt_cores_first; else CPUs(n))
//!            D = the machine's whole demand: a core per thread while they fit, then every node
//!            takes the same share of the SMT sharing (smt-shared-evenly), CPUs once D needs all
//!   memory[n]   = free(n) + managed memory on n  -  MemTotal(n) x (1 - group_max_mem_frac)
//!   unit fits a node:  first candidate with room and no bottleneck (for it), else stay, else least loaded
//!                      (room: CPU, and memory for the unit on every node but one holding all but
//!                      remote_share_min of its accesses, which needs none: home-needs-no-room)
//!                      (a candidate it overloads has room when the overload, planned CPU beyond
//!                      capacity, is at most unit CPU x its access share there x remote_access_cost:
//!                      locality-pays-for-overload, the placement side of the balancer's
//!                      worth-its-locality; the rig's numa02 on a 4-node guest, two spinning
//!                      workers and a 0.18-CPU main thread, 2.2 CPUs for a 2-CPU node holding 99% of
//!                      its accesses, stayed away and had its 69 MiB copied over instead;
//!                      a part the group cap cut off a process known by residency alone whose
//!                      other threads this plan keeps on the node holding its memory, the whole
//!                      fitting there up to the cap's upper mark, is weighed with them: (its CPU + theirs) x share x
//!                      remote_access_cost, split-weighs-follow-on: the rig's 4-node numa01 sent
//!                      such a worker off its memory for 0.38 CPUs over, and its process and
//!                      32 MiB followed it, both processes' buffers copied)
//!   unit larger:       preferred node + nearest nodes until CPU and memory suffice
//! ```
//!
//! Cost: the units are built every decision from the model, in one pass over its groups and
//! processes with hash lookups; a group or ungrouped process under `min_group_cpu` (on a server,
//! most of them) is dropped once its demand is summed, before its memory, shares and label are
//! worked out, and the fork rule does nothing without a new process. Measured on a recorded live
//! load of 1,045 processes / 10,093 threads (`cycle_cost --replay`): 3.7-5.0 ms of CPU per decision,
//! 14.9-16.5 ms when every unit was built in full.
//!
//! Rules this module names in reasons (`Reason::rule`; "no action": the plan keeps the unit where
//! it is and no action carries the name):
//!
//! ```text
//!   fork-spread             a new process's CPUs to the least loaded node (or the one holding
//!                           its memory, within imbalance), a closest set when it fits no node
//!   cpu-follows-memory      a unit's threads to the node holding its memory (>= 80% of >= 1 GiB
//!                           there, or cost-based: moving the threads, plus the copy of its
//!                           processes' memory the memory pass then makes after them (of each
//!                           process the move leaves whole there: move-counts-the-copy-it-
//!                           triggers, `memory::follow_pages`), is cheaper than copying the
//!                           memory remote from where they run)
//!   stay-current-node       a unit stays on the node it runs on (as good as the best, most of its
//!                           sampled hot ranges there now, small memory that follows it, or its
//!                           memory moving there)
//!   preferred-node          a unit to the node holding the largest share of its accesses
//!   next-best-node          the first choice was refused (no room, a bottleneck): the next
//!                           candidate by access share, then distance
//!   no-room-stay            no node has room for the unit: it stays on the node it runs on
//!   least-loaded            no node has room and it cannot stay: the node with most CPU left
//!   closest-set             a unit that fits no single node: nodes around its preferred one
//!   bandwidth-bound-stay    a bandwidth-bound process on >= bandwidth_bound_min_nodes nodes keeps
//!                           its CPUs (no action); its memory is interleaved there (memory.rs)
//!   no-cpu-nodes            the machine has no node with CPUs: nothing is placed (no action)
//!   confined-within-cpuset  no node is within the cpusets of all the unit's processes: it is
//!                           left as it is (no action); every other placement stays within them
//!   hold                    a unit or task moved within hold_periods stays where it was put
//!                           while its load holds (a change over hold_load_change and over the
//!                           floor of hold-change-floor, see `Move::change_floor`), or while its
//!                           pages move (no action); a task the balancer moved alone holds
//!                           itself, never its unit (unit-hold-is-the-units); a process that
//!                           joined the unit since the move and takes the largest share of its
//!                           accesses off the held nodes lifts it, once (hold-gains-member,
//!                           `Planner::gained_member`)
//!   moves-in-flight         a unit whose memory this policy is moving stays with it, or goes to
//!                           the nodes it goes to, until the move ends
//!   balance-stays           a task the balancer moved off its unit's node stays where it is
//!                           until that node has room for it again (no action)
//! ```
//!
//! An action covers the tasks of several units when a process's units all go to the same nodes:
//! one process-wide SetAffinity, not one per thread. Its reason is every unit's
//! (reason-of-every-unit, `reason_of_all`): the first unit's rule as `Reason::rule`, and in the
//! detail the first unit's figures, then each other distinct reason as `; and [rule] figures`, each
//! beginning with its unit's label; past `REASONS_SPELLED` the rest are counted and their rules
//! named. So the journal and `explain` give every thread of the action its own unit's rule.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use numapilot_model::{AccessSource, GroupId, Model, ProcessClass, TaskKey, TaskView};
use numapilot_observe::parse::numa_maps::FxBuild;
use numapilot_topology::{plural, CpuSet, NodeSet};

use super::{Adaptive, BASE_PAGE_BYTES};
use crate::action::{Action, ActionKind, Plan, Reason, TaskRef};

pub(crate) use numapilot_model::RATE_SLACK_CPU_PER_TASK;

const MIB: f64 = 1048576.0;

/// Rule name of the memory-room waiver on a node that holds a unit's accesses (see
/// `Planner::mem_needed`).
pub(crate) const HOME_RULE: &str = "home-needs-no-room";

/// Rule name of weighing a part the model cut off a process with the threads it leaves on its
/// memory's node (see `Planner::follow_on`).
pub(crate) const FOLLOW_ON_RULE: &str = "split-weighs-follow-on";

/// Rule name of placement within a confined process's cpuset (see [`Reach`]).
pub(crate) const CONFINED_RULE: &str = "confined-within-cpuset";

/// Most processes a group's label names; the rest are counted.
const LABEL_PIDS: usize = 4;

/// Most reasons, with their figures, that an action covering several units gives
/// (`reason_of_all`); the units' reasons beyond are counted and their rules named. Default 4
/// (unit: distinct reasons), as `LABEL_PIDS`. Source: a unit's reason runs to 150-300 characters
/// (its label and figures); a process whose threads are spread over many small groups would
/// otherwise write a journal line and an `explain` entry of several kilobytes per move, while
/// every rule involved is still named.
const REASONS_SPELLED: usize = 4;

/// A group's name in reasons: its id, its tasks and, when it holds threads of several processes,
/// those processes and what ties them, from the affinity graph's edges between threads of two of
/// its processes: the strongest value of each channel (communication: socket pairs and wake-ups;
/// shared memory: a file, segment or memfd both map; co-access: sampled accesses to the same
/// memory), those at or above `tier_weak`, strongest first. So the journal says why the
/// processes were placed together: "group 4 (3 tasks of processes 242, 259; tied by
/// communication 0.38)". A tie that has decayed below the weak tier while the group is kept
/// (`edge_grace_ms`) is not named. Cost: a range lookup per task in the edge map, for groups of
/// several processes only (units above `min_group_cpu`).
fn group_label(m: &Model, gid: GroupId, tasks: &[TaskKey]) -> String {
    let tasks_said = plural(tasks.len(), "task");
    let mut pids: Vec<u32> = tasks.iter().map(|k| k.pid).collect();
    pids.dedup();
    if pids.len() < 2 {
        return format!("group {gid} ({tasks_said})");
    }
    // Strongest cross-process value per channel: communication, shared memory, co-access.
    let mut best = [0.0f64; 3];
    let lo = |a: TaskKey| (a, TaskKey { pid: 0, tid: 0 });
    let hi = |a: TaskKey| (a, TaskKey { pid: u32::MAX, tid: u32::MAX });
    for &a in tasks {
        for (key, e) in m.graph.edges.range(lo(a)..=hi(a)) {
            let b = key.1;
            if b.pid == a.pid || tasks.binary_search(&b).is_err() {
                continue;
            }
            let shared = m.graph.shared.get(key).copied().unwrap_or(0.0);
            for (x, v) in best.iter_mut().zip([e.comm, shared, e.coaccess]) {
                *x = x.max(v);
            }
        }
    }
    let mut ties: Vec<(f64, &str)> = best
        .iter()
        .zip(["communication", "shared memory", "co-access"])
        .filter(|(&v, _)| v >= m.tunables.tier_weak)
        .map(|(&v, name)| (v, name))
        .collect();
    ties.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut named: Vec<String> = pids.iter().take(LABEL_PIDS).map(u32::to_string).collect();
    if pids.len() > LABEL_PIDS {
        named.push(format!("{} more", pids.len() - LABEL_PIDS));
    }
    let tie = if ties.is_empty() {
        String::new()
    } else {
        let said: Vec<String> = ties.iter().map(|(v, name)| format!("{name} {v:.2}")).collect();
        format!("; tied by {}", said.join(", "))
    };
    format!("group {gid} ({tasks_said} of processes {}{tie})", named.join(", "))
}

/// What a unit's or a process's access shares come from, as its reasons say it: "sampled accesses"
/// when a task has sampled accesses, "NUMA faults" when one has the kernel's NUMA-fault statistics
/// (and none has samples), else "resident memory" (each task's shares are then where its process's
/// pages are). Until 2026-12-01 every share was called "sampled accesses": the rig's 4-node guest,
/// which has no PMU and ran with NUMA balancing off, journaled "node 2 has 55% of its sampled
/// accesses" for a pair with no sample at all.
pub(crate) fn share_source<'a>(tasks: impl IntoIterator<Item = &'a TaskView>) -> &'static str {
    let mut faults = false;
    for t in tasks {
        match t.access_source {
            AccessSource::Samples => return "sampled accesses",
            AccessSource::NumaFaults => faults = true,
            AccessSource::Residency => {}
        }
    }
    if faults {
        "NUMA faults"
    } else {
        "resident memory"
    }
}

/// What a unit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnitKind {
    /// An affinity group of the model.
    Group(GroupId),
    /// A whole process, placed by its class (or, unclassified, because its tasks have no group).
    Process(ProcessClass),
}

/// Something placed as a whole.
#[derive(Debug, Clone)]
pub(crate) struct Unit {
    pub(crate) kind: UnitKind,
    /// Processes of its tasks, sorted.
    pub(crate) pids: Vec<u32>,
    /// Its tasks, sorted.
    pub(crate) tasks: Vec<TaskKey>,
    /// CPU demand, CPUs.
    pub(crate) cpu: f64,
    /// Memory, bytes.
    pub(crate) mem: u64,
    /// Memory per node (dense index), bytes.
    pub(crate) mem_by_node: Vec<u64>,
    /// Share of its accesses per node (dense index), summing to 1 (or all 0).
    pub(crate) share: Vec<f64>,
    /// What `share` comes from, for reasons.
    pub(crate) share_src: &'static str,
    /// Share of its tasks' sampled hot ranges per node where those ranges are now (the node each
    /// was on when last sampled, samples decayed as the shares are), summing to 1; `None` without
    /// hot ranges. `share` is a time-smoothed average of where past samples landed and trails a
    /// page move by seconds (half-life `access_half_life_ms`); this one follows the pages.
    pub(crate) share_now: Option<Vec<f64>>,
    /// Node (dense) it runs on most, by CPU.
    pub(crate) current: Option<usize>,
    /// Short name for reasons.
    pub(crate) label: String,
    /// Where its processes' cpusets let it go, when one of them is confined (rule
    /// "confined-within-cpuset"); `None`: every node with CPUs.
    pub(crate) reach: Option<Reach>,
}

/// The nodes a unit of confined processes may be placed on and the CPUs it may use on each
/// ([`numapilot_model::Confinement`]): a node every confined process of it admits (memory allowed
/// there, a CPU of its cpuset there), and on such a node the CPUs of its cpusets (all of the
/// node's when a process of it is not confined). A container given half of two nodes' CPUs fits
/// on one of them only if its demand fits that half.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reach {
    /// Dense indexes of the nodes with CPUs it may be placed on, ascending.
    pub(crate) nodes: Vec<usize>,
    /// Per dense node, the CPUs it may use there.
    pub(crate) cpus: Vec<f64>,
}

/// Where a unit goes and why.
#[derive(Debug, Clone)]
pub(crate) struct Placed {
    /// Dense node indexes, ascending.
    pub(crate) nodes: Vec<usize>,
    /// Rule and detail.
    pub(crate) reason: Reason,
    /// Kept where it is by a hold, or by a page move in flight (moves-in-flight): no action.
    pub(crate) held: bool,
}

/// The plan of one task.
#[derive(Debug, Clone)]
pub(crate) struct TaskPlan {
    pub(crate) nodes: Vec<usize>,
    pub(crate) unit: usize,
    pub(crate) held: bool,
    pub(crate) reason: Reason,
    pub(crate) cpu: f64,
    /// CPU demand recorded with the move for the hold: the unit's for a unit placement, the
    /// task's own for a balancing move.
    pub(crate) hold_load: f64,
}

/// Candidate nodes of a unit, best first, with the rule that put the first one first.
#[derive(Debug, Clone)]
pub(crate) struct Candidates {
    pub(crate) order: Vec<usize>,
    pub(crate) rule: &'static str,
    pub(crate) why: String,
}

/// The plan being built.
#[derive(Debug)]
pub(crate) struct Planner<'m> {
    pub(crate) model: &'m Model,
    pub(crate) period: u64,
    /// Dense indexes of nodes with CPUs.
    pub(crate) cpu_nodes: Vec<usize>,
    /// CPUs per node.
    pub(crate) cpus: Vec<f64>,
    /// Capacity per node, CPUs.
    pub(crate) cap: Vec<f64>,
    /// Fixed demand (tasks of no unit), CPUs.
    pub(crate) fixed: Vec<f64>,
    /// Fixed + planned demand, CPUs.
    pub(crate) used: Vec<f64>,
    /// Memory still available per node, bytes (may go negative when over-committed).
    pub(crate) mem_avail: Vec<f64>,
    /// Processes that may be touched.
    pub(crate) managed: BTreeSet<u32>,
    /// New processes for the fork rule.
    pub(crate) new_procs: Vec<u32>,
    /// New processes the fork rule placed in this plan: the nodes (dense indexes) and the CPU
    /// estimate it placed them with (rule "fork-memory-follows" in memory.rs).
    pub(crate) forked: BTreeMap<u32, (Vec<usize>, f64)>,
    /// Processes whose shared buffer this policy interleaved over the nodes they run on
    /// (`ProcState::shared_spread`, load unchanged): their threads stay where they are (fixed
    /// demand, no unit) and their memory keeps that spread.
    pub(crate) held_shared: BTreeSet<u32>,
    /// Managed processes seen before with threads first seen in this sample (rule
    /// "wait-for-rates"): no unit this period, their threads keep their nodes (as a new
    /// process's do) and reserve `new_thread_cpu` each there. A new thread's rate is unknown for
    /// its first period; planned as 0 CPUs, a process whose workers had just started looked idle:
    /// in the rig's 4-node race both numa01 processes (a main thread at 0.13 CPUs, two workers of
    /// rate 0) fitted node 0's 2 CPUs in one plan and were both sent there; the balancer split one
    /// over two nodes and its memory followed 18 s later. Planned at the worst case instead, the
    /// rig's numa02 (a main thread still at 0.77 CPUs from its first touch, two new workers)
    /// read 2.77 CPUs on a 2-CPU node and was split and interleaved. Waiting one period gives
    /// both their real rates. Never twice in a row (`Adaptive::rate_waited`): a process that
    /// starts threads all the time is still placed every other period.
    pub(crate) waiting: BTreeSet<u32>,
    /// Processes whose memory this policy moves (a memory move within its hold): pid, target
    /// nodes. A unit whose memory follows it to where it runs is settled there: CPU does not
    /// follow the part still left behind (which would undo the move half-way).
    pub(crate) memory_follows: Vec<(u32, NodeSet)>,
    pub(crate) units: Vec<Unit>,
    pub(crate) placed: Vec<Option<Placed>>,
    /// Per node (dense index), CPUs: the demand of tasks running there whose unit this plan has
    /// already placed on other nodes (rule "bottleneck-leaves").
    pub(crate) leaving: Vec<f64>,
    pub(crate) task_plan: BTreeMap<TaskKey, TaskPlan>,
    /// Actions so far, with the CPU demand recorded for the hold.
    pub(crate) actions: Vec<(Action, f64)>,
    /// Per thread, the hold load of a process-wide SetAffinity that covers several units: each
    /// thread's own unit's load, which the unit's hold is checked against (the action's one
    /// figure is the first unit's; recorded for every thread, it lifted the others' holds at once).
    pub(crate) task_hold_loads: BTreeMap<TaskKey, f64>,
    /// Rule hold-gains-member: the tasks of units whose hold this plan lifted because a process
    /// joined them, with the unit's processes (`Adaptive::decide` adds those to the moves'
    /// members, so one membership lifts a hold once). Their own holds (`own_hold`) from the
    /// unit's move are lifted with it; a balancer's move of one of them still holds.
    pub(crate) hold_lifts: BTreeMap<TaskKey, Arc<[u32]>>,
    /// Pages the plan may still migrate (the shared, steady budget).
    pub(crate) budget_pages: u64,
    /// Managed processes whose resident memory is mostly cold, with their accessed memory
    /// (rule "cold-memory-stays", `cold.rs`).
    pub(crate) accessed: BTreeMap<u32, super::cold::Accessed>,
    /// Pages each young process (younger than `new_process_age_ms`) may still migrate of its own
    /// memory on top of the shared budget (`young_migrate_budget_mib_per_s` x period): its
    /// first-touched memory follows its threads without speeding up anyone else's moves.
    pub(crate) young_budget: BTreeMap<u32, u64>,
    /// Young processes whose threads work on slices of their own (set by the memory pass): those
    /// the allowance is for, and whose memory moves keep the first-touch cadence.
    pub(crate) young_slices: BTreeSet<u32>,
    /// Managed processes whose threads work on slices of their own (memory.rs `slice_shaped`):
    /// static-large does not apply to them (rule "sliced-not-static", cold.rs `effective_class`).
    pub(crate) sliced: BTreeSet<u32>,
    /// Rule "stalled-by-own-move" (`Adaptive::stall_floor`): the demand each thread of a process
    /// whose pages are moving had when the move started; [`Planner::demand_of`] counts it at least
    /// at that.
    pub(crate) stall_floor: BTreeMap<TaskKey, f64>,
}

/// CPU demand of a task as measured, CPUs: what it ran plus what it waited for a CPU (schedstat
/// run delay), at most one CPU. The rate alone under-counts a crowded node: 24 busy threads on 12
/// CPUs run 0.5 each, and would look as if they fit. Whether a unit is worth placing at all
/// (`min_group_cpu`) is judged on this.
pub(crate) fn demand(t: &TaskView) -> f64 {
    (t.cpu_rate + t.run_delay.unwrap_or(0.0)).min(1.0_f64.max(t.cpu_rate))
}

/// CPU demand the plan reserves on its node for a task that is in no unit, CPUs: [`demand`], but
/// a thread of a process waiting for rates (first seen in this sample: rates need two samples)
/// counts `new_thread_cpu`, the worst case the fork rule assumes for a new process's threads, so
/// that no unit is planned into the CPUs its workers are about to use.
pub(crate) fn reserved_demand(m: &Model, t: &TaskView) -> f64 {
    if unknown_rate(m, t) {
        demand(t).max(m.tunables.new_thread_cpu)
    } else {
        demand(t)
    }
}

/// Whether `t` is a new thread of a process seen before: first seen in this sample (after the
/// model's first), so its rate is not known yet.
fn unknown_rate(m: &Model, t: &TaskView) -> bool {
    m.updates > 1 && t.first_seen_ns == m.now_ns && m.procs.get(&t.key.pid).is_some_and(|p| p.first_seen_ns < m.now_ns)
}

/// Share per node (dense index) of the hot-range samples of `tasks`, by the node each range was
/// on when last sampled; `None` when they have none (see `Unit::share_now`).
fn share_now(m: &Model, tasks: &[TaskKey]) -> Option<Vec<f64>> {
    let n = m.topo.nodes.len();
    let mut v = vec![0.0; n];
    for t in tasks.iter().filter_map(|k| m.tasks.get(k)) {
        for h in &t.hot {
            if let Some(i) = m.node_idx(h.node).filter(|&i| i < n) {
                v[i] += h.samples as f64;
            }
        }
    }
    let s: f64 = v.iter().sum();
    (s > 0.0).then(|| v.iter().map(|x| x / s).collect())
}

/// `a` as a percentage string.
pub(crate) fn pct(a: f64) -> String {
    format!("{:.0}%", a * 100.0)
}

/// Normalises `v` to sum 1 (all zero stays zero).
fn normalised(v: &[f64]) -> Vec<f64> {
    let s: f64 = v.iter().sum();
    if s > 0.0 {
        v.iter().map(|x| x / s).collect()
    } else {
        vec![0.0; v.len()]
    }
}

impl<'m> Planner<'m> {
    /// The CPU demand the plan counts for task `k`: [`demand`], but at least what it had when a
    /// page move of its process still running started (rule "stalled-by-own-move",
    /// `Adaptive::stall_floor`); 0 for a task the model does not have.
    pub(crate) fn demand_of(&self, k: &TaskKey) -> f64 {
        self.model.tasks.get(k).map_or(0.0, |tv| self.demand_with(k, tv))
    }

    /// [`Planner::demand_of`] for a task whose view is at hand (no second lookup of it: the unit
    /// builder asks this of every task of the model).
    pub(crate) fn demand_with(&self, k: &TaskKey, tv: &TaskView) -> f64 {
        let d = demand(tv);
        match self.stall_floor.get(k) {
            Some(&floor) => d.max(floor),
            None => d,
        }
    }

    /// Builds units and the capacity table from the model.
    pub(crate) fn new(policy: &Adaptive, model: &'m Model) -> Self {
        let t = &model.tunables;
        let n = model.topo.nodes.len();
        let cpus: Vec<f64> = model.topo.nodes.iter().map(|nd| nd.cpus.len() as f64).collect();
        let cpu_nodes: Vec<usize> = (0..n).filter(|&i| cpus[i] > 0.0).collect();
        let cap: Vec<f64> = cpus.iter().map(|c| c * t.node_cpu_target).collect();
        let managed: BTreeSet<u32> = model
            .procs
            .keys()
            .copied()
            .filter(|&pid| {
                !policy.foreign_pinned(model, pid)
                    && !policy.launch_holds(model, pid)
                    && !policy.refusal_waits(model, pid)
            })
            .collect();
        let new_procs: Vec<u32> = managed
            .iter()
            .copied()
            .filter(|pid| {
                let p = &model.procs[pid];
                let fresh = p.age_at_first_seen_ns < t.new_process_age_ms.saturating_mul(1_000_000);
                fresh
                    && super::young_and_worth(model, *pid)
                    && !policy.proc_state(model, *pid).is_some_and(|s| s.forked)
            })
            .collect();
        let held_shared: BTreeSet<u32> =
            managed.iter().copied().filter(|&pid| policy.shared_spread(model, pid).is_some()).collect();
        // One pass over the tasks (most have a rate: the test stops at `first_seen_ns`).
        let waiting: BTreeSet<u32> = model
            .tasks
            .iter()
            .filter(|(_, tv)| unknown_rate(model, tv))
            .map(|(k, _)| k.pid)
            .filter(|pid| {
                managed.contains(pid)
                    && !new_procs.contains(pid)
                    && !held_shared.contains(pid)
                    && !policy.rate_waited.contains(pid)
            })
            .collect();
        let memory_follows: Vec<(u32, NodeSet)> = managed
            .iter()
            .filter_map(|&pid| {
                let mv = policy.proc_state(model, pid)?.mem_move.as_ref()?;
                (policy.moving.contains_key(&pid) || mv.holds(policy.period, model.procs[&pid].cpu_rate, model))
                    .then(|| (pid, mv.nodes.clone()))
            })
            .collect();
        let period_ns = if model.period_ns > 0 { model.period_ns } else { t.interval_ms.saturating_mul(1_000_000) };
        // The shared budget runs at the steady rate; each young managed process has an allowance
        // of its own on top, for its own first-touched memory (see `young_budget`).
        let young_ns = t.new_process_age_ms.saturating_mul(1_000_000);
        let pages_at = |rate: u64| (rate as f64 * MIB * period_ns as f64 / 1e9 / BASE_PAGE_BYTES as f64) as u64;
        let budget_total = pages_at(t.migrate_budget_mib_per_s);
        let young_budget: BTreeMap<u32, u64> = managed
            .iter()
            .filter(|pid| model.procs.get(pid).is_some_and(|p| p.age_ns(model.now_ns) < young_ns))
            .map(|&pid| (pid, pages_at(t.young_migrate_budget_mib_per_s)))
            .collect();
        let mut p = Planner {
            model,
            period: policy.period,
            cpu_nodes,
            cpus,
            cap,
            fixed: vec![0.0; n],
            used: vec![0.0; n],
            mem_avail: vec![0.0; n],
            managed,
            new_procs,
            forked: BTreeMap::new(),
            held_shared,
            waiting,
            memory_follows,
            units: Vec::new(),
            placed: Vec::new(),
            leaving: vec![0.0; n],
            task_plan: BTreeMap::new(),
            actions: Vec::new(),
            task_hold_loads: BTreeMap::new(),
            hold_lifts: BTreeMap::new(),
            budget_pages: budget_total,
            accessed: BTreeMap::new(),
            young_budget,
            young_slices: BTreeSet::new(),
            sliced: BTreeSet::new(),
            stall_floor: policy.stall_floor.clone(),
        };
        p.accessed = super::cold::accessed_all(model, p.managed.iter().copied());
        // Only a classified process is asked (the override changes nothing else).
        p.sliced = p
            .managed
            .iter()
            .copied()
            .filter(|pid| model.procs[pid].class == ProcessClass::StaticLarge)
            .filter(|&pid| super::memory::slice_shaped(model, pid))
            .collect();
        p.build_units();
        p.build_capacity();
        p.set_capacity();
        p
    }

    /// Capacity per node (with `smt_cores_first`): its cores while the machine's whole demand fits in its cores (SMT
    /// siblings share a core's pipelines and caches: numa02_SMT's 12 threads on 6 cores x 2 run at
    /// half speed, on 12 cores at full); beyond that its cores times the machine's demand per core,
    /// at most its CPUs (all hardware threads), so every node takes the same share of the SMT
    /// sharing (rule "smt-shared-evenly": the process mix's 17 threads on 12 cores got 8.5 per
    /// node, not 11 on one node's 6 cores beside 6 on the other's); its CPUs once the demand
    /// needs them all (numa01: 24 busy threads on 24 CPUs); times `node_cpu_target`.
    fn set_capacity(&mut self) {
        let m = self.model;
        let t = &m.tunables;
        let online = m.topo.online_cpus();
        let cores: Vec<f64> = m
            .topo
            .nodes
            .iter()
            .map(|nd| {
                // The node's online CPUs looked up, not every CPU of the machine per node.
                let mine = nd.cpus.intersection(&online);
                crate::work::count("capacity.cpus_looked_at", mine.len() as u64);
                let set: BTreeSet<(u32, u32, u32)> =
                    mine.iter().filter_map(|id| m.topo.cpu(id)).map(|c| (c.package, c.die, c.core)).collect();
                set.len() as f64
            })
            .collect();
        let new_est: f64 = self
            .new_procs
            .iter()
            .map(|pid| {
                let pr = &m.procs[pid];
                pr.cpu_rate.max(pr.tids.len() as f64 * t.new_thread_cpu)
            })
            .sum();
        let demand = self.fixed.iter().sum::<f64>() + self.units.iter().map(|u| u.cpu).sum::<f64>() + new_est;
        let total_cores: f64 = cores.iter().sum();
        self.cap = if t.smt_cores_first && total_cores > 0.0 {
            let per_core = (demand / total_cores).max(1.0);
            cores.iter().zip(&self.cpus).map(|(&c, &n)| (c * per_core).min(n) * t.node_cpu_target).collect()
        } else {
            self.cpus.iter().map(|c| c * t.node_cpu_target).collect()
        };
    }

    /// Dense index of a task's node.
    pub(crate) fn task_idx(&self, k: &TaskKey) -> Option<usize> {
        self.model.tasks.get(k).and_then(|t| t.node).and_then(|id| self.model.node_idx(id))
    }

    /// Kernel id of dense node `i`.
    pub(crate) fn id(&self, i: usize) -> u32 {
        self.model.topo.nodes[i].id
    }

    /// Kernel ids of dense nodes.
    pub(crate) fn node_set(&self, idx: &[usize]) -> NodeSet {
        idx.iter().map(|&i| self.id(i)).collect()
    }

    /// Online CPUs of dense nodes.
    pub(crate) fn cpus_of(&self, idx: &[usize]) -> CpuSet {
        self.model.topo.cpus_of_nodes(&self.node_set(idx)).intersection(&self.model.topo.online_cpus())
    }

    /// The CPUs of dense nodes `idx` that process `pid` may run on: [`Planner::cpus_of`] within
    /// its cpuset when it is confined (rule "confined-within-cpuset"; a mask beyond it would be
    /// cut to it by the kernel, and then read as a pin of someone else's).
    pub(crate) fn cpus_for(&self, pid: u32, idx: &[usize]) -> CpuSet {
        let cpus = self.cpus_of(idx);
        match self.model.procs.get(&pid).and_then(|p| p.confined.as_ref()) {
            Some(c) => cpus.intersection(&c.cpus),
            None => cpus,
        }
    }

    /// Where processes `pids` may be placed together (see [`Reach`]), `None` when none of them is
    /// confined.
    pub(crate) fn reach_of(&self, pids: &[u32]) -> Option<Reach> {
        let m = self.model;
        let confined: Vec<&numapilot_model::Confinement> =
            pids.iter().filter_map(|pid| m.procs.get(pid)).filter_map(|p| p.confined.as_ref()).collect();
        if confined.is_empty() {
            return None;
        }
        let free = confined.len() < pids.len();
        let online = m.topo.online_cpus();
        let nodes: Vec<usize> = self
            .cpu_nodes
            .iter()
            .copied()
            .filter(|&i| confined.iter().all(|c| c.admits(&m.topo, self.id(i))))
            .collect();
        let mut cpus = vec![0.0; self.cap.len()];
        for &i in &nodes {
            let node = m.topo.nodes[i].cpus.intersection(&online);
            cpus[i] = if free {
                self.cap[i]
            } else {
                let mut usable = CpuSet::default();
                for c in &confined {
                    usable = usable.union(&node.intersection(&c.cpus));
                }
                (usable.len() as f64).min(self.cap[i])
            };
        }
        Some(Reach { nodes, cpus })
    }

    /// The nodes with CPUs unit `u` may be placed on.
    pub(crate) fn nodes_for<'a>(&'a self, u: &'a Unit) -> &'a [usize] {
        u.reach.as_ref().map_or(&self.cpu_nodes, |r| &r.nodes)
    }

    /// Whether unit `u`'s demand fits the CPUs its cpusets give it on dense node `i` (always, for
    /// a unit of no confined process).
    fn within_reach(&self, i: usize, u: &Unit) -> bool {
        u.reach
            .as_ref()
            .is_none_or(|r| r.nodes.contains(&i) && u.cpu <= r.cpus[i] + RATE_SLACK_CPU_PER_TASK * u.tasks.len() as f64)
    }

    /// Whether node `i` refuses unit `u` for being a bottleneck:
    ///
    /// - CPU: only units that do not run there yet. The plan re-places every unit against CPU
    ///   capacity, so the units that caused the CPU bottleneck are spread by the capacity check,
    ///   not evicted all at once (which would only move the bottleneck).
    /// - memory bandwidth or capacity: only units that would bring memory to the node, i.e. whose
    ///   accesses there are short of `1 - remote_share_min` (their memory would follow them) and
    ///   whose memory this policy is not already moving there.
    ///   Threads whose memory is already there load that controller and hold that memory wherever
    ///   they run; moving them away only adds interconnect traffic (and, memory following, fills
    ///   another node). Memory bandwidth never refuses a unit the node it already runs on: the
    ///   traffic of its threads there is part of what saturates the controller, and its memory is
    ///   on its way there (memory follows CPU; the access shares are smoothed and lag the move).
    ///   Without this, numa02_SMT on 36 nodes (one slice per thread, each node's controller busy
    ///   with its own threads' slices) had 118 of 144 threads evicted at once, 1.1 s in.
    /// - IO: every unit (not modelled by the capacity table).
    fn refuses(&self, i: usize, u: &Unit) -> bool {
        let Some(l) = self.model.nodes.get(i) else { return false };
        // Memory this policy is moving to the node brings nothing new there: the move was decided
        // with the room counted, and the smoothed shares trail it by seconds (rule
        // "moving-here-not-refused"; without it a unit whose memory was half copied to a node
        // that then filled was refused it and sent back, the copied memory stranded).
        let moving_here = self.memory_follows.iter().any(|(pid, to)| u.pids.contains(pid) && to.contains(self.id(i)));
        let brings_traffic = 1.0 - u.share[i] >= self.model.tunables.remote_share_min && !moving_here;
        l.io.bottleneck
            || (l.cpu.bottleneck && u.current != Some(i) && !self.cpu_bottleneck_leaves(i, u))
            || (l.mem_bw.bottleneck && brings_traffic && u.current != Some(i))
            || (l.mem_capacity.bottleneck && brings_traffic)
    }

    /// Whether node `i`'s CPU bottleneck leaves with this plan (rule "bottleneck-leaves"): the
    /// tasks that ran there and whose units are already placed elsewhere, with unit `u`'s own
    /// tasks there (placing `u` on the node adds nothing for them), take away enough demand to
    /// bring the node under its capacity. The flag is measured from the last period, so it still
    /// shows the load of a unit the plan just moved off; refusing the node for that load sends the
    /// next unit into the place the first one went (the rig's 2-node numa01: process A moved from
    /// node 1 to its memory's node 0, process B, on node 0, refused node 1 for A's load and
    /// stayed: both on one node, the other idle, for the rest of the run). Counted by task, not by
    /// unit: at "go" each numa01 process's two workers may start one on each node, so both
    /// units' `current` is node 0 while node 1 carries one worker of each (the race's repetition
    /// 2 at 427dc26: B refused node 1 and stayed on node 0 for 1.2 s).
    fn cpu_bottleneck_leaves(&self, i: usize, u: &Unit) -> bool {
        let own: f64 = u
            .tasks
            .iter()
            .filter(|k| self.task_idx(k) == Some(i))
            .filter_map(|k| self.model.tasks.get(k))
            .map(demand)
            .sum();
        let gone = self.leaving.get(i).copied().unwrap_or(0.0) + own;
        let left = self.model.nodes.get(i).map_or(0.0, |l| l.cpu_demand) - gone;
        gone > 0.0 && left < self.cap[i]
    }

    /// Why node `i` is a bottleneck, for reasons.
    fn bottleneck_why(&self, i: usize) -> String {
        let Some(l) = self.model.nodes.get(i) else { return String::new() };
        let mut parts = Vec::new();
        if l.cpu.bottleneck {
            parts.push(format!("cpu load {:.2}, run delay {:.2}", l.cpu.load, l.cpu.interference));
        }
        if l.mem_bw.bottleneck {
            parts.push(format!("memory bandwidth load {:.2}", l.mem_bw.load));
        }
        if l.mem_capacity.bottleneck {
            parts.push(format!("memory {:.0}% used", l.mem_capacity.load * 100.0));
        }
        if l.io.bottleneck {
            parts.push(format!("io pressure {:.2}", l.io.load));
        }
        format!("node {} bottleneck ({})", self.id(i), parts.join(", "))
    }

    /// Memory a node may hold in all for placed units, bytes.
    fn mem_total(&self, i: usize) -> f64 {
        self.model.node_mem_total_bytes(i) as f64 * self.model.tunables.group_max_mem_frac
    }

    /// The unit of `tasks`: its demand, memory, access shares, current node and reach.
    /// `procs` keeps, per process, how many of its threads the model has and their CPU summed in
    /// thread order, found on the first unit that needs it (a process of 10,000 threads in 79
    /// groups was walked whole for each group).
    fn unit_of_tasks(
        &self,
        kind: UnitKind,
        tasks: Vec<TaskKey>,
        label: String,
        procs: &mut HashMap<u32, (usize, f64), FxBuild>,
    ) -> Option<Unit> {
        let m = self.model;
        let n = m.topo.nodes.len();
        if tasks.is_empty() {
            return None;
        }
        let mut pids: Vec<u32> = tasks.iter().map(|k| k.pid).collect();
        pids.dedup();
        let cpu: f64 = tasks.iter().filter_map(|k| m.tasks.get(k).map(|tv| self.demand_with(k, tv))).sum();
        // Memory: each process's memory shared out by the unit's part of its threads (by CPU, or
        // by count when idle), or the group's own figures when the group is whole.
        let mut mem_by_node = vec![0u64; n];
        let whole_group = match kind {
            UnitKind::Group(g) => m.groups.groups.get(&g).filter(|gr| gr.tasks == tasks),
            UnitKind::Process(_) => None,
        };
        // A process with mostly cold memory counts only its accessed memory (the group's figures
        // are resident memory).
        let any_cold = pids.iter().any(|pid| self.accessed.contains_key(pid));
        if let Some(g) = whole_group.filter(|g| g.mem_by_node.len() == n && !any_cold) {
            mem_by_node.clone_from(&g.mem_by_node);
        } else {
            // Memory two of its processes share counts once (the model's rule
            // shared-counts-once); a cold process counts accessed memory, not its mappings.
            let mut parts: Vec<(u32, f64)> = Vec::new();
            for pid in &pids {
                let Some(p) = m.procs.get(pid) else { continue };
                let mine: Vec<&TaskKey> = tasks.iter().filter(|k| k.pid == *pid).collect();
                let (live, total_cpu) = *procs.entry(*pid).or_insert_with(|| {
                    crate::work::count("units.process_threads", p.tids.len() as u64);
                    let live: Vec<&TaskView> =
                        p.tids.iter().filter_map(|&tid| m.tasks.get(&TaskKey { pid: *pid, tid })).collect();
                    (live.len(), live.iter().map(|t| t.cpu_rate).sum())
                });
                let mine_cpu: f64 = mine.iter().filter_map(|k| m.tasks.get(k)).map(|t| t.cpu_rate).sum();
                let frac = if total_cpu > 0.0 { mine_cpu / total_cpu } else { mine.len() as f64 / live.max(1) as f64 };
                let by_node = self.accessed.get(pid).map_or(&p.mem_by_node, |a| &a.by_node);
                for (i, b) in by_node.iter().enumerate().take(n) {
                    mem_by_node[i] += (*b as f64 * frac.min(1.0)) as u64;
                }
                if !self.accessed.contains_key(pid) && !p.shared_objects.is_empty() {
                    parts.push((*pid, frac.min(1.0)));
                }
            }
            for (b, t) in mem_by_node.iter_mut().zip(m.shared_twice(&parts)) {
                *b = b.saturating_sub(t);
            }
        }
        let mem: u64 = mem_by_node.iter().sum();
        // Access shares: the group's, else the CPU-weighted mean of its tasks' (those known by
        // residency alone spread by their bytes, as the model does for a group:
        // residency-by-bytes), else its memory.
        let mut share = vec![0.0; n];
        let mut src = share_source(tasks.iter().filter_map(|k| m.tasks.get(k)));
        if let Some(g) = whole_group.filter(|g| g.access.len() == n && g.access.iter().sum::<f64>() > 0.0) {
            share = normalised(&g.access);
        } else {
            let (mut res_w, mut res_mem) = (0.0, vec![0.0; n]);
            for k in &tasks {
                let Some(t) = m.tasks.get(k) else { continue };
                let w = t.cpu_rate.max(1e-3);
                let res = t.access_source == AccessSource::Residency;
                let p = m.procs.get(&k.pid).filter(|p| res && !p.tids.is_empty());
                if let Some(p) = p {
                    // Its equal part of its process's memory (residency attributes memory equally).
                    res_w += w;
                    for (i, &b) in p.mem_by_node.iter().enumerate().take(n) {
                        res_mem[i] += b as f64 / p.tids.len() as f64;
                    }
                    continue;
                }
                for (i, a) in t.access.iter().enumerate().take(n) {
                    share[i] += a * w;
                }
            }
            let res_total: f64 = res_mem.iter().sum();
            if res_total > 0.0 {
                for (s, b) in share.iter_mut().zip(&res_mem) {
                    *s += res_w * b / res_total;
                }
            }
            share = normalised(&share);
        }
        if share.iter().sum::<f64>() == 0.0 {
            share = normalised(&mem_by_node.iter().map(|&b| b as f64).collect::<Vec<_>>());
            src = "resident memory";
        }
        let mut on = vec![0.0; n];
        for k in &tasks {
            if let (Some(i), Some(t)) = (self.task_idx(k), m.tasks.get(k)) {
                on[i] += t.cpu_rate + 1e-6;
            }
        }
        let current = (0..n).filter(|&i| on[i] > 0.0).max_by(|&a, &b| on[a].total_cmp(&on[b]).then(b.cmp(&a)));
        let label = if any_cold {
            let rss: u64 = pids.iter().filter_map(|pid| m.procs.get(pid)).map(|p| p.rss_bytes).sum();
            format!(
                "{label} [{}: sized by its {:.0} MiB of accessed memory, of {:.0} MiB resident; cold memory stays]",
                super::cold::COLD_RULE,
                mem as f64 / MIB,
                rss as f64 / MIB
            )
        } else {
            label
        };
        let share_now = share_now(m, &tasks);
        let reach = self.reach_of(&pids);
        Some(Unit { kind, pids, tasks, cpu, mem, mem_by_node, share, share_src: src, share_now, current, label, reach })
    }

    /// Builds the units (see the module essay). Only a unit that is kept is built: a group or
    /// ungrouped process whose CPU demand is under `min_group_cpu` (most of a machine's processes,
    /// most of the time) is dropped after summing its demand, before its memory, shares and label
    /// are worked out (its tasks still count as taken, as before).
    fn build_units(&mut self) {
        let m = self.model;
        let t = &m.tunables;
        let mut new: BTreeSet<u32> = self.new_procs.iter().copied().collect();
        // Looked up per task, never iterated: a hash set (10,000 tasks are common).
        let mut taken: HashSet<TaskKey, FxBuild> = HashSet::default();
        // A held shared spread is no unit: its threads keep their nodes (as a new process's do).
        let held: Vec<u32> = self.held_shared.iter().copied().collect();
        let live_tasks = |pid: u32| -> Vec<TaskKey> {
            m.procs[&pid].tids.iter().map(|&tid| TaskKey { pid, tid }).filter(|k| m.tasks.contains_key(k)).collect()
        };
        // Per task, its demand; per pid, managed or not: looked up for every task of every group
        // below (hash maps, built in one pass: faster than as many searches of the ordered maps).
        let demand_of: HashMap<TaskKey, f64, FxBuild> =
            m.tasks.iter().map(|(k, tv)| (*k, self.demand_with(k, tv))).collect();
        let managed: HashSet<u32, FxBuild> = self.managed.iter().copied().collect();
        // The CPU demand `unit_of_tasks` gives the unit (the same sum in the same order).
        let cpu_of = |tasks: &[TaskKey]| -> f64 { tasks.iter().filter_map(|k| demand_of.get(k)).sum() };
        let mut procs: HashMap<u32, (usize, f64), FxBuild> = HashMap::default();
        for pid in held {
            taken.extend(live_tasks(pid));
        }
        new.extend(self.held_shared.iter().copied());
        // Waiting for the rates of new threads: no unit either, for one period.
        for &pid in &self.waiting {
            taken.extend(live_tasks(pid));
        }
        new.extend(self.waiting.iter().copied());
        // Classified processes: one unit each.
        for &pid in &self.managed {
            let p = &m.procs[&pid];
            let class =
                super::cold::effective_class(p.class, self.accessed.contains_key(&pid), self.sliced.contains(&pid));
            if new.contains(&pid) || class == ProcessClass::Unclassified {
                continue;
            }
            let tasks = live_tasks(pid);
            let label = format!("process {pid} ({}, {:?})", p.comm, class);
            if let Some(u) = self.unit_of_tasks(UnitKind::Process(class), tasks.clone(), label, &mut procs) {
                taken.extend(tasks);
                self.units.push(u);
            }
        }
        // Groups, minus tasks of unmanaged, new or classified processes.
        for (gid, g) in &m.groups.groups {
            let tasks: Vec<TaskKey> = g
                .tasks
                .iter()
                .copied()
                .filter(|k| managed.contains(&k.pid) && !new.contains(&k.pid) && !taken.contains(k))
                .filter(|k| demand_of.contains_key(k))
                .collect();
            if tasks.is_empty() {
                continue;
            }
            let keep = cpu_of(&tasks) >= t.min_group_cpu;
            taken.extend(tasks.iter().copied());
            if keep {
                let label = group_label(m, *gid, &tasks);
                if let Some(u) = self.unit_of_tasks(UnitKind::Group(*gid), tasks, label, &mut procs) {
                    self.units.push(u);
                }
            }
        }
        // Tasks the model put in no group: one unit per process.
        for &pid in &self.managed {
            if new.contains(&pid) {
                continue;
            }
            let tasks: Vec<TaskKey> = m.procs[&pid]
                .tids
                .iter()
                .map(|&tid| TaskKey { pid, tid })
                .filter(|k| !taken.contains(k) && demand_of.contains_key(k))
                .collect();
            if tasks.is_empty() || cpu_of(&tasks) < t.min_group_cpu {
                continue;
            }
            let label = format!("process {pid} ({}, ungrouped)", m.procs[&pid].comm);
            if let Some(u) = self.unit_of_tasks(UnitKind::Process(ProcessClass::Unclassified), tasks, label, &mut procs)
            {
                self.units.push(u);
            }
        }
        // Heaviest first: CPU share of the largest node plus memory share of the largest node.
        let max_cap = self.cap.iter().copied().fold(0.0, f64::max).max(1e-9);
        let max_mem = (0..m.topo.nodes.len()).map(|i| self.mem_total(i)).fold(0.0, f64::max).max(1.0);
        let weight = |u: &Unit| u.cpu / max_cap + u.mem as f64 / max_mem;
        self.units.sort_by(|a, b| weight(b).total_cmp(&weight(a)).then_with(|| a.tasks.cmp(&b.tasks)));
        self.placed = vec![None; self.units.len()];
    }

    fn build_capacity(&mut self) {
        let m = self.model;
        let n = m.topo.nodes.len();
        let in_unit: HashSet<TaskKey, FxBuild> = self.units.iter().flat_map(|u| u.tasks.iter().copied()).collect();
        let new: BTreeSet<u32> = self.new_procs.iter().copied().collect();
        let mut all = vec![0.0; n];
        for (k, tv) in &m.tasks {
            // `task_idx(k)`, from the view at hand rather than a second lookup of it.
            let Some(i) = tv.node.and_then(|id| m.node_idx(id)) else { continue };
            all[i] += tv.cpu_rate;
            // A new process's threads have no rate yet but are in the node's measured demand.
            if new.contains(&k.pid) {
                all[i] += m.tunables.new_thread_cpu.max(tv.cpu_rate) - tv.cpu_rate;
            }
            if !in_unit.contains(k) && !new.contains(&k.pid) {
                let reserved = reserved_demand(m, tv);
                self.fixed[i] += reserved;
                // As for a new process: a reserve above the measured demand stands for time the
                // node's measured demand may already hold (the thread ran before its first read),
                // which is then not counted a second time as unexplained demand below.
                all[i] += reserved - demand(tv);
            }
        }
        #[allow(clippy::needless_range_loop)] // i indexes six per-node vectors
        for i in 0..n {
            // Demand the model saw that no task explains (kernel threads, short-lived tasks).
            self.fixed[i] += (m.nodes[i].cpu_demand - all[i]).max(0.0);
            self.used[i] = self.fixed[i];
            let l = &m.nodes[i];
            let free = if l.mem_total_bytes > 0 { l.mem_free_bytes } else { m.topo.nodes[i].mem_free_kb * 1024 } as f64;
            let total =
                if l.mem_total_bytes > 0 { l.mem_total_bytes } else { m.topo.nodes[i].mem_total_kb * 1024 } as f64;
            let managed_here: u64 = self.units.iter().map(|u| u.mem_by_node[i]).sum();
            self.mem_avail[i] = free + managed_here as f64 - total * (1.0 - m.tunables.group_max_mem_frac);
        }
    }

    /// Whether demand `cpu` over `tasks` tasks and `mem` bytes fit dense node `i` now.
    fn has_room(&self, i: usize, cpu: f64, tasks: usize, mem: u64) -> bool {
        let slack = RATE_SLACK_CPU_PER_TASK * tasks as f64;
        self.used[i] + cpu <= self.cap[i] + slack && self.mem_avail[i] >= mem as f64
    }

    /// locality-pays-for-overload: the CPU by which unit `u` would overload dense node `i` (planned
    /// CPU beyond capacity and slack), when that is more than nothing but at most what its accesses
    /// there are worth: CPU x access share on `i` x `remote_access_cost` (the time its threads would
    /// lose to remote memory elsewhere). Its memory must fit. `None` when `u` has room there or
    /// locality does not pay for the overload (asked only where `has_room` said no).
    ///
    /// The units not placed yet that run on `i` now count as there: placed after this one (they are
    /// lighter), they stay where they are when nothing has room for them, and an overload allowed
    /// without them would be stacked on top of theirs (in the rig's 4-node numa01, the second
    /// process's group would have joined the first's on its 2-CPU node, 4.4 CPUs).
    ///
    /// When the unit's own worth does not pay, [`Planner::follow_on`] may: a part the model cut off
    /// a process whose other threads this plan keeps on `i` is weighed with them
    /// (split-weighs-follow-on). The second figure is the CPU of those threads (0 when the unit's
    /// own worth paid).
    fn locality_pays(&self, i: usize, u: &Unit) -> Option<(f64, f64)> {
        let slack = RATE_SLACK_CPU_PER_TASK * u.tasks.len() as f64;
        let worth = u.cpu * u.share[i] * self.model.tunables.remote_access_cost;
        let over = self.used[i] + u.cpu - self.cap[i] - slack;
        if over <= 0.0 || self.mem_avail[i] < self.mem_needed(i, u) as f64 {
            return None;
        }
        let pending: f64 = self
            .units
            .iter()
            .zip(&self.placed)
            .filter(|(v, p)| p.is_none() && v.current == Some(i) && v.tasks != u.tasks)
            .map(|(v, _)| v.cpu)
            .sum();
        let over = over + pending;
        if over <= worth {
            return Some((over, 0.0));
        }
        let staying = self.follow_on(i, u)?;
        ((u.cpu + staying) * u.share[i] * self.model.tunables.remote_access_cost >= over).then_some((over, staying))
    }

    /// Rule split-weighs-follow-on: the CPU of the other threads of unit `u`'s processes that this
    /// plan keeps on dense node `i` (placed there before it: its process's heavier part), when `u`
    /// is a part the model cut off such a process at `i`, the node holding its memory, its
    /// processes have no per-thread access evidence, and the whole would fit `i` up to the group
    /// cap's upper mark. `None` otherwise.
    ///
    /// The model cuts a group that grew past its cap's upper mark (`group_split_margin` above a
    /// node) and joins the parts again only within the plain cap, so a process whose reading
    /// crossed the mark for a period (a numa01 main thread's first touch) stays cut while it reads
    /// in between. Refused its memory's node on its own worth, the cut-off part leaves its
    /// process split from its memory, and what follows costs more than its own remote accesses:
    /// the process's memory cannot follow both parts, and once the parts join again the whole
    /// process goes where the heavier part now runs and its memory is copied after it. In the
    /// rig's 4-node race at 8e89421 (numa01, repetition 1) a worker cut off its process on its
    /// memory's node 0, beside its main thread and ~0.3 CPUs of the observers' load, was refused
    /// node 0 (0.6 of 2.0 CPUs left for 1.0: 0.38 CPUs over, its own worth 1.0 x 100% x 0.3 =
    /// 0.3), sent to node 1, and its process and 32 MiB followed it there: both numa01 processes
    /// copied (16,634 pages), 5.8 s to 90% instead of one copy. So the part is weighed as the
    /// process it was cut from: the locality at stake is that of its threads on `i` and its own,
    /// (its CPU + theirs) x its share on `i` x `remote_access_cost`, as the whole would have been
    /// had the model kept it (it fits the mark the model keeps a group whole up to). The balancer
    /// agrees already: its worth-its-locality counts only the managed demand, so the observers'
    /// load moves no worker off its memory there either. Not for a node that does not hold all but
    /// `remote_share_min` of the unit's accesses (its memory is elsewhere: nothing to split from),
    /// nor for a whole process above the mark (the cut is the model's true verdict then), nor for
    /// a process with a thread known by more than its process's resident memory (sampled
    /// accesses, NUMA faults): there the parts are the model's reading of which thread uses what
    /// (threads without a tie are groups of their own), and each part's memory follows it by its
    /// own hot ranges (memory.rs `split_jobs`); only a process known by residency alone, whose
    /// threads the model keeps as one group and parts only for the cap, has one memory for all
    /// its parts. (Asked of every part, the rule kept a JVM's third 1.0-CPU thread with its
    /// siblings on a node already at its SMT-shared capacity, 8 of 7.5 CPUs there against 7 on
    /// the other node: `past_the_cores_every_node_takes_its_share_of_smt_sharing`.)
    fn follow_on(&self, i: usize, u: &Unit) -> Option<f64> {
        let m = self.model;
        let t = &m.tunables;
        if 1.0 - u.share[i] >= t.remote_share_min {
            return None;
        }
        let by_residency = |pid: u32| {
            m.procs.get(&pid).is_some_and(|p| {
                p.tids
                    .iter()
                    .filter_map(|&tid| m.tasks.get(&TaskKey { pid, tid }))
                    .all(|tv| tv.access_source == AccessSource::Residency)
            })
        };
        if !u.pids.iter().all(|&pid| by_residency(pid)) {
            return None;
        }
        let mut staying = 0.0;
        let mut tasks = u.tasks.len();
        for &pid in &u.pids {
            let Some(p) = m.procs.get(&pid) else { continue };
            for &tid in &p.tids {
                let k = TaskKey { pid, tid };
                if u.tasks.binary_search(&k).is_ok() {
                    continue;
                }
                if let Some(tp) = self.task_plan.get(&k).filter(|tp| tp.nodes == [i]) {
                    staying += tp.cpu;
                    tasks += 1;
                }
            }
        }
        let slack = RATE_SLACK_CPU_PER_TASK * tasks as f64;
        let whole = u.cpu + staying;
        (staying > 0.0 && whole <= self.cap[i] * (1.0 + t.group_split_margin) + slack).then_some(staying)
    }

    /// Memory unit `u` needs free on dense node `i` to be placed there, bytes: all of it, except on
    /// a node already holding all but `remote_share_min` of its sampled accesses (rule
    /// "home-needs-no-room", `HOME_RULE`), which needs none: its working set is there, and what
    /// it would bring is at most the remote rest, which memory-follows-CPU weighs on its own. A
    /// unit's memory is its share of its process's resident memory (or, before the process has
    /// been watched an access half-life, RSS / threads), idle memory included, so a VM's vCPU
    /// whose 2 GiB working set was 91% on a CPU-idle node full of other memory was refused that
    /// node for "0 MiB of memory for 11594 MiB" and sent a server away, its working set copied
    /// after it for seconds (the simulator's VM mix, 64 GB nodes, seed 1). Measured with the
    /// rule (release build, seeds 1-3, 20 s, `scripts/evidence.sh`): the 288-core VM mix 1.369 ->
    /// 1.404 x default per VM (stddev/mean 8.86 -> 7.59%), ring-8n64c's process mix 1.183 ->
    /// 1.186, every other evidence row unchanged; the 64 GB-node variant 0.760 -> 0.746.
    ///
    /// The waiver is of room, not of the reserve: `has_room` still asks `mem_avail >= 0`, so a
    /// node whose free memory is under the `group_max_mem_frac` reserve (or has units planned
    /// onto it past that) refuses even a unit it asks nothing of. Tried without that check (a
    /// unit asking 0 bytes fits any node; seeds 1-3, 20 s, per-VM mean against default): the
    /// preset's VM mix 1.404 -> 1.249, 64 GB nodes 0.746 -> 0.735; not kept. (Seed 1 of the
    /// preset at 1.06 s: the huge sheep's vCPUs, 100% local on nodes 0 and 2, full of its idle
    /// RAM, are refused them and leave; with the check gone they stay and hold those nodes' CPUs
    /// from the VMs that arrive later.)
    fn mem_needed(&self, i: usize, u: &Unit) -> u64 {
        let home = u.share.get(i).is_some_and(|&s| 1.0 - s < self.model.tunables.remote_share_min);
        if home {
            0
        } else {
            u.mem
        }
    }

    /// Whether demand fits some node's capacity at all, that capacity grown by `margin` (the group
    /// cap's upper mark for an affinity group that exists: the model keeps such a group whole up
    /// to there, so placement must not spread it over nodes below it).
    fn fits_a_node(&self, cpu: f64, tasks: usize, mem: u64, margin: f64, reach: Option<&Reach>) -> bool {
        let slack = RATE_SLACK_CPU_PER_TASK * tasks as f64;
        let up = 1.0 + margin;
        let nodes = reach.map_or(&self.cpu_nodes, |r| &r.nodes);
        let cap = |i: usize| reach.map_or(self.cap[i], |r| r.cpus[i]);
        nodes.iter().any(|&i| cpu <= cap(i) * up + slack && mem as f64 <= self.mem_total(i) * up)
    }

    /// Whether moving unit `u` to dense node `to` leaves process `pid` whole there (rule
    /// move-counts-the-copy-it-triggers): each of its live threads is a task of the unit or runs
    /// on `to` already, so the memory pass then sees one node set for it.
    fn left_whole(&self, u: &Unit, pid: u32, to: usize) -> bool {
        let m = self.model;
        m.procs.get(&pid).is_some_and(|p| {
            p.tids
                .iter()
                .map(|&tid| TaskKey { pid, tid })
                .filter(|k| m.tasks.contains_key(k))
                .all(|k| u.tasks.binary_search(&k).is_ok() || self.task_idx(&k) == Some(to))
        })
    }

    /// The candidate nodes of a unit, best first (rule 2, CPU follows memory, stay).
    pub(crate) fn candidates(&self, u: &Unit) -> Candidates {
        let m = self.model;
        let t = &m.tunables;
        let d = &m.topo.distances;
        let best = self
            .nodes_for(u)
            .iter()
            .copied()
            .max_by(|&a, &b| u.share[a].total_cmp(&u.share[b]).then(b.cmp(&a)))
            .unwrap_or(0);
        let mut order = self.nodes_for(u).to_vec();
        order.sort_by(|&a, &b| u.share[b].total_cmp(&u.share[a]).then(d[best][a].cmp(&d[best][b])).then(a.cmp(&b)));
        let mem_node = self
            .nodes_for(u)
            .iter()
            .copied()
            .max_by(|&a, &b| u.mem_by_node[a].cmp(&u.mem_by_node[b]).then(b.cmp(&a)))
            .unwrap_or(0);
        let mem_frac = if u.mem > 0 { u.mem_by_node[mem_node] as f64 / u.mem as f64 } else { 0.0 };
        let big = u.mem as f64 >= t.cpu_follows_memory_min_mib as f64 * MIB;
        let front = |order: &mut Vec<usize>, i: usize| {
            order.retain(|&x| x != i);
            order.insert(0, i);
        };
        if big && mem_frac >= t.cpu_follows_memory_share {
            front(&mut order, mem_node);
            return Candidates {
                order,
                rule: "cpu-follows-memory",
                why: format!(
                    "{} of its {:.0} MiB on node {} (>= {} of >= {} MiB: moving the threads is cheaper)",
                    pct(mem_frac),
                    u.mem as f64 / MIB,
                    self.id(mem_node),
                    pct(t.cpu_follows_memory_share),
                    t.cpu_follows_memory_min_mib
                ),
            };
        }
        if let Some(c) = u.current.filter(|c| self.cpus[*c] > 0.0 && self.nodes_for(u).contains(c)) {
            let smoothed_good = u.share[c] >= u.share[best] - t.stay_margin;
            // Settled where the most of its sampled ranges are now: after a page move the
            // smoothed share still points at the node the pages left (rule
            // "stay-with-moved-memory"). The most, not within stay_margin of it: a unit whose
            // ranges lie about evenly on two nodes because that is where its processes first
            // touched them is not settled on either (the simulator's redis-set, a server's 300
            // MiB on node 1 and its clients' buffers on node 0, 49% of the group's ranges on
            // node 0: the server joined its clients and left its keyspace remote).
            let now_good = !smoothed_good
                && u.share_now.as_ref().is_some_and(|s| {
                    let top = s.iter().copied().fold(0.0, f64::max);
                    s.get(c).is_some_and(|&x| x >= top)
                });
            let as_good = smoothed_good || now_good;
            // Cost-based CPU follows memory: the threads move when the node holding most of the
            // unit's accesses can take it (room, no bottleneck of any kind: a saturated memory
            // controller is relieved by spreading the memory instead) and moving them costs less
            // than copying the memory that is remote from where they run; memory follows CPU only
            // when that node cannot take the unit, or memory already moves towards it (settled).
            // Memory this policy is moving to the node it runs on (within the move's hold) settles
            // the unit there, large or small: its smoothed access shares trail the move by
            // seconds, and following them back would undo it half-way (article-4n96 process mix:
            // solver threads whose slices were on their way to node 1 were sent back to node 0 by
            // "preferred-node" once the threads' own holds ended, and local siblings pushed out
            // to make room: 1.156 -> 1.212 x default with the ranges' nodes recorded per plan).
            let moving_here =
                self.memory_follows.iter().any(|(pid, to)| u.pids.contains(pid) && to.contains(self.id(c)));
            // Why the threads do not go to the memory, for the stay's reason.
            let mut not_there = String::from("memory already moves here");
            if !as_good && best != c && !moving_here {
                let remote_pages = u.mem.saturating_sub(u.mem_by_node[c]) / BASE_PAGE_BYTES;
                let mem_cost = remote_pages as f64 * t.migrate_cost_ns_per_page as f64;
                // The move costs the threads' cache refill and the copy it then triggers: the
                // memory pass brings each process's own memory off `best` after its threads
                // (rule move-counts-the-copy-it-triggers). Counted without it, the rig's pairs
                // scenario moved 3 threads "cheaper than copying 4,045 pages" and then copied
                // 16,419 pages of the other members' memory after them. Only a process the move
                // leaves whole on `best` is charged (`left_whole`): one it splits has each part's
                // memory followed by that part's own sampled ranges (memory.rs `split_jobs`), and
                // the moved part's ranges on `best` are local there already. Charged for a whole
                // process's memory scaled by its share of the threads (61a5493), a thread whose
                // own slice was first-touched on `best` was kept off it for half its process's
                // memory, and its slice copied over instead: 32,768 pages in
                // crates/sim/tests/cadence.rs, a workload local from first touch (reverted in
                // 08cd86e).
                let follow_pages: u64 = u
                    .pids
                    .iter()
                    .filter(|&&pid| self.left_whole(u, pid, best))
                    .map(|&pid| super::memory::follow_pages(self, pid, best))
                    .sum();
                let follow_cost = follow_pages as f64 * t.migrate_cost_ns_per_page as f64;
                let cpu_cost = u.tasks.len() as f64 * t.cpu_move_cost_ns_per_task as f64 + follow_cost;
                let moving = if follow_pages > 0 {
                    format!(
                        "moving {} (~{:.1} ms of cache refill) and then copying {} after them (~{:.1} ms)",
                        plural(u.tasks.len(), "thread"),
                        (cpu_cost - follow_cost) / 1e6,
                        plural(follow_pages, "page"),
                        follow_cost / 1e6
                    )
                } else {
                    format!("moving {} (~{:.1} ms of cache refill)", plural(u.tasks.len(), "thread"), cpu_cost / 1e6)
                };
                let bottleneck = self.model.nodes.get(best).is_some_and(|l| l.any_bottleneck());
                // Room on the node holding its accesses: CPU, and memory only for what is not its
                // working set there already (home-needs-no-room, as for placement).
                let room =
                    self.has_room(best, u.cpu, u.tasks.len(), self.mem_needed(best, u)) && self.within_reach(best, u);
                not_there = if bottleneck {
                    self.bottleneck_why(best)
                } else if !room {
                    format!(
                        "node {} has {:.2} of {:.2} CPUs and {:.0} MiB left for {:.2} CPUs and {:.0} MiB",
                        self.id(best),
                        (self.cap[best] - self.used[best]).max(0.0),
                        self.cap[best],
                        self.mem_avail[best].max(0.0) / MIB,
                        u.cpu,
                        u.mem as f64 / MIB
                    )
                } else {
                    format!(
                        "{moving} costs more than copying {} (~{:.1} ms)",
                        plural(remote_pages, "page"),
                        mem_cost / 1e6
                    )
                };
                if cpu_cost < mem_cost && !bottleneck && room {
                    front(&mut order, best);
                    return Candidates {
                        order,
                        rule: "cpu-follows-memory",
                        why: format!(
                            "runs on node {} but node {} has {} of its {} and room for it: {moving} is cheaper than copying {} remote pages (~{:.1} ms)",
                            self.id(c),
                            self.id(best),
                            pct(u.share[best]),
                            u.share_src,
                            remote_pages,
                            mem_cost / 1e6
                        ),
                    };
                }
            }
            if as_good || !big || moving_here {
                front(&mut order, c);
                let why = if now_good {
                    let s = u.share_now.as_deref().unwrap_or(&[]);
                    format!(
                        "runs on node {} where {} of its sampled hot ranges are now; the smoothed estimate ({} of its {} on node {}) predates their move (stay-with-moved-memory)",
                        self.id(c),
                        pct(s.get(c).copied().unwrap_or(0.0)),
                        pct(u.share[best]),
                        u.share_src,
                        self.id(best)
                    )
                } else if as_good {
                    format!(
                        "runs on node {} with {} of its {} there (best node {} has {}, margin {})",
                        self.id(c),
                        pct(u.share[c]),
                        u.share_src,
                        self.id(best),
                        pct(u.share[best]),
                        pct(t.stay_margin)
                    )
                } else {
                    format!(
                        "runs on node {}; its memory ({:.0} MiB) follows it (best node {} has {} of its {}, but {not_there})",
                        self.id(c),
                        u.mem as f64 / MIB,
                        self.id(best),
                        pct(u.share[best]),
                        u.share_src
                    )
                };
                return Candidates { order, rule: "stay-current-node", why };
            }
        }
        let why = format!("{} of its {} on node {}", pct(u.share[best]), u.share_src, self.id(best));
        Candidates { order, rule: "preferred-node", why }
    }

    /// Dense nodes around `seed` (nearest first) until `cpu` and `mem` fit.
    fn closest_set(&self, seed: usize, cpu: f64, mem: u64, reach: Option<&Reach>) -> Vec<usize> {
        let d = &self.model.topo.distances;
        let nodes = reach.map_or(&self.cpu_nodes, |r| &r.nodes);
        let mut rest: Vec<usize> = nodes.iter().copied().filter(|&i| i != seed).collect();
        rest.sort_by(|&a, &b| {
            d[seed][a]
                .cmp(&d[seed][b])
                .then((self.cap[b] - self.used[b]).total_cmp(&(self.cap[a] - self.used[a])))
                .then(a.cmp(&b))
        });
        let mut set = vec![seed];
        let room = |i: usize| (self.cap[i] - self.used[i]).max(0.0).min(reach.map_or(f64::INFINITY, |r| r.cpus[i]));
        let (mut c, mut mm) = (room(seed), self.mem_avail[seed].max(0.0));
        for i in rest {
            if c + 1e-9 >= cpu && mm >= mem as f64 {
                break;
            }
            set.push(i);
            c += room(i);
            mm += self.mem_avail[i].max(0.0);
        }
        set.sort_unstable();
        set
    }

    /// Charges `cpu` and `mem` to the nodes of `set` and returns what each node (dense index) was
    /// charged, CPUs and bytes. On a set of several nodes, what already runs on a node of the set
    /// (`cpu_now`, per dense node; empty when unknown, as for a new process) stays charged there
    /// and the rest goes to the set's nodes in proportion to their room (then evenly once every
    /// node is full), as the kernel's balancing spreads threads allowed on all of them; memory
    /// already on a node of the set (`mem_now`) stays charged there and the rest is spread evenly
    /// (rule "charge-where-it-runs"). Until 2026-11-29 a set's CPU filled its lowest-numbered
    /// nodes first wherever its threads ran: ring-8n64c's process mix, a bandwidth-bound solver
    /// kept on nodes 0, 2 and 3 (3, 6 and 7 threads) was booked 8 CPUs on node 0, and the database
    /// beside its 3 threads was refused its own memory's node and had 8 GiB copied away.
    fn charge(&mut self, set: &[usize], cpu: f64, mem: u64, cpu_now: &[f64], mem_now: &[u64]) -> (Vec<f64>, Vec<f64>) {
        let n = self.used.len();
        let (mut cpu_at, mut mem_at) = (vec![0.0; n], vec![0.0; n]);
        if let [only] = set {
            cpu_at[*only] = cpu;
            mem_at[*only] = mem as f64;
        } else if !set.is_empty() {
            let at = |v: &[f64], i: usize| v.get(i).copied().unwrap_or(0.0).max(0.0);
            let staying: f64 = set.iter().map(|&i| at(cpu_now, i)).sum();
            let scale = if staying > cpu && staying > 0.0 { cpu / staying } else { 1.0 };
            for &i in set {
                cpu_at[i] = at(cpu_now, i) * scale;
            }
            let rest = (cpu - staying * scale).max(0.0);
            let room: Vec<f64> = set.iter().map(|&i| (self.cap[i] - self.used[i] - cpu_at[i]).max(0.0)).collect();
            let total_room: f64 = room.iter().sum();
            let over = (rest - total_room).max(0.0) / set.len() as f64;
            for (k, &i) in set.iter().enumerate() {
                let share = if total_room > 0.0 { rest.min(total_room) * room[k] / total_room } else { 0.0 };
                cpu_at[i] += share + over;
            }
            let mem_staying: u64 = set.iter().map(|&i| mem_now.get(i).copied().unwrap_or(0)).sum::<u64>().min(mem);
            let mem_rest = (mem - mem_staying) as f64 / set.len() as f64;
            let mem_scale = if mem_staying > 0 {
                mem_staying as f64 / set.iter().map(|&i| mem_now.get(i).copied().unwrap_or(0)).sum::<u64>() as f64
            } else {
                0.0
            };
            for &i in set {
                mem_at[i] = mem_now.get(i).copied().unwrap_or(0) as f64 * mem_scale + mem_rest;
            }
        }
        for &i in set {
            self.used[i] += cpu_at[i];
            self.mem_avail[i] -= mem_at[i];
        }
        (cpu_at, mem_at)
    }

    /// Rule 1: new processes, spread over nodes, least loaded first.
    pub(crate) fn fork(&mut self, policy: &Adaptive) {
        let _ = policy;
        let m = self.model;
        let t = &m.tunables;
        let d = &m.topo.distances;
        // No new process: nothing below acts or charges (the usual steady-state cycle).
        if self.new_procs.is_empty() {
            return;
        }
        let new = self.new_procs.clone();
        let new_set: BTreeSet<u32> = new.iter().copied().collect();
        // Names borrowed from the model (no string per task); ordered as the names themselves.
        let mut peers: BTreeMap<&'m str, BTreeSet<usize>> = BTreeMap::new();
        for (k, tv) in m.tasks.iter().filter(|(k, _)| !new_set.contains(&k.pid)) {
            if let (Some(p), Some(i)) = (m.procs.get(&k.pid), tv.node.and_then(|id| m.node_idx(id))) {
                peers.entry(p.comm.as_str()).or_default().insert(i);
            }
        }
        // What each node carries now: fixed demand, the units where they run, the new processes
        // placed so far; and its free memory (the units' memory where it is).
        let mut seen = self.used.clone();
        let mut free = self.mem_avail.clone();
        for u in &self.units {
            if let Some(c) = u.current {
                seen[c] += u.cpu;
            }
            for (i, b) in u.mem_by_node.iter().enumerate() {
                free[i] -= *b as f64;
            }
        }
        // Young processes placed before (this rule at an earlier decision, or where they run)
        // whose threads are idle now count at the estimate they were placed with (rule
        // "fork-counts-placed"): a process that filled its memory and waits for its work to
        // start reads 0 CPUs, and a second one placed a step later went to the same node.
        for (i, extra) in self.young_idle_reserve(&new_set) {
            seen[i] += extra;
        }
        // A process too large for one node gets its share of the machine, not just enough nodes:
        // spread x (capacity / whole demand) when the machine has room to spare (numa02_SMT, 144
        // threads on 288 CPUs: every node's memory controller, as a hard binding would give it;
        // numa01's two halves of a full machine: half each).
        let est_of = |pid: u32| {
            let p = &m.procs[&pid];
            p.cpu_rate.max(p.tids.len() as f64 * t.new_thread_cpu)
        };
        let whole: f64 = self.fixed.iter().sum::<f64>()
            + self.units.iter().map(|u| u.cpu).sum::<f64>()
            + new.iter().map(|&pid| est_of(pid)).sum::<f64>();
        let total_cap: f64 = self.cpu_nodes.iter().map(|&i| self.cap[i]).sum();
        let spare = if whole > 0.0 { (total_cap / whole).max(1.0) } else { 1.0 };
        for pid in new {
            let p = &m.procs[&pid];
            let tasks: Vec<TaskKey> =
                p.tids.iter().map(|&tid| TaskKey { pid, tid }).filter(|k| m.tasks.contains_key(k)).collect();
            if tasks.is_empty() || self.cpu_nodes.is_empty() {
                continue;
            }
            let est = p.cpu_rate.max(tasks.len() as f64 * t.new_thread_cpu);
            let mem = p.rss_bytes;
            let my_peers = peers.get(p.comm.as_str()).cloned().unwrap_or_default();
            let peer_dist = |i: usize| my_peers.iter().map(|&j| d[j][i]).min().unwrap_or(0);
            // Rule "fork-stays-with-memory": a process that fits a node goes, among nodes as
            // loaded that have room for its memory, to the one already holding most of it (one
            // that first-touched its memory before it was seen, as the rig's numa01 does, is not
            // sent to the node with the most free memory and copied there). Not for one too
            // large for a node (its nodes are a set grown around the first, its memory spans
            // several anyway), nor onto a node without room for its memory (there, the most
            // free memory decides as before): the simulator's VM mix on numaconnect-288c, VMs
            // of 32-288 GiB on 36 nodes of 8 CPUs with no node's memory free, ran at 1.269 x
            // default with the rule for every process, 1.325 with it for those that fit a node,
            // 1.369 without it.
            // A node's room for it counts its own memory there as free for it (it is in no unit,
            // so the node's free figure has it taken already).
            // Rule "confined-within-cpuset": only the nodes its cpuset reaches.
            let reach = self.reach_of(&[pid]);
            let nodes = reach.as_ref().map_or(&self.cpu_nodes, |r| &r.nodes).clone();
            if nodes.is_empty() {
                continue;
            }
            let fits = self.fits_a_node(est, tasks.len(), mem, 0.0, reach.as_ref());
            let mine = |i: usize| p.mem_by_node.get(i).copied().unwrap_or(0);
            let room = |i: usize| free[i] + mine(i) as f64 >= mem as f64;
            let own = |i: usize| if fits && room(i) { mine(i) } else { 0 };
            let mut order = nodes.clone();
            order.sort_by(|&a, &b| {
                (seen[a] / self.cap[a].max(1e-9))
                    .total_cmp(&(seen[b] / self.cap[b].max(1e-9)))
                    .then(room(b).cmp(&room(a)))
                    .then(own(b).cmp(&own(a)))
                    .then(peer_dist(a).cmp(&peer_dist(b)))
                    .then(free[b].total_cmp(&free[a]))
                    .then(a.cmp(&b))
            });
            // No bottleneck refusal here: CPU load is the sort key and free memory the next one;
            // the flags on a first sample mostly reflect the new processes themselves (numa01's
            // threads all start on the node their memory was touched on and saturate it).
            let ratio = |i: usize| seen[i] / self.cap[i].max(1e-9);
            // The same rule within the balancer's tolerance: the node holding most of its memory
            // takes it when it has room for its memory and, with it placed there at the
            // estimate, is loaded within `imbalance` of the least loaded node as that is now
            // (the kernel's NUMA balancing likewise lets a task stay with its memory on a node
            // under a quarter busy: allow_numa_imbalance). Otherwise a process that
            // first-touched its memory on a node carrying one CPU of twelve went to an empty node
            // and (rule fork-memory-follows) had its memory copied there for that one CPU.
            let with_it = |i: usize| (seen[i] + est) / self.cap[i].max(1e-9);
            let home = if fits {
                nodes
                    .iter()
                    .copied()
                    .filter(|&i| room(i) && with_it(i) - ratio(order[0]) <= t.imbalance)
                    .max_by(|&a, &b| mine(a).cmp(&mine(b)).then(b.cmp(&a)))
                    .filter(|&i| mine(i) > mine(order[0]))
            } else {
                None
            };
            let first = home.unwrap_or(order[0]);
            let set = if fits { vec![first] } else { self.closest_set(first, est * spare, mem, reach.as_ref()) };
            let why = format!(
                "new process {} ({}, {} ms old when first seen, {} ~ {:.1} CPUs, {:.0} MiB): node {} {} (planned {:.1} of {:.1} CPUs, {:.0} MiB free){}{}; CPU demand by node: {}",
                pid,
                p.comm,
                p.age_at_first_seen_ns / 1_000_000,
                plural(tasks.len(), "thread"),
                est,
                mem as f64 / MIB,
                self.id(first),
                if first == order[0] { "least loaded" } else { "holds its memory" },
                seen[first],
                self.cap[first],
                free[first].max(0.0) / MIB,
                if first != order[0] {
                    format!(
                        ", {:.0} MiB of its memory there (fork-stays-with-memory: load there with it {:.2}, within imbalance {:.2} of node {}'s {:.2})",
                        own(first) as f64 / MIB,
                        with_it(first),
                        t.imbalance,
                        self.id(order[0]),
                        ratio(order[0])
                    )
                } else if own(first) >= 1 << 20 {
                    format!(", {:.0} MiB of its memory there (fork-stays-with-memory)", own(first) as f64 / MIB)
                } else {
                    String::new()
                },
                if set.len() > 1 { format!("; too large for one node: nodes {}", self.node_set(&set)) } else { String::new() },
                self.cpu_nodes.iter().map(|&i| format!("{}={:.1}", self.id(i), seen[i])).collect::<Vec<_>>().join(" ")
            );
            // Its memory already on a node of the set is in that node's free figure (it is in no
            // unit): only what moves into the set is charged, and the fork rule's own ledgers take
            // exactly what the planner's do.
            let moving = mem.saturating_sub(set.iter().map(|&i| mine(i)).sum::<u64>());
            let (cpu_at, mem_at) = self.charge(&set, est, moving, &[], &[]);
            self.forked.insert(pid, (set.clone(), est));
            for &i in &set {
                seen[i] += cpu_at[i];
                free[i] -= mem_at[i];
            }
            for &i in &set {
                peers.entry(p.comm.as_str()).or_default().insert(i);
            }
            let cpus = self.cpus_for(pid, &set);
            let all_in = tasks.iter().all(|k| m.tasks[k].cpus_allowed.is_subset(&cpus));
            if !all_in && !cpus.is_empty() {
                self.actions.push((
                    Action {
                        target: TaskRef { pid, tid: None, starttime: p.starttime },
                        kind: ActionKind::SetAffinity { cpus },
                        reason: Reason::new("fork-spread", why),
                    },
                    est,
                ));
            }
        }
    }

    /// Rule "fork-counts-placed": per node (dense index), the CPUs idle young processes are
    /// expected to use there: processes younger than `new_process_age_ms`, worth settling, not in
    /// `new` and not waiting for new threads' rates (those reserve theirs already), under
    /// `min_group_cpu` now (set up and waiting for their work to start), counted at the fork
    /// rule's own estimate, threads x `new_thread_cpu`, less their rate; over the nodes their
    /// allowed CPUs lie in when that is not every node (where the fork rule put them), else on the
    /// node their first thread last ran on (where the kernel starts its new threads).
    fn young_idle_reserve(&self, new: &BTreeSet<u32>) -> Vec<(usize, f64)> {
        let m = self.model;
        let t = &m.tunables;
        let mut out = Vec::new();
        for &pid in &self.managed {
            if new.contains(&pid) || self.waiting.contains(&pid) || !super::young_and_worth(m, pid) {
                continue;
            }
            let p = &m.procs[&pid];
            if p.cpu_rate >= t.min_group_cpu {
                continue;
            }
            let tasks: Vec<&TaskView> = p.tids.iter().filter_map(|&tid| m.tasks.get(&TaskKey { pid, tid })).collect();
            let extra = tasks.len() as f64 * t.new_thread_cpu - p.cpu_rate;
            if tasks.is_empty() || extra <= 0.0 {
                continue;
            }
            let allowed: Vec<usize> = self
                .cpu_nodes
                .iter()
                .copied()
                .filter(|&i| tasks.iter().any(|tv| !tv.cpus_allowed.intersection(&self.cpus_of(&[i])).is_empty()))
                .collect();
            if !allowed.is_empty() && allowed.len() < self.cpu_nodes.len() {
                for &i in &allowed {
                    out.push((i, extra / allowed.len() as f64));
                }
            } else if let Some(i) = tasks[0].node.and_then(|id| m.node_idx(id)) {
                out.push((i, extra));
            }
        }
        out
    }

    /// Rule 2 (and 5's CPU side): every unit, heaviest first, against remaining capacity.
    pub(crate) fn place(&mut self, policy: &Adaptive) {
        let m = self.model;
        for ui in 0..self.units.len() {
            let u = self.units[ui].clone();
            // The hold: the move of the unit's heaviest task, when that was a move of the unit. A
            // task the balancer moved alone holds itself (below, and balance-stays), not its unit
            // (unit-hold-is-the-units): its move's load is the task's, and taken for the unit's
            // hold, the whole unit was held and booked on the node that one task went to while
            // the others ran where they were.
            let heaviest =
                u.tasks.iter().max_by(|a, b| self.demand_of(a).total_cmp(&self.demand_of(b)).then(b.cmp(a))).copied();
            // A unit whose pages are moving in the background keeps its hold until the move ends
            // (rule "moves-in-flight"), whatever its load meanwhile.
            let hold = heaviest
                .and_then(|k| policy.task_moves.get(&k).filter(|mv| !mv.by_balance).map(|mv| (k, mv)))
                .filter(|(k, mv)| policy.moving.contains_key(&k.pid) || mv.holds(self.period, u.cpu, m));
            // hold-gains-member: a process that joined the unit since the move, and takes the
            // largest share of its accesses off the held nodes, is a changed situation: the unit
            // is placed afresh (once; see `gained_member`).
            let gained = hold
                .filter(|(k, _)| !policy.moving.contains_key(&k.pid))
                .and_then(|(_, mv)| self.gained_member(&u, mv));
            if gained.is_some() {
                let pids: Arc<[u32]> = u.pids.clone().into();
                for k in &u.tasks {
                    self.hold_lifts.insert(*k, pids.clone());
                }
            }
            let hold = hold.filter(|_| gained.is_none()).map(|(_, mv)| mv);
            let placed = if let Some(mv) = hold {
                let nodes: Vec<usize> =
                    self.cpu_nodes.iter().copied().filter(|&i| mv.nodes.contains(self.id(i))).collect();
                if nodes.is_empty() {
                    None
                } else {
                    Some(Placed {
                        reason: Reason::new(
                            "hold",
                            format!(
                                "{} moved to nodes {} {} periods ago at {:.2} CPUs, now {:.2} (hold {} periods unless the load changes by > {})",
                                u.label,
                                mv.nodes,
                                self.period.saturating_sub(mv.period),
                                mv.load,
                                u.cpu,
                                m.tunables.hold_periods,
                                pct(m.tunables.hold_load_change)
                            ),
                        ),
                        nodes,
                        held: true,
                    })
                }
            } else {
                None
            };
            // moves-in-flight, without a hold: a unit whose memory this policy is moving in the
            // background stays on the nodes the memory goes to until the move ends. A unit the
            // fork rule placed has no hold (that rule starts none), and was placed afresh while
            // its memory moved: in the rig's 4-node race at 91fe989 the second numa01 process's
            // workers, on node 1 with their 37 MiB on its way there, were refused node 1 (1.7 of
            // 2.0 CPUs left, the sampler's load) and sent to node 3; the memory arrived on node 1
            // and the process ran remote for the rest of the run.
            // Only for the process that carries most of the unit's CPU (one light member's move
            // does not hold a whole group). Threads not on those nodes (a CPU change that failed)
            // are sent there, not held where they are.
            let placed = placed.or_else(|| {
                let (pid, to) = self.memory_follows.iter().find(|(pid, _)| {
                    u.pids.contains(pid) && policy.moving.contains_key(pid)
                })?;
                // A thread on no node's CPU (a reserved one) is not on target: it is sent there.
                let on_target = u.tasks.iter().all(|k| self.task_idx(k).is_some_and(|i| to.contains(self.id(i))));
                let its_cpu: f64 =
                    u.tasks.iter().filter(|k| k.pid == *pid).filter_map(|k| m.tasks.get(k)).map(demand).sum();
                if its_cpu * 2.0 < u.cpu {
                    return None;
                }
                let nodes: Vec<usize> = self.cpu_nodes.iter().copied().filter(|&i| to.contains(self.id(i))).collect();
                (!nodes.is_empty()).then(|| Placed {
                    reason: Reason::new(
                        "moves-in-flight",
                        format!(
                            "{}: the memory of process {pid} is moving to nodes {to} in the background; its threads {} it until the move ends",
                            u.label,
                            if on_target { "stay with" } else { "go to" }
                        ),
                    ),
                    nodes,
                    held: on_target,
                })
            });
            let mut placed = placed.unwrap_or_else(|| self.choose(&u));
            if let Some(note) = gained {
                placed.reason.detail = format!("{}; {note}", placed.reason.detail);
            }
            // held-task-booked-where-held: a task of the unit moved on its own within its hold
            // (below) stays on its own nodes, so its CPU is booked there, not with the unit's.
            // Booked with the unit, the unit's node read that task's CPU as used and the nodes it
            // was held on read it as free for the units placed after it: one that fit was refused.
            let own_holds: BTreeMap<TaskKey, Vec<usize>> = u
                .tasks
                .iter()
                .filter_map(|k| self.own_hold(policy, k).map(|(n, _)| (*k, n)))
                .filter(|(_, nodes)| *nodes != placed.nodes)
                .collect();
            let mut cpu_now = vec![0.0; self.used.len()];
            let mut unit_cpu = u.cpu;
            for k in &u.tasks {
                let Some(tv) = m.tasks.get(k) else { continue };
                let d = self.demand_with(k, tv);
                if let Some(nodes) = own_holds.get(k) {
                    unit_cpu -= d;
                    for &i in nodes {
                        self.used[i] += d / nodes.len() as f64;
                    }
                } else if let Some(j) = self.task_idx(k) {
                    cpu_now[j] += d;
                }
            }
            self.charge(&placed.nodes, unit_cpu.max(0.0), u.mem, &cpu_now, &u.mem_by_node);
            for k in &u.tasks {
                let cpu = self.demand_of(k);
                let stays = own_holds.get(k).is_some_and(|n| self.task_idx(k).is_some_and(|j| n.contains(&j)));
                if let Some(j) = self.task_idx(k).filter(|j| !placed.nodes.contains(j) && !stays) {
                    self.leaving[j] += cpu;
                }
                self.task_plan.insert(
                    *k,
                    TaskPlan {
                        nodes: placed.nodes.clone(),
                        unit: ui,
                        held: placed.held,
                        reason: placed.reason.clone(),
                        cpu,
                        hold_load: u.cpu,
                    },
                );
            }
            self.placed[ui] = Some(placed);
        }
        // A task moved on its own (by the balancer) within its hold stays where it was put (its
        // CPU was booked there above).
        let keys: Vec<TaskKey> = self.task_plan.keys().copied().collect();
        for k in keys {
            let Some((nodes, mv)) = self.own_hold(policy, &k) else { continue };
            let Some(tp) = self.task_plan.get_mut(&k).filter(|tp| tp.nodes != nodes) else { continue };
            tp.nodes = nodes;
            tp.held = true;
            tp.reason = Reason::new(
                "hold",
                format!("task {} moved alone to nodes {} {} periods ago", k.tid, mv.nodes, self.period - mv.period),
            );
        }
        // balance-stays: a task the balancer moved off its unit's node, and still there, comes
        // back only when that node, with it, is planned within its capacity (load <= 1: a CPU for
        // every task, the balancer's own condition for leaving a node alone). Without it, the
        // move's hold ends (after `hold_periods`, or at once when the task's CPU changes by more
        // than the balancer's tolerance: hold-change-floor), the unit's placement pulls the task
        // back, the node is over capacity again and the balancer moves it out again: in the rig,
        // numa02's main thread (0.1-0.2 CPUs beside two busy workers on a 2-CPU node) went back
        // and forth every 5-10 steps. (At the cpu_load_high mark instead of capacity, the packed
        // 288c vm-mix's vCPUs never came back: 1.317 -> 1.186 x default; at capacity 1.248 x.)
        //
        // balance-stays-band: the return also leaves the slack the balancer allows before it
        // moves a task out (RATE_SLACK_CPU_PER_TASK per task planned on the node, counting the
        // task), so moving out and coming back have a band between them: out above capacity + that
        // slack (balance.rs), back at or below capacity - that slack. Without the band the two
        // marks met at capacity and a period's noise in the workers' rates decided it: the rig's
        // 4-node race at e4dd6d3 had each numa01 process's main thread (0.08-0.16 CPUs beside two
        // workers reading 0.92-1.0 on a 2-CPU node) moved out and back every 2.5-10 s, three round
        // trips in 20 s (the journal's balance-weakest-first and stay-current-node lines). The
        // simulator's evidence figures are unchanged by it (`scripts/evidence.sh`, every row).
        let mut planned_on = vec![0usize; self.cap.len()];
        for tp in self.task_plan.values() {
            if let [i] = tp.nodes[..] {
                planned_on[i] += 1;
            }
        }
        let mut stays: Vec<(TaskKey, usize, usize, f64)> = Vec::new();
        for (k, tp) in &self.task_plan {
            if tp.held || tp.nodes.len() != 1 {
                continue;
            }
            let Some(mv) = policy.task_moves.get(k).filter(|mv| mv.by_balance) else { continue };
            let Some(cur) = self.task_idx(k) else { continue };
            let home = tp.nodes[0];
            if home == cur || !mv.nodes.contains(self.id(cur)) || self.cap[home] <= 0.0 {
                continue;
            }
            // The task counts at the larger of its CPU now and its CPU when it was moved
            // (balance-stays-at-moved-load): a light thread's rate swings from period to period
            // (the rig's numa01 main thread, 0.02-0.28 CPUs as its recorder wakes once a second),
            // and counted at a low reading it came back to a node that was over capacity again
            // at the next high one, to be moved out again (4-node race at 7096861: two to three
            // round trips per process in 20 s).
            let band = RATE_SLACK_CPU_PER_TASK * planned_on[home] as f64;
            let with = (self.used[home] - tp.cpu + tp.cpu.max(mv.load) + band) / self.cap[home];
            if with > 1.0 {
                stays.push((*k, home, cur, with));
            }
        }
        for (k, home, cur, with) in stays {
            let why = format!(
                "task {} was moved alone to node {} by the balancer; node {} with it (and the balancer's slack) would be planned at {:.2} of its capacity (> 1): it stays",
                k.tid,
                self.id(cur),
                self.id(home),
                with
            );
            if let Some(tp) = self.task_plan.get_mut(&k) {
                self.used[home] -= tp.cpu;
                self.used[cur] += tp.cpu;
                tp.nodes = vec![cur];
                tp.held = true;
                tp.reason = Reason::new("balance-stays", why);
            }
        }
    }

    /// The CPU nodes (dense) task `k` is held on by a move of its own, and the move: its hold, or
    /// any move while its process's pages move in the background.
    fn own_hold<'p>(&self, policy: &'p Adaptive, k: &TaskKey) -> Option<(Vec<usize>, &'p super::Move)> {
        let m = self.model;
        let cpu = m.tasks.get(k).map_or(0.0, demand);
        let mv = policy
            .task_moves
            .get(k)
            .filter(|mv| mv.by_balance || !self.hold_lifts.contains_key(k))
            .filter(|mv| policy.moving.contains_key(&k.pid) || mv.holds(self.period, cpu, m))?;
        let nodes: Vec<usize> =
            self.cpu_nodes.iter().copied().filter(|&i| mv.nodes.contains(m.topo.nodes[i].id)).collect();
        (!nodes.is_empty()).then_some((nodes, mv))
    }

    /// Rule hold-gains-member: whether a process that joined unit `u` since `mv` (the move of its
    /// heaviest task, whose hold would keep it) lifts that hold, and the note saying so. It does
    /// when, with the processes the move's group did not have, the node with the largest share of
    /// the unit's accesses (for members known by residency alone, where their bytes are:
    /// residency-by-bytes) is outside the held nodes, and without them it is inside.
    ///
    /// The hold stops a move back for an unchanged situation (ping-pong); a new member that takes
    /// the unit's accesses elsewhere changed it. In the rig's pairs scenario (rebuilt in
    /// `a_group_that_gains_its_servers_process_goes_to_its_memory`) a client kept on its node
    /// (stay-current-node) was tied to its server, whose 64 MiB made 84% of the group's bytes on
    /// another node; the group waited out the client's hold on the client's node, `hold_periods`
    /// decisions, before going to the server's memory. What keeps it from reopening ping-pong:
    /// only a gain counts (a member leaving lifts nothing, and one coming back was a member at
    /// the move), only a gain that moves the unit's best node off the held nodes, and a
    /// membership lifts a hold once (`Planner::hold_lifts`: whatever the fresh placement does,
    /// the joined processes count as members afterwards). Not while its pages move
    /// (moves-in-flight keeps the hold).
    fn gained_member(&self, u: &Unit, mv: &super::Move) -> Option<String> {
        let joined: Vec<u32> = u.pids.iter().copied().filter(|p| mv.members.binary_search(p).is_err()).collect();
        if joined.is_empty() || mv.members.is_empty() {
            return None;
        }
        let top = |share: &[f64]| {
            (0..share.len()).filter(|&i| share[i] > 0.0).max_by(|&a, &b| share[a].total_cmp(&share[b]).then(b.cmp(&a)))
        };
        let now = top(&u.share)?;
        if mv.nodes.contains(self.id(now)) {
            return None;
        }
        let before: Vec<TaskKey> = u.tasks.iter().copied().filter(|k| !joined.contains(&k.pid)).collect();
        let old = self.unit_of_tasks(u.kind, before, String::new(), &mut HashMap::default())?;
        let was = top(&old.share)?;
        if !mv.nodes.contains(self.id(was)) {
            return None;
        }
        let said: Vec<String> = joined.iter().map(u32::to_string).collect();
        Some(format!(
            "[hold-gains-member] the hold of its move to nodes {} {} ago is lifted: {} {} joined it since, \
             and the largest share of its {} is now on node {} ({}), not node {}",
            mv.nodes,
            plural(self.period.saturating_sub(mv.period), "period"),
            if joined.len() == 1 { "process" } else { "processes" },
            said.join(", "),
            u.share_src,
            self.id(now),
            pct(u.share[now]),
            self.id(was)
        ))
    }

    /// Places one unit (no hold).
    fn choose(&self, u: &Unit) -> Placed {
        let t = &self.model.tunables;
        let c = self.candidates(u);
        let class_note = match u.kind {
            UnitKind::Process(ProcessClass::Unclassified) | UnitKind::Group(_) => String::new(),
            UnitKind::Process(cl) => format!(" [{cl:?}]"),
        };
        if self.cpu_nodes.is_empty() {
            return Placed {
                nodes: vec![],
                reason: Reason::new("no-cpu-nodes", "the machine has no CPU nodes"),
                held: false,
            };
        }
        // Rule "confined-within-cpuset": no node both takes its memory and has a CPU of its
        // cpusets (processes of one group in disjoint cpusets): it stays as it is.
        if self.nodes_for(u).is_empty() {
            return Placed {
                nodes: vec![],
                reason: Reason::new(
                    CONFINED_RULE,
                    format!(
                        "{}{}: no node is within the cpusets of all its processes; left as it is",
                        u.label, class_note
                    ),
                ),
                held: false,
            };
        }
        // Bandwidth-bound: stays where it runs; its memory is interleaved there (memory pass).
        if u.kind == UnitKind::Process(ProcessClass::BandwidthBound) {
            let mut nodes: Vec<usize> = u.tasks.iter().filter_map(|k| self.task_idx(k)).collect();
            nodes.sort_unstable();
            nodes.dedup();
            if nodes.len() >= t.bandwidth_bound_min_nodes as usize {
                return Placed {
                    reason: Reason::new(
                        "bandwidth-bound-stay",
                        format!(
                            "{} streams from nodes {}: CPUs stay, memory interleaved there",
                            u.label,
                            self.node_set(&nodes)
                        ),
                    ),
                    nodes,
                    held: true,
                };
            }
        }
        // A group kept whole by the cap's hysteresis (up to `group_split_margin` above a node)
        // is placed as one that fits: where no node has room for it, it stays (no-room-stay).
        let margin = if matches!(u.kind, UnitKind::Group(_)) { t.group_split_margin } else { 0.0 };
        let fits = self.fits_a_node(u.cpu, u.tasks.len(), u.mem, margin, u.reach.as_ref());
        if fits || matches!(u.kind, UnitKind::Process(ProcessClass::LatencySensitive)) {
            let mut skipped = Vec::new();
            for &i in &c.order {
                if self.refuses(i, u) {
                    skipped.push(self.bottleneck_why(i));
                    continue;
                }
                let need = self.mem_needed(i, u);
                let reach_ok = self.within_reach(i, u);
                let room = self.has_room(i, u.cpu, u.tasks.len(), need) && reach_ok;
                let over = if room || !reach_ok { None } else { self.locality_pays(i, u) };
                if room || over.is_some() {
                    let (rule, mut detail) = if skipped.is_empty() && i == c.order[0] {
                        (c.rule, format!("{}{}: {}", u.label, class_note, c.why))
                    } else {
                        (
                            "next-best-node",
                            format!(
                                "{}{}: first choice node {} ({}) refused: {}; node {} next by access share then distance ({} of its {} there)",
                                u.label,
                                class_note,
                                self.id(c.order[0]),
                                c.why,
                                if skipped.is_empty() { "no room".to_string() } else { skipped.join("; ") },
                                self.id(i),
                                pct(u.share[i]),
                                u.share_src
                            ),
                        )
                    };
                    if need < u.mem && self.mem_avail[i] < u.mem as f64 {
                        detail.push_str(&format!(
                            "; [{HOME_RULE}] node {} holds {} of its {}: it is not asked to find room for the unit's {:.0} MiB ({:.0} MiB left there)",
                            self.id(i),
                            pct(u.share[i]),
                            u.share_src,
                            u.mem as f64 / MIB,
                            self.mem_avail[i].max(0.0) / MIB
                        ));
                    }
                    if let Some((o, staying)) = over {
                        detail.push_str(&format!(
                            "; [locality-pays-for-overload] node {} has {:.2} of {:.2} CPUs left for {:.2}: {o:.2} CPUs over, <= {:.2} x {} of its {} there x {} remote cost",
                            self.id(i),
                            (self.cap[i] - self.used[i]).max(0.0),
                            self.cap[i],
                            u.cpu,
                            u.cpu + staying,
                            pct(u.share[i]),
                            u.share_src,
                            self.model.tunables.remote_access_cost
                        ));
                        if staying > 0.0 {
                            detail.push_str(&format!(
                                " ([{FOLLOW_ON_RULE}] its CPU and the {staying:.2} CPUs of its process's other threads kept on node {}: a part cut off its process is weighed with them, its process and memory would follow it)",
                                self.id(i)
                            ));
                        }
                    }
                    return Placed { nodes: vec![i], reason: Reason::new(rule, detail), held: false };
                }
                let mut why = format!(
                    "node {} has {:.1} of {:.1} CPUs left for {:.1}",
                    self.id(i),
                    (self.cap[i] - self.used[i]).max(0.0),
                    self.cap[i],
                    u.cpu
                );
                // Memory, not CPU, may be what is short: say so. The waiver applied (need below
                // the unit's memory, as for the placed reason above): only the reserve refused it.
                if need < u.mem && self.mem_avail[i] < 0.0 {
                    why.push_str(&format!(
                        " and its memory is {:.0} MiB under the reserve ([{HOME_RULE}] asks no room of a unit holding {} of its {} there, but not below the reserve)",
                        -self.mem_avail[i] / MIB,
                        pct(u.share[i]),
                        u.share_src
                    ));
                } else if self.mem_avail[i] < need as f64 {
                    why.push_str(&format!(
                        " and {:.0} MiB of memory for {:.0} MiB",
                        self.mem_avail[i].max(0.0) / MIB,
                        u.mem as f64 / MIB
                    ));
                }
                skipped.push(why);
            }
            // No node has room: stay, or the least loaded.
            if let Some(cur) =
                u.current.filter(|&i| self.cpus[i] > 0.0 && !self.refuses(i, u) && self.nodes_for(u).contains(&i))
            {
                return Placed {
                    nodes: vec![cur],
                    reason: Reason::new(
                        "no-room-stay",
                        format!(
                            "{}{}: no node has room ({}); stays on node {}",
                            u.label,
                            class_note,
                            skipped.join("; "),
                            self.id(cur)
                        ),
                    ),
                    held: false,
                };
            }
            let least = self
                .nodes_for(u)
                .iter()
                .copied()
                .filter(|&i| !self.refuses(i, u))
                .max_by(|&a, &b| (self.cap[a] - self.used[a]).total_cmp(&(self.cap[b] - self.used[b])).then(b.cmp(&a)))
                .unwrap_or(c.order[0]);
            return Placed {
                nodes: vec![least],
                reason: Reason::new(
                    "least-loaded",
                    format!(
                        "{}{}: no node has room ({}); node {} least loaded",
                        u.label,
                        class_note,
                        skipped.join("; "),
                        self.id(least)
                    ),
                ),
                held: false,
            };
        }
        let seed = c.order.iter().copied().find(|&i| !self.refuses(i, u)).unwrap_or(c.order[0]);
        let set = self.closest_set(seed, u.cpu, u.mem, u.reach.as_ref());
        Placed {
            reason: Reason::new(
                "closest-set",
                format!(
                    "{}{} ({:.1} CPUs, {:.0} MiB) fits no single node; nodes {} around node {} ({})",
                    u.label,
                    class_note,
                    u.cpu,
                    u.mem as f64 / MIB,
                    self.node_set(&set),
                    self.id(seed),
                    c.why
                ),
            ),
            nodes: set,
            held: false,
        }
    }

    /// CPU actions for every unit whose tasks are not where the plan puts them.
    pub(crate) fn cpu_actions(&mut self) {
        let m = self.model;
        // Per process: its planned tasks, grouped by node set.
        let mut by_pid: BTreeMap<u32, Vec<(TaskKey, TaskPlan)>> = BTreeMap::new();
        for (k, tp) in &self.task_plan {
            by_pid.entry(k.pid).or_default().push((*k, tp.clone()));
        }
        for (pid, plans) in by_pid {
            let Some(p) = m.procs.get(&pid) else { continue };
            let live = p.tids.iter().filter(|&&tid| m.tasks.contains_key(&TaskKey { pid, tid })).count();
            let movable: Vec<&(TaskKey, TaskPlan)> = plans.iter().filter(|(_, tp)| !tp.held).collect();
            let sets: BTreeSet<&Vec<usize>> = plans.iter().map(|(_, tp)| &tp.nodes).collect();
            let needs = |k: &TaskKey, nodes: &[usize]| -> bool {
                let cpus = self.cpus_for(pid, nodes);
                !cpus.is_empty() && !m.tasks[k].cpus_allowed.is_subset(&cpus)
            };
            if movable.is_empty() || movable.iter().all(|(k, tp)| !needs(k, &tp.nodes)) {
                continue;
            }
            // Bandwidth-bound processes keep their CPUs.
            let class =
                super::cold::effective_class(p.class, self.accessed.contains_key(&pid), self.sliced.contains(&pid));
            if class == ProcessClass::BandwidthBound && plans.iter().all(|(_, tp)| tp.held) {
                continue;
            }
            let load = plans[0].1.hold_load;
            if sets.len() == 1 && plans.len() == live && movable.len() == plans.len() {
                let (_, tp) = &plans[0];
                let cpus = self.cpus_for(pid, &tp.nodes);
                self.task_hold_loads.extend(plans.iter().map(|(k, tp)| (*k, tp.hold_load)));
                self.actions.push((
                    Action {
                        target: TaskRef { pid, tid: None, starttime: p.starttime },
                        kind: ActionKind::SetAffinity { cpus },
                        reason: reason_of_all(plans.iter().map(|(_, tp)| &tp.reason)),
                    },
                    load,
                ));
                continue;
            }
            let mut per_task = Vec::new();
            for (k, tp) in movable {
                if !needs(k, &tp.nodes) {
                    continue;
                }
                per_task.push((
                    Action {
                        target: TaskRef { pid, tid: Some(k.tid), starttime: p.starttime },
                        kind: ActionKind::SetAffinity { cpus: self.cpus_for(pid, &tp.nodes) },
                        reason: tp.reason.clone(),
                    },
                    tp.hold_load,
                ));
            }
            self.actions.extend(per_task);
        }
    }

    /// Pages `pid`'s memory may still move in this plan: its young allowance, then the shared
    /// budget.
    pub(crate) fn budget_for(&self, pid: u32) -> u64 {
        self.budget_pages.saturating_add(self.young_budget.get(&pid).copied().unwrap_or(0))
    }

    /// Charges `pages` of `pid`'s memory to the budgets: its young allowance first, the shared
    /// budget for the rest.
    pub(crate) fn spend(&mut self, pid: u32, pages: u64) {
        let own = self.young_budget.get_mut(&pid).map_or(0, |b| {
            let take = (*b).min(pages);
            *b -= take;
            take
        });
        self.budget_pages = self.budget_pages.saturating_sub(pages - own);
    }

    /// The plan and the load recorded with each action.
    pub(crate) fn finish(self) -> (Plan, Vec<f64>, BTreeMap<TaskKey, f64>) {
        let (actions, loads) = self.actions.into_iter().unzip();
        (Plan { actions, standing: Vec::new() }, loads, self.task_hold_loads)
    }
}

/// Rule reason-of-every-unit: the reason of an action that covers the tasks of several units (a
/// process-wide SetAffinity for a process whose units all go to the same nodes), from the tasks'
/// own reasons in plan order. Its rule is the first task's (the one the policy's bookkeeping
/// reads: `Adaptive::record`, the futile-move records); its detail is the first task's, then
/// each further distinct reason as `; and [rule] detail` ("and": a `; [name]` alone is a
/// condition within one unit's reason, e.g. home-needs-no-room), at most `REASONS_SPELLED` in
/// all, the rest counted with their rules named. A unit's detail begins with its label, so each part says whose
/// threads it is about. Before, such an action carried the first unit's reason alone, and the
/// journal and `explain` gave the other units' threads a rule and figures that were not theirs.
/// The other rules, each once, go to `Reason::also`, so a journal filtered by rule finds the
/// action under each. One reason (every task of one unit, or units with the same reason) is
/// returned as it is.
fn reason_of_all<'a>(reasons: impl IntoIterator<Item = &'a Reason>) -> Reason {
    let mut distinct: Vec<&Reason> = Vec::new();
    for r in reasons {
        if !distinct.contains(&r) {
            distinct.push(r);
        }
    }
    // The caller always has a task; none would be an action without a reason.
    let Some((first, rest)) = distinct.split_first() else {
        return Reason::new("", "");
    };
    let mut reason = (*first).clone();
    let spelled = rest.len().min(REASONS_SPELLED.saturating_sub(1));
    for r in &rest[..spelled] {
        reason.detail.push_str(&format!("; and [{}] {}", r.rule, r.detail));
    }
    let counted = &rest[spelled..];
    if !counted.is_empty() {
        let mut rules: Vec<&str> = Vec::new();
        for r in counted {
            if !rules.contains(&r.rule.as_str()) {
                rules.push(&r.rule);
            }
        }
        let rules: Vec<String> = rules.iter().map(|r| format!("[{r}]")).collect();
        reason.detail.push_str(&format!("; and {}, by {}", plural(counted.len(), "more reason"), rules.join(", ")));
    }
    for r in rest {
        if r.rule != reason.rule && !reason.also.contains(&r.rule) {
            reason.also.push(r.rule.clone());
        }
    }
    reason
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reasons beyond `REASONS_SPELLED` are counted, each of their rules still named once; a
    /// repeated reason is given once.
    #[test]
    fn reasons_beyond_the_spelled_ones_are_counted_with_their_rules() {
        let r = |rule: &str, unit: u32| Reason::new(rule, format!("group {unit}: figures"));
        let reasons = [
            r("cpu-follows-memory", 1),
            r("cpu-follows-memory", 1),
            r("stay-current-node", 2),
            r("preferred-node", 3),
            r("preferred-node", 4),
            r("next-best-node", 5),
            r("preferred-node", 6),
            r("least-loaded", 7),
        ];
        let all = reason_of_all(&reasons);
        assert_eq!(all.rule, "cpu-follows-memory");
        assert_eq!(all.also, ["stay-current-node", "preferred-node", "next-best-node", "least-loaded"]);
        assert_eq!(
            all.detail,
            "group 1: figures; and [stay-current-node] group 2: figures; and [preferred-node] group 3: \
             figures; and [preferred-node] group 4: figures; and 3 more reasons, by [next-best-node], [preferred-node], [least-loaded]"
        );
        assert_eq!(reason_of_all(&reasons[..2]), reasons[0]);
    }
}
