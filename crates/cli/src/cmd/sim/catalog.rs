//! The names `numapilot sim` accepts: machines (topology presets or machine files), workloads (the
//! simulator's built-in ones or workload files) and policies (the kernel baselines and the engine
//! policies, `numapilot_sim::run::policy_names`). An unknown name is an error listing the valid ones.

use std::path::Path;

use numapilot_sim::run::policy_names;
use numapilot_sim::workload::{autonuma_bench, client_server, file, process_types, vm_mix, Spec};
use numapilot_sim::Machine;
use numapilot_topology::{presets, Topology};

/// Error for a `what` named `name` that is not one of `valid` (`whats`: the plural). The name is
/// quoted as Rust debug-prints a string, as `topo --preset` and `bench` quote theirs: a control
/// character in it is shown escaped rather than sent to the terminal (it was printed raw, in
/// single quotes; review helper-103).
pub fn unknown(what: &str, whats: &str, name: &str, valid: &[&str]) -> anyhow::Error {
    anyhow::anyhow!("unknown {what} {name:?}; valid {whats}: {}", valid.join(", "))
}

/// The machine named on the command line: a preset, else an existing machine file.
pub fn machine(m: &str) -> anyhow::Result<Machine> {
    let names = presets::names();
    if names.contains(&m) {
        return Ok(Machine::preset(m)?);
    }
    let path = Path::new(m);
    if path.exists() {
        // Its errors name the file already.
        return Ok(Machine::from_path(path)?);
    }
    if super::super::looks_like_path(m) {
        anyhow::bail!("machine file {m:?}: no such file");
    }
    Err(anyhow::anyhow!("{:#}, or the path of a machine file", unknown("machine", "machines", m, &names)))
}

/// A built-in workload: name, one line, and how to build it for a machine.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    /// Name on the command line.
    pub name: &'static str,
    /// One line for `numapilot sim list`.
    pub description: &'static str,
    build: Build,
}

#[derive(Debug, Clone, Copy)]
enum Build {
    /// An autonuma-benchmark test, at full size.
    AutonumaBench,
    /// A workload built from the machine alone.
    Plain(fn(&Topology) -> Spec),
}

impl Workload {
    /// The workload for `topo`.
    pub fn build(&self, topo: &Topology) -> anyhow::Result<Spec> {
        match self.build {
            Build::AutonumaBench => Ok(autonuma_bench::spec(self.name, topo, 1.0)?),
            Build::Plain(f) => Ok(f(topo)),
        }
    }
}

/// Every built-in workload, in listing order: autonuma-benchmark first, then the simulator's
/// catalogues (client/server, process types, VM mix).
pub fn workloads() -> Vec<Workload> {
    let mut out: Vec<Workload> = autonuma_bench::NAMES
        .iter()
        .map(|&name| Workload {
            name,
            description: match name {
                "numa01" => "autonuma-benchmark: 2 processes, every thread writes its process's 3 GiB",
                "numa01_THREAD_ALLOC" => "autonuma-benchmark: 2 processes, every thread writes its own slice",
                "numa02" => "autonuma-benchmark: 1 process, a thread per CPU writes its slice of 1 GiB",
                _ => "autonuma-benchmark: numa02 with a thread per core (half the CPUs)",
            },
            build: Build::AutonumaBench,
        })
        .collect();
    for named in client_server::catalog().into_iter().chain(process_types::catalog()).chain(vm_mix::catalog()) {
        out.push(Workload { name: named.name, description: named.description, build: Build::Plain(named.build) });
    }
    out
}

/// The workload named on the command line for `topo`: a built-in one, else an existing workload
/// file (TOML or JSON).
pub fn workload(w: &str, topo: &Topology) -> anyhow::Result<Spec> {
    let all = workloads();
    if let Some(entry) = all.iter().find(|e| e.name == w) {
        return entry.build(topo);
    }
    let path = Path::new(w);
    if path.exists() {
        // Its errors name the file already.
        return Ok(file::load_spec(path, topo)?);
    }
    if super::super::looks_like_path(w) {
        anyhow::bail!("workload file {w:?}: no such file");
    }
    let names: Vec<&str> = all.iter().map(|e| e.name).collect();
    Err(anyhow::anyhow!("{:#}, or the path of a workload file", unknown("workload", "workloads", w, &names)))
}

/// The built-in workloads with their descriptions (completions: `super::super::Known`).
pub fn workload_values() -> Vec<(&'static str, String)> {
    workloads().into_iter().map(|w| (w.name, w.description.to_string())).collect()
}

/// The policies with their descriptions (completions: `super::super::Known`).
pub fn policy_values() -> Vec<(&'static str, String)> {
    policy_names().into_iter().map(|p| (p, policy_description(p).to_string())).collect()
}

/// Checks every policy name before anything runs.
pub fn policies(names: &[String]) -> anyhow::Result<()> {
    let valid = policy_names();
    for p in names {
        if !valid.contains(&p.as_str()) {
            return Err(unknown("policy", "policies", p, &valid));
        }
    }
    Ok(())
}

/// One line about a policy for `numapilot sim list`.
pub fn policy_description(name: &str) -> &'static str {
    match name {
        "default" => "kernel: first touch and the load balancer, no NUMA balancing",
        "hard-bind" => "kernel: each process bound (CPUs and memory) to its share of the nodes",
        "inverse-bind" => "kernel: CPUs as hard-bind, memory on the other nodes",
        "interleave" => "kernel: memory interleaved over all nodes (numactl --interleave=all)",
        "autonuma" => "kernel: NUMA balancing on (the AutoNUMA model)",
        "numapilot" => "engine: numapilot's adaptive placement (NUMA balancing off)",
        "numad" => "engine: the numad-like baseline (NUMA balancing off)",
        _ => "",
    }
}

/// `numapilot sim list`.
pub fn list_text() -> String {
    let mut out = String::from("machines (presets; a machine file path works too):\n");
    for (name, description) in presets::list() {
        out.push_str(&format!("  {name:<20}  {description}\n"));
    }
    out.push_str("workloads (a workload file path works too):\n");
    for w in workloads() {
        out.push_str(&format!("  {:<20}  {}\n", w.name, w.description));
    }
    out.push_str("policies:\n");
    for p in policy_names() {
        out.push_str(&format!("  {p:<20}  {}\n", policy_description(p)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machines_are_presets_or_files() {
        let m = machine("autonuma-2s12c-24g").unwrap();
        assert_eq!((m.topo.nodes.len(), m.name.as_str()), (2, "autonuma-2s12c-24g"));
        let e = format!("{:#}", machine("nope").unwrap_err());
        assert!(e.starts_with("unknown machine \"nope\"; valid machines: autonuma-2s12c-24g, "), "{e}");
        assert!(e.ends_with(", or the path of a machine file"), "{e}");
        let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../machines/ring-8n64c.toml");
        assert_eq!(machine(file).unwrap().topo.nodes.len(), 8);
        // A file name that is not there is a missing file, not an unknown preset.
        let e = format!("{:#}", machine("/no/such/box.toml").unwrap_err());
        assert_eq!(e, "machine file \"/no/such/box.toml\": no such file");
        let topo = presets::topology("autonuma-2s12c-24g").unwrap();
        let e = format!("{:#}", workload("mine.toml", &topo).unwrap_err());
        assert_eq!(e, "workload file \"mine.toml\": no such file");
        // The file's own error names it, once.
        let e = format!("{:#}", workload("/", &topo).unwrap_err());
        assert_eq!(e.matches("workload file /").count(), 1, "{e}");
    }

    #[test]
    fn every_listed_workload_builds_on_the_2_node_box_and_is_valid() {
        let topo = presets::topology("autonuma-2s12c-24g").unwrap();
        let all = workloads();
        assert!(all.len() > autonuma_bench::NAMES.len(), "autonuma-benchmark and more");
        for w in &all {
            let spec = workload(w.name, &topo).unwrap();
            spec.validate().unwrap_or_else(|e| panic!("{}: {e}", w.name));
            assert!(!spec.processes.is_empty(), "{}", w.name);
        }
        let e = format!("{:#}", workload("numa03", &topo).unwrap_err());
        assert!(e.starts_with("unknown workload \"numa03\"; valid workloads: numa01, numa01_THREAD_ALLOC, "), "{e}");
        for w in &all {
            assert!(e.contains(w.name), "{} missing from {e}", w.name);
        }
    }

    #[test]
    fn workload_files_load() {
        let topo = presets::topology("autonuma-2s12c-24g").unwrap();
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../workloads/numa01-like.toml");
        let spec = workload(path, &topo).unwrap();
        assert!(!spec.processes.is_empty());
    }

    #[test]
    fn policies_are_the_baselines_and_the_engine_policies() {
        policies(&["default".into(), "autonuma".into(), "numad".into(), "numapilot".into()]).unwrap();
        let e = policies(&["default".into(), "numactl".into()]).unwrap_err().to_string();
        assert_eq!(
            e,
            "unknown policy \"numactl\"; valid policies: default, hard-bind, inverse-bind, interleave, autonuma, \
             numapilot, numad"
        );
        for p in policy_names() {
            assert!(!policy_description(p).is_empty(), "{p}");
            assert!(list_text().contains(policy_description(p)), "{p}");
        }
    }
}
