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
use numapilot_policy::{Action, ActionKind, Adaptive, Engine, FinishedMove, Host, HostError, Outcome, Reason, TaskRef};
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
    /// Step at which node 1's CPUs come back (`u64::MAX`: never), and the topology then.
    online_at: u64,
    whole: Topology,
    /// Emulate the fallback of kernels that give a thread left with no online CPU its cpuset's
    /// effective CPUs, those online then (older kernels; a v1 child cpuset trimmed by hotplug
    /// behaves alike): the mask stays narrower than the machine once the CPUs are back.
    fallback: bool,
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
            if self.fallback {
                let online = t.online_cpus();
                let k = &self.host.sim().kernel;
                let stranded: Vec<TaskRef> = k
                    .tasks
                    .iter()
                    .filter(|task| !task.allowed.is_empty() && task.allowed.is_subset(&gone))
                    .map(|task| {
                        let p = &k.procs[task.proc as usize];
                        TaskRef { pid: p.pid, tid: Some(task.tid), starttime: p.starttime }
                    })
                    .collect();
                for target in stranded {
                    let kind = ActionKind::SetAffinity { cpus: online.clone() };
                    let a = Action { target, kind, reason: Reason::new("kernel", "select_fallback_rq") };
                    assert!(matches!(self.host.apply(&a), Outcome::Applied { .. }));
                }
            }
            self.topo = t.clone();
            self.change = Some(t);
        }
        if self.steps == self.online_at {
            self.topo = self.whole.clone();
            self.change = Some(self.whole.clone());
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
    let hp = Hotplugged {
        host,
        topo: topo.clone(),
        steps: 0,
        offline_at,
        online_at: u64::MAX,
        whole: topo.clone(),
        change: None,
        asked: asked.clone(),
        fallback: false,
    };
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

#[test]
fn a_process_the_kernel_moved_off_offline_cpus_is_still_ours() {
    // numa01's two processes placed one per node (steps 1-7), node 1's CPUs offline at step 8
    // with a fallback giving the stranded threads node 0's CPUs (a mask this policy never set;
    // see `Hotplugged::fallback`), back online at step 11. From then the mask is narrower than the process's
    // nodes, but the process must not read as "placed by someone else".
    let m = Machine::preset("autonuma-2s12c-24g").unwrap();
    let spec = autonuma_bench::spec("numa01", &m.topo, 1.0).unwrap();
    let host = SimHost::new(Sim::new(&m, &spec, Baseline::Default, 1, &SimOptions::default()).unwrap());
    let topo = host.topology().clone();
    let node1 = topo.nodes[1].cpus.clone();
    let mut hp = Hotplugged {
        host,
        topo: topo.clone(),
        steps: 0,
        offline_at: 8,
        online_at: 11,
        whole: topo.clone(),
        change: None,
        asked: Arc::default(),
        fallback: true,
    };
    let mut engine = Engine::new(topo, numapilot_model::Tunables::default(), Box::new(Adaptive::new()));
    for _ in 0..7 {
        engine.step(&mut hp).unwrap();
    }
    let k = &hp.host.sim().kernel;
    let on_node1: Vec<u32> = k
        .procs
        .iter()
        .filter(|p| p.tasks.iter().all(|&t| k.tasks[t].allowed.is_subset(&node1)))
        .map(|p| p.pid)
        .collect();
    assert_eq!(on_node1.len(), 1, "the premise: one process placed on node 1");
    let pid = on_node1[0];
    // Step 8: offline and the fallback; steps 9-10 with node 1 offline.
    for _ in 0..3 {
        engine.step(&mut hp).unwrap();
    }
    let k = &hp.host.sim().kernel;
    let p = k.procs.iter().find(|p| p.pid == pid).unwrap();
    assert!(p.tasks.iter().all(|&t| k.tasks[t].allowed.intersection(&node1).is_empty()), "the kernel moved it");
    // Step 11: node 1 back; the policy looks at the process with the kernel's mask still on it.
    engine.step(&mut hp).unwrap();
    let e = engine.policy.explain(&engine.model, pid).expect("known");
    assert!(!e.pinned, "the kernel's fallback is not a pin: {}", e.why);
}
