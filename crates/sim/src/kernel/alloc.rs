//! Page allocation: which node a newly touched region lands on, under each memory policy.
//!
//! # Problem
//!
//! Linux places a page when it is first touched, following the memory policy of the range (`mbind`)
//! or of the task (`set_mempolicy`), and falls back to other nodes in distance order when the chosen
//! one is full (`mm/mempolicy.c`, `mm/page_alloc.c`'s zonelists). The simulator needs the same
//! decisions, region by region.
//!
//! # Approach
//!
//! ```text
//!   policy               first choice                          fallback when full
//!   local (default)      toucher's node                        all nodes by distance from it
//!   bind(S)              nearest node of S to the toucher      other nodes of S by distance; none -> fail
//!   preferred(n)         n                                     all nodes by distance from n
//!   preferred-many(S)    nearest node of S to the toucher      S by distance, then all by distance
//!   interleave(S)        S[offset mod |S|]                     next nodes of S, then all by distance
//!   weighted(S, w)       node of slot offset mod sum(w)        as interleave
//! ```
//!
//! "By distance" orders nodes by SLIT distance from the reference node, ties by node id (the
//! kernel builds its zonelists the same way, `build_zonelists`). Interleave uses the region's
//! offset in its buffer, like the kernel's VMA-offset interleave for `mbind` ranges
//! (`interleave_nid`), so it is deterministic and independent of allocation order.
//!
//! # Limits
//!
//! No watermarks, reclaim or swap: a node is full when its regions reach its capacity. A bind set
//! that is full is an allocation failure (the kernel would reclaim or OOM-kill); the caller counts
//! it and leaves the region unallocated.

use crate::kernel::{Kernel, NO_NODE};
use crate::workload::MemPolicySpec;

/// Why an allocation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// Every node the policy allows is full.
    #[error("no free memory on the nodes the policy allows ({policy})")]
    Full {
        /// The policy, printed.
        policy: String,
    },
}

/// Node ids ordered by distance from node `from` (ties by id), `from` first.
pub fn by_distance(k: &Kernel, from: u32) -> Vec<u32> {
    let fi = k.nidx(from);
    let mut ids: Vec<(u32, u32)> =
        k.topo.nodes.iter().enumerate().map(|(i, n)| (k.topo.distances[fi][i], n.id)).collect();
    ids.sort();
    ids.into_iter().map(|(_, id)| id).collect()
}

fn first_free(k: &Kernel, order: impl IntoIterator<Item = u32>) -> Option<u32> {
    order.into_iter().find(|&n| k.topo.node_idx(n).is_some() && k.free_regions(k.nidx(n)) > 0)
}

/// Chooses the node for a region touched by a task on node `toucher` under `policy`; `offset` is
/// the region's index within its buffer (for interleave). Does not allocate.
pub fn choose_node(k: &Kernel, policy: &MemPolicySpec, toucher: u32, offset: u64) -> Result<u32, AllocError> {
    let fail = || AllocError::Full { policy: format!("{policy:?}") };
    let near = by_distance(k, toucher);
    match policy {
        MemPolicySpec::Local => first_free(k, near).ok_or_else(fail),
        MemPolicySpec::Bind { nodes } => {
            first_free(k, near.into_iter().filter(|n| nodes.contains(*n))).ok_or_else(fail)
        }
        MemPolicySpec::Preferred { node } => {
            let order = if k.topo.node_idx(*node).is_some() { by_distance(k, *node) } else { near };
            first_free(k, order).ok_or_else(fail)
        }
        MemPolicySpec::PreferredMany { nodes } => {
            first_free(k, near.iter().copied().filter(|n| nodes.contains(*n)).chain(near.iter().copied()))
                .ok_or_else(fail)
        }
        MemPolicySpec::Interleave { nodes } => {
            let set: Vec<u32> = nodes.iter().filter(|&n| k.topo.node_idx(n).is_some()).collect();
            if set.is_empty() {
                return first_free(k, near).ok_or_else(fail);
            }
            let start = (offset % set.len() as u64) as usize;
            let rotated = (0..set.len()).map(|i| set[(start + i) % set.len()]);
            first_free(k, rotated.chain(near)).ok_or_else(fail)
        }
        MemPolicySpec::WeightedInterleave { nodes, weights } => {
            let set: Vec<(u32, u64)> = nodes
                .iter()
                .zip(weights.iter())
                .filter(|(n, w)| k.topo.node_idx(*n).is_some() && **w > 0)
                .map(|(n, w)| (n, *w as u64))
                .collect();
            let total: u64 = set.iter().map(|(_, w)| w).sum();
            if total == 0 {
                return first_free(k, near).ok_or_else(fail);
            }
            let mut slot = offset % total;
            let mut start = 0;
            for (i, (_, w)) in set.iter().enumerate() {
                if slot < *w {
                    start = i;
                    break;
                }
                slot -= w;
            }
            let rotated = (0..set.len()).map(|i| set[(start + i) % set.len()].0);
            first_free(k, rotated.chain(near)).ok_or_else(fail)
        }
    }
}

/// Allocates region `region` (must be unallocated) for a toucher on node `toucher`; on failure the
/// region stays unallocated and `Kernel::alloc_failures` counts it.
pub fn allocate(
    k: &mut Kernel,
    region: usize,
    policy: &MemPolicySpec,
    toucher: u32,
    offset: u64,
) -> Result<u32, AllocError> {
    debug_assert_eq!(k.regions[region].node, NO_NODE);
    match choose_node(k, policy, toucher, offset) {
        Ok(n) => {
            let placed = k.place(region, n);
            debug_assert!(placed, "choose_node returned a node with room");
            Ok(n)
        }
        Err(e) => {
            k.alloc_failures += 1;
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{Proc, Region};
    use numapilot_topology::{NodeSet, Topology};

    /// A kernel on `preset` with one process owning `n` unallocated regions, node capacity
    /// overridden to `cap` regions when given.
    fn kernel(preset: &str, n: usize, cap: Option<u64>) -> Kernel {
        let t = Topology::preset(preset).unwrap();
        let mut k = Kernel::new(&t);
        if let Some(c) = cap {
            k.node_capacity.iter_mut().for_each(|x| *x = c);
        }
        k.procs.push(Proc {
            cpuset: None,
            pid: 1000,
            comm: "p".into(),
            starttime: 0,
            start_ns: 0,
            first_region: 0,
            regions: vec![(0, n)],
            addrs: vec![0x7f00_0000_0000],
            tasks: vec![],
        });
        k.proc_node.push(vec![0; k.nr_nodes()]);
        k.regions = vec![Region { node: NO_NODE, proc: 0, rspec: 0 }; n];
        k
    }

    fn alloc_all(k: &mut Kernel, policy: &MemPolicySpec, toucher: u32) -> Vec<Result<u32, AllocError>> {
        (0..k.regions.len()).map(|r| allocate(k, r, policy, toucher, r as u64)).collect()
    }

    #[test]
    fn first_touch_lands_on_toucher_then_falls_back_by_distance() {
        // ring-8n64c: node 0's nearest other node is its die sibling (distance 11).
        let mut k = kernel("ring-8n64c", 5, Some(2));
        let got: Vec<u32> = alloc_all(&mut k, &MemPolicySpec::Local, 0).into_iter().map(Result::unwrap).collect();
        let order = by_distance(&k, 0);
        assert_eq!(got, vec![0, 0, order[1], order[1], order[2]]);
        assert_eq!(k.topo.distance(0, order[1]), Some(11));
        assert_eq!(k.node_used.iter().sum::<u64>(), 5);
        assert_eq!(k.proc_node[0].iter().sum::<u64>(), 5);
    }

    #[test]
    fn bind_never_leaves_its_set_and_fails_when_full() {
        let mut k = kernel("autonuma-2s12c-24g", 3, Some(2));
        let bind = MemPolicySpec::Bind { nodes: NodeSet::parse_list("1").unwrap() };
        let got = alloc_all(&mut k, &bind, 0);
        assert_eq!(got[0], Ok(1));
        assert_eq!(got[1], Ok(1));
        assert!(got[2].is_err());
        assert_eq!(k.alloc_failures, 1);
        assert_eq!(k.regions[2].node, NO_NODE);
        assert_eq!(k.node_used, vec![0, 2]);
    }

    #[test]
    fn interleave_splits_evenly_and_weighted_follows_weights() {
        let mut k = kernel("ring-8n64c", 80, None);
        let all = k.topo.node_ids();
        alloc_all(&mut k, &MemPolicySpec::Interleave { nodes: all }, 3);
        assert!(k.node_used.iter().all(|&u| u == 10), "{:?}", k.node_used);

        let mut k = kernel("autonuma-2s12c-24g", 40, None);
        let w = MemPolicySpec::WeightedInterleave { nodes: k.topo.node_ids(), weights: vec![3, 1] };
        alloc_all(&mut k, &w, 1);
        assert_eq!(k.node_used, vec![30, 10]);
    }

    #[test]
    fn preferred_and_preferred_many() {
        let mut k = kernel("autonuma-2s12c-24g", 3, Some(2));
        let got = alloc_all(&mut k, &MemPolicySpec::Preferred { node: 1 }, 0);
        assert_eq!(got, vec![Ok(1), Ok(1), Ok(0)]);
        let mut k = kernel("ring-8n64c", 3, Some(1));
        let pm = MemPolicySpec::PreferredMany { nodes: NodeSet::parse_list("4,6").unwrap() };
        let got: Vec<u32> = alloc_all(&mut k, &pm, 5).into_iter().map(Result::unwrap).collect();
        // Nearest of {4, 6} to node 5 first, then the other, then anything by distance from 5.
        assert!(got[..2].contains(&4) && got[..2].contains(&6), "{got:?}");
        assert!(got[2] != 4 && got[2] != 6);
    }
}
