//! CPU hotplug through the daemon loop: the simulated 2-node machine, whose host reports at step
//! 5 that node 1's CPUs went offline (as the live host does when `/sys/devices/system/cpu/online`
//! changes, `Host::take_topology_change`), then numa01's two processes start (at 10 s). The fork
//! rule spreads new processes over the nodes; with node 1's CPUs gone it must not ask for one of
//! them (the same run without the hotplug does: the control), the journal has one `topology` line
//! and the status counts the change. The live half (sysfs read again) is in `hotplug.rs`; the rig's
//! daemon-safety scenario takes CPUs offline on a running guest.

mod common;

use std::sync::{Arc, Mutex};

use numapilot_daemon::control::Status;
use numapilot_daemon::live::RestoreReport;
use numapilot_daemon::run::Restore;
use numapilot_observe::Sample;
use numapilot_policy::{Action, ActionKind, FinishedMove, Host, HostError, Outcome};
use numapilot_sim::engine::{Baseline, Machine, Sim, SimOptions};
use numapilot_sim::workload::autonuma_bench;
use numapilot_sim::SimHost;
use numapilot_topology::{CpuSet, Topology};

/// Affinity asked for, with whether node 1's CPUs were offline at the time.
type Asked = Arc<Mutex<Vec<(bool, CpuSet)>>>;

struct Hotplugged {
    host: SimHost,
    topo: Topology,
    steps: u64,
    offline_at: u64,
    change: Option<Topology>,
    asked: Asked,
}

impl Hotplugged {
    fn offline(&self) -> bool {
        self.steps >= self.offline_at
    }
}

impl Host for Hotplugged {
    fn topology(&self) -> &Topology {
        &self.topo
    }
    fn now_ns(&self) -> u64 {
        self.host.now_ns()
    }
    fn sample(&mut self) -> Result<Sample, HostError> {
        self.host.advance(1_000_000_000);
        self.steps += 1;
        if self.steps == self.offline_at {
            let mut t = self.topo.clone();
            let gone = t.nodes[1].cpus.clone();
            t.nodes[1].cpus = CpuSet::new();
            for c in t.cpus.iter_mut().filter(|c| gone.contains(c.id)) {
                c.online = false;
            }
            self.topo = t.clone();
            self.change = Some(t);
        }
        self.host.sample()
    }
    fn take_topology_change(&mut self) -> Option<Topology> {
        self.change.take()
    }
    fn apply(&mut self, a: &Action) -> Outcome {
        if let ActionKind::SetAffinity { cpus } = &a.kind {
            let offline = self.offline();
            self.asked.lock().unwrap().push((offline, cpus.clone()));
        }
        self.host.apply(a)
    }
    fn finished_moves(&mut self) -> Vec<FinishedMove> {
        Vec::new()
    }
}

impl Restore for Hotplugged {
    fn restore_all(&mut self) -> RestoreReport {
        RestoreReport::default()
    }
    fn wait_moves(&mut self) -> Vec<FinishedMove> {
        Vec::new()
    }
}

/// One daemon run of 16 steps; node 1's CPUs go offline at step `offline_at`. Returns every
/// affinity asked for, node 1's CPUs, the status and the journal's `topology` lines.
fn run(offline_at: u64) -> (Vec<(bool, CpuSet)>, CpuSet, Status, Vec<serde_json::Value>) {
    let m = Machine::preset("autonuma-2s12c-24g").unwrap();
    let mut spec = autonuma_bench::spec("numa01", &m.topo, 0.05).unwrap();
    for p in &mut spec.processes {
        p.start_s = 10.0;
    }
    let host = SimHost::new(Sim::new(&m, &spec, Baseline::Default, 1, &SimOptions::default()).unwrap());
    let topo = host.topology().clone();
    let node1 = topo.nodes[1].cpus.clone();
    assert!(!node1.is_empty());
    let asked: Asked = Arc::default();
    let hp = Hotplugged { host, topo: topo.clone(), steps: 0, offline_at, change: None, asked: asked.clone() };
    let extra = "metrics = \"off\"\ninterval_ms = 250\nidle_max_interval_ms = 0\n";
    let (status, lines) = common::serve_steps(hp, topo, extra, 16);
    let asked = asked.lock().unwrap().clone();
    let lines = lines.into_iter().filter(|l| l["event"] == "topology").collect();
    (asked, node1, status, lines)
}

#[test]
fn cpus_that_went_offline_are_never_asked_for_again() {
    // The control: with node 1 online the fork rule puts one of the two processes there.
    let (asked, node1, status, lines) = run(u64::MAX);
    assert!(
        asked.iter().any(|(_, c)| !c.intersection(&node1).is_empty()),
        "without the hotplug node 1 is used: {asked:?}"
    );
    assert_eq!(status.topology_changes, 0);
    assert!(lines.is_empty());

    let (asked, node1, status, lines) = run(5);
    assert!(asked.iter().any(|(off, _)| *off), "processes started after the change are placed: {asked:?}");
    for (off, cpus) in &asked {
        assert!(*off, "nothing is placed before the processes start");
        assert!(cpus.intersection(&node1).is_empty(), "asked for offline CPUs {} after the change", cpus.to_list());
    }
    assert_eq!(status.topology_changes, 1);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let detail = lines[0]["detail"].as_str().unwrap();
    assert!(detail.contains("node 1: CPUs none"), "{detail}");
}
