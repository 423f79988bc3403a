//! `numapilot`: the command-line front door. Parses arguments, dispatches to a subcommand module
//! under `cmd/`, prints. Algorithms live in the library crates, never here.

mod cmd;

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches as _, Parser, Subcommand};

/// Adaptive NUMA placement for Linux.
///
/// numapilot samples how threads touch memory, learns which threads belong together, models
/// each node's load and interference, and places groups of threads and their memory on NUMA
/// nodes while the machine runs (`numapilot daemon`). Beside it: the topology (`topo`),
/// numastat-style statistics (`stat`), a numactl-compatible launcher (`run`; started through a
/// symlink named numactl or numastat it is that tool), numad-style advice (`advise`), a NUMA
/// machine simulator (`sim`), autonuma-benchmark as real programs (`bench`) and replay of a
/// `perf mem` recording (`replay`).
///
/// Files: /etc/numapilot.toml (the daemon's configuration), /run/numapilot/state.json (the
/// originals of every process it changed, restored on exit and after a crash),
/// /run/numapilot/numapilot.sock (its root-only control socket), /var/log/numapilot/journal.jsonl
/// (its decisions with their reasons, JSON lines). See also numactl(8),
/// numastat(8), numad(8).
#[derive(Debug, Parser)]
#[command(name = "numapilot", version, propagate_version = true)]
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
    /// numad-style pre-placement advice: the nodes for a job of N CPUs and SIZE memory (the running
    /// daemon answers and keeps its promise; without one, this machine is measured).
    Advise(cmd::daemon::AdviseArgs),
    /// Drive the model with a `perf mem` recording (`perf script` text) taken elsewhere.
    Replay(cmd::replay::Args),
    /// autonuma-benchmark's tests as real programs, with a per-second placement recorder and charts.
    Bench(cmd::bench::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(cmd::docs::CompletionsArgs),
    /// Print the numapilot(1) manual page, or write every page (each subcommand's, numapilot.toml(5)) with --out DIR.
    Man(cmd::docs::ManArgs),
}

/// The tool `name` (a program name without its directory) stands for: `numactl` or `numastat`,
/// alone or followed by `.` or `-` and anything (`numactl.distrib`, `numastat-2.0.16`).
fn compat_name(name: &str) -> Option<&'static str> {
    ["numactl", "numastat"]
        .into_iter()
        .find(|tool| name.strip_prefix(tool).is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '-'])))
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    let argv0 = args
        .first()
        .and_then(|a| Path::new(a).file_name())
        .map(|a| a.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Started as `numactl` (a symlink) we behave as numactl; as `numastat`, as numastat; also
    // under a diverted or versioned name (`numactl.distrib` as dpkg-divert leaves it,
    // `numastat-2`: review helper-36).
    let result = match compat_name(&argv0) {
        Some("numactl") => cmd::run::numactl_main(&args[1..]),
        Some("numastat") => cmd::stat::numastat_main(&args[1..]),
        // The bench's worker processes (this binary, started by `numapilot bench`): internal, so not
        // a clap option, which every completion script would offer.
        _ if args.len() > 2 && cmd::bench::WORKER_ARGS.iter().zip(&args[1..]).all(|(w, a)| a == w) => {
            cmd::bench::worker(&args[3..])
        }
        _ => {
            // numastat's attached `-s` node (`-s1`) for the subcommand too (`stat::attach_sort_values`).
            let args = if args.get(1).is_some_and(|a| a == "stat") {
                let mut a = args;
                let rest = a.split_off(2);
                a.extend(cmd::stat::attach_sort_values(rest));
                a
            } else {
                args
            };
            // `status --check` is a monitoring plugin: a command line it cannot read is UNKNOWN (3),
            // as the plugin guidelines say, not clap's usage status 2, which reads as CRITICAL
            // (review helper-55). Help and version still print and exit 0.
            let check = args.get(1).is_some_and(|a| a == "status") && args.iter().any(|a| a == "--check");
            let cli = match negative_numbers_are_values(Cli::command())
                .try_get_matches_from(&args)
                .and_then(|m| Cli::from_arg_matches(&m))
            {
                Ok(cli) => cli,
                Err(e) if check && e.use_stderr() => {
                    let first =
                        e.to_string().lines().next().unwrap_or_default().trim_start_matches("error: ").to_string();
                    // Never println!, which panics (exit 101) when stdout fails (review helper-57).
                    let _ = cmd::run::print_out(&format!("UNKNOWN: {first}\n"));
                    return ExitCode::from(cmd::daemon::EXIT_CHECK_UNKNOWN);
                }
                Err(e) => e.exit(),
            };
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
                Command::Completions(a) => cmd::docs::completions(a, Cli::command()),
                Command::Man(a) => cmd::docs::man(a, Cli::command()),
            }
        }
    };
    match result {
        Ok(code) => code,
        // A reader that went away (`| head`): a quiet end, as for any Unix filter.
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("numapilot: {}", error_text(&e));
            ExitCode::from(1)
        }
    }
}

/// Every option of every subcommand that takes a value takes a negative number as that value
/// (`--cpus -1`, `--seconds -1`), so the option's own check names it (`--cpus -1: must be a finite
/// number >= 0`); clap read it as an option of its own and said only "unexpected argument '-1'
/// found", naming neither the option nor what is wrong with it. Positional arguments are left as
/// they are: `stat -1` stays an unknown option, as in numastat; `explain`'s PID takes a negative
/// number itself, to refuse it as no process id (`cmd::daemon::process_id`).
fn negative_numbers_are_values(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(
        |a| if !a.is_positional() && a.get_action().takes_values() { a.allow_negative_numbers(true) } else { a },
    )
    .mut_subcommands(negative_numbers_are_values)
}

/// The error and its causes, outermost first, joined by ": " (what `{:#}` prints), except a cause
/// whose text an outer message already quotes: most of our error types name their source in their
/// own message ("reading tunables file F: No such file or directory"), and printing the chain as
/// well said the OS error twice.
pub(crate) fn error_text(e: &anyhow::Error) -> String {
    let mut out = e.to_string();
    for cause in e.chain().skip(1) {
        let s = cause.to_string();
        if !s.is_empty() && !out.contains(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{compat_name, error_text, Cli};
    use clap::CommandFactory as _;

    /// clap_complete offers every argument and subcommand, hidden ones too: an internal one is kept
    /// out of clap instead (bench's worker processes are read before it, `cmd::bench::WORKER_ARGS`).
    #[test]
    fn no_argument_or_subcommand_is_hidden_from_help_but_left_to_completion() {
        fn walk(cmd: &clap::Command, path: &str) {
            for a in cmd.get_arguments() {
                assert!(!a.is_hide_set(), "{path} {}: hidden, yet completions would offer it", a.get_id());
            }
            for sub in cmd.get_subcommands() {
                assert!(!sub.is_hide_set(), "{path} {}: hidden, yet completions would offer it", sub.get_name());
                walk(sub, &format!("{path} {}", sub.get_name()));
            }
        }
        walk(&Cli::command(), "numapilot");
    }

    /// Every option or argument that takes a value says what completes it: its known values, a
    /// path hint (clap gives `PathBuf` one), or `ValueHint::Other` (a number, size, pid or name:
    /// nothing). Without one, every shell offered file names for `--cpus` and the like. `run`'s
    /// trailing command line says `CommandWithArguments` (its scripts are written by
    /// `run::completion`).
    #[test]
    fn every_value_says_what_completes_it() {
        fn walk(cmd: &clap::Command, path: &str, bare: &mut Vec<String>) {
            for a in cmd.get_arguments().filter(|a| a.get_num_args().is_some_and(|n| n.takes_values())) {
                let known = !a.get_possible_values().is_empty();
                if !known && a.get_value_hint() == clap::ValueHint::Unknown {
                    bare.push(format!("{path} {}", a.get_id()));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), bare);
            }
        }
        let mut cmd = Cli::command();
        cmd.build();
        let mut bare = Vec::new();
        walk(&cmd, "numapilot", &mut bare);
        assert!(bare.is_empty(), "complete file names (give each a value_hint): {bare:?}");
    }

    #[test]
    fn compat_names() {
        assert_eq!(compat_name("numactl"), Some("numactl"));
        assert_eq!(compat_name("numactl.distrib"), Some("numactl"));
        assert_eq!(compat_name("numastat-2.0.16"), Some("numastat"));
        assert_eq!(compat_name("numapilot"), None);
        assert_eq!(compat_name("numactlx"), None);
        assert_eq!(compat_name(""), None);
    }

    /// Shaped as our error types are: its message quotes its source, which it also reports.
    #[derive(Debug)]
    struct Quoting {
        path: String,
        source: std::io::Error,
    }

    impl std::fmt::Display for Quoting {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "reading tunables file {}: {}", self.path, self.source)
        }
    }

    impl std::error::Error for Quoting {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    #[test]
    fn a_cause_the_message_already_quotes_is_said_once_and_others_are_chained() {
        let io = || std::io::Error::from_raw_os_error(libc::ENOENT);
        let quoted = anyhow::Error::new(Quoting { path: "/t.toml".into(), source: io() });
        let text = error_text(&quoted);
        assert_eq!(text.matches("No such file or directory").count(), 1, "{text}");
        assert!(text.starts_with("reading tunables file /t.toml: No such file"), "{text}");
        // A context over a cause it does not quote keeps both, outermost first.
        let ctx = anyhow::Error::new(io()).context("reading the topology under /x");
        assert_eq!(error_text(&ctx), format!("reading the topology under /x: {}", io()));
    }
}
