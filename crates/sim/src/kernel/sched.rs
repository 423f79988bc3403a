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
//! CPU (CFS shares time equally among equal-weight runnable tasks).
//!
//! # Limits
//!
//! One nice level, no PELT averaging (loads are instantaneous), no wake-up affinity (tasks do not
//! sleep and wake on another CPU), no idle balancing between passes (a pass runs every epoch).

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

impl Sched {
    /// Builds the domain levels of the machine of `k`.
    pub fn new(k: &Kernel) -> Self {
        let topo = &k.topo;
        let online: Vec<&numapilot_topology::Cpu> = topo.cpus.iter().filter(|c| c.online).collect();
        let node_cpus = |nid: u32| -> Vec<u32> { online.iter().filter(|c| c.node == nid).map(|c| c.id).collect() };
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
            let mut llcs: Vec<Vec<u32>> = Vec::new();
            for &c in g {
                let cpu = topo.cpu(c).expect("online cpu");
                let set: CpuSet = cpu.llc.clone().unwrap_or_else(|| g.iter().copied().collect());
                let members: Vec<u32> = g.iter().copied().filter(|x| set.contains(*x)).collect();
                if !llcs.contains(&members) {
                    llcs.push(members);
                }
            }
            for l in &llcs {
                let mut cores: Vec<Vec<u32>> = Vec::new();
                for &c in l {
                    let sib = &topo.cpu(c).expect("online cpu").siblings;
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
    /// among those the task may run on, then the idlest allowed CPU; ties to the lowest id.
    pub fn place_new(&self, k: &Kernel, allowed: &CpuSet) -> Option<u32> {
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
                let mut best: Option<(f64, usize)> = None;
                for (gi, g) in d.iter().enumerate() {
                    let allowed_here: Vec<u32> = g.iter().copied().filter(|c| candidates.contains(c)).collect();
                    if allowed_here.is_empty() {
                        continue;
                    }
                    let per_cpu = g.iter().map(|&c| load[c as usize]).sum::<f64>() / g.len() as f64;
                    if best.is_none_or(|(b, _)| per_cpu < b - 1e-12) {
                        best = Some((per_cpu, gi));
                    }
                }
                if let Some((_, gi)) = best {
                    candidates.retain(|c| d[gi].contains(c));
                }
                break;
            }
        }
        candidates.into_iter().min_by(|&a, &b| {
            load[a as usize].partial_cmp(&load[b as usize]).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b))
        })
    }

    /// One load-balancing pass over all levels. `preferred(task)` gives the task's preferred node
    /// when NUMA balancing is on (`None` otherwise). Returns the number of task moves.
    pub fn balance(&self, k: &mut Kernel, preferred: &dyn Fn(usize) -> Option<u32>) -> usize {
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
                    let busiest = argmax(&per_cpu);
                    // Idlest group first; groups none of the busiest's tasks may run in are
                    // skipped (the kernel's LBF_SOME_PINNED retry).
                    let mut order: Vec<usize> = (0..d.len()).filter(|&g| g != busiest).collect();
                    order.sort_by(|&a, &b| {
                        per_cpu[a].partial_cmp(&per_cpu[b]).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b))
                    });
                    let mut chosen = None;
                    for idlest in order {
                        if per_cpu[busiest] <= per_cpu[idlest] * level.imbalance_pct + 1e-9 {
                            break;
                        }
                        let Some((task, dst)) = pick(k, d, busiest, idlest, &load, &queued, preferred) else {
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

fn argmax(v: &[f64]) -> usize {
    let mut b = 0;
    for i in 1..v.len() {
        if v[i] > v[b] + 1e-12 {
            b = i;
        }
    }
    b
}

/// Chooses a task of group `busiest` that may run in group `idlest`, and its destination CPU.
fn pick(
    k: &Kernel,
    d: &[Vec<u32>],
    busiest: usize,
    idlest: usize,
    load: &[f64],
    queued: &[Vec<usize>],
    preferred: &dyn Fn(usize) -> Option<u32>,
) -> Option<(usize, u32)> {
    let mut src_cpus: Vec<u32> = d[busiest].clone();
    src_cpus.sort_by(|&a, &b| {
        load[b as usize].partial_cmp(&load[a as usize]).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b))
    });
    for src in src_cpus {
        for &task in queued[src as usize].iter().rev() {
            let t = &k.tasks[task];
            let dst = d[idlest].iter().copied().filter(|&c| t.allowed.contains(c)).min_by(|&a, &b| {
                load[a as usize].partial_cmp(&load[b as usize]).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b))
            });
            let Some(dst) = dst else { continue };
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
        s.balance(&mut k, &|_| None);
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
            let cpu = s.place_new(&k, &all).unwrap();
            seen.push(cpu);
            k.tasks.push(Task::new(i, 0, 0, i, cpu, all.clone()));
        }
        seen.sort();
        assert_eq!(seen, (0..24).collect::<Vec<_>>(), "every CPU used once");
    }

    #[test]
    fn affinity_is_honoured_and_oversubscription_time_slices() {
        // 6 tasks allowed only CPUs 0-1: the balancer cannot move them elsewhere; each gets 1/3.
        let allowed = CpuSet::parse_list("0-1").unwrap();
        let mut k = kernel_with_tasks("autonuma-2s12c-24g", 6, Some(allowed.clone()));
        let s = Sched::new(&k);
        s.balance(&mut k, &|_| None);
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
        s.balance(&mut k, &|_| Some(0));
        assert!(k.tasks.iter().all(|t| k.node_of_cpu(t.cpu) == 0));
    }
}
