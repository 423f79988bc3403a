//! Pre-placement advice on a live host: measures each node's free CPUs and memory (numad's way)
//! for the pure algorithm in `numapilot_policy::advise` (one implementation: the simulator's
//! launch stage uses it too), re-exported here for the daemon's callers.
//!
//! # Problem
//!
//! A job launcher (`numactl -N $(numapilot advise ...)`, libvirt's `placement='auto'`) asks where a
//! job of N CPUs and M bytes fits before it starts: the answer must reflect what is free now, on
//! the nodes the job will be able to use, or it names a busy node or one the launcher's own cpuset
//! forbids (`numactl --cpunodebind` then fails with EINVAL).
//!
//! # Approach
//!
//! ```text
//!   free CPUs of node n   = idle share of its CPUs between two /proc/stat reads `window` apart
//!                           (numad's way; without a window, a captured fixture: since boot)
//!                           x the number of its CPUs the launcher may use
//!   free memory of node n = MemFree + Inactive(file) + SReclaimable of its meminfo
//!                           (`NodeSample::mem_free_reclaimable_kb`, as the daemon's model counts it)
//!   reach                 = the launcher's own affinity cut to its cpuset, and Mems_allowed: a job
//!                           inherits both, so nodes outside them are left out (`own_reach`)
//! ```
//!
//! While a daemon runs, `numapilot advise` sends these figures and the CPUs it reaches to it; the
//! daemon counts each node's CPUs within both those and its own usable ones (not reserved), takes
//! its promises to earlier launches off (rule launch-advice), and sends back the figures it
//! advised from, or found no room in, which the client prints (its own measurement, before the
//! promises and counting CPUs the job may not use, did not add up to the advice or the refusal;
//! a daemon that sends none leaves it, and the answer's source says so). Without a daemon the figures go
//! straight to `numapilot_policy::advise`. The daemon advises only nodes the client measured (its
//! memory nodes).

use std::path::Path;
use std::time::Duration;

use numapilot_observe::Reader;
use numapilot_topology::Topology;

/// The CPUs and memory nodes a launcher and its job may use (the model's bounds of a confined
/// process, the same two sets).
pub use numapilot_model::Confinement as Reach;

pub use numapilot_policy::advise::{advise, check_request, every_node, Advice, AdviseError, NodeFree};

/// Free capacity read under `root` (`/` for this machine). With a `window`, idle time is the
/// difference of two /proc/stat readings `window` apart (numad's way); without one (a captured
/// fixture cannot be read twice), it is the idle share since boot.
pub fn measure(root: &Path, topo: &Topology, window: Option<Duration>) -> Result<Vec<NodeFree>, AdviseError> {
    measure_within(root, topo, window, None)
}

/// Where this process may put a job: the CPUs and memory nodes it may use itself (its affinity,
/// cut to its cpuset, and `Mems_allowed`, the cpuset's memory nodes), which a job it starts
/// inherits; `None` when that is the whole machine (or unreadable).
pub fn own_reach(topo: &Topology) -> Option<Reach> {
    let cpus = numapilot_actuate::sched_getaffinity(0).ok()?.intersection(&topo.online_cpus());
    let nodes = crate::live::select::mems_allowed(std::process::id())?;
    let whole = topo.online_cpus().is_subset(&cpus) && topo.nodes.iter().all(|n| nodes.contains(n.id));
    (!whole && !cpus.is_empty()).then_some(Reach { cpus, nodes })
}

/// [`measure`] of the nodes `reach` allows (all without one): a node outside its memory nodes is
/// left out, and a node's CPUs and idle time count only the CPUs it may use there. A launcher in a
/// container's cpuset (`--cpuset-cpus`) or under `taskset` is told only nodes its job can run on:
/// `numactl --cpunodebind` with a node none of whose CPUs it may use fails (EINVAL).
pub fn measure_within(
    root: &Path,
    topo: &Topology,
    window: Option<Duration>,
    reach: Option<&Reach>,
) -> Result<Vec<NodeFree>, AdviseError> {
    let reader = Reader::new(root);
    let read = || -> Result<_, AdviseError> {
        let stat = reader
            .read_proc_stat()
            .map_err(|e| AdviseError::Read(e.to_string()))?
            .ok_or_else(|| AdviseError::Read(format!("{}: no proc/stat", root.display())))?;
        Ok(stat)
    };
    let first = read()?;
    let second = match window {
        Some(w) => {
            std::thread::sleep(w);
            Some(read()?)
        }
        None => None,
    };
    let nodes = reader.read_nodes().map_err(|e| AdviseError::Read(e.to_string()))?;
    let mut out = Vec::new();
    for n in &topo.nodes {
        if reach.is_some_and(|r| !r.nodes.contains(n.id)) {
            continue;
        }
        let node_cpus = match reach {
            Some(r) => n.cpus.intersection(&r.cpus),
            None => n.cpus.clone(),
        };
        let cpus = node_cpus.len() as u32;
        let mut idle = 0u64;
        let mut total = 0u64;
        for c in node_cpus.iter() {
            let a = first.cpus.iter().find(|l| l.cpu == c).map(|l| l.times);
            let b = second.as_ref().and_then(|s| s.cpus.iter().find(|l| l.cpu == c).map(|l| l.times));
            match (a, b) {
                (Some(a), Some(b)) => {
                    idle += b.idle_total().saturating_sub(a.idle_total());
                    total += b.total().saturating_sub(a.total());
                }
                (Some(a), None) if second.is_none() => {
                    idle += a.idle_total();
                    total += a.total();
                }
                _ => {}
            }
        }
        let free_cpus = if total == 0 { 0.0 } else { (idle as f64 / total as f64 * cpus as f64).min(cpus as f64) };
        // Free memory as the model counts it (MemFree + reclaimable page cache and slab), so the
        // advice and the daemon's own view (status, the launch stage) agree.
        let mem_free_kb =
            nodes.iter().find(|s| s.node == n.id).and_then(|s| s.mem_free_reclaimable_kb()).unwrap_or(n.mem_free_kb);
        out.push(NodeFree { node: n.id, cpus, free_cpus, mem_free_bytes: mem_free_kb.saturating_mul(1024) });
    }
    Ok(out)
}

/// Free capacity of a machine described by a file (no load): every CPU free, MemFree as the file
/// gives it (machine files give the total).
pub fn from_topology(topo: &Topology) -> Vec<NodeFree> {
    topo.nodes
        .iter()
        .map(|n| NodeFree {
            node: n.id,
            cpus: n.cpus.len() as u32,
            free_cpus: n.cpus.len() as f64,
            mem_free_bytes: n.mem_free_kb.saturating_mul(1024),
        })
        .collect()
}
