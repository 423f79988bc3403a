//! Reads that take a process's memory-map lock, under a deadline ([`StallGuard`]).
//!
//! # Problem
//!
//! `/proc/PID/numa_maps` and `/proc/PID/maps` are produced under the process's `mmap_lock`, taken
//! for reading (`mmap_read_lock_killable`). A process can hold that lock, or have a writer queued
//! on it, for as long as the kernel waits for something else: a task of it faulting on a file of a
//! hung NFS or FUSE server through `/proc/PID/mem` or `get_user_pages` (no fault retry there: the
//! lock stays held across the wait), another of its tasks then asking for the write lock (`mmap`,
//! `munmap`, `mprotect`) and every later reader queued behind that writer. The reader waits in the
//! kernel, in D state, killable only by a fatal signal. This is the "ps hangs" of hung file
//! servers. A daemon whose loop reads that file waits with it: no placement for any process, no
//! answer to `status`, a SIGTERM restore that never comes.
//!
//! # Approach
//!
//! ```text
//!   caller ──job(pid, path, buffer)──▶ queue ──▶ worker thread (one per job in flight, reused)
//!      │                                           open + read the file, reply
//!      └─ wait for the reply, up to `deadline`; then look at the read's progress and the worker's state
//!           queued, not started yet ─────────────▶ wait on
//!           bytes came in since the last look ───▶ wait on (slow, not stuck)
//!           running ('R': a long page-table walk) ─▶ wait on, up to RUNNING_GRACE deadlines
//!           otherwise (sleeping in the kernel) ───▶ stalled: the process is marked stuck, the
//!                                                    caller gets ErrorKind::TimedOut, the worker
//!                                                    is left to its read
//!   a read for a stuck process ──────────────────▶ TimedOut at once (no second thread waits)
//!   the stuck read returns (the lock came free) ─▶ the mark goes, the worker serves the queue again
//! ```
//!
//! A stalled worker cannot be cancelled (the kernel would need a fatal signal to the whole daemon);
//! it is left blocked, and another worker is started when a job finds none idle. The number of
//! stuck workers is bounded ([`MAX_STUCK`]): past it every guarded read fails at once, so a
//! host with hundreds of hung processes costs a bounded number of threads.
//!
//! The state of the worker is read from `/proc/self/task/TID/stat` of the live system whatever
//! root the reader reads: it is this process's own thread.
//!
//! # Limits
//!
//! A read is declared stalled after one deadline at the earliest, and only after a whole deadline
//! without a byte (seq_file files such as numa_maps take the lock again for every `read` call, so
//! a long read of a busy process sleeps between chunks: that is progress, not a stall); the caller
//! waits that long once per stuck process (the next reads of it fail at once until the stuck one
//! returns). [`MAX_STUCK`] is checked when a read starts, so reads that stall together on several
//! reader threads can pass it by that many. The process-wide [`known_stuck`] lets code that would
//! wait on the same lock by another way (a cgroup move) keep off. Only the files
//! given to the guard are guarded: the daemon gives it numa_maps and maps. Measured on Linux 6.18
//! with a process held this way (a FUSE server that never answers, `crates/daemon/tests/stalled.rs`'s
//! set-up, each file read with a 2 s timeout): numa_maps, smaps_rollup, cmdline and environ wait;
//! maps does not there (recent kernels read it under per-VMA locks; older ones take the lock);
//! stat, statm, status, schedstat, sched, io, cgroup, wchan, the fd directory and every thread's
//! stat, status and schedstat do not take it.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::reader::{read_into_counted, Buf};

/// Most workers left blocked in a read at once. Default 32, unit threads. Source: a choice (a
/// blocked worker is a thread with an untouched stack; the processes a hung file server can hold
/// are usually a handful). What it prevents: a host where hundreds of processes hang on one server
/// costing the daemon hundreds of threads; past it, guarded reads fail at once until one returns.
pub const MAX_STUCK: usize = 32;

/// Deadlines a worker that is running (state 'R', not sleeping in the kernel) is given before its
/// read counts as stalled anyway. Default 15. Source: a choice: numa_maps of a process of a few
/// terabytes walks its page tables for seconds; 15 x the daemon's 2 s deadline is 30 s. What it
/// prevents: a large process's honest read cut short, and a read that runs for ever (a kernel bug)
/// holding the loop.
pub const RUNNING_GRACE: u32 = 15;

/// Pids with a read stuck in any guard of this process, counted per guard: a fact about the
/// process, not one reader's, for the code that would otherwise wait on the same lock through
/// another door (the daemon's cgroup writes: `cpuset_attach` rebinds the memory policy under the
/// lock taken for writing).
static STUCK_ANYWHERE: Mutex<BTreeMap<u32, usize>> = Mutex::new(BTreeMap::new());

/// Whether a read of process `pid`'s memory map is stuck in any [`StallGuard`] of this process.
pub fn known_stuck(pid: u32) -> bool {
    STUCK_ANYWHERE.lock().unwrap_or_else(|p| p.into_inner()).contains_key(&pid)
}

fn mark_anywhere(pid: u32, stuck: bool) {
    let mut m = STUCK_ANYWHERE.lock().unwrap_or_else(|p| p.into_inner());
    if stuck {
        *m.entry(pid).or_insert(0) += 1;
    } else if let Some(n) = m.get_mut(&pid) {
        *n -= 1;
        if *n == 0 {
            m.remove(&pid);
        }
    }
}

/// A process whose read is stuck.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stuck {
    /// The process.
    pub pid: u32,
    /// The file whose read is stuck.
    pub path: String,
    /// How long it has been stuck (since the read started).
    pub for_: Duration,
}

/// Counts of a [`StallGuard`], since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StallCounts {
    /// Reads declared stalled.
    pub stalled: u64,
    /// Reads refused at once (their process had a read stuck, or [`MAX_STUCK`] were).
    pub refused: u64,
    /// Stalled reads that returned later (their worker serves again).
    pub returned: u64,
    /// Worker threads started.
    pub workers_started: u64,
}

/// One job's shared state between its caller and its worker.
#[derive(Debug, Default)]
struct Ticket {
    /// The worker's thread id once it took the job, 0 before.
    tid: AtomicI32,
    /// The worker's own `/proc/thread-self/stat`, opened by the worker (so it names that thread
    /// whatever pid namespace the mounted /proc numbers threads in), set when it took the job.
    stat: OnceLock<Arc<File>>,
    /// Bytes read so far, and one more per `read` call that returned: a read making progress
    /// (seq_file takes the lock again for every call) is never given up.
    progress: AtomicU64,
    /// Set (under the state lock) when the caller gave up on the job.
    abandoned: AtomicBool,
}

/// Why a guarded read failed at once or was given up: the payload of the `ErrorKind::TimedOut`
/// errors [`StallGuard`] returns (a real ETIMEDOUT of a read has none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StallError {
    /// The file.
    pub path: String,
    /// True when a read of this process is stuck (now, or since earlier); false when the read was
    /// refused only because [`MAX_STUCK`] reads of other processes are.
    pub own: bool,
    /// How long the stuck read has been waiting.
    pub waited: Duration,
}

impl std::fmt::Display for StallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.own {
            write!(
                f,
                "{}: read blocked in the kernel for {:.1} s (the process's memory map is locked: one of its tasks \
                 waits, e.g. on a hung file server); left alone until the read returns",
                self.path,
                self.waited.as_secs_f64()
            )
        } else {
            write!(f, "{}: not read: {MAX_STUCK} reads of other processes are blocked in the kernel", self.path)
        }
    }
}

impl std::error::Error for StallError {}

impl StallError {
    /// The guard's own error inside `e`, if it is one.
    pub fn of(e: &io::Error) -> Option<&StallError> {
        e.get_ref().and_then(|r| r.downcast_ref::<StallError>())
    }

    fn into_io(self) -> io::Error {
        io::Error::new(io::ErrorKind::TimedOut, self)
    }
}

type Done = (Buf, io::Result<()>);

struct Job {
    pid: u32,
    path: String,
    buf: Buf,
    single_record: bool,
    reply: SyncSender<Done>,
    ticket: Arc<Ticket>,
}

struct StuckRead {
    path: String,
    started: Instant,
    /// The worker blocked in the read.
    tid: i32,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    /// Workers waiting for a job.
    idle: usize,
    stuck: BTreeMap<u32, StuckRead>,
    counts: StallCounts,
}

struct Inner {
    state: Mutex<State>,
    wake: Condvar,
    deadline: Duration,
}

/// Runs reads on worker threads and gives up on one that sleeps in the kernel past a deadline
/// (see the module essay). Cloning shares the workers and the stuck marks.
#[derive(Clone)]
pub struct StallGuard {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for StallGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StallGuard").field("deadline", &self.inner.deadline).finish_non_exhaustive()
    }
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether the thread whose `/proc/thread-self/stat` is `stat` is running or runnable (state
/// 'R'); false when it sleeps or cannot be read.
fn running(stat: &File) -> bool {
    let mut text = [0u8; 512];
    let Ok(n) = stat.read_at(&mut text, 0) else { return false };
    let text = &text[..n];
    // The name may hold ')' and blanks: the state is the first field after the last ')'.
    let Some(close) = text.iter().rposition(|&b| b == b')') else { return false };
    text[close + 1..].iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'R')
}

fn gettid() -> i32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::gettid() }
}

impl StallGuard {
    /// A guard whose reads are judged after `deadline` (at least 1 ms).
    pub fn new(deadline: Duration) -> Self {
        StallGuard {
            inner: Arc::new(Inner {
                state: Mutex::new(State::default()),
                wake: Condvar::new(),
                deadline: deadline.max(Duration::from_millis(1)),
            }),
        }
    }

    /// The deadline.
    pub fn deadline(&self) -> Duration {
        self.inner.deadline
    }

    /// The processes with a read stuck now, by pid.
    pub fn stuck(&self) -> Vec<Stuck> {
        let now = Instant::now();
        lock(&self.inner.state)
            .stuck
            .iter()
            .map(|(&pid, s)| Stuck { pid, path: s.path.clone(), for_: now.saturating_duration_since(s.started) })
            .collect()
    }

    /// Whether `pid` has a read stuck now.
    pub fn is_stuck(&self, pid: u32) -> bool {
        lock(&self.inner.state).stuck.contains_key(&pid)
    }

    /// The counts since the guard was made.
    pub fn counts(&self) -> StallCounts {
        lock(&self.inner.state).counts
    }

    /// Reads `path` (a file of process `pid`) into `buf` on a worker, as `read_into` would.
    /// `ErrorKind::TimedOut` when the read stalled now or one of this process's is stuck; `buf`
    /// is then a fresh buffer (the old one stays with the stuck read).
    pub(crate) fn read(&self, pid: u32, path: &str, buf: &mut Buf, single_record: bool) -> io::Result<()> {
        let started = Instant::now();
        let ticket = Arc::new(Ticket::default());
        let (tx, rx) = sync_channel::<Done>(1);
        {
            let mut st = lock(&self.inner.state);
            if let Some(e) = st.stuck.get(&pid).map(|s| StallError {
                path: s.path.clone(),
                own: true,
                waited: started.duration_since(s.started),
            }) {
                st.counts.refused += 1;
                return Err(e.into_io());
            }
            if st.stuck.len() >= MAX_STUCK {
                st.counts.refused += 1;
                return Err(StallError { path: path.to_owned(), own: false, waited: Duration::ZERO }.into_io());
            }
            // A worker for every job waiting (one stuck in a read serves no one): started before
            // the job is queued, so a thread that cannot start leaves nothing behind.
            if st.queue.len() + 1 > st.idle {
                self.spawn(&mut st)?;
            }
            let job = Job {
                pid,
                path: path.to_owned(),
                buf: std::mem::replace(buf, Buf::empty()),
                single_record,
                reply: tx,
                ticket: ticket.clone(),
            };
            st.queue.push_back(job);
        }
        self.inner.wake.notify_one();
        self.wait(pid, path, buf, started, &ticket, &rx)
    }

    fn wait(
        &self,
        pid: u32,
        path: &str,
        buf: &mut Buf,
        started: Instant,
        ticket: &Ticket,
        rx: &Receiver<Done>,
    ) -> io::Result<()> {
        let mut running_deadlines = 0u32;
        let mut progress = 0u64;
        loop {
            let r = match rx.recv_timeout(self.inner.deadline) {
                Ok(done) => done,
                Err(RecvTimeoutError::Timeout) => {
                    let tid = ticket.tid.load(Ordering::Acquire);
                    if tid == 0 {
                        // Queued behind other jobs: a worker is on its way (see `read`).
                        continue;
                    }
                    // Bytes came in over the last deadline: slow, not stuck.
                    let now = ticket.progress.load(Ordering::Relaxed);
                    if now != progress {
                        progress = now;
                        continue;
                    }
                    if ticket.stat.get().is_some_and(|f| running(f)) && running_deadlines < RUNNING_GRACE {
                        running_deadlines += 1;
                        continue;
                    }
                    let mut st = lock(&self.inner.state);
                    // Finished while we looked: taken after all.
                    if let Ok(done) = rx.try_recv() {
                        done
                    } else {
                        // Seen by the worker, under the same lock, when its read returns.
                        ticket.abandoned.store(true, Ordering::Release);
                        st.counts.stalled += 1;
                        let waited = started.elapsed();
                        if st.stuck.insert(pid, StuckRead { path: path.to_owned(), started, tid }).is_none() {
                            mark_anywhere(pid, true);
                        }
                        *buf = Buf::new();
                        return Err(StallError { path: path.to_owned(), own: true, waited }.into_io());
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    *buf = Buf::new();
                    return Err(io::Error::other(format!("{path}: the reading thread ended without an answer")));
                }
            };
            *buf = r.0;
            return r.1;
        }
    }

    /// Starts a worker (the caller holds the state lock).
    fn spawn(&self, st: &mut State) -> io::Result<()> {
        let inner = self.inner.clone();
        std::thread::Builder::new()
            .name("np-mm-read".into())
            .stack_size(WORKER_STACK)
            .spawn(move || worker(&inner))
            .map(|_| ())?;
        st.counts.workers_started += 1;
        Ok(())
    }
}

/// Stack of a worker thread, bytes: 256 KiB. It reads into a heap buffer and calls nothing deep;
/// the default 2 MiB is address space 32 stuck workers would hold for nothing.
const WORKER_STACK: usize = 256 << 10;

fn worker(inner: &Inner) {
    let tid = gettid();
    let stat = File::open("/proc/thread-self/stat").ok().map(Arc::new);
    loop {
        let mut job = {
            let mut st = lock(&inner.state);
            loop {
                if let Some(job) = st.queue.pop_front() {
                    break job;
                }
                st.idle += 1;
                st = inner.wake.wait(st).unwrap_or_else(|p| p.into_inner());
                st.idle -= 1;
            }
        };
        if let Some(f) = &stat {
            let _ = job.ticket.stat.set(f.clone());
        }
        job.ticket.tid.store(tid, Ordering::Release);
        let r = read_into_counted(Path::new(&job.path), &mut job.buf, job.single_record, &job.ticket.progress);
        let mut st = lock(&inner.state);
        if job.ticket.abandoned.load(Ordering::Acquire) {
            // The caller gave up on this read: it was stuck, and is no longer.
            if st.stuck.get(&job.pid).is_some_and(|s| s.tid == tid) {
                st.stuck.remove(&job.pid);
                mark_anywhere(job.pid, false);
            }
            st.counts.returned += 1;
        } else {
            // Never blocks: a channel of one slot, one reply per job.
            let _ = job.reply.try_send((job.buf, r));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Polls `f` every 5 ms until it holds; fails after 60 s, saying it timed out waiting for
    /// `what` (a bound for a loaded machine: a woken thread may wait long for a CPU).
    fn until(what: &str, mut f: impl FnMut() -> bool) {
        let t0 = Instant::now();
        while !f() {
            assert!(t0.elapsed() < Duration::from_secs(60), "timed out after 60 s waiting for {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_sleeping_thread_is_not_running_a_spinning_one_is() {
        let own_stat = || File::open("/proc/thread-self/stat").unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let spin = std::thread::spawn(move || {
            tx.send(own_stat()).unwrap();
            while !s.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        let f = rx.recv().unwrap();
        // A spinning thread is 'R' whether on a CPU or preempted.
        assert!(running(&f));
        stop.store(true, Ordering::Relaxed);
        spin.join().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (ftx, frx) = std::sync::mpsc::channel();
        let sleeper = std::thread::spawn(move || {
            ftx.send(own_stat()).unwrap();
            let _ = rx.recv();
        });
        let f = frx.recv().unwrap();
        // Until it reaches the wait (runnable and not yet run, on a loaded machine, it reads 'R').
        until("the thread to sleep in its receive", || !running(&f));
        drop(tx);
        sleeper.join().unwrap();
        assert!(!running(&f), "a thread that is gone is not running");
    }

    struct Dir(std::path::PathBuf);

    impl Dir {
        /// A fresh directory of this test process under the temporary directory.
        fn new(name: &str) -> Dir {
            let d = Dir(std::env::temp_dir().join(format!("numapilot-{name}-{}", std::process::id())));
            let _ = std::fs::remove_dir_all(&d.0);
            std::fs::create_dir_all(&d.0).unwrap();
            d
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn fifo(dir: &Dir, name: &str) -> String {
        let p = dir.0.join(name);
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        p.to_string_lossy().into_owned()
    }

    /// A FIFO's open waits in the kernel until a writer comes (the worker sleeps, state 'S'), as a
    /// read behind a locked memory map does: the guard gives up on it, refuses its process's
    /// next reads at once, serves other processes meanwhile, and takes the process back once
    /// the read returned.
    #[test]
    fn a_read_that_sleeps_past_the_deadline_is_given_up_and_its_process_refused_until_it_returns() {
        let dir = Dir::new("stall");
        let blocked = fifo(&dir, "blocked");
        let plain = dir.0.join("plain");
        std::fs::write(&plain, b"N0=1\n").unwrap();
        let plain = plain.to_string_lossy().into_owned();
        let g = StallGuard::new(Duration::from_millis(50));
        let mut buf = Buf::new();
        let e = g.read(77, &blocked, &mut buf, false).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(e.to_string().contains(&blocked) && e.to_string().contains("blocked in the kernel"), "{e}");
        assert!(StallError::of(&e).is_some_and(|x| x.own && x.path == blocked), "{e:?}");
        assert!(g.is_stuck(77) && known_stuck(77));
        let stuck = g.stuck();
        assert_eq!((stuck.len(), stuck[0].pid, stuck[0].path.as_str()), (1, 77, blocked.as_str()));
        assert!(stuck[0].for_ >= Duration::from_millis(50), "{stuck:?}");
        // The next read of 77 (of any of its files) is refused at once; another process is read.
        let again = g.read(77, &plain, &mut buf, false).unwrap_err();
        assert_eq!(again.kind(), io::ErrorKind::TimedOut);
        g.read(78, &plain, &mut buf, false).unwrap();
        assert_eq!(buf.bytes(), b"N0=1\n");
        let c = g.counts();
        assert_eq!((c.stalled, c.refused, c.returned), (1, 1, 0));
        assert_eq!(c.workers_started, 2, "the stuck worker stays blocked; a second one served 78");
        // A writer comes and goes: the blocked open returns, the mark goes.
        drop(std::fs::OpenOptions::new().write(true).open(&blocked).unwrap());
        until("77's mark to go once its read returned", || !g.is_stuck(77));
        assert!(!known_stuck(77));
        assert_eq!(g.counts().returned, 1);
        g.read(77, &plain, &mut buf, false).unwrap();
        assert_eq!(buf.bytes(), b"N0=1\n");
        // Both workers serve again: no third was needed.
        assert_eq!(g.counts().workers_started, 2);
    }

    /// Past MAX_STUCK blocked reads every guarded read fails at once: the threads are bounded.
    #[test]
    fn blocked_reads_are_bounded() {
        let dir = Dir::new("stall-cap");
        let g = StallGuard::new(Duration::from_millis(10));
        let mut buf = Buf::new();
        let fifos: Vec<String> = (0..=MAX_STUCK).map(|i| fifo(&dir, &format!("f{i}"))).collect();
        for (pid, f) in fifos.iter().enumerate() {
            let e = g.read(pid as u32, f, &mut buf, false).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        }
        let c = g.counts();
        assert_eq!((c.stalled, c.refused), (MAX_STUCK as u64, 1));
        // The last one was refused for the others' sake, not its own.
        let last = g.read(1000, &fifos[0], &mut buf, false).unwrap_err();
        assert!(StallError::of(&last).is_some_and(|x| !x.own), "{last:?}");
        assert_eq!(c.workers_started, MAX_STUCK as u64);
        assert!(g.counts().refused == 2 && g.stuck().len() == MAX_STUCK);
        // Release them all, so no thread of the test binary stays blocked.
        for f in &fifos[..MAX_STUCK] {
            drop(std::fs::OpenOptions::new().write(true).open(f).unwrap());
        }
        until("every released read to return", || g.stuck().is_empty());
    }

    /// A read that sleeps between chunks but keeps bringing bytes (a FIFO fed 5 bytes every 10 ms
    /// for 2.5 s, read under a 1 s deadline: the writer sleeps, so does the worker; the guard looks
    /// at the read twice at least) is slow, not stuck: it is waited for. Given up after one look
    /// at a sleeping worker, it failed after one deadline (review helper-35). The deadline is 100
    /// of the writer's pauses: the writer must not go a whole deadline without a CPU, which is the
    /// case the guard rightly gives up. At 5 (50 ms) a fresh-clone CI run beside a build on this
    /// 2-CPU host starved the writer for two deadlines (2026-12-01); at 25 (250 ms) it failed 1
    /// run in 10 with the test at nice 19 beside 8 busy loops (2026-12-02).
    #[test]
    fn a_slow_read_that_makes_progress_is_not_given_up() {
        let dir = Dir::new("stall-slow");
        let slow = fifo(&dir, "slow");
        let w = slow.clone();
        let writer = std::thread::spawn(move || {
            use std::io::Write as _;
            let mut f = std::fs::OpenOptions::new().write(true).open(&w).unwrap();
            for _ in 0..250 {
                f.write_all(b"N0=1\n").unwrap();
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        let g = StallGuard::new(Duration::from_secs(1));
        let mut buf = Buf::new();
        g.read(9, &slow, &mut buf, false).expect("a read that keeps making progress");
        writer.join().unwrap();
        assert_eq!(buf.bytes().len(), 1250);
        assert_eq!(g.counts().stalled, 0);
    }
}
