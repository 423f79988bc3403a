//! What a simulation run produces: the figures `numapilot sim` prints, the series its convergence
//! charts draw, and the JSON it writes. Plain data; the simulator fills it, the CLI renders it.
//!
//! ```text
//!   Comparison                       one `numapilot sim` invocation
//!   └── policies[]  PolicyResult     one policy, all seeds
//!       ├── summary  Stats           mean / stddev / stddev-over-mean of runtime, throughput, local %, ...
//!       └── runs[]   RunResult       one seed
//!           └── processes[] ProcessSeries   memory per node over time (the convergence chart), finish time
//! ```
//!
//! Units: simulated seconds (`_s`), MiB (`_mib`), percent 0..100 (`_pct`), base pages (4 KiB).

use serde::{Deserialize, Serialize};

/// One point of a process's convergence series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesPoint {
    /// Simulated time, s.
    pub t_s: f64,
    /// Resident memory of the process per node, MiB, indexed like `RunResult::nodes`.
    pub mem_mib: Vec<f64>,
    /// Share of the process's memory accesses in the last epoch that were node-local, %.
    pub local_pct: f64,
}

/// One process of a run, over time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessSeries {
    /// Simulated pid.
    pub pid: u32,
    /// Name (workload's process name, e.g. `numa01`).
    pub name: String,
    /// When the process finished its work, s; `None` if it ran to the end of the simulation.
    pub finish_s: Option<f64>,
    /// Work done per simulated second over the run, in the workload's unit (e.g. requests/s), for
    /// open-ended workloads; `None` for fixed-work ones.
    pub throughput: Option<f64>,
    /// Unit of `throughput` (`requests/s`): the process's work unit per second; `None` for
    /// fixed-work processes or thread groups counting different units.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// First time at which 90% of this process's accesses were local (and stayed so for the rest of
    /// the run), s; `None` if never.
    pub converge_s: Option<f64>,
    /// Samples, at the run's sampling interval.
    pub series: Vec<SeriesPoint>,
    /// Kernel ids of the nodes its threads were on at the end of the run (or when it finished),
    /// ascending, each once: where a placement policy left it. Empty in results written before
    /// this field existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_nodes: Vec<u32>,
}

/// What an engine-driven policy (`numapilot`, `numad`) did over one run: the engine's totals, and
/// the actions by kind. `None` in [`RunResult::engine`] for the kernel baselines.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineTotals {
    /// Engine steps (observe, decide, act) taken.
    pub steps: u64,
    /// Actions planned, all kinds.
    pub actions: u64,
    /// Actions planned by kind (`set-affinity`, `migrate-pages`, `move-ranges`, `interleave`, and
    /// `launch-advice`: answers the launch stage gave, counted in `actions` too).
    pub actions_by_kind: std::collections::BTreeMap<String, u64>,
    /// Base pages the actions moved.
    pub pages_moved: u64,
    /// Base pages the actions could not move.
    pub pages_failed: u64,
    /// Actions whose target had vanished.
    pub vanished: u64,
    /// Actions the host refused.
    pub refused: u64,
}

/// One policy on one seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Seed of the run.
    pub seed: u64,
    /// Kernel node ids, in the order of every per-node vector of this run.
    pub nodes: Vec<u32>,
    /// Simulated time until all fixed work finished (or the simulated duration for open-ended
    /// workloads), s.
    pub runtime_s: f64,
    /// The workload's throughput figure, for open-ended workloads: the sum over the processes its
    /// spec names (`Spec::throughput_of`), all of one unit. `None` for fixed work, or when the
    /// processes count different units (then each `ProcessSeries::throughput` is the figure).
    pub throughput: Option<f64>,
    /// Unit of `throughput` (`requests/s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_unit: Option<String>,
    /// Share of all memory accesses of the run that were node-local, %.
    pub local_access_pct: f64,
    /// Base pages migrated (by the kernel model and by policy actions).
    pub pages_migrated: u64,
    /// Time by which every process had converged (latest `converge_s`); `None` if one never did.
    pub converge_s: Option<f64>,
    /// Per process.
    pub processes: Vec<ProcessSeries>,
    /// For engine-driven policies, what the engine did; `None` for the kernel baselines (and in
    /// results written before this field existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineTotals>,
    /// Times the workload's memory found no node with room (the kernel model's
    /// `Kernel::alloc_failures`: a first touch, retried at the next): its figures then describe a
    /// run without that memory, which the command line says (review helper-53: nothing did). 0 in
    /// results written before this field existed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub alloc_failures: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Mean and spread of one figure over seeds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    /// Mean over seeds.
    pub mean: f64,
    /// Sample standard deviation over seeds (0 for one seed).
    pub stddev: f64,
}

impl Stat {
    /// Mean and sample standard deviation of `xs` (`NaN` mean for no values).
    pub fn of(xs: &[f64]) -> Self {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let stddev =
            if xs.len() > 1 { (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt() } else { 0.0 };
        Self { mean, stddev }
    }

    /// Stddev over mean (coefficient of variation); 0 when the mean is 0.
    pub fn cv(&self) -> f64 {
        if self.mean == 0.0 {
            0.0
        } else {
            self.stddev / self.mean
        }
    }
}

/// One policy over all seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyResult {
    /// Policy name as given on the command line (`default`, `autonuma`, ...).
    pub policy: String,
    /// Runtime over seeds, s.
    pub runtime_s: Stat,
    /// Throughput over seeds (open-ended workloads).
    pub throughput: Option<Stat>,
    /// Local-access share over seeds, %.
    pub local_access_pct: Stat,
    /// Pages migrated over seeds.
    pub pages_migrated: Stat,
    /// Convergence time over the seeds that converged, s; `None` if none did.
    pub converge_s: Option<Stat>,
    /// The runs, one per seed.
    pub runs: Vec<RunResult>,
}

/// A side-by-side comparison: the same machine, workload and seeds under several policies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Machine (preset name or file).
    pub machine: String,
    /// Workload name.
    pub workload: String,
    /// Seeds used, the same for every policy.
    pub seeds: Vec<u64>,
    /// Unit of the policies' throughput figure (`requests/s`), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_unit: Option<String>,
    /// Per policy, in the order asked for.
    pub policies: Vec<PolicyResult>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_of_values() {
        let s = Stat::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(s.mean, 5.0);
        assert!((s.stddev - 2.138_089_935).abs() < 1e-6);
        assert!((s.cv() - 0.427_617_987).abs() < 1e-6);
        assert_eq!(Stat::of(&[3.0]).stddev, 0.0);
        assert_eq!(Stat { mean: 0.0, stddev: 1.0 }.cv(), 0.0);
    }
}
