//! [`BenchResult`]: what a run measured, and the convergence figures derived from the samples.
//!
//! # Convergence (issue 5's measure)
//!
//! At every sample, a process's *local share* is the part of its test buffer resident on the
//! nodes its worker threads last ran on:
//!
//! ```text
//!   local_pct = 100 * sum(buffer_mib[n] for n with thread_nodes[n] > 0) / sum(buffer_mib)
//!
//!   t_s        0     1     2     3     4     5
//!   local_pct  0     0     40    85    93    95      converge_s = 4 (>= 90 from there on)
//!   local_pct  0     92    60    91    95    96      converge_s = 3 (the dip at 2 s resets it)
//! ```
//!
//! `converge_s` is the first sample time from which every later sample with a figure is at or
//! above [`CONVERGED_PCT`]; samples without a figure (no worker thread yet, no page resident) are
//! skipped. Same definition as the simulator's `ProcessSeries::converge_s`, over pages instead of
//! accesses.

use serde::{Deserialize, Serialize};

use crate::spec::{Bind, Test, Work};

/// Version tag of the JSON; bumped only on an incompatible change (fields are only ever added).
pub const SCHEMA: &str = "numapilot-bench/1";

/// Local share at which a process counts as converged, %: 90, issue 5's "time to 90% of each
/// process's memory on the nodes its threads run on".
pub const CONVERGED_PCT: f64 = 90.0;

/// One sample of one process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplePoint {
    /// Seconds since "go".
    pub t_s: f64,
    /// The test buffer's resident memory per node, MiB (indexed like [`BenchResult::nodes`]).
    pub buffer_mib: Vec<f64>,
    /// All resident memory of the process per node, MiB.
    pub mem_mib: Vec<f64>,
    /// Worker threads per node, by the CPU each last ran on.
    pub thread_nodes: Vec<u32>,
    /// Share of the buffer on nodes with a worker thread, %; `None` without threads or pages.
    pub local_pct: Option<f64>,
    /// Mean over worker threads of the share of its own range on its own node, %, from a
    /// `move_pages` query of a sample of pages (`recorder::PAGES_PER_THREAD`); `None` when
    /// unavailable.
    #[serde(default)]
    pub thread_local_pct: Option<f64>,
}

impl SamplePoint {
    /// Computes [`SamplePoint::local_pct`] from the other fields.
    pub fn compute_local_pct(buffer_mib: &[f64], thread_nodes: &[u32]) -> Option<f64> {
        let total: f64 = buffer_mib.iter().sum();
        if total <= 0.0 || thread_nodes.iter().all(|&n| n == 0) {
            return None;
        }
        let local: f64 =
            buffer_mib.iter().zip(thread_nodes).filter(|(_, &threads)| threads > 0).map(|(mib, _)| mib).sum();
        Some(100.0 * local / total)
    }
}

/// First sample time from which every later figure is at least [`CONVERGED_PCT`] (module essay).
pub fn converge_s(series: &[SamplePoint]) -> Option<f64> {
    converge_by(series, |p| p.local_pct)
}

/// [`converge_s`] over another figure of the samples (`thread_local_pct`).
pub fn converge_by(series: &[SamplePoint], figure: impl Fn(&SamplePoint) -> Option<f64>) -> Option<f64> {
    let mut since = None;
    for p in series {
        match figure(p) {
            Some(pct) if pct >= CONVERGED_PCT => since = since.or(Some(p.t_s)),
            Some(_) => since = None,
            None => {}
        }
    }
    since
}

/// One process of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessResult {
    /// Index in the test (0, 1).
    pub index: usize,
    /// Its pid.
    pub pid: u32,
    /// Worker threads.
    pub threads: u32,
    /// Buffer, MiB.
    pub mb: u64,
    /// Seconds from "go" until it exited.
    pub runtime_s: f64,
    /// Exit code; `None` if killed by a signal.
    pub exit_code: Option<i32>,
    /// Passes over their ranges, mean over its threads.
    pub passes: f64,
    /// Bytes written by all its threads.
    pub bytes_written: u64,
    /// Write rate over its runtime, MiB/s.
    pub mib_per_s: f64,
    /// See [`converge_s`].
    pub converge_s: Option<f64>,
    /// Local share at the last sample with one, %.
    pub final_local_pct: Option<f64>,
    /// [`converge_by`] the per-thread figure (`thread_local_pct`): each thread's own range on its
    /// own node.
    #[serde(default)]
    pub thread_converge_s: Option<f64>,
    /// `thread_local_pct` at the last sample with one, %.
    #[serde(default)]
    pub final_thread_local_pct: Option<f64>,
    /// Nodes its worker threads ran on at the last sample with threads.
    pub final_thread_nodes: Vec<u32>,
    /// Samples, one per interval while it ran.
    pub series: Vec<SamplePoint>,
}

/// The run's configuration, as resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// Processes.
    pub processes: usize,
    /// Worker threads per process.
    pub threads_per_process: u32,
    /// Buffer per process, MiB.
    pub mb_per_process: u64,
    /// Work per thread.
    pub work: Work,
    /// `--force-node`.
    pub force_node: Option<u32>,
    /// Sampling interval, s.
    pub interval_s: f64,
    /// `--timeout`, s.
    pub timeout_s: Option<f64>,
}

/// The machine it ran on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Host {
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// Kernel node ids.
    pub nodes: Vec<u32>,
    /// Online CPUs.
    pub cpus: u32,
    /// `/proc/sys/kernel/numa_balancing` at the start; `None` if absent.
    pub numa_balancing: Option<i64>,
}

/// Page-migration counters of `/proc/vmstat`: deltas over the run, or totals since t = 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Migrated {
    /// `numa_pages_migrated`: pages NUMA balancing moved; `None` without CONFIG_NUMA_BALANCING.
    pub numa_pages_migrated: Option<u64>,
    /// `pgmigrate_success`: all successful page migrations (balancing, migrate_pages, move_pages).
    pub pgmigrate_success: Option<u64>,
    /// `pgmigrate_fail`: failed page migrations.
    pub pgmigrate_fail: Option<u64>,
}

impl Migrated {
    /// `self - start`, field by field (`None` where either is).
    pub fn since(&self, start: &Migrated) -> Migrated {
        let d = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_sub(b?));
        Migrated {
            numa_pages_migrated: d(self.numa_pages_migrated, start.numa_pages_migrated),
            pgmigrate_success: d(self.pgmigrate_success, start.pgmigrate_success),
            pgmigrate_fail: d(self.pgmigrate_fail, start.pgmigrate_fail),
        }
    }
}

/// The migration counters at one sample, since t = 0.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct VmstatPoint {
    /// Seconds since "go".
    pub t_s: f64,
    /// Counters since "go".
    #[serde(flatten)]
    pub migrated: Migrated,
}

/// A whole run (the JSON of `numapilot bench --json`; layout in the crate docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchResult {
    /// [`SCHEMA`].
    pub schema: String,
    /// The test.
    pub test: Test,
    /// The variant.
    pub bind: Bind,
    /// Full name, e.g. `numa01_HARD_BIND`.
    pub name: String,
    /// Configuration.
    pub config: Config,
    /// Machine.
    pub host: Host,
    /// Kernel node ids; every per-node array is indexed like this.
    pub nodes: Vec<u32>,
    /// Seconds from "go" until the last worker exited.
    pub runtime_s: f64,
    /// Whether workers were killed at the timeout.
    pub timed_out: bool,
    /// Latest per-process `converge_s`; `None` if one never converged.
    pub converge_s: Option<f64>,
    /// vmstat deltas over the run.
    pub migrated: Migrated,
    /// vmstat since "go" at each sample.
    pub vmstat: Vec<VmstatPoint>,
    /// Per process.
    pub processes: Vec<ProcessResult>,
    /// `CLOCK_MONOTONIC` at "go", s (the guest's uptime, the clock of the daemon's journal
    /// `at_ns`): places the samples' `t_s` on the machine's clock, to line them up with other
    /// records of the same run. `None` in results written before it was recorded.
    #[serde(default)]
    pub go_monotonic_s: Option<f64>,
    /// CPU time of the bench's own process over the run (user + system, `getrusage(RUSAGE_SELF)`),
    /// s: the recorder's reads, the 10 ms poll for exited workers and the start-up. The price of
    /// the sampling cadence (`--interval`), paid on the measured machine. `None` in results
    /// written before it was recorded.
    #[serde(default)]
    pub recorder_cpu_s: Option<f64>,
}

impl BenchResult {
    /// The latest per-process convergence time, `None` if any process never converged.
    pub fn overall_converge_s(processes: &[ProcessResult]) -> Option<f64> {
        processes.iter().map(|p| p.converge_s).try_fold(0.0_f64, |acc, c| c.map(|c| acc.max(c)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(t_s: f64, local_pct: Option<f64>) -> SamplePoint {
        SamplePoint {
            t_s,
            buffer_mib: vec![],
            mem_mib: vec![],
            thread_nodes: vec![],
            local_pct,
            thread_local_pct: None,
        }
    }

    #[test]
    fn converge_is_the_start_of_the_last_run_at_or_above_90() {
        let s = |v: &[Option<f64>]| -> Vec<SamplePoint> {
            v.iter().enumerate().map(|(i, &p)| point(i as f64, p)).collect()
        };
        // The two series of the module essay.
        let a = [0.0, 0.0, 40.0, 85.0, 93.0, 95.0].map(Some);
        assert_eq!(converge_s(&s(&a)), Some(4.0));
        let b = [0.0, 92.0, 60.0, 91.0, 95.0, 96.0].map(Some);
        assert_eq!(converge_s(&s(&b)), Some(3.0));
        // Samples without a figure neither reset nor start it; never above: None.
        assert_eq!(converge_s(&s(&[None, Some(95.0), None, Some(90.0)])), Some(1.0));
        assert_eq!(converge_s(&s(&[Some(95.0), Some(89.9)])), None);
        assert_eq!(converge_s(&[]), None);
    }

    #[test]
    fn local_share_counts_nodes_with_worker_threads() {
        assert_eq!(SamplePoint::compute_local_pct(&[48.0, 16.0], &[0, 2]), Some(25.0));
        assert_eq!(SamplePoint::compute_local_pct(&[48.0, 16.0], &[1, 1]), Some(100.0));
        assert_eq!(SamplePoint::compute_local_pct(&[48.0, 16.0], &[0, 0]), None);
        assert_eq!(SamplePoint::compute_local_pct(&[0.0, 0.0], &[1, 0]), None);
    }

    #[test]
    fn deltas_and_overall_convergence() {
        let a = Migrated { numa_pages_migrated: Some(10), pgmigrate_success: Some(50), pgmigrate_fail: None };
        let b = Migrated { numa_pages_migrated: Some(4), pgmigrate_success: Some(20), pgmigrate_fail: Some(1) };
        assert_eq!(
            a.since(&b),
            Migrated { numa_pages_migrated: Some(6), pgmigrate_success: Some(30), pgmigrate_fail: None }
        );
        let p = |c| ProcessResult {
            index: 0,
            pid: 1,
            threads: 1,
            mb: 1,
            runtime_s: 1.0,
            exit_code: Some(0),
            passes: 1.0,
            bytes_written: 1,
            mib_per_s: 1.0,
            converge_s: c,
            thread_converge_s: None,
            final_thread_local_pct: None,
            final_local_pct: None,
            final_thread_nodes: vec![],
            series: vec![],
        };
        assert_eq!(BenchResult::overall_converge_s(&[p(Some(2.0)), p(Some(5.0))]), Some(5.0));
        assert_eq!(BenchResult::overall_converge_s(&[p(Some(2.0)), p(None)]), None);
    }
}
