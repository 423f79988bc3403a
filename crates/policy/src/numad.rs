//! A numad-like baseline: numad's placement heuristic as a [`Policy`], so the simulator compares
//! numapilot against it on equal terms (the same engine, the same host, the same observation).
//!
//! # Problem
//!
//! numad (Bill Gray, Red Hat, 2012-2015) is the user-space daemon Linux distributions ship for
//! NUMA placement: every few seconds it looks for large, busy processes and binds each to the
//! fewest nodes that can hold it, moving its memory there. To claim numapilot does better we must
//! run numad's decisions, not a straw man, on the same simulated machine. This module is our own
//! implementation of numad's heuristic as read in numad.c (version 20150602); the facts it uses
//! (thresholds, weights, margins, intervals) carry their source below. numad's code is not copied.
//!
//! # Approach
//!
//! One pass per decision, as numad's `manage_loads()`:
//!
//! ```text
//!   candidates   RSS > numad_min_rss_mib (300 MiB)  and  CPU > numad_min_cpu_pct (50% of one CPU,
//!                the largest of the last 8 passes' rates: numad's ring buffer)
//!   order        never bound first, by CPU x RSS descending; then those bound, oldest bind first
//!   for each     skip if bound less than numad_reevaluate_s (300 s) ago
//!                request = used x 100 / target% (85)     CPUs capped at its thread count
//!                nodes   = pick_nodes(request)           (below)
//!                nodes already bound and >= 90% of its memory there -> leave it, next candidate
//!                else bind: SetAffinity(all its threads, CPUs of nodes)          rule numad-bind
//!                           MigratePages(most-holding other node -> least-holding chosen node),
//!                           repeated until no other node holds any        rule numad-migrate
//!                     and stop: ONE process per pass
//!   interval     numad_interval_min_s (5 s) after a pass that moved a process, else
//!                numad_interval_max_s (15 s); half the minimum before the first rates exist
//! ```
//!
//! Launch advice (`numad -w NCPUS:MB`, [`Policy::advise_launch`]) is `pick_nodes` for the request
//! from the current view of the nodes, nothing reserved between answers: rule numad-advice.
//!
//! `pick_nodes`, as numad's `pick_numa_nodes()`:
//!
//! ```text
//!   free_n      = node n's free CPUs and free MiB, plus what the process itself uses there
//!                 (unbound: its memory x 17/16 and its CPU in proportion to its memory on n;
//!                  bound: its memory x 5/4, and on its nodes the average free CPU of them
//!                  counting its own use) -- so staying where it is looks a little better
//!   magnitude_n = (needed_mem x 10 + excess_mem x 4) x (needed_cpu x 6 + excess_cpu x 1)
//!                 (what the node can give of the request weighs more than what it has beyond)
//!   k           = nodes needed: max(ceil(MiB / node MiB), ceil((CPUs - flex) / node CPUs)),
//!                 flex = (100 - target%) / 2 of a node's CPUs
//!   best start  = argmax over n of  sum over the k nodes closest to n (ties: larger magnitude)
//!                 of magnitude / distance^2
//!   take nodes  closest to the start first, consuming MiB (keeping a 100 MiB margin) and CPUs,
//!               until k nodes are taken and the request is met (CPUs only if the machine is not
//!               oversubscribed)
//! ```
//!
//! A small picture (worked in `tests/numad.rs`): 2 nodes of 4 CPUs and 8 GiB; a process of 1.5
//! CPUs and 2048 MiB, 512 of them on node 0 and 1536 on node 1; request 1.76 CPUs, 2409 MiB.
//!
//! ```text
//!              free CPUs (+ own)     free MiB (+ own x 17/16)   magnitude
//!   node 0     3.0 + 0.375 = 3.375   5000 + 544  = 5544         36632 x 12.20 = 446.8k  <- bound here,
//!   node 1     1.5 + 1.125 = 2.625   4000 + 1632 = 5632         36984 x 11.45 = 423.4k     1536 MiB move
//! ```
//!
//! # Units
//!
//! CPUs as f64 (1.0 = one CPU busy; numad counts hundredths), memory in MiB (f64), time in ns.
//!
//! # Limits (differences from numad, on purpose or by necessity)
//!
//! - Not a difference: numad 20150602 binds with `sched_setaffinity` on every thread in
//!   `/proc/PID/task` plus the `migrate_pages` syscall, and sets no memory policy (the 2012
//!   version used a cpuset cgroup). Our `SetAffinity` (every thread) + `MigratePages`, with first
//!   touch on the bound CPUs' nodes afterwards, is numad's own mechanism.
//! - numad reads free CPU from `/proc/stat` idle time and free memory from node meminfo (MemFree +
//!   Inactive(file)); we use the model's per-node CPU demand and free memory (MemFree +
//!   Inactive(file) + SReclaimable, `NodeSample::mem_free_reclaimable_kb`).
//! - numad sizes nodes by node 0; we use the largest node (the same on the symmetric presets).
//! - numad's early re-evaluation of a recently bound process on the busiest node, its 20%
//!   magnitude bins among bound processes, its KVM vCPU thread count and its interleaved-memory
//!   handling (`-K`) are left out.
//! - Hyperthreads are discounted as numad's `-t` does (tunable `numad_htt_pct`, default 20): a
//!   node's CPU capacity is its cores at 100% plus its further SMT siblings at 20%, and its free
//!   CPU loses the siblings' other 80%.
//! - Not a difference: memory moves as numad moves it, one source node at a time (the one
//!   outside the chosen set holding the most) to the chosen node holding the least, one
//!   `MigratePages` each, so with two or more target nodes the memory is spread as numad spreads it.
//! - numad asks for memory by virtual size when that exceeds a node and RSS x 5/4 does too; not
//!   modelled. numad takes `-u` up to 130 for CPU (oversubscription); we validate 1..=100.
//! - A process that placed itself (the model's `pinned`: an explicit memory policy or narrowed
//!   CPUs) and that we did not bind is left alone, as the adaptive policy does; numad would see it
//!   as bound long ago and consider it for a move. A process confined to a cpuset (the model's
//!   `confined`) is left alone too: numad binds within the whole machine, and a binding outside
//!   the cpuset would be cut to it or refused by the kernel.
//!
//! A consequence of numad's own rules, kept on purpose: a process's CPU is credited back to the
//! nodes holding its memory, so on numa01 (both processes' memory first-touched on node 0) the
//! second process is bound to node 0 as well, beside the first (`sim/tests/engine_policies.rs`).

use std::collections::{BTreeMap, VecDeque};

use numapilot_model::{Model, ProcView};
use numapilot_topology::NodeSet;

use crate::action::{Action, ActionKind, Outcome, Plan, Reason, TaskRef};
use crate::engine::{LaunchAdvice, LaunchRequest, NoLaunchAdvice, Policy};

/// CPU-rate history numad keeps per process, passes; the largest counts. Source: numad.c
/// `RING_BUF_SIZE` 8 ("Use largest CPU utilization currently in ring buffer"). Prevents: a process
/// that paused for one pass dropping out of the candidates.
pub const CPU_HISTORY_PASSES: usize = 8;

/// Free memory left on a node when a request is consumed from it, MiB. Source: numad.c
/// `MBS_MARGIN` 100. Prevents: planning a node down to its last page.
pub const MEM_MARGIN_MIB: f64 = 100.0;

/// Bias on a process's own memory counted as free on a node, unbound process: x 17/16. Source:
/// numad.c pick_numa_nodes ("Apply light mem bias"). Prevents: moving a process for a tie.
pub const OWN_MEM_BIAS_UNBOUND: f64 = 17.0 / 16.0;

/// The same bias for a process already bound to a subset of nodes: x 5/4 ("heavy mem bias").
/// Source: numad.c pick_numa_nodes, the branch for a process whose node list is shorter than the
/// machine's (a binding to every node counts as unbound and takes the light bias). Prevents: a
/// bound process, looked at again after `numad_reevaluate_s`, bound elsewhere (its threads moved
/// and its memory copied again) for a small difference in free memory: its own memory counts a
/// quarter more on every node holding it, and after the bind that is mostly its bound nodes.
pub const OWN_MEM_BIAS_BOUND: f64 = 5.0 / 4.0;

/// Weights of the magnitude: memory a node can give of the request (10) and beyond it (4), CPUs
/// of the request (6) and beyond (1). Source: numad.c `combined_value_of_weighted_resources`.
/// Within each factor what is needed counts more than what is spare: a MiB beyond the request
/// counts 0.4 of one within it, a CPU beyond it 1/6. The two factors multiply, so only these
/// ratios change a ranking. Prevents: a node with much spare of one resource and too little of
/// the other outranking one that covers the whole request (a request of 4 CPUs and 1,000 MiB:
/// 4 CPUs and 1,000 MiB free scores 240,000, 2 CPUs and 3,000 MiB free 216,000; with equal
/// weights the second would win, 6,000 to 4,000).
pub const MAGNITUDE_WEIGHTS: [f64; 4] = [10.0, 4.0, 6.0, 1.0];

/// Least free CPU a node is credited with, CPUs. Source: numad.c ("Enforce 1/100th CPU minimum").
/// Prevents: a zero magnitude wiping out a node's memory term.
pub const MIN_NODE_CPUS_FREE: f64 = 0.01;

/// How long launch advice given for a pid waits for that process to show, ns. Default 60 s.
/// Source: a choice, four of numad's default longest interval (15 s, `numad -i`): a launcher
/// applies the advice and execs within a second or two, and the process shows at the next pass
/// (with a longer interval set, advice older than this is dropped at the pass unseen). What it
/// prevents: advice for a launch that never happened (the launcher failed, the process stayed
/// under the size numad looks at) kept for good, and a later process that happens to get the pid
/// taken as bound on that old advice.
pub const LAUNCH_ADVICE_WAIT_NS: u64 = 60_000_000_000;

/// Most launch advice awaiting its process, entries. Default 4096. Source: a choice, far above the
/// launches a host makes in [`LAUNCH_ADVICE_WAIT_NS`]. What it prevents: a launcher asking in a
/// loop between two passes growing the table without bound (the oldest advice goes first).
pub const LAUNCH_ADVICE_KEPT: usize = 4096;

/// What numad remembers of a process it bound.
#[derive(Debug, Clone, PartialEq)]
pub struct Binding {
    /// Nodes it is bound to (kernel ids).
    pub nodes: NodeSet,
    /// Host time of the bind (or of the last check that found it in place), ns.
    pub at_ns: u64,
}

/// numad's heuristic as a policy. State: the per-process CPU history, the processes it bound,
/// whether the last pass moved one (for the interval), and launch advice awaiting its process.
#[derive(Debug, Default)]
pub struct Numad {
    /// CPU rate history by (pid, start time), newest last, at most [`CPU_HISTORY_PASSES`].
    cpu_history: BTreeMap<(u32, u64), VecDeque<f64>>,
    /// Processes this policy bound, by (pid, start time).
    bound: BTreeMap<(u32, u64), Binding>,
    /// Whether the last pass bound a process.
    moved_last_pass: bool,
    /// Passes so far.
    passes: u64,
    /// Launch advice given (`numad -w`), by pid, with the host time it was given, until the
    /// process shows: then it counts as bound here at that time (the launcher bound it to the
    /// advice, as libvirt does); dropped after [`LAUNCH_ADVICE_WAIT_NS`] unseen.
    launched: BTreeMap<u32, (NodeSet, u64)>,
}

/// One node as `pick_nodes` sees it.
#[derive(Debug, Clone, Copy)]
struct NodeRes {
    /// Kernel id.
    id: u32,
    cpus_total: f64,
    cpus_free: f64,
    mib_total: f64,
    mib_free: f64,
    magnitude: f64,
}

const MIB: f64 = (1u64 << 20) as f64;

/// Magnitude of a node for a request of `mib` and `cpus`.
fn magnitude(mib: f64, cpus: f64, mib_free: f64, cpus_free: f64) -> f64 {
    let [w_mem_need, w_mem_excess, w_cpu_need, w_cpu_excess] = MAGNITUDE_WEIGHTS;
    let (mem_need, mem_excess) = if mib_free > mib { (mib, mib_free - mib) } else { (mib_free.max(0.0), 0.0) };
    let (cpu_need, cpu_excess) = if cpus_free > cpus { (cpus, cpus_free - cpus) } else { (cpus_free.max(0.0), 0.0) };
    (mem_need * w_mem_need + mem_excess * w_mem_excess) * (cpu_need * w_cpu_need + cpu_excess * w_cpu_excess)
}

impl Numad {
    /// A fresh policy (nothing bound, no history).
    pub fn new() -> Self {
        Self::default()
    }

    /// The processes this policy bound, by (pid, start time).
    pub fn bindings(&self) -> &BTreeMap<(u32, u64), Binding> {
        &self.bound
    }

    /// The CPU figure numad judges a process by: the largest rate of the recent passes, CPUs.
    fn cpu_used(&self, p: &ProcView) -> f64 {
        self.cpu_history.get(&(p.pid, p.starttime)).map_or(0.0, |h| h.iter().copied().fold(0.0, f64::max))
    }

    /// Records this pass's CPU rates and forgets processes (and bindings) that are gone.
    fn refresh(&mut self, model: &Model) {
        let live: std::collections::BTreeSet<(u32, u64)> = model.procs.values().map(|p| (p.pid, p.starttime)).collect();
        self.cpu_history.retain(|k, _| live.contains(k));
        self.bound.retain(|k, _| live.contains(k));
        let launched = std::mem::take(&mut self.launched);
        for (pid, (nodes, at_ns)) in launched {
            match model.procs.get(&pid) {
                Some(p) => {
                    self.bound.insert((pid, p.starttime), Binding { nodes, at_ns: model.now_ns });
                }
                None if model.now_ns.saturating_sub(at_ns) < LAUNCH_ADVICE_WAIT_NS => {
                    self.launched.insert(pid, (nodes, at_ns));
                }
                None => {}
            }
        }
        for p in model.procs.values() {
            let h = self.cpu_history.entry((p.pid, p.starttime)).or_default();
            h.push_back(p.cpu_rate.max(0.0));
            while h.len() > CPU_HISTORY_PASSES {
                h.pop_front();
            }
        }
    }

    /// The nodes as numad's `update_nodes` sees them: free CPUs (cores first, SMT siblings at
    /// `numad_htt_pct`) and free MiB, dense order, nobody's own use added back.
    fn nodes_free(model: &Model) -> Vec<NodeRes> {
        let topo = &model.topo;
        let htt = f64::from(model.tunables.numad_htt_pct.min(100)) / 100.0;
        topo.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                // numad's update_nodes: cores count 100%, further SMT siblings `numad_htt_pct`.
                let lcpus = n.cpus.len() as f64;
                let cores: std::collections::BTreeSet<(u32, u32, u32)> =
                    topo.cpus.iter().filter(|c| n.cpus.contains(c.id)).map(|c| (c.package, c.die, c.core)).collect();
                let cores = (cores.len() as f64).min(lcpus);
                let htt_discount = (lcpus - cores) * (1.0 - htt);
                let cpus_total = lcpus - htt_discount;
                let load = model.nodes.get(i);
                let cpus_free = (lcpus - load.map_or(0.0, |l| l.cpu_demand) - htt_discount).max(0.0);
                let mib_total = match load {
                    Some(l) if l.mem_total_bytes > 0 => l.mem_total_bytes as f64 / MIB,
                    _ => n.mem_total_kb as f64 / 1024.0,
                };
                let mib_free = match load {
                    Some(l) if l.mem_total_bytes > 0 => l.mem_free_bytes as f64 / MIB,
                    _ => n.mem_free_kb as f64 / 1024.0,
                };
                NodeRes { id: n.id, cpus_total, cpus_free, mib_total, mib_free, magnitude: 0.0 }
            })
            .collect()
    }

    /// The nodes as numad sees them for process `p` (its own use added back), dense order.
    fn nodes_for(&self, model: &Model, p: &ProcView, cpu_used: f64, binding: Option<&Binding>) -> Vec<NodeRes> {
        let mut nodes = Self::nodes_free(model);
        let rss_mib = (p.rss_bytes as f64 / MIB).max(1e-9);
        let own_mib = |i: usize| p.mem_by_node.get(i).copied().unwrap_or(0) as f64 / MIB;
        match binding {
            None => {
                for (i, n) in nodes.iter_mut().enumerate() {
                    n.mib_free += own_mib(i) * OWN_MEM_BIAS_UNBOUND;
                    n.cpus_free += cpu_used * own_mib(i) / rss_mib;
                }
            }
            // numad treats a process bound to every node as unbound (`NUM_IDS_IN_LIST >= num_nodes`).
            Some(b) if b.nodes.len() >= nodes.len() => {
                for (i, n) in nodes.iter_mut().enumerate() {
                    n.mib_free += own_mib(i) * OWN_MEM_BIAS_UNBOUND;
                    n.cpus_free += cpu_used * own_mib(i) / rss_mib;
                }
            }
            Some(b) => {
                let bound_free: f64 = nodes.iter().filter(|n| b.nodes.contains(n.id)).map(|n| n.cpus_free).sum();
                let avg = (cpu_used + bound_free) / b.nodes.len().max(1) as f64;
                for (i, n) in nodes.iter_mut().enumerate() {
                    n.mib_free += own_mib(i) * OWN_MEM_BIAS_BOUND;
                    if b.nodes.contains(n.id) {
                        n.cpus_free = avg;
                    }
                }
            }
        }
        for n in &mut nodes {
            n.cpus_free = n.cpus_free.min(n.cpus_total).max(MIN_NODE_CPUS_FREE);
            n.mib_free = n.mib_free.min(n.mib_total);
        }
        nodes
    }

    /// numad's node choice for a request of `mib` MiB and `cpus` CPUs; returns the nodes (kernel
    /// ids) and a line saying why.
    fn pick_nodes(
        model: &Model,
        mut nodes: Vec<NodeRes>,
        mut mib: f64,
        mut cpus: f64,
        mut assume_enough_cpus: bool,
    ) -> (NodeSet, String) {
        let nn = nodes.len();
        if nn == 0 {
            return (NodeSet::new(), "no nodes".to_string());
        }
        let target = f64::from(model.tunables.numad_target_utilization_pct);
        for n in &mut nodes {
            n.magnitude = magnitude(mib, cpus, n.mib_free, n.cpus_free);
        }
        let sum_cpus_free: f64 = nodes.iter().map(|n| n.cpus_free).sum();
        if cpus > sum_cpus_free {
            // Oversubscribed: place by memory alone.
            assume_enough_cpus = true;
        }
        let node_cpus = nodes.iter().map(|n| n.cpus_total).fold(0.0, f64::max).max(1.0);
        let node_mib = nodes.iter().map(|n| n.mib_total).fold(0.0, f64::max).max(1.0);
        let cpu_flex = if target < 100.0 { (100.0 - target) * node_cpus / 200.0 } else { 0.0 };
        let mem_req = (mib / node_mib).ceil();
        let cpu_req = ((cpus - cpu_flex) / node_cpus).ceil();
        let mut k = (mem_req.max(cpu_req).max(1.0) as usize).min(nn);
        // By kernel id: `nodes` may be fewer than the topology's (launch advice within a reach).
        let ids: Vec<u32> = nodes.iter().map(|n| n.id).collect();
        let dist = |a: usize, b: usize| -> f64 {
            let d = model.topo.distance(ids[a], ids[b]);
            // Missing matrix entries: ACPI SLIT's LOCAL_DISTANCE 10 and REMOTE_DISTANCE 20, the
            // kernel's defaults when firmware gives no table.
            f64::from(d.unwrap_or(if a == b { 10 } else { 20 }).max(1))
        };
        // Nodes ordered by distance from `from`, ties by larger magnitude, then by index.
        let order_from = |nodes: &[NodeRes], from: usize| -> Vec<usize> {
            let mut idx: Vec<usize> = (0..nn).collect();
            idx.sort_by(|&a, &b| {
                dist(from, a)
                    .total_cmp(&dist(from, b))
                    .then(nodes[b].magnitude.total_cmp(&nodes[a].magnitude))
                    .then(a.cmp(&b))
            });
            idx
        };
        let mut best = 0;
        let mut best_tot = f64::NEG_INFINITY;
        for from in 0..nn {
            let tot: f64 = order_from(&nodes, from)
                .iter()
                .take(k)
                .map(|&j| nodes[j].magnitude / (dist(from, j) * dist(from, j)))
                .sum();
            if tot > best_tot {
                best = from;
                best_tot = tot;
            }
        }
        let order = order_from(&nodes, best);
        let mut chosen = NodeSet::new();
        for &j in &order {
            if !(k > 0 || mib > 0.0 || (cpus > cpu_flex && !assume_enough_cpus)) {
                break;
            }
            chosen.insert(nodes[j].id);
            k = k.saturating_sub(1);
            let n = &mut nodes[j];
            if n.mib_free >= mib + MEM_MARGIN_MIB {
                n.mib_free -= mib;
                mib = 0.0;
            } else {
                mib -= (n.mib_free - MEM_MARGIN_MIB).max(0.0);
                n.mib_free = MEM_MARGIN_MIB;
            }
            if n.cpus_free >= cpus {
                n.cpus_free -= cpus;
                cpus = 0.0;
            } else {
                cpus -= n.cpus_free;
                n.cpus_free = 0.0;
            }
        }
        let why = format!(
            "best start node {} (distance-weighted magnitude {:.3e}), {} needed",
            nodes[best].id,
            best_tot,
            numapilot_topology::plural(chosen.len(), "node")
        );
        (chosen, why)
    }
}

impl Policy for Numad {
    fn name(&self) -> &'static str {
        "numad"
    }

    fn bookkeeping(&self, out: &mut Vec<(&'static str, usize)>) {
        out.push(("numad.cpu_history", self.cpu_history.len()));
        out.push(("numad.bound", self.bound.len()));
        out.push(("numad.launched", self.launched.len()));
    }

    fn next_interval_ns(&self, model: &Model) -> u64 {
        let t = &model.tunables;
        if self.passes <= 1 {
            // numad's first pass returns half the minimum in integer seconds (5 / 2 = 2 s) so the
            // rates exist soon.
            return (t.numad_interval_min_s / 2).max(1).saturating_mul(1_000_000_000);
        }
        if self.moved_last_pass {
            t.numad_interval_min_s.saturating_mul(1_000_000_000)
        } else {
            t.numad_interval_max_s.saturating_mul(1_000_000_000)
        }
    }

    /// numad's pre-placement advice (`numad -w NCPUS:MB`, answered by the running daemon from its
    /// current view of the nodes: numad.c sends the request to the daemon's message queue, which
    /// calls `pick_numa_nodes` for it with no process of its own and CPUs not assumed enough). Each
    /// request is answered from that snapshot alone: nothing is reserved for the next one.
    fn advise_launch(
        &mut self,
        model: &Model,
        now_ns: u64,
        req: &LaunchRequest,
    ) -> Result<LaunchAdvice, NoLaunchAdvice> {
        let mut nodes = Self::nodes_free(model);
        // A measurement names the nodes the job may use (its launcher's memory nodes): no other is
        // a candidate (one left out kept the model's figures and could be advised).
        if !req.nodes_now.is_empty() {
            nodes.retain(|n| req.nodes_now.iter().any(|f| f.node == n.id));
        }
        for n in &mut nodes {
            // update_nodes() runs before each answer: the measurement taken now, when there is one.
            if let Some(f) = req.nodes_now.iter().find(|f| f.node == n.id) {
                // The node as far as the job reaches: its CPUs within the reach (and within those
                // measured), the node's SMT discount in proportion. Taken as the whole node's
                // discount, a node measured with 1 of its 4 CPUs was credited 3 more free.
                let cpus = model.topo.node(n.id).map(|t| t.cpus.clone()).unwrap_or_default();
                let lcpus = cpus.len() as f64;
                let within = req.reach_cpus.as_ref().map_or(lcpus, |r| cpus.intersection(r).len() as f64);
                let within = within.min(f64::from(f.cpus));
                let htt_discount = if lcpus > 0.0 { (lcpus - n.cpus_total) * within / lcpus } else { 0.0 };
                n.cpus_total = within - htt_discount;
                n.cpus_free = (f.free_cpus.min(within) - htt_discount).max(0.0);
                n.mib_free = f.mem_free_bytes as f64 / MIB;
            }
            n.cpus_free = n.cpus_free.min(n.cpus_total).max(MIN_NODE_CPUS_FREE);
            n.mib_free = n.mib_free.min(n.mib_total);
        }
        let mib = req.mem_bytes as f64 / MIB;
        let (chosen, why) = Self::pick_nodes(model, nodes, mib, req.cpus, false);
        if chosen.is_empty() {
            // Its figures are SMT-discounted and floored, not a client's to show.
            return Err(NoLaunchAdvice::default());
        }
        if let Some(pid) = req.pid {
            self.launched.retain(|_, (_, at)| now_ns.saturating_sub(*at) < LAUNCH_ADVICE_WAIT_NS);
            while self.launched.len() >= LAUNCH_ADVICE_KEPT && !self.launched.contains_key(&pid) {
                let oldest = self.launched.iter().min_by_key(|(_, (_, at))| *at).map(|(p, _)| *p);
                match oldest {
                    Some(p) => self.launched.remove(&p),
                    None => break,
                };
            }
            self.launched.insert(pid, (chosen.clone(), now_ns));
        }
        let detail = format!("numad -w {:.0}:{:.0} for {}: nodes {chosen}; {why}", req.cpus.ceil(), mib, req.name);
        Ok(LaunchAdvice { nodes: chosen, reason: Reason::new("numad-advice", detail), free: Vec::new() })
    }

    fn decide(&mut self, model: &Model) -> Plan {
        self.passes += 1;
        self.moved_last_pass = false;
        self.refresh(model);
        let t = &model.tunables;
        let min_rss = t.numad_min_rss_mib as f64 * MIB;
        let min_cpu = f64::from(t.numad_min_cpu_pct) / 100.0;
        let target = f64::from(t.numad_target_utilization_pct) / 100.0;
        let reevaluate_ns = t.numad_reevaluate_s.saturating_mul(1_000_000_000);

        // Candidates: big and busy; self-placed processes we did not bind are left alone.
        let mut cands: Vec<(&ProcView, f64)> = model
            .procs
            .values()
            .filter(|p| !p.pinned || self.bound.contains_key(&(p.pid, p.starttime)))
            .filter(|p| p.confined.is_none())
            .map(|p| (p, self.cpu_used(p)))
            .filter(|(p, cpu)| p.rss_bytes as f64 > min_rss && *cpu > min_cpu)
            .collect();
        let sum_cpu_used: f64 = cands.iter().map(|c| c.1).sum();
        let sum_cpu_total = model.topo.usable_cpus().len() as f64;
        let assume_enough_cpus = sum_cpu_used <= sum_cpu_total;
        // Never bound first, by CPU x memory descending; then bound ones, oldest bind first.
        cands.sort_by(|a, b| {
            let ba = self.bound.get(&(a.0.pid, a.0.starttime)).map(|x| x.at_ns);
            let bb = self.bound.get(&(b.0.pid, b.0.starttime)).map(|x| x.at_ns);
            match (ba, bb) {
                (None, None) => {
                    (b.1 * b.0.rss_bytes as f64).total_cmp(&(a.1 * a.0.rss_bytes as f64)).then(a.0.pid.cmp(&b.0.pid))
                }
                (None, Some(_)) => std::cmp::Ordering::Less,
                (Some(_), None) => std::cmp::Ordering::Greater,
                (Some(x), Some(y)) => x.cmp(&y).then(a.0.pid.cmp(&b.0.pid)),
            }
        });

        for (p, cpu_used) in cands {
            let key = (p.pid, p.starttime);
            let binding = self.bound.get(&key).cloned();
            if let Some(b) = &binding {
                if model.now_ns < b.at_ns.saturating_add(reevaluate_ns) {
                    continue;
                }
            }
            let rss_mib = p.rss_bytes as f64 / MIB;
            let mib_request = rss_mib / target;
            let cpu_request = (cpu_used / target).min(p.tids.len().max(1) as f64);
            let nodes = self.nodes_for(model, p, cpu_used, binding.as_ref());
            let (chosen, why) = Self::pick_nodes(model, nodes, mib_request, cpu_request, assume_enough_cpus);
            if chosen.is_empty() {
                continue;
            }
            let nonlocal: u64 = model
                .topo
                .nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| !chosen.contains(n.id))
                .map(|(i, _)| p.mem_by_node.get(i).copied().unwrap_or(0))
                .sum();
            let nonlocal_pct = 100.0 * nonlocal as f64 / (p.rss_bytes.max(1)) as f64;
            let in_place = nonlocal_pct <= f64::from(100 - t.numad_memlocality_pct.min(100));
            if let Some(b) = &binding {
                if b.nodes == chosen && in_place {
                    // Already where numad wants it: refresh the time stamp, look at the next one.
                    self.bound.insert(key, Binding { nodes: chosen, at_ns: model.now_ns });
                    continue;
                }
            }
            let cpus = model.topo.cpus_of_nodes(&chosen);
            if cpus.is_empty() {
                continue;
            }
            let target_ref = TaskRef { pid: p.pid, tid: None, starttime: p.starttime };
            let detail = format!(
                "pid {} ({}): {:.2} CPUs, {:.0} MiB ({:.0}% on other nodes); request {:.2} CPUs, {:.0} MiB at \
                 {}% target utilisation; {why}",
                p.pid,
                p.comm,
                cpu_used,
                rss_mib,
                nonlocal_pct,
                cpu_request,
                mib_request,
                t.numad_target_utilization_pct
            );
            let mut actions = vec![Action {
                target: target_ref,
                kind: ActionKind::SetAffinity { cpus },
                reason: Reason::new("numad-bind", format!("threads to nodes {chosen}: {detail}")),
            }];
            // numad's bind_process_and_migrate_memory: one source node at a time, the one outside
            // the chosen set holding the most of the process's memory, to the chosen node holding
            // the least (ties: the higher-numbered), the tally updated as if it all moved; until
            // no source holds any.
            let mut tally: Vec<(u32, u64)> = model
                .topo
                .nodes
                .iter()
                .enumerate()
                .map(|(i, n)| (n.id, p.mem_by_node.get(i).copied().unwrap_or(0)))
                .collect();
            loop {
                let src = tally.iter().enumerate().filter(|(_, (id, _))| !chosen.contains(*id)).fold(
                    None::<usize>,
                    |best, (i, t)| match best {
                        Some(b) if tally[b].1 >= t.1 => Some(b),
                        _ => Some(i),
                    },
                );
                let dst = tally.iter().enumerate().filter(|(_, (id, _))| chosen.contains(*id)).fold(
                    None::<usize>,
                    |best, (i, t)| match best {
                        Some(b) if tally[b].1 < t.1 => Some(b),
                        _ => Some(i),
                    },
                );
                let (Some(src), Some(dst)) = (src, dst) else { break };
                if tally[src].1 == 0 {
                    break;
                }
                let (from_id, to_id) = (tally[src].0, tally[dst].0);
                let mib = tally[src].1 as f64 / MIB;
                actions.push(Action {
                    target: target_ref,
                    kind: ActionKind::MigratePages {
                        from: std::iter::once(from_id).collect(),
                        to: std::iter::once(to_id).collect(),
                        max_pages: None,
                    },
                    reason: Reason::new(
                        "numad-migrate",
                        format!(
                            "memory from node {from_id} ({mib:.0} MiB, the most outside {chosen}) to node {to_id} \
                             (the least of it in {chosen}): {detail}"
                        ),
                    ),
                });
                tally[dst].1 += tally[src].1;
                tally[src].1 = 0;
            }
            self.bound.insert(key, Binding { nodes: chosen, at_ns: model.now_ns });
            self.moved_last_pass = true;
            let mut plan = Plan { actions, ..Plan::default() };
            plan.memory_onto_memory_nodes(&model.topo);
            return plan;
        }
        Plan::default()
    }

    fn observe_outcomes(&mut self, _model: &Model, plan: &Plan, outcomes: &[Outcome]) {
        for (a, o) in plan.actions.iter().zip(outcomes) {
            let key = (a.target.pid, a.target.starttime);
            match o {
                Outcome::Vanished => {
                    self.bound.remove(&key);
                    self.cpu_history.remove(&key);
                }
                Outcome::Refused { .. } if matches!(a.kind, ActionKind::SetAffinity { .. }) => {
                    // Not bound after all: consider it again next pass, at the short interval.
                    self.bound.remove(&key);
                    self.moved_last_pass = false;
                }
                _ => {}
            }
        }
    }
}
