//! The recorder: where a test process's memory and threads are, read from /proc.
//!
//! # What it reads, per process and sample
//!
//! ```text
//!   /proc/PID/stat                 starttime (field 22): still the process we started?
//!   /proc/PID/numa_maps            pages per node per VMA (observe's parser)
//!        VMAs starting inside [buffer_start, buffer_start + len)  -> buffer per node
//!        all VMAs                                                 -> process per node
//!   /proc/PID/task/TID/stat        comm, processor (field 39) of every thread named bench-t*
//!        processor -> node (topology)                             -> worker threads per node
//!   /proc/vmstat                   numa_pages_migrated, pgmigrate_success, pgmigrate_fail
//!   move_pages(PID, pages, NULL)   (query only) the node of up to PAGES_PER_THREAD pages of each
//!        worker thread's range      -> share of each thread's range on the thread's own node
//! ```
//!
//! The last figure, `thread_local_pct`, tells what numa_maps cannot: numa02's threads each own a
//! slice, and with threads on every node "the buffer is on the nodes the threads run on" holds
//! whatever the placement; the per-thread share says whether each slice sits with its thread.
//!
//! The buffer is found by address: the worker maps it between guard pages, so its VMAs (one, or
//! one per `mbind` region) all start inside its range. A process or thread that is gone by the
//! time its file is read is skipped (`Ok(None)` / left out), never an error; so is a pid whose
//! start time differs from the one recorded at spawn (the pid was reused).
//!
//! Units: kB as numa_maps gives them (pages times the VMA's page size); the caller turns them
//! into MiB.

use std::collections::HashMap;
use std::path::PathBuf;

use numapilot_observe::parse::stat::parse_stat;
use numapilot_observe::Reader;
use numapilot_topology::Topology;

use crate::error::BenchError;
use crate::result::Migrated;
use crate::worker::THREAD_PREFIX;

/// Most pages of one thread's range whose node is queried per sample: 1024, evenly spread. A
/// 64 MiB range has 16384 pages; a sample of 1024 puts the share within a few percent (binomial
/// standard error at most 1.6%) for a query that costs about a millisecond, where asking for every
/// page of a large buffer every second would cost more than the rest of the recorder.
pub const PAGES_PER_THREAD: u64 = 1024;

/// A process being watched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    /// Its pid.
    pub pid: u32,
    /// Its start time (`/proc/PID/stat` field 22, clock ticks since boot) when it was spawned.
    pub starttime: u64,
    /// Its test buffer: start address and length, bytes; `None`: no buffer is told apart.
    pub buffer: Option<(u64, u64)>,
    /// Range of worker thread `i` (`bench-t<i>`) in the buffer: offset and length, bytes. Empty:
    /// no per-thread figure.
    pub threads: Vec<(u64, u64)>,
}

/// One sample of one process.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessSample {
    /// The buffer's resident kB per node (indexed like [`Recorder::nodes`]).
    pub buffer_kb: Vec<u64>,
    /// All resident kB per node.
    pub mem_kb: Vec<u64>,
    /// Worker threads per node, by the CPU each last ran on.
    pub thread_nodes: Vec<u32>,
    /// Mean over worker threads of the share of its range's pages on its own node, %; `None`
    /// without ranges, threads, or pages that could be located.
    pub thread_local_pct: Option<f64>,
}

/// Reads placement from a /proc tree (the live one, or a copy under another root).
#[derive(Debug)]
pub struct Recorder {
    reader: Reader,
    root: PathBuf,
    nodes: Vec<u32>,
    cpu_node: HashMap<u32, u32>,
}

fn gone(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::NotFound) || e.raw_os_error() == Some(libc::ESRCH)
}

impl Recorder {
    /// A recorder reading `root/proc`, for the machine `topo` (its nodes and which CPU is on which).
    pub fn new(root: impl Into<PathBuf>, topo: &Topology) -> Recorder {
        let root = root.into();
        let mut nodes: Vec<u32> = topo.nodes.iter().map(|n| n.id).collect();
        nodes.sort_unstable();
        let cpu_node = topo.cpus.iter().map(|c| (c.id, c.node)).collect();
        Recorder { reader: Reader::new(root.clone()), root, nodes, cpu_node }
    }

    /// Kernel node ids, the index of every per-node vector.
    pub fn nodes(&self) -> &[u32] {
        &self.nodes
    }

    /// The start time of `pid`; `None` if it is gone.
    pub fn starttime(&self, pid: u32) -> Result<Option<u64>, BenchError> {
        Ok(self.reader.read_stat(pid)?.map(|s| s.starttime))
    }

    fn idx(&self, node: u32) -> Option<usize> {
        self.nodes.binary_search(&node).ok()
    }

    /// Samples process `w`; `None` if it is gone, a zombie, no longer the process we started, or
    /// (when `w.buffer` is given) no longer maps its buffer.
    pub fn sample(&self, w: &Watched) -> Result<Option<ProcessSample>, BenchError> {
        match self.reader.read_stat(w.pid)? {
            Some(s) if s.starttime == w.starttime && s.state != 'Z' => {}
            _ => return Ok(None),
        }
        let Some(maps) = self.reader.read_numa_maps(w.pid)? else { return Ok(None) };
        if maps.vmas.is_empty() {
            return Ok(None); // exiting: its mm is gone
        }
        let n = self.nodes.len();
        let (mut buffer_kb, mut mem_kb) = (vec![0u64; n], vec![0u64; n]);
        let mut buffer_seen = false;
        for vma in &maps.vmas {
            let in_buffer = w.buffer.is_some_and(|(start, len)| vma.start >= start && vma.start < start + len);
            buffer_seen |= in_buffer;
            for (node, kb) in vma.node_kb() {
                if let Some(i) = self.idx(node) {
                    mem_kb[i] += kb;
                    if in_buffer {
                        buffer_kb[i] += kb;
                    }
                }
            }
        }
        if w.buffer.is_some() && !buffer_seen {
            // The worker unmapped its buffer: it is finishing, and a sample now would show the
            // buffer as empty rather than where it was.
            return Ok(None);
        }
        let mut thread_nodes = vec![0u32; n];
        let mut worker_nodes: Vec<(usize, u32)> = Vec::new();
        for tid in self.reader.tids(w.pid)?.unwrap_or_default() {
            let path = self.root.join(format!("proc/{}/task/{tid}/stat", w.pid));
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) if gone(&e) => continue,
                Err(e) => return Err(BenchError::Io { what: "reading a thread's stat", path, source: e }),
            };
            let Ok(stat) = parse_stat(&text) else { continue }; // cut short while the thread exits
            if !stat.comm.starts_with(THREAD_PREFIX) {
                continue;
            }
            if let Some(&node) = self.cpu_node.get(&stat.processor) {
                if let Some(i) = self.idx(node) {
                    thread_nodes[i] += 1;
                }
                if let Ok(index) = stat.comm[THREAD_PREFIX.len()..].parse::<usize>() {
                    worker_nodes.push((index, node));
                }
            }
        }
        let thread_local_pct = self.thread_local_pct(w, &worker_nodes);
        Ok(Some(ProcessSample { buffer_kb, mem_kb, thread_nodes, thread_local_pct }))
    }

    /// See [`ProcessSample::thread_local_pct`]. A failed query (the process exiting, no
    /// permission) gives `None`: the figure is missing, the sample is not.
    fn thread_local_pct(&self, w: &Watched, worker_nodes: &[(usize, u32)]) -> Option<f64> {
        let (start, _) = w.buffer?;
        let page = crate::worker::page_bytes();
        let mut shares = Vec::new();
        for &(index, node) in worker_nodes {
            let Some(&(offset, len)) = w.threads.get(index) else { continue };
            let pages = len / page;
            if pages == 0 {
                continue;
            }
            let step = pages.div_ceil(PAGES_PER_THREAD).max(1);
            let addrs: Vec<usize> =
                (0..pages).step_by(step as usize).map(|k| (start + offset + k * page) as usize).collect();
            let pid = numapilot_actuate::Pid::try_from(w.pid).ok()?;
            let Ok(out) = numapilot_actuate::move_pages(pid, &addrs, None, numapilot_actuate::MoveFlags::Own) else {
                return None;
            };
            let located = out.status.iter().filter(|s| matches!(s, numapilot_actuate::PageStatus::Node(_))).count();
            if located > 0 {
                shares.push(100.0 * out.on_node(node) as f64 / located as f64);
            }
        }
        if shares.is_empty() {
            None
        } else {
            Some(shares.iter().sum::<f64>() / shares.len() as f64)
        }
    }

    /// The page-migration counters of `/proc/vmstat` now (totals since boot).
    pub fn migrated(&self) -> Result<Migrated, BenchError> {
        let c = self.reader.read_vmstat()?;
        Ok(Migrated {
            numa_pages_migrated: c.get("numa_pages_migrated"),
            pgmigrate_success: c.get("pgmigrate_success"),
            pgmigrate_fail: c.get("pgmigrate_fail"),
        })
    }

    /// `/proc/sys/kernel/numa_balancing`; `None` if absent.
    pub fn numa_balancing(&self) -> Result<Option<i64>, BenchError> {
        Ok(self.reader.read_numa_balancing()?)
    }
}
