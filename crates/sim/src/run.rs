//! The runner: the same machine, workload and seeds under several policies, summarised into a
//! [`Comparison`]; and the calibration table against the published autonuma-benchmark runs.
//!
//! # Approach
//!
//! ```text
//!   simulate(machine, spec, ["default", "hard-bind"], [1, 2, 3])
//!     for policy: for seed:  Sim::new -> step() until finished -> RunResult
//!                            (series every sample_s, converge = first sample from which a
//!                             process's accesses stay >= 90% local)
//!     PolicyResult = runs + mean/stddev of runtime, throughput, local %, pages migrated, converge
//! ```
//!
//! Policy names are checked before any run starts; an unknown one is an error listing the valid
//! names. The progress callback receives the overall fraction done (0..1), at most ~200 times per
//! run.

use crate::engine::{Baseline, Machine, Sim, SimOptions};
use crate::result::{Comparison, PolicyResult, ProcessSeries, RunResult, Stat};
use crate::workload::{autonuma_bench, Spec};
use crate::SimError;

/// Share of a process's accesses that must be local for it to count as converged, %.
pub const CONVERGED_LOCAL_PCT: f64 = 90.0;

/// Runs one policy on one seed.
pub fn run_one(
    machine: &Machine,
    spec: &Spec,
    policy: &str,
    seed: u64,
    opts: &SimOptions,
    progress: &mut dyn FnMut(f64),
) -> Result<RunResult, SimError> {
    let baseline = Baseline::parse(policy)?;
    let mut sim = Sim::new(machine, spec, baseline, seed, opts)?;
    let fixed_total: f64 = sim.trt.iter().filter_map(|t| t.total).sum();
    let mut next_report = 0.0;
    while sim.step() {
        let frac = match spec.duration_s {
            Some(d) => sim.now_ns() as f64 / 1e9 / d,
            None => sim.trt.iter().filter(|t| t.total.is_some()).map(|t| t.done).sum::<f64>() / fixed_total.max(1.0),
        };
        if frac >= next_report {
            progress(frac.min(1.0));
            next_report = frac + 0.005;
        }
    }
    if spec.duration_s.is_none() && !sim.all_work_done() {
        return Err(SimError::Unfinished {
            workload: spec.name.clone(),
            policy: policy.to_string(),
            cap_s: opts.max_s,
        });
    }
    progress(1.0);
    Ok(result_of(&sim, seed))
}

/// The first sample time from which every later sample is at least 90% local.
fn converge_time(series: &[crate::result::SeriesPoint]) -> Option<f64> {
    let mut since = None;
    for p in series {
        if p.local_pct >= CONVERGED_LOCAL_PCT {
            since.get_or_insert(p.t_s);
        } else {
            since = None;
        }
    }
    since
}

fn result_of(sim: &Sim, seed: u64) -> RunResult {
    let end_s = sim.now_ns() as f64 / 1e9;
    let mut processes = Vec::new();
    let mut runtime_s: f64 = 0.0;
    let mut throughput_sum = 0.0;
    let mut any_open = false;
    // Validated when the run was built; an error here would mean no single figure.
    let carriers = sim.spec.throughput_of().ok().flatten();
    for (pr, pid) in sim.proc_results() {
        let carries = carriers.as_ref().is_some_and(|c| c.processes.contains(&pr.spec));
        let unit = crate::workload::Spec::process_unit(&sim.spec.processes[pr.spec]).map(|u| format!("{u}/s"));
        let finish_s = pr.finish_ns.map(|f| f as f64 / 1e9);
        if let Some(f) = finish_s {
            runtime_s = runtime_s.max(f);
        }
        let throughput = if pr.open_ended {
            let span = (end_s - pr.start_ns as f64 / 1e9).max(1e-9);
            let tp = pr.units / span;
            if carries {
                any_open = true;
                throughput_sum += tp;
            }
            Some(tp)
        } else {
            None
        };
        processes.push(ProcessSeries {
            pid,
            name: pr.name.clone(),
            finish_s,
            unit: throughput.and(unit),
            throughput,
            converge_s: converge_time(&pr.series),
            series: pr.series.clone(),
        });
    }
    if processes.iter().any(|p| p.throughput.is_some()) || runtime_s == 0.0 {
        runtime_s = runtime_s.max(end_s);
    }
    let converge_s = processes.iter().map(|p| p.converge_s).try_fold(0.0f64, |acc, c| c.map(|c| acc.max(c)));
    RunResult {
        seed,
        nodes: sim.kernel.topo.nodes.iter().map(|n| n.id).collect(),
        runtime_s,
        throughput: any_open.then_some(throughput_sum),
        throughput_unit: carriers.filter(|_| any_open).map(|c| c.unit),
        local_access_pct: sim.local_access_pct(),
        pages_migrated: sim.kernel.pages_migrated,
        converge_s,
        processes,
    }
}

/// Runs `spec` on `machine` under every policy and seed; `progress` gets the overall fraction done.
pub fn simulate(
    machine: &Machine,
    spec: &Spec,
    policies: &[&str],
    seeds: &[u64],
    opts: &SimOptions,
    progress: &mut dyn FnMut(f64),
) -> Result<Comparison, SimError> {
    for p in policies {
        Baseline::parse(p)?;
    }
    if policies.is_empty() || seeds.is_empty() {
        return Err(SimError::Mismatch { workload: spec.name.clone(), reason: "no policy or no seed given".into() });
    }
    spec.validate()?;
    let total = (policies.len() * seeds.len()) as f64;
    let mut out = Vec::new();
    for (pi, policy) in policies.iter().enumerate() {
        let mut runs = Vec::new();
        for (si, &seed) in seeds.iter().enumerate() {
            let base = (pi * seeds.len() + si) as f64;
            let run = run_one(machine, spec, policy, seed, opts, &mut |f| progress((base + f) / total))?;
            runs.push(run);
        }
        out.push(summarise(policy, runs));
    }
    let throughput_unit = out.first().and_then(|p| p.runs.first()).and_then(|r| r.throughput_unit.clone());
    Ok(Comparison {
        machine: machine.name.clone(),
        workload: spec.name.clone(),
        seeds: seeds.to_vec(),
        throughput_unit,
        policies: out,
    })
}

fn summarise(policy: &str, runs: Vec<RunResult>) -> PolicyResult {
    let of = |f: &dyn Fn(&RunResult) -> f64| Stat::of(&runs.iter().map(f).collect::<Vec<_>>());
    let throughput = runs.iter().all(|r| r.throughput.is_some()).then(|| of(&|r| r.throughput.unwrap_or(0.0)));
    let conv: Vec<f64> = runs.iter().filter_map(|r| r.converge_s).collect();
    PolicyResult {
        policy: policy.to_string(),
        runtime_s: of(&|r| r.runtime_s),
        throughput,
        local_access_pct: of(&|r| r.local_access_pct),
        pages_migrated: of(&|r| r.pages_migrated as f64),
        converge_s: (!conv.is_empty()).then(|| Stat::of(&conv)),
        runs,
    }
}

/// One row of the calibration table.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CalibrationRow {
    /// Machine preset.
    pub machine: String,
    /// autonuma-benchmark test.
    pub test: String,
    /// Policy compared with `default`.
    pub policy: String,
    /// Published runtime ratio policy/default.
    pub published: f64,
    /// Simulated runtime ratio policy/default.
    pub simulated: f64,
    /// Allowed relative deviation (0.15 = 15%).
    pub tolerance: f64,
}

impl CalibrationRow {
    /// Relative deviation of the simulated ratio from the published one.
    pub fn deviation(&self) -> f64 {
        (self.simulated - self.published).abs() / self.published
    }

    /// Whether the row is within its tolerance.
    pub fn within(&self) -> bool {
        self.deviation() <= self.tolerance
    }
}

/// Published runtimes (wall s) of the 3.7-rc3 box (S. Dronamraju, LKML 20121105171106.GA25353;
/// shared/reference/published-results.md): (test, default, hard bind, inverse bind).
pub const PUBLISHED_24G: [(&str, f64, f64, Option<f64>); 4] = [
    ("numa01", 121.5, 81.0, Some(146.0)),
    ("numa01_THREAD_ALLOC", 397.5, 264.2, None),
    ("numa02", 53.2, 35.3, Some(63.5)),
    ("numa02_SMT", 61.3, 43.2, None),
];

/// Calibration tolerance of the bind ratios (issue 3, section 6): 15%.
pub const BIND_TOLERANCE: f64 = 0.15;

/// Work scale of the calibration runs: a tenth of the passes (ratios are steady-state; see
/// `workload::autonuma_bench`).
pub const CALIBRATION_SCALE: f64 = 0.1;

/// Published runtimes (wall s) of the 2012 AutoNUMA box (A. Arcangeli, LKML
/// 20120321124937.GX24602; shared/reference/published-results.md): (test, no balancing, AutoNUMA).
pub const PUBLISHED_16G_AUTONUMA: [(&str, f64, f64); 3] =
    [("numa01", 305.0, 207.0), ("numa01_THREAD_ALLOC", 491.0, 328.0), ("numa02", 64.0, 45.0)];

/// Calibration tolerance of the AutoNUMA ratios (issue 3, section 6): 20%.
pub const AUTONUMA_TOLERANCE: f64 = 0.20;

/// The calibration table, one seed: the bind ratios on `autonuma-2s12c-24g` (runs at
/// [`CALIBRATION_SCALE`]), then the AutoNUMA ratios on `autonuma-2s12c-16g` (full-size runs: the
/// time AutoNUMA needs to converge depends on memory size and scan tunables, not on the passes).
pub fn calibrate(opts: &SimOptions, progress: &mut dyn FnMut(f64)) -> Result<Vec<CalibrationRow>, SimError> {
    // Progress weights: the full-size AutoNUMA runs take most of the time.
    let mut rows = calibrate_bind(opts, &mut |f| progress(0.1 * f))?;
    let machine = Machine::preset("autonuma-2s12c-16g")?;
    let n = PUBLISHED_16G_AUTONUMA.len() as f64;
    for (i, (test, def, an)) in PUBLISHED_16G_AUTONUMA.iter().enumerate() {
        let spec = autonuma_bench::spec(test, &machine.topo, 1.0)?;
        let cmp = simulate(&machine, &spec, &["default", "autonuma"], &[1], opts, &mut |f| {
            progress(0.1 + 0.9 * (i as f64 + f) / n)
        })?;
        rows.push(CalibrationRow {
            machine: machine.name.clone(),
            test: test.to_string(),
            policy: "autonuma".into(),
            published: an / def,
            simulated: cmp.policies[1].runtime_s.mean / cmp.policies[0].runtime_s.mean,
            tolerance: AUTONUMA_TOLERANCE,
        });
    }
    Ok(rows)
}

/// The bind-ratio rows of [`calibrate`] only (`autonuma-2s12c-24g`, hard and inverse bind).
pub fn calibrate_bind(opts: &SimOptions, progress: &mut dyn FnMut(f64)) -> Result<Vec<CalibrationRow>, SimError> {
    let machine = Machine::preset("autonuma-2s12c-24g")?;
    let mut rows = Vec::new();
    let n = PUBLISHED_24G.len() as f64;
    for (i, (test, def, hard, inv)) in PUBLISHED_24G.iter().enumerate() {
        let spec = autonuma_bench::spec(test, &machine.topo, CALIBRATION_SCALE)?;
        let mut policies = vec!["default", "hard-bind"];
        if inv.is_some() {
            policies.push("inverse-bind");
        }
        let cmp = simulate(&machine, &spec, &policies, &[1], opts, &mut |f| progress((i as f64 + f) / n))?;
        let rt = |k: usize| cmp.policies[k].runtime_s.mean;
        rows.push(CalibrationRow {
            machine: machine.name.clone(),
            test: test.to_string(),
            policy: "hard-bind".into(),
            published: hard / def,
            simulated: rt(1) / rt(0),
            tolerance: BIND_TOLERANCE,
        });
        if let Some(inv) = inv {
            rows.push(CalibrationRow {
                machine: machine.name.clone(),
                test: test.to_string(),
                policy: "inverse-bind".into(),
                published: inv / def,
                simulated: rt(2) / rt(0),
                tolerance: BIND_TOLERANCE,
            });
        }
    }
    Ok(rows)
}
