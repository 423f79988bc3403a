//! The scheduler: run queues, CPU shares when oversubscribed, affinity, fork placement, and a
//! Linux-like load balancer that knows nothing of memory placement.
//!
//! # Problem
//!
//! Where threads run decides which accesses are local. Without NUMA balancing, Linux's scheduler
//! places a new task on the idlest part of the machine (`sched_balance_find_dst_cpu`, walking the
//! domain tree from the top) and its periodic load balancer evens out load level by level: SMT
//! siblings, cores under one LLC, LLCs of a node, nodes of the machine (`sched_balance_rq` per
//! `sched_domain`), with a larger tolerated imbalance at NUMA levels (`imbalance_pct` 125 vs 110-117).
//! It never looks at where a task's memory is.
//!
//! # Approach
//!
//! ```text
//!   domain levels (built from the topology; a level whose domains have one group is dropped)
//!     machine   groups = nodes            imbalance_pct 1.25
//!     package   groups = nodes of it      imbalance_pct 1.25   (only if a package has >1 node)
//!     node      groups = LLCs of it       imbalance_pct 1.17
//!     llc       groups = cores of it      imbalance_pct 1.17   (spreads over idle cores first)
//!     core      groups = SMT siblings     imbalance_pct 1.10
//! ```
//!
//! Load of a CPU = sum of the duty cycles of the running tasks queued on it (a CPU-bound task is
//! 1.0). Every balancing pass walks the levels top-down; in each domain it repeatedly moves one
//! task from the busiest group (highest load per CPU) to the idlest, when the busiest exceeds the
//! idlest by the level's `imbalance_pct` and the move lowers the busier side (no ping-pong). The
//! task moved is the last queued on the busiest CPU of the group whose affinity allows a CPU of the
//! idlest group; it goes to the least loaded allowed CPU there. With NUMA balancing on, a task is
//! not pulled off its preferred node (the kernel's `migrate_degrades_locality`).
//!
//! CPU share: a task with duty d on a CPU whose queued duties sum to D gets d * min(1, 1/D) of the
//! CPU (CFS shares time equally among equal-weight runnable tasks); the rest of the d it wanted is
//! its run delay (schedstat's wait time).
//!
//! Ties: wherever candidates are equally good (equally idle groups or CPUs at fork, equally busy or
//! idle groups and CPUs in a balancing pass), a tie-break function picks one ([`Tie`]); the engine
//! passes the run's seeded generator, so seeds differ in which of equal CPUs a task lands on, as
//! live runs do, and a seed always picks the same.
//!
//! # Limits
//!
//! One nice level, no PELT averaging (loads are instantaneous), no wake-up affinity (tasks do not
//! sleep and wake on another CPU), no idle balancing between passes (a pass runs every epoch).

use std::collections::{HashMap, HashSet};

use numapilot_topology::CpuSet;

use crate::kernel::{Kernel, TaskState};

/// One level of scheduling domains.
#[derive(Debug, Clone)]
pub struct Level {
    /// Level name (`machine`, `package`, `node`, `llc`, `core`).
    pub name: &'static str,
    /// Tolerated imbalance before moving tasks (ratio of per-CPU loads).
    pub imbalance_pct: f64,
    /// Domains: each a list of groups, each group a list of CPU ids.
    pub domains: Vec<Vec<Vec<u32>>>,
}

/// The scheduler's static structure for one machine.
#[derive(Debug, Clone)]
pub struct Sched {
    /// Levels, top (machine) first.
    pub levels: Vec<Level>,
}

/// `imbalance_pct` of NUMA levels: 125 in the kernel (`sd_init`, SD_NUMA). Prevents shuffling
/// tasks between nodes for a small difference (7 vs 6 tasks on two 12-CPU nodes stays).
const NUMA_IMBALANCE: f64 = 1.25;
/// `imbalance_pct` of cache levels (117 for MC in `sd_init`).
const LLC_IMBALANCE: f64 = 1.17;
/// `imbalance_pct` of the SMT level (110 in `sd_init`).
const SMT_IMBALANCE: f64 = 1.10;
/// Upper bound on task moves per domain per pass; keeps a pass O(tasks) on huge machines.
const MAX_MOVES_PER_DOMAIN: usize = 64;

/// A tie-break: `tie(n)` returns which of `n` equally good candidates (in id order) to take, in
/// `0..n`. The engine passes the run's seeded generator; `|_| 0` gives the lowest id.
///
/// Why not always the lowest id: among equally idle CPUs the kernel's choice depends on timing,
/// not on ids. `select_idle_sibling` scans the LLC starting at the waking CPU (`select_idle_cpu`
/// wraps around from `target`), `sched_balance_find_dst_group` / `find_idlest_group` compare
/// loads and utilisation that differ by the jitter of the moment, and the periodic balancer's
/// busiest/idlest choice among equal groups depends on which CPU runs the softirq first. A
/// simulator that always takes the lowest id makes every seed place alike; real runs do not.
pub type Tie<'a> = &'a mut dyn FnMut(usize) -> usize;

/// Length of a timeslice when tasks share a CPU, ns: 3 ms, EEVDF's `sysctl_sched_base_slice`
/// (0.75 ms x (1 + ilog2(min(CPUs, 8))) = 3 ms on machines of 8 or more CPUs; kernel/sched/fair.c,
/// 6.6+). Counts schedstat's switch-ins in the fluid model: a task sharing its CPU is switched in
/// once per slice it runs; a task alone on its CPU only when it starts, wakes (once per epoch when
/// its duty is below 1) or changes CPU. Prevents a constant "0 timeslices" that no live task shows.
pub const BASE_SLICE_NS: u64 = 3_000_000;

impl Sched {
    /// Builds the domain levels of the machine of `k`.
    pub fn new(k: &Kernel) -> Self {
        let topo = &k.topo;
        let online: Vec<&numapilot_topology::Cpu> = topo.cpus.iter().filter(|c| c.online).collect();
        // Online CPUs of each node in one walk (a walk over all CPUs per node was nodes x CPUs).
        let mut by_node: HashMap<u32, Vec<u32>> = HashMap::new();
        for c in &online {
            crate::work::count("sched.node_cpus_looked_at", 1);
            by_node.entry(c.node).or_default().push(c.id);
        }
        let node_cpus = |nid: u32| -> Vec<u32> { by_node.get(&nid).cloned().unwrap_or_default() };
        let mut levels = Vec::new();
        // machine: groups = nodes with CPUs.
        let nodes: Vec<Vec<u32>> =
            topo.nodes.iter().map(|n| node_cpus(n.id)).filter(|g: &Vec<u32>| !g.is_empty()).collect();
        levels.push(Level { name: "machine", imbalance_pct: NUMA_IMBALANCE, domains: vec![nodes.clone()] });
        // package: nodes grouped by package.
        let mut packages: std::collections::BTreeMap<u32, Vec<Vec<u32>>> = Default::default();
        for g in &nodes {
            let pkg = topo.cpu(g[0]).map_or(0, |c| c.package);
            packages.entry(pkg).or_default().push(g.clone());
        }
        levels.push(Level {
            name: "package",
            imbalance_pct: NUMA_IMBALANCE,
            domains: packages.into_values().collect(),
        });
        // node: groups = LLCs of the node.
        let mut node_domains = Vec::new();
        let mut llc_domains = Vec::new();
        let mut core_domains = Vec::new();
        for g in &nodes {
            // The CPUs of the node in each distinct LLC set, found once per set from its members
            // (CPUs of one LLC share its set): testing every CPU of the node against each CPU's
            // set was the square of the node's CPUs (1,024 a node: a million tests each). The
            // node's CPUs come in id order, as a set's members do.
            let whole: CpuSet = g.iter().copied().collect();
            let mut llcs: Vec<Vec<u32>> = Vec::new();
            let mut sets_done: HashSet<&CpuSet> = HashSet::new();
            for &c in g {
                let cpu = topo.cpu(c).expect("online cpu");
                let set = cpu.llc.as_ref().unwrap_or(&whole);
                if !sets_done.insert(set) {
                    continue;
                }
                crate::work::count("sched.llc_members_tested", set.len() as u64);
                let members: Vec<u32> = set.iter().filter(|&x| whole.contains(x)).collect();
                if !llcs.contains(&members) {
                    llcs.push(members);
                }
            }
            for l in &llcs {
                // Likewise the cores: the LLC's CPUs among a CPU's siblings and itself, once per
                // distinct siblings set that holds its CPU.
                let lset: CpuSet = l.iter().copied().collect();
                let mut cores: Vec<Vec<u32>> = Vec::new();
                let mut sibs_done: HashSet<&CpuSet> = HashSet::new();
                for &c in l {
                    let sib = &topo.cpu(c).expect("online cpu").siblings;
                    let holds_c = sib.contains(c);
                    if holds_c && !sibs_done.insert(sib) {
                        continue;
                    }
                    crate::work::count("sched.core_members_tested", sib.len() as u64);
                    let mut members: Vec<u32> = sib.iter().filter(|&x| lset.contains(x)).collect();
                    if !holds_c {
                        members.insert(members.partition_point(|&x| x < c), c);
                    }
                    if !cores.contains(&members) {
                        cores.push(members);
                    }
                }
                for core in &cores {
                    core_domains.push(core.iter().map(|&c| vec![c]).collect());
                }
                llc_domains.push(cores);
            }
            node_domains.push(llcs);
        }
        levels.push(Level { name: "node", imbalance_pct: LLC_IMBALANCE, domains: node_domains });
        levels.push(Level { name: "llc", imbalance_pct: LLC_IMBALANCE, domains: llc_domains });
        levels.push(Level { name: "core", imbalance_pct: SMT_IMBALANCE, domains: core_domains });
        for l in &mut levels {
            l.domains.retain(|d| d.len() > 1);
        }
        levels.retain(|l| !l.domains.is_empty());
        Self { levels }
    }

    /// Per-CPU load (sum of queued running tasks' duty), indexed by CPU id.
    pub fn loads(k: &Kernel) -> Vec<f64> {
        let mut load = vec![0.0; k.cpu_node.len()];
        for t in &k.tasks {
            if t.state == TaskState::Running {
                load[t.cpu as usize] += t.duty;
            }
        }
        load
    }

    /// CPU placement of a new task (fork/exec balancing): top-down, the idlest group at each level
    /// among those the task may run on, then the idlest allowed CPU. Among equally idle groups or
    /// CPUs, `tie(n)` picks one of the `n` equals (in id order); see [`Tie`].
    pub fn place_new(&self, k: &Kernel, allowed: &CpuSet, tie: Tie<'_>) -> Option<u32> {
        let load = Self::loads(k);
        let mut candidates: Vec<u32> = allowed.iter().filter(|&c| (c as usize) < load.len()).collect();
        candidates.retain(|&c| k.topo.cpu(c).is_some_and(|x| x.online));
        if candidates.is_empty() {
            return None;
        }
        for level in &self.levels {
            for d in &level.domains {
                // Only the domain containing the current candidates narrows them.
                if !d.iter().flatten().any(|c| candidates.contains(c)) {
                    continue;
                }
                let mut groups: Vec<(f64, usize)> = Vec::new();
                for (gi, g) in d.iter().enumerate() {
                    if !g.iter().any(|c| candidates.contains(c)) {
                        continue;
                    }
                    let per_cpu = g.iter().map(|&c| load[c as usize]).sum::<f64>() / g.len() as f64;
                    groups.push((per_cpu, gi));
                }
                let best = groups.iter().map(|g| g.0).fold(f64::INFINITY, f64::min);
                let equals: Vec<usize> = groups.iter().filter(|g| g.0 <= best + 1e-12).map(|g| g.1).collect();
                if !equals.is_empty() {
                    let gi = equals[tie(equals.len()).min(equals.len() - 1)];
                    candidates.retain(|c| d[gi].contains(c));
                }
                break;
            }
        }
        let best = candidates.iter().map(|&c| load[c as usize]).fold(f64::INFINITY, f64::min);
        candidates.retain(|&c| load[c as usize] <= best + 1e-12);
        let i = tie(candidates.len()).min(candidates.len() - 1);
        Some(candidates[i])
    }

    /// One load-balancing pass over all levels. `preferred(task)` gives the task's preferred node
    /// when NUMA balancing is on (`None` otherwise). Returns the number of task moves.
    /// Among equally loaded groups or CPUs, `tie(n)` picks one of the `n` equals (see [`Tie`]).
    pub fn balance(&self, k: &mut Kernel, preferred: &dyn Fn(usize) -> Option<u32>, tie: Tie<'_>) -> usize {
        let mut load = Self::loads(k);
        // Running tasks per CPU, in task order.
        let mut queued: Vec<Vec<usize>> = vec![Vec::new(); load.len()];
        for (i, t) in k.tasks.iter().enumerate() {
            if t.state == TaskState::Running {
                queued[t.cpu as usize].push(i);
            }
        }
        let mut moves = 0;
        for level in &self.levels {
            for d in &level.domains {
                for _ in 0..MAX_MOVES_PER_DOMAIN {
                    let per_cpu: Vec<f64> =
                        d.iter().map(|g| g.iter().map(|&c| load[c as usize]).sum::<f64>() / g.len() as f64).collect();
                    let busiest = argmax(&per_cpu, tie);
                    // Idlest group first; groups none of the busiest's tasks may run in are
                    // skipped (the kernel's LBF_SOME_PINNED retry).
                    let mut order: Vec<usize> = (0..d.len()).filter(|&g| g != busiest).collect();
                    order.sort_by(|&a, &b| {
                        per_cpu[a].partial_cmp(&per_cpu[b]).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b))
                    });
                    shuffle_ties(&mut order, &|g| per_cpu[g], tie);
                    let mut chosen = None;
                    for idlest in order {
                        if per_cpu[busiest] <= per_cpu[idlest] * level.imbalance_pct + 1e-9 {
                            break;
                        }
                        let Some((task, dst)) = pick(k, d, busiest, idlest, &load, &queued, preferred, tie) else {
                            continue;
                        };
                        let duty = k.tasks[task].duty;
                        let after_b = per_cpu[busiest] - duty / d[busiest].len() as f64;
                        let after_i = per_cpu[idlest] + duty / d[idlest].len() as f64;
                        if after_b.max(after_i) < per_cpu[busiest] - 1e-9 {
                            chosen = Some((task, dst));
                            break;
                        }
                    }
                    let Some((task, dst)) = chosen else { break };
                    let duty = k.tasks[task].duty;
                    let src = k.tasks[task].cpu;
                    queued[src as usize].retain(|&t| t != task);
                    queued[dst as usize].push(task);
                    load[src as usize] -= duty;
                    load[dst as usize] += duty;
                    let t = &mut k.tasks[task];
                    t.cpu = dst;
                    t.cpu_migrations += 1;
                    moves += 1;
                }
            }
        }
        moves
    }

    /// CPU share of every task this epoch (0 for tasks not running), and the busy fraction of every
    /// CPU (for SMT sharing), indexed by task and by CPU id.
    pub fn shares(k: &Kernel) -> (Vec<f64>, Vec<f64>) {
        let load = Self::loads(k);
        let share = k
            .tasks
            .iter()
            .map(|t| if t.state == TaskState::Running { t.duty * (1.0 / load[t.cpu as usize]).min(1.0) } else { 0.0 })
            .collect();
        let busy = load.iter().map(|l| l.min(1.0)).collect();
        (share, busy)
    }
}

/// Index of the largest value; among equal largest values `tie` picks one (no allocation: this
/// runs for every domain of every balancing pass).
fn argmax(v: &[f64], tie: Tie<'_>) -> usize {
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let equal = |i: &usize| v[*i] >= max - 1e-12;
    let n = (0..v.len()).filter(equal).count();
    let k = if n > 1 { tie(n).min(n - 1) } else { 0 };
    (0..v.len()).filter(equal).nth(k).unwrap_or(0)
}

/// Reorders each run of equal keys in `items` (already sorted by `key`) by `tie` draws
/// (Fisher-Yates within the run): equals end in a seed-dependent order, unequal ones keep theirs.
fn shuffle_ties(items: &mut [usize], key: &dyn Fn(usize) -> f64, tie: Tie<'_>) {
    let mut start = 0;
    while start < items.len() {
        let k0 = key(items[start]);
        let mut end = start + 1;
        while end < items.len() && (key(items[end]) - k0).abs() <= 1e-12 {
            end += 1;
        }
        for i in (start + 1..end).rev() {
            let j = start + tie(i - start + 1).min(i - start);
            items.swap(i, j);
        }
        start = end;
    }
}

/// The least loaded CPU of `cpus` that `allowed` admits; among equally loaded ones `tie` picks.
fn least_loaded(cpus: &[u32], allowed: &CpuSet, load: &[f64], tie: Tie<'_>) -> Option<u32> {
    let ok = || cpus.iter().copied().filter(|&c| allowed.contains(c));
    let best = ok().map(|c| load[c as usize]).fold(f64::INFINITY, f64::min);
    let equal = |c: &u32| load[*c as usize] <= best + 1e-12;
    let n = ok().filter(equal).count();
    let k = if n > 1 { tie(n).min(n - 1) } else { 0 };
    ok().filter(equal).nth(k)
}

/// Chooses a task of group `busiest` that may run in group `idlest`, and its destination CPU.
#[allow(clippy::too_many_arguments)] // the pass's state, borrowed piecewise (the caller mutates it between picks)
fn pick(
    k: &Kernel,
    d: &[Vec<u32>],
    busiest: usize,
    idlest: usize,
    load: &[f64],
    queued: &[Vec<usize>],
    preferred: &dyn Fn(usize) -> Option<u32>,
    tie: Tie<'_>,
) -> Option<(usize, u32)> {
    let mut src_cpus: Vec<usize> = d[busiest].iter().map(|&c| c as usize).collect();
    src_cpus.sort_by(|&a, &b| load[b].partial_cmp(&load[a]).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b)));
    shuffle_ties(&mut src_cpus, &|c| load[c], tie);
    for src in src_cpus {
        let src = src as u32;
        for &task in queued[src as usize].iter().rev() {
            let t = &k.tasks[task];
            let Some(dst) = least_loaded(&d[idlest], &t.allowed, load, tie) else { continue };
            if let Some(pref) = preferred(task) {
                let src_node = k.node_of_cpu(src);
                let dst_node = k.node_of_cpu(dst);
                if src_node == pref && dst_node != pref {
                    continue;
                }
            }
            return Some((task, dst));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{Proc, Task};
    use numapilot_topology::Topology;

    fn kernel_with_tasks(preset: &str, n: usize, allowed: Option<CpuSet>) -> Kernel {
        let t = Topology::preset(preset).unwrap();
        let mut k = Kernel::new(&t);
        let all = allowed.unwrap_or_else(|| t.online_cpus());
        k.procs.push(Proc {
            cpuset: None,
            pid: 1000,
            comm: "p".into(),
            starttime: 0,
            start_ns: 0,
            first_region: 0,
            regions: vec![],
            addrs: vec![],
            tasks: (0..n).collect(),
        });
        for i in 0..n {
            k.tasks.push(Task::new(1000 + i as u32, 0, 0, i as u32, all.first().unwrap(), all.clone()));
        }
        k
    }

    #[test]
    fn balancer_spreads_over_nodes_then_cores() {
        // 12 tasks all on CPU 0 of a 2-node, 6-core-per-node SMT2 box: one per core at the end.
        let mut k = kernel_with_tasks("autonuma-2s12c-24g", 12, None);
        let s = Sched::new(&k);
        s.balance(&mut k, &|_| None, &mut |_| 0);
        let mut per_core = std::collections::BTreeMap::new();
        for t in &k.tasks {
            let c = k.topo.cpu(t.cpu).unwrap();
            *per_core.entry((c.package, c.core)).or_insert(0) += 1;
        }
        assert_eq!(per_core.len(), 12, "one task per core: {per_core:?}");
        let on0 = k.tasks.iter().filter(|t| k.node_of_cpu(t.cpu) == 0).count();
        assert_eq!(on0, 6);
    }

    #[test]
    fn fork_placement_fills_idle_cpus_across_nodes() {
        let mut k = kernel_with_tasks("autonuma-2s12c-24g", 0, None);
        let s = Sched::new(&k);
        let all = k.topo.online_cpus();
        let mut seen = Vec::new();
        for i in 0..24u32 {
            let cpu = s.place_new(&k, &all, &mut |_| 0).unwrap();
            seen.push(cpu);
            k.tasks.push(Task::new(i, 0, 0, i, cpu, all.clone()));
        }
        seen.sort();
        assert_eq!(seen, (0..24).collect::<Vec<_>>(), "every CPU used once");
    }

    #[test]
    fn ties_pick_among_equals_only() {
        // 12 tasks on the 12 cores of 24 CPUs: whichever equal CPU the tie-break takes, one task
        // per core and 6 per node; lowest-first and highest-first give different CPUs.
        // The (package, core) of every task's CPU.
        let cores = |k: &Kernel| -> std::collections::BTreeSet<(u32, u32)> {
            k.tasks
                .iter()
                .map(|t| {
                    let c = k.topo.cpu(t.cpu).unwrap();
                    (c.package, c.core)
                })
                .collect()
        };
        let place = |tie: &mut dyn FnMut(usize) -> usize| -> Vec<u32> {
            let mut k = kernel_with_tasks("autonuma-2s12c-24g", 0, None);
            let s = Sched::new(&k);
            let all = k.topo.online_cpus();
            for i in 0..12u32 {
                let cpu = s.place_new(&k, &all, tie).unwrap();
                k.tasks.push(Task::new(i, 0, 0, i, cpu, all.clone()));
            }
            assert_eq!(cores(&k).len(), 12, "one task per core");
            assert_eq!(k.tasks.iter().filter(|t| k.node_of_cpu(t.cpu) == 0).count(), 6);
            let mut cpus: Vec<u32> = k.tasks.iter().map(|t| t.cpu).collect();
            cpus.sort();
            cpus
        };
        let low = place(&mut |_| 0);
        let high = place(&mut |n| n - 1);
        assert_ne!(low, high);
        // The balancer with ties: still one task per core from a pile on CPU 0.
        let mut k = kernel_with_tasks("autonuma-2s12c-24g", 12, None);
        let s = Sched::new(&k);
        s.balance(&mut k, &|_| None, &mut |n| n - 1);
        assert_eq!(cores(&k).len(), 12);
    }

    #[test]
    fn affinity_is_honoured_and_oversubscription_time_slices() {
        // 6 tasks allowed only CPUs 0-1: the balancer cannot move them elsewhere; each gets 1/3.
        let allowed = CpuSet::parse_list("0-1").unwrap();
        let mut k = kernel_with_tasks("autonuma-2s12c-24g", 6, Some(allowed.clone()));
        let s = Sched::new(&k);
        s.balance(&mut k, &|_| None, &mut |_| 0);
        assert!(k.tasks.iter().all(|t| allowed.contains(t.cpu)));
        let (share, _) = Sched::shares(&k);
        let total: f64 = share.iter().sum();
        assert!((total - 2.0).abs() < 1e-9, "two CPUs' worth shared: {total}");
        assert!(share.iter().all(|&s| (s - 1.0 / 3.0).abs() < 1e-9), "{share:?}");
    }

    #[test]
    fn preferred_node_is_not_left() {
        let mut k = kernel_with_tasks("autonuma-2s12c-24g", 12, Some(CpuSet::parse_list("0-23").unwrap()));
        // All on node 0 (CPU 0); every task prefers node 0: the machine level moves nothing off it.
        let s = Sched::new(&k);
        s.balance(&mut k, &|_| Some(0), &mut |_| 0);
        assert!(k.tasks.iter().all(|t| k.node_of_cpu(t.cpu) == 0));
    }

    /// The domains as [`Sched::new`] first built them: every CPU of a node tested against each of
    /// its CPUs' LLC sets, every CPU of an LLC against each of its CPUs' siblings.
    fn reference_domains(k: &Kernel) -> Vec<(&'static str, Vec<Vec<Vec<u32>>>)> {
        let topo = &k.topo;
        let online: Vec<&numapilot_topology::Cpu> = topo.cpus.iter().filter(|c| c.online).collect();
        let node_cpus = |nid: u32| -> Vec<u32> { online.iter().filter(|c| c.node == nid).map(|c| c.id).collect() };
        let nodes: Vec<Vec<u32>> =
            topo.nodes.iter().map(|n| node_cpus(n.id)).filter(|g: &Vec<u32>| !g.is_empty()).collect();
        let mut packages: std::collections::BTreeMap<u32, Vec<Vec<u32>>> = Default::default();
        for g in &nodes {
            packages.entry(topo.cpu(g[0]).map_or(0, |c| c.package)).or_default().push(g.clone());
        }
        let mut levels = vec![("machine", vec![nodes.clone()]), ("package", packages.into_values().collect())];
        let (mut node_domains, mut llc_domains, mut core_domains) = (Vec::new(), Vec::new(), Vec::new());
        for g in &nodes {
            let mut llcs: Vec<Vec<u32>> = Vec::new();
            for &c in g {
                let set: CpuSet = topo.cpu(c).unwrap().llc.clone().unwrap_or_else(|| g.iter().copied().collect());
                let members: Vec<u32> = g.iter().copied().filter(|x| set.contains(*x)).collect();
                if !llcs.contains(&members) {
                    llcs.push(members);
                }
            }
            for l in &llcs {
                let mut cores: Vec<Vec<u32>> = Vec::new();
                for &c in l {
                    let sib = &topo.cpu(c).unwrap().siblings;
                    let members: Vec<u32> = l.iter().copied().filter(|x| sib.contains(*x) || *x == c).collect();
                    if !cores.contains(&members) {
                        cores.push(members);
                    }
                }
                for core in &cores {
                    core_domains.push(core.iter().map(|&c| vec![c]).collect());
                }
                llc_domains.push(cores);
            }
            node_domains.push(llcs);
        }
        levels.extend([("node", node_domains), ("llc", llc_domains), ("core", core_domains)]);
        for l in &mut levels {
            l.1.retain(|d: &Vec<Vec<u32>>| d.len() > 1);
        }
        levels.retain(|l| !l.1.is_empty());
        levels
    }

    #[test]
    fn domains_are_the_reference_ones() {
        let domains = |k: &Kernel| Sched::new(k).levels.into_iter().map(|l| (l.name, l.domains)).collect::<Vec<_>>();
        for name in numapilot_topology::presets::names() {
            let k = Kernel::new(&Topology::preset(name).unwrap());
            assert_eq!(domains(&k), reference_domains(&k), "{name}");
        }
        // Odd machines: CPUs without LLC information, an LLC set reaching into another node,
        // siblings sets without their own CPU or naming CPUs of another LLC, CPUs offline.
        let mut t = Topology::preset("article-4n96").unwrap();
        for c in &mut t.cpus {
            match c.id % 7 {
                0 => c.llc = None,
                1 => c.llc = Some((0..40).collect()),
                2 => c.siblings = std::iter::once(c.id + 1).collect(),
                3 => c.siblings = [c.id, c.id + 20, 95].into_iter().collect(),
                4 if c.id > 60 => c.online = false,
                _ => {}
            }
        }
        let k = Kernel::new(&t);
        assert_eq!(domains(&k), reference_domains(&k), "odd machine");
    }
}
