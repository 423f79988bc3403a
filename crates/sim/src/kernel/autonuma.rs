//! The AutoNUMA model: the kernel's automatic NUMA balancing (`kernel.numa_balancing = 1`) as a
//! deterministic state machine over simulated time.
//!
//! # Problem
//!
//! The `autonuma` baseline of `numapilot sim` must behave like Linux's NUMA balancing, so that
//! "numapilot versus the kernel" is a comparison with the kernel's real algorithm and not with a
//! straw man. The algorithm lives in `kernel/sched/fair.c` (Linux 6.x: `task_numa_work`,
//! `task_numa_fault`, `task_numa_placement`, `task_numa_group`, `should_numa_migrate_memory`,
//! `task_numa_migrate`, `update_task_scan_period`) and `mm/memory.c` (`do_numa_page`). This module
//! is our own model of it; every fact and constant names the function it comes from.
//!
//! # Approach
//!
//! Memory is tracked in regions (2 MiB by default: one transparent huge page, one hinting fault per
//! region and arming, `pages` = 512 base pages of 4 KiB per fault, as `do_huge_pmd_numa_page` does).
//!
//! ```text
//!  epoch k                                                       epoch k+1
//!  ────────────────────────────────────────────────────────────────────────────────────────────
//!  simulator runs threads ──> AutoNuma::step(now, view)
//!                              1. sync tasks (new: scan period = scan_delay; gone: leave group)
//!                              2. armed regions accessed this epoch fault once each:
//!                                   accessor drawn by access weight (P(task) ~ n_task / n_total)
//!                                   should_numa_migrate_memory: last_cpupid two-stage filter,
//!                                     private -> migrate, shared -> group 3/4 hysteresis
//!                                   task_numa_fault: private/shared by last accessor, numa_group
//!                                     join (smaller joins bigger), fault buffers per node
//!                                   every migrate_retry: task_numa_placement (decay /2 once per
//!                                     full scan pass, preferred node = max (group) faults,
//!                                     scan period adaptation) + task_numa_migrate (move / swap)
//!                              3. per-task runtime ticks: when a task's runtime passed its scan
//!                                 period and the mm's next_scan is due, arm the next scan_size
//!                                 worth of resident regions (the window advances, wraps, seq++)
//!                          <── EpochActions { page migrations, task moves/swaps, hint faults }
//!  simulator applies them (with their cost) ─────────────────────────────────────────────────>
//! ```
//!
//! # Units and terms
//!
//! Time in ns (`_ns`), kernel tunables in ms (`_ms`) as in `/proc/sys/kernel/numa_balancing_*`;
//! fault statistics in base pages (4 KiB) like the kernel's `numa_faults[]`; nodes as dense indexes
//! `0..nr_nodes` (the simulator maps kernel ids). A region is "armed" when the scanner has made it
//! PROT_NONE (`change_prot_numa`) and it has not faulted since. `last_cpupid` of a region is the
//! (thread, CPU, node) of the last hinting fault on it (`folio_xchg_last_cpupid`), kept here because
//! only NUMA balancing writes it.
//!
//! # Limits (what is not modelled)
//!
//! - Topology type `NUMA_DIRECT` only: `score_nearby_nodes` is 0 and `preferred_group_nid` returns
//!   the max-faults node, which is exact on 2-node and fully connected machines; on glueless-mesh and
//!   backplane machines the kernel also scores nearby nodes (not modelled).
//! - One fault per armed region (THP-sized sampling); 4 KiB-granular partial faults are not drawn.
//! - A region shared between processes is armed once (by its owner mm's scanner) rather than once
//!   per mapping; its faults carry `TNF_SHARED` when the region says it is shared.
//! - Per-VMA access-PID filtering (`vma_is_accessed`) and the per-VMA scan delay are not modelled
//!   (the simulator has one VMA-like range per region list); memory tiering mode is not modelled.
//! - Node load for task placement is counted in running tasks (each task's load = 1024, capacity
//!   = 1024 per CPU) instead of PELT averages; `numa_classify` uses task counts only.
//! - The scan's own CPU cost (the 32x runtime rule at the end of `task_numa_work`) is not charged.
//! - Armed regions found untouched are looked at again on an exponential back-off (at most
//!   `ARMED_RECHECK_MAX_EPOCHS` epochs) rather than every epoch: a cold region that turns hot
//!   faults a little late. Faults on hot memory are unaffected.
//!
//! # Integration
//!
//! The simulator (sim-core, `engine.rs`) owns machine, scheduler and memory; this model only decides.
//! Per epoch:
//! 1. build a value implementing [`AutoNumaView`] (threads with where they ran and their CPU time,
//!    regions with their node, and who accessed an armed region this epoch), call
//!    [`AutoNuma::step`] (or the split form [`AutoNuma::begin_epoch`] + [`AutoNuma::fault`] +
//!    [`AutoNuma::take_actions`] for an engine that draws the faulting thread itself);
//! 2. apply [`EpochActions::migrations`] (move the region, charge the migration cost; if the
//!    target node is full call [`AutoNuma::migration_failed`]), apply [`EpochActions::task_moves`]
//!    (move: to an idle allowed CPU of `to_node`; swap: exchange the two threads' CPUs), charge a
//!    hinting-fault cost per [`EpochActions::faults`] entry;
//! 3. the load balancer consults [`AutoNuma::preferred_node`] and does not move a thread off its
//!    preferred node when another candidate exists (the kernel's `migrate_degrades_locality`),
//!    otherwise it undoes every NUMA move;
//! 4. `/proc/PID/task/TID/sched` takes its NUMA lines from [`AutoNuma::sched_numa_block`] (or the
//!    fields of [`AutoNuma::task_stats`]), `/proc/vmstat` its `numa_*` counters from
//!    [`AutoNuma::counters`]; a write to `/proc/sys/kernel/numa_balancing` (a policy action)
//!    must reach [`AutoNuma::set_enabled`].
//!
//! # Calibration (issue 3, section 6; `tests/autonuma_calibration.rs`)
//!
//! No parameter of this model was fitted: the tunables are the kernel's defaults. On
//! `autonuma-2s12c-16g` at full work scale the autonuma/default runtime ratios came out (seed 1;
//! published in brackets, A. Arcangeli 2012): numa01 0.649 (0.68), numa01_THREAD_ALLOC 0.645
//! (0.67), numa02 0.655 (0.70), all within the 20% asked. numa01 depends on the seed (0.650-0.656
//! over seeds 1-5, converged after 8-17 s): it starts pseudo-interleaved (each group's memory
//! split about 4:3 by the 3/4 hysteresis, threads on both nodes) until swaps break the symmetry.
//! Before the scheduler's ties were drawn from the seed (fork placement, balancer; see
//! `sched::Tie`) every seed placed alike, the symmetry lasted 12 s to 120 s and seed 1 gave 0.735.
//! The slice tests converge within 3 s and come out at the hard-bind ratio, a little better than
//! 2012's AutoNUMA, whose knuma_scand passed over memory every 10 s: were the ratios too low, the
//! parameter to change is `scan_period_min_ms` (10000 mimics the 2012 scan pass), not the
//! algorithm.

use std::collections::BTreeMap;

/// A thread id (simulated TID).
pub type Tid = u32;
/// A process id (simulated PID; one address space, the kernel's `mm`).
pub type Pid = u32;

/// Base page size the statistics count in, bytes.
pub const BASE_PAGE_BYTES: u64 = 4096;

/// `MAX_SCAN_WINDOW`, MB/s: never scan more PTEs than this per second (fair.c, `task_scan_min`).
const MAX_SCAN_WINDOW_MB: u64 = 2560;
/// `NUMA_PERIOD_SLOTS`: the scan period is adapted in tenths (fair.c, `update_task_scan_period`).
const NUMA_PERIOD_SLOTS: i64 = 10;
/// `NUMA_PERIOD_THRESHOLD`: aim for 70% local / private faults (fair.c, `update_task_scan_period`).
const NUMA_PERIOD_THRESHOLD: i64 = 7;
/// `ACTIVE_NODE_FRACTION`: a node with more than 1/3 of the max CPU faults is "active" in a group's
/// pseudo-interleave set; 3x the source's CPU faults lets memory move at once (fair.c).
const ACTIVE_NODE_FRACTION: i64 = 3;
/// `SMALLIMP`: task moves/swaps improving the weight by less than this (of 1998) are refused, so
/// tasks do not ping-pong for nothing (fair.c, `task_numa_compare`).
const SMALLIMP: i64 = 30;
/// `NUMA_IMBALANCE_MIN`: a lightly loaded destination may take up to 2 extra tasks (fair.c,
/// `adjust_numa_imbalance`), so a pair of communicating tasks can stay together.
const NUMA_IMBALANCE_MIN: i64 = 2;
/// Early-lifetime window: private or first faults migrate immediately while the task's scan
/// sequence is at most 4, "two full passes of the multi-stage test" (fair.c,
/// `should_numa_migrate_memory`).
const EARLY_SCAN_SEQ: u64 = 4;
/// `LOAD_AVG_MAX`: the runtime/period stand-in before a task's first placement (fair.c,
/// `numa_get_avg_runtime`, which uses the PELT sum over its maximum).
const LOAD_AVG_MAX: u64 = 47742;
/// Load of one running task and capacity of one CPU (`NICE_0_LOAD` / `SCHED_CAPACITY_SCALE`).
const TASK_LOAD: i64 = 1024;
/// Modelling shortcut, not a kernel constant: an armed region found untouched is looked at again
/// after 1, 2, 4, ... epochs, at most this many (256 epochs = 2.56 s at 10 ms epochs, below the
/// 60 s maximum scan period). The kernel pays nothing for an idle PROT_NONE page; polling every armed
/// cold region every epoch made the 1 TB VM mix 25x slower (72 s wall instead of 3), a 64-epoch cap
/// still 5x. Cost: a cold region that turns hot faults up to this many epochs late.
const ARMED_RECHECK_MAX_EPOCHS: u32 = 256;
/// Index of shared faults in a `[shared, private]` pair (fair.c `task_faults_idx`, priv = 0/1).
const SHARED: usize = 0;
/// Index of private faults in a `[shared, private]` pair.
const PRIVATE: usize = 1;

/// The tunables of `/proc/sys/kernel/numa_balancing*`, with the kernel's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoNumaParams {
    /// `kernel.numa_balancing`: off means no scanning, no faults, no moves at all.
    pub enabled: bool,
    /// `numa_balancing_scan_delay_ms`, default 1000 (fair.c `sysctl_numa_balancing_scan_delay`):
    /// first scan of a new address space after this much time, so short-lived tasks never pay.
    pub scan_delay_ms: u64,
    /// `numa_balancing_scan_period_min_ms`, default 1000: time to scan a whole task at the fastest,
    /// divided by the number of scan windows of its RSS (`task_scan_min`).
    pub scan_period_min_ms: u64,
    /// `numa_balancing_scan_period_max_ms`, default 60000: slowest whole-task scan (`task_scan_max`).
    pub scan_period_max_ms: u64,
    /// `numa_balancing_scan_size_mb`, default 256: memory armed per scan (`task_numa_work`).
    pub scan_size_mb: u64,
    /// Region size of the simulator's memory model, bytes (default 2 MiB = one THP).
    pub region_bytes: u64,
    /// `sd->imb_numa_nr` of the lowest NUMA domain: the number of busy CPUs below which a NUMA
    /// imbalance is tolerated (topology.c: number of LLCs under the NUMA domain; default 2 for a
    /// 2-node machine with one LLC per node).
    pub imb_numa_nr: u32,
    /// Seed of the accessor draw (which of a region's accessors takes its hinting fault).
    pub seed: u64,
}

impl Default for AutoNumaParams {
    fn default() -> Self {
        Self {
            enabled: true,
            scan_delay_ms: 1000,
            scan_period_min_ms: 1000,
            scan_period_max_ms: 60000,
            scan_size_mb: 256,
            region_bytes: 2 << 20,
            imb_numa_nr: 2,
            seed: 0x6e75_6d61_7069_6c6f,
        }
    }
}

/// One thread as the simulator saw it during the epoch that just ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskRun {
    /// Thread id.
    pub tid: Tid,
    /// Process (address space) it belongs to.
    pub pid: Pid,
    /// CPU it ran on last (kernel id; only compared for equality).
    pub cpu: u32,
    /// Dense node index of that CPU.
    pub node: usize,
    /// CPU time it got in this epoch, ns (0 when it waited or slept the whole epoch).
    pub ran_ns: u64,
    /// Nodes its affinity allows, bit i = dense node i (`u64::MAX` = all).
    pub allowed_nodes: u64,
}

/// A resident region as the simulator holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionState {
    /// Dense node index its memory is on.
    pub node: usize,
    /// False when a memory policy pins it (bind/interleave/...): the kernel's scanner skips such
    /// ranges (`vma_policy_mof`) and `mpol_misplaced` never moves them.
    pub movable: bool,
    /// Mapped by more than one process (`TNF_SHARED`): lets tasks of different processes group.
    pub shared: bool,
}

/// What the model reads from the simulator each epoch. Implemented by sim-core over its own state.
pub trait AutoNumaView {
    /// Every live thread, any order (the model sorts by tid). A thread missing from the list is
    /// taken as exited and its statistics are dropped (`task_numa_free`).
    fn tasks(&self) -> &[TaskRun];
    /// Number of regions of process `pid`'s address space, in address order (0 if unknown).
    fn region_count(&self, pid: Pid) -> usize;
    /// Region `idx` of `pid`, `None` while not resident (never touched).
    fn region(&self, pid: Pid, idx: usize) -> Option<RegionState>;
    /// Resident memory of `pid`, bytes (`get_mm_rss`), for the number of scan windows.
    fn rss_bytes(&self, pid: Pid) -> u64;
    /// Threads that accessed region `idx` of `pid` during this epoch with a weight each (access
    /// count, bytes, any unit > 0), appended to `out`; called only for armed regions.
    fn accessors(&self, pid: Pid, idx: usize, out: &mut Vec<(Tid, u64)>);
    /// Whether dense node `node` has memory (`N_MEMORY`). A thread running on a memory-less node
    /// (CPUs only) never pulls a page there: the kernel's `migrate_misplaced_folio` allocates on
    /// the target node only (`__GFP_THISNODE`), which has no pages to give. Default: every node
    /// has memory.
    fn node_has_memory(&self, node: usize) -> bool {
        let _ = node;
        true
    }
}

/// A page (region) migration decided by a hinting fault (`migrate_misplaced_folio`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageMigration {
    /// Owner process of the region.
    pub pid: Pid,
    /// Region index.
    pub region: usize,
    /// Node it was on.
    pub from: usize,
    /// Node it goes to (the faulting thread's node).
    pub to: usize,
    /// Base pages moved.
    pub pages: u64,
    /// Thread whose fault moved it.
    pub tid: Tid,
}

/// A task placement decided by `task_numa_migrate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NumaMove {
    /// Thread to move.
    pub tid: Tid,
    /// Node it runs on now.
    pub from_node: usize,
    /// Node to run it on.
    pub to_node: usize,
    /// `Some(t)`: swap with thread `t`, which goes to `from_node` (`migrate_swap`); `None`: a move to
    /// an idle CPU of `to_node` (`migrate_task_to`).
    pub swap_with: Option<Tid>,
}

/// One NUMA hinting fault (for the simulator's fault-cost accounting and traces).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HintFault {
    /// Faulting thread.
    pub tid: Tid,
    /// Owner process of the region.
    pub pid: Pid,
    /// Region index.
    pub region: usize,
    /// Node the memory was on when it faulted.
    pub mem_node: usize,
    /// Node the thread ran on.
    pub cpu_node: usize,
    /// Counted private (same last accessor, or first access, or false sharing across processes).
    pub private: bool,
    /// Whether the region migrated to `cpu_node` on this fault.
    pub migrated: bool,
}

/// What one epoch decided.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EpochActions {
    /// Region migrations, in decision order.
    pub migrations: Vec<PageMigration>,
    /// Task moves and swaps, in decision order.
    pub task_moves: Vec<NumaMove>,
    /// Hinting faults taken.
    pub faults: Vec<HintFault>,
}

/// System-wide counters, as `/proc/vmstat` names them (and the schedstat task move counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// `numa_pte_updates`: base pages made PROT_NONE by the scanner.
    pub numa_pte_updates: u64,
    /// `numa_hint_faults`: hinting faults taken.
    pub numa_hint_faults: u64,
    /// `numa_hint_faults_local`: of which on memory already on the thread's node.
    pub numa_hint_faults_local: u64,
    /// `numa_pages_migrated`: base pages migrated by NUMA balancing.
    pub numa_pages_migrated: u64,
    /// `numa_task_migrated`: tasks moved to an idle CPU of their preferred node.
    pub numa_task_migrated: u64,
    /// `numa_task_swapped`: task pairs swapped.
    pub numa_task_swapped: u64,
}

/// Faults of one thread on one node, as `/proc/PID/sched` prints them (`print_numa_stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeFaults {
    /// Decayed private memory faults of the task on this node, base pages.
    pub task_private: u64,
    /// Decayed shared memory faults of the task on this node.
    pub task_shared: u64,
    /// Decayed private memory faults of the task's numa group on this node (0 without a group).
    pub group_private: u64,
    /// Decayed shared memory faults of the group on this node.
    pub group_shared: u64,
}

/// The NUMA-balancing state of one thread, for `/proc/PID/task/TID/sched`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskNumaStats {
    /// Thread id.
    pub tid: Tid,
    /// Process id.
    pub pid: Pid,
    /// `numa_preferred_nid` (dense index; `None` prints as -1).
    pub numa_preferred_nid: Option<usize>,
    /// `numa_group_id` (0 = no group; otherwise the tid of the group's creator).
    pub numa_group_id: Tid,
    /// `numa_pages_migrated`: base pages this thread's faults migrated.
    pub numa_pages_migrated: u64,
    /// `total_numa_faults`: decayed memory faults over all nodes.
    pub total_numa_faults: u64,
    /// `numa_scan_seq` of the thread (the mm's at its last placement).
    pub numa_scan_seq: u64,
    /// `mm->numa_scan_seq`: full scan passes over the thread's address space.
    pub mm_numa_scan_seq: u64,
    /// `numa_scan_period`, ms.
    pub numa_scan_period_ms: u64,
    /// `numa_faults` per node, dense index.
    pub numa_faults: Vec<NodeFaults>,
    /// Times this thread was moved by NUMA placement.
    pub numa_task_migrated: u64,
    /// Times this thread was swapped by NUMA placement (either side).
    pub numa_task_swapped: u64,
}

/// Last hinting-fault accessor of a region (`last_cpupid`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cpupid {
    tid: Tid,
    cpu: u32,
    node: usize,
}

#[derive(Debug, Clone)]
struct Task {
    pid: Pid,
    /// Node/CPU the decisions see (updated at once by our own moves).
    node: usize,
    cpu: u32,
    /// Node it ran on in the epoch being processed (faults are counted there).
    ran_node: usize,
    ran_cpu: u32,
    allowed: u64,
    runnable: bool,
    runtime_ns: u64,
    node_stamp_ns: u64,
    scan_period_ms: u64,
    scan_period_max_ms: u64,
    scan_seq: u64,
    preferred: Option<usize>,
    /// `[shared, private]` per node: decayed memory faults, CPU faults, and this period's buffers.
    mem: Vec<[i64; 2]>,
    cpu_faults: Vec<[i64; 2]>,
    membuf: Vec<[i64; 2]>,
    cpubuf: Vec<[i64; 2]>,
    total_faults: i64,
    has_faults: bool,
    /// `numa_faults_locality`: [remote, local, failed migrations], pages.
    locality: [u64; 3],
    migrate_retry_ns: u64,
    pages_migrated: u64,
    group: Option<Tid>,
    last_placement_ns: Option<u64>,
    last_runtime_ns: u64,
    moved: u64,
    swapped: u64,
}

#[derive(Debug, Clone)]
struct Group {
    nr_tasks: u32,
    mem: Vec<[i64; 2]>,
    cpu: Vec<[i64; 2]>,
    total_faults: i64,
    active_nodes: u32,
    max_faults_cpu: i64,
}

#[derive(Debug, Clone, Default)]
struct Mm {
    next_scan_ns: u64,
    scan_seq: u64,
    scan_offset: usize,
    armed: Vec<bool>,
    /// Armed regions by the epoch at which to look for an access next, with their current
    /// back-off (epochs): faults cost O(regions due), not O(armed) or O(regions) per epoch.
    armed_due: BTreeMap<u64, Vec<(usize, u32)>>,
    last: Vec<Option<Cpupid>>,
}

/// Per-node occupancy used by the placement search.
#[derive(Debug, Clone, Copy, Default)]
struct NodeStats {
    nr_running: i64,
    weight: i64,
}

impl NodeStats {
    fn load(&self) -> i64 {
        self.nr_running * TASK_LOAD
    }
    fn capacity(&self) -> i64 {
        self.weight * TASK_LOAD
    }
    /// `numa_classify` on task counts: spare below one task per CPU.
    fn has_spare(&self) -> bool {
        self.nr_running < self.weight
    }
}

/// SplitMix64: a small deterministic generator (Steele, Lea, Flood 2014).
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// The AutoNUMA model of a whole machine.
#[derive(Debug, Clone)]
pub struct AutoNuma {
    params: AutoNumaParams,
    cpus_per_node: Vec<u32>,
    tasks: BTreeMap<Tid, Task>,
    mms: BTreeMap<Pid, Mm>,
    groups: BTreeMap<Tid, Group>,
    counters: Counters,
    rng: SplitMix64,
    /// Node occupancy and the thread "current" on each CPU, rebuilt each epoch, updated by moves.
    occupancy: Vec<NodeStats>,
    curr: BTreeMap<u32, Tid>,
    /// CPUs already picked by a NUMA move this epoch (`rq->numa_migrate_on`).
    migrate_on: Vec<u32>,
    now_ns: u64,
    actions: EpochActions,
    /// Resident bytes per mm, read once per epoch for the scan-window arithmetic.
    mm_rss: BTreeMap<Pid, u64>,
    /// Regions armed by the current `begin_epoch`.
    newly_armed: Vec<(Pid, usize)>,
    /// Number of `step` / `begin_epoch` calls so far.
    epoch: u64,
    /// Per dense node: has memory (refreshed from the view every epoch); a page never migrates to
    /// a node without.
    has_memory: Vec<bool>,
}

fn ms_to_ns(ms: u64) -> u64 {
    ms.saturating_mul(1_000_000)
}

fn has_node(mask: u64, node: usize) -> bool {
    node >= 64 || mask & (1u64 << node) != 0
}

impl AutoNuma {
    /// A model for a machine with `cpus_per_node[i]` CPUs on dense node `i`.
    pub fn new(params: AutoNumaParams, cpus_per_node: Vec<u32>) -> Self {
        let rng = SplitMix64(params.seed);
        let n = cpus_per_node.len();
        Self {
            params,
            cpus_per_node,
            tasks: BTreeMap::new(),
            mms: BTreeMap::new(),
            groups: BTreeMap::new(),
            counters: Counters::default(),
            rng,
            occupancy: vec![NodeStats::default(); n],
            curr: BTreeMap::new(),
            migrate_on: Vec::new(),
            now_ns: 0,
            actions: EpochActions::default(),
            mm_rss: BTreeMap::new(),
            newly_armed: Vec::new(),
            epoch: 0,
            has_memory: vec![true; n],
        }
    }

    /// The tunables in force.
    pub fn params(&self) -> &AutoNumaParams {
        &self.params
    }

    /// `/proc/sys/kernel/numa_balancing`: switching off disarms every region and stops all activity;
    /// switching on restarts each address space's scan after the scan delay.
    pub fn set_enabled(&mut self, on: bool) {
        if on && !self.params.enabled {
            let at = self.now_ns + ms_to_ns(self.params.scan_delay_ms);
            for mm in self.mms.values_mut() {
                mm.next_scan_ns = at;
            }
        }
        if !on {
            for mm in self.mms.values_mut() {
                mm.armed.iter_mut().for_each(|a| *a = false);
                mm.armed_due.clear();
            }
        }
        self.params.enabled = on;
    }

    /// Whether balancing is on.
    pub fn enabled(&self) -> bool {
        self.params.enabled
    }

    /// System-wide counters so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Preferred node of a thread (`numa_preferred_nid`), for the load balancer.
    pub fn preferred_node(&self, tid: Tid) -> Option<usize> {
        self.tasks.get(&tid).and_then(|t| t.preferred)
    }

    /// Whether region `idx` of `pid` is armed (PROT_NONE, waiting for its hinting fault).
    pub fn is_armed(&self, pid: Pid, idx: usize) -> bool {
        self.mms.get(&pid).and_then(|m| m.armed.get(idx).copied()).unwrap_or(false)
    }

    /// Full-pass counter of `pid`'s scanner (`mm->numa_scan_seq`).
    pub fn mm_scan_seq(&self, pid: Pid) -> Option<u64> {
        self.mms.get(&pid).map(|m| m.scan_seq)
    }

    /// The thread's NUMA statistics, as `/proc/PID/task/TID/sched` shows them; `None` for a thread
    /// the model has not seen.
    pub fn task_stats(&self, tid: Tid) -> Option<TaskNumaStats> {
        let t = self.tasks.get(&tid)?;
        let g = t.group.and_then(|gid| self.groups.get(&gid));
        let numa_faults = (0..self.nodes())
            .map(|n| NodeFaults {
                task_private: t.mem[n][PRIVATE].max(0) as u64,
                task_shared: t.mem[n][SHARED].max(0) as u64,
                group_private: g.map_or(0, |g| g.mem[n][PRIVATE].max(0) as u64),
                group_shared: g.map_or(0, |g| g.mem[n][SHARED].max(0) as u64),
            })
            .collect();
        Some(TaskNumaStats {
            tid,
            pid: t.pid,
            numa_preferred_nid: t.preferred,
            numa_group_id: t.group.unwrap_or(0),
            numa_pages_migrated: t.pages_migrated,
            total_numa_faults: t.total_faults.max(0) as u64,
            numa_scan_seq: t.scan_seq,
            mm_numa_scan_seq: self.mms.get(&t.pid).map_or(0, |m| m.scan_seq),
            numa_scan_period_ms: t.scan_period_ms,
            numa_faults,
            numa_task_migrated: t.moved,
            numa_task_swapped: t.swapped,
        })
    }

    /// The NUMA block of `/proc/PID/task/TID/sched` for thread `tid`, byte for byte as
    /// `sched_show_numa` / `print_numa_stats` (kernel/sched/debug.c) print it: `node_ids` are the
    /// kernel ids of the dense nodes, `current_node` the kernel id of the node it runs on.
    pub fn sched_numa_block(&self, tid: Tid, node_ids: &[u32], current_node: u32) -> Option<String> {
        let st = self.task_stats(tid)?;
        let mut out = String::new();
        let field = |out: &mut String, name: &str, v: i64| out.push_str(&format!("{name:<45}:{v:>21}\n"));
        field(&mut out, "mm->numa_scan_seq", st.mm_numa_scan_seq as i64);
        field(&mut out, "numa_pages_migrated", st.numa_pages_migrated as i64);
        let pref = st.numa_preferred_nid.and_then(|n| node_ids.get(n)).map_or(-1, |&id| id as i64);
        field(&mut out, "numa_preferred_nid", pref);
        field(&mut out, "total_numa_faults", st.total_numa_faults as i64);
        out.push_str(&format!("current_node={current_node}, numa_group_id={}\n", st.numa_group_id));
        for (i, f) in st.numa_faults.iter().enumerate() {
            let id = node_ids.get(i).copied().unwrap_or(i as u32);
            out.push_str(&format!(
                "numa_faults node={id} task_private={} task_shared={} group_private={} group_shared={}\n",
                f.task_private, f.task_shared, f.group_private, f.group_shared
            ));
        }
        Some(out)
    }

    /// The simulator could not carry out `m` (target node full): undo its counting and record a
    /// failed migration, which slows the thread's scanning (`TNF_MIGRATE_FAIL`).
    pub fn migration_failed(&mut self, m: &PageMigration) {
        self.counters.numa_pages_migrated = self.counters.numa_pages_migrated.saturating_sub(m.pages);
        if let Some(t) = self.tasks.get_mut(&m.tid) {
            t.pages_migrated = t.pages_migrated.saturating_sub(m.pages);
            t.locality[2] += m.pages;
        }
    }

    fn nodes(&self) -> usize {
        self.cpus_per_node.len()
    }

    fn region_pages(&self) -> u64 {
        (self.params.region_bytes / BASE_PAGE_BYTES).max(1)
    }

    /// One epoch ending at `now_ns`, standalone form: sync threads, one hinting fault per armed
    /// region that was accessed (accessor drawn by weight with the model's seeded generator), then
    /// the scanners. Returns what the simulator must apply.
    pub fn step(&mut self, now_ns: u64, view: &dyn AutoNumaView) -> EpochActions {
        self.now_ns = now_ns;
        self.epoch += 1;
        self.actions = EpochActions::default();
        self.sync_tasks(view);
        if !self.params.enabled {
            return std::mem::take(&mut self.actions);
        }
        self.take_faults(view);
        self.run_scanners(view);
        std::mem::take(&mut self.actions)
    }

    /// Split form for an engine that delivers faults itself: sync threads and run the scanners.
    /// Returns the regions armed by this call, `(pid, idx)` in scan order; the engine delivers one
    /// [`AutoNuma::fault`] for each armed region that is touched later.
    pub fn begin_epoch(&mut self, now_ns: u64, view: &dyn AutoNumaView) -> Vec<(Pid, usize)> {
        self.now_ns = now_ns;
        self.epoch += 1;
        self.sync_tasks(view);
        if !self.params.enabled {
            return Vec::new();
        }
        self.newly_armed.clear();
        self.run_scanners(view);
        std::mem::take(&mut self.newly_armed)
    }

    /// Split form: a hinting fault of thread `tid` running on `cpu` (node `cpu_node`) on armed
    /// region `idx` of `pid`. Disarms the region and returns the node to migrate it to, if any.
    /// Task moves and swaps decided meanwhile accumulate until [`AutoNuma::take_actions`].
    #[allow(clippy::too_many_arguments)]
    pub fn fault(
        &mut self,
        now_ns: u64,
        tid: Tid,
        pid: Pid,
        idx: usize,
        region: RegionState,
        cpu: u32,
        cpu_node: usize,
    ) -> Option<usize> {
        self.now_ns = now_ns;
        if !self.params.enabled || !self.tasks.contains_key(&tid) || cpu_node >= self.nodes() {
            return None;
        }
        let mm = self.mms.get_mut(&pid)?;
        if mm.armed.len() <= idx {
            mm.armed.resize(idx + 1, false);
            mm.last.resize(idx + 1, None);
        }
        // A stale entry in armed_due is skipped when it comes due (the region is no longer armed).
        mm.armed[idx] = false;
        self.hint_fault(tid, pid, idx, region, cpu, cpu_node)
    }

    /// Everything decided since the last call (split form).
    pub fn take_actions(&mut self) -> EpochActions {
        std::mem::take(&mut self.actions)
    }

    // ---------------------------------------------------------------- tasks and occupancy

    fn sync_tasks(&mut self, view: &dyn AutoNumaView) {
        let nodes = self.nodes();
        self.has_memory = (0..nodes).map(|n| view.node_has_memory(n)).collect();
        let mut runs: Vec<TaskRun> = view.tasks().to_vec();
        runs.sort_by_key(|r| r.tid);
        // Exited threads: task_numa_free.
        let gone: Vec<Tid> =
            self.tasks.keys().copied().filter(|tid| runs.binary_search_by_key(tid, |r| r.tid).is_err()).collect();
        for tid in gone {
            self.leave_group(tid);
            self.tasks.remove(&tid);
        }
        for r in &runs {
            if !self.mms.contains_key(&r.pid) {
                // init_numa_balancing, first user of a new mm: scan after scan_delay.
                let mm = Mm { next_scan_ns: self.now_ns + ms_to_ns(self.params.scan_delay_ms), ..Mm::default() };
                self.mms.insert(r.pid, mm);
            }
            let node = r.node.min(nodes.saturating_sub(1));
            match self.tasks.get(&r.tid) {
                None => {
                    let seq = self.mms[&r.pid].scan_seq;
                    // init_numa_balancing: period = scan_delay; a CLONE_VM thread inherits the
                    // parent's preferred node, which our threads do not have yet. (The thread
                    // stagger there mixes ms and ns units and amounts to microseconds: ignored.)
                    let t = Task {
                        pid: r.pid,
                        node,
                        cpu: r.cpu,
                        ran_node: node,
                        ran_cpu: r.cpu,
                        allowed: r.allowed_nodes,
                        runnable: r.ran_ns > 0,
                        runtime_ns: 0,
                        node_stamp_ns: 0,
                        scan_period_ms: self.params.scan_delay_ms,
                        scan_period_max_ms: self.params.scan_period_max_ms,
                        scan_seq: seq,
                        preferred: None,
                        mem: vec![[0; 2]; nodes],
                        cpu_faults: vec![[0; 2]; nodes],
                        membuf: vec![[0; 2]; nodes],
                        cpubuf: vec![[0; 2]; nodes],
                        total_faults: 0,
                        has_faults: false,
                        locality: [0; 3],
                        migrate_retry_ns: 0,
                        pages_migrated: 0,
                        group: None,
                        last_placement_ns: None,
                        last_runtime_ns: 0,
                        moved: 0,
                        swapped: 0,
                    };
                    self.tasks.insert(r.tid, t);
                }
                Some(_) => {
                    let old = self.tasks[&r.tid].node;
                    if old != node {
                        self.update_scan_period(r.tid, old, node);
                    }
                    let t = self.tasks.get_mut(&r.tid).expect("present");
                    t.node = node;
                    t.cpu = r.cpu;
                    t.ran_node = node;
                    t.ran_cpu = r.cpu;
                    t.allowed = r.allowed_nodes;
                    t.runnable = r.ran_ns > 0;
                }
            }
        }
        self.refresh_rss(view);
        // Occupancy and per-CPU current thread, for task_numa_migrate.
        self.occupancy = self.cpus_per_node.iter().map(|&c| NodeStats { nr_running: 0, weight: c as i64 }).collect();
        self.curr.clear();
        self.migrate_on.clear();
        for r in &runs {
            if r.ran_ns == 0 {
                continue;
            }
            if let Some(o) = self.occupancy.get_mut(r.node) {
                o.nr_running += 1;
            }
            self.curr.entry(r.cpu).or_insert(r.tid);
        }
        // Runtime is accounted after the faults of this epoch (they happened during it).
        for r in &runs {
            if let Some(t) = self.tasks.get_mut(&r.tid) {
                t.runtime_ns += r.ran_ns;
            }
        }
    }

    /// `update_scan_period`: a task pulled off its preferred node (or a new task pulled
    /// cross-node before its first full scan) restarts scanning fast.
    fn update_scan_period(&mut self, tid: Tid, src: usize, dst: usize) {
        let start = self.task_scan_start(tid);
        let t = self.tasks.get_mut(&tid).expect("present");
        if !t.has_faults || src == dst {
            return;
        }
        if t.scan_seq != 0 && (Some(dst) == t.preferred || (t.preferred.is_some() && Some(src) != t.preferred)) {
            return;
        }
        t.scan_period_ms = start;
    }

    fn leave_group(&mut self, tid: Tid) {
        let Some(t) = self.tasks.get_mut(&tid) else { return };
        let Some(gid) = t.group.take() else { return };
        let (mem, cpu, total) = (t.mem.clone(), t.cpu_faults.clone(), t.total_faults);
        if let Some(g) = self.groups.get_mut(&gid) {
            for n in 0..mem.len() {
                for p in 0..2 {
                    g.mem[n][p] -= mem[n][p];
                    g.cpu[n][p] -= cpu[n][p];
                }
            }
            g.total_faults -= total;
            g.nr_tasks -= 1;
            if g.nr_tasks == 0 {
                self.groups.remove(&gid);
            }
        }
    }

    // ---------------------------------------------------------------- scan windows and periods

    /// `task_nr_scan_windows`: RSS in scan_size windows, rounded up, at least 1.
    fn nr_scan_windows(&self, pid: Pid, rss_bytes: u64) -> u64 {
        let _ = pid;
        let window = self.params.scan_size_mb.max(1) << 20;
        let rss = if rss_bytes == 0 { window } else { rss_bytes };
        rss.div_ceil(window).max(1)
    }

    /// `task_scan_min`, ms: period_min / windows, floored so no more than MAX_SCAN_WINDOW MB/s.
    fn task_scan_min_for(&self, windows: u64) -> u64 {
        let size = self.params.scan_size_mb.max(1);
        let w = if size < MAX_SCAN_WINDOW_MB { MAX_SCAN_WINDOW_MB / size } else { 1 };
        let floor = 1000 / w;
        (self.params.scan_period_min_ms / windows).max(floor)
    }

    fn task_windows(&self, tid: Tid) -> u64 {
        let t = &self.tasks[&tid];
        let rss = self.mm_rss.get(&t.pid).copied().unwrap_or(0);
        self.nr_scan_windows(t.pid, rss)
    }

    fn task_scan_min(&self, tid: Tid) -> u64 {
        self.task_scan_min_for(self.task_windows(tid))
    }

    /// Group scaling of `task_scan_start` / `task_scan_max`: period x nr_tasks x (shared+1) /
    /// (private+shared+1), so big, mostly shared groups scan slower.
    fn group_scaled(&self, tid: Tid, period: u64) -> u64 {
        let t = &self.tasks[&tid];
        match t.group.and_then(|g| self.groups.get(&g)) {
            None => period,
            Some(g) => {
                let shared: i64 = g.mem.iter().map(|f| f[SHARED]).sum::<i64>().max(0);
                let private: i64 = g.mem.iter().map(|f| f[PRIVATE]).sum::<i64>().max(0);
                let p =
                    period as u128 * g.nr_tasks as u128 * (shared as u128 + 1) / (private as u128 + shared as u128 + 1);
                p.min(u64::MAX as u128) as u64
            }
        }
    }

    /// `task_scan_start`, ms.
    fn task_scan_start(&self, tid: Tid) -> u64 {
        let smin = self.task_scan_min(tid);
        smin.max(self.group_scaled(tid, smin))
    }

    /// `task_scan_max`, ms.
    fn task_scan_max(&self, tid: Tid) -> u64 {
        let smin = self.task_scan_min(tid);
        let smax = self.params.scan_period_max_ms / self.task_windows(tid);
        let smax = smax.max(self.group_scaled(tid, smax));
        smin.max(smax)
    }

    /// `task_tick_numa` + `task_numa_work` for every thread that ran, in tid order.
    fn run_scanners(&mut self, view: &dyn AutoNumaView) {
        let tids: Vec<Tid> = self.tasks.iter().filter(|(_, t)| t.runnable).map(|(&k, _)| k).collect();
        for tid in tids {
            // A long epoch may cover several scan periods of runtime; each tick is one chance.
            for _ in 0..64 {
                let t = &self.tasks[&tid];
                let period_ns = ms_to_ns(t.scan_period_ms);
                if t.runtime_ns <= t.node_stamp_ns + period_ns {
                    break;
                }
                let first = t.node_stamp_ns == 0;
                if first {
                    let start = self.task_scan_start(tid);
                    self.tasks.get_mut(&tid).expect("present").scan_period_ms = start;
                }
                self.tasks.get_mut(&tid).expect("present").node_stamp_ns += period_ns;
                let pid = self.tasks[&tid].pid;
                if self.now_ns >= self.mms[&pid].next_scan_ns {
                    self.task_numa_work(tid, view);
                }
            }
        }
    }

    fn refresh_rss(&mut self, view: &dyn AutoNumaView) {
        self.mm_rss.clear();
        for &pid in self.mms.keys() {
            self.mm_rss.insert(pid, view.rss_bytes(pid));
        }
    }

    /// `task_numa_work`: arm the next scan_size worth of resident, movable regions of the mm.
    fn task_numa_work(&mut self, tid: Tid, view: &dyn AutoNumaView) {
        let pid = self.tasks[&tid].pid;
        let period_ms = self.tasks[&tid].scan_period_ms;
        let region_pages = self.region_pages() as i64;
        let count = view.region_count(pid);
        let now = self.now_ns;
        let epoch = self.epoch;
        let mm = self.mms.get_mut(&pid).expect("mm exists");
        if now < mm.next_scan_ns {
            return;
        }
        mm.next_scan_ns = now + ms_to_ns(period_ms);
        if mm.armed.len() < count {
            mm.armed.resize(count, false);
            mm.last.resize(count, None);
        }
        // MB in base pages; up to 8x that much virtual space may be walked past already armed
        // or empty ranges (task_numa_work: `virtpages = pages * 8`).
        let mut pages = (self.params.scan_size_mb as i64) << (20 - 12);
        let mut virtpages = pages * 8;
        if pages == 0 {
            return;
        }
        if mm.scan_offset >= count {
            mm.scan_seq += 1;
            mm.scan_offset = 0;
        }
        let mut idx = mm.scan_offset;
        let mut updates = 0u64;
        let mut exhausted = false;
        while idx < count {
            let r = view.region(pid, idx);
            if let Some(r) = r {
                if r.movable {
                    if !mm.armed[idx] {
                        mm.armed[idx] = true;
                        mm.armed_due.entry(epoch + 1).or_default().push((idx, 1));
                        self.newly_armed.push((pid, idx));
                        updates += region_pages as u64;
                        pages -= region_pages;
                    }
                    virtpages -= region_pages;
                }
            }
            idx += 1;
            if pages <= 0 || virtpages <= 0 {
                exhausted = true;
                break;
            }
        }
        if exhausted {
            mm.scan_offset = idx;
        } else {
            // Ran off the end of the address space: reset_ptenuma_scan.
            mm.scan_seq += 1;
            mm.scan_offset = 0;
        }
        self.counters.numa_pte_updates += updates;
    }

    // ---------------------------------------------------------------- faults

    fn take_faults(&mut self, view: &dyn AutoNumaView) {
        let pids: Vec<Pid> = self.mms.keys().copied().collect();
        let mut acc: Vec<(Tid, u64)> = Vec::new();
        for pid in pids {
            let epoch = self.epoch;
            let mut due: Vec<(usize, u32)> = Vec::new();
            {
                let mm = self.mms.get_mut(&pid).expect("mm");
                while let Some(entry) = mm.armed_due.first_entry() {
                    if *entry.key() > epoch {
                        break;
                    }
                    due.extend(entry.remove());
                }
                due.retain(|&(idx, _)| mm.armed[idx]);
            }
            due.sort_unstable();
            due.dedup_by_key(|e| e.0);
            for (idx, backoff) in due {
                acc.clear();
                view.accessors(pid, idx, &mut acc);
                acc.retain(|(tid, w)| *w > 0 && self.tasks.contains_key(tid));
                let region = view.region(pid, idx);
                let (false, Some(region)) = (acc.is_empty(), region) else {
                    // Untouched: look again later, backing off (a cold region faults whenever it is
                    // touched again; a hot one is seen within the epoch).
                    let next = (backoff * 2).min(ARMED_RECHECK_MAX_EPOCHS);
                    let mm = self.mms.get_mut(&pid).expect("mm");
                    mm.armed_due.entry(epoch + u64::from(backoff)).or_default().push((idx, next));
                    continue;
                };
                let total: u64 = acc.iter().map(|(_, w)| *w).sum();
                let mut pick = self.rng.next() % total;
                let mut tid = acc[0].0;
                for &(t, w) in &acc {
                    if pick < w {
                        tid = t;
                        break;
                    }
                    pick -= w;
                }
                self.mms.get_mut(&pid).expect("mm").armed[idx] = false;
                let (cpu, node) = (self.tasks[&tid].ran_cpu, self.tasks[&tid].ran_node);
                self.hint_fault(tid, pid, idx, region, cpu, node);
            }
        }
    }

    /// `do_numa_page`: one hinting fault of `tid` on region `idx` of `pid`.
    fn hint_fault(
        &mut self,
        tid: Tid,
        pid: Pid,
        idx: usize,
        region: RegionState,
        cpu: u32,
        cpu_node: usize,
    ) -> Option<usize> {
        let pages = self.region_pages();
        let mem_node = region.node;
        let local = mem_node == cpu_node;
        let last = self.mms[&pid].last.get(idx).copied().flatten();
        // mpol_misplaced -> should_numa_migrate_memory (which also records this_cpupid).
        let allow = self.should_numa_migrate_memory(tid, pid, idx, last, mem_node, cpu_node, cpu);
        let target_has_memory = self.has_memory.get(cpu_node).copied().unwrap_or(false);
        let migrated = region.movable && allow && mem_node != cpu_node && target_has_memory;
        self.counters.numa_hint_faults += 1;
        if local {
            self.counters.numa_hint_faults_local += 1;
        }
        let node_after = if migrated {
            self.counters.numa_pages_migrated += pages;
            self.actions.migrations.push(PageMigration { pid, region: idx, from: mem_node, to: cpu_node, pages, tid });
            cpu_node
        } else {
            mem_node
        };
        let private = self.task_numa_fault(tid, last, node_after, cpu_node, pages, local, migrated, region.shared);
        self.actions.faults.push(HintFault { tid, pid, region: idx, mem_node, cpu_node, private, migrated });
        migrated.then_some(cpu_node)
    }

    /// `should_numa_migrate_memory`: the two-stage filter and the group's 3/4 hysteresis.
    #[allow(clippy::too_many_arguments)]
    fn should_numa_migrate_memory(
        &mut self,
        tid: Tid,
        pid: Pid,
        idx: usize,
        last: Option<Cpupid>,
        src_nid: usize,
        dst_nid: usize,
        dst_cpu: u32,
    ) -> bool {
        // this_cpupid = cpu_pid_to_cpupid(dst_cpu, current->pid); folio_xchg_last_cpupid.
        if let Some(slot) = self.mms.get_mut(&pid).and_then(|m| m.last.get_mut(idx)) {
            *slot = Some(Cpupid { tid, cpu: dst_cpu, node: dst_nid });
        }
        let t = &self.tasks[&tid];
        let same = last.is_some_and(|l| l.tid == tid);
        // Early in a task's life, first and private faults migrate at once.
        if (t.preferred.is_none() || t.scan_seq <= EARLY_SCAN_SEQ) && (last.is_none() || same) {
            return true;
        }
        // Stage two of the filter: the previous fault must have come from the destination node
        // too; a page used from two nodes in turn (P^2 small) stays.
        if let Some(l) = last {
            if l.node != dst_nid {
                return false;
            }
        }
        if same {
            return true;
        }
        let Some(g) = t.group.and_then(|g| self.groups.get(&g)) else { return true };
        let cpu_dst = g.cpu[dst_nid][0] + g.cpu[dst_nid][1];
        let cpu_src = g.cpu[src_nid][0] + g.cpu[src_nid][1];
        if cpu_dst > cpu_src * ACTIVE_NODE_FRACTION {
            return true;
        }
        let mem_src = (g.mem[src_nid][0] + g.mem[src_nid][1]) as i128;
        let mem_dst = (g.mem[dst_nid][0] + g.mem[dst_nid][1]) as i128;
        // faults_cpu(dst)/faults_mem(dst) * 3/4 > faults_cpu(src)/faults_mem(src)
        cpu_dst as i128 * mem_src * 3 > cpu_src as i128 * mem_dst * 4
    }

    /// `task_numa_fault`: classify, maybe group, maybe place, and buffer the fault. Returns whether
    /// the fault was counted private.
    #[allow(clippy::too_many_arguments)]
    fn task_numa_fault(
        &mut self,
        tid: Tid,
        last: Option<Cpupid>,
        mem_node: usize,
        cpu_node: usize,
        pages: u64,
        mut local: bool,
        migrated: bool,
        shared_mapping: bool,
    ) -> bool {
        let private = match last {
            None => true,
            Some(l) if l.tid == tid => true,
            Some(l) => self.task_numa_group(tid, l, shared_mapping),
        };
        if let Some(g) = self.tasks[&tid].group.and_then(|g| self.groups.get(&g)) {
            // A shared fault wholly inside the group's active nodes counts as local.
            if !private && !local && g.active_nodes > 1 && is_active_node(g, cpu_node) && is_active_node(g, mem_node) {
                local = true;
            }
        }
        if self.now_ns > self.tasks[&tid].migrate_retry_ns {
            self.task_numa_placement(tid);
            self.numa_migrate_preferred(tid);
        }
        let t = self.tasks.get_mut(&tid).expect("present");
        t.has_faults = true;
        if migrated {
            t.pages_migrated += pages;
        }
        let p = if private { PRIVATE } else { SHARED };
        t.membuf[mem_node][p] += pages as i64;
        t.cpubuf[cpu_node][p] += pages as i64;
        t.locality[usize::from(local)] += pages;
        private
    }

    /// `task_numa_group`: on a fault whose last accessor was another thread, make sure `tid` has a
    /// group and join the last accessor's group if it is bigger (tie: lower id wins). Returns the
    /// fault's `priv`: false if joined or not decided, true when false sharing between unrelated
    /// processes was detected.
    fn task_numa_group(&mut self, tid: Tid, last: Cpupid, shared_mapping: bool) -> bool {
        let nodes = self.nodes();
        if self.tasks[&tid].group.is_none() {
            let t = &self.tasks[&tid];
            let g = Group {
                nr_tasks: 1,
                mem: t.mem.clone(),
                cpu: t.cpu_faults.clone(),
                total_faults: t.total_faults,
                active_nodes: 1,
                max_faults_cpu: 0,
            };
            self.groups.insert(tid, g);
            self.tasks.get_mut(&tid).expect("present").group = Some(tid);
        }
        // tsk = cpu_rq(cpu)->curr must still be the last accessor.
        let Some(other) = self.tasks.get(&last.tid) else { return false };
        if other.cpu != last.cpu {
            return false;
        }
        let Some(their) = other.group else { return false };
        let other_pid = other.pid;
        let mine = self.tasks[&tid].group.expect("just set");
        if their == mine {
            return false;
        }
        let (my_n, their_n) = (self.groups[&mine].nr_tasks, self.groups[&their].nr_tasks);
        if my_n > their_n || (my_n == their_n && mine > their) {
            return false;
        }
        let join = other_pid == self.tasks[&tid].pid || shared_mapping;
        if !join {
            return true;
        }
        let t = &self.tasks[&tid];
        let (mem, cpu, total) = (t.mem.clone(), t.cpu_faults.clone(), t.total_faults);
        for n in 0..nodes {
            for p in 0..2 {
                let my = self.groups.get_mut(&mine).expect("mine");
                my.mem[n][p] -= mem[n][p];
                my.cpu[n][p] -= cpu[n][p];
                let th = self.groups.get_mut(&their).expect("theirs");
                th.mem[n][p] += mem[n][p];
                th.cpu[n][p] += cpu[n][p];
            }
        }
        let my = self.groups.get_mut(&mine).expect("mine");
        my.total_faults -= total;
        my.nr_tasks -= 1;
        if my.nr_tasks == 0 {
            self.groups.remove(&mine);
        }
        let th = self.groups.get_mut(&their).expect("theirs");
        th.total_faults += total;
        th.nr_tasks += 1;
        self.tasks.get_mut(&tid).expect("present").group = Some(their);
        false
    }

    // ---------------------------------------------------------------- placement

    /// `task_numa_placement`: once per full scan pass of the mm, fold the buffered faults into the
    /// decayed statistics (old / 2 + new), pick the preferred node and adapt the scan period.
    fn task_numa_placement(&mut self, tid: Tid) {
        let nodes = self.nodes();
        let pid = self.tasks[&tid].pid;
        let seq = self.mms[&pid].scan_seq;
        if self.tasks[&tid].scan_seq == seq {
            return;
        }
        let scan_max = self.task_scan_max(tid);
        let now = self.now_ns;
        let gid = self.tasks[&tid].group;
        let t = self.tasks.get_mut(&tid).expect("present");
        t.scan_seq = seq;
        t.scan_period_max_ms = scan_max;
        let total_faults = (t.locality[0] + t.locality[1]) as i64;
        // numa_get_avg_runtime: share of the time since the last placement the task ran.
        let (runtime, period) = match t.last_placement_ns {
            Some(at) => (t.runtime_ns - t.last_runtime_ns, now.saturating_sub(at)),
            None => (LOAD_AVG_MAX, LOAD_AVG_MAX),
        };
        t.last_runtime_ns = t.runtime_ns;
        t.last_placement_ns = Some(now);
        let f_scale = ((runtime as u128) << 16) / (period as u128 + 1);
        let mut fault_types = [0i64; 2];
        let mut max_faults = 0i64;
        let mut max_nid: Option<usize> = None;
        let mut gdiff = vec![[0i64; 2]; nodes];
        let mut gcdiff = vec![[0i64; 2]; nodes];
        let mut tdiff = 0i64;
        let mut task_node_faults = vec![0i64; nodes];
        for nid in 0..nodes {
            for p in 0..2 {
                let diff = t.membuf[nid][p] - t.mem[nid][p] / 2;
                fault_types[p] += t.membuf[nid][p];
                t.membuf[nid][p] = 0;
                let f_weight = (f_scale * t.cpubuf[nid][p].max(0) as u128 / (total_faults as u128 + 1)) as i64;
                let f_diff = f_weight - t.cpu_faults[nid][p] / 2;
                t.cpubuf[nid][p] = 0;
                t.mem[nid][p] += diff;
                t.cpu_faults[nid][p] += f_diff;
                task_node_faults[nid] += t.mem[nid][p];
                t.total_faults += diff;
                tdiff += diff;
                gdiff[nid][p] = diff;
                gcdiff[nid][p] = f_diff;
            }
        }
        match gid.and_then(|g| self.groups.get_mut(&g)) {
            None => {
                for (nid, &f) in task_node_faults.iter().enumerate() {
                    if f > max_faults {
                        max_faults = f;
                        max_nid = Some(nid);
                    }
                }
            }
            Some(g) => {
                for nid in 0..nodes {
                    let mut gf = 0;
                    for p in 0..2 {
                        g.mem[nid][p] += gdiff[nid][p];
                        g.cpu[nid][p] += gcdiff[nid][p];
                        gf += g.mem[nid][p];
                    }
                    if gf > max_faults {
                        max_faults = gf;
                        max_nid = Some(nid);
                    }
                }
                g.total_faults += tdiff;
                count_active_nodes(g);
            }
        }
        // preferred_group_nid: NUMA_DIRECT returns the max node itself (see the module limits).
        if max_faults > 0 {
            if let Some(n) = max_nid {
                self.tasks.get_mut(&tid).expect("present").preferred = Some(n);
            }
        }
        self.update_task_scan_period(tid, fault_types[SHARED], fault_types[PRIVATE]);
    }

    /// `update_task_scan_period`: slower when faults are mostly private-and-local... in the
    /// kernel's words: more local -> longer period; mostly remote private -> shorter.
    fn update_task_scan_period(&mut self, tid: Tid, shared: i64, private: i64) {
        let smin = self.task_scan_min(tid);
        let smax = self.task_scan_max(tid);
        let now = self.now_ns;
        let t = self.tasks.get_mut(&tid).expect("present");
        let remote = t.locality[0] as i64;
        let local = t.locality[1] as i64;
        if local + shared == 0 || t.locality[2] != 0 {
            t.scan_period_ms = (t.scan_period_ms << 1).min(t.scan_period_max_ms);
            let next = now + ms_to_ns(t.scan_period_ms);
            let pid = t.pid;
            // The kernel clears numa_faults_locality only on the other path.
            if let Some(mm) = self.mms.get_mut(&pid) {
                mm.next_scan_ns = next;
            }
            return;
        }
        let period_slot = (t.scan_period_ms as i64 + NUMA_PERIOD_SLOTS - 1) / NUMA_PERIOD_SLOTS;
        let lr_ratio = local * NUMA_PERIOD_SLOTS / (local + remote).max(1);
        let ps_ratio = private * NUMA_PERIOD_SLOTS / (private + shared).max(1);
        let diff = if ps_ratio >= NUMA_PERIOD_THRESHOLD {
            (ps_ratio - NUMA_PERIOD_THRESHOLD).max(1) * period_slot
        } else if lr_ratio >= NUMA_PERIOD_THRESHOLD {
            (lr_ratio - NUMA_PERIOD_THRESHOLD).max(1) * period_slot
        } else {
            -(NUMA_PERIOD_THRESHOLD - lr_ratio.max(ps_ratio)) * period_slot
        };
        let p = (t.scan_period_ms as i64 + diff).clamp(smin as i64, smax.max(smin) as i64);
        t.scan_period_ms = p as u64;
        t.locality = [0; 3];
    }

    /// `numa_migrate_preferred`: retry every min(1 s, period / 16) while off the preferred node.
    fn numa_migrate_preferred(&mut self, tid: Tid) {
        let now = self.now_ns;
        let t = self.tasks.get_mut(&tid).expect("present");
        let Some(pref) = t.preferred else { return };
        if !t.has_faults {
            return;
        }
        let interval = ms_to_ns(1000).min(ms_to_ns(t.scan_period_ms) / 16);
        t.migrate_retry_ns = now + interval;
        if t.node == pref {
            return;
        }
        self.task_numa_migrate(tid);
    }

    fn task_faults(&self, tid: Tid, nid: usize) -> i64 {
        let t = &self.tasks[&tid];
        t.mem[nid][0] + t.mem[nid][1]
    }

    /// `task_weight`: 1000 x share of the task's faults on `nid`.
    fn task_weight(&self, tid: Tid, nid: usize) -> i64 {
        let t = &self.tasks[&tid];
        if t.total_faults <= 0 {
            return 0;
        }
        1000 * self.task_faults(tid, nid) / t.total_faults
    }

    /// `group_weight`: 1000 x share of the group's faults on `nid`.
    fn group_weight(&self, tid: Tid, nid: usize) -> i64 {
        let Some(g) = self.tasks[&tid].group.and_then(|g| self.groups.get(&g)) else { return 0 };
        if g.total_faults <= 0 {
            return 0;
        }
        1000 * (g.mem[nid][0] + g.mem[nid][1]) / g.total_faults
    }

    /// `task_numa_migrate`: find a CPU on the preferred node (or another better node) to move to,
    /// or a task there to swap with.
    fn task_numa_migrate(&mut self, tid: Tid) {
        let (src_nid, src_cpu, pref, allowed, gid) = {
            let t = &self.tasks[&tid];
            (t.node, t.cpu, t.preferred.expect("checked"), t.allowed, t.group)
        };
        let mut env = Env { src_nid, best: None };
        let taskweight = self.task_weight(tid, src_nid);
        let groupweight = self.group_weight(tid, src_nid);
        if has_node(allowed, pref) {
            let taskimp = self.task_weight(tid, pref) - taskweight;
            let groupimp = self.group_weight(tid, pref) - groupweight;
            self.task_numa_find_cpu(tid, &mut env, pref, taskimp, groupimp);
        }
        let active = gid.and_then(|g| self.groups.get(&g)).map_or(0, |g| g.active_nodes);
        if env.best.is_none() || (gid.is_some() && active > 1) {
            for nid in 0..self.nodes() {
                if nid == src_nid || nid == pref || !has_node(allowed, nid) || self.cpus_per_node[nid] == 0 {
                    continue;
                }
                let taskimp = self.task_weight(tid, nid) - taskweight;
                let groupimp = self.group_weight(tid, nid) - groupweight;
                if taskimp < 0 && groupimp < 0 {
                    continue;
                }
                self.task_numa_find_cpu(tid, &mut env, nid, taskimp, groupimp);
            }
        }
        if gid.is_some() {
            // A grouped task settles where it could go (or stays) as its preferred node.
            let nid = env.best.map_or(src_nid, |b| b.dst_nid);
            self.tasks.get_mut(&tid).expect("present").preferred = Some(nid);
        }
        let Some(best) = env.best else { return };
        if best.task.is_some() {
            self.migrate_on.push(best.dst_cpu);
        }
        match best.task {
            None => {
                self.occupancy[src_nid].nr_running -= 1;
                self.occupancy[best.dst_nid].nr_running += 1;
                let t = self.tasks.get_mut(&tid).expect("present");
                t.node = best.dst_nid;
                t.cpu = best.dst_cpu;
                t.moved += 1;
                self.counters.numa_task_migrated += 1;
                self.actions.task_moves.push(NumaMove {
                    tid,
                    from_node: src_nid,
                    to_node: best.dst_nid,
                    swap_with: None,
                });
            }
            Some(cur) => {
                let cur_node = self.tasks[&cur].node;
                self.curr.insert(src_cpu, cur);
                self.curr.insert(best.dst_cpu, tid);
                let t = self.tasks.get_mut(&tid).expect("present");
                t.node = best.dst_nid;
                t.cpu = best.dst_cpu;
                t.swapped += 1;
                let c = self.tasks.get_mut(&cur).expect("present");
                c.node = src_nid;
                c.cpu = src_cpu;
                c.swapped += 1;
                self.update_scan_period(cur, cur_node, src_nid);
                self.counters.numa_task_swapped += 1;
                self.actions.task_moves.push(NumaMove {
                    tid,
                    from_node: src_nid,
                    to_node: best.dst_nid,
                    swap_with: Some(cur),
                });
            }
        }
    }

    /// `task_numa_find_cpu`: a move if the destination has room without creating an imbalance the
    /// load balancer would undo; otherwise the best swap partner among the tasks running there.
    fn task_numa_find_cpu(&mut self, tid: Tid, env: &mut Env, dst_nid: usize, taskimp: i64, groupimp: i64) {
        let src = self.occupancy[env.src_nid];
        let dst = self.occupancy[dst_nid];
        let maymove;
        if dst.has_spare() {
            let src_running = src.nr_running - 1;
            let dst_running = dst.nr_running + 1;
            let imbalance = (dst_running - src_running).max(0);
            let imbalance = adjust_numa_imbalance(imbalance, dst_running, self.params.imb_numa_nr as i64);
            if imbalance == 0 {
                // An idle CPU there: take it (task_numa_assign(env, NULL, 0)).
                env.best = Some(Best { task: None, imp: 0, dst_nid, dst_cpu: u32::MAX - dst_nid as u32 });
                return;
            }
            maymove = false;
        } else {
            maymove = !load_too_imbalanced(src.load() - TASK_LOAD, dst.load() + TASK_LOAD, &src, &dst);
        }
        // Candidates: the current task of each CPU of dst_nid, then (if any CPU is idle) an idle one.
        let cands: Vec<(u32, Tid)> = self
            .curr
            .iter()
            .filter(|(_, t)| self.tasks.get(t).is_some_and(|t| t.node == dst_nid))
            .map(|(&c, &t)| (c, t))
            .collect();
        for (cpu, cur) in cands {
            if self.task_numa_compare(tid, env, dst_nid, cpu, Some(cur), taskimp, groupimp, maymove, &dst) {
                return;
            }
        }
        if dst.has_spare() {
            self.task_numa_compare(
                tid,
                env,
                dst_nid,
                u32::MAX - dst_nid as u32,
                None,
                taskimp,
                groupimp,
                maymove,
                &dst,
            );
        }
    }

    /// `task_numa_compare`: score moving `tid` to `dst_cpu` (idle) or swapping with `cur`.
    /// Returns true to stop the search.
    #[allow(clippy::too_many_arguments)]
    fn task_numa_compare(
        &self,
        tid: Tid,
        env: &mut Env,
        dst_nid: usize,
        dst_cpu: u32,
        cur: Option<Tid>,
        taskimp: i64,
        groupimp: i64,
        maymove: bool,
        dst: &NodeStats,
    ) -> bool {
        if self.migrate_on.contains(&dst_cpu) {
            return false;
        }
        let p_ng = self.tasks[&tid].group;
        let mut imp = if p_ng.is_some() { groupimp } else { taskimp };
        let moveimp = imp;
        let best_imp = env.best.map_or(0, |b| b.imp);
        let Some(cur) = cur else {
            if maymove && moveimp >= best_imp {
                env.best = Some(Best { task: None, imp: moveimp, dst_nid, dst_cpu });
                return true;
            }
            return false;
        };
        if cur == tid {
            return true;
        }
        let c = &self.tasks[&cur];
        if !has_node(c.allowed, env.src_nid) {
            return false;
        }
        let best_task_pref = env.best.and_then(|b| b.task).and_then(|b| self.tasks[&b].preferred);
        let best_has_task = env.best.is_some_and(|b| b.task.is_some());
        if best_has_task && best_task_pref == Some(env.src_nid) && c.preferred != Some(env.src_nid) {
            return false;
        }
        if c.group == p_ng {
            // Same group (or both none): no swap while the destination has spare capacity.
            if dst.has_spare() {
                return false;
            }
            imp = taskimp + self.task_weight(cur, env.src_nid) - self.task_weight(cur, dst_nid);
            if c.group.is_some() {
                imp -= imp / 16;
            }
        } else if c.group.is_some() && p_ng.is_some() {
            imp += self.group_weight(cur, env.src_nid) - self.group_weight(cur, dst_nid);
        } else {
            imp += self.task_weight(cur, env.src_nid) - self.task_weight(cur, dst_nid);
        }
        if c.preferred == Some(dst_nid) {
            imp -= imp / 16;
        }
        if c.preferred == Some(env.src_nid) {
            imp += imp / 8;
        }
        let assign_swap = |env: &mut Env, imp: i64| {
            env.best = Some(Best { task: Some(cur), imp, dst_nid, dst_cpu });
            // A swap partner that moves to its preferred node ends the search when moving is off.
            !maymove && c.preferred == Some(env.src_nid)
        };
        if maymove && moveimp > imp && moveimp > best_imp {
            // Moving alone beats the swap; the kernel moves to an idle CPU here if one exists.
            if dst.has_spare() {
                env.best = Some(Best { task: None, imp: moveimp, dst_nid, dst_cpu: u32::MAX - dst_nid as u32 });
                return true;
            }
            return false;
        }
        if best_has_task && c.preferred == Some(env.src_nid) && best_task_pref != Some(env.src_nid) {
            return assign_swap(env, imp);
        }
        if imp < SMALLIMP || imp <= best_imp + SMALLIMP / 2 {
            return false;
        }
        // Equal task loads: the swap leaves node loads unchanged (load = 0 -> assign).
        assign_swap(env, imp)
    }
}

/// Search state of one `task_numa_migrate`.
#[derive(Debug, Clone, Copy)]
struct Env {
    src_nid: usize,
    best: Option<Best>,
}

#[derive(Debug, Clone, Copy)]
struct Best {
    task: Option<Tid>,
    imp: i64,
    dst_nid: usize,
    dst_cpu: u32,
}

/// `adjust_numa_imbalance`: tolerate up to NUMA_IMBALANCE_MIN extra tasks while the destination
/// has at most `imb_numa_nr` running.
fn adjust_numa_imbalance(imbalance: i64, dst_running: i64, imb_numa_nr: i64) -> i64 {
    if dst_running > imb_numa_nr {
        return imbalance;
    }
    if imbalance <= NUMA_IMBALANCE_MIN {
        return 0;
    }
    imbalance
}

/// `load_too_imbalanced`: would the capacity-corrected load difference grow?
fn load_too_imbalanced(src_load: i64, dst_load: i64, src: &NodeStats, dst: &NodeStats) -> bool {
    let (sc, dc) = (src.capacity(), dst.capacity());
    let imb = (dst_load * sc - src_load * dc).abs();
    let old = (dst.load() * sc - src.load() * dc).abs();
    imb > old
}

fn is_active_node(g: &Group, nid: usize) -> bool {
    (g.cpu[nid][0] + g.cpu[nid][1]) * ACTIVE_NODE_FRACTION > g.max_faults_cpu
}

/// `numa_group_count_active_nodes`.
fn count_active_nodes(g: &mut Group) {
    let per: Vec<i64> = g.cpu.iter().map(|c| c[0] + c[1]).collect();
    let max = per.iter().copied().max().unwrap_or(0).max(0);
    g.max_faults_cpu = max;
    g.active_nodes = per.iter().filter(|&&f| f * ACTIVE_NODE_FRACTION > max).count() as u32;
}

#[cfg(test)]
#[allow(clippy::field_reassign_with_default)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const PAGES: u64 = 512;

    /// A hand-built simulator view: threads, regions per process, accessors per region.
    #[derive(Debug, Default)]
    struct Mock {
        tasks: Vec<TaskRun>,
        regions: BTreeMap<Pid, Vec<Option<RegionState>>>,
        /// Accessors of every region of a process (same list for all its regions).
        access: BTreeMap<Pid, Vec<(Tid, u64)>>,
    }

    impl AutoNumaView for Mock {
        fn tasks(&self) -> &[TaskRun] {
            &self.tasks
        }
        fn region_count(&self, pid: Pid) -> usize {
            self.regions.get(&pid).map_or(0, |r| r.len())
        }
        fn region(&self, pid: Pid, idx: usize) -> Option<RegionState> {
            self.regions.get(&pid).and_then(|r| r.get(idx).copied().flatten())
        }
        fn rss_bytes(&self, pid: Pid) -> u64 {
            self.regions.get(&pid).map_or(0, |r| r.iter().flatten().count() as u64 * (2 << 20))
        }
        fn accessors(&self, pid: Pid, _idx: usize, out: &mut Vec<(Tid, u64)>) {
            out.extend(self.access.get(&pid).into_iter().flatten().copied());
        }
    }

    fn run(tid: Tid, pid: Pid, cpu: u32, node: usize, ran_ns: u64) -> TaskRun {
        TaskRun { tid, pid, cpu, node, ran_ns, allowed_nodes: u64::MAX }
    }

    fn region(node: usize, movable: bool, shared: bool) -> RegionState {
        RegionState { node, movable, shared }
    }

    /// One process, one thread on node 0, 512 MiB (256 regions) resident on node 0, every region
    /// read by the thread every 100 ms epoch.
    fn single_thread(enabled: bool) -> (AutoNuma, Mock) {
        let params = AutoNumaParams { enabled, ..AutoNumaParams::default() };
        let model = AutoNuma::new(params, vec![2, 2]);
        let mut view = Mock::default();
        view.tasks.push(run(1, 1, 0, 0, 100 * MS));
        view.regions.insert(1, vec![Some(region(0, true, false)); 256]);
        view.access.insert(1, vec![(1, 10)]);
        (model, view)
    }

    /// Scan cadence and period adaptation, worked by hand (epochs of 100 ms, k = 1, 2, ...;
    /// the thread's runtime after epoch k is k x 100 ms):
    ///
    /// - k=1: new mm -> next_scan = 100 + scan_delay 1000 = 1100 ms; task period = 1000 (delay).
    /// - k=11: runtime 1100 > stamp 0 + 1000 -> first tick: period = task_scan_start = max(floor
    ///   1000/(2560/256) = 100, period_min 1000 / (512 MiB / 256 MiB = 2 windows)) = 500 ms;
    ///   stamp = 1000; now 1100 >= next_scan -> scan regions 0..127 (256 MiB = 65536 pages),
    ///   next_scan = 1600.
    /// - k=12: the 128 armed regions fault (local, private: first access), buffered.
    /// - k=16: runtime 1600 > 1000 + 500 -> stamp 1500, scan regions 128..255, next_scan 2100.
    /// - k=21: stamp 2000, offset at the end -> seq 1, scan 0..127, next_scan 2600.
    /// - k=22: first fault sees seq 1 != 0 -> placement: 256 private local faults (131072
    ///   pages) folded; ps_ratio 10 >= 7 -> period += (10-7) x ceil(500/10) = 150 -> 650 ms.
    /// - k=27: runtime 2700 > 2000 + 650 -> stamp 2650; now 2700 >= 2600 -> scan, next 3350.
    /// - k=34: runtime 3400 > 2650 + 650 -> stamp 3300; now 3400 >= 3350 -> scan (seq 2).
    /// - k=35: placement again: period_slot ceil(650/10) = 65, +3 x 65 -> 845 ms; node 0 holds
    ///   131072 / 2 + 256 x 512 = 196608 decayed private faults.
    #[test]
    fn scan_cadence_and_period_adaptation() {
        let (mut m, view) = single_thread(true);
        let mut scans = Vec::new();
        let mut periods = BTreeMap::new();
        let mut faults_at_12 = 0;
        for k in 1..=36u64 {
            let before = m.counters().numa_pte_updates;
            let acts = m.step(k * 100 * MS, &view);
            if k == 12 {
                faults_at_12 = acts.faults.len();
                assert!(acts.faults.iter().all(|f| f.private && f.mem_node == 0 && f.cpu_node == 0 && !f.migrated));
            }
            let after = m.counters().numa_pte_updates;
            if after > before {
                assert_eq!(after - before, 65536, "one scan arms scan_size_mb = 256 MiB at k={k}");
                scans.push(k);
            }
            periods.insert(k, m.task_stats(1).unwrap().numa_scan_period_ms);
        }
        assert_eq!(scans, vec![11, 16, 21, 27, 34]);
        assert_eq!(faults_at_12, 128);
        assert_eq!(periods[&10], 1000);
        assert_eq!(periods[&11], 500);
        assert_eq!(periods[&21], 500);
        assert_eq!(periods[&22], 650);
        assert_eq!(periods[&34], 650);
        assert_eq!(periods[&35], 845);
        assert_eq!(m.mm_scan_seq(1), Some(2));
        let c = m.counters();
        assert_eq!(c.numa_hint_faults, c.numa_hint_faults_local, "all memory is local");
        assert_eq!(c.numa_pages_migrated, 0);
        let st = m.task_stats(1).unwrap();
        assert_eq!(st.numa_preferred_nid, Some(0));
        // k=35 fold: 131072 / 2 decayed + the 256 faults since (k=22, whose first fault folds and
        // is then buffered itself, and k=28) = 65536 + 131072 = 196608 pages, private, node 0.
        assert_eq!(st.numa_faults[0].task_private, 196_608);
        assert_eq!(st.numa_faults[1].task_private, 0);
    }

    /// Two-stage filter. Thread 1 (past its early lifetime: scan_seq 5, preferred node 1) runs on
    /// node 1; region 0 of its process is on node 0 and was last faulted by the same thread when
    /// it ran on node 0 (cpupid = t1@cpu0/node0).
    /// - fault 1 from node 1: last_cpupid's node 0 != destination 1 -> refuse; last := t1@node1.
    /// - fault 2 from node 1: last node 1 == destination, same thread (private) -> migrate.
    #[test]
    fn private_remote_region_migrates_on_second_fault() {
        let mut m = AutoNuma::new(AutoNumaParams::default(), vec![2, 2]);
        let mut view = Mock::default();
        view.tasks.push(run(1, 1, 2, 1, MS));
        view.regions.insert(1, vec![Some(region(0, true, false))]);
        m.begin_epoch(MS, &view);
        {
            let mm = m.mms.get_mut(&1).unwrap();
            mm.scan_seq = 5;
            mm.armed = vec![true];
            mm.last = vec![Some(Cpupid { tid: 1, cpu: 0, node: 0 })];
            let t = m.tasks.get_mut(&1).unwrap();
            t.scan_seq = 5;
            t.preferred = Some(1);
        }
        let r = region(0, true, false);
        assert_eq!(m.fault(2 * MS, 1, 1, 0, r, 2, 1), None, "first remote fault only records cpupid");
        assert!(!m.is_armed(1, 0));
        assert_eq!(m.counters().numa_pages_migrated, 0);
        assert_eq!(m.fault(3 * MS, 1, 1, 0, r, 2, 1), Some(1), "second fault from the same node migrates");
        let c = m.counters();
        assert_eq!((c.numa_hint_faults, c.numa_hint_faults_local, c.numa_pages_migrated), (2, 0, PAGES));
        assert_eq!(m.task_stats(1).unwrap().numa_pages_migrated, PAGES);
        let acts = m.take_actions();
        assert_eq!(acts.migrations, vec![PageMigration { pid: 1, region: 0, from: 0, to: 1, pages: PAGES, tid: 1 }]);
    }

    /// Shared region ping-ponged between node 0 (thread A) and node 1 (threads B1, B2), all of one
    /// process and one numa group whose CPU faults (1000 / 1000) and memory faults (1000 / 1000)
    /// are balanced over the two nodes. Region on node 0. Sequence A, B1, B2, A, B1, B2:
    /// - B1 after A: last node 0 != 1 -> stage one refuses.
    /// - B2 after B1: last node 1 == 1 passes stage one; shared (other thread), group set:
    ///   cpu(dst)=1000 > 3 x cpu(src)=3000? no; 3/4 hysteresis: 1000 x mem(src)1000 x 3 = 3e6 >
    ///   cpu(src)1000 x mem(dst)1000 x 4 = 4e6? no -> stays.
    /// - A's faults are local (nothing to migrate).
    ///
    /// Control: with the group's memory faults 2000 on node 0 (src), 1000 x 2000 x 3 = 6e6 > 4e6 ->
    /// B2's fault migrates the region.
    #[test]
    fn shared_ping_pong_stays_under_hysteresis() {
        for (mem_src, expect_move) in [(1000i64, false), (2000, true)] {
            let mut m = AutoNuma::new(AutoNumaParams::default(), vec![2, 2]);
            let mut view = Mock::default();
            view.tasks = vec![run(1, 1, 0, 0, MS), run(2, 1, 2, 1, MS), run(3, 1, 3, 1, MS)];
            view.regions.insert(1, vec![Some(region(0, true, false))]);
            m.begin_epoch(MS, &view);
            let mut g = Group {
                nr_tasks: 3,
                mem: vec![[mem_src, 0], [1000, 0]],
                cpu: vec![[1000, 0], [1000, 0]],
                total_faults: mem_src + 1000,
                active_nodes: 0,
                max_faults_cpu: 0,
            };
            count_active_nodes(&mut g);
            m.groups.insert(1, g);
            for tid in 1..=3 {
                let t = m.tasks.get_mut(&tid).unwrap();
                t.group = Some(1);
                t.preferred = Some(t.node);
                t.scan_seq = 5;
            }
            m.mms.get_mut(&1).unwrap().scan_seq = 5;
            m.mms.get_mut(&1).unwrap().armed = vec![true];
            m.mms.get_mut(&1).unwrap().last = vec![None];
            let order = [(1, 0u32, 0usize), (2, 2, 1), (3, 3, 1), (1, 0, 0), (2, 2, 1), (3, 3, 1)];
            let mut node = 0;
            let mut moved = Vec::new();
            for (i, &(tid, cpu, cnode)) in order.iter().enumerate() {
                let r = region(node, true, false);
                if let Some(to) = m.fault((i as u64 + 2) * MS, tid, 1, 0, r, cpu, cnode) {
                    node = to;
                    moved.push(i);
                }
            }
            if expect_move {
                assert_eq!(moved, vec![2], "B2 right after B1 passes both stages when memory is lopsided");
            } else {
                assert!(moved.is_empty(), "balanced group: the 3/4 hysteresis keeps the page");
                assert_eq!(node, 0);
            }
            let shared = m.take_actions().faults.iter().filter(|f| !f.private).count();
            assert_eq!(shared, 5, "all but the first fault are shared");
        }
    }

    /// Preferred node follows decayed faults. One thread on node 0; regions pinned (not movable)
    /// so faults count on the memory's node. Each pass ends by bumping the mm's scan sequence; the
    /// next fault folds the buffer (old / 2 + new):
    /// - pass 1: 4 faults on node 1 -> node1 = 2048 -> preferred 1.
    /// - pass 2: the folding fault (node 0) + 2 more on node 0 = 1536 buffered.
    /// - pass 3 fold: node1 = 2048 - 1024 = 1024, node0 = 1536 -> preferred 0 (without the
    ///   halving node 1 would still lead, 2048 > 1536).
    #[test]
    fn preferred_node_follows_decayed_faults() {
        let mut m = AutoNuma::new(AutoNumaParams::default(), vec![2, 2]);
        let mut view = Mock::default();
        view.tasks.push(run(1, 1, 0, 0, MS));
        view.regions.insert(1, vec![Some(region(1, false, false)); 4]);
        m.begin_epoch(MS, &view);
        let on1 = region(1, false, false);
        let on0 = region(0, false, false);
        let mut now = 10 * MS;
        let mut fault = |m: &mut AutoNuma, r: RegionState| {
            now += 1000 * MS;
            m.fault(now, 1, 1, 0, r, 0, 0)
        };
        for _ in 0..4 {
            assert_eq!(fault(&mut m, on1), None);
        }
        m.mms.get_mut(&1).unwrap().scan_seq += 1;
        fault(&mut m, on0); // folds pass 1, then buffers itself on node 0
        let st = m.task_stats(1).unwrap();
        assert_eq!(st.numa_preferred_nid, Some(1));
        assert_eq!((st.numa_faults[0].task_private, st.numa_faults[1].task_private), (0, 2048));
        fault(&mut m, on0);
        fault(&mut m, on0);
        m.mms.get_mut(&1).unwrap().scan_seq += 1;
        fault(&mut m, on0);
        let st = m.task_stats(1).unwrap();
        assert_eq!((st.numa_faults[0].task_private, st.numa_faults[1].task_private), (1536, 1024));
        assert_eq!(st.numa_preferred_nid, Some(0));
        assert_eq!(st.total_numa_faults, 2560);
    }

    /// numa groups: threads 1, 2 of process 10, thread 3 of process 20 (region R1 shared between
    /// them), thread 4 of process 30 (region R2 not shared).
    /// - f1 t1 on R0: first access, private.        - f2 t2 on R0 (last t1): t2 makes group 2;
    ///   t1 has none -> no join.                      - f3 t1 on R0 (last t2): t1 makes group 1;
    ///   sizes 1 = 1, tie to the lower id: 1 < 2 so t1 joins group 2 (same mm) -> {t1, t2}.
    /// - f4 t3 on R1: first access. f5 t1 on R1 (last t3, no group): nothing.
    /// - f6 t3 on R1 (last t1): t3 makes group 3 (1 task) < group 2 (2 tasks), shared mapping ->
    ///   joins: group 2 = {t1, t2, t3}.
    /// - f7 t1 on R1 (last t3, same group): nothing.
    /// - f8 t1 on R2. f9 t4 on R2 (last t1, other process, not shared): t4 makes group 4 and does not join;
    ///   the fault counts private (false sharing).
    #[test]
    fn sharing_tasks_end_in_one_group_smaller_joins_bigger() {
        let mut m = AutoNuma::new(AutoNumaParams::default(), vec![2, 2]);
        let mut view = Mock::default();
        view.tasks = vec![run(1, 10, 0, 0, MS), run(2, 10, 1, 0, MS), run(3, 20, 2, 1, MS), run(4, 30, 3, 1, MS)];
        view.regions
            .insert(10, vec![Some(region(0, true, false)), Some(region(0, true, true)), Some(region(0, true, false))]);
        view.regions.insert(20, vec![]);
        view.regions.insert(30, vec![]);
        m.begin_epoch(MS, &view);
        let r = |i: usize| [region(0, true, false), region(0, true, true), region(0, true, false)][i];
        let cpu_node = |tid: Tid| [(0, 0), (1, 0), (2, 1), (3, 1)][tid as usize - 1];
        let steps: [(Tid, usize); 9] = [(1, 0), (2, 0), (1, 0), (3, 1), (1, 1), (3, 1), (1, 1), (1, 2), (4, 2)];
        let mut groups = Vec::new();
        for (i, &(tid, reg)) in steps.iter().enumerate() {
            let (cpu, node) = cpu_node(tid);
            m.fault((i as u64 + 2) * MS, tid, 10, reg, r(reg), cpu, node);
            groups.push([1, 2, 3, 4].map(|t| m.task_stats(t).unwrap().numa_group_id));
        }
        assert_eq!(groups[0], [0, 0, 0, 0]);
        assert_eq!(groups[1], [0, 2, 0, 0]);
        assert_eq!(groups[2], [2, 2, 0, 0]);
        assert_eq!(groups[4], [2, 2, 0, 0], "the bigger group does not join a lone task");
        assert_eq!(groups[5], [2, 2, 2, 0]);
        assert_eq!(groups[8], [2, 2, 2, 4]);
        assert_eq!(m.groups[&2].nr_tasks, 3);
        assert!(!m.groups.contains_key(&1) && !m.groups.contains_key(&3));
        let faults = m.take_actions().faults;
        assert!(faults[8].private, "unrelated processes without a shared mapping: false sharing, private");
        assert!(!faults[5].private);
    }

    /// Task swap toward the preferred node. One CPU per node; A (pid 1) on node 0, B (pid 2) on
    /// node 1, both running, so no node has spare capacity and a lone move would unbalance the
    /// load: only swaps are possible. Regions pinned so faults count where the memory is.
    /// - phase 1: B faults 4x node-1 memory; fold -> B prefers node 1 (where it is).
    /// - phase 2: A faults 4x node-1 memory; fold -> A prefers 1; swap score with B:
    ///   taskimp 1000 + w(B, 0) 0 - w(B, 1) 1000 = 0 < SMALLIMP -> no swap.
    /// - phase 3: B faults 8x node-0 memory; fold: node1 = 2048/2 + 512 (its phase-1 folding fault)
    ///   = 1536, node0 = 4096 -> prefers 0; taskimp = 727 - 272 = 455; with A:
    ///   455 + w(A, 1) 1000 - w(A, 0) 0 = 1455, A prefers B's node: +1455/8 -> 1636 >= 30 -> swap.
    #[test]
    fn swap_toward_preferred_node() {
        let mut m = AutoNuma::new(AutoNumaParams::default(), vec![1, 1]);
        let mut view = Mock::default();
        view.tasks = vec![run(1, 1, 0, 0, MS), run(2, 2, 1, 1, MS)];
        view.regions.insert(1, vec![]);
        view.regions.insert(2, vec![]);
        m.begin_epoch(MS, &view);
        let pinned = |n: usize| region(n, false, false);
        let mut now = 10 * MS;
        let mut fault = |m: &mut AutoNuma, tid: Tid, n: usize| {
            now += 1000 * MS;
            let (cpu, node) = if tid == 1 { (0, 0) } else { (1, 1) };
            m.fault(now, tid, tid, 0, pinned(n), cpu, node);
            m.take_actions().task_moves
        };
        for _ in 0..4 {
            assert!(fault(&mut m, 2, 1).is_empty());
        }
        m.mms.get_mut(&2).unwrap().scan_seq += 1;
        assert!(fault(&mut m, 2, 1).is_empty());
        assert_eq!(m.preferred_node(2), Some(1));
        for _ in 0..4 {
            assert!(fault(&mut m, 1, 1).is_empty());
        }
        m.mms.get_mut(&1).unwrap().scan_seq += 1;
        assert!(fault(&mut m, 1, 1).is_empty(), "B would lose as much as A gains: no swap");
        assert_eq!(m.preferred_node(1), Some(1));
        for _ in 0..8 {
            assert!(fault(&mut m, 2, 0).is_empty());
        }
        m.mms.get_mut(&2).unwrap().scan_seq += 1;
        let moves = fault(&mut m, 2, 0);
        assert_eq!(m.preferred_node(2), Some(0));
        assert_eq!(moves, vec![NumaMove { tid: 2, from_node: 1, to_node: 0, swap_with: Some(1) }]);
        assert_eq!(m.counters().numa_task_swapped, 1);
        assert_eq!(m.counters().numa_task_migrated, 0);
    }

    /// A task whose preferred node has an idle CPU moves there (no swap needed): 2 CPUs per
    /// node, A alone on node 0 faulting node-1 memory; node 1 empty -> imbalance 1 - 0 = 1 <=
    /// NUMA_IMBALANCE_MIN while dst_running 1 <= imb_numa_nr 2 -> move.
    #[test]
    fn move_to_idle_cpu_on_preferred_node() {
        let mut m = AutoNuma::new(AutoNumaParams::default(), vec![2, 2]);
        let mut view = Mock::default();
        view.tasks = vec![run(1, 1, 0, 0, MS)];
        view.regions.insert(1, vec![]);
        m.begin_epoch(MS, &view);
        for i in 0..4 {
            m.fault((i + 2) * 1000 * MS, 1, 1, 0, region(1, false, false), 0, 0);
        }
        m.mms.get_mut(&1).unwrap().scan_seq += 1;
        m.fault(10_000 * MS, 1, 1, 0, region(1, false, false), 0, 0);
        let moves = m.take_actions().task_moves;
        assert_eq!(moves, vec![NumaMove { tid: 1, from_node: 0, to_node: 1, swap_with: None }]);
        assert_eq!(m.counters().numa_task_migrated, 1);
    }

    /// numa_balancing = 0: the same run as the cadence test does nothing at all.
    #[test]
    fn off_means_nothing_happens() {
        let (mut m, view) = single_thread(false);
        for k in 1..=40u64 {
            let acts = m.step(k * 100 * MS, &view);
            assert_eq!(acts, EpochActions::default());
        }
        assert_eq!(m.counters(), Counters::default());
        assert!((0..256).all(|i| !m.is_armed(1, i)));
        let st = m.task_stats(1).unwrap();
        assert_eq!(st.numa_preferred_nid, None);
        assert_eq!(st.total_numa_faults, 0);
        // Switching on at 4.0 s: next_scan = 5.0 s (scan delay). The thread's runtime ticks (period
        // 500 ms after the first one) fall at 4.1, 4.6, 5.1 s: the first scan is at k=51.
        m.set_enabled(true);
        let mut first_scan = None;
        for k in 41..=60u64 {
            m.step(k * 100 * MS, &view);
            if first_scan.is_none() && m.counters().numa_pte_updates > 0 {
                first_scan = Some(k);
            }
        }
        assert_eq!(first_scan, Some(51));
    }

    /// The sched block parses back with the observe crate's parser into the same figures.
    #[test]
    fn sched_block_round_trips_through_the_observe_parser() {
        let (mut m, view) = single_thread(true);
        for k in 1..=36u64 {
            m.step(k * 100 * MS, &view);
        }
        let block = m.sched_numa_block(1, &[0, 1], 0).unwrap();
        let file = format!(
            "t (1, #threads: 1)\n{}\n{:<45}:{:>21}\n{:<45}:{:>21}\n{:<45}:{:>21}\n{block}",
            "-".repeat(67),
            "se.sum_exec_runtime",
            "3600.000000",
            "se.nr_migrations",
            0,
            "clock-delta",
            40
        );
        let info = numapilot_observe::parse::sched::parse_sched(&file).unwrap();
        let numa = info.numa.unwrap();
        assert_eq!(numa.scan_seq, Some(2));
        assert_eq!(numa.preferred_nid, Some(0));
        assert_eq!(numa.total_faults, 196_608);
        assert_eq!(numa.group_id, None);
        assert_eq!(numa.faults.len(), 2);
        assert_eq!(numa.faults[0].task_private, 196_608);
        assert!(block.contains("mm->numa_scan_seq                            :                    2\n"));
    }

    /// Same seed, same inputs: identical decisions (the accessor draw is seeded).
    #[test]
    fn deterministic_for_a_seed() {
        let trace = |seed: u64| {
            let params = AutoNumaParams { seed, ..AutoNumaParams::default() };
            let mut m = AutoNuma::new(params, vec![2, 2]);
            let mut view = Mock::default();
            view.tasks = vec![run(1, 1, 0, 0, 100 * MS), run(2, 1, 2, 1, 100 * MS)];
            view.regions.insert(1, vec![Some(region(0, true, false)); 64]);
            view.access.insert(1, vec![(1, 3), (2, 5)]);
            let mut out = Vec::new();
            for k in 1..=60u64 {
                out.push(m.step(k * 100 * MS, &view).faults.iter().map(|f| f.tid).collect::<Vec<_>>());
            }
            out
        };
        assert_eq!(trace(7), trace(7));
        assert_ne!(trace(7), trace(8));
    }
}
