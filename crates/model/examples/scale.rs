//! Measures `Model::update` on a synthetic machine of 1,000 processes x 10 threads (4 nodes x 64
//! CPUs), with 5 access samples per thread per period (threads of a process share buckets) and
//! 2,000 communicating pairs. Run: `cargo run --release -p numapilot-model --example scale`.
//! Prints the mean and worst update time over the measured periods, with and without access
//! samples and communication (without is the usual live case: NUMA faults or residency only).
//! Two stress configurations: `distinct-sets` (no signals, every thread with its own `Arc` of its
//! allowed CPUs and nodes, as the simulator and deserialised replays build them) and `hot-bucket`
//! (signals, but every access sample of every thread in one machine-wide 2 MiB bucket).
//! `scale CONFIG` runs one configuration (signals, plain, distinct-sets, hot-bucket).

use std::sync::Arc;
use std::time::Instant;

use numapilot_model::{Model, Tunables};
use numapilot_observe::{
    AccessSample, CommKind, CommSample, NodeSample, NodeUsage, ProcessSample, Sample, SchedStat, TaskStat, ThreadSample,
};
use numapilot_topology::{NodeSet, Topology};

const NODES: u32 = 4;
const CPUS: u32 = 64;
const PROCS: u32 = 1000;
const THREADS: u32 = 10;

fn topo() -> Topology {
    let mut t = Topology::uniform(NODES, CPUS, 256 << 20, 21);
    for n in &mut t.nodes {
        n.mem_free_kb = 128 << 20;
    }
    t
}

fn stat(pid: u32, ticks: u64, cpu: u32) -> TaskStat {
    TaskStat {
        pid,
        comm: "worker".into(),
        state: 'R',
        ppid: 1,
        utime: ticks,
        priority: 20,
        num_threads: THREADS,
        starttime: 100,
        processor: cpu,
        ..TaskStat::default()
    }
}

/// What a configuration puts in the sample.
#[derive(Clone, Copy, PartialEq)]
enum Config {
    Signals,
    Plain,
    DistinctSets,
    HotBucket,
}

impl Config {
    fn name(self) -> &'static str {
        match self {
            Config::Signals => "signals",
            Config::Plain => "plain",
            Config::DistinctSets => "distinct-sets",
            Config::HotBucket => "hot-bucket",
        }
    }
}

fn sample(topo: &Topology, step: u64, config: Config) -> Sample {
    let signals = matches!(config, Config::Signals | Config::HotBucket);
    let t = step * 1_000_000_000;
    let all_cpus = Arc::new(topo.online_cpus());
    let all_nodes: Arc<NodeSet> = Arc::new(topo.node_ids());
    let mut processes = Vec::new();
    let mut accesses = Vec::new();
    let mut comm = Vec::new();
    for p in 0..PROCS {
        let pid = 1000 + p * 100;
        let threads = (0..THREADS)
            .map(|k| {
                let tid = pid + k;
                let cpu = (p * THREADS + k) % (NODES * CPUS);
                let run = step * 300_000_000;
                for s in 0..5u64 {
                    let bucket = (u64::from(k) / 2) * 4 + s % 2;
                    accesses.push(AccessSample {
                        pid,
                        tid,
                        addr: 0x7f00_0000_0000 + (bucket << 21),
                        phys: (config == Config::HotBucket).then_some(1 << 30),
                        node: (p + (s as u32)) % NODES,
                        count: 1 + (s as u32),
                        last_ns: t - 1000 * s,
                    });
                }
                ThreadSample {
                    tid,
                    stat: stat(tid, run / 10_000_000, cpu),
                    cpus_allowed: if config == Config::DistinctSets {
                        Arc::new((*all_cpus).clone())
                    } else {
                        all_cpus.clone()
                    },
                    mems_allowed: if config == Config::DistinctSets {
                        Arc::new((*all_nodes).clone())
                    } else {
                        all_nodes.clone()
                    },
                    voluntary_ctxt_switches: None,
                    nonvoluntary_ctxt_switches: None,
                    sched: None,
                    schedstat: Some(SchedStat { run_ns: run, wait_ns: step * 10_000_000, timeslices: 1 }),
                }
            })
            .collect();
        if p % 2 == 0 && p + 1 < PROCS {
            for k in 0..4 {
                comm.push(CommSample {
                    a: (pid, pid + k),
                    b: (pid + 100, pid + 100 + k),
                    kind: CommKind::Wakeup,
                    events: 700,
                });
            }
        }
        let node_usage = (0..NODES)
            .map(|n| NodeUsage {
                node: n,
                huge_kb: 0,
                heap_kb: 0,
                stack_kb: 0,
                anon_kb: 100 * 1024 + u64::from(n),
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
            stat: stat(pid, 0, 0),
            rss_kb: Some(400 * 1024),
            numa_maps: None,
            numa_maps_error: None,
            node_usage,
            threads,
            cpuset_cpus: None,
        });
    }
    let nodes = topo.nodes.iter().map(NodeSample::from_topology).collect();
    Sample {
        processes,
        nodes,
        numa_balancing: Some(1),
        accesses: if signals { accesses } else { vec![] },
        comm: if signals { comm } else { vec![] },
        ..Sample::empty_at(t)
    }
}

fn main() {
    let topo = topo();
    // `scale CONFIG` runs one configuration (e.g. under callgrind).
    let only = std::env::args().nth(1);
    for config in [Config::Signals, Config::Plain, Config::DistinctSets, Config::HotBucket] {
        if only.as_deref().is_some_and(|o| o != config.name()) {
            continue;
        }
        let mut m = Model::new(topo.clone(), Tunables::default());
        let samples: Vec<Sample> = (1..=25).map(|i| sample(&topo, i, config)).collect();
        let mut times = Vec::new();
        for (i, s) in samples.iter().enumerate() {
            let t0 = Instant::now();
            m.update(s);
            if i >= 5 {
                times.push(t0.elapsed().as_secs_f64() * 1e3);
            }
        }
        let mean = times.iter().sum::<f64>() / times.len() as f64;
        let worst = times.iter().cloned().fold(0.0, f64::max);
        println!(
            "{:<13} tasks {} procs {} accesses/period {} comm pairs {} -> edges {} groups {} refused {}: update mean {mean:.1} ms, worst {worst:.1} ms",
            config.name(),
            m.tasks.len(),
            m.procs.len(),
            samples[0].accesses.len(),
            samples[0].comm.len(),
            m.graph.edges.len(),
            m.groups.groups.len(),
            m.groups.refused_merges
        );
    }
}
