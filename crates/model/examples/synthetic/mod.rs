//! Synthetic loads for the scale examples: the model's (`examples/scale.rs`) and the policy's,
//! which includes this file by its path. Not an example of its own (Cargo builds only
//! `examples/*.rs` and `examples/*/main.rs`).
//!
//! A load is `procs` processes of `threads` threads, numbered from pid 1000. A busy process's
//! threads run 30% of a CPU each and it holds 100 MiB a node (400 MiB resident); a sleeping one's
//! threads ran 1 ms once and it holds 1 MiB a node (4 MiB resident). Thread `k` of process `p`
//! last ran on CPU `(p * threads + k) % CPUs`. With signals, every thread has 5 access samples a
//! step (threads of a process share buckets two by two) and each even process has 4 communicating
//! pairs of threads with the next one.

use std::sync::Arc;

use numapilot_observe::{
    AccessSample, CommKind, CommSample, NodeSample, NodeUsage, ProcessSample, Sample, SchedStat, TaskStat, ThreadSample,
};
use numapilot_topology::{NodeSet, Topology};

/// `nodes` nodes of `cpus` CPUs each, 256 GiB a node with 128 GiB free, distance 21 between nodes.
pub fn machine(nodes: u32, cpus: u32) -> Topology {
    let mut t = Topology::uniform(nodes, cpus, 256 << 20, 21);
    for n in &mut t.nodes {
        n.mem_free_kb = 128 << 20;
    }
    t
}

/// What a synthetic sample holds.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    /// Processes.
    pub procs: u32,
    /// Threads of each process.
    pub threads: u32,
    /// Process `p`'s pid is `1000 + p * pid_step`; its threads' tids are the pid and those after
    /// it, so the step must be more than `threads`.
    pub pid_step: u32,
    /// Every `busy_every`-th process is busy (process 0 always), the others sleep; 1: all busy.
    pub busy_every: u32,
    /// Access samples and communicating pairs, as the eBPF signals give them.
    pub signals: bool,
    /// Every access sample on one physical 2 MiB bucket of the machine (at 1 GiB).
    pub hot_bucket: bool,
    /// Every thread with its own `Arc` of its allowed CPUs and nodes, as the simulator and
    /// deserialised replays build them; otherwise all threads share one.
    pub distinct_sets: bool,
}

impl Load {
    /// All `procs` x `threads` busy, without signals, pids `threads + 1` apart.
    pub fn new(procs: u32, threads: u32) -> Self {
        Load {
            procs,
            threads,
            pid_step: threads + 1,
            busy_every: 1,
            signals: false,
            hot_bucket: false,
            distinct_sets: false,
        }
    }

    fn stat(&self, pid: u32, ticks: u64, cpu: u32, busy: bool) -> TaskStat {
        TaskStat {
            pid,
            comm: "worker".into(),
            state: if busy { 'R' } else { 'S' },
            ppid: 1,
            utime: ticks,
            priority: 20,
            num_threads: self.threads,
            starttime: 100,
            processor: cpu,
            ..TaskStat::default()
        }
    }

    /// The sample of step `step` (1 s apart, from 1) on `topo`.
    pub fn sample(&self, topo: &Topology, step: u64) -> Sample {
        let (procs, threads) = (self.procs, self.threads);
        let t = step * 1_000_000_000;
        let ncpus = topo.online_cpus().len() as u32;
        let nodes = topo.nodes.len() as u32;
        let all_cpus = Arc::new(topo.online_cpus());
        let all_nodes: Arc<NodeSet> = Arc::new(topo.node_ids());
        let mut processes = Vec::with_capacity(procs as usize);
        let mut accesses = Vec::new();
        let mut comm = Vec::new();
        for p in 0..procs {
            let pid = 1000 + p * self.pid_step;
            let busy = p % self.busy_every == 0;
            let ts = (0..threads)
                .map(|k| {
                    let tid = pid + k;
                    let cpu = (p * threads + k) % ncpus;
                    let run = if busy { step * 300_000_000 } else { 1_000_000 };
                    if self.signals {
                        for s in 0..5u64 {
                            let bucket = (u64::from(k) / 2) * 4 + s % 2;
                            accesses.push(AccessSample {
                                pid,
                                tid,
                                addr: 0x7f00_0000_0000 + (bucket << 21),
                                phys: self.hot_bucket.then_some(1 << 30),
                                node: (p + (s as u32)) % nodes,
                                count: 1 + (s as u32),
                                last_ns: t - 1000 * s,
                            });
                        }
                    }
                    let (cpus_allowed, mems_allowed) = if self.distinct_sets {
                        (Arc::new((*all_cpus).clone()), Arc::new((*all_nodes).clone()))
                    } else {
                        (all_cpus.clone(), all_nodes.clone())
                    };
                    ThreadSample {
                        tid,
                        stat: self.stat(tid, run / 10_000_000, cpu, busy),
                        cpus_allowed,
                        mems_allowed,
                        voluntary_ctxt_switches: None,
                        nonvoluntary_ctxt_switches: None,
                        sched: None,
                        schedstat: Some(SchedStat {
                            run_ns: run,
                            wait_ns: if busy { step * 10_000_000 } else { 0 },
                            timeslices: 1,
                        }),
                    }
                })
                .collect();
            if self.signals && p % 2 == 0 && p + 1 < procs {
                let other = pid + self.pid_step;
                for k in 0..4.min(threads) {
                    comm.push(CommSample {
                        a: (pid, pid + k),
                        b: (other, other + k),
                        kind: CommKind::Wakeup,
                        events: 700,
                    });
                }
            }
            let node_usage = (0..nodes)
                .map(|n| NodeUsage {
                    node: topo.nodes[n as usize].id,
                    huge_kb: 0,
                    heap_kb: 0,
                    stack_kb: 0,
                    anon_kb: if busy { 100 * 1024 } else { 1024 } + u64::from(n),
                    file_kb: 0,
                    shared_kb: 0,
                })
                .collect();
            processes.push(ProcessSample {
                pid,
                starttime: 100,
                comm: "worker".into(),
                kernel_thread: false,
                read_ns: t,
                stat: self.stat(pid, 0, 0, busy),
                rss_kb: Some(if busy { 400 * 1024 } else { 4 * 1024 }),
                numa_maps: None,
                numa_maps_error: None,
                node_usage,
                threads: ts,
                cpuset_cpus: None,
            });
        }
        let nodes = topo.nodes.iter().map(NodeSample::from_topology).collect();
        Sample { processes, nodes, numa_balancing: Some(1), accesses, comm, ..Sample::empty_at(t) }
    }
}
