//! Per-thread and per-process views derived from two consecutive samples.
//!
//! (Essay to be written with the implementation: rates from CPU ticks or schedstat, run delay,
//! where a thread's accesses go from access samples > NUMA fault statistics > its process's
//! resident memory, RSS growth, pinned detection, hot ranges.)

use std::collections::BTreeMap;
use std::sync::Arc;

use numapilot_observe::Sample;
use numapilot_topology::CpuSet;
use serde::{Deserialize, Serialize};

use crate::classify::ProcessClass;
use crate::Model;

/// A thread, unambiguously: pid and tid (a reused pid is a different [`ProcView::starttime`]; the
/// model forgets the old process's tasks when the start time changes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TaskKey {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
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

/// One thread of a user process.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskView {
    /// Its key.
    pub key: TaskKey,
    /// Thread name.
    pub comm: String,
    /// CPU it last ran on.
    pub cpu: u32,
    /// Node of that CPU (kernel id); `None` if the CPU is not in the topology.
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
    /// Name.
    pub comm: String,
    /// Its threads.
    pub tids: Vec<u32>,
    /// Resident memory, bytes.
    pub rss_bytes: u64,
    /// Resident memory per node (dense index), bytes, from numa_maps.
    pub mem_by_node: Vec<u64>,
    /// RSS growth over the classification window, bytes per second (negative when shrinking).
    pub growth_bytes_per_s: f64,
    /// CPU used over the last period, CPUs (sum over threads).
    pub cpu_rate: f64,
    /// Whether the process placed itself: an explicit memory policy in numa_maps (bind, interleave,
    /// preferred) or threads whose allowed CPUs are narrower than the process's allowed nodes'
    /// CPUs. The daemon leaves such processes alone unless told otherwise; the adaptive policy
    /// never moves them.
    pub pinned: bool,
    /// What kind of process it is (from behaviour, or an override).
    pub class: ProcessClass,
    /// Hottest memory ranges first (empty without access samples).
    pub hot: Vec<HotRange>,
    /// Host time the process was first seen, ns.
    pub first_seen_ns: u64,
    /// Age when first seen, ns (from its start time and the sample's boot time); a process first
    /// seen young is new, one first seen old was already running when numapilot started.
    pub age_at_first_seen_ns: u64,
}

/// What the model keeps between samples to derive rates, growth and co-access (implementation's
/// own; not part of the contract).
#[derive(Debug, Clone, Default)]
pub(crate) struct History {
    pub(crate) prev: BTreeMap<TaskKey, ()>,
}

/// Rebuilds `model.tasks` and `model.procs` from `sample`.
pub(crate) fn update(model: &mut Model, sample: &Sample) {
    let _ = (model, sample, ProcessClass::Unclassified);
    todo!("tasks::update")
}
