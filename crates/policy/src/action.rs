//! Actions a policy asks a host to take, with the reason for each.

use numapilot_topology::{CpuSet, NodeSet, Topology};
use serde::{Deserialize, Serialize};

/// A process (and optionally one of its threads) as a host knows it. `starttime` (clock ticks after
/// boot, stat field 22) makes the reference unambiguous: a pid reused by a new process has another
/// start time, and the host refuses the action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TaskRef {
    /// Process id.
    pub pid: u32,
    /// Thread id; `None` for the whole process.
    pub tid: Option<u32>,
    /// Start time of the process, clock ticks after boot.
    pub starttime: u64,
}

/// Why an action is taken: the rule that fired and the numbers it saw. An action the adaptive
/// policy takes for several units at once (a process-wide SetAffinity) names each unit's distinct
/// reason: the first's rule here, the others as `; and [rule] figures` after the first's in `detail`,
/// and their rules in `also` (for a journal filtered by rule).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reason {
    /// Short rule name, e.g. `memory-follows-cpu`, `hard-bind`.
    pub rule: String,
    /// The signal and the figures, human-readable, e.g. `82% of the group's pages on node 1`.
    pub detail: String,
    /// The other rules of an action covering several units, each once, in plan order, without
    /// `rule`; empty for an action of one reason (and absent from its JSON).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<String>,
}

impl Reason {
    /// A reason from a rule name and a detail.
    pub fn new(rule: impl Into<String>, detail: impl Into<String>) -> Self {
        Self { rule: rule.into(), detail: detail.into(), also: Vec::new() }
    }
}

/// What to change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum ActionKind {
    /// Restrict the CPUs a thread (or every thread of a process, `tid: None`) may run on
    /// (`sched_setaffinity`).
    SetAffinity {
        /// The CPUs allowed.
        cpus: CpuSet,
    },
    /// Move the process's pages that are on `from` to `to` (`migrate_pages`), at most `max_pages`
    /// base pages of them when given (a host that cannot limit the count moves them all and says so).
    MigratePages {
        /// Source nodes.
        from: NodeSet,
        /// Destination nodes.
        to: NodeSet,
        /// Upper bound on base pages to move, for a migration budget.
        max_pages: Option<u64>,
    },
    /// Move specific ranges of the process's memory to one node (`move_pages`).
    MoveRanges {
        /// `(start address, length in bytes)` ranges.
        ranges: Vec<(u64, u64)>,
        /// Destination node.
        to: u32,
    },
    /// Spread memory over `nodes` page by page (`move_pages` with a node per page), in proportion
    /// to `weights` (one per node of `nodes`, in ascending node order; equal shares when empty):
    /// weighted interleave of memory that is already resident. `ranges` empty means all of the
    /// process's memory.
    Interleave {
        /// `(start address, length in bytes)` ranges; empty for all.
        ranges: Vec<(u64, u64)>,
        /// Destination nodes.
        nodes: NodeSet,
        /// Relative weights per destination node; empty for equal.
        weights: Vec<u32>,
        /// Upper bound on base pages to move, for a migration budget.
        max_pages: Option<u64>,
    },
}

/// One action of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Action {
    /// What it applies to.
    pub target: TaskRef,
    /// What to do.
    pub kind: ActionKind,
    /// Why.
    pub reason: Reason,
}

/// The actions of one decision step, in the order they are to be applied.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The actions.
    pub actions: Vec<Action>,
    /// Standing orders: actions a host that hears of new threads as they are created (the live
    /// daemon's proc connector) carries out, each at most once, when the process it names starts
    /// a thread before the next decision ([`crate::Engine::on_new_threads`]). Replaced by every
    /// plan; a host without such events ignores them. Checked like any action when carried out
    /// (same process, not excluded, not pinned).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub standing: Vec<Action>,
}

impl Plan {
    /// Rule memory-onto-memory-nodes: every page action names nodes that have memory. A node with
    /// CPUs and no memory (a memoryless node, as sysfs shows some machines; machine files refuse
    /// them, so the simulator never has one) is where a policy that sends memory after CPUs may
    /// aim, and the kernel refuses such a move: the memory never got local (review helper-40:
    /// 58 of 300 randomized runs on such machines, numad's "node with the least memory" always
    /// the empty one). A destination without memory becomes the nearest node with memory (by
    /// distance, then lowest id), where the kernel itself allocates for that node's CPUs; an
    /// interleave leaves such nodes out; an action left with nothing to do (every destination
    /// was already a source) is dropped. The reason says so.
    pub fn memory_onto_memory_nodes(&mut self, topo: &Topology) {
        let memory = topo.memory_nodes();
        if memory.is_empty() || topo.nodes.iter().all(|n| memory.contains(n.id)) {
            return;
        }
        let nearest = |n: u32| nearest_memory_node(topo, &memory, n);
        self.actions.retain_mut(|a| {
            let (keep, what) = match &mut a.kind {
                ActionKind::SetAffinity { .. } => (true, None),
                ActionKind::MoveRanges { to, .. } => {
                    let n = nearest(*to);
                    let what =
                        (n != *to).then(|| format!("node {to} has no memory: to node {n}, the nearest with memory"));
                    *to = n;
                    (true, what)
                }
                ActionKind::MigratePages { from, to, .. } => {
                    let mapped: NodeSet = to.iter().map(nearest).collect();
                    let what = (mapped != *to).then(|| format!("nodes {to} without memory taken as {mapped}"));
                    *to = mapped;
                    (!to.difference(from).is_empty(), what)
                }
                ActionKind::Interleave { nodes, weights, .. } if !nodes.iter().all(|n| memory.contains(n)) => {
                    let kept: Vec<(u32, u32)> = nodes
                        .iter()
                        .enumerate()
                        .filter(|(_, n)| memory.contains(*n))
                        .map(|(i, n)| (n, weights.get(i).copied().unwrap_or(1)))
                        .collect();
                    let what = format!("nodes without memory left out of {nodes}");
                    let equal = weights.is_empty();
                    *nodes = kept.iter().map(|k| k.0).collect();
                    *weights = if equal { Vec::new() } else { kept.iter().map(|k| k.1).collect() };
                    (!nodes.is_empty(), Some(what))
                }
                ActionKind::Interleave { .. } => (true, None),
            };
            if let Some(w) = what {
                a.reason.detail.push_str(&format!(" ({w}: rule memory-onto-memory-nodes)"));
            }
            keep
        });
    }
}

/// Node `n` when it has memory (in `memory`, the nodes that have), else the nearest node that has
/// (by distance, then lowest id), where the kernel itself allocates for `n`'s CPUs; `n` when no
/// node has memory (rule memory-onto-memory-nodes, [`Plan::memory_onto_memory_nodes`]).
pub(crate) fn nearest_memory_node(topo: &Topology, memory: &NodeSet, n: u32) -> u32 {
    if memory.contains(n) {
        return n;
    }
    memory.iter().min_by_key(|&m| (topo.distance(n, m).unwrap_or(u32::MAX), m)).unwrap_or(n)
}

/// What became of one action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "outcome")]
pub enum Outcome {
    /// Done in full.
    Applied {
        /// Base pages moved, for page actions (0 otherwise).
        pages_moved: u64,
    },
    /// Done in part: some pages could not be moved (the counts by cause, e.g. `EBUSY`).
    Partial {
        /// Base pages moved.
        pages_moved: u64,
        /// Pages not moved, by cause.
        failed: Vec<(String, u64)>,
    },
    /// Handed to the host's page mover, which moves up to `pages` base pages in the background
    /// while the decisions go on; what it did is reported when it ends
    /// ([`crate::Host::finished_moves`]). Only page actions, and only on hosts with a mover (the
    /// live daemon's); counted like an applied action by the policies (their holds start).
    Started {
        /// Base pages it may move (the allowance it was given).
        pages: u64,
    },
    /// Not done, because the target is gone or is no longer the same process (pid reused).
    Vanished,
    /// Not done, refused by the host (e.g. CPUs outside the process's cpuset); the message says why.
    Refused {
        /// Why.
        message: String,
    },
}
