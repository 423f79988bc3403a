//! The daemon loop's sampling density: a host whose sampler reports its buffers 90% full after
//! every window (`Sample::access_fill`) must be asked for a longer period after each step (the
//! policy crate's `cadence`: doubled above FILL_HIGH, up to MAX_SAMPLING_STRETCH), and one
//! reporting them nearly empty for the base period. The simulated 2-node machine runs numa01.

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

/// The stretches the loop asked for over 10 steps, with the sampler reporting `fill` each time,
/// and the one its status showed then.
fn stretches(fill: f64) -> (Vec<u32>, u32) {
    let m = Machine::preset("autonuma-2s12c-24g").unwrap();
    let spec = autonuma_bench::spec("numa01", &m.topo, 0.05).unwrap();
    let host = SimHost::new(Sim::new(&m, &spec, Baseline::Default, 1, &SimOptions::default()).unwrap());
    let topo = host.topology().clone();
    let asked: Arc<Mutex<Vec<u32>>> = Arc::default();
    let h = Filled { host, fill, asked: asked.clone() };
    let extra = "metrics = \"off\"\ninterval_ms = 100\nidle_max_interval_ms = 0\n";
    let (status, _) = common::serve_steps(h, topo, extra, 10);
    let v = asked.lock().unwrap().clone();
    (v, status.sampling_stretch)
}

#[test]
fn full_buffers_lengthen_the_period_and_empty_ones_keep_the_base() {
    let (full, shown) = stretches(0.9);
    assert_eq!(shown, MAX_SAMPLING_STRETCH, "status shows the stretch in force");
    assert!(full.len() >= 7, "{full:?}");
    assert_eq!(&full[..7], [2, 4, 8, 16, 32, 64, 64], "doubled after every full window, bounded");
    assert!(full.iter().all(|&s| s <= MAX_SAMPLING_STRETCH));
    let (empty, shown) = stretches(0.01);
    assert_eq!(shown, 1);
    assert!(empty.iter().all(|&s| s == 1), "{empty:?}");
}
