//! The performance model of the machine: what a memory access costs, where, and how much traffic
//! each part of the machine can carry.
//!
//! # Problem
//!
//! The topology says which CPUs and how much memory each node has and how far nodes are apart (SLIT
//! distances, tiers). To simulate, we also need what those mean in time: latency of a cache-line miss
//! per distance tier, bandwidth of each node's memory controller, bandwidth of the links between
//! nodes (with contention when several flows cross the same link), how much of a core two SMT
//! siblings share, how much the last-level cache absorbs, and what moving a page costs.
//!
//! # Approach
//!
//! ```text
//!   node 0                         node 1              one resource per memory controller (GB/s)
//!   [cores]--LLC--[MC0]===link===[MC1]--LLC--[cores]   one resource per directed link (GB/s)
//!                   ^   0->1, 1->0  ^                  latency per tier (ns), x distance for Far
//!
//!   links: the graph whose edges are node pairs not "shortcut" by an intermediate node
//!          (d(a,k)-10 + d(k,b)-10 <= d(a,b)-10 means a->b traffic goes through k);
//!          a flow from memory node m to CPU node c charges every link on the shortest path.
//! ```
//!
//! [`MachineParams`] holds the figures; [`MachineModel`] derives, for one topology, the latency of
//! every (CPU node, memory node) pair, the capacity of every resource (controllers, then directed
//! links) and, when first asked, the routes (lists of resources) from a memory node. Parameters
//! come from the machine file's optional `[sim]` table (keys = the field names below; unknown keys
//! are refused), falling back to the defaults.
//!
//! # Units
//!
//! Latencies in ns, bandwidths in GB/s (= bytes per ns), sizes in MiB, times in µs where named.
//!
//! # Defaults and sources
//!
//! The defaults describe the 2012 two-socket Xeon (Westmere-EP class, DDR3-1333, QPI 5.86 GT/s) of
//! the autonuma-benchmark results, the machine the model is calibrated on (see the crate essay):
//!
//! | parameter | default | source / reasoning |
//! |---|---|---|
//! | `local_latency_ns` | 90 | idle local DRAM load-to-use on Nehalem/Westmere-EP, 65-100 ns in published measurements |
//! | `same_socket_factor` | 1.15 | other die of the same package (SNC/NPS, Magny-Cours die pair): +10-20% |
//! | `one_hop_factor` | 1.5 | seed documents: cross-node access "30%+ higher"; Westmere-EP remote/local ~1.5-1.7 |
//! | `far_factor_per_hop` | 1.0 | Far latency = one-hop latency x (distance / one-hop distance) x this |
//! | `node_bandwidth_gbs` | 16 | sustained per-socket bandwidth of 3 channels DDR3-1333 (32 GB/s peak, STREAM ~16-20); numa02's published 800 GiB in 53 s = 16 GB/s |
//! | `same_socket_link_gbs` | 40 | on-package fabric between dies |
//! | `one_hop_link_gbs` | 6.7 | QPI 5.86 GT/s = 11.7 GB/s raw per direction, ~57% payload after headers and snoop traffic (fitted) |
//! | `far_link_gbs` | 2.5 | NumaConnect-class fabric between servers (fitted to nothing: a plausible 2-3 GB/s per direction) |
//! | `stream_mlp` | 2.3 | cache lines in flight per thread for store streams (fitted: 6 cores, 2 threads each, ask ~75% of a controller) |
//! | `random_mlp` | 1.0 | dependent loads: one miss at a time |
//! | `smt_gain_memory` | 1.22 | two siblings streaming get 1.22x one thread: more misses in flight, shared fill buffers (fitted: numa02_SMT vs numa02 hard bind, 43.2 / 35.3 s) |
//! | `smt_gain_compute` | 1.25 | two siblings computing get ~1.25x one thread (typical Hyper-Threading gain) |
//! | `llc_mib` | 12 | Westmere-EP L3 per socket |
//! | `llc_latency_ns` | 15 | L3 hit latency |
//! | `migrate_gbs` | 2.0 | kernel page copy in migrate_pages/move_pages, 1-4 GB/s per migrating context |
//! | `migrate_fixed_us` | 30 | per 2 MiB region: unmap, TLB shootdown, remap |
//!
//! # Limits
//!
//! Bandwidth is one number per controller and per link direction (no read/write asymmetry, no
//! bank conflicts); latency does not grow with load below saturation (contention is modelled as
//! throttling at saturation, see `engine`); the LLC is a capacity filter, not a cache simulation.
//!
//! Finding the links tries, for each pair, only the nodes near enough to the source to shortcut
//! it: on hierarchies and rings one or two, not every node. The routes from a memory node are
//! found when a run first asks for one (the nodes its memory is on), each link tried only while it
//! can still shorten a path. So building the model grows with the square of the nodes (the
//! latency and link tables), not the cube. A matrix where many nodes almost shortcut many pairs
//! would still try most of them.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::OnceLock;

use numapilot_topology::{Tier, Topology};
use serde::{Deserialize, Serialize};

use crate::SimError;

/// Performance parameters of a machine. See the module table for defaults and sources.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MachineParams {
    /// Idle latency of a local DRAM access, ns.
    pub local_latency_ns: f64,
    /// Latency multiplier for another node of the same package.
    pub same_socket_factor: f64,
    /// Latency multiplier for one interconnect hop.
    pub one_hop_factor: f64,
    /// Extra multiplier on the distance-scaled latency of Far nodes.
    pub far_factor_per_hop: f64,
    /// Sustained bandwidth of one node's memory controller(s), GB/s.
    pub node_bandwidth_gbs: f64,
    /// Bandwidth per direction of a link between nodes of one package, GB/s.
    pub same_socket_link_gbs: f64,
    /// Bandwidth per direction of a one-hop socket link, GB/s.
    pub one_hop_link_gbs: f64,
    /// Bandwidth per direction of a Far link (second fabric), GB/s.
    pub far_link_gbs: f64,
    /// Cache lines in flight per thread for streaming accesses.
    pub stream_mlp: f64,
    /// Cache lines in flight per thread for random (dependent) accesses.
    pub random_mlp: f64,
    /// Memory throughput of a core with both SMT siblings busy, relative to one thread.
    pub smt_gain_memory: f64,
    /// Compute throughput of a core with both SMT siblings busy, relative to one thread.
    pub smt_gain_compute: f64,
    /// Last-level cache per LLC domain, MiB.
    pub llc_mib: f64,
    /// LLC hit latency, ns.
    pub llc_latency_ns: f64,
    /// Page-copy throughput of one migration, GB/s.
    pub migrate_gbs: f64,
    /// Fixed cost of migrating one 2 MiB region (unmap, TLB shootdown, remap), µs.
    pub migrate_fixed_us: f64,
}

impl Default for MachineParams {
    fn default() -> Self {
        Self {
            local_latency_ns: 90.0,
            same_socket_factor: 1.15,
            one_hop_factor: 1.5,
            far_factor_per_hop: 1.0,
            node_bandwidth_gbs: 16.0,
            same_socket_link_gbs: 40.0,
            one_hop_link_gbs: 6.7,
            far_link_gbs: 2.5,
            stream_mlp: 2.3,
            random_mlp: 1.0,
            smt_gain_memory: 1.22,
            smt_gain_compute: 1.25,
            llc_mib: 12.0,
            llc_latency_ns: 15.0,
            migrate_gbs: 2.0,
            migrate_fixed_us: 30.0,
        }
    }
}

impl MachineParams {
    /// Parameters from a machine file's `[sim]` table (missing keys take the defaults); `file`
    /// names the source in errors. Unknown keys and non-positive values are refused.
    pub fn from_table(table: &toml::Table, file: &str) -> Result<Self, SimError> {
        let p: MachineParams = toml::Value::Table(table.clone())
            .try_into()
            .map_err(|e| SimError::Machine(format!("{file}: [sim]: {}", e.to_string().trim_end())))?;
        p.validate().map_err(|e| SimError::Machine(format!("{file}: [sim]: {e}")))?;
        Ok(p)
    }

    /// Checks that every figure is finite and positive (factors >= 1 where they are slow-downs).
    pub fn validate(&self) -> Result<(), String> {
        let fields: [(&str, f64); 16] = [
            ("local_latency_ns", self.local_latency_ns),
            ("same_socket_factor", self.same_socket_factor),
            ("one_hop_factor", self.one_hop_factor),
            ("far_factor_per_hop", self.far_factor_per_hop),
            ("node_bandwidth_gbs", self.node_bandwidth_gbs),
            ("same_socket_link_gbs", self.same_socket_link_gbs),
            ("one_hop_link_gbs", self.one_hop_link_gbs),
            ("far_link_gbs", self.far_link_gbs),
            ("stream_mlp", self.stream_mlp),
            ("random_mlp", self.random_mlp),
            ("smt_gain_memory", self.smt_gain_memory),
            ("smt_gain_compute", self.smt_gain_compute),
            ("llc_mib", self.llc_mib),
            ("llc_latency_ns", self.llc_latency_ns),
            ("migrate_gbs", self.migrate_gbs),
            ("migrate_fixed_us", self.migrate_fixed_us),
        ];
        for (name, v) in fields {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("{name} = {v}: must be finite and > 0"));
            }
        }
        if self.smt_gain_memory > 2.0 || self.smt_gain_compute > 2.0 {
            return Err("smt gains must be <= 2 (two siblings cannot beat two cores)".into());
        }
        Ok(())
    }
}

/// The performance model derived for one topology.
#[derive(Debug, Clone)]
pub struct MachineModel {
    /// The parameters.
    pub params: MachineParams,
    /// Number of nodes.
    pub nodes: usize,
    /// `latency[c][m]`: idle latency for a CPU on dense node c reading memory of dense node m, ns.
    pub latency: Vec<Vec<f64>>,
    /// Capacity of each resource, bytes/ns: controllers `0..nodes`, then directed links.
    pub capacity: Vec<f64>,
    /// Directed links `(from, to)` as dense node indexes, resource `nodes + i`.
    pub links: Vec<(usize, usize)>,
    /// The links out of node `a`: `out[out_start[a]..out_start[a + 1]]`, cheapest first.
    out_start: Vec<usize>,
    out: Vec<Out>,
    /// The routes from each memory node, found when first asked ([`MachineModel::route`]).
    routes: Vec<OnceLock<Routes>>,
}

/// A link out of a node: where it goes, its index in [`MachineModel::links`], the distance.
#[derive(Debug, Clone, Copy)]
struct Out {
    to: u32,
    link: u32,
    distance: u32,
}

/// The routes from one memory node m: to CPU node c, `resources[start[c]..start[c + 1]]` (the
/// controller of m first, then the links of the path).
#[derive(Debug, Clone)]
struct Routes {
    start: Vec<u32>,
    resources: Vec<u32>,
}

/// Hop cost of a distance (d - 10, at least 0).
fn hop_cost(d: u32) -> f64 {
    (d as f64 - 10.0).max(0.0)
}

impl MachineModel {
    /// Derives the model of `topo` with `params`.
    #[allow(clippy::needless_range_loop)] // dense node matrices read clearest with indexes
    pub fn new(topo: &Topology, params: MachineParams) -> Self {
        let n = topo.nodes.len();
        // Once: each `Topology::tier` call builds the whole matrix, and asking it per pair made
        // this O(nodes^4), a 256-node machine file over a minute (review helper-53).
        let tiers = topo.tiers().tiers;
        let tier = |a: usize, b: usize| tiers[a][b];
        let d = |a: usize, b: usize| topo.distances[a][b] as f64;
        // One-hop distance: the smallest distance classified OneHop, for scaling Far latencies.
        let mut one_hop_d = f64::INFINITY;
        for a in 0..n {
            for b in 0..n {
                if tier(a, b) == Tier::OneHop {
                    one_hop_d = one_hop_d.min(d(a, b));
                }
            }
        }
        let tier_latency = |a: usize, b: usize| -> f64 {
            let l = params.local_latency_ns;
            match tier(a, b) {
                Tier::Local => l,
                Tier::SameSocket => l * params.same_socket_factor,
                Tier::OneHop => l * params.one_hop_factor,
                Tier::Far => {
                    let base = if one_hop_d.is_finite() { one_hop_d } else { 20.0 };
                    l * params.one_hop_factor * (d(a, b) / base).max(1.0) * params.far_factor_per_hop
                }
            }
        };
        let latency = (0..n).map(|c| (0..n).map(|m| tier_latency(c, m)).collect()).collect();
        // Link graph: a -> b is a direct link unless some k gives a path no longer than the
        // direct distance (in hop costs d - 10). Only the k cheap enough from a can: with the other
        // nodes sorted by cost from a, the search stops at the first k whose cost plus the
        // cheapest way into b is already too much. Trying every k for every pair was cubic
        // (scaling review: 1,024 nodes, a billion tries); on hierarchies and rings a pair now
        // tries one or two.
        let cost = |a: usize, b: usize| hop_cost(topo.distances[a][b]);
        let min_in: Vec<f64> =
            (0..n).map(|b| (0..n).filter(|&k| k != b).map(|k| cost(k, b)).fold(f64::INFINITY, f64::min)).collect();
        let mut links = Vec::new();
        let mut out_start = Vec::with_capacity(n + 1);
        let mut out = Vec::new();
        let mut by_cost: Vec<usize> = Vec::with_capacity(n);
        let mut link_to: Vec<Option<u32>> = vec![None; n];
        for a in 0..n {
            by_cost.clear();
            by_cost.extend((0..n).filter(|&k| k != a));
            by_cost.sort_by(|&x, &y| cost(a, x).total_cmp(&cost(a, y)));
            for b in 0..n {
                link_to[b] = None;
                if a == b {
                    continue;
                }
                let mut shortcut = false;
                for &k in &by_cost {
                    // This k and the ones after it cost at least cost(a, k) + min_in[b].
                    if cost(a, k) + min_in[b] > cost(a, b) {
                        break;
                    }
                    crate::work::count("model.link_candidates", 1);
                    if k != b && cost(a, k) + cost(k, b) <= cost(a, b) {
                        shortcut = true;
                        break;
                    }
                }
                if !shortcut {
                    link_to[b] = Some(links.len() as u32);
                    links.push((a, b));
                }
            }
            out_start.push(out.len());
            out.extend(
                by_cost
                    .iter()
                    .filter_map(|&b| link_to[b].map(|link| Out { to: b as u32, link, distance: topo.distances[a][b] })),
            );
        }
        out_start.push(out.len());
        let mut capacity: Vec<f64> = vec![params.node_bandwidth_gbs; n];
        for &(a, b) in &links {
            capacity.push(match tier(a, b) {
                Tier::Local | Tier::SameSocket => params.same_socket_link_gbs,
                Tier::OneHop => params.one_hop_link_gbs,
                Tier::Far => params.far_link_gbs,
            });
        }
        let routes = (0..n).map(|_| OnceLock::new()).collect();
        Self { params, nodes: n, latency, capacity, links, out_start, out, routes }
    }

    /// Resources used by data from memory node `m` to CPU node `c` (dense indexes): the
    /// controller of m, then the links of the shortest path (ties to the lower node index). The
    /// routes from m are found when first asked: a run asks for those of the nodes its memory is
    /// on, and finding all of them at construction was cubic in the nodes.
    pub fn route(&self, m: usize, c: usize) -> &[u32] {
        let r = self.routes[m].get_or_init(|| self.routes_from(m));
        &r.resources[r.start[c] as usize..r.start[c + 1] as usize]
    }

    /// Shortest paths from `m` over the links: Dijkstra, the closest node not yet done first (ties
    /// to the lower index), a node's distance lowered only by a strictly shorter path. A link out
    /// of the node done is not tried once it cannot beat the farthest node not done yet (they
    /// come cheapest first): after the first few nodes that is most of them.
    fn routes_from(&self, m: usize) -> Routes {
        crate::work::count("model.route_trees", 1);
        let n = self.nodes;
        let mut dist = vec![f64::INFINITY; n];
        let mut prev = vec![usize::MAX; n];
        let mut via = vec![0u32; n];
        let mut done = vec![false; n];
        // Entries go stale when a node's distance drops or it is done; they are skipped then.
        // Distances are >= 0, so their bits order as they do.
        let mut closest = BinaryHeap::from([Reverse((0u64, m))]);
        let mut farthest: BinaryHeap<(u64, usize)> = BinaryHeap::new();
        let mut unreached = n.saturating_sub(1);
        dist[m] = 0.0;
        while let Some(Reverse((bits, u))) = closest.pop() {
            if done[u] || dist[u].to_bits() != bits {
                continue;
            }
            done[u] = true;
            let bound = if unreached > 0 {
                f64::INFINITY
            } else {
                loop {
                    match farthest.peek() {
                        Some(&(b, v)) if done[v] || dist[v].to_bits() != b => {
                            farthest.pop();
                        }
                        Some(&(b, _)) => break f64::from_bits(b),
                        None => break f64::NEG_INFINITY,
                    }
                }
            };
            for o in &self.out[self.out_start[u]..self.out_start[u + 1]] {
                let alt = dist[u] + hop_cost(o.distance);
                if alt >= bound {
                    break;
                }
                crate::work::count("model.relaxations", 1);
                let v = o.to as usize;
                if alt < dist[v] {
                    if dist[v] == f64::INFINITY {
                        unreached -= 1;
                    }
                    dist[v] = alt;
                    prev[v] = u;
                    via[v] = o.link;
                    closest.push(Reverse((alt.to_bits(), v)));
                    farthest.push((alt.to_bits(), v));
                }
            }
        }
        let mut start = Vec::with_capacity(n + 1);
        let mut resources = Vec::new();
        let mut path = Vec::new();
        for c in 0..n {
            start.push(resources.len() as u32);
            resources.push(m as u32);
            path.clear();
            let mut v = c;
            while v != m && prev[v] != usize::MAX {
                path.push((n + via[v] as usize) as u32);
                v = prev[v];
            }
            resources.extend(path.iter().rev());
        }
        start.push(resources.len() as u32);
        Routes { start, resources }
    }

    /// Number of resources (controllers + directed links).
    pub fn resources(&self) -> usize {
        self.capacity.len()
    }

    /// Time to migrate one region of `bytes`, ns (copy at `migrate_gbs` + fixed cost).
    pub fn migrate_ns(&self, bytes: u64) -> u64 {
        (bytes as f64 / self.params.migrate_gbs + self.params.migrate_fixed_us * 1000.0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_nodes_have_one_link_each_way_and_remote_costs_more() {
        let t = Topology::preset("autonuma-2s12c-24g").unwrap();
        let m = MachineModel::new(&t, MachineParams::default());
        assert_eq!(m.links, vec![(0, 1), (1, 0)]);
        assert_eq!(m.route(0, 0), &[0]);
        assert_eq!(m.route(0, 1), &[0, 2]);
        assert_eq!(m.route(1, 0), &[1, 3]);
        assert!(m.latency[0][1] > m.latency[0][0] * 1.3);
    }

    #[test]
    fn ring_routes_two_hops_through_a_neighbour() {
        let t = Topology::preset("ring-8n64c").unwrap();
        let m = MachineModel::new(&t, MachineParams::default());
        let n = m.nodes;
        // Every pair has a route ending at its CPU node, and the farthest pairs use more links.
        let mut longest = 0;
        for a in 0..n {
            for b in 0..n {
                let r = m.route(a, b);
                assert_eq!(r[0] as usize, a);
                longest = longest.max(r.len());
            }
        }
        assert!(longest >= 3, "some pair crosses two links");
        assert!(m.links.len() < n * (n - 1), "not fully connected");
    }

    #[test]
    fn presets_with_sim_tables_load_them() {
        let m = crate::Machine::preset("epyc-2s256c").unwrap();
        assert_eq!(m.params.node_bandwidth_gbs, 450.0);
        assert_eq!(m.params.smt_gain_compute, MachineParams::default().smt_gain_compute);
        let m = crate::Machine::preset("numaconnect-288c").unwrap();
        let model = MachineModel::new(&m.topo, m.params.clone());
        // Another server is around a microsecond away.
        let far = model.latency[0].iter().cloned().fold(0.0, f64::max);
        assert!(far > 900.0 && far < 1500.0, "{far}");
        assert_eq!(crate::Machine::preset("autonuma-2s12c-24g").unwrap().params, MachineParams::default());
    }

    #[test]
    fn sim_table_unknown_key_is_refused() {
        let t: toml::Table = toml::from_str("node_bandwidth_gbs = 20.0\nbogus = 1").unwrap();
        let e = MachineParams::from_table(&t, "m.toml").unwrap_err().to_string();
        assert!(e.contains("bogus") && e.contains("m.toml"), "{e}");
        let t: toml::Table = toml::from_str("node_bandwidth_gbs = -1.0").unwrap();
        assert!(MachineParams::from_table(&t, "m.toml").unwrap_err().to_string().contains("node_bandwidth_gbs"));
        let t: toml::Table = toml::from_str("node_bandwidth_gbs = 20.0").unwrap();
        assert_eq!(MachineParams::from_table(&t, "m").unwrap().node_bandwidth_gbs, 20.0);
    }

    /// `n` nodes of one CPU with distances `d(a, b)`, two nodes a package (as
    /// `scripts/machine-file.sh` writes them).
    fn shaped(n: u32, d: impl Fn(u32, u32) -> u32) -> Topology {
        let mut t = Topology::uniform(n, 1, 1 << 20, 21);
        for c in &mut t.cpus {
            c.package = c.node / 2;
        }
        t.distances = (0..n).map(|a| (0..n).map(|b| if a == b { 10 } else { d(a, b) }).collect()).collect();
        t
    }

    /// Packages of two nodes: 11 inside one, 21 between (every pair across packages a link).
    fn paired(n: u32) -> Topology {
        shaped(n, |a, b| if a / 2 == b / 2 { 11 } else { 21 })
    }

    /// A ring: 10 more per hop (only neighbours linked, routes of up to n/2 links).
    fn ring(n: u32) -> Topology {
        shaped(n, |a, b| {
            let h = a.abs_diff(b);
            10 + 10 * h.min(n - h)
        })
    }

    /// The model's links and the route of every (memory node, CPU node) pair, found as the model
    /// first found them: every intermediate node tried for every pair, Dijkstra from every node
    /// on the dense matrix. What the model finds must equal it.
    #[allow(clippy::needless_range_loop)] // as the model had it
    fn reference(topo: &Topology) -> (Vec<(usize, usize)>, Vec<Vec<u32>>) {
        let n = topo.nodes.len();
        let cost = |a: usize, b: usize| (topo.distances[a][b] as f64 - 10.0).max(0.0);
        let mut links = Vec::new();
        let mut link_id = vec![vec![None; n]; n];
        for a in 0..n {
            for b in 0..n {
                if a != b && !(0..n).any(|k| k != a && k != b && cost(a, k) + cost(k, b) <= cost(a, b)) {
                    link_id[a][b] = Some(links.len());
                    links.push((a, b));
                }
            }
        }
        let mut route = vec![Vec::new(); n * n];
        for m in 0..n {
            let mut dist = vec![f64::INFINITY; n];
            let mut prev = vec![usize::MAX; n];
            let mut done = vec![false; n];
            dist[m] = 0.0;
            for _ in 0..n {
                let Some(u) = (0..n).filter(|&i| !done[i] && dist[i].is_finite()).min_by(|&x, &y| {
                    dist[x].partial_cmp(&dist[y]).unwrap_or(std::cmp::Ordering::Equal).then(x.cmp(&y))
                }) else {
                    break;
                };
                done[u] = true;
                for v in 0..n {
                    if link_id[u][v].is_some() && dist[u] + cost(u, v) < dist[v] {
                        dist[v] = dist[u] + cost(u, v);
                        prev[v] = u;
                    }
                }
            }
            for c in 0..n {
                let mut path = Vec::new();
                let mut v = c;
                while v != m && prev[v] != usize::MAX {
                    path.push((n + link_id[prev[v]][v].unwrap()) as u32);
                    v = prev[v];
                }
                path.push(m as u32);
                path.reverse();
                route[m * n + c] = path;
            }
        }
        (links, route)
    }

    fn assert_as_reference(topo: &Topology, what: &str) {
        let m = MachineModel::new(topo, MachineParams::default());
        let (links, route) = reference(topo);
        assert_eq!(m.links, links, "{what}: links");
        for a in 0..m.nodes {
            for b in 0..m.nodes {
                assert_eq!(m.route(a, b), &route[a * m.nodes + b][..], "{what}: route {a} -> {b}");
            }
        }
    }

    #[test]
    fn links_and_routes_are_the_reference_ones() {
        for name in numapilot_topology::presets::names() {
            assert_as_reference(&crate::Machine::preset(name).unwrap().topo, name);
        }
        assert_as_reference(&paired(12), "paired");
        assert_as_reference(&ring(9), "ring");
        // Nodes 10 apart (no cost between them) shortcut each other: no link reaches them.
        assert_as_reference(&shaped(5, |a, b| if a < 3 && b < 3 { 10 } else { 30 }), "free");
        // Asymmetric, with a three-link path shorter than a direct link.
        assert_as_reference(
            &shaped(4, |a, b| {
                [[0, 11, 60, 100], [50, 0, 12, 40], [90, 33, 0, 13], [70, 20, 25, 0]][a as usize][b as usize]
            }),
            "asymmetric",
        );
    }

    proptest::proptest! {
        #[test]
        fn random_matrices_give_the_reference_links_and_routes(
            n in 2u32..10,
            cells in proptest::collection::vec(10u32..60, 100),
        ) {
            let t = shaped(n, |a, b| cells[(a * 10 + b) as usize]);
            assert_as_reference(&t, &format!("{:?}", t.distances));
        }
    }

    /// The work named `what` of building the model of `topo`.
    fn work(topo: &Topology, what: &str) -> u64 {
        crate::work::take();
        let _ = MachineModel::new(topo, MachineParams::default());
        crate::work::take().get(what).copied().unwrap_or(0)
    }

    #[test]
    fn links_are_found_in_work_quadratic_in_nodes() {
        // Whether a -> b is a link asks whether some node k is on a path no longer than the
        // direct one. Trying every k for every pair was cubic: 1,024 nodes took a billion tries,
        // most of a run's time (scaling review). Only the k near enough to a to make a shorter
        // path are tried now: for 4 x the nodes, about 16 x the tries (64 x when cubic).
        for (name, shape) in [("paired", paired as fn(u32) -> Topology), ("ring", ring)] {
            let (s, l) = (work(&shape(32), "model.link_candidates"), work(&shape(128), "model.link_candidates"));
            assert!(s > 0, "{name}: no candidate tried");
            let g = l as f64 / s as f64;
            assert!(g < 20.0, "{name}: {s} -> {l} candidates tried, {g:.1} x for 4 x the nodes");
        }
    }

    #[test]
    fn routes_are_found_for_the_memory_nodes_asked_in_work_near_linear() {
        // Routes of every pair were found at construction: Dijkstra on the dense matrix from
        // every node, cubic (scaling review: 1,024 nodes, much of a run's time and memory), though
        // a run asks for the routes of the few nodes its memory is on. Now nothing is found at
        // construction, a node's routes when first asked, and a relaxation that cannot shorten a
        // path is not tried: for 4 x the nodes, about 4 x the work (16 x when quadratic).
        for (name, shape) in [("paired", paired as fn(u32) -> Topology), ("ring", ring)] {
            let mut asked = Vec::new();
            for n in [32, 128] {
                let t = shape(n);
                crate::work::take();
                let m = MachineModel::new(&t, MachineParams::default());
                let built = crate::work::take();
                assert_eq!(built.get("model.route_trees"), None, "{name} of {n}: routes found at construction");
                assert_eq!(built.get("model.relaxations"), None, "{name} of {n}");
                assert_eq!(m.route(1, 0)[0], 1);
                assert_eq!(m.route(1, n as usize / 2)[0], 1);
                let w = crate::work::take();
                assert_eq!(w.get("model.route_trees"), Some(&1), "{name} of {n}: one memory node asked");
                asked.push(w.get("model.relaxations").copied().unwrap_or(0));
            }
            let g = asked[1] as f64 / asked[0] as f64;
            assert!(asked[0] > 0 && g < 6.0, "{name}: relaxations {asked:?}, {g:.1} x for 4 x the nodes");
        }
    }
}
