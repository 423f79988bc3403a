//! Affinity groups: tasks that belong together, kept small enough for one node.
//!
//! # Problem
//!
//! Placement decides per group, not per thread: a group's members should share a node. Groups must
//! follow the affinity graph as it changes (relations appear, relations decay) without flicker,
//! and must never grow beyond what a node can hold (NUMA-ICON: "avoid super-large affinity
//! groups").
//!
//! # Approach
//!
//! Each update, in this order:
//!
//! ```text
//!   1. forget     tasks that vanished (or whose pid/tid now names another task)
//!   2. split      each group into connected components over its internal join edges
//!                 (tier >= Medium); the largest component keeps the id
//!   3. new tasks  a singleton group each; a thread of a process with no per-thread signal at all
//!                 (residency shares only, no edge between two of its threads) joins its
//!                 process's group instead
//!   4. merge      across join edges, strongest first (then the address-space prior for
//!                 signal-less processes split over groups):
//!
//!                 G_small ──edge──► G_large          load = cpu / CPUs_max + mem / mem_max
//!                 the smaller load joins, the larger keeps its id (moving less costs less)
//!                 refused (counted) when the union would exceed
//!                   group_max_tasks, group_max_cpu_frac x CPUs_max, group_max_mem_frac x mem_max
//!
//!   5. figures    cpu, memory (each process's RSS shared over its threads by access evidence,
//!                 equally without), CPU-weighted access shares, memory per node, nodes run on,
//!                 load; since_ns = now when the membership changed
//! ```
//!
//! "Signal-less" processes are grouped whole because nothing distinguishes their threads: they all
//! look like their process's residency. A group already over the cap on its own (one huge thread,
//! a large signal-less process) stays whole; the cap only refuses merges.
//!
//! # Units
//!
//! CPU in CPUs, memory in bytes, `load` dimensionless (1.0 = one node's CPUs or one node's memory).
//! `CPUs_max`, `mem_max`: the largest node's CPU count and memory.
//!
//! # Limits
//!
//! Greedy: merges are taken strongest first and never undone within an update, so the grouping is
//! one good partition, not an optimal one. Ids are deterministic (handed out in task-key order).
//! Cost: O(tasks log tasks + edges log edges).

use std::collections::{BTreeMap, BTreeSet};

use crate::affinity::Tier;
use crate::tasks::{normalise, AccessSource, TaskKey};
use crate::Model;

/// A group's stable id (kept by the larger side of a merge and the largest part of a split).
pub type GroupId = u64;

/// One affinity group.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// Id.
    pub id: GroupId,
    /// Members, sorted.
    pub tasks: Vec<TaskKey>,
    /// Processes the members belong to, sorted.
    pub pids: Vec<u32>,
    /// CPU demand, CPUs (sum of the members' rates).
    pub cpu: f64,
    /// Memory attributed to the group, bytes (each process's RSS shared out over its threads by
    /// their access evidence).
    pub mem_bytes: u64,
    /// The group's accesses per node (dense index), weighted by member CPU, summing to 1 (all 0 if
    /// unknown).
    pub access: Vec<f64>,
    /// Memory attributed to the group per node (dense index), bytes.
    pub mem_by_node: Vec<u64>,
    /// Nodes (kernel ids) its members ran on in the last period, with the CPU demand on each.
    pub running_on: Vec<(u32, f64)>,
    /// Load used to choose the direction of a merge: CPU share of a node plus memory share of a
    /// node (the smaller joins the larger).
    pub load: f64,
    /// Host time the group got its current membership, ns.
    pub since_ns: u64,
}

/// All groups and the task -> group index.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Groups {
    /// Groups by id.
    pub groups: BTreeMap<GroupId, Group>,
    /// Group of every task.
    pub of_task: BTreeMap<TaskKey, GroupId>,
    /// Next id to hand out.
    pub next_id: GroupId,
    /// Merges refused by the size cap in the last update (for explain and tests).
    pub refused_merges: u64,
}

/// Regroups after the graph changed: drop dead tasks, split groups whose internal edges fell below
/// the join tier, merge across edges at or above it (smaller load into larger, under the cap),
/// recompute each group's figures.
pub(crate) fn update(model: &mut Model) {
    let tun = &model.tunables;
    let now = model.now_ns;
    let keys: Vec<TaskKey> = model.tasks.keys().copied().collect();
    let n = keys.len();
    let pos = |k: &TaskKey| keys.binary_search(k).ok();
    let cpus_max = model.topo.nodes.iter().map(|n| n.cpus.len()).max().unwrap_or(0).max(1) as f64;
    let mem_max = model.topo.nodes.iter().map(|n| n.mem_total_kb * 1024).max().unwrap_or(0).max(1) as f64;
    let cap_cpu = tun.group_max_cpu_frac * cpus_max;
    let cap_mem = tun.group_max_mem_frac * mem_max;
    let cap_tasks = tun.group_max_tasks as usize;
    let join = |t: Option<Tier>| t.is_some_and(|t| t >= Tier::Medium);

    // Per task: CPU and memory attribution.
    let (task_mem, task_mem_node) = attribute_memory(model, &keys);
    let views: Vec<&crate::tasks::TaskView> = model.tasks.values().collect();
    let task_cpu: Vec<f64> = views.iter().map(|t| t.cpu_rate).collect();

    // Processes with no per-thread signal: residency shares only and no edge (of any tier) between
    // two of their threads. An edge to another process says nothing about how the process's own
    // threads relate, so it does not count.
    let mut signal: BTreeMap<u32, bool> = BTreeMap::new();
    for (k, t) in &model.tasks {
        *signal.entry(k.pid).or_insert(false) |= t.access_source != AccessSource::Residency;
    }
    for ((a, b), e) in &model.graph.edges {
        if e.tier.is_some() && a.pid == b.pid {
            signal.insert(a.pid, true);
        }
    }
    let signal_less = |pid: u32| !signal.get(&pid).copied().unwrap_or(false);

    // 1. Previous membership of live tasks (reborn keys are new tasks).
    let old = std::mem::take(&mut model.groups.groups);
    let prev: Vec<Option<GroupId>> = keys
        .iter()
        .map(|k| {
            if model.state.reborn.contains(k) {
                None
            } else {
                model.groups.of_task.get(k).copied().filter(|g| old.contains_key(g))
            }
        })
        .collect();

    // 2. Split: components over internal join edges (and the prior inside signal-less processes).
    let mut uf = UnionFind::new(n);
    for ((a, b), e) in &model.graph.edges {
        if !join(e.tier) {
            continue;
        }
        if let (Some(i), Some(j)) = (pos(a), pos(b)) {
            if prev[i].is_some() && prev[i] == prev[j] {
                uf.union(i, j);
            }
        }
    }
    let mut first_of_pid: BTreeMap<(u32, GroupId), usize> = BTreeMap::new();
    for i in 0..n {
        if let Some(g) = prev[i].filter(|_| signal_less(keys[i].pid)) {
            let f = *first_of_pid.entry((keys[i].pid, g)).or_insert(i);
            uf.union(f, i);
        }
    }
    let mut comps: BTreeMap<GroupId, BTreeMap<usize, Vec<usize>>> = BTreeMap::new();
    for (i, p) in prev.iter().enumerate() {
        if let Some(g) = *p {
            let r = uf.find(i);
            comps.entry(g).or_default().entry(r).or_default().push(i);
        }
    }
    let mut next_id = model.groups.next_id;
    let mut gid: Vec<GroupId> = vec![GroupId::MAX; n];
    for (g, parts) in comps {
        let mut parts: Vec<Vec<usize>> = parts.into_values().collect();
        // Largest first; ties by smallest member (members are in key order already).
        parts.sort_by(|x, y| y.len().cmp(&x.len()).then(x[0].cmp(&y[0])));
        for (k, members) in parts.into_iter().enumerate() {
            let id = if k == 0 {
                g
            } else {
                next_id += 1;
                next_id - 1
            };
            for i in members {
                gid[i] = id;
            }
        }
    }

    // 3. New tasks: singletons, or their signal-less process's group.
    let mut pid_group: BTreeMap<u32, GroupId> = BTreeMap::new();
    for i in 0..n {
        if gid[i] != GroupId::MAX && signal_less(keys[i].pid) {
            pid_group.entry(keys[i].pid).or_insert(gid[i]);
        }
    }
    for i in 0..n {
        if gid[i] != GroupId::MAX {
            continue;
        }
        let pid = keys[i].pid;
        if signal_less(pid) {
            if let Some(&g) = pid_group.get(&pid) {
                gid[i] = g;
                continue;
            }
        }
        gid[i] = next_id;
        next_id += 1;
        if signal_less(pid) {
            pid_group.insert(pid, gid[i]);
        }
    }

    // 4. Merge across join edges, strongest first, then the prior of split signal-less processes.
    let mut agg: BTreeMap<GroupId, Agg> = BTreeMap::new();
    for i in 0..n {
        let a = agg.entry(gid[i]).or_default();
        a.tasks += 1;
        a.cpu += task_cpu[i];
        a.mem += task_mem[i] as f64;
    }
    let mut cands: Vec<(f64, usize, usize)> = Vec::new();
    for ((a, b), e) in &model.graph.edges {
        if let (true, Some(i), Some(j)) = (join(e.tier), pos(a), pos(b)) {
            if gid[i] != gid[j] {
                cands.push((e.strength, i, j));
            }
        }
    }
    cands.sort_by(|x, y| y.0.total_cmp(&x.0).then((x.1, x.2).cmp(&(y.1, y.2))));
    let mut seen_pid: BTreeMap<u32, usize> = BTreeMap::new();
    for i in 0..n {
        if signal_less(keys[i].pid) {
            let f = *seen_pid.entry(keys[i].pid).or_insert(i);
            if gid[f] != gid[i] {
                cands.push((tun.address_space_prior, f, i));
            }
        }
    }
    let mut rep: BTreeMap<GroupId, GroupId> = BTreeMap::new();
    let root = |rep: &BTreeMap<GroupId, GroupId>, mut g: GroupId| {
        while let Some(&p) = rep.get(&g) {
            g = p;
        }
        g
    };
    let mut refused: BTreeSet<(GroupId, GroupId)> = BTreeSet::new();
    for (_, i, j) in cands {
        let (ga, gb) = (root(&rep, gid[i]), root(&rep, gid[j]));
        if ga == gb {
            continue;
        }
        let (a, b) = (agg[&ga], agg[&gb]);
        if a.tasks + b.tasks > cap_tasks || a.cpu + b.cpu > cap_cpu || a.mem + b.mem > cap_mem {
            refused.insert((ga.min(gb), ga.max(gb)));
            continue;
        }
        let load = |x: Agg| x.cpu / cpus_max + x.mem / mem_max;
        let (la, lb) = (load(a), load(b));
        let (keep, join_) = if la > lb || (la == lb && ga < gb) { (ga, gb) } else { (gb, ga) };
        rep.insert(join_, keep);
        agg.insert(keep, Agg { tasks: a.tasks + b.tasks, cpu: a.cpu + b.cpu, mem: a.mem + b.mem });
        agg.remove(&join_);
    }
    for g in gid.iter_mut() {
        *g = root(&rep, *g);
    }

    // 5. Figures.
    let nn = model.topo.nodes.len();
    let mut members: BTreeMap<GroupId, Vec<usize>> = BTreeMap::new();
    for (i, &g) in gid.iter().enumerate() {
        members.entry(g).or_default().push(i);
    }
    let mut groups = BTreeMap::new();
    let mut of_task = BTreeMap::new();
    for (id, idx) in members {
        let tasks: Vec<TaskKey> = idx.iter().map(|&i| keys[i]).collect();
        let mut pids: Vec<u32> = tasks.iter().map(|k| k.pid).collect();
        pids.dedup();
        let cpu: f64 = idx.iter().map(|&i| task_cpu[i]).sum();
        let mem_bytes: u64 = idx.iter().map(|&i| task_mem[i]).sum();
        let mut mem_by_node = vec![0u64; nn];
        let mut access = vec![0.0; nn];
        let mut running: BTreeMap<u32, f64> = BTreeMap::new();
        for &i in &idx {
            let t = views[i];
            for (m, &b) in mem_by_node.iter_mut().zip(&task_mem_node[i * nn..(i + 1) * nn]) {
                *m += b;
            }
            let w = if cpu > 0.0 { task_cpu[i] } else { 1.0 };
            for (a, &s) in access.iter_mut().zip(&t.access) {
                *a += w * s;
            }
            if let Some(node) = t.node {
                *running.entry(node).or_default() += task_cpu[i];
            }
        }
        normalise(&mut access);
        let since_ns = match old.get(&id) {
            Some(g) if g.tasks == tasks => g.since_ns,
            _ => now,
        };
        for k in &tasks {
            of_task.insert(*k, id);
        }
        groups.insert(
            id,
            Group {
                id,
                tasks,
                pids,
                cpu,
                mem_bytes,
                access,
                mem_by_node,
                running_on: running.into_iter().collect(),
                load: cpu / cpus_max + mem_bytes as f64 / mem_max,
                since_ns,
            },
        );
    }
    model.groups.groups = groups;
    model.groups.of_task = of_task;
    model.groups.next_id = next_id;
    model.groups.refused_merges = refused.len() as u64;
}

/// Running totals of a group during merging.
#[derive(Debug, Clone, Copy, Default)]
struct Agg {
    tasks: usize,
    cpu: f64,
    mem: f64,
}

/// Union-find over task indices (path halving, union by index).
struct UnionFind {
    parent: Vec<usize>,
}

impl UnionFind {
    fn new(n: usize) -> Self {
        Self { parent: (0..n).collect() }
    }

    fn find(&mut self, mut i: usize) -> usize {
        while self.parent[i] != i {
            self.parent[i] = self.parent[self.parent[i]];
            i = self.parent[i];
        }
        i
    }

    fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            let (lo, hi) = (ra.min(rb), ra.max(rb));
            self.parent[hi] = lo;
        }
    }
}

/// Shares `total` out in proportion to `weights` (equally when they are all zero), exactly: the
/// parts sum to `total` (the remainder of the integer division goes to the largest weights first).
pub(crate) fn apportion(total: u64, weights: &[u64]) -> Vec<u64> {
    if weights.is_empty() {
        return Vec::new();
    }
    let equal;
    let w: &[u64] = if weights.iter().all(|&w| w == 0) {
        equal = vec![1u64; weights.len()];
        &equal
    } else {
        weights
    };
    let sum: u128 = w.iter().map(|&x| x as u128).sum();
    let mut out: Vec<u64> = w.iter().map(|&x| (total as u128 * x as u128 / sum) as u64).collect();
    let mut rest = total - out.iter().sum::<u64>();
    if rest == 0 {
        return out;
    }
    let mut order: Vec<usize> = (0..w.len()).collect();
    order.sort_by(|&a, &b| w[b].cmp(&w[a]).then(a.cmp(&b)));
    for &i in order.iter().cycle() {
        if rest == 0 {
            break;
        }
        if w[i] > 0 {
            out[i] += 1;
            rest -= 1;
        }
    }
    out
}

/// Memory per task: each process's RSS (and RSS per node) shared over its threads by their access
/// evidence (`access_samples`), equally when none has any. Per node as one flat vector, task-major
/// (`[task * nodes + node]`).
fn attribute_memory(model: &Model, keys: &[TaskKey]) -> (Vec<u64>, Vec<u64>) {
    let nn = model.topo.nodes.len();
    let mut mem = vec![0u64; keys.len()];
    let mut by_node = vec![0u64; keys.len() * nn];
    let mut i = 0;
    while i < keys.len() {
        let pid = keys[i].pid;
        let mut j = i;
        while j < keys.len() && keys[j].pid == pid {
            j += 1;
        }
        if let Some(p) = model.procs.get(&pid) {
            let w: Vec<u64> = model.tasks.range(keys[i]..=keys[j - 1]).map(|(_, t)| t.access_samples).collect();
            for (k, m) in apportion(p.rss_bytes, &w).into_iter().enumerate() {
                mem[i + k] = m;
            }
            for (node, &b) in p.mem_by_node.iter().enumerate().take(nn) {
                for (k, m) in apportion(b, &w).into_iter().enumerate() {
                    by_node[(i + k) * nn + node] = m;
                }
            }
        }
        i = j;
    }
    (mem, by_node)
}

#[cfg(test)]
mod tests {
    use super::apportion;

    #[test]
    fn apportion_is_exact() {
        assert_eq!(apportion(10, &[1, 1, 1]), vec![4, 3, 3]);
        assert_eq!(apportion(10, &[0, 0]), vec![5, 5]);
        assert_eq!(apportion(7, &[0, 3, 1]), vec![0, 6, 1]);
        assert_eq!(apportion(u64::MAX, &[u64::MAX, 1]).iter().map(|&x| x as u128).sum::<u128>(), u64::MAX as u128);
        assert!(apportion(5, &[]).is_empty());
    }
}
