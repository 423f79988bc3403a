//! One node in reach: nothing to place. The loop says so (its start line, status, the metric)
//! and steps at its interval, without the policy's settle cadence for young processes or the
//! early steps for new processes and threads; a second node coming online (the host's topology
//! change, as CPU hotplug hands it over) brings them back.
//!
//! The host observes this test process on the real /proc, with a topology the test chooses (one
//! node, or two: `Topology::uniform` over this machine's CPUs), and holds each step after the
//! first until the test lets it go: what the loop planned after a step is read from a status that
//! cannot move on meanwhile.

use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use numapilot_daemon::control::{self, Request, Status};
use numapilot_daemon::live::RestoreReport;
use numapilot_daemon::run::{self, Command, Restore};
use numapilot_observe::Sample;
use numapilot_policy::{Action, Host, HostError, Outcome};
use numapilot_topology::Topology;

mod common;

struct Gated {
    topo: Topology,
    reader: numapilot_observe::Reader,
    /// One message lets one more step sample; the first step needs none.
    gate: mpsc::Receiver<()>,
    steps: u64,
    /// Handed over as a topology change at the second step (`Host::take_topology_change`).
    change: Option<Topology>,
    /// With `Some`, a process (a sleep) is started before each sample and sampled with this one,
    /// as a build starts compilers; killed when the host goes.
    children: Option<Vec<std::process::Child>>,
}

impl Drop for Gated {
    fn drop(&mut self) {
        for c in self.children.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Host for Gated {
    fn topology(&self) -> &Topology {
        &self.topo
    }
    fn now_ns(&self) -> u64 {
        numapilot_observe::reader::monotonic_ns()
    }
    fn sample(&mut self) -> Result<Sample, HostError> {
        if self.steps > 0 {
            let _ = self.gate.recv();
        }
        self.steps += 1;
        if let Some(children) = self.children.as_mut() {
            children.push(std::process::Command::new("sleep").arg("600").spawn().unwrap());
        }
        let mut s = self.reader.sample().map_err(|e| HostError::Unavailable(e.to_string()))?;
        let me = std::process::id();
        let mine: Vec<u32> = self.children.iter().flatten().map(|c| c.id()).chain([me]).collect();
        s.processes.retain(|p| mine.contains(&p.pid));
        Ok(s)
    }
    fn take_topology_change(&mut self) -> Option<Topology> {
        if self.steps < 2 {
            return None;
        }
        let t = self.change.take()?;
        self.topo = t.clone();
        Some(t)
    }
    fn apply(&mut self, _: &Action) -> Outcome {
        Outcome::Refused { message: "test host".into() }
    }
}

impl Restore for Gated {
    fn restore_all(&mut self) -> RestoreReport {
        RestoreReport::default()
    }
}

/// This machine's CPUs as `nodes` nodes (0, 1 or more CPUs each, in order), `None` when they do
/// not split evenly.
fn view(nodes: u32) -> Option<Topology> {
    let n = Topology::from_sysfs(Path::new("/")).unwrap().online_cpus().len() as u32;
    (n >= nodes && n % nodes == 0).then(|| Topology::uniform(nodes, n / nodes, 4 << 20, 20))
}

/// The status once `steps` steps are done (the gate holds the next).
fn status_at(socket: &Path, steps: u64) -> Status {
    let t0 = std::time::Instant::now();
    loop {
        if let Ok(r) = control::request(socket, &Request::Status) {
            let s = r.status.unwrap();
            if s.steps >= steps {
                assert_eq!(s.steps, steps, "the gate let a step through");
                return s;
            }
        }
        assert!(t0.elapsed() < std::time::Duration::from_secs(60), "the loop never took step {steps}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Serves the loop on `topo` (a settle interval of 50 ms, an interval of `interval_ms`); returns
/// the status after the first step, and after the second when `change` is given, with the start's
/// lines.
fn serve(topo: Topology, change: Option<Topology>, interval_ms: u64) -> (Status, Option<Status>, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let (setup, socket, _) = common::setup(
        dir.path(),
        &format!(
            "interval_ms = {interval_ms}\nmetrics = \"off\"\ndry_run = true\n[tunables]\nsettle_interval_ms = 50\n"
        ),
    );
    let (tx, gate) = mpsc::channel();
    let host = Gated {
        topo: topo.clone(),
        reader: numapilot_observe::Reader::new("/"),
        gate,
        steps: 0,
        change,
        children: None,
    };
    let second = host.change.is_some();
    let (handle, rx) = run::command_pipe().unwrap();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let said = lines.clone();
    let t = std::thread::spawn(move || {
        run::serve(setup, topo, host, None, Some(rx), &mut |l| said.lock().unwrap().push(l.to_string()))
    });
    let first = status_at(&socket, 1);
    let after = second.then(|| {
        tx.send(()).unwrap();
        status_at(&socket, 2)
    });
    handle.send(Command::Stop).unwrap();
    // The gate opens for good: the loop may take more than one step before it sees the stop (a
    // young process's new threads anywhere on this machine end a wait early with two nodes).
    drop(tx);
    t.join().unwrap().unwrap();
    let lines = lines.lock().unwrap().clone();
    (first, after, lines)
}

/// One node: the status and the start line say there is nothing to place, and the first step's
/// wait is the interval (5 s), not the policy's settle cadence (30 to 50 ms) that this process, first
/// seen at that step, would otherwise get. Without the one-node rule the wait is 30 ms and the
/// status says nothing of it.
#[test]
fn one_node_has_nothing_to_place_and_steps_at_its_interval() {
    let Some(one) = view(1) else { return };
    let (s, _, lines) = serve(one, None, 5_000);
    assert_eq!(s.next_interval_ms, 5_000, "{}", s.render());
    assert_eq!(s.placeable_nodes, "0");
    assert_eq!(s.nothing_to_place.as_deref(), Some("the machine has one NUMA node (node 0)"));
    assert!(s.render().contains("nothing to place: the machine has one NUMA node (node 0)"), "{}", s.render());
    assert!(s.summary().contains("nothing to place (one node)"), "{}", s.summary());
    assert!(numapilot_daemon::metrics::render(&s).contains("\nnumapilot_placeable_nodes 1\n"));
    let line = lines.iter().find(|l| l.contains("nothing to place")).unwrap_or_else(|| panic!("{lines:#?}"));
    assert!(line.starts_with("numapilot: the machine has one NUMA node (node 0): nothing to place."), "{line}");
    assert!(line.contains("moves no thread or page between nodes"), "{line}");
    assert!(line.contains("without the early steps for new processes and threads"), "{line}");
}

/// Two nodes: the policy's cadence as before (its settle cadence for a process first seen, under the
/// interval), and nothing is said.
#[test]
fn two_nodes_keep_the_policy_cadence() {
    let Some(two) = view(2) else {
        eprintln!("skipped: this machine's CPUs do not split into two nodes");
        return;
    };
    let (s, _, lines) = serve(two, None, 5_000);
    assert!(s.next_interval_ms < 5_000, "{}", s.render());
    assert_eq!(s.placeable_nodes, "0-1");
    assert_eq!(s.nothing_to_place, None);
    assert!(!s.render().contains("nothing to place"), "{}", s.render());
    assert!(numapilot_daemon::metrics::render(&s).contains("\nnumapilot_placeable_nodes 2\n"));
    assert!(!lines.iter().any(|l| l.contains("nothing to place")), "{lines:#?}");
}

/// A second node coming online (the host hands over a two-node topology at the second step, as
/// the live host does after CPU hotplug): the next status has both nodes in reach and nothing
/// said against placing. Without the check after each step the start's verdict would stand.
#[test]
fn a_second_node_coming_online_is_seen_at_the_next_step() {
    let (Some(one), Some(two)) = (view(1), view(2)) else {
        eprintln!("skipped: this machine's CPUs do not split into two nodes");
        return;
    };
    // One node: the second step comes after the interval (kept short here).
    let (first, after, _) = serve(one, Some(two), 200);
    assert!(first.nothing_to_place.is_some(), "{}", first.render());
    let s = after.unwrap();
    assert_eq!(s.topology_changes, 1, "{}", s.render());
    assert_eq!(s.placeable_nodes, "0-1", "{}", s.render());
    assert_eq!(s.nothing_to_place, None, "{}", s.render());
}

/// One node and a new process started before every step (a build starting compilers), an
/// interval of 50 ms: the wait doubles from the second step on (100, 200, 400 ms), as on an idle
/// machine, for nothing a new process does can lead to an action; each step saw one process more.
/// Without it a new process is a change and the wait stays at the interval for good.
#[test]
fn one_node_backs_off_while_processes_keep_starting() {
    let Some(one) = view(1) else { return };
    let dir = tempfile::tempdir().unwrap();
    let (setup, socket, _) = common::setup(
        dir.path(),
        "interval_ms = 50\nmetrics = \"off\"\ndry_run = true\n[tunables]\nsettle_interval_ms = 50\n",
    );
    let (tx, gate) = mpsc::channel();
    let reader = numapilot_observe::Reader::new("/");
    let host = Gated { topo: one.clone(), reader, gate, steps: 0, change: None, children: Some(Vec::new()) };
    let (handle, rx) = run::command_pipe().unwrap();
    let t = std::thread::spawn(move || run::serve(setup, one, host, None, Some(rx), &mut |_| {}));
    let mut seen = Vec::new();
    for step in 1..=4 {
        if step > 1 {
            tx.send(()).unwrap();
        }
        let s = status_at(&socket, step);
        seen.push((s.next_interval_ms, s.processes));
        if step == 4 {
            assert!(s.render().contains("interval 50 ms (now 400 ms: backed off, nothing to place)"), "{}", s.render());
        }
    }
    handle.send(Command::Stop).unwrap();
    drop(tx);
    t.join().unwrap().unwrap();
    let waits: Vec<u64> = seen.iter().map(|s| s.0).collect();
    assert_eq!(waits, [50, 100, 200, 400], "{seen:?}");
    assert!(seen.windows(2).all(|w| w[1].1 == w[0].1 + 1), "a new process at every step: {seen:?}");
}

/// The reach is the machine's: a node with neither CPUs nor memory does not count, and two that
/// have them are something to place.
#[test]
fn only_nodes_with_a_cpu_or_memory_count() {
    let two = Topology::uniform(2, 2, 4 << 20, 20);
    assert_eq!(run::placeable_nodes(&two).to_list(), "0-1");
    assert_eq!(run::nothing_to_place(&run::placeable_nodes(&two)), None);
    let mut empty = two.clone();
    empty.nodes[1].cpus = numapilot_topology::CpuSet::new();
    empty.nodes[1].mem_total_kb = 0;
    let p = run::placeable_nodes(&empty);
    assert_eq!(run::nothing_to_place(&p).as_deref(), Some("the machine has one NUMA node (node 0)"));
}

/// The simulated 2-node machine running numa01 (one simulated second a step), served to a loop
/// whose own view is node 0 alone (a test seam: the policy still plans from the samples of both),
/// and nothing may be carried out.
struct Confined {
    host: numapilot_sim::SimHost,
    applied: Arc<std::sync::atomic::AtomicU64>,
}

impl Host for Confined {
    fn topology(&self) -> &Topology {
        self.host.topology()
    }
    fn now_ns(&self) -> u64 {
        self.host.now_ns()
    }
    fn sample(&mut self) -> Result<Sample, HostError> {
        self.host.advance(1_000_000_000);
        self.host.sample()
    }
    fn apply(&mut self, a: &Action) -> Outcome {
        self.applied.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.host.apply(a)
    }
}

impl Restore for Confined {
    fn restore_all(&mut self) -> RestoreReport {
        RestoreReport::default()
    }
}

/// What the log says, as the command line's subscriber writes it.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Log {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One node in reach and the policy planning (numa01 across the machine's two nodes): no action
/// is carried out, and none is said to be a dry run, for the daemon is not one. The journal has
/// each as planned, `dry_run` false, its message naming why; the log says it at debug; explain
/// says the daemon places nothing and its last actions were not carried out. Without it: "dry
/// run: would ..." lines, `dry_run` true in the journal, explain's "planned (dry run)".
#[test]
fn nothing_to_place_is_said_of_each_planned_action_not_a_dry_run() {
    use numapilot_sim::engine::{Baseline, Machine, Sim, SimOptions};
    let dir = tempfile::tempdir().unwrap();
    let (setup, socket, journal) =
        common::setup(dir.path(), "interval_ms = 50\nmetrics = \"off\"\n[tunables]\nsettle_interval_ms = 50\n");
    let m = Machine::preset("autonuma-2s12c-24g").unwrap();
    let spec = numapilot_sim::workload::autonuma_bench::spec("numa01", &m.topo, 0.05).unwrap();
    let sim = Sim::new(&m, &spec, Baseline::Default, 1, &SimOptions::default()).unwrap();
    let applied = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let host = Confined { host: numapilot_sim::SimHost::new(sim), applied: applied.clone() };
    // The loop's own view: node 0 alone (the host still samples the simulated two).
    let mut topo = host.topology().clone();
    topo.nodes.truncate(1);
    let (handle, rx) = run::command_pipe().unwrap();
    let log = Log::default();
    let writer = log.clone();
    let t = std::thread::spawn(move || {
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || run::serve(setup, topo, host, None, Some(rx), &mut |_| {}))
    });
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Ok(r) = control::request(&socket, &Request::Status) {
            let s = r.status.unwrap();
            if s.actions > 0 && s.steps >= 3 {
                break s;
            }
        }
        assert!(t0.elapsed() < std::time::Duration::from_secs(120), "the policy never planned");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let why = "the machine has one NUMA node (node 0)";
    assert_eq!(status.nothing_to_place.as_deref(), Some(why));
    assert!(!status.dry_run && status.observe_only_reason.is_none(), "{}", status.render());
    let read = || -> Vec<serde_json::Value> {
        std::fs::read_to_string(&journal).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let first = read().into_iter().find(|l| l["event"] == "action").expect("no action journaled");
    let pid = first["pid"].as_u64().unwrap() as u32;
    let e = control::request(&socket, &Request::Explain { pid }).unwrap().explain.unwrap();
    assert_eq!(e.nothing_to_place.as_deref(), Some(why));
    let text = e.to_string();
    assert!(text.contains(&format!("  nothing to place: {why}; the daemon plans, and carries nothing out")), "{text}");
    assert!(text.contains("-> planned, not carried out (nothing to place)"), "{text}");
    assert!(!text.contains("dry run"), "{text}");
    handle.send(Command::Stop).unwrap();
    t.join().unwrap().unwrap();
    assert_eq!(applied.load(std::sync::atomic::Ordering::Relaxed), 0);
    let actions: Vec<serde_json::Value> = read().into_iter().filter(|l| l["event"] == "action").collect();
    for a in &actions {
        assert_eq!(a["outcome"], "planned", "{a}");
        assert_eq!(a["dry_run"], false, "{a}");
        assert_eq!(a["message"], format!("not carried out: nothing to place: {why}"), "{a}");
    }
    let log = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    assert!(!log.contains("dry run"), "{log}");
    let said = format!("nothing to place ({why}): {} pid {pid} (", first["kind"].as_str().unwrap());
    assert!(log.contains(&said) && log.contains("planned, not carried out: ["), "{said}\n{log}");
}
