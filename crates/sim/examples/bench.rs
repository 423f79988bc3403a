//! Measures the performance targets: the VM mix on the 288-core NumaConnect preset for
//! 60 simulated seconds under 4 policies, and the 2-node autonuma-benchmark suite under all
//! baselines. Prints wall time per item (peak memory: run under `/usr/bin/time -v`).
//!
//! `cargo run --release -p numapilot-sim --example bench [vm|suite]`

use numapilot_sim::workload::{autonuma_bench, vm_mix};
use numapilot_sim::{simulate, Machine, SimOptions};

fn main() {
    let what = std::env::args().nth(1).unwrap_or_else(|| "all".into());
    let opts = SimOptions::default();
    if what == "vm" || what == "all" {
        let m = Machine::preset("numaconnect-288c").expect("preset");
        let spec = vm_mix::vm_mix(&m.topo);
        let t0 = std::time::Instant::now();
        let policies = ["default", "interleave", "hard-bind", "autonuma"];
        let c = simulate(&m, &spec, &policies, &[1], &opts, &mut |_| {}).expect("vm mix runs");
        for p in &c.policies {
            println!(
                "vm-mix {:<12} throughput {:>12.1} local {:5.1}% migrated {:>9}",
                p.policy,
                p.throughput.map_or(0.0, |t| t.mean),
                p.local_access_pct.mean,
                p.pages_migrated.mean
            );
        }
        println!("vm-mix 4 policies: wall {:.2} s", t0.elapsed().as_secs_f64());
    }
    if what == "suite" || what == "all" {
        let m = Machine::preset("autonuma-2s12c-24g").expect("preset");
        let t0 = std::time::Instant::now();
        for test in autonuma_bench::NAMES {
            let spec = autonuma_bench::spec(test, &m.topo, 1.0).expect("test");
            let policies = ["default", "hard-bind", "inverse-bind", "interleave", "autonuma"];
            let c = simulate(&m, &spec, &policies, &[1], &opts, &mut |_| {}).expect("suite runs");
            let line: Vec<String> =
                c.policies.iter().map(|p| format!("{} {:.1}s", p.policy, p.runtime_s.mean)).collect();
            println!("{test:<20} {}", line.join("  "));
        }
        println!("suite, 5 policies, full size: wall {:.2} s", t0.elapsed().as_secs_f64());
    }
}
