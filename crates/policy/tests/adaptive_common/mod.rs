//! Hand-built models for the adaptive policy's scenario tests.
//!
//! Thread `i` of process `pid` has tid `pid * 100 + i`; process start time is `pid * 10`. Every
//! process is "old" (first seen an hour after it started) unless built with [`B::new_proc`]. Node
//! memory totals come from the preset; free memory is the total minus what the processes hold.

#![allow(dead_code)]

use std::sync::Arc;

use numapilot_model::{
    AccessSource, Confinement, Group, HotRange, Model, ProcView, ProcessClass, TaskKey, TaskView, Tunables,
};
use numapilot_policy::{Action, ActionKind, Adaptive, Outcome, Plan, Policy};
use numapilot_topology::{CpuSet, NodeSet, Topology};

pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;
pub const PAGE: u64 = 4096;

/// The key of thread `i` of `pid`.
pub fn tk(pid: u32, i: u32) -> TaskKey {
    TaskKey { pid, tid: pid * 100 + i }
}

/// The tunables the hand traces use: defaults, but a page budget fixed at 1280 MiB/s and capacity
/// always in CPUs (`smt_cores_first` off).
pub fn traced_tunables() -> Tunables {
    Tunables { migrate_budget_mib_per_s: 1280, smt_cores_first: false, ..Tunables::default() }
}

/// A model under construction.
pub struct B {
    pub m: Model,
}

impl B {
    /// An empty model of a preset machine, 100 decisions in, period 1 s; default tunables but a
    /// page budget fixed at 1280 MiB/s (327680 pages per plan) and capacity always in CPUs
    /// (`smt_cores_first` off), which the hand traces use.
    pub fn new(preset: &str) -> Self {
        Self::with(preset, traced_tunables())
    }

    pub fn with(preset: &str, tunables: Tunables) -> Self {
        Self::with_topology(Topology::preset(preset).unwrap(), tunables)
    }

    /// As [`B::new`], on a machine read from a captured sysfs tree (`fixtures/NAME`, a real
    /// kernel's files).
    pub fn fixture(name: &str) -> Self {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures").join(name);
        let topo = Topology::from_sysfs(&root).unwrap();
        Self::with_topology(topo, traced_tunables())
    }

    pub fn with_topology(topo: Topology, tunables: Tunables) -> Self {
        let mut m = Model::new(topo, tunables);
        m.now_ns = 100_000_000_000;
        m.period_ns = 1_000_000_000;
        m.updates = 100;
        for (i, n) in m.topo.nodes.clone().iter().enumerate() {
            m.nodes[i].mem_total_bytes = n.mem_total_kb * 1024;
            m.nodes[i].mem_free_bytes = n.mem_total_kb * 1024;
        }
        Self { m }
    }

    fn n(&self) -> usize {
        self.m.topo.nodes.len()
    }

    /// The CPUs of node `node` (kernel id).
    pub fn node_cpus(&self, node: u32) -> CpuSet {
        self.m.topo.node(node).unwrap().cpus.clone()
    }

    /// An old process: one thread per `(node, cpu_rate)`, memory per node in MiB.
    pub fn proc(&mut self, pid: u32, comm: &str, threads: &[(u32, f64)], mem_mib: &[u64]) -> &mut Self {
        self.add(pid, comm, threads, mem_mib, 3_600_000_000_000)
    }

    /// A new process (100 ms old when first seen, at this sample).
    pub fn new_proc(&mut self, pid: u32, comm: &str, threads: &[(u32, f64)], mem_mib: &[u64]) -> &mut Self {
        self.add(pid, comm, threads, mem_mib, 100_000_000)
    }

    fn add(&mut self, pid: u32, comm: &str, threads: &[(u32, f64)], mem_mib: &[u64], age_ns: u64) -> &mut Self {
        let n = self.n();
        let all = Arc::new(self.m.topo.online_cpus());
        let mut mem_by_node = vec![0u64; n];
        for (i, &mib) in mem_mib.iter().enumerate() {
            mem_by_node[i] = mib * MIB;
            self.m.nodes[i].mem_free_bytes -= mib * MIB;
        }
        // An old process's threads were seen before (their rates are measured); a new one's are
        // first seen now.
        let first_seen = if age_ns < 1_000_000_000 { self.m.now_ns } else { 0 };
        let mut tids = Vec::new();
        for (i, &(node, rate)) in threads.iter().enumerate() {
            let key = tk(pid, i as u32);
            tids.push(key.tid);
            let idx = self.m.node_idx(node).unwrap();
            self.m.nodes[idx].cpu_demand += rate;
            let cpu = self.m.topo.nodes[idx].cpus.first().unwrap();
            self.m.tasks.insert(
                key,
                TaskView {
                    key,
                    comm: comm.to_string(),
                    cpu,
                    node: Some(node),
                    cpu_rate: rate,
                    run_delay: None,
                    cpus_allowed: all.clone(),
                    access: vec![0.0; n],
                    access_source: AccessSource::Residency,
                    access_samples: 0,
                    first_seen_ns: first_seen,
                    hot: vec![],
                },
            );
        }
        self.m.procs.insert(
            pid,
            ProcView {
                pid,
                starttime: pid as u64 * 10,
                ppid: 1,
                comm: comm.to_string(),
                tids,
                kernel_owned: 0,
                rss_bytes: mem_by_node.iter().sum(),
                mem_by_node,
                shared_by_node: vec![],
                shared_objects: vec![],
                growth_bytes_per_s: 0.0,
                cpu_rate: threads.iter().map(|t| t.1).sum(),
                pinned: false,
                confined: None,
                mem_policy_pinned: false,
                class: ProcessClass::Unclassified,
                hot: vec![],
                first_seen_ns: first_seen,
                age_at_first_seen_ns: age_ns,
                history_ns: 0,
                traffic_bytes_per_s_per_thread: 0.0,
            },
        );
        self
    }

    /// One shared object (a memfd, `object` its dev and inode) mapped by `pids`, `mib` of each
    /// one's memory per dense node (already in its `mem_mib`): its `shared_by_node` and
    /// `shared_objects`, as the model reads them from numa_maps and /proc/PID/maps.
    pub fn share(&mut self, object: (u64, u64), pids: &[u32], mib: &[u64]) -> &mut Self {
        let by_node: Vec<u64> = mib.iter().map(|m| m * MIB).collect();
        for pid in pids {
            let p = self.m.procs.get_mut(pid).unwrap();
            p.shared_by_node.resize(by_node.len(), 0);
            for (s, b) in p.shared_by_node.iter_mut().zip(&by_node) {
                *s += b;
            }
            let object = numapilot_observe::ObjectId { dev: object.0, inode: object.1, ipc_ns: None };
            p.shared_objects.push(numapilot_model::SharedResident { object, by_node: by_node.clone() });
        }
        self
    }

    /// Marks thread `i` of `pid` as first seen in this sample: its rate is not known yet.
    pub fn first_seen_now(&mut self, pid: u32, i: u32) -> &mut Self {
        self.m.tasks.get_mut(&tk(pid, i)).unwrap().first_seen_ns = self.m.now_ns;
        self
    }

    /// Sets the sampled access shares of thread `i` of `pid` (per dense node index).
    pub fn access(&mut self, pid: u32, i: u32, shares: &[f64]) -> &mut Self {
        let t = self.m.tasks.get_mut(&tk(pid, i)).unwrap();
        t.access = shares.to_vec();
        t.access_source = AccessSource::Samples;
        t.access_samples = 100;
        self
    }

    /// Adds a hot range to thread `i` of `pid` and to the process.
    pub fn hot(&mut self, pid: u32, i: u32, start: u64, len: u64, node: u32, samples: u64) -> &mut Self {
        let h = HotRange { start, len, node, samples };
        self.m.tasks.get_mut(&tk(pid, i)).unwrap().hot.push(h);
        let p = self.m.procs.get_mut(&pid).unwrap();
        p.hot.push(h);
        p.hot.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.start.cmp(&b.start)));
        self
    }

    pub fn class(&mut self, pid: u32, class: ProcessClass) -> &mut Self {
        self.m.procs.get_mut(&pid).unwrap().class = class;
        self
    }

    /// Sets the parent of `pid` (the model's `ppid`).
    pub fn parent(&mut self, pid: u32, ppid: u32) -> &mut Self {
        self.m.procs.get_mut(&pid).unwrap().ppid = ppid;
        self
    }

    /// Marks `pid`'s memory as placed by an explicit memory policy (and so the process pinned).
    pub fn mem_policy(&mut self, pid: u32) -> &mut Self {
        let p = self.m.procs.get_mut(&pid).unwrap();
        p.mem_policy_pinned = true;
        p.pinned = true;
        self
    }

    pub fn pinned(&mut self, pid: u32) -> &mut Self {
        self.m.procs.get_mut(&pid).unwrap().pinned = true;
        self
    }

    /// Confines `pid` to a cpuset of CPU list `cpus` and memory nodes `nodes` (as the model says
    /// of a process whose cpuset the daemon read), its threads as wide as the cpuset.
    pub fn confine(&mut self, pid: u32, cpus: &str, nodes: &str) -> &mut Self {
        let c = Confinement { cpus: CpuSet::parse_list(cpus).unwrap(), nodes: NodeSet::parse_list(nodes).unwrap() };
        let mask = Arc::new(c.cpus.clone());
        for tid in self.m.procs[&pid].tids.clone() {
            self.m.tasks.get_mut(&TaskKey { pid, tid }).unwrap().cpus_allowed = mask.clone();
        }
        self.m.procs.get_mut(&pid).unwrap().confined = Some(c);
        self
    }

    /// Restricts every thread of `pid` to the CPUs of `nodes` (as an applied SetAffinity would).
    pub fn allow(&mut self, pid: u32, nodes: &[u32]) -> &mut Self {
        let set: NodeSet = nodes.iter().copied().collect();
        let cpus = Arc::new(self.m.topo.cpus_of_nodes(&set));
        for tid in self.m.procs[&pid].tids.clone() {
            self.m.tasks.get_mut(&TaskKey { pid, tid }).unwrap().cpus_allowed = cpus.clone();
        }
        self
    }

    /// Moves thread `i` of `pid` to node `node` (where it last ran), allowed only there (as an
    /// applied per-thread SetAffinity would).
    pub fn thread_on(&mut self, pid: u32, i: u32, node: u32) -> &mut Self {
        let idx = self.m.node_idx(node).unwrap();
        let cpu = self.m.topo.nodes[idx].cpus.first().unwrap();
        let key = tk(pid, i);
        let (was, rate) = (self.m.tasks[&key].node.unwrap(), self.m.tasks[&key].cpu_rate);
        let old = self.m.node_idx(was).unwrap();
        self.m.nodes[old].cpu_demand -= rate;
        self.m.nodes[idx].cpu_demand += rate;
        let cpus = Arc::new(self.m.topo.nodes[idx].cpus.clone());
        let t = self.m.tasks.get_mut(&key).unwrap();
        t.node = Some(node);
        t.cpu = cpu;
        t.cpus_allowed = cpus;
        self
    }

    /// Moves every thread of `pid` to node `node` (where they last ran).
    pub fn run_on(&mut self, pid: u32, node: u32) -> &mut Self {
        let idx = self.m.node_idx(node).unwrap();
        let cpu = self.m.topo.nodes[idx].cpus.first().unwrap();
        for tid in self.m.procs[&pid].tids.clone() {
            let key = TaskKey { pid, tid };
            let (was, rate) = (self.m.tasks[&key].node.unwrap(), self.m.tasks[&key].cpu_rate);
            let old = self.m.node_idx(was).unwrap();
            self.m.nodes[old].cpu_demand -= rate;
            self.m.nodes[idx].cpu_demand += rate;
            let t = self.m.tasks.get_mut(&key).unwrap();
            t.node = Some(node);
            t.cpu = cpu;
        }
        self
    }

    /// Sets the memory of `pid` per node, MiB.
    pub fn mem(&mut self, pid: u32, mem_mib: &[u64]) -> &mut Self {
        let p = self.m.procs.get_mut(&pid).unwrap();
        for (i, b) in p.mem_by_node.iter().enumerate() {
            self.m.nodes[i].mem_free_bytes += b;
        }
        p.mem_by_node = mem_mib.iter().map(|m| m * MIB).collect();
        p.mem_by_node.resize(self.m.topo.nodes.len(), 0);
        p.rss_bytes = p.mem_by_node.iter().sum();
        for (i, b) in p.mem_by_node.iter().enumerate() {
            self.m.nodes[i].mem_free_bytes -= b;
        }
        self
    }

    /// Sets the CPU rate of every thread of `pid`.
    pub fn rate(&mut self, pid: u32, rate: f64) -> &mut Self {
        let tids = self.m.procs[&pid].tids.clone();
        for tid in &tids {
            let key = TaskKey { pid, tid: *tid };
            let idx = self.m.node_idx(self.m.tasks[&key].node.unwrap()).unwrap();
            self.m.nodes[idx].cpu_demand += rate - self.m.tasks[&key].cpu_rate;
            self.m.tasks.get_mut(&key).unwrap().cpu_rate = rate;
        }
        self.m.procs.get_mut(&pid).unwrap().cpu_rate = rate * tids.len() as f64;
        self
    }

    /// Sets the CPU rate of thread `i` of `pid` (its node's demand and the process's rate follow).
    pub fn thread_rate(&mut self, pid: u32, i: u32, rate: f64) -> &mut Self {
        let key = tk(pid, i);
        let idx = self.m.node_idx(self.m.tasks[&key].node.unwrap()).unwrap();
        let was = std::mem::replace(&mut self.m.tasks.get_mut(&key).unwrap().cpu_rate, rate);
        self.m.nodes[idx].cpu_demand += rate - was;
        self.m.procs.get_mut(&pid).unwrap().cpu_rate += rate - was;
        self
    }

    /// An affinity edge between two tasks.
    pub fn edge(&mut self, a: TaskKey, b: TaskKey, strength: f64) -> &mut Self {
        let key = if a < b { (a, b) } else { (b, a) };
        self.m.graph.edges.insert(
            key,
            numapilot_model::Edge {
                strength,
                coaccess: strength,
                comm: 0.0,
                tier: None,
                last_seen_ns: self.m.now_ns,
                zero_since_ns: None,
            },
        );
        self
    }

    /// A communication tie between two tasks (a socket's ends, as the model records one: comm
    /// only, no co-access), at the given strength and tier.
    pub fn comm_edge(&mut self, a: TaskKey, b: TaskKey, strength: f64, tier: numapilot_model::Tier) -> &mut Self {
        let key = if a < b { (a, b) } else { (b, a) };
        self.m.graph.edges.insert(
            key,
            numapilot_model::Edge {
                strength,
                coaccess: 0.0,
                comm: strength,
                tier: Some(tier),
                last_seen_ns: self.m.now_ns,
                zero_since_ns: None,
            },
        );
        self
    }

    /// A group of the given tasks, its figures the model's own (`Model::group_figures`: each
    /// process's memory shared out over its threads, shared memory counted once, residency-by-bytes
    /// access shares), formed at time 0.
    pub fn group(&mut self, id: u64, tasks: &[TaskKey]) -> &mut Self {
        let group = Group { since_ns: 0, ..self.m.group_figures(id, tasks) };
        for k in &group.tasks {
            self.m.groups.of_task.insert(*k, id);
        }
        self.m.groups.groups.insert(id, group);
        self
    }

    /// A group holding every thread of `pid`.
    pub fn group_proc(&mut self, id: u64, pid: u32) -> &mut Self {
        let tasks: Vec<TaskKey> = self.m.procs[&pid].tids.iter().map(|&tid| TaskKey { pid, tid }).collect();
        self.group(id, &tasks)
    }

    /// Marks dense node `idx` a CPU bottleneck.
    pub fn bottleneck(&mut self, idx: usize, load: f64) -> &mut Self {
        self.m.nodes[idx].cpu.known = true;
        self.m.nodes[idx].cpu.load = load;
        self.m.nodes[idx].cpu.bottleneck = true;
        self
    }
}

/// `SetAffinity` actions as (pid, tid, nodes the CPUs cover, rule).
pub fn affinities(m: &Model, plan: &Plan) -> Vec<(u32, Option<u32>, String, String)> {
    plan.actions
        .iter()
        .filter_map(|a| match &a.kind {
            ActionKind::SetAffinity { cpus } => {
                Some((a.target.pid, a.target.tid, m.topo.nodes_of_cpus(cpus).to_list(), a.reason.rule.clone()))
            }
            _ => None,
        })
        .collect()
}

/// Base pages an action may move (`max_pages`, or the ranges' length).
pub fn pages_of(a: &Action) -> u64 {
    match &a.kind {
        ActionKind::SetAffinity { .. } => 0,
        ActionKind::MigratePages { max_pages, .. } | ActionKind::Interleave { max_pages, .. } => {
            max_pages.unwrap_or(u64::MAX)
        }
        ActionKind::MoveRanges { ranges, .. } => ranges.iter().map(|r| r.1 / PAGE).sum(),
    }
}

/// The young processes of `m`: younger than `new_process_age_ms` (age when first seen + time since).
pub fn young_pids(m: &Model) -> Vec<u32> {
    let t = &m.tunables;
    m.procs
        .values()
        .filter(|p| {
            p.age_at_first_seen_ns + m.now_ns.saturating_sub(p.first_seen_ns) < t.new_process_age_ms * 1_000_000
        })
        .map(|p| p.pid)
        .collect()
}

/// The shared page budget of one plan at the model's period (`migrate_budget_mib_per_s`), which
/// every process's moves draw on.
pub fn shared_budget_pages(m: &Model) -> u64 {
    pages_at(m, m.tunables.migrate_budget_mib_per_s)
}

/// Pages `rate` MiB/s moves in one period of `m` (as the planner computes it).
fn pages_at(m: &Model, rate: u64) -> u64 {
    (rate as f64 * MIB as f64 * m.period_ns as f64 / 1e9 / PAGE as f64) as u64
}

/// The allowance of each young process for its own memory (`young_migrate_budget_mib_per_s`).
pub fn young_allowance_pages(m: &Model) -> u64 {
    pages_at(m, m.tunables.young_migrate_budget_mib_per_s)
}

/// The page budget of one plan: the shared budget plus each young process's own allowance.
pub fn budget_pages(m: &Model) -> u64 {
    shared_budget_pages(m) + young_pids(m).len() as u64 * young_allowance_pages(m)
}

/// Tells the policy every action of `plan` was applied in full (a page action moved every page it
/// asked for: one that moved none would be futile, rule futile-move-backs-off).
pub fn applied(policy: &mut Adaptive, m: &Model, plan: &Plan) {
    let outcomes: Vec<Outcome> = plan.actions.iter().map(|a| Outcome::Applied { pages_moved: pages_of(a) }).collect();
    policy.observe_outcomes(m, plan, &outcomes);
}

/// A plan of one SetAffinity of `target` to `cpus`, for the rule `balance-weakest-first` (a move
/// that starts a hold), as a test tells the policy it was applied or refused.
pub fn set_affinity_plan(target: numapilot_policy::TaskRef, cpus: CpuSet) -> Plan {
    Plan {
        actions: vec![Action {
            target,
            kind: ActionKind::SetAffinity { cpus },
            reason: numapilot_policy::Reason::new("balance-weakest-first", "test"),
        }],
        ..Plan::default()
    }
}

/// The size of the policy's table `name` (`Policy::bookkeeping`).
pub fn table(policy: &Adaptive, name: &str) -> usize {
    let mut out = Vec::new();
    policy.bookkeeping(&mut out);
    out.into_iter().find(|(k, _)| *k == name).map(|(_, v)| v).unwrap_or_else(|| panic!("no table {name}"))
}

/// Checks the invariants every plan must keep: CPUs inside the machine and non-empty, pids and
/// start times of live processes, no pinned process touched, pages within the budget.
pub fn check_conservation(m: &Model, plan: &Plan) {
    let online = m.topo.online_cpus();
    let mut pages = 0u64;
    for a in &plan.actions {
        let p = m.procs.get(&a.target.pid).unwrap_or_else(|| panic!("action names absent pid {}: {a:?}", a.target.pid));
        assert_eq!(p.starttime, a.target.starttime, "{a:?}");
        if let Some(tid) = a.target.tid {
            assert!(p.tids.contains(&tid), "{a:?}");
        }
        assert!(!p.pinned, "pinned process touched: {a:?}");
        assert!(!a.reason.rule.is_empty() && !a.reason.detail.is_empty(), "{a:?}");
        match &a.kind {
            ActionKind::SetAffinity { cpus } => {
                assert!(!cpus.is_empty() && cpus.is_subset(&online), "{a:?}");
            }
            ActionKind::MigratePages { from, to, max_pages } => {
                assert!(max_pages.is_some(), "unbounded migration: {a:?}");
                assert!(!from.is_empty() && !to.is_empty() && from.intersection(to).is_empty(), "{a:?}");
            }
            ActionKind::Interleave { nodes, weights, max_pages, .. } => {
                assert!(max_pages.is_some(), "{a:?}");
                assert!(weights.is_empty() || weights.len() == nodes.len(), "{a:?}");
            }
            ActionKind::MoveRanges { ranges, .. } => assert!(!ranges.is_empty(), "{a:?}"),
        }
        pages += pages_of(a);
    }
    assert!(pages <= budget_pages(m), "plan moves {pages} pages, budget {}", budget_pages(m));
    // A process that is not young moves under the shared budget only.
    let young = young_pids(m);
    let old_pages: u64 = plan.actions.iter().filter(|a| !young.contains(&a.target.pid)).map(pages_of).sum();
    assert!(
        old_pages <= shared_budget_pages(m),
        "old processes move {old_pages} pages, shared budget {}",
        shared_budget_pages(m)
    );
    for pid in young {
        let own: u64 = plan.actions.iter().filter(|a| a.target.pid == pid).map(pages_of).sum();
        assert!(own <= shared_budget_pages(m) + young_allowance_pages(m), "young {pid} moves {own} pages");
    }
}

/// Carries out `plan` on the hand-built model as a host would, for scenarios over several
/// decisions: a SetAffinity narrows its threads to its CPUs and moves each thread that ran outside
/// them to the first node of the set; a MigratePages moves up to its `max_pages` of the process's
/// memory (in whole MiB, lowest `from` node first) to the first node of `to`. Returns the pages
/// moved per process. Other page actions are not carried out here (a scenario that plans one
/// fails loudly).
pub fn host_applies(b: &mut B, plan: &Plan) -> std::collections::BTreeMap<u32, u64> {
    let mut pages = std::collections::BTreeMap::new();
    for a in &plan.actions {
        let pid = a.target.pid;
        match &a.kind {
            ActionKind::SetAffinity { cpus } => {
                let to = b.m.topo.nodes_of_cpus(cpus);
                let tids: Vec<u32> = match a.target.tid {
                    Some(tid) => vec![tid],
                    None => b.m.procs[&pid].tids.clone(),
                };
                for tid in tids {
                    let i = tid - pid * 100;
                    if !b.m.tasks[&tk(pid, i)].node.is_some_and(|n| to.contains(n)) {
                        b.thread_on(pid, i, to.first().unwrap());
                    }
                    b.m.tasks.get_mut(&tk(pid, i)).unwrap().cpus_allowed = Arc::new(cpus.clone());
                }
            }
            ActionKind::MigratePages { from, to, max_pages } => {
                let mut mib: Vec<u64> = b.m.procs[&pid].mem_by_node.iter().map(|x| x / MIB).collect();
                let mut left = max_pages.unwrap_or(u64::MAX).saturating_mul(PAGE) / MIB;
                let dest = b.m.node_idx(to.first().unwrap()).unwrap();
                for node in from.iter() {
                    let i = b.m.node_idx(node).unwrap();
                    let take = mib[i].min(left);
                    mib[i] -= take;
                    mib[dest] += take;
                    left -= take;
                    *pages.entry(pid).or_insert(0) += take * MIB / PAGE;
                }
                b.mem(pid, &mib);
            }
            other => panic!("host_applies does not carry out {other:?}"),
        }
    }
    pages
}
