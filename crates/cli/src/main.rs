//! `numapilot`: the command-line front door. Parses arguments, dispatches to a subcommand module
//! under `cmd/`, prints. Algorithms live in the library crates, never here.

mod cmd;

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Adaptive NUMA placement for Linux.
#[derive(Debug, Parser)]
#[command(name = "numapilot", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show the NUMA topology (numactl --hardware compatible, tree, or JSON).
    Topo(cmd::topo::Args),
    /// Per-node and per-process NUMA statistics (numastat compatible).
    Stat(cmd::stat::Args),
    /// Run a command under a NUMA policy (numactl compatible options).
    #[command(disable_help_flag = true, disable_version_flag = true)]
    Run(cmd::run::Args),
    /// Simulate a NUMA machine: compare placement policies on a workload, with charts.
    Sim(cmd::sim::Args),
    /// Run the adaptive placement daemon on this machine.
    Daemon(cmd::daemon::DaemonArgs),
    /// Ask the running daemon for its state.
    Status(cmd::daemon::StatusArgs),
    /// Why the daemon sees a process as it does (group, preferred node, reasons).
    Explain(cmd::daemon::ExplainArgs),
    /// numad-style pre-placement advice: the nodes for a job of N CPUs and SIZE memory.
    Advise(cmd::daemon::AdviseArgs),
    /// Drive the model with a `perf mem` recording (`perf script` text) taken elsewhere.
    Replay(cmd::replay::Args),
    /// autonuma-benchmark's tests as real programs, with a per-second placement recorder and charts.
    Bench(cmd::bench::Args),
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    let argv0 = args
        .first()
        .and_then(|a| Path::new(a).file_name())
        .map(|a| a.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Started as `numactl` (a symlink) we behave as numactl; as `numastat`, as numastat.
    let result = match argv0.as_str() {
        "numactl" => cmd::run::numactl_main(&args[1..]),
        "numastat" => cmd::stat::numastat_main(&args[1..]),
        _ => {
            let cli = Cli::parse_from(args);
            match cli.command {
                Command::Topo(a) => cmd::topo::run(a),
                Command::Stat(a) => cmd::stat::run(a),
                Command::Run(a) => cmd::run::run(a),
                Command::Sim(a) => cmd::sim::run(a),
                Command::Daemon(a) => cmd::daemon::run_daemon(a),
                Command::Status(a) => cmd::daemon::run_status(a),
                Command::Explain(a) => cmd::daemon::run_explain(a),
                Command::Advise(a) => cmd::daemon::run_advise(a),
                Command::Replay(a) => cmd::replay::run(a),
                Command::Bench(a) => cmd::bench::run(a),
            }
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("numapilot: {e:#}");
            ExitCode::from(1)
        }
    }
}
