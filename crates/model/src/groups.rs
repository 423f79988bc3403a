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
//!   2. new tasks  a fresh id each; a thread of a process with no per-thread signal at all
//!                 (residency shares only, no edge between two of its threads) takes its
//!                 process's group instead
//!   3. split      each group is rebuilt from its internal keep edges, strongest first, then the
//!                 tid-order chain of signal-less processes, each union only while the part fits
//!                 the cap (grown by group_split_margin for members that were already
//!                 together: the cap's own hysteresis, so a group at a node's size is not cut
//!                 by a period's noise; every CPU check allows RATE_SLACK_CPU_PER_TASK per task
//!                 for tick rounding); an edge keeps until it has been below group_keep_strength
//!                 (tier_weak) for edge_grace_ms; the largest part keeps the id. Joining needs
//!                 tier_medium:
//!
//!                 strength  tier_medium ─── join ───────────────────────────
//!                           keep mark   ──────────────╲____ below for grace ─► split
//!                 (a pair hovering around tier_medium stays one group: no flicker)
//!
//!   4. merge      across join edges, strongest first (then the address-space prior for
//!                 signal-less processes split over groups):
//!
//!                 G_small ──edge──► G_large          load = cpu / CPUs_max + mem / mem_max
//!                 the smaller load joins, the larger keeps its id (moving less costs less)
//!                 refused (counted) unless the union fits: tasks <= group_max_tasks and SOME
//!                 node n has cpu <= group_max_cpu_frac x CPUs(n) AND
//!                 mem <= group_max_mem_frac x mem(n) (both on the same node; mem(n) the
//!                 node's MemTotal as last sampled, `Model::node_mem_total_bytes`, so memory
//!                 hot-added to a node counts from the next sample; mem counts the memory
//!                 its processes share once, in steps 3 and 4 alike)
//!
//!   5. figures    cpu, memory (each process's RSS shared over its threads by smoothed access
//!                 evidence: decayed samples, else fault averages, else equally), CPU-weighted access shares, memory per node, nodes run on,
//!                 load; since_ns = now when the membership changed. Memory its members'
//!                 processes share counts once (rule shared-counts-once, below)
//!
//!                 access = ( Σ_{members with samples or faults} cpu_i x access_i
//!                          + Σ_{members by residency} cpu_i x mem_by_node(those members) / their memory ) / Σ cpu_i
//! ```
//!
//! Members with no access evidence of their own (no sample, no NUMA fault: the task's `access` is
//! its process's resident memory per node) count with their CPU in all, spread by where their
//! memory is in bytes, not each by its own process's shares (rule residency-by-bytes). Weighting
//! each member's process residency by the member's CPU said that a busy 12 MiB client's node held
//! most of the accesses of a group with the 64 MiB buffer its server answers from: the rig's
//! pairs scenario (4-node guest, no PMU, NUMA balancing off) saw "node 2 has 55% of its accesses"
//! for such a pair, and the daemon brought the server to the client and copied its 64 MiB after
//! it (16,419 pages) instead of the client's 12 MiB to the server. Without samples, where the
//! bytes are is the whole estimate, and the bytes are what a move copies. For the threads of one
//! process (the only residency members most groups have) the two readings are the same.
//!
//! Memory two members' processes both map (a memfd, a SysV segment, a shared file: an object of
//! `Sample.shared`) is one set of pages in both processes' numa_maps, so summing the members'
//! memory counted it once per mapper (rule shared-counts-once). The rig's pairs scenario saw a
//! 24 MiB memfd of a producer and its consumer count 48 MiB in their group. Per object and node
//! the group keeps the largest of its mappers' resident bytes there (each scaled by the part of
//! its process the group holds) and drops the rest (`Model::shared_twice`); an object shared with
//! a process of another group stays in each one's figures, as it is where each one's threads
//! read. The size cap (steps 3 and 4) counts a part's memory the same way: a part keeps, beside
//! its summed memory, its processes that map a shared object with the bytes of each it holds
//! (`Sharing`), and a union takes off what the two sides' processes count twice. Summed per task,
//! a pair whose buffer fits a node once but not twice was refused the merge every period, and a
//! group whose buffer grew was cut though its pages still fit.
//!
//! "Signal-less" processes are grouped whole because nothing distinguishes their threads: they all
//! look like their process's residency. The cap holds at all times, not only at merge time: a
//! group whose members grew (CPU, memory) past it loses its weakest-tied members in step 3, and a
//! signal-less process too large for a node is cut into node-sized runs of consecutive tids
//! (deterministic, stable while the threads are). Only a single task over the cap stays as it is
//! (a thread cannot be split).
//!
//! # Units
//!
//! CPU in CPUs, memory in bytes, `load` dimensionless (1.0 = one node's CPUs or one node's memory).
//! `CPUs_max`, `mem_max`: the largest node's CPU count and memory.
//!
//! # Limits
//!
//! Greedy: merges are taken strongest first and never undone within an update, so the grouping is
//! one good partition, not an optimal one. Shared memory is found in numa_maps by path and address
//! (the VMAs of the object's path that start where maps showed the process mapping it: two memfds
//! of one name are two objects); a VMA mapped since the last maps read (the daemon reads maps every
//! `maps_every` cycles) is in no object until the next, and is counted once per mapper meanwhile.
//! Not at all without the shared-memory signal (`[signals] shared = false`) or a numa_maps read.
//! Ids are deterministic (handed out in task-key order).
//! Cost: O(tasks log tasks + edges log edges + nodes x candidate unions), plus, for a union of
//! two parts each holding a process that maps a shared object, one `Model::shared_twice` (the
//! objects of those processes x nodes).

use std::collections::{BTreeMap, BTreeSet};

use crate::affinity::Tier;
use crate::tasks::{normalise, AccessSource, TaskKey, TaskView};
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
    /// unknown); members known by residency alone spread their weight by bytes (residency-by-bytes,
    /// see the module essay).
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
    // Everything per task is a vector indexed like `keys` (sorted, so a process's threads are one
    // contiguous run); maps are only used per group or per edge. 10,000 threads cost a few ms.
    let keys: Vec<TaskKey> = model.tasks.keys().copied().collect();
    let views: Vec<&TaskView> = model.tasks.values().collect();
    let n = keys.len();
    let pos = |k: &TaskKey| keys.binary_search(k).ok();
    let (cpus_max, mem_max) = node_max(model);
    let mem = |i: usize| model.node_mem_total_bytes(i) as f64;
    // The cap: a group must fit at least one node on CPU *and* memory at once (on an asymmetric
    // machine the node with the most CPUs need not be the one with the most memory).
    let caps: Vec<(f64, f64)> = model
        .topo
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (tun.group_max_cpu_frac * n.cpus.len() as f64, tun.group_max_mem_frac * mem(i)))
        .collect();
    let cap_tasks = tun.group_max_tasks as usize;
    // `margin`: 0 for a merge, `group_split_margin` for keeping a group that exists (hysteresis).
    let fits = |x: Agg, margin: f64| {
        let slack = crate::tasks::RATE_SLACK_CPU_PER_TASK * x.tasks as f64;
        x.tasks <= cap_tasks
            && caps.iter().any(|&(c, m)| x.cpu <= c * (1.0 + margin) + slack && x.mem <= m * (1.0 + margin))
    };
    let keep_margin = tun.group_split_margin;
    let join = |t: Option<Tier>| t.is_some_and(|t| t >= Tier::Medium);
    // Hysteresis: an internal edge keeps its group together until it has been below
    // `group_keep_strength` for `edge_grace_ms` (joining needs `tier_medium`).
    let grace_ns = tun.edge_grace_ms.saturating_mul(1_000_000);
    let weak_since = &model.state.weak_since;
    let keep = |k: &(TaskKey, TaskKey)| weak_since.get(k).is_none_or(|&s| now.saturating_sub(s) < grace_ns);
    let runs = pid_runs(&keys);

    // Per task: CPU and memory attribution.
    let (task_mem, task_mem_node) = attribute_memory(model, &keys, &views);
    let task_cpu: Vec<f64> = views.iter().map(|t| t.cpu_rate).collect();
    // Per task: whether its process maps an object another process maps too (the only tasks a
    // part's shared memory, counted once in the cap, needs to know of).
    let sharer: Vec<bool> =
        keys.iter().map(|k| model.procs.get(&k.pid).is_some_and(|p| !p.shared_objects.is_empty())).collect();
    let alone = |i: usize| if sharer[i] { Sharing::of(keys[i].pid, task_mem[i]) } else { Sharing::default() };

    // Processes with no per-thread signal: residency shares only and no edge (of any tier) between
    // two of their threads. An edge to another process says nothing about how the process's own
    // threads relate, so it does not count.
    let intra: BTreeSet<u32> = model
        .graph
        .edges
        .iter()
        .filter(|((a, b), e)| e.tier.is_some() && a.pid == b.pid)
        .map(|((a, _), _)| a.pid)
        .collect();
    let mut sl = vec![false; n];
    for &(s, e) in &runs {
        let signal =
            intra.contains(&keys[s].pid) || views[s..e].iter().any(|t| t.access_source != AccessSource::Residency);
        sl[s..e].iter_mut().for_each(|x| *x = !signal);
    }

    // 1. Previous membership of live tasks (reborn keys are new tasks): a merge of two sorted lists.
    let old = std::mem::take(&mut model.groups.groups);
    let reborn = &model.state.reborn;
    let mut prev: Vec<Option<GroupId>> = vec![None; n];
    {
        let mut it = model.groups.of_task.iter().peekable();
        // Whether the last group asked about still exists: a group's tasks come one after another.
        let mut last: Option<(GroupId, bool)> = None;
        for (i, k) in keys.iter().enumerate() {
            while it.peek().is_some_and(|(ok, _)| *ok < k) {
                it.next();
            }
            if let Some((ok, g)) = it.peek() {
                if *ok == k {
                    let exists = match last {
                        Some((lg, e)) if lg == **g => e,
                        _ => {
                            let e = old.contains_key(g);
                            last = Some((**g, e));
                            e
                        }
                    };
                    if exists && !reborn.contains(k) {
                        prev[i] = Some(**g);
                    }
                }
            }
        }
    }

    // 2. New tasks: a fresh singleton id each, or their signal-less process's group (the group of
    //    its first already-grouped thread, else one new id they all share).
    let mut next_id = model.groups.next_id;
    let fresh: Vec<bool> = prev.iter().map(Option::is_none).collect();
    for &(s, e) in &runs {
        let mut pgroup = if sl[s] { prev[s..e].iter().copied().flatten().next() } else { None };
        for g in prev[s..e].iter_mut().filter(|g| g.is_none()) {
            *g = Some(match pgroup {
                Some(p) => p,
                None => {
                    next_id += 1;
                    if sl[s] {
                        pgroup = Some(next_id - 1);
                    }
                    next_id - 1
                }
            });
        }
    }
    let prev: Vec<GroupId> = prev.into_iter().map(|g| g.unwrap_or(GroupId::MAX)).collect();

    // 3. Split: rebuild each group's components from its keep edges (strongest first), then the
    //    tid-order chain of signal-less processes, each union only while the part still fits
    //    the cap. A group that fits stays whole (every part of a fitting group fits); one that
    //    grew past the cap by more than `group_split_margin` (the upper mark of the cap's
    //    hysteresis) loses its weakest-tied members, and a signal-less process larger than a
    //    node is cut into node-sized runs of consecutive threads.
    let mut uf = UnionFind::new(n);
    let mut part: Vec<Agg> = (0..n).map(|i| Agg { tasks: 1, cpu: task_cpu[i], mem: task_mem[i] as f64 }).collect();
    let mut part_sharing: Vec<Sharing> = (0..n).map(alone).collect();
    let mut unions: Vec<(f64, usize, usize)> = Vec::new();
    for (k @ (a, b), e) in &model.graph.edges {
        if !keep(k) {
            continue;
        }
        if let (Some(i), Some(j)) = (pos(a), pos(b)) {
            if prev[i] == prev[j] {
                unions.push((e.strength, i, j));
            }
        }
    }
    unions.sort_by(|x, y| y.0.total_cmp(&x.0).then((x.1, x.2).cmp(&(y.1, y.2))));
    for &(s, e) in runs.iter().filter(|r| sl[r.0]) {
        for i in s + 1..e {
            if let Some(j) = (s..i).rev().find(|&j| prev[j] == prev[i]) {
                unions.push((tun.address_space_prior, j, i));
            }
        }
    }
    for (_, i, j) in unions {
        let (ri, rj) = (uf.find(i), uf.find(j));
        if ri == rj {
            continue;
        }
        let (sum, sharing) = union(model, (part[ri], &part_sharing[ri]), (part[rj], &part_sharing[rj]));
        // Members that were together keep together up to the upper mark; a new task joins its
        // process's group only within the plain cap.
        let margin = if fresh[i] || fresh[j] { 0.0 } else { keep_margin };
        if fits(sum, margin) {
            uf.union(ri, rj);
            let r = uf.find(ri);
            part[r] = sum;
            part_sharing[r] = sharing;
        }
    }
    // (old id, component root, task), sorted: each old group's components are contiguous.
    let mut comp: Vec<(GroupId, usize, usize)> = (0..n).map(|i| (prev[i], uf.find(i), i)).collect();
    comp.sort_unstable();
    let mut gid: Vec<GroupId> = vec![GroupId::MAX; n];
    let mut parts: Vec<(usize, usize)> = Vec::new(); // ranges of `comp`, one per component
    let mut a = 0;
    while a < comp.len() {
        let g = comp[a].0;
        parts.clear();
        let mut b = a;
        while b < comp.len() && comp[b].0 == g {
            let c = b;
            while b < comp.len() && comp[b].0 == g && comp[b].1 == comp[c].1 {
                b += 1;
            }
            parts.push((c, b));
        }
        // Largest first; ties by smallest member (tasks within a component are sorted).
        parts.sort_by(|x, y| (y.1 - y.0).cmp(&(x.1 - x.0)).then(comp[x.0].2.cmp(&comp[y.0].2)));
        for (k, &(c, d)) in parts.iter().enumerate() {
            let id = if k == 0 {
                g
            } else {
                next_id += 1;
                next_id - 1
            };
            for x in &comp[c..d] {
                gid[x.2] = id;
            }
        }
        a = b;
    }

    // 4. Merge across join edges, strongest first, then the prior of split signal-less processes.
    //    Groups get dense indices (`ids[d]` is the id); a merged group is represented by the kept one.
    let mut ids: Vec<GroupId> = gid.clone();
    ids.sort_unstable();
    ids.dedup();
    let dense: Vec<usize> = gid.iter().map(|g| ids.binary_search(g).unwrap_or(0)).collect();
    let mut agg = vec![Agg::default(); ids.len()];
    let mut agg_sharing = vec![Sharing::default(); ids.len()];
    for i in 0..n {
        let a = &mut agg[dense[i]];
        a.tasks += 1;
        a.cpu += task_cpu[i];
        a.mem += task_mem[i] as f64;
        if sharer[i] {
            agg_sharing[dense[i]].add(keys[i].pid, task_mem[i]);
        }
    }
    // Each group's memory its processes share counted once, as in its figures (step 5).
    for (a, sh) in agg.iter_mut().zip(agg_sharing.iter_mut()) {
        sh.twice = sh.twice_total(model);
        a.mem -= sh.twice;
    }
    let mut cands: Vec<(f64, usize, usize)> = Vec::new();
    for ((a, b), e) in &model.graph.edges {
        if let (true, Some(i), Some(j)) = (join(e.tier), pos(a), pos(b)) {
            if dense[i] != dense[j] {
                cands.push((e.strength, i, j));
            }
        }
    }
    cands.sort_by(|x, y| y.0.total_cmp(&x.0).then((x.1, x.2).cmp(&(y.1, y.2))));
    for &(s, e) in runs.iter().filter(|r| sl[r.0]) {
        for i in s + 1..e {
            if dense[i] != dense[s] {
                cands.push((tun.address_space_prior, s, i));
            }
        }
    }
    let mut merged = UnionFind::new(ids.len());
    let mut refused: BTreeSet<(GroupId, GroupId)> = BTreeSet::new();
    for (_, i, j) in cands {
        let (da, db) = (merged.find(dense[i]), merged.find(dense[j]));
        if da == db {
            continue;
        }
        let (a, b, ga, gb) = (agg[da], agg[db], ids[da], ids[db]);
        let (sum, sharing) = union(model, (a, &agg_sharing[da]), (b, &agg_sharing[db]));
        if !fits(sum, 0.0) {
            refused.insert((ga.min(gb), ga.max(gb)));
            continue;
        }
        let load = |x: Agg| x.cpu / cpus_max + x.mem / mem_max;
        let (la, lb) = (load(a), load(b));
        let (keep, gone) = if la > lb || (la == lb && ga < gb) { (da, db) } else { (db, da) };
        merged.parent[gone] = keep;
        agg[keep] = sum;
        agg_sharing[keep] = sharing;
    }
    for i in 0..n {
        gid[i] = ids[merged.find(dense[i])];
    }

    // 5. Figures, group by group in id order.
    let per_task = PerTask {
        keys: &keys,
        views: &views,
        mem: &task_mem,
        mem_node: &task_mem_node,
        cpu: &task_cpu,
        sharer: &sharer,
    };
    let mut order: Vec<(GroupId, usize)> = gid.iter().copied().zip(0..n).collect();
    order.sort_unstable();
    let mut groups: Vec<(GroupId, Group)> = Vec::with_capacity(ids.len());
    let mut members: Vec<usize> = Vec::new();
    let mut a = 0;
    while a < order.len() {
        let id = order[a].0;
        let mut b = a;
        while b < order.len() && order[b].0 == id {
            b += 1;
        }
        members.clear();
        members.extend(order[a..b].iter().map(|&(_, i)| i));
        a = b;
        let mut group = figures(model, id, &members, &per_task, (cpus_max, mem_max));
        group.since_ns = match old.get(&id) {
            Some(g) if g.tasks == group.tasks => g.since_ns,
            _ => now,
        };
        groups.push((id, group));
    }
    model.groups.groups = groups.into_iter().collect();
    model.groups.of_task = keys.iter().copied().zip(gid.iter().copied()).collect();
    model.groups.next_id = next_id;
    model.groups.refused_merges = refused.len() as u64;
}

/// Per task, the inputs of a group's figures (indexed like `keys`, sorted, whole processes).
struct PerTask<'a> {
    keys: &'a [TaskKey],
    views: &'a [&'a TaskView],
    /// Memory attributed (`attribute_memory`), bytes, and per node (task-major).
    mem: &'a [u64],
    mem_node: &'a [u64],
    /// CPU rate, CPUs.
    cpu: &'a [f64],
    /// Whether its process maps an object another process maps too.
    sharer: &'a [bool],
}

/// The figures of the group `id` of the tasks at `members` (ascending indices of `t`), step 5 of
/// the module essay: CPU, memory (shared memory once), residency-by-bytes access shares, nodes run
/// on, load against the largest node's (`cpus_max`, `mem_max`). `since_ns` is left 0 for the
/// caller.
fn figures(model: &Model, id: GroupId, members: &[usize], t: &PerTask<'_>, (cpus_max, mem_max): (f64, f64)) -> Group {
    let nn = model.topo.nodes.len();
    let tasks: Vec<TaskKey> = members.iter().map(|&i| t.keys[i]).collect();
    let mut pids: Vec<u32> = tasks.iter().map(|k| k.pid).collect();
    pids.dedup();
    let cpu: f64 = members.iter().map(|&i| t.cpu[i]).sum();
    let mut mem_bytes: u64 = members.iter().map(|&i| t.mem[i]).fold(0, u64::saturating_add);
    let mut mem_by_node = vec![0u64; nn];
    let mut access = vec![0.0; nn];
    // Members known by residency alone (residency-by-bytes): their weight in all, and their memory.
    let (mut res_w, mut res_mem, mut res_each) = (0.0, vec![0u64; nn], vec![0.0; nn]);
    let mut running: Vec<(u32, f64)> = Vec::new();
    for &i in members {
        let v = t.views[i];
        let mine = &t.mem_node[i * nn..(i + 1) * nn];
        for (m, &b) in mem_by_node.iter_mut().zip(mine) {
            *m = m.saturating_add(b);
        }
        let w = if cpu > 0.0 { t.cpu[i] } else { 1.0 };
        if v.access_source == AccessSource::Residency {
            res_w += w;
            for (m, &b) in res_mem.iter_mut().zip(mine) {
                *m = m.saturating_add(b);
            }
            for (a, &s) in res_each.iter_mut().zip(&v.access) {
                *a += w * s;
            }
        } else {
            for (a, &s) in access.iter_mut().zip(&v.access) {
                *a += w * s;
            }
        }
        if let Some(node) = v.node {
            match running.iter_mut().find(|r| r.0 == node) {
                Some(r) => r.1 += t.cpu[i],
                None => running.push((node, t.cpu[i])),
            }
        }
    }
    running.sort_by_key(|r| r.0);
    // Memory two members' processes share counts once (rule shared-counts-once): each process
    // takes the part of its memory its threads here hold.
    let mut sharing = Sharing::default();
    for &i in members.iter().filter(|&&i| t.sharer[i]) {
        sharing.add(t.keys[i].pid, t.mem[i]);
    }
    if sharing.here.len() >= 2 {
        let twice = model.shared_twice(&sharing.parts(model));
        for (m, &d) in mem_by_node.iter_mut().zip(&twice) {
            *m = m.saturating_sub(d);
        }
        mem_bytes = mem_bytes.saturating_sub(twice.iter().fold(0, |a, &b| a.saturating_add(b)));
    }
    let res_total = res_mem.iter().fold(0u64, |a, &b| a.saturating_add(b));
    if res_total > 0 {
        for (a, &b) in access.iter_mut().zip(&res_mem) {
            *a += res_w * b as f64 / res_total as f64;
        }
    } else {
        for (a, &s) in access.iter_mut().zip(&res_each) {
            *a += s;
        }
    }
    normalise(&mut access);
    let load = cpu / cpus_max + mem_bytes as f64 / mem_max;
    Group { id, tasks, pids, cpu, mem_bytes, access, mem_by_node, running_on: running, load, since_ns: 0 }
}

/// The largest node's CPUs and memory (bytes, as last sampled), each at least 1: what a group's
/// `load` is measured against.
fn node_max(model: &Model) -> (f64, f64) {
    let cpus_max = model.topo.nodes.iter().map(|n| n.cpus.len()).max().unwrap_or(0).max(1) as f64;
    let mem_max =
        (0..model.topo.nodes.len()).map(|i| model.node_mem_total_bytes(i) as f64).fold(0.0, f64::max).max(1.0);
    (cpus_max, mem_max)
}

impl Model {
    /// The figures a group `id` of `tasks` has, computed as [`Model::update`] computes every
    /// group's (step 5 of [`crate::groups`]: memory attributed to each thread of its process,
    /// shared memory counted once, residency-by-bytes access shares), from the model's task and
    /// process views as they are. For a caller that sets groups by hand (the policy's tests); tasks
    /// the model does not know are left out. `since_ns` is the model's time.
    pub fn group_figures(&self, id: GroupId, tasks: &[TaskKey]) -> Group {
        let mut pids: Vec<u32> = tasks.iter().map(|k| k.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        // Every thread of each process: a process's memory is shared out over all its threads.
        let keys: Vec<TaskKey> = pids
            .iter()
            .flat_map(|&pid| {
                self.tasks.range(TaskKey { pid, tid: 0 }..=TaskKey { pid, tid: u32::MAX }).map(|(k, _)| *k)
            })
            .collect();
        let views: Vec<&TaskView> = keys.iter().map(|k| &self.tasks[k]).collect();
        let (mem, mem_node) = attribute_memory(self, &keys, &views);
        let cpu: Vec<f64> = views.iter().map(|v| v.cpu_rate).collect();
        let sharer: Vec<bool> =
            keys.iter().map(|k| self.procs.get(&k.pid).is_some_and(|p| !p.shared_objects.is_empty())).collect();
        let mut members: Vec<usize> = tasks.iter().filter_map(|k| keys.binary_search(k).ok()).collect();
        members.sort_unstable();
        members.dedup();
        let t = PerTask { keys: &keys, views: &views, mem: &mem, mem_node: &mem_node, cpu: &cpu, sharer: &sharer };
        Group { since_ns: self.now_ns, ..figures(self, id, &members, &t, node_max(self)) }
    }
}

/// Runs `[start, end)` of equal pid in sorted task keys.
fn pid_runs(keys: &[TaskKey]) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut s = 0;
    while s < keys.len() {
        let mut e = s + 1;
        while e < keys.len() && keys[e].pid == keys[s].pid {
            e += 1;
        }
        runs.push((s, e));
        s = e;
    }
    runs
}

/// Running totals of a group during merging.
#[derive(Debug, Clone, Copy, Default)]
struct Agg {
    tasks: usize,
    cpu: f64,
    mem: f64,
}

impl Agg {
    fn plus(self, o: Agg) -> Agg {
        Agg { tasks: self.tasks + o.tasks, cpu: self.cpu + o.cpu, mem: self.mem + o.mem }
    }
}

/// The processes of a part (a group being built) that map an object another process maps too,
/// with the memory of each the part holds: what [`Model::shared_twice`] needs to count the pages
/// two of them map once (rule shared-counts-once), in the cap as in the figures.
#[derive(Debug, Clone, Default)]
struct Sharing {
    /// (pid, bytes of its memory the part holds), sorted by pid.
    here: Vec<(u32, u64)>,
    /// The bytes the part's summed memory counts more than once (`Agg::mem` is less this).
    twice: f64,
}

impl Sharing {
    fn of(pid: u32, bytes: u64) -> Sharing {
        Sharing { here: vec![(pid, bytes)], twice: 0.0 }
    }

    /// Adds `bytes` of process `pid` (`twice` is not updated: see [`Sharing::twice_total`]).
    fn add(&mut self, pid: u32, bytes: u64) {
        match self.here.binary_search_by_key(&pid, |h| h.0) {
            Ok(k) => self.here[k].1 = self.here[k].1.saturating_add(bytes),
            Err(k) => self.here.insert(k, (pid, bytes)),
        }
    }

    /// `(pid, fraction of its memory the part holds)`, as [`Model::shared_twice`] takes them.
    fn parts(&self, model: &Model) -> Vec<(u32, f64)> {
        self.here
            .iter()
            .map(|&(pid, here)| {
                let all = model.procs.get(&pid).map_or(0, |p| p.rss_bytes);
                (pid, if all > 0 { here as f64 / all as f64 } else { 1.0 })
            })
            .collect()
    }

    /// The bytes the part counts more than once, over all nodes (0 with fewer than two sharers).
    fn twice_total(&self, model: &Model) -> f64 {
        if self.here.len() < 2 {
            return 0.0;
        }
        model.shared_twice(&self.parts(model)).iter().fold(0u64, |a, &b| a.saturating_add(b)) as f64
    }
}

/// Two parts as one: their totals with the memory their processes share counted once. Each
/// part's `Agg::mem` already counts its own shared pages once; the union adds back what each
/// took off and takes off what the union counts twice (memory a process of each side maps).
/// Without a sharer on both sides nothing changes but the sum (no look-up, no allocation when
/// neither side has one).
fn union(model: &Model, (a, sa): (Agg, &Sharing), (b, sb): (Agg, &Sharing)) -> (Agg, Sharing) {
    let sum = a.plus(b);
    if sa.here.is_empty() || sb.here.is_empty() {
        let s = if sa.here.is_empty() { sb.clone() } else { sa.clone() };
        return (sum, s);
    }
    let mut s = sa.clone();
    for &(pid, bytes) in &sb.here {
        s.add(pid, bytes);
    }
    s.twice = s.twice_total(model);
    let mem = sum.mem + sa.twice + sb.twice - s.twice;
    (Agg { mem, ..sum }, s)
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

/// Fixed-point scale of smoothed (fractional) sample counts used as integer weights: 1024 steps
/// per sample keep the decayed fractions (a precision choice, not a heuristic).
const SAMPLE_WEIGHT_SCALE: f64 = 1024.0;

/// Shares `total` out in proportion to `weights` (equally when they are all zero), exactly: the
/// parts sum to `total` (the remainder of the integer division goes to the largest weights first).
pub(crate) fn apportion(total: u64, weights: &[u64]) -> Vec<u64> {
    if weights.is_empty() {
        return Vec::new();
    }
    if weights.iter().all(|&w| w == 0) {
        // Equal weights (the usual case: no samples, no faults): total / n each, the remainder
        // one each to the first ones (the order the general path below gives equal weights),
        // without building a weight vector and sorting it for every process and node.
        let n = weights.len() as u64;
        let mut out = vec![total / n; weights.len()];
        out.iter_mut().take((total % n) as usize).for_each(|x| *x += 1);
        return out;
    }
    let w = weights;
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

/// [`apportion`] handing each part to `put(index, part)` instead of returning a vector: the
/// usual all-zero weights (no samples, no faults) are shared out without an allocation (this runs
/// for every process and node each update: a thousand processes on four nodes are 5,000 calls).
/// The parts are exactly `apportion`'s.
fn apportion_each(total: u64, weights: &[u64], mut put: impl FnMut(usize, u64)) {
    if weights.iter().all(|&w| w == 0) {
        let n = weights.len() as u64;
        if n == 0 {
            return;
        }
        let (each, extra) = (total / n, (total % n) as usize);
        for k in 0..weights.len() {
            put(k, each + u64::from(k < extra));
        }
        return;
    }
    for (k, m) in apportion(total, weights).into_iter().enumerate() {
        put(k, m);
    }
}

/// Memory per task: each process's RSS (and RSS per node) shared over its threads by their
/// smoothed access evidence, best source first: sampled accesses decayed with
/// `access_half_life_ms` (not last period's count, which jumps to 0 in a period without a
/// sample); else the kernel's NUMA-fault averages (already decayed by the kernel); else equally.
/// Sources are never mixed in one weight vector (samples and faults are different units). Per node as one flat vector, task-major
/// (`[task * nodes + node]`).
fn attribute_memory(model: &Model, keys: &[TaskKey], views: &[&TaskView]) -> (Vec<u64>, Vec<u64>) {
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
            let threads = &views[i..j];
            // Smoothed samples in 1/1024ths (apportion takes integers); all 0, without a lookup
            // per thread, for a process none of whose threads has a hot bucket of its own (most).
            let hot = model.state.procs.get(&pid).is_none_or(|h| h.hot_threads);
            let sampled: Vec<u64> = threads
                .iter()
                .map(|t| {
                    let s = if hot {
                        crate::work::count("groups.thread_lookups", 1);
                        model.state.threads.get(&t.key).map_or(0.0, |h| h.smoothed_samples())
                    } else {
                        0.0
                    };
                    (s * SAMPLE_WEIGHT_SCALE).round() as u64
                })
                .collect();
            let w: Vec<u64> = if sampled.iter().any(|&x| x > 0) {
                sampled
            } else {
                threads
                    .iter()
                    .map(|t| if t.access_source == AccessSource::NumaFaults { t.access_samples } else { 0 })
                    .collect()
            };
            apportion_each(p.rss_bytes, &w, |k, m| mem[i + k] = m);
            for (idx, &b) in p.mem_by_node.iter().enumerate().take(nn) {
                apportion_each(b, &w, |k, m| by_node[(i + k) * nn + idx] = m);
            }
        }
        i = j;
    }
    (mem, by_node)
}

#[cfg(test)]
mod tests {
    use super::{apportion, apportion_each};
    use proptest::prelude::*;

    fn collected(total: u64, weights: &[u64]) -> Vec<u64> {
        let mut out = vec![u64::MAX; weights.len()];
        apportion_each(total, weights, |k, m| out[k] = m);
        out
    }

    #[test]
    fn apportion_each_hands_out_apportions_parts() {
        assert_eq!(collected(10, &[0, 0, 0]), vec![4, 3, 3]);
        assert_eq!(collected(7, &[0, 3, 1]), vec![0, 6, 1]);
        assert!(collected(5, &[]).is_empty());
        assert_eq!(collected(u64::MAX, &[0; 7]), apportion(u64::MAX, &[0; 7]));
    }

    proptest! {
        // The allocation-free path gives exactly the parts of the general one, for all-zero
        // weights (its own path) and any others (forwarded).
        #[test]
        fn apportion_each_equals_apportion(
            total in any::<u64>(),
            weights in prop::collection::vec(prop_oneof![Just(0u64), 0u64..5, any::<u64>()], 0..12),
            zero in any::<bool>(),
        ) {
            let weights: Vec<u64> = if zero { vec![0; weights.len()] } else { weights };
            prop_assert_eq!(collected(total, &weights), apportion(total, &weights));
        }
    }

    #[test]
    fn apportion_is_exact() {
        assert_eq!(apportion(10, &[1, 1, 1]), vec![4, 3, 3]);
        assert_eq!(apportion(10, &[0, 0]), vec![5, 5]);
        // The all-zero fast path shares out exactly as equal non-zero weights do.
        for (total, n) in [(11u64, 3usize), (0, 4), (u64::MAX, 7), (5, 9)] {
            assert_eq!(apportion(total, &vec![0; n]), apportion(total, &vec![1; n]), "{total} {n}");
        }
        assert_eq!(apportion(7, &[0, 3, 1]), vec![0, 6, 1]);
        assert_eq!(apportion(u64::MAX, &[u64::MAX, 1]).iter().map(|&x| x as u128).sum::<u128>(), u64::MAX as u128);
        assert!(apportion(5, &[]).is_empty());
    }
}
