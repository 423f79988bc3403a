//! The launch stage (rule "launch-advice"): a node set for a process before it exists.
//!
//! # Problem
//!
//! Every other rule of this policy starts from what the process has already done: where its
//! threads first ran and where they first touched their memory. A VM is resident tens of
//! milliseconds after it starts (QEMU touches guest RAM, the vCPUs their working sets), so on a
//! full machine its memory lands wherever a node had room and every later correction is a copy
//! across servers (the VM mix on `numaconnect-288c`, `workload/vm_mix.rs`: numapilot's per-VM
//! throughput 1.404 x default against a clairvoyant hard binding's 1.571). A VM manager knows a
//! VM's size before it starts; libvirt's `placement='auto'` asks numad (`numad -w NCPUS:MB`) for
//! a node set and starts QEMU bound to it, and the VM mapping paper's first stage maps each VM on
//! arrival from its request (shared/seeds/004, "Stage 1: if a free slot is suitable for VMi, map
//! VMi directly").
//!
//! # Approach
//!
//! ```text
//!   request (cpus, memory) ──► free per node as measured when asking (idle CPUs, free memory),
//!                              or from the model: CPUs - CPU demand of the last period, memory
//!                              free (the topology's before any sample);
//!                              less what earlier advice promised and the model does not show yet
//!                              (a promise holds until the model has seen its process twice, or
//!                              LAUNCH_PROMISE_NS without a pid)
//!                          ──► advise::advise: the smallest set of mutually closest nodes whose
//!                              free CPUs and memory both cover the request (numad -w's question)
//!                          ──► the launcher starts the process with those nodes' CPUs and
//!                              preferred memory; the policy records the CPU set as its own, so
//!                              the process is managed (not "placed by someone else") and the
//!                              fork rule does not place it again
//!   nothing fits           ──► no advice: the process starts where the kernel puts it (the
//!                              figures gone by are returned, for the daemon's refusal to show)
//! ```
//!
//! # Limits
//!
//! Only processes whose launcher asks get advice: in the simulator the workload says so per
//! process (`ProcessSpec::launch_advice`); on a live host `numapilot advise` asks the running
//! daemon over its control socket with the machine measured just before (idle CPUs over
//! `--window-ms`, free memory), which answers through this stage from that measurement less its
//! promises (a promised process already running counts twice until the model has seen it twice:
//! cautious, for a step or two) and adopts the job only when told its pid
//! (`--pid`; a job without one, narrowed by its launcher, counts as placed by someone else). A
//! pid the launcher names is trusted: the process it names is managed from then on, whoever
//! narrowed it. Promises spread a request's CPUs and memory over the chosen nodes in proportion
//! to their free capacity, which is where the process will run only roughly.

use std::collections::BTreeMap;

use numapilot_model::Model;
use numapilot_topology::NodeSet;

use super::{Adaptive, ProcState};
use crate::action::Reason;
use crate::advise::{self, NodeFree};
use crate::engine::{LaunchAdvice, LaunchRequest, NoLaunchAdvice};

/// How long a promise without a pid counts against the free capacity, ns. Default 5 s. Source: a
/// choice, five of the daemon's default 1 s intervals (`interval_ms`), long enough for a launched process to start and
/// be seen twice. What it prevents: two launches in quick succession both told the same free node
/// (numad -w answers each from the same snapshot), and a launch that never happened holding its
/// capacity for good.
pub const LAUNCH_PROMISE_NS: u64 = 5_000_000_000;

/// How many decisions in a row a launched process's threads must wait for the advised nodes' CPUs
/// before rule launch-holds lets the other rules take it. Default 3 (3 s at the daemon's default
/// 1 s `interval_ms`). Source: a choice; a process starting up (exec, the loader, the first
/// touches of its memory) waits on a busy machine for a period or two and then runs, and one
/// period of a neighbour's burst is no verdict on the advice. What it prevents: the advice undone
/// by its own start: the rig's 2-node daemon-safety guest (TCG, 500 ms periods) saw a job launched
/// on node 0 released at its first decision, 0.65 s after the advice, and moved to node 1 by
/// cpu-follows-memory for its first 1.5 MiB (its executable's pages, copied on node 1) before its
/// 250 MiB buffer was touched on node 0; moved back 14 decisions later. Once moved off the advised
/// CPUs the hold is gone for good, so a single period of waiting decided it.
pub const LAUNCH_WAIT_DECISIONS: u32 = 3;

/// What the policy promised a launch.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Promise {
    /// The nodes.
    pub(crate) nodes: NodeSet,
    /// Requested CPUs.
    pub(crate) cpus: f64,
    /// Requested memory, bytes.
    pub(crate) mem_bytes: u64,
    /// When it was given (host clock), ns.
    pub(crate) at_ns: u64,
    /// The reason given, kept for `explain`.
    pub(crate) reason: Reason,
    /// Model updates in which the process was seen so far.
    pub(crate) seen: u32,
}

/// Free CPUs and memory per node as the model has them now (the topology's figures before the
/// first sample), less nothing: the caller subtracts promises.
pub fn free_from_model(model: &Model) -> Vec<NodeFree> {
    model
        .topo
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let cpus = n.cpus.len() as u32;
            let load = model.nodes.get(i).filter(|l| l.mem_total_bytes > 0 && model.updates > 0);
            let free_cpus = (f64::from(cpus) - load.map_or(0.0, |l| l.cpu_demand)).clamp(0.0, f64::from(cpus));
            let mem_free_bytes = load.map_or(n.mem_free_kb.saturating_mul(1024), |l| l.mem_free_bytes);
            NodeFree { node: n.id, cpus, free_cpus, mem_free_bytes }
        })
        .collect()
}

/// A client's measurement (`numapilot advise` reads sysfs and /proc/stat as they are) within the
/// CPUs the model's topology gives each node and the job's reach (`reach_cpus`, the CPUs the
/// client measured): reserved CPUs (`Topology::reserve`: the operator's `reserved_cpus`; the
/// kernel's isolated ones are outside the client's own mask already) are no node's, so a node
/// counts at most its usable CPUs the job may use, free or not, and a node the model does not know
/// is no candidate at all; nor is a node the client did not measure (outside its memory nodes).
/// Without it a node whose CPUs were all reserved was advised for their idle time, and the job ran
/// on reserved CPUs; and a node the machine does not have, kept with no CPUs, was still advised for
/// a memory-only job (`nodes 7` on a one-node host; a review of 2026-11-30). Counted without the
/// reach, a launcher under `taskset -c 0` with CPU 0 reserved was given node 0 for its CPU 0's
/// idle time (node 0 had one usable CPU, CPU 1, which the job could not use).
fn within_topology(model: &Model, measured: &[NodeFree], reach: Option<&numapilot_topology::CpuSet>) -> Vec<NodeFree> {
    measured
        .iter()
        .filter_map(|f| {
            let node = model.topo.node(f.node)?;
            let usable = match reach {
                Some(r) => node.cpus.intersection(r).len(),
                None => node.cpus.len(),
            } as u32;
            let cpus = f.cpus.min(usable);
            Some(NodeFree { cpus, free_cpus: f.free_cpus.clamp(0.0, f64::from(cpus)), ..f.clone() })
        })
        .collect()
}

/// Takes `promise`'s CPUs and memory off `free`, spread over its nodes in proportion to their
/// free capacity.
fn charge(free: &mut [NodeFree], promise: &Promise) {
    let of = |f: &NodeFree| promise.nodes.contains(f.node);
    let cpus: f64 = free.iter().filter(|f| of(f)).map(|f| f.free_cpus).sum();
    let mem: f64 = free.iter().filter(|f| of(f)).map(|f| f.mem_free_bytes as f64).sum();
    for f in free.iter_mut().filter(|f| of(f)) {
        if cpus > 0.0 {
            f.free_cpus = (f.free_cpus - promise.cpus * f.free_cpus / cpus).max(0.0);
        }
        if mem > 0.0 {
            let take = promise.mem_bytes as f64 * f.mem_free_bytes as f64 / mem;
            f.mem_free_bytes = f.mem_free_bytes.saturating_sub(take as u64);
        }
    }
}

impl Adaptive {
    /// Rule "launch-advice" ([`crate::Policy::advise_launch`]).
    pub(crate) fn launch(
        &mut self,
        model: &Model,
        now_ns: u64,
        req: &LaunchRequest,
    ) -> Result<LaunchAdvice, NoLaunchAdvice> {
        self.launch_expire(now_ns);
        let mut free = if req.nodes_now.is_empty() {
            free_from_model(model)
        } else {
            within_topology(model, &req.nodes_now, req.reach_cpus.as_ref())
        };
        // A new request for a pid replaces its earlier promise: it is not charged against itself
        // (asked twice for one pid, the second was refused for the first's room; review helper-55).
        let others = || self.promises.iter().filter(|(pid, _)| Some(**pid) != req.pid);
        for p in others().map(|(_, p)| p).chain(self.anonymous_promises.iter()) {
            charge(&mut free, p);
        }
        // Nothing fits: the figures gone by are the answer's, so a client shows them (it showed its
        // own measurement, before the promises and counting CPUs the job may not use).
        let Ok(advice) = advise::advise(&model.topo, &free, req.cpus, req.mem_bytes) else {
            return Err(NoLaunchAdvice { free });
        };
        let mut promised: Vec<String> = others().map(|(pid, p)| format!("pid {pid} on {}", p.nodes)).collect();
        promised.extend(self.anonymous_promises.iter().map(|p| format!("a launch on {}", p.nodes)));
        let reason = Reason::new(
            "launch-advice",
            format!(
                "launch of {}{}: {:.1} CPUs and {} MiB asked; nodes {} have {:.1} free CPUs and {} MiB free, largest \
                 distance {}{}",
                req.name,
                req.pid.map(|p| format!(" (pid {p})")).unwrap_or_default(),
                req.cpus,
                req.mem_bytes >> 20,
                advice.nodes,
                advice.free_cpus,
                advice.mem_free_bytes >> 20,
                advice.max_distance,
                if promised.is_empty() {
                    String::new()
                } else {
                    format!(" (promised before and not yet seen: {})", promised.join(", "))
                }
            ),
        );
        let promise = Promise {
            nodes: advice.nodes.clone(),
            cpus: req.cpus,
            mem_bytes: req.mem_bytes,
            at_ns: now_ns,
            reason: reason.clone(),
            seen: 0,
        };
        match req.pid {
            Some(pid) => {
                self.promises.insert(pid, promise);
            }
            None => self.anonymous_promises.push(promise),
        }
        Ok(LaunchAdvice { nodes: advice.nodes, reason, free })
    }

    /// Rule "launch-holds": whether `pid`, started on this policy's launch advice, stays as the
    /// launcher placed it this decision: its threads all within the advised nodes' CPUs and not
    /// kept waiting for them at [`LAUNCH_WAIT_DECISIONS`] decisions in a row (`launch_watch`
    /// counts), or, for up to [`LAUNCH_PROMISE_NS`] after the advice, not yet within them (still
    /// being launched). Waiting is the process's own threads' run delay, on average at
    /// `cpu_interference_high` or more (without schedstat, the run delay of its nodes): a node its
    /// own vCPUs keep busy is fully loaded, a bottleneck by load, and fine, and another process's
    /// waiting there is that process's to act on. Memory-bandwidth waiting does not release it: a
    /// devil's own streaming saturates its node's controller, and releasing it there (measured,
    /// the VM mix at seed 1) sent one of its vCPUs and its memory to a neighbour's full node:
    /// 1.566 -> 1.490 x default per VM. Such a process is no unit of the plan (its load counts
    /// where it runs, as a process placed by someone else does); released, the other rules take it.
    /// Full memory is no reason either: a packed machine's nodes are full by design, and the
    /// advice already put its memory with its threads.
    pub(crate) fn launch_holds(&self, model: &Model, pid: u32) -> bool {
        let Some(st) = self.proc_state(model, pid) else { return false };
        let Some((nodes, _, at_ns)) = st.launch.as_ref() else { return false };
        match waits_for_cpus(model, pid, nodes) {
            // Still launching (the launcher, named by its pid, has not applied the advice yet: a
            // shell before it execs numactl): left alone until LAUNCH_PROMISE_NS after the advice.
            // The rig caught the daemon placing such a shell, and then "restoring" the job it
            // became to the shell's CPUs at exit, over the advice numactl had applied.
            None => model.now_ns.saturating_sub(*at_ns) < LAUNCH_PROMISE_NS,
            Some(_) => st.launch_waits < LAUNCH_WAIT_DECISIONS,
        }
    }

    /// At each decision, after `launch_adopt`: counts, for every process started on this policy's
    /// advice, the decisions in a row at which its threads waited for the advised nodes' CPUs
    /// (rule launch-holds); a decision without waiting, or with its threads not all within them,
    /// starts the count again.
    pub(crate) fn launch_watch(&mut self, model: &Model) {
        for (&pid, st) in self.procs.iter_mut() {
            let Some((nodes, _, _)) = st.launch.as_ref() else { continue };
            if model.procs.get(&pid).is_none_or(|p| p.starttime != st.starttime) {
                continue;
            }
            st.launch_waits = match waits_for_cpus(model, pid, nodes) {
                Some(true) => st.launch_waits.saturating_add(1),
                _ => 0,
            };
        }
    }

    /// The promises that count against the free capacity at `now_ns`, one line each: by pid (held
    /// until the model has seen the process twice, or dropped [`LAUNCH_PROMISE_NS`] after the advice
    /// if it never shows), then those without one (held [`LAUNCH_PROMISE_NS`]).
    pub(crate) fn launch_promises_at(&self, now_ns: u64) -> Vec<String> {
        let line = |who: String, p: &Promise| {
            let age = now_ns.saturating_sub(p.at_ns);
            let until = match (who.starts_with("pid"), p.seen) {
                (true, 0) => format!(
                    "until it is seen, at most {:.1} s more",
                    LAUNCH_PROMISE_NS.saturating_sub(age) as f64 / 1e9
                ),
                (true, _) => "until the next decision sees it again".to_string(),
                (false, _) => format!("{:.1} s more", LAUNCH_PROMISE_NS.saturating_sub(age) as f64 / 1e9),
            };
            format!(
                "{who} on nodes {}: {} CPUs, {} MiB, given {:.1} s ago, held {until}",
                p.nodes,
                advise::shown(&p.cpus),
                p.mem_bytes >> 20,
                age as f64 / 1e9
            )
        };
        let mut out: Vec<String> = self.promises.iter().map(|(pid, p)| line(format!("pid {pid}"), p)).collect();
        out.extend(
            self.anonymous_promises
                .iter()
                .filter(|p| now_ns.saturating_sub(p.at_ns) < LAUNCH_PROMISE_NS)
                .map(|p| line("a launch without a pid".into(), p)),
        );
        out
    }

    /// Drops anonymous promises older than [`LAUNCH_PROMISE_NS`].
    fn launch_expire(&mut self, now_ns: u64) {
        self.anonymous_promises.retain(|p| now_ns.saturating_sub(p.at_ns) < LAUNCH_PROMISE_NS);
    }

    /// At each decision: a launched process the model now shows is this policy's own placement
    /// (its CPU set recorded, the fork rule done); its promise stops counting once the model has
    /// seen it twice (its CPU demand and memory are then in the node figures). A pid never seen
    /// within [`LAUNCH_PROMISE_NS`] is dropped.
    pub(crate) fn launch_adopt(&mut self, model: &Model) {
        let mut done = Vec::new();
        for (&pid, promise) in self.promises.iter_mut() {
            let Some(p) = model.procs.get(&pid) else {
                if model.now_ns.saturating_sub(promise.at_ns) >= LAUNCH_PROMISE_NS {
                    done.push(pid);
                }
                continue;
            };
            // The process that asked existed when it asked (a launcher names its own pid before it
            // execs the job); one that started after the advice is another process that took the
            // pid of a launcher gone meanwhile, and the advice is not its own. Its start, from its
            // age, is within a clock tick of the truth (10 ms; suspend makes it earlier, never later).
            let started_ns = model.now_ns.saturating_sub(p.age_ns(model.now_ns));
            if started_ns > promise.at_ns.saturating_add(LAUNCH_START_SLACK_NS) {
                done.push(pid);
                continue;
            }
            promise.seen += 1;
            if promise.seen == 1 {
                let st = self
                    .procs
                    .entry(pid)
                    .or_insert_with(|| ProcState { starttime: p.starttime, ..ProcState::default() });
                st.forked = true;
                st.own_cpus = Some(model.topo.cpus_of_nodes(&promise.nodes));
                st.launch = Some((promise.nodes.clone(), promise.reason.clone(), promise.at_ns));
            }
            if promise.seen >= 2 {
                done.push(pid);
            }
        }
        for pid in done {
            self.promises.remove(&pid);
        }
    }
}

/// Whether the threads of `pid` wait for the CPUs of `nodes` this decision: `None` when they are
/// not all within those CPUs (its launcher has not applied the advice, or someone moved them),
/// else whether their mean run delay is at `cpu_interference_high` or more (without schedstat,
/// whether any of those nodes' run delay is).
fn waits_for_cpus(model: &Model, pid: u32, nodes: &NodeSet) -> Option<bool> {
    let p = model.procs.get(&pid)?;
    let cpus = model.topo.cpus_of_nodes(nodes);
    let tasks: Vec<&numapilot_model::TaskView> =
        p.tids.iter().filter_map(|&tid| model.tasks.get(&numapilot_model::TaskKey { pid, tid })).collect();
    if !tasks.iter().all(|t| t.cpus_allowed.is_subset(&cpus)) {
        return None;
    }
    let high = model.tunables.cpu_interference_high;
    let delays: Vec<f64> = tasks.iter().filter_map(|t| t.run_delay).collect();
    Some(if delays.is_empty() {
        model
            .topo
            .nodes
            .iter()
            .enumerate()
            .any(|(i, n)| nodes.contains(n.id) && model.nodes.get(i).is_some_and(|l| l.cpu.interference >= high))
    } else {
        delays.iter().sum::<f64>() / delays.len() as f64 >= high
    })
}

/// How much later than its launch advice a process may seem to have started and still be the one
/// that asked, ns: 50 ms. Source: start times are kept in clock ticks (10 ms at the usual 100 Hz),
/// and the age is measured against a clock read a moment apart. Prevents: the launcher's own job
/// refused its advice for the rounding of its start time.
const LAUNCH_START_SLACK_NS: u64 = 50_000_000;

/// Promises by pid, kept on the policy.
pub(crate) type Promises = BTreeMap<u32, Promise>;
