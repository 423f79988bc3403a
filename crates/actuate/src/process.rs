//! Whole-process actuation: the CPU affinity of every thread of another process, and the resident
//! pages of a range of its memory.
//!
//! # Problem
//!
//! `sched_setaffinity(2)` changes one thread. A process is a set of threads that changes while we
//! walk it: a thread created after we listed `/proc/PID/task` inherits its creator's mask, which may
//! still be the old one, and would escape the new placement.
//!
//! ```text
//!   round 1: list task/ = {10, 11, 12}    set 10, 11, 12     (12 spawns 13 meanwhile, old mask)
//!   round 2: list task/ = {10, 11, 12, 13} set 13            new: {13}
//!   round 3: list task/ = {10, 11, 12, 13} nothing new       done: no thread escaped
//! ```
//!
//! # Approach
//!
//! [`set_process_affinity`] lists the threads, sets every one not set yet (reading its mask first,
//! so the caller can remember the original), and lists again until a listing shows no thread that
//! was not set, at most `max_rounds` listings. A thread whose creator was already set inherits the
//! new mask, so a listing with nothing new means no thread escaped, except one whose `clone()` was
//! in flight while its creator was being set: the child copied the old mask before the change and
//! joins the thread list after the listing. A quiet listing is therefore confirmed by a second one
//! [`SETTLE`] later; a clone preempted for longer than that can still escape (the next observation
//! sees its mask). A thread that exits between listing and setting (ESRCH) is skipped.
//!
//! A placement stops at the first thread the kernel refuses (the plan does not fit) and puts the
//! threads it had set back on the masks they had, so a refusal changes nothing: the walk left them
//! on the new mask, and the daemon, whose policies read a refused placement as not made, kept a
//! process half placed until its exit (review helper-110: one thread of a process alone in a v1
//! cpuset of other CPUs). The refusal names the thread and its process. One refusal is not the
//! plan's: a thread whose CPUs the kernel keeps to itself (`PF_NO_SETAFFINITY`: io_uring's io-wq
//! workers on kernels 5.12 to 6.2, liburing issue #353) is refused whatever the mask, so it is
//! skipped and reported ([`kernel_owns_affinity`]), and the rest of the process is placed. Putting masks back
//! goes on instead ([`set_threads_affinity_each_while`]): every thread gets its mask, or a
//! substitute the caller offers for a refused one, or is reported, so one thread whose original the
//! kernel no longer takes leaves no later thread on the daemon's mask (review of 2026-11-30).
//!
//! [`resident_pages`] reads `/proc/PID/pagemap` (8 bytes per virtual page, bit 63 "present";
//! Documentation/admin-guide/mm/pagemap.rst) over a range and returns the addresses of the pages
//! that are in memory: `move_pages(2)` is only worth calling on those (a page never touched has
//! nothing to move, and asking costs a page-table walk per address).
//!
//! # Limits
//!
//! A thread id is a machine-wide number: a thread of the target that exits between the listing
//! and the call, and whose id is reused by another process's new thread within those microseconds,
//! would be changed instead. The pid space (`pid_max`, 4,194,304 by default on 64-bit) must wrap
//! for that to happen; callers check the process's start time before and after.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use numapilot_topology::CpuSet;

use crate::affinity::{sched_getaffinity, sched_setaffinity};
use crate::error::{Error, Result};

/// What [`set_process_affinity`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessAffinity {
    /// Every thread set, with the mask it had just before (in the order they were set).
    pub threads: Vec<(u32, CpuSet)>,
    /// Listings of `/proc/PID/task` made.
    pub rounds: u32,
    /// True when the last allowed listing still showed threads that were not set (the process
    /// creates threads faster than we can follow; they were set, but later ones may have escaped).
    pub unsettled: bool,
    /// Threads left as they were because their CPUs are the kernel's to choose
    /// ([`kernel_owns_affinity`]: io_uring workers on kernels 5.12 to 6.2), in the order met.
    pub kernel_owned: Vec<u32>,
}

/// `PF_NO_SETAFFINITY` in the per-task flags (`include/linux/sched.h`, 0x04000000): userland may
/// not change the task's CPUs. `sched_setaffinity()` answers EINVAL for such a task before it
/// looks at the mask (kernel/sched/core.c). Per-CPU kernel threads carry it (`kthread_bind`), and
/// so did io_uring's io-wq workers from 5.12 (created bound to their node's CPUs,
/// `io_init_new_worker`) until commit 01e68ce08a30 "io_uring/io-wq: stop setting
/// PF_NO_SETAFFINITY on io-wq workers" (6.3), and sqpoll threads until a5fc1441af77.
pub const PF_NO_SETAFFINITY: u32 = 0x0400_0000;

/// Whether the kernel keeps `tid`'s CPUs to itself (`PF_NO_SETAFFINITY` in the flags of
/// `/proc/PID/task/TID/stat`, field 9: the ninth after the last `)`'s command name, see
/// proc(5)). False when the file cannot be read or parsed: the system call then decides.
///
/// Why it matters: on kernels 5.12 to 6.2 every process that uses io_uring has such threads
/// while requests are in flight (one per node with work, bound to that node's CPUs), and
/// `sched_setaffinity` refuses each with EINVAL. A placement that treated that refusal as any
/// other put the whole process back, and its next attempt met the same worker: an io_uring
/// program was never placed. Such a thread is skipped and reported in
/// [`ProcessAffinity::kernel_owned`]; the daemon does not read its mask as a pin either.
pub fn kernel_owns_affinity(pid: u32, tid: u32) -> bool {
    let Ok(bytes) = std::fs::read(format!("/proc/{pid}/task/{tid}/stat")) else { return false };
    stat_flags(&bytes).is_some_and(|f| f & PF_NO_SETAFFINITY != 0)
}

/// The `flags` field of a stat line (`pid (comm) state ppid pgrp session tty_nr tpgid flags ...`),
/// split after the last `)` since the command name may hold spaces and parentheses.
fn stat_flags(line: &[u8]) -> Option<u32> {
    let close = line.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&line[close + 1..]).ok()?;
    rest.split_ascii_whitespace().nth(6)?.parse().ok()
}

/// Thread ids under `/proc/PID/task`, ascending; `Ok(None)` when the process is gone.
pub fn list_threads(pid: u32) -> io::Result<Option<Vec<u32>>> {
    let dir = PathBuf::from(format!("/proc/{pid}/task"));
    let rd = match std::fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ESRCH)) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for ent in rd {
        let ent = match ent {
            Ok(e) => e,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ESRCH)) => return Ok(None),
            Err(e) => return Err(e),
        };
        if let Some(t) = ent.file_name().to_str().and_then(|n| n.parse().ok()) {
            out.push(t);
        }
    }
    out.sort_unstable();
    Ok(Some(out))
}

/// Sets the CPU affinity of every thread of process `pid` to `cpus`, re-listing its threads until no
/// new one appears (at most `max_rounds` listings, at least 1). Returns `Ok(None)` when the process
/// is gone before any thread was set. A thread that exits mid-way is skipped; any other refusal
/// (EINVAL: no allowed CPU left in the thread's cpuset; EPERM) is returned as the error, naming the
/// thread and the process, after the threads already set are put back on the masks they had
/// (those still carrying the new one; a thread born meanwhile from one of them keeps it).
///
/// `before(tid, original)` is called for each thread just before its mask is changed, so the caller
/// can record the original first.
pub fn set_process_affinity(
    pid: u32,
    cpus: &CpuSet,
    max_rounds: u32,
    before: impl FnMut(u32, &CpuSet),
) -> Result<Option<ProcessAffinity>> {
    set_threads_affinity(pid, max_rounds, |_| Some(cpus.clone()), before)
}

/// Time a quiet listing is confirmed after: a listing with no new thread is followed, this much
/// later, by one more, and only a second quiet listing ends the walk. Default 200 us. Source: a
/// choice, several times a `clone()` on an idle machine. What it prevents: ending while a clone that
/// copied an old mask is still on its way into the thread list (see the module essay), the race the
/// live test hit on a loaded 2-CPU host.
pub const SETTLE: std::time::Duration = std::time::Duration::from_micros(200);

/// [`set_process_affinity`] with a mask per thread: `mask_for(tid)` (`None` leaves the thread
/// alone), for restoring recorded originals the same way they were changed.
pub fn set_threads_affinity(
    pid: u32,
    max_rounds: u32,
    mask_for: impl FnMut(u32) -> Option<CpuSet>,
    before: impl FnMut(u32, &CpuSet),
) -> Result<Option<ProcessAffinity>> {
    set_threads_affinity_while(pid, max_rounds, mask_for, before, || true)
}

/// [`set_process_affinity`] that asks `still()` (is `pid` still the process meant? a start-time
/// check) before every listing of its threads: the walk re-lists for up to `max_rounds` rounds
/// with pauses, and a pid reused meanwhile would have its new owner's threads listed and set.
/// False ends the walk as if the process were gone.
pub fn set_process_affinity_while(
    pid: u32,
    cpus: &CpuSet,
    max_rounds: u32,
    before: impl FnMut(u32, &CpuSet),
    still: impl FnMut() -> bool,
) -> Result<Option<ProcessAffinity>> {
    set_threads_affinity_while(pid, max_rounds, |_| Some(cpus.clone()), before, still)
}

/// [`set_threads_affinity`] with the identity check of [`set_process_affinity_while`].
pub fn set_threads_affinity_while(
    pid: u32,
    max_rounds: u32,
    mut mask_for: impl FnMut(u32) -> Option<CpuSet>,
    mut before: impl FnMut(u32, &CpuSet),
    still: impl FnMut() -> bool,
) -> Result<Option<ProcessAffinity>> {
    let mut out = ProcessAffinity::default();
    // The mask each thread of `out.threads` was given, for putting them back after a refusal.
    let mut given: Vec<CpuSet> = Vec::new();
    let walk = walk_threads(pid, max_rounds, still, |tid| {
        let Some(cpus) = mask_for(tid) else { return Ok(()) };
        let original = match sched_getaffinity(tid as libc::pid_t) {
            Ok(c) => c,
            Err(e) if e.errno() == Some(libc::ESRCH) => return Ok(()),
            Err(e) => return Err(of_process(e, pid, tid)),
        };
        if !still_listed(pid, tid) {
            return Ok(());
        }
        before(tid, &original);
        match sched_setaffinity(tid as libc::pid_t, &cpus) {
            Ok(()) => {}
            Err(e) if e.errno() == Some(libc::ESRCH) => return Ok(()),
            // Read only after a refusal: the flag costs nothing on the common path.
            Err(e) if e.errno() == Some(libc::EINVAL) && kernel_owns_affinity(pid, tid) => {
                out.kernel_owned.push(tid);
                return Ok(());
            }
            Err(e) => return Err(of_process(e, pid, tid)),
        }
        out.threads.push((tid, original));
        given.push(cpus);
        Ok(())
    });
    let walk = match walk {
        Ok(w) => w,
        Err(e) => {
            put_back(pid, &out.threads, &given);
            return Err(e);
        }
    };
    out.rounds = walk.rounds;
    out.unsettled = walk.unsettled;
    Ok(if walk.gone && out.threads.is_empty() && out.kernel_owned.is_empty() { None } else { Some(out) })
}

/// Puts back the threads a fail-fast walk set before the kernel refused a later one: `threads`
/// `(tid, mask before)`, `given[i]` the mask thread `i` was given. A thread is put back only while
/// it is still listed under `pid` and carries the mask it was given (or that mask as the kernel
/// cut it: a subset of it); one that exited, or set a mask of its own meanwhile, is left alone.
/// Best effort: a thread the kernel refuses its old mask now keeps the new one. A thread born
/// during the walk from one already set inherited the new mask and is not among them (the
/// module's Limits).
fn put_back(pid: u32, threads: &[(u32, CpuSet)], given: &[CpuSet]) {
    for ((tid, original), cpus) in threads.iter().zip(given) {
        let carries = sched_getaffinity(*tid as libc::pid_t).is_ok_and(|now| now.is_subset(cpus));
        if carries && still_listed(pid, *tid) {
            let _ = sched_setaffinity(*tid as libc::pid_t, original);
        }
    }
}

/// An error of a call on thread `tid` during a walk over process `pid`, naming the process too
/// (the call's own arguments name only the thread, whose id is not the process's).
fn of_process(e: Error, pid: u32, tid: u32) -> Error {
    match e {
        Error::Syscall { syscall, args, errno } if tid != pid => {
            Error::Syscall { syscall, args: format!("{args}; thread of process {pid}"), errno }
        }
        e => e,
    }
}

/// A thread [`set_threads_affinity_each_while`] left as it was: the kernel refused its mask, and
/// the substitute too when one was offered.
#[derive(Debug)]
pub struct ThreadRefusal {
    /// The thread.
    pub tid: u32,
    /// The mask last asked for it (the substitute, when one was tried).
    pub cpus: CpuSet,
    /// The kernel's answer.
    pub error: Error,
}

/// What [`set_threads_affinity_each_while`] did.
#[derive(Debug, Default)]
pub struct ThreadsAffinity {
    /// The walk as [`set_threads_affinity_while`] reports it: every thread set (by its own mask or
    /// a substitute), with the mask it had before; listings; unsettled.
    pub walk: ProcessAffinity,
    /// Threads whose own mask was refused and that took the substitute instead:
    /// `(tid, refused, set)`.
    pub substituted: Vec<(u32, CpuSet, CpuSet)>,
    /// Threads left with the mask they had.
    pub refused: Vec<ThreadRefusal>,
}

/// [`set_threads_affinity_while`] that goes on past a thread the kernel refuses, for putting
/// masks back: every thread listed gets its mask or is reported in
/// [`ThreadsAffinity::refused`], whatever came before it in the listing. `instead(tid, refused,
/// error)` may offer one substitute for a refused mask (`None`: leave the thread as it is); it is
/// tried once. `Ok(None)` when the process is gone (or `still()` says it changed) before any
/// thread was set or refused; `Err` only when its threads cannot be listed.
///
/// Why a second walk (review of 2026-11-30): restoring stopped at the first thread whose recorded
/// original the kernel no longer takes (EINVAL after a CPU went offline or the cpuset narrowed),
/// and every thread later in the listing kept the daemon's mask. A placement keeps the fail-fast
/// walk: there a refusal means the plan does not fit, and going on would place half a process.
pub fn set_threads_affinity_each_while(
    pid: u32,
    max_rounds: u32,
    mut mask_for: impl FnMut(u32) -> Option<CpuSet>,
    mut instead: impl FnMut(u32, &CpuSet, &Error) -> Option<CpuSet>,
    still: impl FnMut() -> bool,
) -> Result<Option<ThreadsAffinity>> {
    let mut out = ThreadsAffinity::default();
    let walk = walk_threads(pid, max_rounds, still, |tid| {
        let Some(cpus) = mask_for(tid) else { return Ok(()) };
        let original = match sched_getaffinity(tid as libc::pid_t) {
            Ok(c) => c,
            Err(e) if e.errno() == Some(libc::ESRCH) => return Ok(()),
            Err(error) => {
                out.refused.push(ThreadRefusal { tid, cpus, error });
                return Ok(());
            }
        };
        if !still_listed(pid, tid) {
            return Ok(());
        }
        let error = match sched_setaffinity(tid as libc::pid_t, &cpus) {
            Ok(()) => {
                out.walk.threads.push((tid, original));
                return Ok(());
            }
            Err(e) if e.errno() == Some(libc::ESRCH) => return Ok(()),
            Err(e) if e.errno() == Some(libc::EINVAL) && kernel_owns_affinity(pid, tid) => {
                out.walk.kernel_owned.push(tid);
                return Ok(());
            }
            Err(e) => e,
        };
        match instead(tid, &cpus, &error).filter(|s| *s != cpus && !s.is_empty()) {
            Some(sub) => match sched_setaffinity(tid as libc::pid_t, &sub) {
                Ok(()) => {
                    out.walk.threads.push((tid, original));
                    out.substituted.push((tid, cpus, sub));
                }
                Err(e) if e.errno() == Some(libc::ESRCH) => {}
                Err(error) => out.refused.push(ThreadRefusal { tid, cpus: sub, error }),
            },
            None => out.refused.push(ThreadRefusal { tid, cpus, error }),
        }
        Ok(())
    })?;
    out.walk.rounds = walk.rounds;
    out.walk.unsettled = walk.unsettled;
    let touched = !out.walk.threads.is_empty() || !out.refused.is_empty() || !out.walk.kernel_owned.is_empty();
    Ok(if walk.gone && !touched { None } else { Some(out) })
}

/// How a walk over a process's threads ended ([`walk_threads`]).
struct Walk {
    /// Listings made.
    rounds: u32,
    /// The last listing allowed still showed new threads (see [`ProcessAffinity::unsettled`]).
    unsettled: bool,
    /// The process was gone (or `still()` said it changed) before the walk settled.
    gone: bool,
}

/// Whether `tid` is still a thread of `pid` (`/proc/PID/task/TID` exists), asked right before each
/// affinity call of a walk: a thread listed a moment ago that exited since leaves its tid free, and
/// another process may have it by now (at once when something sets `ns_last_pid`, otherwise once
/// the pid space wraps), while `sched_setaffinity` takes a bare tid. procfs answers ENOENT for a
/// tid of another thread group under this directory. Only a confirmed absence counts: any other
/// error leaves the decision to the call, as before (review helper-37; the daemon's one-thread
/// path asked this already).
pub fn still_listed(pid: u32, tid: u32) -> bool {
    !matches!(
        std::fs::symlink_metadata(format!("/proc/{pid}/task/{tid}")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound
    )
}

/// The walk both forms share (see the module essay): lists `pid`'s threads, calls `each(tid)` once
/// for every thread not seen before, and lists again until a quiet listing is confirmed
/// [`SETTLE`] later, at most `max_rounds` listings; `still()` is asked before each. An error from
/// `each` ends the walk with it.
fn walk_threads(
    pid: u32,
    max_rounds: u32,
    mut still: impl FnMut() -> bool,
    mut each: impl FnMut(u32) -> Result<()>,
) -> Result<Walk> {
    let mut walk = Walk { rounds: 0, unsettled: false, gone: false };
    let mut done: Vec<u32> = Vec::new();
    let mut confirming = false;
    for round in 0..max_rounds.max(1) {
        if !still() {
            walk.gone = true;
            return Ok(walk);
        }
        let listing = list_threads(pid).map_err(|e| Error::Syscall {
            syscall: "readdir",
            args: format!("/proc/{pid}/task"),
            errno: e.raw_os_error().unwrap_or(libc::EIO),
        })?;
        let Some(tids) = listing else {
            walk.gone = true;
            return Ok(walk);
        };
        walk.rounds = round + 1;
        let new: Vec<u32> = tids.into_iter().filter(|t| done.binary_search(t).is_err()).collect();
        if new.is_empty() {
            if confirming {
                walk.unsettled = false;
                return Ok(walk);
            }
            confirming = true;
            std::thread::sleep(SETTLE);
            continue;
        }
        confirming = false;
        walk.unsettled = true;
        for tid in new {
            let at = done.partition_point(|&d| d < tid);
            done.insert(at, tid);
            each(tid)?;
        }
    }
    Ok(walk)
}

/// Bit 63 of a pagemap entry: the page is present in RAM.
const PAGEMAP_PRESENT: u64 = 1 << 63;

/// Bit 56 of a pagemap entry: the page is mapped by this process alone (map count 1; since Linux
/// 4.2, Documentation/admin-guide/mm/pagemap.rst). The pages `MPOL_MF_MOVE` may move: move_pages
/// answers EACCES for the others.
const PAGEMAP_EXCLUSIVE: u64 = 1 << 56;

/// Pagemap entries read per `pread`, 8 bytes each: 4096 entries = 32 KiB = 16 MiB of address space
/// with 4 KiB pages. A bound on the buffer, nothing else.
const PAGEMAP_CHUNK: usize = 4096;

/// Addresses of the pages of process `pid` within `[start, start + len)` that are present in RAM
/// (`/proc/PID/pagemap` bit 63), at most `limit` of them, in address order. `Ok(None)` when the
/// process is gone. Unmapped parts of the range read as not present.
pub fn resident_pages(pid: u32, start: u64, len: u64, page_size: u64, limit: usize) -> io::Result<Option<Vec<usize>>> {
    pages_where(pid, start, len, page_size, limit, PAGEMAP_PRESENT)
}

/// As [`resident_pages`], only the pages this process alone maps (pagemap bit 56): the ones a
/// `MoveFlags::Own` move can move. A page shared with another process (a library's page cache, a
/// page still shared with a parent after fork) is left out rather than asked for and refused.
pub fn exclusive_pages(pid: u32, start: u64, len: u64, page_size: u64, limit: usize) -> io::Result<Option<Vec<usize>>> {
    pages_where(pid, start, len, page_size, limit, PAGEMAP_PRESENT | PAGEMAP_EXCLUSIVE)
}

/// The pages of the range whose pagemap entry has every bit of `bits`.
fn pages_where(
    pid: u32,
    start: u64,
    len: u64,
    page_size: u64,
    limit: usize,
    bits: u64,
) -> io::Result<Option<Vec<usize>>> {
    let path = format!("/proc/{pid}/pagemap");
    let f = match File::open(&path) {
        Ok(f) => f,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ESRCH)) => return Ok(None),
        Err(e) => return Err(e),
    };
    let ps = page_size.max(1);
    let first = start / ps;
    let end = start.saturating_add(len).div_ceil(ps);
    let mut out = Vec::new();
    let mut buf = vec![0u8; PAGEMAP_CHUNK * 8];
    let mut page = first;
    while page < end && out.len() < limit {
        let n = ((end - page) as usize).min(PAGEMAP_CHUNK);
        let got = match f.read_at(&mut buf[..n * 8], page * 8) {
            Ok(0) => break,
            Ok(g) => g / 8,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ESRCH) | Some(libc::ENOENT)) => return Ok(None),
            Err(e) => return Err(e),
        };
        for i in 0..got {
            let entry = u64::from_ne_bytes(buf[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
            if entry & bits == bits {
                out.push(((page + i as u64) * ps) as usize);
                if out.len() >= limit {
                    break;
                }
            }
        }
        page += got as u64;
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flags field is the ninth after the command name's last `)`, whatever the name holds;
    /// a line cut short has none.
    #[test]
    fn stat_flags_split_after_the_name() {
        // An io-wq worker of 5.15: PF_NO_SETAFFINITY | PF_FORKNOEXEC | PF_IO_WORKER, comm "iou-wrk-9913".
        let worker = b"9915 (iou-wrk-9913) S 1 9913 4280 34816 9913 67108944 0 0 0 0 0 0 0 0 20 0 2 0 364627";
        assert_eq!(stat_flags(worker), Some(67_108_944));
        assert_ne!(67_108_944 & PF_NO_SETAFFINITY, 0);
        let odd = b"77 (a) 1 2 3 4 5 6 (b)) S 1 77 77 0 -1 4194304 97 0";
        assert_eq!(stat_flags(odd), Some(4_194_304));
        assert_eq!(stat_flags(b"77 (a) S 1 77"), None);
        assert_eq!(stat_flags(b"no name"), None);
    }

    /// The identity check asked before each listing: false from the start changes no thread and
    /// reads as gone.
    #[test]
    fn a_walk_whose_process_changed_sets_nothing() {
        let me = std::process::id();
        let before = sched_getaffinity(0).unwrap();
        let one: CpuSet = std::iter::once(before.first().unwrap()).collect();
        let mut asked = 0;
        let r = set_process_affinity_while(
            me,
            &one,
            4,
            |_, _| panic!("no thread is changed"),
            || {
                asked += 1;
                false
            },
        );
        assert!(matches!(r, Ok(None)), "{r:?}");
        assert_eq!(asked, 1);
        assert_eq!(sched_getaffinity(0).unwrap(), before);
    }

    /// The restoring walk goes on past a refused thread (review of 2026-11-30). Two threads of
    /// this process: the first listed is asked for a CPU that is not online (EINVAL), the second
    /// for one that is. The fail-fast walk stops at the first and leaves the second alone; the
    /// restoring walk sets the second and reports the first, and with a substitute offered the
    /// first takes it.
    #[test]
    fn the_restoring_walk_goes_on_past_a_refused_thread() {
        let me = std::process::id();
        let mine = sched_getaffinity(0).unwrap();
        let one: CpuSet = std::iter::once(mine.first().unwrap()).collect();
        let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
        let away: CpuSet = std::iter::once(CpuSet::parse_list(online.trim()).unwrap().last().unwrap() + 1).collect();
        let (tx, rx) = std::sync::mpsc::channel();
        let hold = std::sync::Arc::new(std::sync::Barrier::new(3));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (tx, hold) = (tx.clone(), hold.clone());
                std::thread::spawn(move || {
                    // SAFETY: gettid has no preconditions.
                    tx.send(unsafe { libc::gettid() } as u32).unwrap();
                    hold.wait();
                })
            })
            .collect();
        let mut tids = [rx.recv().unwrap(), rx.recv().unwrap()];
        tids.sort_unstable();
        let [first, second] = tids;
        let masks = |t: u32| match t {
            t if t == first => Some(away.clone()),
            t if t == second => Some(one.clone()),
            _ => None,
        };
        let fail_fast = set_threads_affinity_while(me, 8, masks, |_, _| {}, || true);
        assert_eq!(fail_fast.map(|_| ()).unwrap_err().errno(), Some(libc::EINVAL));
        assert_eq!(sched_getaffinity(second as libc::pid_t).unwrap(), mine, "the fail-fast walk stopped first");
        let r = set_threads_affinity_each_while(me, 8, masks, |_, _, _| None, || true).unwrap().unwrap();
        assert_eq!(sched_getaffinity(second as libc::pid_t).unwrap(), one, "set past the refused thread");
        assert_eq!(r.refused.len(), 1, "{r:?}");
        assert_eq!((r.refused[0].tid, r.refused[0].error.errno()), (first, Some(libc::EINVAL)));
        assert_eq!(r.walk.threads.iter().map(|t| t.0).collect::<Vec<_>>(), vec![second]);
        let r = set_threads_affinity_each_while(me, 8, masks, |_, _, _| Some(one.clone()), || true).unwrap().unwrap();
        assert!(r.refused.is_empty(), "{r:?}");
        assert_eq!(r.substituted, vec![(first, away.clone(), one.clone())]);
        assert_eq!(sched_getaffinity(first as libc::pid_t).unwrap(), one, "the substitute");
        hold.wait();
        workers.into_iter().for_each(|w| w.join().unwrap());
    }

    #[test]
    fn resident_pages_of_own_buffer() {
        let ps = 4096u64;
        // 64 pages, the first 10 touched.
        let mut v = vec![0u8; 64 * ps as usize + ps as usize];
        let base = (v.as_ptr() as u64).div_ceil(ps) * ps;
        let off = (base - v.as_ptr() as u64) as usize;
        for i in 0..10 {
            v[off + i * ps as usize] = 1;
        }
        let pages = resident_pages(std::process::id(), base, 64 * ps, ps, usize::MAX).unwrap().unwrap();
        // The untouched pages of a fresh zeroed allocation may be present too (calloc from a
        // reused heap), so only the touched ones are asserted.
        for i in 0..10u64 {
            assert!(pages.contains(&((base + i * ps) as usize)), "page {i} not reported present");
        }
        let limited = resident_pages(std::process::id(), base, 64 * ps, ps, 3).unwrap().unwrap();
        assert_eq!(limited.len(), 3);
        assert!(resident_pages(u32::MAX - 1, 0, ps, ps, 1).unwrap().is_none());
    }

    /// exclusive_pages leaves out the pages another process maps too: after fork the parent's
    /// touched private pages are mapped by the child as well (copy-on-write, map count 2) until
    /// one of them writes; those the parent writes again are its own once more.
    #[test]
    fn exclusive_pages_leave_out_pages_shared_after_fork() {
        // SAFETY: sysconf has no preconditions.
        let ps = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let len = 16 * ps;
        // SAFETY: a fresh private anonymous mapping, unmapped at the end.
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
        let base = p as usize;
        let touch = |i: usize, v: u8| {
            // SAFETY: page i of the mapping, within `len`.
            unsafe { std::ptr::write_volatile((base + i * ps) as *mut u8, v) }
        };
        (0..16).for_each(|i| touch(i, 1));
        let me = std::process::id();
        let (b, l, s) = (base as u64, len as u64, ps as u64);
        let alone = exclusive_pages(me, b, l, s, usize::MAX).unwrap().unwrap();
        let mut fds = [0i32; 2];
        // SAFETY: a two-int array for the pipe's ends.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: the child only reads the pipe and _exits (async-signal-safe calls).
        let kid = unsafe { libc::fork() };
        if kid == 0 {
            let mut byte = 0u8;
            // SAFETY: as above.
            unsafe {
                libc::close(fds[1]);
                libc::read(fds[0], (&mut byte as *mut u8).cast(), 1);
                libc::_exit(0);
            }
        }
        assert!(kid > 0);
        let present = resident_pages(me, b, l, s, usize::MAX).unwrap().unwrap();
        let shared = exclusive_pages(me, b, l, s, usize::MAX).unwrap().unwrap();
        (0..4).for_each(|i| touch(i, 2));
        let rewritten = exclusive_pages(me, b, l, s, usize::MAX).unwrap().unwrap();
        // SAFETY: closing our ends lets the child exit; reap it; unmap the buffer.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
            libc::waitpid(kid, std::ptr::null_mut(), 0);
            libc::munmap(p, len);
        }
        assert_eq!(alone.len(), 16, "before fork every page is this process's alone");
        assert_eq!(present.len(), 16, "all present after fork");
        assert!(shared.is_empty(), "after fork the child maps them too: {shared:?}");
        assert_eq!(rewritten, (0..4).map(|i| base + i * ps).collect::<Vec<_>>());
    }
}
