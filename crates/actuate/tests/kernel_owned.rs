//! A thread whose CPUs the kernel keeps to itself (`PF_NO_SETAFFINITY`) is skipped by a placement,
//! not taken as the plan's refusal. The case that matters is io_uring's io-wq workers on kernels
//! 5.12 to 6.2 (bound to their node's CPUs and flagged); this host's kernel no longer flags them,
//! so a per-CPU kernel thread (`kthread_bind` sets the flag: `cpuhp/0`, `migration/0`,
//! `ksoftirqd/0`) stands in: a real task with the flag, on which `sched_setaffinity` answers
//! EINVAL whatever the mask. The walk leaves it untouched either way (the mask asked for is its
//! own); before the skip the placement failed with that EINVAL.

use numapilot_actuate::{kernel_owns_affinity, sched_getaffinity, set_process_affinity, PF_NO_SETAFFINITY};

/// A task the kernel flags `PF_NO_SETAFFINITY`, from /proc (a per-CPU kernel thread).
fn flagged_task() -> Option<(u32, String)> {
    for ent in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = ent.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(line) = std::fs::read_to_string(ent.path().join("stat")) else { continue };
        let Some(close) = line.rfind(')') else { continue };
        let comm = line[line.find('(').map_or(0, |i| i + 1)..close].to_string();
        let flags: u32 = line[close + 1..].split_whitespace().nth(6).and_then(|f| f.parse().ok()).unwrap_or(0);
        if flags & PF_NO_SETAFFINITY != 0 {
            return Some((pid, comm));
        }
    }
    None
}

#[test]
fn a_thread_the_kernel_keeps_is_skipped_not_a_refusal() {
    let Some((pid, comm)) = flagged_task() else {
        eprintln!("skipped: no task flagged PF_NO_SETAFFINITY in /proc (no per-CPU kernel thread visible)");
        return;
    };
    assert!(kernel_owns_affinity(pid, pid), "{pid} ({comm}) is flagged");
    let me = std::process::id();
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as u32;
    assert!(!kernel_owns_affinity(me, tid), "this test's own thread is not");
    assert!(!kernel_owns_affinity(me, u32::MAX - 1), "no such thread: false, the call decides");

    // The kernel refuses even the mask the thread has.
    let own = sched_getaffinity(pid as libc::pid_t).unwrap();
    let err = numapilot_actuate::sched_setaffinity(pid as libc::pid_t, &own).unwrap_err();
    assert_eq!(err.errno(), Some(libc::EINVAL), "{pid} ({comm}): {err}");

    let mut recorded = Vec::new();
    let walk = set_process_affinity(pid, &own, 4, |t, m| recorded.push((t, m.clone())))
        .unwrap_or_else(|e| panic!("{pid} ({comm}) made the placement fail: {e}"))
        .expect("the thread is there");
    assert_eq!(walk.kernel_owned, vec![pid], "{comm}");
    assert!(walk.threads.is_empty(), "nothing set: {:?}", walk.threads);
    assert_eq!(sched_getaffinity(pid as libc::pid_t).unwrap(), own, "{comm} untouched");
}
