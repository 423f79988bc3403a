//! `numapilot topo`: show the NUMA topology of this machine, a captured sysfs tree, a machine file or
//! a preset, as `numactl --hardware` text (default), a tree, or JSON.

use std::path::PathBuf;
use std::process::ExitCode;

use numapilot_topology::{presets, render, MachineFile, Topology};

use super::run::print_out;

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("source").args(["root", "machine", "preset"])))]
#[command(group(clap::ArgGroup::new("view").args(["hardware", "tree", "json", "export"])))]
pub struct Args {
    /// Print like `numactl --hardware` (the default).
    #[arg(long, short = 'H')]
    pub hardware: bool,
    /// Print a tree: node > package/die > last-level cache > core > CPUs, devices, tiers.
    #[arg(long)]
    pub tree: bool,
    /// Print JSON: the topology and the distance tiers between every pair of nodes.
    #[arg(long)]
    pub json: bool,
    /// Print a machine file (TOML) describing the topology exactly, to edit or to load elsewhere.
    #[arg(long)]
    pub export: bool,
    /// Read sysfs under this directory instead of `/` (e.g. a captured fixture); the same option as
    /// `numapilot stat --root`.
    #[arg(long, value_name = "PATH", alias = "sysfs-root")]
    pub root: Option<PathBuf>,
    /// Read a machine file (TOML or JSON) describing a machine that is not here.
    #[arg(long, value_name = "FILE")]
    pub machine: Option<PathBuf>,
    /// Use a built-in machine (see --list-presets).
    #[arg(long, value_name = "NAME", value_parser = super::Known(super::preset_values), hide_possible_values = true)]
    pub preset: Option<String>,
    /// List the built-in machines and exit.
    #[arg(long, conflicts_with_all = ["root", "machine", "preset", "hardware", "tree", "json", "export"])]
    pub list_presets: bool,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.list_presets {
        let list = presets::list();
        let width = list.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
        let text: String = list.iter().map(|(name, description)| format!("{name:<width$}  {description}\n")).collect();
        return print_out(&text);
    }
    let (topo, label) = if let Some(path) = &args.machine {
        (Topology::from_machine_file(path)?, path.file_stem().map(|s| s.to_string_lossy().into_owned()))
    } else if let Some(name) = &args.preset {
        (Topology::preset(name)?, Some(name.clone()))
    } else {
        let root = args.root.clone().unwrap_or_else(|| PathBuf::from("/"));
        let topo = super::topology_under(&root)?;
        (topo, None)
    };
    let text = if args.tree {
        render::tree(&topo)
    } else if args.json {
        let mut s = render::json(&topo);
        s.push('\n');
        s
    } else if args.export {
        // What a machine file cannot say is refused here, naming it, not written for the load to
        // refuse (a memory-less node with CPUs was exported as memory = "0K"; review helper-56).
        if let Some(n) = topo.nodes.iter().find(|n| n.mem_total_unknown) {
            anyhow::bail!("--export: node {}'s memory is not known (its meminfo has no MemTotal)", n.id);
        }
        let file = MachineFile::from_topology(&topo, label.as_deref());
        if let Err(e) = file.build() {
            anyhow::bail!("--export: this machine cannot be written as a machine file: {e}");
        }
        file.to_toml()
    } else {
        render::numactl_hardware(&topo)
    };
    print_out(&text)
}
