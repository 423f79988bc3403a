//! The affinity graph between tasks. (Essay with the implementation.)

use std::collections::BTreeMap;

use numapilot_observe::Sample;
use serde::{Deserialize, Serialize};

use crate::tasks::TaskKey;
use crate::Model;

/// Strength tier of an edge (NUMA-ICON: weak / medium / strong; the load balancer only needs the
/// tier).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tier {
    /// At or above `tier_weak`.
    Weak,
    /// At or above `tier_medium`: joins groups.
    Medium,
    /// At or above `tier_strong`.
    Strong,
}

/// One edge between two tasks (`a < b`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Edge {
    /// Normalised, decayed strength, 0..1: the maximum over the channels below.
    pub strength: f64,
    /// Co-access channel, 0..1.
    pub coaccess: f64,
    /// Communication channel, 0..1.
    pub comm: f64,
    /// Tier of `strength`; `None` below `tier_weak`.
    pub tier: Option<Tier>,
    /// Host time of the last observation that raised the edge, ns.
    pub last_seen_ns: u64,
    /// Host time the strength fell below `edge_zero`, ns (the grace period runs from there).
    pub zero_since_ns: Option<u64>,
}

/// All edges, keyed by ordered task pair (`a < b`). The address-space prior is implicit (never
/// stored): see [`AffinityGraph::strength`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AffinityGraph {
    /// The edges.
    pub edges: BTreeMap<(TaskKey, TaskKey), Edge>,
}

impl AffinityGraph {
    /// Strength of the relation between two tasks: the stored edge's, or the address-space prior
    /// for two threads of one process, whichever is larger.
    pub fn strength(&self, a: TaskKey, b: TaskKey, prior: f64) -> f64 {
        let key = if a < b { (a, b) } else { (b, a) };
        let edge = self.edges.get(&key).map_or(0.0, |e| e.strength);
        let prior = if a.pid == b.pid && a != b { prior } else { 0.0 };
        edge.max(prior)
    }
}

/// Decay factor over `dt_ns` for a half-life of `half_life_ms`: `2^(-dt / h)`, in (0, 1]; 1 for
/// `dt = 0`.
pub fn decay_factor(dt_ns: u64, half_life_ms: u64) -> f64 {
    if dt_ns == 0 {
        return 1.0;
    }
    if half_life_ms == 0 {
        return 0.0;
    }
    (-(dt_ns as f64) / (half_life_ms as f64 * 1e6)).exp2()
}

/// Recent accessors per memory bucket (implementation state).
#[derive(Debug, Clone, Default)]
pub(crate) struct CoaccessWindow {}

/// Decays every edge to the sample's time, adds this period's co-access and communication, maps
/// tiers, drops edges past their grace period and edges of tasks that are gone.
pub(crate) fn update(model: &mut Model, sample: &Sample) {
    let _ = (model, sample);
}
