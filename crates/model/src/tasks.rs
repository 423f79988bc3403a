//! Per-thread and per-process views derived from two consecutive samples.
//!
//! # Problem
//!
//! A [`Sample`] holds cumulative counters (CPU ticks, schedstat nanoseconds), instantaneous sizes
//! (resident pages per node) and, when a source exists, sampled memory accesses. Placement needs
//! rates and shares: how much CPU a thread uses *now*, how long it waits for one, which nodes its
//! memory accesses go to, how fast its process grows, and whether someone else already placed it.
//!
//! # Approach
//!
//! ```text
//!   sample(t0)           sample(t1)                      TaskView (per live user thread)
//!   run_ns / ticks  ──►  run_ns / ticks  ── Δ / Δt ──►   cpu_rate      CPUs
//!   wait_ns         ──►  wait_ns         ── Δ / Δt ──►   run_delay     fraction of the period
//!                        processor       ── topology ─►  node
//!                        accesses[tid]   ─┐
//!                        sched faults    ─┼ best first ► access[node]  shares, sum 1
//!                        numa_maps N0..  ─┘
//! ```
//!
//! * CPU time: schedstat `run_ns` when both samples have it (ns precision), else `utime + stime`
//!   ticks / USER_HZ; the interval is the difference of the process read times (as
//!   [`numapilot_observe::rate`] does) so reading 10,000 threads over tens of ms does not bias it.
//!   The history keeps only the previous counters per thread, not the previous sample.
//! * Access shares per node, best source first ([`AccessSource`]): this thread's access samples;
//!   else the kernel's NUMA-fault averages of the thread (`task/TID/sched`, already decayed by half
//!   every scan period by `task_numa_placement`); else its process's resident memory per node.
//!   Sampled shares are smoothed with an exponential average of half-life `access_half_life_ms`
//!   (`a = 1 - 2^(-dt/h)`, `share += a * (raw - share)`, dt = time since the thread's previous
//!   sample, so an estimate from before a pause weighs what its age says) and stay valid `access_stale_ms` after the
//!   thread's last sample, so a pause does not drop the thread to the coarser estimate.
//! * Process: RSS (VmRSS, else the numa_maps sum), memory per node from numa_maps, growth as the
//!   slope between the oldest RSS point inside `class_window_ms` and now, CPU as the sum of its
//!   threads, hot ranges as access-sample counts per `1 << coaccess_bucket_shift` bucket decayed
//!   with the access half-life (per process, and per thread: which slice of a shared address space
//!   each thread works on), and `pinned`:
//!
//! ```text
//!   pinned = resident kB under bind/interleave/preferred VMAs >= pinned_policy_share x resident kB
//!         or any thread: CPUs(mems_allowed nodes) not within cpus_allowed   (taskset, cpuset,
//!            a program pinning one of its threads; until 2026-11-29 every thread had to be, so a
//!            process with one self-pinned worker was planned, and the daemon, which refuses a
//!            process when any thread narrowed itself, refused the plan every period)
//! ```
//!
//! * Carried reads: the live observer hands a process that did not run with its threads' last
//!   read (same counters, same read time). Such a thread gets rate 0 and no run delay; once its
//!   view shows exactly that (and no samples), later carried reads leave the view untouched while
//!   the process's memory per node is unchanged: a steady cycle of 1,000 mostly idle processes
//!   costs a hash lookup per idle thread, not a rebuilt view. When every thread of a process is
//!   so settled, the process remembers it (the read time and its threads' ids and start times),
//!   and its next carried read with the same threads, memory and no access sample leaves all of
//!   them as they are without looking each up (whole-process-settled: the same model; the lookups
//!   were a third of this update's CPU samples on a recorded 10,000-thread load, `cycle_cost
//!   --replay`, but the update still reads each thread's id and start time in the sample, cache
//!   misses too: the model's update went from 3.7 to 3.4 ms of CPU there).
//! * Identity: a pid whose start time changed is a new process, a tid whose thread start time
//!   changed a new thread: the history is reset and the key is reported in `History::reborn` so the
//!   affinity graph and the groups forget the old task's relations.
//!
//! # Units
//!
//! ns for times, CPUs for rates (1.0 = one CPU busy), fractions of the period for run delay,
//! bytes for memory, bytes/s for growth, dense node indices for per-node vectors.
//!
//! # Limits
//!
//! The first sample gives no rates (0). Kernel threads are skipped, and so are threads whose CPUs
//! the kernel keeps (`PF_NO_SETAFFINITY`: io_uring's io-wq workers on kernels 5.12 to 6.2, bound to
//! one node each): their mask is not the program's pin (taken as one, every io_uring process was
//! pinned and never placed) and no placement can move them, so a plan holding them would never be
//! met. Their CPU time is not in their process's demand. A process read without its
//! threads has a [`ProcView`] but no tasks. Residency as an access estimate is coarse: a thread
//! working on a slice of a shared buffer looks like every other thread of its process.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use numapilot_observe::parse::numa_maps::FxBuild;
use numapilot_observe::{ObjectId, ProcessSample, Sample, SharedMemory, ThreadSample};
use numapilot_topology::{CpuSet, NodeSet, Topology};
use serde::{Deserialize, Serialize};

use crate::affinity::{decay_factor, CoaccessWindow};
use crate::classify::{ClassState, ProcessClass};
use crate::Model;

/// A thread, unambiguously: pid and tid (a reused pid is a different [`ProcView::starttime`]; the
/// model forgets the old process's tasks when the start time changes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskKey {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
}

impl TaskKey {
    /// The key as one number, pid in the high half: orders exactly as (pid, tid).
    #[inline]
    pub fn packed(self) -> u64 {
        (u64::from(self.pid) << 32) | u64::from(self.tid)
    }
}

// Ordered by (pid, tid), as the derive would, but as one integer comparison: keys are compared
// millions of times per update (maps and sorts over 10,000 threads).
impl Ord for TaskKey {
    #[inline]
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.packed().cmp(&other.packed())
    }
}

// Hashed as the one packed integer (consistent with Eq: equal keys pack equally).
impl std::hash::Hash for TaskKey {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.packed());
    }
}

impl PartialOrd for TaskKey {
    #[inline]
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Where a task's per-node access shares come from, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AccessSource {
    /// Sampled memory accesses of this thread (PMU, replay, simulator).
    Samples,
    /// The kernel's NUMA hinting-fault statistics of this thread (`/proc/PID/task/TID/sched`).
    NumaFaults,
    /// Nothing per thread: the process's resident memory per node stands in.
    Residency,
}

/// Slack when checking that CPU demand fits a node, CPUs per task. Default 0.02. Source: the
/// tick grain: measured rates come from clock ticks (USER_HZ = 100, 10 ms) where schedstat is
/// missing, so a busy thread reads up to two ticks per second above 1.0 from rounding at both
/// ends of the period, 0.02 CPUs over the default 1 s `interval_ms`. Used by the group size cap
/// (groups.rs) and by placement's room checks, so both judge "fits" alike, and by the balancer:
/// its CPU-bottleneck test (balance.rs) and the band a task it moved out must clear to come back
/// (balance-stays-band, place.rs). Prevents: a group of exactly a node's worth of busy threads
/// (numa01 on 2 nodes) reading as "does not fit".
pub const RATE_SLACK_CPU_PER_TASK: f64 = 0.02;

/// One thread of a user process.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskView {
    /// Its key.
    pub key: TaskKey,
    /// Thread name.
    pub comm: String,
    /// CPU it last ran on.
    pub cpu: u32,
    /// Node of that CPU (kernel id); `None` if its node does not list it: not in the topology,
    /// offline, or reserved (`Topology::reserve`).
    pub node: Option<u32>,
    /// CPU used over the last period, CPUs (0..1 per thread). 0 after the first sample.
    pub cpu_rate: f64,
    /// Time spent runnable but waiting for a CPU over the last period, fraction of the period
    /// (schedstat run delay); `None` without schedstat.
    pub run_delay: Option<f64>,
    /// CPUs it may run on.
    pub cpus_allowed: Arc<CpuSet>,
    /// Share of its memory accesses per node (dense index), summing to 1, smoothed over recent
    /// periods; all zero when nothing is known.
    pub access: Vec<f64>,
    /// Where `access` comes from.
    pub access_source: AccessSource,
    /// Evidence behind `access`: sampled accesses (or faults) in the last period.
    pub access_samples: u64,
    /// Host time the task was first seen, ns.
    pub first_seen_ns: u64,
    /// This thread's own hottest memory ranges, hottest first (empty without access samples):
    /// which slice of a shared address space this thread works on.
    pub hot: Vec<HotRange>,
}

/// A range of a process's memory that its threads touch often (from access samples).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct HotRange {
    /// Start address (bucket-aligned).
    pub start: u64,
    /// Length, bytes.
    pub len: u64,
    /// Node the memory was on when last sampled (kernel id).
    pub node: u32,
    /// Samples in it over the recent window (decayed), rounded.
    pub samples: u64,
}

/// One user process.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcView {
    /// Process id.
    pub pid: u32,
    /// Start time, clock ticks after boot (identity with the pid).
    pub starttime: u64,
    /// Parent process id (the leader thread's `ppid` from /proc/PID/stat; 0 when unknown). A
    /// child inherits its parent's CPU mask at fork, so a mask the policy set on the parent shows
    /// up on the child without anyone having pinned it (the adaptive policy's `foreign_pinned`).
    pub ppid: u32,
    /// Name.
    pub comm: String,
    /// Its threads.
    pub tids: Vec<u32>,
    /// Threads of it left out of `tids` because the kernel keeps their CPUs (`PF_NO_SETAFFINITY`:
    /// io-wq workers on kernels 5.12 to 6.2; see the module's limits), for `explain`.
    pub kernel_owned: usize,
    /// Resident memory, bytes.
    pub rss_bytes: u64,
    /// Resident memory per node (dense index), bytes, from numa_maps.
    pub mem_by_node: Vec<u64>,
    /// Of `mem_by_node`, the memory in mappings whose pages some other process maps too (a
    /// library's text, page cache or shared memory other processes map; never anonymous memory), bytes per node
    /// (dense index; empty when none is known). A page move of this process alone does not move
    /// it (`NodeUsage::shared_kb`), so the policy's memory moves count only the rest
    /// ([`ProcView::own_mem_by_node`]).
    pub shared_by_node: Vec<u64>,
    /// Of `shared_by_node`, its resident memory in each object another process of the sample maps
    /// too (`Sample::shared`: a memfd, a SysV segment, a shared file), per object: numa_maps'
    /// per-node pages of its VMAs of that object (its path, at an address where maps showed the
    /// process mapping that object). Empty without the shared-memory signal or a numa_maps read. The same pages are in every mapper's figures, so a group or unit of
    /// two mappers counts them once ([`Model::shared_twice`](crate::Model::shared_twice)).
    pub shared_objects: Vec<SharedResident>,
    /// RSS growth over the classification window, bytes per second (negative when shrinking).
    pub growth_bytes_per_s: f64,
    /// CPU used over the last period, CPUs (sum over threads).
    pub cpu_rate: f64,
    /// Whether the process placed itself: an explicit memory policy in numa_maps (bind, interleave,
    /// preferred) or a thread whose allowed CPUs are narrower than the process's allowed nodes'
    /// CPUs (the adaptive policy tells its own masks apart: `foreign_pinned`). The daemon leaves such processes alone unless told otherwise; the adaptive policy
    /// never moves them.
    pub pinned: bool,
    /// Where its cpuset confines it, when that is narrower than the machine: the CPUs it may run
    /// on and the nodes it may hold memory on. `None`: anywhere. A process whose threads are as
    /// wide as a narrow cpuset (a container's `--cpuset-cpus`, an operator's cgroup) did not place
    /// itself: it is not `pinned`, and the policy places it within these bounds only.
    pub confined: Option<Confinement>,
    /// The memory half of `pinned`: VMAs with an explicit memory policy hold at least
    /// `pinned_policy_share` of the resident memory (a placement the daemon never makes itself).
    pub mem_policy_pinned: bool,
    /// What kind of process it is (from behaviour, or an override).
    pub class: ProcessClass,
    /// Hottest memory ranges first (empty without access samples).
    pub hot: Vec<HotRange>,
    /// Host time the process was first seen, ns.
    pub first_seen_ns: u64,
    /// Age when first seen, ns (from its start time and the sample's boot time); a process first
    /// seen young is new, one first seen old was already running when numapilot started.
    pub age_at_first_seen_ns: u64,
    /// How long the RSS history behind `growth_bytes_per_s` spans, ns (reaches `class_window_ms`
    /// once the process has been watched that long).
    pub history_ns: u64,
    /// Memory traffic per running thread estimated from access samples, bytes per second (0
    /// without samples), an exponential average with half-life `class_window_ms`.
    pub traffic_bytes_per_s_per_thread: f64,
}

/// One process's resident memory in its mappings of one shared object ([`ProcView::shared_objects`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedResident {
    /// The object (`numapilot_observe::SharedMemory::id`).
    pub object: ObjectId,
    /// Resident bytes per node (dense index) in this process's VMAs of it.
    pub by_node: Vec<u64>,
}

/// The bounds of a process's cpuset ([`ProcView::confined`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confinement {
    /// Online CPUs it may run on: its cpuset's effective CPUs when the host read them
    /// (`ProcessSample::cpuset_cpus`), else the CPUs of `nodes`.
    pub cpus: CpuSet,
    /// Nodes it may hold memory on (`Mems_allowed`: its cpuset's memory nodes).
    pub nodes: NodeSet,
}

impl Confinement {
    /// The bounds of process `p` on `topo`, `None` when they are the whole machine (every online
    /// CPU and every node). From its leader thread (the first read thread when the leader is not
    /// listed): threads of a process share one cpuset.
    pub fn of(topo: &Topology, p: &ProcessSample) -> Option<Confinement> {
        let t = p.threads.iter().find(|t| t.tid == p.pid).or(p.threads.first())?;
        let all_nodes = topo.nodes.iter().all(|n| t.mems_allowed.contains(n.id));
        // The common case, every process of an unconfined machine on every model update: no cpuset
        // read and every node allowed is the whole machine, with no set built.
        if p.cpuset_cpus.is_none() && all_nodes {
            return None;
        }
        let online = topo.online_cpus();
        let nodes: NodeSet = (*t.mems_allowed).clone();
        let cpus = match &p.cpuset_cpus {
            Some(c) => c.intersection(&online),
            None => topo.cpus_of_nodes(&nodes).intersection(&online),
        };
        if cpus.is_empty() || (cpus == online && all_nodes) {
            return None;
        }
        Some(Confinement { cpus, nodes })
    }

    /// Whether it may be placed on node `id`: memory allowed there and a CPU of the node in it.
    /// A node without CPUs takes memory only, as for any process.
    pub fn admits(&self, topo: &Topology, id: u32) -> bool {
        self.nodes.contains(id)
            && topo
                .nodes
                .iter()
                .find(|n| n.id == id)
                .is_some_and(|n| n.cpus.is_empty() || !n.cpus.intersection(&self.cpus).is_empty())
    }
}

impl ProcView {
    /// Resident bytes per node (dense index) that a page move of this process alone can move:
    /// [`ProcView::mem_by_node`] less [`ProcView::shared_by_node`].
    pub fn own_mem_by_node(&self) -> Vec<u64> {
        let mut v = self.mem_by_node.clone();
        for (m, &s) in v.iter_mut().zip(&self.shared_by_node) {
            *m = m.saturating_sub(s);
        }
        v
    }

    /// Resident bytes a page move of this process alone can move: [`ProcView::rss_bytes`] less
    /// the memory in mappings other processes map too ([`ProcView::shared_by_node`]).
    pub fn own_rss_bytes(&self) -> u64 {
        self.rss_bytes.saturating_sub(self.shared_by_node.iter().fold(0u64, |a, &s| a.saturating_add(s)))
    }

    /// Its age at host time `now_ns`: its age when first seen plus the time since, ns.
    pub fn age_ns(&self, now_ns: u64) -> u64 {
        self.age_at_first_seen_ns.saturating_add(now_ns.saturating_sub(self.first_seen_ns))
    }
}

/// Previous counters of one thread.
#[derive(Debug, Clone)]
pub(crate) struct ThreadHist {
    starttime: u64,
    run_ns: Option<u64>,
    ticks: u64,
    hz: u64,
    wait_ns: Option<u64>,
    read_ns: u64,
    /// Host time of the last sampled access of this thread.
    last_sampled_ns: u64,
    /// This thread's hot buckets.
    hot: Vec<(u64, HotBucket)>,
    /// `History::generation` of the last update that saw this thread: the history is updated in
    /// place and what an update did not see is dropped at its end (no map rebuilt per update).
    seen: u64,
    /// The view the last update made is what a carried read makes again: no CPU over the period,
    /// no run delay, shares from residency or fault counts (not samples), no hot range. With the
    /// same read again (`read_ns` unchanged: the observer carried the thread) and its process's
    /// memory per node unchanged, the update leaves the view as it is (see `update`).
    settled: bool,
    /// Whether its allowed CPUs are narrower than its allowed nodes' CPUs (for `pinned`), as of
    /// `read_ns`.
    narrow: bool,
}

/// Makes every thread's next update derive its view afresh (no settled thread kept as it was):
/// after the machine changed under the model ([`crate::Model::set_topology`]), a settled thread's
/// "narrower than its nodes' CPUs" and shares were computed for the old CPUs.
pub(crate) fn unsettle_all(hist: &mut History) {
    for h in hist.threads.values_mut() {
        h.settled = false;
    }
    for p in hist.procs.values_mut() {
        p.settled = None;
    }
}

impl ThreadHist {
    /// The thread's access samples decayed with `access_half_life_ms` (the sum of its hot
    /// buckets): a smoothed amount of access evidence, which does not drop to 0 in a period that
    /// happened to draw no sample.
    pub(crate) fn smoothed_samples(&self) -> f64 {
        self.hot.iter().map(|(_, b)| b.samples).sum()
    }
}

/// A hot bucket of a process.
#[derive(Debug, Clone, Copy)]
struct HotBucket {
    samples: f64,
    node: u32,
}

/// What the model remembers of one process.
#[derive(Debug, Clone)]
pub(crate) struct ProcHist {
    starttime: u64,
    /// (host time, RSS bytes), oldest first, spanning at most one class window (plus one point).
    pub(crate) rss: VecDeque<(u64, u64)>,
    hot: Vec<(u64, HotBucket)>,
    /// Classification state (see `classify`).
    pub(crate) class: ClassState,
    /// Every thread's view was settled by the update that saw its threads read at
    /// [`SettledProc::read_ns`] (each `ThreadHist::settled`, no hot bucket): the same threads
    /// carried again leave every view as it is, so the update does that for the process whole,
    /// without a lookup per thread. `None` otherwise.
    settled: Option<SettledProc>,
    /// Some thread of the process has hot buckets of its own (smoothed samples that may round
    /// above 0), as of the last update: the groups' memory attribution looks each thread up only
    /// then; without, every thread's weight from samples is 0.
    pub(crate) hot_threads: bool,
}

/// The threads of a process whose views were all settled (see [`ProcHist::settled`]).
#[derive(Debug, Clone, PartialEq, Eq)]
struct SettledProc {
    /// The read time of the threads (the process's `read_ns`, or the sample's time without one).
    read_ns: u64,
    /// (tid, start time) of each thread, in the sample's order.
    threads: Vec<(u32, u64)>,
    /// Whether any of them was narrower than its nodes' CPUs (`ThreadHist::narrow`).
    narrow: bool,
}

/// What the model keeps between samples to derive rates, growth and co-access (implementation's
/// own; not part of the contract).
#[derive(Debug, Clone, Default)]
pub(crate) struct History {
    /// Hash map: one lookup per thread per period, never iterated.
    pub(crate) threads: HashMap<TaskKey, ThreadHist, FxBuild>,
    /// Updates of `threads` so far (the `ThreadHist::seen` mark).
    pub(crate) generation: u64,
    pub(crate) procs: BTreeMap<u32, ProcHist>,
    /// Keys that belonged to another task before this update (pid or tid reuse): relations of the
    /// old task must be forgotten.
    pub(crate) reborn: BTreeSet<TaskKey>,
    /// Co-access window (affinity.rs).
    pub(crate) coaccess: CoaccessWindow,
    /// Since when each edge has been below `group_keep_strength` (affinity.rs writes, groups.rs
    /// reads): the low mark of the join/split hysteresis. Looked up only, never iterated.
    pub(crate) weak_since: HashMap<(TaskKey, TaskKey), u64, FxBuild>,
    /// Previous busy and total ticks per node (dense index), load.rs.
    pub(crate) node_ticks: Vec<Option<(u64, u64)>>,
}

/// The history's tables for `Model::bookkeeping`.
pub(crate) fn bookkeeping(hist: &History, out: &mut Vec<(&'static str, usize)>) {
    out.push(("model.thread_history", hist.threads.len()));
    out.push(("model.thread_hot_buckets", hist.threads.values().map(|t| t.hot.len()).sum()));
    out.push(("model.proc_history", hist.procs.len()));
    out.push(("model.rss_points", hist.procs.values().map(|p| p.rss.len()).sum()));
    out.push(("model.proc_hot_buckets", hist.procs.values().map(|p| p.hot.len()).sum()));
    out.push(("model.reborn", hist.reborn.len()));
    out.push(("model.coaccess_buckets", hist.coaccess.buckets()));
    out.push(("model.coaccess_accessors", hist.coaccess.accessors()));
    out.push(("model.weak_edges", hist.weak_since.len()));
}

/// Cache of "are these allowed CPUs narrower than the CPUs of these allowed nodes", by content:
/// a handful of distinct pairs per sample however the sets are allocated (observe's reader
/// interns them, the simulator and deserialised replays give every thread its own `Arc`). The
/// last pair seen is checked first, by pointer and then by value (threads of a process share their
/// sets, or hold equal copies of them), then a hash map by value: O(1) per thread either way,
/// never a scan of a growing list.
struct NarrowCache {
    online: CpuSet,
    last: Option<(Arc<CpuSet>, Arc<NodeSet>, bool)>,
    // Hash map: looked up per thread, never iterated.
    by_value: HashMap<(Arc<CpuSet>, Arc<NodeSet>), bool, FxBuild>,
}

impl NarrowCache {
    fn new(topo: &Topology) -> Self {
        Self { online: topo.online_cpus(), last: None, by_value: HashMap::default() }
    }

    fn narrower(&mut self, topo: &Topology, cpus: &Arc<CpuSet>, mems: &Arc<NodeSet>) -> bool {
        if let Some((c, m, v)) = &self.last {
            // Equal contents give the same answer (it depends on the contents only); comparing two
            // small sets is cheaper than hashing the pair for the map.
            if (Arc::ptr_eq(c, cpus) || **c == **cpus) && (Arc::ptr_eq(m, mems) || **m == **mems) {
                return *v;
            }
        }
        let key = (cpus.clone(), mems.clone());
        let narrow = match self.by_value.get(&key) {
            Some(&v) => v,
            None => {
                let cover = topo.cpus_of_nodes(mems).intersection(&self.online);
                let v = !cover.is_empty() && !cover.is_subset(cpus);
                self.by_value.insert(key, v);
                v
            }
        };
        self.last = Some((cpus.clone(), mems.clone(), narrow));
        narrow
    }
}

fn ticks_to_ns(ticks: u64, hz: u64) -> u64 {
    if hz == 0 {
        return 0;
    }
    ((ticks as u128 * 1_000_000_000u128) / hz as u128).min(u128::from(u64::MAX)) as u64
}

/// Normalises `v` in place to sum 1; leaves all zeros when the sum is 0 or not finite.
pub(crate) fn normalise(v: &mut [f64]) {
    let s: f64 = v.iter().sum();
    if s > 0.0 && s.is_finite() {
        v.iter_mut().for_each(|x| *x /= s);
    } else {
        v.iter_mut().for_each(|x| *x = 0.0);
    }
}

/// One (thread, bucket) aggregate of this period's access samples.
#[derive(Debug, Clone, Copy)]
struct Row {
    key: TaskKey,
    bucket: u64,
    node: u32,
    idx: usize,
    count: u64,
}

/// This period's access samples, merged per (thread, bucket) and sorted, so a thread's rows and a
/// process's rows are contiguous slices (no map per sample: 50,000 samples per period are common).
struct PeriodAccesses {
    rows: Vec<Row>,
}

impl PeriodAccesses {
    fn new(topo: &Topology, sample: &Sample, shift: u32) -> Self {
        let mut rows: Vec<Row> = sample
            .accesses
            .iter()
            .filter(|a| a.count > 0)
            .filter_map(|a| {
                let idx = topo.node_idx(a.node)?;
                let key = TaskKey { pid: a.pid, tid: a.tid };
                Some(Row { key, bucket: a.addr >> shift, node: a.node, idx, count: u64::from(a.count) })
            })
            .collect();
        rows.sort_unstable_by_key(|r| (r.key, r.bucket, r.idx));
        // One row per (thread, bucket, node): a bucket with pages on two nodes keeps both counts.
        rows.dedup_by(|later, kept| {
            let same = later.key == kept.key && later.bucket == kept.bucket && later.idx == kept.idx;
            if same {
                kept.count = kept.count.saturating_add(later.count);
            }
            same
        });
        Self { rows }
    }

    /// Whether any thread of process `pid` has a row.
    fn has_pid(&self, pid: u32) -> bool {
        let lo = self.rows.partition_point(|r| r.key.pid < pid);
        self.rows.get(lo).is_some_and(|r| r.key.pid == pid)
    }

    fn task(&self, key: TaskKey) -> &[Row] {
        let lo = self.rows.partition_point(|r| r.key < key);
        let hi = self.rows.partition_point(|r| r.key <= key);
        &self.rows[lo..hi]
    }

    /// Samples per bucket of a process, sorted by bucket: (bucket, (count, node)), the node the
    /// one with the most samples in the bucket over all the process's threads (the lowest on a
    /// tie). Each node's rows are summed before the nodes are compared: compared row by row
    /// against the sum merged so far, three threads with 3 samples on node 0 and 2 + 2 on node 1
    /// put the bucket on node 0 (found by mutation testing, helper-45).
    fn process(&self, pid: u32) -> Vec<(u64, (u64, u32))> {
        let lo = self.rows.partition_point(|r| r.key.pid < pid);
        let hi = self.rows.partition_point(|r| r.key.pid <= pid);
        let mut v: Vec<(u64, u32, u64)> = self.rows[lo..hi].iter().map(|r| (r.bucket, r.node, r.count)).collect();
        v.sort_unstable_by_key(|x| (x.0, x.1));
        let mut out: Vec<(u64, (u64, u32))> = Vec::new();
        let mut i = 0;
        while i < v.len() {
            let bucket = v[i].0;
            let (mut total, mut best_node, mut best) = (0u64, v[i].1, 0u64);
            while i < v.len() && v[i].0 == bucket {
                let node = v[i].1;
                let mut on_node = 0u64;
                while i < v.len() && v[i].0 == bucket && v[i].1 == node {
                    on_node = on_node.saturating_add(v[i].2);
                    i += 1;
                }
                total = total.saturating_add(on_node);
                if on_node > best {
                    (best, best_node) = (on_node, node);
                }
            }
            out.push((bucket, (total, best_node)));
        }
        out
    }
}

/// Resident bytes per dense node of a process (numa_maps), and of those the bytes in mappings
/// other processes map too (empty when there are none).
fn mem_by_node(topo: &Topology, p: &ProcessSample) -> (Vec<u64>, Vec<u64>) {
    let mut v = vec![0u64; topo.nodes.len()];
    let mut shared = Vec::new();
    for u in &p.node_usage {
        if let Some(i) = topo.node_idx(u.node) {
            v[i] = v[i].saturating_add(u.total_kb().saturating_mul(1024));
            if u.shared_kb > 0 {
                shared.resize(topo.nodes.len(), 0u64);
                shared[i] = shared[i].saturating_add(u.shared_kb.min(u.total_kb()).saturating_mul(1024));
            }
        }
    }
    (v, shared)
}

/// Resident bytes per dense node of `p` in its VMAs of each shared object it maps (`objects`: the
/// sample's shared objects `p` is a user of). numa_maps names a VMA's file by path only, and a path
/// is no identity (every memfd of one name is `/memfd:NAME (deleted)`, every anonymous shared region
/// `/dev/zero (deleted)`): a VMA is the object's when it has its path and starts within one of the
/// ranges maps showed `p` mapping the object at (`SharedMemory::ranges`; a VMA split since, by
/// mprotect or mbind, starts within its old range). A VMA mapped since the maps read is in no
/// object until the next one.
fn shared_objects(topo: &Topology, p: &ProcessSample, objects: &[&SharedMemory]) -> Vec<SharedResident> {
    let Some(maps) = &p.numa_maps else { return Vec::new() };
    let mut out = Vec::new();
    for o in objects {
        let mut by_node = vec![0u64; topo.nodes.len()];
        let of_object = |v: &&numapilot_observe::parse::numa_maps::Vma| {
            v.file.as_deref() == Some(o.path.as_str()) && o.ranges_of(p.pid).any(|(s, e)| s <= v.start && v.start < e)
        };
        for vma in maps.vmas.iter().filter(of_object) {
            for (node, kb) in vma.node_kb() {
                if let Some(i) = topo.node_idx(node) {
                    by_node[i] = by_node[i].saturating_add(kb.saturating_mul(1024));
                }
            }
        }
        if by_node.iter().any(|&b| b > 0) {
            out.push(SharedResident { object: o.id(), by_node });
        }
    }
    out
}

/// Whether VMAs with an explicit policy hold at least `share` of the resident memory.
fn policy_pinned(p: &ProcessSample, share: f64) -> bool {
    let Some(maps) = &p.numa_maps else { return false };
    let (mut placed, mut total) = (0u64, 0u64);
    for v in &maps.vmas {
        let kb: u64 = v.node_kb().map(|(_, kb)| kb).fold(0, u64::saturating_add);
        total = total.saturating_add(kb);
        if v.policy.mode.is_explicit() {
            placed = placed.saturating_add(kb);
        }
    }
    total > 0 && placed as f64 >= share * total as f64
}

/// The kernel's NUMA-fault averages of a thread per dense node (private + shared), if any.
fn fault_counts(topo: &Topology, t: &ThreadSample) -> Option<Vec<u64>> {
    let numa = t.sched.as_ref()?.numa.as_ref()?;
    let mut v = vec![0u64; topo.nodes.len()];
    let mut any = false;
    for f in &numa.faults {
        if let Some(i) = topo.node_idx(f.node) {
            let c = f.task_private.saturating_add(f.task_shared);
            v[i] = v[i].saturating_add(c);
            any |= c > 0;
        }
    }
    any.then_some(v)
}

/// Decays `hot` by `decay`, adds this period's bucket counts, drops what rounds to nothing and
/// returns the ranges hottest first.
fn update_hot(
    hot: &mut Vec<(u64, HotBucket)>,
    decay: f64,
    shift: u32,
    new: impl Iterator<Item = (u64, (u64, u32))>,
) -> Vec<HotRange> {
    // `hot` is sorted by bucket (a few entries per thread: a vector beats a map).
    hot.iter_mut().for_each(|(_, b)| b.samples *= decay);
    for (bucket, (count, node)) in new {
        match hot.binary_search_by_key(&bucket, |e| e.0) {
            Ok(i) => {
                hot[i].1.samples += count as f64;
                hot[i].1.node = node;
            }
            Err(i) => hot.insert(i, (bucket, HotBucket { samples: count as f64, node })),
        }
    }
    // A bucket whose decayed count rounds to 0 samples (< 0.5) is gone: `HotRange::samples` is
    // that count rounded, so keeping it would report a range with 0 samples.
    hot.retain(|(_, b)| b.samples.round() >= 1.0);
    let mut out: Vec<HotRange> = hot
        .iter()
        .map(|&(bucket, b)| HotRange {
            start: bucket << shift,
            len: 1u64 << shift,
            node: b.node,
            samples: b.samples.round() as u64,
        })
        .collect();
    out.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.start.cmp(&b.start)));
    out
}

/// Rebuilds `model.tasks` and `model.procs` from `sample`.
/// The threads of `p` the model places: all but those whose CPUs the kernel keeps
/// (`PF_NO_SETAFFINITY`; see the module's limits).
fn placeable(p: &ProcessSample) -> impl Iterator<Item = &ThreadSample> {
    p.threads.iter().filter(|t| !t.stat.kernel_owns_affinity())
}

pub(crate) fn update(model: &mut Model, sample: &Sample) {
    let now = model.now_ns;
    let dt = model.period_ns;
    let tun = &model.tunables;
    let topo = &model.topo;
    let nn = topo.nodes.len();
    let hist = &mut model.state;
    hist.reborn.clear();
    let acc = PeriodAccesses::new(topo, sample, tun.coaccess_bucket_shift);
    let hot_decay = decay_factor(dt, tun.access_half_life_ms);
    let window_ns = tun.class_window_ms.saturating_mul(1_000_000);
    let stale_ns = tun.access_stale_ms.saturating_mul(1_000_000);
    // The views are updated in place: a thread seen before keeps its entry (and its `comm`
    // string), so a steady update allocates and copies nothing per thread; new threads are
    // collected and inserted at the end, vanished ones removed. (Rebuilding the map every update
    // moved 10,000 views three times and dropped them: about a third of the update's CPU.)
    let tasks_map = &mut model.tasks;
    let tasks_before = tasks_map.len();
    let mut tasks_kept = 0usize;
    let mut fresh: Vec<(TaskKey, TaskView)> = Vec::new();
    let old_procs = std::mem::take(&mut model.procs);
    // Collected as a vector and bulk-built into the map at the end (sorted input builds a
    // BTreeMap in linear time; inserting keys one by one costs a search and rebalance each).
    let mut procs: Vec<(u32, ProcView)> = Vec::with_capacity(old_procs.len());
    hist.generation += 1;
    let generation = hist.generation;
    let mut procs_hist = BTreeMap::new();
    let mut narrow = NarrowCache::new(topo);
    // Processes whose threads were all left as they were without a lookup (whole-process-settled).
    let mut settled_whole: std::collections::HashSet<u32, FxBuild> = Default::default();
    // `Topology::node_listing` of every CPU id, looked up once per thread read (two binary
    // searches a thread were 4% of the model's update on 10,000 threads).
    // The shared objects each process maps (with another process of the sample), by pid.
    let mut objects_of: HashMap<u32, Vec<&SharedMemory>, FxBuild> = HashMap::default();
    for o in &sample.shared {
        for &(pid, _) in &o.users {
            objects_of.entry(pid).or_default().push(o);
        }
    }
    let cpu_node: Vec<Option<u32>> = {
        let max = topo.cpus.last().map_or(0, |c| c.id as usize + 1);
        (0..max).map(|c| topo.node_listing(c as u32)).collect()
    };

    // A zombie (exited, not reaped, no thread left) has no thread to place and no memory: taken
    // as a process it stayed in the tables, its group and its node's load until its parent
    // reaped it. It is forgotten as one that exited.
    for p in sample.processes.iter().filter(|p| !p.kernel_thread && !p.stat.is_zombie()) {
        // Process identity and history.
        let old_proc = old_procs.get(&p.pid).filter(|v| v.starttime == p.starttime);
        let ph = hist.procs.remove(&p.pid);
        let reused = ph.as_ref().is_some_and(|h| h.starttime != p.starttime);
        let mut ph = ph.filter(|h| h.starttime == p.starttime).unwrap_or_else(|| ProcHist {
            starttime: p.starttime,
            rss: VecDeque::new(),
            hot: Vec::new(),
            class: ClassState::default(),
            settled: None,
            hot_threads: false,
        });
        let (mem, shared_mem) = mem_by_node(topo, p);
        let rss_bytes = p
            .rss_kb
            .map(|kb| kb.saturating_mul(1024))
            .unwrap_or_else(|| mem.iter().fold(0, |a, &b| a.saturating_add(b)));

        // A carried thread whose view is settled is left as it is, when the memory its shares may
        // come from is the memory of the last update.
        let mem_same = old_proc.is_some_and(|o| o.mem_by_node == mem);
        let read_ns = if p.read_ns != 0 { p.read_ns } else { sample.monotonic_ns };

        // Threads.
        let mut tids = Vec::with_capacity(p.threads.len());
        let mut cpu_sum = 0.0;
        let mut any_narrow = false;
        let mut proc_samples = 0u64;
        let mut running = 0usize;
        // Every thread settled and carried again, each as the loop below would find it (its
        // history is only ever changed by this function, which dropped `settled` otherwise): the
        // loop's settled case for each, without the lookups (whole-process-settled).
        let whole = ph.settled.as_ref().filter(|s| {
            mem_same
                && s.read_ns == read_ns
                && s.threads.iter().copied().eq(placeable(p).map(|t| (t.tid, t.stat.starttime)))
                && !acc.has_pid(p.pid)
        });
        if let Some(s) = whole {
            any_narrow = s.narrow;
            tids.extend(placeable(p).map(|t| t.tid));
            tasks_kept += s.threads.len();
            settled_whole.insert(p.pid);
        }
        // For `ProcHist::settled` and `hot_threads`: every thread's view settled with no hot bucket
        // of its own, and some thread with one.
        let (mut all_settled, mut hot_threads) = (true, false);
        for t in placeable(p).filter(|_| whole.is_none()) {
            let key = TaskKey { pid: p.pid, tid: t.tid };
            crate::work::count("tasks.thread_lookups", 1);
            let th = hist.threads.get_mut(&key);
            let same = !reused && th.as_ref().is_some_and(|h| h.starttime == t.stat.starttime);
            if th.is_some() && !same {
                hist.reborn.insert(key);
            }
            let mut th = th.filter(|_| same);
            // The live observer carries the threads of a process that did not run (most of them,
            // most cycles): the same counters again give a rate of 0 over no interval, and a
            // settled view is then exactly what it was. The update costs a lookup for such a thread.
            if let Some(h) = th.as_mut() {
                if h.settled && h.read_ns == read_ns && mem_same && h.hot.is_empty() && acc.task(key).is_empty() {
                    h.seen = generation;
                    any_narrow |= h.narrow;
                    tids.push(t.tid);
                    tasks_kept += 1;
                    continue;
                }
            }
            let mut thread_hot = th.as_mut().map(|h| std::mem::take(&mut h.hot)).unwrap_or_default();
            let rows = acc.task(key);
            let new = rows.iter().map(|r| (r.bucket, (r.count, r.node)));
            let hot = update_hot(&mut thread_hot, hot_decay, tun.coaccess_bucket_shift, new);
            let mut slot = tasks_map.get_mut(&key);
            let old = slot.as_deref().filter(|_| same);
            let ticks = t.stat.cpu_ticks();
            let run_ns = t.schedstat.map(|s| s.run_ns);
            let wait_ns = t.schedstat.map(|s| s.wait_ns);
            let (mut cpu_rate, mut run_delay) = (0.0, None);
            if let Some(h) = &th {
                let interval = read_ns.saturating_sub(h.read_ns);
                let (a, b) = match (h.run_ns, run_ns) {
                    (Some(x), Some(y)) => (x, y),
                    _ => (ticks_to_ns(h.ticks, h.hz), ticks_to_ns(ticks, sample.clock_ticks_per_sec)),
                };
                // One thread runs on one CPU at a time: a rate above 1 is read skew (the counters
                // and the read time are not taken at one instant), clamped.
                cpu_rate = numapilot_observe::rate::cpu_rate(a, b, interval).unwrap_or(0.0).clamp(0.0, 1.0);
                run_delay = match (h.wait_ns, wait_ns) {
                    (Some(x), Some(y)) if interval > 0 && y >= x => Some((y - x) as f64 / interval as f64),
                    _ => None,
                };
            }
            let cpu = t.last_cpu();
            // Only a CPU its node lists: a reserved CPU (`Topology::reserve`: isolated, or the
            // operator's) is outside the machine placement uses, so a thread there (an RT task
            // pinned to an isolated CPU) is no node's CPU demand; without this its 100% filled the
            // node's remaining CPUs and nothing was placed beside it.
            let node = cpu_node.get(cpu as usize).copied().flatten();

            // Access shares, best source first.
            let mut last_sampled_ns = th.as_ref().map_or(0, |h| h.last_sampled_ns);
            let (access, source, evidence) = if !rows.is_empty() {
                let mut raw = vec![0.0f64; nn];
                let mut total = 0u64;
                for r in rows {
                    raw[r.idx] += r.count as f64;
                    total = total.saturating_add(r.count);
                }
                // The weight of the new evidence follows the age of the old estimate (the time
                // since this thread was last sampled), not the model period: after a pause of
                // 10 half-lives the old shares weigh 2^-10.
                let alpha = 1.0 - decay_factor(now.saturating_sub(last_sampled_ns), tun.access_half_life_ms);
                last_sampled_ns = now;
                proc_samples = proc_samples.saturating_add(total);
                normalise(&mut raw);
                let access = match old.filter(|o| o.access_source == AccessSource::Samples && o.access.len() == nn) {
                    Some(o) => {
                        let mut v: Vec<f64> = o.access.iter().zip(&raw).map(|(s, r)| s + alpha * (r - s)).collect();
                        normalise(&mut v);
                        v
                    }
                    None => raw,
                };
                (access, AccessSource::Samples, total)
            } else if let Some(o) = old
                .filter(|o| o.access_source == AccessSource::Samples && now.saturating_sub(last_sampled_ns) < stale_ns)
            {
                (o.access.clone(), AccessSource::Samples, 0)
            } else if let Some(counts) = fault_counts(topo, t) {
                let total: u64 = counts.iter().fold(0, |a, &b| a.saturating_add(b));
                let mut v: Vec<f64> = counts.iter().map(|&c| c as f64).collect();
                normalise(&mut v);
                (v, AccessSource::NumaFaults, total)
            } else {
                let mut v: Vec<f64> = mem.iter().map(|&b| b as f64).collect();
                normalise(&mut v);
                (v, AccessSource::Residency, 0)
            };

            // Narrower than what its cpuset allows of its nodes' CPUs: with the cpuset read, a
            // thread as wide as a narrow cpuset is not narrow (it is confined, not pinned).
            let thread_narrow = match &p.cpuset_cpus {
                None => narrow.narrower(topo, &t.cpus_allowed, &t.mems_allowed),
                Some(cs) => {
                    // A cpuset whose CPUs lie on none of its memory nodes: its CPUs alone.
                    let cs = cs.intersection(&narrow.online);
                    let mut reach = topo.cpus_of_nodes(&t.mems_allowed).intersection(&cs);
                    if reach.is_empty() {
                        reach = cs;
                    }
                    !reach.is_empty() && !reach.is_subset(&t.cpus_allowed)
                }
            };
            any_narrow |= thread_narrow;
            let settled = cpu_rate == 0.0 && run_delay.is_none() && source != AccessSource::Samples && hot.is_empty();
            cpu_sum += cpu_rate;
            if cpu_rate > 0.0 {
                running += 1;
            }
            tids.push(t.tid);
            match slot.take() {
                Some(v) => {
                    tasks_kept += 1;
                    if v.comm != t.stat.comm {
                        v.comm.clone_from(&t.stat.comm);
                    }
                    if !same {
                        v.first_seen_ns = now;
                    }
                    v.key = key;
                    v.cpu = cpu;
                    v.node = node;
                    v.cpu_rate = cpu_rate;
                    v.run_delay = run_delay;
                    if !Arc::ptr_eq(&v.cpus_allowed, &t.cpus_allowed) {
                        v.cpus_allowed = t.cpus_allowed.clone();
                    }
                    v.access = access;
                    v.access_source = source;
                    v.access_samples = evidence;
                    v.hot = hot;
                }
                None => fresh.push((
                    key,
                    TaskView {
                        key,
                        comm: printable(&t.stat.comm),
                        cpu,
                        node,
                        cpu_rate,
                        run_delay,
                        cpus_allowed: t.cpus_allowed.clone(),
                        access,
                        access_source: source,
                        access_samples: evidence,
                        first_seen_ns: now,
                        hot,
                    },
                )),
            }
            all_settled &= settled && thread_hot.is_empty();
            hot_threads |= !thread_hot.is_empty();
            let new_hist = ThreadHist {
                starttime: t.stat.starttime,
                run_ns,
                ticks,
                hz: sample.clock_ticks_per_sec,
                wait_ns,
                read_ns,
                last_sampled_ns,
                hot: thread_hot,
                seen: generation,
                settled,
                narrow: thread_narrow,
            };
            match th {
                Some(h) => *h = new_hist,
                None => {
                    hist.threads.insert(key, new_hist);
                }
            }
        }

        if whole.is_none() {
            ph.hot_threads = hot_threads;
            ph.settled = all_settled.then(|| SettledProc {
                read_ns,
                threads: placeable(p).map(|t| (t.tid, t.stat.starttime)).collect(),
                narrow: any_narrow,
            });
        }

        // RSS history and growth.
        // A clock that stood still or went back (duplicate timestamps in a replay) replaces the
        // points at or after `now` instead of adding one per update: the history stays bounded
        // by the window.
        while ph.rss.back().is_some_and(|p| p.0 >= now) {
            ph.rss.pop_back();
        }
        ph.rss.push_back((now, rss_bytes));
        while ph.rss.len() > 2 && ph.rss[1].0.saturating_add(window_ns) <= now {
            ph.rss.pop_front();
        }
        let (t0, r0) = ph.rss[0];
        let history_ns = now.saturating_sub(t0);
        let growth = if history_ns > 0 { (rss_bytes as f64 - r0 as f64) / (history_ns as f64 / 1e9) } else { 0.0 };

        // Hot buckets: decay, add this period's samples, drop what rounds to nothing.
        let shift = tun.coaccess_bucket_shift;
        let hot = update_hot(&mut ph.hot, hot_decay, shift, acc.process(p.pid).into_iter());

        // Traffic per running thread from samples, exponentially averaged (half-life: the class
        // window). A sample taken at a stretched period (the engine backing off) stands for that
        // many base periods.
        let traffic_now = if dt > 0 {
            let bytes = tun.access_sample_bytes as f64 * f64::from(sample.access_scale());
            proc_samples as f64 * bytes / (dt as f64 / 1e9) / running.max(1) as f64
        } else {
            0.0
        };
        let traffic_alpha = 1.0 - decay_factor(dt, tun.class_window_ms);
        // The first period with a rate starts the average (the first sample has none).
        let traffic = match old_proc.filter(|o| o.history_ns > 0) {
            Some(o) => {
                o.traffic_bytes_per_s_per_thread + traffic_alpha * (traffic_now - o.traffic_bytes_per_s_per_thread)
            }
            None => traffic_now,
        };

        let hz = sample.clock_ticks_per_sec.max(1);
        let started_ns = ((p.starttime as u128 * 1_000_000_000u128) / hz as u128).min(u128::from(u64::MAX)) as u64;
        let mem_policy_pinned = policy_pinned(p, tun.pinned_policy_share);
        let pinned = mem_policy_pinned || any_narrow;
        procs.push((
            p.pid,
            ProcView {
                pid: p.pid,
                starttime: p.starttime,
                ppid: p.threads.iter().find(|t| t.tid == p.pid).map_or(0, |t| t.stat.ppid),
                comm: printable(&p.comm),
                kernel_owned: p.threads.len().saturating_sub(tids.len()),
                tids,
                rss_bytes,
                mem_by_node: mem,
                shared_by_node: shared_mem,
                shared_objects: objects_of.get(&p.pid).map_or_else(Vec::new, |o| shared_objects(topo, p, o)),
                growth_bytes_per_s: growth,
                cpu_rate: cpu_sum,
                pinned,
                confined: Confinement::of(topo, p),
                mem_policy_pinned,
                class: old_proc.map_or(ProcessClass::Unclassified, |o| o.class),
                hot,
                first_seen_ns: old_proc.map_or(now, |o| o.first_seen_ns),
                age_at_first_seen_ns: old_proc
                    .map_or_else(|| sample.boottime_ns.saturating_sub(started_ns), |o| o.age_at_first_seen_ns),
                history_ns,
                traffic_bytes_per_s_per_thread: traffic,
            },
        ));
        procs_hist.insert(p.pid, ph);
    }
    // Whatever is left in the old history vanished; a vanished key that comes back later is a new
    // task, whose old relations the graph already dropped with the vanished one.
    // The threads of a process left whole as it was (`settled_whole`) were not marked seen.
    if settled_whole.is_empty() {
        hist.threads.retain(|_, h| h.seen == generation);
    } else {
        hist.threads.retain(|k, h| h.seen == generation || settled_whole.contains(&k.pid));
    }
    if tasks_kept < tasks_before {
        // Some views were not in this sample: their threads are gone (the history just dropped
        // them, so the history says which views stay).
        tasks_map.retain(|k, _| hist.threads.contains_key(k));
    }
    if tasks_map.is_empty() {
        // The first update (or one after everything vanished): one bulk build.
        *tasks_map = fresh.into_iter().collect();
    } else {
        tasks_map.extend(fresh);
    }
    hist.procs = procs_hist;
    model.procs = procs.into_iter().collect();
}

/// A process or thread name as the model keeps it: control characters escaped (`\n` as `\\n`).
/// Names are set by the processes themselves (prctl, /proc/self/comm) and end up in the daemon's
/// log lines, `explain` and the reasons of its actions; a newline in one forged a log line.
pub fn printable(comm: &str) -> String {
    if comm.chars().any(char::is_control) {
        comm.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
    } else {
        comm.to_string()
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn names_keep_no_control_characters() {
        // A name set with prctl(PR_SET_NAME) may hold a newline: escaped, it cannot start a line
        // of its own in the daemon's log or in `explain`.
        assert_eq!(super::printable("a) Z 1\n2 3 ("), "a) Z 1\\n2 3 (");
        assert_eq!(super::printable("tab\there"), "tab\\there");
        assert_eq!(super::printable("postgres: walwriter"), "postgres: walwriter");
    }

    use super::*;

    use numapilot_observe::{AccessSample, NodeUsage, ProcessSample, TaskStat, ThreadSample};

    const SEC: u64 = 1_000_000_000;

    /// A sample at `t` s of processes 100.. (`procs` of them, `threads` threads each, 1 GiB on
    /// node 0), every thread as read at `read` s: `run(pid, tid)` ns of CPU, thread 2 of each
    /// process pinned to CPU 0, the memory of process 101 moved to node 1 when `moved`, and one
    /// access sample of process 102's first thread when `sampled`.
    fn carried_sample(
        topo: &Topology,
        t: u64,
        read: u64,
        (procs, threads): (u32, u32),
        run: impl Fn(u32, u32) -> u64,
        moved: bool,
        sampled: bool,
    ) -> Sample {
        let all = Arc::new(topo.online_cpus());
        let cpu0: Arc<CpuSet> = Arc::new(std::iter::once(0).collect());
        let nodes = Arc::new(topo.node_ids());
        let mut s = Sample::empty_at(t * SEC);
        for pid in 100..100 + procs {
            let stat = |id: u32, ticks: u64| TaskStat {
                pid: id,
                comm: "app".into(),
                state: 'S',
                starttime: 7,
                utime: ticks,
                num_threads: threads,
                ..TaskStat::default()
            };
            let node = u32::from(moved && pid == 101);
            s.processes.push(ProcessSample {
                pid,
                starttime: 7,
                comm: "app".into(),
                kernel_thread: false,
                read_ns: read * SEC,
                stat: stat(pid, 0),
                rss_kb: Some(1 << 20),
                numa_maps: None,
                numa_maps_error: None,
                node_usage: vec![NodeUsage {
                    node,
                    huge_kb: 0,
                    heap_kb: 0,
                    stack_kb: 0,
                    anon_kb: 1 << 20,
                    file_kb: 0,
                    shared_kb: 0,
                }],
                threads: (0..threads)
                    .map(|i| {
                        let tid = pid * 100 + i;
                        ThreadSample {
                            tid,
                            stat: stat(tid, run(pid, tid) / 10_000_000),
                            cpus_allowed: if i == 2 { cpu0.clone() } else { all.clone() },
                            mems_allowed: nodes.clone(),
                            voluntary_ctxt_switches: None,
                            nonvoluntary_ctxt_switches: None,
                            sched: None,
                            schedstat: Some(numapilot_observe::SchedStat {
                                run_ns: run(pid, tid),
                                wait_ns: 0,
                                timeslices: 1,
                            }),
                        }
                    })
                    .collect(),
                cpuset_cpus: None,
            });
        }
        if sampled {
            s.accesses.push(AccessSample {
                pid: 102,
                tid: 10200,
                addr: 1 << 30,
                phys: None,
                node: 0,
                count: 3,
                last_ns: t * SEC,
            });
        }
        s
    }

    /// A thread whose CPUs the kernel keeps (an io-wq worker of 5.12-6.2, bound to node 0's CPUs
    /// and flagged `PF_NO_SETAFFINITY`) is no pin of its process's and no task to place: the
    /// process stays placeable with its other threads, through a fresh read and carried ones (the
    /// whole-process-settled path). The same thread unflagged is a pin (control).
    #[test]
    fn a_thread_whose_cpus_the_kernel_keeps_is_no_pin_and_no_task() {
        let topo = Topology::uniform(2, 4, 4 << 20, 20);
        let idle = |_: u32, _: u32| SEC;
        let sample = |t: u64, flagged: bool| {
            let mut s = carried_sample(&topo, t, 1, (1, 3), idle, false, false);
            if flagged {
                s.processes[0].threads[2].stat.flags |= numapilot_observe::parse::stat::PF_NO_SETAFFINITY;
            }
            s
        };
        let mut m = Model::new(topo.clone(), crate::Tunables::default());
        for t in 1..=4 {
            m.update(&sample(t, true));
            let p = &m.procs[&100];
            assert!(!p.pinned, "update {t}: the worker's mask is the kernel's");
            let tids: Vec<u32> = m.tasks.keys().map(|k| k.tid).collect();
            assert_eq!(tids, vec![10000, 10001], "update {t}");
            assert_eq!(p.tids, vec![10000, 10001], "update {t}");
            assert_eq!(p.kernel_owned, 1, "update {t}");
        }
        let mut control = Model::new(topo.clone(), crate::Tunables::default());
        control.update(&sample(1, false));
        assert!(control.procs[&100].pinned, "unflagged, thread 2 on CPU 0 pins its process");
        assert_eq!(control.tasks.len(), 3);
        assert_eq!(control.procs[&100].kernel_owned, 0);
    }

    /// whole-process-settled: once every thread of a process is settled, a carried read of it
    /// costs no lookup per thread (its threads are left as they are, whole), and the model is
    /// exactly the model of the per-thread path (the record dropped before every update): views,
    /// processes and groups, through carried reads, a memory move, an access sample and a read
    /// that finds a thread running. 50 processes of 8 threads.
    #[test]
    fn a_settled_process_carried_again_costs_no_lookup_per_thread_and_changes_nothing() {
        let topo = Topology::uniform(2, 4, 4 << 20, 20);
        let size = (50, 8);
        let idle = |_: u32, _: u32| SEC;
        let runs = |pid: u32, tid: u32| if pid == 103 && tid == 10301 { 2 * SEC } else { SEC };
        // (time, read time, memory moved, sampled, counters)
        let steps: Vec<(u64, u64, bool, bool, bool)> = vec![
            (1, 1, false, false, false),
            (2, 1, false, false, false),
            (3, 1, false, false, false),
            (4, 1, true, false, false),
            (5, 1, true, true, false),
            (6, 1, true, false, false),
            (7, 7, true, false, true),
            (8, 7, true, false, true),
            (9, 7, true, false, true),
        ];
        let mut fast = Model::new(topo.clone(), crate::Tunables::default());
        let mut slow = Model::new(topo.clone(), crate::Tunables::default());
        crate::work::take();
        for (i, &(t, read, moved, sampled, ran)) in steps.iter().enumerate() {
            let s =
                carried_sample(&topo, t, read, size, |p, x| if ran { runs(p, x) } else { idle(p, x) }, moved, sampled);
            fast.update(&s);
            let fast_work = crate::work::take();
            for h in slow.state.procs.values_mut() {
                h.settled = None;
            }
            slow.update(&s);
            let slow_work = crate::work::take();
            assert_eq!(fast.tasks, slow.tasks, "step {i}");
            assert_eq!(fast.procs, slow.procs, "step {i}");
            assert_eq!(fast.groups, slow.groups, "step {i}");
            assert_eq!(slow_work.get("tasks.thread_lookups"), Some(&400), "step {i}");
            let lookups = fast_work.get("tasks.thread_lookups").copied().unwrap_or(0);
            let expected = match i {
                // The first read of every thread (no rate yet: the views settle at once), then
                // none; process 101's memory moved: its threads; process 102's access sample: its
                // threads, and again while the sampled thread's hot bucket decays; the new read at
                // 7 s: every thread, and at the first carried read after it every thread again
                // (the run delay over the 6 s between the reads is 0, not none: not settled);
                // then process 102's only.
                0 | 6 | 7 => 400,
                1 | 2 => 0,
                _ => 8,
            };
            assert_eq!(lookups, expected, "step {i}: {fast_work:?}");
            // The groups' memory attribution looks up the threads of a process with a hot
            // bucket of its own only: process 102's, from its sample on.
            let hot = fast_work.get("groups.thread_lookups").copied().unwrap_or(0);
            assert_eq!(hot, if i >= 4 { 8 } else { 0 }, "step {i}: {fast_work:?}");
            let busy = fast.tasks[&TaskKey { pid: 103, tid: 10301 }].cpu_rate;
            assert_eq!(busy > 0.0, i == 6, "step {i}: thread 10301 ran between the reads at 1 s and 7 s");
        }
        assert!(fast.procs.values().all(|p| p.pinned), "thread 2 pinned to CPU 0 keeps its process pinned");
    }

    /// The cache answers as the definition does (allowed CPUs narrower than the CPUs of the allowed
    /// nodes), for shared sets, equal copies in their own `Arc`s and changing pairs, in any order.
    #[test]
    fn narrow_cache_equals_the_definition() {
        let topo = Topology::uniform(2, 4, 1 << 20, 20);
        let online = topo.online_cpus();
        let direct = |cpus: &CpuSet, mems: &NodeSet| {
            let cover = topo.cpus_of_nodes(mems).intersection(&online);
            !cover.is_empty() && !cover.is_subset(cpus)
        };
        let cpu_sets = ["0-7", "0-3", "4-7", "0", "1-6", "0-3,5"];
        let node_sets = ["0-1", "0", "1"];
        let mut pairs = Vec::new();
        for c in cpu_sets {
            for n in node_sets {
                pairs.push((CpuSet::parse_list(c).unwrap(), NodeSet::parse_list(n).unwrap()));
            }
        }
        let mut cache = NarrowCache::new(&topo);
        let shared: Vec<(Arc<CpuSet>, Arc<NodeSet>)> =
            pairs.iter().map(|(c, n)| (Arc::new(c.clone()), Arc::new(n.clone()))).collect();
        // A pseudo-random walk over the pairs, each step as the shared Arcs or as fresh copies.
        let mut x = 7usize;
        for step in 0..500 {
            x = (x * 1103515245 + 12345) % 2147483648;
            let i = x % pairs.len();
            let (c, n) = if step % 3 == 0 {
                (Arc::new(pairs[i].0.clone()), Arc::new(pairs[i].1.clone()))
            } else {
                shared[i].clone()
            };
            assert_eq!(cache.narrower(&topo, &c, &n), direct(&pairs[i].0, &pairs[i].1), "{:?}", pairs[i]);
        }
        assert!(pairs.iter().any(|(c, n)| direct(c, n)) && pairs.iter().any(|(c, n)| !direct(c, n)));
    }
}
