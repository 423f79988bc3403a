//! autonuma-benchmark's tests as real programs, with a per-second memory-placement recorder.
//!
//! # Problem
//!
//! To show that a placement policy (the kernel's NUMA balancing, numad, the numapilot daemon)
//! converges on a real kernel, we need the workloads autonuma-benchmark (A. Arcangeli, 2012) made
//! the standard, run as real processes and threads a daemon can see, and a record of where each
//! process's memory sits, second by second, compared with where its threads run.
//!
//! # Approach
//!
//! ```text
//!   numapilot bench numa01 --mb 64 --force-node 0
//!     |  spec::plan(test, options, topology) -> Plan (one WorkerConfig per process)
//!     |  run::run(plan, launcher) spawns each worker as its own process
//!     |        numapilot bench --worker '<WorkerConfig as JSON>'      (worker::run_worker)
//!     |          mmap buffer, mbind (bind variants), first touch (main thread, optionally bound
//!     |          to --force-node), print {"ready":..}, wait for "go" on stdin, start T threads,
//!     |          each writes its range pass after pass, print {"done":..}, exit
//!     |  all ready -> "go" to every worker, t = 0
//!     |  first sample of each worker: as soon as its worker threads run (polled every 10 ms)
//!     |  every interval: recorder::Recorder::sample(pid) for each live worker
//!     |        /proc/PID/numa_maps -> MiB per node (whole process, and the test buffer alone)
//!     |        /proc/PID/task/TID/stat field 39 -> the node each worker thread last ran on
//!     |        /proc/vmstat numa_pages_migrated, pgmigrate_success
//!     v  result::BenchResult (JSON, table, charts)
//! ```
//!
//! # The tests (from numa01.c and numa02.c; sizes are flags here, the original's in brackets)
//!
//! ```text
//!   test                 procs  threads/proc      buffer/proc   each thread writes      passes [orig]
//!   numa01               2      cpus/2            --mb [3 GiB]  the whole buffer        50
//!   numa01_THREAD_ALLOC  2      cpus/2            --mb [3 GiB]  its 1/T slice           1000
//!   numa02               1      cpus              --mb [1 GiB]  its 1/T slice           800
//!   numa02_SMT           1      cpus/2            --mb [1 GiB]  its 1/T slice           800
//!   ..._HARD_BIND        threads' CPUs and their memory on the same node(s)
//!   ..._INVERSE_BIND     threads' CPUs on one node, their memory on another
//! ```
//!
//! Differences from the original, on purpose: the main thread of every process first-touches
//! its whole buffer before the threads start (the original's numa01 lets every thread `bzero`
//! the shared buffer at once), so memory starts on one node, the case issue 5 measures;
//! `--force-node N` binds that first touch to node N (the original's `NO_BIND_FORCE_SAME_NODE`),
//! then drops the policy so the memory is free to move. In the bind variants the buffer's memory
//! is placed with `mbind` before the first touch, so numa02_INVERSE_BIND really leaves every
//! thread's slice on another node than the thread (the original's threads touched their own
//! slices, which made its inverse binding local again).
//!
//! # JSON (schema [`result::SCHEMA`], `numapilot-bench/1`; stable: fields are only ever added)
//!
//! ```text
//! {
//!   "schema": "numapilot-bench/1",
//!   "test": "numa01", "bind": "none" | "hard" | "inverse", "name": "numa01_HARD_BIND",
//!   "config": { "processes": 2, "threads_per_process": 2, "mb_per_process": 64,
//!               "work": {"loops": 50} | {"seconds": 20.0}, "force_node": 0 | null, "interval_s": 1.0,
//!               "timeout_s": null | 600.0 },
//!   "host": { "kernel": "6.12.x", "nodes": [0, 1], "cpus": 4, "numa_balancing": 0 | 1 | null },
//!   "nodes": [0, 1],                      kernel node ids; every per-node array is indexed like this
//!   "runtime_s": 12.3,                    "go" until the last worker exited
//!   "timed_out": false,                   workers were killed at --timeout
//!   "converge_s": 4.0 | null,             latest per-process converge_s (null if one never did)
//!   "migrated": { "numa_pages_migrated": 1234 | null, "pgmigrate_success": 1300 | null,
//!                 "pgmigrate_fail": 0 | null },          /proc/vmstat deltas over the run, pages
//!   "vmstat": [ { "t_s": 1.0, "numa_pages_migrated": .., "pgmigrate_success": .. } ],  since t = 0
//!   "processes": [ {
//!       "index": 0, "pid": 4242, "threads": 2, "mb": 64,
//!       "runtime_s": 12.1, "exit_code": 0 | null,
//!       "passes": 50.0, "bytes_written": 6710886400, "mib_per_s": 528.9,
//!       "converge_s": 4.0 | null,         first sample from which, to the end, >= 90% of the buffer
//!                                         is on nodes its worker threads run on
//!       "final_local_pct": 100.0 | null,  that share at the last sample
//!       "thread_converge_s": 6.0 | null,  the same over thread_local_pct
//!       "final_thread_local_pct": 97.2 | null,
//!       "final_thread_nodes": [1],        nodes its worker threads ran on at the last sample
//!       "series": [ { "t_s": 0.0, "buffer_mib": [64.0, 0.0], "mem_mib": [66.1, 0.2],
//!                     "thread_nodes": [2, 0], "local_pct": 100.0 | null,
//!                     "thread_local_pct": 50.0 | null } ]
//!   } ],
//!   "go_monotonic_s": 812.4 | null,       CLOCK_MONOTONIC at "go" (the guest's uptime clock)
//!   "recorder_cpu_s": 0.41 | null         this process's CPU over the run: the recorder's cost
//! }
//! ```
//!
//! `buffer_mib` is the test buffer alone (its VMAs, found by address), `mem_mib` all of the
//! process's resident memory (numa_maps, every kind); `thread_nodes` counts worker threads per
//! node by their last CPU (`/proc/PID/task/TID/stat` field 39); `local_pct` is null while no
//! worker thread runs or the buffer has no resident page. `thread_local_pct` is the mean over
//! worker threads of the share of the thread's own range (its slice; numa01: the whole buffer)
//! on the node it last ran on, from a `move_pages` query of up to 1024 pages per thread: the
//! figure that tells numa02's slices apart, where `local_pct` is 100 as soon as threads sit on
//! every node.
//!
//! # Limits
//!
//! A thread's node is where it last ran at the sample, not where it ran in between; the 90%
//! measure is over the buffer's pages, not over accesses (numa_maps has no access counts).
//! vmstat counters are system-wide: other activity on the machine counts too.

#![deny(missing_docs)]

pub mod error;
pub mod recorder;
pub mod result;
pub mod run;
pub mod spec;
pub mod worker;

pub use error::BenchError;
pub use recorder::Recorder;
pub use result::{BenchResult, ProcessResult, SamplePoint, SCHEMA};
pub use run::{run, Launcher, RunOptions};
pub use spec::{plan, Bind, Options, Plan, Test, TestName, Work};
pub use worker::{run_worker, WorkerConfig, WorkerReport};
