//! A thread that exits during an affinity walk of its process leaves its tid free, and the
//! kernel may give that number to another process before the walk reaches it (here at once:
//! `ns_last_pid` set to the tid before it, as checkpoint/restore tools do). The walk acts only on
//! tids still listed under the process's own task directory, so the newcomer is not touched.
//! Its own test binary: the walk runs over this test process's own threads.

use std::time::{Duration, Instant};

use numapilot_actuate::process::set_threads_affinity_each_while;
use numapilot_actuate::{sched_getaffinity, sched_setaffinity};
use numapilot_topology::CpuSet;

/// Starts `sleep` with pid `want` (`ns_last_pid` = want - 1 right before the fork), retrying a
/// few times when another fork of the host takes the number first.
fn process_with_pid(want: u32) -> std::process::Child {
    for _ in 0..50 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", format!("{}", want - 1)).unwrap();
        let c = std::process::Command::new("sleep").arg("600").spawn().unwrap();
        if c.id() == want {
            return c;
        }
        let mut c = c;
        let _ = c.kill();
        let _ = c.wait();
    }
    panic!("could not start a process as pid {want}");
}

#[test]
fn a_tid_reused_by_another_process_during_a_walk_is_not_touched() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: ns_last_pid needs root");
        return;
    }
    let me = std::process::id();
    let online = sched_getaffinity(0).unwrap();
    if online.len() < 2 {
        eprintln!("skipped: needs two CPUs");
        return;
    }
    let narrow: CpuSet = std::iter::once(online.last().unwrap()).collect();
    // Thread B: waits for its cue, then exits.
    let (cue, wait) = std::sync::mpsc::channel::<()>();
    let (tid_tx, tid_rx) = std::sync::mpsc::channel::<u32>();
    let b = std::thread::spawn(move || {
        tid_tx.send(unsafe { libc::gettid() } as u32).unwrap();
        let _ = wait.recv();
    });
    let b_tid = tid_rx.recv().unwrap();
    let mut b = Some(b);
    let mut newcomer: Option<std::process::Child> = None;
    let r = set_threads_affinity_each_while(
        me,
        4,
        |tid| {
            // At the walk's first thread (the leader, listed before B): B exits and its number
            // goes to a new process.
            if let Some(h) = b.take() {
                assert!(tid < b_tid, "the walk reached B first");
                cue.send(()).unwrap();
                h.join().unwrap();
                let t0 = Instant::now();
                while std::path::Path::new(&format!("/proc/{me}/task/{b_tid}")).exists()
                    || std::path::Path::new(&format!("/proc/{b_tid}")).exists()
                {
                    assert!(t0.elapsed() < Duration::from_secs(60), "timed out: thread {b_tid} never went");
                    std::thread::sleep(Duration::from_millis(1));
                }
                newcomer = Some(process_with_pid(b_tid));
            }
            Some(narrow.clone())
        },
        |_, _, _| None,
        || true,
    );
    let mut c = newcomer.expect("the walk never ran its first thread");
    let mask = sched_getaffinity(c.id() as libc::pid_t).unwrap();
    let _ = c.kill();
    let _ = c.wait();
    // Put this process back for the harness.
    for t in numapilot_actuate::list_threads(me).unwrap().unwrap() {
        let _ = sched_setaffinity(t as libc::pid_t, &online);
    }
    let r = r.unwrap().unwrap();
    assert_eq!(mask, online, "the process that took thread {b_tid}'s number was given the walk's mask");
    assert!(r.walk.threads.iter().all(|(t, _)| *t != b_tid), "{:?}", r.walk.threads);
}
