//! How the model + plan half of a daemon cycle grows with the load: `Model::update` and
//! `Adaptive::decide` on synthetic samples of `--procs` processes x `--threads` threads, at several
//! sizes in one run, so the ratios between sizes come from the same machine state.
//!
//! ```text
//!   cargo run --release -p numapilot-policy --example scale -- \
//!       [--sizes 1000x10,3000x10,10000x10] [--busy 2] [--cycles 8] [--warmup 4]
//!       [--nodes 4] [--cpus 64] [--signals 0]
//! ```
//!
//! Each size is `PROCSxTHREADS`. `--busy` percent of the processes run (every thread 30% of a
//! CPU), the rest sleep, as on the daemon's cycle-cost load; `--signals 1` adds 5 access samples
//! per thread and 4 communicating pairs per two processes. Per size it prints the mean CPU time
//! (this thread's clock) of the update and of the decision over the measured cycles, each per
//! 1,000 threads, and the ratio of the largest size's per-thread cost to the smallest's (1.0 is
//! linear), with a digest of every plan and grouping: two builds give the same digest when they
//! decide the same.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use numapilot_model::{Model, Tunables};
use numapilot_observe::{
    AccessSample, CommKind, CommSample, NodeSample, NodeUsage, ProcessSample, Sample, SchedStat, TaskStat, ThreadSample,
};
use numapilot_policy::{Adaptive, Policy};
use numapilot_topology::{NodeSet, Topology};

struct Opts {
    busy_pct: u32,
    cycles: u64,
    warmup: u64,
    signals: bool,
}

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned().unwrap_or_else(|| default.to_string())
}

fn num(args: &[String], name: &str, default: u64) -> u64 {
    let v = arg(args, name, &default.to_string());
    v.parse().unwrap_or_else(|_| panic!("{name}: not a number: {v}"))
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into the struct we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn stat(pid: u32, ticks: u64, cpu: u32, threads: u32, state: char) -> TaskStat {
    TaskStat {
        pid,
        comm: "worker".into(),
        state,
        ppid: 1,
        utime: ticks,
        priority: 20,
        num_threads: threads,
        starttime: 100,
        processor: cpu,
        ..TaskStat::default()
    }
}

fn sample(topo: &Topology, step: u64, procs: u32, threads: u32, o: &Opts) -> Sample {
    let t = step * 1_000_000_000;
    let ncpus = topo.online_cpus().len() as u32;
    let nodes = topo.nodes.len() as u32;
    let all_cpus = Arc::new(topo.online_cpus());
    let all_nodes: Arc<NodeSet> = Arc::new(topo.node_ids());
    let busy_every = 100u32.checked_div(o.busy_pct).map_or(u32::MAX, |e| e.max(1));
    let mut processes = Vec::with_capacity(procs as usize);
    let mut accesses = Vec::new();
    let mut comm = Vec::new();
    for p in 0..procs {
        let pid = 1000 + p * (threads + 1);
        let busy = p % busy_every == 0;
        let ts = (0..threads)
            .map(|k| {
                let tid = pid + k;
                let cpu = (p * threads + k) % ncpus;
                let run = if busy { step * 300_000_000 } else { 1_000_000 };
                if o.signals {
                    for s in 0..5u64 {
                        let bucket = (u64::from(k) / 2) * 4 + s % 2;
                        accesses.push(AccessSample {
                            pid,
                            tid,
                            addr: 0x7f00_0000_0000 + (bucket << 21),
                            phys: None,
                            node: (p + (s as u32)) % nodes,
                            count: 1 + (s as u32),
                            last_ns: t - 1000 * s,
                        });
                    }
                }
                ThreadSample {
                    tid,
                    stat: stat(tid, run / 10_000_000, cpu, threads, if busy { 'R' } else { 'S' }),
                    cpus_allowed: all_cpus.clone(),
                    mems_allowed: all_nodes.clone(),
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
        if o.signals && p % 2 == 0 && p + 1 < procs {
            let other = pid + threads + 1;
            for k in 0..4.min(threads) {
                comm.push(CommSample { a: (pid, pid + k), b: (other, other + k), kind: CommKind::Wakeup, events: 700 });
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
            stat: stat(pid, 0, 0, threads, if busy { 'R' } else { 'S' }),
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

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let o = Opts {
        busy_pct: num(&args, "--busy", 2) as u32,
        cycles: num(&args, "--cycles", 8),
        warmup: num(&args, "--warmup", 4),
        signals: num(&args, "--signals", 0) != 0,
    };
    let nodes = num(&args, "--nodes", 4) as u32;
    let cpus = num(&args, "--cpus", 64) as u32;
    let mut topo = Topology::uniform(nodes, cpus, 256 << 20, 21);
    for n in &mut topo.nodes {
        n.mem_free_kb = 128 << 20;
    }
    let sizes: Vec<(u32, u32)> = arg(&args, "--sizes", "1000x10,3000x10,10000x10")
        .split(',')
        .map(|s| {
            let (p, t) = s.split_once('x').unwrap_or_else(|| panic!("--sizes: not PROCSxTHREADS: {s}"));
            (p.parse().expect("--sizes: processes"), t.parse().expect("--sizes: threads"))
        })
        .collect();
    let mut per_thread = Vec::new();
    for &(procs, threads) in &sizes {
        let mut model = Model::new(topo.clone(), Tunables::default());
        let mut policy = Adaptive::new();
        let mut digest = std::collections::hash_map::DefaultHasher::new();
        let (mut model_ns, mut plan_ns, mut actions) = (0u64, 0u64, 0usize);
        for c in 0..o.warmup + o.cycles {
            let s = sample(&topo, c + 1, procs, threads, &o);
            let t0 = thread_cpu_ns();
            model.update(&s);
            let t1 = thread_cpu_ns();
            let plan = policy.decide(&model);
            let t2 = thread_cpu_ns();
            actions += plan.actions.len();
            format!("{:?}", plan.actions).hash(&mut digest);
            for (id, g) in &model.groups.groups {
                (id, &g.tasks).hash(&mut digest);
                g.cpu.to_bits().hash(&mut digest);
                g.mem_bytes.hash(&mut digest);
            }
            if c >= o.warmup {
                model_ns += t1 - t0;
                plan_ns += t2 - t1;
            }
        }
        let n = o.cycles.max(1) as f64;
        let tasks = f64::from(procs * threads);
        let (mm, pm) = (model_ns as f64 / n / 1e6, plan_ns as f64 / n / 1e6);
        per_thread.push(((mm + pm) / tasks * 1e3, mm / tasks * 1e3, pm / tasks * 1e3));
        println!(
            "{procs:>6} procs x {threads:>3} threads ({} tasks, {} groups, {actions} actions): model {mm:8.2} ms, \
             plan {pm:8.2} ms, per 1,000 threads: model {:.3} ms, plan {:.3} ms; digest {:016x}",
            model.tasks.len(),
            model.groups.groups.len(),
            mm / tasks * 1e3,
            pm / tasks * 1e3,
            digest.finish()
        );
    }
    if let (Some(first), Some(last)) = (per_thread.first(), per_thread.last()) {
        println!(
            "per-thread cost, largest / smallest size: model {:.2}, plan {:.2}, both {:.2} (1.0 = linear)",
            last.1 / first.1,
            last.2 / first.2,
            last.0 / first.0
        );
    }
}
