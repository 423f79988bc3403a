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

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
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
    /// Samples taken so far, and the first (1-based) whose child held more than `quiet_threads`
    /// threads: its new ones, seen by a step (0: none yet).
    samples: Arc<AtomicU64>,
    threads_seen_at: Arc<AtomicU64>,
    quiet_threads: Arc<AtomicU64>,
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
        let sample = self.samples.fetch_add(1, Ordering::SeqCst) + 1;
        let quiet = self.quiet_threads.load(Ordering::SeqCst);
        if s.processes.iter().any(|p| p.threads.len() as u64 > quiet) {
            let _ = self.threads_seen_at.compare_exchange(0, sample, Ordering::SeqCst, Ordering::SeqCst);
        }
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
    /// A step saw the child's new threads before the loop heard of them (see [`run_child`]).
    overtaken: bool,
}

/// [`run_child_once`] until a try gives an order and hears the child's threads before any step
/// sees them, at most five times. Two things a loaded host can take from a try:
///
/// - the order: it comes from the step the growth wake brings, and that wake comes only while the
///   child is younger than `new_process_age_ms` (2 s); its start (an exec of this test binary,
///   the harness, 48 MiB touched) can take longer (CI saw that once with other builds beside it,
///   a54f907);
/// - the thread events before a step: a step that samples the child after it dropped its binding
///   and started its threads, before the loop drained their events (a step running then, woken by
///   other processes' threads and growth on the host), places the threads itself (fork-spread,
///   the same node) and its plan replaces the order, so no order is left to carry out. That is
///   the design (the order only covers threads no step has seen), and what made this test fail
///   9 times in 20 beside three busy loops (load average 7).
///
/// Without the loop's part no try ever carries out an order.
fn run_child(keep: bool, dry_run: bool) -> Option<(Run, numapilot_topology::CpuSet)> {
    let mut last = None;
    for _ in 0..5 {
        let r = run_child_once(keep, dry_run)?;
        if r.0.explained.is_none() {
            eprintln!("no order shown while child {} waited (it grew after it was 2 s old?): trying again", r.0.child);
        } else if r.0.overtaken {
            eprintln!("a step saw child {}'s threads before the loop heard of them: trying again", r.0.child);
        } else {
            return Some(r);
        }
        last = Some(r);
    }
    last
}

/// Serves the loop on a two-node view of this machine while the child runs (`keep`: it keeps its
/// binding when it starts its threads); `None` when this machine cannot run it (not root, or CPUs
/// that do not split in two). The child waits, bound, until `explain` shows the order, starts its
/// threads when told, and ends when told, once a step has seen the threads and a later one has
/// counted what the loop did: nothing waits a fixed time.
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
    let samples = Arc::new(AtomicU64::new(0));
    let threads_seen_at = Arc::new(AtomicU64::new(0));
    let quiet_threads = Arc::new(AtomicU64::new(u64::MAX));
    let host = ChildHost {
        topo: topo.clone(),
        reader: numapilot_observe::Reader::new("/"),
        child: child_pid.clone(),
        asked: asked.clone(),
        in_step: false,
        samples: samples.clone(),
        threads_seen_at: threads_seen_at.clone(),
        quiet_threads: quiet_threads.clone(),
    };
    let (handle, rx) = run::command_pipe().unwrap();
    let thread = std::thread::spawn(move || run::serve(setup, topo, host, None, Some(rx), &mut |_| {}));
    let t0 = Instant::now();
    while control::request(&socket, &Request::Status).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(30), "the loop never answered");
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = || control::request(&socket, &Request::Status).unwrap().status.unwrap();
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "first_touch_child", "--ignored", "--test-threads", "1"])
        .env("NUMAPILOT_FIRST_TOUCH_CHILD", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null());
    if keep {
        cmd.env("NUMAPILOT_FIRST_TOUCH_KEEP", "1");
    }
    let mut child = cmd.spawn().unwrap();
    let spawned = Instant::now();
    *child_pid.lock().unwrap() = Some(child.id());
    let mut stdin = child.stdin.take().unwrap();
    // While it waits (bound, its memory touched), `explain` shows the order it holds. It is told
    // to go once the loop also waits its whole interval: the step after the one that first saw
    // it comes at the settle cadence (50 to 100 ms), and told at once it started its threads
    // while that step ran, often. No order comes once two steps have begun after the child was
    // 2 s old (`new_process_age_ms`): it is not young at them.
    let mut explained = None;
    let mut old_at = None;
    while explained.is_none() {
        assert!(child.try_wait().unwrap().is_none(), "the child ended before it was told to");
        if let Ok(r) = control::request(&socket, &Request::Explain { pid: child.id() }) {
            explained = r.explain.filter(|e| e.standing.is_some() && status().next_interval_ms >= 5_000);
        }
        if spawned.elapsed() >= Duration::from_secs(2) {
            let steps = status().steps;
            if steps >= *old_at.get_or_insert(steps) + 2 {
                break;
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "the loop took no step for the child");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut overtaken = false;
    if let Some(e) = &explained {
        // Its threads now (the harness's two): a step that sees more has seen the new ones.
        quiet_threads.store(e.threads as u64, Ordering::SeqCst);
        stdin.write_all(b"go\n").unwrap();
        // Every try ends with a step that sees the threads (the one their wake brings, or the
        // interval's); by the end of it the loop has carried out the order or it never will.
        loop {
            let at = threads_seen_at.load(Ordering::SeqCst);
            if at > 0 && status().steps >= at {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(120), "no step saw the child's threads");
            std::thread::sleep(Duration::from_millis(20));
        }
        let tried = asked.lock().unwrap().iter().any(|(a, in_step)| a.reason.rule == RULE && !in_step);
        let journaled = std::fs::read_to_string(&journal).unwrap_or_default().contains(RULE);
        overtaken = !tried && !journaled;
        // The status counts an order carried out between steps from the next step's end: wait
        // for a step begun after it (the one the thread wake brings, or the interval's).
        let begun = samples.load(Ordering::SeqCst);
        while status().steps <= begun {
            assert!(t0.elapsed() < Duration::from_secs(120), "no step came after the threads");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    drop(stdin);
    let status_of_child = child.wait().unwrap();
    assert!(status_of_child.success(), "child: {status_of_child}");
    let s = status();
    handle.send(Command::Stop).unwrap();
    thread.join().unwrap().unwrap();
    let asked = asked.lock().unwrap().clone();
    let journal = std::fs::read_to_string(&journal).unwrap_or_default();
    Some((Run { asked, status: s, journal, child: child.id(), explained, overtaken }, node0))
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
/// otherwise): 48 MiB first-touched under a binding to node 0 (`mbind(MPOL_BIND)`), a wait
/// for the test's "go" on stdin (sent once `explain` shows the order), the binding dropped and
/// two threads started at once, which end when stdin does.
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
    // Bound and touched: wait for the word (the test has seen the order), then drop the binding
    // and at once start two threads, which live until the test closes stdin.
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    if line.is_empty() {
        // Stdin closed unsaid: no order came, and the test tries another child.
        return;
    }
    assert_eq!(line, "go\n");
    if std::env::var_os("NUMAPILOT_FIRST_TOUCH_KEEP").is_none() {
        mbind(p, len, &MemPolicy::Default, ModeFlags::NONE, MbindFlags::default()).unwrap();
    }
    let (end, ended) = std::sync::mpsc::channel::<()>();
    let ended = Arc::new(Mutex::new(ended));
    let hs: Vec<_> = (0..2)
        .map(|_| {
            let ended = ended.clone();
            std::thread::spawn(move || {
                let _ = ended.lock().unwrap().recv();
            })
        })
        .collect();
    let mut rest = Vec::new();
    std::io::Read::read_to_end(&mut std::io::stdin(), &mut rest).unwrap();
    drop(end);
    for h in hs {
        h.join().unwrap();
    }
}
