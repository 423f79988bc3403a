//! The worker: one test process. Allocates its buffer, first-touches it, waits for "go", runs
//! its threads, reports.
//!
//! # Protocol with the parent (one JSON object per line)
//!
//! ```text
//!   parent                                     worker (numapilot bench --worker '<config>')
//!     spawn  ------------------------------>  mmap buffer between two PROT_NONE guard pages
//!                                              mbind regions (bind variants)
//!                                              first touch by the main thread (bound to
//!                                              --force-node for the touch, then policy dropped)
//!            <------------------------------  {"ready":{"pid":..,"buffer_start":..,"buffer_len":..}}
//!     all ready: "go\n" on stdin  ---------->  start T threads "bench-t<i>", each writes its
//!                                              range pass after pass (affinity first, bind variants)
//!            <------------------------------  {"done":{WorkerReport}}  and exit 0
//! ```
//!
//! The guard pages keep the buffer in VMAs of its own (a neighbouring anonymous mapping with the
//! same flags would otherwise merge with it), so the recorder finds its pages in numa_maps by
//! address. Pages are written with non-zero 64-bit stores: the first touch allocates a real page
//! (never the shared zero page), and relaxed atomic stores let numa01's threads write the same
//! buffer at once without a data race in the Rust sense (on x86-64 they are plain `mov`s).

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use numapilot_actuate::{mbind, sched_setaffinity, set_mempolicy, MbindFlags, MemPolicy, ModeFlags};
use numapilot_topology::{CpuSet, NodeSet};
use serde::{Deserialize, Serialize};

use crate::error::BenchError;
use crate::spec::Work;

/// Prefix of every worker thread's name (`/proc/PID/task/TID/comm`): `bench-t0`, `bench-t1`, ...
/// The recorder counts only threads named so as "the threads of the test" (the main thread only
/// waits).
pub const THREAD_PREFIX: &str = "bench-t";

/// Bytes written between two looks at the stop flag in `--seconds` mode: 1 MiB, a few hundred
/// microseconds even under emulation, so a thread stops promptly without paying for the check.
const CHUNK_BYTES: usize = 1 << 20;

/// A buffer region bound to nodes before the first touch (`mbind(MPOL_BIND)`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionBind {
    /// Offset in the buffer, bytes (page aligned).
    pub offset: u64,
    /// Length, bytes.
    pub len: u64,
    /// Kernel node ids.
    pub nodes: Vec<u32>,
}

/// One thread of a worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadConfig {
    /// Start of its range in the buffer, bytes.
    pub offset: u64,
    /// Length of its range, bytes.
    pub len: u64,
    /// CPUs it binds itself to first; empty: no binding.
    pub cpus: Vec<u32>,
}

/// Everything a worker process needs, passed as JSON on its command line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerConfig {
    /// Index of the process in the test (0, 1).
    pub index: usize,
    /// Test name; the process names itself after it.
    pub name: String,
    /// Buffer size, bytes.
    pub bytes: u64,
    /// The threads.
    pub threads: Vec<ThreadConfig>,
    /// Work per thread.
    pub work: Work,
    /// Node the first touch is bound to, if any.
    pub force_node: Option<u32>,
    /// Regions bound with mbind before the first touch.
    pub regions: Vec<RegionBind>,
}

impl WorkerConfig {
    /// Parses a configuration from its JSON.
    pub fn from_json(s: &str) -> Result<WorkerConfig, BenchError> {
        let cfg: WorkerConfig = serde_json::from_str(s).map_err(|e| BenchError::Config(e.to_string()))?;
        for (i, t) in cfg.threads.iter().enumerate() {
            if t.len == 0 || t.offset.checked_add(t.len).is_none_or(|end| end > cfg.bytes) {
                return Err(BenchError::Config(format!("thread {i}: range {}+{} outside the buffer", t.offset, t.len)));
            }
        }
        for r in &cfg.regions {
            if r.offset.checked_add(r.len).is_none_or(|end| end > cfg.bytes) || r.nodes.is_empty() {
                return Err(BenchError::Config(format!(
                    "region {}+{} outside the buffer or without nodes",
                    r.offset, r.len
                )));
            }
        }
        if cfg.threads.is_empty() || cfg.bytes == 0 {
            return Err(BenchError::Config("no threads or an empty buffer".into()));
        }
        Ok(cfg)
    }
}

/// What one thread did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadReport {
    /// Its thread id.
    pub tid: u32,
    /// Bytes it wrote (passes over its range, including a partial last one in `--seconds` mode).
    pub bytes_written: u64,
    /// Passes over its range (fractional in `--seconds` mode).
    pub passes: f64,
    /// Seconds from its start to its end.
    pub seconds: f64,
}

/// What a worker did, its `done` line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerReport {
    /// Its pid.
    pub pid: u32,
    /// Seconds from "go" until every thread finished.
    pub runtime_s: f64,
    /// Per thread.
    pub threads: Vec<ThreadReport>,
}

/// The worker's `ready` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ready {
    /// Its pid.
    pub pid: u32,
    /// Address of the first byte of the buffer in the worker.
    pub buffer_start: u64,
    /// Buffer length, bytes.
    pub buffer_len: u64,
}

/// One line of the worker's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Message {
    /// Buffer touched, waiting for "go".
    Ready(Ready),
    /// Finished.
    Done(WorkerReport),
}

/// Process-wide setup of a worker process: names the process after the test (`comm`, 15 bytes at
/// most) and asks the kernel to kill it if its parent dies, so an interrupted run leaves no
/// process writing memory behind. Call once, from the main thread, before [`run_worker`].
pub fn become_worker_process(name: &str) {
    let mut comm = [0u8; 16];
    for (d, s) in comm.iter_mut().zip(name.bytes().take(15)) {
        *d = s;
    }
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes from a live buffer;
    // PR_SET_PDEATHSIG takes a signal number. Neither touches our memory otherwise.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, comm.as_ptr() as libc::c_ulong, 0, 0, 0);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
    }
}

/// An anonymous mapping with a PROT_NONE guard page on each side; unmapped on drop.
struct Buffer {
    base: *mut libc::c_void,
    total: usize,
    page: usize,
    len: usize,
}

impl Buffer {
    fn new(len: usize, page: usize) -> Result<Buffer, BenchError> {
        let total = len + 2 * page;
        let io = |what: &'static str| BenchError::Io {
            what,
            path: "anonymous memory".into(),
            source: std::io::Error::last_os_error(),
        };
        // SAFETY: a fresh private anonymous mapping at an address of the kernel's choice; no
        // existing memory is affected.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                total,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io("mmap of the test buffer"));
        }
        let buf = Buffer { base, total, page, len };
        // SAFETY: the range lies inside the mapping just created.
        let rc = unsafe { libc::mprotect(buf.start() as *mut libc::c_void, len, libc::PROT_READ | libc::PROT_WRITE) };
        if rc != 0 {
            return Err(io("mprotect of the test buffer"));
        }
        Ok(buf)
    }

    fn start(&self) -> *mut u8 {
        // SAFETY: one page into a mapping of `len + 2 * page` bytes.
        unsafe { (self.base as *mut u8).add(self.page) }
    }

    fn words(&self) -> &[AtomicU64] {
        // SAFETY: the range is mapped read-write, page aligned (so 8-byte aligned), lives as long
        // as `self`, and is only ever accessed through atomics.
        unsafe { std::slice::from_raw_parts(self.start() as *const AtomicU64, self.len / 8) }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping created in `new`; no reference to it outlives `self`.
        unsafe {
            libc::munmap(self.base, self.total);
        }
    }
}

/// Size of a base page, bytes.
pub fn page_bytes() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if v > 0 {
        v as u64
    } else {
        4096
    }
}

fn actuate(what: String) -> impl FnOnce(numapilot_actuate::Error) -> BenchError {
    move |source| BenchError::Actuate { what, source }
}

/// Writes `value` to every word of `words`, 1 MiB at a time, checking `stop` in between; returns
/// the bytes written.
fn write_pass(words: &[AtomicU64], value: u64, stop: Option<&AtomicBool>) -> u64 {
    let mut written = 0;
    for chunk in words.chunks(CHUNK_BYTES / 8) {
        if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            break;
        }
        for w in chunk {
            w.store(value, Ordering::Relaxed);
        }
        written += (chunk.len() * 8) as u64;
    }
    written
}

fn gettid() -> u32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// Runs one worker: buffer, first touch, `ready` on `out`, waits for a `go` line on `input`, runs
/// the threads, `done` on `out`. Returns the report it wrote.
pub fn run_worker(
    cfg: &WorkerConfig,
    input: &mut impl BufRead,
    out: &mut impl Write,
) -> Result<WorkerReport, BenchError> {
    let page = page_bytes() as usize;
    let len = usize::try_from(cfg.bytes).map_err(|_| BenchError::Config("buffer too large".into()))?;
    let len = len.div_ceil(page) * page;
    let buf = Buffer::new(len, page)?;
    for r in &cfg.regions {
        let nodes: NodeSet = r.nodes.iter().copied().collect();
        // SAFETY-free: mbind only changes the placement policy of our own mapping.
        let addr = buf.start().wrapping_add(r.offset as usize) as *const libc::c_void;
        mbind(addr, r.len as usize, &MemPolicy::Bind(nodes.clone()), ModeFlags::NONE, MbindFlags::default())
            .map_err(actuate(format!("binding buffer bytes {}+{} to nodes {nodes}", r.offset, r.len)))?;
    }
    if let Some(n) = cfg.force_node {
        let nodes: NodeSet = std::iter::once(n).collect();
        set_mempolicy(&MemPolicy::Bind(nodes), ModeFlags::NONE)
            .map_err(actuate(format!("binding the first touch to node {n}")))?;
    }
    // First touch by the main thread: one non-zero word per page.
    let words = buf.words();
    for w in words.iter().step_by(page / 8) {
        w.store(0x5a5a_5a5a_5a5a_5a5a, Ordering::Relaxed);
    }
    if cfg.force_node.is_some() {
        set_mempolicy(&MemPolicy::Default, ModeFlags::NONE)
            .map_err(actuate("dropping the first-touch binding".into()))?;
    }
    let pipe = |e| BenchError::Io { what: "talking to the parent", path: "stdio".into(), source: e };
    let ready = Ready { pid: std::process::id(), buffer_start: buf.start() as u64, buffer_len: len as u64 };
    writeln!(out, "{}", serde_json::to_string(&Message::Ready(ready)).expect("plain struct")).map_err(pipe)?;
    out.flush().map_err(pipe)?;
    let mut line = String::new();
    input.read_line(&mut line).map_err(pipe)?;
    if line.trim() != "go" {
        return Err(BenchError::Worker {
            index: cfg.index,
            reason: format!("expected \"go\" from the parent, got {:?}", line.trim()),
        });
    }
    let t0 = Instant::now();
    let stop = AtomicBool::new(false);
    let finished = AtomicUsize::new(0);
    let results: Vec<Result<ThreadReport, BenchError>> = std::thread::scope(|s| {
        let handles: Vec<_> = cfg
            .threads
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let (stop, finished) = (&stop, &finished);
                let range = &words[(t.offset / 8) as usize..((t.offset + t.len) / 8) as usize];
                std::thread::Builder::new()
                    .name(format!("{THREAD_PREFIX}{i}"))
                    .spawn_scoped(s, move || {
                        let r = run_thread(i, t, range, cfg.work, stop);
                        finished.fetch_add(1, Ordering::Relaxed);
                        r
                    })
                    .map_err(|e| BenchError::Io { what: "starting a worker thread", path: "thread".into(), source: e })
            })
            .collect();
        if let Work::Seconds(secs) = cfg.work {
            let deadline = t0 + Duration::from_secs_f64(secs);
            let started = handles.iter().filter(|h| h.is_ok()).count();
            while Instant::now() < deadline && finished.load(Ordering::Relaxed) < started {
                std::thread::sleep((deadline - Instant::now()).min(Duration::from_millis(20)));
            }
            stop.store(true, Ordering::Relaxed);
        }
        handles
            .into_iter()
            .map(|h| {
                h.and_then(|h| h.join().unwrap_or_else(|_| Err(BenchError::Config("a worker thread panicked".into()))))
            })
            .collect()
    });
    let runtime_s = t0.elapsed().as_secs_f64();
    let threads = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    let report = WorkerReport { pid: std::process::id(), runtime_s, threads };
    writeln!(out, "{}", serde_json::to_string(&Message::Done(report.clone())).expect("plain struct")).map_err(pipe)?;
    out.flush().map_err(pipe)?;
    drop(buf);
    Ok(report)
}

fn run_thread(
    i: usize,
    t: &ThreadConfig,
    range: &[AtomicU64],
    work: Work,
    stop: &AtomicBool,
) -> Result<ThreadReport, BenchError> {
    let start = Instant::now();
    if !t.cpus.is_empty() {
        let cpus: CpuSet = t.cpus.iter().copied().collect();
        sched_setaffinity(0, &cpus).map_err(actuate(format!("binding thread {i} to CPUs {cpus}")))?;
    }
    let mut written = 0u64;
    match work {
        Work::Loops(n) => {
            for pass in 0..n {
                written += write_pass(range, pass | 1, None);
                std::hint::black_box(range);
            }
        }
        Work::Seconds(_) => {
            let mut pass = 0u64;
            while !stop.load(Ordering::Relaxed) {
                pass += 1;
                written += write_pass(range, pass | 1, Some(stop));
                std::hint::black_box(range);
            }
        }
    }
    Ok(ThreadReport {
        tid: gettid(),
        bytes_written: written,
        passes: written as f64 / t.len as f64,
        seconds: start.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(work: Work, threads: Vec<ThreadConfig>) -> WorkerConfig {
        WorkerConfig {
            index: 0,
            name: "numa02".into(),
            bytes: 1 << 20,
            threads,
            work,
            force_node: None,
            regions: vec![],
        }
    }

    #[test]
    fn a_worker_touches_waits_for_go_and_counts_its_passes() {
        let half = 1 << 19;
        let c = cfg(
            Work::Loops(3),
            vec![
                ThreadConfig { offset: 0, len: half, cpus: vec![] },
                ThreadConfig { offset: half, len: half, cpus: vec![] },
            ],
        );
        let mut out = Vec::new();
        let report = run_worker(&c, &mut "go\n".as_bytes(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<Message> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let Message::Ready(r) = &lines[0] else { panic!("{text}") };
        assert_eq!((r.pid, r.buffer_len), (std::process::id(), 1 << 20));
        assert_eq!(r.buffer_start % page_bytes(), 0);
        assert_eq!(lines[1], Message::Done(report.clone()));
        assert_eq!(report.threads.len(), 2);
        for t in &report.threads {
            assert_eq!(t.bytes_written, 3 * half);
            assert_eq!(t.passes, 3.0);
        }
        assert_ne!(report.threads[0].tid, report.threads[1].tid);
    }

    #[test]
    fn a_worker_without_go_stops_before_its_threads() {
        let c = cfg(Work::Seconds(0.05), vec![ThreadConfig { offset: 0, len: 1 << 20, cpus: vec![] }]);
        let e = run_worker(&c, &mut "".as_bytes(), &mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("expected \"go\""), "{e}");
        let mut out = Vec::new();
        let report = run_worker(&c, &mut "go\n".as_bytes(), &mut out).unwrap();
        assert!(report.threads[0].bytes_written > 0);
    }

    #[test]
    fn configurations_outside_the_buffer_are_refused() {
        let mut c = cfg(Work::Loops(1), vec![ThreadConfig { offset: 4096, len: 1 << 20, cpus: vec![] }]);
        let e = WorkerConfig::from_json(&serde_json::to_string(&c).unwrap()).unwrap_err().to_string();
        assert!(e.contains("thread 0"), "{e}");
        c.threads[0].offset = 0;
        assert_eq!(WorkerConfig::from_json(&serde_json::to_string(&c).unwrap()).unwrap(), c);
        assert!(WorkerConfig::from_json("{").is_err());
    }
}
