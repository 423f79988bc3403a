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

use numapilot_model::{Model, Tunables};
use numapilot_policy::{Adaptive, Policy};

// The model's scale example builds its samples the same way.
#[path = "../../model/examples/synthetic/mod.rs"]
mod synthetic;
use synthetic::Load;

struct Opts {
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

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let o = Opts {
        cycles: num(&args, "--cycles", 8),
        warmup: num(&args, "--warmup", 4),
        signals: num(&args, "--signals", 0) != 0,
    };
    // One process in `busy_every` is busy: 1 at 100%, none but the first at 0.
    let busy_every = 100u32.checked_div(num(&args, "--busy", 2) as u32).map_or(u32::MAX, |e| e.max(1));
    let nodes = num(&args, "--nodes", 4) as u32;
    let cpus = num(&args, "--cpus", 64) as u32;
    let topo = synthetic::machine(nodes, cpus);
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
        let load = Load { busy_every, signals: o.signals, ..Load::new(procs, threads) };
        for c in 0..o.warmup + o.cycles {
            let s = load.sample(&topo, c + 1);
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
