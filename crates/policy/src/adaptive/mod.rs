//! The adaptive policy (NUMA-ICON): a global placement of affinity groups on nodes, memory that
//! follows CPU under a budget, and per-class placement, every action with its reason.
//!
//! # Problem
//!
//! The kernel's NUMA balancing (AutoNUMA) decides per thread: each task drifts towards the node
//! holding most of the memory it faults on, under the load balancer's constraint, and pages drift
//! towards the tasks that touch them. Each step is locally right; together they converge slowly,
//! migrate pages both ways and never see that two processes talking over a socket, or two
//! multi-threaded processes that each fit a node, belong on different (or the same) nodes as a
//! whole. The NUMA-ICON slides (shared/seeds/000) place *affinity groups* instead, with knowledge
//! of each node's bottlenecks, and choose at fork time where a process starts.
//!
//! # Approach
//!
//! One [`Policy::decide`] makes one plan from the [`Model`], in five passes over shared per-node
//! capacity (CPU demand against `CPUs x node_cpu_target`, memory against free memory plus the
//! managed memory that may move):
//!
//! ```text
//!   model ─┬─ 1 fork      new processes (first seen younger than new_process_age_ms), pid order:
//!          │              least loaded node (CPU demand / capacity; an idle young process placed
//!          │              before counts at threads x new_thread_cpu: fork-counts-placed), then
//!          │              one whose free memory holds it, then the one holding most of its own
//!          │              memory already (fork-stays-with-memory), then closest to the nodes of
//!          │              its peers (same name), then most free memory, then node id; the node
//!          │              holding most of its memory wins over the least loaded when, with the
//!          │              process on it, it is within `imbalance` of it (and has room)
//!          │              ──► SetAffinity(pid, node CPUs); one too large for a node: the closest
//!          │              set holding its share of the machine; one placed away from the memory
//!          │              it set up and now idle waits beside: its memory moves in the same plan
//!          │              (pass 5, fork-memory-follows)
//!          ├─ 2 place     every other unit (affinity group, or a classified process), heaviest
//!          │              first, against remaining capacity:
//!          │                 fits a node?  candidates:  memory node  (CPU follows memory: >= 1 GiB,
//!          │                                            >= 80% on one node)
//!          │                                         |  current node when as good (share within
//!          │                                            stay_margin: settled there; or the
//!          │                                            most of its sampled hot ranges are
//!          │                                            there NOW: stay-with-moved-memory,
//!          │                                            the smoothed share trails a page
//!          │                                            move by seconds)
//!          │                                         |  best node by share when it has room and
//!          │                                            no bottleneck and moving the threads
//!          │                                            (0.5 ms each) costs less than copying
//!          │                                            the remote pages (2 us each): CPU
//!          │                                            follows memory, cost-based
//!          │                                         |  current node (small memory the best node
//!          │                                            cannot take, or memory moving here)
//!          │                                         |  by access share, then distance, then id
//!          │                               first with room and no bottleneck wins (a CPU
//!          │                               bottleneck whose units this plan already moved
//!          │                               off, leaving the node under capacity, refuses
//!          │                               nothing: bottleneck-leaves); a node it overloads
//!          │                               takes it when its locality there pays for the
//!          │                               overload (CPU x share x remote_access_cost:
//!          │                               locality-pays-for-overload; a part the group cap
//!          │                               cut off a process known by residency alone is
//!          │                               weighed with its process's threads kept on its
//!          │                               memory's node, the whole within the cap's upper
//!          │                               mark there: split-weighs-follow-on)
//!          │                 larger?       the closest set of nodes around the preferred one
//!          │                               (a group counts as fitting up to the cap's upper
//!          │                               mark, group_split_margin above a node, as the
//!          │                               model keeps it whole: no room -> it stays)
//!          │              a unit moved within hold_periods stays (unless its load changed);
//!          │              a process with threads first seen now (rate unknown) is no unit for
//!          │              one period, its new threads reserving new_thread_cpu each where
//!          │              they run (wait-for-rates; never twice in a row)
//!          ├─ 3 balance   max-min planned CPU load > imbalance and the busiest over its
//!          │              capacity: move the task with the weakest affinity to the busiest
//!          │              node (access share there + strength to its co-located group members)
//!          │              to the node with room nearest its memory (by access share, then
//!          │              distance; the idlest only when none has room: balance-towards-
//!          │              memory); never a task whose preferred node that is, unless the
//!          │              node is a CPU bottleneck by managed demand alone (unmanaged load:
//!          │              the daemon, pinned processes, does not count); a task so moved
//!          │              returns only when its unit's node with it is within capacity,
//!          │              counted at the larger of its CPU now and when moved (balance-stays)
//!          ├─ 4 memory    units whose accessed memory is >= remote_share_min remote and whose
//!          │              benefit (remote x CPU x horizon) beats the copy cost: hot ranges first
//!          │              (MoveRanges), then MigratePages(max_pages), all under one budget of
//!          │              migrate_budget_mib_per_s x period; bandwidth-bound: Interleave;
//!          │              one buffer shared by threads on several nodes: Interleave over
//!          │              those nodes by CPU once, then held (threads and memory stay);
//!          │              a process whose pages a host moves in the background (Started) gets
//!          │              no page action and keeps its holds until the move ends; its unit,
//!          │              held or not, stays on the nodes the memory goes to when its threads
//!          │              are there and the process carries most of its CPU (moves-in-flight);
//!          │              its threads count at least their demand when the move started, as
//!          │              they wait on their pages meanwhile (stalled-by-own-move)
//!          └─ 5 classes   (within 2 and 4) static-large: CPUs + memory to a set that fits
//!                         (not a process whose threads work on slices of their own: its
//!                         per-thread groups keep each thread with its slice, sliced-not-static);
//!                         growing: CPUs to one node, memory free to spill; bandwidth-bound: stays,
//!                         memory interleaved over its nodes; latency-sensitive: CPUs + memory to
//!                         one node with room
//!
//!   standing orders (standing.rs, after the five): a young process not placed yet whose memory
//!   is mostly on one node with a CPU to spare gets SetAffinity(pid, that node) in
//!   `Plan::standing`, carried out by a host that hears of new threads only when the process
//!   starts one before the next decision (new-threads-follow-memory)
//!
//!   node 0 [######....]  node 1 [###.......]      groups: A (6 CPU, mem on 0)  B (3 CPU, mem on 0)
//!   place A: memory node 0 has room        -> 0    (cpu-follows-memory)
//!   place B: node 0 has 4 - 6 < 3 left     -> 1    (next-best-node), then memory-follows-cpu 0 -> 1
//! ```
//!
//! The plan is a global assignment (all units against one capacity table), not per-thread greedy
//! moves; that is the difference from AutoNUMA the slides argue for. Processes marked pinned by
//! the model (an explicit memory policy, or CPUs narrowed by someone other than this policy) are
//! never touched; the policy remembers the CPU sets it set itself so its own placements do not
//! read as foreign pins. A process confined to a cpuset (the model's `confined`: its threads as
//! wide as a cpuset narrower than the machine, as a container runtime or an operator sets) is no
//! pin: rule "confined-within-cpuset" places it only on nodes its cpuset reaches (a CPU of it
//! there, memory allowed there), counts its room on a node in the cpuset's CPUs there, cuts its
//! CPU mask to the cpuset, and sends its memory only to the cpuset's memory nodes. Units of
//! processes in different cpusets go where all of them may; where no node is, they stay.
//!
//! # Cadence
//!
//! One decision per `interval_ms`, but every `settle_interval_ms` while any process is younger
//! than `new_process_age_ms`: a new process places its memory by first touch within its first few
//! hundred milliseconds, and the fork rule and the first memory moves must come before that
//! placement has cost much. Right after a plan that saw a new process or moved a young process's
//! memory, the next decision comes after `first_touch_interval_ms` instead (rule
//! "first-touch-cadence"): the new process's first samples say which thread uses which range, and
//! a moved thread speeds up and samples its remaining ranges; the first plan that moves none of a
//! slice-shaped young process's memory, or any plan more than `first_touch_window_ms` after the process was
//! first seen, returns to the settle cadence (a shared buffer's early looks would otherwise move
//! its ranges towards whichever node sampled them first, look after look).
//!
//! ```text
//!   numa02 on 36 nodes (1 GiB first-touched on node 13 by the main thread, 288 threads, each its
//!   slice; a thread with one remote region runs at the remote speed):
//!     0.01 s  fork rule sees it                         -> next in 30 ms
//!     0.04 s  MoveRanges of the sampled slices (~55%)   -> next in 30 ms
//!     0.07 s  the slices sampled since (~35%)           -> next in 30 ms
//!     0.10 s  the rest (seen 90 ms ago, < 100 ms)       -> next in 30 ms
//!     0.13 s  nothing to move                           -> settle cadence (100 ms)
//! ```
//!
//! A young process also has a page allowance of its own, `young_migrate_budget_mib_per_s` x
//! period, for its own memory, on top of the shared `migrate_budget_mib_per_s` budget: its memory
//! sits where one thread first touched it and nothing has moved back and forth yet. The
//! allowance is per process: a machine-wide startup rate (its previous form) sped up every other
//! process's moves while anything was young (more pages than AutoNUMA on numa01_THREAD_ALLOC,
//! a lower VM mix, whose VMs arrive over 10 s). And only for a process whose threads work on
//! slices of their own (each thread's sampled ranges within twice its share of the memory): a
//! shared buffer's first samples cannot tell sharing from private use yet.
//!
//! # State and hysteresis
//!
//! The policy keeps, per process (pid + start time): whether the fork rule ran, the CPU sets it
//! applied, the last memory move and a journal of its last actions with their outcomes; per task,
//! the last CPU move, and per moved range the decision it moved at. A move is recorded only when
//! its outcome says it was applied
//! ([`Policy::observe_outcomes`]). A Refused or Vanished outcome starts no hold and forgets
//! nothing: while the model still lists the process, the next decision plans it again, and the
//! CPU set it tried counts as the policy's own (a host that narrowed some threads before failing
//! does not turn the process into a foreign pin). Refusals in a row back off (rule
//! refusal-backs-off, `Adaptive::refusals`): after n of them the process waits min(2^(n-1),
//! `refused_backoff_max_decisions`) decisions out of the managed set, so a refusal that never
//! passes is not planned and journaled at every decision. A page move that the host applied but that moved
//! less than `futile_move_share` of what it asked (the kernel moves no page another process maps
//! too: a child forked without exec that never wrote its inherited heap) starts no memory hold and
//! is not asked again, the same kind to the same nodes, until the process's own memory by node
//! changes by more than `futile_move_memory_change`, its threads are placed elsewhere, or a
//! back-off of 1, 3, 7 ... decisions (at most `futile_backoff_max_decisions`) ends (rule
//! futile-move-backs-off, `futile.rs`; a background move is judged when it ends). Within `hold_periods` decisions of a move, the unit keeps that
//! placement and memory is not moved towards another node set, unless the load that justified the
//! move changed by more than `hold_load_change` (relative) and by more than a floor in CPUs
//! (hold-change-floor, [`Move::change_floor`]): `min_group_cpu`, and for a task the balancer moved
//! the balancer's own tolerance on the node it went to (`imbalance` x its capacity), since that
//! move was made for the node's load, not the task's. Every rule that could move a thing back
//! asks the same question of its hold. A unit's hold is lifted too when a process joined its
//! group since the move and, with it, the largest share of the unit's accesses (by bytes for
//! members known by residency) lies off the held nodes, where without it it lay on them: a
//! changed situation, not a move back (hold-gains-member, `Planner::gained_member`; once per
//! membership, and never for a member leaving; a client whose partner alternates between two
//! servers holding their memory on two nodes follows the first only: the memory hold of its own
//! copy keeps it there, and the second server comes to it, `tests/adaptive_hold.rs`
//! `a_client_whose_partner_alternates_does_not_follow_each_partner`). The fork rule's placement starts no
//! hold: it is a guess made before any signal (two processes that will talk to each other are
//! spread like any others), and the group rule corrects it on the first evidence (unless its
//! memory is moving there meanwhile: moves-in-flight keeps a unit with its memory's move).
//!
//! # Units
//!
//! CPU in CPUs (1.0 = one CPU busy), memory in bytes, pages in 4 KiB base pages, shares as
//! fractions 0..1, time in periods (decisions) and ns. Per-node vectors use the topology's dense
//! index; actions name kernel node ids.
//!
//! # Limits
//!
//! A process whose groups run on different nodes (numa02: one thread per slice) has its memory
//! split by its threads' own hot ranges (`TaskView::hot`, from access samples); without access
//! samples nothing says which thread uses which range, and its memory is interleaved over its
//! nodes in proportion to its CPU there (better bandwidth, no locality). Base pages are assumed to be 4 KiB. Memory-only nodes
//! (no CPUs) are never chosen for CPUs and so never receive migrated memory.

mod balance;
mod cold;
mod explain;
mod futile;
mod launch;
mod memory;
mod place;
mod standing;
#[cfg(test)]
mod work_tests;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use numapilot_model::{Model, TaskKey};
use numapilot_topology::{CpuSet, NodeSet};

pub use explain::{Explanation, GroupExplanation, JournalEntry};
pub use launch::{free_from_model, LAUNCH_PROMISE_NS, LAUNCH_WAIT_DECISIONS};

use crate::action::{Action, ActionKind, Outcome, Plan, Reason};
use crate::engine::{LaunchAdvice, LaunchRequest, NoLaunchAdvice, Policy};

/// Bytes in a base page, for page counts (x86-64 and most arm64 kernels; a 64 KiB-page kernel
/// would see budgets 16x larger in bytes).
pub(crate) const BASE_PAGE_BYTES: u64 = 4096;

/// CPU sets kept in `ProcState::tried_cpus`, count. Default 8 (a few periods of attempts at
/// process and thread level). Source: a choice, not measured: the sets are distinct (one tried
/// again moves to the newest place), and what lands here (a SetAffinity refused or vanished, the
/// mask of a thread that exited or that a process-wide mask replaced, the CPUs online during a
/// hotplug: `remember_tried`'s callers) is a few recent masks a thread may still carry.
/// Prevents: unbounded growth for a process refused every period, or one that starts and ends
/// placed threads for weeks (`foreign_pinned` may compare every set with every thread's mask).
const TRIED_CPUS_KEPT: usize = 8;

impl ProcState {
    /// Adds `cpus` to the masks counted as this policy's own (`tried_cpus`), newest last, at most
    /// [`TRIED_CPUS_KEPT`].
    fn remember_tried(&mut self, cpus: &CpuSet) {
        self.tried_cpus.retain(|c| c != cpus);
        self.tried_cpus.push(cpus.clone());
        if self.tried_cpus.len() > TRIED_CPUS_KEPT {
            self.tried_cpus.remove(0);
        }
    }

    /// Whether this policy ever set (or tried to set) a CPU mask on the process.
    fn has_own_masks(&self) -> bool {
        self.own_cpus.is_some() || !self.own_task_cpus.is_empty() || !self.tried_cpus.is_empty()
    }
}

/// A past move: where to, when (decision number), and the load that justified it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Move {
    /// Kernel node ids the CPUs or memory went to.
    pub(crate) nodes: NodeSet,
    /// Decision number of the move.
    pub(crate) period: u64,
    /// CPU demand of the unit at the time, CPUs.
    pub(crate) load: f64,
    /// Whether the balancer made it (a task moved alone off its unit's node: it comes back only
    /// when that node has room again, see `balance-stays` in place.rs).
    pub(crate) by_balance: bool,
    /// For a thread's move, the processes of its affinity group at the move (the model's group,
    /// its own process when it has none), sorted; empty for a memory move. Rule
    /// hold-gains-member (place.rs): a process that joins the group later and takes the largest
    /// share of the group's accesses off the held nodes lifts the unit's hold, once (the
    /// planner adds it here when the fresh placement moves nothing).
    pub(crate) members: Arc<[u32]>,
}

impl Move {
    /// Whether the move still holds at decision `period` for a unit whose load is now `load`.
    ///
    /// A change lifts the hold when it is more than `hold_load_change` of the load at the move and
    /// more than [`Move::change_floor`] in CPUs (hold-change-floor). Every rule that could move the
    /// thing back asks this, so none of them undoes a move for a change under the floor.
    ///
    /// The hold counts decisions, so under the settle and first-touch cadences (100 and 30 ms,
    /// while any process is young) it lasts 1 s or 0.3 s: in the VM mix, where VMs keep arriving,
    /// a huge VM's vCPU moved four times in its first 4 s (seed 1, rules next-best-node and
    /// balance-weakest-first). Tried: a hold lasting at least `hold_periods` x 100 ms (1 s)
    /// whatever the cadence: the preset's VM mix 1.404 -> 1.341 x default per VM, 64 GB nodes
    /// 0.746 -> 0.760 (seeds 1-3, 20 s); at least `hold_periods` x 1 s (10 s): 0.955 and 0.750.
    /// Not kept: the moves it stops are as often corrections as ping-pong.
    pub(crate) fn holds(&self, period: u64, load: f64, model: &Model) -> bool {
        let t = &model.tunables;
        let recent = period.saturating_sub(self.period) < u64::from(t.hold_periods);
        let delta = (load - self.load).abs();
        let changed = delta > t.hold_load_change * self.load && delta > self.change_floor(model);
        recent && !changed
    }

    /// The smallest change of load, CPUs, that may lift this move's hold (hold-change-floor): a
    /// change must matter to the decision that made the move.
    ///
    /// - Any move: more than `min_group_cpu`. Below a tenth of a CPU a change is no phase change,
    ///   only a light thread's wake-ups (the rig's numa01 main thread, moved by the balancer at
    ///   0.07 CPUs and reading 0.0 the next period, had its hold lifted at once and went back and
    ///   forth).
    /// - A balancer's move (`by_balance`): also more than the balancer's own tolerance on the
    ///   node it went to, `imbalance` x its capacity (its CPUs x `node_cpu_target`): 0.5 CPUs on a
    ///   2-CPU node; from 4 CPUs up no change of one thread (at most 1 CPU) lifts it. The
    ///   balancer moved the task for the load of the node it left, not for the task's own; a
    ///   change under that tolerance shifts a node's load by less than the balancer itself
    ///   leaves alone, and most of it is the move's own doing: the task no longer waits behind
    ///   the node it left. In the rig's
    ///   hotplug run a thread moved off a busy node at 0.37 CPUs read about 0.15 on the idle one;
    ///   that lifted its hold and its group's placement (stay-current-node) took it back two
    ///   decisions later. Whether it may come back is then judged by balance-stays (place.rs), at
    ///   the larger of its load now and when moved, once the hold ends.
    ///
    /// A placement's move keeps the first floor only: it is judged by whether the unit fits (its
    /// load against a node's room, with no tolerance band) and by what its locality is worth
    /// (in proportion to its load), so a change beyond the relative test and a tenth of a CPU
    /// can change that decision.
    pub(crate) fn change_floor(&self, model: &Model) -> f64 {
        let t = &model.tunables;
        if !self.by_balance {
            return t.min_group_cpu;
        }
        let cpus: usize = model.topo.nodes.iter().filter(|n| self.nodes.contains(n.id)).map(|n| n.cpus.len()).sum();
        t.min_group_cpu.max(t.imbalance * cpus as f64 * t.node_cpu_target)
    }
}

/// What the policy remembers of one process.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProcState {
    /// Start time (identity with the pid).
    pub(crate) starttime: u64,
    /// Whether the fork rule ran for it (or it was old when first seen).
    pub(crate) forked: bool,
    /// Process-wide CPU set this policy applied.
    pub(crate) own_cpus: Option<CpuSet>,
    /// Per-thread CPU sets this policy applied.
    pub(crate) own_task_cpus: BTreeMap<u32, CpuSet>,
    /// CPU sets of SetAffinity actions whose outcome was Refused or Vanished while the process
    /// lived on (newest last, at most [`TRIED_CPUS_KEPT`]): the host may have narrowed some of its
    /// threads before the error (a thread list read mid-way, a read error reported as Vanished),
    /// and a mask this policy tried is its own, never a foreign pin that would hold the process
    /// out of management for good.
    pub(crate) tried_cpus: Vec<CpuSet>,
    /// Last memory move (migrate, move ranges, interleave); the MoveRanges of one plan count as one
    /// move to all their nodes.
    pub(crate) mem_move: Option<Move>,
    /// Decision at which each range (by start address) was last moved by MoveRanges: a range
    /// moved within `hold_periods` is not moved again (threads on two nodes sampling a shared
    /// buffer would otherwise bounce its ranges between them).
    pub(crate) range_moves: BTreeMap<u64, u64>,
    /// Last actions, oldest first.
    pub(crate) journal: VecDeque<JournalEntry>,
    /// The shared-buffer spread applied to it (rule "shared-buffer-interleave"): the nodes and
    /// weights its memory is interleaved over and the CPU load at the time. While its load stays
    /// within `hold_load_change`, its threads keep their nodes and its memory keeps this spread
    /// (the same nodes and weights, so a budget-limited interleave continues, never reshuffles).
    pub(crate) shared_spread: Option<(Move, Vec<u32>)>,
    /// The nodes rule "launch-advice" gave it before it started, why, and when (host clock, ns;
    /// `launch.rs`).
    pub(crate) launch: Option<(NodeSet, Reason, u64)>,
    /// Decisions in a row, up to the last, at which its threads, within the advised nodes' CPUs,
    /// waited for them (rule launch-holds; `launch.rs` [`LAUNCH_WAIT_DECISIONS`]).
    pub(crate) launch_waits: u32,
}

/// The adaptive policy: fork spread, group placement on preferred nodes, weakest-first balancing,
/// memory follows CPU / CPU follows memory with hysteresis, per-class placement.
#[derive(Debug, Default)]
pub struct Adaptive {
    /// Decisions made so far.
    pub(crate) period: u64,
    /// Per process, by pid.
    pub(crate) procs: BTreeMap<u32, ProcState>,
    /// Last CPU move of each task.
    pub(crate) task_moves: BTreeMap<TaskKey, Move>,
    /// CPU demand recorded with each action of the last plan (same order), for the hold.
    pub(crate) last_loads: Vec<f64>,
    /// Per thread, the load recorded for a process-wide SetAffinity of the last plan
    /// (`Planner::task_hold_loads`).
    pub(crate) last_task_loads: BTreeMap<TaskKey, f64>,
    /// Whether the last plan saw a process for the first time or moved a young process's memory:
    /// its first-touched memory is following its threads, and the next decision comes after
    /// `first_touch_interval_ms`.
    pub(crate) first_touch_follow: bool,
    /// Processes that waited for the rates of new threads in the last decision (rule
    /// "wait-for-rates", `Planner::waiting`): they do not wait twice in a row.
    pub(crate) rate_waited: std::collections::BTreeSet<u32>,
    /// Processes whose pages the host is moving in the background (an action of theirs came back
    /// [`Outcome::Started`] and has not ended): pid -> start time. Rule "moves-in-flight": they get
    /// no new page action, and their holds (memory and threads) are kept fresh, until the move ends;
    /// the holds then run `hold_periods` from its end. Without it, the decisions made while a copy
    /// runs see the move half done (the access shares lag it by their smoothing): in the rig's
    /// 4-node numa01 the same move was asked again each step and refused, and once the 10-step
    /// hold ran out during a 2 s copy the process was sent to another node and its memory after
    /// it, twice (25,006 pages for one 32 MiB buffer, 90% local at 14.5 s).
    pub(crate) moving: BTreeMap<u32, u64>,
    /// For each thread of a process in [`Adaptive::moving`], the CPU demand it had when the move
    /// started (`place::reserved_demand`: a new thread's counts `new_thread_cpu`). Rule
    /// "stalled-by-own-move": while its pages move, a thread that touches them waits on them (state
    /// D in the rig's samples) and reads near idle; the plan counts it at the larger of its demand
    /// now and this (`Planner::demand_of`). Without it the node the memory goes to read idle for
    /// the copy's seconds: in the rig's race at 3d6dbf5 the balancer moved the other numa01
    /// process's main thread there in 5 of 6 numa01 repetitions, and out again once the workers
    /// woke (node load 1.19-1.37).
    pub(crate) stall_floor: BTreeMap<TaskKey, f64>,
    /// Processes whose background move ended since the last decision: their floors count in that
    /// one decision too, whose sample still holds the wait (the rates are over the period the copy
    /// ended in). Without it, in the rig subset after the rule came in, the other process's main
    /// thread was moved onto the node in the step that saw the move end, and off it 0.5-3 s later.
    pub(crate) stall_ended: std::collections::BTreeSet<u32>,
    /// Processes the host refused an action for in the last decisions that acted on them, by pid:
    /// (start time, refusals in a row, the decision before which it is not planned again). Rule
    /// refusal-backs-off: after n refusals in a row a process waits min(2^(n-1),
    /// `refused_backoff_max_decisions`) decisions (none after the first: a read that failed once
    /// is tried at once), out of the managed set meanwhile (its demand stays where it runs); an
    /// applied action of it ends the wait. Without it a refusal that never passes (a security
    /// module denying the move, numa_maps unreadable) was planned and journaled every decision
    /// and kept the loop from backing off (review helper-34).
    pub(crate) refusals: BTreeMap<u32, (u64, u32, u64)>,
    /// Page moves that moved (almost) nothing, by process and kind (rule futile-move-backs-off,
    /// `futile.rs`): the same move waits until the process's memory changes, its threads are
    /// placed elsewhere or a back-off ends.
    pub(crate) futile: futile::Futiles,
    /// Page moves the host runs in the background, by process and kind: (start time, the pages
    /// the host let it move, `Outcome::Started`), so the move is judged on that when it ends.
    pub(crate) started: BTreeMap<(u32, futile::MoveKind), (u64, u64)>,
    /// Launch advice given to processes not yet taken up, by pid (rule "launch-advice").
    pub(crate) promises: launch::Promises,
    /// Launch advice given without a pid, newest last.
    pub(crate) anonymous_promises: Vec<launch::Promise>,
}

impl Adaptive {
    /// A policy with no history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decisions made so far.
    pub fn periods(&self) -> u64 {
        self.period
    }

    /// Restarts the holds of `pid` (its memory move and its threads' moves) at this decision
    /// (rule "moves-in-flight").
    fn refresh_holds(&mut self, pid: u32) {
        let period = self.period;
        if let Some(st) = self.procs.get_mut(&pid) {
            if let Some(m) = st.mem_move.as_mut() {
                m.period = m.period.max(period);
            }
        }
        for (_, mv) in self.task_moves.range_mut(TaskKey { pid, tid: 0 }..=TaskKey { pid, tid: u32::MAX }) {
            mv.period = mv.period.max(period);
        }
    }

    /// The state of `pid` if it is the process the model knows (same start time).
    pub(crate) fn proc_state(&self, model: &Model, pid: u32) -> Option<&ProcState> {
        let p = model.procs.get(&pid)?;
        self.procs.get(&pid).filter(|s| s.starttime == p.starttime)
    }

    /// Whether someone other than this policy placed `pid` (the model's `pinned`, minus the CPU
    /// narrowing this policy did itself, on the process or on its parent before it forked).
    ///
    /// A child inherits its parent's CPU mask at fork: a shell this policy placed on node 1 starts
    /// every later command with node 1's CPUs, and those children would read as pinned by someone
    /// else (never managed, and still narrowed when the daemon exits, since it never recorded them).
    /// A child whose threads all carry a mask this policy set on its parent (its current or a tried
    /// one) and that has no explicit memory policy counts as placed by us.
    pub(crate) fn foreign_pinned(&self, model: &Model, pid: u32) -> bool {
        let Some(p) = model.procs.get(&pid) else { return true };
        if !p.pinned {
            return false;
        }
        if self.inherited_own_mask(model, pid) {
            return false;
        }
        let Some(st) = self.proc_state(model, pid) else { return true };
        if !st.has_own_masks() {
            return true;
        }
        // Every CPU placement may use (reserved ones left out: under `isolcpus=` every process's
        // default mask leaves the isolated CPUs out, and is no pin).
        let usable = model.topo.usable_cpus();
        // A mask of ours that the kernel cut to a confined process's cpuset (the cpuset narrowed
        // after the move, or a launch mask given before it was known) is still ours.
        let ours = |own: &CpuSet, allowed: &CpuSet| {
            own == allowed || p.confined.as_ref().is_some_and(|c| own.intersection(&c.cpus) == *allowed)
        };
        !p.tids.iter().all(|&tid| {
            let Some(t) = model.tasks.get(&TaskKey { pid, tid }) else { return true };
            let allowed: &CpuSet = &t.cpus_allowed;
            if usable.is_subset(allowed) || p.confined.as_ref().is_some_and(|c| *allowed == c.cpus) {
                return true;
            }
            st.own_task_cpus.get(&tid).or(st.own_cpus.as_ref()).is_some_and(|own| ours(own, allowed))
                || st.tried_cpus.iter().any(|tried| ours(tried, allowed))
        })
    }

    /// Whether every thread of `pid` runs under a CPU mask this policy set on its parent (whole
    /// process, one of its threads, or a tried set), and its memory carries no explicit policy: the narrowing came from
    /// us through fork, not from the program or an operator.
    fn inherited_own_mask(&self, model: &Model, pid: u32) -> bool {
        let Some(p) = model.procs.get(&pid) else { return false };
        if p.ppid == 0 || p.ppid == pid || p.mem_policy_pinned {
            return false;
        }
        let Some(parent) = self.proc_state(model, p.ppid) else { return false };
        let mut masks = parent.own_cpus.iter().chain(parent.own_task_cpus.values()).chain(parent.tried_cpus.iter());
        let usable = model.topo.usable_cpus();
        let allowed: Vec<&CpuSet> =
            p.tids.iter().filter_map(|&tid| model.tasks.get(&TaskKey { pid, tid })).map(|t| &*t.cpus_allowed).collect();
        let Some(first) = allowed.first() else { return false };
        !usable.is_subset(first) && allowed.iter().all(|a| a == first) && masks.any(|m| m == *first)
    }

    /// The shared-buffer spread of `pid` (nodes, weights) while it holds: the process is not
    /// pinned by someone else and its CPU load grew by at most `hold_load_change` since. A load
    /// that falls keeps the spread: the threads left still share the buffer, and chasing it to
    /// the last few of them (numa01's threads finishing one by one) would copy gigabytes for a
    /// process about to end.
    pub(crate) fn shared_spread(&self, model: &Model, pid: u32) -> Option<(&NodeSet, &[u32])> {
        let p = model.procs.get(&pid)?;
        let (mv, weights) = self.proc_state(model, pid)?.shared_spread.as_ref()?;
        let change = if mv.load > 0.0 { (p.cpu_rate - mv.load).max(0.0) / mv.load } else { f64::INFINITY };
        (change <= model.tunables.hold_load_change).then_some((&mv.nodes, weights.as_slice()))
    }

    /// Drops the state of processes the model no longer knows (exited, or pid reused).
    fn forget_gone(&mut self, model: &Model) {
        self.procs.retain(|pid, st| model.procs.get(pid).is_some_and(|p| p.starttime == st.starttime));
        let (now, hold) = (self.period, u64::from(model.tunables.hold_periods));
        for (&pid, st) in self.procs.iter_mut() {
            st.range_moves.retain(|_, at| now.saturating_sub(*at) < hold);
            // A thread this policy placed on its own that has exited (a pool's worker, a thread
            // per connection): its mask is kept as one of the process's tried masks (bounded), so
            // a child it forked before exiting is still recognised as under a mask of ours.
            // Without this a process that lives for weeks and keeps starting threads kept a mask
            // for every thread ever placed (review helper-33).
            let gone: Vec<u32> = st
                .own_task_cpus
                .keys()
                .copied()
                .filter(|&tid| !model.tasks.contains_key(&TaskKey { pid, tid }))
                .collect();
            for tid in gone {
                if let Some(mask) = st.own_task_cpus.remove(&tid) {
                    if st.own_cpus.as_ref() != Some(&mask) {
                        st.remember_tried(&mask);
                    }
                }
            }
        }
        // Only tasks of processes still known by their start time (a pid reused between two
        // decisions would inherit the old process's holds on its threads).
        let procs = &self.procs;
        self.task_moves.retain(|k, _| model.tasks.contains_key(k) && procs.contains_key(&k.pid));
        self.refusals.retain(|pid, (st, _, _)| model.procs.get(pid).is_some_and(|p| p.starttime == *st));
        for (pid, p) in &model.procs {
            self.procs.entry(*pid).or_insert_with(|| ProcState { starttime: p.starttime, ..ProcState::default() });
        }
    }

    fn journal(&mut self, model: &Model, action: &Action, outcome: Option<&Outcome>) {
        let keep = model.tunables.explain_actions_kept as usize;
        let period = self.period;
        if let Some(st) = self.procs.get_mut(&action.target.pid).filter(|s| s.starttime == action.target.starttime) {
            st.journal.push_back(JournalEntry {
                period,
                at_ns: model.now_ns,
                action: action.clone(),
                outcome: outcome.cloned(),
            });
            while st.journal.len() > keep {
                st.journal.pop_front();
            }
        }
    }

    /// Remembers the CPU set of a SetAffinity that was not applied (see `ProcState::tried_cpus`).
    /// Whether `pid` waits out refusals now (rule refusal-backs-off, [`Adaptive::refusals`]).
    pub(crate) fn refusal_waits(&self, model: &Model, pid: u32) -> bool {
        let Some(p) = model.procs.get(&pid) else { return false };
        self.refusals.get(&pid).is_some_and(|&(st, _, until)| st == p.starttime && self.period < until)
    }

    fn tried(&mut self, model: &Model, action: &Action) {
        let ActionKind::SetAffinity { cpus } = &action.kind else { return };
        let alive = model.procs.get(&action.target.pid).is_some_and(|p| p.starttime == action.target.starttime);
        let Some(st) =
            self.procs.get_mut(&action.target.pid).filter(|s| alive && s.starttime == action.target.starttime)
        else {
            return;
        };
        st.remember_tried(cpus);
    }

    /// Records an applied action: CPU sets and moves for the hold, the journal.
    fn record(&mut self, model: &Model, action: &Action, load: f64, task_loads: &BTreeMap<TaskKey, f64>) {
        let pid = action.target.pid;
        let period = self.period;
        let Some(p) = model.procs.get(&pid).filter(|p| p.starttime == action.target.starttime) else { return };
        match &action.kind {
            ActionKind::SetAffinity { cpus } => {
                let nodes = model.topo.nodes_of_cpus(cpus);
                let mv = Move {
                    nodes,
                    period,
                    load,
                    by_balance: action.reason.rule == "balance-weakest-first",
                    members: Arc::from([]),
                };
                // Each thread's group at the move, for hold-gains-member (one list per group).
                let mut lists: BTreeMap<Option<u64>, Arc<[u32]>> = BTreeMap::new();
                let mut members_of = |tid: u32| -> Arc<[u32]> {
                    let gid = model.groups.of_task.get(&TaskKey { pid, tid }).copied();
                    lists
                        .entry(gid)
                        .or_insert_with(|| {
                            let mut pids: Vec<u32> = gid
                                .and_then(|g| model.groups.groups.get(&g))
                                .map(|g| g.pids.clone())
                                .unwrap_or_default();
                            pids.push(pid);
                            pids.sort_unstable();
                            pids.dedup();
                            pids.into()
                        })
                        .clone()
                };
                // A process-wide mask covers several units: each thread's hold is its own unit's
                // load (task_hold_loads), the action's figure only for threads the plan did not see.
                let load_of = |tid: u32| match action.target.tid {
                    None => task_loads.get(&TaskKey { pid, tid }).copied().unwrap_or(load),
                    Some(_) => load,
                };
                let tids: Vec<u32> = match action.target.tid {
                    Some(tid) => vec![tid],
                    None => p.tids.clone(),
                };
                // The fork rule's placement is a first guess made before any signal exists, and
                // so is a standing order for new threads: neither starts a hold, so the group
                // rule may correct them on the first evidence.
                let first_guess =
                    action.reason.rule == "fork-spread" || action.reason.rule == standing::NEW_THREADS_RULE;
                if !first_guess {
                    for tid in &tids {
                        let members = members_of(*tid);
                        self.task_moves
                            .insert(TaskKey { pid, tid: *tid }, Move { load: load_of(*tid), members, ..mv.clone() });
                    }
                }
                if let Some(st) = self.procs.get_mut(&pid) {
                    // A standing order carried out placed the process as the fork rule would
                    // have: that rule leaves it to the decisions with rates from now on.
                    if action.reason.rule == standing::NEW_THREADS_RULE {
                        st.forked = true;
                    }
                    match action.target.tid {
                        Some(tid) => {
                            st.own_task_cpus.insert(tid, cpus.clone());
                        }
                        None => {
                            // The threads' own masks it replaces stay counted as this policy's
                            // (`tried_cpus`): until the next observation the model still shows a
                            // thread under one, and `explain` between two steps read it as
                            // "placed by someone else" (the rig's hotplug test, once).
                            for old in std::mem::take(&mut st.own_task_cpus).into_values() {
                                if old != *cpus {
                                    st.remember_tried(&old);
                                }
                            }
                            st.own_cpus = Some(cpus.clone());
                        }
                    }
                }
            }
            ActionKind::MigratePages { to, .. } | ActionKind::Interleave { nodes: to, .. } => {
                if let Some(st) = self.procs.get_mut(&pid) {
                    st.mem_move =
                        Some(Move { nodes: to.clone(), period, load, by_balance: false, members: Arc::from([]) });
                    if let ActionKind::Interleave { weights, .. } = &action.kind {
                        if action.reason.rule == memory::SHARED_RULE && st.shared_spread.is_none() {
                            st.shared_spread = Some((
                                Move { nodes: to.clone(), period, load, by_balance: false, members: Arc::from([]) },
                                weights.clone(),
                            ));
                        }
                    }
                }
            }
            ActionKind::MoveRanges { to, ranges } => {
                if let Some(st) = self.procs.get_mut(&pid) {
                    // The units of a split process move their ranges to several nodes in one
                    // plan: the move covers all of them (each unit's node counts as "memory moving
                    // here"), not only the last action's.
                    let mut nodes: NodeSet = std::iter::once(*to).collect();
                    if let Some(prev) = st.mem_move.as_ref().filter(|mv| mv.period == period) {
                        nodes = nodes.union(&prev.nodes);
                    }
                    st.mem_move = Some(Move { nodes, period, load, by_balance: false, members: Arc::from([]) });
                    for (start, _) in ranges {
                        st.range_moves.insert(*start, period);
                    }
                }
            }
        }
    }

    /// Explains what the policy believes about `pid` and what it did to it (see [`Explanation`]).
    /// `None` when the model does not know the process.
    pub fn explain(&self, model: &Model, pid: u32) -> Option<Explanation> {
        explain::explain(self, model, pid)
    }
}

/// Whether a plan keeps a young process's first touch under watch (rule "first-touch-cadence"):
/// it saw a new process (its threads have run for less than a period; the samples that tell
/// which thread uses which range come by the next decision) or it moves the memory of a process
/// younger than `new_process_age_ms`, first seen less than `first_touch_window_ms` ago, whose
/// threads work on slices of their own (their remaining ranges show up as they speed up; a
/// process moving under the shared budget gains nothing from shorter looks at the same rate:
/// numa01 on 2 nodes ran 0.3% longer with them).
/// Whether `pid` is younger than `new_process_age_ms` now but not (yet) worth settling.
fn young_but_not_worth(model: &Model, pid: u32) -> bool {
    model.procs.get(&pid).is_some_and(|p| young_now(model, p) && !looks_like_workload(model, p))
}

/// Whether `pid` is a new process worth settling: younger than `new_process_age_ms` now, and a
/// workload by the look of it: several threads, or `new_process_min_rss_mib` resident, or busy
/// (`min_group_cpu`; a first look has no CPU rate yet). Shells, probes and other short commands
/// (one idle thread, a few MiB) are not: they neither hold the decisions at the settle cadence
/// nor get the fork rule, unless they turn busy or grow while young.
pub(crate) fn young_and_worth(model: &Model, pid: u32) -> bool {
    model.procs.get(&pid).is_some_and(|p| young_now(model, p) && looks_like_workload(model, p))
}

/// Age now (at first sight plus the time since) under `new_process_age_ms`.
pub(crate) fn young_now(model: &Model, p: &numapilot_model::ProcView) -> bool {
    let age = p.age_ns(model.now_ns);
    age < model.tunables.new_process_age_ms.saturating_mul(1_000_000)
}

/// Several threads, `new_process_min_rss_mib` resident, or busy (`min_group_cpu`).
fn looks_like_workload(model: &Model, p: &numapilot_model::ProcView) -> bool {
    let t = &model.tunables;
    p.tids.len() > 1
        || p.rss_bytes >= t.new_process_min_rss_mib.saturating_mul(1 << 20)
        || p.cpu_rate >= t.min_group_cpu
}

fn first_touch_follow(planner: &place::Planner<'_>) -> bool {
    let m = planner.model;
    let window = m.tunables.first_touch_window_ms.saturating_mul(1_000_000);
    let fresh = |pid: u32| m.procs.get(&pid).is_some_and(|p| m.now_ns.saturating_sub(p.first_seen_ns) < window);
    !planner.new_procs.is_empty()
        || planner.actions.iter().any(|(a, _)| {
            !matches!(a.kind, ActionKind::SetAffinity { .. })
                && planner.young_slices.contains(&a.target.pid)
                && fresh(a.target.pid)
        })
}

impl Policy for Adaptive {
    fn name(&self) -> &'static str {
        "numapilot"
    }

    fn bookkeeping(&self, out: &mut Vec<(&'static str, usize)>) {
        out.push(("policy.refusals", self.refusals.len()));
        let per_proc = |f: fn(&ProcState) -> usize| self.procs.values().map(f).sum::<usize>();
        out.push(("policy.procs", self.procs.len()));
        out.push(("policy.own_task_cpus", per_proc(|p| p.own_task_cpus.len())));
        out.push(("policy.tried_cpus", per_proc(|p| p.tried_cpus.len())));
        out.push(("policy.range_moves", per_proc(|p| p.range_moves.len())));
        out.push(("policy.journal", per_proc(|p| p.journal.len())));
        out.push(("policy.task_moves", self.task_moves.len()));
        out.push(("policy.last_loads", self.last_loads.len()));
        out.push(("policy.last_task_loads", self.last_task_loads.len()));
        out.push(("policy.rate_waited", self.rate_waited.len()));
        out.push(("policy.moving", self.moving.len()));
        out.push(("policy.stall_floor", self.stall_floor.len()));
        out.push(("policy.stall_ended", self.stall_ended.len()));
        out.push(("policy.promises", self.promises.len() + self.anonymous_promises.len()));
        out.push(("policy.futile", self.futile.len()));
        out.push(("policy.started", self.started.len()));
    }

    /// CPU hotplug (rule cpu-hotplug-fallback): a thread whose CPUs all went offline is moved by
    /// the kernel (`select_fallback_rq`). Current kernels give it its cpuset's configured CPUs
    /// under cgroup v2 (`cpuset_cpus_allowed_fallback`; the root's are every CPU, offline ones
    /// included) or every possible CPU under v1, so its mask reads wide again once the CPUs are
    /// back. Older kernels gave the cpuset's effective CPUs, those online at that moment, and a
    /// v1 child cpuset has its CPUs trimmed by hotplug for good: then the mask stays narrower than
    /// the process's nodes once the CPUs return. For a process this policy had placed, that mask
    /// is the kernel's answer to ours, not a pin by the program or an operator: the CPUs online
    /// while some are offline count as one of its own masks (`tried_cpus`), so it is not "placed
    /// by someone else". A process that narrowed itself keeps its own mask and stays left alone.
    fn machine_changed(&mut self, model: &Model) {
        let online = model.topo.online_cpus();
        // Every CPU back: no mask to take for the kernel's (a full one is never narrow).
        if model.topo.cpus.iter().all(|c| online.contains(c.id)) {
            return;
        }
        for st in self.procs.values_mut().filter(|st| st.has_own_masks()) {
            st.remember_tried(&online);
        }
    }

    fn explain(&self, model: &Model, pid: u32) -> Option<Explanation> {
        explain::explain(self, model, pid)
    }

    fn next_interval_ns(&self, model: &Model) -> u64 {
        let t = &model.tunables;
        // A process seen for the first time has no CPU rate yet: one look at the settle cadence
        // tells a workload (busy, growing, threads) from a shell or probe that is idle or gone.
        let settling = model.procs.iter().any(|(&pid, p)| {
            (young_and_worth(model, pid) || p.first_seen_ns == model.now_ns) && !self.foreign_pinned(model, pid)
        });
        if settling && self.first_touch_follow {
            t.first_touch_interval_ms * 1_000_000
        } else if settling {
            t.settle_interval_ms * 1_000_000
        } else {
            t.interval_ms * 1_000_000
        }
    }

    fn advise_launch(
        &mut self,
        model: &Model,
        now_ns: u64,
        req: &LaunchRequest,
    ) -> Result<LaunchAdvice, NoLaunchAdvice> {
        self.launch(model, now_ns, req)
    }

    fn launch_promises(&self, now_ns: u64) -> Vec<String> {
        self.launch_promises_at(now_ns)
    }

    fn decide(&mut self, model: &Model) -> Plan {
        self.period += 1;
        self.forget_gone(model);
        self.note_futile_memory(model);
        self.launch_adopt(model);
        self.launch_watch(model);
        self.moving.retain(|pid, st| model.procs.get(pid).is_some_and(|p| p.starttime == *st));
        let (moving, ended) = (&self.moving, &self.stall_ended);
        self.stall_floor.retain(|k, _| moving.contains_key(&k.pid) || ended.contains(&k.pid));
        let moving: Vec<u32> = self.moving.keys().copied().collect();
        for pid in moving {
            self.refresh_holds(pid);
        }
        let mut planner = place::Planner::new(self, model);
        // The floors of moves that ended served this decision (stalled-by-own-move).
        let moving = &self.moving;
        self.stall_floor.retain(|k, _| moving.contains_key(&k.pid));
        self.stall_ended.clear();
        planner.fork(self);
        planner.place(self);
        balance::balance(&mut planner, self);
        planner.cpu_actions();
        memory::memory(&mut planner, self);
        self.first_touch_follow = first_touch_follow(&planner);
        self.rate_waited = planner.waiting.clone();
        let standing = planner.standing_orders(self);
        // hold-gains-member lifts a hold once per membership: the processes that lifted it
        // count as the move's members from now on, so if the fresh placement moves nothing (or its
        // move is not applied) the hold resumes; an applied move records its group anew.
        for (k, pids) in std::mem::take(&mut planner.hold_lifts) {
            if let Some(mv) = self.task_moves.get_mut(&k).filter(|mv| !mv.by_balance) {
                let mut all: Vec<u32> = mv.members.iter().chain(pids.iter()).copied().collect();
                all.sort_unstable();
                all.dedup();
                mv.members = all.into();
            }
        }
        let (mut plan, loads, task_loads) = planner.finish();
        plan.memory_onto_memory_nodes(&model.topo);
        plan.standing = standing;
        self.last_loads = loads;
        self.last_task_loads = task_loads;
        // Mark the processes the fork rule has now seen (placed or not) so it runs once; a young
        // process not yet worth it (small and idle) is looked at again while it is young, and so
        // is one pinned by someone else now (fork-after-pin): a program that first-touches under
        // an explicit memory policy and then drops it (the rig's bench with --force-node, seen
        // mid-touch once the daemon looked at new processes as they grew) was marked while the
        // fork rule could not touch it, and never got the rule once it could.
        let seen: Vec<u32> = model
            .procs
            .keys()
            .copied()
            .filter(|&pid| !young_but_not_worth(model, pid) && !self.foreign_pinned(model, pid))
            .collect();
        for pid in seen {
            if let Some(st) = self.procs.get_mut(&pid) {
                st.forked = true;
            }
        }
        plan
    }

    fn observe_finished(&mut self, model: &Model, finished: &[crate::FinishedMove]) {
        for f in finished {
            let t = f.action.target;
            if self.moving.get(&t.pid) == Some(&t.starttime) {
                self.moving.remove(&t.pid);
                self.stall_ended.insert(t.pid);
                // The holds run from the end of the move (rule "moves-in-flight").
                self.refresh_holds(t.pid);
            }
            // What the move did against what it asked (rule futile-move-backs-off).
            let allowance = futile::MoveKind::of(&f.action.kind)
                .and_then(|k| self.started.remove(&(t.pid, k)))
                .filter(|&(st, _)| st == t.starttime)
                .map(|(_, pages)| pages);
            self.judge_move(model, &f.action, &f.outcome, allowance, true);
        }
    }

    fn observe_outcomes(&mut self, model: &Model, plan: &Plan, outcomes: &[Outcome]) {
        let loads = std::mem::take(&mut self.last_loads);
        let task_loads = std::mem::take(&mut self.last_task_loads);
        for (i, action) in plan.actions.iter().enumerate() {
            let outcome = outcomes.get(i);
            let applied = matches!(
                outcome,
                Some(Outcome::Applied { .. }) | Some(Outcome::Partial { .. }) | Some(Outcome::Started { .. })
            );
            if let (Some(Outcome::Started { pages }), Some(kind)) = (outcome, futile::MoveKind::of(&action.kind)) {
                self.started.insert((action.target.pid, kind), (action.target.starttime, *pages));
            }
            if matches!(outcome, Some(Outcome::Started { .. })) {
                self.moving.insert(action.target.pid, action.target.starttime);
                if let Some(p) = model.procs.get(&action.target.pid).filter(|p| p.starttime == action.target.starttime)
                {
                    for &tid in &p.tids {
                        let k = TaskKey { pid: p.pid, tid };
                        if let Some(tv) = model.tasks.get(&k) {
                            let d = place::reserved_demand(model, tv);
                            let floor = self.stall_floor.entry(k).or_insert(0.0);
                            *floor = floor.max(d);
                        }
                    }
                }
            }
            let (pid, starttime) = (action.target.pid, action.target.starttime);
            if applied {
                self.refusals.remove(&pid);
            } else if matches!(outcome, Some(Outcome::Refused { .. })) {
                let max = u64::from(model.tunables.refused_backoff_max_decisions.max(1));
                let n = match self.refusals.get(&pid) {
                    Some(&(st, n, _)) if st == starttime => n.saturating_add(1),
                    _ => 1,
                };
                let wait = (1u64 << (n - 1).min(62)).min(max);
                self.refusals.insert(pid, (starttime, n, self.period.saturating_add(wait)));
            }
            if applied {
                self.record(model, action, loads.get(i).copied().unwrap_or(0.0), &task_loads);
                if let Some(o) = outcome {
                    self.judge_move(model, action, o, None, false);
                }
            } else if outcome.is_some() {
                // Refused or Vanished: no hold starts and nothing is forgotten; while the model
                // still has the process, the next decision plans it again (a read error may pass,
                // a "vanished" process that is still there is managed as before).
                self.tried(model, action);
            }
            self.journal(model, action, outcome);
        }
    }
}
