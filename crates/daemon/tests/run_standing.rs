//! Rule "new-threads-follow-memory" in the daemon loop, with real processes and the kernel's proc
//! connector: a standing order is carried out between two steps, when the process it names starts
//! a thread, and journaled.
//!
//! The child is this test binary run again as the ignored `first_touch_child`: as the rig's
//! `numapilot bench --force-node 0` worker does, it first-touches 48 MiB under a binding to node 0,
//! waits, drops the binding and at once starts two threads. The loop's host observes the real
//! /proc (only the child) on a two-node view of this machine's CPUs (`Topology::uniform`: the first
//! half node 0, the second node 1; all memory reads as node 0's, which is where the kernel has it
//! on a one-node machine), and records what it is asked to do instead of doing it.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use numapilot_daemon::control::{self, Request};
use numapilot_daemon::live::RestoreReport;
use numapilot_daemon::run::{self, Command, Restore};
use numapilot_observe::Sample;
use numapilot_policy::{Action, ActionKind, Host, HostError, Outcome};
use numapilot_topology::Topology;

mod common;

/// What the loop asked of the host: the action, and whether it came inside a step (between the
/// step's sample and its `step_done`) or between steps.
type Asked = Arc<Mutex<Vec<(Action, bool)>>>;

struct ChildHost {
    topo: Topology,
    reader: numapilot_observe::Reader,
    child: Arc<Mutex<Option<u32>>>,
    asked: Asked,
    in_step: bool,
}

impl Host for ChildHost {
    fn topology(&self) -> &Topology {
        &self.topo
    }
    fn now_ns(&self) -> u64 {
        numapilot_observe::reader::monotonic_ns()
    }
    fn sample(&mut self) -> Result<Sample, HostError> {
        self.in_step = true;
        let mut s = self.reader.sample().map_err(|e| HostError::Unavailable(e.to_string()))?;
        let child = *self.child.lock().unwrap();
        s.processes.retain(|p| Some(p.pid) == child);
        Ok(s)
    }
    fn apply(&mut self, a: &Action) -> Outcome {
        self.asked.lock().unwrap().push((a.clone(), self.in_step));
        Outcome::Applied { pages_moved: 0 }
    }
    fn step_done(&mut self) {
        self.in_step = false;
    }
}

impl Restore for ChildHost {
    fn restore_all(&mut self) -> RestoreReport {
        RestoreReport::default()
    }
}

const RULE: &str = "new-threads-follow-memory";

/// The order is given while the child is held by its binding (the step the proc connector's
/// growth wake brings, once it holds 16 MiB), shown by `explain` while it waits, and carried out
/// when its threads start, between
/// steps: the host is asked for node 0's CPUs for the whole process outside any step, and the
/// journal and the status show it. Without the loop's part (orders carried out on the
/// connector's thread events) no action of the rule is ever asked for: a step plans the process
/// afresh and never carries out an order.
#[test]
fn a_standing_order_is_carried_out_when_the_threads_start() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: the proc connector needs root");
        return;
    }
    let n = numapilot_topology::Topology::from_sysfs(Path::new("/")).unwrap().online_cpus().len() as u32;
    if n < 2 || n % 2 != 0 {
        eprintln!("skipped: {n} CPUs do not split into two nodes");
        return;
    }
    let topo = Topology::uniform(2, n / 2, 4 << 20, 20);
    let node0 = topo.nodes[0].cpus.clone();
    let dir = tempfile::tempdir().unwrap();
    // A long interval: only the growth wake and the thread wake bring steps while the child runs.
    let (setup, socket, journal) = common::setup(dir.path(), "interval_ms = 5000\nmetrics = \"off\"\n");
    let child_pid = Arc::new(Mutex::new(None));
    let asked: Asked = Arc::default();
    let host = ChildHost {
        topo: topo.clone(),
        reader: numapilot_observe::Reader::new("/"),
        child: child_pid.clone(),
        asked: asked.clone(),
        in_step: false,
    };
    let (handle, rx) = run::command_pipe().unwrap();
    let thread = std::thread::spawn(move || run::serve(setup, topo, host, None, Some(rx), &mut |_| {}));
    let t0 = Instant::now();
    while control::request(&socket, &Request::Status).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(30), "the loop never answered");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "first_touch_child", "--ignored", "--test-threads", "1"])
        .env("NUMAPILOT_FIRST_TOUCH_CHILD", "1")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    *child_pid.lock().unwrap() = Some(child.id());
    // While it waits (bound, its memory touched), `explain` shows the order it holds.
    let mut shown = None;
    while shown.is_none() && child.try_wait().unwrap().is_none() {
        if let Ok(r) = control::request(&socket, &Request::Explain { pid: child.id() }) {
            let e = r.explain.unwrap();
            if e.standing.is_some() {
                shown = Some(e);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let e = shown.expect("explain never showed the standing order while the child waited");
    assert_eq!(e.standing.as_ref().unwrap().reason.rule, RULE);
    assert!(e.to_string().contains("standing order until the next decision, if it starts a thread"), "{e}");
    let status = child.wait().unwrap();
    assert!(status.success(), "child: {status}");
    let s = control::request(&socket, &Request::Status).unwrap().status.unwrap();
    handle.send(Command::Stop).unwrap();
    thread.join().unwrap().unwrap();
    let asked = asked.lock().unwrap().clone();
    let orders: Vec<&(Action, bool)> =
        asked.iter().filter(|(a, _)| a.reason.rule == RULE && a.target.pid == child.id()).collect();
    assert_eq!(orders.len(), 1, "asked: {asked:#?}");
    let (order, in_step) = orders[0];
    assert!(!in_step, "carried out inside a step: {order:?}");
    assert_eq!(order.target.tid, None);
    match &order.kind {
        ActionKind::SetAffinity { cpus } => assert_eq!(*cpus, node0),
        k => panic!("{k:?}"),
    }
    assert_eq!(s.standing_orders, 1, "{}", s.render());
    assert!(s.render().contains("(1 on new threads between steps)"), "{}", s.render());
    let lines = std::fs::read_to_string(&journal).unwrap();
    let line = lines.lines().find(|l| l.contains(RULE)).unwrap_or_else(|| panic!("journal: {lines}"));
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["pid"], child.id());
    assert_eq!(v["outcome"], "applied");
    assert_eq!(v["kind"], "set-affinity");
}

/// The child of `a_standing_order_is_carried_out_when_the_threads_start` (does nothing when run
/// otherwise): 48 MiB first-touched under a binding to node 0 (`mbind(MPOL_BIND)`), a
/// wait long enough for a step to see it (the growth wake comes within 50 ms of 16 MiB), the
/// binding dropped and two threads started at once.
#[test]
#[ignore]
fn first_touch_child() {
    if std::env::var_os("NUMAPILOT_FIRST_TOUCH_CHILD").is_none() {
        return;
    }
    use numapilot_actuate::{mbind, MbindFlags, MemPolicy, ModeFlags};
    // A mapping of its own with a binding of its own (a VMA policy, which numa_maps shows
    // whichever thread reads it; this test runs on a thread of the harness, and a task policy
    // set here would not be the main thread's).
    let len = 48usize << 20;
    // SAFETY: an anonymous private mapping, unmapped by the process's exit.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    let node0 = numapilot_topology::NodeSet::from_iter([0]);
    mbind(p, len, &MemPolicy::Bind(node0), ModeFlags::NONE, MbindFlags::default()).unwrap();
    for i in (0..len).step_by(4096) {
        // SAFETY: within the mapping.
        unsafe { *(p as *mut u8).add(i) = 1 };
    }
    std::thread::sleep(Duration::from_millis(1000));
    mbind(p, len, &MemPolicy::Default, ModeFlags::NONE, MbindFlags::default()).unwrap();
    let hs: Vec<_> = (0..2).map(|_| std::thread::spawn(|| std::thread::sleep(Duration::from_millis(600)))).collect();
    for h in hs {
        h.join().unwrap();
    }
}
