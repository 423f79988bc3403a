//! The runner: the same machine, workload and seeds under several policies, summarised into a
//! [`Comparison`]; and the calibration table against the published autonuma-benchmark runs.
//!
//! # Approach
//!
//! ```text
//!   simulate(machine, spec, ["default", "numad", "numapilot"], [1, 2, 3])
//!     for policy: for seed:
//!       kernel baseline (default, hard-bind, inverse-bind, interleave, autonuma):
//!           Sim::new(baseline) -> step() until finished                        -> RunResult
//!       engine policy (numapilot, numad):
//!           Sim::new(Default) in a SimHost; Engine::new(topo, tunables, policy)
//!           epoch 1 | step | next_interval_ns() of epochs | step | ... | end    -> RunResult
//!                                                                   + engine totals
//!     PolicyResult = runs + mean/stddev of runtime, throughput, local %, pages migrated, converge
//! ```
//!
//! An engine policy runs on `Baseline::Default` (the kernel's NUMA balancing off, as numad's
//! documentation and ours recommend: two balancers fighting over the same pages measure neither).
//! The engine takes its first step after the first epoch (a first sample with something in it) and
//! then every `Engine::next_interval_ns()` of simulated time, rounded up to whole epochs, until the
//! run is over; the simulation does not stop for it, exactly as a daemon's sleep does not stop the
//! machine. Every page a policy moves goes through `SimHost::apply`, which counts it in the kernel's
//! `pages_migrated` like a kernel migration, so the column means the same for every policy.
//!
//! Policy names are checked before any run starts; an unknown one is an error listing the valid
//! names ([`policy_names`]). Tunables are validated before any run starts; the first bad field is
//! the error. The progress callback receives the overall fraction done (0..1), at most ~200 times
//! per run.
//!
//! # Units
//!
//! Simulated ns inside, s in results; pages are 4 KiB base pages.
//!
//! # Limits
//!
//! The engine's decisions cost no simulated CPU time (numad and numapilot use a fraction of one
//! CPU on a live machine); its actions cost what `SimHost::apply` charges (page copies as stalls
//! and bandwidth). numapilot's emulated PMU access samples cost their threads
//! `host::PMU_SAMPLE_COST_NS` each (an estimate); numad, which reads /proc only, pays nothing.
//! numapilot's access samples, communication pairs and controller bandwidth come from `SimHost`
//! here; live, the daemon's signal sources fill the first two (PEBS/IBS/SPE where the PMU offers
//! them, socket pairs and eBPF wake-ups) and nothing fills the controller bandwidth yet.

use numapilot_policy::cadence::Backoff;
/// The engine policies' tunables (re-exported for callers without a policy-crate dependency).
pub use numapilot_policy::Tunables;
use numapilot_policy::{ActionKind, Engine, Policy, StepReport};

use crate::engine::{Baseline, Machine, Sim, SimOptions};
use crate::host::SimHost;
use crate::result::{Comparison, EngineTotals, PolicyResult, ProcessSeries, RunResult, Stat};
use crate::workload::{autonuma_bench, Spec};
use crate::SimError;

/// Share of a process's accesses that must be local for it to count as converged, %.
pub const CONVERGED_LOCAL_PCT: f64 = 90.0;

/// Policies the engine runs (observe, model, decide, act through `SimHost`), in listing order:
/// numapilot's adaptive policy and the numad-like baseline.
pub const ENGINE_POLICIES: [&str; 2] = ["numapilot", "numad"];

/// Every policy name the runner accepts: the kernel baselines, then the engine policies.
pub fn policy_names() -> Vec<&'static str> {
    Baseline::NAMES.iter().chain(ENGINE_POLICIES.iter()).copied().collect()
}

/// A policy as the runner runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyKind {
    /// A kernel baseline, built into the simulation.
    Kernel(Baseline),
    /// An engine policy (one of [`ENGINE_POLICIES`]) on `Baseline::Default`.
    Engine(&'static str),
}

impl PolicyKind {
    /// Parses a policy name; an unknown one is an error listing every valid name.
    pub fn parse(name: &str) -> Result<Self, SimError> {
        if let Some(&e) = ENGINE_POLICIES.iter().find(|&&e| e == name) {
            return Ok(Self::Engine(e));
        }
        Baseline::parse(name).map(Self::Kernel).map_err(|_| SimError::Unknown {
            kind: "policy",
            name: name.to_string(),
            valid: policy_names().join(", "),
        })
    }

    /// A fresh policy object for an engine policy; `None` for a kernel baseline.
    pub fn policy(&self) -> Option<Box<dyn Policy>> {
        match self {
            Self::Kernel(_) => None,
            Self::Engine("numad") => Some(Box::new(numapilot_policy::Numad::default())),
            Self::Engine("numapilot") => Some(Box::new(numapilot_policy::Adaptive::default())),
            // `parse` only builds names of ENGINE_POLICIES; a name without a policy object here
            // runs nothing (the runner refuses it) rather than silently another policy.
            Self::Engine(_) => None,
        }
    }
}

/// The kind name of an action, as `EngineTotals::actions_by_kind` counts it.
pub fn action_kind_name(kind: &ActionKind) -> &'static str {
    match kind {
        ActionKind::SetAffinity { .. } => "set-affinity",
        ActionKind::MigratePages { .. } => "migrate-pages",
        ActionKind::MoveRanges { .. } => "move-ranges",
        ActionKind::Interleave { .. } => "interleave",
    }
}

/// Reports the fraction of a run done, at most every half percent.
struct RunProgress {
    fixed_total: f64,
    next_report: f64,
}

impl RunProgress {
    fn new(sim: &Sim) -> Self {
        Self { fixed_total: sim.trt.iter().filter_map(|t| t.total).sum(), next_report: 0.0 }
    }

    fn tick(&mut self, sim: &Sim, progress: &mut dyn FnMut(f64)) {
        let frac = match sim.spec.duration_s {
            Some(d) => sim.now_ns() as f64 / 1e9 / d,
            None => {
                sim.trt.iter().filter(|t| t.total.is_some()).map(|t| t.done).sum::<f64>() / self.fixed_total.max(1.0)
            }
        };
        if frac >= self.next_report {
            progress(frac.min(1.0));
            self.next_report = frac + 0.005;
        }
    }
}

fn finish(sim: &Sim, spec: &Spec, policy: &str, seed: u64, opts: &SimOptions) -> Result<RunResult, SimError> {
    // Fixed work that did not finish is an error: past the cap, and also when the run was cut by
    // the workload's `duration_s` (or --duration over it) and its figure is a runtime (no process
    // is open-ended): that runtime read as the duration, with exit 0, as if the work had ended
    // then (review helper-53). Beside an open-ended process, whose throughput is the figure, a
    // batch job cut short is part of the scene (its `finish_s` stays empty; review helper-54).
    let figure_is_runtime = sim.prt.iter().all(|p| !p.open_ended);
    if !sim.all_work_done() && (spec.duration_s.is_none() || figure_is_runtime) {
        return Err(SimError::Unfinished {
            workload: spec.name.clone(),
            policy: policy.to_string(),
            cap_s: spec.duration_s.unwrap_or(opts.max_s),
        });
    }
    Ok(result_of(sim, seed))
}

/// Runs one policy on one seed; engine policies use `opts.tunables` (kernel baselines ignore them).
pub fn run_one(
    machine: &Machine,
    spec: &Spec,
    policy: &str,
    seed: u64,
    opts: &SimOptions,
    progress: &mut dyn FnMut(f64),
) -> Result<RunResult, SimError> {
    match PolicyKind::parse(policy)? {
        PolicyKind::Kernel(baseline) => {
            let mut sim = Sim::new(machine, spec, baseline, seed, opts)?;
            let mut tracker = RunProgress::new(&sim);
            while sim.step() {
                tracker.tick(&sim, progress);
            }
            let run = finish(&sim, spec, policy, seed, opts)?;
            progress(1.0);
            Ok(run)
        }
        PolicyKind::Engine(_) => run_engine(machine, spec, policy, seed, opts, progress, &mut |_, _| {}),
    }
}

/// Runs an engine policy on one seed, calling `on_step` with the simulation and the step's report
/// after every engine step (tests check invariants there).
pub fn run_engine(
    machine: &Machine,
    spec: &Spec,
    policy: &str,
    seed: u64,
    opts: &SimOptions,
    progress: &mut dyn FnMut(f64),
    on_step: &mut dyn FnMut(&Sim, &StepReport),
) -> Result<RunResult, SimError> {
    let kind = PolicyKind::parse(policy)?;
    let Some(pol) = kind.policy() else {
        return Err(SimError::Mismatch {
            workload: spec.name.clone(),
            reason: format!("policy {policy} is not an engine policy (a kernel baseline, or no policy object)"),
        });
    };
    let tunables = &opts.tunables;
    check_tunables(tunables)?;
    let mut host = SimHost::new(Sim::new(machine, spec, Baseline::Default, seed, opts)?);
    if kind != PolicyKind::Engine("numapilot") {
        // Only numapilot would run PMU sampling on a live machine and pays for it (its samples'
        // stall, host::PMU_SAMPLE_COST_NS); numad reads /proc only, so its run is charged nothing.
        host.set_sample_cost_ns(0);
    } else {
        host.set_sample_cost_ns(opts.pmu_sample_cost_ns);
    }
    let topo = numapilot_policy::Host::topology(&host).clone();
    let mut engine = Engine::new(topo, tunables.clone(), pol);
    let mut by_kind = std::collections::BTreeMap::<String, u64>::new();
    let mut tracker = RunProgress::new(host.sim());
    // The first step comes after the first epoch; processes whose launcher asks for nodes ask
    // before each epoch that starts them (rule "launch-advice").
    launch_stage(&mut engine, &mut host, &mut by_kind);
    let mut running = host.sim_mut().step();
    tracker.tick(host.sim(), progress);
    // numapilot is stepped at the daemon's cadence (`numapilot_policy::cadence`): the wait backs
    // off while nothing changes, its access sampling stretched alike, and a process started while
    // backed off ends the wait at the next interval (the daemon's last-pid check). numad keeps its
    // own interval (a cap of 0: no back-off).
    let cap_ms = if kind == PolicyKind::Engine("numapilot") { opts.idle_max_interval_ms } else { 0 };
    let mut backoff = Backoff::new(cap_ms);
    let mut last_step: Option<u64> = None;
    while running {
        let now = host.sim().now_ns();
        if let Some(prev) = last_step.replace(now) {
            backoff.stepped(now.saturating_sub(prev));
        }
        let report = engine.step(&mut host).map_err(|e| SimError::Mismatch {
            workload: spec.name.clone(),
            reason: format!("policy {policy}: the simulated host could not be observed: {e}"),
        })?;
        for a in &report.plan.actions {
            *by_kind.entry(action_kind_name(&a.kind).to_string()).or_default() += 1;
        }
        on_step(host.sim(), &report);
        backoff.sampled(report.access_fill);
        let epoch = host.sim().epoch_ns().max(1);
        let base = engine.next_interval_ns().max(epoch);
        let wait = backoff.next_wait_ns(base, &engine.model, Some(report.plan.actions.len()));
        let stretch = if opts.stretch_sampling { backoff.stretch_for(wait, base) } else { 1 };
        numapilot_policy::Host::set_sampling_stretch(&mut host, stretch);
        let now = host.sim().now_ns();
        let until = now + wait;
        let mark = host.sim().started_processes();
        let mut peek = now + base;
        while running && host.sim().now_ns() < until {
            launch_stage(&mut engine, &mut host, &mut by_kind);
            running = host.sim_mut().step();
            tracker.tick(host.sim(), progress);
            if wait > base && host.sim().now_ns() >= peek {
                if host.sim().started_processes() != mark {
                    break;
                }
                peek += base;
            }
        }
    }
    let mut run = finish(host.sim(), spec, policy, seed, opts)?;
    let t = engine.totals;
    run.engine = Some(EngineTotals {
        steps: t.steps,
        // Launch advice counts as an action of the run (`launch-advice` in the kinds): so the
        // actions are the kinds' sum.
        actions: t.actions + by_kind.get("launch-advice").copied().unwrap_or(0),
        actions_by_kind: by_kind,
        pages_moved: t.pages_moved,
        pages_failed: t.pages_failed,
        vanished: t.vanished,
        refused: t.refused,
    });
    progress(1.0);
    Ok(run)
}

/// The launch stage before an epoch: every process about to start whose launcher asks gets the
/// policy's advice (or none) before its first thread runs; advice given is counted under
/// `launch-advice` in the run's actions by kind.
fn launch_stage(engine: &mut Engine, host: &mut SimHost, by_kind: &mut std::collections::BTreeMap<String, u64>) {
    for (p, req) in host.sim().launches_due() {
        let now = host.sim().now_ns();
        let advice = engine.advise_launch(now, &req).ok();
        if advice.is_some() {
            *by_kind.entry("launch-advice".to_string()).or_default() += 1;
        }
        host.sim_mut().apply_launch(p, advice.as_ref().map(|a| &a.nodes));
    }
}

/// Why a tunables file could not be used; every message names the file (and the field when one
/// is at fault).
#[derive(Debug, thiserror::Error)]
pub enum TunablesFileError {
    /// The file could not be read.
    #[error("reading tunables file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not TOML of the `Tunables` shape (an unknown key, a wrong type); the message
    /// names the key.
    #[error("tunables file {path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// The parser's message (key, line, column).
        message: String,
    },
    /// A value is out of its range.
    #[error("tunables file {path}: {source}")]
    Invalid {
        /// The file.
        path: String,
        /// The field, its value and its valid range.
        source: numapilot_policy::TunableError,
    },
}

/// Reads and validates a tunables file (TOML, the `Tunables` field names; missing keys keep their
/// defaults, unknown keys are errors).
pub fn tunables_from_file(path: &std::path::Path) -> Result<Tunables, TunablesFileError> {
    let shown = path.display().to_string();
    // Capped as machine and workload files are (a link to /dev/zero read without end; review
    // helper-39).
    let text = numapilot_topology::machine::read_description(path)
        .map_err(|source| TunablesFileError::Read { path: shown.clone(), source })?;
    tunables_from_str(&text, &shown)
}

/// A tunables file written as the daemon's configuration has them: a `[tunables]` table, beside
/// the daemon's other tables (whose values the simulator does not use), so a daemon's file or its
/// section pasted serves as is (review helper-41: "unknown field `tunables`").
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // The daemon's tables other than [daemon] are accepted, not read.
struct InDaemonConfig {
    #[serde(default)]
    tunables: Tunables,
    daemon: Option<toml::Value>,
    exclude: Option<toml::Value>,
    include: Option<toml::Value>,
    actuation: Option<toml::Value>,
    signals: Option<toml::Value>,
}

/// [`tunables_from_file`] on text already read; `path` names it in errors. The fields at the top
/// level, or in a `[tunables]` table as in the daemon's configuration.
pub fn tunables_from_str(text: &str, path: &str) -> Result<Tunables, TunablesFileError> {
    let parse_err = |e: toml::de::Error| TunablesFileError::Parse {
        path: path.to_string(),
        message: e.to_string().trim().to_string(),
    };
    let top: toml::Table = toml::from_str(text).map_err(parse_err)?;
    const DAEMON_TABLES: [&str; 6] = ["tunables", "daemon", "exclude", "include", "actuation", "signals"];
    let t: Tunables = if top.iter().any(|(k, v)| v.is_table() && DAEMON_TABLES.contains(&k.as_str())) {
        let c = toml::from_str::<InDaemonConfig>(text).map_err(parse_err)?;
        let mut t = c.tunables;
        // `[daemon] interval_ms` replaces `tunables.interval_ms` in the daemon: here too.
        if let Some(ms) = c.daemon.as_ref().and_then(|d| d.get("interval_ms")).and_then(toml::Value::as_integer) {
            t.interval_ms = u64::try_from(ms).map_err(|_| TunablesFileError::Parse {
                path: path.to_string(),
                message: format!("[daemon] interval_ms = {ms}: must be a positive number of ms"),
            })?;
        }
        t
    } else {
        toml::from_str(text).map_err(parse_err)?
    };
    t.validate().map_err(|source| TunablesFileError::Invalid { path: path.to_string(), source })?;
    Ok(t)
}

/// Tunables checked before anything runs; the first bad field is the error.
fn check_tunables(tunables: &Tunables) -> Result<(), SimError> {
    Ok(tunables.validate()?)
}

/// The first sample time from which every later sample is at least 90% local. When the process
/// finished (`finished`), its last point is the extra one the engine adds for the partial window
/// its last threads ran in: it is left out, so a process local only while its last threads finish
/// does not count as converged at its end.
fn converge_time(series: &[crate::result::SeriesPoint], finished: bool) -> Option<f64> {
    converge_time_at(series, finished, CONVERGED_LOCAL_PCT)
}

/// `converge_time` against another mark, % local: the first sample time from which every later
/// sample is at least `local_pct` local (the evidence judges convergence against a share of the
/// reachable bound, `workload::locality`).
pub fn converge_time_at(series: &[crate::result::SeriesPoint], finished: bool, local_pct: f64) -> Option<f64> {
    let upto = if finished { series.len().saturating_sub(1) } else { series.len() };
    let mut since = None;
    for p in &series[..upto] {
        if p.local_pct >= local_pct {
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
    for (p, (pr, pid)) in sim.proc_results().enumerate() {
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
            converge_s: converge_time(&pr.series, pr.finish_ns.is_some()),
            series: pr.series.clone(),
            cpu_nodes: cpu_nodes(sim, p),
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
        engine: None,
        alloc_failures: sim.kernel.alloc_failures,
    }
}

/// Kernel ids of the nodes process `p`'s threads last ran on (empty if it never started).
fn cpu_nodes(sim: &Sim, p: usize) -> Vec<u32> {
    if !sim.prt[p].started {
        return Vec::new();
    }
    let k = &sim.kernel;
    let set: std::collections::BTreeSet<u32> =
        k.procs[p].tasks.iter().map(|&t| k.node_of_cpu(k.tasks[t].cpu)).collect();
    set.into_iter().collect()
}

/// Runs `spec` on `machine` under every policy and seed; `progress` gets the overall fraction done.
/// Names, the workload and the engine policies' tunables (`opts.tunables`) are checked before any
/// run starts.
pub fn simulate(
    machine: &Machine,
    spec: &Spec,
    policies: &[&str],
    seeds: &[u64],
    opts: &SimOptions,
    progress: &mut dyn FnMut(f64),
) -> Result<Comparison, SimError> {
    for p in policies {
        PolicyKind::parse(p)?;
    }
    if policies.is_empty() || seeds.is_empty() {
        return Err(SimError::Mismatch { workload: spec.name.clone(), reason: "no policy or no seed given".into() });
    }
    spec.validate()?;
    check_tunables(&opts.tunables)?;
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
    Ok(comparison(machine, spec, seeds, out))
}

/// A comparison from per-policy results (in the order to report them).
pub fn comparison(machine: &Machine, spec: &Spec, seeds: &[u64], policies: Vec<PolicyResult>) -> Comparison {
    let throughput_unit = policies.first().and_then(|p| p.runs.first()).and_then(|r| r.throughput_unit.clone());
    Comparison {
        machine: machine.name.clone(),
        workload: spec.name.clone(),
        seeds: seeds.to_vec(),
        throughput_unit,
        policies,
    }
}

/// One policy's runs (one per seed) with their means and spreads.
pub fn summarise(policy: &str, runs: Vec<RunResult>) -> PolicyResult {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::SeriesPoint;

    fn series(local: &[f64]) -> Vec<SeriesPoint> {
        local.iter().enumerate().map(|(i, &l)| SeriesPoint { t_s: i as f64, mem_mib: vec![], local_pct: l }).collect()
    }

    #[test]
    fn each_engine_name_runs_its_own_policy() {
        let name = |k: PolicyKind| k.policy().map(|p| p.name());
        assert_eq!(name(PolicyKind::parse("numad").unwrap()), Some("numad"));
        let np = name(PolicyKind::parse("numapilot").unwrap());
        assert!(np.is_some() && np != Some("numad"), "{np:?}");
        assert_eq!(name(PolicyKind::Engine("other")), None);
        assert_eq!(name(PolicyKind::parse("default").unwrap()), None);
    }

    #[test]
    fn the_finish_point_does_not_count_as_convergence() {
        // 50%, 60%, then the finish point at 95%: local only while the last threads finished.
        assert_eq!(converge_time(&series(&[50.0, 60.0, 95.0]), true), None);
        // The same points on a process still running: the last one is a regular sample.
        assert_eq!(converge_time(&series(&[50.0, 60.0, 95.0]), false), Some(2.0));
        // Converged at 1 s and held through a regular sample: the finish point changes nothing.
        assert_eq!(converge_time(&series(&[50.0, 92.0, 95.0, 97.0]), true), Some(1.0));
        // A dip after converging restarts the clock.
        assert_eq!(converge_time(&series(&[95.0, 50.0, 95.0, 95.0, 95.0]), true), Some(2.0));
        assert_eq!(converge_time(&[], true), None);
    }
}
