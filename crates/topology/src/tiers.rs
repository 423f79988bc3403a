//! Distance tiers: turning the firmware's distance matrix into four classes a policy can reason with.
//!
//! # Problem
//!
//! The kernel hands us the ACPI SLIT (or the device-tree distance map) as a matrix of small integers:
//! 10 is "local", and every other entry is the relative cost of reaching that node's memory, scaled
//! so that 10 means 1.0x. The numbers are firmware conventions rather than measurements, and they
//! differ between vendors and generations:
//!
//! ```text
//!   2-socket Xeon                    10 21
//!   2-socket EPYC                    10 32
//!   4 nodes, 2 sockets x 2 dies      10 11 20          (NUMA article seed)
//!   4 sockets in a ring, 2 dies each 10 11 21 32
//!   Opteron 63xx 4P                  10 16 22          (16 = one HyperTransport hop, 22 = two)
//!   NumaConnect, 6 servers           10 16 22 160 200  (160/200 = another server, 1 or 2 ring hops)
//! ```
//!
//! A policy does not want to know these conventions. It wants to ask "is this node in my socket, one
//! interconnect hop away, or far?" and get the same answer on all of them.
//!
//! # Approach
//!
//! ```text
//!   from == to                                                     -> Local
//!   d <= 12, or (same package and d < 20)                          -> SameSocket
//!   otherwise, with m = the smallest such cross-socket distance:
//!        d < 1.25 * m                                              -> OneHop
//!        d >= 1.25 * m                                             -> Far
//!
//!   NumaConnect:  10 ─ local    16 ─ same package (die pair)   22 ─ one hop (m = 22)
//!                 160, 200 >= 27.5 ─ far
//! ```
//!
//! 1. **Same socket** uses two kinds of evidence. The CPU topology says which nodes share a physical
//!    package (for a CPU-less node: the package of the CPU nodes nearest to it, when they are nearer
//!    than [`REMOTE_DISTANCE`], so CXL memory attached to socket 0 belongs to socket 0). Sharing a
//!    package counts only when the distance is below [`REMOTE_DISTANCE`]: a virtual machine may put
//!    two nodes 21 apart in one virtual socket, and the distance is what the guest kernel acts on.
//!    Independently, a distance of at most [`SAME_SOCKET_MAX_DISTANCE`] is same-socket whatever the
//!    packages say, because firmware reserves 11-12 for sub-NUMA clusters of one package.
//! 2. **One hop vs far** clusters the remaining (cross-socket) distances. The smallest of them, `m`,
//!    is the cost of one interconnect hop on this machine; anything within [`ONE_HOP_RATIO`] of it
//!    is the same class (firmware writes 20 and 21 for equivalent links), anything beyond is at
//!    least a second hop or a slower fabric. Using the machine's own smallest remote distance
//!    instead of a fixed number is what lets 21 (Xeon), 32 (EPYC) and 22 (Opteron) all be "one hop".
//!
//! # Units and terms
//!
//! Distances are SLIT units (10 = local). Tiers are ordered: `Local < SameSocket < OneHop < Far`.
//! The matrix is over dense node indexes, like [`Topology::distances`].
//!
//! # Limitations
//!
//! - With an asymmetric matrix, `tier(a, b)` and `tier(b, a)` may differ; each follows its own
//!   distance.
//! - The classes are relative to the machine: on a machine whose only remote distance is 160, 160
//!   is "one hop". That is the right answer for placement (it is the nearest remote memory there is)
//!   but means tiers are not comparable across machines; compare distances for that.
//! - Two nodes in different packages at distance 12 or less are called same-socket. Firmware does
//!   not write such values for separate sockets on any machine we know of.

use serde::Serialize;

use crate::{IdSet, NodeSet, Tier, Topology};

/// The SLIT value for a node's own memory (ACPI 2.0; the kernel's `LOCAL_DISTANCE`,
/// include/linux/topology.h).
pub const LOCAL_DISTANCE: u32 = 10;

/// The kernel's `REMOTE_DISTANCE` (include/linux/topology.h): the distance it assumes between two
/// nodes when firmware gives none, i.e. "another socket". Used here as the bound below which a
/// shared package means same socket, and below which a CPU-less node belongs to its nearest CPU
/// node's package. Default 20 SLIT units; prevents calling a node 21 away "same socket" only because
/// a virtual machine declared one virtual socket.
pub const REMOTE_DISTANCE: u32 = 20;

/// Largest distance that means "same package" on its own, without CPU topology evidence: 12 SLIT
/// units. Source: firmware writes 11 or 12 between the sub-NUMA clusters of one package (Intel SNC,
/// AMD NPS2/NPS4) and between the dies of one package (the NUMA article seed's 10/11/20 box).
/// Prevents splitting one socket's sub-nodes into "one hop" when a guest or a machine file gives
/// each node its own package.
pub const SAME_SOCKET_MAX_DISTANCE: u32 = 12;

/// A cross-socket distance `d` is in the one-hop class when `d * den < m * num`, `m` being the
/// smallest cross-socket distance of the machine: the ratio 5/4 = 1.25. Source: arithmetic on the
/// SLITs above; equivalent links differ by at most 5% (20 vs 21), a second hop or a slower fabric
/// costs at least 37% more (16 -> 22, 21 -> 32, 22 -> 160). Prevents treating 20/21 as different
/// classes and 21/32 as the same one.
pub const ONE_HOP_RATIO: (u32, u32) = (5, 4);

/// The tier of every ordered pair of nodes, computed once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TierMatrix {
    /// Kernel node ids, in dense-index order (same as `Topology::nodes`).
    pub nodes: Vec<u32>,
    /// `tiers[i][j]` is the tier from `nodes[i]` to `nodes[j]`.
    pub tiers: Vec<Vec<Tier>>,
}

impl TierMatrix {
    /// Tier between two nodes by kernel id; `None` when either is not a node.
    pub fn get(&self, from: u32, to: u32) -> Option<Tier> {
        let i = self.nodes.binary_search(&from).ok()?;
        let j = self.nodes.binary_search(&to).ok()?;
        Some(self.tiers[i][j])
    }

    /// Nodes in tier `tier` as seen from node `from` (empty when `from` is not a node).
    pub fn nodes_at(&self, from: u32, tier: Tier) -> NodeSet {
        let Ok(i) = self.nodes.binary_search(&from) else { return NodeSet::new() };
        self.nodes.iter().zip(&self.tiers[i]).filter(|(_, t)| **t == tier).map(|(id, _)| *id).collect()
    }
}

impl Tier {
    /// All tiers, nearest first.
    pub const ALL: [Tier; 4] = [Tier::Local, Tier::SameSocket, Tier::OneHop, Tier::Far];

    /// Kebab-case name, as in JSON: `local`, `same-socket`, `one-hop`, `far`.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Local => "local",
            Tier::SameSocket => "same-socket",
            Tier::OneHop => "one-hop",
            Tier::Far => "far",
        }
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Topology {
    /// Packages each node belongs to, by dense index: the packages of its online CPUs; for a node
    /// without CPUs, the packages of the CPU nodes nearest to it when those are nearer than
    /// [`REMOTE_DISTANCE`], else none.
    pub fn node_packages(&self) -> Vec<IdSet> {
        let own: Vec<IdSet> =
            self.nodes.iter().map(|n| n.cpus.iter().filter_map(|c| self.cpu(c)).map(|c| c.package).collect()).collect();
        let n = self.nodes.len();
        (0..n)
            .map(|i| {
                if !own[i].is_empty() {
                    return own[i].clone();
                }
                // Distance from each CPU node j to this node's memory.
                let nearest = (0..n).filter(|&j| !own[j].is_empty()).map(|j| self.distances[j][i]).min();
                match nearest {
                    Some(d) if d < REMOTE_DISTANCE => (0..n)
                        .filter(|&j| !own[j].is_empty() && self.distances[j][i] == d)
                        .fold(IdSet::new(), |acc, j| acc.union(&own[j])),
                    _ => IdSet::new(),
                }
            })
            .collect()
    }

    /// The tier of every pair of nodes. Cost O(nodes² + CPUs); compute once and keep it when
    /// asking many times.
    pub fn tiers(&self) -> TierMatrix {
        let n = self.nodes.len();
        let pk = self.node_packages();
        let d = &self.distances;
        let same = |i: usize, j: usize| {
            d[i][j] <= SAME_SOCKET_MAX_DISTANCE || (d[i][j] < REMOTE_DISTANCE && !pk[i].intersection(&pk[j]).is_empty())
        };
        let one_hop = (0..n)
            .flat_map(|i| (0..n).map(move |j| (i, j)))
            .filter(|&(i, j)| i != j && !same(i, j))
            .map(|(i, j)| d[i][j])
            .min();
        let (num, den) = ONE_HOP_RATIO;
        let tiers = (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| {
                        if i == j {
                            Tier::Local
                        } else if same(i, j) {
                            Tier::SameSocket
                        } else {
                            let m = one_hop.unwrap_or(d[i][j]);
                            if u64::from(d[i][j]) * u64::from(den) < u64::from(m) * u64::from(num) {
                                Tier::OneHop
                            } else {
                                Tier::Far
                            }
                        }
                    })
                    .collect()
            })
            .collect();
        TierMatrix { nodes: self.nodes.iter().map(|n| n.id).collect(), tiers }
    }

    /// The tier from node `from` to node `to` (kernel ids); `None` when either is not a node.
    /// Cost O(nodes² + CPUs) per call: use [`Topology::tiers`] for many questions.
    pub fn try_tier(&self, from: u32, to: u32) -> Option<Tier> {
        self.node_idx(from)?;
        self.node_idx(to)?;
        self.tiers().get(from, to)
    }

    /// The tier from node `from` to node `to` (kernel ids).
    ///
    /// # Panics
    ///
    /// When either id is not a node of this machine (a caller bug: node ids come from the topology).
    /// Use [`Topology::try_tier`] for ids from outside.
    pub fn tier(&self, from: u32, to: u32) -> Tier {
        match self.try_tier(from, to) {
            Some(t) => t,
            None => panic!("tier({from}, {to}): not a node of this machine (nodes: {})", self.node_ids()),
        }
    }
}
