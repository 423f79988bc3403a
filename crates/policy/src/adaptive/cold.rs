//! Cold memory: resident memory that no thread of its process accesses, and what the plan does
//! with it (rule "cold-memory-stays").
//!
//! # Problem
//!
//! A process's resident memory is not all in use. A virtual machine's QEMU touches all of guest
//! RAM at start (boot, page cache, preallocation) and the guest then works in a fraction of it;
//! a database's buffer pool is filled once and read in its hot part. On the VM mix
//! (`numaconnect-288c vm-mix`, shared/seeds/004) 704 of the 1024 GiB resident is such idle
//! memory, first-touched by QEMU's main thread at arrival, and the machine is 89% committed.
//! Every rule that sizes or moves memory by residency then works on the wrong quantity:
//!
//! ```text
//!   unit memory   vCPU of a 16 GiB small VM = 4 GiB (RSS / 4 threads), of which 0.4 GiB is its
//!                 working set: "no room" on the node that holds that working set (full of other
//!                 VMs' idle RAM), so the vCPU is moved away from it (next-best-node)
//!   cpu follows   90% of the small VM's resident memory is its idle RAM on one node: its vCPUs
//!   memory        are pulled there, away from the nodes their working sets are on
//!   classes       a 288 GiB VM reads as static-large: its 72 vCPUs are packed on the 10 nodes
//!                 "its memory needs", and all 288 GiB is bound there (72 s at 4 GiB/s, into
//!                 full nodes: it never finishes, and its working set is remote meanwhile)
//! ```
//!
//! (measured, seed 1, 20 s: the huge sheep VM's vCPUs packed on nodes 0-3,18-23 at 10 s by
//! `closest-set` with its working set on all 36 nodes; the huge VMs at 0.65-0.78 x default.)
//!
//! # Approach
//!
//! The access samples say which memory is used: a process's hot ranges (`ProcView::hot`, the
//! 2 MiB buckets its threads were sampled in, decayed with `access_half_life_ms`). The buckets
//! seen are not the footprint: a database reading a 60 GiB pool at random has seen 30% of its
//! buckets after 10 s, nearly all of them once. How many buckets were never sampled is estimated
//! from how many were sampled once (f1) and twice (f2), Chao's estimator of a population from
//! its rare members (Chao 1984, "Nonparametric estimation of the number of classes in a
//! population"):
//!
//! ```text
//!   F = D + f1^2 / (2 f2)          (D + f1 (f1 - 1) / 2 when f2 = 0)     buckets, at most the RSS
//!   accessed memory = hot bytes x F / D,   cold share = 1 - accessed / RSS
//!
//!   measured (simulator, 288c VM mix and 96-CPU process mix, seed 1, 3-20 s):
//!     sheep VMs (10% working set)   D/RSS 3-4%    F/RSS 12-19%   cold 81-88%
//!     rabbit, devil VMs (50%)       D/RSS 28-46%  F/RSS 35-57%   cold 43-65%
//!     db (60 GiB pool, random)      D/RSS 20-31%  F/RSS 100%     cold 0%  (f1 ~ 9 x f2)
//!     jvm, solver, trader           F/RSS 100%                   cold 0%
//! ```
//!
//! Once a process has been watched for one access half-life (a bucket sampled once is kept about
//! that long: its hot set has built up; before, Chao's estimate has too few repeats to go on) and its
//! cold share is at least `cold_memory_share_min`, the rest of its memory is *cold* and:
//!
//! ```text
//!   units       their memory is the accessed memory (hot bytes per node, shared out by CPU like
//!               resident memory before): capacity, CPU follows memory and "room" count that
//!   capacity    cold memory stays where it lies: it occupies its node like unmanaged memory
//!   classes     static-large and bandwidth-bound (both read from residency and traffic of the
//!               whole RSS) do not apply: its threads are placed by their affinity groups
//!   memory      only hot ranges move (MoveRanges); no MigratePages / Interleave of the whole
//!               process, which would copy the cold memory into the nodes it runs on
//! ```
//!
//! A latency-sensitive process (named in the config) keeps its binding.
//!
//! # Measured
//!
//! `numaconnect-288c vm-mix`, 20 s, seeds 1-3 (the evidence cell): numapilot 1.020 -> 1.200 x
//! default's mean per-VM throughput, stddev/mean across seeds 17.78% -> 9.67%, local 84.9% ->
//! 93.8%; the huge VMs 0.65-0.78 -> 0.92-1.03 x default. Still short of hard-bind (1.571 x,
//! 0.01%), which partitions the nodes before the first touch. No other cell of the evidence
//! changed.
//!
//!
//! The estimator assumes the accessed buckets are sampled alike; a small very hot core beside a
//! large, rarely read rest still shows the rest through its singletons (the jvm's heap above).
//! Memory a process reads less often than a bucket is forgotten (about one half-life) counts as
//! cold; it is not moved, which is also what a cold page needs. Where the accessed memory lies is
//! taken from the buckets seen (scaled by F / D). Without access samples (no PMU) nothing is cold
//! and the rules above use residency as before.

use std::collections::BTreeMap;

use numapilot_model::{Model, ProcessClass};

const MIB: f64 = 1048576.0;

/// Rule name of the decisions this module changes (for reasons).
pub(crate) const COLD_RULE: &str = "cold-memory-stays";

/// A process's accessed memory when most of its resident memory is cold.
#[derive(Debug, Clone)]
pub(crate) struct Accessed {
    /// Hot bytes per node (dense index).
    pub(crate) by_node: Vec<u64>,
    /// Share of the resident memory that is cold (0..1).
    pub(crate) cold_share: f64,
}

/// The accessed memory of `pid` when the cold-memory rule applies to it (see the module essay),
/// else `None`.
pub(crate) fn accessed(model: &Model, pid: u32) -> Option<Accessed> {
    let t = &model.tunables;
    let p = model.procs.get(&pid)?;
    if p.hot.is_empty() || p.rss_bytes == 0 || (p.rss_bytes as f64) < t.min_process_rss_mib as f64 * MIB {
        return None;
    }
    let watched_ns = model.now_ns.saturating_sub(p.first_seen_ns);
    if watched_ns < t.access_half_life_ms.saturating_mul(1_000_000) {
        return None;
    }
    let n = model.topo.nodes.len();
    let mut by_node = vec![0u64; n];
    for h in &p.hot {
        if let Some(i) = model.node_idx(h.node) {
            by_node[i] += h.len;
        }
    }
    let hot: u64 = by_node.iter().sum();
    if hot == 0 {
        return None;
    }
    let scale = footprint_buckets(&p.hot) / p.hot.len() as f64;
    let accessed = (hot as f64 * scale).min(p.rss_bytes as f64);
    let cold_share = 1.0 - accessed / p.rss_bytes as f64;
    if cold_share < t.cold_memory_share_min {
        return None;
    }
    let by_node = by_node.iter().map(|&b| (b as f64 * scale) as u64).collect();
    Some(Accessed { by_node, cold_share })
}

/// Chao's estimate of the buckets a process accesses from the hot buckets seen (see the essay).
fn footprint_buckets(hot: &[numapilot_model::HotRange]) -> f64 {
    let d = hot.len() as f64;
    let f1 = hot.iter().filter(|h| h.samples == 1).count() as f64;
    let f2 = hot.iter().filter(|h| h.samples == 2).count() as f64;
    if f2 > 0.0 {
        d + f1 * f1 / (2.0 * f2)
    } else {
        d + f1 * (f1 - 1.0).max(0.0) / 2.0
    }
}

/// The accessed memory of every process in `pids` the rule applies to.
pub(crate) fn accessed_all(model: &Model, pids: impl Iterator<Item = u32>) -> BTreeMap<u32, Accessed> {
    pids.filter_map(|pid| accessed(model, pid).map(|a| (pid, a))).collect()
}

/// The class the plan uses for a process: its own, except that
///
/// - static-large and bandwidth-bound do not apply to a process whose memory is mostly cold
///   (`cold`: it is in the accessed map; rule "cold-memory-stays"), and
/// - static-large does not apply to a process whose threads work on slices of their own
///   (`sliced`, rule "sliced-not-static", memory.rs `slice_shaped`): a whole-process binding
///   (CPUs and memory to one node set) leaves the kernel free to run any thread on any node of
///   the set, away from its slice, where the per-thread groups already place each thread with its
///   slice. The classifier reads "static large" from the RSS and its growth alone; a streaming
///   solver over per-thread slices of a grid initialised by one thread reads so (article-4n96
///   process-mix: bound to nodes 0-1 at 10 s, the solver fell from ~95% to 52% local in one seed;
///   1.135 -> 1.156 x default over 3 seeds without the binding). A pool every thread reads (a
///   database's) is not slice-shaped and keeps the class.
pub(crate) fn effective_class(class: ProcessClass, cold: bool, sliced: bool) -> ProcessClass {
    match class {
        ProcessClass::StaticLarge | ProcessClass::BandwidthBound if cold => ProcessClass::Unclassified,
        ProcessClass::StaticLarge if sliced => ProcessClass::Unclassified,
        c => c,
    }
}
