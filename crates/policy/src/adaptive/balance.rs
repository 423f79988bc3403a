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
//! counted at the larger of its CPU now and its CPU when moved, since a light thread that waited
//! behind busy workers reads near zero once it waits no more): its hold alone would end after
//! `hold_periods` (or when the task's CPU changes by more than half and by more than `imbalance` x
//! the capacity of the node it went to: hold-change-floor, `Move::change_floor`; under that the
//! change is within what the balancer itself leaves alone, and mostly the wait the move took
//! away) and the unit's placement would pull it back onto the node it was moved off, to be moved
//! out again.
//!
//! The group placement already respects capacity, so this acts on what it could not place without
//! overload: units no node had room for (or whose other nodes refused them as memory or IO
//! bottlenecks: a thread may still run there, its memory stays), held units, unmanaged load. Each
//! move is a per-thread `SetAffinity`.
//!
//! # Cost
//!
//! Every planned task's figures that do not change while the balancer runs (its unit, shares,
//! preferred node, current node) are found once. The movable tasks on a node are kept ordered by
//! (strength, CPU, key), the order the rule picks in, so a move takes the first that passes the
//! checks that depend on the loads (worth-its-locality, narrowing the gap, confinement): a pass
//! looks at the candidates it rejects and one more, not at every task on the node. A move updates
//! the order of the tasks whose strength it changed (its unit's on the two nodes); a thread
//! without an edge gets its mean strength from counts of its unit's and its process's tasks on a
//! node (the prior summed in order: the same bits as adding up the lookups, which debug builds
//! check); only the chosen task's reason is written. Without the order (a strength or CPU that is
//! not a number, whose comparisons the order cannot follow) a pass looks at every task on the
//! node, as it did before; debug builds make both picks at every pass and check they agree. The
//! balancer took 9.5 s a decision for one process of 10,000 busy threads on 4 nodes (every
//! candidate on the node scored against every mate and two strings formatted per candidate, at
//! every move), 28 ms with the order (`examples/scale --sizes 1x10000 --busy 100`).

use std::collections::{BTreeSet, HashMap};

use numapilot_model::{ProcessClass, TaskKey};
use numapilot_observe::parse::numa_maps::FxBuild;

use super::place::{pct, Planner, UnitKind};
use super::Adaptive;
use crate::action::Reason;

/// Strength of the relation between two tasks: the stored edge, or the address-space prior for
/// threads of one process, whichever is larger (the model's `AffinityGraph::strength`, computed
/// here from the public edges). `counted`: count the lookup (`crate::work`).
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
    preferred: usize,
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

/// A float as a key that orders as `<` and `==` do on numbers (-0 equal to 0); not for NaN.
fn ordered(x: f64) -> u64 {
    let b = (x + 0.0).to_bits();
    if b >> 63 == 1 {
        !b
    } else {
        b | 1 << 63
    }
}

/// A movable task's place in its node's order: strength, CPU, position (= key order).
type Rank = (u64, u64, usize);

/// A movable task as its node's order holds it.
#[derive(Clone, Copy)]
struct Entry {
    rank: Rank,
    node: usize,
    s: f64,
    mates: Mates,
    /// The node is its preferred one and it has accesses there: a candidate only when the node
    /// is a CPU bottleneck, and then only if worth-its-locality holds.
    pref: bool,
}

/// The best candidate of a pass.
struct Best {
    s: f64,
    cpu: f64,
    pos: usize,
    dest: usize,
    roomy: Option<usize>,
    mates: Mates,
}

/// What a pass goes by: the busiest and idlest nodes and the planned loads.
struct Pass {
    b: usize,
    i: usize,
    load: Vec<f64>,
    gap: f64,
    movable_b: f64,
    b_bottleneck: bool,
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

/// The balancer's tables, by task position in key order.
struct State<'a, 'm> {
    p: &'a Planner<'m>,
    keys: Vec<TaskKey>,
    cpu: Vec<f64>,
    cur: Vec<Option<usize>>,
    on: Vec<Option<usize>>,
    movable: Vec<Option<Movable<'a>>>,
    /// Each unit's tasks by position (in the unit's order; `None` for one not planned).
    unit_pos: Vec<Vec<Option<usize>>>,
    /// The units each position belongs to, with how many times.
    units_of: Vec<Vec<(usize, u32)>>,
    has_edge: Vec<bool>,
    /// Tasks of a unit, and of a unit and process, counted on a node.
    on_unit: HashMap<(usize, usize), u32, FxBuild>,
    on_unit_pid: HashMap<(usize, usize, u32), u32, FxBuild>,
    prior: f64,
    /// `sums[c]`: c priors added up in order (`sums[0]` is never read).
    sums: Vec<f64>,
    /// Moves of each unit's tasks so far, and a task with edges' mates as last found.
    version: Vec<u64>,
    mates: Vec<Option<Mates>>,
    /// The positions counted on each node, in key order, and each node's demand.
    members: Vec<Vec<usize>>,
    demand: Vec<f64>,
    /// A confined unit's nodes as a mask (the others may go to every node with CPUs).
    reach_mask: Vec<Option<Vec<bool>>>,
    /// Per node once a pass needed it: its movable tasks in order, those that do not prefer it
    /// and those that do; and each task's entry there.
    order: Vec<Option<[BTreeSet<Rank>; 2]>>,
    entry: Vec<Option<Entry>>,
    /// False once a strength or CPU was not a number: every pass looks at every task.
    ordered: bool,
}

impl<'a, 'm> State<'a, 'm> {
    /// The tables a pass needs to find the busiest and idlest nodes: every planned task's CPU,
    /// current node and node counted on, each node's tasks and demand. The rest waits for
    /// [`State::prepare`]: most decisions find the nodes balanced and move nothing.
    fn new(p: &'a Planner<'m>) -> Self {
        let n = p.model.topo.nodes.len();
        let keys: Vec<TaskKey> = p.task_plan.keys().copied().collect();
        let cpu: Vec<f64> = p.task_plan.values().map(|tp| tp.cpu).collect();
        let cur: Vec<Option<usize>> = keys.iter().map(|k| p.task_idx(k)).collect();
        let on: Vec<Option<usize>> = p.task_plan.values().zip(&cur).map(|(tp, &c)| counted_on(c, &tp.nodes)).collect();
        let mut members: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (x, c) in on.iter().enumerate() {
            if let Some(c) = c {
                members[*c].push(x);
            }
        }
        let demand: Vec<f64> = (0..n).map(|c| demand_of(p.fixed[c], &members[c], &cpu)).collect();
        Self {
            p,
            keys,
            cpu,
            cur,
            on,
            movable: Vec::new(),
            unit_pos: Vec::new(),
            units_of: Vec::new(),
            has_edge: Vec::new(),
            on_unit: HashMap::default(),
            on_unit_pid: HashMap::default(),
            prior: 0.0f64.max(p.model.tunables.address_space_prior),
            sums: vec![-0.0],
            version: Vec::new(),
            mates: Vec::new(),
            members,
            demand,
            reach_mask: Vec::new(),
            order: vec![None; n],
            entry: Vec::new(),
            ordered: true,
        }
    }

    /// The tables a move needs: which tasks may move, their units and mates.
    fn prepare(&mut self, policy: &Adaptive) {
        crate::work::count("balance.prepared", self.keys.len() as u64);
        let p = self.p;
        let m = p.model;
        let keys = &self.keys;
        self.movable = keys
            .iter()
            .zip(p.task_plan.values())
            .map(|(k, tp)| {
                // A thread of a process whose pages are moving stays where the move takes them
                // until it ends (moves-in-flight): its access shares still name the nodes the
                // pages leave, and balance-towards-memory sent it there (the rig's 4-node numa01
                // with stalled-by-own-move: the moving process's main thread sent back to the
                // first process's node, which then shed a worker, and that process and its memory
                // followed).
                if tp.held || tp.cpu <= 0.0 || policy.moving.contains_key(&k.pid) {
                    return None;
                }
                let u = &p.units[tp.unit];
                if !matches!(u.kind, UnitKind::Group(_) | UnitKind::Process(ProcessClass::Unclassified)) {
                    return None;
                }
                let tv = m.tasks.get(k)?;
                // The task's preferred node: its own accesses, else its unit's (there are at
                // least two nodes with CPUs).
                let own: f64 = tv.access.iter().sum();
                let share: &[f64] = if own > 0.0 { &tv.access } else { &u.share };
                let preferred =
                    p.cpu_nodes.iter().copied().max_by(|&x, &y| share[x].total_cmp(&share[y]).then(y.cmp(&x)))?;
                Some(Movable { unit: tp.unit, share, preferred })
            })
            .collect();
        let pos = |k: &TaskKey| keys.binary_search(k).ok();
        self.unit_pos = p.units.iter().map(|u| u.tasks.iter().map(pos).collect()).collect();
        self.units_of = vec![Vec::new(); keys.len()];
        for (ui, ps) in self.unit_pos.iter().enumerate() {
            for x in ps.iter().flatten() {
                match self.units_of[*x].last_mut() {
                    Some((u, occ)) if *u == ui => *occ += 1,
                    _ => self.units_of[*x].push((ui, 1)),
                }
            }
        }
        self.has_edge = vec![false; keys.len()];
        for (a, b) in m.graph.edges.keys() {
            for x in [pos(a), pos(b)].into_iter().flatten() {
                self.has_edge[x] = true;
            }
        }
        for (ui, ps) in self.unit_pos.iter().enumerate() {
            for &y in ps.iter().flatten() {
                if let Some(c) = self.on[y] {
                    *self.on_unit.entry((ui, c)).or_insert(0) += 1;
                    *self.on_unit_pid.entry((ui, c, keys[y].pid)).or_insert(0) += 1;
                }
            }
        }
        self.version = vec![0; p.units.len()];
        self.mates = vec![None; keys.len()];
        self.reach_mask = vec![None; p.units.len()];
        self.entry = vec![None; keys.len()];
    }

    /// Mean strength of movable task `x` to the other tasks of its unit counted on node `c`.
    fn mates_at(&mut self, x: usize, u: usize, c: usize) -> Mates {
        if !self.has_edge[x] {
            // Every term is the prior (a thread of its process) or 0; added up in any order that
            // is the sum of the priors.
            let own = self.units_of[x].iter().find(|e| e.0 == u).map_or(0, |e| e.1);
            let here =
                |n: Option<&u32>| (n.copied().unwrap_or(0) - if self.on[x] == Some(c) { own } else { 0 }) as usize;
            let count = here(self.on_unit.get(&(u, c)));
            let same = here(self.on_unit_pid.get(&(u, c, self.keys[x].pid)));
            while self.sums.len() <= same {
                let next = self.sums[self.sums.len() - 1] + self.prior;
                self.sums.push(next);
            }
            let sum = if same == 0 { 0.0 } else { self.sums[same] };
            let strength = if count == 0 { 0.0 } else { sum / count as f64 };
            debug_assert_eq!(strength.to_bits(), self.looked_up(x, u, c, false).strength.to_bits());
            return Mates { node: c, version: self.version[u], strength, count };
        }
        // Kept while none of the unit's tasks moved.
        match self.mates[x] {
            Some(mt) if mt.node == c && mt.version == self.version[u] => mt,
            _ => {
                let mt = self.looked_up(x, u, c, true);
                self.mates[x] = Some(mt);
                mt
            }
        }
    }

    /// [`State::mates_at`] by looking up each mate, added up in the unit's order.
    fn looked_up(&self, x: usize, u: usize, c: usize, counted: bool) -> Mates {
        let on_c = self.unit_pos[u].iter().flatten().copied().filter(|&y| y != x && self.on[y] == Some(c));
        let count = on_c.clone().count();
        let strength = if count == 0 {
            0.0
        } else {
            on_c.map(|y| strength(self.p, self.keys[x], self.keys[y], counted)).sum::<f64>() / count as f64
        };
        Mates { node: c, version: self.version[u], strength, count }
    }

    /// Movable task `x`'s entry on node `c` (`None` for a task the balancer never moves; clears
    /// `ordered` for a figure that is not a number).
    fn entry_at(&mut self, x: usize, c: usize) -> Option<Entry> {
        let (u, share_c, pref) = {
            let mv = self.movable[x].as_ref()?;
            let share_c = mv.share.get(c).copied().unwrap_or(0.0);
            (mv.unit, share_c, mv.preferred == c && share_c > 0.0)
        };
        let mates = self.mates_at(x, u, c);
        let s = share_c + mates.strength;
        if s.is_nan() || self.cpu[x].is_nan() {
            self.ordered = false;
            return None;
        }
        Some(Entry { rank: (ordered(s), ordered(self.cpu[x]), x), node: c, s, mates, pref })
    }

    /// Node `c`'s order, built on first use.
    fn order_of(&mut self, c: usize) -> Option<&[BTreeSet<Rank>; 2]> {
        if self.order[c].is_none() {
            let mut sets = [BTreeSet::new(), BTreeSet::new()];
            for x in self.members[c].clone() {
                if let Some(e) = self.entry_at(x, c) {
                    sets[usize::from(e.pref)].insert(e.rank);
                    self.entry[x] = Some(e);
                }
            }
            self.order[c] = Some(sets);
        }
        if self.ordered {
            self.order[c].as_ref()
        } else {
            None
        }
    }

    /// Puts task `x` in its node's order again (after its strength or node changed), when that
    /// order is kept.
    fn reorder(&mut self, x: usize) {
        if let Some(old) = self.entry[x].take() {
            if let Some(sets) = &mut self.order[old.node] {
                sets[usize::from(old.pref)].remove(&old.rank);
            }
        }
        let Some(c) = self.on[x] else { return };
        if self.order[c].is_none() {
            return;
        }
        if let Some(e) = self.entry_at(x, c) {
            if let Some(sets) = &mut self.order[c] {
                sets[usize::from(e.pref)].insert(e.rank);
            }
            self.entry[x] = Some(e);
        }
    }

    /// The pass's loads, busiest and idlest nodes; `None` when balanced.
    fn pass(&self) -> Option<Pass> {
        let (p, m) = (self.p, self.p.model);
        let n = m.topo.nodes.len();
        let load: Vec<f64> = (0..n).map(|i| if p.cap[i] > 0.0 { self.demand[i] / p.cap[i] } else { 0.0 }).collect();
        let b = p.cpu_nodes.iter().copied().max_by(|&a, &b| load[a].total_cmp(&load[b]).then(b.cmp(&a)))?;
        let i = p.cpu_nodes.iter().copied().min_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)))?;
        let gap = load[b] - load[i];
        // A busiest node whose demand (run time + run delay) fits its capacity has a CPU for every
        // task: moving one off gains nothing and splits its group from its memory.
        if gap <= m.tunables.imbalance || load[b] <= 1.0 {
            return None;
        }
        // The bottleneck that excuses moving a task off its preferred node is one the moves can
        // relieve: a CPU bottleneck whose managed (planned) demand alone exceeds the capacity.
        // Load of processes this policy does not manage (the daemon itself, pinned or excluded
        // processes, kernel threads) stays whatever moves; a memory-bandwidth or capacity
        // bottleneck stays with the memory, which the task leaves behind; IO is not CPU.
        let movable_b = self.demand[b] - p.fixed[b];
        let b_bottleneck = m.nodes.get(b).is_some_and(|l| l.cpu.bottleneck)
            && movable_b > p.cap[b] + super::place::RATE_SLACK_CPU_PER_TASK * self.members[b].len() as f64;
        Some(Pass { b, i, load, gap, movable_b, b_bottleneck })
    }

    /// Whether movable task `x` on the busiest node may leave it by the checks before its
    /// strength: not its preferred node (or a bottleneck, and worth-its-locality), and the move
    /// narrows the gap.
    fn may_leave(&self, x: usize, ps: &Pass) -> bool {
        let (p, t) = (self.p, &self.p.model.tunables);
        let Some(mv) = &self.movable[x] else { return false };
        let (share, tcpu, b) = (mv.share, self.cpu[x], ps.b);
        if mv.preferred == b && share[b] > 0.0 && !ps.b_bottleneck {
            return false;
        }
        // Off its preferred node only for a real gain (worth-its-locality): the overload the
        // move relieves must pay for the locality the task gives up.
        if mv.preferred == b && share[b] > 0.0 {
            let relieved = tcpu.min(ps.movable_b - p.cap[b]).max(0.0);
            if relieved < tcpu * share[b] * t.remote_access_cost {
                return false;
            }
        }
        let (nb, ni) = (ps.load[b] - tcpu / p.cap[b], ps.load[ps.i] + tcpu / p.cap[ps.i]);
        (nb - ni).abs() < ps.gap
    }

    /// Where movable task `x` would go (balance-towards-memory: the node with room for it,
    /// planned load with it <= 1, that holds most of its accesses, then the nearest to its
    /// preferred node, then the idlest; the idlest only when no node has room) and the node with
    /// room, if any; `None` when that is outside its cpuset (confined-within-cpuset).
    fn dest(&mut self, x: usize, ps: &Pass) -> Option<(usize, Option<usize>)> {
        let p = self.p;
        let n = p.model.topo.nodes.len();
        let mv = self.movable[x].as_ref()?;
        let (share, tcpu, preferred, u) = (mv.share, self.cpu[x], mv.preferred, mv.unit);
        let unit = &p.units[u];
        let allowed = unit
            .reach
            .as_ref()
            .map(|r| &*self.reach_mask[u].get_or_insert_with(|| (0..n).map(|j| r.nodes.contains(&j)).collect()));
        let may = |j: usize| allowed.is_none_or(|a| a[j]);
        let (d, load) = (&p.model.topo.distances, &ps.load);
        let roomy = p
            .cpu_nodes
            .iter()
            .copied()
            .filter(|&j| j != ps.b && p.cap[j] > 0.0 && load[j] + tcpu / p.cap[j] <= 1.0)
            .filter(|&j| may(j))
            .min_by(|&x, &y| {
                share[y]
                    .total_cmp(&share[x])
                    .then(d[preferred][x].cmp(&d[preferred][y]))
                    .then(load[x].total_cmp(&load[y]))
                    .then(x.cmp(&y))
            });
        let dest = roomy.unwrap_or(ps.i);
        p.nodes_for(unit).contains(&dest).then_some((dest, roomy))
    }

    /// The pass's pick by looking at every task on the busiest node in key order, keeping the
    /// weakest (then the lightest, then the lowest key) that may leave.
    fn pick_each(&mut self, ps: &Pass, counted: bool) -> Option<Best> {
        let mut best: Option<Best> = None;
        for x in self.members[ps.b].clone() {
            if counted {
                crate::work::count("balance.candidates", 1);
            }
            if !self.may_leave(x, ps) {
                continue;
            }
            let Some(mv) = &self.movable[x] else { continue };
            let (u, share_b, tcpu) = (mv.unit, mv.share.get(ps.b).copied().unwrap_or(0.0), self.cpu[x]);
            let mates = self.mates_at(x, u, ps.b);
            let s = share_b + mates.strength;
            let better = match &best {
                None => true,
                Some(bs) => {
                    s < bs.s || (s == bs.s && (tcpu < bs.cpu || (tcpu == bs.cpu && self.keys[x] < self.keys[bs.pos])))
                }
            };
            if !better {
                continue;
            }
            let Some((dest, roomy)) = self.dest(x, ps) else { continue };
            best = Some(Best { s, cpu: tcpu, pos: x, dest, roomy, mates });
        }
        best
    }

    /// The same pick from the busiest node's order: the first task that may leave. `None` for
    /// "look at each" (the order is not kept); `Some(None)` when no task may leave.
    fn pick_ordered(&mut self, ps: &Pass) -> Option<Option<Best>> {
        use std::ops::Bound::{Excluded, Unbounded};
        self.order_of(ps.b)?;
        let mut after: Option<Rank> = None;
        loop {
            // The next in the merged order of those that do not prefer the node and, when it is a
            // bottleneck, those that do.
            let sets = self.order[ps.b].as_ref()?;
            let from = after.map_or(Unbounded, Excluded);
            let next_other = sets[0].range((from, Unbounded)).next().copied();
            let next_pref = if ps.b_bottleneck { sets[1].range((from, Unbounded)).next().copied() } else { None };
            let Some(rank) = next_other.into_iter().chain(next_pref).min() else { return Some(None) };
            after = Some(rank);
            let x = rank.2;
            crate::work::count("balance.candidates", 1);
            if !self.may_leave(x, ps) {
                continue;
            }
            let Some((dest, roomy)) = self.dest(x, ps) else { continue };
            let e = self.entry[x]?;
            return Some(Some(Best { s: e.s, cpu: self.cpu[x], pos: x, dest, roomy, mates: e.mates }));
        }
    }

    /// Moves task `x` to count on `dest`: the two nodes' demand is added up again, and the tasks
    /// whose mates changed (its units' on the two nodes, and itself) take their new places.
    fn moved(&mut self, x: usize, dest: usize) {
        let before = self.on[x];
        self.on[x] = counted_on(self.cur[x], &[dest]);
        let after = self.on[x];
        if let Some(c) = before {
            if let Ok(at) = self.members[c].binary_search(&x) {
                self.members[c].remove(at);
            }
        }
        if let Some(c) = after {
            if let Err(at) = self.members[c].binary_search(&x) {
                self.members[c].insert(at, x);
            }
        }
        for c in [before, after].into_iter().flatten() {
            self.demand[c] = demand_of(self.p.fixed[c], &self.members[c], &self.cpu);
        }
        let pid = self.keys[x].pid;
        let mut affected = vec![x];
        for (ui, occ) in self.units_of[x].clone() {
            self.version[ui] += 1;
            for (c, add) in [(before, false), (after, true)] {
                let Some(c) = c else { continue };
                for count in
                    [self.on_unit.entry((ui, c)).or_insert(0), self.on_unit_pid.entry((ui, c, pid)).or_insert(0)]
                {
                    *count = if add { *count + occ } else { *count - occ };
                }
            }
            affected.extend(self.unit_pos[ui].iter().flatten().copied().filter(|&y| {
                y != x
                    && self.movable[y].as_ref().is_some_and(|mv| mv.unit == ui)
                    && (self.on[y] == before || self.on[y] == after)
            }));
        }
        for y in affected {
            self.reorder(y);
        }
    }
}

/// Moves tasks from the busiest to the idlest node until the planned loads are within
/// `imbalance` (see the module essay, and its cost).
pub(crate) fn balance(p: &mut Planner<'_>, policy: &Adaptive) {
    if p.cpu_nodes.len() < 2 {
        return;
    }
    let mut moves: Vec<(TaskKey, usize, String, f64)> = Vec::new();
    {
        let mut st = State::new(p);
        let (p, m) = (st.p, st.p.model);
        let t = &m.tunables;
        for pass in 0..st.keys.len() {
            let Some(ps) = st.pass() else { break };
            if pass == 0 {
                st.prepare(policy);
            }
            let best = match st.pick_ordered(&ps) {
                Some(best) => {
                    // Debug builds check the order's pick against looking at every task.
                    #[cfg(debug_assertions)]
                    {
                        let each = st.pick_each(&ps, false);
                        debug_assert_eq!(
                            best.as_ref().map(|b| (b.pos, b.dest, b.s.to_bits())),
                            each.as_ref().map(|b| (b.pos, b.dest, b.s.to_bits())),
                            "the balancer's ordered pick"
                        );
                    }
                    best
                }
                None => st.pick_each(&ps, true),
            };
            let Some(bs) = best else { break };
            crate::work::count("balance.moves", 1);
            let (b, i, load) = (ps.b, ps.i, &ps.load);
            let (k, x, dest, tcpu) = (st.keys[bs.pos], bs.pos, bs.dest, bs.cpu);
            let Some(mv) = &st.movable[x] else { break };
            let (share, preferred, u) = (mv.share, mv.preferred, &p.units[mv.unit]);
            let d = &m.topo.distances;
            let to = match bs.roomy {
                None => format!("to node {} (the idlest: no node has room for it)", p.id(i)),
                Some(j) => format!(
                    "to node {} (balance-towards-memory: of the nodes with room, access share {} there, distance {} from node {} where most of its accesses are; planned load with it {:.2})",
                    p.id(j),
                    pct(share[j]),
                    d[preferred][j],
                    p.id(preferred),
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
            moves.push((k, dest, why, tcpu));
            st.moved(x, dest);
        }
    }
    // The plan changes once the balancer is done (nothing above reads the nodes it sets).
    for (k, dest, why, cpu) in moves {
        if let Some(tp) = p.task_plan.get_mut(&k) {
            tp.nodes = vec![dest];
            tp.reason = Reason::new("balance-weakest-first", why);
            tp.hold_load = cpu;
        }
    }
}
