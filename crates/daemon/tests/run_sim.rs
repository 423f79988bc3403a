//! The daemon loop against the simulated 2-node machine running autonuma-benchmark's numa01
//! (`numapilot_sim::SimHost`, one simulated second per step): the engine plans real actions, so the
//! journal, the dry-run log, the status counters and the metrics see them.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use numapilot_daemon::control::{self, Request};
use numapilot_daemon::live::RestoreReport;
use numapilot_daemon::run::{self, Command, Restore};
use numapilot_observe::Sample;
use numapilot_policy::{Action, ActionKind, FinishedMove, Host, HostError, Outcome};
use numapilot_sim::engine::{Baseline, Machine, Sim, SimOptions};
use numapilot_sim::workload::autonuma_bench;
use numapilot_sim::SimHost;
use numapilot_topology::Topology;

mod common;

/// The simulated host, one second a step. `deferred`: page actions are reported as a page mover
/// reports them: `Started` from `apply`, their outcome at the next step (`finished_moves`).
struct Stepped {
    host: SimHost,
    deferred: bool,
    /// With `deferred`: page moves are taken and end having moved nothing, the memory left where
    /// it is, as the kernel ends a move of pages another process maps too (a child forked without
    /// exec that never wrote its inherited heap: `MPOL_MF_MOVE` skips them, and says nothing). The
    /// simulator has no such pages and this host has one node, so this stands in for that kernel.
    move_nothing: bool,
    pending: Vec<FinishedMove>,
    /// Samples taken while an ended move had not been taken yet (the engine must take ended moves
    /// before it observes, so the observation re-reads the moved memory).
    early: Arc<AtomicU64>,
}

impl Host for Stepped {
    fn topology(&self) -> &Topology {
        self.host.topology()
    }
    fn now_ns(&self) -> u64 {
        self.host.now_ns()
    }
    fn sample(&mut self) -> Result<Sample, HostError> {
        if !self.pending.is_empty() {
            self.early.fetch_add(1, Ordering::Relaxed);
        }
        self.host.advance(1_000_000_000);
        self.host.sample()
    }
    fn apply(&mut self, a: &Action) -> Outcome {
        let page = !matches!(a.kind, ActionKind::SetAffinity { .. });
        if self.deferred && self.move_nothing && page {
            let now = self.host.now_ns();
            let pages = match &a.kind {
                ActionKind::MigratePages { max_pages, .. } | ActionKind::Interleave { max_pages, .. } => {
                    max_pages.unwrap_or(u64::MAX)
                }
                ActionKind::MoveRanges { ranges, .. } => ranges.iter().map(|r| r.1 / 4096).sum(),
                ActionKind::SetAffinity { .. } => 0,
            };
            let outcome = Outcome::Applied { pages_moved: 0 };
            let done =
                FinishedMove { action: a.clone(), outcome, started_ns: now, ended_ns: now, ran_on: None, threads: 1 };
            self.pending.push(done);
            return Outcome::Started { pages };
        }
        let o = self.host.apply(a);
        match o {
            Outcome::Applied { pages_moved } | Outcome::Partial { pages_moved, .. } if self.deferred && page => {
                let now = self.host.now_ns();
                self.pending.push(FinishedMove {
                    action: a.clone(),
                    outcome: o,
                    started_ns: now,
                    ended_ns: now,
                    ran_on: None,
                    // As a split copy reports it (split-copy: the journal names the threads).
                    threads: 2,
                });
                Outcome::Started { pages: pages_moved }
            }
            o => o,
        }
    }
    fn finished_moves(&mut self) -> Vec<FinishedMove> {
        std::mem::take(&mut self.pending)
    }
}

impl Restore for Stepped {
    fn restore_all(&mut self) -> RestoreReport {
        RestoreReport::default()
    }
    fn wait_moves(&mut self) -> Vec<FinishedMove> {
        std::mem::take(&mut self.pending)
    }
}

fn run(dry_run: bool) -> (control::Status, Vec<serde_json::Value>, String) {
    run_with(dry_run, false, Arc::default())
}

fn run_with(dry_run: bool, deferred: bool, early: Arc<AtomicU64>) -> (control::Status, Vec<serde_json::Value>, String) {
    let dir = tempfile::tempdir().unwrap();
    let (setup, socket, journal) =
        common::setup(dir.path(), &format!("dry_run = {dry_run}\nmetrics = \"127.0.0.1:0\"\n"));
    let m = Machine::preset("autonuma-2s12c-24g").unwrap();
    let spec = autonuma_bench::spec("numa01", &m.topo, 0.05).unwrap();
    let host = SimHost::new(Sim::new(&m, &spec, Baseline::Default, 1, &SimOptions::default()).unwrap());
    let topo = host.topology().clone();
    let (handle, rx) = run::command_pipe().unwrap();
    let (ltx, lrx) = std::sync::mpsc::channel::<String>();
    let t = std::thread::spawn(move || {
        let stepped = Stepped { host, deferred, move_nothing: false, pending: Vec::new(), early };
        run::serve(setup, topo, stepped, None, Some(rx), &mut |l| {
            let _ = ltx.send(l.to_string());
        })
    });
    // Wait until the engine has acted (numa01's two processes get placed within a few steps).
    let t0 = Instant::now();
    let status = loop {
        if let Ok(r) = control::request(&socket, &Request::Status) {
            let s = r.status.unwrap();
            if s.actions > 0 && s.steps >= 5 && (!deferred || s.pages_moved > 0) {
                break s;
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "the engine never acted");
        std::thread::sleep(Duration::from_millis(100));
    };
    let metrics_line = lrx.try_iter().find(|l| l.contains("metrics on http://")).unwrap();
    let addr = metrics_line.split("http://").nth(1).unwrap().trim_end_matches("/metrics").to_string();
    let scraped = {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        write!(s, "GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    };
    handle.send(Command::Stop).unwrap();
    t.join().unwrap().unwrap();
    let lines = std::fs::read_to_string(Path::new(&journal))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (status, lines, scraped)
}

#[test]
fn acting_daemon_journals_applied_actions() {
    let (status, lines, metrics) = run(false);
    assert!(!status.dry_run);
    let actions: Vec<&serde_json::Value> = lines.iter().filter(|l| l["event"] == "action").collect();
    assert!(!actions.is_empty());
    // The journal has a line for every action the status had counted (and those of later steps).
    assert!(actions.len() as u64 >= status.actions, "{} < {}", actions.len(), status.actions);
    for a in &actions {
        assert_eq!(a["dry_run"], false);
        assert_ne!(a["outcome"], "planned", "{a}");
        assert!(a["pid"].as_u64().unwrap() > 0);
        assert!(!a["rule"].as_str().unwrap().is_empty());
        assert!(!a["comm"].as_str().unwrap().is_empty(), "{a}");
    }
    assert!(actions.iter().any(|a| a["outcome"] == "applied"));
    let by_kind: u64 = status.actions_by_kind.values().sum();
    assert_eq!(by_kind, status.actions);
    assert_eq!(status.nodes.len(), 2);
    assert!(status.local_access.is_some());
    // The same figures reach the metrics.
    let by_kind: Vec<f64> = metrics
        .lines()
        .filter(|l| l.starts_with("numapilot_actions_total{kind=\""))
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    // (the scrape came after the status: the engine may have stepped and acted in between)
    assert!(by_kind.len() >= 4 && by_kind.iter().sum::<f64>() >= status.actions as f64, "{metrics}");
    assert!(metrics.contains("numapilot_node_load_ratio{node=\"1\",resource=\"cpu\"}"), "{metrics}");
    assert!(metrics.contains("numapilot_local_access_ratio "), "{metrics}");
    // One snapshot: the step histogram counts every step, failed ones too.
    let figure =
        |name: &str| metrics.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<u64>().ok());
    let counted = figure("numapilot_step_duration_seconds_count").expect("no step histogram");
    assert_eq!(
        Some(counted),
        figure("numapilot_steps_total").zip(figure("numapilot_step_errors_total")).map(|(a, b)| a + b)
    );
    assert!(counted >= status.steps, "{metrics}");
}

#[test]
fn dry_run_plans_journals_and_applies_nothing() {
    let (status, lines, _) = run(true);
    assert!(status.dry_run);
    assert_eq!(status.pages_moved, 0);
    assert_eq!(status.refused + status.vanished, 0);
    let actions: Vec<&serde_json::Value> = lines.iter().filter(|l| l["event"] == "action").collect();
    assert!(actions.len() as u64 >= status.actions && status.actions > 0);
    for a in &actions {
        assert_eq!(a["dry_run"], true);
        assert_eq!(a["outcome"], "planned", "{a}");
    }
    assert_eq!(lines.last().unwrap()["event"], "restore");
}

/// Page moves that ran in the background (a host with a page mover): the action's line says
/// `started`, a `move-done` line carries what the move did when it ended, and the status counts
/// its pages then (not when it started).
#[test]
fn background_page_moves_are_journaled_when_they_end() {
    let early = Arc::new(AtomicU64::new(0));
    let (status, lines, metrics) = run_with(false, true, early.clone());
    assert_eq!(early.load(Ordering::Relaxed), 0, "the engine observed before taking the ended moves");
    let started: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l["event"] == "action" && l["outcome"] == "started").collect();
    let done: Vec<&serde_json::Value> = lines.iter().filter(|l| l["event"] == "move-done").collect();
    assert!(!started.is_empty(), "no page move started");
    assert_eq!(done.len(), started.len(), "every started move ends in the journal (the last at shutdown)");
    for (s, d) in started.iter().zip(&done) {
        assert_eq!((&s["pid"], &s["kind"], &s["rule"]), (&d["pid"], &d["kind"], &d["rule"]), "{s} / {d}");
        assert_eq!(s["pages_moved"], 0, "a started move has moved nothing yet: {s}");
        assert!(d["outcome"] == "applied" || d["outcome"] == "partial", "{d}");
        assert!(d["detail"].as_str().unwrap().contains("in the background by 2 threads"), "{d}");
    }
    assert!(status.moves_started > 0 && status.moves_started <= started.len() as u64, "{}", status.moves_started);
    assert!(status.render().contains("page moves in the background"), "{}", status.render());
    assert!(metrics.contains("numapilot_page_moves_started_total "), "{metrics}");
    assert!(metrics.contains("numapilot_page_move_running "), "{metrics}");
    let moved: u64 = done.iter().map(|d| d["pages_moved"].as_u64().unwrap()).sum();
    assert!(moved > 0 && status.pages_moved > 0 && status.pages_moved <= moved, "{} / {moved}", status.pages_moved);
}

/// Rule futile-move-backs-off through the daemon's loop: a page move run in the background that
/// ends having moved nothing (`move-done`, 0 pages) reaches the policy (`Engine::step` hands the
/// ended moves to `Policy::observe_finished` before it decides), which asks for the same move
/// again only after 1, then 3, then 7 ... steps, not at every step; the journal line of a move
/// asked again says why, with the pages asked and moved.
#[test]
fn a_background_move_that_moved_nothing_is_not_asked_for_at_every_step() {
    let m = Machine::preset("autonuma-2s12c-24g").unwrap();
    let spec = autonuma_bench::spec("numa01", &m.topo, 0.05).unwrap();
    let host = SimHost::new(Sim::new(&m, &spec, Baseline::Default, 1, &SimOptions::default()).unwrap());
    let topo = host.topology().clone();
    let stepped = Stepped { host, deferred: true, move_nothing: true, pending: Vec::new(), early: Arc::default() };
    let steps = 24;
    let extra = "metrics = \"off\"\ninterval_ms = 100\nidle_max_interval_ms = 0\n";
    let (status, lines) = common::serve_steps(stepped, topo, extra, steps);
    let started: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l["event"] == "action" && l["outcome"] == "started").collect();
    let done: Vec<&serde_json::Value> = lines.iter().filter(|l| l["event"] == "move-done").collect();
    assert!(!started.is_empty(), "no page move asked for");
    assert!(done.iter().all(|d| d["pages_moved"] == 0), "{done:?}");
    // Per process and kind: the steps that asked.
    let mut asked: std::collections::BTreeMap<(u64, String), Vec<u64>> = Default::default();
    for l in &started {
        let key = (l["pid"].as_u64().unwrap(), l["kind"].as_str().unwrap().to_string());
        asked.entry(key).or_default().push(l["step"].as_u64().unwrap());
    }
    for ((pid, kind), at) in &asked {
        // Over 24 steps: asked at most at steps s, s + 2, s + 6, s + 14 (and the move that ends
        // the run), where without the rule it was asked at every step after the first.
        assert!(at.len() <= 5, "pid {pid} {kind} asked at steps {at:?} of {}", status.steps);
        for w in at.windows(3) {
            assert!(w[2] - w[1] > w[1] - w[0], "pid {pid} {kind}: the waits do not grow: {at:?}");
        }
    }
    let again: Vec<&&serde_json::Value> = started
        .iter()
        .filter(|l| l["detail"].as_str().unwrap().contains("[futile-move-backs-off] asked again: the back-off is over"))
        .collect();
    assert!(!again.is_empty(), "no move asked again after its back-off: {started:?}");
    assert!(again.iter().all(|l| l["detail"].as_str().unwrap().contains("and moved 0, ")), "{again:?}");
}
