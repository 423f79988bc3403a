//! [`Reader`]: reads /proc and /sys under a root directory ("/" for the live system, a fixture
//! directory in tests) and hands the text to the pure parsers.
//!
//! ```text
//!   Reader::sample()  (Reader::sample_of(pids): the same for the given processes only)
//!     ├─ /proc/stat, /proc/vmstat, /proc/pressure/*, /proc/sys/kernel/numa_balancing
//!     ├─ /sys/devices/system/node/nodeN/{cpulist,meminfo,numastat,vmstat}   for each nodeN directory
//!     └─ for each /proc/PID (W worker threads pull pids from one shared counter)
//!          ├─ stat                       gone? skip the process; a kernel thread stops here unless
//!          │                             ReadOptions::kernel_threads
//!          ├─ numa_maps                  not for kernel threads; EACCES is recorded, not fatal; a
//!          │                             leader that exited (Z) while threads run on: task/TID/numa_maps
//!          ├─ task/                      the thread ids
//!          └─ per thread: task/TID/stat, schedstat,
//!                         status         leader only (others: sched_getaffinity), see ReadOptions
//!                         sched          only while NUMA balancing is on (numa_balancing is read once
//!                                        per sample and passed down), see SchedMode
//! ```
//!
//! Processes come and go during every scan. A pid or tid whose files vanish mid-read (ENOENT, ESRCH;
//! EINVAL from numa_maps of an exiting process) is skipped: `Ok(None)`, never an error. Everything else
//! (a file that exists but cannot be parsed, a permission problem on a file everyone may read) is a
//! [`ReadError`] naming the path.
//!
//! Cost (measured with 1,000 processes x 10 threads on a 2-CPU 6.18 guest; `scripts/bench-observe.sh`):
//! about 0.3 s of CPU per full observation, three quarters of it inside the kernel producing the files:
//! numa_maps alone (the kernel walks the page tables of every VMA to count pages per node) is about 30 %,
//! opening files about 20 %. So the reader opens as few files as it can (2 per thread, 4 per process),
//! reads single-record files with one `read` into a buffer reused for every file, parses bytes in place
//! without allocating, and shares equal strings and sets; only the values kept in the [`Sample`]
//! allocate. Peak memory of a fresh process doing one such observation: about 15 MB.
//! What that measurement leaves out: the host runs with `numa_balancing` 0, so no `sched` file was read
//! (with balancing on, one more file of about 1.8 kB per thread: see [`SchedMode`]); and threads other
//! than the leader took their CPU affinity from `sched_getaffinity(2)` instead of their status file (see
//! [`ReadOptions::thread_status`]).
//!
//! Limits: `clock_ticks_per_sec` and `page_size` come from `sysconf` of the running system even when
//! `root` points at a fixture (every fixture so far is x86-64: 100 and 4096).

use std::collections::HashSet;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use numapilot_topology::{IdSet, NodeSet};

use crate::counters::Counters;
use crate::error::{FileKind, ParseError, ReadError};
use crate::parse::meminfo::{parse_meminfo, parse_node_meminfo, parse_node_numastat, Meminfo};
use crate::parse::numa_maps::{parse_numa_maps_with, FxBuild, NumaMaps, PathInterner};
use crate::parse::proc_stat::{parse_proc_stat, ProcStat};
use crate::parse::psi::{parse_psi, Psi};
use crate::parse::sched::parse_sched;
use crate::parse::schedstat::parse_schedstat;
use crate::parse::stat::{parse_stat, TaskStat};
use crate::parse::status::{parse_status, TaskStatus};
use crate::parse::vmstat::{parse_node_vmstat, parse_vmstat};
use crate::parse::{parse_list, parse_number};
use crate::sample::{NodeSample, ProcessSample, PsiSample, Sample, ThreadSample};

/// When to read `task/TID/sched`, the biggest per-thread file (about 1.8 kB of formatted text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchedMode {
    /// Always.
    Always,
    /// Only when NUMA balancing is on (`/proc/sys/kernel/numa_balancing` absent or not 0). With
    /// balancing off the NUMA block holds no information (no hinting faults are taken, the preferred
    /// node stays -1), so [`ThreadSample::sched`] is `None`; run time is in schedstat either way.
    #[default]
    IfBalancing,
    /// Never.
    Never,
}

/// What a full observation reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOptions {
    /// Read every thread's files (`task/TID/*`). Default true.
    pub threads: bool,
    /// Read numa_maps of every user process. Default true.
    pub numa_maps: bool,
    /// When to read `task/TID/sched` (NUMA-balancing numbers). Default [`SchedMode::IfBalancing`].
    pub sched: SchedMode,
    /// Include kernel threads. Default true.
    pub kernel_threads: bool,
    /// Read `task/TID/status` of every thread. Default false: on the live system only the leader's
    /// status is read, and each other thread's CPU affinity comes from `sched_getaffinity(2)` (the same
    /// mask status prints, for a tenth of the cost); such threads take the leader's `Mems_allowed`
    /// (threads of a process share their cpuset unless cgroup v2's threaded mode splits them) and have
    /// no context-switch counts. A fixture root is always read from its status files.
    pub thread_status: bool,
    /// Worker threads for reading processes; 0 picks the number of CPUs, at most
    /// [`ReadOptions::MAX_DEFAULT_WORKERS`].
    pub workers: usize,
}

impl ReadOptions {
    /// Cap on the workers picked when [`ReadOptions::workers`] is 0. Default 4, unit worker threads.
    /// Source: a choice, not a measurement (the development machine has 2 CPUs, where 2 workers halve
    /// the wall time of a full observation; nothing above 2 was measured). What it prevents: an observer
    /// that takes every CPU of a large machine from the workload it observes, every scan.
    pub const MAX_DEFAULT_WORKERS: usize = 4;
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            threads: true,
            numa_maps: true,
            sched: SchedMode::default(),
            kernel_threads: true,
            thread_status: false,
            workers: 0,
        }
    }
}

/// A process a read left out because one of its files did not parse
/// ([`Reader::read_processes_skipping`]).
#[derive(Debug)]
pub struct Skipped {
    /// The process.
    pub pid: u32,
    /// The file and what its parser said.
    pub error: ReadError,
}

/// Reads the kernel's files under a root directory.
#[derive(Debug, Clone)]
pub struct Reader {
    root: PathBuf,
    /// `root/proc` as a string with a trailing slash, the prefix of every per-process path.
    proc_prefix: String,
    opts: ReadOptions,
    /// Reads of the files produced under a process's memory-map lock (numa_maps, maps) go
    /// through it when set ([`Reader::with_guard`]).
    guard: Option<crate::stall::StallGuard>,
    /// `root` is the live root, however spelled (resolved once, at construction).
    live: bool,
}

impl Default for Reader {
    fn default() -> Self {
        Reader::new("/")
    }
}

/// Per-worker reusable state: path and read buffers, shared strings and sets, whether to read sched.
#[derive(Debug)]
struct Scratch {
    path: String,
    buf: Buf,
    paths: PathInterner,
    sets: HashSet<Arc<IdSet>, FxBuild>,
    /// Buffer for sched_getaffinity.
    words: Vec<u64>,
    sched: bool,
}

impl Scratch {
    fn new(sched: bool) -> Self {
        Scratch {
            path: String::with_capacity(128),
            buf: Buf::new(),
            paths: PathInterner::default(),
            sets: HashSet::default(),
            words: vec![0; AFFINITY_INITIAL_WORDS],
            sched,
        }
    }

    /// The shared copy of a CPU or node set (threads of a process nearly always have equal ones).
    fn intern_set(&mut self, set: IdSet) -> Arc<IdSet> {
        if let Some(s) = self.sets.get(&set) {
            return Arc::clone(s);
        }
        let s = Arc::new(set);
        self.sets.insert(Arc::clone(&s));
        s
    }
}

/// A read buffer whose storage is allocated (and zeroed) once: `data.len()` is the capacity, `len` the
/// bytes of the last file.
#[derive(Debug)]
pub(crate) struct Buf {
    data: Vec<u8>,
    len: usize,
}

impl Buf {
    /// 16 kB holds every single-record file (status is about 1.5 kB, sched about 1.8 kB) in one read.
    const INITIAL: usize = 16 * 1024;
    /// A buffer larger than this (8 MiB: a numa_maps of ~50,000 mappings) after one file goes back
    /// to [`Buf::INITIAL`] at the next read, so one huge file is not held for good.
    const KEEP_AT_MOST: usize = 8 << 20;

    pub(crate) fn new() -> Self {
        Buf { data: vec![0; Self::INITIAL], len: 0 }
    }

    /// A buffer with no storage (grown at its first read).
    pub(crate) fn empty() -> Self {
        Buf { data: Vec::new(), len: 0 }
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.data[..self.len]
    }
}

/// Whether an I/O error means "the process or thread is gone".
fn is_gone(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ESRCH)) || e.kind() == io::ErrorKind::NotFound
}

/// Reads a whole file into `buf`.
///
/// `single_record`: the file is produced in one piece (procfs `single_open` files: stat, status,
/// sched, schedstat; or a regular file), so a read that does not fill the buffer has returned all of
/// it and the read that would return 0 is skipped: one syscall less per file, a tenth of the cost of a
/// small /proc file. Multi-record files (numa_maps: `seq_read` hands out at most about a page per call
/// and may return short reads before the end) are read until a read returns 0.
///
/// At most [`MAX_FILE_BYTES`]: a larger file is an error of kind `FileTooLarge` (the callers leave
/// the process out), and a buffer grown past [`Buf::KEEP_AT_MOST`] by one file is given back at the
/// next read.
fn read_into(path: &Path, buf: &mut Buf, single_record: bool) -> io::Result<()> {
    read_into_capped(path, buf, single_record, MAX_FILE_BYTES)
}

/// Largest /proc or /sys file a [`Reader`] reads, bytes: 64 MiB. The largest honest one is a
/// process's numa_maps or maps: one line per mapping, up to `vm.max_map_count` of them (65,530 by
/// default, 262,144 where databases raise it) at 100-250 bytes (the path of a mapped file). Any
/// user controls the size of their own processes' files, though: mappings of 4 kB-named files
/// (each blank escaped as `\040`) made one numa_maps 965 MB (review of 2026-11-29), read whole by
/// the root daemon. Prevents: one process making the daemon hold gigabytes.
pub const MAX_FILE_BYTES: usize = 64 << 20;

fn read_into_capped(path: &Path, buf: &mut Buf, single_record: bool, max: usize) -> io::Result<()> {
    read_into_progress(path, buf, single_record, max, None)
}

/// [`read_into`] adding the bytes of every `read` call that returned, plus one, to `progress`
/// (the stall guard's sign of a read that is slow, not stuck).
pub(crate) fn read_into_counted(
    path: &Path,
    buf: &mut Buf,
    single_record: bool,
    progress: &std::sync::atomic::AtomicU64,
) -> io::Result<()> {
    read_into_progress(path, buf, single_record, MAX_FILE_BYTES, Some(progress))
}

fn read_into_progress(
    path: &Path,
    buf: &mut Buf,
    single_record: bool,
    max: usize,
    progress: Option<&std::sync::atomic::AtomicU64>,
) -> io::Result<()> {
    let mut f = File::open(path)?;
    buf.len = 0;
    if buf.data.len() > Buf::KEEP_AT_MOST || buf.data.is_empty() {
        buf.data = vec![0; Buf::INITIAL];
    }
    loop {
        if buf.len == buf.data.len() {
            if buf.len >= max {
                return Err(io::Error::new(
                    io::ErrorKind::FileTooLarge,
                    format!("larger than {} MiB: not read", max >> 20),
                ));
            }
            let grown = (buf.data.len() * 2).min(max.max(Buf::INITIAL));
            buf.data.resize(grown, 0);
        }
        let room = buf.data.len() - buf.len;
        let n = match f.read(&mut buf.data[buf.len..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        buf.len += n;
        if let Some(p) = progress {
            p.fetch_add(n as u64 + 1, std::sync::atomic::Ordering::Relaxed);
        }
        if n == 0 || (single_record && n < room) {
            return Ok(());
        }
    }
}

/// The bytes as text. Kernel files are ASCII except for names (comm, paths), which may hold any byte:
/// invalid UTF-8 is replaced (U+FFFD) rather than rejected. The strict check is tried first because it
/// is several times faster than the replacing decoder on valid input.
/// A /proc file's bytes as text: a name is bytes, not UTF-8 (the kernel cuts a long executable
/// name at 15 bytes, inside a multi-byte character as often as not), so invalid sequences become
/// U+FFFD instead of failing the read. Every reader of /proc text goes through this.
pub fn text_of(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

fn parse_err(path: &str, source: ParseError) -> ReadError {
    ReadError::Parse { path: PathBuf::from(path), source }
}

fn io_err(path: &str, source: io::Error) -> ReadError {
    ReadError::Io { path: PathBuf::from(path), source }
}

impl Reader {
    /// A reader of the system under `root` ("/" for the live system), with default options.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self::with_options(root, ReadOptions::default())
    }

    /// A reader with explicit options.
    pub fn with_options(root: impl Into<PathBuf>, opts: ReadOptions) -> Self {
        let root = root.into();
        let mut proc_prefix = root.join("proc").to_string_lossy().into_owned();
        proc_prefix.push('/');
        let live = root == Path::new("/") || std::fs::canonicalize(&root).is_ok_and(|r| r == Path::new("/"));
        Reader { root, proc_prefix, opts, guard: None, live }
    }

    /// This reader with its numa_maps and maps reads under `guard`: a read that sleeps in the
    /// kernel past the guard's deadline fails (`ReadError::Stalled`, or an I/O error of kind
    /// `TimedOut` for maps) instead of holding the caller (see [`crate::stall`]).
    pub fn with_guard(mut self, guard: crate::stall::StallGuard) -> Self {
        self.guard = Some(guard);
        self
    }

    /// Reads a file taken under process `pid`'s memory-map lock: through the guard when set.
    fn read_mm_file(&self, pid: u32, path: &str, buf: &mut Buf) -> io::Result<()> {
        match &self.guard {
            Some(g) => g.read(pid, path, buf, false),
            None => read_into(Path::new(path), buf, false),
        }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether this reader looks at the live system (root "/", however spelled: `/proc/..` is the
    /// live root too, and was taken for a fixture; review helper-61).
    pub fn is_live(&self) -> bool {
        self.live
    }

    /// The options.
    pub fn options(&self) -> &ReadOptions {
        &self.opts
    }

    fn path_in_root(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    // ----- per-process files -----------------------------------------------------------------------

    fn set_path(&self, s: &mut String, pid: u32, tid: Option<u32>, file: &str) {
        s.clear();
        s.push_str(&self.proc_prefix);
        // Writing into a String cannot fail.
        let _ = match tid {
            Some(t) => write!(s, "{pid}/task/{t}/{file}"),
            None => write!(s, "{pid}/{file}"),
        };
    }

    /// Reads `proc/PID[/task/TID]/file` and parses it; `Ok(None)` when the task is gone.
    fn read_task_file<T>(
        &self,
        s: &mut Scratch,
        pid: u32,
        tid: Option<u32>,
        file: &str,
        parse: impl FnOnce(&str) -> Result<T, ParseError>,
    ) -> Result<Option<T>, ReadError> {
        self.set_path(&mut s.path, pid, tid, file);
        match read_into(Path::new(&s.path), &mut s.buf, true) {
            Ok(()) => {}
            Err(e) if is_gone(&e) => return Ok(None),
            Err(e) => return Err(io_err(&s.path, e)),
        }
        let text = text_of(s.buf.bytes());
        match parse(&text) {
            Ok(v) => Ok(Some(v)),
            // A task that exits while its file is produced can leave an empty read behind.
            Err(_) if s.buf.len == 0 => Ok(None),
            Err(e) => Err(parse_err(&s.path, e)),
        }
    }

    /// The pids under `root/proc`, ascending.
    pub fn pids(&self) -> Result<Vec<u32>, ReadError> {
        Ok(self.pids_with_inodes()?.into_iter().map(|(pid, _)| pid).collect())
    }

    /// The pids, ascending, each with the inode number of its /proc directory as the listing gives
    /// it (getdents' `d_ino`: no system call more). procfs gives a process's directory an inode
    /// when it is first looked up and a new one (numbers only grow) for a new process, so a pid
    /// whose inode changed between two listings may be another process: one that took the pid of
    /// a process that ended in between (the inode can also change for the same process, when the
    /// kernel dropped the cached entry under memory pressure: a change is a reason to look again,
    /// never proof). An inode of 0 means the file system gave none.
    pub fn pids_with_inodes(&self) -> Result<Vec<(u32, u64)>, ReadError> {
        list_numeric_dir(Path::new(self.proc_prefix.trim_end_matches('/')))
            .map_err(|e| io_err(self.proc_prefix.trim_end_matches('/'), e))
    }

    /// The thread ids of a process, ascending; `Ok(None)` when the process is gone.
    pub fn tids(&self, pid: u32) -> Result<Option<Vec<u32>>, ReadError> {
        let mut s = String::new();
        self.set_path(&mut s, pid, None, "task");
        match list_numeric_dir(Path::new(&s)) {
            Ok(v) => Ok(Some(v.into_iter().map(|(tid, _)| tid).collect())),
            Err(e) if is_gone(&e) => Ok(None),
            Err(e) => Err(io_err(&s, e)),
        }
    }

    /// `/proc/PID/stat`; `Ok(None)` when gone.
    pub fn read_stat(&self, pid: u32) -> Result<Option<TaskStat>, ReadError> {
        self.read_task_file(&mut Scratch::new(false), pid, None, "stat", parse_stat)
    }

    /// `/proc/PID/status`; `Ok(None)` when gone.
    pub fn read_status(&self, pid: u32) -> Result<Option<TaskStatus>, ReadError> {
        self.read_task_file(&mut Scratch::new(false), pid, None, "status", parse_status)
    }

    /// `/proc/PID/cmdline` raw (NUL-separated arguments); `Ok(None)` when gone.
    pub fn read_cmdline(&self, pid: u32) -> Result<Option<Vec<u8>>, ReadError> {
        let mut s = Scratch::new(false);
        self.set_path(&mut s.path, pid, None, "cmdline");
        match read_into(Path::new(&s.path), &mut s.buf, false) {
            Ok(()) => Ok(Some(s.buf.bytes().to_vec())),
            Err(e) if is_gone(&e) => Ok(None),
            Err(e) => Err(io_err(&s.path, e)),
        }
    }

    /// `/proc/PID/numa_maps`. `Ok(None)` when the process is gone or exiting (ENOENT, ESRCH, EINVAL).
    /// Kernel threads and zombies give an empty map. Other errors (EACCES for another user's process)
    /// are returned.
    /// A process whose leader has exited while other threads run on is read through one of them
    /// (see [`Reader::mm_thread`]).
    pub fn read_numa_maps(&self, pid: u32) -> Result<Option<NumaMaps>, ReadError> {
        let s = &mut Scratch::new(false);
        match self.numa_maps_with(s, pid, None)? {
            Some(m) if !m.vmas.is_empty() => Ok(Some(m)),
            empty => match self.mm_thread_with(s, pid) {
                Some(tid) => self.numa_maps_with(s, pid, Some(tid)),
                None => Ok(empty),
            },
        }
    }

    /// The thread whose files show the memory of process `pid` when its leader cannot: `Some(TID)`
    /// of a thread other than the leader when the leader has exited (`pthread_exit` in main; state
    /// Z) while other threads run on. Such a leader has no memory of its own: its numa_maps, maps
    /// and pagemap read empty, and `move_pages` or `migrate_pages` through its pid fail (EINVAL),
    /// while through a thread's id they reach the process's memory. `None` for any other process
    /// (read it through its pid), and when `pid` is gone or its stat cannot be read. The thread
    /// can exit at any time: a read or call through it then fails as for a gone task.
    pub fn mm_thread(&self, pid: u32) -> Option<u32> {
        self.mm_thread_with(&mut Scratch::new(false), pid)
    }

    fn mm_thread_with(&self, s: &mut Scratch, pid: u32) -> Option<u32> {
        let stat = self.read_task_file(s, pid, None, "stat", parse_stat).ok()??;
        self.mm_thread_of(s, pid, &stat)
    }

    /// [`Reader::mm_thread`] given the leader's stat as read.
    fn mm_thread_of(&self, s: &mut Scratch, pid: u32, stat: &TaskStat) -> Option<u32> {
        if stat.state != 'Z' || stat.num_threads <= 1 || stat.is_kernel_thread() {
            return None;
        }
        self.set_path(&mut s.path, pid, None, "task");
        let tids = list_numeric_dir(Path::new(&s.path)).ok()?;
        tids.into_iter().map(|(t, _)| t).find(|&t| t != pid)
    }

    /// numa_maps of `pid`, through thread `via` when given (`/proc/PID/task/TID/numa_maps`: the
    /// same address space, for a process whose leader has exited).
    fn numa_maps_with(&self, s: &mut Scratch, pid: u32, via: Option<u32>) -> Result<Option<NumaMaps>, ReadError> {
        self.set_path(&mut s.path, pid, via, "numa_maps");
        match self.read_mm_file(pid, &s.path, &mut s.buf) {
            Ok(()) => {}
            Err(e) if is_gone(&e) || e.raw_os_error() == Some(libc::EINVAL) => return Ok(None),
            // Blocked behind the process's memory-map lock (see crate::stall): this process is
            // left out, not the cycle.
            Err(e) if crate::stall::StallError::of(&e).is_some() => {
                let own = crate::stall::StallError::of(&e).is_some_and(|x| x.own);
                return Err(ReadError::Stalled { path: PathBuf::from(&s.path), reason: e.to_string(), own });
            }
            // The process's own doing (see MAX_FILE_BYTES): this process is left out, not the cycle.
            Err(e) if e.kind() == io::ErrorKind::FileTooLarge => {
                return Err(parse_err(&s.path, ParseError::new(FileKind::NumaMaps, 0, None, "", e.to_string())))
            }
            Err(e) => return Err(io_err(&s.path, e)),
        }
        let text = text_of(s.buf.bytes());
        parse_numa_maps_with(&text, &mut s.paths).map(Some).map_err(|e| parse_err(&s.path, e))
    }

    /// One thread of a process; `Ok(None)` when it is gone.
    pub fn read_thread(&self, pid: u32, tid: u32) -> Result<Option<ThreadSample>, ReadError> {
        Ok(self.thread_with(&mut Scratch::new(self.want_sched()?), pid, tid, None, None)?.map(|(t, _)| t))
    }

    /// Whether sched files are read, per [`ReadOptions::sched`] (reads numa_balancing only when the
    /// answer depends on it).
    fn want_sched(&self) -> Result<bool, ReadError> {
        Ok(match self.opts.sched {
            SchedMode::IfBalancing => self.sched_given(self.read_numa_balancing()?),
            _ => self.sched_given(None),
        })
    }

    /// Whether sched files are read, given `/proc/sys/kernel/numa_balancing` as already read.
    fn sched_given(&self, numa_balancing: Option<i64>) -> bool {
        match self.opts.sched {
            SchedMode::Always => true,
            SchedMode::Never => false,
            SchedMode::IfBalancing => numa_balancing != Some(0),
        }
    }

    /// A thread and the `VmRSS` from its status (process-wide, kept for the process). With `leader_mems`
    /// (the leader's Mems_allowed, live system, [`ReadOptions::thread_status`] off) the status file is
    /// not read: see that option. With `prev` (this thread's previous read, see
    /// [`Reader::read_processes_since`]) schedstat is read first, and when it equals the previous
    /// one the previous `stat` is kept instead of reading the file.
    fn thread_with(
        &self,
        s: &mut Scratch,
        pid: u32,
        tid: u32,
        leader_mems: Option<&Arc<IdSet>>,
        prev: Option<&ThreadSample>,
    ) -> Result<Option<(ThreadSample, Option<u64>)>, ReadError> {
        // A previous schedstat of all zeros carries no information (a thread that never ran, or
        // a kernel that collects no schedstats and prints `0 0 0` forever): read in full.
        let prev = prev.filter(|p| p.schedstat.is_some_and(|ss| ss.run_ns > 0 || ss.timeslices > 0));
        let mut early_schedstat = None;
        let mut carried = None;
        if let Some(p) = prev {
            // The previous read had a schedstat, so the file exists: missing now means gone.
            let Some(ss) = self.read_task_file(s, pid, Some(tid), "schedstat", parse_schedstat)? else {
                return Ok(None);
            };
            if p.schedstat == Some(ss) {
                carried = Some(p.stat.clone());
            }
            early_schedstat = Some(ss);
        }
        let stat = match carried {
            Some(st) => st,
            None => {
                let Some(st) = self.read_task_file(s, pid, Some(tid), "stat", parse_stat)? else {
                    return Ok(None);
                };
                st
            }
        };
        let (cpus_allowed, mems_allowed, vol, nonvol, vm_rss_kb) = match leader_mems {
            Some(mems) => {
                let cpus = match affinity(tid, &mut s.words) {
                    Ok(c) => c,
                    Err(e) if is_gone(&e) => return Ok(None),
                    Err(e) => return Err(io_err(&format!("sched_getaffinity({tid})"), e)),
                };
                (s.intern_set(cpus), Arc::clone(mems), None, None, None)
            }
            None => {
                let Some(status) = self.read_task_file(s, pid, Some(tid), "status", parse_status)? else {
                    return Ok(None);
                };
                let TaskStatus {
                    cpus_allowed,
                    mems_allowed,
                    voluntary_ctxt_switches,
                    nonvoluntary_ctxt_switches,
                    vm_rss_kb,
                    ..
                } = status;
                (
                    s.intern_set(cpus_allowed),
                    s.intern_set(mems_allowed),
                    Some(voluntary_ctxt_switches),
                    Some(nonvoluntary_ctxt_switches),
                    vm_rss_kb,
                )
            }
        };
        // sched needs CONFIG_SCHED_DEBUG and schedstat CONFIG_SCHED_INFO: a missing file is "not
        // available", which cannot be told apart from the thread exiting just now; both mean None.
        let sched = if s.sched { self.read_task_file(s, pid, Some(tid), "sched", parse_sched)? } else { None };
        let schedstat = match early_schedstat {
            Some(ss) => Some(ss),
            None => self.read_task_file(s, pid, Some(tid), "schedstat", parse_schedstat)?,
        };
        let thread = ThreadSample {
            tid,
            stat,
            cpus_allowed,
            mems_allowed,
            voluntary_ctxt_switches: vol,
            nonvoluntary_ctxt_switches: nonvol,
            sched: sched.map(Box::new),
            schedstat,
        };
        Ok(Some((thread, vm_rss_kb)))
    }

    /// One process with (per the options) its threads and numa_maps; `Ok(None)` when it is gone, or
    /// when it is a kernel thread and [`ReadOptions::kernel_threads`] is off.
    pub fn read_process(&self, pid: u32) -> Result<Option<ProcessSample>, ReadError> {
        self.process_with(&mut Scratch::new(self.want_sched()?), pid, None)
    }

    fn process_with(
        &self,
        s: &mut Scratch,
        pid: u32,
        prev: Option<&ProcessSample>,
    ) -> Result<Option<ProcessSample>, ReadError> {
        let read_ns = monotonic_ns();
        let Some(stat) = self.read_task_file(s, pid, None, "stat", parse_stat)? else {
            return Ok(None);
        };
        let kernel_thread = stat.is_kernel_thread();
        if kernel_thread && !self.opts.kernel_threads {
            return Ok(None);
        }
        // The previous read counts only if it was of this process (same start time).
        let prev = prev.filter(|p| p.pid == pid && p.starttime == stat.starttime);
        // A leader that exited (pthread_exit in main) while other threads run is a zombie with no
        // memory of its own: numa_maps empty, no VmRSS. The address space is read through a live
        // thread instead (zombie-leader-memory; it read as a process of 0 kB before, review of
        // 2026-11-29).
        let via = self.mm_thread_of(s, pid, &stat);
        let (numa_maps, numa_maps_error) = if self.opts.numa_maps && !kernel_thread {
            match self.numa_maps_with(s, pid, via) {
                Ok(Some(m)) => (Some(m), None),
                // Exiting right now: keep the process (its stat was read), without memory.
                Ok(None) => (None, None),
                Err(ReadError::Io { source, .. }) => (None, Some(source.to_string())),
                Err(e) => return Err(e),
            }
        } else {
            (None, None)
        };
        let mut threads = Vec::new();
        let mut rss_kb = None;
        if self.opts.threads {
            self.set_path(&mut s.path, pid, None, "task");
            let tids: Vec<u32> = match list_numeric_dir(Path::new(&s.path)) {
                Ok(t) => t.into_iter().map(|(t, _)| t).collect(),
                Err(e) if is_gone(&e) => return Ok(None),
                Err(e) => return Err(io_err(&s.path, e)),
            };
            threads.reserve_exact(tids.len());
            // The leader first: its status gives VmRSS and, unless every status is read, the
            // Mems_allowed the other threads take.
            let leader_first =
                tids.iter().copied().filter(|&t| t == pid).chain(tids.iter().copied().filter(|&t| t != pid));
            let status_for_all = self.opts.thread_status || !self.is_live();
            let mut leader_mems: Option<Arc<IdSet>> = None;
            for tid in leader_first {
                // The thread a zombie leader's memory is read through gives the RSS: its status.
                let mems = if status_for_all || via == Some(tid) { None } else { leader_mems.as_ref() };
                // The leader is always read in full: its stat gives the process's parent (which
                // changes without the leader running, when the parent exits).
                let prev_thread = prev
                    .filter(|_| tid != pid)
                    .and_then(|p| p.threads.binary_search_by_key(&tid, |t| t.tid).ok().map(|i| &p.threads[i]));
                if let Some((t, rss)) = self.thread_with(s, pid, tid, mems, prev_thread)? {
                    if tid == pid {
                        rss_kb = rss;
                        leader_mems = Some(Arc::clone(&t.mems_allowed));
                    } else if via == Some(tid) {
                        rss_kb = rss.or(rss_kb);
                    }
                    threads.push(t);
                }
            }
            threads.sort_unstable_by_key(|t| t.tid);
        } else if !kernel_thread {
            rss_kb = self.read_task_file(s, pid, via, "status", parse_status)?.and_then(|st| st.vm_rss_kb);
        }
        let node_usage = numa_maps.as_ref().map(NumaMaps::usage_by_node).unwrap_or_default();
        Ok(Some(ProcessSample {
            pid,
            starttime: stat.starttime,
            comm: stat.comm.clone(),
            kernel_thread,
            read_ns,
            stat,
            rss_kb,
            numa_maps,
            numa_maps_error,
            node_usage,
            threads,
            cpuset_cpus: None,
        }))
    }

    /// Reads the given processes with the configured number of workers; gone ones are left out.
    pub fn read_processes(&self, pids: &[u32]) -> Result<Vec<ProcessSample>, ReadError> {
        self.read_processes_with(pids, &[], self.want_sched()?)
    }

    /// [`Reader::read_processes`] given the previous read of each process: `prev[i]` is that of
    /// `pids[i]` (`None`, or a read of another process under the same pid, reads it in full).
    ///
    /// A thread other than the leader whose `schedstat` (run time, run delay, timeslices) equals
    /// its previous read's has not been on a CPU since (the kernel adds to run time and timeslices
    /// each time it runs, and to run delay when it gets a CPU after waiting), so its `stat` is
    /// kept from the previous read instead of read again: its CPU times and faults cannot have
    /// moved. What such a kept stat can miss until the thread runs (and is then read again): a
    /// change made from outside it (nice, scheduling policy, a name written to its `comm` by
    /// another thread of its process) and a wake-up that has not had a CPU yet (state `R`, and the
    /// `processor` it was queued on or moved to while it waits); the tiered daemon's carried processes (`numapilot-daemon`'s live observe)
    /// accept the same for a whole idle process. Its affinity, status (when read) and sched (when
    /// read) are read as always. Each thread so kept saves one open, read and close of its largest
    /// always-read file.
    pub fn read_processes_since(
        &self,
        pids: &[u32],
        prev: &[Option<&ProcessSample>],
    ) -> Result<Vec<ProcessSample>, ReadError> {
        self.read_processes_with(pids, prev, self.want_sched()?)
    }

    /// [`Reader::read_processes_since`] for a reader that must go on whatever one process shows:
    /// a process one of whose files does not parse is left out, with its error, instead of
    /// failing the read of all of them. What a process's files say is partly its own to choose
    /// (its name, in every task's `sched` header), so for the daemon one odd process must not
    /// stop the observation of the others. I/O errors other than a process going away still fail
    /// the read: they say something about the system (out of file descriptors, /proc not
    /// mounted), and leaving every process out would read as all of them gone.
    pub fn read_processes_skipping(
        &self,
        pids: &[u32],
        prev: &[Option<&ProcessSample>],
    ) -> Result<(Vec<ProcessSample>, Vec<Skipped>), ReadError> {
        self.read_processes_inner(pids, prev, self.want_sched()?, true)
    }

    /// [`Reader::read_processes`] with the decision whether to read sched files already taken.
    fn read_processes_with(
        &self,
        pids: &[u32],
        prev: &[Option<&ProcessSample>],
        sched: bool,
    ) -> Result<Vec<ProcessSample>, ReadError> {
        self.read_processes_inner(pids, prev, sched, false).map(|(all, _)| all)
    }

    /// The read behind both: with `skip`, a process whose file does not parse is left out and
    /// listed; without, the first error of any process is the answer.
    fn read_processes_inner(
        &self,
        pids: &[u32],
        prev: &[Option<&ProcessSample>],
        sched: bool,
        skip: bool,
    ) -> Result<(Vec<ProcessSample>, Vec<Skipped>), ReadError> {
        let workers = match self.opts.workers {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()).min(ReadOptions::MAX_DEFAULT_WORKERS),
            n => n,
        }
        .min(pids.len().max(1));
        let next = AtomicUsize::new(0);
        let failure: Mutex<Option<ReadError>> = Mutex::new(None);
        let skipped: Mutex<Vec<Skipped>> = Mutex::new(Vec::new());
        let work = || -> Vec<ProcessSample> {
            let mut s = Scratch::new(sched);
            let mut out = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&pid) = pids.get(i) else { break };
                match self.process_with(&mut s, pid, prev.get(i).copied().flatten()) {
                    Ok(Some(p)) => out.push(p),
                    Ok(None) => {}
                    Err(error @ (ReadError::Parse { .. } | ReadError::Stalled { .. })) if skip => {
                        skipped.lock().unwrap_or_else(|p| p.into_inner()).push(Skipped { pid, error });
                    }
                    Err(e) => {
                        // Stop every worker: the first error is the answer.
                        next.store(pids.len(), Ordering::Relaxed);
                        failure.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
                        break;
                    }
                }
            }
            out
        };
        let mut all = if workers <= 1 {
            work()
        } else {
            std::thread::scope(|sc| {
                let handles: Vec<_> = (0..workers).map(|_| sc.spawn(work)).collect();
                let mut all = Vec::with_capacity(pids.len());
                for h in handles {
                    // A worker panicking is a bug in a parser; surface it rather than hide it.
                    all.extend(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
                }
                all
            })
        };
        if let Some(e) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(e);
        }
        all.sort_unstable_by_key(|p| p.pid);
        let mut skipped = skipped.into_inner().unwrap_or_else(|p| p.into_inner());
        skipped.sort_unstable_by_key(|x| x.pid);
        Ok((all, skipped))
    }

    // ----- system-wide files -----------------------------------------------------------------------

    fn read_root_file(&self, rel: &str) -> Result<Option<String>, ReadError> {
        let path = self.path_in_root(rel);
        let mut buf = Buf::new();
        match read_into(&path, &mut buf, false) {
            Ok(()) => Ok(Some(String::from_utf8_lossy(buf.bytes()).into_owned())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ReadError::Io { path, source: e }),
        }
    }

    fn read_root_parsed<T>(
        &self,
        rel: &str,
        parse: impl FnOnce(&str) -> Result<T, ParseError>,
    ) -> Result<Option<T>, ReadError> {
        match self.read_root_file(rel)? {
            None => Ok(None),
            Some(text) => {
                parse(&text).map(Some).map_err(|e| ReadError::Parse { path: self.path_in_root(rel), source: e })
            }
        }
    }

    /// `/proc/stat`; `Ok(None)` if absent (fixtures without it).
    pub fn read_proc_stat(&self) -> Result<Option<ProcStat>, ReadError> {
        self.read_root_parsed("proc/stat", parse_proc_stat)
    }

    /// NUMA-related `/proc/vmstat` counters; empty if the file is absent.
    pub fn read_vmstat(&self) -> Result<Counters, ReadError> {
        Ok(self.read_root_parsed("proc/vmstat", parse_vmstat)?.unwrap_or_default())
    }

    /// `/proc/meminfo`; `Ok(None)` if absent.
    pub fn read_meminfo(&self) -> Result<Option<Meminfo>, ReadError> {
        self.read_root_parsed("proc/meminfo", parse_meminfo)
    }

    /// `/proc/sys/kernel/numa_balancing`; `Ok(None)` if absent (kernel without NUMA balancing).
    pub fn read_numa_balancing(&self) -> Result<Option<i64>, ReadError> {
        self.read_root_parsed("proc/sys/kernel/numa_balancing", parse_number)
    }

    /// `/proc/pressure/<resource>` (`cpu`, `memory`, `io`). `Ok(None)` when the kernel has no PSI
    /// (file absent) or it is switched off (`psi=0`: reading fails with EOPNOTSUPP).
    pub fn read_psi(&self, resource: &str) -> Result<Option<Psi>, ReadError> {
        let rel = format!("proc/pressure/{resource}");
        let path = self.path_in_root(&rel);
        let mut buf = Buf::new();
        match read_into(&path, &mut buf, false) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                return Ok(None)
            }
            Err(e) => return Err(ReadError::Io { path, source: e }),
        }
        parse_psi(&String::from_utf8_lossy(buf.bytes())).map(Some).map_err(|e| ReadError::Parse { path, source: e })
    }

    /// Node ids from the `nodeN` directories of `/sys/devices/system/node` (as numastat finds them),
    /// ascending. Empty when the directory does not exist (a kernel without NUMA).
    pub fn node_ids(&self) -> Result<NodeSet, ReadError> {
        let dir = self.path_in_root("sys/devices/system/node");
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(NodeSet::new()),
            Err(e) => return Err(ReadError::Io { path: dir, source: e }),
        };
        let mut set = IdSet::new();
        for ent in rd {
            let ent = ent.map_err(|e| ReadError::Io { path: dir.clone(), source: e })?;
            let name = ent.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_prefix("node")) else { continue };
            if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) {
                if let Ok(id) = id.parse::<u32>() {
                    if id <= IdSet::MAX_ID {
                        set.insert(id);
                    }
                }
            }
        }
        Ok(set)
    }

    /// One node's cpulist, meminfo, numastat and vmstat (all four exist on every NUMA kernel since 2.6;
    /// a missing one is an error naming it).
    pub fn read_node(&self, node: u32) -> Result<NodeSample, ReadError> {
        let base = format!("sys/devices/system/node/node{node}");
        let need = |name: &str| -> Result<String, ReadError> {
            let rel = format!("{base}/{name}");
            self.read_root_file(&rel)?.ok_or_else(|| ReadError::Io {
                path: self.path_in_root(&rel),
                source: io::Error::from(io::ErrorKind::NotFound),
            })
        };
        let perr = |name: &str, e: ParseError| ReadError::Parse {
            path: self.path_in_root(&format!("{base}/{name}")),
            source: e,
        };
        let cpus = parse_list(&need("cpulist")?).map_err(|e| perr("cpulist", e))?;
        let (id, meminfo) = parse_node_meminfo(&need("meminfo")?).map_err(|e| perr("meminfo", e))?;
        if id != node {
            return Err(ReadError::Inconsistent {
                path: self.path_in_root(&format!("{base}/meminfo")),
                reason: format!("describes node {id}, not node {node}"),
            });
        }
        let numastat = parse_node_numastat(&need("numastat")?).map_err(|e| perr("numastat", e))?;
        let vmstat = parse_node_vmstat(&need("vmstat")?).map_err(|e| perr("vmstat", e))?;
        Ok(NodeSample { node, cpus, meminfo, numastat, vmstat, mem_bw: None })
    }

    /// All nodes.
    pub fn read_nodes(&self) -> Result<Vec<NodeSample>, ReadError> {
        self.node_ids()?.iter().map(|n| self.read_node(n)).collect()
    }

    /// One full observation: every process and thread (per the options), every node, the system
    /// counters.
    pub fn sample(&self) -> Result<Sample, ReadError> {
        self.sample_of(None)
    }

    /// An observation of the given processes only (`None`: every process), with every node and the
    /// system counters; pids that are gone are left out.
    pub fn sample_of(&self, pids: Option<&[u32]>) -> Result<Sample, ReadError> {
        let monotonic = monotonic_ns();
        let boottime = clock_ns(libc::CLOCK_BOOTTIME);
        let unix_ms =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let nodes = self.read_nodes()?;
        let cpu = self.read_proc_stat()?;
        let vmstat = self.read_vmstat()?;
        let psi = PsiSample { cpu: self.read_psi("cpu")?, memory: self.read_psi("memory")?, io: self.read_psi("io")? };
        let numa_balancing = self.read_numa_balancing()?;
        let all;
        let pids = match pids {
            Some(p) => p,
            None => {
                all = self.pids()?;
                &all
            }
        };
        let processes = self.read_processes_with(pids, &[], self.sched_given(numa_balancing))?;
        Ok(Sample {
            monotonic_ns: monotonic,
            boottime_ns: boottime,
            unix_ms,
            duration_ns: monotonic_ns().saturating_sub(monotonic),
            clock_ticks_per_sec: sysconf(libc::_SC_CLK_TCK).unwrap_or(100),
            page_size: page_size(),
            processes,
            nodes,
            cpu,
            cpu_base: None,
            vmstat,
            psi,
            numa_balancing,
            accesses: Vec::new(),
            access_period_scale: 1,
            access_fill: 0.0,
            comm: Vec::new(),
            shared: Vec::new(),
            unmanaged_cpu: Vec::new(),
        })
    }
}

/// First size of the `sched_getaffinity(2)` buffer, in 64-bit words: 16 words = 1024 CPUs, glibc's
/// `cpu_set_t`, enough for every machine but the largest; the buffer doubles from there when the kernel
/// says (EINVAL) that its CPU mask (`nr_cpu_ids` bits) is longer.
const AFFINITY_INITIAL_WORDS: usize = 16;

/// Largest `sched_getaffinity(2)` buffer tried, in 64-bit words. Default 1 << 16 words = 4,194,304
/// CPUs, 512 times the largest `CONFIG_NR_CPUS` x86-64 allows (8192, `arch/x86/Kconfig` NR_CPUS_RANGE_END
/// with CPUMASK_OFFSTACK), so a real mask always fits first. What it prevents: doubling forever when EINVAL has
/// another cause.
const AFFINITY_MAX_WORDS: usize = 1 << 16;

/// CPU affinity of a task by `sched_getaffinity(2)`, any number of CPUs (the buffer grows until the
/// kernel's mask fits). A read-only twin of the actuate crate's wrapper: observe must not depend on the
/// crate that changes the system.
fn affinity(tid: u32, words: &mut Vec<u64>) -> io::Result<IdSet> {
    loop {
        // SAFETY: the kernel writes at most `words.len() * 8` bytes into the buffer we own.
        let r = unsafe {
            libc::syscall(libc::SYS_sched_getaffinity, tid as libc::pid_t, words.len() * 8, words.as_mut_ptr())
        };
        if r >= 0 {
            let n = (r as usize).div_ceil(8).min(words.len());
            return Ok(IdSet::from_words(&words[..n]));
        }
        let e = io::Error::last_os_error();
        // EINVAL: our buffer is smaller than the kernel's CPU mask (more than 64 * len CPUs possible).
        if e.raw_os_error() == Some(libc::EINVAL) && words.len() < AFFINITY_MAX_WORDS {
            let grown = words.len() * 2;
            words.resize(grown, 0);
            continue;
        }
        return Err(e);
    }
}

/// The numeric entries of `dir` (pids in /proc, tids in task/), ascending, with their inode
/// numbers (from the listing).
fn list_numeric_dir(dir: &Path) -> io::Result<Vec<(u32, u64)>> {
    use std::os::unix::fs::DirEntryExt;
    let mut out = Vec::new();
    for ent in std::fs::read_dir(dir)? {
        let ent = ent?;
        let name = ent.file_name();
        let b = name.as_encoded_bytes();
        if !b.is_empty() && b.iter().all(u8::is_ascii_digit) {
            if let Some(id) = name.to_str().and_then(|n| n.parse().ok()) {
                out.push((id, ent.ino()));
            }
        }
    }
    out.sort_unstable();
    Ok(out)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it.
    let r = unsafe { libc::clock_gettime(clock, &mut ts) };
    if r != 0 {
        return 0;
    }
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

/// CLOCK_MONOTONIC now, ns.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_BOOTTIME now, ns: the clock of `/proc/PID/stat`'s start time (field 22, in
/// [`clock_ticks_per_sec`] ticks since boot).
pub fn boottime_ns() -> u64 {
    clock_ns(libc::CLOCK_BOOTTIME)
}

/// USER_HZ of the running system (`sysconf(_SC_CLK_TCK)`, 100 when unknown).
pub fn clock_ticks_per_sec() -> u64 {
    sysconf(libc::_SC_CLK_TCK).unwrap_or(100)
}

/// This kernel's base page size, bytes (`sysconf(_SC_PAGESIZE)`, 4096 when unknown).
pub fn page_size() -> u64 {
    sysconf(libc::_SC_PAGESIZE).unwrap_or(4096)
}

fn sysconf(name: libc::c_int) -> Option<u64> {
    // SAFETY: sysconf has no memory-safety preconditions.
    let v = unsafe { libc::sysconf(name) };
    (v > 0).then_some(v as u64)
}

// ----- live signals beyond the per-task files (maps) ---------------------------------------------------

impl Reader {
    /// `/proc/PID/maps`, the lines `filter` keeps (see [`crate::maps`]). `Ok(None)` when the process is
    /// gone or exiting; a process with no memory map (a zombie, a kernel thread) gives an empty list.
    pub fn read_maps(
        &self,
        pid: u32,
        filter: crate::maps::MapsFilter,
    ) -> Result<Option<Vec<crate::maps::MapEntry>>, crate::signal_error::SignalError> {
        Ok(self.read_maps_counted(pid, filter)?.map(|(m, _)| m))
    }

    /// [`Reader::read_maps`] with the number of lines the file had (one per VMA: the work the kernel
    /// did to print it, whatever `filter` keeps).
    pub fn read_maps_counted(
        &self,
        pid: u32,
        filter: crate::maps::MapsFilter,
    ) -> Result<Option<(Vec<crate::maps::MapEntry>, usize)>, crate::signal_error::SignalError> {
        let mut s = Scratch::new(false);
        let mut via = None;
        loop {
            self.set_path(&mut s.path, pid, via, "maps");
            let gone = match self.read_mm_file(pid, &s.path, &mut s.buf) {
                Ok(()) => false,
                Err(e) if is_gone(&e) || e.raw_os_error() == Some(libc::EINVAL) => true,
                Err(e) => return Err(crate::signal_error::SignalError::Io { path: PathBuf::from(&s.path), source: e }),
            };
            // Empty or failing through a leader that has exited: read through a thread that runs on
            // (Reader::mm_thread), once. The look-up reads the leader's stat into the same buffer,
            // so the maps read is over here either way: without such a thread the answer is said
            // now, not parsed from the buffer (it held the stat, parsed as maps, for a zombie).
            if via.is_none() && (gone || s.buf.len == 0) {
                if let Some(tid) = self.mm_thread_with(&mut s, pid) {
                    via = Some(tid);
                    continue;
                }
                // Gone, or no memory map (a zombie, a kernel thread): its maps read empty.
                return Ok((!gone).then(|| (Vec::new(), 0)));
            }
            if gone {
                return Ok(None);
            }
            break;
        }
        let text = text_of(s.buf.bytes());
        let lines = text.bytes().filter(|&b| b == b'\n').count();
        let mut m = crate::maps::parse_maps_filtered(&text, filter)
            .map_err(|e| crate::signal_error::SignalError::Parse { path: PathBuf::from(&s.path), source: e })?;
        // A SysV segment's inode is its shmid, unique only in its IPC namespace: name the namespace.
        // When the namespace cannot be read the segment's identity is unknown, and it is left out
        // (it ties the process to nobody) rather than put in a namespace of its own with every other
        // such segment: two processes whose links both failed would share "namespace 0" and be tied
        // by two unrelated segments of one shmid.
        if m.iter().any(|e| e.ipc_ns.is_some()) {
            match self.ipc_namespace(pid) {
                Some(ns) => m.iter_mut().filter_map(|e| e.ipc_ns.as_mut()).for_each(|n| *n = ns),
                None => m.retain(|e| e.ipc_ns.is_none()),
            }
        }
        Ok(Some((m, lines)))
    }

    /// The IPC namespace of `pid`: the inode in the `ipc:[INODE]` its /proc/PID/ns/ipc link
    /// reads (`fs/nsfs.c`, `ns_get_name`). `None` when it cannot be read (gone, not permitted, a
    /// fixture root without it).
    pub fn ipc_namespace(&self, pid: u32) -> Option<u64> {
        let link = std::fs::read_link(self.root.join(format!("proc/{pid}/ns/ipc"))).ok()?;
        link.to_str()?.strip_prefix("ipc:[")?.strip_suffix(']')?.parse().ok()
    }

    /// The memory objects mapped shared by two or more of `pids` (see [`crate::maps::group_shared`]).
    /// Processes that are gone, or whose maps cannot be read (EACCES), are left out.
    pub fn read_shared(
        &self,
        pids: &[u32],
    ) -> Result<Vec<crate::sample::SharedMemory>, crate::signal_error::SignalError> {
        let mut all = Vec::new();
        for &pid in pids {
            match self.read_maps(pid, crate::maps::MapsFilter::SharedObjects) {
                Ok(Some(m)) if !m.is_empty() => all.push((pid, m)),
                Ok(_) => {}
                Err(e) if e.io_error().is_some_and(|e| e.raw_os_error() == Some(libc::EACCES)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(crate::maps::group_shared(all.iter().map(|(p, m)| (*p, m.as_slice()))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory under the system's temporary directory, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Self {
            let d = std::env::temp_dir().join(format!("numapilot-reader-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            Scratch(d)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Two processes mapping a SysV segment of one shmid, neither's IPC namespace readable (no
    /// ns/ipc link in this root): the segments' identities are unknown, so they tie nobody. (They
    /// were one object in "namespace 0"; a memfd mapped by both still is one.)
    #[test]
    fn sysv_segments_whose_namespace_cannot_be_read_tie_nobody() {
        let d = Scratch::new("sysv-ns");
        for pid in [10, 11] {
            let dir = d.0.join(format!("proc/{pid}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("maps"),
                "7f0000000000-7f0000200000 rw-s 00000000 00:01 0                          /SYSV00000000 (deleted)\n\
                 7f0000400000-7f0000600000 rw-s 00000000 00:01 4242                       /memfd:buf (deleted)\n",
            )
            .unwrap();
        }
        let reader = Reader::new(&d.0);
        let shared = reader.read_shared(&[10, 11]).unwrap();
        let paths: Vec<&str> = shared.iter().map(|o| o.path.as_str()).collect();
        assert_eq!(paths, ["/memfd:buf (deleted)"], "{shared:?}");
        let maps = reader.read_maps(10, crate::maps::MapsFilter::SharedObjects).unwrap().unwrap();
        assert_eq!(maps.len(), 1, "{maps:?}");
    }

    #[test]
    fn a_file_over_the_cap_is_refused_and_a_grown_buffer_given_back() {
        let d = Scratch::new("cap");
        let (small, big) = (d.0.join("small"), d.0.join("big"));
        std::fs::write(&small, vec![b'x'; 20_000]).unwrap();
        std::fs::write(&big, vec![b'x'; 40_000]).unwrap();
        let mut buf = Buf::new();
        read_into_capped(&small, &mut buf, false, 32 << 10).unwrap();
        assert_eq!(buf.len, 20_000);
        let e = read_into_capped(&big, &mut buf, false, 32 << 10).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::FileTooLarge);
        // One file of 9 MiB grows the buffer past KEEP_AT_MOST; the next read starts small again.
        let huge = d.0.join("huge");
        std::fs::File::create(&huge).unwrap().set_len(9 << 20).unwrap();
        read_into(&huge, &mut buf, false).unwrap();
        assert_eq!(buf.len, 9 << 20);
        read_into(&small, &mut buf, false).unwrap();
        assert_eq!((buf.len, buf.data.len()), (20_000, 32 << 10));
    }

    /// A numa_maps over MAX_FILE_BYTES is a parse error naming the file, which the skipping
    /// reads turn into "this process left out" (an I/O error would fail the whole observation).
    #[test]
    fn a_numa_maps_over_the_cap_leaves_its_process_out() {
        let d = Scratch::new("numa-maps");
        std::fs::create_dir_all(d.0.join("proc/77")).unwrap();
        let f = std::fs::File::create(d.0.join("proc/77/numa_maps")).unwrap();
        f.set_len(MAX_FILE_BYTES as u64 + 1).unwrap();
        let e = Reader::new(&d.0).read_numa_maps(77).unwrap_err();
        assert!(matches!(e, ReadError::Parse { .. }), "{e:?}");
        assert!(e.to_string().contains("numa_maps") && e.to_string().contains("larger than 64 MiB"), "{e}");
    }
}
