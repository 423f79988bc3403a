//! autonuma-benchmark (A. Arcangeli, 2012): numa01, numa01_THREAD_ALLOC, numa02, numa02_SMT.
//!
//! # What the tests do (shared/reference/published-results.md, shared/seeds/001)
//!
//! ```text
//!   test                 P   T per process  memory/process  access                        passes / total
//!   numa01               2   nr_cpus/2      3 GiB           every thread the whole buffer  50 passes
//!   numa01_THREAD_ALLOC  2   nr_cpus/2      3 GiB           thread i its 1/T slice         1000 passes
//!   numa02               1   nr_cpus        1 GiB           thread i its 1/T slice         800 GiB in all
//!   numa02_SMT           1   nr_cpus/2      1 GiB           thread i its 1/T slice         800 GiB in all
//! ```
//!
//! Every access is a streaming write (`bzero`). numa01's memory starts on one node (node 0: "all
//! memory starts in one node", seed 001); numa02's main thread touches all memory first, so it
//! lands on the main thread's node. HARD_BIND and INVERSE_BIND are the `hard-bind` and
//! `inverse-bind` policies of the runner, not separate workloads.
//!
//! # Scaling
//!
//! `scale` multiplies the work (passes), never the memory: the bind/default ratios are steady-state
//! properties and do not depend on run length (checked by the calibration test at two scales), while
//! memory size decides how long AutoNUMA needs to converge, so it stays real.

use numapilot_topology::Topology;

use super::{Access, FirstTouch, MemPolicySpec, Pattern, ProcessSpec, RegionSpec, Slice, Spec, ThreadGroup, Work};
use crate::SimError;

const GIB: u64 = 1 << 30;

/// Names of the tests.
pub const NAMES: [&str; 4] = ["numa01", "numa01_THREAD_ALLOC", "numa02", "numa02_SMT"];

fn process(
    name: &str,
    threads: u32,
    bytes: u64,
    touch: FirstTouch,
    slice: Slice,
    per_thread_bytes: f64,
) -> ProcessSpec {
    ProcessSpec {
        cpuset: None,
        name: name.to_string(),
        count: 1,
        start_s: 0.0,
        cpus: None,
        policy: MemPolicySpec::Local,
        regions: vec![RegionSpec { name: "mem".into(), bytes, touch, policy: None, grow: None }],
        threads: vec![ThreadGroup {
            name: "worker".into(),
            count: threads,
            cpus: None,
            work: Work {
                total: Some(per_thread_bytes),
                unit: "bytes".into(),
                bytes_per_unit: 1.0,
                compute_ns: 0.0,
                duty: 1.0,
            },
            accesses: vec![Access { region: "mem".into(), weight: 1.0, slice, pattern: Pattern::Stream, write: true }],
        }],
        phases: vec![],
        launch_advice: false,
    }
}

/// The test `name` for machine `topo` (thread counts from its online CPU count), with its work
/// multiplied by `scale` (1.0 = the original). Unknown names are an error listing the valid ones.
pub fn spec(name: &str, topo: &Topology, scale: f64) -> Result<Spec, SimError> {
    let cpus = topo.online_cpus().len() as u32;
    let half = (cpus / 2).max(1);
    let first_node = topo.nodes.iter().find(|n| n.mem_total_kb > 0).map_or(0, |n| n.id);
    let (processes, description) = match name {
        "numa01" | "numa01_THREAD_ALLOC" => {
            // numa01: every thread zeroes the whole buffer, 50 passes; THREAD_ALLOC: thread i zeroes its
            // slice, 1000 passes (shared/reference/published-results.md).
            let (slice, per_thread, description) = if name == "numa01" {
                (
                    Slice::Whole,
                    50.0 * (3 * GIB) as f64 * scale,
                    "2 processes x nr_cpus/2 threads, 3 GiB each, all threads zero the whole buffer, 50 passes",
                )
            } else {
                (
                    Slice::PerThread,
                    1000.0 * (3 * GIB) as f64 / half as f64 * scale,
                    "2 processes x nr_cpus/2 threads, 3 GiB each, thread i zeroes its slice, 1000 passes",
                )
            };
            let procs = (0..2)
                .map(|i| {
                    let mut p =
                        process("numa01", half, 3 * GIB, FirstTouch::Node { node: first_node }, slice, per_thread);
                    p.name = format!("{name}-{i}");
                    p
                })
                .collect();
            (procs, description)
        }
        "numa02" | "numa02_SMT" => {
            let threads = if name == "numa02" { cpus } else { half };
            let per_thread = 800.0 * GIB as f64 / threads as f64 * scale;
            let p = process(name, threads, GIB, FirstTouch::Main, Slice::PerThread, per_thread);
            (
                vec![p],
                if name == "numa02" {
                    "1 process x nr_cpus threads, 1 GiB, thread i zeroes its slice, 800 GiB written"
                } else {
                    "1 process x nr_cpus/2 threads, 1 GiB, thread i zeroes its slice, 800 GiB written"
                },
            )
        }
        _ => {
            return Err(SimError::Unknown { kind: "workload", name: name.to_string(), valid: NAMES.join(", ") });
        }
    };
    Ok(Spec {
        name: name.to_string(),
        description: description.to_string(),
        processes,
        duration_s: None,
        pacing: vec![],
        throughput_from: None,
        throughput_unit: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_counts_follow_the_machine() {
        let t = Topology::preset("autonuma-2s12c-24g").unwrap();
        let s = spec("numa01", &t, 1.0).unwrap();
        s.validate().unwrap();
        assert_eq!(s.processes.len(), 2);
        assert_eq!(s.thread_count(), 24);
        assert_eq!(s.total_bytes(), 6 * GIB);
        let s = spec("numa02_SMT", &t, 1.0).unwrap();
        assert_eq!(s.thread_count(), 12);
        let total: f64 = s.processes[0].threads[0].work.total.unwrap() * 12.0;
        assert!((total - 800.0 * GIB as f64).abs() < 1.0);
        let e = spec("numa03", &t, 1.0).unwrap_err().to_string();
        assert!(e.contains("numa02_SMT"), "{e}");
    }
}
