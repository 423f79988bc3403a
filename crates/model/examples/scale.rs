//! Measures `Model::update` on a synthetic machine of 1,000 processes x 10 threads (4 nodes x 64
//! CPUs), with 5 access samples per thread per period (threads of a process share buckets) and
//! 2,000 communicating pairs. Run: `cargo run --release -p numapilot-model --example scale`.
//! Prints the mean and worst update time over the measured periods, with and without access
//! samples and communication (without is the usual live case: NUMA faults or residency only).
//! Two stress configurations: `distinct-sets` (no signals, every thread with its own `Arc` of its
//! allowed CPUs and nodes, as the simulator and deserialised replays build them) and `hot-bucket`
//! (signals, but every access sample of every thread in one machine-wide 2 MiB bucket).
//! `scale CONFIG` runs one configuration (signals, plain, distinct-sets, hot-bucket).

use std::time::Instant;

use numapilot_model::{Model, Tunables};
use numapilot_observe::Sample;

mod synthetic;
use synthetic::Load;

const NODES: u32 = 4;
const CPUS: u32 = 64;
const PROCS: u32 = 1000;
const THREADS: u32 = 10;

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

    /// The load of the configuration: every process busy, pids 100 apart.
    fn load(self) -> Load {
        Load {
            pid_step: 100,
            signals: matches!(self, Config::Signals | Config::HotBucket),
            hot_bucket: self == Config::HotBucket,
            distinct_sets: self == Config::DistinctSets,
            ..Load::new(PROCS, THREADS)
        }
    }
}

fn main() {
    let topo = synthetic::machine(NODES, CPUS);
    // `scale CONFIG` runs one configuration (e.g. under callgrind).
    let only = std::env::args().nth(1);
    for config in [Config::Signals, Config::Plain, Config::DistinctSets, Config::HotBucket] {
        if only.as_deref().is_some_and(|o| o != config.name()) {
            continue;
        }
        let mut m = Model::new(topo.clone(), Tunables::default());
        let load = config.load();
        let samples: Vec<Sample> = (1..=25).map(|i| load.sample(&topo, i)).collect();
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
