//! A process whose memory map is locked behind a hung file server, on the running kernel: the
//! daemon's observation leaves it out after the deadline and goes on with everything else, and
//! takes it back once the server answers.
//!
//! The lock is held as it is in production: a task of the process reads its own `/proc/self/mem`
//! at a page of a mapped file whose server does not answer (`get_user_pages` without fault retry:
//! the memory-map lock stays held across the wait), and another of its tasks then asks for the
//! write lock (`mmap`). Every later reader of the lock, `/proc/PID/numa_maps` and `maps` among
//! them, queues behind that writer in the kernel. The server is a FUSE file system served by this
//! test over `/dev/fuse` (`hung_fuse`); the process is this test binary run again with
//! `NP_STALL_CHILD=mmlock` (`kid::Kid`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use numapilot_daemon::live::select::read_starttime;
use numapilot_daemon::live::{LiveHost, LiveOptions, LiveTuning, TierOptions};
use numapilot_policy::{Action, ActionKind, Host, Outcome, Reason, TaskRef};
use numapilot_topology::{CpuSet, Topology};

mod hung_fuse;
mod kid;
use kid::{sleep_forever, until, Kid};

/// The variable that starts this binary as a child (`kid::Kid::spawn`).
const CHILD_VAR: &str = "NP_STALL_CHILD";

/// The children's work (not a test: ignored, and a no-op without the environment variable).
#[test]
#[ignore]
fn child_entry() {
    let Ok(mode) = std::env::var(CHILD_VAR) else { return };
    match mode.as_str() {
        "mmlock" => {
            // Map the hung file, read its first page through /proc/self/mem on a thread (held:
            // the thread waits with the memory-map lock held for reading), then ask for the lock
            // for writing (mmap) on this one: queued behind the reader, and every later reader
            // (the daemon's) behind it.
            let path = std::env::var("NP_FILE").unwrap();
            let f = std::fs::File::open(&path).unwrap();
            // SAFETY: a read-only private mapping of a file we hold open; never dereferenced here.
            let addr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    4096,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE,
                    std::os::fd::AsRawFd::as_raw_fd(&f),
                    0,
                )
            };
            assert_ne!(addr, libc::MAP_FAILED);
            let at = addr as u64;
            println!("ready");
            // With NP_FLAG: lock only on the test's cue (after it placed this process).
            if let Ok(flag) = std::env::var("NP_FLAG") {
                kid::wait_flag(&flag, 1);
            }
            std::thread::spawn(move || {
                use std::os::unix::fs::FileExt;
                let mem = std::fs::File::open("/proc/self/mem").unwrap();
                let mut b = [0u8; 1];
                let r = mem.read_at(&mut b, at);
                println!("mem read ended: {r:?}");
            });
            // The writer asks only once the test saw the server hold the read (the file
            // NP_HELD1): a fixed 200 ms let a loaded machine run the writer first, which then
            // took the lock at once, and nothing queued the daemon's reads.
            kid::wait_flag(&std::env::var("NP_HELD").unwrap(), 1);
            // SAFETY: an anonymous mapping, never used.
            let m = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    1 << 20,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            println!("writer done {}", m != libc::MAP_FAILED);
            sleep_forever()
        }
        "plain" => {
            // A process beside it whose map is not locked.
            let v = vec![1u8; 8 << 20];
            std::hint::black_box(&v);
            println!("ready");
            sleep_forever()
        }
        other => panic!("unknown child mode {other}"),
    }
}

fn topo() -> Topology {
    Topology::from_sysfs(std::path::Path::new("/")).unwrap()
}

/// Whether a task of `pid` sleeps uninterruptibly (state D): the writer queued on the lock.
fn has_task_in_d(pid: u32) -> bool {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    dir.flatten().any(|t| {
        std::fs::read_to_string(t.path().join("stat"))
            .ok()
            .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with('D')))
            .unwrap_or(false)
    })
}

fn pids(s: &numapilot_observe::Sample) -> Vec<u32> {
    s.processes.iter().map(|p| p.pid).collect()
}

#[test]
fn a_process_whose_memory_map_is_locked_is_left_out_until_its_read_returns() {
    let dir = tempfile::tempdir().unwrap();
    let mut l = locked_child(dir.path(), None);
    let mut plain = Kid::spawn("plain", &[]);
    plain.line("ready");
    l.wait_locked();
    assert!(l.fuse.held() >= 1, "the child's page read reached the server");
    // Without the deadline the sample below would wait in the kernel for good: the watchdog
    // releases the server after 60 s so the test ends, and says so.
    let (fired, stop_tx, watchdog) = watchdog(&l.fuse);
    // An acting host (on these two processes only), taking self-pinned processes too, so that
    // nothing but the stall refuses the action below.
    let opts = LiveOptions {
        state_path: dir.path().join("state.json"),
        include_pids: vec![l.kid.pid(), plain.pid()],
        include_pinned: true,
        ..LiveOptions::default()
    };
    let tuning =
        LiveTuning { tiers: TierOptions { stalled_read_ms: 300, ..TierOptions::default() }, ..LiveTuning::default() };
    let (mut host, _) = LiveHost::open_with(topo(), opts, tuning).unwrap();
    let s1 = host.sample().expect("the cycle goes on");
    assert!(!fired.load(Ordering::SeqCst), "the sample waited for the locked process until the watchdog released it");
    assert_eq!(pids(&s1), [plain.pid()], "the locked process is left out, the other read");
    let (stuck, total) = host.stalled_reads();
    assert_eq!(total, 1);
    assert_eq!(stuck.len(), 1, "{stuck:?}");
    assert_eq!(stuck[0].pid, l.kid.pid());
    assert!(stuck[0].file.ends_with(&format!("{}/numa_maps", l.kid.pid())), "{stuck:?}");
    assert_eq!(host.tier_stats().stalled, 1);
    host.recycle(s1);
    // Nothing is done to a process that cannot be seen.
    let target = TaskRef { pid: l.kid.pid(), tid: None, starttime: read_starttime(l.kid.pid()).unwrap() };
    let all = numapilot_actuate::sched_getaffinity(l.kid.pid() as i32).unwrap();
    let one: CpuSet = std::iter::once(all.first().unwrap()).collect();
    let place = Action { target, kind: ActionKind::SetAffinity { cpus: one }, reason: Reason::new("test", "stalled") };
    match host.apply(&place) {
        Outcome::Refused { message } => assert!(message.contains("memory map is locked"), "{message}"),
        other => panic!("an action on the locked process was not refused: {other:?}"),
    }
    assert_eq!(numapilot_actuate::sched_getaffinity(l.kid.pid() as i32).unwrap(), all);
    // The next cycles do not wait again: its reads are refused while the first is stuck.
    let s2 = host.sample().unwrap();
    assert_eq!(pids(&s2), [plain.pid()]);
    assert_eq!(host.stalled_reads().1, 1, "no second read was left blocked");
    host.recycle(s2);
    // The server answers: the child's page read fails (EIO), its writer gets the lock, the stuck
    // read returns, and the process is read again.
    l.fuse.release();
    assert_eq!(l.kid.line("writer done"), "true");
    let t0 = Instant::now();
    while !host.stalled_reads().0.is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(20), "the stuck read never returned");
        std::thread::sleep(Duration::from_millis(10));
    }
    let s3 = host.sample().unwrap();
    let _ = stop_tx.send(());
    watchdog.join().unwrap();
    assert_eq!(
        pids(&s3),
        [l.kid.pid(), plain.pid()]
            .into_iter()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
    );
    assert_eq!(host.tier_stats().stalled, 0);
}

/// A hung server on a new directory under `dir`, and a child (mode `mmlock`) that mapped its file:
/// it starts its held read at once, or, with `flag`, when the file `{flag}1` appears; its writer
/// waits for [`Locked::wait_locked`]. Fields in drop order: the server's held reads are answered
/// before the child is killed and waited for.
struct Locked {
    _release_first: ReleaseOnDrop,
    kid: Kid,
    fuse: hung_fuse::HungServer,
    /// The writer's cue: the file `{held}1`.
    held: String,
}

impl Locked {
    /// Waits until the server holds the child's page read (the memory-map lock is then held for
    /// reading), cues the child's writer, and waits until the writer queues on the lock (a task
    /// in D): from then on every reader of the lock waits. 60 s for each, bounds for a loaded
    /// machine.
    fn wait_locked(&self) {
        let t0 = Instant::now();
        while self.fuse.held() == 0 {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "timed out waiting for the child's page read at the server"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        std::fs::write(format!("{}1", self.held), "").unwrap();
        wait_for_d(self.kid.pid());
    }
}

fn locked_child(dir: &std::path::Path, flag: Option<&str>) -> Locked {
    // This machine (and CI's) has /dev/fuse and runs as root: a failure to mount is a failure.
    let fuse = hung_fuse::HungServer::mount(dir).expect("a FUSE mount (as root, /dev/fuse)");
    let held = dir.join("held").to_string_lossy().into_owned();
    let mut env = vec![("NP_FILE", fuse.file().to_string_lossy().into_owned()), ("NP_HELD", held.clone())];
    env.extend(flag.map(|f| ("NP_FLAG", f.to_owned())));
    let mut kid = Kid::spawn("mmlock", &env);
    kid.line("ready");
    Locked { _release_first: ReleaseOnDrop(Box::new(fuse.releaser())), kid, fuse, held }
}

/// Releases the hung server when dropped: declared after the children, so a failing test
/// answers the reads a child waits on before the child is killed and waited for (a task whose
/// request the server holds waits for its answer even after SIGKILL: the test hung there once).
struct ReleaseOnDrop(Box<dyn Fn()>);

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// A thread that releases `fuse` after 60 s unless told to stop first, and says whether it did.
fn watchdog(
    fuse: &hung_fuse::HungServer,
) -> (Arc<AtomicBool>, std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let fired = Arc::new(AtomicBool::new(false));
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let (release, f) = (fuse.releaser(), fired.clone());
    let t = std::thread::spawn(move || {
        if stop_rx.recv_timeout(Duration::from_secs(60)).is_err() {
            f.store(true, Ordering::SeqCst);
            release();
        }
    });
    (fired, stop_tx, t)
}

/// Calls `f` every 10 ms until it gives a non-empty list (at most 20 s, then fails with `what`).
fn until_some<T>(mut f: impl FnMut() -> Vec<T>, what: &str) -> Vec<T> {
    let t0 = Instant::now();
    loop {
        let d = f();
        if !d.is_empty() {
            return d;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "{what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits (at most 60 s) until a task of `pid` is in state D.
fn wait_for_d(pid: u32) {
    let t0 = Instant::now();
    while !has_task_in_d(pid) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "timed out waiting for the child's writer to queue on its lock"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A process placed in a cpuset cgroup of numapilot's whose memory map is then locked is not
/// moved back into its own cgroup while it is (the kernel's `cpuset_attach` rebinds its memory
/// policy under that lock taken for writing when the two cpusets' memory nodes differ, and would
/// wait with the cgroup mutex held): the restore reports it and keeps the record, and the next
/// restore, once the lock is free, puts it back. On this one-node host the move would not have
/// waited (same memory nodes: no rebind); what is checked is that it is not tried.
#[test]
fn a_locked_process_is_not_moved_between_cgroups_until_its_read_returns() {
    let topo = Topology::from_sysfs(std::path::Path::new("/")).unwrap();
    let online = topo.online_cpus();
    assert!(online.len() > 1, "this test narrows a process to one CPU of several");
    let h = numapilot_actuate::CpusetHierarchy::detect(None).expect("a cpuset hierarchy (this host, CI)");
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("go").to_string_lossy().into_owned();
    let mut l = locked_child(dir.path(), Some(&flag));
    let opts = LiveOptions {
        state_path: dir.path().join("state.json"),
        include_pids: vec![l.kid.pid()],
        cpuset: numapilot_daemon::live::CpusetMode::Auto,
        ..LiveOptions::default()
    };
    let tuning =
        LiveTuning { tiers: TierOptions { stalled_read_ms: 300, ..TierOptions::default() }, ..LiveTuning::default() };
    let (mut host, _) = LiveHost::open_with(topo.clone(), opts, tuning).unwrap();
    let before_cg = h.cgroup_of(l.kid.pid()).unwrap().unwrap();
    let target = TaskRef { pid: l.kid.pid(), tid: None, starttime: read_starttime(l.kid.pid()).unwrap() };
    let one: CpuSet = std::iter::once(online.last().unwrap()).collect();
    let place = Action { target, kind: ActionKind::SetAffinity { cpus: one }, reason: Reason::new("test", "stalled") };
    assert_eq!(host.apply(&place), Outcome::Applied { pages_moved: 0 });
    let made = format!("/numapilot/{}-{}", l.kid.pid(), target.starttime);
    assert_eq!(h.cgroup_of(l.kid.pid()).unwrap().unwrap(), made);
    // Lock it now, and let the observation find it l.kid.
    std::fs::write(format!("{flag}1"), "").unwrap();
    l.wait_locked();
    let s = host.sample().unwrap();
    assert!(s.processes.iter().all(|p| p.pid != l.kid.pid()));
    host.recycle(s);
    assert_eq!(host.stalled_reads().0.len(), 1);
    // Where the move would rebind its memory policy (the cgroups' memory nodes differ: not on
    // this one-node host), moving it now would have the restore wait in the kernel: the watchdog
    // releases the server after 60 s so the test ends, and says so.
    let (fired, stop, watchdog) = watchdog(&l.fuse);
    let r = host.restore_all();
    let _ = stop.send(());
    watchdog.join().unwrap();
    assert!(!fired.load(Ordering::SeqCst), "the restore waited for the locked process");
    assert!(r.failed.iter().any(|f| f.contains("memory map is locked")), "{r:?}");
    assert_eq!(h.cgroup_of(l.kid.pid()).unwrap().unwrap(), made, "moved while locked");
    l.fuse.release();
    assert_eq!(l.kid.line("writer done"), "true");
    let t0 = Instant::now();
    while !host.stalled_reads().0.is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(20), "the stuck read never returned");
        std::thread::sleep(Duration::from_millis(10));
    }
    let r = host.restore_all();
    assert!(r.failed.is_empty(), "{r:?}");
    assert_eq!(h.cgroup_of(l.kid.pid()).unwrap().unwrap(), before_cg, "put back once free");
    drop(l);
    let _ = std::fs::remove_dir(h.mount.join("numapilot"));
}

/// The daemon's loop (`run::serve`, as `numapilot daemon` runs it) with a locked process in
/// view: its steps go on, `status` over the control socket names the process and the file, and a
/// stop returns (restore included) while the process is still l.kid.
#[test]
fn the_loop_steps_reports_and_stops_while_a_process_is_locked() {
    use numapilot_daemon::config::{self, Overrides, Source};
    use numapilot_daemon::control::{self, Request};
    use numapilot_daemon::run::{self, Command, Setup};
    let dir = tempfile::tempdir().unwrap();
    let l = locked_child(dir.path(), None);
    l.wait_locked();
    let socket = dir.path().join("run/np.sock");
    let cfg = dir.path().join("numapilot.toml");
    std::fs::write(
        &cfg,
        format!(
            "[daemon]\ninterval_ms = 100\ndry_run = true\nsocket = \"{}\"\njournal = \"{}\"\nstate = \"{}\"\nmetrics = \"off\"\n",
            socket.display(),
            dir.path().join("journal.jsonl").display(),
            dir.path().join("state.json").display()
        ),
    )
    .unwrap();
    let source = Source::Explicit(cfg);
    let loaded = config::load(&source, &Overrides::default()).unwrap();
    let topo = Topology::from_sysfs(std::path::Path::new("/")).unwrap();
    let opts = LiveOptions {
        observe_only: true,
        state_path: dir.path().join("state.json"),
        include_pids: vec![l.kid.pid()],
        ..LiveOptions::default()
    };
    let tuning =
        LiveTuning { tiers: TierOptions { stalled_read_ms: 300, ..TierOptions::default() }, ..LiveTuning::default() };
    let (host, _) = LiveHost::open_with(topo.clone(), opts, tuning).unwrap();
    let (handle, rx) = run::command_pipe().unwrap();
    let setup =
        Setup { source, overrides: Overrides::default(), loaded, forced_observe: None, notify: Default::default() };
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = run::serve(setup, topo, host, None, Some(rx), &mut |_| {});
        let _ = done_tx.send(r.is_ok());
    });
    let t0 = Instant::now();
    let status = loop {
        if let Ok(r) = control::request(&socket, &Request::Status) {
            let s = r.status.unwrap();
            if s.steps >= 3 && !s.stalled_reads.is_empty() {
                break s;
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "no steps with the locked process reported");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.stalled_reads[0].pid, l.kid.pid());
    assert!(status.stalled_reads[0].file.ends_with("numa_maps"), "{:?}", status.stalled_reads);
    assert!(status.render().contains(&format!("pid {} (/proc/{}/numa_maps", l.kid.pid(), l.kid.pid())));
    assert!(has_task_in_d(l.kid.pid()), "still locked while the loop went on");
    handle.send(Command::Stop).unwrap();
    let stopped = done_rx.recv_timeout(Duration::from_secs(30)).expect("the loop stopped while the process was locked");
    assert!(stopped);
    l.fuse.release();
}

/// Rule stuck-move-abandoned on the running kernel: a page move whose `move_pages` call sleeps
/// behind the process's locked memory map (queued behind the child's writer, as every reader of
/// the lock is) makes no progress; given up after `STUCK_MOVE_S` (the clock is the caller's: a
/// time that far on is passed in), the next move, of a process beside it, runs on a new mover
/// thread and ends while the first call is still in the kernel; when the server answers, the
/// stuck call returns and its result is taken late. Without the rule the second move waited for
/// the first, for as long as the server stayed away.
#[test]
fn a_move_stuck_behind_a_locked_map_is_given_up_and_the_next_goes_on() {
    use numapilot_daemon::live::mover::{Job, Mover, STUCK_MOVE_S};
    let dir = tempfile::tempdir().unwrap();
    let mut l = locked_child(dir.path(), None);
    let mut plain = Kid::spawn("plain", &[]);
    plain.line("ready");
    l.wait_locked();
    let (fired, stop_tx, watchdog) = watchdog(&l.fuse);
    // The work: one real move_pages query of a page of the process (its status: where it is),
    // which takes the memory map's lock for reading; counted as the live host's calls are.
    let calls = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let c = calls.clone();
    let mut m = Mover::spawn(
        Arc::new(move |j: &Job, _threads: usize| {
            let pid = j.action.target.pid as libc::pid_t;
            let r = numapilot_actuate::move_pages(pid, &[0x10000], None, numapilot_actuate::MoveFlags::Own);
            c.fetch_add(1, Ordering::SeqCst);
            match r {
                Ok(_) => (Outcome::Applied { pages_moved: 0 }, 1, 1),
                Err(e) => (Outcome::Refused { message: e.to_string() }, 1, 1),
            }
        }),
        Arc::new(move || calls.load(Ordering::SeqCst)),
    )
    .unwrap();
    let job = |pid: u32, started_ns: u64| {
        let all: numapilot_topology::NodeSet = std::iter::once(0).collect();
        Job {
            action: Action {
                target: TaskRef { pid, tid: None, starttime: read_starttime(pid).unwrap() },
                kind: ActionKind::MigratePages { from: all.clone(), to: all, max_pages: None },
                reason: Reason::new("test", "stuck move"),
            },
            allowance: 1,
            started_ns,
            cpus: None,
            threads: 1,
        }
    };
    let now = numapilot_observe::reader::monotonic_ns();
    assert!(m.submit(job(l.kid.pid(), now)));
    // It is in the kernel, and stays there: nothing comes back while the server holds the page.
    assert!(m.wait_for(Duration::from_millis(500)).is_empty(), "the call behind the locked map returned");
    assert!(!m.submit(job(plain.pid(), now)), "one move at a time");
    let later = now + (STUCK_MOVE_S + 1) * 1_000_000_000;
    assert_eq!(m.poll(later), Some(l.kid.pid()), "given up");
    assert!(m.submit(job(plain.pid(), later)), "the next move is taken");
    let done = m.wait_for(Duration::from_secs(20));
    assert!(!fired.load(Ordering::SeqCst), "the second move waited for the watchdog's release");
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(done[0].job.action.target.pid, plain.pid());
    assert_eq!(done[0].outcome, Outcome::Applied { pages_moved: 0 });
    assert!(m.stuck_on(l.kid.pid()), "the first is still in the kernel");
    // The server answers: the child's read fails, its writer takes the lock and lets it go, and
    // the stuck call returns; its result comes late, like any other.
    l.fuse.release();
    assert_eq!(l.kid.line("writer done"), "true");
    let late = until_some(|| m.drain(), "the stuck call never returned");
    let _ = stop_tx.send(());
    watchdog.join().unwrap();
    assert_eq!(late[0].job.action.target.pid, l.kid.pid());
    assert!(m.stuck().is_empty());
}

/// An anonymous read-write range of `pid`'s memory (its heap, else the first private writable
/// mapping without a file), from /proc/PID/maps, as (start, length): read before its map is
/// locked.
fn writable_range(pid: u32) -> (u64, u64) {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let parse = |l: &str| {
        let (a, b) = l.split_whitespace().next().unwrap().split_once('-').unwrap();
        let (a, b) = (u64::from_str_radix(a, 16).unwrap(), u64::from_str_radix(b, 16).unwrap());
        (a, b - a)
    };
    maps.lines()
        .find(|l| l.ends_with("[heap]"))
        .or_else(|| {
            maps.lines().find(|l| l.split_whitespace().nth(1) == Some("rw-p") && l.split_whitespace().count() == 5)
        })
        .map(parse)
        .expect("a writable anonymous mapping")
}

/// Rule stuck-move-abandoned through the live host, on the running kernel: the move `apply` hands
/// to the page mover sleeps reading the process's pagemap behind its locked memory map; the step
/// after the limit (`LiveTuning::stuck_move_ms`, 1 s here for the default 60 s) gives it up in
/// `finished_moves`: the host lists it as stuck, refuses another move of that process while its
/// call is in the kernel, takes the move of a process beside it on a new mover thread and reports
/// it ended; when the server answers, the stuck job's result comes back through `finished_moves`,
/// stopped for the reason it was given up. The mover-level test above passes the time in; this
/// one checks the host's wiring of clock, stop flag, refusal and late result.
#[test]
fn the_live_host_gives_up_a_move_stuck_behind_a_locked_map_and_moves_the_next_process() {
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("lock").to_string_lossy().into_owned();
    let mut l = locked_child(dir.path(), Some(&flag));
    let mut plain = Kid::spawn("plain", &[]);
    plain.line("ready");
    // Ranges read while the maps can still be read; the lock comes on the cue.
    let (locked_range, plain_range) = (writable_range(l.kid.pid()), writable_range(plain.pid()));
    let opts = LiveOptions {
        state_path: dir.path().join("state.json"),
        include_pids: vec![l.kid.pid(), plain.pid()],
        include_pinned: true,
        ..LiveOptions::default()
    };
    let tuning = LiveTuning {
        tiers: TierOptions { stalled_read_ms: 300, ..TierOptions::default() },
        stuck_move_ms: 1000,
        ..LiveTuning::default()
    };
    let (mut host, _) = LiveHost::open_with(topo(), opts, tuning).unwrap();
    std::fs::write(format!("{flag}1"), "").unwrap();
    l.wait_locked();
    let (fired, stop_tx, watchdog) = watchdog(&l.fuse);
    let node0 = topo().node_ids().iter().next().unwrap();
    let mv = |target: TaskRef, range: (u64, u64)| Action {
        target,
        kind: ActionKind::MoveRanges { ranges: vec![range], to: node0 },
        reason: Reason::new("test", "a move of a range"),
    };
    let (locked, beside) = (l.kid.target(), plain.target());
    let handed = Instant::now();
    assert!(
        matches!(host.apply(&mv(locked, locked_range)), Outcome::Started { .. }),
        "the first move is handed to the mover"
    );
    // Not given up before its time: a step soon after sees it running (checked only when the
    // step did come well before the limit: a loaded machine may wake this thread late).
    std::thread::sleep(Duration::from_millis(200));
    assert!(host.finished_moves().is_empty());
    if handed.elapsed() < Duration::from_millis(800) {
        assert!(host.moves_stuck().is_empty(), "given up before the limit");
        assert_eq!(host.move_running().map(|(p, _)| p), Some(locked.pid));
    }
    // Past the limit with no call returned: given up at a step after it (steps every 50 ms here;
    // the progress clock counts every mover thread of this test binary, so a step may come later).
    let given_up = loop {
        assert!(host.finished_moves().is_empty(), "the call behind the locked map returned");
        if !host.moves_stuck().is_empty() {
            break handed.elapsed();
        }
        assert!(handed.elapsed() < Duration::from_secs(30), "the move behind the locked map was never given up");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(given_up >= Duration::from_millis(1000), "given up after {given_up:?}, before the 1 s limit");
    assert_eq!(host.moves_stuck().iter().map(|(p, _)| *p).collect::<Vec<_>>(), [locked.pid]);
    assert_eq!(host.move_running(), None, "the mover is free for the next move");
    match host.apply(&mv(locked, locked_range)) {
        Outcome::Refused { message } => assert!(message.contains("stuck in the kernel"), "{message}"),
        o => panic!("a second move of the locked process was not refused: {o:?}"),
    }
    assert!(matches!(host.apply(&mv(beside, plain_range)), Outcome::Started { .. }), "the next process's move");
    let done = until_some(|| host.finished_moves(), "the move beside the stuck one never ended");
    assert!(!fired.load(Ordering::SeqCst), "the second move waited for the watchdog's release");
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(done[0].action.target.pid, beside.pid);
    assert!(matches!(done[0].outcome, Outcome::Applied { .. }), "{:?}", done[0].outcome);
    assert!(has_task_in_d(l.kid.pid()), "the first is still in the kernel");
    // The server answers: the stuck read returns, the job sees it was given up and stops there.
    l.fuse.release();
    assert_eq!(l.kid.line("writer done"), "true");
    let late = until_some(|| host.finished_moves(), "the stuck move's result never came back");
    let _ = stop_tx.send(());
    watchdog.join().unwrap();
    assert_eq!(late[0].action.target.pid, locked.pid);
    match &late[0].outcome {
        Outcome::Refused { message } => {
            assert!(message.contains(numapilot_daemon::live::apply::STOP_STUCK), "{message}")
        }
        o => panic!("the late result is not the stop's: {o:?}"),
    }
    assert!(host.moves_stuck().is_empty(), "no longer stuck once its call returned");
    // Its moves are allowed again: a new one is taken.
    assert!(matches!(host.apply(&mv(locked, locked_range)), Outcome::Started { .. }));
}

/// A process that names itself `numapilot` (any process may: prctl, or a program file of that
/// name) is told from the daemon's own tools by the identity of its executable, `/proc/PID/exe`.
/// Reading that identity asked the executable's file server for its attributes: a program run
/// from a server that does not answer (a user's FUSE file system mounted with allow_other, a hung
/// NFS server) held the daemon's step in that check for as long as the server liked, at every
/// step. The identity is the kernel's inode as it is (statx with AT_STATX_DONT_SYNC): the server
/// is not asked, and the process, another program under the daemon's name, is managed.
#[test]
fn a_process_named_numapilot_run_from_a_hung_server_does_not_hold_the_tool_check() {
    let dir = tempfile::tempdir().unwrap();
    let program = std::fs::read("/bin/sleep").unwrap();
    let fuse = hung_fuse::HungServer::mount_with_program(dir.path(), "numapilot", program)
        .expect("a FUSE mount (as root, /dev/fuse)");
    // Declared after the child: on a failure the held stat is answered before the child goes.
    let mut child = std::process::Command::new(fuse.program().unwrap()).arg("600").spawn().unwrap();
    let _release_first = ReleaseOnDrop(Box::new(fuse.releaser()));
    let pid = child.id();
    // The child runs the server's program, under its name, once its exec is through. `spawn`
    // returns when the exec closed the child's close-on-exec pipe, and the kernel closes those
    // before it sets the new name (5.x-6.x begin_new_exec: do_close_on_exec, then __set_task_comm): the
    // name is waited for, or this reads the spawning thread's (CI saw "a_process_named").
    let comm = format!("/proc/{pid}/comm");
    until("the child to run the server's program under its name", || {
        std::fs::read_to_string(&comm).unwrap() == "numapilot\n"
    });
    let (fired, stop_tx, watchdog) = watchdog(&fuse);
    fuse.hang_stats();
    let opts = LiveOptions::default();
    let check = std::thread::spawn(move || numapilot_daemon::live::select::exclusion(&opts, pid, "numapilot", || None));
    // Until the check ends, or a stat of the program waits on the server.
    while !check.is_finished() && fuse.stats_held() == 0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let asked = fuse.stats_held();
    fuse.release();
    let verdict = check.join().unwrap();
    let _ = stop_tx.send(());
    watchdog.join().unwrap();
    assert!(!fired.load(Ordering::SeqCst), "the watchdog had to release the server");
    assert_eq!(asked, 0, "the tool check asked the program's hung server for its attributes");
    assert_eq!(verdict, None, "another program under the daemon's name is no tool of its");
    let _ = child.kill();
    let _ = child.wait();
}
