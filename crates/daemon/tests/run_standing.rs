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
        // The live host's check, in short: a process with an explicit memory policy is left alone.
        let maps = std::fs::read_to_string(format!("/proc/{}/numa_maps", a.target.pid)).unwrap_or_default();
        if maps.lines().any(|l| l.split_whitespace().nth(1).is_some_and(|p| p.starts_with("bind:"))) {
            return Outcome::Refused { message: "it set its own memory policy".into() };
        }
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

/// What a run against one child left: the host's requests, the last status, the journal, the
/// child's pid, and the explanation `explain` gave while it waited with a standing order (if it did).
struct Run {
    asked: Vec<(Action, bool)>,
    status: control::Status,
    journal: String,
    child: u32,
    explained: Option<numapilot_policy::adaptive::Explanation>,
}

/// [`run_child_once`] until `explain` showed an order while the child waited, at most three times.
/// The order comes from the step the growth wake brings, and that wake comes only while the child
/// is younger than `new_process_age_ms` (2 s): on a loaded host its start (an exec of this test
/// binary, the harness, 48 MiB touched) can take longer, and then no step comes within its 1 s
/// wait (the interval is 5 s). CI saw that once with other builds beside it (a54f907). Without the
/// rule no try shows an order.
fn run_child(keep: bool, dry_run: bool) -> Option<(Run, numapilot_topology::CpuSet)> {
    let mut last = None;
    for _ in 0..3 {
        let r = run_child_once(keep, dry_run)?;
        if r.0.explained.is_some() {
            return Some(r);
        }
        eprintln!("no order shown while child {} waited (it grew after it was 2 s old?): trying again", r.0.child);
        last = Some(r);
    }
    last
}

/// Serves the loop on a two-node view of this machine while the child runs (`keep`: it keeps its
/// binding when it starts its threads); `None` when this machine cannot run it (not root, or CPUs
/// that do not split in two).
fn run_child_once(keep: bool, dry_run: bool) -> Option<(Run, numapilot_topology::CpuSet)> {
    // One child and one loop at a time: each loop hears the other's child's events too.
    static ONE: Mutex<()> = Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: the proc connector needs root");
        return None;
    }
    let n = numapilot_topology::Topology::from_sysfs(Path::new("/")).unwrap().online_cpus().len() as u32;
    if n < 2 || n % 2 != 0 {
        eprintln!("skipped: {n} CPUs do not split into two nodes");
        return None;
    }
    let topo = Topology::uniform(2, n / 2, 4 << 20, 20);
    let node0 = topo.nodes[0].cpus.clone();
    let dir = tempfile::tempdir().unwrap();
    // A long interval: only the growth wake and the thread wake bring steps while the child runs.
    // On a 2-CPU machine node 0 is one CPU: a new thread is counted at a quarter of one (not the
    // default whole one), so the test harness's own load there cannot leave it without room.
    let (setup, socket, journal) = common::setup(
        dir.path(),
        &format!("interval_ms = 5000\nmetrics = \"off\"\ndry_run = {dry_run}\n[tunables]\nnew_thread_cpu = 0.25\n"),
    );
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
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "first_touch_child", "--ignored", "--test-threads", "1"])
        .env("NUMAPILOT_FIRST_TOUCH_CHILD", "1")
        .stdout(std::process::Stdio::null());
    if keep {
        cmd.env("NUMAPILOT_FIRST_TOUCH_KEEP", "1");
    }
    let mut child = cmd.spawn().unwrap();
    *child_pid.lock().unwrap() = Some(child.id());
    // While it waits (bound, its memory touched), `explain` shows the order it holds.
    let mut explained = None;
    while explained.is_none() && child.try_wait().unwrap().is_none() {
        if let Ok(r) = control::request(&socket, &Request::Explain { pid: child.id() }) {
            let e = r.explain.unwrap();
            if e.standing.is_some() {
                explained = Some(e);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "child: {status}");
    let s = control::request(&socket, &Request::Status).unwrap().status.unwrap();
    handle.send(Command::Stop).unwrap();
    thread.join().unwrap().unwrap();
    let asked = asked.lock().unwrap().clone();
    let journal = std::fs::read_to_string(&journal).unwrap_or_default();
    Some((Run { asked, status: s, journal, child: child.id(), explained }, node0))
}

/// The order is given while the child is held by its binding (the step the proc connector's
/// growth wake brings, once it holds 16 MiB), shown by `explain` while it waits, and carried out
/// when its threads start, between steps: the host is asked for node 0's CPUs for the whole
/// process outside any step, and the journal and the status show it. Without the loop's part
/// (orders carried out on the connector's thread events) no action of the rule is ever asked
/// for: a step plans the process afresh and never carries out an order.
#[test]
fn a_standing_order_is_carried_out_when_the_threads_start() {
    let Some((r, node0)) = run_child(false, false) else { return };
    let e = r.explained.expect("explain never showed the standing order while the child waited");
    assert_eq!(e.standing.as_ref().unwrap().reason.rule, RULE);
    assert!(e.to_string().contains("standing order, until a decision replaces it: if it starts a thread"), "{e}");
    let orders: Vec<&(Action, bool)> =
        r.asked.iter().filter(|(a, _)| a.reason.rule == RULE && a.target.pid == r.child).collect();
    assert_eq!(orders.len(), 1, "asked: {:#?}", r.asked);
    let (order, in_step) = orders[0];
    assert!(!in_step, "carried out inside a step: {order:?}");
    assert_eq!(order.target.tid, None);
    match &order.kind {
        ActionKind::SetAffinity { cpus } => assert_eq!(*cpus, node0),
        k => panic!("{k:?}"),
    }
    let s = &r.status;
    assert_eq!(s.standing_orders, 1, "{}", s.render());
    assert!(s.render().contains("(1 on new threads between steps)"), "{}", s.render());
    let line = r.journal.lines().find(|l| l.contains(RULE)).unwrap_or_else(|| panic!("journal: {}", r.journal));
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["pid"], r.child);
    assert_eq!(v["outcome"], "applied");
    assert_eq!(v["kind"], "set-affinity");
}

/// A child that keeps its binding when it starts its threads (as one started under `numactl
/// --membind` does for good): the order is tried between steps, refused by the host's check, and
/// neither journaled nor counted (no action, no refusal): its condition did not hold. Without the
/// quiet path the journal would carry a refused action of the rule and the status a refusal.
#[test]
fn a_standing_order_refused_is_neither_journaled_nor_counted() {
    let Some((r, _)) = run_child(true, false) else { return };
    assert!(r.explained.is_some(), "no order was given");
    let tried: Vec<&(Action, bool)> =
        r.asked.iter().filter(|(a, in_step)| a.reason.rule == RULE && a.target.pid == r.child && !in_step).collect();
    // Once, or once per thread when a step came between the child's two thread starts and gave
    // the order again (a loaded host: CI of 13fc7a2 saw the second thread start after the step
    // the first one's wake brought, 26 then 53 MiB in the two orders' figures).
    assert!((1..=2).contains(&tried.len()), "asked: {:#?}", r.asked);
    assert!(!r.journal.contains(RULE), "journal: {}", r.journal);
    let s = &r.status;
    assert_eq!((s.standing_orders, s.refused), (0, 0), "{}", s.render());
}

/// In a dry run the order is shown by `explain` and, when the threads start, logged and journaled
/// as one the daemon would have carried out (`dry_run: true`, no outcome), and the host is asked
/// nothing: without the dry-run path the host would be asked to set the child's CPUs.
#[test]
fn a_dry_run_journals_the_order_it_would_carry_out() {
    let Some((r, _)) = run_child(false, true) else { return };
    assert!(r.explained.is_some(), "explain showed no order");
    assert!(r.asked.is_empty(), "a dry run asked the host: {:#?}", r.asked);
    let line = r.journal.lines().find(|l| l.contains(RULE)).unwrap_or_else(|| panic!("journal: {}", r.journal));
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["pid"], r.child);
    assert_eq!(v["dry_run"], true);
    assert_eq!(r.status.standing_orders, 1, "{}", r.status.render());
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
    if std::env::var_os("NUMAPILOT_FIRST_TOUCH_KEEP").is_none() {
        mbind(p, len, &MemPolicy::Default, ModeFlags::NONE, MbindFlags::default()).unwrap();
    }
    // The threads live 2 s: the order is carried out on the proc connector's event for them, and
    // under load (a full test run beside cargo-mutants, load average 5) the loop once came after
    // 600 ms threads had ended, so the dry run journaled nothing.
    let hs: Vec<_> = (0..2).map(|_| std::thread::spawn(|| std::thread::sleep(Duration::from_millis(2000)))).collect();
    for h in hs {
        h.join().unwrap();
    }
}
