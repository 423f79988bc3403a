//! A hand-built comparison for the unit tests of the table and the charts: numa01 on the 2-node
//! preset, `default` (memory stays on node 0) against `autonuma` (the second process's memory moves
//! to node 1 between 5 s and 20 s), two seeds.

use numapilot_sim::result::{Comparison, PolicyResult, ProcessSeries, RunResult, SeriesPoint, Stat};

/// One process's series, one sample a second from 0 to `end_s`: `mib` on node 0 until `from_s`,
/// then moving linearly to node 1 until `to_s` (no move when `to_s` is `None`).
pub fn series(end_s: u32, mib: f64, from_s: f64, to_s: Option<f64>) -> Vec<SeriesPoint> {
    (0..=end_s)
        .map(|t| {
            let t = f64::from(t);
            let moved = match to_s {
                Some(to) if t >= to => 1.0,
                Some(to) if t > from_s => (t - from_s) / (to - from_s),
                _ => 0.0,
            };
            SeriesPoint { t_s: t, mem_mib: vec![mib * (1.0 - moved), mib * moved], local_pct: 50.0 + 50.0 * moved }
        })
        .collect()
}

fn run(seed: u64, runtime_s: f64, local: f64, migrated: u64, converge_s: Option<f64>, moves: bool) -> RunResult {
    let end = runtime_s as u32;
    let processes = (1..=2)
        .map(|pid| ProcessSeries {
            pid,
            name: "numa01".to_string(),
            finish_s: Some(runtime_s),
            throughput: None,
            unit: None,
            converge_s,
            series: series(end, 3072.0, 5.0, if moves && pid == 2 { Some(20.0) } else { None }),
            cpu_nodes: vec![pid - 1],
        })
        .collect();
    RunResult {
        seed,
        nodes: vec![0, 1],
        runtime_s,
        throughput: None,
        throughput_unit: None,
        local_access_pct: local,
        pages_migrated: migrated,
        converge_s,
        processes,
        alloc_failures: 0,
        engine: None,
    }
}

fn policy(name: &str, runs: Vec<RunResult>) -> PolicyResult {
    let of = |f: &dyn Fn(&RunResult) -> f64| Stat::of(&runs.iter().map(f).collect::<Vec<_>>());
    let converged: Vec<f64> = runs.iter().filter_map(|r| r.converge_s).collect();
    PolicyResult {
        policy: name.to_string(),
        runtime_s: of(&|r| r.runtime_s),
        throughput: None,
        local_access_pct: of(&|r| r.local_access_pct),
        pages_migrated: of(&|r| r.pages_migrated as f64),
        converge_s: if converged.is_empty() { None } else { Some(Stat::of(&converged)) },
        runs,
    }
}

/// The comparison: default 120/124 s, 50% local, nothing migrated, never converged; autonuma 82/84 s,
/// 92/93% local, 393216 pages, converged at 20 s on seed 1 only.
pub fn comparison() -> Comparison {
    Comparison {
        machine: "autonuma-2s12c-24g".to_string(),
        workload: "numa01".to_string(),
        seeds: vec![1, 2],
        throughput_unit: None,
        policies: vec![
            policy("default", vec![run(1, 120.0, 50.0, 0, None, false), run(2, 124.0, 50.0, 0, None, false)]),
            policy(
                "autonuma",
                vec![run(1, 82.0, 92.0, 393_216, Some(20.0), true), run(2, 84.0, 93.0, 393_216, None, true)],
            ),
        ],
    }
}
