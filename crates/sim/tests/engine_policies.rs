//! Engine policies (numad, numapilot) driven by the runner over `SimHost`: they complete, they are
//! deterministic per seed, and nothing is lost or double counted along the way.
//!
//! Small and fast on purpose (debug builds): the 2-node autonuma-benchmark box with numa01 at 5%
//! of its passes (about 12 simulated seconds: numad's first binds come at 2 s and 7 s), and the
//! redis pair for a few seconds.

use numapilot_policy::{ActionKind, Outcome, StepReport};
use numapilot_sim::engine::{Machine, Sim, SimOptions};
use numapilot_sim::result::RunResult;
use numapilot_sim::run::{self, Tunables};
use numapilot_sim::workload::{autonuma_bench, client_server, Spec};
use numapilot_sim::SimError;
use std::path::Path;

fn machine() -> Machine {
    Machine::preset("autonuma-2s12c-24g").unwrap()
}

fn numa01(m: &Machine) -> Spec {
    autonuma_bench::spec("numa01", &m.topo, 0.05).unwrap()
}

fn redis(m: &Machine, seconds: f64) -> Spec {
    let mut spec = client_server::redis_set(&m.topo);
    spec.duration_s = Some(seconds);
    spec
}

/// What the step checks saw.
#[derive(Debug, Default)]
struct Seen {
    steps: u64,
    moved: u64,
    by_kind: std::collections::BTreeMap<&'static str, u64>,
}

/// Runs `policy` with every engine step checked: the simulator's bookkeeping invariants, every
/// task still there, every resident region still there (these workloads never free memory), and
/// the kernel's migrated-page count equal to the pages the engine reported moving (under
/// `Baseline::Default` nothing else migrates).
fn checked_run(m: &Machine, spec: &Spec, policy: &str, seed: u64) -> (RunResult, Seen) {
    let mut seen = Seen::default();
    let threads = spec.thread_count();
    let mut resident_before = 0u64;
    let run = run::run_engine(
        m,
        spec,
        policy,
        seed,
        &SimOptions::default(),
        &mut |_| {},
        &mut |sim: &Sim, report: &StepReport| {
            sim.check_invariants().unwrap_or_else(|e| panic!("{policy} step {}: {e}", seen.steps));
            assert_eq!(sim.kernel.tasks.len(), threads, "{policy}: a task appeared or vanished");
            let resident: u64 = sim.kernel.node_used.iter().sum();
            assert!(
                resident >= resident_before,
                "{policy}: resident regions went from {resident_before} to {resident}"
            );
            resident_before = resident;
            seen.steps += 1;
            for (a, o) in report.plan.actions.iter().zip(&report.outcomes) {
                *seen.by_kind.entry(run::action_kind_name(&a.kind)).or_default() += 1;
                if let Outcome::Applied { pages_moved } | Outcome::Partial { pages_moved, .. } = o {
                    seen.moved += pages_moved;
                    if !matches!(a.kind, ActionKind::SetAffinity { .. }) {
                        assert_eq!(pages_moved % 512, 0, "whole 2 MiB regions");
                    }
                }
            }
            assert_eq!(sim.kernel.pages_migrated, seen.moved, "{policy}: kernel count vs engine reports");
        },
    )
    .unwrap();
    (run, seen)
}

#[test]
fn numad_binds_each_numa01_process_to_every_node_as_numad_counts_smt() {
    // Worked by hand from numad's rules (numad.c 20150602: update_nodes, pick_numa_nodes) on this
    // box: 2 nodes of 6 cores x SMT2 = 12 CPUs each. Both processes' 3 GiB start on node 0
    // (numa01's first touch); 12 threads each keep all 24 CPUs busy.
    // numad -t 20: a node counts 6 x 1 + 6 x 0.2 = 7.2 CPUs; its free CPU is 12 - 12 busy - 4.8
    // discounted = 0, plus the process's own CPU on the node holding its memory (node 0: 12, capped
    // at 7.2). Pass 1 (epoch): no CPU history. Pass 2 (2 s, numad's 5 / 2 start-up interval):
    // process 1000, 12 CPUs, 3072 MiB: request min(12 / 0.85, 12 threads) = 12 CPUs, 3614 MiB;
    // nodes needed = max(ceil(3614 / 24576), ceil((12 - 0.54 flex) / 7.2)) = max(1, 2) = 2: bound
    // to both nodes, nothing to migrate. Pass 3 (+5 s after a bind): process 1012, the same figures:
    // both nodes. Binding to every CPU displaces no thread, so the run is `default`'s exactly.
    // (Counting siblings as full CPUs, one node of 12 would do, and both would be packed on node 0.)
    let m = machine();
    let spec = numa01(&m);
    let mut binds = Vec::new();
    let run = run::run_engine(
        &m,
        &spec,
        "numad",
        1,
        &SimOptions::default(),
        &mut |_| {},
        &mut |_: &Sim, report: &StepReport| {
            for a in &report.plan.actions {
                if let ActionKind::SetAffinity { cpus } = &a.kind {
                    binds.push((a.target.pid, m.topo.nodes_of_cpus(cpus).to_string()));
                }
            }
        },
    )
    .unwrap();
    let (_, seen) = checked_run(&m, &spec, "numad", 1);
    let e = run.engine.clone().expect("engine totals for an engine policy");
    assert_eq!(e.steps, seen.steps);
    assert!(e.steps >= 3, "steps at epoch 1, 2 s, 7 s...: {e:?}");
    assert_eq!(binds, [(1000, "0-1".to_string()), (1012, "0-1".to_string())]);
    assert_eq!(e.actions_by_kind.get("migrate-pages"), None, "{e:?}");
    assert_eq!((e.pages_moved, run.pages_migrated), (0, 0));
    assert_eq!((e.pages_failed, e.vanished, e.refused), (0, 0, 0));
    let default = run::run_one(&m, &spec, "default", 1, &SimOptions::default(), &mut |_| {}).unwrap();
    assert_eq!(run.runtime_s, default.runtime_s);
    assert_eq!(run.local_access_pct, default.local_access_pct);
}

#[test]
fn numapilot_runs_complete_with_every_step_checked() {
    let m = machine();
    let spec = numa01(&m);
    let (run, seen) = checked_run(&m, &spec, "numapilot", 1);
    let e = run.engine.clone().unwrap();
    assert_eq!(e.steps, seen.steps);
    assert!(e.steps >= 5, "a step per second of a run of several seconds: {e:?}");
    assert_eq!(run.pages_migrated, e.pages_moved);
    assert!(run.processes.iter().all(|p| p.finish_s.is_some()), "all work done");
}

#[test]
fn engine_runs_are_deterministic_per_seed() {
    let m = machine();
    let spec = redis(&m, 4.0);
    for policy in ["numad", "numapilot"] {
        let run = |seed| {
            serde_json::to_string(&run::run_one(&m, &spec, policy, seed, &SimOptions::default(), &mut |_| {}).unwrap())
                .unwrap()
        };
        let a = run(3);
        assert_eq!(a, run(3), "{policy}: the same seed gives bit-identical results");
        assert_ne!(a, run(4), "{policy}: another seed differs (noise)");
    }
}

#[test]
fn kernel_baselines_report_no_engine_totals_and_names_are_checked() {
    let m = machine();
    let spec = redis(&m, 1.0);
    let run = run::run_one(&m, &spec, "default", 1, &SimOptions::default(), &mut |_| {}).unwrap();
    assert!(run.engine.is_none());
    assert!(run.processes.iter().all(|p| !p.cpu_nodes.is_empty()));
    let e = run::run_one(&m, &spec, "numactl", 1, &SimOptions::default(), &mut |_| {}).unwrap_err();
    assert_eq!(
        e,
        SimError::Unknown {
            kind: "policy",
            name: "numactl".into(),
            valid: "default, hard-bind, inverse-bind, interleave, autonuma, numapilot, numad".into()
        }
    );
    assert_eq!(run::policy_names().len(), 7);
    // A kernel baseline is not an engine policy; invalid tunables stop a run before it starts.
    let mut progress_calls = 0;
    let e =
        run::run_engine(&m, &spec, "default", 1, &SimOptions::default(), &mut |_| progress_calls += 1, &mut |_, _| {});
    assert!(e.is_err());
    let bad = Tunables { numad_target_utilization_pct: 0, ..Tunables::default() };
    let e =
        run::simulate(&m, &spec, &["numad"], &[1], &SimOptions { tunables: bad, ..SimOptions::default() }, &mut |_| {
            progress_calls += 1
        })
        .unwrap_err();
    assert!(e.to_string().contains("numad_target_utilization_pct"), "{e}");
    assert_eq!(progress_calls, 0, "nothing ran");
}

#[test]
fn tunables_files_parse_validate_and_name_the_field() {
    let t = run::tunables_from_str("numad_interval_max_s = 20\n", "t.toml").unwrap();
    assert_eq!(t.numad_interval_max_s, 20);
    assert_eq!(t.numad_min_rss_mib, Tunables::default().numad_min_rss_mib);
    let e = run::tunables_from_str("numad_min_cpu_pct = -1\n", "t.toml").unwrap_err().to_string();
    assert!(e.contains("numad_min_cpu_pct") && e.contains("t.toml"), "{e}");
    let e = run::tunables_from_str("numad_memlocality_pct = 0\n", "t.toml").unwrap_err().to_string();
    assert!(e.contains("numad_memlocality_pct") && e.contains("1..=100"), "{e}");
    // The daemon's configuration, or its [tunables] table pasted: the same fields; its other tables
    // accepted, an unknown one or key named.
    let daemon = "[daemon]\ninterval_ms = 500\n\n[tunables]\nnumad_interval_max_s = 20\n";
    let t = run::tunables_from_str(daemon, "np.toml").unwrap();
    assert_eq!((t.numad_interval_max_s, t.interval_ms), (20, 500), "[daemon] interval_ms applies as in the daemon");
    let t = run::tunables_from_str("[daemon]\ndry_run = true\n", "np.toml").unwrap();
    assert_eq!(t, Tunables::default(), "a daemon file without [tunables]: the defaults");
    let e = run::tunables_from_str("[tunables]\nnumad_intreval_max_s = 20\n", "np.toml").unwrap_err().to_string();
    assert!(e.contains("numad_intreval_max_s") && e.contains("line 2"), "{e}");
    let e = run::tunables_from_str("[tunables]\n[daemons]\n", "np.toml").unwrap_err().to_string();
    assert!(e.contains("daemons"), "{e}");
    let e = run::tunables_from_str("[tunables]\nnumad_memlocality_pct = 0\n", "np.toml").unwrap_err().to_string();
    assert!(e.contains("numad_memlocality_pct") && e.contains("1..=100"), "{e}");
    // A file that never ends is read up to 16 MiB, not until memory runs out (review helper-39).
    let e = run::tunables_from_file(Path::new("/dev/zero")).unwrap_err().to_string();
    assert!(e.contains("/dev/zero") && e.contains("larger than 16 MiB"), "{e}");
}

#[test]
fn an_engine_policy_that_never_acts_is_the_default_run_exactly() {
    // Equal terms, pinned for the runner: numad with an RSS threshold nothing meets observes every
    // step and acts never; the run must equal `default` field by field (same kernel baseline, and
    // observation changes nothing: numad reads /proc only, so no sampling cost is charged), apart
    // from the engine totals.
    let m = machine();
    let spec = numa01(&m);
    let t = Tunables { numad_min_rss_mib: u64::MAX, ..Tunables::default() };
    let mut run = run::run_engine(
        &m,
        &spec,
        "numad",
        1,
        &SimOptions { tunables: t, ..SimOptions::default() },
        &mut |_| {},
        &mut |_, _| {},
    )
    .unwrap();
    let e = run.engine.take().expect("engine totals");
    assert!(e.steps >= 2 && e.actions == 0, "{e:?}");
    let default = run::run_one(&m, &spec, "default", 1, &SimOptions::default(), &mut |_| {}).unwrap();
    assert_eq!(run, default);
}
