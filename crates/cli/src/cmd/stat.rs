//! `numapilot stat`: per-node and per-process NUMA statistics, compatible with Debian's numastat
//! (numactl 2.0.16): same tables, widths, rounding and folding (see `stat/numastat.rs` for the
//! semantics and `stat/table.rs` for the layout), plus `--json` and `--root` (read a fixture directory
//! instead of the live system).
//!
//! ```text
//!   numapilot stat                      numastat's compatibility table (node counters, pages)
//!   numapilot stat -n | -m | -p X ...   as numastat -n | -m | -p X ...
//!   numastat ...                        (a symlink named numastat) numastat's own argument syntax
//!   numapilot stat --threads [-p X] [--interval MS] [--json]
//!                                       per process: memory per node by kind, VMA policies, per thread CPU %,
//!                                       last CPU/node, allowed CPUs/nodes, run delay, NUMA balancing; per node:
//!                                       busy %, MemFree, numastat and vmstat numa_* counters; PSI (stat/threads.rs)
//! ```
//!
//! Two argument parsers, one engine: clap for `numapilot stat`, and a hand-written getopt-style parser
//! for the `numastat` name, so `numastat -p 1234 -m`, several `-p`, `-s2`, `-cmz` and bare PIDs or
//! patterns after the options behave as numastat's `getopt_long("cmnp:s::vVz?")` does.

mod numastat;
mod table;
mod threads;

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::ValueHint;
use numapilot_observe::{ReadOptions, Reader};

use self::numastat::Config;

/// Per-node and per-process NUMA statistics (numastat compatible).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Minimize column widths (and show whole MB).
    #[arg(short = 'c')]
    pub compress: bool,
    /// Show meminfo-like system-wide memory usage per node.
    #[arg(short = 'm')]
    pub meminfo: bool,
    /// Show the numastat counters (numa_hit, numa_miss, ...) per node, in MB.
    #[arg(short = 'n')]
    pub numastat: bool,
    /// Show per-node memory of the process with this PID, or of every process whose name or command
    /// line contains this pattern. May be repeated.
    /// (Taken as given, bytes that are not UTF-8 included: numastat matches them.)
    /// A pattern may start with `-` (a login shell's `-bash`), as numastat's getopt takes it.
    #[arg(
        short = 'p',
        value_name = "PID|PATTERN",
        allow_hyphen_values = true,
        value_parser = clap::value_parser!(std::ffi::OsString),
        value_hint = ValueHint::Other
    )]
    pub process: Vec<std::ffi::OsString>,
    /// Sort rows by the Total column, or by NODE's column (`-s` or `-s=1`).
    #[arg(short = 's', value_name = "NODE", num_args = 0..=1, require_equals = true, default_missing_value = "", value_hint = ValueHint::Other)]
    pub sort: Option<String>,
    /// One table per process even for several processes.
    #[arg(short = 'v')]
    pub verbose: bool,
    /// Skip rows and columns that are all zero.
    #[arg(short = 'z')]
    pub zeros: bool,
    /// Print the figures as JSON instead of tables (with --threads: both raw samples and the derived
    /// rates).
    #[arg(long)]
    pub json: bool,
    /// Per-thread view instead of numastat's tables: for each process (all user processes, or those
    /// given by -p/PID/PATTERN) its memory per node by kind, its VMA memory policies, and per thread
    /// the CPU % over the interval, CPU time, last CPU and node, allowed CPUs/nodes, run delay and
    /// NUMA-balancing figures; then per node CPU busy %, MemFree, numastat and vmstat numa_* counters,
    /// and PSI. With --root (a fixture) one sample is read and no rates are shown.
    #[arg(long, conflicts_with_all = ["compress", "meminfo", "numastat", "sort", "verbose", "zeros"])]
    pub threads: bool,
    /// With --threads: milliseconds between the two samples the rates come from.
    #[arg(long, value_name = "MS", default_value_t = 1000, requires = "threads", value_parser = clap::value_parser!(u64).range(1..=3_600_000), value_hint = ValueHint::Other)]
    pub interval: u64,
    /// Read /proc and /sys under this directory (a fixture) instead of the live system.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,
    /// More PIDs or patterns, as with -p.
    #[arg(value_name = "PID|PATTERN", value_parser = clap::value_parser!(std::ffi::OsString), value_hint = ValueHint::Other)]
    pub targets: Vec<std::ffi::OsString>,
}

/// numastat's `-s` takes its node only attached (`-s1`, getopt's optional argument `s::`), while
/// `-s 1` sorts by the total and makes 1 a PID. clap reads an attached short value only after `=`
/// (`require_equals`, which keeps `-s 1` right), so before clap parses `numapilot stat`'s
/// arguments an attached value gets its `=`: `-s1` -> `-s=1`, `-cs1` -> `-cs=1`. Clusters are read
/// as getopt reads them: flags until `p` (the rest, or the next argument, is its value) or `s`;
/// nothing after `--` is touched.
pub fn attach_sort_values(mut args: Vec<OsString>) -> Vec<OsString> {
    for (n, s) in attached_sorts(&args) {
        let Some(text) = args[n].to_str() else { continue };
        let (head, value) = text.split_at(s + 1);
        if !value.starts_with('=') {
            args[n] = format!("{head}={value}").into();
        }
    }
    args
}

/// The arguments of `args` that give `-s` an attached value (`-s1`, `-cs=1`): each one's index and
/// the byte offset of its `s`, read as getopt reads clusters (see [`attach_sort_values`]).
fn attached_sorts(args: &[OsString]) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    let mut skip_next = false;
    for (n, a) in args.iter().enumerate() {
        if std::mem::take(&mut skip_next) {
            continue;
        }
        let Some(text) = a.to_str() else { continue };
        if text == "--" {
            break;
        }
        let Some(cluster) = text.strip_prefix('-').filter(|c| !c.is_empty() && !c.starts_with('-')) else {
            continue;
        };
        for (i, c) in cluster.char_indices() {
            match c {
                'p' => {
                    skip_next = i + 1 == cluster.len();
                    break;
                }
                's' => {
                    if i + 1 < cluster.len() {
                        found.push((n, i + 1));
                    }
                    break;
                }
                'c' | 'm' | 'n' | 'v' | 'z' => {}
                _ => break,
            }
        }
    }
    found
}

/// The argument that gave `-s` its node, as the user typed it (`-s1`, `-ms1`, `-s=1`; the last
/// one when several did), from `numapilot stat`'s own command line: clap sees `-s=1` for each.
fn typed_sort() -> Option<String> {
    let raw: Vec<OsString> = std::env::args_os().collect();
    let args = raw.get(2..).filter(|_| raw.get(1).is_some_and(|a| a == "stat"))?;
    let (n, _) = attached_sorts(args).pop()?;
    args[n].to_str().map(str::to_string)
}

/// Runs `numapilot stat`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.threads {
        return run_threads(args);
    }
    let compat = !args.compress
        && !args.meminfo
        && !args.numastat
        && args.process.is_empty()
        && args.sort.is_none()
        && !args.verbose
        && !args.zeros
        && args.targets.is_empty()
        && !args.json;
    let specs = specs_of(&args);
    let cfg = Config {
        compress: args.compress,
        meminfo: args.meminfo,
        numastat: args.numastat,
        specs,
        sort: args.sort.map(|s| if s.is_empty() { None } else { Some(s) }),
        verbose: args.verbose,
        skip_zero: args.zeros,
        compat,
        token_warnings: false,
        screen_width: numastat::screen_width(),
        sort_by_node_id: true,
    };
    execute(&args.root, &cfg, args.json, Strict::Yes, typed_sort().as_deref())
}

/// The -p values and operands as given, bytes (the pattern search matches them against the
/// processes' bytes: `numastat::pattern_candidates`).
fn specs_of(args: &Args) -> Vec<std::ffi::OsString> {
    args.process.iter().chain(&args.targets).cloned().collect()
}

/// Whether naming only processes that cannot be read is an error (`numapilot stat`) or, as
/// numastat does, exits 0 (started as `numastat`).
#[derive(PartialEq)]
enum Strict {
    Yes,
    AsNumastat,
}

/// Runs the numastat tables. `sort_typed`: the argument that gave `-s` its node, as typed, for an
/// error about it (`-s={node}` when not known).
fn execute(
    root: &std::path::Path,
    cfg: &Config,
    json: bool,
    strict: Strict,
    sort_typed: Option<&str>,
) -> anyhow::Result<ExitCode> {
    if !root.is_dir() {
        anyhow::bail!("--root {}: not a directory", root.display());
    }
    let reader = Reader::with_options(root, ReadOptions { threads: false, ..ReadOptions::default() });
    if let (Some(Some(node)), true) = (&cfg.sort, cfg.sort_by_node_id) {
        // numastat sorts by the total when -s names no node it has, silently; here that is an
        // error naming it, as a PID that names no process is (review helper-49).
        let ids: Vec<u32> = reader.node_ids()?.iter().collect();
        let typed = sort_typed.map_or_else(|| format!("-s={node}"), str::to_string);
        if let Some(why) = numastat::sort_node_error(&typed, node, &ids) {
            anyhow::bail!("{why}");
        }
    }
    let out = numastat::run(&reader, cfg)?;
    let mut stdout = std::io::stdout().lock();
    if json {
        eprint!("{}", out.stderr);
        let text = serde_json::to_string_pretty(&serde_json::Value::Object(out.json)).context("encoding JSON")?;
        writeln!(stdout, "{text}").context("writing to stdout")?;
    } else {
        eprint!("{}", out.stderr);
        stdout.write_all(out.stdout.as_bytes()).context("writing to stdout")?;
    }
    stdout.flush().context("writing to stdout")?;
    if out.no_process_read && strict == Strict::Yes {
        // Said plainly, each process with why it could not be read ("PID 1: cannot read
        // /proc/1/numa_maps: Permission denied"); when no PID or pattern named a process, what
        // was named. It said "no process read: 1 named no readable process".
        let why = if out.unread.is_empty() {
            // An empty operand shows as "" (numastat's PID 0), not as nothing between two blanks.
            let named: Vec<String> = cfg
                .specs
                .iter()
                .map(|s| if s.is_empty() { "\"\"".to_string() } else { s.to_string_lossy().into_owned() })
                .collect();
            format!("{} named no process", named.join(" "))
        } else {
            out.unread.join("; ")
        };
        eprintln!("numapilot: no process could be read: {why}");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn run_threads(args: Args) -> anyhow::Result<ExitCode> {
    if !args.root.is_dir() {
        anyhow::bail!("--root {}: not a directory", args.root.display());
    }
    let specs = specs_of(&args);
    let reader = threads::reader(&args.root, !specs.is_empty());
    let cfg = threads::Config { specs, interval_ms: args.interval, json: args.json };
    let (out, notes) = threads::run(&reader, &cfg)?;
    eprint!("{notes}");
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.as_bytes()).context("writing to stdout")?;
    stdout.flush().context("writing to stdout")?;
    Ok(ExitCode::SUCCESS)
}

const USAGE: &str = "\
Usage: numastat [-c] [-m] [-n] [-p <PID>|<pattern>] [-s[<node>]] [-v] [-V] [-z] [ <PID>|<pattern>... ]
-c to minimize column widths
-m to show meminfo-like system-wide memory usage
-n to show the numastat statistics info
-p <PID>|<pattern> to show process info
-s[<node>] to sort data by total column or <node>
-v to make some reports more verbose
-V to show the numastat code version
-z to skip rows and columns of zeros
";

/// What the numastat-style argument parser decided.
#[derive(Debug, PartialEq, Eq)]
enum Parsed {
    /// Run with this configuration.
    Run(Config),
    /// Print the version and stop.
    Version,
    /// Print this message (may be empty) and the usage on stderr, exit 1.
    Usage(String),
}

/// Parses numastat's command line the way glibc's `getopt_long("cmnp:s::vVz?")` does: options may
/// be grouped (`-cm`), `-p` takes the rest of its word or the next word, `-s` takes only the rest of
/// its word, non-options are collected wherever they appear, `--` ends the options.
///
/// With `POSIXLY_CORRECT` in the environment (`posix`), glibc stops at the first operand, as
/// numactl's `+` does: `numastat sleep -c` then names two patterns.
fn parse_numastat_args(args: &[OsString], posix: bool) -> Parsed {
    use super::run::getopt::{Getopt, HasArg, OptSpec};

    // numastat 2.0.16 reads `getopt(argc, argv, "cmnp:s::vVz?")`: permuting, `-s` with an optional
    // attached value; `--help` is kept as a courtesy (numastat itself answers it with usage too).
    let opt = |short: char, arg: HasArg| OptSpec { long: "", short: Some(short), arg, id: short, extra: false };
    let specs = [
        opt('c', HasArg::No),
        opt('m', HasArg::No),
        opt('n', HasArg::No),
        opt('p', HasArg::Required),
        opt('s', HasArg::Optional),
        opt('v', HasArg::No),
        opt('V', HasArg::No),
        opt('z', HasArg::No),
        OptSpec { long: "help", short: Some('?'), arg: HasArg::No, id: '?', extra: true },
    ];
    let mut cfg = Config { compat: args.is_empty(), token_warnings: true, ..Config::default() };
    let mut g = if posix { Getopt::new(&specs, args) } else { Getopt::permuting(&specs, args) };
    for found in g.by_ref() {
        let found = match found {
            Ok(f) => f,
            Err(e) => return Parsed::Usage(format!("numastat: {e}\n")),
        };
        match found.id {
            'c' => cfg.compress = true,
            'm' => cfg.meminfo = true,
            'n' => cfg.numastat = true,
            'v' => cfg.verbose = true,
            'z' => cfg.skip_zero = true,
            'V' => return Parsed::Version,
            'p' => cfg.specs.extend(found.value),
            's' => cfg.sort = Some(found.value.map(|v| v.to_string_lossy().into_owned())),
            _ => return Parsed::Usage(String::new()),
        }
    }
    cfg.specs.extend(g.operands().iter().map(|a| a.to_os_string()));
    cfg.screen_width = numastat::screen_width();
    Parsed::Run(cfg)
}

/// Entry point when started as `numastat` (a symlink to numapilot): numastat's argument syntax and
/// output. `NUMAPILOT_ROOT` (not a numastat option) points it at a fixture directory.
pub fn numastat_main(args: &[OsString]) -> anyhow::Result<ExitCode> {
    // As given, bytes: a pattern that is not UTF-8 is matched byte for byte (review helper-61).
    match parse_numastat_args(args, std::env::var_os("POSIXLY_CORRECT").is_some()) {
        Parsed::Version => {
            super::run::print_out(&format!("numastat version: numapilot {}\n", env!("CARGO_PKG_VERSION")))
        }
        Parsed::Usage(msg) => {
            eprint!("{msg}{USAGE}");
            Ok(ExitCode::FAILURE)
        }
        Parsed::Run(cfg) => {
            let root = std::env::var_os("NUMAPILOT_ROOT").map_or_else(|| PathBuf::from("/"), PathBuf::from);
            execute(&root, &cfg, false, Strict::AsNumastat, None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_cfg(args: &[&str]) -> Config {
        match parse_numastat_args(&args.iter().map(OsString::from).collect::<Vec<_>>(), false) {
            Parsed::Run(c) => c,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn no_arguments_is_compatibility_mode() {
        let c = run_cfg(&[]);
        assert!(c.compat);
        assert!(!run_cfg(&["-n"]).compat);
    }

    #[test]
    fn grouped_options_and_p_forms() {
        let c = run_cfg(&["-cmz", "-p1234", "-p", "bash", "99", "-n", "sleep"]);
        assert!(c.compress && c.meminfo && c.skip_zero && c.numastat);
        // -p values in order, then the bare arguments (getopt moves them to the end).
        assert_eq!(c.specs, vec!["1234", "bash", "99", "sleep"]);
        let c = run_cfg(&["-mp", "42"]);
        assert!(c.meminfo);
        assert_eq!(c.specs, vec!["42"]);
    }

    #[test]
    fn the_subcommand_gets_attached_sort_values_as_numastat_reads_them() {
        let f = |a: &[&str]| -> Vec<String> {
            attach_sort_values(a.iter().map(OsString::from).collect())
                .into_iter()
                .map(|s| s.into_string().unwrap())
                .collect()
        };
        assert_eq!(f(&["-s1", "-s", "2", "-s=3"]), ["-s=1", "-s", "2", "-s=3"]);
        assert_eq!(f(&["-cs1", "-zv", "-ms0x1"]), ["-cs=1", "-zv", "-ms=0x1"]);
        // -p's value, attached or next, is a pattern, whatever letters it has; so is all after --.
        assert_eq!(f(&["-psshd", "-p", "-s1", "-cps1"]), ["-psshd", "-p", "-s1", "-cps1"]);
        assert_eq!(f(&["--", "-s1"]), ["--", "-s1"]);
        assert_eq!(f(&["--json", "-x1", "bash"]), ["--json", "-x1", "bash"]);
        // The arguments as typed are where they were, for an error to name.
        let a: Vec<OsString> = ["-s1", "-p", "-s2", "-ms=3", "-s", "--", "-s4"].iter().map(OsString::from).collect();
        assert_eq!(attached_sorts(&a), [(0, 1), (3, 2)]);
    }

    #[test]
    fn posixly_correct_stops_at_the_first_operand() {
        let args: Vec<OsString> = ["-m", "sleep", "-c"].iter().map(OsString::from).collect();
        let Parsed::Run(c) = parse_numastat_args(&args, true) else { panic!() };
        assert!(c.meminfo && !c.compress);
        assert_eq!(c.specs, vec!["sleep", "-c"]);
        let Parsed::Run(c) = parse_numastat_args(&args, false) else { panic!() };
        assert!(c.meminfo && c.compress);
        assert_eq!(c.specs, vec!["sleep"]);
    }

    #[test]
    fn sort_takes_only_an_attached_value() {
        assert_eq!(run_cfg(&["-s"]).sort, Some(None));
        assert_eq!(run_cfg(&["-s1"]).sort, Some(Some("1".into())));
        let c = run_cfg(&["-s", "1"]);
        assert_eq!(c.sort, Some(None));
        assert_eq!(c.specs, vec!["1"]);
    }

    #[test]
    fn bad_options_print_usage() {
        let p = |a: &[&str]| parse_numastat_args(&a.iter().map(OsString::from).collect::<Vec<_>>(), false);
        assert_eq!(p(&["-x"]), Parsed::Usage("numastat: invalid option -- 'x'\n".into()));
        assert_eq!(p(&["-p"]), Parsed::Usage("numastat: option requires an argument -- 'p'\n".into()));
        assert_eq!(p(&["--bogus"]), Parsed::Usage("numastat: unrecognized option '--bogus'\n".into()));
        assert_eq!(p(&["--help"]), Parsed::Usage(String::new()));
        assert_eq!(p(&["-V"]), Parsed::Version);
        assert_eq!(run_cfg(&["--", "-n"]).specs, vec!["-n"]);
    }
}
