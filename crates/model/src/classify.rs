//! Process classes (NUMA article seed). (Essay with the implementation.)

use serde::{Deserialize, Serialize};

use crate::Model;

/// What kind of process, for placement (shared/seeds/003's four types).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProcessClass {
    /// Not enough evidence yet, or too small to matter: the generic group rules apply.
    Unclassified,
    /// Large, fixed memory (buffer pool, matrix): bind CPUs and memory to a node set that fits.
    StaticLarge,
    /// Memory grows while it runs (JVM heap, cache): preferred node, spilling to the nearest.
    Growing,
    /// Streams through memory from threads on several nodes: interleave over the nodes it runs on.
    BandwidthBound,
    /// Named in configuration: strict CPU and memory binding.
    LatencySensitive,
}

/// Classifies every process from its view (growth, size, spread, bandwidth) unless an override
/// names it.
pub(crate) fn update(model: &mut Model) {
    let _ = model;
}

/// Classification state of one process (implementation's own).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ClassState {}
