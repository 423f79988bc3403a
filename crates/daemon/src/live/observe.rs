//! Tiered observation: a consistent [`Sample`] every cycle for a fraction of a full read's cost.
//!
//! # Problem
//!
//! A full [`Reader::sample`] of 1,000 processes x 10,000 threads costs about 150 ms wall and 300 ms
//! CPU (numa_maps walks page tables; every file open is a path walk in procfs). The daemon cycle
//! (observe + model + plan) must stay under 50 ms and the daemon under 1 % of a core at one cycle
//! per second. Most processes, most of the time, do nothing: their threads' counters have not moved
//! and their memory has not changed.
//!
//! # Approach
//!
//! ```text
//!   every cycle      readdir /proc; per process: /proc/PID/stat (one pread on a kept-open fd),
//!                    except a process idle for idle_after_ms: its stat one cycle in
//!                    idle_stat_every (by pid) and at least every idle_stat_max_ms, the last
//!                    read carried on the others unless the listing gives its /proc directory
//!                    another inode (the pid may be another process's: read, by path)
//!                    ├─ kernel thread ───────────> skipped (re-checked every KTHREAD_RECHECK cycles,
//!                    │                              and when its /proc directory's inode changes)
//!                    ├─ excluded (pid/comm/cgroup), not in a set [include] list ─> skipped
//!                    │  (decided at first sight, on exec or rename, on a reload and, with a
//!                    │  cgroup list set, every cgroup_recheck_ms),
//!                    │  details unread; its CPU since its last read is unmanaged load on the
//!                    │  CPU it last ran on (`unmanaged_cpu`)
//!                    ├─ zombie, no thread left ─> dropped: not watched, read again each
//!                    │                             cycle until reaped
//!                    ├─ RSS < min_rss_kb ─> skipped, ignored as kernel threads are
//!                    └─ user process: which tier?
//!   threads tier     new process, or its CPU ticks moved >= detail_min_ticks since its threads were
//!                    read, or its turn in the staleness round (pid % stale_cycles)
//!                        -> task/TID/{stat,schedstat} (+ sched with balancing), affinity;
//!                        a thread narrower than the online CPUs -> its cpuset's effective CPUs
//!                        from the cgroup files (at most every CPUSET_RECHECK_NS: confined or pinned?;
//!                        and in each of the HOTPLUG_CPUSET_CYCLES cycles after the online CPUs
//!                        change, with such a process's threads read again)
//!                    unless new or refreshed, a thread (not the leader) whose schedstat has not
//!                    moved keeps its last stat (carry_idle_threads); its mask is read anyway
//!   both tiers       the cycle after the daemon changed the process (`refresh`)
//!   numa_maps tier   new, or numa_maps older than numa_maps_ms and RSS >= numa_maps_min_rss_kb,
//!                    or RSS moved >= rss_change_kb since numa_maps was read, or older than
//!                    6 x numa_maps_ms (x numa_maps_idle_factor when it has not run since that
//!                    read: its pages stayed); a process's first read counts as up to one such period
//!                    older (by pid: `stagger`), so processes first seen together (all of them,
//!                    when the daemon starts) are not all re-read in one cycle every period;
//!                    refreshes of known processes are read longest unread first within
//!                    numa_maps_kb_per_cycle of RSS a cycle, each refresh counted at least
//!                    MIN_REFRESH_KB (the first always), the rest wait
//!   otherwise        the last read threads and numa_maps are carried forward, with this cycle's
//!                    process stat and RSS: moved into the sample, not copied, and given back by
//!                    `recycle` (`Host::recycle`, after the model's update); what is not given
//!                    back is read again in full the next cycle
//!   sample           threads and node_usage of every process; numa_maps only of processes with
//!                    an explicit memory policy (the model's only use of it is "pinned?")
//!   signal scans     maps and sockets of the detail pids only: RSS >= numa_maps_min_rss_kb or
//!                    CPU ticks moved within the scans' cadence ([`TieredObserver::detail_pids`])
//! ```
//!
//! Wall time: the listing of /proc, the stat pass and the detail reads are split over
//! [`TierOptions::threads`] threads (2); the sample is the same whatever the split.
//!
//! Consistency for the model (`numapilot_model::tasks`): every process that qualifies is in every
//! sample, with every thread it had when last read, so no history is dropped. A carried-forward
//! process keeps the `read_ns` of its threads' read: the model computes a thread's CPU rate as
//! counter difference over read-time difference, which is 0/0 -> 0 for a carried thread (exactly
//! right: its process's tick count has not moved, so neither has any thread's by a tick), and once
//! the threads are read again the difference spans the whole time since the previous read, so no
//! CPU time is lost or double counted.
//!
//! # Tunables
//!
//! See [`TierOptions`]: each field says its default, unit, source and what it prevents.
//!
//! Reads of numa_maps go through a [`StallGuard`] ([`TierOptions::stalled_read_ms`]): the kernel
//! produces that file under the process's memory-map lock, and a process whose lock is held behind a
//! hung file server would otherwise hold the whole cycle (and the daemon) with it. Such a process is
//! left out, as one whose file does not parse is, until its read returns; the signal sources' maps
//! reads and the self-pinned check before an action share the guard.
//!
//! # Limits
//!
//! The page mover's system calls (`migrate_pages`, `move_pages`) and pagemap reads take the same
//! lock and are not guarded (its numa_maps reads are): no action is started on a process with a
//! read stuck (the live host refuses it), but a move already under way when the lock is taken
//! waits with it, on the mover's thread (shutdown waits for it at most `SHUTDOWN_MOVE_WAIT`, and
//! no other move starts meanwhile), or in the loop where page moves run there (no mover thread).
//! Several processes found locked in one cycle cost a deadline each, spread over the readers.
//!
//! Exclusions are decided when a process is first seen, again whenever its name changes (exec,
//! PR_SET_NAME: same pid and start time, another comm, which also drops its cached details) and for
//! every process after a reload ([`TieredObserver::reclassify`]); the
//! daemon's own pid is always excluded. With a cgroup list set (`[exclude]` or `[include]`), each
//! process's cgroups are read again every `cgroup_recheck_ms` (10 s, spread by pid) and it is
//! classified again: one moved into an excluded cgroup (or out of an included one) leaves the
//! sample within that time (`take_left` names it, so the live host puts back what it changed), and
//! `apply` checks its cgroup again before every action meanwhile. Cgroups that cannot be read for
//! want of a descriptor or memory decide nothing (`select::exclusion_known`): a process keeps its
//! class and is classified again at the next cycle (one that renamed itself keeps its old name
//! too, and is classified again at its next stat read); one first seen so is skipped until then. A
//! process whose numa_maps showed an
//! explicit memory policy has numa_maps re-read whenever its threads are (within the cycle's
//! numa_maps budget), so dropping a temporary policy un-pins it in the model on a next busy cycle.
//! Between staleness rounds an idle process's affinity and last CPU are as of its last read (a
//! `taskset` on a sleeping process shows up within `stale_cycles` cycles). A long-idle process that
//! wakes is seen on its next stat turn, up to `idle_stat_every - 1` cycles late; its exit at once
//! (the listing), its pid's reuse by another process at once too (the listing's inode of its /proc
//! directory, a new one for a new process: free, getdents gives it; on a file system that gives
//! none, at its turn, the daemon's pid + start-time check before any action covering the gap).
//! Sub-tick CPU use (under
//! 10 ms per cycle per process with USER_HZ 100) does not trigger a thread read.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use numapilot_observe::parse::numa_maps::FxBuild;
use numapilot_observe::parse::stat::{parse_stat, TaskStat};
use numapilot_observe::reader::text_of;
use numapilot_observe::{ProcessSample, ReadError, ReadOptions, Reader, Sample, StallGuard};

use numapilot_actuate::CpusetHierarchy;
use numapilot_topology::CpuSet;

use super::select;
use super::LiveOptions;

/// Thresholds of the tiered observation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TierOptions {
    /// Process CPU ticks (USER_HZ, utime + stime of the whole process) that must accumulate since its
    /// threads were last read before they are read again. Default 1 tick (10 ms of CPU). Source: the
    /// resolution of the counter; a process below it used under 1 % of a CPU over a one-second cycle.
    /// What it prevents: reading 10 threads' files for each of the many processes that sleep.
    pub detail_min_ticks: u64,
    /// Every process's threads are re-read at least once per this many cycles, spread over the
    /// cycles by pid. Default 60 (one minute at the default 1 s interval). Source: a choice, the
    /// staleness an operator can accept for an idle process's affinity. What it prevents: a sleeping
    /// process's `taskset` or cpuset change never being seen, and a burst of reads when all go stale
    /// at once.
    pub stale_cycles: u64,
    /// numa_maps of a process is re-read when older than this, ms, if its RSS is at least
    /// `numa_maps_min_rss_kb`. Default 10,000 ms. Source: numa_maps is the most expensive file (a
    /// page-table walk of every mapping, about 30 % of a full read); memory placement changes by
    /// page migration at most a few hundred MB/s, so 10 s of staleness is a few percent of a large
    /// process. What it prevents: walking every process's page tables every second.
    pub numa_maps_ms: u64,
    /// RSS from which a process counts as large for the numa_maps cadence, kB. Default 65,536
    /// (64 MiB). Source: a choice; below it the memory is too small for its placement to matter,
    /// and its numa_maps is refreshed at 6 x `numa_maps_ms` only. What it prevents: spending the
    /// numa_maps budget on shells and daemons of a few MB.
    pub numa_maps_min_rss_kb: u64,
    /// A small process (RSS under `numa_maps_min_rss_kb`) that has not run since its numa_maps
    /// was read is re-read this many times less often than one that has (every 6 x
    /// `numa_maps_ms` x this). Default 6 (6 min at the default 10 s). Source: a process's pages
    /// change node when it touches memory or someone moves them; an idle one touches nothing, and
    /// the daemon's own moves re-read it the cycle after (`refresh`). What it prevents: spending
    /// most of the numa_maps reads of a steady cycle on sleeping shells and daemons of a few MB
    /// (the cost benchmark: 16 of its 17 reads a cycle were such processes).
    pub numa_maps_idle_factor: u64,
    /// Resident memory whose numa_maps a cycle reads for refreshes, kB, summed over the processes
    /// (new processes and the cycle after the daemon changed one are read whatever it says, and count
    /// toward it). Refreshes due by age, RSS change or an explicit policy are read longest unread
    /// first while they fit, each counted at least [`MIN_REFRESH_KB`] (1 MiB: the fixed cost of a
    /// read); the first always, so a process larger than the budget is read too. The
    /// rest wait for the next cycle, their numa_maps carried. Default 262,144 (256 MiB). Source:
    /// numa_maps walks the page tables of every mapping: on the development host about 7 ms of CPU
    /// per GiB resident for a QEMU backed by huge pages (`perf stat` of a `cat` of its numa_maps,
    /// 389 MiB: 3.5 ms against 0.8 ms for a stat file), and in the cycle benchmark 15-20 ms per GiB
    /// for compilers' 4 KiB-page heaps (cycles reading 310-460 MiB of them spent 16-19 ms in the
    /// detail reads against 9-12 ms); 256 MiB are so 2-5 ms. A host whose large processes hold more
    /// than 256 MiB x the cycles in `numa_maps_ms` refreshes each less often than `numa_maps_ms`.
    /// What it prevents: a cycle that walks the page tables of every large process whose refresh
    /// fell due together, and a large process that keeps growing (RSS change) or holds a memory
    /// policy from being walked every cycle. It does not split one process's walk: a process of
    /// several GiB costs the cycle that reads it 10-20 ms per GiB.
    pub numa_maps_kb_per_cycle: u64,
    /// RSS change since numa_maps was read that makes it due at once (within
    /// `numa_maps_kb_per_cycle`), kB. Default 16,384
    /// (16 MiB). Source: a choice, a quarter of the large-process threshold. What it prevents: a
    /// process that just allocated (or freed) a lot being planned from a stale per-node split.
    pub rss_change_kb: u64,
    /// A user process whose CPU ticks have not moved for this long, ms, is long idle: its
    /// /proc/PID/stat is read on one cycle in `idle_stat_every` only (by pid, so the reads spread)
    /// and at least every `idle_stat_max_ms`; the other cycles carry the last read. Default 30,000
    /// (30 s). Source: a choice; on the cost benchmark (1,000 processes, 20 of them busy) the stat pass over
    /// every process was about a quarter of a steady cycle's CPU (7 us of kernel time a read for a
    /// 10-thread process: the stat file sums every thread's times), nearly all of it for processes
    /// that had not run for minutes. What it prevents: reading the stat of hundreds of sleeping
    /// processes every cycle to learn each time that they still sleep.
    pub idle_after_ms: u64,
    /// A long-idle process's stat is read on one cycle in this many (see `idle_after_ms`);
    /// 1 reads every process every cycle. Default 4. Source: a choice; the cost is latency: a
    /// process that wakes after a long sleep is seen up to 3 cycles (3 s at the default interval)
    /// later, against the policy's hold of 10 s and the kernel balancer's 1 s scan delay; a
    /// process that exits is still gone from the next sample (the listing of /proc says so), and
    /// a reused pid is caught at the next read or by the pid + start-time check before any action.
    /// The daemon's own change (`refresh`) reads it the next cycle. What it prevents: see
    /// `idle_after_ms`.
    pub idle_stat_every: u64,
    /// The longest a long-idle process's stat goes unread, ms, whatever its turn. Default 5,000.
    /// Source: a choice, above `idle_stat_every` cycles at the default 1 s interval so it does not
    /// bind there. What it prevents: the latency of `idle_stat_every` growing with the daemon's
    /// idle back-off (cycles up to 15 s apart: a woken process would wait up to 45 s): cycles
    /// that far apart read every process.
    pub idle_stat_max_ms: u64,
    /// Kernel threads are identified once and re-checked every this many cycles, unit cycles
    /// (a pid reused by a user process is caught sooner, by the inode of its /proc directory in
    /// the listing, `Reader::pids_with_inodes`; the recheck is for a file system that gives no
    /// inodes). Default 30. Source: a choice. What it prevents: reading the stat of a hundred
    /// kernel threads every cycle.
    pub kthread_recheck_cycles: u64,
    /// Most /proc/PID/stat files kept open between cycles (one descriptor each; a `pread` on an open
    /// procfs file costs about half an open + read + close). Default 16,384, and never more than
    /// the descriptor limit minus 256 and one per possible CPU (the sampler's events). Source: a choice. What it prevents: running out of
    /// descriptors on a machine with very many processes (the rest are opened each cycle).
    pub max_open_stat: usize,
    /// Threads that read one observation: the stat pass over every pid (with the listing of /proc
    /// beside it) and the detail reads are split over this many threads when they are long enough
    /// ([`PARALLEL_STAT_FROM`], [`PARALLEL_DETAILS_FROM`]). Default 2. Source: issue 5's target is
    /// the cycle's wall time, and three quarters of the observation's CPU is the kernel producing
    /// /proc files, which runs on as many CPUs as there are readers. Measured on the 2-CPU
    /// development VM (`cargo run --release -p numapilot-daemon --example cycle_cost -- --ab
    /// --a-threads 1`), where it is not a clear win: the observation's wall time was 0.77-1.07 of one
    /// thread's (mean 0.88, six runs at load average 5-15), but 1.34-1.44 in three runs with the
    /// measuring thread at nice -20, as the VM's CPUs are themselves taken away for milliseconds at a
    /// time and a cycle that joins a second thread waits for the slower one. 1 reads in the calling
    /// thread only. What it prevents: a cycle's wall time being the sum of 1,000 file reads on one
    /// CPU while another is idle. What is read, and so the sample, does not depend on it.
    pub threads: usize,
    /// In a process whose threads are read because its CPU ticks moved or in the staleness round,
    /// keep the `stat` of each
    /// thread (other than the leader) whose schedstat shows it has not run since its last read,
    /// instead of reading the file again ([`Reader::read_processes_since`] says exactly what is
    /// kept). Default true. Source: a busy process is mostly one or a few busy threads beside
    /// idle ones (the cost benchmark: 1 of 10); the stat file is the larger of a thread's two
    /// always-read files. What it prevents: re-reading the stat of every idle worker of a busy
    /// process every cycle, and the stat of every thread of the ~1/60 of all processes in each
    /// cycle's staleness round (the round is for affinity and cpuset changes: each thread's mask
    /// is still read, with `sched_getaffinity`, and the leader's status in full). New processes
    /// and `refresh` still read every thread in full.
    pub carry_idle_threads: bool,
    /// When `[exclude] cgroups` or `[include] cgroups` lists anything, each user process's
    /// cgroups are read again at least this often, ms (spread by pid), and it is classified again
    /// (managed or skipped). Default 10,000 (10 s). Source: a choice, numad's 15 s scan order of
    /// magnitude; a process changes cgroup when a service manager or container runtime moves it,
    /// with no exec or rename the observer would see. What it prevents: a process moved into an
    /// included cgroup never being planned for, and one moved into an excluded cgroup staying
    /// placed by numapilot, until the next reload. Cost, measured with the cost benchmark
    /// (`cycle_cost --cycles 30 --warmup 35`, with and without `--exclude-cgroup /no-such.slice`,
    /// alternated twice on 2026-11-29, 1,006 processes on a cgroup v1 host of 11 hierarchies):
    /// 100.6 reads a cycle, 31.1-32.1 against 27.0-29.3 ms of CPU a cycle (2-4 ms more); none
    /// without a cgroup list.
    pub cgroup_recheck_ms: u64,
    /// A read of a process's numa_maps or maps (files the kernel produces under the process's
    /// memory-map lock) still sleeping in the kernel after this long, ms, is given up: the process is
    /// left out of the observation until the read returns, and its next reads fail at once
    /// (`numapilot_observe::stall`). Default 2,000 (2 s). Source: a choice: the largest numa_maps
    /// read measured here took milliseconds (a process of several GiB: 10-20 ms a GiB), and a
    /// read that is running, not sleeping, is given up to 15 x longer (`stall::RUNNING_GRACE`).
    /// What it prevents: one process whose memory map is locked behind a hung file server (a task
    /// of it waiting on NFS or FUSE with the lock held, a writer queued) holding the whole loop:
    /// every other process's placement, `status`, and the restore at SIGTERM.
    pub stalled_read_ms: u64,
}

impl Default for TierOptions {
    fn default() -> Self {
        Self {
            detail_min_ticks: 1,
            stale_cycles: 60,
            numa_maps_ms: 10_000,
            numa_maps_min_rss_kb: 64 * 1024,
            numa_maps_idle_factor: 6,
            numa_maps_kb_per_cycle: 256 * 1024,
            rss_change_kb: 16 * 1024,
            idle_after_ms: 30_000,
            idle_stat_every: 4,
            idle_stat_max_ms: 5_000,
            kthread_recheck_cycles: 30,
            max_open_stat: 16_384,
            threads: 2,
            carry_idle_threads: true,
            cgroup_recheck_ms: 10_000,
            stalled_read_ms: 2_000,
        }
    }
}

/// Processes to read in one call above which the read is spread over worker threads. Default 256,
/// unit processes. Source: a choice (a steady cycle on the 1,000-process benchmark reads about 50;
/// the first reads all). What it prevents: starting threads every cycle for a handful of reads.
const PARALLEL_FROM: usize = 256;

/// Kept-open stat files from which the stat pass is split over [`TierOptions::threads`]. Default
/// 128, unit files. Source: a choice; a thread's start and join cost about as much CPU as a few
/// dozen `pread`s of a stat file (about 7 us each with 10 threads per process). What it prevents:
/// starting a thread to save less than it costs on a machine with few processes.
pub const PARALLEL_STAT_FROM: usize = 128;

/// Processes whose threads are read in one cycle from which that read is split over
/// [`TierOptions::threads`] workers. Default 8, unit processes. Source: a choice; one process of
/// 10 threads costs about 0.2 ms of reads, a thread start about 0.03 ms. What it prevents:
/// starting threads for a read of one or two processes.
pub const PARALLEL_DETAILS_FROM: usize = 8;

/// What the observer knows of one pid.
#[derive(Debug)]
enum Kind {
    /// A kernel thread, identified at `cycle` (a new inode of its /proc directory in a listing
    /// means its pid may be another process's now: identified again, see `Entry::ino`).
    Kernel { cycle: u64 },
    /// Excluded by the options (or too small): not read beyond stat.
    Skipped,
    /// A user process the daemon watches.
    User,
}

#[derive(Debug)]
struct Entry {
    starttime: u64,
    /// The inode of its /proc directory in the listing of its last stat read (0: the file system
    /// gives none). Another in a listing, and the pid may be another process's now (see
    /// `Reader::pids_with_inodes`): a kernel thread is identified again, a resting process's
    /// stat is read (not carried) through a descriptor opened anew.
    ino: u64,
    /// A skipped process's CPU ticks and the time they were read: its CPU use is the node load of
    /// unmanaged work (`Sample::unmanaged_cpu`).
    unmanaged_ticks: u64,
    unmanaged_ns: u64,
    /// The name the kind was decided under (re-decided when it changes).
    comm: String,
    /// The last numa_maps read showed an explicit memory policy (the model's "pinned"): re-read
    /// with the threads, every cycle the process uses CPU (within the cycle's numa_maps budget), so
    /// a temporary policy that was dropped is seen at once instead of after `numa_maps_ms`.
    has_policy: bool,
    kind: Kind,
    fd: Option<File>,
    /// The last read of its /proc/PID/stat (user and excluded processes), carried on the cycles a
    /// long-idle process rests ([`TierOptions::idle_after_ms`]), the host time of that read, ns,
    /// and the cycle of it. Shared (`Arc`) with the cycle's table of stats: a resting process's
    /// stat is not copied every cycle.
    stat: Option<Arc<TaskStat>>,
    stat_ns: u64,
    stat_cycle: u64,
    /// The `stat_cycle` of the stat (and name and RSS) the carried `last` holds, 0 when `last`
    /// holds another (its own read): equal, a carried process's sample needs nothing set again.
    sample_stat_cycle: u64,
    /// Host time its CPU ticks last moved (or it was first seen), ns.
    busy_ns: u64,
    /// The last full details (threads and numa_maps), with `stat`/`rss_kb` of their read (or of
    /// the last cycle that carried them). `None` while lent to a sample (`lent`).
    last: Option<ProcessSample>,
    /// `last` is in the sample handed out (moved, not copied); [`TieredObserver::recycle`] puts it
    /// back. One not given back by the next cycle is read again in full (`refresh`).
    lent: bool,
    /// The numa_maps of a lent `last`, kept out of the sample when it shows no explicit policy
    /// (the model's only use of it): restored by `recycle`.
    lent_maps: Option<numapilot_observe::parse::numa_maps::NumaMaps>,
    /// Process CPU ticks when the threads were last read.
    detail_ticks: u64,
    /// The cycle its CPU ticks last moved (or it was first seen), its ticks then, its RSS this
    /// cycle (kB), and the last cycle it was in the sample: for [`TieredObserver::detail_pids`].
    busy_cycle: u64,
    prev_ticks: u64,
    rss_now_kb: u64,
    in_sample: u64,
    /// Host time numa_maps was last read, and the RSS (kB) and process CPU ticks then.
    maps_ns: u64,
    maps_rss_kb: u64,
    maps_ticks: u64,
    /// The daemon changed this process (affinity or pages): read its threads and numa_maps next
    /// cycle whatever the tiers say ([`TieredObserver::refresh`]).
    refresh: bool,
    /// Its threads are read again next cycle whatever the tiers say, its numa_maps when the tiers
    /// say: it renamed itself (PR_SET_NAME, or an exec: same start time, another comm) and stays a
    /// process the daemon manages (a new program's RSS differs by more than
    /// `numa_maps_rss_change_kb`, or by age), or the online CPUs changed while it had a narrowed
    /// thread (the kernel may have changed its masks, and its cpuset's CPUs are read again).
    threads_due: bool,
    /// One of its files did not parse at its last detail read ([`Reader::read_processes_skipping`]):
    /// it is out of the sample until a read succeeds, and the log said so once.
    unreadable: bool,
    /// Its cpuset's CPUs as last read (`None`: not read, or unreadable) and the host time of that
    /// read, ns (0: never): read when a thread read shows a mask narrower than the online CPUs,
    /// again at most every [`CPUSET_RECHECK_NS`].
    cpuset: Option<Arc<CpuSet>>,
    cpuset_ns: u64,
    /// When its class (managed or skipped) was last decided with its cgroups read, host ns, dated
    /// back by pid at first sight (`stagger`) so the re-checks spread (see
    /// [`TierOptions::cgroup_recheck_ms`]).
    class_ns: u64,
}

/// How long a process's cpuset CPUs, once read, stand before they are read again, ns. Default
/// 10 s. Source: a choice; a cpuset changes when an operator or a container runtime changes it
/// (`docker update --cpuset-cpus`), rarely, and the daemon's own moves narrow threads, not
/// cpusets. What it prevents: two cgroup file reads per narrowed busy process per cycle (a
/// thousand processes the daemon placed would cost milliseconds a cycle).
pub const CPUSET_RECHECK_NS: u64 = 10_000_000_000;

/// Samples after a change of the online CPUs in which every cpuset CPU list is read again,
/// whatever its age. Default 3 (cycles). Source: the rig's 2-node hotplug run, where a process's
/// cpuset read between CPU 2's and CPU 3's return (effective CPUs 0-2) stood for
/// [`CPUSET_RECHECK_NS`] and the process read as confined to CPU 2 of node 1 (placed on "2"
/// alone with both back); kernels before 6.10 update cpusets from a workqueue after the CPU
/// is up, so one fresh read right after the change can still be the old list. What it prevents:
/// a process planned within a cpuset list that hotplug has since changed.
pub const HOTPLUG_CPUSET_CYCLES: u32 = 3;

/// Counts of the last cycle, for the daemon's metrics and the cost example.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TierStats {
    /// User processes in the sample.
    pub processes: usize,
    /// Threads in the sample.
    pub threads: usize,
    /// Processes whose threads were read this cycle.
    pub threads_read: usize,
    /// Processes whose numa_maps was read this cycle.
    pub maps_read: usize,
    /// Of those to be read, the ones seen before (not new): refreshes by age, RSS change, an
    /// explicit policy or the daemon's own change.
    pub maps_refreshed: usize,
    /// Resident memory of the processes whose numa_maps is read this cycle, kB, summed: the size of
    /// the page-table walks (numa_maps visits every present page).
    pub maps_rss_kb: u64,
    /// numa_maps refreshes that were due but wait for a later cycle
    /// ([`TierOptions::numa_maps_kb_per_cycle`]).
    pub maps_deferred: usize,
    /// Processes skipped (kernel threads, excluded, too small).
    pub skipped: usize,
    /// Processes whose cgroups were read again this cycle to classify them again
    /// ([`TierOptions::cgroup_recheck_ms`]).
    pub cgroup_rechecks: usize,
    /// Processes left out of this cycle's sample because one of their files did not parse (what
    /// a process shows is partly its own to choose, its name in every `sched` header).
    pub unreadable: usize,
    /// Of those, processes left out because a read of their numa_maps is blocked in the kernel
    /// (their memory map is locked: [`TierOptions::stalled_read_ms`]).
    pub stalled: usize,
    /// Processes whose stat was not read this cycle: long idle, not their turn
    /// ([`TierOptions::idle_after_ms`]); their last read is carried.
    pub stat_rested: usize,
    /// /proc/PID/stat files kept open.
    pub open_stat: usize,
    /// Wall time of the tiered read, ns, and its phases: the system files (nodes, /proc/stat,
    /// vmstat, PSI), the stat pass over every pid, the detail reads, the assembly of the sample.
    pub read_ns: u64,
    /// See `read_ns`.
    pub system_ns: u64,
    /// See `read_ns`.
    pub stat_pass_ns: u64,
    /// See `read_ns`.
    pub details_ns: u64,
    /// See `read_ns`.
    pub assemble_ns: u64,
    /// CPU time of this process (all its threads, `CLOCK_PROCESS_CPUTIME_ID`) in the stat pass,
    /// ns: wall time on a shared machine says little, this says what the pass costs.
    pub stat_pass_cpu_ns: u64,
    /// The same for the detail reads.
    pub details_cpu_ns: u64,
    /// The same for the assembly.
    pub assemble_cpu_ns: u64,
    /// Wall time of [`crate::signals::Signals::fill`] on the sample, ns (set by the live host).
    pub signals_ns: u64,
}

/// The tiered observer.
#[derive(Debug)]
pub struct TieredObserver {
    tiers: TierOptions,
    with_maps: Reader,
    /// The same with the default number of workers, for a large first read.
    parallel: Reader,
    threads_only: Reader,
    /// The same split over [`TierOptions::threads`] workers.
    threads_only_par: Reader,
    maps_only: Reader,
    system: Reader,
    /// By pid (FxHash: looked up several times per pid per cycle; SipHash's cost bought nothing
    /// here, pids are not chosen by an attacker to collide, and its random order was never relied
    /// on).
    entries: HashMap<u32, Entry, FxBuild>,
    /// Processes the daemon moved into cpuset cgroups of its own: pid -> (start time, the cgroup
    /// they came from), so exclusions and `[include]` by cgroup still see where they belong
    /// (under v2 their only path is numapilot's). Set by the live host before each sample.
    moved_from: HashMap<u32, (u64, String)>,
    /// Processes that were managed and are skipped now (a reload's lists, or a cgroup re-check
    /// found them moved out of `[include]` or into an exclusion), for the live host to put back
    /// what it changed on them ([`TieredObserver::take_left`]).
    left: Vec<u32>,
    cycle: u64,
    page_kb: u64,
    fd_cap: usize,
    open_fds: usize,
    buf: Vec<u8>,
    /// The online CPUs (read at start under the root), and the cpuset hierarchy the CPUs of a
    /// confined process's cpuset are read from (`None`: not read; every process's then stand as
    /// its nodes' CPUs, as the model assumed before it knew of cpusets).
    online: Option<CpuSet>,
    cpusets: Option<CpusetHierarchy>,
    cpuset_paths: CpusetPaths,
    /// Samples still to come that forget every cpuset CPU list read before them (set when the
    /// online CPUs change: [`TieredObserver::online_changed`]).
    cpuset_forget: u32,
    /// The deadline on reads taken under a process's memory-map lock (numa_maps here, maps in
    /// the signal sources, numa_maps before an action): shared by every reader of the daemon's loop.
    guard: StallGuard,
    /// Counts of the last cycle.
    pub stats: TierStats,
}

/// The cpuset CPUs `p`'s sample carries, read from hierarchy `h` through `e`'s cache: `None` when
/// no thread of `p` is narrower than the `online` CPUs (its cpuset cannot be narrower either) or
/// no hierarchy is read.
fn cpuset_for(
    h: Option<&CpusetHierarchy>,
    online: Option<&CpuSet>,
    paths: &mut CpusetPaths,
    e: &mut Entry,
    p: &ProcessSample,
    now_ns: u64,
) -> Option<Arc<CpuSet>> {
    let (h, online) = (h?, online?);
    if p.threads.iter().all(|t| t.stat.kernel_owns_affinity() || online.is_subset(&t.cpus_allowed)) {
        return None;
    }
    if e.cpuset_ns == 0 || now_ns.saturating_sub(e.cpuset_ns) >= CPUSET_RECHECK_NS {
        e.cpuset = h.cgroup_of(p.pid).ok().flatten().and_then(|cg| paths.cpus(h, &cg, now_ns));
        e.cpuset_ns = now_ns.max(1);
    }
    e.cpuset.clone()
}

/// The effective CPUs of cgroup paths as last read, each read again at most every
/// [`CPUSET_RECHECK_NS`]: the processes of one container share one read (and one `Arc`), and a
/// cgroup nested deep costs its walk up once per period, not once per process.
#[derive(Debug, Default)]
struct CpusetPaths {
    by_path: HashMap<String, (Option<Arc<CpuSet>>, u64)>,
}

impl CpusetPaths {
    /// Paths kept at most; past it, the ones older than the recheck period are dropped. Default
    /// 4,096. Source: a choice, far more cgroups than a host runs containers. What it prevents: a
    /// user making cgroups without end growing the daemon's memory.
    const MAX: usize = 4096;

    fn cpus(&mut self, h: &CpusetHierarchy, cg: &str, now_ns: u64) -> Option<Arc<CpuSet>> {
        if let Some((cpus, at)) = self.by_path.get(cg) {
            if now_ns.saturating_sub(*at) < CPUSET_RECHECK_NS {
                return cpus.clone();
            }
        }
        if self.by_path.len() >= Self::MAX {
            self.by_path.retain(|_, (_, at)| now_ns.saturating_sub(*at) < CPUSET_RECHECK_NS);
            if self.by_path.len() >= Self::MAX {
                self.by_path.clear();
            }
        }
        let cpus = select::effective_cpus_of(h, cg).map(Arc::new);
        self.by_path.insert(cg.to_string(), (cpus.clone(), now_ns));
        cpus
    }
}

/// Whether the numa_maps read of `p` shows an explicit memory policy on any VMA (bind, prefer,
/// interleave ...).
fn explicit_policy(p: &ProcessSample) -> bool {
    p.numa_maps.as_ref().is_some_and(|m| m.vmas.iter().any(|v| v.policy.mode.is_explicit()))
}

/// How far back a process's first numa_maps read is dated, ns: a fraction of `period_ns` (the age
/// at which it would be re-read) spread by pid over 1,024 steps (Knuth's multiplicative hash, so
/// consecutive pids land far apart). Without it every process present when the daemon starts is
/// read at once and so re-read at once every period: on the 1,000-process cost benchmark, one cycle
/// a minute read 1,000 numa_maps (the first cycle's cost again, about 10 times a steady cycle's
/// CPU). With it the refreshes spread over the period, and none comes later than before.
fn stagger(pid: u32, period_ns: u64) -> u64 {
    let step = (u64::from(pid).wrapping_mul(2_654_435_761) >> 8) % 1024;
    ((u128::from(period_ns) * u128::from(step)) / 1024) as u64
}

/// A numa_maps refresh that is due for a known process (see [`TierOptions::numa_maps_kb_per_cycle`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Refresh {
    /// Time since its numa_maps was read, ns.
    age: u64,
    pid: u32,
    rss_kb: u64,
    /// Its threads are read this cycle too.
    threads: bool,
    /// For a threads-only read: its idle threads may keep their stat (`carry_idle_threads`).
    since: bool,
}

/// What a refresh of a small process costs at least, in the budget's kB of resident memory: 1 MiB.
/// Source: the fixed part of a numa_maps read (open, the walk of every mapping, the text and its
/// parse), some tens of microseconds for a small process, about what walking 1 MiB resident costs
/// at the 15-20 ms per GiB measured for [`TierOptions::numa_maps_kb_per_cycle`]. What it prevents:
/// refreshes of processes with nothing resident (zombies, processes swapped out, a churn's
/// just-started programs) counted as free, all of them read in one cycle whatever the budget (a
/// host holding hundreds such read each of them every cycle; found when another session's churn
/// made the budget test read three in a cycle of a 1 kB budget).
const MIN_REFRESH_KB: u64 = 1024;

/// Which of the due refreshes a cycle reads, given `spent` kB of RSS walked already (new
/// processes, the daemon's own changes) and the `budget`: sorts them longest unread first (then by
/// pid) and takes each that still fits, each counted at least [`MIN_REFRESH_KB`]; the first always,
/// so one larger than the budget is read too. Returns, per refresh in the sorted order, whether it
/// is read.
fn choose_refreshes(due: &mut [Refresh], spent: u64, budget: u64) -> Vec<bool> {
    due.sort_unstable_by(|a, b| b.age.cmp(&a.age).then(a.pid.cmp(&b.pid)));
    let mut spent = spent;
    due.iter()
        .enumerate()
        .map(|(i, r)| {
            let cost = r.rss_kb.max(MIN_REFRESH_KB);
            let take = i == 0 || spent.saturating_add(cost) <= budget;
            if take {
                spent = spent.saturating_add(cost);
            }
            take
        })
        .collect()
}

/// The copy of `last` (a process's details as last read) that goes into a sample, with this
/// cycle's stat and RSS. The model reads numa_maps only to tell a process that placed itself (an
/// explicit policy on its VMAs: `numapilot_model::tasks::policy_pinned`), which is `false` without
/// it, and takes memory per node from `node_usage`: so only a process with such a policy
/// (`has_policy`) carries its cached numa_maps into the sample; the others' stays with the
/// observer instead of being copied every cycle.
fn for_sample(last: &ProcessSample, has_policy: bool, st: TaskStat, page_kb: u64) -> ProcessSample {
    ProcessSample {
        pid: last.pid,
        starttime: last.starttime,
        comm: st.comm.clone(),
        kernel_thread: last.kernel_thread,
        read_ns: last.read_ns,
        rss_kb: Some(rss_of(&st, page_kb, last.rss_kb)),
        stat: st,
        numa_maps: if has_policy { last.numa_maps.clone() } else { None },
        numa_maps_error: last.numa_maps_error.clone(),
        node_usage: last.node_usage.clone(),
        threads: last.threads.clone(),
        cpuset_cpus: last.cpuset_cpus.clone(),
    }
}

/// Whether `e` (of `pid`) skips its stat read on `cycle`: a process (not a kernel thread) read
/// before, whose CPU ticks have not moved for `idle_after_ms`, read within `idle_stat_max_ms`,
/// nothing asked for it (`refresh`), and not its turn of one cycle in `idle_stat_every` (by pid).
fn stat_rests(e: &Entry, pid: u32, cycle: u64, now_ns: u64, tiers: &TierOptions) -> bool {
    let ms = |x: u64| x.saturating_mul(1_000_000);
    let every = tiers.idle_stat_every.max(1);
    every > 1
        && e.stat.is_some()
        && !e.refresh
        && !matches!(e.kind, Kind::Kernel { .. })
        && now_ns.saturating_sub(e.busy_ns) >= ms(tiers.idle_after_ms)
        && now_ns.saturating_sub(e.stat_ns) < ms(tiers.idle_stat_max_ms)
        && (u64::from(pid) + cycle) % every != 0
}

/// The RSS a stat read gives, kB. A zombie leader's stat shows none while its other threads hold
/// the memory (zombie-leader-memory: the detail reads go through a live thread), so the last
/// detail read's figure stands.
fn rss_of(st: &TaskStat, page_kb: u64, last_kb: Option<u64>) -> u64 {
    if st.state == 'Z' && st.num_threads > 1 {
        last_kb.unwrap_or(0)
    } else {
        st.rss_pages * page_kb
    }
}

/// Drops the file names of `p`'s numa_maps mappings (see [`TieredObserver::sample`]).
fn drop_file_names(p: &mut ProcessSample) {
    if let Some(m) = p.numa_maps.as_mut() {
        for v in &mut m.vmas {
            v.file = None;
        }
    }
}

/// Reads and parses each kept-open stat file (see [`TieredObserver::list_and_read_kept`]).
fn read_kept(kept: &[(u32, &File)], buf: &mut [u8]) -> Vec<(u32, Option<TaskStat>)> {
    kept.iter()
        .map(|&(pid, f)| {
            let st = f.read_at(buf, 0).ok().and_then(|n| parse_stat(&text_of(&buf[..n])).ok());
            (pid, st)
        })
        .collect()
}

/// CPU time of this process, all threads, ns.
fn process_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the struct we own.
    if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Raises the soft descriptor limit to the hard one and returns the soft limit now.
fn raise_nofile() -> usize {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return 1024;
    }
    if r.rlim_cur < r.rlim_max {
        let want = libc::rlimit { rlim_cur: r.rlim_max.min(1 << 20), rlim_max: r.rlim_max };
        // SAFETY: setrlimit reads the struct we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } == 0 {
            return want.rlim_cur as usize;
        }
    }
    r.rlim_cur as usize
}

impl TieredObserver {
    /// An observer of the live system under `opts.root` ("/" normally).
    pub fn new(opts: &LiveOptions, tiers: &TierOptions) -> Self {
        let guard = StallGuard::new(std::time::Duration::from_millis(tiers.stalled_read_ms));
        let reader = |threads, numa_maps, workers| {
            Reader::with_options(
                opts.root.clone(),
                ReadOptions { threads, numa_maps, kernel_threads: false, workers, ..ReadOptions::default() },
            )
            .with_guard(guard.clone())
        };
        // The headroom also keeps a descriptor per possible CPU for the access sampler's per-CPU
        // events (opened after the observer, and again after hotplug): under a low limit the
        // stat files took them first (review helper-34).
        let per_cpu = super::state::possible_cpus().map_or(0, |c| c.len());
        let fd_cap = tiers.max_open_stat.min(raise_nofile().saturating_sub(256 + per_cpu));
        let page = super::page_size();
        Self {
            tiers: tiers.clone(),
            with_maps: reader(true, true, 1),
            parallel: reader(true, true, 0),
            threads_only: reader(true, false, 1),
            threads_only_par: reader(true, false, tiers.threads.max(1)),
            maps_only: reader(false, true, 1),
            system: reader(false, false, 1),
            entries: HashMap::default(),
            moved_from: HashMap::new(),
            left: Vec::new(),
            cycle: 0,
            page_kb: page / 1024,
            fd_cap,
            open_fds: 0,
            buf: vec![0; 4096],
            online: numapilot_topology::sysfs::cpu_list(&opts.root, "online").ok().flatten(),
            cpusets: None,
            cpuset_paths: CpusetPaths::default(),
            cpuset_forget: 0,
            guard,
            stats: TierStats::default(),
        }
    }

    /// The deadline guard of reads under a process's memory-map lock (see
    /// [`TierOptions::stalled_read_ms`]), for the daemon's other readers of those files.
    pub fn guard(&self) -> &StallGuard {
        &self.guard
    }

    /// Reads the cpuset CPUs of processes with a narrowed thread from `h` from now on (see
    /// [`ProcessSample::cpuset_cpus`]).
    pub fn set_cpusets(&mut self, h: Option<CpusetHierarchy>) {
        self.cpusets = h;
    }

    /// The online CPUs are `online` (the live host's hotplug watch reads the file each cycle). When
    /// they differ from what the observer held, a thread is judged narrowed against them from now
    /// on and every cpuset CPU list is read again in each of the next [`HOTPLUG_CPUSET_CYCLES`]
    /// samples: the kernel changes cpusets' effective CPUs with the online ones, so a list read
    /// before stands for nothing.
    pub fn online_changed(&mut self, online: &CpuSet) {
        if self.online.as_ref() == Some(online) {
            return;
        }
        self.online = Some(online.clone());
        self.cpuset_forget = HOTPLUG_CPUSET_CYCLES;
    }

    /// Reads `/proc/PID/stat` through the kept-open descriptor (opening it if needed); `None` when
    /// the process is gone (a kept descriptor of a reaped process reads ESRCH, so a reused pid is
    /// never read through the old one).
    ///
    /// Err: the file could not be opened or read for want of a descriptor or memory
    /// (`select::short_of_resources`); the sample fails as a whole and the step is tried again,
    /// rather than every process it could not read leaving the sample as if gone (and the policy
    /// forgetting what it had placed; review helper-34).
    fn stat(&mut self, root_proc: &str, pid: u32, keep: bool) -> Result<Option<TaskStat>, ReadError> {
        let short = |path: String, e: std::io::Error| -> Result<Option<TaskStat>, ReadError> {
            if super::select::short_of_resources(&e) {
                Err(ReadError::Io { path: path.into(), source: e })
            } else {
                Ok(None)
            }
        };
        let entry_fd = self.entries.get(&pid).and_then(|e| e.fd.as_ref());
        let n = match entry_fd {
            Some(f) => match f.read_at(&mut self.buf, 0) {
                Ok(n) => n,
                Err(e) => return short(format!("{root_proc}/{pid}/stat"), e),
            },
            None => {
                let path = format!("{root_proc}/{pid}/stat");
                let f = match File::open(&path) {
                    Ok(f) => f,
                    Err(e) => return short(path, e),
                };
                let n = match f.read_at(&mut self.buf, 0) {
                    Ok(n) => n,
                    Err(e) => return short(path, e),
                };
                if keep && self.open_fds < self.fd_cap {
                    if let Some(e) = self.entries.get_mut(&pid) {
                        e.fd = Some(f);
                        self.open_fds += 1;
                    }
                }
                n
            }
        };
        Ok(parse_stat(&text_of(&self.buf[..n])).ok())
    }

    /// Lists /proc and reads every kept-open stat file, split over up to [`TierOptions::threads`]
    /// threads with the listing beside the reads. Returns the pids (ascending) and, ascending by
    /// pid, `(pid, stat)` of every kept file: `None` when the read failed (the process is gone: a
    /// kept descriptor of a reaped process reads ESRCH) or did not parse.
    #[allow(clippy::type_complexity)]
    fn list_and_read_kept(
        &mut self,
        now_ns: u64,
    ) -> Result<(Vec<(u32, u64)>, Vec<(u32, Option<TaskStat>)>), ReadError> {
        let (cycle, tiers) = (self.cycle, &self.tiers);
        let mut kept: Vec<(u32, &File)> = self
            .entries
            .iter()
            .filter(|(&pid, e)| !stat_rests(e, pid, cycle, now_ns, tiers))
            .filter_map(|(&pid, e)| e.fd.as_ref().map(|f| (pid, f)))
            .collect();
        kept.sort_unstable_by_key(|k| k.0);
        let threads = self.tiers.threads.max(1);
        let buf = &mut self.buf;
        let system = &self.system;
        if threads == 1 || kept.len() < PARALLEL_STAT_FROM {
            let pids = system.pids_with_inodes()?;
            return Ok((pids, read_kept(&kept, buf)));
        }
        // Listing /proc (about 1,100 entries: a getdents walk that fills the dentry cache) costs
        // about as much CPU as a third as many stat reads, so the thread that lists takes fewer
        // reads; the calling thread takes the last share. Shares are contiguous in pid order, so
        // joining them in order keeps the reads ascending.
        let n = kept.len();
        let listing = n / 3;
        let per = (n + listing).div_ceil(threads);
        let first = per.saturating_sub(listing).min(n);
        let (head, rest) = kept.split_at(first);
        let share = rest.len().div_ceil(threads - 1).max(1);
        let mut shares: Vec<&[(u32, &File)]> = rest.chunks(share).collect();
        let mine = shares.pop().unwrap_or(&[]);
        std::thread::scope(|sc| {
            let lister = sc.spawn(move || {
                let mut buf = vec![0u8; 4096];
                (system.pids_with_inodes(), read_kept(head, &mut buf))
            });
            let others: Vec<_> = shares
                .into_iter()
                .map(|part| {
                    sc.spawn(move || {
                        let mut buf = vec![0u8; 4096];
                        read_kept(part, &mut buf)
                    })
                })
                .collect();
            let last = read_kept(mine, buf);
            // A reader panicking is a bug in the parser: surface it rather than hide it.
            let (pids, mut all) = lister.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            all.reserve(n);
            for h in others {
                all.extend(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
            }
            all.extend(last);
            Ok((pids?, all))
        })
    }

    /// Where the processes the daemon moved into cpuset cgroups of its own came from (see the
    /// field), replacing what was set before.
    pub fn set_moved_from(&mut self, moved_from: HashMap<u32, (u64, String)>) {
        self.moved_from = moved_from;
    }

    /// Classifies every user process again under `opts` (after a reload changed `[exclude]` or
    /// `[include]`): one whose class changed (managed <-> skipped) is forgotten, so the next cycle
    /// reads it as new (details, numa_maps) or skips it; the others keep their entries, carried
    /// reads and schedule. Kernel threads keep theirs. Reads the cgroups of each process only when
    /// a cgroup list is set. A process whose cgroups cannot be read for want of a descriptor or
    /// memory keeps its class and is classified again at the next cycle's recheck
    /// (`select::exclusion_known`): taken as excluded, a reload while the daemon was short of
    /// descriptors forgot every managed process and named each as leaving (its page move stopped).
    pub fn reclassify(&mut self, opts: &LiveOptions) {
        let moved_from = &self.moved_from;
        let mut unknown: Vec<u32> = Vec::new();
        let changed: Vec<(u32, bool)> = self
            .entries
            .iter()
            .filter_map(|(&pid, e)| {
                let was_user = match e.kind {
                    Kind::Kernel { .. } => return None,
                    Kind::User => true,
                    Kind::Skipped => false,
                };
                match select::exclusion_known(opts, pid, &e.comm, || {
                    cgroups_now(&opts.root, moved_from, pid, e.starttime)
                }) {
                    Ok(why) => (why.is_none() != was_user).then_some((pid, was_user)),
                    Err(_) => {
                        unknown.push(pid);
                        None
                    }
                }
            })
            .collect();
        for pid in unknown {
            if let Some(e) = self.entries.get_mut(&pid) {
                // Due for the recheck at the next cycle (a cgroup list is set: only then are
                // cgroups read).
                e.class_ns = 0;
            }
        }
        for (pid, was_user) in changed {
            if was_user {
                self.left.push(pid);
            }
            self.drop_entry(pid);
        }
    }

    /// The processes that were managed and are skipped now, since the last call (see the field).
    pub fn take_left(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.left)
    }

    fn drop_entry(&mut self, pid: u32) {
        if let Some(e) = self.entries.remove(&pid) {
            if e.fd.is_some() {
                self.open_fds -= 1;
            }
        }
    }

    /// Asks for `pid`'s threads and numa_maps to be read on the next cycle, whatever the tiers say:
    /// the daemon just changed its affinity or moved its pages. Without it a steady process's
    /// numa_maps is carried for up to `numa_maps_ms`, and the plan keeps asking to move pages that
    /// have moved already (the 2-node rig saw a `migrate_pages` of 8,308 pages repeated every step
    /// for 14 s, each finding nothing to move). Unknown pids are ignored.
    pub fn refresh(&mut self, pid: u32) {
        // A skipped process is never read in detail and would never clear the flag, which keeps
        // its stat from resting: a page move that ended after its process was released set it.
        if let Some(e) = self.entries.get_mut(&pid).filter(|e| matches!(e.kind, Kind::User)) {
            e.refresh = true;
        }
    }

    /// Takes back a sample this observer produced: the carried processes' details it lent go back
    /// to their entries (a process whose start time no longer matches is left out; one not given
    /// back at all is read again in full next cycle). Processes read this cycle were copied into
    /// the sample and are dropped with it.
    pub fn recycle(&mut self, sample: Sample) {
        for mut p in sample.processes {
            let Some(e) = self.entries.get_mut(&p.pid) else { continue };
            if !e.lent || e.starttime != p.starttime {
                continue;
            }
            if let Some(m) = e.lent_maps.take() {
                p.numa_maps = Some(m);
            }
            e.last = Some(p);
            e.lent = false;
        }
    }

    /// The observer's tables, by name (`Engine::bookkeeping`'s counterpart for the live host):
    /// watched pids (processes, kernel threads and skipped ones), stat files kept open, processes
    /// whose full details are carried, cached cpuset CPU lists, processes moved into numapilot's
    /// cpusets.
    pub fn bookkeeping(&self, out: &mut Vec<(&'static str, usize)>) {
        out.push(("observer.pids", self.entries.len()));
        out.push((
            "observer.kernel_threads",
            self.entries.values().filter(|e| matches!(e.kind, Kind::Kernel { .. })).count(),
        ));
        out.push(("observer.open_stat_fds", self.open_fds));
        out.push(("observer.carried_details", self.entries.values().filter(|e| e.last.is_some()).count()));
        out.push((
            "observer.carried_threads",
            self.entries.values().filter_map(|e| e.last.as_ref()).map(|l| l.threads.len()).sum(),
        ));
        out.push(("observer.cpuset_paths", self.cpuset_paths.by_path.len()));
        out.push(("observer.moved_from", self.moved_from.len()));
    }

    /// When `pid`'s numa_maps was last read, host time ns, as the tiers count its age (a first
    /// read is dated back: see `stagger`); `None` for a pid the observer does not watch.
    pub fn numa_maps_read_ns(&self, pid: u32) -> Option<u64> {
        self.entries.get(&pid).filter(|e| e.last.is_some() || e.lent).map(|e| e.maps_ns)
    }

    /// The processes of the last sample that can matter to the signal scans (maps, sockets): RSS
    /// at least `numa_maps_min_rss_kb`, or CPU ticks moved within the last `window` cycles (or
    /// first seen then). Sorted by pid. The scans of every other process are skipped: a small idle
    /// process's shared mappings and sockets change no placement.
    pub fn detail_pids(&self, window: u64) -> Vec<u32> {
        let big = self.tiers.numa_maps_min_rss_kb;
        let mut v: Vec<u32> = self
            .entries
            .iter()
            .filter(|(_, e)| {
                e.in_sample == self.cycle
                    && (e.rss_now_kb >= big || self.cycle.saturating_sub(e.busy_cycle) < window.max(1))
            })
            .map(|(&pid, _)| pid)
            .collect();
        v.sort_unstable();
        v
    }

    /// One observation (see the module essay).
    pub fn sample(&mut self, opts: &LiveOptions, now_ns: u64) -> Result<Sample, ReadError> {
        self.cycle += 1;
        let cycle = self.cycle;
        if self.cpuset_forget > 0 {
            // The first sample after the change reads every managed process's threads (the kernel
            // may have moved threads off CPUs that went, and a mask read while a CPU was away
            // would read as narrowed once it is back); the later ones those whose cpuset was read.
            let all = self.cpuset_forget == HOTPLUG_CPUSET_CYCLES;
            self.cpuset_forget -= 1;
            self.cpuset_paths.by_path.clear();
            for e in self.entries.values_mut() {
                // A process whose cpuset was read had a narrowed thread: its threads are read
                // again, so the new list is in the sample (a carried process keeps its last one).
                if e.cpuset_ns != 0 || (all && matches!(e.kind, Kind::User)) {
                    e.threads_due = true;
                }
                e.cpuset = None;
                e.cpuset_ns = 0;
            }
        }
        // Lent details that did not come back (the sample was dropped, not recycled): read again.
        for e in self.entries.values_mut().filter(|e| e.lent) {
            e.lent = false;
            e.lent_maps = None;
            e.refresh = true;
        }
        let t0 = numapilot_observe::reader::monotonic_ns();
        let mut sample = self.system.sample_of(Some(&[]))?;
        let start = numapilot_observe::reader::monotonic_ns();
        let cpu_start = process_cpu_ns();
        let (listed, mut kept) = self.list_and_read_kept(now_ns)?;
        let root_proc = opts.root.join("proc").to_string_lossy().into_owned();
        let listed_has = |pid: &u32| listed.binary_search_by_key(pid, |&(p, _)| p).is_ok();
        let gone: Vec<u32> = self.entries.keys().copied().filter(|p| !listed_has(p)).collect();
        for p in gone {
            self.drop_entry(p);
        }
        // A kernel thread is not read again for `kthread_recheck_cycles`; one whose pid another
        // process took between two listings would hide that process until then. Its directory's
        // inode tells (see `Reader::pids_with_inodes`): a new one, and the pid is identified again.
        for &(pid, ino) in &listed {
            if let Some(e) = self.entries.get(&pid) {
                if matches!(e.kind, Kind::Kernel { .. }) && e.ino != ino {
                    self.drop_entry(pid);
                }
            }
        }
        let pids: Vec<u32> = listed.iter().map(|&(pid, _)| pid).collect();
        let t = &self.tiers;
        let carry = t.carry_idle_threads;
        let idle_factor = t.numa_maps_idle_factor.max(1);
        let (min_ticks, stale, maps_ns, maps_min, rss_change, krecheck) = (
            t.detail_min_ticks,
            t.stale_cycles.max(1),
            t.numa_maps_ms.saturating_mul(1_000_000),
            t.numa_maps_min_rss_kb,
            t.rss_change_kb,
            t.kthread_recheck_cycles.max(1),
        );
        let recheck_ns = t.cgroup_recheck_ms.saturating_mul(1_000_000);
        let cgroup_lists = !(opts.exclude_cgroups.is_empty() && opts.include_cgroups.is_empty());
        let mut stats = TierStats::default();
        let mut want_both = Vec::new();
        let mut want_threads = Vec::new();
        // Processes read in no tier this cycle (ascending by pid).
        let mut carried = Vec::new();
        // Per entry of `want_threads`: read since the last read (see `carry_idle_threads`).
        let mut since = Vec::new();
        let mut want_maps = Vec::new();
        // numa_maps refreshes of known processes, read within `numa_maps_kb_per_cycle`.
        let mut deferrable: Vec<Refresh> = Vec::new();
        // Skipped processes' CPU, ticks per second, by the CPU each last ran on.
        let mut unmanaged: std::collections::BTreeMap<u32, f64> = std::collections::BTreeMap::new();
        let own_pid = std::process::id();
        let mut stats_now: HashMap<u32, Arc<TaskStat>, FxBuild> =
            HashMap::with_capacity_and_hasher(pids.len(), FxBuild::default());
        for &(pid, ino) in &listed {
            if let Some(Entry { kind: Kind::Kernel { cycle: c }, .. }) = self.entries.get(&pid) {
                if cycle.saturating_sub(*c) < krecheck {
                    stats.skipped += 1;
                    continue;
                }
            }
            let keep = !matches!(self.entries.get(&pid), Some(Entry { kind: Kind::Kernel { .. }, .. }));
            // Its /proc directory has another inode than at its last read: the pid may name another
            // process now (one that took it between two listings; or the same one, its directory's
            // cached entry dropped). Not carried, nor read through the old descriptor (of a reaped
            // process it reads nothing, and the new one would be seen a cycle later): read by path.
            let renewed = match self.entries.get_mut(&pid) {
                Some(e) if e.ino != ino => {
                    if e.fd.take().is_some() {
                        self.open_fds -= 1;
                    }
                    true
                }
                _ => false,
            };
            let rested = self
                .entries
                .get(&pid)
                .filter(|e| !renewed && stat_rests(e, pid, cycle, now_ns, &self.tiers))
                .and_then(|e| e.stat.clone());
            let fresh = rested.is_none();
            let st: Option<Arc<TaskStat>> = match rested {
                Some(st) => {
                    stats.stat_rested += 1;
                    Some(st)
                }
                None => match kept.binary_search_by_key(&pid, |k| k.0) {
                    Ok(i) if !renewed => kept[i].1.take().map(Arc::new),
                    _ => self.stat(&root_proc, pid, keep)?.map(Arc::new),
                },
            };
            let Some(st) = st else {
                self.drop_entry(pid);
                continue;
            };
            // A zombie with no thread left (exited, not yet reaped) has nothing to place and no
            // memory: not watched (its entry goes, with its kept-open stat file and carried
            // details) and not in the sample, so the model neither plans it nor counts it in a
            // group or a node's load. Its stat is read again each cycle until it is reaped; a
            // placed one's record goes as an exited process's (`Originals::prune_gone`).
            if st.is_zombie() {
                self.drop_entry(pid);
                stats.skipped += 1;
                continue;
            }
            // A new process under a known pid, or a new program or name in the same process (exec, or
            // PR_SET_NAME: same pid and start time, another comm): forget what was decided and read,
            // and classify it again. A process first seen as `numapilot` (excluded by name) that
            // re-execs and renames itself was otherwise skipped for its whole life.
            // A managed process that renames itself and stays managed keeps its entry, though
            // (renamed-keeps-tiers): a process renaming itself every cycle was read in full every
            // cycle as new, past the numa_maps budget (1 GiB walked a cycle against 256 MiB,
            // review of 2026-11-29).
            // A managed process whose cgroups cannot be read for want of a descriptor or memory
            // under its new name keeps its class and its old name, so the check runs again at its
            // next read (taken as excluded, it was named as leaving, put back, and read again as
            // new for one failed read; `reclassify` and the recheck below keep the class too).
            // (A stat carried on a resting cycle is the entry's own last read, taken after this
            // check passed or left it to the next read: nothing to check.)
            if let Some(e) = self.entries.get_mut(&pid).filter(|_| fresh) {
                if e.starttime != st.starttime {
                    self.drop_entry(pid);
                } else if e.comm != st.comm {
                    let was_user = matches!(e.kind, Kind::User);
                    let stays = if was_user {
                        select::exclusion_known(opts, pid, &st.comm, || {
                            cgroups_now(&opts.root, &self.moved_from, pid, st.starttime)
                        })
                        .map(|why| why.is_none())
                    } else {
                        Ok(false)
                    };
                    match stays {
                        Ok(true) => {
                            e.comm.clone_from(&st.comm);
                            e.threads_due = true;
                        }
                        Ok(false) => {
                            // Managed before, excluded (or out of [include]) under its new name:
                            // the live host puts back what it changed on it.
                            if was_user {
                                self.left.push(pid);
                            }
                            self.drop_entry(pid);
                        }
                        Err(_) => {}
                    }
                }
            }
            // With a cgroup list set, the class is decided again every `cgroup_recheck_ms`: a
            // service manager or container runtime moves a process with no exec or rename.
            let recheck = cgroup_lists
                && self.entries.get(&pid).is_some_and(|e| {
                    matches!(e.kind, Kind::User | Kind::Skipped) && now_ns.saturating_sub(e.class_ns) >= recheck_ns
                });
            if recheck {
                stats.cgroup_rechecks += 1;
                // Cgroups unreadable for want of a descriptor or memory: the class stands and is
                // decided again next cycle (taken as "excluded", a managed process left the sample
                // and was put back for one failed read).
                let user = select::exclusion_known(opts, pid, &st.comm, || {
                    cgroups_now(&opts.root, &self.moved_from, pid, st.starttime)
                })
                .map(|why| why.is_none());
                if let (Some(e), Ok(user)) = (self.entries.get_mut(&pid), user) {
                    let was_user = matches!(e.kind, Kind::User);
                    if user == was_user {
                        e.class_ns = now_ns;
                    } else {
                        if was_user {
                            self.left.push(pid);
                        }
                        // Read again as new below, under its new class.
                        self.drop_entry(pid);
                    }
                }
            }
            if let std::collections::hash_map::Entry::Vacant(slot) = self.entries.entry(pid) {
                // Cgroups unreadable for want of a descriptor or memory: skipped (it may be
                // excluded) and classified again at the next cycle's recheck.
                let mut class_ns = now_ns.saturating_sub(stagger(pid, recheck_ns));
                let kind = if st.is_kernel_thread() {
                    Kind::Kernel { cycle }
                } else {
                    match select::exclusion_known(opts, pid, &st.comm, || {
                        cgroups_now(&opts.root, &self.moved_from, pid, st.starttime)
                    }) {
                        Ok(None) => Kind::User,
                        Ok(Some(_)) => Kind::Skipped,
                        Err(_) => {
                            class_ns = now_ns.saturating_sub(recheck_ns);
                            Kind::Skipped
                        }
                    }
                };
                slot.insert(Entry {
                    starttime: st.starttime,
                    ino,
                    unmanaged_ticks: 0,
                    unmanaged_ns: 0,
                    comm: st.comm.clone(),
                    has_policy: false,
                    busy_cycle: cycle,
                    busy_ns: now_ns,
                    stat_ns: 0,
                    stat_cycle: 0,
                    sample_stat_cycle: 0,
                    prev_ticks: st.cpu_ticks(),
                    rss_now_kb: 0,
                    in_sample: 0,
                    kind,
                    fd: None,
                    stat: None,
                    last: None,
                    lent: false,
                    lent_maps: None,
                    unreadable: false,
                    detail_ticks: 0,
                    maps_ns: 0,
                    maps_rss_kb: 0,
                    maps_ticks: 0,
                    refresh: false,
                    threads_due: false,
                    cpuset: None,
                    cpuset_ns: 0,
                    class_ns,
                });
                // Kernel threads and skipped processes keep no descriptor.
                if matches!(self.entries[&pid].kind, Kind::User) {
                    let _ = self.stat(&root_proc, pid, true)?;
                }
            }
            let Some(e) = self.entries.get_mut(&pid) else { continue };
            if fresh {
                e.ino = ino;
            }
            if fresh && !matches!(e.kind, Kind::Kernel { .. }) {
                e.stat = Some(st.clone());
                e.stat_ns = now_ns;
                e.stat_cycle = cycle;
                if st.cpu_ticks() != e.prev_ticks {
                    e.busy_cycle = cycle;
                    e.busy_ns = now_ns;
                    e.prev_ticks = st.cpu_ticks();
                }
            }
            match e.kind {
                Kind::Kernel { .. } => {
                    e.kind = Kind::Kernel { cycle };
                    stats.skipped += 1;
                    continue;
                }
                Kind::Skipped => {
                    stats.skipped += 1;
                    if fresh && pid != own_pid {
                        unmanaged_use(e, &st, now_ns, &mut unmanaged);
                    }
                    continue;
                }
                Kind::User => {}
            }
            let rss_kb = rss_of(&st, self.page_kb, e.last.as_ref().and_then(|l| l.rss_kb));
            // Under `min_rss_kb`: ignored altogether, as kernel threads are (their CPU is not
            // unmanaged load: the race's 16 MiB threshold is what keeps its own samplers, ~0.5 CPU
            // under TCG, out of the guest's placement; counted, numa02's 64 MiB was copied to
            // the workers' node in 3 of 4 runs instead of the two workers moved to it).
            if rss_kb < opts.min_rss_kb {
                stats.skipped += 1;
                continue;
            }
            let new = e.last.is_none();
            e.rss_now_kb = rss_kb;
            e.in_sample = cycle;
            let refresh = std::mem::take(&mut e.refresh);
            let threads_due = std::mem::take(&mut e.threads_due);
            let stale_turn = (u64::from(pid) + cycle) % stale == 0;
            let threads = new
                || refresh
                || threads_due
                || st.cpu_ticks().saturating_sub(e.detail_ticks) >= min_ticks
                || stale_turn;
            let age = now_ns.saturating_sub(e.maps_ns);
            // A small process that has not run since its numa_maps was read: its pages stayed.
            let small_every = if st.cpu_ticks() == e.maps_ticks { 6 * idle_factor } else { 6 };
            let maps = new
                || refresh
                || (threads && e.has_policy)
                || (age >= maps_ns && rss_kb >= maps_min)
                || rss_kb.abs_diff(e.maps_rss_kb) >= rss_change
                || age >= maps_ns.saturating_mul(small_every);
            if maps && !new && !refresh {
                // A refresh by age, RSS change or policy: read within the cycle's budget, oldest first.
                deferrable.push(Refresh { age, pid, rss_kb, threads, since: carry });
                stats_now.insert(pid, st);
                continue;
            }
            if maps {
                if !new {
                    stats.maps_refreshed += 1;
                }
                stats.maps_rss_kb += rss_kb;
            }
            match (threads, maps) {
                (true, true) => want_both.push(pid),
                (true, false) => {
                    want_threads.push(pid);
                    since.push(carry && !new && !refresh);
                }
                (false, true) => want_maps.push(pid),
                (false, false) => carried.push(pid),
            }
            stats_now.insert(pid, st);
        }
        let taken = choose_refreshes(&mut deferrable, stats.maps_rss_kb, self.tiers.numa_maps_kb_per_cycle);
        for (r, take) in deferrable.iter().zip(taken) {
            match (r.threads, take) {
                (true, true) => want_both.push(r.pid),
                (false, true) => want_maps.push(r.pid),
                (true, false) => {
                    want_threads.push(r.pid);
                    since.push(r.since);
                }
                (false, false) => carried.push(r.pid),
            }
            if take {
                stats.maps_refreshed += 1;
                stats.maps_rss_kb += r.rss_kb;
            } else {
                stats.maps_deferred += 1;
            }
        }
        carried.sort_unstable();
        let t_details = numapilot_observe::reader::monotonic_ns();
        let cpu_details = process_cpu_ns();
        let page_kb = self.page_kb;
        // Read the chosen details: a steady-state cycle reads a few dozen processes (split over
        // the reader's workers from `PARALLEL_DETAILS_FROM`); the first cycle every process.
        let entries = &self.entries;
        let readers = (&self.parallel, &self.with_maps, &self.threads_only_par, &self.threads_only, &self.maps_only);
        // A process one of whose files does not parse is left out (and listed), not the cycle.
        let read_details = || -> Result<_, ReadError> {
            let (parallel, with_maps, threads_par, threads_one, maps_only) = readers;
            let (both, mut bad) = if want_both.len() > PARALLEL_FROM {
                parallel.read_processes_skipping(&want_both, &[])?
            } else {
                with_maps.read_processes_skipping(&want_both, &[])?
            };
            let prev: Vec<Option<&ProcessSample>> = want_threads
                .iter()
                .zip(&since)
                .map(|(pid, &s)| if s { entries.get(pid).and_then(|e| e.last.as_ref()) } else { None })
                .collect();
            let reader = if want_threads.len() >= PARALLEL_DETAILS_FROM { threads_par } else { threads_one };
            let (thr, bad_threads) = reader.read_processes_skipping(&want_threads, &prev)?;
            let (mp, bad_maps) = maps_only.read_processes_skipping(&want_maps, &[])?;
            bad.extend(bad_threads);
            bad.extend(bad_maps);
            Ok((both, thr, mp, bad))
        };
        let (mut both, thr, mut mp, bad) = read_details()?;
        // The observer keeps each process's numa_maps between its reads, and nothing here uses a
        // mapping's file name: dropped, so a process of many long-named mappings (any user's) is
        // not held for good (242 MB for one process, review of 2026-11-29).
        for p in both.iter_mut().chain(mp.iter_mut()) {
            drop_file_names(p);
        }
        for x in &bad {
            let Some(e) = self.entries.get_mut(&x.pid) else { continue };
            match x.error {
                ReadError::Stalled { own: true, .. } => stats.stalled += 1,
                // Refused only because too many other processes' reads are stuck: this one is
                // fine, and keeps its last read (carried) until a read of it goes through.
                ReadError::Stalled { own: false, .. } => {
                    stats.maps_deferred += 1;
                    continue;
                }
                _ => {}
            }
            if !e.unreadable {
                tracing::warn!(
                    "process {}: left out of the observation until its files read again: {}",
                    x.pid,
                    x.error
                );
            }
            e.unreadable = true;
            e.last = None;
            e.sample_stat_cycle = 0;
        }
        stats.unreadable =
            bad.len() - bad.iter().filter(|x| matches!(x.error, ReadError::Stalled { own: false, .. })).count();
        stats.threads_read = both.len() + thr.len();
        stats.maps_read = both.len() + mp.len();
        for mut p in both {
            if let Some(e) = self.entries.get_mut(&p.pid).filter(|e| e.starttime == p.starttime) {
                p.cpuset_cpus =
                    cpuset_for(self.cpusets.as_ref(), self.online.as_ref(), &mut self.cpuset_paths, e, &p, now_ns);
                e.unreadable = false;
                e.detail_ticks = p.stat.cpu_ticks();
                // First read: dated back by up to the period of its next age refresh (see
                // `stagger`), which only ever brings that refresh forward.
                let back = if e.last.is_none() {
                    let large = p.rss_kb.unwrap_or(0) >= maps_min;
                    stagger(p.pid, if large { maps_ns } else { maps_ns.saturating_mul(6 * idle_factor) })
                } else {
                    0
                };
                e.maps_ns = now_ns.saturating_sub(back);
                e.maps_rss_kb = p.rss_kb.unwrap_or(0);
                e.maps_ticks = p.stat.cpu_ticks();
                e.has_policy = explicit_policy(&p);
                e.last = Some(p);
                e.sample_stat_cycle = 0;
            }
        }
        for mut p in thr {
            if let Some(e) = self.entries.get_mut(&p.pid).filter(|e| e.starttime == p.starttime) {
                p.cpuset_cpus =
                    cpuset_for(self.cpusets.as_ref(), self.online.as_ref(), &mut self.cpuset_paths, e, &p, now_ns);
                e.unreadable = false;
                e.detail_ticks = p.stat.cpu_ticks();
                if let Some(old) = e.last.take() {
                    p.numa_maps = old.numa_maps;
                    p.numa_maps_error = old.numa_maps_error;
                    p.node_usage = old.node_usage;
                }
                e.last = Some(p);
                e.sample_stat_cycle = 0;
            }
        }
        for p in mp {
            if let Some(e) = self.entries.get_mut(&p.pid).filter(|e| e.starttime == p.starttime) {
                e.maps_ns = now_ns;
                e.maps_rss_kb = p.rss_kb.unwrap_or(0);
                e.maps_ticks = p.stat.cpu_ticks();
                e.has_policy = explicit_policy(&p);
                if let Some(last) = e.last.as_mut() {
                    last.numa_maps = p.numa_maps;
                    last.numa_maps_error = p.numa_maps_error;
                    last.node_usage = p.node_usage;
                }
            }
        }
        let t_assemble = numapilot_observe::reader::monotonic_ns();
        let cpu_assemble = process_cpu_ns();
        // Assemble: every watched process, details as last read, stat and RSS of this cycle,
        // ascending by pid. The carried processes (most of them: a thousand processes of ten
        // threads each, most cycles) go into the sample as their last details moved out of the
        // entries, with this cycle's stat and RSS, and come back with `recycle`: no copy of 10,000
        // thread reads a cycle (a fifth of a steady cycle's CPU when they were cloned and
        // dropped). The detail reads above touch no carried process, so each is moved once, here.
        let mut processes = Vec::with_capacity(stats_now.len());
        let mut carried_next = carried.iter().copied().peekable();
        for &pid in &pids {
            let is_carried = carried_next.next_if_eq(&pid).is_some();
            let Some(st) = stats_now.remove(&pid) else { continue };
            let Some(e) = self.entries.get_mut(&pid) else { continue };
            if is_carried {
                let Some(mut p) = e.last.take() else { continue };
                if !e.has_policy {
                    e.lent_maps = p.numa_maps.take();
                }
                // Set from this very stat on an earlier cycle (a process resting, carried again):
                // name, RSS and stat stand as they are (setting them again changes nothing).
                if e.sample_stat_cycle != e.stat_cycle {
                    let st = Arc::unwrap_or_clone(st);
                    if p.comm != st.comm {
                        p.comm.clone_from(&st.comm);
                    }
                    p.rss_kb = Some(rss_of(&st, page_kb, p.rss_kb));
                    p.stat = st;
                    e.sample_stat_cycle = e.stat_cycle;
                }
                e.lent = true;
                processes.push(p);
                continue;
            }
            let Some(last) = e.last.as_ref() else { continue };
            processes.push(for_sample(last, e.has_policy, Arc::unwrap_or_clone(st), page_kb));
        }
        stats.threads = processes.iter().map(|p| p.threads.len()).sum();
        stats.processes = processes.len();
        stats.open_stat = self.open_fds;
        let end = numapilot_observe::reader::monotonic_ns();
        stats.read_ns = end.saturating_sub(t0);
        stats.system_ns = start.saturating_sub(t0);
        stats.stat_pass_ns = t_details.saturating_sub(start);
        stats.details_ns = t_assemble.saturating_sub(t_details);
        stats.assemble_ns = end.saturating_sub(t_assemble);
        let cpu_end = process_cpu_ns();
        stats.stat_pass_cpu_ns = cpu_details.saturating_sub(cpu_start);
        stats.details_cpu_ns = cpu_assemble.saturating_sub(cpu_details);
        stats.assemble_cpu_ns = cpu_end.saturating_sub(cpu_assemble);
        self.stats = stats;
        sample.processes = processes;
        let hz = sample.clock_ticks_per_sec.max(1) as f64;
        sample.unmanaged_cpu =
            unmanaged.into_iter().map(|(cpu, per_s)| numapilot_observe::CpuUse { cpu, cpus: per_s / hz }).collect();
        sample.duration_ns = sample.duration_ns.saturating_add(numapilot_observe::reader::monotonic_ns() - start);
        Ok(sample)
    }
}

/// Adds an unmanaged process's CPU since its last fresh read (excluded, or outside `[include]`:
/// work the operator took out of the model) to `unmanaged`, ticks per second by the CPU
/// it last ran on, and remembers this read. The daemon's own CPU is not counted by the caller
/// (rule observer-not-load).
fn unmanaged_use(e: &mut Entry, st: &TaskStat, now_ns: u64, unmanaged: &mut std::collections::BTreeMap<u32, f64>) {
    let ticks = st.cpu_ticks();
    if e.unmanaged_ns > 0 && now_ns > e.unmanaged_ns && ticks > e.unmanaged_ticks {
        let per_s = (ticks - e.unmanaged_ticks) as f64 * 1e9 / (now_ns - e.unmanaged_ns) as f64;
        *unmanaged.entry(st.processor).or_default() += per_s;
    }
    e.unmanaged_ticks = ticks;
    e.unmanaged_ns = now_ns;
}

/// `pid`'s cgroup paths, with the one it came from when the daemon moved it into a cpuset of its
/// own (`moved_from`, the same start time); `Err` when they could not be read for want of a
/// descriptor or memory, `Ok(None)` when the process is gone: `select::cgroup_paths_under`, read
/// under the observer's root (`opts.root`), as every other file of the process it classifies.
fn cgroups_now(
    root: &std::path::Path,
    moved_from: &HashMap<u32, (u64, String)>,
    pid: u32,
    starttime: u64,
) -> std::io::Result<Option<Vec<String>>> {
    let from = moved_from.get(&pid).filter(|(st, _)| *st == starttime).map(|(_, f)| f.as_str());
    select::cgroup_paths_under(root, pid, from)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cgroup's CPUs are read once per recheck period whatever the number of processes asking,
    /// then again; the cache never holds more than its maximum.
    #[test]
    fn cpuset_paths_are_read_once_per_period_and_bounded() {
        let d = tempfile::tempdir().unwrap();
        let h = CpusetHierarchy { version: numapilot_actuate::CgroupVersion::V2, mount: d.path().to_path_buf() };
        std::fs::create_dir(d.path().join("ctr")).unwrap();
        std::fs::write(d.path().join("ctr/cpuset.cpus.effective"), "4-7\n").unwrap();
        let mut c = CpusetPaths::default();
        let list = |x: Option<Arc<CpuSet>>| x.map(|s| s.to_list());
        let first = c.cpus(&h, "/ctr", 1);
        assert_eq!(list(first.clone()).as_deref(), Some("4-7"));
        std::fs::write(d.path().join("ctr/cpuset.cpus.effective"), "4-5\n").unwrap();
        let again = c.cpus(&h, "/ctr", CPUSET_RECHECK_NS);
        assert!(Arc::ptr_eq(first.as_ref().unwrap(), again.as_ref().unwrap()), "one read within the period");
        assert_eq!(list(c.cpus(&h, "/ctr", CPUSET_RECHECK_NS + 1)).as_deref(), Some("4-5"), "read again after it");
        for i in 0..CpusetPaths::MAX + 10 {
            c.cpus(&h, &format!("/gone-{i}"), CPUSET_RECHECK_NS + 2);
        }
        assert!(c.by_path.len() <= CpusetPaths::MAX);
    }

    fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let dest = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy_dir(&e.path(), &dest);
            } else {
                std::fs::copy(e.path(), dest).unwrap();
            }
        }
    }

    /// A process one of whose files does not parse is left out of the sample, once in the log,
    /// and the other processes are observed; when its files read again it is back. (One such
    /// process failed every cycle's observation while it lived.) On a copy of the host fixture
    /// (processes 9311 and 9319), 9311's thread 9313 with a truncated stat.
    #[test]
    fn a_process_whose_file_does_not_parse_is_left_out_not_the_cycle() {
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/host-6.18");
        let root = std::env::temp_dir().join(format!("numapilot-observe-unreadable-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        copy_dir(&fixture, &root);
        let opts = LiveOptions { root: root.clone(), ..LiveOptions::default() };
        let mut o = TieredObserver::new(&opts, &TierOptions::default());
        let stat = root.join("proc/9311/task/9313/stat");
        let good = std::fs::read_to_string(&stat).unwrap();
        std::fs::write(&stat, "9313 (a) R 1\n").unwrap();
        let pids = |s: &Sample| s.processes.iter().map(|p| p.pid).collect::<Vec<_>>();
        let s1 = o.sample(&opts, 1_000_000_000).expect("one unreadable process does not fail the cycle");
        assert_eq!(pids(&s1), [9319]);
        assert_eq!(o.stats.unreadable, 1);
        std::fs::write(&stat, good).unwrap();
        let s2 = o.sample(&opts, 2_000_000_000).unwrap();
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(pids(&s2), [9311, 9319], "read again once its files parse");
        assert_eq!(o.stats.unreadable, 0);
    }

    /// `from` (a process directory of the fixture) as process `pid` at `to`: its stat files (the
    /// process's and its threads') with that pid, `flags` and `start` time, its one thread renamed.
    fn as_process(from: &std::path::Path, to: &std::path::Path, pid: u32, flags: u64, start: u64) {
        copy_dir(from, to);
        let old = from.file_name().unwrap().to_string_lossy().into_owned();
        std::fs::rename(to.join("task").join(&old), to.join("task").join(pid.to_string())).unwrap();
        for stat in [to.join("stat"), to.join("task").join(pid.to_string()).join("stat")] {
            let text = std::fs::read_to_string(&stat).unwrap();
            let (head, tail) = text.rsplit_once(") ").unwrap();
            let mut f: Vec<String> = tail.split_whitespace().map(str::to_string).collect();
            // After the name: state, ppid, pgrp, session, tty, tpgid, flags (6), ... start (19).
            f[6] = flags.to_string();
            f[19] = start.to_string();
            let comm = head.split_once(' ').unwrap().1;
            std::fs::write(&stat, format!("{pid} {comm}) {}\n", f.join(" "))).unwrap();
        }
    }

    /// A kernel thread is identified once and not read again for `kthread_recheck_cycles`; a
    /// process that takes its pid between two listings is seen at the next cycle all the same,
    /// from the new inode of its /proc directory (it was skipped until the recheck, 30 cycles).
    #[test]
    fn a_process_that_takes_a_kernel_threads_pid_is_seen_at_once() {
        const PF_KTHREAD: u64 = 0x0020_0000;
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/host-6.18");
        let root = tempfile::tempdir().unwrap();
        copy_dir(&fixture, root.path());
        let proc = root.path().join("proc");
        let user = proc.join("9319");
        as_process(&user, &proc.join("77"), 77, 0x0040_0000 | PF_KTHREAD, 100);
        let opts = LiveOptions { root: root.path().to_path_buf(), ..LiveOptions::default() };
        let tiers = TierOptions::default();
        assert!(tiers.kthread_recheck_cycles > 2);
        let mut o = TieredObserver::new(&opts, &tiers);
        let pids = |s: &Sample| s.processes.iter().map(|p| p.pid).collect::<Vec<_>>();
        assert_eq!(pids(&o.sample(&opts, 1_000_000_000).unwrap()), [9311, 9319], "77 is a kernel thread");
        assert_eq!(pids(&o.sample(&opts, 2_000_000_000).unwrap()), [9311, 9319]);
        // The kernel thread ends; a user process gets pid 77 before the next listing (its
        // directory made before the old one goes, so that it cannot reuse the old one's inode).
        as_process(&user, &proc.join("77.new"), 77, 0x0040_0000, 5_000);
        std::fs::remove_dir_all(proc.join("77")).unwrap();
        std::fs::rename(proc.join("77.new"), proc.join("77")).unwrap();
        assert_eq!(pids(&o.sample(&opts, 3_000_000_000).unwrap()), [77, 9311, 9319], "seen at the next cycle");
    }

    /// A long-idle process carried in the sample shows its last stat read, whole (RSS included),
    /// on the cycles its stat rests as on those that read it: process 9319 of a copy of the host
    /// fixture, its stat file given other RSS figures (by less than `rss_change_kb`) while it rests (idle from the start,
    /// `idle_after_ms` 0), read again on its turns (cycles 1, 5, 9, 13: one in 4 by pid), each
    /// sample given back (`recycle`) as the engine does.
    #[test]
    fn a_resting_carried_process_shows_its_last_stat_read() {
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/host-6.18");
        let root = tempfile::tempdir().unwrap();
        copy_dir(&fixture, root.path());
        let opts = LiveOptions { root: root.path().to_path_buf(), ..LiveOptions::default() };
        let tiers =
            TierOptions { idle_after_ms: 0, idle_stat_every: 4, idle_stat_max_ms: 1 << 40, ..TierOptions::default() };
        let mut o = TieredObserver::new(&opts, &tiers);
        let page_kb = super::super::page_size() / 1024;
        let path = root.path().join("proc/9319/stat");
        let original = std::fs::read_to_string(&path).unwrap();
        let with_rss = |pages: u64| original.replacen(" 2990080 413 ", &format!(" 2990080 {pages} "), 1);
        assert_ne!(with_rss(1413), original);
        let (mut file, mut read) = (original.clone(), original.clone());
        for cycle in 1..=16u64 {
            if cycle == 6 || cycle == 11 {
                // A few MiB more: under `rss_change_kb`, so no numa_maps read makes it due.
                file = with_rss(413 + 100 * cycle);
                std::fs::write(&path, &file).unwrap();
            }
            let s = o.sample(&opts, cycle * 1_000_000_000).unwrap();
            let turn = cycle == 1 || (9319 + cycle) % 4 == 0;
            if turn {
                read.clone_from(&file);
            }
            assert_eq!(o.stats.stat_rested > 0, !turn, "cycle {cycle}: {:?}", o.stats);
            // Carried, not read in detail, after the first cycle: its sample is its last read's.
            assert_eq!(o.stats.threads_read + o.stats.maps_read == 0, cycle > 1, "cycle {cycle}: {:?}", o.stats);
            let p = s.process(9319).expect("in the sample");
            let want = parse_stat(&read).unwrap();
            assert_eq!(p.stat, want, "cycle {cycle}");
            assert_eq!(p.rss_kb, Some(want.rss_pages * page_kb), "cycle {cycle}");
            assert_eq!(p.comm, want.comm, "cycle {cycle}");
            o.recycle(s);
        }
    }

    /// A pid another process takes while the process it named rests (long idle: its stat carried,
    /// not read) is seen at the next cycle, from the new inode of its /proc directory in the
    /// listing, not at the pid's next stat turn: until then the sample showed the old process's
    /// stat and details under the new one's pid. Process 9319 of a copy of the host fixture, idle
    /// from the start, its stat read one cycle in 4 (cycles 1, 5, ...), replaced at cycle 3 by a
    /// process of another start time.
    #[test]
    fn a_pid_reused_while_its_process_rests_is_seen_at_the_next_cycle() {
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/host-6.18");
        let root = tempfile::tempdir().unwrap();
        copy_dir(&fixture, root.path());
        let proc = root.path().join("proc");
        let opts = LiveOptions { root: root.path().to_path_buf(), ..LiveOptions::default() };
        let tiers =
            TierOptions { idle_after_ms: 0, idle_stat_every: 4, idle_stat_max_ms: 1 << 40, ..TierOptions::default() };
        let mut o = TieredObserver::new(&opts, &tiers);
        let start = |s: &Sample| s.process(9319).map(|p| (p.starttime, p.stat.starttime));
        for cycle in 1..=2 {
            let s = o.sample(&opts, cycle * 1_000_000_000).unwrap();
            assert_eq!(start(&s), Some((41348, 41348)), "cycle {cycle}");
            assert_eq!(o.stats.stat_rested > 0, cycle == 2, "cycle {cycle}: {:?}", o.stats);
            o.recycle(s);
        }
        // 9319 exits and a new process takes its pid before the next listing (its directory made
        // before the old one goes, so that it cannot reuse the old one's inode).
        as_process(&proc.join("9319"), &proc.join("9319.new"), 9319, 0x0040_0000, 50_000);
        std::fs::remove_dir_all(proc.join("9319")).unwrap();
        std::fs::rename(proc.join("9319.new"), proc.join("9319")).unwrap();
        assert_ne!((9319 + 3) % 4, 0, "cycle 3 is not 9319's stat turn");
        let s = o.sample(&opts, 3_000_000_000).unwrap();
        assert_eq!(start(&s), Some((50_000, 50_000)), "the new process at the next cycle: {:?}", o.stats);
        assert!(o.stats.threads_read > 0 && o.stats.maps_read > 0, "read as new: {:?}", o.stats);
    }

    fn due(age: u64, pid: u32, rss_kb: u64) -> Refresh {
        Refresh { age, pid, rss_kb, threads: false, since: false }
    }

    /// The refreshes a cycle reads stay within the budget, longest unread first; the rest wait, and
    /// one larger than the whole budget is still read when it is the longest unread.
    #[test]
    fn refreshes_are_read_within_the_budget_oldest_first() {
        let mut d = vec![due(10, 1, 3000), due(30, 2, 3000), due(20, 3, 3000), due(40, 4, 1000)];
        let taken = choose_refreshes(&mut d, 0, 7200);
        let read: Vec<u32> = d.iter().zip(&taken).filter(|(_, &t)| t).map(|(r, _)| r.pid).collect();
        assert_eq!(read, vec![4, 2, 3], "oldest first while 7200 kB allow (1000 kB counted as 1024)");
        let walked: u64 = d.iter().zip(&taken).filter(|(_, &t)| t).map(|(r, _)| r.rss_kb.max(MIN_REFRESH_KB)).sum();
        assert!(walked <= 7200);
        // What new processes used counts: 5000 kB spent leaves room for the first (always) only.
        let taken = choose_refreshes(&mut d, 5000, 7200);
        assert_eq!(taken, vec![true, false, false, false]);
        // A process larger than the budget is read when it is the longest unread, alone.
        let mut d = vec![due(10, 1, 1000), due(50, 2, 50_000)];
        assert_eq!(choose_refreshes(&mut d, 0, 7000), vec![true, false]);
        assert_eq!(d[0].pid, 2);
        // Nothing resident is not free: 100 such refreshes under a 4 MiB budget, 4 read.
        let mut d: Vec<Refresh> = (0..100).map(|i| due(1000 - u64::from(i), i, 0)).collect();
        assert_eq!(choose_refreshes(&mut d, 0, 4096).iter().filter(|&&t| t).count(), 4);
    }
}
