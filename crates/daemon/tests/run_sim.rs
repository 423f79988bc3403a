//! The daemon loop against the simulated 2-node machine running autonuma-benchmark's numa01
//! (`numapilot_sim::SimHost`, one simulated second per step): the engine plans real actions, so the
//! journal, the dry-run log, the status counters and the metrics see them.

use std::path::Path;
use std::time::{Duration, Instant};

use numapilot_daemon::config::{self, Overrides, Source};
use numapilot_daemon::control::{self, Request};
use numapilot_daemon::live::RestoreReport;
use numapilot_daemon::run::{self, Command, Restore, Setup};
use numapilot_observe::Sample;
use numapilot_policy::{Action, Host, HostError, Outcome};
use numapilot_sim::engine::{Baseline, Machine, Sim, SimOptions};
use numapilot_sim::workload::autonuma_bench;
use numapilot_sim::SimHost;
use numapilot_topology::Topology;

struct Stepped(SimHost);

impl Host for Stepped {
    fn topology(&self) -> &Topology {
        self.0.topology()
    }
    fn now_ns(&self) -> u64 {
        self.0.now_ns()
    }
    fn sample(&mut self) -> Result<Sample, HostError> {
        self.0.advance(1_000_000_000);
        self.0.sample()
    }
    fn apply(&mut self, a: &Action) -> Outcome {
        self.0.apply(a)
    }
}

impl Restore for Stepped {
    fn restore_all(&mut self) -> RestoreReport {
        RestoreReport::default()
    }
}

fn run(dry_run: bool) -> (control::Status, Vec<serde_json::Value>, String) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s.sock");
    let journal = dir.path().join("journal.jsonl");
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        format!(
            "[daemon]\ndry_run = {dry_run}\nsocket = \"{}\"\njournal = \"{}\"\nstate = \"{}\"\nmetrics = \"127.0.0.1:0\"\n",
            socket.display(),
            journal.display(),
            dir.path().join("state.json").display()
        ),
    )
    .unwrap();
    let source = Source::Explicit(cfg);
    let loaded = config::load(&source, &Overrides::default()).unwrap();
    let m = Machine::preset("autonuma-2s12c-24g").unwrap();
    let spec = autonuma_bench::spec("numa01", &m.topo, 0.05).unwrap();
    let host = SimHost::new(Sim::new(&m, &spec, Baseline::Default, 1, &SimOptions::default()).unwrap());
    let topo = host.topology().clone();
    let (handle, rx) = run::command_pipe().unwrap();
    let setup = Setup { source, overrides: Overrides::default(), loaded, forced_observe: None };
    let (ltx, lrx) = std::sync::mpsc::channel::<String>();
    let t = std::thread::spawn(move || {
        run::serve(setup, topo, Stepped(host), None, Some(rx), &mut |l| {
            let _ = ltx.send(l.to_string());
        })
    });
    // Wait until the engine has acted (numa01's two processes get placed within a few steps).
    let t0 = Instant::now();
    let status = loop {
        if let Ok(r) = control::request(&socket, &Request::Status) {
            let s = r.status.unwrap();
            if s.actions > 0 && s.steps >= 5 {
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
    assert!(
        metrics.contains(&format!("numapilot_actions_total {}", status.actions))
            || metrics.contains("numapilot_actions_total ")
    );
    assert!(metrics.contains("numapilot_node_load{node=\"1\",resource=\"cpu\"}"), "{metrics}");
    assert!(metrics.contains("numapilot_local_access_ratio "), "{metrics}");
    assert!(metrics.contains("numapilot_actions_by_kind_total{kind=\""), "{metrics}");
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
