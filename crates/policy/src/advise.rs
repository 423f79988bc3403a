//! Pre-placement advice: which nodes should a new job of N CPUs and SIZE memory start on?
//!
//! Problem: a job launched with `numactl -N NODES -m NODES` is local from its first page, which no
//! later migration can match. The operator needs the node set, now, before the job exists.
//!
//! Approach (numad's `-w NCPUS[:MB]` semantics, numad.c `update_nodes`: free CPUs of a node are its
//! CPUs' idle time over a short window, capped at its CPU count; free memory is the node's MemFree
//! plus its reclaimable page cache and slab, as the model counts it: numad adds Inactive(file)):
//! find the *smallest* set of nodes whose free CPUs and free memory both cover the request, the
//! nodes of a set being the closest to each other by the distance table. For set size k = 1, 2, ...:
//! for every starting node, the set is the start plus its k-1 nearest nodes (ties: more free
//! capacity first, then lower id); among the sets that fit, the best has the smallest largest
//! distance inside it, then the largest "magnitude" (free CPUs x free MiB, numad's ordering), then
//! the lowest ids. The first k with a fitting set wins.
//!
//! ```text
//!   need 6 CPUs, 3 GiB        node  free CPUs  free MiB      k=1: nothing fits (6 > 4)
//!                               0      3.6       900        k=2: {1,3} fits, max distance 21
//!                               1      4.0      2500             {0,1} fits, max distance 21,
//!                               3      3.9      2100             smaller magnitude -> {1,3}
//! ```
//!
//! Units: CPUs (fractional: idle time), bytes. Limits: a snapshot: another job starting at the same
//! moment sees the same free capacity; memory-only nodes add memory but no CPUs.

use numapilot_topology::{plural, NodeSet, Topology};
use serde::{Deserialize, Serialize};

/// Why there is no advice.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AdviseError {
    /// The request is meaningless.
    #[error("{0}")]
    BadRequest(String),
    /// No node set has enough free CPUs and memory.
    #[error("nothing fits: need {} and {mem_mib} MiB; the whole machine has {free_cpus:.1} free CPUs and {free_mib} MiB free ({per_node})", plural(shown(.cpus), "CPU"))]
    NothingFits {
        /// CPUs asked for.
        cpus: f64,
        /// Memory asked for, MiB.
        mem_mib: u64,
        /// Free CPUs of all nodes.
        free_cpus: f64,
        /// Free memory of all nodes, MiB.
        free_mib: u64,
        /// Per node, `node N: C CPUs, M MiB`.
        per_node: String,
    },
    /// The host or fixture could not be read.
    #[error("{0}")]
    Read(String),
}

/// A CPU count as the user wrote it: `1e300`, not 301 digits.
pub fn shown(x: &f64) -> String {
    if x.abs() >= 1e15 {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// Free capacity of one node now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeFree {
    /// Kernel node id.
    pub node: u32,
    /// CPUs of the node.
    pub cpus: u32,
    /// Idle CPUs (idle + iowait time over the window), 0..=cpus.
    pub free_cpus: f64,
    /// Free memory, bytes (MemFree + Inactive(file) + SReclaimable on a live host:
    /// `NodeSample::mem_free_reclaimable_kb`).
    pub mem_free_bytes: u64,
}

/// The advice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Advice {
    /// The nodes, for `numactl -N NODES -m NODES`.
    pub nodes: NodeSet,
    /// Their free CPUs together.
    pub free_cpus: f64,
    /// Their free memory together, bytes.
    pub mem_free_bytes: u64,
    /// Largest distance between two nodes of the set (10 for one node).
    pub max_distance: u32,
}

/// Whether a client's measurement of the nodes (`nodes_now` of the daemon's advise request) is one
/// a machine could give: each node once, its free CPUs a finite number from 0 to its CPUs. The
/// control socket is root's only, but a malformed request must get an error naming its bad entry,
/// not an answer: unchecked, a NaN or a node listed twice went into the sums, and two nodes'
/// free memory near 2^63 bytes each overflowed the sum (a panic in a debug build; a review of
/// 2026-11-30). Nodes the machine does not have are dropped where the daemon knows its topology
/// (`adaptive::launch`).
pub fn check_nodes_now(free: &[NodeFree]) -> Result<(), AdviseError> {
    let mut seen = NodeSet::new();
    for f in free {
        if seen.contains(f.node) {
            return Err(AdviseError::BadRequest(format!("nodes_now: node {} is listed twice", f.node)));
        }
        seen.insert(f.node);
        if !(f.free_cpus.is_finite() && f.free_cpus >= 0.0 && f.free_cpus <= f64::from(f.cpus)) {
            return Err(AdviseError::BadRequest(format!(
                "nodes_now: node {}: free_cpus {} must be a finite number from 0 to its {}",
                f.node,
                shown(&f.free_cpus),
                plural(f.cpus, "CPU")
            )));
        }
    }
    Ok(())
}

/// Whether a request can be answered at all (checked before the machine is measured, so a bad
/// one costs no measuring window): `cpus` a finite number >= 0, and something asked for.
pub fn check_request(cpus: f64, mem_bytes: u64) -> Result<(), AdviseError> {
    if !(cpus.is_finite() && cpus >= 0.0) {
        return Err(AdviseError::BadRequest(format!("--cpus {}: must be a finite number >= 0", shown(&cpus))));
    }
    if cpus == 0.0 && mem_bytes == 0 {
        return Err(AdviseError::BadRequest("ask for some CPUs (--cpus) or memory (--mem)".into()));
    }
    Ok(())
}

/// The answer when nothing fits and the caller wants one anyway: every node of `free` (those the
/// job can use), as numad's `-w` answers then (numad.c `pick_numa_nodes` adds nodes until the
/// request is met or all are in the list, and always gives pre-placement advice at least one):
/// the job starts unconfined, where the kernel and a running daemon place it afterwards.
pub fn every_node(topo: &Topology, free: &[NodeFree]) -> Advice {
    let dist = |a: u32, b: u32| topo.distance(a, b).unwrap_or(u32::MAX);
    let mut nodes = NodeSet::new();
    free.iter().for_each(|f| nodes.insert(f.node));
    Advice {
        nodes,
        free_cpus: free.iter().map(|f| f.free_cpus).sum(),
        mem_free_bytes: free.iter().map(|f| f.mem_free_bytes).fold(0, u64::saturating_add),
        max_distance: free.iter().flat_map(|a| free.iter().map(|b| dist(a.node, b.node))).max().unwrap_or(10),
    }
}

/// The smallest, closest node set with `cpus` free CPUs and `mem_bytes` free memory.
pub fn advise(topo: &Topology, free: &[NodeFree], cpus: f64, mem_bytes: u64) -> Result<Advice, AdviseError> {
    check_request(cpus, mem_bytes)?;
    let dist = |a: u32, b: u32| topo.distance(a, b).unwrap_or(u32::MAX);
    let magnitude = |f: &NodeFree| f.free_cpus * (f.mem_free_bytes >> 20) as f64;
    let mut best: Option<(u32, f64, Vec<u32>, Advice)> = None;
    for k in 1..=free.len() {
        for start in free {
            let mut others: Vec<&NodeFree> = free.iter().filter(|f| f.node != start.node).collect();
            others.sort_by(|a, b| {
                dist(start.node, a.node)
                    .cmp(&dist(start.node, b.node))
                    .then(magnitude(b).total_cmp(&magnitude(a)))
                    .then(a.node.cmp(&b.node))
            });
            let mut set: Vec<&NodeFree> = vec![start];
            set.extend(others.into_iter().take(k - 1));
            let free_cpus: f64 = set.iter().map(|f| f.free_cpus).sum();
            let mem: u64 = set.iter().fold(0u64, |a, f| a.saturating_add(f.mem_free_bytes));
            // A small tolerance: idle time is measured, 5.99 idle CPUs are 6 free CPUs.
            if free_cpus + 0.05 < cpus || mem < mem_bytes {
                continue;
            }
            let max_d = set.iter().flat_map(|a| set.iter().map(|b| dist(a.node, b.node))).max().unwrap_or(10);
            let mag: f64 = set.iter().map(|f| magnitude(f)).sum();
            let mut ids: Vec<u32> = set.iter().map(|f| f.node).collect();
            ids.sort_unstable();
            let better = match &best {
                None => true,
                Some((d, m, i, _)) => (max_d, -mag, &ids) < (*d, -*m, i),
            };
            if better {
                let mut nodes = NodeSet::new();
                ids.iter().for_each(|&n| nodes.insert(n));
                let advice = Advice { nodes, free_cpus, mem_free_bytes: mem, max_distance: max_d };
                best = Some((max_d, mag, ids, advice));
            }
        }
        if let Some((_, _, _, a)) = best {
            return Ok(a);
        }
    }
    Err(AdviseError::NothingFits {
        cpus,
        mem_mib: mem_bytes >> 20,
        free_cpus: free.iter().map(|f| f.free_cpus).sum(),
        // Saturating, as the fit above is: a client's figures can be anything (review helper-40).
        free_mib: free.iter().map(|f| f.mem_free_bytes).fold(0, u64::saturating_add) >> 20,
        per_node: free
            .iter()
            .map(|f| format!("node {}: {:.1} CPUs, {} MiB", f.node, f.free_cpus, f.mem_free_bytes >> 20))
            .collect::<Vec<_>>()
            .join("; "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A count of one reads in the singular: "need 1 CPU", "to its 1 CPU" (they said "1 CPUs").
    #[test]
    fn one_cpu_is_said_in_the_singular() {
        let topo = Topology::uniform(2, 1, 1 << 20, 20);
        let free =
            |f: f64| (0..2).map(|node| NodeFree { node, cpus: 1, free_cpus: f, mem_free_bytes: 0 }).collect::<Vec<_>>();
        let need = |cpus: f64| advise(&topo, &free(0.0), cpus, 1 << 20).unwrap_err().to_string();
        assert!(need(1.0).starts_with("nothing fits: need 1 CPU and 1 MiB;"), "{}", need(1.0));
        assert!(need(2.0).starts_with("nothing fits: need 2 CPUs and 1 MiB;"), "{}", need(2.0));
        let bad = check_nodes_now(&free(2.0)).unwrap_err().to_string();
        assert!(bad.ends_with("must be a finite number from 0 to its 1 CPU"), "{bad}");
    }
}
