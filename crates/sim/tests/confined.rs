//! Processes an operator or a container runtime confined to cpusets, in the simulator: two
//! "containers" on the 2-node autonuma-benchmark machine, each given three cores (six CPUs) of
//! each node, as a CPU manager without NUMA alignment hands them out, each with four streaming
//! workers on 2 GiB its main thread first-touched. The kernel spreads each container's workers
//! over both nodes' halves of its cpuset, so about half of their accesses are remote. numapilot
//! places each container on one node's half of its cpuset (rule confined-within-cpuset: the
//! masks it sets are cut to the cpuset, the room counted in the cpuset's CPUs there) with its
//! memory. Before the model knew cpusets, these processes read as pinned and were never touched:
//! numapilot ran them as `default` does.

use numapilot_sim::engine::{Machine, SimOptions};
use numapilot_sim::result::RunResult;
use numapilot_sim::run;
use numapilot_sim::workload::file::{Format, WorkloadFile};

/// Node 0 of autonuma-2s12c-24g is CPUs 0-5,12-17, node 1 6-11,18-23 (SMT siblings n, n+12).
const CONTAINERS: &str = r#"
name = "containers"
description = "two containers of 3 cores per node each, 4 streaming workers on 2 GiB their main thread touched"

[[processes]]
name = "ctr-a"
cpuset = "0-2,12-14,6-8,18-20"
[[processes.regions]]
name = "data"
size = "2G"
touch = { by = "main" }
[[processes.threads]]
name = "worker"
count = 4
work = { total = 8589934592, unit = "bytes", bytes_per_unit = 1, compute_ns = 0 }
accesses = [{ region = "data", pattern = "stream" }]

[[processes]]
name = "ctr-b"
cpuset = "3-5,15-17,9-11,21-23"
[[processes.regions]]
name = "data"
size = "2G"
touch = { by = "main" }
[[processes.threads]]
name = "worker"
count = 4
work = { total = 8589934592, unit = "bytes", bytes_per_unit = 1, compute_ns = 0 }
accesses = [{ region = "data", pattern = "stream" }]
"#;

fn run(policy: &str) -> RunResult {
    let m = Machine::preset("autonuma-2s12c-24g").unwrap();
    let spec = WorkloadFile::parse(CONTAINERS, Format::Toml, "containers.toml")
        .and_then(|f| f.resolve(&m.topo, "containers.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    run::run_one(&m, &spec, policy, 1, &SimOptions::default(), &mut |_| {}).unwrap_or_else(|e| panic!("{policy}: {e}"))
}

#[test]
fn containers_confined_to_cpusets_are_placed_within_them() {
    let default = run("default");
    let pilot = run("numapilot");
    eprintln!(
        "default: {:.2} s, {:.1}% local; numapilot: {:.2} s, {:.1}% local, {} pages migrated, converged at {:?} s",
        default.runtime_s,
        default.local_access_pct,
        pilot.runtime_s,
        pilot.local_access_pct,
        pilot.pages_migrated,
        pilot.converge_s
    );
    assert!(default.local_access_pct < 75.0, "the kernel alone spreads the workers: {:.1}%", default.local_access_pct);
    let converged = pilot.converge_s.expect("numapilot never reached 90% local accesses");
    assert!(converged < pilot.runtime_s / 2.0, "90% local only at {converged:.1} s of {:.1}", pilot.runtime_s);
    assert!(pilot.runtime_s < default.runtime_s, "{:.2} s vs default {:.2} s", pilot.runtime_s, default.runtime_s);
    for p in &pilot.processes {
        eprintln!("numapilot: {} ends on nodes {:?}", p.name, p.cpu_nodes);
        assert_eq!(p.cpu_nodes.len(), 1, "{} ends on nodes {:?}", p.name, p.cpu_nodes);
    }
}

/// A cpuset naming CPUs the machine does not have is refused, naming the field.
#[test]
fn a_cpuset_of_missing_cpus_is_refused_naming_it() {
    let m = Machine::preset("autonuma-2s12c-24g").unwrap();
    let text = CONTAINERS.replacen("cpuset = \"0-2,12-14,6-8,18-20\"", "cpuset = \"0-2,99\"", 1);
    let e = WorkloadFile::parse(&text, Format::Toml, "containers.toml")
        .and_then(|f| f.resolve(&m.topo, "containers.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("processes[0].cpuset") && e.contains("CPUs 99 are not online"), "{e}");
}
