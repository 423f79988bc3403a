//! The daemon loop's sampling density: a host whose sampler's buffers fill many times over
//! between steps (`Sample::access_fill`) must be asked for a longer period (the policy crate's
//! `cadence`: the smallest density that keeps a window under FILL_HIGH, up to
//! MAX_SAMPLING_STRETCH), and one whose buffers stay nearly empty for the base period. The simulated 2-node machine runs numa01.

mod common;

use std::sync::{Arc, Mutex};

use numapilot_daemon::live::RestoreReport;
use numapilot_daemon::run::Restore;
use numapilot_observe::Sample;
use numapilot_policy::cadence::MAX_SAMPLING_STRETCH;
use numapilot_policy::{Action, FinishedMove, Host, HostError, Outcome};
use numapilot_sim::engine::{Baseline, Machine, Sim, SimOptions};
use numapilot_sim::workload::autonuma_bench;
use numapilot_sim::SimHost;
use numapilot_topology::Topology;

/// A sampler whose buffers fill at `rate` times per policy interval (100 ms here) at the base
/// period: a window of w intervals at stretch s ends `rate x w / s` full, w measured on the
/// clock the daemon's loop measures its windows by, from one step's start to the next
/// (`Backoff::stepped`). So the window is timed as `sample` is entered, before the simulator
/// advances: only the engine's clock read and finished-move poll lie between the loop's step
/// start and it. Timed after the advance (CPU-heavy, and on a loaded host throttled or
/// preempted for whole scheduler periods in one step and not the next), a window could read
/// under half the loop's: the density fell to 32 (`[1, 64, .., 64, 32]`, 4 of 10 runs of the
/// test alone under a 5% CPU quota).
struct Filled {
    host: SimHost,
    rate: f64,
    last: Option<std::time::Instant>,
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
        let now = std::time::Instant::now();
        self.host.advance(1_000_000_000);
        let mut s = self.host.sample()?;
        let intervals = self.last.replace(now).map_or(1.0, |t| now.duration_since(t).as_secs_f64() / 0.1);
        s.access_fill = self.rate * intervals / f64::from(self.host.sampling_stretch().unwrap_or(1));
        Ok(s)
    }
    fn apply(&mut self, a: &Action) -> Outcome {
        self.host.apply(a)
    }
    fn set_sampling_stretch(&mut self, stretch: u32) {
        self.asked.lock().unwrap().push(stretch);
        self.host.set_sampling_stretch(stretch);
    }
    fn sampling_stretch(&self) -> Option<u32> {
        self.host.sampling_stretch()
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

/// The stretches the loop asked for over 10 steps with buffers filling at `rate`, and the one
/// its status showed then.
fn stretches(rate: f64) -> (Vec<u32>, u32) {
    let m = Machine::preset("autonuma-2s12c-24g").unwrap();
    let spec = autonuma_bench::spec("numa01", &m.topo, 0.05).unwrap();
    let host = SimHost::new(Sim::new(&m, &spec, Baseline::Default, 1, &SimOptions::default()).unwrap());
    let topo = host.topology().clone();
    let asked: Arc<Mutex<Vec<u32>>> = Arc::default();
    let h = Filled { host, rate, last: None, asked: asked.clone() };
    let extra = "metrics = \"off\"\ninterval_ms = 100\nidle_max_interval_ms = 0\n";
    let (status, _) = common::serve_steps(h, topo, extra, 10);
    let v = asked.lock().unwrap().clone();
    (v, status.sampling_stretch)
}

#[test]
fn full_buffers_lengthen_the_period_and_empty_ones_keep_the_base() {
    // 20 buffer-fills per interval at the base period: the smallest density that keeps a window
    // under half full is 64 (20 / 64 = 0.31; 20 / 32 = 0.63), asked for from the first full
    // window on and shown by status.
    let (full, shown) = stretches(20.0);
    assert!(full.len() >= 5, "{full:?}");
    assert!(full.iter().all(|&s| s <= MAX_SAMPLING_STRETCH));
    assert!(full[1..].iter().all(|&s| s == MAX_SAMPLING_STRETCH), "{full:?}");
    assert_eq!(shown, MAX_SAMPLING_STRETCH, "status shows the stretch in force");
    let (empty, shown) = stretches(0.01);
    assert!(empty.iter().all(|&s| s == 1), "{empty:?}");
    assert_eq!(shown, 1);
}
