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
use kid::{sleep_forever, Kid};

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
            std::thread::spawn(move || {
                use std::os::unix::fs::FileExt;
                let mem = std::fs::File::open("/proc/self/mem").unwrap();
                let mut b = [0u8; 1];
                let r = mem.read_at(&mut b, at);
                println!("mem read ended: {r:?}");
            });
            println!("ready");
            std::thread::sleep(Duration::from_millis(200));
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
    // This machine (and CI's) has /dev/fuse and runs as root: a failure to mount is a failure.
    let fuse = hung_fuse::HungServer::mount(dir.path()).expect("a FUSE mount (as root, /dev/fuse)");
    let mut locked = Kid::spawn("mmlock", &[("NP_FILE", fuse.file().to_string_lossy().into_owned())]);
    locked.line("ready");
    let mut plain = Kid::spawn("plain", &[]);
    plain.line("ready");
    let t0 = Instant::now();
    while !has_task_in_d(locked.pid()) {
        assert!(t0.elapsed() < Duration::from_secs(20), "the child's writer never queued on its lock");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(fuse.held() >= 1, "the child's page read reached the server");
    // Without the deadline the sample below would wait in the kernel for good: the watchdog
    // releases the server after 60 s so the test ends, and says so.
    let fired = Arc::new(AtomicBool::new(false));
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let watchdog = {
        let (release, fired) = (fuse.releaser(), fired.clone());
        std::thread::spawn(move || {
            if stop_rx.recv_timeout(Duration::from_secs(60)).is_err() {
                fired.store(true, Ordering::SeqCst);
                release();
            }
        })
    };
    // An acting host (on these two processes only), taking self-pinned processes too, so that
    // nothing but the stall refuses the action below.
    let opts = LiveOptions {
        state_path: dir.path().join("state.json"),
        include_pids: vec![locked.pid(), plain.pid()],
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
    assert_eq!(stuck[0].pid, locked.pid());
    assert!(stuck[0].file.ends_with(&format!("{}/numa_maps", locked.pid())), "{stuck:?}");
    assert_eq!(host.tier_stats().stalled, 1);
    host.recycle(s1);
    // Nothing is done to a process that cannot be seen.
    let target = TaskRef { pid: locked.pid(), tid: None, starttime: read_starttime(locked.pid()).unwrap() };
    let all = numapilot_actuate::sched_getaffinity(locked.pid() as i32).unwrap();
    let one: CpuSet = std::iter::once(all.first().unwrap()).collect();
    let place = Action { target, kind: ActionKind::SetAffinity { cpus: one }, reason: Reason::new("test", "stalled") };
    match host.apply(&place) {
        Outcome::Refused { message } => assert!(message.contains("memory map is locked"), "{message}"),
        other => panic!("an action on the locked process was not refused: {other:?}"),
    }
    assert_eq!(numapilot_actuate::sched_getaffinity(locked.pid() as i32).unwrap(), all);
    // The next cycles do not wait again: its reads are refused while the first is stuck.
    let s2 = host.sample().unwrap();
    assert_eq!(pids(&s2), [plain.pid()]);
    assert_eq!(host.stalled_reads().1, 1, "no second read was left blocked");
    host.recycle(s2);
    // The server answers: the child's page read fails (EIO), its writer gets the lock, the stuck
    // read returns, and the process is read again.
    fuse.release();
    assert_eq!(locked.line("writer done"), "true");
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
        [locked.pid(), plain.pid()]
            .into_iter()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
    );
    assert_eq!(host.tier_stats().stalled, 0);
}
