//! Hand-built machines and samples for the model's tests.
//!
//! `machine(nodes, cpus_per_node, mem_gib)` is a symmetric machine (distance 10 local, 20 remote);
//! `Sb` builds a [`Sample`] step by step: processes with threads whose cumulative counters the test
//! sets, access samples, communication, node memory and /proc/stat lines.

#![allow(dead_code)]

use std::sync::Arc;

use numapilot_model::{Model, TaskKey, Tunables};
use numapilot_observe::parse::meminfo::MeminfoEntry;
use numapilot_observe::{
    AccessSample, CommKind, CommSample, Counters, CpuTimes, Meminfo, NodeFaults, NodeUsage, ProcStat, ProcessSample,
    Sample, SchedInfo, SchedNuma, SchedStat, TaskStat, ThreadSample,
};
use numapilot_topology::{CpuSet, NodeSet, Topology};

pub const GIB: u64 = 1 << 30;
pub const MIB: u64 = 1 << 20;
pub const SEC: u64 = 1_000_000_000;

/// An address in the app's heap, at the start of a 2 MiB bucket: where the tests' threads meet.
pub const BUF: u64 = 0x7f00_0000_0000;

/// A symmetric machine: `nodes` nodes of `cpus` CPUs and `mem_gib` GiB each.
pub fn machine(nodes: u32, cpus: u32, mem_gib: u64) -> Topology {
    Topology::uniform(nodes, cpus, mem_gib * 1024 * 1024, 20)
}

/// A crowded bucket at `t`: process 10 (`app`, 1 GiB on node 0) with idle threads `tids`, and
/// per `(tid, last_ns)` of `accesses` one access sample of BUF on node 0 taken at `last_ns`.
pub fn crowd(topo: &Topology, t: u64, tids: std::ops::Range<u32>, accesses: &[(u32, u64)]) -> Sample {
    let mut b = Sb::new(topo, t).proc(10, 5, "app", &[GIB, 0]);
    for tid in tids {
        b = b.thread(10, tid, 0, 0, 0);
    }
    for &(tid, last) in accesses {
        b = b.access(10, tid, BUF, 0, 1, last);
    }
    b.build()
}

/// A model of `topo` with default tunables.
pub fn model(topo: Topology) -> Model {
    Model::new(topo, Tunables::default())
}

pub fn key(pid: u32, tid: u32) -> TaskKey {
    TaskKey { pid, tid }
}

fn stat(pid: u32, comm: &str, starttime: u64, ticks: u64, cpu: u32) -> TaskStat {
    TaskStat {
        pid,
        comm: comm.to_string(),
        state: 'R',
        ppid: 1,
        utime: ticks,
        priority: 20,
        num_threads: 1,
        starttime,
        processor: cpu,
        rt_priority: Some(0),
        policy: Some(0),
        delayacct_blkio_ticks: Some(0),
        ..TaskStat::default()
    }
}

/// Sample builder.
pub struct Sb {
    pub s: Sample,
    all_cpus: Arc<CpuSet>,
    all_nodes: Arc<NodeSet>,
}

impl Sb {
    /// An empty sample at `t_ns` (monotonic = boottime) for `topo`, with node meminfo all free.
    pub fn new(topo: &Topology, t_ns: u64) -> Self {
        let nodes = topo
            .nodes
            .iter()
            .map(|n| numapilot_observe::NodeSample {
                node: n.id,
                cpus: n.cpus.clone(),
                meminfo: meminfo(n.mem_total_kb, n.mem_total_kb),
                numastat: Counters::default(),
                vmstat: Counters::default(),
                mem_bw: None,
            })
            .collect();
        Sb {
            s: Sample { nodes, ..Sample::empty_at(t_ns) },
            all_cpus: Arc::new(topo.online_cpus()),
            all_nodes: Arc::new(topo.node_ids()),
        }
    }

    /// Adds a process (starttime in ticks) with RSS per node in bytes, indexed by kernel node id
    /// (`machine()` numbers its nodes 0.., so the dense index and the id coincide there; on other
    /// topologies translate through `Topology::node_idx`).
    pub fn proc(mut self, pid: u32, starttime: u64, comm: &str, mem_by_node: &[u64]) -> Self {
        let node_usage = mem_by_node
            .iter()
            .enumerate()
            .filter(|(_, &b)| b > 0)
            .map(|(n, &b)| NodeUsage {
                node: n as u32,
                huge_kb: 0,
                heap_kb: 0,
                stack_kb: 0,
                anon_kb: b / 1024,
                file_kb: 0,
                shared_kb: 0,
            })
            .collect();
        let rss: u64 = mem_by_node.iter().sum();
        self.s.processes.push(ProcessSample {
            pid,
            starttime,
            comm: comm.to_string(),
            kernel_thread: false,
            read_ns: self.s.monotonic_ns,
            stat: stat(pid, comm, starttime, 0, 0),
            rss_kb: Some(rss / 1024),
            numa_maps: None,
            numa_maps_error: None,
            node_usage,
            threads: vec![],
            cpuset_cpus: None,
        });
        self.s.processes.sort_by_key(|p| p.pid);
        self
    }

    fn proc_mut(&mut self, pid: u32) -> &mut ProcessSample {
        self.s.processes.iter_mut().find(|p| p.pid == pid).expect("add the process first")
    }

    /// Adds a thread to process `pid`: cumulative CPU time in ns (as schedstat run_ns and as ticks),
    /// cumulative run delay in ns, last CPU.
    pub fn thread(mut self, pid: u32, tid: u32, run_ns: u64, wait_ns: u64, cpu: u32) -> Self {
        let starttime = self.proc_mut(pid).starttime;
        let (cpus, nodes) = (self.all_cpus.clone(), self.all_nodes.clone());
        let p = self.proc_mut(pid);
        let comm = p.comm.clone();
        p.threads.push(ThreadSample {
            tid,
            stat: stat(tid, &comm, starttime, run_ns / 10_000_000, cpu),
            cpus_allowed: cpus,
            mems_allowed: nodes,
            voluntary_ctxt_switches: None,
            nonvoluntary_ctxt_switches: None,
            sched: None,
            schedstat: Some(SchedStat { run_ns, wait_ns, timeslices: 1 }),
        });
        p.threads.sort_by_key(|t| t.tid);
        self
    }

    /// Gives the last-added thread `tid` of `pid` NUMA fault averages per node (index = node id).
    pub fn faults(mut self, pid: u32, tid: u32, per_node: &[u64]) -> Self {
        let t = self.proc_mut(pid).threads.iter_mut().find(|t| t.tid == tid).unwrap();
        t.sched = Some(Box::new(SchedInfo {
            sum_exec_runtime_ns: 0,
            nr_migrations: 0,
            numa: Some(SchedNuma {
                scan_seq: Some(1),
                pages_migrated: 0,
                preferred_nid: None,
                total_faults: per_node.iter().sum(),
                current_node: 0,
                group_id: None,
                faults: per_node
                    .iter()
                    .enumerate()
                    .map(|(n, &f)| NodeFaults {
                        node: n as u32,
                        task_private: f,
                        task_shared: 0,
                        group_private: 0,
                        group_shared: 0,
                    })
                    .collect(),
            }),
        }));
        self
    }

    /// Restricts a thread's allowed CPUs.
    pub fn allowed(mut self, pid: u32, tid: u32, cpus: &[u32]) -> Self {
        let t = self.proc_mut(pid).threads.iter_mut().find(|t| t.tid == tid).unwrap();
        t.cpus_allowed = Arc::new(cpus.iter().copied().collect());
        self
    }

    /// Gives process `pid` the cpuset CPUs the daemon would read for it (`cpuset_cpus`).
    pub fn cpuset(mut self, pid: u32, cpus: &[u32]) -> Self {
        self.proc_mut(pid).cpuset_cpus = Some(Arc::new(cpus.iter().copied().collect()));
        self
    }

    /// Restricts the allowed memory nodes (`Mems_allowed`, the cpuset's) of every thread of `pid`.
    pub fn mems(mut self, pid: u32, nodes: &[u32]) -> Self {
        let set: Arc<NodeSet> = Arc::new(nodes.iter().copied().collect());
        for t in &mut self.proc_mut(pid).threads {
            t.mems_allowed = set.clone();
        }
        self
    }

    /// `count` access samples of thread (pid, tid) to virtual `addr` on `node`, last at `last_ns`.
    pub fn access(mut self, pid: u32, tid: u32, addr: u64, node: u32, count: u32, last_ns: u64) -> Self {
        self.s.accesses.push(AccessSample { pid, tid, addr, phys: None, node, count, last_ns });
        self
    }

    /// Like [`Sb::access`], with a machine-wide (physical) identity of the memory.
    #[allow(clippy::too_many_arguments)]
    pub fn access_phys(
        mut self,
        pid: u32,
        tid: u32,
        addr: u64,
        phys: u64,
        node: u32,
        count: u32,
        last_ns: u64,
    ) -> Self {
        self.s.accesses.push(AccessSample { pid, tid, addr, phys: Some(phys), node, count, last_ns });
        self
    }

    /// Communication between two threads.
    pub fn comm(mut self, a: (u32, u32), b: (u32, u32), events: u64) -> Self {
        self.s.comm.push(CommSample { a, b, kind: CommKind::Wakeup, events });
        self
    }

    /// A connected socket between two ends, as the live source reports it (`events` = 1 per cycle).
    pub fn socket(mut self, a: (u32, u32), b: (u32, u32)) -> Self {
        self.s.comm.push(CommSample { a, b, kind: CommKind::Socket, events: 1 });
        self
    }

    /// Sets `pid`'s VMAs from numa_maps `text` (kernel format), its memory per node and RSS
    /// from them, as the live observer does.
    pub fn numa_maps(mut self, pid: u32, text: &str) -> Self {
        let maps = numapilot_observe::parse::numa_maps::parse_numa_maps(text).unwrap();
        let p = self.proc_mut(pid);
        p.node_usage = maps.usage_by_node();
        p.rss_kb = Some(p.node_usage.iter().map(|u| u.total_kb()).sum());
        p.numa_maps = Some(maps);
        self
    }

    /// A memory object mapped by `users` (pid, bytes mapped), as /proc/PID/maps gives it: each
    /// user maps it once, at the address of the first VMA of `path` in its numa_maps (without
    /// numa_maps, at 0).
    pub fn shared(mut self, inode: u64, path: &str, users: &[(u32, u64)]) -> Self {
        let mut users = users.to_vec();
        users.sort_unstable();
        let ranges = users
            .iter()
            .map(|&(pid, bytes)| {
                let maps = self.s.processes.iter().find(|p| p.pid == pid).and_then(|p| p.numa_maps.as_ref());
                let start =
                    maps.and_then(|m| m.vmas.iter().find(|v| v.file.as_deref() == Some(path))).map_or(0, |v| v.start);
                (pid, start, start + bytes)
            })
            .collect();
        self.s.shared.push(numapilot_observe::SharedMemory {
            dev: 1,
            inode,
            ipc_ns: None,
            path: path.to_string(),
            users,
            ranges,
        });
        self
    }

    /// Sets a node's MemTotal (memory hot-added or taken away since the topology was read), its
    /// free memory with it.
    pub fn mem_total(mut self, node: u32, total_kb: u64) -> Self {
        let n = self.s.nodes.iter_mut().find(|n| n.node == node).unwrap();
        n.meminfo = meminfo(total_kb, total_kb);
        self
    }

    /// Sets a node's free memory.
    pub fn mem_free(mut self, node: u32, free_kb: u64) -> Self {
        let n = self.s.nodes.iter_mut().find(|n| n.node == node).unwrap();
        let total = n.meminfo.mem_total_kb().unwrap();
        n.meminfo = meminfo(total, free_kb);
        self
    }

    /// /proc/stat with per-CPU cumulative (busy, idle) ticks.
    pub fn cpu_ticks(mut self, per_cpu: &[(u64, u64)]) -> Self {
        let cpus = per_cpu
            .iter()
            .enumerate()
            .map(|(i, &(busy, idle))| numapilot_observe::parse::proc_stat::CpuLine {
                cpu: i as u32,
                times: CpuTimes { user: busy, idle, ..CpuTimes::default() },
            })
            .collect();
        self.s.cpu = Some(ProcStat {
            total: CpuTimes::default(),
            cpus,
            ctxt: 0,
            btime: 0,
            processes: None,
            procs_running: None,
            procs_blocked: None,
        });
        self
    }

    pub fn build(self) -> Sample {
        self.s
    }
}

fn meminfo(total_kb: u64, free_kb: u64) -> Meminfo {
    Meminfo {
        entries: vec![
            MeminfoEntry { key: "MemTotal".into(), value: total_kb, kb: true },
            MeminfoEntry { key: "MemFree".into(), value: free_kb, kb: true },
        ],
    }
}
