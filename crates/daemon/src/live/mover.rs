//! The page mover: page actions run on a thread of their own, so the decision loop goes on while
//! the kernel copies.
//!
//! # Problem
//!
//! `migrate_pages` and `move_pages` return when the last page has moved. On a real machine a
//! 32 MiB move takes milliseconds, a 10 GiB one seconds; in the rig's guests under TCG 32 MiB took
//! 1.5-5 s with the process's workers running. A loop that waits in the call decides nothing
//! meanwhile: in the race of 2026-11-27 (`scripts/race.sh`, 4-node numa01) the first process's move
//! started 0.3 s before "go" and the second process, whose workers had started away from its
//! memory, was placed 1.84 s after "go", when the copy returned; with a move started earlier
//! still (rule idle-young-memory-follows, before "go"), 2.1-5.4 s.
//!
//! # Approach
//!
//! ```text
//!   loop: plan -> apply(page action) -> mover idle?  yes: hand it the job   -> Outcome::Started
//!                                                    no:  Outcome::Refused ("busy with pid P"),
//!                                                         planned again at a later step
//!   mover thread: job -> the same page code as a synchronous move (apply::run_page_job)
//!                 -> Done { outcome, pages asked, threads the copy used } on a channel
//!   next steps: Host::finished_moves drains the channel: the budget is charged, the journal gets
//!               a `move-done` line with the move's own outcome, the pages count in the totals
//!   shutdown: the job in flight is waited for (LiveHost::wait_moves) and journaled
//! ```
//!
//! One move at a time: two processes' moves would compete for the same budget and the same
//! destination CPUs; the host's MB/s budget is charged when a move ends (its pages are only known
//! then) and a refused action costs nothing.
//!
//! Within the move, the copy is split over threads (rule "split-copy", `apply::move_list`): one
//! `move_pages` caller migrates pages one after another, each paying its unmap, TLB shootdown,
//! 4 KiB copy and remap, far below what the memory can carry (Nimble, Yan et al., ASPLOS 2019:
//! Linux's page migration leaves up to 95% of the memory bandwidth unused, and migrating several
//! pages concurrently is one of the four changes that raised its throughput 15x). A move of
//! `2 x apply::MIN_PAGES_PER_THREAD` pages or more is cut into contiguous parts, each moved by a
//! thread of its own on the destination's CPUs, at most `Job::threads` (`[actuation]
//! mover_threads`, default 4) and no more than the CPUs the mover runs on; a whole-process move
//! that would have been one `migrate_pages` call goes page by page then, so that it can be split,
//! when that page-by-page scan covers every page the process alone maps (`apply::migrate`).
//! Measured in the rig (2026-11-29, the numa01 subset above with the guest's `mover_threads` at 2
//! and at 1, alternated, nine 32 MiB moves each): 2-node median 2.1 s (1.3-2.9 s) split against
//! 1.9 s (1.5-7.4 s) not, 4-node 3.6 s (1.5-6.5 s) against 5.6 s (2.0-10.4 s); no page failed in
//! the split moves. An earlier two-thread trial had lost a whole part to pages the kernel left
//! without a status (`apply::MOVE_RETRIES` now asks for them again).
//!
//! The copy runs on the CPUs of the nodes the pages go to (`Job::cpus`, rule
//! "copy-on-destination"): the kernel copies in the calling thread, and the process whose pages
//! move was placed there and stalls on its pages while they move (its threads wait on the
//! migration entries: state D in the rig's samples), so those CPUs are the ones the move leaves
//! idle; anywhere else the copy queues behind other work, such as the other numa01 process's two
//! busy workers on a 2-CPU node. The mover's own CPU set comes back after each job; where the
//! daemon may not run on those CPUs (a cpuset), the copy runs where the mover is allowed.
//! Measured in the rig (`scripts/race.sh --reps 3 --tests numa01 --balancers numapilot
//! --no-readme`, the one 32 MiB move of each numa01 run, 2026-11-27): unpinned, 2-node median
//! 2.3 s (1.1-4.6 s, 9 moves over three runs), 4-node 3.6 s (1.0-6.1 s, 9); on the destination,
//! 2-node 1.5 s (0.9-2.2 s, 6 moves over two runs), 4-node 2.5 s (2.1-4.8 s, 6). The guests share
//! two host cores under TCG, so these spread wide; the direction held in both guests.
//!
//! # Limits
//!
//! A move in flight is not cancelled when the plan changes its mind (the next move of the same
//! process waits for it); a process that exits meanwhile ends the move with `Vanished`, as a
//! synchronous one would. One the operator takes out of numapilot's hands meanwhile (a release:
//! excluded, or out of `[include]`) stops before its next batch of pages
//! (`apply::stop_moves_of`); a single `migrate_pages` call already made runs to its end.
//!
//! A call can sleep in the kernel for as long as the process's memory map is locked (a task of it
//! waiting on a hung NFS or FUSE server with the lock held, a writer queued behind it: every
//! reader, `move_pages` too, queues behind that). The observation leaves such a process out
//! (`numapilot_observe::stall`), but a lock taken after the move started holds the one mover
//! thread, and every later move of every process behind it. Rule stuck-move-abandoned
//! ([`Mover::poll`], each step): a move none of whose calls has returned for [`STUCK_MOVE_S`]
//! (`apply::page_calls` counts them) is given up: asked to stop at its next batch should its call
//! return, its thread left to the kernel (no call can be called back out of it), a new thread
//! taking the moves from then on, none of the same process until the old call returns (status
//! and `status --check` name it; its result is taken late, like any other; at most
//! [`MAX_STUCK_MOVES`] at once, then no move starts). Progress is a call returning or CPU time of
//! the mover's threads ([`mover_progress`]), so a long copy that is working is never given up. A
//! stuck thread is never joined, at shutdown neither; the process ends only once its call
//! returns, and the daemon closes its socket and metrics port before that (`run::serve`).

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use numapilot_actuate::{sched_getaffinity, sched_setaffinity};
use numapilot_policy::{Action, Outcome};
use numapilot_topology::CpuSet;

/// One page action for the mover.
#[derive(Debug, Clone)]
pub struct Job {
    /// The action (a page action).
    pub action: Action,
    /// Base pages it may move (the host's budget and the action's own limit).
    pub allowance: u64,
    /// Host monotonic time it was handed over, ns.
    pub started_ns: u64,
    /// CPUs the copy should run on (the destination nodes' CPUs; copy-on-destination), within
    /// those the mover may use; `None`: wherever the mover runs.
    pub cpus: Option<CpuSet>,
    /// Most threads the copy may be split over (`[actuation] mover_threads`); the mover uses at
    /// most as many as it has CPUs to run on (see "split-copy" in the module essay).
    pub threads: usize,
}

/// A job that ended.
#[derive(Debug, Clone)]
pub struct Done {
    /// The job.
    pub job: Job,
    /// What became of it.
    pub outcome: Outcome,
    /// Base pages it asked the kernel to move (charged to the budget).
    pub asked: u64,
    /// Host monotonic time it ended, ns.
    pub ended_ns: u64,
    /// CPUs the copy ran on, when the mover was moved there for it (`Job::cpus` within its own
    /// set); `None`: where the mover runs anyway.
    pub ran_on: Option<CpuSet>,
    /// Most threads the copy was split over (split-copy); 0 when nothing was handed to the kernel.
    pub threads: usize,
}

/// The work of one job, given the threads it may split the copy over (at least 1): outcome, pages
/// asked and the most threads a copy used. Shared, so a mover thread started in place of a stuck
/// one runs the same code.
pub type Work = Arc<dyn Fn(&Job, usize) -> (Outcome, u64, usize) + Send + Sync>;

/// A count that grows while the page code's calls return ([`super::apply::page_calls`]): the
/// mover's sign that a job is getting on.
pub type Progress = Arc<dyn Fn() -> u64 + Send + Sync>;

/// How long a page move may go without progress before it counts as stuck in the kernel, seconds.
/// Progress is a call of the page code returning or CPU time spent by the mover's threads
/// ([`mover_progress`]): a copy that is slow but working (a whole-process `migrate_pages` of the
/// budget's 4 GiB is one call, and at the rig's TCG rate of 6-20 MiB/s it runs for minutes) burns
/// CPU in the kernel all along; a call asleep on a lock burns none. Default 60. Source: judgement:
/// a copying thread that gets no CPU time for a minute on a daemon at nice -10 is not copying.
/// What it prevents: a move whose system call sleeps behind a process's locked memory map (a task
/// of it in D state on a hung NFS or FUSE server holding the lock, a writer queued behind it)
/// holding the one mover thread, and with it every later move of every process, for as long as
/// the server stays away.
pub const STUCK_MOVE_S: u64 = 60;

/// Most moves given up as stuck and still in the kernel at once; past it no page move starts
/// (each keeps a thread and a socket). Default 4. Source: judgement: more than a few processes
/// locked at once means a file server is away, and moving pages can wait for it. Prevents: a
/// thread a process for every process behind a hung NFS mount.
pub const MAX_STUCK_MOVES: usize = 4;

/// The mover's progress count for the live host: calls of the page code that returned
/// (`apply::page_calls`) plus the CPU time, in clock ticks, of this process's threads named
/// `numapilot-mover` (the mover threads) and `numapilot-copy` (the threads a split copy runs on,
/// `apply::move_list`: a long `move_pages` call of one of them burns CPU there, not in the mover).
pub fn mover_progress() -> u64 {
    let mut ticks = 0;
    if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
        for task in dir.flatten() {
            let Ok(text) = std::fs::read_to_string(task.path().join("stat")) else { continue };
            if let Ok(st) = numapilot_observe::parse::stat::parse_stat(&text) {
                if st.comm == "numapilot-mover" || st.comm == "numapilot-copy" {
                    ticks += st.utime + st.stime;
                }
            }
        }
    }
    super::apply::page_calls().wrapping_add(ticks)
}

/// A mover thread and its channels.
struct Worker {
    jobs: Option<Sender<Job>>,
    done: Receiver<Done>,
    thread: Option<JoinHandle<()>>,
}

/// A job given up as stuck ([`Mover::poll`]): its thread is left to its system call, its `Done`
/// still taken if the call ever returns.
struct Abandoned {
    worker: Worker,
    /// The process whose pages it moves.
    pid: u32,
    /// When it was given up, host monotonic ns.
    since_ns: u64,
    /// When it was handed over, host monotonic ns.
    started_ns: u64,
}

/// The mover thread and its channels.
pub struct Mover {
    work: Work,
    progress: Progress,
    worker: Worker,
    /// The job in flight: pid and the time it was handed over.
    running: Option<(u32, u64)>,
    /// The progress count as last seen changing, and when (host monotonic ns).
    last_progress: (u64, u64),
    /// Jobs given up as stuck, still in the kernel.
    abandoned: Vec<Abandoned>,
    /// Readable when a job has ended (a byte per job, written after its `Done` is sent): the
    /// daemon's loop polls it and steps soon after, not at the end of its wait.
    wake: UnixStream,
    /// The end the threads write.
    ring: UnixStream,
    /// How long a job may go without progress before it is given up, ns ([`STUCK_MOVE_S`] unless
    /// [`Mover::with_stuck_after`] set another).
    stuck_after_ns: u64,
}

impl std::fmt::Debug for Mover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mover").field("running", &self.running).field("stuck", &self.stuck()).finish_non_exhaustive()
    }
}

impl Worker {
    fn spawn(work: Work, ring: UnixStream) -> std::io::Result<Self> {
        let (jobs, rx) = mpsc::channel::<Job>();
        let (tx, done) = mpsc::channel::<Done>();
        let mut ring = ring;
        let thread = std::thread::Builder::new().name("numapilot-mover".into()).spawn(move || {
            for job in rx {
                let pinned = job.cpus.as_ref().and_then(pin_self);
                let (outcome, asked, threads) = work(&job, copy_threads(job.threads, pinned.as_ref().map(|p| &p.0)));
                let ended_ns = numapilot_observe::reader::monotonic_ns();
                let ran_on = pinned.map(|(set, own)| {
                    // Back to the mover's own set; a failure leaves it on the last destination,
                    // and the next job's pin_self starts from there (still within what it may use).
                    let _ = sched_setaffinity(0, &own);
                    set
                });
                if tx.send(Done { job, outcome, asked, ended_ns, ran_on, threads }).is_err() {
                    break;
                }
                // A full buffer means unread wakes are waiting already: one is enough.
                let _ = ring.write(&[1]);
            }
        })?;
        Ok(Worker { jobs: Some(jobs), done, thread: Some(thread) })
    }
}

impl Mover {
    /// Starts the thread; `work` runs each job, `progress` tells whether a job is getting on.
    pub fn spawn(work: Work, progress: Progress) -> std::io::Result<Self> {
        let (wake, ring) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        ring.set_nonblocking(true)?;
        let worker = Worker::spawn(Arc::clone(&work), ring.try_clone()?)?;
        let last_progress = (progress(), 0);
        Ok(Self {
            work,
            progress,
            worker,
            running: None,
            last_progress,
            abandoned: Vec::new(),
            wake,
            ring,
            stuck_after_ns: STUCK_MOVE_S * 1_000_000_000,
        })
    }

    /// The same mover giving up a job after `after` without progress instead of [`STUCK_MOVE_S`]
    /// (`LiveTuning::stuck_move_ms`; raised to 1 ms, a longer time than u64 ns hold is that).
    pub fn with_stuck_after(mut self, after: Duration) -> Self {
        self.stuck_after_ns = u64::try_from(after.as_nanos()).unwrap_or(u64::MAX).max(1_000_000);
        self
    }

    /// How long a job may go without progress before it is given up.
    pub fn stuck_after(&self) -> Duration {
        Duration::from_nanos(self.stuck_after_ns)
    }

    /// The end the loop polls: readable once a job has ended since the last [`Mover::drain_wake`].
    pub fn wake(&self) -> &UnixStream {
        &self.wake
    }

    /// Empties the wake socket (the jobs themselves are taken by [`Mover::drain`]).
    pub fn drain_wake(&self) {
        crate::control::drain_socket(&self.wake);
    }

    /// The job in flight, if any: its pid and when it was handed over (ns).
    pub fn running(&self) -> Option<(u32, u64)> {
        self.running
    }

    /// Jobs given up as stuck and still in the kernel: pid, when handed over and when given up
    /// (host monotonic ns).
    pub fn stuck(&self) -> Vec<(u32, u64, u64)> {
        self.abandoned.iter().map(|a| (a.pid, a.started_ns, a.since_ns)).collect()
    }

    /// Whether a job given up as stuck moves `pid`'s pages (no other move of it may start: its
    /// memory map is what holds that one).
    pub fn stuck_on(&self, pid: u32) -> bool {
        self.abandoned.iter().any(|a| a.pid == pid)
    }

    /// Hands `job` over: false (the job dropped) when a job is still in flight or the thread is
    /// gone.
    pub fn submit(&mut self, job: Job) -> bool {
        if self.running.is_some() || self.abandoned.len() >= MAX_STUCK_MOVES {
            return false;
        }
        let Some(tx) = &self.worker.jobs else { return false };
        let who = (job.action.target.pid, job.started_ns);
        if tx.send(job).is_err() {
            return false;
        }
        self.running = Some(who);
        true
    }

    /// At host time `now_ns`: a job in flight none of whose calls has returned for
    /// [`STUCK_MOVE_S`] (or [`Mover::with_stuck_after`]'s time) is given up (rule stuck-move-abandoned): its thread is left to its system
    /// call (none can be called back out of the kernel), a new thread takes the jobs from here on,
    /// and the pid is returned so the caller can ask the move to stop should the call return.
    /// Without it, one process's locked memory map held every later move of every process.
    pub fn poll(&mut self, now_ns: u64) -> Option<u32> {
        let (pid, started_ns) = self.running?;
        let count = (self.progress)();
        if count != self.last_progress.0 {
            self.last_progress = (count, now_ns);
            return None;
        }
        let quiet_since = self.last_progress.1.max(started_ns);
        if now_ns.saturating_sub(quiet_since) < self.stuck_after_ns {
            return None;
        }
        let fresh = match self.ring.try_clone().and_then(|ring| Worker::spawn(Arc::clone(&self.work), ring)) {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!("page mover: no new thread in place of the one stuck on pid {pid} ({e})");
                return None;
            }
        };
        let mut old = std::mem::replace(&mut self.worker, fresh);
        // Its thread ends after the stuck job, if the call ever returns.
        old.jobs = None;
        self.abandoned.push(Abandoned { worker: old, pid, since_ns: now_ns, started_ns });
        self.running = None;
        Some(pid)
    }

    /// The jobs that ended since the last call (never waits), a stuck one's too if its call has
    /// returned meanwhile.
    pub fn drain(&mut self) -> Vec<Done> {
        let out: Vec<Done> = self.worker.done.try_iter().collect();
        if !out.is_empty() {
            self.running = None;
        }
        let mut late = Vec::new();
        self.abandoned.retain(|a| match a.worker.done.try_recv() {
            Ok(d) => {
                late.push(d);
                false
            }
            Err(mpsc::TryRecvError::Disconnected) => false,
            Err(mpsc::TryRecvError::Empty) => true,
        });
        late.into_iter().chain(out).collect()
    }

    /// Waits for the job in flight, if any, and returns every job that ended.
    pub fn wait(&mut self) -> Vec<Done> {
        let mut out = self.drain();
        if self.running.is_some() {
            if let Ok(d) = self.worker.done.recv() {
                out.push(d);
            }
            self.running = None;
        }
        out
    }

    /// As [`Mover::wait`], for at most `limit`: a job still in flight then stays
    /// [`Mover::running`] (its system call runs on in the kernel) and is not among those returned.
    pub fn wait_for(&mut self, limit: std::time::Duration) -> Vec<Done> {
        let mut out = self.drain();
        if self.running.is_some() {
            match self.worker.done.recv_timeout(limit) {
                Ok(d) => {
                    out.push(d);
                    self.running = None;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => self.running = None,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
        out
    }
}

/// Threads a copy may be split over (split-copy): at most `cap`, and no more than the CPUs it may
/// run on (`on`, or the calling thread's own set), at least 1.
pub fn copy_threads(cap: usize, on: Option<&CpuSet>) -> usize {
    let width = on.map_or_else(|| sched_getaffinity(0).map_or(1, |s| s.len()), |s| s.len());
    cap.min(width).max(1)
}

/// Moves the calling thread onto `want` within its own CPU set: the set it now runs on and the
/// set it had, or `None` (left as it was) when the two do not meet or the kernel refuses.
fn pin_self(want: &CpuSet) -> Option<(CpuSet, CpuSet)> {
    let own = sched_getaffinity(0).ok()?;
    let set = want.intersection(&own);
    if set.is_empty() || set == own {
        return None;
    }
    sched_setaffinity(0, &set).ok()?;
    Some((set, own))
}

impl Drop for Mover {
    fn drop(&mut self) {
        // Closing the job channel ends the thread after the job in flight. A thread whose job is
        // still in the kernel (shutdown waited `SHUTDOWN_MOVE_WAIT` for it already; or a stuck
        // one) is not joined: the join would wait for as long as the call. The process itself
        // ends only when that call returns (a thread asleep in the kernel cannot be killed); the
        // daemon closes its sockets before (run::serve), so a restart finds them free.
        self.worker.jobs = None;
        if self.running.is_none() {
            if let Some(t) = self.worker.thread.take() {
                let _ = t.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numapilot_policy::{ActionKind, Reason, TaskRef};
    use std::sync::{Arc, Mutex};

    /// A progress count that never moves (the jobs here end or wait on a gate; only the stuck-job
    /// test moves its own).
    fn still() -> Progress {
        Arc::new(|| 0)
    }

    /// A mover whose every job waits for `gate` (a call asleep in the kernel until the test lets
    /// it go), then moves nothing.
    fn gated(gate: &Arc<Mutex<()>>) -> Mover {
        let g = Arc::clone(gate);
        let work: Work = Arc::new(move |_j: &Job, _threads: usize| {
            let _open = g.lock().unwrap();
            (Outcome::Applied { pages_moved: 0 }, 0, 1)
        });
        Mover::spawn(work, still()).unwrap()
    }

    fn job(pid: u32) -> Job {
        let all: numapilot_topology::NodeSet = std::iter::once(0).collect();
        Job {
            action: Action {
                target: TaskRef { pid, tid: None, starttime: 1 },
                kind: ActionKind::MigratePages { from: all.clone(), to: all, max_pages: None },
                reason: Reason::new("test", "a move"),
            },
            allowance: 100,
            started_ns: 5,
            cpus: None,
            threads: 1,
        }
    }

    /// One job at a time; the loop is never blocked (submit and drain return at once while the
    /// job runs); a second job is given back while one is in flight; the outcome and the pages
    /// asked come back with the job; waiting returns the job in flight.
    #[test]
    fn one_job_at_a_time_and_the_caller_never_waits() {
        let gate = Arc::new(Mutex::new(()));
        let held = gate.lock().unwrap();
        let g = gate.clone();
        let mut m = Mover::spawn(
            Arc::new(move |j: &Job, _threads: usize| {
                let _open = g.lock().unwrap();
                (Outcome::Applied { pages_moved: j.allowance / 2 }, j.allowance, 1)
            }),
            still(),
        )
        .unwrap();
        assert_eq!(m.running(), None);
        assert!(m.submit(job(10)));
        assert_eq!(m.running(), Some((10, 5)));
        assert!(m.drain().is_empty(), "the job is held by the gate: nothing has ended");
        assert!(!m.submit(job(11)), "busy");
        let readable = |m: &Mover, ms: i32| {
            use std::os::fd::AsRawFd;
            let mut p = libc::pollfd { fd: m.wake().as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut p, 1, ms) == 1 }
        };
        assert!(!readable(&m, 0), "no job has ended: the wake is quiet");
        drop(held);
        assert!(readable(&m, 60_000), "the ended job wakes the loop");
        m.drain_wake();
        assert!(!readable(&m, 0), "drained");
        let done = m.wait();
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].job.action.target.pid, 10);
        assert_eq!(done[0].outcome, Outcome::Applied { pages_moved: 50 });
        assert_eq!(done[0].asked, 100);
        assert!(done[0].ended_ns > 0);
        assert_eq!(m.running(), None);
        assert!(m.submit(job(11)));
        let done = m.wait();
        assert_eq!(done[0].job.action.target.pid, 11);
        assert!(m.wait().is_empty(), "nothing in flight: wait returns at once");
    }

    /// A job that does not end within the wait's limit (a copy stuck in the kernel behind a
    /// process in D state) is left running: shutdown goes on to the restore instead of waiting
    /// for it until systemd's SIGKILL, which restored nothing (review helper-34).
    #[test]
    fn a_bounded_wait_leaves_a_job_that_does_not_end() {
        let gate = Arc::new(Mutex::new(()));
        let held = gate.lock().unwrap();
        let mut m = gated(&gate);
        assert!(m.wait_for(std::time::Duration::from_millis(10)).is_empty(), "nothing in flight");
        assert!(m.submit(job(12)));
        assert!(m.wait_for(std::time::Duration::from_millis(50)).is_empty());
        assert_eq!(m.running(), Some((12, 5)), "still in flight");
        drop(held);
        let done = m.wait_for(std::time::Duration::from_secs(60));
        assert_eq!((done.len(), m.running()), (1, None));
    }

    /// Rule stuck-move-abandoned: a job none of whose calls returns for STUCK_MOVE_S is given up
    /// (not before: the progress count moving, or less time since it was handed over, keeps it);
    /// a new thread takes the next job, of another process, and ends it while the stuck one is
    /// still held; the stuck one's pid is named until its call returns, when its late result is
    /// taken like any other. The clock is the caller's (`poll`'s argument).
    #[test]
    fn a_job_without_progress_is_given_up_and_the_next_runs_on_a_new_thread() {
        use std::sync::atomic::{AtomicU64, Ordering};
        let gate = Arc::new(Mutex::new(()));
        let held = gate.lock().unwrap();
        let g = gate.clone();
        let calls = Arc::new(AtomicU64::new(0));
        let c = calls.clone();
        let mut m = Mover::spawn(
            Arc::new(move |j: &Job, _threads: usize| {
                if j.action.target.pid == 20 {
                    let _open = g.lock().unwrap();
                }
                (Outcome::Applied { pages_moved: 1 }, 1, 1)
            }),
            Arc::new(move || c.load(Ordering::SeqCst)),
        )
        .unwrap();
        let s = 1_000_000_000;
        assert!(m.submit(Job { started_ns: 100 * s, ..job(20) }));
        assert_eq!(m.poll(100 * s + (STUCK_MOVE_S - 1) * s), None, "not yet: under STUCK_MOVE_S since handed over");
        calls.store(7, Ordering::SeqCst);
        assert_eq!(m.poll(100 * s + STUCK_MOVE_S * s), None, "a call returned: progress");
        assert_eq!(m.poll(100 * s + (2 * STUCK_MOVE_S - 1) * s), None, "under STUCK_MOVE_S since that call");
        assert!(!m.submit(job(21)), "still one job at a time");
        assert_eq!(m.poll(100 * s + (2 * STUCK_MOVE_S + 1) * s), Some(20), "no call for STUCK_MOVE_S: given up");
        assert_eq!(m.running(), None);
        assert!(m.stuck_on(20) && !m.stuck_on(21));
        assert_eq!(m.stuck(), [(20, 100 * s, 100 * s + (2 * STUCK_MOVE_S + 1) * s)]);
        assert!(m.submit(job(21)), "a new thread takes the next job");
        let done = m.wait_for(std::time::Duration::from_secs(60));
        assert_eq!(done.iter().map(|d| d.job.action.target.pid).collect::<Vec<_>>(), [21]);
        assert!(m.stuck_on(20), "the stuck job is still held");
        drop(held);
        let t0 = std::time::Instant::now();
        let late = loop {
            let d = m.drain();
            if !d.is_empty() {
                break d;
            }
            assert!(t0.elapsed() < std::time::Duration::from_secs(60), "the released job never reported");
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        assert_eq!(late.iter().map(|d| d.job.action.target.pid).collect::<Vec<_>>(), [20]);
        assert!(m.stuck().is_empty());
    }

    /// At most MAX_STUCK_MOVES moves given up and still in the kernel: past them no move starts
    /// (each keeps a thread), until one returns.
    #[test]
    fn stuck_moves_are_bounded() {
        let gate = Arc::new(Mutex::new(()));
        let held = gate.lock().unwrap();
        let mut m = gated(&gate);
        let s = 1_000_000_000;
        for (i, pid) in (40..40 + MAX_STUCK_MOVES as u32).enumerate() {
            assert!(m.submit(job(pid)), "move {i}");
            assert_eq!(m.poll((i as u64 + 1) * (STUCK_MOVE_S + 1) * s), Some(pid));
        }
        assert!(!m.submit(job(99)), "past the bound no move starts");
        drop(held);
        let t0 = std::time::Instant::now();
        while !m.stuck().is_empty() {
            m.drain();
            assert!(t0.elapsed() < std::time::Duration::from_secs(60), "the released moves never reported");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(m.submit(job(99)), "moves start again once they returned");
    }

    /// The live host's progress count grows while a thread named as the mover's burns CPU (a long
    /// copy inside one `migrate_pages` call: no call returns, the kernel copies): such a move is
    /// never taken for a stuck one.
    #[test]
    fn cpu_time_of_the_movers_threads_is_progress() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let before = mover_progress();
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let copier = std::thread::Builder::new()
            .name("numapilot-mover".into())
            .spawn(move || {
                let mut x = 0u64;
                while !d.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            })
            .unwrap();
        let t0 = std::time::Instant::now();
        while mover_progress() <= before {
            assert!(t0.elapsed() < std::time::Duration::from_secs(60), "a spinning mover thread counted nothing");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        done.store(true, Ordering::Relaxed);
        copier.join().unwrap();
    }

    /// A mover dropped while its job is still in the kernel (shutdown waited its limit) does not
    /// wait for it: the join waited as long as the call, and the daemon never exited after its
    /// restore.
    #[test]
    fn dropping_a_mover_does_not_wait_for_a_job_in_the_kernel() {
        let gate = Arc::new(Mutex::new(()));
        let held = gate.lock().unwrap();
        let mut m = gated(&gate);
        assert!(m.submit(job(30)));
        assert!(m.wait_for(std::time::Duration::from_millis(20)).is_empty());
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            drop(m);
            let _ = tx.send(());
        });
        let dropped = rx.recv_timeout(std::time::Duration::from_secs(60));
        drop(held);
        assert!(dropped.is_ok(), "the drop waited for the job in the kernel");
    }

    /// copy-on-destination: the job runs on its CPUs (within the mover's own set) and the mover
    /// gets its own set back after; CPUs it may not use leave it where it is.
    #[test]
    fn the_copy_runs_on_the_jobs_cpus_and_the_mover_gets_its_own_set_back() {
        let own = sched_getaffinity(0).unwrap();
        let Some(last) = own.last().filter(|_| own.len() >= 2) else {
            eprintln!("skipped: this thread may run on {}, need 2", numapilot_topology::plural(own.len(), "CPU"));
            return;
        };
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s2 = seen.clone();
        let mut m = Mover::spawn(
            Arc::new(move |_j: &Job, threads: usize| {
                s2.lock().unwrap().push((sched_getaffinity(0).unwrap(), threads));
                (Outcome::Applied { pages_moved: 1 }, 1, threads)
            }),
            still(),
        )
        .unwrap();
        let one: CpuSet = std::iter::once(last).collect();
        // split-copy: the job may use 8 threads, but no more than the CPUs the copy runs on.
        let mut with = |cpus: Option<CpuSet>| {
            assert!(m.submit(Job { cpus, threads: 8, ..job(10) }));
            m.wait().pop().unwrap()
        };
        let d = with(Some(one.clone()));
        assert_eq!((d.ran_on, d.threads), (Some(one.clone()), 1));
        let d2 = with(None);
        assert_eq!(d2.ran_on, None);
        // A CPU the thread may not use (past any machine's CPUs): no pin, the job still runs.
        let d3 = with(Some(std::iter::once(MAX_TEST_CPU).collect()));
        assert_eq!(d3.ran_on, None);
        let wide = own.len().min(8);
        assert_eq!(*seen.lock().unwrap(), vec![(one, 1), (own.clone(), wide), (own, wide)]);
        assert!(wide >= 2, "two CPUs here: the copy may split");
    }

    const MAX_TEST_CPU: u32 = 100_000;
}
