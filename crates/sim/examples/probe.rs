//! Quick look at one evidence cell: a workload on a machine under several policies and seeds, with
//! the evidence command's figures (mix: mean per-process throughput against default's and the mean
//! per-process stddev/mean across seeds; fixed work: runtime, time to 90% local, pages migrated).
//! Runs are spread over 2 threads.
//!
//! `cargo run --release -p numapilot-sim --example probe -- MACHINE WORKLOAD[@SCALE] SECONDS SEEDS POLICY,..`
//! (MACHINE: a preset or the path of a machine file; `SECONDS` 0 keeps the workload's own length; `WORKLOAD` is an autonuma-benchmark test, a
//! process-types name or `vm-mix`). Environment: `PROBE_TUNABLES=FILE` (engine tunables, TOML),
//! `PROBE_SAMPLE_COST_NS=N` (numapilot's emulated PMU sampling stall per sample, default 2000),
//! `PROBE_IDLE_MAX_MS=N` (cap of numapilot's step back-off, default 15000; 0: no back-off),
//! `PROBE_NO_STRETCH=1` (back off without stretching the access sampling),
//! `PROBE_PROCS=1` (per-process figures).

use numapilot_sim::result::{RunResult, Stat};
use numapilot_sim::{run_one, Machine, SimOptions};

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 5 {
        eprintln!("usage: probe MACHINE WORKLOAD[@SCALE] SECONDS SEEDS POLICY,..");
        std::process::exit(2);
    }
    let m = Machine::preset_or_file(&a[0]).expect("machine");
    let mut spec = numapilot_sim::workload::builtin(&a[1], &m.topo).expect("workload");
    let secs: f64 = a[2].parse().expect("seconds");
    if secs > 0.0 {
        spec.duration_s = Some(secs);
    }
    let seeds: u64 = a[3].parse().expect("seeds");
    let policies: Vec<&str> = a[4].split(',').collect();
    let mut opts = SimOptions::default();
    if let Ok(ns) = std::env::var("PROBE_SAMPLE_COST_NS") {
        opts.pmu_sample_cost_ns = ns.parse().expect("PROBE_SAMPLE_COST_NS: ns");
    }
    if let Ok(ms) = std::env::var("PROBE_IDLE_MAX_MS") {
        opts.idle_max_interval_ms = ms.parse().expect("PROBE_IDLE_MAX_MS: ms");
    }
    if std::env::var_os("PROBE_NO_STRETCH").is_some() {
        opts.stretch_sampling = false;
    }
    if let Some(path) = std::env::var_os("PROBE_TUNABLES") {
        opts.tunables = numapilot_sim::run::tunables_from_file(std::path::Path::new(&path)).expect("tunables");
    }
    let jobs: Vec<(usize, u64)> = (0..policies.len()).flat_map(|p| (1..=seeds).map(move |s| (p, s))).collect();
    let results = std::sync::Mutex::new(Vec::new());
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|sc| {
        for _ in 0..2 {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(&(p, s)) = jobs.get(i) else { break };
                let r = run_one(&m, &spec, policies[p], s, &opts, &mut |_| {}).expect("run");
                results.lock().unwrap().push((p, s, r));
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|x| (x.0, x.1));
    let runs = |p: usize| -> Vec<&RunResult> { results.iter().filter(|x| x.0 == p).map(|x| &x.2).collect() };
    let tp = |r: &RunResult, i: usize| r.processes.get(i).and_then(|x| x.throughput).unwrap_or(0.0);
    let base = runs(0);
    let nproc = base[0].processes.len();
    let open: Vec<usize> = (0..nproc).filter(|&i| base[0].processes[i].throughput.is_some()).collect();
    let base_mean: Vec<f64> =
        open.iter().map(|&i| Stat::of(&base.iter().map(|r| tp(r, i)).collect::<Vec<_>>()).mean).collect();
    for (p, name) in policies.iter().enumerate() {
        let rs = runs(p);
        if open.is_empty() {
            let rt: Vec<f64> = rs.iter().map(|r| r.runtime_s).collect();
            let bound = numapilot_sim::workload::locality::local_share_bound(&spec, &m.topo);
            let conv: Vec<String> =
                rs.iter()
                    .map(|r| {
                        let c = r.processes.iter().map(|p| {
                            numapilot_sim::run::converge_time_at(&p.series, p.finish_s.is_some(), 90.0 * bound)
                        });
                        format!("{:?}", c.into_iter().try_fold(0.0f64, |a, c| c.map(|c| a.max(c))))
                    })
                    .collect();
            let pages: Vec<f64> = rs.iter().map(|r| r.pages_migrated as f64).collect();
            println!(
                "{name:<10} runtime {:.3} ± {:.3}  90% of bound local at {}  pages {:.0}  local {:.1}%",
                Stat::of(&rt).mean,
                Stat::of(&rt).stddev,
                conv.join("/"),
                Stat::of(&pages).mean,
                Stat::of(&rs.iter().map(|r| r.local_access_pct).collect::<Vec<_>>()).mean
            );
            continue;
        }
        let per_run: Vec<f64> = rs
            .iter()
            .map(|r| open.iter().zip(&base_mean).map(|(&i, &b)| tp(r, i) / b).sum::<f64>() / open.len() as f64)
            .collect();
        let cvs: Vec<f64> = open
            .iter()
            .map(|&i| {
                let s = Stat::of(&rs.iter().map(|r| tp(r, i)).collect::<Vec<_>>());
                s.stddev / s.mean
            })
            .collect();
        let cv = cvs.iter().sum::<f64>() / cvs.len() as f64;
        println!(
            "{name:<10} mean {:.4} ± {:.4}  cv {:.2}%  local {:.1}%  pages {:.0}",
            Stat::of(&per_run).mean,
            Stat::of(&per_run).stddev,
            cv * 100.0,
            Stat::of(&rs.iter().map(|r| r.local_access_pct).collect::<Vec<_>>()).mean,
            Stat::of(&rs.iter().map(|r| r.pages_migrated as f64).collect::<Vec<_>>()).mean
        );
        if std::env::var_os("PROBE_PROCS").is_some() {
            for (k, &i) in open.iter().enumerate() {
                let xs: Vec<String> = rs.iter().map(|r| format!("{:.2}", tp(r, i) / base_mean[k])).collect();
                println!("    {:<22} {}", rs[0].processes[i].name, xs.join(" "));
            }
        }
    }
}
