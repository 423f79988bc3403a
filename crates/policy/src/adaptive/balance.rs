//! Rule 3: balancing, weakest affinity first (NUMA-ICON: "sort tasks by how strongly they access
//! this node's memory; the weakest migrate first; a task on its best node stays unless the node is
//! a bottleneck").
//!
//! ```text
//!   load(n) = (fixed(n) + planned task CPU on n) / capacity(n)   (see place.rs: cores or CPUs)
//!   while load(busiest) - load(idlest) > imbalance and load(busiest) > 1
//!   (demand = run time + run delay, so > 1 means tasks wait for a CPU):
//!       candidates on busiest: not held, not class-bound, CPU > 0, not of a process whose pages
//!                              are moving (moves-in-flight), busiest is not their preferred
//!                              node (or it is a CPU bottleneck by managed demand alone: planned
//!                              task CPU there > capacity; unmanaged load, memory bandwidth and
//!                              IO do not excuse moving a task away from its memory, and the
//!                              overload the move relieves, min(task CPU, planned - capacity),
//!                              must be >= task CPU x its share there x remote_access_cost:
//!                              worth-its-locality), and the move narrows the gap
//!       strength(task, n) = access share of the task on n
//!                         + mean affinity (graph edge or address-space prior) to the members of
//!                           its unit planned on n
//!       move the weakest (then the lightest, then the lowest key) to the node with room for it
//!       (planned load with it <= 1) holding most of its accesses, then the nearest to its
//!       preferred node, then the idlest; to the idlest node when none has room
//!       (balance-towards-memory)
//! ```
//!
//! balance-towards-memory: a task moved off an overloaded node whose memory is elsewhere goes to
//! its memory (or next to it) when that node has a CPU for it, not to whichever node is idlest.
//! The idlest may be another server (distance 160-200 on numaconnect-288c, ~11 x local latency)
//! whose memory is full, where the task's memory can neither stay near nor follow: on the VM mix
//! (`numapilot sim --machine numaconnect-288c --workload vm-mix --duration 20 --seeds 3`), 58 of
//! the 256 vCPUs ended on a node the balancer had chosen, holding 55 of the 78 thread-equivalents
//! of remote accesses (measured at 20 s, seed 1); with the rule the mix ran 1.425 x default
//! instead of 1.248 x (hard-bind 1.571 x; measured when the rule came in, the evidence section of
//! README.md has the current figure), every other evidence row unchanged.
//!
//! A task moved here comes back to its unit's node only when that node, with it, is planned
//! within its capacity less the slack allowed above (load <= 1 - that slack / capacity: the band
//! between moving out and coming back, balance-stays-band; balance-stays in place.rs; the task
//! counted at the larger of
//! its CPU now and its CPU when moved, since a light thread that waited behind busy workers reads
//! near zero once it waits no more): its hold alone would end after
//! `hold_periods` (or when a light task's CPU changes by half) and the unit's placement would pull
//! it back onto the node it was moved off, to be moved out again.
//!
//! The group placement already respects capacity, so this acts on what it could not place without
//! overload: units no node had room for (or whose other nodes refused them as memory or IO
//! bottlenecks: a thread may still run there, its memory stays), held units, unmanaged load. Each
//! move is a per-thread `SetAffinity`.

use std::collections::HashMap;

use numapilot_model::{ProcessClass, TaskKey};
use numapilot_observe::parse::numa_maps::FxBuild;

use super::place::{pct, Planner, UnitKind};
use super::Adaptive;
use crate::action::Reason;

/// Strength of the relation between two tasks: the stored edge, or the address-space prior for
/// threads of one process, whichever is larger (the model's `AffinityGraph::strength`, computed
/// here from the public edges).
fn strength(p: &Planner<'_>, a: TaskKey, b: TaskKey, counted: bool) -> f64 {
    let m = p.model;
    let key = if a < b { (a, b) } else { (b, a) };
    if counted {
        crate::work::count("balance.mate_terms", 1);
    }
    let edge = m.graph.edges.get(&key).map_or(0.0, |e| e.strength);
    let prior = if a.pid == b.pid { m.tunables.address_space_prior } else { 0.0 };
    edge.max(prior)
}

/// Node (dense) a planned task counts on: its current node (`cur`) when the plan allows it, else
/// the plan's first node.
fn counted_on(cur: Option<usize>, nodes: &[usize]) -> Option<usize> {
    match cur {
        Some(c) if nodes.contains(&c) => Some(c),
        _ => nodes.first().copied(),
    }
}

/// What does not change while the balancer runs about a task it may move: its unit, the access
/// shares it goes by and its preferred node.
struct Movable<'a> {
    unit: usize,
    share: &'a [f64],
    preferred: Option<usize>,
}

/// A task's mean affinity to the members of its unit counted on one node, with how many there
/// are, and what it was computed for: that node and the unit's move count then.
#[derive(Clone, Copy)]
struct Mates {
    node: usize,
    version: u64,
    strength: f64,
    count: usize,
}

/// The best candidate of a pass so far.
struct Best {
    s: f64,
    cpu: f64,
    pos: usize,
    dest: usize,
    roomy: Option<usize>,
    preferred: usize,
    mates: Mates,
}

/// Mean strength of task `x` to the other tasks of unit `u` counted on node `b`, each looked up,
/// added up in the unit's order. `counted`: count the lookups (`crate::work`; not when checking
/// the count-based figure in debug builds).
#[allow(clippy::too_many_arguments)]
fn mean_strength(
    p: &Planner<'_>,
    x: usize,
    u: usize,
    b: usize,
    keys: &[TaskKey],
    unit_pos: &[Vec<Option<usize>>],
    on: &[Option<usize>],
    counted: bool,
) -> Mates {
    let on_b = unit_pos[u].iter().flatten().copied().filter(|&y| y != x && on[y] == Some(b));
    let count = on_b.clone().count();
    let strength =
        if count == 0 { 0.0 } else { on_b.map(|y| strength(p, keys[x], keys[y], counted)).sum::<f64>() / count as f64 };
    Mates { node: b, version: 0, strength, count }
}

/// Sum of `cpu` over the tasks at `members` (in key order), after `fixed`: a node's planned
/// demand, added up in the same order whichever node changed.
fn demand_of(fixed: f64, members: &[usize], cpu: &[f64]) -> f64 {
    let mut d = fixed;
    for &x in members {
        d += cpu[x];
    }
    d
}

/// Moves tasks from the busiest to the idlest node until the planned loads are within
/// `imbalance`.
///
/// Cost: one pass per move over the tasks counted on the busiest node. What a pass needs of every
/// task that does not change between passes (its unit, shares, preferred node, current node) is
/// found once; a task's mean affinity to its unit's members on the busiest node is kept until one
/// of that unit's tasks moves; the reason is written for the chosen task only; each node's demand
/// is added up again only when a task left or joined it. A pass used to cost the tasks times their
/// unit's size, with two strings formatted per candidate: 9.4 s for one process of 10,000
/// threads on 4 nodes.
pub(crate) fn balance(p: &mut Planner<'_>, policy: &Adaptive) {
    let m = p.model;
    let t = &m.tunables;
    if p.cpu_nodes.len() < 2 {
        return;
    }
    let n = m.topo.nodes.len();
    // Every planned task by position in key order; only `on` changes, for the task moved.
    let keys: Vec<TaskKey> = p.task_plan.keys().copied().collect();
    let cpu: Vec<f64> = p.task_plan.values().map(|tp| tp.cpu).collect();
    let cur: Vec<Option<usize>> = keys.iter().map(|k| p.task_idx(k)).collect();
    let mut on: Vec<Option<usize>> = p.task_plan.values().zip(&cur).map(|(tp, &c)| counted_on(c, &tp.nodes)).collect();
    let movable: Vec<Option<Movable<'_>>> = keys
        .iter()
        .zip(p.task_plan.values())
        .map(|(k, tp)| {
            // A thread of a process whose pages are moving stays where the move takes them until
            // it ends (moves-in-flight): its access shares still name the nodes the pages leave,
            // and balance-towards-memory sent it there (the rig's 4-node numa01 with
            // stalled-by-own-move: the moving process's main thread sent back to the first
            // process's node, which then shed a worker, and that process and its memory followed).
            if tp.held || tp.cpu <= 0.0 || policy.moving.contains_key(&k.pid) {
                return None;
            }
            let u = &p.units[tp.unit];
            if !matches!(u.kind, UnitKind::Group(_) | UnitKind::Process(ProcessClass::Unclassified)) {
                return None;
            }
            let tv = m.tasks.get(k)?;
            // The task's preferred node: its own accesses, else its unit's.
            let own: f64 = tv.access.iter().sum();
            let share: &[f64] = if own > 0.0 { &tv.access } else { &u.share };
            let preferred = p.cpu_nodes.iter().copied().max_by(|&x, &y| share[x].total_cmp(&share[y]).then(y.cmp(&x)));
            Some(Movable { unit: tp.unit, share, preferred })
        })
        .collect();
    // Each unit's tasks by position (in the unit's order; `None` for one not planned), and the
    // units each position belongs to, with how many times.
    let pos = |k: &TaskKey| keys.binary_search(k).ok();
    let unit_pos: Vec<Vec<Option<usize>>> = p.units.iter().map(|u| u.tasks.iter().map(pos).collect()).collect();
    let mut units_of: Vec<Vec<(usize, u32)>> = vec![Vec::new(); keys.len()];
    for (ui, ps) in unit_pos.iter().enumerate() {
        for x in ps.iter().flatten() {
            match units_of[*x].last_mut() {
                Some((u, occ)) if *u == ui => *occ += 1,
                _ => units_of[*x].push((ui, 1)),
            }
        }
    }
    // A task without an edge relates to each mate by the address-space prior alone (or not at
    // all, for another process's): its mean strength follows from how many of its unit's tasks,
    // and how many of its own process, are on the node, kept up to date as tasks move.
    let mut has_edge = vec![false; keys.len()];
    for (a, b) in m.graph.edges.keys() {
        for x in [pos(a), pos(b)].into_iter().flatten() {
            has_edge[x] = true;
        }
    }
    let mut on_unit: HashMap<(usize, usize), u32, FxBuild> = HashMap::default();
    let mut on_unit_pid: HashMap<(usize, usize, u32), u32, FxBuild> = HashMap::default();
    for (ui, ps) in unit_pos.iter().enumerate() {
        for &y in ps.iter().flatten() {
            if let Some(c) = on[y] {
                *on_unit.entry((ui, c)).or_insert(0) += 1;
                *on_unit_pid.entry((ui, c, keys[y].pid)).or_insert(0) += 1;
            }
        }
    }
    let prior = 0.0f64.max(t.address_space_prior);
    // `sums[c]`: c priors added up in order (`sums[0]` is never read).
    let mut sums: Vec<f64> = vec![-0.0];
    // For a task with edges, its mates' mean strength, kept until one of its unit's tasks moves.
    let mut version = vec![0u64; p.units.len()];
    let mut mates: Vec<Option<Mates>> = vec![None; keys.len()];
    // The positions counted on each node, in key order, and each node's demand.
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (x, c) in on.iter().enumerate() {
        if let Some(c) = c {
            members[*c].push(x);
        }
    }
    let mut demand: Vec<f64> = (0..n).map(|c| demand_of(p.fixed[c], &members[c], &cpu)).collect();
    // A confined unit's nodes as a mask (the others may go to every node with CPUs).
    let mut reach_mask: Vec<Option<Vec<bool>>> = vec![None; p.units.len()];
    for _ in 0..keys.len() {
        let load: Vec<f64> = (0..n).map(|i| if p.cap[i] > 0.0 { demand[i] / p.cap[i] } else { 0.0 }).collect();
        let busiest = p.cpu_nodes.iter().copied().max_by(|&a, &b| load[a].total_cmp(&load[b]).then(b.cmp(&a)));
        let idlest = p.cpu_nodes.iter().copied().min_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)));
        let (Some(b), Some(i)) = (busiest, idlest) else { return };
        let gap = load[b] - load[i];
        // A busiest node whose demand (run time + run delay) fits its capacity has a CPU for every
        // task: moving one off gains nothing and splits its group from its memory.
        if gap <= t.imbalance || load[b] <= 1.0 {
            return;
        }
        // The bottleneck that excuses moving a task off its preferred node is one the moves can
        // relieve: a CPU bottleneck whose managed (planned) demand alone exceeds the capacity.
        // Load of processes this policy does not manage (the daemon itself, pinned or excluded
        // processes, kernel threads) stays whatever moves; a memory-bandwidth or capacity
        // bottleneck stays with the memory, which the task leaves behind; IO is not CPU.
        let movable_b = demand[b] - p.fixed[b];
        let b_bottleneck = m.nodes.get(b).is_some_and(|l| l.cpu.bottleneck)
            && movable_b > p.cap[b] + super::place::RATE_SLACK_CPU_PER_TASK * members[b].len() as f64;
        let mut best: Option<Best> = None;
        for &x in &members[b] {
            crate::work::count("balance.candidates", 1);
            let Some(mv) = &movable[x] else { continue };
            let (share, tcpu) = (mv.share, cpu[x]);
            let preferred = mv.preferred.unwrap_or(b);
            if preferred == b && share[b] > 0.0 && !b_bottleneck {
                continue;
            }
            // Off its preferred node only for a real gain (worth-its-locality): the overload the
            // move relieves must pay for the locality the task gives up.
            if preferred == b && share[b] > 0.0 {
                let relieved = tcpu.min(movable_b - p.cap[b]).max(0.0);
                if relieved < tcpu * share[b] * t.remote_access_cost {
                    continue;
                }
            }
            let (nb, ni) = (load[b] - tcpu / p.cap[b], load[i] + tcpu / p.cap[i]);
            if (nb - ni).abs() >= gap {
                continue;
            }
            // Mean strength to the members of its unit planned on the busiest node.
            let u = mv.unit;
            let mt = if !has_edge[x] {
                // Every term is the prior (a thread of its process) or 0; added up in any order
                // that is the sum of the priors.
                let own = units_of[x].iter().find(|e| e.0 == u).map_or(0, |e| e.1);
                let count = (on_unit.get(&(u, b)).copied().unwrap_or(0) - own) as usize;
                let same = (on_unit_pid.get(&(u, b, keys[x].pid)).copied().unwrap_or(0) - own) as usize;
                while sums.len() <= same {
                    let next = sums[sums.len() - 1] + prior;
                    sums.push(next);
                }
                let sum = if same == 0 { 0.0 } else { sums[same] };
                let strength = if count == 0 { 0.0 } else { sum / count as f64 };
                debug_assert_eq!(
                    strength.to_bits(),
                    mean_strength(p, x, u, b, &keys, &unit_pos, &on, false).strength.to_bits()
                );
                Mates { node: b, version: version[u], strength, count }
            } else {
                // Kept from an earlier pass while none of the unit's tasks moved.
                match mates[x] {
                    Some(mt) if mt.node == b && mt.version == version[u] => mt,
                    _ => {
                        let mut mt = mean_strength(p, x, u, b, &keys, &unit_pos, &on, true);
                        mt.version = version[u];
                        mates[x] = Some(mt);
                        mt
                    }
                }
            };
            let s = share.get(b).copied().unwrap_or(0.0) + mt.strength;
            let better = match &best {
                None => true,
                Some(bs) => s < bs.s || (s == bs.s && (tcpu < bs.cpu || (tcpu == bs.cpu && keys[x] < keys[bs.pos]))),
            };
            if !better {
                continue;
            }
            // balance-towards-memory: the destination is the node with room for the task
            // (planned load with it <= 1) that holds most of its accesses, then the nearest to its
            // preferred node, then the idlest; the idlest only when no node has room.
            let unit = &p.units[u];
            let allowed = unit
                .reach
                .as_ref()
                .map(|r| &*reach_mask[u].get_or_insert_with(|| (0..n).map(|j| r.nodes.contains(&j)).collect()));
            let may = |j: usize| allowed.is_none_or(|a| a[j]);
            let d = &m.topo.distances;
            let roomy = p
                .cpu_nodes
                .iter()
                .copied()
                .filter(|&j| j != b && p.cap[j] > 0.0 && load[j] + tcpu / p.cap[j] <= 1.0)
                .filter(|&j| may(j))
                .min_by(|&x, &y| {
                    share[y]
                        .total_cmp(&share[x])
                        .then(d[preferred][x].cmp(&d[preferred][y]))
                        .then(load[x].total_cmp(&load[y]))
                        .then(x.cmp(&y))
                });
            let dest = roomy.unwrap_or(i);
            // confined-within-cpuset: never to a node its cpuset does not reach.
            if !p.nodes_for(unit).contains(&dest) {
                continue;
            }
            best = Some(Best { s, cpu: tcpu, pos: x, dest, roomy, preferred, mates: mt });
        }
        let Some(bs) = best else { return };
        crate::work::count("balance.moves", 1);
        let (k, x, dest, tcpu) = (keys[bs.pos], bs.pos, bs.dest, bs.cpu);
        let Some(mv) = &movable[x] else { return };
        let (share, u) = (mv.share, &p.units[mv.unit]);
        let d = &m.topo.distances;
        let to = match bs.roomy {
            None => format!("to node {} (the idlest: no node has room for it)", p.id(i)),
            Some(j) => format!(
                "to node {} (balance-towards-memory: of the nodes with room, access share {} there, distance {} from node {} where most of its accesses are; planned load with it {:.2})",
                p.id(j),
                pct(share[j]),
                d[bs.preferred][j],
                p.id(bs.preferred),
                load[j] + tcpu / p.cap[j]
            ),
        };
        crate::work::count("balance.explanations", 1);
        let why = format!(
            "node {} cpu load {:.2} vs node {} {:.2} (imbalance > {:.2}): task {} of process {} ({:.2} CPUs) has the weakest affinity to node {}: access share {} there, strength {:.2} to {} co-located members of {}; {to}",
            p.id(b),
            load[b],
            p.id(i),
            load[i],
            t.imbalance,
            k.tid,
            k.pid,
            tcpu,
            p.id(b),
            pct(share.get(b).copied().unwrap_or(0.0)),
            bs.mates.strength,
            bs.mates.count,
            u.label
        );
        if let Some(tp) = p.task_plan.get_mut(&k) {
            tp.nodes = vec![dest];
            tp.reason = Reason::new("balance-weakest-first", why);
            tp.hold_load = tcpu;
        }
        // The task now counts on `dest` (the only node of its plan): the two nodes' demand is
        // added up again, and its units' mates are found again when next asked for.
        let before = on[x];
        on[x] = counted_on(cur[x], &[dest]);
        if let Some(c) = before {
            if let Ok(at) = members[c].binary_search(&x) {
                members[c].remove(at);
            }
        }
        if let Some(c) = on[x] {
            if let Err(at) = members[c].binary_search(&x) {
                members[c].insert(at, x);
            }
        }
        for c in [before, on[x]].into_iter().flatten() {
            demand[c] = demand_of(p.fixed[c], &members[c], &cpu);
        }
        for &(ui, occ) in &units_of[x] {
            version[ui] += 1;
            for (c, add) in [(before, false), (on[x], true)] {
                let Some(c) = c else { continue };
                for count in [on_unit.entry((ui, c)).or_insert(0), on_unit_pid.entry((ui, c, k.pid)).or_insert(0)] {
                    *count = if add { *count + occ } else { *count - occ };
                }
            }
        }
    }
}
