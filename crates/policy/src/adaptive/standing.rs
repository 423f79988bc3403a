//! Standing orders: where a young process's threads start, decided before they exist.
//!
//! # Problem
//!
//! A workload that sets up and then starts its work (numa02: the main thread first-touches the
//! whole buffer, then starts one worker per CPU; a server that loads its data, then its thread
//! pool) creates its threads where the kernel's fork balancing puts them: on the idlest CPUs,
//! whatever node its memory is on. The decisions see them at the next step at the earliest: the
//! proc connector wakes the loop `new_thread_wake_ms` after the first thread, and the step then
//! observes the machine before it decides. On the rig's 4-node guest (QEMU TCG) that step took
//! 80 ms on average, and numa02's workers ran remote for 0.13-0.24 s after "go" (the rig race,
//! 3 repetitions: docs/race-history.md, standing orders); a first read of their CPUs in that
//! time judged the process 0% local.
//!
//! # Approach
//!
//! The decision that comes before the threads already knows where the memory is. For every
//! young process worth settling (`young_and_worth`, first seen young) that this policy has not
//! placed, whose memory is mostly on one node, the plan carries a *standing order* (rule
//! `new-threads-follow-memory`): its threads to that node's CPUs. The host carries it out only
//! if the process starts a thread before the next decision (the live daemon, on the proc
//! connector's event, within a millisecond), so a new thread is born on the node holding the
//! memory; the others (CPU masks are inherited at clone) follow from the one mask. Each order is
//! carried out at most once and every plan replaces them, except that an order stands one plan
//! longer for a process that plan neither acts on nor orders (`Engine::on_new_threads`: a thread
//! created while a step runs is heard of only after it).
//!
//! ```text
//!   for each young process P, first seen young, worth settling, not placed by this policy:
//!     skip: P planned in this plan, launch-advised, CPU-narrowed by someone (its own mask)
//!     skip: held by someone else other than by a memory policy alone (see below)
//!     M = resident memory by node;  n = argmax M
//!     need  sum M >= new_process_min_rss_mib  and  M[n] > new_threads_memory_share x sum M
//!           (a majority by default: a process seen early holds its binary's and libraries'
//!           pages at full size, wherever they were read in, beside a part of its data)
//!     need  n has CPUs, is within P's cpuset, and has new_thread_cpu left of its capacity
//!           after this plan and the orders before it (pid order), each counted at one new
//!           thread: used[n] + ordered[n] + new_thread_cpu <= cap[n]   (numa01's two processes,
//!           both first-touched on node 0 of 2 CPUs: one order, not two onto the same node)
//!     need  some thread of P may run outside n's CPUs (else its new threads start there anyway)
//!     order SetAffinity(P, CPUs of n within its cpuset)
//! ```
//!
//! A process that first-touches under an explicit memory policy and drops it before starting its
//! threads (autonuma-benchmark's `NO_BIND_FORCE_SAME_NODE`, the rig's `--force-node`) is held by
//! that policy at every decision before its threads start; it gets an order too, and the host's
//! usual check when carrying it out (`LiveHost::apply` reads numa_maps: an explicit policy still
//! set refuses the action) keeps a process that still binds its memory untouched.
//!
//! Not a hold: the order is a first guess made before the threads' rates exist, as the fork
//! rule's placement is (`record` starts no hold for either); the next decision, with their rates,
//! keeps them there or moves them. The order also counts as the fork rule's placement
//! (`ProcState::forked`), so that rule does not move them away again on its estimate alone.
//!
//! # Limits
//!
//! Only threads created before the next decision: a process that starts its threads later is
//! placed by the decisions as before. The simulator creates no threads mid-run and carries out
//! no order.

use std::collections::BTreeSet;

use numapilot_model::{Model, TaskKey};

use super::place::Planner;
use super::Adaptive;
use crate::action::{Action, ActionKind, Reason, TaskRef};

/// Rule name of the standing order for a young process's new threads.
pub(crate) const NEW_THREADS_RULE: &str = "new-threads-follow-memory";

const MIB: f64 = 1048576.0;

/// Whether some thread of `pid` runs under a CPU mask narrower than the CPUs placement may use
/// (or, when confined, its cpuset's): a placement by the program or an operator.
fn cpu_narrowed(model: &Model, pid: u32) -> bool {
    let Some(p) = model.procs.get(&pid) else { return true };
    let usable = model.topo.usable_cpus();
    p.tids.iter().any(|&tid| {
        model.tasks.get(&TaskKey { pid, tid }).is_some_and(|t| {
            !usable.is_subset(&t.cpus_allowed) && p.confined.as_ref().is_none_or(|c| *t.cpus_allowed != c.cpus)
        })
    })
}

impl Planner<'_> {
    /// The standing orders of this plan (see the module essay). Called after every rule has
    /// planned, so the capacity left is the plan's.
    pub(crate) fn standing_orders(&self, policy: &Adaptive) -> Vec<Action> {
        let m = self.model;
        let t = &m.tunables;
        let young_ns = t.new_process_age_ms.saturating_mul(1_000_000);
        let min_bytes = t.new_process_min_rss_mib.saturating_mul(1 << 20);
        let mut out = Vec::new();
        // What the orders given so far may bring to each node: a new thread each, at least.
        let mut ordered = vec![0.0; self.cap.len()];
        // The processes this plan acts on, once (looking through the plan for each young process
        // grew with processes x actions: 0.34 G instructions a decision at 10,000 processes).
        crate::work::count("standing.actions_looked_at", self.actions.len() as u64);
        let planned: BTreeSet<u32> = self.actions.iter().map(|(a, _)| a.target.pid).collect();
        for (&pid, p) in &m.procs {
            if p.age_at_first_seen_ns >= young_ns || !super::young_and_worth(m, pid) {
                continue;
            }
            if planned.contains(&pid) || self.forked.contains_key(&pid) {
                continue;
            }
            if policy.launch_holds(m, pid) || policy.proc_state(m, pid).is_some_and(|s| s.has_own_masks()) {
                continue;
            }
            // Managed, or held only by a memory policy (it may drop it before its threads start;
            // the host refuses the order while it is still set).
            let held_by_policy_only = p.mem_policy_pinned && !cpu_narrowed(m, pid);
            if !self.managed.contains(&pid) && !held_by_policy_only {
                continue;
            }
            let total: u64 = p.mem_by_node.iter().copied().fold(0, u64::saturating_add);
            let Some((n, on)) =
                p.mem_by_node.iter().copied().enumerate().max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
            else {
                continue;
            };
            if total < min_bytes || (on as f64) <= t.new_threads_memory_share * total as f64 {
                continue;
            }
            if !self.cpu_nodes.contains(&n) || self.reach_of(&[pid]).is_some_and(|r| !r.nodes.contains(&n)) {
                continue;
            }
            let left = self.cap[n] - self.used[n] - ordered[n];
            if left < t.new_thread_cpu {
                continue;
            }
            let cpus = self.cpus_for(pid, &[n]);
            let within = p
                .tids
                .iter()
                .filter_map(|&tid| m.tasks.get(&TaskKey { pid, tid }))
                .all(|tv| tv.cpus_allowed.is_subset(&cpus));
            if cpus.is_empty() || within {
                continue;
            }
            let why = format!(
                "young process {pid} ({}, {}, {:.1} CPUs now): {:.0} of its {:.0} MiB on node {} ({:.0}% > {:.0}%), \
                 {left:.1} of {:.1} CPUs left there after this plan and the orders before it: threads it starts before the next decision start there",
                p.comm,
                numapilot_topology::plural(p.tids.len(), "thread"),
                p.cpu_rate,
                on as f64 / MIB,
                total as f64 / MIB,
                self.id(n),
                100.0 * on as f64 / total as f64,
                100.0 * t.new_threads_memory_share,
                self.cap[n],
            );
            ordered[n] += t.new_thread_cpu;
            out.push(Action {
                target: TaskRef { pid, tid: None, starttime: p.starttime },
                kind: ActionKind::SetAffinity { cpus },
                reason: Reason::new(NEW_THREADS_RULE, why),
            });
        }
        out
    }
}
