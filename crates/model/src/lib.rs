//! The model: what numapilot believes about the machine, derived from consecutive raw samples.
//!
//! # Problem
//!
//! A [`Sample`] is a snapshot of counters: CPU ticks, pages per node, fault counts, sampled
//! addresses. Decisions need derived, slowly-changing beliefs: how busy each thread is, where the
//! memory it touches lives, which threads belong together (and how strongly), how loaded and how
//! contended each node is, and what kind of process each one is. This crate turns the stream of
//! samples into those beliefs, with no I/O, so every rule is testable with hand-built samples and a
//! recorded run replays into the same state.
//!
//! # Approach
//!
//! ```text
//!   Sample(t) ──► tasks   per thread: CPU rate, run delay, node, where its accesses go  (tasks.rs)
//!      │          procs   per process: RSS by node, growth, pinned?, class              (tasks.rs, classify.rs)
//!      ├────────► graph   affinity edges: co-access of a bucket within a window, kernel
//!      │                  NUMA groups, communication, address-space prior; fast rise,
//!      │                  decay s/2^(dt/h); tiers                                        (affinity.rs)
//!      ├────────► groups  joined by edges >= medium tier, kept until an edge has been below
//!      │                  the keep mark for the grace period (hysteresis); merge small-into-
//!      │                  large; every group fits one node (CPU and memory)              (groups.rs)
//!      └────────► nodes   per node and resource: load = busy/period, interference =
//!                         wait/period; bottleneck flag with two-mark hysteresis          (load.rs)
//! ```
//!
//! [`Model::update`] applies one sample; the order above is the order of the update (groups need
//! the graph, classes need growth). Everything is keyed by pid/tid *and* start time, so a reused pid
//! starts a fresh history.
//!
//! # Units
//!
//! Time in ns (`_ns`), CPU in CPUs (1.0 = one CPU busy), memory in bytes, loads and interference as
//! fractions of a period (0..1, may exceed 1 for interference when several tasks wait on one CPU).
//! Per-node vectors are indexed by the topology's dense node index (`idx`), never by kernel id.
//!
//! # Cost
//!
//! Linear in threads, samples and edges up to logarithmic factors; nothing is quadratic except
//! within one memory bucket's recent accessors (this period's accessors are first cut to the
//! `coaccess_max_accessors` most recent, a linear selection) and within one group's candidate
//! unions. `examples/scale.rs` (1,000 processes x 10 threads, 4 nodes) measures one update in four
//! configurations. Release build, mean of 20 updates, on the shared 2-core development box (load
//! average 2.3-2.6, so absolute figures are inflated; ratios are from one interleaved run of the
//! build before and after the performance fixes of the model review):
//!
//! ```text
//!   configuration                                   before     after    ratio
//!   signals: 50,000 samples + 2,000 comm pairs     44-49 ms   39-44 ms   0.89
//!   plain: no samples (the usual live case)        14-16 ms   11-13 ms   0.83
//!   distinct-sets: one Arc per thread's sets       46-50 ms   13.5-14 ms 0.28
//!   hot-bucket: all samples in one 2 MiB bucket    62-65 ms   33-38 ms   0.56
//! ```
//!
//! Second pass (thread history updated in place instead of a hash map rebuilt per update, the
//! previous views walked as a sorted vector with their unchanged `comm` strings moved, memory
//! shared out equally without a weight vector and sort per process and node): `plain` 30.5 ->
//! 24.3 ms, mean of 6 interleaved runs of each build, load average 11-17 (ratio 0.80).
//!
//! (An earlier version measured 61 M / 207 M instructions for plain / signals under callgrind;
//! not re-measured since.)
//!
//! # Limits
//!
//! The model sees what the sample holds: without access samples or NUMA fault statistics, a
//! thread's accesses are assumed to follow its process's resident memory, and threads of a process
//! can only be grouped by the address-space prior.

#![deny(missing_docs)]

pub mod affinity;
pub mod classify;
pub mod groups;
pub mod load;
pub mod tasks;
pub mod tunables;
mod work;

use std::collections::BTreeMap;

use numapilot_observe::Sample;
use numapilot_topology::Topology;

pub use affinity::{AffinityGraph, Edge, Tier};
pub use classify::ProcessClass;
pub use groups::{Group, GroupId, Groups};
pub use load::{NodeLoad, Resource, ResourceState};
pub use tasks::{
    AccessSource, Confinement, HotRange, ProcView, SharedResident, TaskKey, TaskView, RATE_SLACK_CPU_PER_TASK,
};
pub use tunables::{TunableError, Tunables};

/// Everything the model believes after the last [`Model::update`]. Plain data: a policy reads the
/// fields; tests may build one by hand.
#[derive(Debug, Clone)]
pub struct Model {
    /// The numbers the model works with.
    pub tunables: Tunables,
    /// The machine.
    pub topo: Topology,
    /// Host time of the last sample, ns (0 before the first).
    pub now_ns: u64,
    /// Time between the last two samples, ns (0 after the first).
    pub period_ns: u64,
    /// Samples applied so far.
    pub updates: u64,
    /// Every live thread of a user process, by key.
    pub tasks: BTreeMap<TaskKey, TaskView>,
    /// Every live user process, by pid.
    pub procs: BTreeMap<u32, ProcView>,
    /// Affinity between tasks.
    pub graph: AffinityGraph,
    /// Affinity groups.
    pub groups: Groups,
    /// Load and interference per node, indexed by dense node index.
    pub nodes: Vec<NodeLoad>,
    /// Class overrides by process name (`comm`), from configuration: a process with this name gets
    /// this class whatever its behaviour.
    pub class_overrides: BTreeMap<String, ProcessClass>,
    /// Derivation state the public fields are computed from (previous counters, co-access window).
    pub(crate) state: tasks::History,
}

impl Model {
    /// An empty model of `topo`, after checking the tunables ([`Tunables::validate`]): the error
    /// names the bad field. Use this for tunables from a file or the command line.
    pub fn try_new(topo: Topology, tunables: Tunables) -> Result<Self, TunableError> {
        tunables.validate()?;
        Ok(Self::new(topo, tunables))
    }

    /// An empty model of `topo`, for tunables already validated (the defaults, or values that went
    /// through [`Tunables::validate`]): invalid ones (a zero `comm_full_events_per_s` gives NaN
    /// edges) are a caller bug, caught by a debug assertion. Use [`Model::try_new`] otherwise.
    pub fn new(topo: Topology, tunables: Tunables) -> Self {
        debug_assert!(tunables.validate().is_ok(), "Model::new with invalid tunables: {:?}", tunables.validate());
        let nodes = topo.nodes.iter().map(|n| NodeLoad::new(n.id)).collect();
        Self {
            tunables,
            topo,
            now_ns: 0,
            period_ns: 0,
            updates: 0,
            tasks: BTreeMap::new(),
            procs: BTreeMap::new(),
            graph: AffinityGraph::default(),
            groups: Groups::default(),
            nodes,
            class_overrides: BTreeMap::new(),
            state: tasks::History::default(),
        }
    }

    /// Adopts a topology read again while running (CPU hotplug: a node's CPUs went offline or came
    /// back; the live host re-reads sysfs when `/sys/devices/system/cpu/online` changes). Everything
    /// learned is kept: tasks, processes, affinity, groups, classes. What was derived from the old
    /// CPUs is derived again at the next update: every thread's view (its "narrower than its
    /// nodes' CPUs" and the CPU it ran on), and each node's CPU load (its busy and total ticks
    /// summed over other CPUs: the first period after the change reads as unknown, as at start).
    /// When the node set itself changed (a node's memory went offline too) the per-node loads and
    /// the task views start afresh, since their dense indexes may now name other nodes.
    pub fn set_topology(&mut self, topo: Topology) {
        if self.topo.node_ids() != topo.node_ids() {
            self.nodes = topo.nodes.iter().map(|n| NodeLoad::new(n.id)).collect();
            self.tasks.clear();
        }
        self.state.node_ticks.clear();
        tasks::unsettle_all(&mut self.state);
        self.topo = topo;
    }

    /// Applies one sample: tasks and processes, affinity, groups, node load, classes (in that
    /// order). Processes and threads absent from the sample are forgotten, and so are zombies
    /// (`TaskStat::is_zombie`: exited, not reaped, no thread left); a pid whose start time changed
    /// is a new process.
    pub fn update(&mut self, sample: &Sample) {
        let now = sample.monotonic_ns;
        self.period_ns = if self.updates == 0 { 0 } else { now.saturating_sub(self.now_ns) };
        self.now_ns = now;
        tasks::update(self, sample);
        affinity::update(self, sample);
        groups::update(self);
        load::update(self, sample);
        classify::update(self);
        self.updates += 1;
    }

    /// How many entries each of the model's per-process, per-thread and per-pair tables holds
    /// now, by name (`numapilot status`'s bookkeeping, the metric `numapilot_bookkeeping_entries`,
    /// and the tests that a daemon running for weeks among short-lived processes keeps only what
    /// is alive: `crates/sim/tests/bounded_state.rs`). Appended to `out`.
    pub fn bookkeeping(&self, out: &mut Vec<(&'static str, usize)>) {
        out.push(("model.tasks", self.tasks.len()));
        out.push(("model.procs", self.procs.len()));
        out.push(("model.edges", self.graph.edges.len()));
        out.push(("model.shared_edges", self.graph.shared.len()));
        out.push(("model.groups", self.groups.groups.len()));
        out.push(("model.group_members", self.groups.of_task.len()));
        tasks::bookkeeping(&self.state, out);
        out.push(("model.class_overrides", self.class_overrides.len()));
    }

    /// Points in the RSS histories of all processes (growth is judged on them): bounded by the
    /// class window per process, whatever the clock does. For tests and diagnostics.
    pub fn rss_history_points(&self) -> usize {
        self.state.procs.values().map(|p| p.rss.len()).sum()
    }

    /// The dense index of kernel node `node`.
    pub fn node_idx(&self, node: u32) -> Option<usize> {
        self.topo.nodes.iter().position(|n| n.id == node)
    }

    /// Memory of node `i` (dense index, as `topo.nodes`), bytes: its MemTotal in the last
    /// sample's `nodeN/meminfo` ([`NodeLoad::mem_total_bytes`]), else, before the first sample or
    /// for a node whose meminfo did not read, the topology's (read at start, and again when a
    /// node comes or goes). Memory hot-added to a node that had some changes no file the topology
    /// is read again for (`node/online`, `node/has_memory`): the sampled figure follows it, so
    /// the groups' size cap and the "large" class count it from the next sample.
    pub fn node_mem_total_bytes(&self, i: usize) -> u64 {
        match self.nodes.get(i) {
            Some(l) if l.mem_total_bytes > 0 => l.mem_total_bytes,
            _ => self.topo.nodes.get(i).map_or(0, |n| n.mem_total_kb.saturating_mul(1024)),
        }
    }

    /// Bytes per node (dense index) that summing the memory of `parts` counts more than once:
    /// the pages of a shared object two or more of them map ([`ProcView::shared_objects`]).
    /// `parts` are `(pid, fraction)`: the fraction of the process's memory the sum takes (1 for a
    /// whole process, less for a group holding some of its threads). Per object and node the
    /// mappers' (scaled) resident bytes are summed and the largest kept, as the pages the sum
    /// should hold once (mappers of one range see the same pages; a mapper of part of it sees a
    /// part of them). Objects with one mapper among `parts` count as they are: memory shared
    /// with a process outside stays in each one's figures. All zero when nothing is shared.
    pub fn shared_twice(&self, parts: &[(u32, f64)]) -> Vec<u64> {
        let n = self.topo.nodes.len();
        let mut twice = vec![0u64; n];
        if parts.len() < 2 {
            return twice;
        }
        // (object, node) -> (sum, max, mappers) of the parts' scaled bytes; few objects a process.
        type Seen = (u64, u64, usize);
        let mut seen: BTreeMap<(numapilot_observe::ObjectId, usize), Seen> = BTreeMap::new();
        for &(pid, frac) in parts {
            let Some(p) = self.procs.get(&pid) else { continue };
            for o in &p.shared_objects {
                for (i, &b) in o.by_node.iter().enumerate().take(n) {
                    let b = (b as f64 * frac.clamp(0.0, 1.0)) as u64;
                    let e = seen.entry((o.object, i)).or_insert((0, 0, 0));
                    e.0 = e.0.saturating_add(b);
                    e.1 = e.1.max(b);
                    e.2 += 1;
                }
            }
        }
        for (&(_, i), &(sum, max, users)) in &seen {
            if users >= 2 {
                twice[i] = twice[i].saturating_add(sum - max);
            }
        }
        twice
    }

    /// The group of a task.
    pub fn group_of(&self, task: &TaskKey) -> Option<&Group> {
        self.groups.of_task.get(task).and_then(|g| self.groups.groups.get(g))
    }
}
