//! From thread pairs to the observation's communication samples.
//!
//! The BPF program knows the waker's process (it runs in the waker's context) but only the wakee's thread id; the
//! wakee's process comes from `/proc/TID/status` (`Tgid:`), which the kernel serves for any live thread id even
//! though `/proc` lists only thread-group leaders. A thread that exited before the drain is skipped (its pair no
//! longer describes anything that can be placed), and so is a pair with a kernel thread at either end (flag
//! `PF_KTHREAD` = 0x00200000 in field 9 of `/proc/TID/stat`, include/linux/sched.h): numapilot never places
//! kernel threads. Counts of the same pair are summed; the result is sorted.

use std::collections::BTreeMap;

use numapilot_observe::{CommKind, CommSample};

use crate::WakeupPair;

/// One end of a pair: (pid, tid).
type End = (u32, u32);

/// What the drain needs to know about a live thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TidInfo {
    /// Its process (thread group id).
    pub tgid: u32,
    /// Whether it is a kernel thread.
    pub kernel_thread: bool,
}

/// Reads a thread's process and kernel-thread flag from `/proc/TID/status` and `/proc/TID/stat`
/// (observe's parsers, so a thread name that is not UTF-8 is read as any other); `None` when the
/// thread is gone (or the files are unreadable or malformed, which for a live thread does not
/// happen).
pub fn read_tid_info(tid: u32) -> Option<TidInfo> {
    let proc = numapilot_observe::Reader::new("/");
    let tgid = proc.read_status(tid).ok()??.tgid;
    let kernel_thread = proc.read_stat(tid).ok()??.is_kernel_thread();
    Some(TidInfo { tgid, kernel_thread })
}

/// [`to_comm_samples_with`] reading the live `/proc`.
pub fn to_comm_samples(pairs: &[WakeupPair]) -> Vec<CommSample> {
    to_comm_samples_with(pairs, read_tid_info)
}

/// Turns drained pairs into [`CommKind::Wakeup`] samples, `a` = the waker, `b` = the wakee, `events` = wake-ups.
/// `lookup` answers for a thread id (each asked at most once); pairs with a vanished or kernel thread at either
/// end are skipped.
pub fn to_comm_samples_with(pairs: &[WakeupPair], mut lookup: impl FnMut(u32) -> Option<TidInfo>) -> Vec<CommSample> {
    let mut cache: BTreeMap<u32, Option<TidInfo>> = BTreeMap::new();
    let mut info = |tid: u32| *cache.entry(tid).or_insert_with(|| lookup(tid));
    let mut sums: BTreeMap<(End, End), u64> = BTreeMap::new();
    for p in pairs {
        let (Some(waker), Some(wakee)) = (info(p.waker_tid), info(p.wakee_tid)) else { continue };
        if waker.kernel_thread || wakee.kernel_thread {
            continue;
        }
        // The kernel's tgid for the waker was recorded at the wake-up; a differing live tgid means the tid was
        // reused by another process since, so the pair is stale.
        if waker.tgid != p.waker_pid {
            continue;
        }
        *sums.entry(((p.waker_pid, p.waker_tid), (wakee.tgid, p.wakee_tid))).or_default() += p.count;
    }
    sums.into_iter().map(|((a, b), events)| CommSample { a, b, kind: CommKind::Wakeup, events }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(waker_pid: u32, waker_tid: u32, wakee_tid: u32, count: u64) -> WakeupPair {
        WakeupPair { waker_pid, waker_tid, wakee_tid, count }
    }

    #[test]
    fn maps_wakee_to_its_process_and_skips_gone_kernel_and_stale() {
        let table = |tid: u32| match tid {
            101 | 102 => Some(TidInfo { tgid: 100, kernel_thread: false }),
            201 => Some(TidInfo { tgid: 200, kernel_thread: false }),
            2 => Some(TidInfo { tgid: 2, kernel_thread: true }),
            _ => None,
        };
        let pairs = [
            pair(100, 101, 102, 7),
            pair(100, 101, 201, 3),
            pair(100, 101, 999, 5), // wakee gone
            pair(2, 2, 101, 4),     // kernel thread waker
            pair(300, 201, 101, 9), // tid 201 now belongs to process 200, not 300: stale
        ];
        let v = to_comm_samples_with(&pairs, table);
        assert_eq!(
            v,
            vec![
                CommSample { a: (100, 101), b: (100, 102), kind: CommKind::Wakeup, events: 7 },
                CommSample { a: (100, 101), b: (200, 201), kind: CommKind::Wakeup, events: 3 },
            ]
        );
    }

    #[test]
    fn asks_once_per_tid() {
        let mut asked = Vec::new();
        let pairs = [pair(1, 10, 11, 1), pair(1, 10, 12, 1), pair(1, 11, 10, 1)];
        let v = to_comm_samples_with(&pairs, |t| {
            asked.push(t);
            Some(TidInfo { tgid: 1, kernel_thread: false })
        });
        assert_eq!(v.len(), 3);
        asked.sort();
        assert_eq!(asked, [10, 11, 12]);
    }

    #[test]
    fn reads_this_thread_and_a_kernel_thread_from_proc() {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        let me = read_tid_info(tid).expect("own thread is readable");
        assert_eq!(me.tgid, std::process::id());
        assert!(!me.kernel_thread);
        // kthreadd is pid 2 on every Linux since 2.6.22 (unless in a pid namespace, where pid 2 may not exist).
        if let Some(k) = read_tid_info(2) {
            let comm = std::fs::read_to_string("/proc/2/comm").unwrap_or_default();
            assert_eq!(k.kernel_thread, comm.trim() == "kthreadd", "pid 2 is {comm:?}");
        }
        // A thread id beyond pid_max does not exist.
        assert_eq!(read_tid_info(u32::MAX - 1), None);
    }

    /// A thread whose name is not UTF-8 (any byte string goes through `PR_SET_NAME`) is read as
    /// any other: before this crate used observe's parsers it read as gone and its wake-ups were
    /// dropped (review helper-42).
    #[test]
    fn a_thread_named_in_bytes_that_are_not_utf8_is_read() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let name = b"np-\xff\xfe\0";
            // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes from a live buffer.
            unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() } as u32).unwrap();
            done_rx.recv().unwrap();
        });
        let tid = rx.recv().unwrap();
        let comm = std::fs::read(format!("/proc/{tid}/comm")).unwrap();
        assert!(std::str::from_utf8(&comm).is_err(), "the name is not UTF-8: {comm:?}");
        let info = read_tid_info(tid);
        done_tx.send(()).unwrap();
        t.join().unwrap();
        assert_eq!(info, Some(TidInfo { tgid: std::process::id(), kernel_thread: false }));
    }
}
