//! The engine's tables stay the size of what is alive: a daemon runs for weeks on machines where
//! processes come and go (shells, cron, builds), so every table it keeps between steps (the
//! model's tasks, histories, edges and groups; the policy's per-process records, holds, moves
//! and promises; the engine's standing orders) must let go of a process once it is gone. Here a
//! long-lived server shares a buffer with 120 short-lived clients of 1-4 threads that start a
//! quarter of a second apart on the simulated 2-node box, some with memory first touched away
//! from their threads (so the policy moves their pages and keeps holds and journals for them);
//! numad and numapilot are stepped as the daemon steps them. Each table must reach more than it
//! ends with (the churn did fill it) and end within what the server alone can account for.

use std::collections::BTreeMap;

use numapilot_policy::{Engine, Host, Policy, Tunables};
use numapilot_sim::engine::{Baseline, Machine, Sim, SimOptions};
use numapilot_sim::workload::file::{parse_spec, Format};
use numapilot_sim::workload::Spec;
use numapilot_sim::SimHost;

const CLIENTS: usize = 120;

fn churn(m: &Machine) -> Spec {
    let mut t = String::from(
        r#"name = "churn"
duration_s = 45

[[processes]]
name = "server"
[[processes.regions]]
name = "buf"
size = "256M"
touch = { by = "main" }
[[processes.threads]]
name = "main"
count = 2
work = { unit = "ops", bytes_per_unit = 512, compute_ns = 2000 }
accesses = [{ region = "buf", pattern = "random" }]
"#,
    );
    for i in 0..CLIENTS {
        let threads = 1 + i % 4;
        // Every third client first-touches its memory on node 0 from its main thread before its
        // workers run wherever the scheduler puts them: its pages are worth moving.
        let (size, touch) =
            if i % 3 == 0 { ("1G", r#"{ by = "node", node = 0 }"#) } else { ("64M", r#"{ by = "threads" }"#) };
        t.push_str(&format!(
            r#"
[[processes]]
name = "client{i}"
start_s = {start}
[[processes.regions]]
name = "own"
size = "{size}"
touch = {touch}
[[processes.threads]]
name = "worker"
count = {threads}
work = {{ unit = "ops", bytes_per_unit = 256, compute_ns = 1000, total = {total} }}
accesses = [{{ region = "own", pattern = "random", weight = 3 }}, {{ region = "server/buf", pattern = "random" }}]
"#,
            start = i as f64 * 0.25,
            total = 400_000 + 100_000 * (i % 5),
        ));
    }
    parse_spec(&t, Format::Toml, "churn.toml", &m.topo).unwrap()
}

/// Steps `policy` through `spec` as the daemon would (at the policy's interval), returning the
/// tables at the end, the largest size each reached, and how many processes the model saw.
fn run(spec: &Spec, policy: Box<dyn Policy>) -> (Tables, Tables, usize) {
    let m = Machine::preset("autonuma-2s12c-24g").unwrap();
    let mut host = SimHost::new(Sim::new(&m, spec, Baseline::Default, 1, &SimOptions::default()).unwrap());
    let mut engine = Engine::new(host.topology().clone(), Tunables::default(), policy);
    let mut peak = Tables::new();
    let mut pids_seen = std::collections::BTreeSet::new();
    loop {
        engine.step(&mut host).unwrap();
        pids_seen.extend(engine.model.procs.keys().copied());
        for (k, v) in engine.bookkeeping() {
            let e = peak.entry(k).or_default();
            *e = (*e).max(v);
        }
        let wait = engine.next_interval_ns().max(host.sim().epoch_ns());
        if !host.advance(wait) {
            break;
        }
    }
    (engine.bookkeeping().into_iter().collect(), peak, pids_seen.len())
}

type Tables = BTreeMap<&'static str, usize>;

/// The churn run against the server alone, same seed and length: every table ends within what
/// the server alone ends with (a quarter more, plus two, for the sampling's draws, which the
/// clients' samples shift), and the per-process and per-thread tables grew past that during the
/// churn (so the test saw them fill).
fn check(name: &str, policy: fn() -> Box<dyn Policy>, grown: &[&str]) {
    let m = Machine::preset("autonuma-2s12c-24g").unwrap();
    let spec = churn(&m);
    let mut alone = spec.clone();
    alone.processes.truncate(1);
    let (end, peak, seen) = run(&spec, policy());
    let (base, _, _) = run(&alone, policy());
    eprintln!("{name}: {seen} processes seen; table: end / peak / server alone");
    for (k, v) in &end {
        eprintln!("  {k:28} {v:6} / {:6} / {:6}", peak[k], base[k]);
    }
    for (k, v) in &end {
        let b = base[k];
        assert!(*v <= b + slack(b), "{name}: {k} ends at {v} after the churn, {b} with the server alone");
    }
    for k in grown {
        assert!(
            peak[k] > base[k] + slack(base[k]),
            "{name}: {k} never grew with the clients: {} vs {}",
            peak[k],
            base[k]
        );
    }
    assert!(seen >= CLIENTS * 9 / 10 || name == "numad", "{name}: saw {seen} of {} processes", CLIENTS + 1);
}

/// What the sampling's draws may shift a table by between two runs: a quarter, plus two.
fn slack(b: usize) -> usize {
    b / 4 + 2
}

#[test]
fn churn_leaves_only_the_living_in_numapilots_tables() {
    check(
        "numapilot",
        || Box::new(numapilot_policy::Adaptive::default()),
        &[
            "model.tasks",
            "model.procs",
            "model.edges",
            "model.weak_edges",
            "model.thread_history",
            "model.proc_history",
            "model.rss_points",
            "model.coaccess_buckets",
            "policy.procs",
            "policy.journal",
            "policy.range_moves",
            "policy.task_moves",
        ],
    );
}

#[test]
fn churn_leaves_only_the_living_in_numads_tables() {
    // numad looks every 5-15 s, so it sees few of the clients; what it saw must still go.
    check("numad", || Box::new(numapilot_policy::Numad::default()), &["model.tasks", "numad.cpu_history"]);
}
