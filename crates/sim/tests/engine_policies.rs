//! Engine policies (numad, numapilot) driven by the runner over `SimHost`: they complete, they are
//! deterministic per seed, and nothing is lost or double counted along the way.
//!
//! Small and fast on purpose (debug builds): the 2-node autonuma-benchmark box with numa01 at 5%
//! of its passes (about 12 simulated seconds: numad's first binds come at 2.5 s and 7.5 s), and the
//! redis pair for a few seconds.

use numapilot_policy::{ActionKind, Outcome, StepReport};
use numapilot_sim::engine::{Machine, Sim, SimOptions};
use numapilot_sim::result::RunResult;
use numapilot_sim::run::{self, Tunables};
use numapilot_sim::workload::{autonuma_bench, client_server, Spec};
use numapilot_sim::SimError;

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
        &Tunables::default(),
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
fn numad_binds_each_numa01_process_to_the_node_holding_its_memory() {
    // Both processes' 3 GiB start on node 0 (numa01's first touch); 12 threads each on 24 CPUs.
    // Pass 1 (epoch 1): no CPU history yet. Pass 2 (2.5 s): process 1000 (12 CPUs, 3072 MiB;
    // request min(12 / 0.85, 12 threads) = 12 CPUs, 3614 MiB -> one node) goes to node 0, where
    // its memory is. Pass 3 (7.5 s): process 1012's CPU is credited back to the node holding its
    // memory (numad's add-back in proportion to memory), so node 0 looks as free as before and
    // node 1, busy with 1012's own threads, has no free CPU: node 0 again. Nothing migrates; both
    // end on node 0 -- numad's heuristic, faithfully, on a workload it was not built for.
    let m = machine();
    let spec = numa01(&m);
    let (run, seen) = checked_run(&m, &spec, "numad", 1);
    let e = run.engine.clone().expect("engine totals for an engine policy");
    assert_eq!(e.steps, seen.steps);
    assert!(e.steps >= 3, "steps at epoch 1, 2.5 s, 7.5 s...: {e:?}");
    assert_eq!(e.actions_by_kind.get("set-affinity"), Some(&2), "one bind per pass: {e:?}");
    assert_eq!(e.actions_by_kind.get("migrate-pages"), None, "{e:?}");
    assert_eq!(e.actions, 2);
    assert_eq!(seen.by_kind.values().sum::<u64>(), e.actions);
    assert_eq!((e.pages_moved, run.pages_migrated), (0, 0));
    assert_eq!((e.pages_failed, e.vanished, e.refused), (0, 0, 0));
    let nodes: Vec<&[u32]> = run.processes.iter().map(|p| p.cpu_nodes.as_slice()).collect();
    assert_eq!(nodes, [[0], [0]]);
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
    let e = run::run_engine(
        &m,
        &spec,
        "default",
        1,
        &SimOptions::default(),
        &Tunables::default(),
        &mut |_| progress_calls += 1,
        &mut |_, _| {},
    );
    assert!(e.is_err());
    let bad = Tunables { numad_target_utilization_pct: 0, ..Tunables::default() };
    let e = run::simulate_with(&m, &spec, &["numad"], &[1], &SimOptions::default(), &bad, &mut |_| progress_calls += 1)
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
}
