//! The daemon loop's sampling density: a host whose sampler reports its buffers 90% full after
//! every window (`Sample::access_fill`) must be asked for a longer period after each step (the
//! policy crate's `cadence`: doubled above FILL_HIGH, up to MAX_SAMPLING_STRETCH), and one
//! reporting them nearly empty for the base period. The simulated 2-node machine runs numa01.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use numapilot_daemon::config::{self, Overrides, Source};
use numapilot_daemon::control::{self, Request};
use numapilot_daemon::live::RestoreReport;
use numapilot_daemon::run::{self, Command, Restore, Setup};
use numapilot_observe::Sample;
use numapilot_policy::cadence::MAX_SAMPLING_STRETCH;
use numapilot_policy::{Action, FinishedMove, Host, HostError, Outcome};
use numapilot_sim::engine::{Baseline, Machine, Sim, SimOptions};
use numapilot_sim::workload::autonuma_bench;
use numapilot_sim::SimHost;
use numapilot_topology::Topology;

struct Filled {
    host: SimHost,
    fill: f64,
    asked: Arc<Mutex<Vec<u32>>>,
}

impl Host for Filled {
    fn topology(&self) -> &Topology {
        self.host.topology()
    }
    fn now_ns(&self) -> u64 {
        self.host.now_ns()
    }
    fn sample(&mut self) -> Result<Sample, HostError> {
        self.host.advance(1_000_000_000);
        let mut s = self.host.sample()?;
        s.access_fill = self.fill;
        Ok(s)
    }
    fn apply(&mut self, a: &Action) -> Outcome {
        self.host.apply(a)
    }
    fn set_sampling_stretch(&mut self, stretch: u32) {
        self.asked.lock().unwrap().push(stretch);
        self.host.set_sampling_stretch(stretch);
    }
}

impl Restore for Filled {
    fn restore_all(&mut self) -> RestoreReport {
        RestoreReport::default()
    }
    fn wait_moves(&mut self) -> Vec<FinishedMove> {
        Vec::new()
    }
}

/// The stretches the loop asked for over 10 steps, with the sampler reporting `fill` each time.
fn stretches(fill: f64) -> Vec<u32> {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s.sock");
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        format!(
            "[daemon]\nsocket = \"{}\"\njournal = \"{}\"\nstate = \"{}\"\nmetrics = \"off\"\ninterval_ms = 100\n\
             idle_max_interval_ms = 0\n",
            socket.display(),
            dir.path().join("journal.jsonl").display(),
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
    let asked: Arc<Mutex<Vec<u32>>> = Arc::default();
    let h = Filled { host, fill, asked: asked.clone() };
    let (handle, rx) = run::command_pipe().unwrap();
    let setup = Setup { source, overrides: Overrides::default(), loaded, forced_observe: None };
    let t = std::thread::spawn(move || run::serve(setup, topo, h, None, Some(rx), &mut |_| {}));
    let t0 = Instant::now();
    loop {
        if let Ok(r) = control::request(&socket, &Request::Status) {
            if r.status.unwrap().steps >= 10 {
                break;
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "the loop never reached 10 steps");
        std::thread::sleep(Duration::from_millis(20));
    }
    handle.send(Command::Stop).unwrap();
    t.join().unwrap().unwrap();
    let v = asked.lock().unwrap().clone();
    v
}

#[test]
fn full_buffers_lengthen_the_period_and_empty_ones_keep_the_base() {
    let full = stretches(0.9);
    assert!(full.len() >= 7, "{full:?}");
    assert_eq!(&full[..7], [2, 4, 8, 16, 32, 64, 64], "doubled after every full window, bounded");
    assert!(full.iter().all(|&s| s <= MAX_SAMPLING_STRETCH));
    let empty = stretches(0.01);
    assert!(empty.iter().all(|&s| s == 1), "{empty:?}");
}
