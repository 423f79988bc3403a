//! `numapilot sim evidence`: the issue's evidence matrix in one command, as markdown tables and a
//! verdict per target.
//!
//! # Problem
//!
//! numapilot's claims (issue 4, Evidence) are comparisons across many runs: four
//! autonuma-benchmark tests on four machines under five policies, a client/server pair, the
//! process mix on three machines and the VM mix on the 288-core system, each over several seeds.
//! Run by hand that is hundreds of commands and a spreadsheet; here it is one command whose output
//! goes into README.md as it is (`scripts/evidence.sh`).
//!
//! # Approach
//!
//! ```text
//!   matrix -> jobs (machine, workload, policy, seed) -> worker threads (std::thread::scope; runs are
//!   independent and deterministic, so the order they finish in changes nothing) -> per group a
//!   Comparison (run::summarise) -> tables -> targets: PASS / FAIL / N/A with the numbers
//! ```
//!
//! Sizes (the 288-core runs must stay practical): numa01 and numa01_THREAD_ALLOC at a tenth of
//! their passes (`run::CALIBRATION_SCALE`, the calibration's scale: the ratios are steady-state,
//! memory stays full size so convergence is real; 16-400 simulated s), numa02 and numa02_SMT at
//! full size (at a tenth they last 0.2-5 s, less than one decision period of any daemon, which
//! would measure the period, not the placement); the client/server pair, the process mix and the
//! VM mix run 20 simulated seconds instead of 30-60. Measured: the full matrix with one seed is
//! about 2 minutes of wall time on 2 CPUs (release build), the 288-core numa01 runs the longest.
//! `--quick` is the 2-node box only, numa tests at a fifth of these scales, open-ended workloads
//! 3 s, one seed by default: a smoke test of the whole path.
//!
//! Targets, per row of the matrix:
//!
//! ```text
//!   bench   numapilot runtime <= 1.05 x hard-bind; < autonuma; < numad;
//!           reaches 90% local sooner than autonuma: per seed, numapilot converged, and earlier
//!           than autonuma's time to 90% local (a run that never converged counts its runtime, so
//!           a policy that finished earlier cannot be beaten by converging at its end); "90% local"
//!           means 90% of the workload's locality bound on that machine (the best local share any
//!           placement can give with all threads running, `workload::locality`), which is 100%
//!           except where threads sharing one buffer need several nodes' CPUs (numa01 on 4, 8 and
//!           36 nodes: 50%, 25%, 5.6%); such rows say `PASS (bound 50%)`;
//!           pages migrated at most autonuma's (the issue says "fewer"; when both move exactly
//!           the misplaced pages, as on numa02's remote half, neither can move fewer, so equal
//!           counts pass, shown as `PASS (=)` and counted apart)
//!   pair    numapilot throughput >= 1.20 x default; every process's threads on one node at the end
//!   mix     mean per-process throughput (each process against its own default mean) above every
//!           other policy's; mean per-process stddev/mean across seeds below every other policy's
//!           (N/A with one seed); a process starved to zero throughput has no stddev/mean (NaN),
//!           which fails numapilot and never makes another policy look steadier
//! ```
//!
//! A figure that is missing (a policy or a throughput absent) gives a FAIL row saying what is
//! missing, never no row.
//!
//! # Limits
//!
//! Simulated seconds, not wall seconds; a FAIL says the simulated policy missed the target on this
//! matrix, not why (the tables carry the figures to find out).
//!
//! "stddev/mean across seeds < every baseline" against interleave (process mix) and hard-bind (VM
//! mix) compares a placement decision with a noise floor. Interleave and hard-bind read nothing
//! the seed changes: their per-process spread is the simulator's per-epoch progress noise averaged
//! over 20 s (interleave's processes: 0.006-0.16% on article-4n96, 0.007-0.024% on ring-8n64c;
//! hard-bind's VMs at most 0.03%). numapilot places by what it observes, and the seed decides
//! before its first look (10 ms) where each process's main thread first touched its memory (the
//! simulated scheduler's choice of idle CPU) and, in the VM mix, the order the VMs arrive in.
//! Measured 2026-11-26 (`numapilot sim --seeds 8 --json`, per-process figures averaged as here):
//! on article-4n96 the solver ends on nodes 0-1, 2-3, 0-2 or 1-2 by seed (the grid is always
//! first-touched on node 0 and the machine pairs its nodes by socket: different placements, not one
//! relabelled), the database converges at 1 s or at 10-11 s, and two seeds with equivalent
//! placements still differ by up to 2% (the JVM, by when its heap's spill is pulled back); on
//! ring-8n64c the JVM's two threads follow their own first 10 ms of pages onto two nodes; in the VM
//! mix a VM's node set changes with the seed (vm03-large over 7 to 10 nodes). Rules tried and not
//! kept (ring-8n64c's 8-seed figure 2.22%, article-4n96 1.06% without them):
//!
//! ```text
//!   a unit's own resident memory may use the headroom a node keeps      ring 8 seeds 2.22 -> 1.30%
//!   + a unit over several nodes charged where its memory is resident     (with the rule above)
//!       but on the evidence seeds: ring 0.92 -> 1.01%, VM mix 1.356 -> 1.271 x default
//!       (seed 1: the last VM, alone on a node at 3.7 x, split over two at 2.7 x); not kept
//!   a new process starts on the node holding its large memory            article 8 seeds 1.06 -> 0.74%
//!       but autonuma-2s12c-24g process-mix 1.088 -> 1.080 x, below hard-bind's 1.084 (a new FAIL)
//!   a young process that fits a node placed as one unit                  article 0.76 -> 1.94%,
//!                                                                        ring 0.91 -> 1.66% (seeds 1-3)
//! ```
//!
//! With three seeds the figure moves by tenths of a percent with any change of placement order;
//! beating interleave's or hard-bind's would take a placer that ignores where memory is.
//!
//! The VM mix's VMs ask for nodes before they start (rule launch-advice, `workload/vm_mix.rs`);
//! since 2026-11-28 numapilot places them as the clairvoyant hard-bind does (1.570 against 1.571 x
//! default per VM at the daemon's cadence, cv 0.01% both; 1.571 when the emulated PMU sampling
//! cost is left out): the mean's row fails by the sampling's cost, the cv's is a tie (0.01%
//! against 0.01%; which side of it the strict target falls on moves with the fourth decimal).
//!
//! numaconnect-288c numa02_SMT (measured 2026-11-28): numapilot 2.44 s against hard-bind's 2.33 s,
//! 1.046 x. The run is 2.4 s long, every thread local from 1 s on, and what is left is the copy of
//! the main thread's first touch and the emulated PMU sampling (2 us per sample of 10 000 cache
//! lines, `host::PMU_SAMPLE_COST_NS`): with that cost 0 it is 2.436 s, 1.044 x
//! (`PROBE_SAMPLE_COST_NS=0 probe numaconnect-288c numa02_SMT 60 3 hard-bind,numapilot`). It read
//! 1.050 x (a FAIL in the fourth decimal) while a young process's 100 ms windows let the sampler run
//! at ten times the settled rate after the placement was made (policy `cadence.rs`,
//! `DENSITY_SPAN_MIN_NS`), and 1.046 while the simulator charged samples only when a step drained
//! them (the run's last window was free).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::Context as _;
use numapilot_sim::result::{Comparison, PolicyResult, RunResult, Stat};
use numapilot_sim::run;
use numapilot_sim::workload::locality::local_share_bound;
use numapilot_sim::workload::{autonuma_bench, Spec};
use numapilot_sim::{Machine, SimOptions};
use serde::Serialize;

use super::catalog;

/// The policies of the autonuma-benchmark part.
pub const BENCH_POLICIES: [&str; 5] = ["default", "hard-bind", "autonuma", "numad", "numapilot"];

/// The policies of the client/server and mix parts.
pub const OPEN_POLICIES: [&str; 6] = ["default", "hard-bind", "interleave", "autonuma", "numad", "numapilot"];

/// Target names, as the verdict table shows them (tests check every one is present).
pub const TARGETS: [&str; 9] = [
    "runtime <= 1.05 x hard-bind",
    "runtime < autonuma",
    "runtime < numad",
    "90% local sooner than autonuma",
    "pages migrated <= autonuma",
    "throughput >= 1.20 x default",
    "server and clients on one node",
    "mean per-process throughput > every baseline",
    "stddev/mean across seeds < every baseline",
];

/// What to run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Matrix {
    /// Machines of the autonuma-benchmark part.
    pub bench_machines: Vec<String>,
    /// Work scale of numa01 and numa01_THREAD_ALLOC.
    pub numa01_scale: f64,
    /// Work scale of numa02 and numa02_SMT.
    pub numa02_scale: f64,
    /// Machine of the client/server pair.
    pub pair_machine: String,
    /// Machines of the process mix.
    pub mix_machines: Vec<String>,
    /// Machine of the VM mix (none in the quick matrix).
    pub vm_machine: Option<String>,
    /// Simulated seconds of the open-ended workloads.
    pub open_s: f64,
    /// Seeds.
    pub seeds: Vec<u64>,
}

impl Matrix {
    /// Work scale of an autonuma-benchmark test.
    pub fn scale(&self, test: &str) -> f64 {
        if test.starts_with("numa01") {
            self.numa01_scale
        } else {
            self.numa02_scale
        }
    }

    /// The full matrix (or the quick one) with `seeds` seeds (default 3 full, 1 quick).
    pub fn new(quick: bool, seeds: Option<u64>) -> Self {
        let n = seeds.unwrap_or(if quick { 1 } else { 3 }).max(1);
        if quick {
            return Self {
                bench_machines: vec!["autonuma-2s12c-24g".into()],
                numa01_scale: 0.02,
                numa02_scale: 0.2,
                pair_machine: "autonuma-2s12c-24g".into(),
                mix_machines: vec!["autonuma-2s12c-24g".into()],
                vm_machine: None,
                open_s: 3.0,
                seeds: (1..=n).collect(),
            };
        }
        Self {
            bench_machines: ["autonuma-2s12c-24g", "article-4n96", "ring-8n64c", "numaconnect-288c"]
                .map(String::from)
                .to_vec(),
            numa01_scale: run::CALIBRATION_SCALE,
            numa02_scale: 1.0,
            pair_machine: "autonuma-2s12c-24g".into(),
            mix_machines: ["autonuma-2s12c-24g", "article-4n96", "ring-8n64c"].map(String::from).to_vec(),
            vm_machine: Some("numaconnect-288c".into()),
            open_s: 20.0,
            seeds: (1..=n).collect(),
        }
    }
}

/// Which part of the matrix a group belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Part {
    /// autonuma-benchmark.
    Bench,
    /// Client/server pair.
    Pair,
    /// Process mix / VM mix.
    Mix,
}

/// One target's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// One of [`TARGETS`].
    pub target: &'static str,
    /// Machine and workload.
    pub scope: String,
    /// numapilot's figure.
    pub numapilot: String,
    /// What it is compared with.
    pub reference: String,
    /// `PASS`, `PASS (=)` (only equal, where the target allows it), `FAIL` or `N/A`.
    pub verdict: &'static str,
    /// How the target was read, when not literally (the convergence mark against a locality bound
    /// below 100%: `bound 50%`); shown in brackets after the verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Everything the command produces.
#[derive(Debug, Clone, Serialize)]
pub struct Evidence {
    /// What ran.
    pub matrix: Matrix,
    /// Per (part, machine, workload), the comparison.
    pub groups: Vec<(Part, Comparison)>,
    /// Per group (same order), the best local share any placement can give its workload on its
    /// machine (`workload::locality::local_share_bound`), a fraction.
    pub local_bounds: Vec<f64>,
    /// The verdicts.
    pub verdicts: Vec<Verdict>,
    /// Runs done.
    pub runs: usize,
    /// Wall time, s.
    pub wall_s: f64,
    /// Worker threads the runs used (`--threads`).
    pub threads: usize,
}

struct Group {
    part: Part,
    machine: Machine,
    spec: Spec,
    policies: &'static [&'static str],
}

fn groups(m: &Matrix) -> anyhow::Result<Vec<Group>> {
    let mut out = Vec::new();
    for name in &m.bench_machines {
        let machine = catalog::machine(name)?;
        for test in autonuma_bench::NAMES {
            let spec = autonuma_bench::spec(test, &machine.topo, m.scale(test))?;
            out.push(Group { part: Part::Bench, machine: machine.clone(), spec, policies: &BENCH_POLICIES });
        }
    }
    let open = |part, name: &str, workload: &str, out: &mut Vec<Group>| -> anyhow::Result<()> {
        let machine = catalog::machine(name)?;
        let mut spec = catalog::workload(workload, &machine.topo)?;
        spec.duration_s = Some(m.open_s);
        out.push(Group { part, machine, spec, policies: &OPEN_POLICIES });
        Ok(())
    };
    for w in ["redis-set", "redis-get"] {
        open(Part::Pair, &m.pair_machine, w, &mut out)?;
    }
    for name in &m.mix_machines {
        open(Part::Mix, name, "process-mix", &mut out)?;
    }
    if let Some(vm) = &m.vm_machine {
        open(Part::Mix, vm, "vm-mix", &mut out)?;
    }
    Ok(out)
}

/// Runs the matrix on `threads` worker threads; `log` gets one line per finished run.
pub fn evidence(m: &Matrix, threads: usize, log: &(dyn Fn(&str) + Sync)) -> anyhow::Result<Evidence> {
    let start = std::time::Instant::now();
    let groups = groups(m)?;
    let opts = SimOptions::default();
    // Jobs, the biggest machines first so the long runs start early.
    let mut jobs: Vec<(usize, usize, u64)> = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        for (p, _) in group.policies.iter().enumerate() {
            for &seed in &m.seeds {
                jobs.push((g, p, seed));
            }
        }
    }
    jobs.sort_by_key(|&(g, _, _)| std::cmp::Reverse(groups[g].machine.topo.cpus.len()));
    let results: Mutex<Vec<Option<Result<RunResult, String>>>> = Mutex::new(vec![None; jobs.len()]);
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    // At most one worker a job; a worker that cannot start (a thread limit) is an error, not a
    // panic, once the ones started have finished.
    let workers = threads.clamp(1, jobs.len().max(1));
    let spawn_error = std::thread::scope(|s| {
        let mut error = None;
        for _ in 0..workers {
            let started = std::thread::Builder::new().spawn_scoped(s, || loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(&(g, p, seed)) = jobs.get(i) else { break };
                let group = &groups[g];
                let policy = group.policies[p];
                let t0 = std::time::Instant::now();
                let r = run::run_one(&group.machine, &group.spec, policy, seed, &opts, &mut |_| {})
                    .map_err(|e| format!("{} {} {policy} seed {seed}: {e}", group.machine.name, group.spec.name));
                let k = done.fetch_add(1, Ordering::SeqCst) + 1;
                log(&format!(
                    "evidence: {k}/{} {} {} {policy} seed {seed}: {:.1} s",
                    jobs.len(),
                    group.machine.name,
                    group.spec.name,
                    t0.elapsed().as_secs_f64()
                ));
                results.lock().expect("no worker panics while holding the lock")[i] = Some(r);
            });
            if let Err(e) = started {
                // The workers that started take every job; only none started is an error.
                error.get_or_insert(e);
            }
        }
        error
    });
    if let Some(e) = spawn_error {
        if done.load(Ordering::SeqCst) < jobs.len() {
            anyhow::bail!("starting an evidence worker thread: {e}");
        }
    }
    let mut results = results.into_inner().expect("workers joined");
    let mut out = Vec::new();
    let bounds: Vec<f64> = groups.iter().map(|g| local_share_bound(&g.spec, &g.machine.topo)).collect();
    for (g, group) in groups.iter().enumerate() {
        let mut per_policy = Vec::new();
        for (p, policy) in group.policies.iter().enumerate() {
            let mut runs = Vec::new();
            for &seed in &m.seeds {
                let i = jobs.iter().position(|&j| j == (g, p, seed)).expect("every job listed");
                let r = results[i].take().context("a run did not finish")?;
                runs.push(r.map_err(anyhow::Error::msg)?);
            }
            per_policy.push(run::summarise(policy, runs));
        }
        out.push((group.part, run::comparison(&group.machine, &group.spec, &m.seeds, per_policy)));
    }
    let verdicts = verdicts(&out, &bounds);
    Ok(Evidence {
        matrix: m.clone(),
        groups: out,
        local_bounds: bounds,
        verdicts,
        runs: jobs.len(),
        wall_s: start.elapsed().as_secs_f64(),
        threads: threads.max(1),
    })
}

fn policy<'a>(c: &'a Comparison, name: &str) -> Option<&'a PolicyResult> {
    c.policies.iter().find(|p| p.policy == name)
}

/// Mean convergence time when every seed converged.
fn converged(p: &PolicyResult) -> Option<f64> {
    p.runs.iter().all(|r| r.converge_s.is_some()).then(|| p.converge_s.map(|s| s.mean)).flatten()
}

/// When one run converged, s: every process at least 90% of `bound` local from then on (the last
/// process's time; `None` if one never did). With a bound of 1 that is the run's own 90%-local
/// convergence time (`RunResult::converge_s`).
fn converged_at(r: &RunResult, bound: f64) -> Option<f64> {
    if bound >= 1.0 {
        return r.converge_s;
    }
    let mark = run::CONVERGED_LOCAL_PCT * bound;
    r.processes
        .iter()
        .map(|p| run::converge_time_at(&p.series, p.finish_s.is_some(), mark))
        .try_fold(0.0f64, |acc, c| c.map(|c| acc.max(c)))
}

/// Time to 90% of `bound` local of one run, s: its convergence time, or its runtime if it never
/// converged.
fn time_to_local(r: &RunResult, bound: f64) -> f64 {
    converged_at(r, bound).unwrap_or(r.runtime_s)
}

/// The convergence target, seed by seed: numapilot converged (every process at least 90% of the
/// workload's locality `bound` local) in every seed and before `other`'s time to the same mark in
/// the same seed (`other`'s "never" counts as its runtime). Returns (numapilot's figure, the
/// reference, pass).
fn sooner(np: &PolicyResult, other: &PolicyResult, bound: f64) -> (String, String, bool) {
    let never = np.runs.iter().filter(|r| converged_at(r, bound).is_none()).count();
    let mut ok = never == 0 && !np.runs.is_empty();
    let mut theirs = Vec::new();
    let mut their_never = 0;
    for r in &np.runs {
        match other.runs.iter().find(|o| o.seed == r.seed) {
            Some(o) => {
                their_never += usize::from(converged_at(o, bound).is_none());
                theirs.push(time_to_local(o, bound));
                ok &= converged_at(r, bound).is_some_and(|c| c < time_to_local(o, bound));
            }
            None => ok = false,
        }
    }
    let mine = if never == 0 {
        format!("{:.1} s", Stat::of(&np.runs.iter().map(|r| time_to_local(r, bound)).collect::<Vec<_>>()).mean)
    } else {
        format!("never in {never} of {}", crate::cmd::plural(np.runs.len(), "seed"))
    };
    let reference = if theirs.len() < np.runs.len() {
        format!("{} missing a seed", other.policy)
    } else if their_never > 0 {
        let seeds = crate::cmd::plural(their_never, "seed");
        format!("{} {:.1} s (never in {seeds}: its runtime)", other.policy, Stat::of(&theirs).mean)
    } else {
        format!("{} {:.1} s", other.policy, Stat::of(&theirs).mean)
    };
    (mine, reference, ok)
}

/// Stddev over mean of `xs`; NaN when the mean is not positive (a process starved to zero has no
/// meaningful spread: it must not score as the steadiest).
fn cv_of(xs: &[f64]) -> f64 {
    let s = Stat::of(xs);
    if s.mean.is_finite() && s.mean > 0.0 {
        s.stddev / s.mean
    } else {
        f64::NAN
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "FAIL"
    }
}

/// Per run of `p`: the mean over open-ended processes of throughput / `base`'s mean for that
/// process; and per process the stddev/mean across seeds, averaged.
fn mix_figures(base: &PolicyResult, p: &PolicyResult) -> (Stat, f64) {
    let Some(first) = base.runs.first() else { return (Stat { mean: f64::NAN, stddev: 0.0 }, f64::NAN) };
    let procs: Vec<usize> = (0..first.processes.len()).filter(|&i| first.processes[i].throughput.is_some()).collect();
    let tp = |r: &RunResult, i: usize| r.processes.get(i).and_then(|x| x.throughput).unwrap_or(0.0);
    let base_mean: Vec<f64> =
        procs.iter().map(|&i| Stat::of(&base.runs.iter().map(|r| tp(r, i)).collect::<Vec<_>>()).mean).collect();
    let per_run: Vec<f64> = p
        .runs
        .iter()
        .map(|r| {
            let xs: Vec<f64> =
                procs.iter().zip(&base_mean).filter(|(_, &b)| b > 0.0).map(|(&i, &b)| tp(r, i) / b).collect();
            xs.iter().sum::<f64>() / xs.len().max(1) as f64
        })
        .collect();
    let cv: Vec<f64> = procs.iter().map(|&i| cv_of(&p.runs.iter().map(|r| tp(r, i)).collect::<Vec<_>>())).collect();
    (Stat::of(&per_run), cv.iter().sum::<f64>() / cv.len().max(1) as f64)
}

/// The verdicts of `groups`; `bounds` (one per group, else 1) are the workloads' locality bounds
/// the convergence target is judged against.
fn verdicts(groups: &[(Part, Comparison)], bounds: &[f64]) -> Vec<Verdict> {
    let mut out = Vec::new();
    for (gi, (part, c)) in groups.iter().enumerate() {
        let scope = format!("{} {}", c.machine, c.workload);
        let bound = bounds.get(gi).copied().unwrap_or(1.0).min(1.0);
        let Some(np) = policy(c, "numapilot") else { continue };
        let mut v = |target: &'static str, numapilot: String, reference: String, verdict: &'static str| {
            // The convergence mark is read against the bound when 90% local is out of reach.
            let note = (target == TARGETS[3] && bound < 1.0).then(|| format!("bound {:.0}%", bound * 100.0));
            out.push(Verdict { target, scope: scope.clone(), numapilot, reference, verdict, note })
        };
        match part {
            Part::Bench => {
                let rt = np.runtime_s.mean;
                let missing = |v: &mut dyn FnMut(&'static str, String, String, &'static str), t, name: &str| {
                    v(t, format!("{rt:.2} s"), format!("no {name} result"), "FAIL")
                };
                let [hb, an, nd] = ["hard-bind", "autonuma", "numad"].map(|n| policy(c, n));
                match hb {
                    Some(hb) => {
                        let ratio = rt / hb.runtime_s.mean;
                        v(
                            TARGETS[0],
                            format!("{rt:.2} s ({ratio:.3} x)"),
                            format!("hard-bind {:.2} s", hb.runtime_s.mean),
                            verdict(ratio <= 1.05),
                        );
                    }
                    None => missing(&mut v, TARGETS[0], "hard-bind"),
                }
                match an {
                    Some(an) => v(
                        TARGETS[1],
                        format!("{rt:.2} s"),
                        format!("autonuma {:.2} s", an.runtime_s.mean),
                        verdict(rt < an.runtime_s.mean),
                    ),
                    None => missing(&mut v, TARGETS[1], "autonuma"),
                }
                match nd {
                    Some(nd) => v(
                        TARGETS[2],
                        format!("{rt:.2} s"),
                        format!("numad {:.2} s", nd.runtime_s.mean),
                        verdict(rt < nd.runtime_s.mean),
                    ),
                    None => missing(&mut v, TARGETS[2], "numad"),
                }
                match an {
                    Some(an) => {
                        let (mine, reference, ok) = sooner(np, an, bound);
                        v(TARGETS[3], mine, reference, verdict(ok));
                        // At most as many: when both move exactly the misplaced pages (numa02's
                        // remote half) neither can move fewer; equality is shown apart.
                        let (a, b) = (np.pages_migrated.mean, an.pages_migrated.mean);
                        let pv = if a < b {
                            "PASS"
                        } else if a == b {
                            "PASS (=)"
                        } else {
                            "FAIL"
                        };
                        v(TARGETS[4], format!("{a:.0}"), format!("autonuma {b:.0}"), pv);
                    }
                    None => {
                        v(TARGETS[3], "-".into(), "no autonuma result".into(), "FAIL");
                        v(TARGETS[4], format!("{:.0}", np.pages_migrated.mean), "no autonuma result".into(), "FAIL");
                    }
                }
            }
            Part::Pair => {
                match (policy(c, "default").and_then(|p| p.throughput), np.throughput) {
                    (Some(d), Some(t)) => {
                        let ratio = t.mean / d.mean;
                        v(
                            TARGETS[5],
                            format!("{:.0} ({ratio:.3} x)", t.mean),
                            format!("default {:.0}", d.mean),
                            verdict(ratio >= 1.20),
                        );
                    }
                    (d, t) => v(
                        TARGETS[5],
                        t.map_or("no throughput".into(), |t| format!("{:.0}", t.mean)),
                        d.map_or("no default throughput".into(), |d| format!("default {:.0}", d.mean)),
                        "FAIL",
                    ),
                }
                let ends: Vec<BTreeSet<u32>> = np.runs.iter().map(final_nodes).collect();
                let shown: Vec<String> = ends.iter().map(nodes_text).collect();
                v(
                    TARGETS[6],
                    format!("nodes {}", shown.join(" / ")),
                    "one node in every seed".into(),
                    verdict(ends.iter().all(|n| n.len() == 1)),
                );
            }
            Part::Mix => {
                let Some(base) = policy(c, "default") else {
                    v(TARGETS[7], "-".into(), "no default result".into(), "FAIL");
                    v(TARGETS[8], "-".into(), "no default result".into(), "FAIL");
                    continue;
                };
                let (np_tp, np_cv) = mix_figures(base, np);
                let others: Vec<(String, Stat, f64)> = c
                    .policies
                    .iter()
                    .filter(|p| p.policy != "numapilot")
                    .map(|p| {
                        let (s, cv) = mix_figures(base, p);
                        (p.policy.clone(), s, cv)
                    })
                    .collect();
                let best = others.iter().max_by(|a, b| a.1.mean.total_cmp(&b.1.mean));
                match best {
                    Some((name, s, _)) => v(
                        TARGETS[7],
                        format!("{:.3} x default", np_tp.mean),
                        format!("best other: {name} {:.3} x", s.mean),
                        verdict(
                            np_tp.mean.is_finite() && others.iter().all(|o| o.1.mean.is_nan() || np_tp.mean > o.1.mean),
                        ),
                    ),
                    None => v(TARGETS[7], format!("{:.3} x default", np_tp.mean), "no other policy".into(), "FAIL"),
                }
                // NaN (a starved process) sorts last: another policy's NaN never wins "lowest".
                let lowest = others.iter().filter(|o| !o.2.is_nan()).min_by(|a, b| a.2.total_cmp(&b.2));
                let single = c.seeds.len() < 2;
                // numapilot's NaN fails; another policy's NaN counts as worse than any figure.
                let cv_ok = np_cv.is_finite() && others.iter().all(|o| o.2.is_nan() || np_cv < o.2);
                match lowest {
                    Some((name, _, cv)) => v(
                        TARGETS[8],
                        format!("{:.2}%", 100.0 * np_cv),
                        format!("lowest other: {name} {:.2}%", 100.0 * cv),
                        if single { "N/A" } else { verdict(cv_ok) },
                    ),
                    None => v(
                        TARGETS[8],
                        format!("{:.2}%", 100.0 * np_cv),
                        "no other policy with a figure".into(),
                        if single { "N/A" } else { verdict(cv_ok && !others.is_empty()) },
                    ),
                }
            }
        }
    }
    out
}

/// The nodes every process's threads ended on, together.
fn final_nodes(r: &RunResult) -> BTreeSet<u32> {
    r.processes.iter().flat_map(|p| p.cpu_nodes.iter().copied()).collect()
}

fn nodes_text(n: &BTreeSet<u32>) -> String {
    n.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

fn pm(s: Stat, d: usize) -> String {
    format!("{:.*} ± {:.*}", d, s.mean, d, s.stddev)
}

/// The markdown report.
pub fn markdown(e: &Evidence, command: &str) -> String {
    let m = &e.matrix;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Generated by `{command}`: {}, {}, {:.0} s wall on {}. Simulated seconds.\n",
        crate::cmd::plural(m.seeds.len(), "seed"),
        crate::cmd::plural(e.runs, "run"),
        e.wall_s,
        crate::cmd::plural(e.threads, "thread")
    );
    let _ = writeln!(
        o,
        "Signals: numapilot here reads emulated precise access samples (PEBS/IBS-like; the live daemon \
         reads them only where the host's PMU offers PEBS, IBS or SPE), thread-to-thread communication pairs \
         (the live daemon's: socket pairs, and wake-ups with eBPF) and memory-controller bandwidth, which the \
         live reader does not fill yet; the sampling's cost is charged to the sampled threads as stall time \
         (`SimHost`), as AutoNUMA's hinting faults are.\n"
    );
    let _ = writeln!(
        o,
        "#### autonuma-benchmark (numa01* at {} and numa02* at {} of their passes, full memory)\n\n\
         | machine | test | policy | runtime (s) | vs hard-bind | 90% local at (s) | pages migrated | actions |\n\
         |---|---|---|---:|---:|---:|---:|---:|",
        m.numa01_scale, m.numa02_scale
    );
    for (part, c) in &e.groups {
        if *part != Part::Bench {
            continue;
        }
        let hb = policy(c, "hard-bind").map(|p| p.runtime_s.mean);
        for p in &c.policies {
            let ratio = hb.map_or("-".into(), |h| format!("{:.3}", p.runtime_s.mean / h));
            let conv = converged(p).map_or("never".to_string(), |x| format!("{x:.1}"));
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {ratio} | {conv} | {:.0} | {} |",
                c.machine,
                c.workload,
                p.policy,
                pm(p.runtime_s, 2),
                p.pages_migrated.mean,
                actions(p)
            );
        }
    }
    let bounded: Vec<String> = e
        .groups
        .iter()
        .zip(&e.local_bounds)
        .filter(|((part, _), &b)| *part == Part::Bench && b < 1.0)
        .map(|((_, c), b)| format!("{} {} {:.1}%", c.machine, c.workload, b * 100.0))
        .collect();
    if !bounded.is_empty() {
        let _ = writeln!(
            o,
            "\nLocality bound: where 90% local is out of reach for any placement, the convergence target is \
             judged at 90% of the best local share any placement can give the workload with all its threads \
             running (computed from the workload and the machine, `workload::locality`: threads sharing one \
             buffer need more nodes of CPUs than one, and a page is local to one node's threads): {}. The \
             \"90% local at\" column above is the literal 90%.",
            bounded.join(", ")
        );
    }
    let _ = writeln!(
        o,
        "\n#### client/server ({} s)\n\n\
         | machine | workload | policy | throughput | vs default | local % | nodes at the end (all processes, per seed) | actions |\n\
         |---|---|---|---:|---:|---:|---|---:|",
        m.open_s
    );
    for (part, c) in &e.groups {
        if *part != Part::Pair {
            continue;
        }
        let d = policy(c, "default").and_then(|p| p.throughput).map(|s| s.mean);
        for p in &c.policies {
            let tp = p
                .throughput
                .map_or("-".into(), |s| format!("{} {}", pm(s, 0), c.throughput_unit.as_deref().unwrap_or("")));
            let ratio = match (p.throughput, d) {
                (Some(t), Some(d)) if d > 0.0 => format!("{:.3}", t.mean / d),
                _ => "-".into(),
            };
            let ends: Vec<String> = p.runs.iter().map(|r| nodes_text(&final_nodes(r))).collect();
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {ratio} | {:.1} | {} | {} |",
                c.machine,
                c.workload,
                p.policy,
                tp.trim_end(),
                p.local_access_pct.mean,
                ends.join(" / "),
                actions(p)
            );
        }
    }
    let _ = writeln!(
        o,
        "\n#### process types and VM mix ({} s)\n\n\
         | machine | workload | policy | mean per-process throughput vs default | stddev/mean across seeds | local % | actions |\n\
         |---|---|---|---:|---:|---:|---:|",
        m.open_s
    );
    for (part, c) in &e.groups {
        if *part != Part::Mix {
            continue;
        }
        let Some(base) = policy(c, "default") else { continue };
        for p in &c.policies {
            let (s, cv) = mix_figures(base, p);
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {:.2}% | {:.1} | {} |",
                c.machine,
                c.workload,
                p.policy,
                pm(s, 3),
                100.0 * cv,
                p.local_access_pct.mean,
                actions(p)
            );
        }
    }
    let _ = writeln!(
        o,
        "\nstddev/mean across seeds: baselines that place by a fixed rule (interleave, hard-bind) vary \
         little from seed to seed by construction (their spread is the simulator's per-epoch noise), while \
         numapilot follows where the seed put each process's first-touched memory; measured causes and the \
         rules tried are in `crates/cli/src/cmd/sim/evidence.rs` (Limits). With one seed it is N/A."
    );
    let _ = writeln!(
        o,
        "\n#### targets\n\n| target | machine, workload | numapilot | compared with | verdict |\n|---|---|---|---|---|"
    );
    for v in &e.verdicts {
        let verdict = match &v.note {
            Some(n) => format!("{} ({n})", v.verdict),
            None => v.verdict.to_string(),
        };
        let _ = writeln!(o, "| {} | {} | {} | {} | {verdict} |", v.target, v.scope, v.numapilot, v.reference);
    }
    let _ = writeln!(o, "\n{}", summary_line(&e.verdicts));
    o
}

/// The summary line: passes (equal-only passes counted apart) of the judged targets.
pub fn summary_line(verdicts: &[Verdict]) -> String {
    let pass = verdicts.iter().filter(|v| v.verdict == "PASS").count();
    let equal = verdicts.iter().filter(|v| v.verdict == "PASS (=)").count();
    let judged = verdicts.iter().filter(|v| v.verdict != "N/A").count();
    if equal > 0 {
        format!("**{} of {judged} targets pass** ({pass} strictly, {equal} on equal page counts).", pass + equal)
    } else {
        format!("**{pass} of {judged} targets pass.**")
    }
}

fn actions(p: &PolicyResult) -> String {
    let xs: Vec<f64> = p.runs.iter().filter_map(|r| r.engine.as_ref().map(|e| e.actions as f64)).collect();
    if xs.is_empty() {
        "-".into()
    } else {
        format!("{:.0}", Stat::of(&xs).mean)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_matrix_covers_every_machine_test_and_policy() {
        let m = Matrix::new(false, None);
        assert_eq!(m.seeds, [1, 2, 3]);
        let g = groups(&m).unwrap();
        // 4 machines x 4 tests, 2 pair workloads, 3 process mixes, 1 VM mix.
        assert_eq!(g.len(), 16 + 2 + 3 + 1);
        let cpus: BTreeSet<usize> = g.iter().map(|g| g.machine.topo.cpus.len()).collect();
        assert!(cpus.contains(&288), "{cpus:?}");
        let nodes: BTreeSet<usize> = g.iter().map(|g| g.machine.topo.nodes.len()).collect();
        assert!(nodes.is_superset(&[2, 4, 8].into()), "{nodes:?}");
        assert!(g.iter().filter(|g| g.part == Part::Bench).all(|g| g.policies == BENCH_POLICIES));
        assert!(g.iter().filter(|g| g.part != Part::Bench).all(|g| g.spec.duration_s == Some(20.0)));
        let q = Matrix::new(true, Some(2));
        assert_eq!((q.seeds.len(), q.bench_machines.len(), q.vm_machine.as_ref()), (2, 1, None));
    }

    use numapilot_sim::result::ProcessSeries;

    /// A hand-made run: runtime, convergence, pages, and per process (throughput, end nodes).
    fn run(seed: u64, runtime: f64, conv: Option<f64>, pages: u64, procs: &[(Option<f64>, &[u32])]) -> RunResult {
        let processes: Vec<ProcessSeries> = procs
            .iter()
            .enumerate()
            .map(|(i, (tp, nodes))| ProcessSeries {
                pid: 1000 + i as u32,
                name: format!("p{i}"),
                finish_s: None,
                throughput: *tp,
                unit: None,
                converge_s: conv,
                series: Vec::new(),
                cpu_nodes: nodes.to_vec(),
            })
            .collect();
        let tps: Vec<f64> = procs.iter().filter_map(|p| p.0).collect();
        RunResult {
            seed,
            nodes: vec![0, 1],
            runtime_s: runtime,
            throughput: (!tps.is_empty()).then(|| tps.iter().sum()),
            throughput_unit: None,
            local_access_pct: 90.0,
            pages_migrated: pages,
            converge_s: conv,
            processes,
            alloc_failures: 0,
            engine: None,
        }
    }

    fn cmp(workload: &str, seeds: &[u64], policies: Vec<PolicyResult>) -> Comparison {
        Comparison {
            machine: "m".into(),
            workload: workload.into(),
            seeds: seeds.to_vec(),
            throughput_unit: None,
            policies,
        }
    }

    /// A bench policy on one seed: runtime, convergence, pages.
    fn bench(name: &str, runtime: f64, conv: Option<f64>, pages: u64) -> PolicyResult {
        run::summarise(name, vec![run(1, runtime, conv, pages, &[(None, &[0])])])
    }

    fn find<'a>(vs: &'a [Verdict], target: &str) -> &'a Verdict {
        vs.iter().find(|v| v.target == target).unwrap_or_else(|| panic!("no row for {target}: {vs:?}"))
    }

    #[test]
    fn bench_verdicts_pass_fail_and_equal() {
        // hard-bind 10 s; numapilot 10.5 s = 1.050 x: PASS; 12 s autonuma: PASS; numad 10.5 s equal:
        // FAIL (strictly less); converged 3 s against autonuma's 5 s: PASS; pages equal: PASS (=).
        let c = cmp(
            "numa01",
            &[1],
            vec![
                bench("hard-bind", 10.0, Some(0.0), 0),
                bench("autonuma", 12.0, Some(5.0), 1000),
                bench("numad", 10.5, None, 0),
                bench("numapilot", 10.5, Some(3.0), 1000),
            ],
        );
        let vs = verdicts(&[(Part::Bench, c)], &[1.0]);
        let got: Vec<&str> = TARGETS[..5].iter().map(|t| find(&vs, t).verdict).collect();
        assert_eq!(got, ["PASS", "PASS", "FAIL", "PASS", "PASS (=)"]);
        assert_eq!(summary_line(&vs), "**4 of 5 targets pass** (3 strictly, 1 on equal page counts).");

        // 10.51 s = 1.051 x: FAIL; runtime equal to autonuma's: FAIL; never converged: FAIL; more
        // pages: FAIL.
        let c = cmp(
            "numa01",
            &[1],
            vec![
                bench("hard-bind", 10.0, Some(0.0), 0),
                bench("autonuma", 10.51, Some(5.0), 1000),
                bench("numad", 11.0, None, 0),
                bench("numapilot", 10.51, None, 1001),
            ],
        );
        let vs = verdicts(&[(Part::Bench, c)], &[1.0]);
        let got: Vec<&str> = TARGETS[..5].iter().map(|t| find(&vs, t).verdict).collect();
        assert_eq!(got, ["FAIL", "FAIL", "PASS", "FAIL", "FAIL"]);
    }

    /// A bench run of one process whose local share is `pct[i]` at second i + 1.
    fn bench_series(name: &str, pct: &[f64]) -> PolicyResult {
        let mut r = run(1, pct.len() as f64, None, 0, &[(None, &[0])]);
        r.processes[0].series = pct
            .iter()
            .enumerate()
            .map(|(i, &p)| numapilot_sim::result::SeriesPoint { t_s: i as f64 + 1.0, mem_mib: vec![], local_pct: p })
            .collect();
        run::summarise(name, vec![r])
    }

    #[test]
    fn convergence_is_judged_against_the_locality_bound() {
        // numa01 on 4 nodes: no placement gives more than 50% local. numapilot holds 46% from 2 s,
        // autonuma from 4 s: neither reaches 90%, both reach 90% of the bound (45%).
        let np = bench_series("numapilot", &[20.0, 46.0, 47.0, 48.0, 48.0]);
        let an = bench_series("autonuma", &[10.0, 20.0, 30.0, 46.0, 47.0]);
        let c = cmp("numa01", &[1], vec![an.clone(), np.clone()]);
        let v = find(&verdicts(&[(Part::Bench, c.clone())], &[0.5]), TARGETS[3]).clone();
        assert_eq!((v.verdict, v.note.as_deref()), ("PASS", Some("bound 50%")), "{v:?}");
        assert_eq!(v.numapilot, "2.0 s");
        assert_eq!(v.reference, "autonuma 4.0 s");
        // Read literally (bound 100%) neither converges: FAIL, and no note.
        let v = find(&verdicts(&[(Part::Bench, c)], &[1.0]), TARGETS[3]).clone();
        assert_eq!((v.verdict, v.note.as_deref()), ("FAIL", None), "{v:?}");
        // Dropping back below the mark restarts the clock: numapilot's 2 s becomes 5 s, after autonuma's 4 s.
        let np = bench_series("numapilot", &[20.0, 46.0, 44.0, 40.0, 48.0, 48.0]);
        let c = cmp("numa01", &[1], vec![an, np]);
        assert_eq!(find(&verdicts(&[(Part::Bench, c)], &[0.5]), TARGETS[3]).verdict, "FAIL");
    }

    #[test]
    fn convergence_counts_never_as_the_runtime_per_seed() {
        // numapilot converged only at 50.4 s; autonuma never converged but finished in 31.6 s: its
        // time to 90% local is its runtime, 31.6 s, so numapilot is not sooner: FAIL.
        let c = cmp("numa01", &[1], vec![bench("autonuma", 31.6, None, 10), bench("numapilot", 50.44, Some(50.4), 10)]);
        let v = find(&verdicts(&[(Part::Bench, c)], &[1.0]), TARGETS[3]).clone();
        assert_eq!(v.verdict, "FAIL", "{v:?}");
        assert!(v.reference.contains("never in 1 seed"), "{v:?}");
        // Converged at 3 s against an autonuma that never did in a 20 s run: PASS.
        let c = cmp("numa01", &[1], vec![bench("autonuma", 20.0, None, 10), bench("numapilot", 10.0, Some(3.0), 10)]);
        assert_eq!(find(&verdicts(&[(Part::Bench, c)], &[1.0]), TARGETS[3]).verdict, "PASS");
    }

    #[test]
    fn a_missing_policy_is_a_failing_row_not_no_row() {
        let c = cmp("numa01", &[1], vec![bench("hard-bind", 10.0, None, 0), bench("numapilot", 10.0, Some(1.0), 0)]);
        let vs = verdicts(&[(Part::Bench, c)], &[1.0]);
        assert_eq!(vs.len(), 5, "{vs:?}");
        for t in &TARGETS[1..5] {
            let v = find(&vs, t);
            assert_eq!(v.verdict, "FAIL", "{v:?}");
            assert!(v.reference.starts_with("no "), "{v:?}");
        }
        // The pair without a default throughput: a FAIL row saying so.
        let pair = |name: &str, tp: Option<f64>| run::summarise(name, vec![run(1, 20.0, None, 0, &[(tp, &[0])])]);
        let c = cmp("redis-set", &[1], vec![pair("default", None), pair("numapilot", Some(100.0))]);
        let v = find(&verdicts(&[(Part::Pair, c)], &[1.0]), TARGETS[5]).clone();
        assert_eq!((v.verdict, v.reference.as_str()), ("FAIL", "no default throughput"));
    }

    #[test]
    fn pair_on_two_nodes_fails() {
        let two = |name: &str, tp: f64, nodes: &'static [u32]| {
            run::summarise(name, vec![run(1, 20.0, None, 0, &[(Some(tp), &[0]), (Some(tp), nodes)])])
        };
        let c = cmp("redis-set", &[1], vec![two("default", 100.0, &[1]), two("numapilot", 130.0, &[1])]);
        let vs = verdicts(&[(Part::Pair, c)], &[1.0]);
        assert_eq!(find(&vs, TARGETS[5]).verdict, "PASS");
        assert_eq!(find(&vs, TARGETS[6]).verdict, "FAIL");
        let c = cmp("redis-set", &[1], vec![two("default", 100.0, &[0]), two("numapilot", 119.0, &[0])]);
        let vs = verdicts(&[(Part::Pair, c)], &[1.0]);
        assert_eq!((find(&vs, TARGETS[5]).verdict, find(&vs, TARGETS[6]).verdict), ("FAIL", "PASS"));
    }

    #[test]
    fn mix_one_seed_is_na_and_a_starved_process_fails() {
        // Two processes; per run throughputs.
        let mix = |name: &str, runs: &[[f64; 2]]| {
            let rs = runs
                .iter()
                .enumerate()
                .map(|(s, tp)| run(s as u64 + 1, 20.0, None, 0, &[(Some(tp[0]), &[0]), (Some(tp[1]), &[1])]))
                .collect();
            run::summarise(name, rs)
        };
        let c = cmp("process-mix", &[1], vec![mix("default", &[[100.0, 100.0]]), mix("numapilot", &[[120.0, 110.0]])]);
        let vs = verdicts(&[(Part::Mix, c)], &[1.0]);
        assert_eq!(find(&vs, TARGETS[7]).verdict, "PASS");
        assert_eq!(find(&vs, TARGETS[8]).verdict, "N/A");
        assert_eq!(summary_line(&vs), "**1 of 1 targets pass.**", "N/A is not judged");
        // Two seeds. numapilot starves process 1 (0 in both seeds): its stddev/mean is 0/0, which
        // must fail rather than look perfectly steady.
        let c = cmp(
            "process-mix",
            &[1, 2],
            vec![
                mix("default", &[[100.0, 100.0], [90.0, 110.0]]),
                mix("interleave", &[[100.0, 100.0], [99.0, 101.0]]),
                mix("numapilot", &[[300.0, 0.0], [300.0, 0.0]]),
            ],
        );
        let vs = verdicts(&[(Part::Mix, c)], &[1.0]);
        assert_eq!(find(&vs, TARGETS[8]).verdict, "FAIL", "{vs:?}");
        // Another policy starving a process does not make numapilot fail its steadiness.
        let c = cmp(
            "process-mix",
            &[1, 2],
            vec![
                mix("default", &[[100.0, 100.0], [90.0, 110.0]]),
                mix("interleave", &[[300.0, 0.0], [300.0, 0.0]]),
                mix("numapilot", &[[120.0, 110.0], [121.0, 111.0]]),
            ],
        );
        let vs = verdicts(&[(Part::Mix, c)], &[1.0]);
        assert_eq!(find(&vs, TARGETS[8]).verdict, "PASS", "{vs:?}");
    }
}
