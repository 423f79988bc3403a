//! `numapilot bench`: autonuma-benchmark's tests as real processes, with a per-second recorder of
//! where their memory and threads are, a table, JSON (`numapilot-bench/1`, documented in the
//! numapilot-bench crate) and convergence charts. The work is in the `numapilot-bench` crate; this
//! module parses flags, starts workers (this same binary, `bench --worker CONFIG`: [`worker`], read
//! before clap, so the internal option is in no help, page or completion), prints and writes.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::ValueHint;
use numapilot_bench::{plan, BenchResult, Launcher, Options, RunOptions, WorkerConfig};
use numapilot_sim::result::{ProcessSeries, SeriesPoint};
use numapilot_topology::Topology;

use crate::cmd::sim::chart;

/// `numapilot bench`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Tests: numa01, numa01_THREAD_ALLOC, numa02, numa02_SMT, each also with _HARD_BIND or \
_INVERSE_BIND.\nExample: numapilot bench numa01 --mb 64 --seconds 30 --force-node 0 --out /tmp/numa01")]
pub struct Args {
    /// The test (numa01, numa01_THREAD_ALLOC, numa02, numa02_SMT, optionally with _HARD_BIND or _INVERSE_BIND).
    #[arg(value_name = "TEST", value_parser = super::Known(test_values), hide_possible_values = true)]
    test: String,
    /// Buffer per process, MiB [default: 128].
    #[arg(long, value_name = "MiB", value_hint = ValueHint::Other)]
    mb: Option<u64>,
    /// Worker threads per process [default: the test's, from the online CPUs].
    #[arg(long, value_name = "N", value_hint = ValueHint::Other)]
    threads: Option<u32>,
    /// Passes per thread over its range [default: the original's: 50, 1000 or 800].
    #[arg(long, value_name = "N", conflicts_with = "seconds", value_hint = ValueHint::Other)]
    loops: Option<u64>,
    /// Run for this many seconds instead of a number of passes.
    #[arg(long, value_name = "SECONDS", value_hint = ValueHint::Other)]
    seconds: Option<f64>,
    /// First-touch every buffer on this node, then drop the binding (memory forced onto one node).
    #[arg(long, value_name = "NODE", value_hint = ValueHint::Other)]
    force_node: Option<u32>,
    /// Seconds between two samples of the recorder.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0, value_hint = ValueHint::Other)]
    interval: f64,
    /// Kill the workers after this many seconds (the run is reported as timed out).
    #[arg(long, value_name = "SECONDS", value_hint = ValueHint::Other)]
    timeout: Option<f64>,
    /// Print the result as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Write result.json and the convergence charts (SVG and PNG, one per process) into DIR.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// The test names (completions: [`super::Known`]).
fn test_values() -> Vec<(&'static str, String)> {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    NAMES
        .get_or_init(numapilot_bench::spec::TestName::valid_names)
        .iter()
        .map(|n| (n.as_str(), String::new()))
        .collect()
}

/// The arguments that start a worker process, before its configuration (JSON): `numapilot bench
/// --worker CONFIG`. main.rs reads them before clap, so no help, page or completion offers them.
pub const WORKER_ARGS: [&str; 2] = ["bench", "--worker"];

/// Shortest `--interval`, 10 ms. Source: a choice; a sample reads each worker's numa_maps (about a
/// millisecond for a few hundred MB of mappings). Prevents: a recorder that does nothing but read
/// and keep points.
const MIN_INTERVAL: Duration = Duration::from_millis(10);

fn positive_seconds(flag: &str, v: f64) -> anyhow::Result<Duration> {
    if !(v.is_finite() && v > 0.0) {
        bail!("{flag}: must be a positive number of seconds, got {v:?}");
    }
    Duration::try_from_secs_f64(v).map_err(|e| anyhow::anyhow!("{flag}: {e}"))
}

/// A worker process: `rest` is what follows [`WORKER_ARGS`], the configuration alone.
pub fn worker(rest: &[std::ffi::OsString]) -> anyhow::Result<ExitCode> {
    let [cfg] = rest else {
        bail!("bench --worker: takes one argument, the worker's configuration (JSON); got {}", rest.len());
    };
    let cfg = cfg.to_str().context("bench --worker: the configuration is not UTF-8")?;
    let cfg = WorkerConfig::from_json(cfg)?;
    numapilot_bench::worker::become_worker_process(&cfg.name);
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    numapilot_bench::run_worker(&cfg, &mut stdin.lock(), &mut stdout.lock())?;
    Ok(ExitCode::SUCCESS)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let test = args.test.as_str();
    let interval = positive_seconds("--interval", args.interval)?;
    // The recorder reads every worker's numa_maps at each sample and keeps every point: a period of
    // a nanosecond kept 800 points a second for nothing (review helper-53).
    if interval < MIN_INTERVAL {
        bail!("--interval {:?}: at least {} s between two samples", args.interval, MIN_INTERVAL.as_secs_f64());
    }
    let timeout = args.timeout.map(|t| positive_seconds("--timeout", t)).transpose()?;
    let topo = Topology::from_sysfs(Path::new("/")).context("reading the NUMA topology")?;
    let opts = Options {
        mb: args.mb,
        threads: args.threads,
        loops: args.loops,
        seconds: args.seconds,
        force_node: args.force_node,
    };
    let plan = plan(test, &opts, &topo, numapilot_bench::worker::page_bytes())?;
    // Staged before the run, so a bad --out fails in a second, not after the benchmark; all or
    // nothing, so a run that fails leaves no directory it made (it left an empty one).
    let staged = args.out.as_deref().map(|d| super::Staged::new(d, &[])).transpose()?;
    if let Some(dir) = &args.out {
        // The one file of a fixed name: a directory there failed the commit after the run.
        let json = dir.join("result.json");
        if json.is_dir() {
            bail!("--out: {} is a directory; nothing was run", json.display());
        }
    }
    let launcher = Launcher {
        program: std::env::current_exe().context("finding the numapilot binary to start workers")?,
        args: WORKER_ARGS.iter().map(|&a| a.into()).collect(),
    };
    let result = numapilot_bench::run(&plan, &topo, &launcher, &RunOptions { interval, timeout, root: "/".into() })?;
    // The files first: a stdout that fails (a closed pipe, a full disk) lost them, with exit 0 for
    // a closed pipe (review helper-58).
    let wrote = match (&args.out, staged) {
        (Some(dir), Some(staged)) => {
            write_out(&result, &staged.path(""))?;
            let files = staged.commit()?;
            Some(format!("wrote {} to {}", super::plural(files.len(), "file"), dir.display()))
        }
        _ => None,
    };
    let report = if args.json {
        let mut text = serde_json::to_string_pretty(&result)?;
        text.push('\n');
        text
    } else {
        table(&result) + &wrote.as_ref().map(|m| format!("{m}\n")).unwrap_or_default()
    };
    if let (true, Some(msg)) = (args.json, &wrote) {
        eprintln!("numapilot: {msg}");
    }
    super::run::print_out(&report)?;
    Ok(if result.timed_out { ExitCode::from(2) } else { ExitCode::SUCCESS })
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".to_string(), |x| format!("{x:.digits$}"))
}

fn count(v: Option<u64>) -> String {
    v.map_or("n/a".to_string(), |x| x.to_string())
}

/// The text report.
pub fn table(r: &BenchResult) -> String {
    let c = &r.config;
    let work = match c.work {
        numapilot_bench::Work::Loops(n) => format!("{} per thread", super::plural(n, "pass")),
        numapilot_bench::Work::Seconds(s) => format!("{s} s"),
    };
    let list = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    let mut s = format!(
        "{}: {} x {}, {} MiB each, {work}{}\nhost: kernel {}, nodes {}, {}, numa_balancing {}\n\n",
        r.name,
        super::plural(c.processes, "process"),
        super::plural(c.threads_per_process, "thread"),
        c.mb_per_process,
        c.force_node.map_or(String::new(), |n| format!(", first touch on node {n}")),
        r.host.kernel,
        list(&r.nodes),
        super::plural(r.host.cpus, "CPU"),
        r.host.numa_balancing.map_or("n/a".to_string(), |v| v.to_string()),
    );
    s.push_str(&format!(
        "{:<5} {:>8} {:>7} {:>10} {:>8} {:>9} {:>11} {:>7} {:>11} {:>10} {:>12}  {}\n",
        "proc",
        "pid",
        "threads",
        "runtime_s",
        "passes",
        "MiB/s",
        "converge_s",
        "local%",
        "thr_conv_s",
        "thr_local%",
        "thread_nodes",
        "buffer MiB per node (end)"
    ));
    for p in &r.processes {
        let end = p.series.last().map_or("-".to_string(), |pt| {
            r.nodes.iter().zip(&pt.buffer_mib).map(|(n, m)| format!("{n}:{m:.1}")).collect::<Vec<_>>().join(" ")
        });
        s.push_str(&format!(
            "{:<5} {:>8} {:>7} {:>10.2} {:>8.1} {:>9.1} {:>11} {:>7} {:>11} {:>10} {:>12}  {}\n",
            p.index,
            p.pid,
            p.threads,
            p.runtime_s,
            p.passes,
            p.mib_per_s,
            opt(p.converge_s, 1),
            opt(p.final_local_pct, 1),
            opt(p.thread_converge_s, 1),
            opt(p.final_thread_local_pct, 1),
            if p.final_thread_nodes.is_empty() { "-".to_string() } else { list(&p.final_thread_nodes) },
            end
        ));
    }
    s.push_str(&format!(
        "\ntotal runtime {:.2} s{}; converged (90% local, all processes): {}\n",
        r.runtime_s,
        if r.timed_out { " (TIMED OUT, workers killed)" } else { "" },
        r.converge_s.map_or("never".to_string(), |t| format!("{t:.1} s")),
    ));
    s.push_str(
        "(local%: buffer on the nodes the worker threads run on; thr_local%: each thread's own range on its own \
         node; _conv_s: first sample from which it stays >= 90%)\n",
    );
    s.push_str(&format!(
        "pages migrated: numa_pages_migrated {}, pgmigrate_success {}, pgmigrate_fail {}\n",
        count(r.migrated.numa_pages_migrated),
        count(r.migrated.pgmigrate_success),
        count(r.migrated.pgmigrate_fail)
    ));
    s
}

/// The convergence series of one process in the simulator's chart type: the test buffer per node.
fn series_of(p: &numapilot_bench::ProcessResult, name: &str) -> ProcessSeries {
    ProcessSeries {
        pid: p.pid,
        name: name.to_string(),
        finish_s: Some(p.runtime_s),
        throughput: None,
        unit: None,
        converge_s: p.converge_s,
        series: p
            .series
            .iter()
            .map(|pt| SeriesPoint {
                t_s: pt.t_s,
                mem_mib: pt.buffer_mib.clone(),
                local_pct: pt.local_pct.unwrap_or(0.0),
            })
            .collect(),
        cpu_nodes: p.final_thread_nodes.clone(),
    }
}

/// The title of a process's chart: the test, the process, what is drawn, and the machine and
/// placement it ran under (kernel, nodes, `numa_balancing`, `--force-node`): without the last two
/// the charts of one test under balancing off and on looked alike.
fn chart_title(r: &BenchResult, p: &numapilot_bench::ProcessResult) -> String {
    let nodes = r.nodes.len();
    let mut title = format!(
        "{} / process {} (pid {}) / test buffer per node / kernel {} on {}",
        r.name,
        p.index,
        p.pid,
        r.host.kernel,
        super::plural(nodes, "node")
    );
    match r.host.numa_balancing {
        Some(b) => title.push_str(&format!(" / numa_balancing {b}")),
        None => title.push_str(" / no numa_balancing"),
    }
    if let Some(n) = r.config.force_node {
        title.push_str(&format!(" / first touch on node {n}"));
    }
    title
}

/// Writes `result.json` and one chart per process (SVG and PNG) into `dir`; returns the files.
pub fn write_out(r: &BenchResult, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let json_path = dir.join("result.json");
    let mut text = serde_json::to_string_pretty(r)?;
    text.push('\n');
    std::fs::write(&json_path, text).with_context(|| format!("writing {}", json_path.display()))?;
    let mut files = vec![json_path];
    let text_ok = chart::text_available();
    for p in &r.processes {
        let title = chart_title(r, p);
        let stem = format!("{}-p{}-pid{}", r.name, p.index, p.pid);
        files.extend(chart::write_memory_chart(dir, &stem, &title, &r.nodes, &series_of(p, &r.name), text_ok)?);
    }
    Ok(files)
}
