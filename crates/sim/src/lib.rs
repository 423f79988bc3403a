//! The simulated NUMA machine (issue 3). See the crate essay below.

#![deny(missing_docs)]

pub mod engine;
pub mod host;
pub mod kernel;
pub mod machine;
pub mod result;
pub mod run;
pub mod workload;

pub use engine::{Baseline, Machine, Sim, SimOptions};
pub use host::SimHost;
pub use run::{calibrate, run_one, simulate, CalibrationRow};

/// Errors of the simulator: bad machine parameters, bad workloads, unknown names.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    /// The machine or its `[sim]` parameters are invalid; the message names the file and field.
    #[error("machine: {0}")]
    Machine(String),
    /// The workload is invalid.
    #[error(transparent)]
    Spec(#[from] workload::SpecError),
    /// The workload does not fit the machine (a node or CPU id it lacks, no CPU allowed).
    #[error("workload {workload} on this machine: {reason}")]
    Mismatch {
        /// Workload name.
        workload: String,
        /// What does not fit.
        reason: String,
    },
    /// An unknown policy, workload or machine name; `valid` lists the valid ones.
    #[error("unknown {kind} '{name}' (valid: {valid})")]
    Unknown {
        /// `policy`, `workload` or `machine`.
        kind: &'static str,
        /// The name given.
        name: String,
        /// Comma-separated valid names.
        valid: String,
    },
    /// The run hit the simulated time cap before all fixed work finished.
    #[error("workload {workload} under {policy}: work not finished after {cap_s} simulated s")]
    Unfinished {
        /// Workload name.
        workload: String,
        /// Policy name.
        policy: String,
        /// The cap, s.
        cap_s: f64,
    },
}
