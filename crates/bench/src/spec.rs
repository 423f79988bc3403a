//! Test names, options and the plan: which processes and threads a test runs, where.
//!
//! # Problem
//!
//! autonuma-benchmark compiles one C program per test and variant, sized for the machine it
//! runs on (`preproc.awk` writes the thread count and node masks into the source). We want the
//! same tests from one binary, sized by flags for a small guest, with the placement of the bind
//! variants worked out from the topology we read.
//!
//! # Approach
//!
//! [`plan`] turns a test name (`numa02_SMT_INVERSE_BIND`), the [`Options`] (flags) and a
//! [`Topology`] into a [`Plan`]: one [`WorkerConfig`] per process, each naming its buffer size,
//! every thread's byte range and CPUs, and the node binding of each buffer region. Pure: no
//! system call, so every placement rule is tested with hand-built topologies.
//!
//! ```text
//!   numa01*:  2 processes          numa02*: 1 process
//!     nodes (with CPUs and memory) split in halves A | B   (one node: A = B = that node)
//!     HARD_BIND    proc 0: CPUs A, memory A                 thread i: node n(i) = i / (T/N)
//!                  proc 1: CPUs B, memory B                 CPUs and slice i's memory on n(i)
//!     INVERSE_BIND proc 0: CPUs A, memory B                 thread i: CPUs on n(i),
//!                  proc 1: CPUs B, memory A                 slice i's memory on n(T-1-i)
//! ```
//!
//! Units: sizes are MiB on the command line and bytes in a plan; slices are whole pages.

use numapilot_topology::{NodeSet, Topology};
use serde::{Deserialize, Serialize};

use crate::error::BenchError;
use crate::worker::{RegionBind, ThreadConfig, WorkerConfig};

/// Default buffer per process, MiB: 128 MiB, so numa01's two buffers (256 MiB) fit on one node of
/// a 1 GiB two-node guest with room for the kernel and userland (the original's 3 GiB would not).
pub const DEFAULT_MB: u64 = 128;

/// Most threads per process accepted: far above any guest we run, low enough that a typo
/// (`--threads 40000`) is an error rather than a fork bomb.
pub const MAX_THREADS: u32 = 1024;

/// Longest `--seconds`, s: one day. Prevents: a run length the workers cannot turn into a
/// deadline (1e300 s panicked a worker, and the run never ended).
pub const MAX_SECONDS: f64 = 86_400.0;

/// The four tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Test {
    /// Two processes, every thread writes its process's whole buffer.
    #[serde(rename = "numa01")]
    Numa01,
    /// Two processes, every thread writes its own slice.
    #[serde(rename = "numa01_THREAD_ALLOC")]
    Numa01ThreadAlloc,
    /// One process, one thread per CPU, each writes its own slice.
    #[serde(rename = "numa02")]
    Numa02,
    /// One process, one thread per two CPUs, each writes its own slice.
    #[serde(rename = "numa02_SMT")]
    Numa02Smt,
}

impl Test {
    /// All tests, in the original's order.
    pub const ALL: [Test; 4] = [Test::Numa01, Test::Numa01ThreadAlloc, Test::Numa02, Test::Numa02Smt];

    /// The original's name.
    pub fn name(self) -> &'static str {
        match self {
            Test::Numa01 => "numa01",
            Test::Numa01ThreadAlloc => "numa01_THREAD_ALLOC",
            Test::Numa02 => "numa02",
            Test::Numa02Smt => "numa02_SMT",
        }
    }

    /// Number of processes: 2 for numa01*, 1 for numa02*.
    pub fn processes(self) -> usize {
        match self {
            Test::Numa01 | Test::Numa01ThreadAlloc => 2,
            Test::Numa02 | Test::Numa02Smt => 1,
        }
    }

    /// Whether each thread writes its own slice (else every thread writes the whole buffer).
    pub fn sliced(self) -> bool {
        self != Test::Numa01
    }

    /// Default threads per process on a machine with `cpus` online CPUs: half of them for numa01*
    /// and numa02_SMT (the original's `THREADS` and `NCPUS/2`), all for numa02; at least one.
    pub fn default_threads(self, cpus: u32) -> u32 {
        match self {
            Test::Numa02 => cpus.max(1),
            _ => (cpus / 2).max(1),
        }
    }

    /// The original's passes per thread over its range: numa01 `nr = 50`, THREAD_ALLOC
    /// `nr = 1000` (numa01.c), numa02 `TOTALSIZE / SIZE` = 800 (numa02.c).
    pub fn original_passes(self) -> u64 {
        match self {
            Test::Numa01 => 50,
            Test::Numa01ThreadAlloc => 1000,
            Test::Numa02 | Test::Numa02Smt => 800,
        }
    }
}

/// Where the bind variants put threads and memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Bind {
    /// No binding: the kernel (or a daemon) places threads and moves memory.
    None,
    /// `_HARD_BIND`: threads and their memory on the same node(s).
    Hard,
    /// `_INVERSE_BIND`: threads on one node, their memory on another.
    Inverse,
}

/// A test with its variant, parsed from a name such as `numa01_THREAD_ALLOC_HARD_BIND`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestName {
    /// The test.
    pub test: Test,
    /// The variant.
    pub bind: Bind,
}

impl TestName {
    /// Parses `<test>[_HARD_BIND|_INVERSE_BIND]` (case as the original's file names).
    pub fn parse(name: &str) -> Result<TestName, BenchError> {
        let (base, bind) = if let Some(b) = name.strip_suffix("_HARD_BIND") {
            (b, Bind::Hard)
        } else if let Some(b) = name.strip_suffix("_INVERSE_BIND") {
            (b, Bind::Inverse)
        } else {
            (name, Bind::None)
        };
        match Test::ALL.iter().find(|t| t.name() == base) {
            Some(&test) => Ok(TestName { test, bind }),
            None => Err(BenchError::UnknownTest { name: name.to_string(), valid: Self::valid_names().join(", ") }),
        }
    }

    /// Every valid name.
    pub fn valid_names() -> Vec<String> {
        let mut out = Vec::new();
        for t in Test::ALL {
            for suffix in ["", "_HARD_BIND", "_INVERSE_BIND"] {
                out.push(format!("{}{suffix}", t.name()));
            }
        }
        out
    }

    /// The full name, e.g. `numa02_SMT_INVERSE_BIND`.
    pub fn full(&self) -> String {
        let suffix = match self.bind {
            Bind::None => "",
            Bind::Hard => "_HARD_BIND",
            Bind::Inverse => "_INVERSE_BIND",
        };
        format!("{}{suffix}", self.test.name())
    }
}

/// How much each thread works.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Work {
    /// This many passes over the thread's range; the runtime is the figure of merit.
    Loops(u64),
    /// Write until this many seconds have passed; the bytes written are the figure of merit.
    Seconds(f64),
}

/// The options of a run, as given on the command line (`None`: the default).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Options {
    /// `--mb`: buffer per process, MiB (default [`DEFAULT_MB`]).
    pub mb: Option<u64>,
    /// `--threads`: threads per process (default [`Test::default_threads`]).
    pub threads: Option<u32>,
    /// `--loops`: passes per thread (default [`Test::original_passes`]).
    pub loops: Option<u64>,
    /// `--seconds`: run for this long instead of a number of passes.
    pub seconds: Option<f64>,
    /// `--force-node`: first-touch every buffer on this node (not with the bind variants).
    pub force_node: Option<u32>,
}

/// What a test run will do: one worker configuration per process.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The test and variant.
    pub name: TestName,
    /// Buffer per process, MiB.
    pub mb_per_process: u64,
    /// Threads per process.
    pub threads_per_process: u32,
    /// Work per thread.
    pub work: Work,
    /// `--force-node`, if given.
    pub force_node: Option<u32>,
    /// The processes.
    pub processes: Vec<WorkerConfig>,
}

fn flag(flag: &'static str, reason: impl Into<String>) -> BenchError {
    BenchError::Flag { flag, reason: reason.into() }
}

/// Nodes the bind variants use: those with both CPUs and memory, ascending (all nodes with CPUs
/// if none has both, as on a machine file without memory sizes).
fn bind_nodes(topo: &Topology) -> Vec<u32> {
    let mut both: Vec<u32> = topo.nodes.iter().filter(|n| !n.cpus.is_empty() && n.has_memory()).map(|n| n.id).collect();
    if both.is_empty() {
        both = topo.nodes.iter().filter(|n| !n.cpus.is_empty()).map(|n| n.id).collect();
    }
    both.sort_unstable();
    both
}

/// Online CPUs of `nodes`, ascending.
fn cpus_of(topo: &Topology, nodes: &[u32]) -> Vec<u32> {
    let set: NodeSet = nodes.iter().copied().collect();
    let online = topo.online_cpus();
    topo.cpus_of_nodes(&set).iter().filter(|c| online.contains(*c)).collect()
}

/// Plans test `name` with `opts` on machine `topo`, with pages of `page_bytes`.
pub fn plan(name: &str, opts: &Options, topo: &Topology, page_bytes: u64) -> Result<Plan, BenchError> {
    let name = TestName::parse(name)?;
    let test = name.test;
    let mb = opts.mb.unwrap_or(DEFAULT_MB);
    if mb == 0 {
        return Err(flag("--mb", "must be at least 1 (MiB per process)"));
    }
    let bytes = mb.checked_mul(1 << 20).ok_or_else(|| flag("--mb", format!("{mb} MiB is too large")))?;
    let cpus = topo.online_cpus().len() as u32;
    let threads = opts.threads.unwrap_or_else(|| test.default_threads(cpus));
    if threads == 0 || threads > MAX_THREADS {
        return Err(flag("--threads", format!("must be 1 to {MAX_THREADS}, got {threads}")));
    }
    let pages = bytes / page_bytes.max(1);
    if test.sliced() && pages < u64::from(threads) {
        return Err(flag(
            "--threads",
            format!("{threads} threads cannot each have a page of a {mb} MiB buffer ({pages} pages)"),
        ));
    }
    let work = match (opts.loops, opts.seconds) {
        (Some(_), Some(_)) => return Err(flag("--loops", "give --loops or --seconds, not both")),
        (Some(0), None) => return Err(flag("--loops", "must be at least 1")),
        (Some(n), None) => Work::Loops(n),
        (None, Some(s)) if !(s.is_finite() && s > 0.0 && s <= MAX_SECONDS) => {
            // `{s:?}`: a float as written (1e300), not as 301 digits (review helper-53).
            return Err(flag("--seconds", format!("must be a number of seconds in (0, {MAX_SECONDS}], got {s:?}")));
        }
        (None, Some(s)) => Work::Seconds(s),
        (None, None) => Work::Loops(test.original_passes()),
    };
    let nodes = bind_nodes(topo);
    if let Some(n) = opts.force_node {
        if name.bind != Bind::None {
            return Err(flag("--force-node", format!("{} places its memory itself; drop --force-node", name.full())));
        }
        let with_mem: Vec<u32> = topo.nodes.iter().filter(|x| x.has_memory()).map(|x| x.id).collect();
        if !with_mem.contains(&n) {
            let list: Vec<String> = with_mem.iter().map(u32::to_string).collect();
            return Err(flag(
                "--force-node",
                format!("node {n} is not a node with memory (nodes: {})", list.join(",")),
            ));
        }
    }
    if name.bind != Bind::None && nodes.is_empty() {
        return Err(flag("TEST", format!("{} needs nodes with CPUs; this machine has none", name.full())));
    }
    // Thread ranges: the whole buffer (numa01) or slice i of T, whole pages, the last takes the rest.
    let slice = (pages / u64::from(threads)) * page_bytes;
    let range = |i: u32| -> (u64, u64) {
        if !test.sliced() {
            (0, bytes)
        } else if i + 1 == threads {
            (slice * u64::from(i), bytes - slice * u64::from(i))
        } else {
            (slice * u64::from(i), slice)
        }
    };
    let processes = (0..test.processes())
        .map(|p| {
            let (cpu_nodes, mem_nodes): (Vec<u32>, Vec<u32>) = match (test, name.bind) {
                (_, Bind::None) => (vec![], vec![]),
                (Test::Numa01 | Test::Numa01ThreadAlloc, bind) => {
                    let (a, b) = if nodes.len() < 2 {
                        (nodes.clone(), nodes.clone())
                    } else {
                        let h = nodes.len() / 2;
                        (nodes[..h].to_vec(), nodes[h..].to_vec())
                    };
                    let (mine, other) = if p == 0 { (a, b) } else { (b, a) };
                    if bind == Bind::Hard {
                        (mine.clone(), mine)
                    } else {
                        (mine, other)
                    }
                }
                // numa02: per thread, below.
                _ => (vec![], vec![]),
            };
            let cpus_p = cpus_of(topo, &cpu_nodes);
            let mut regions = Vec::new();
            if !mem_nodes.is_empty() {
                regions.push(RegionBind { offset: 0, len: bytes, nodes: mem_nodes });
            }
            let per_node = (threads as usize / nodes.len().max(1)).max(1);
            let node_of = |i: usize| nodes[(i / per_node).min(nodes.len().saturating_sub(1))];
            let threads_cfg = (0..threads)
                .map(|i| {
                    let (offset, len) = range(i);
                    let cpus = match (test, name.bind) {
                        (_, Bind::None) => vec![],
                        (Test::Numa02 | Test::Numa02Smt, _) => {
                            let mem = match name.bind {
                                Bind::Hard => node_of(i as usize),
                                _ => node_of((threads - 1 - i) as usize),
                            };
                            regions.push(RegionBind { offset, len, nodes: vec![mem] });
                            cpus_of(topo, &[node_of(i as usize)])
                        }
                        _ => cpus_p.clone(),
                    };
                    ThreadConfig { offset, len, cpus }
                })
                .collect();
            WorkerConfig {
                index: p,
                name: name.full(),
                bytes,
                threads: threads_cfg,
                work,
                force_node: opts.force_node,
                regions,
            }
        })
        .collect::<Vec<WorkerConfig>>();
    fits(topo, &name, mb, &processes)?;
    Ok(Plan { name, mb_per_process: mb, threads_per_process: threads, work, force_node: opts.force_node, processes })
}

/// Whether the buffers fit the machine's memory: all of them in its total, and what `--force-node`
/// or a binding puts on a node in that node's total (a region bound to several nodes counted evenly
/// over them). Past it the kernel's OOM killer ends a worker (or another process) part-way: on a
/// 24 GiB machine `--mb 40000` did, and the run then said only that a worker was killed (review
/// helper-41). Free memory is not the bound: page cache counts as used but is given back.
fn fits(topo: &Topology, name: &TestName, mb: u64, processes: &[WorkerConfig]) -> Result<(), BenchError> {
    let mib = |kb: u64| kb / 1024;
    let total_kb: u64 = topo.nodes.iter().map(|n| n.mem_total_kb).sum();
    let want_kb = processes.iter().map(|p| p.bytes / 1024).sum::<u64>();
    if want_kb > total_kb {
        return Err(flag(
            "--mb",
            match processes.len() {
                1 => format!("{mb} MiB is more than this machine's memory ({} MiB)", mib(total_kb)),
                n => format!(
                    "{mb} MiB x {n} processes ({} MiB) is more than this machine's memory ({} MiB)",
                    mib(want_kb),
                    mib(total_kb)
                ),
            },
        ));
    }
    let mut on: std::collections::BTreeMap<u32, u64> = std::collections::BTreeMap::new();
    for p in processes {
        match p.force_node {
            Some(n) => *on.entry(n).or_default() += p.bytes / 1024,
            None => {
                for r in p.regions.iter().filter(|r| !r.nodes.is_empty()) {
                    for &n in &r.nodes {
                        *on.entry(n).or_default() += r.len / 1024 / r.nodes.len() as u64;
                    }
                }
            }
        }
    }
    for (n, kb) in on {
        let cap = topo.nodes.iter().find(|x| x.id == n).map_or(0, |x| x.mem_total_kb);
        if kb > cap {
            let how =
                if processes.iter().any(|p| p.force_node.is_some()) { "--force-node puts" } else { "its binding puts" };
            return Err(flag(
                "--mb",
                format!(
                    "{} at {mb} MiB a process: {how} {} MiB on node {n}, which has {} MiB",
                    name.full(),
                    mib(kb),
                    mib(cap)
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: u64 = 4096;

    fn two_nodes() -> Topology {
        // 2 nodes x 2 CPUs, 512 MiB each: the rig's 2node guest.
        Topology::uniform(2, 2, 512 * 1024, 21)
    }

    #[test]
    fn names_parse_with_their_variants() {
        let n = TestName::parse("numa01_THREAD_ALLOC_HARD_BIND").unwrap();
        assert_eq!((n.test, n.bind), (Test::Numa01ThreadAlloc, Bind::Hard));
        assert_eq!(n.full(), "numa01_THREAD_ALLOC_HARD_BIND");
        let n = TestName::parse("numa02_SMT_INVERSE_BIND").unwrap();
        assert_eq!((n.test, n.bind), (Test::Numa02Smt, Bind::Inverse));
        let e = TestName::parse("numa03").unwrap_err().to_string();
        assert!(e.contains("\"numa03\"") && e.contains("numa02_SMT_INVERSE_BIND"), "{e}");
        assert!(TestName::parse("NUMA01").is_err());
        assert_eq!(TestName::valid_names().len(), 12);
    }

    #[test]
    fn numa01_splits_the_buffer_nowhere_and_numa02_in_page_slices() {
        let t = two_nodes();
        let p = plan("numa01", &Options { mb: Some(8), ..Options::default() }, &t, PAGE).unwrap();
        assert_eq!(p.processes.len(), 2);
        assert_eq!(p.threads_per_process, 2, "numa01: half the 4 CPUs per process");
        assert_eq!(p.work, Work::Loops(50));
        for w in &p.processes {
            assert_eq!(w.bytes, 8 << 20);
            assert!(w.threads.iter().all(|th| th.offset == 0 && th.len == 8 << 20 && th.cpus.is_empty()));
            assert!(w.regions.is_empty());
        }
        // numa02, 3 threads over 1 MiB (256 pages): 85 pages each, the last 86; no byte lost or shared.
        let p = plan("numa02", &Options { mb: Some(1), threads: Some(3), ..Options::default() }, &t, PAGE).unwrap();
        let th = &p.processes[0].threads;
        assert_eq!(
            th.iter().map(|x| (x.offset, x.len)).collect::<Vec<_>>(),
            [(0, 85 * PAGE), (85 * PAGE, 85 * PAGE), (170 * PAGE, 86 * PAGE)]
        );
        assert_eq!(plan("numa02", &Options::default(), &t, PAGE).unwrap().threads_per_process, 4);
        assert_eq!(plan("numa02_SMT", &Options::default(), &t, PAGE).unwrap().threads_per_process, 2);
        assert_eq!(plan("numa01_THREAD_ALLOC", &Options::default(), &t, PAGE).unwrap().work, Work::Loops(1000));
    }

    /// Buffers the machine cannot hold are refused before anything starts: in all (2 x 512 MiB
    /// here), and on a node where `--force-node` or a binding puts them; what fits passes.
    #[test]
    fn buffers_that_do_not_fit_the_memory_are_refused() {
        let t = two_nodes();
        let o = |mb, force_node| Options { mb: Some(mb), force_node, ..Options::default() };
        let e = plan("numa01", &o(600, None), &t, PAGE).unwrap_err().to_string();
        assert!(e.contains("--mb") && e.contains("1200 MiB") && e.contains("(1024 MiB)"), "{e}");
        assert!(plan("numa01", &o(500, None), &t, PAGE).is_ok(), "1000 MiB over the two nodes");
        let e = plan("numa01", &o(300, Some(0)), &t, PAGE).unwrap_err().to_string();
        assert!(e.contains("--force-node puts 600 MiB on node 0, which has 512 MiB"), "{e}");
        assert!(plan("numa02", &o(500, Some(1)), &t, PAGE).is_ok(), "one process, 500 MiB on node 1");
        // numa02's slices bound per thread: 3 threads, one slice on node 0 and two on node 1.
        let three = |mb| Options { threads: Some(3), ..o(mb, None) };
        let e = plan("numa02_HARD_BIND", &three(780), &t, PAGE).unwrap_err().to_string();
        assert!(e.contains("its binding puts 520 MiB on node 1, which has 512 MiB"), "{e}");
        assert!(plan("numa02_HARD_BIND", &three(760), &t, PAGE).is_ok(), "506 MiB on node 1");
    }

    #[test]
    fn numa01_binds_halves_hard_and_inverse() {
        let t = two_nodes();
        let hard = plan("numa01_HARD_BIND", &Options { mb: Some(4), ..Options::default() }, &t, PAGE).unwrap();
        // uniform(): node 0 has CPUs 0-1, node 1 CPUs 2-3.
        assert_eq!(hard.processes[0].threads[0].cpus, [0, 1]);
        assert_eq!(hard.processes[0].regions, [RegionBind { offset: 0, len: 4 << 20, nodes: vec![0] }]);
        assert_eq!(hard.processes[1].threads[1].cpus, [2, 3]);
        assert_eq!(hard.processes[1].regions[0].nodes, [1]);
        let inv = plan("numa01_INVERSE_BIND", &Options { mb: Some(4), ..Options::default() }, &t, PAGE).unwrap();
        assert_eq!(inv.processes[0].threads[0].cpus, [0, 1]);
        assert_eq!(inv.processes[0].regions[0].nodes, [1]);
        assert_eq!(inv.processes[1].threads[0].cpus, [2, 3]);
        assert_eq!(inv.processes[1].regions[0].nodes, [0]);
    }

    #[test]
    fn numa02_binds_each_thread_and_its_slice() {
        // 4 nodes x 1 CPU... use 2 nodes x 2 CPUs and 4 threads: threads 0,1 on node 0, 2,3 on node 1.
        let t = two_nodes();
        let o = Options { mb: Some(4), threads: Some(4), ..Options::default() };
        let hard = plan("numa02_HARD_BIND", &o, &t, PAGE).unwrap();
        let w = &hard.processes[0];
        let cpus: Vec<Vec<u32>> = w.threads.iter().map(|x| x.cpus.clone()).collect();
        assert_eq!(cpus, [vec![0, 1], vec![0, 1], vec![2, 3], vec![2, 3]]);
        let mem: Vec<(u64, u32)> = w.regions.iter().map(|r| (r.offset, r.nodes[0])).collect();
        assert_eq!(mem, [(0, 0), (1 << 20, 0), (2 << 20, 1), (3 << 20, 1)]);
        let inv = plan("numa02_INVERSE_BIND", &o, &t, PAGE).unwrap();
        let w = &inv.processes[0];
        assert_eq!(w.threads[0].cpus, [0, 1]);
        let mem: Vec<u32> = w.regions.iter().map(|r| r.nodes[0]).collect();
        assert_eq!(mem, [1, 1, 0, 0], "every slice on the other node than its thread");
        // One node: the halves are the same node, everything local.
        let one = Topology::uniform(1, 2, 1 << 20, 10);
        let p = plan("numa01_INVERSE_BIND", &Options { mb: Some(1), ..Options::default() }, &one, PAGE).unwrap();
        assert_eq!(p.processes[1].regions[0].nodes, [0]);
        assert_eq!(p.processes[1].threads[0].cpus, [0, 1]);
    }

    #[test]
    fn bad_options_name_their_flag() {
        let t = two_nodes();
        let err = |o: Options, name: &str| plan(name, &o, &t, PAGE).unwrap_err().to_string();
        assert!(err(Options { mb: Some(0), ..Options::default() }, "numa01").starts_with("--mb:"));
        assert!(err(Options { threads: Some(0), ..Options::default() }, "numa01").starts_with("--threads:"));
        let e = err(Options { mb: Some(1), threads: Some(300), ..Options::default() }, "numa02");
        assert!(e.starts_with("--threads:") && e.contains("256 pages"), "{e}");
        assert!(err(Options { loops: Some(0), ..Options::default() }, "numa01").starts_with("--loops:"));
        assert!(err(Options { seconds: Some(-1.0), ..Options::default() }, "numa01").starts_with("--seconds:"));
        assert!(err(Options { seconds: Some(f64::NAN), ..Options::default() }, "numa01").starts_with("--seconds:"));
        let e = err(Options { seconds: Some(1e300), ..Options::default() }, "numa01");
        assert!(e.starts_with("--seconds:") && e.ends_with("got 1e300"), "{e}");
        assert!(err(Options { seconds: Some(86_400.5), ..Options::default() }, "numa01").starts_with("--seconds:"));
        let e = err(Options { force_node: Some(7), ..Options::default() }, "numa01");
        assert!(e.starts_with("--force-node:") && e.contains("nodes: 0,1"), "{e}");
        let e = err(Options { force_node: Some(0), ..Options::default() }, "numa02_HARD_BIND");
        assert!(e.starts_with("--force-node:"), "{e}");
        let ok = plan("numa01", &Options { force_node: Some(1), seconds: Some(2.5), ..Options::default() }, &t, PAGE)
            .unwrap();
        assert_eq!(ok.work, Work::Seconds(2.5));
        assert!(ok.processes.iter().all(|w| w.force_node == Some(1)));
    }
}
