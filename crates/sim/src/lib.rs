//! The simulated NUMA machine: a kernel model (allocation, scheduler, migration, AutoNUMA) on a
//! performance model of the hardware, behind the same `Host` trait as the live system, so placement
//! policies can be measured on machines we do not have (2 to 36 nodes, up to 512 CPUs).
//!
//! # Layout
//!
//! ```text
//!   machine    performance parameters ([sim] table of a machine file) -> latency per node pair,
//!              capacity of controllers and directed links, routes between nodes
//!   kernel/    state (tasks, processes, 2 MiB regions), alloc (policies, fallback by distance),
//!              sched (run queues, fork placement, domain load balancer), migrate (cost),
//!              autonuma (the kernel's NUMA balancing, written separately)
//!   workload/  Spec (processes, regions, thread groups, accesses, phases, pacing) and generators:
//!              autonuma_bench, client_server, process_types, vm_mix, file
//!   engine     the epoch loop and access model; the baselines (default, hard-bind, inverse-bind,
//!              interleave, autonuma)
//!   run        simulate() -> result::Comparison; calibrate()
//!   host       SimHost: numapilot_policy::Host over a running simulation
//! ```
//!
//! # What is modelled
//!
//! - Where memory is: every 2 MiB region of every process has a node; first touch, bind, preferred,
//!   preferred-many, interleave and weighted interleave place it; nodes fill up and allocation falls
//!   back by SLIT distance.
//! - Where threads run: fork placement on the idlest part of the machine, a periodic load balancer
//!   over SMT, LLC, node and machine domains, affinity masks, CPU time sharing when oversubscribed.
//! - What an access costs: latency by distance tier, hidden by memory-level parallelism (streams)
//!   or not (pointer chasing); LLC hits when the working set fits; bandwidth saturation of memory
//!   controllers and of every link on the route between nodes; SMT siblings sharing a core.
//! - What moving costs: page copies stall the task that waits for them and use controller and link
//!   bandwidth; hinting faults cost a fault each.
//! - AutoNUMA: the kernel's scanner, hinting faults, two-stage filter, numa groups, preferred node,
//!   task moves and swaps (kernel/autonuma.rs).
//!
//! # What is not
//!
//! Caches beyond an LLC capacity filter (no coherence traffic, no false sharing cost), prefetchers,
//! DRAM banks and read/write turnarounds, page reclaim, swap, THP splitting, 4 KiB-granular placement,
//! I/O and devices, interrupts, frequency scaling, wake-up affinity, PELT load averages, cgroups.
//! Latency does not rise below saturation (contention acts at saturation only).
//!
//! # How it was fitted
//!
//! The defaults of `machine::MachineParams` describe the 2012 two-socket Westmere-EP class box of
//! the autonuma-benchmark results (preset `autonuma-2s12c-24g`). Latency (90 ns local, x1.5 one hop)
//! and controller bandwidth (16 GB/s per socket) are set from published hardware figures (and
//! numa02's own 800 GiB in 53.2 s); three parameters were then fitted, each to one physical
//! question, not one per test:
//!
//! ```text
//!   stream_mlp 2.3        how much of a controller 6 busy cores can ask for (fixes numa02 hard/default)
//!   one_hop_link_gbs 6.7  what QPI carries per direction (fixes inverse/default)
//!   smt_gain_memory 1.22  what a second hyperthread adds to a streaming core (numa02_SMT vs numa02
//!                         under hard bind, 43.2 s vs 35.3 s)
//! ```
//!
//! With these, all six published bind ratios come out within 7% (tolerance 15%), and the absolute
//! runtimes of numa02 (default 55.8 s vs 53.2, hard bind 35.9 vs 35.3, inverse 64.1 vs 63.5),
//! numa01_THREAD_ALLOC (418.8 vs 397.5) and numa02_SMT (66.6 vs 61.3) land near the published ones
//! though they were not fitted. numa01 is 2x slower than published (251 s vs 121.5): the test as
//! described (every thread zeroes all 3 GiB 50 times) moves 3.6 TB, which no 2012 box does in
//! 121 s, so the description over-counts its work; the ratios do not depend on it. The calibration
//! runs use a tenth of the passes (`run::CALIBRATION_SCALE`): the ratios are steady-state figures and
//! a test checks they do not move with the scale. `calibrate()` prints the table; the tests in
//! `tests/engine.rs` check each ratio. `calibrate()` also reports the AutoNUMA model's
//! autonuma/default ratios on `autonuma-2s12c-16g` (full-size runs; checked in
//! `tests/autonuma_calibration.rs`). Other presets carry their own `[sim]` tables (sources in their
//! machine files) or use these defaults.

#![deny(missing_docs)]

pub mod engine;
pub mod host;
pub mod kernel;
pub mod machine;
pub mod result;
pub mod run;
mod work;
pub mod workload;

pub use engine::{Baseline, Machine, Sim, SimOptions};
pub use host::SimHost;
pub use run::{calibrate, calibrate_bind, run_one, simulate, CalibrationRow};

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
    #[error("unknown {kind} {name:?}; valid: {valid}")]
    Unknown {
        /// `policy`, `workload` or `machine`.
        kind: &'static str,
        /// The name given.
        name: String,
        /// Comma-separated valid names.
        valid: String,
    },
    /// The engine policies' tunables are invalid (checked before any run starts).
    #[error("invalid tunables: {0}")]
    Tunables(#[from] numapilot_policy::TunableError),
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
