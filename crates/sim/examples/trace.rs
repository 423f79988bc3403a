//! Prints numapilot's actions (time, target, kind, rule, detail) on one run, for reading a policy's
//! decisions: `cargo run --release -p numapilot-sim --example trace -- MACHINE WORKLOAD[@SCALE] SECONDS SEED [PID]` (MACHINE: a preset or the path of a machine file).
//! `PROBE_TUNABLES=file.toml` overrides tunables, as for the probe example.

use numapilot_sim::{run::run_engine, Machine, SimOptions};

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let m = Machine::preset_or_file(&a[0]).expect("machine");
    let mut spec = numapilot_sim::workload::builtin(&a[1], &m.topo).expect("workload");
    let secs: f64 = a[2].parse().expect("seconds");
    if secs > 0.0 {
        spec.duration_s = Some(secs);
    }
    let seed: u64 = a[3].parse().expect("seed");
    let pid: Option<u32> = a.get(4).map(|p| p.parse().expect("pid"));
    let mut opts = SimOptions::default();
    if let Some(path) = std::env::var_os("PROBE_TUNABLES") {
        opts.tunables = numapilot_sim::run::tunables_from_file(std::path::Path::new(&path)).expect("tunables");
    }
    let r = run_engine(&m, &spec, "numapilot", seed, &opts, &mut |_| {}, &mut |sim, rep| {
        for act in &rep.plan.actions {
            if pid.is_some_and(|p| p != act.target.pid) {
                continue;
            }
            let kind = match &act.kind {
                numapilot_policy::ActionKind::SetAffinity { cpus } => format!("affinity {cpus}"),
                numapilot_policy::ActionKind::MigratePages { from, to, max_pages } => {
                    format!("migrate {from}->{to} max {max_pages:?}")
                }
                numapilot_policy::ActionKind::MoveRanges { ranges, to } => {
                    format!("move {} ranges ->{to}", ranges.len())
                }
                k => format!("{k:?}").chars().take(60).collect(),
            };
            println!(
                "{:7.2} {}/{} {kind} [{}] {}",
                sim.now_ns() as f64 / 1e9,
                act.target.pid,
                act.target.tid.map_or("-".to_string(), |t| t.to_string()),
                act.reason.rule,
                act.reason.detail
            );
        }
    })
    .expect("run");
    println!("runtime {:.3} local {:.1}% pages {}", r.runtime_s, r.local_access_pct, r.pages_migrated);
}
