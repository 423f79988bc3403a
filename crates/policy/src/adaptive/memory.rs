//! Rule 4 (memory follows CPU, under a budget) and rule 5's memory side (bind, interleave).
//!
//! ```text
//!   per process p (managed, not new), in order of benefit (remote share x CPU), then pid:
//!     S = nodes its units are placed on, counting only threads the plan puts there: moved
//!         there by this plan, or held there by a move of this policy's that narrowed them
//!         (follows-placed-threads, below; bandwidth-bound processes count every thread)
//!     growing                 -> nothing (memory may spill; its CPUs were pointed at a node)
//!     bandwidth-bound         -> Interleave over the nodes its threads run on, equal weights,
//!                                when its memory deviates from that by >= remote_share_min
//!     held shared spread      -> the same Interleave again (same nodes, weights) until within
//!                                spread_done_share; its threads stay put (no unit)
//!     units on different S,   -> shared buffer: Interleave over exactly those nodes, weighted by
//!       >= shared_range_share_min of the hot-range samples in ranges sampled from 2+ of them:
//!                                planned CPU, once, from spread_done_share off that spread
//!                                (every thread streams all of it: a node holding more than its
//!                                CPU's share serves the excess to all); then held (until its
//!                                load grows > hold_load_change)
//!     units on different S    -> per unit: MoveRanges of the hot ranges its threads sampled
//!                                most that lie on none of their accessors' nodes (same threshold
//!                                and cost/benefit as below); then the rest outside the union of
//!                                the units' nodes, MigratePages to the union when it is one
//!                                node (several: the rest waits for its samples, since a
//!                                MigratePages would guess the node); without access
//!                                samples: Interleave over their nodes, weighted by planned CPU;
//!                                no per-unit moves when most threads sample wider than twice the
//!                                memory per thread (shared-pool-waits: a pool every thread reads
//!                                at random, too sparsely sampled to show as shared; its threads
//!                                gather by CPU follows memory or its class binding instead)
//!     units on different S, no access samples, all but one S under remote_share_min of its
//!       planned CPU           -> as one S, that one (minor-threads-stay-behind: a light thread
//!                                the balancer moved off a full node does not split it)
//!     otherwise               r = remote share of its accesses (or memory) outside S
//!       static-large, latency:  r > 0                                   (binding classes)
//!       unclassified:           r >= remote_share_min (below min_process_rss_mib, r counts
//!                               its resident memory outside S too: small memory goes along),
//!                               r x CPU x benefit_horizon_s  >  pages x migrate_cost_ns_per_page
//!                               (a young process the fork rule placed, idle or waiting for its
//!                               new threads' rates: CPU = its threads x
//!                               new_thread_cpu, S = the one node it may run on;
//!                               idle-young-memory-follows; a new process the fork rule places
//!                               on one node in this plan, idle with its rates known: CPU = the
//!                               fork rule's estimate, S = that node, fork-memory-follows)
//!     pages moving in the background (the host's mover) -> nothing until they end
//!                               (moves-in-flight)
//!       -> MoveRanges of its hottest ranges outside S (trimmed to the budget), then
//!          MigratePages(from nodes outside S, to S, max_pages = what is left of the budget)
//!     the same kind of move to the same nodes moved (almost) nothing last time, and nothing
//!       changed since        -> that move waits (futile-move-backs-off, futile.rs)
//!   memory: own memory only (ProcView::own_mem_by_node): pages in mappings other processes map
//!           too (a library's text, shared buffers) are not counted in r, the pages or the
//!           deviation, since a move of this process leaves them where they are; a mostly-cold
//!           process's accessed memory on a node counts at most its own memory there
//!           (hot-within-own)
//!   budget: migrate_budget_mib_per_s x period, shared by the whole plan; a process younger than
//!           new_process_age_ms first spends its own allowance (young_migrate_budget_mib_per_s x
//!           period, its own memory only, and only when its threads work on slices of their own:
//!           young-allowance-slices), then the shared budget
//!   hold:   memory moved to another node set within hold_periods (load unchanged) stays; a range
//!           moved by MoveRanges is not moved again within hold_periods
//!   placement's view: `follow_pages` is this pass's memory-follows-cpu decision for one process
//!           and a node, asked by cpu-follows-memory before it moves threads that leave the
//!           process whole on that node (move-counts-the-copy-it-triggers: a move is charged the
//!           copy it makes this pass do)
//! ```
//!
//! Follows-placed-threads: memory follows threads this policy has placed, never threads the
//! kernel has. The benefit of a copy counts the threads' CPU over `benefit_horizon_s`, as if they
//! stayed where they are that long. A thread narrowed to its nodes (by this plan, or by a move of
//! this policy's whose hold keeps it there) does; one that is not runs wherever the kernel puts it
//! next: a light thread beside whoever wakes it (wake-affine), a busy one wherever the load
//! balancer finds a CPU. The plan has such a thread on nodes without narrowing it when it holds a
//! unit by the move of another of its members (the hold is its heaviest task's move): a group
//! formed after that move, around a process the move never covered. The rig's pairs scenario (CI
//! at 052d21f, an idle host; the sequence rebuilt from its figures in
//! `a_group_that_gains_its_servers_process_goes_to_its_memory`): a TCP server under
//! `min_group_cpu`, so no unit of its own, ran on its client's node where the kernel had put it;
//! the client was kept there (stay-current-node, a hold); when their communication tie grouped
//! them the group was held on the client's node by the client's move, and the server's 64 MiB
//! were copied after threads nothing had placed (benefit 100% x 0.097 CPUs x 10 s = 0.97 CPU-s;
//! 16,418 pages, where the client's 3,104 were the pair's copy). Now its memory waits while the
//! hold keeps the group there. That pair's group is held no more (rule hold-gains-member, place.rs:
//! the server that joined takes 84% of the group's bytes off the held node, so the group is placed
//! afresh at once and goes to the server's memory); a member whose joining does not move the group
//! (`memory_does_not_follow_threads_a_hold_keeps_where_the_kernel_put_them`, an 8 MiB server) is
//! held with it, and its memory waits for the hold to end.
//!
//! Which rule, and why not the process's weight. The server was light, but lightness is not what
//! made the copy wrong: a light process the placement narrows (a 0.1-CPU unit sent to its memory,
//! or kept where it runs for want of room there) is placed, and its memory follows when the
//! benefit pays for the copy, as anyone's; a process under `min_group_cpu` has no unit and no
//! memory move at all (its threads are the kernel's, and its remote memory costs it at most
//! `min_group_cpu` x `remote_access_cost`, 0.03 CPUs). A floor on the process's CPU instead would
//! also refuse the small processes whose memory goes along cheaply (the pairs' 12 MiB clients, at
//! 0.08 CPUs in the rig) and the light process the placement did narrow, and at 0.1 CPUs it would
//! leave the rig's run to the server's rate in one period (0.097 CPUs in CI's copy, 0.08 at the
//! end of a run here: the test would flip with the host's load). Whether the threads are placed
//! is what says whether they stay for the horizon the benefit counts.
//! Bandwidth-bound processes are the exception: their threads keep their CPUs on purpose
//! (bandwidth-bound-stay) and their memory is spread over wherever they run. The price: a held
//! member's memory waits for the hold to end (`hold_periods` decisions), when the unit is placed
//! afresh and its threads narrowed, and only then follows, if it still should.
//!
//! Rules this module names in reasons (`Reason::rule`):
//!
//! ```text
//!   memory-follows-cpu        memory outside the nodes a process's threads are placed on moves
//!                             there (its units' own hot ranges, its hottest ranges, the rest),
//!                             when worth the copy, within the budget
//!   class-bind-memory         a process of a binding class (static-large, latency-sensitive, as
//!                             `effective_class` reads it): its memory outside its nodes moves
//!                             there, hot ranges first, whatever its remote share or the copy's
//!                             cost, within the budget
//!   bandwidth-interleave      a bandwidth-bound process on several nodes: Interleave over them,
//!                             equal weights
//!   split-process-interleave  a process whose units run on different node sets and whose threads
//!                             have no sampled hot ranges: Interleave over those nodes by CPU
//!   shared-buffer-interleave  one buffer shared by threads on several node sets: Interleave over
//!                             them by CPU, once, then held
//! ```

use std::collections::{BTreeMap, BTreeSet};

use numapilot_model::{ProcessClass, TaskKey};
use numapilot_topology::NodeSet;

use super::cold::{effective_class, COLD_RULE};
use super::futile::{Check, MoveKind};
use super::place::{pct, Planner, TaskPlan};
use super::{Adaptive, BASE_PAGE_BYTES};
use crate::action::{Action, ActionKind, Reason, TaskRef};

const MIB: f64 = 1048576.0;

/// Weight unit of a weighted interleave: tenths of a CPU (the action's weights are integers).
const WEIGHT_PER_CPU: f64 = 10.0;

/// Rule name of the interleave of a buffer shared by threads on several nodes (recorded in the
/// process's state: it then holds, see `ProcState::shared_spread`).
pub(crate) const SHARED_RULE: &str = "shared-buffer-interleave";

/// Rule name of the memory move of a young idle process (see `idle_young`).
pub(crate) const IDLE_YOUNG_RULE: &str = "idle-young-memory-follows";

/// Rule name of the memory move of a new process the fork rule places, in the same decision: one
/// that set up its memory and now waits (`young_and_idle`), placed on one node away from it.
/// Its memory is all the signal there is on what it will work on, and the copy is cheapest
/// before its threads start (see `idle_young`). Measured in the rig's race (`scripts/race.sh
/// --tests numa01`, 2026-11-27): the second numa01 process, placed by the fork rule when its
/// first-touch binding was dropped, had its 32 MiB start to move 0.55-0.6 s after "go", once a
/// decision had measured its accesses. Not for a process first seen in this sample or busy: in
/// the simulator's mixes, processes first seen while they allocate copied 2.4 times the pages
/// with the rule and ran slower (process mix 1.071 x default against 1.088).
pub(crate) const FORK_FOLLOWS_RULE: &str = "fork-memory-follows";

/// Whether `pid` is a young process the fork rule placed that has set up its memory and now waits
/// (rule "idle-young-memory-follows"): placed by this policy's fork rule, younger than
/// `new_process_age_ms`, under `min_group_cpu` with every thread's rate known (seen for a period).
/// Its memory's benefit then counts the fork rule's estimate (`new_thread_cpu` per thread), not
/// its rate of 0: it set its memory up to work on it, and the copy is cheapest now, when it
/// competes with none of its own threads. Measured in the rig's race at 427dc26 (2-node guest
/// under TCG): one numa01 process's 32 MiB first-touched in 0.1 s before "go", the same 32 MiB
/// copied in 1.6 s after it, under the two busy workers of each process; the fork rule had put
/// the process on node 1 before "go", and its memory followed only once it ran.
///
/// The same for one whose new threads have just started (rule "wait-for-rates": no unit for this
/// decision, its threads keep their nodes): its rates come a decision later, its memory need not
/// wait for them. In the rig's 4-node numa01 (`scripts/race.sh --tests numa01`, 2026-11-27) the
/// second process, placed on node 3 by the fork rule 51 ms before "go", had its memory start to
/// move 494 ms after it: the decision between saw its workers new and planned nothing for it.
fn idle_young(pl: &Planner<'_>, policy: &Adaptive, pid: u32) -> bool {
    let m = pl.model;
    policy.proc_state(m, pid).is_some_and(|s| s.forked)
        && (young_and_idle(pl, pid)
            || (pl.waiting.contains(&pid) && m.procs.get(&pid).is_some_and(|p| super::young_now(m, p))))
}

/// Whether `pid` is younger than `new_process_age_ms` and idle (under `min_group_cpu`) with every
/// thread's rate known (seen for a period): it has set up its memory and waits for its work.
fn young_and_idle(pl: &Planner<'_>, pid: u32) -> bool {
    let m = pl.model;
    let t = &m.tunables;
    let Some(p) = m.procs.get(&pid) else { return false };
    super::young_now(m, p)
        && p.cpu_rate < t.min_group_cpu
        && p.tids.iter().all(|&tid| m.tasks.get(&TaskKey { pid, tid }).is_some_and(|tv| tv.first_seen_ns < m.now_ns))
}

/// The one node (dense index) all of `pid`'s threads may run on, if there is one.
fn allowed_node(pl: &Planner<'_>, pid: u32) -> Option<usize> {
    let m = pl.model;
    let p = m.procs.get(&pid)?;
    let mut nodes = NodeSet::new();
    for &tid in &p.tids {
        nodes = nodes.union(&m.topo.nodes_of_cpus(&m.tasks.get(&TaskKey { pid, tid })?.cpus_allowed));
    }
    match nodes.iter().collect::<Vec<u32>>()[..] {
        [id] => m.node_idx(id),
        _ => None,
    }
}

/// Whether the plan puts task `k` where `tp` has it (rule "follows-placed-threads", see the
/// module essay): it is moved there by this plan (the CPU actions narrow every task the plan
/// does not hold), or held there with its CPUs already within those nodes' (the hold of a move
/// this policy made), or its process is bandwidth-bound (its threads keep their CPUs on purpose,
/// bandwidth-bound-stay, and its memory is spread where they run). A thread held on nodes it is
/// not narrowed to runs wherever the kernel puts it: a member of a unit held by another member's
/// move, one the hold's move never covered.
fn placed_there(pl: &Planner<'_>, k: &TaskKey, tp: &TaskPlan) -> bool {
    if !tp.held {
        return true;
    }
    let m = pl.model;
    let Some(tv) = m.tasks.get(k) else { return false };
    let cpus = pl.cpus_for(k.pid, &tp.nodes);
    if !cpus.is_empty() && tv.cpus_allowed.is_subset(&cpus) {
        return true;
    }
    m.procs.get(&k.pid).is_some_and(|p| {
        effective_class(p.class, pl.accessed.contains_key(&k.pid), pl.sliced.contains(&k.pid))
            == ProcessClass::BandwidthBound
    })
}

/// One process's memory job.
struct Job {
    pid: u32,
    benefit: f64,
    kind: JobKind,
}

enum JobKind {
    /// Move memory outside `to` into it.
    /// `cold`: the process's memory is mostly cold; only its hot ranges move (no MigratePages).
    Follow { to: Vec<usize>, dest: usize, remote: f64, detail: String, bind: bool, hot: bool, cold: bool },
    /// Spread memory over `nodes` with `weights`.
    /// `cont`: the continuation of a held shared spread (same nodes and weights), exempt from
    /// the once-per-hold limit.
    Spread { nodes: Vec<usize>, weights: Vec<u32>, pages: u64, rule: &'static str, detail: String, cont: bool },
    /// Move one unit's own hot ranges (its threads' sampled buckets) to the node it runs on.
    Ranges { to: Vec<usize>, dest: usize, ranges: Vec<(u64, u64)>, detail: String },
}

/// One unit's part of a process: CPU and CPU-weighted access per node.
type UnitPart = (f64, Vec<f64>);

/// A hot range's length, node, and samples per accessor node set.
type RangeUse = (u64, u32, BTreeMap<Vec<usize>, u64>);

/// Per-unit memory-follows-CPU jobs of a process whose units run on different nodes, from its
/// threads' own hot ranges; empty when no thread has any (no access samples).
///
/// Each hot range belongs to the node sets whose threads sampled it. A range already on one of
/// them stays (a buffer shared by threads on two nodes is not bounced between them); one on no
/// accessor's node goes to the set that sampled it most (ties: the lower set).
fn split_jobs(pl: &Planner<'_>, pid: u32) -> Vec<Job> {
    let m = pl.model;
    let t = &m.tunables;
    let n = m.topo.nodes.len();
    let mut parts: BTreeMap<Vec<usize>, UnitPart> = BTreeMap::new();
    // Range start -> (length, node, samples per accessor node set).
    let mut ranges: BTreeMap<u64, RangeUse> = BTreeMap::new();
    for (k, tp) in pl.task_plan.range(TaskKey { pid, tid: 0 }..=TaskKey { pid, tid: u32::MAX }) {
        let Some(tv) = m.tasks.get(k).filter(|_| placed_there(pl, k, tp)) else { continue };
        let nodes = tp.nodes.clone();
        let e = parts.entry(nodes.clone()).or_insert_with(|| (0.0, vec![0.0; n]));
        e.0 += tv.cpu_rate;
        let w = tv.cpu_rate.max(1e-3);
        for (i, a) in tv.access.iter().enumerate().take(n) {
            e.1[i] += a * w;
        }
        for h in &tv.hot {
            let r = ranges.entry(h.start).or_insert((h.len, h.node, BTreeMap::new()));
            *r.2.entry(nodes.clone()).or_default() += h.samples.max(1);
        }
    }
    // Ranges to move, by destination set: (start, len, samples).
    let mut moves: BTreeMap<Vec<usize>, Vec<(u64, u64, u64)>> = BTreeMap::new();
    for (start, (len, node, by_set)) in &ranges {
        let Some(idx) = m.node_idx(*node) else { continue };
        if by_set.keys().any(|set| set.contains(&idx)) {
            continue;
        }
        if let Some((set, samples)) = by_set.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))) {
            moves.entry(set.clone()).or_default().push((*start, *len, *samples));
        }
    }
    let mut jobs = Vec::new();
    for (to, mut list) in moves {
        let Some((cpu, acc)) = parts.get(&to) else { continue };
        let s: f64 = acc.iter().sum();
        let local: f64 = if s > 0.0 { to.iter().map(|&i| acc[i] / s).sum() } else { 1.0 };
        let remote = (1.0 - local).max(0.0);
        let set = pl.node_set(&to);
        list.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
        let pages: u64 = list.iter().map(|r| r.1 / BASE_PAGE_BYTES).sum();
        let benefit_s = remote * cpu * t.benefit_horizon_s;
        let cost_s = pages as f64 * t.migrate_cost_ns_per_page as f64 / 1e9;
        if remote < t.remote_share_min || benefit_s <= cost_s {
            continue;
        }
        // The node of the set where the set's threads run most; a set of no node (a unit that may
        // go nowhere, rule confined-within-cpuset) takes no pages (`to[0]` of it panicked; review
        // helper-40).
        let Some(dest) = to.iter().copied().max_by(|&a, &b| acc[a].total_cmp(&acc[b]).then(b.cmp(&a))) else {
            continue;
        };
        let detail = format!(
            "process {pid}: threads placed on nodes {set} ({cpu:.2} CPUs) make {} of their sampled accesses remote (>= {}); benefit {benefit_s:.2} CPU-s > copy cost {cost_s:.2} s ({pages} pages in {} hot ranges on no accessor's node)",
            pct(remote),
            pct(t.remote_share_min),
            list.len()
        );
        jobs.push(Job {
            pid,
            benefit: remote * cpu,
            kind: JobKind::Ranges { to, dest, ranges: list.iter().map(|r| (r.0, r.1)).collect(), detail },
        });
    }
    jobs
}

/// Share of `pid`'s hot-range samples (its threads' own, `TaskView::hot`) that fall in ranges
/// sampled from two or more of the node sets its threads are planned on: near 1 for one buffer
/// shared by all threads (numa01), near 0 for per-thread slices (numa02, numa01_THREAD_ALLOC).
fn shared_sample_share(pl: &Planner<'_>, pid: u32) -> f64 {
    let m = pl.model;
    let mut ranges: BTreeMap<u64, BTreeMap<Vec<usize>, u64>> = BTreeMap::new();
    for (k, tp) in pl.task_plan.range(TaskKey { pid, tid: 0 }..=TaskKey { pid, tid: u32::MAX }) {
        let Some(tv) = m.tasks.get(k).filter(|_| placed_there(pl, k, tp)) else { continue };
        for h in &tv.hot {
            *ranges.entry(h.start).or_default().entry(tp.nodes.clone()).or_default() += h.samples.max(1);
        }
    }
    let (mut shared, mut all) = (0u64, 0u64);
    for by_set in ranges.values() {
        let s: u64 = by_set.values().sum();
        all += s;
        if by_set.len() > 1 {
            shared += s;
        }
    }
    if all == 0 {
        0.0
    } else {
        shared as f64 / all as f64
    }
}

/// Whether `pid`'s threads work on slices of their own (rule "young-allowance-slices"; the planner
/// also keeps the verdict per static-large process, `Planner::sliced`): of its threads with at
/// least two sampled hot ranges, at least half have them within twice the process's memory per
/// thread (plus two ranges' length). numa02 and numa01_THREAD_ALLOC: each thread's ranges lie in
/// its 1/T slice; numa01: every thread samples all over one shared buffer, so two samples of one
/// thread lie far apart. Threads with fewer than two ranges do not count; without any such thread
/// the process is not judged slice-shaped.
pub(crate) fn slice_shaped(m: &numapilot_model::Model, pid: u32) -> bool {
    let (compact, judged) = slice_counts(m, pid);
    judged > 0 && compact * 2 >= judged
}

/// Whether `pid`'s threads each sample all over its memory (rule "shared-pool-waits"): of its
/// threads with at least two sampled hot ranges, more than half have them spread wider than
/// twice the process's memory per thread (plus two ranges' length); the opposite verdict of
/// [`slice_shaped`], and like it `false` without any such thread. A database's buffer pool,
/// queried at random by every worker, reads so from its first samples; its ranges are sampled so
/// sparsely that few are seen from two node sets, so `shared_sample_share` stays low for seconds.
fn spans_shared_pool(pl: &Planner<'_>, pid: u32) -> bool {
    let (compact, judged) = slice_counts(pl.model, pid);
    judged > 0 && compact * 2 < judged
}

/// Of `pid`'s threads with at least two sampled hot ranges (`judged`), how many have them within
/// twice the process's memory per thread plus two ranges' length (`compact`).
fn slice_counts(m: &numapilot_model::Model, pid: u32) -> (usize, usize) {
    let Some(p) = m.procs.get(&pid) else { return (0, 0) };
    let slice = p.rss_bytes / p.tids.len().max(1) as u64;
    let (mut compact, mut judged) = (0usize, 0usize);
    for tid in &p.tids {
        let Some(t) = m.tasks.get(&TaskKey { pid, tid: *tid }) else { continue };
        if t.hot.len() < 2 {
            continue;
        }
        judged += 1;
        let lo = t.hot.iter().map(|h| h.start).min().unwrap_or(0);
        let hi = t.hot.iter().map(|h| h.start.saturating_add(h.len)).max().unwrap_or(0);
        let len = t.hot.iter().map(|h| h.len).max().unwrap_or(0);
        if hi.saturating_sub(lo) <= 2 * slice + 2 * len {
            compact += 1;
        }
    }
    (compact, judged)
}

/// Share of `p`'s accesses per node: the CPU-weighted mean of its threads' shares, else its
/// resident memory.
fn proc_share(pl: &Planner<'_>, pid: u32) -> (Vec<f64>, &'static str) {
    let m = pl.model;
    let n = m.topo.nodes.len();
    let p = &m.procs[&pid];
    let mut share = vec![0.0; n];
    for &tid in &p.tids {
        if let Some(t) = m.tasks.get(&TaskKey { pid, tid }) {
            let w = t.cpu_rate.max(1e-3);
            for (i, a) in t.access.iter().enumerate().take(n) {
                share[i] += a * w;
            }
        }
    }
    let s: f64 = share.iter().sum();
    if s > 0.0 {
        let src = super::place::share_source(p.tids.iter().filter_map(|&tid| m.tasks.get(&TaskKey { pid, tid })));
        return (share.iter().map(|x| x / s).collect(), src);
    }
    // Its own memory: what other processes map too stays where it is.
    let own = p.own_mem_by_node();
    let total: u64 = own.iter().sum();
    if total == 0 {
        return (vec![0.0; n], "resident memory");
    }
    (own.iter().take(n).map(|&b| b as f64 / total as f64).collect(), "resident memory")
}

/// The pages of `pid` this pass would copy to dense node `to` were all its threads to run there
/// (rule move-counts-the-copy-it-triggers: the cost check of cpu-follows-memory counts them):
/// its own memory off `to`, when that is at least `remote_share_min` of its access shares (its
/// CPU-weighted threads' shares, else its own memory; below `min_process_rss_mib` at least its own
/// memory's share off `to`: a small process takes its memory along) and the benefit over
/// `benefit_horizon_s` outweighs the copy, as the memory-follows-cpu job below decides. Leaves out
/// what that job sees and this does not: cold memory (hot ranges only), classes that bind, a young
/// process's estimated CPU, a move in flight, the budget.
pub(crate) fn follow_pages(pl: &Planner<'_>, pid: u32, to: usize) -> u64 {
    let m = pl.model;
    let t = &m.tunables;
    let Some(p) = m.procs.get(&pid) else { return 0 };
    let own = p.own_mem_by_node();
    let pages: u64 = own.iter().enumerate().filter(|&(i, _)| i != to).map(|(_, &b)| b / BASE_PAGE_BYTES).sum();
    if pages == 0 {
        return 0;
    }
    let (share, _) = proc_share(pl, pid);
    let mut remote = (1.0 - share.get(to).copied().unwrap_or(0.0)).max(0.0);
    // A small process counts its own memory off `to` too, as the job does (of the larger of its
    // two readings).
    if (p.rss_bytes as f64) < t.min_process_rss_mib as f64 * MIB && p.rss_bytes > 0 {
        let outside: u64 = own.iter().enumerate().filter(|&(i, _)| i != to).map(|(_, &b)| b).sum();
        let of: u64 = p.mem_by_node.iter().sum::<u64>().max(p.rss_bytes);
        remote = remote.max(outside as f64 / of as f64).min(1.0);
    }
    let benefit_s = remote * p.cpu_rate * t.benefit_horizon_s;
    let cost_s = pages as f64 * t.migrate_cost_ns_per_page as f64 / 1e9;
    if remote >= t.remote_share_min && benefit_s > cost_s {
        pages
    } else {
        0
    }
}

/// Total-variation distance between `p`'s memory distribution and `weights` over `nodes`.
fn deviation(pl: &Planner<'_>, pid: u32, nodes: &[usize], weights: &[u32]) -> f64 {
    // Of its own memory: an interleave moves only that, so memory shared with other processes
    // (a database's shared buffers) would keep the deviation up and the same spread asked for
    // at every decision.
    let own = pl.model.procs[&pid].own_mem_by_node();
    let total: u64 = own.iter().sum();
    if total == 0 {
        return 0.0;
    }
    let wsum: f64 = weights.iter().map(|&w| w as f64).sum::<f64>().max(1.0);
    let mut d = 0.0;
    for (i, &b) in own.iter().enumerate() {
        let want = nodes.iter().position(|&x| x == i).map_or(0.0, |j| weights[j] as f64 / wsum);
        d += (b as f64 / total as f64 - want).abs();
    }
    d / 2.0
}

/// Plans the memory actions.
pub(crate) fn memory(pl: &mut Planner<'_>, policy: &Adaptive) {
    let m = pl.model;
    let t = &m.tunables;
    let new: BTreeSet<u32> = pl.new_procs.iter().copied().collect();
    // Planned CPU of each process per node set of its units, and per node.
    let mut cpu_on: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    let mut set_cpu: BTreeMap<u32, BTreeMap<Vec<usize>, f64>> = BTreeMap::new();
    for (k, tp) in pl.task_plan.iter().filter(|(k, tp)| placed_there(pl, k, tp)) {
        // Where the thread will run after this plan (a balancing move included).
        *set_cpu.entry(k.pid).or_default().entry(tp.nodes.clone()).or_default() += tp.cpu.max(1e-3);
        let v = cpu_on.entry(k.pid).or_insert_with(|| vec![0.0; m.topo.nodes.len()]);
        let c = match pl.task_idx(k) {
            Some(c) if tp.nodes.contains(&c) => c,
            _ => tp.nodes.first().copied().unwrap_or(0),
        };
        v[c] += tp.cpu.max(1e-3);
    }
    // A young idle process has no unit (its threads are idle), nor one waiting for its new
    // threads' rates: its node is the one node its threads may run on, where the fork rule put
    // them (a sleeping thread's last CPU is still the one it slept on).
    for &pid in &pl.managed {
        if set_cpu.contains_key(&pid) || new.contains(&pid) || !idle_young(pl, policy, pid) {
            continue;
        }
        let Some(i) = allowed_node(pl, pid) else { continue };
        set_cpu.entry(pid).or_default().insert(vec![i], 1e-3);
        cpu_on.entry(pid).or_insert_with(|| vec![0.0; m.topo.nodes.len()])[i] += 1e-3;
    }
    // A new process the fork rule placed on one node in this plan counts there at the estimate
    // it was placed with (rule "fork-memory-follows"): the fork rule put it away from the memory
    // it has already touched (another node was less loaded, or had no room), and that memory is
    // all the signal there is on what it will work on.
    for (&pid, (set, est)) in &pl.forked {
        if let ([i], true) = (&set[..], young_and_idle(pl, pid)) {
            let i = *i;
            set_cpu.entry(pid).or_default().insert(vec![i], est.max(1e-3));
            cpu_on.entry(pid).or_insert_with(|| vec![0.0; m.topo.nodes.len()])[i] += est.max(1e-3);
        }
    }
    // Processes with a thread that has sampled hot ranges.
    let sampled_pids: BTreeSet<u32> = m.tasks.iter().filter(|(_, t)| !t.hot.is_empty()).map(|(k, _)| k.pid).collect();
    // The node sets of each process's units. minor-threads-stay-behind: without access samples,
    // a process whose planned CPU is almost all on one node set (every other set under
    // remote_share_min of it) is not split: its memory follows the threads doing the work. The
    // balancer moves a light thread off a full node (numa01's main thread, 0.16 CPUs beside two
    // busy workers on a 2-CPU node); counted as a split, the process got an interleave by CPU,
    // or nothing below the RSS floor: in the rig's 4-node race one numa01 process ran 20 s on
    // node 3 with all its 37 MiB on node 0.
    let mut sets: BTreeMap<u32, BTreeSet<Vec<usize>>> = BTreeMap::new();
    let mut minor_cpu: BTreeMap<u32, f64> = BTreeMap::new();
    for (pid, per_set) in &set_cpu {
        let mut nodesets: BTreeSet<Vec<usize>> = per_set.keys().cloned().collect();
        if per_set.len() > 1 && !sampled_pids.contains(pid) {
            let total: f64 = per_set.values().sum();
            let major: Vec<&Vec<usize>> =
                per_set.iter().filter(|(_, &c)| c >= t.remote_share_min * total).map(|(s, _)| s).collect();
            if let [only] = major[..] {
                minor_cpu.insert(*pid, total - per_set[only]);
                nodesets = BTreeSet::from([only.clone()]);
            }
        }
        sets.insert(*pid, nodesets);
    }
    let mut jobs = Vec::new();
    // Held shared spreads: continue the interleave (same nodes, same weights) until done.
    for &pid in &pl.held_shared {
        if policy.moving.contains_key(&pid) {
            continue;
        }
        let Some((set, weights)) = policy.shared_spread(m, pid) else { continue };
        let p = &m.procs[&pid];
        let nodes: Vec<usize> = set.iter().filter_map(|id| m.node_idx(id)).collect();
        if nodes.len() != weights.len() {
            continue;
        }
        let dev = deviation(pl, pid, &nodes, weights);
        if dev < t.spread_done_share {
            continue;
        }
        // Of its own memory, as the deviation: the interleave leaves what other processes map
        // too where it is (counted, the plan's page budget went on pages no move takes).
        let pages = (dev * p.own_rss_bytes() as f64 / BASE_PAGE_BYTES as f64) as u64;
        let detail = format!(
            "process {pid} ({}): its shared buffer is held interleaved over nodes {set} (weights {weights:?}, decided at period {}); {} of its own {:.0} MiB is still off that spread (>= {})",
            p.comm,
            policy.proc_state(m, pid).and_then(|s| s.shared_spread.as_ref()).map_or(0, |s| s.0.period),
            pct(dev),
            p.own_rss_bytes() as f64 / MIB,
            pct(t.spread_done_share)
        );
        jobs.push(Job {
            pid,
            benefit: dev * p.cpu_rate,
            kind: JobKind::Spread { nodes, weights: weights.to_vec(), pages, rule: SHARED_RULE, detail, cont: true },
        });
    }
    for (&pid, nodesets) in &sets {
        let Some(p) = m.procs.get(&pid) else { continue };
        let forked_now =
            pl.forked.get(&pid).filter(|(set, _)| set.len() == 1 && young_and_idle(pl, pid)).map(|&(_, est)| est);
        if (new.contains(&pid) && forked_now.is_none())
            || !pl.managed.contains(&pid)
            || p.class == ProcessClass::Growing
        {
            continue;
        }
        // Its pages are moving in the background: nothing more until that move ends (rule
        // "moves-in-flight", `Adaptive::moving`).
        if policy.moving.contains_key(&pid) {
            continue;
        }
        // Mostly cold memory (rule "cold-memory-stays"): only its hot ranges move, and the classes
        // read from its whole RSS do not apply.
        let cold = pl.accessed.get(&pid);
        let class = effective_class(p.class, cold.is_some(), pl.sliced.contains(&pid));
        let cpu = &cpu_on[&pid];
        let union: Vec<usize> = {
            let s: BTreeSet<usize> = nodesets.iter().flatten().copied().collect();
            s.into_iter().collect()
        };
        if union.is_empty() {
            continue;
        }
        let rss_ok = p.rss_bytes as f64 >= t.min_process_rss_mib as f64 * MIB;
        let sampled = sampled_pids.contains(&pid);
        let split = class != ProcessClass::BandwidthBound && nodesets.len() > 1;
        // One buffer shared by threads on several node sets: interleave it over them (below).
        let shared = split && sampled && shared_sample_share(pl, pid) >= t.shared_range_share_min;
        if split && sampled && !shared {
            // Each unit's ranges to its nodes; what lies outside all of them, to their union.
            // Not a pool every thread samples all over (rule "shared-pool-waits"): a range of it
            // sampled from one node set is used from all of them, and moving it there pulls the
            // pool towards whichever threads sampled it (the process mix's database: 1.3 GiB of
            // its pool moved to the node its threads were leaving, then bound back at 19 s).
            if rss_ok && !spans_shared_pool(pl, pid) {
                jobs.extend(split_jobs(pl, pid));
            }
        }
        if cold.is_some() && split {
            // Its units' hot ranges went to their nodes (above); a spread or the remainder would
            // copy its cold memory into the nodes it runs on.
            continue;
        }
        if class == ProcessClass::BandwidthBound || (split && (!sampled || shared)) {
            // Spread: bandwidth-bound equal over the nodes it runs on; split processes by CPU.
            let (nodes, weights, rule) = if class == ProcessClass::BandwidthBound {
                let mut on: Vec<usize> = p.tids.iter().filter_map(|&tid| pl.task_idx(&TaskKey { pid, tid })).collect();
                on.sort_unstable();
                on.dedup();
                let w = vec![1; on.len()];
                (on, w, "bandwidth-interleave")
            } else {
                let on: Vec<usize> = union.iter().copied().filter(|&i| cpu[i] > 0.0).collect();
                let w = on.iter().map(|&i| ((cpu[i] * WEIGHT_PER_CPU).round() as u32).max(1)).collect();
                (on, w, if shared { SHARED_RULE } else { "split-process-interleave" })
            };
            if nodes.len() < 2 || !rss_ok {
                continue;
            }
            let dev = deviation(pl, pid, &nodes, &weights);
            // A shared buffer starts its spread from spread_done_share off it, the point at which
            // a held spread counts as done (rule "shared-spread-threshold"): every thread of the
            // process streams through all of it, so a node holding more than its CPU's share
            // serves the excess for all of them (numa01 on 4 nodes: a buffer left 68/32 over two
            // nodes, 18% off, below remote_share_min, ran 28% longer than one spread evenly).
            let start = if shared { t.spread_done_share } else { t.remote_share_min };
            if dev < start {
                continue;
            }
            // Of its own memory, as the deviation (see the held spread above).
            let pages = (dev * p.own_rss_bytes() as f64 / BASE_PAGE_BYTES as f64) as u64;
            let detail = format!(
                "process {pid} ({}): {} over nodes {} (weights {:?}); {} of its own {:.0} MiB is off that spread (>= {})",
                p.comm,
                if rule == "bandwidth-interleave" {
                    "bandwidth-bound, runs on several nodes: interleave"
                } else if shared {
                    "its groups run on different nodes and share one buffer (its threads' hot ranges are sampled from several of them): interleave by CPU"
                } else {
                    "its groups run on different nodes and no per-thread ranges are known: interleave by CPU"
                },
                pl.node_set(&nodes),
                weights,
                pct(dev),
                p.own_rss_bytes() as f64 / MIB,
                pct(start)
            );
            jobs.push(Job {
                pid,
                benefit: dev * p.cpu_rate,
                kind: JobKind::Spread { nodes, weights, pages, rule, detail, cont: false },
            });
            continue;
        }
        // A split process whose threads' ranges are sampled: memory outside its nodes that no
        // thread sampled waits for its samples (rule "split-remainder-waits") when the nodes are
        // several: a MigratePages to the set would guess the node (relative mapping, not by
        // accessor), and a range sent to the wrong one moves a second time when its samples come
        // (numa01_THREAD_ALLOC on 4 nodes: 18% more pages than AutoNUMA).
        if split && sampled && union.len() > 1 {
            continue;
        }
        let to: Vec<usize> = if split { union.clone() } else { nodesets.iter().next().cloned().unwrap_or_default() };
        let (share, src) = proc_share(pl, pid);
        let local: f64 = to.iter().map(|&i| share[i]).sum();
        let mut remote = (1.0 - local).max(0.0);
        // A small process (below the RSS floor) takes its memory along wherever it is: it costs
        // almost nothing, and what its own samples miss may be other processes' hot data in it
        // (a client's socket buffers, read by a server on this node).
        // Only what a move of this process can move counts: pages other
        // processes map too (a library's text) stay where they are whatever is asked.
        let own = p.own_mem_by_node();
        if !rss_ok && p.rss_bytes > 0 {
            let outside: u64 = own.iter().enumerate().filter(|(i, _)| !to.contains(i)).map(|(_, &b)| b).sum();
            // Of the larger of the two readings: the per-node figures can be an older numa_maps
            // read than the RSS (a process that shrank since), which made "6000% remote" and a
            // benefit that put a tiny process ahead of real work (review helper-40).
            let of: u64 = p.mem_by_node.iter().sum::<u64>().max(p.rss_bytes);
            remote = remote.max(outside as f64 / of as f64).min(1.0);
        }
        let bind = matches!(class, ProcessClass::StaticLarge | ProcessClass::LatencySensitive);
        // Cold memory stays: only the accessed memory outside S counts (and moves), and of it no
        // more than its own memory there (rule "hot-within-own"): the sampled hot ranges are
        // where its threads read, shared memory included (a guest's RAM in a file a vhost-user
        // backend maps too, a database's shared buffers), and a move of this process leaves the
        // pages other processes map where they are. Counted whole, a mostly-cold process whose
        // remote hot memory was all shared had it asked for (MoveRanges) and moved none of it.
        let by_node: Vec<u64> = match cold {
            Some(c) => c.by_node.iter().zip(&own).map(|(&hot, &mine)| hot.min(mine)).collect(),
            None => own.clone(),
        };
        let remote_pages: u64 =
            by_node.iter().enumerate().filter(|(i, _)| !to.contains(i)).map(|(_, &b)| b / BASE_PAGE_BYTES).sum();
        if remote_pages == 0 {
            continue;
        }
        // A young idle process counts the fork rule's estimate as its CPU (rule
        // "idle-young-memory-follows", see `idle_young`).
        let idle = idle_young(pl, policy, pid);
        let cpu_rate = match forked_now {
            _ if idle => p.cpu_rate.max(p.tids.len() as f64 * t.new_thread_cpu),
            Some(est) => p.cpu_rate.max(est),
            None => p.cpu_rate,
        };
        let benefit_s = remote * cpu_rate * t.benefit_horizon_s;
        let cost_s = remote_pages as f64 * t.migrate_cost_ns_per_page as f64 / 1e9;
        if !bind && (remote < t.remote_share_min || benefit_s <= cost_s) {
            continue;
        }
        let Some(dest) = to.iter().copied().max_by(|&a, &b| cpu[a].total_cmp(&cpu[b]).then(b.cmp(&a))) else {
            continue;
        };
        let detail = if bind {
            format!(
                "process {pid} ({}, {:?}): binds its memory to nodes {}: {} of its {src} and {} pages outside",
                p.comm,
                p.class,
                pl.node_set(&to),
                pct(remote),
                remote_pages
            )
        } else {
            let cold_note = cold.map_or(String::new(), |c| {
                format!(
                    "; [{COLD_RULE}] {} of its {:.0} MiB is cold (in no sampled hot range, >= {}): only hot ranges move",
                    pct(c.cold_share),
                    p.rss_bytes as f64 / MIB,
                    pct(t.cold_memory_share_min)
                )
            });
            let minor_note = minor_cpu.get(&pid).map_or(String::new(), |c| {
                format!(
                    "; [minor-threads-stay-behind] its other threads ({c:.2} CPUs, each node set under {} of its CPU) run elsewhere",
                    pct(t.remote_share_min)
                )
            });
            let idle_note = if idle && pl.waiting.contains(&pid) {
                format!(
                    "; [{IDLE_YOUNG_RULE}] young ({} ms), placed by the fork rule, its new threads' rates not known yet (wait-for-rates): counts {} x new_thread_cpu {:.1}",
                    p.age_ns(m.now_ns) / 1_000_000,
                    numapilot_topology::plural(p.tids.len(), "thread"),
                    t.new_thread_cpu
                )
            } else if idle {
                format!(
                    "; [{IDLE_YOUNG_RULE}] young ({} ms) and idle ({:.2} CPUs): counts {} x new_thread_cpu {:.1}, its memory moves before its work starts",
                    p.age_ns(m.now_ns) / 1_000_000,
                    p.cpu_rate,
                    numapilot_topology::plural(p.tids.len(), "thread"),
                    t.new_thread_cpu
                )
            } else if let Some(est) = forked_now {
                format!(
                    "; [{FORK_FOLLOWS_RULE}] new ({} ms), placed there by the fork rule in this decision at {est:.1} CPUs: its memory follows at once",
                    p.age_ns(m.now_ns) / 1_000_000
                )
            } else {
                String::new()
            };
            format!(
                "process {pid} ({}) runs on nodes {}: {} of its {src} remote (>= {}); benefit {:.2} CPU-s ({} x {:.2} CPUs x {} s) > copy cost {:.2} s ({} pages){cold_note}{minor_note}{idle_note}",
                p.comm,
                pl.node_set(&to),
                pct(remote),
                pct(t.remote_share_min),
                benefit_s,
                pct(remote),
                cpu_rate,
                t.benefit_horizon_s,
                cost_s,
                remote_pages
            )
        };
        jobs.push(Job {
            pid,
            // A split process's remainder goes after its units' own ranges.
            benefit: if bind {
                f64::MAX
            } else if split {
                0.0
            } else {
                remote * cpu_rate
            },
            kind: JobKind::Follow { to, dest, remote, detail, bind, hot: !split, cold: cold.is_some() },
        });
    }
    jobs.sort_by(|a, b| b.benefit.total_cmp(&a.benefit).then(a.pid.cmp(&b.pid)));
    // A young process's own allowance is for memory its threads work on slice by slice: a shared
    // buffer's early samples cannot yet tell sharing from private use, and its ranges would be
    // moved towards whichever node sampled them first (numa01 on 36 nodes: 2.11 M pages with the
    // allowance against AutoNUMA's 1.81 M); it moves under the shared budget.
    let young: Vec<u32> = pl.young_budget.keys().copied().collect();
    for pid in young {
        if slice_shaped(pl.model, pid) {
            pl.young_slices.insert(pid);
        } else {
            pl.young_budget.insert(pid, 0);
        }
    }
    for job in jobs {
        if pl.budget_for(job.pid) == 0 {
            continue;
        }
        let p = &m.procs[&job.pid];
        let target = TaskRef { pid: job.pid, tid: None, starttime: p.starttime };
        let load = p.cpu_rate;
        let dest_set: NodeSet = match &job.kind {
            JobKind::Follow { to, .. } | JobKind::Ranges { to, .. } => pl.node_set(to),
            JobKind::Spread { nodes, .. } => pl.node_set(nodes),
        };
        // Rule "confined-memory": memory goes only to nodes its cpuset lets it hold memory on
        // (the kernel refuses a page for any other: EACCES per page, counted as failures).
        if p.confined.as_ref().is_some_and(|c| !dest_set.is_subset(&c.nodes)) {
            continue;
        }
        let cont = matches!(job.kind, JobKind::Spread { cont: true, .. });
        // The hold: memory sent elsewhere within hold_periods stays (unless the load changed).
        if let Some(mv) = policy.proc_state(m, job.pid).and_then(|s| s.mem_move.as_ref()).filter(|_| !cont) {
            let moving_on = match &job.kind {
                JobKind::Follow { .. } => mv.nodes.is_subset(&dest_set),
                // Several units of one process move ranges to different nodes: each its own.
                JobKind::Ranges { .. } => true,
                JobKind::Spread { .. } => mv.nodes == dest_set,
            };
            if !moving_on && mv.holds(pl.period, load, m) {
                continue;
            }
            // A spread is done once per hold period.
            if matches!(job.kind, JobKind::Spread { .. }) && moving_on && mv.holds(pl.period, load, m) {
                continue;
            }
        }
        // Rule futile-move-backs-off (futile.rs): the same kind of move to these nodes moved
        // (almost) nothing last time, and nothing it depends on has changed since.
        let futile = |kind: MoveKind| match policy.futile_check(m, job.pid, kind, &dest_set) {
            Check::Free => Some(String::new()),
            Check::Waits => None,
            Check::Again(note) => Some(format!("; {note}")),
        };
        match job.kind {
            JobKind::Ranges { to: _, dest, ranges, detail } => {
                let Some(again) = futile(MoveKind::Ranges) else { continue };
                let mut picked = Vec::new();
                let mut pages = 0u64;
                let moved = policy.proc_state(m, job.pid).map(|s| &s.range_moves);
                for (start, len) in ranges {
                    // Moved within the hold: stays (no bouncing between two accessor nodes).
                    if moved.is_some_and(|r| r.contains_key(&start)) {
                        continue;
                    }
                    let room = pl.budget_for(job.pid) - pages;
                    let take = (len / BASE_PAGE_BYTES).min(room);
                    if take == 0 {
                        break;
                    }
                    picked.push((start, take * BASE_PAGE_BYTES));
                    pages += take;
                }
                if picked.is_empty() {
                    continue;
                }
                pl.spend(job.pid, pages);
                let dest_id = pl.id(dest);
                pl.actions.push((
                    Action {
                        target,
                        kind: ActionKind::MoveRanges { ranges: picked, to: dest_id },
                        reason: Reason::new(
                            "memory-follows-cpu",
                            format!(
                                "{detail}; hottest first, {pages} pages to node {dest_id} within the budget{again}"
                            ),
                        ),
                    },
                    load,
                ));
            }
            JobKind::Spread { nodes, weights, pages, rule, detail, .. } => {
                let Some(again) = futile(MoveKind::Interleave) else { continue };
                let max = pages.min(pl.budget_for(job.pid));
                pl.spend(job.pid, max);
                pl.actions.push((
                    Action {
                        target,
                        kind: ActionKind::Interleave {
                            ranges: vec![],
                            nodes: pl.node_set(&nodes),
                            weights,
                            max_pages: Some(max),
                        },
                        reason: Reason::new(rule, format!("{detail}; {max} pages of the plan's budget{again}")),
                    },
                    load,
                ));
            }
            JobKind::Follow { to, dest, remote, detail, bind, hot, cold } => {
                let rule = if bind { "class-bind-memory" } else { "memory-follows-cpu" };
                let dest_id = pl.id(dest);
                // Hottest ranges outside S first. A range moved within the hold is not moved again
                // (the essay's hold, as the Ranges job keeps it): its `node` is where it was last
                // sampled, so until a sample lands on it again a range moved to S still reads as
                // outside it, and numa01_THREAD_ALLOC's next two plans spent two thirds of their
                // page budget on 371 ranges already on node 1 (rule "moved-ranges-stay").
                let moved = policy.proc_state(m, job.pid).map(|s| &s.range_moves);
                let ranges_again = futile(MoveKind::Ranges);
                let mut ranges = Vec::new();
                let mut hot_pages = 0u64;
                for h in p.hot.iter().filter(|_| hot && ranges_again.is_some()) {
                    if dest_set.contains(h.node)
                        || moved.is_some_and(|r| r.contains_key(&h.start))
                        || pl.budget_for(job.pid) == hot_pages
                    {
                        continue;
                    }
                    let room = (pl.budget_for(job.pid) - hot_pages) * BASE_PAGE_BYTES;
                    let len = h.len.min(room);
                    let pages = len / BASE_PAGE_BYTES;
                    if pages == 0 {
                        continue;
                    }
                    ranges.push((h.start, pages * BASE_PAGE_BYTES));
                    hot_pages += pages;
                }
                let own = p.own_mem_by_node();
                let remote_pages: u64 =
                    own.iter().enumerate().filter(|(i, _)| !to.contains(i)).map(|(_, &b)| b / BASE_PAGE_BYTES).sum();
                if !ranges.is_empty() {
                    pl.spend(job.pid, hot_pages);
                    pl.actions.push((
                        Action {
                            target,
                            kind: ActionKind::MoveRanges { ranges: ranges.clone(), to: dest_id },
                            reason: Reason::new(
                                rule,
                                format!(
                                    "{detail}; hottest {} ranges ({} pages) to node {dest_id} first{}",
                                    ranges.len(),
                                    hot_pages,
                                    ranges_again.as_deref().unwrap_or("")
                                ),
                            ),
                        },
                        load,
                    ));
                }
                // Cold memory stays: what is outside S beyond the hot ranges is not copied.
                let rest = if cold { 0 } else { remote_pages.saturating_sub(hot_pages).min(pl.budget_for(job.pid)) };
                let rest_again = futile(MoveKind::Migrate);
                if let (true, Some(again)) = (rest > 0, rest_again) {
                    let from: NodeSet = own
                        .iter()
                        .enumerate()
                        .filter(|(i, &b)| !to.contains(i) && b > 0)
                        .map(|(i, _)| pl.id(i))
                        .collect();
                    pl.spend(job.pid, rest);
                    let _ = remote;
                    pl.actions.push((
                        Action {
                            target,
                            kind: ActionKind::MigratePages { from, to: dest_set.clone(), max_pages: Some(rest) },
                            reason: Reason::new(
                                rule,
                                format!("{detail}; {rest} of {remote_pages} remote pages within the budget{again}"),
                            ),
                        },
                        load,
                    ));
                }
            }
        }
    }
}
