//! Rule 6: `explain` — what the policy believes about one process and what it did to it.
//!
//! The preferred node and its reason are computed by the same candidate function the planner
//! uses (against the capacity of an empty plan), so `explain` and `decide` cannot disagree about
//! why a node is preferred; the journal holds the last actions with their outcomes.

use std::fmt;

use numapilot_model::{GroupId, Model, ProcessClass, TaskKey};
use numapilot_topology::plural;
use serde::{Deserialize, Serialize};

use super::place::{Planner, UnitKind};
use super::{Adaptive, LAUNCH_WAIT_DECISIONS};
use crate::action::{Action, Outcome};

/// One past action and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    /// Decision number.
    pub period: u64,
    /// Host time of the decision's sample, ns.
    pub at_ns: u64,
    /// The action with its reason.
    pub action: Action,
    /// Its outcome; `None` in a dry run.
    pub outcome: Option<Outcome>,
}

/// One unit (group or whole process) holding some of the process's threads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupExplanation {
    /// The model's group id; `None` when the unit is the whole process (classified or ungrouped).
    pub group: Option<GroupId>,
    /// Threads in the unit (of all processes in it).
    pub tasks: usize,
    /// Processes in the unit.
    pub pids: Vec<u32>,
    /// CPU demand, CPUs.
    pub cpu: f64,
    /// Memory, bytes.
    pub mem_bytes: u64,
    /// Preferred node (kernel id).
    pub preferred_node: Option<u32>,
    /// Rule that makes it preferred.
    pub rule: String,
    /// Why, with the numbers.
    pub why: String,
}

/// Everything `explain` says about a process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    /// Process id.
    pub pid: u32,
    /// Name.
    pub comm: String,
    /// Class (from behaviour or an override).
    pub class: ProcessClass,
    /// Whether the policy leaves it alone (placed by someone else).
    pub pinned: bool,
    /// Its cpuset's bounds when narrower than the machine, as `(CPU list, node list)`: it is
    /// placed within them only (rule "confined-within-cpuset").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confined: Option<(String, String)>,
    /// Threads, CPU demand (CPUs) and resident memory (bytes).
    pub threads: usize,
    /// Threads of it the kernel keeps the CPUs of (`PF_NO_SETAFFINITY`: io-wq workers on kernels
    /// 5.12 to 6.2), left out of `threads` and of every placement.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub kernel_owned_threads: usize,
    /// CPU demand, CPUs.
    pub cpu: f64,
    /// Resident memory, bytes.
    pub rss_bytes: u64,
    /// Resident memory per node: (kernel id, bytes).
    pub mem_by_node: Vec<(u32, u64)>,
    /// The units holding its threads.
    pub groups: Vec<GroupExplanation>,
    /// The preferred node of its heaviest unit.
    pub preferred_node: Option<u32>,
    /// Why.
    pub why: String,
    /// Page moves of it that wait because the last one of their kind moved (almost) nothing
    /// (rule futile-move-backs-off), one line each with the figures: kind, nodes, pages asked and
    /// moved, until when.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moves_waiting: Vec<String>,
    /// Its last actions, oldest first.
    pub last_actions: Vec<JournalEntry>,
    /// The last plan's standing order for it not carried out yet (rule
    /// new-threads-follow-memory), filled by the engine ([`crate::Engine::explain`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standing: Option<crate::action::Action>,
    /// What became of the process since the step whose view this is, when the host knows and it
    /// matters (it exited, a zombie, its pid reused), filled by the daemon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_last_step: Option<String>,
    /// Why the daemon places nothing, when the machine has one node with a usable CPU or memory,
    /// filled by the daemon: its actions are planned, never carried out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nothing_to_place: Option<String>,
}

pub(crate) fn explain(policy: &Adaptive, model: &Model, pid: u32) -> Option<Explanation> {
    let p = model.procs.get(&pid)?;
    let pinned = policy.foreign_pinned(model, pid);
    let planner = Planner::new(policy, model);
    let mut groups = Vec::new();
    for u in planner.units.iter().filter(|u| u.pids.contains(&pid)) {
        let c = planner.candidates(u);
        groups.push(GroupExplanation {
            group: match u.kind {
                UnitKind::Group(g) => Some(g),
                UnitKind::Process(_) => None,
            },
            tasks: u.tasks.len(),
            pids: u.pids.clone(),
            cpu: u.cpu,
            mem_bytes: u.mem,
            preferred_node: c.order.first().map(|&i| planner.id(i)),
            rule: c.rule.to_string(),
            why: format!("{}: {}", u.label, c.why),
        });
    }
    let (preferred_node, why) = if pinned {
        (None, "placed by someone else (an explicit memory policy, or CPUs narrowed by itself or its launcher below its cpuset, or by a cpuset whose CPUs could not be read): never touched".to_string())
    } else if policy.launch_holds(model, pid) {
        let st = policy.proc_state(model, pid).expect("launch_holds");
        let (nodes, reason, _) = st.launch.clone().expect("launch_holds");
        let first = nodes.iter().next();
        let waited = match st.launch_waits {
            0 => String::new(),
            n => format!(" (it waited at the last {})", plural(n, "decision")),
        };
        (
            first,
            format!(
                "[launch-holds] started on nodes {nodes} on launch advice ([{}] {}); left there until its threads wait for CPUs at {LAUNCH_WAIT_DECISIONS} decisions in a row{waited}",
                reason.rule, reason.detail
            ),
        )
    } else if let Some(&(_, n, until)) = policy.refusals.get(&pid).filter(|_| policy.refusal_waits(model, pid)) {
        (
            None,
            format!(
                "[refusal-backs-off] the host refused its last {} in a row (the last actions say why): not planned \
                 again before decision {until} (now {})",
                plural(n, "action"),
                policy.period
            ),
        )
    } else if planner.new_procs.contains(&pid) {
        (None, "new process: the fork rule places it on the least loaded node at the next decision".to_string())
    } else if let Some(g) = groups.first() {
        (g.preferred_node, format!("[{}] {}", g.rule, g.why))
    } else {
        (None, format!("not managed: CPU below min_group_cpu ({})", plural(model.tunables.min_group_cpu, "CPU")))
    };
    let threads = p.tids.iter().filter(|&&tid| model.tasks.contains_key(&TaskKey { pid, tid })).count();
    Some(Explanation {
        pid,
        comm: p.comm.clone(),
        class: p.class,
        pinned,
        confined: p.confined.as_ref().map(|c| (c.cpus.to_list(), c.nodes.to_list())),
        threads,
        kernel_owned_threads: p.kernel_owned,
        cpu: p.cpu_rate,
        rss_bytes: p.rss_bytes,
        mem_by_node: p.mem_by_node.iter().enumerate().map(|(i, &b)| (model.topo.nodes[i].id, b)).collect(),
        groups,
        preferred_node,
        why,
        moves_waiting: policy.futile_waits(model, pid),
        last_actions: policy.proc_state(model, pid).map(|s| s.journal.iter().cloned().collect()).unwrap_or_default(),
        standing: None,
        since_last_step: None,
        nothing_to_place: None,
    })
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const MIB: f64 = 1048576.0;
        writeln!(
            f,
            "process {} ({}): class {:?}{}, {}{}, {:.2} CPUs, {:.0} MiB",
            self.pid,
            self.comm,
            self.class,
            if self.pinned { ", pinned" } else { "" },
            plural(self.threads, "thread"),
            match self.kernel_owned_threads {
                0 => String::new(),
                n => format!(" (and {} whose CPUs the kernel keeps, left as they are)", plural(n, "thread")),
            },
            self.cpu,
            self.rss_bytes as f64 / MIB
        )?;
        if let Some(since) = &self.since_last_step {
            writeln!(f, "  since the last step: {since}")?;
        }
        if let Some(why) = &self.nothing_to_place {
            writeln!(f, "  nothing to place: {why}; the daemon plans, and carries nothing out")?;
        }
        let mem: Vec<String> = self.mem_by_node.iter().map(|(n, b)| format!("N{n}={:.0}", *b as f64 / MIB)).collect();
        writeln!(f, "  memory (MiB): {}", mem.join(" "))?;
        if let Some((cpus, nodes)) = &self.confined {
            writeln!(f, "  confined by its cpuset to CPUs {cpus}, memory nodes {nodes}: placed within them only")?;
        }
        match self.preferred_node {
            Some(n) => writeln!(f, "  preferred node {n}: {}", self.why)?,
            None => writeln!(f, "  {}", self.why)?,
        }
        for g in &self.groups {
            writeln!(
                f,
                "  unit {}: {} of {:?}, {:.2} CPUs, {:.0} MiB, prefers node {} [{}]",
                g.group.map_or_else(|| "process".to_string(), |id| format!("group {id}")),
                plural(g.tasks, "task"),
                g.pids,
                g.cpu,
                g.mem_bytes as f64 / MIB,
                g.preferred_node.map_or_else(|| "-".to_string(), |n| n.to_string()),
                g.rule
            )?;
        }
        for w in &self.moves_waiting {
            writeln!(f, "  page move waiting: {w}")?;
        }
        if let Some(a) = &self.standing {
            writeln!(
                f,
                "  standing order, until a decision replaces it: if it starts a thread (and has no memory policy of its own by then): {:?}\n    [{}] {}",
                a.kind, a.reason.rule, a.reason.detail
            )?;
        }
        for e in &self.last_actions {
            let outcome = match &e.outcome {
                None if self.nothing_to_place.is_some() => "planned, not carried out (nothing to place)".to_string(),
                None => "planned (dry run)".to_string(),
                Some(o) => format!("{o:?}"),
            };
            writeln!(
                f,
                "  period {} {:?} -> {outcome}\n    [{}] {}",
                e.period, e.action.kind, e.action.reason.rule, e.action.reason.detail
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process with threads the kernel keeps (io-wq workers of 5.12-6.2) says so on its first
    /// line; one without them says nothing of it.
    #[test]
    fn threads_the_kernel_keeps_are_named_on_the_process_line() {
        let mut e = Explanation {
            pid: 812,
            comm: "postgres".into(),
            class: ProcessClass::Unclassified,
            pinned: false,
            confined: None,
            threads: 3,
            kernel_owned_threads: 2,
            cpu: 1.0,
            rss_bytes: 0,
            mem_by_node: vec![(0, 0)],
            groups: vec![],
            preferred_node: None,
            why: "not managed".into(),
            moves_waiting: vec![],
            last_actions: vec![],
            standing: None,
            since_last_step: None,
            nothing_to_place: None,
        };
        let text = e.to_string();
        let first = text.lines().next().unwrap();
        assert!(
            first.contains("3 threads (and 2 threads whose CPUs the kernel keeps, left as they are), 1.00 CPUs"),
            "{text}"
        );
        e.kernel_owned_threads = 0;
        assert!(!e.to_string().contains("kernel keeps"), "{e}");
    }
}
