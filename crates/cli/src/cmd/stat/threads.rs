//! `numapilot stat --threads`: the per-thread and per-node observation of issue 2 §3, from two samples
//! taken `--interval` ms apart (one sample of a `--root` fixture, without rates).
//!
//! ```text
//!   sample a ──(interval, default 1000 ms)──> sample b        (both: Reader::sample_of(selected pids))
//!        \                                      /
//!         thread_cpu_rates(a, b): CPU %, run delay ms/s     node busy % = Δbusy / Δtotal ticks (/proc/stat)
//!
//!   PID 812 (rig-toucher)  threads: 3  RSS 8.4 MiB
//!     memory (MiB)        node 0    node 1     total        numa_maps, by kind, kernelpagesize_kB honoured
//!     heap                  0.00      0.13      0.13
//!     ...
//!     policies: bind:1 (3 VMAs, 4.1 MiB), default (19 VMAs, 0.4 MiB)
//!     TID  COMM  CPU%  CPU-S  CPU NODE  CPUS  NODES  DELAY-MS/S                    task/TID/{stat,status,schedstat}
//!     NUMA balancing: TID PREF GROUP MIGRATED FAULTS                               task/TID/sched, when on
//!   nodes: CPUs, busy %, MemFree, numastat counters, vmstat numa_* counters; PSI (system-wide)
//! ```
//!
//! Units: CPU % of one CPU (200 = two CPUs busy), CPU time in s (schedstat ns when present, else stat
//! ticks), run delay in ms per s of the interval, memory in MiB, node counters in pages as the kernel
//! counts them. `--json` prints both raw samples and the derived figures.
//!
//! Without PIDs or patterns every user process is shown (kernel threads have no memory and would bury
//! the rest); with them, exactly the matching processes, kernel threads included. A process that
//! exits between the two samples (or whose pid another process took) is shown from the first one,
//! marked, without rates. A pid typed that is gone is an error; a process a pattern matched that is
//! gone by the first sample is left out. A thread id typed as a pid is its process; every message
//! about a pid names it as typed (`thread 1234 of process 1200`, `0099`, `""`), not only the
//! process it led to.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Context as _;
use numapilot_model::tasks::printable;
use numapilot_observe::{
    thread_cpu_rates, Counters, NodeFaults, NodeUsage, PolicyUsage, ProcessSample, PsiSample, ReadOptions, Reader,
    Sample, ThreadRate, ThreadSample,
};
use serde::Serialize;

/// What `--threads` shows.
#[derive(Debug, Clone)]
pub struct Config {
    /// PIDs or patterns, as given (bytes); empty for every user process.
    pub specs: Vec<std::ffi::OsString>,
    /// Time between the two samples, ms.
    pub interval_ms: u64,
    /// Print JSON instead of text.
    pub json: bool,
}

/// The derived figures for one thread.
#[derive(Debug, Serialize)]
struct ThreadView {
    tid: u32,
    comm: String,
    /// CPU used over the interval, percent of one CPU; `None` with one sample.
    cpu_percent: Option<f64>,
    /// Cumulative CPU time, s.
    cpu_time_s: f64,
    last_cpu: u32,
    /// Node of `last_cpu`; `None` if no node lists it.
    last_node: Option<u32>,
    cpus_allowed: String,
    mems_allowed: String,
    /// Run delay over the interval, ms per s.
    run_delay_ms_per_s: Option<f64>,
    /// NUMA balancing (task/TID/sched), when read.
    numa: Option<NumaView>,
}

#[derive(Debug, Serialize)]
struct NumaView {
    preferred_nid: Option<u32>,
    group_id: Option<u32>,
    pages_migrated: u64,
    total_faults: u64,
    faults: Vec<NodeFaults>,
}

/// A pid as typed (`-p 01234`, or an operand) and the id it names: the process's own, or one of
/// its threads'.
#[derive(Debug, Clone, PartialEq)]
struct Given {
    /// As typed; the empty one as `""`.
    spec: String,
    /// The id it names.
    id: u32,
}

/// A thread id typed as a pid, in the view of its process.
#[derive(Debug, Serialize)]
struct GivenThread {
    /// As typed.
    spec: String,
    tid: u32,
    /// Gone by the second sample (alone, or with its process); false with one sample.
    exited: bool,
}

#[derive(Debug, Serialize)]
struct ProcessView {
    pid: u32,
    comm: String,
    /// It exited (or its pid went to another process) before the second sample: shown from the
    /// first, without rates.
    exited: bool,
    /// The thread ids typed that named this process (empty when its pid was typed, or a pattern
    /// matched it).
    given_threads: Vec<GivenThread>,
    rss_kb: Option<u64>,
    numa_maps_error: Option<String>,
    memory: Vec<NodeUsage>,
    policies: Vec<PolicyUsage>,
    threads: Vec<ThreadView>,
}

#[derive(Debug, Serialize)]
struct NodeView {
    node: u32,
    cpus: String,
    /// CPU busy over the interval, percent of the node's CPUs; `None` with one sample.
    busy_percent: Option<f64>,
    mem_free_kb: Option<u64>,
    numastat: Counters,
    vmstat: Counters,
}

#[derive(Debug, Serialize)]
struct Derived {
    /// Time between the two samples, ms; `None` with one sample.
    interval_ms: Option<f64>,
    processes: Vec<ProcessView>,
    nodes: Vec<NodeView>,
    psi: PsiSample,
    numa_balancing: Option<i64>,
}

/// Runs the view; returns stdout text and stderr messages.
pub fn run(reader: &Reader, cfg: &Config) -> anyhow::Result<(String, String)> {
    let mut notes = String::new();
    // A `--root` without a node directory is no machine (it printed an empty table, exit 0, where
    // the table modes refuse it; review helper-61).
    if !reader.is_live() && reader.node_ids().context("reading the node directories")?.is_empty() {
        anyhow::bail!("no node directories in {}", reader.root().join("sys/devices/system/node").display());
    }
    let targets = if cfg.specs.is_empty() {
        None
    } else {
        let pids = super::numastat::resolve_specs(reader, &cfg.specs, &mut notes)?;
        // numastat's "Found no processes containing pattern" is a note there; here nothing to show is an error.
        if !notes.is_empty() {
            anyhow::bail!("{}", notes.trim_end());
        }
        Some(processes_of(reader, &cfg.specs, pids, &mut notes))
    };
    let first = reader
        .sample_of(targets.as_ref().map(|t| t.iter().map(|(pid, _)| *pid).collect::<Vec<_>>()).as_deref())
        .context("reading the first sample")?;
    if let Some(want) = &targets {
        // A pid typed as a number that is gone is an error; a process a pattern matched that is
        // gone by the first sample is skipped (a pattern names what matches when it runs: one
        // short-lived match failed the whole view; review helper-61), unless none is left. The
        // error names each pid as typed: a thread id's process gone was said as the process's
        // pid alone, which the user never typed.
        let missing: Vec<String> = want
            .iter()
            .filter(|(p, _)| first.process(*p).is_none())
            .flat_map(|(p, given)| given.iter().map(move |g| as_typed(g, *p)))
            .collect();
        if !missing.is_empty() {
            anyhow::bail!("no such process: {}", missing.join(", "));
        }
        if first.processes.is_empty() {
            anyhow::bail!("no such process: every process matched exited before the first sample");
        }
    }
    let (prev, cur) = if reader.is_live() {
        std::thread::sleep(Duration::from_millis(cfg.interval_ms));
        let present: Vec<u32> = first.processes.iter().map(|p| p.pid).collect();
        let second = reader.sample_of(Some(&present)).context("reading the second sample")?;
        (Some(first), second)
    } else {
        (None, first)
    };
    let given: HashMap<u32, Vec<Given>> = targets.unwrap_or_default().into_iter().collect();
    let derived = derive(prev.as_ref(), &cur, &given);
    let mut out = String::new();
    if cfg.json {
        let samples: Vec<&Sample> = prev.iter().chain(std::iter::once(&cur)).collect();
        let v = serde_json::json!({ "samples": samples, "derived": derived });
        out = serde_json::to_string_pretty(&v).context("encoding JSON")?;
        out.push('\n');
    } else {
        render(&derived, &mut out);
    }
    if prev.is_none() {
        notes.push_str(&format!(
            "numapilot stat --threads: one sample of {} (a fixture): no rates (CPU %, run delay, node busy % need \
             two samples of the live system)\n",
            reader.root().display()
        ));
    }
    Ok((out, notes))
}

/// A pid spec as the user typed it, with the process it led to when that is another id (a thread
/// id's): `thread 1234 of process 1200`, `0099`, `""`.
fn as_typed(g: &Given, pid: u32) -> String {
    if g.id == pid {
        g.spec.clone()
    } else {
        format!("thread {} of process {pid}", g.spec)
    }
}

/// The processes `resolve_specs` named, each with the pids typed as numbers that named it (none:
/// only a pattern matched it). A thread id typed as a pid (its /proc entry is reachable, though
/// not listed) is its process's: shown once, said in a note (it showed the process twice, once
/// under the thread's id; review helper-61).
fn processes_of(
    reader: &Reader,
    specs: &[std::ffi::OsString],
    pids: Vec<(u32, Option<String>)>,
    notes: &mut String,
) -> Vec<(u32, Vec<Given>)> {
    let mut out: Vec<(u32, Vec<Given>)> = Vec::new();
    for (pid, _) in pids {
        // Numbers as `resolve_specs` reads them: digits only, the empty one PID 0 (numastat's atoi).
        let given: Vec<Given> = specs
            .iter()
            .filter_map(|s| s.to_str())
            .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
            .filter(|s| if s.is_empty() { pid == 0 } else { s.parse::<u32>() == Ok(pid) })
            .map(|s| Given { spec: if s.is_empty() { "\"\"".to_string() } else { s.to_string() }, id: pid })
            .collect();
        let tgid = reader.read_status(pid).ok().flatten().map_or(pid, |s| s.tgid);
        let tgid = if tgid == 0 { pid } else { tgid };
        if tgid != pid {
            for g in &given {
                let _ = writeln!(
                    notes,
                    "numapilot stat --threads: {} is a thread of process {tgid}: shown as that process",
                    g.spec
                );
            }
        }
        match out.iter_mut().find(|(p, _)| *p == tgid) {
            Some(entry) => entry.1.extend(given),
            None => out.push((tgid, given)),
        }
    }
    out.sort_unstable_by_key(|(p, _)| *p);
    out
}

/// The processes to show: each of the first sample's, from the second sample while it is the same
/// process, else from the first, marked exited (it vanished from the view, and a pid another
/// process took meanwhile showed that one in its place; review helper-61).
fn shown<'a>(prev: Option<&'a Sample>, cur: &'a Sample) -> Vec<(&'a ProcessSample, bool)> {
    match prev {
        None => cur.processes.iter().map(|p| (p, false)).collect(),
        Some(first) => first
            .processes
            .iter()
            .map(|p| match cur.process(p.pid).filter(|q| q.starttime == p.starttime) {
                Some(q) => (q, false),
                None => (p, true),
            })
            .collect(),
    }
}

fn derive(prev: Option<&Sample>, cur: &Sample, given: &HashMap<u32, Vec<Given>>) -> Derived {
    let rates: HashMap<(u32, u32), ThreadRate> =
        prev.map(|p| thread_cpu_rates(p, cur).into_iter().map(|r| ((r.pid, r.tid), r)).collect()).unwrap_or_default();
    let node_of = |cpu: u32| cur.nodes.iter().find(|n| n.cpus.contains(cpu)).map(|n| n.node);
    let hz = cur.clock_ticks_per_sec.max(1) as f64;
    let thread_view = |p: &ProcessSample, t: &ThreadSample| {
        let rate = rates.get(&(p.pid, t.tid));
        let cpu_time_s = match t.schedstat {
            Some(s) => s.run_ns as f64 / 1e9,
            None => t.stat.cpu_ticks() as f64 / hz,
        };
        ThreadView {
            tid: t.tid,
            comm: t.stat.comm.clone(),
            cpu_percent: rate.map(|r| r.cpus * 100.0),
            cpu_time_s,
            last_cpu: t.last_cpu(),
            last_node: node_of(t.last_cpu()),
            cpus_allowed: t.cpus_allowed().to_list(),
            mems_allowed: t.mems_allowed().to_list(),
            run_delay_ms_per_s: rate.and_then(ThreadRate::run_delay_ms_per_s),
            numa: t.sched.as_ref().and_then(|s| s.numa.as_ref()).map(|n| NumaView {
                preferred_nid: n.preferred_nid,
                group_id: n.group_id,
                pages_migrated: n.pages_migrated,
                total_faults: n.total_faults,
                faults: n.faults.clone(),
            }),
        }
    };
    let processes = shown(prev, cur)
        .into_iter()
        .map(|(p, exited)| ProcessView {
            pid: p.pid,
            comm: p.comm.clone(),
            exited,
            given_threads: given
                .get(&p.pid)
                .into_iter()
                .flatten()
                .filter(|g| g.id != p.pid)
                .map(|g| GivenThread {
                    spec: g.spec.clone(),
                    tid: g.id,
                    exited: prev.is_some() && (exited || !p.threads.iter().any(|t| t.tid == g.id)),
                })
                .collect(),
            rss_kb: p.rss_kb,
            numa_maps_error: p.numa_maps_error.clone(),
            memory: p.node_usage.clone(),
            policies: p.numa_maps.as_ref().map(|m| m.usage_by_policy()).unwrap_or_default(),
            threads: p.threads.iter().map(|t| thread_view(p, t)).collect(),
        })
        .collect();
    let nodes = cur
        .nodes
        .iter()
        .map(|n| {
            let busy_percent = prev.and_then(|p| {
                let (a, b) = (p.node_cpu_times(n.node)?, cur.node_cpu_times(n.node)?);
                let total = b.total().checked_sub(a.total())?;
                let busy = b.busy().checked_sub(a.busy())?;
                (total > 0).then(|| busy as f64 * 100.0 / total as f64)
            });
            NodeView {
                node: n.node,
                cpus: n.cpus.to_list(),
                busy_percent,
                mem_free_kb: n.mem_free_kb(),
                numastat: n.numastat.clone(),
                vmstat: n.vmstat.clone(),
            }
        })
        .collect();
    Derived {
        interval_ms: prev.map(|p| cur.monotonic_ns.saturating_sub(p.monotonic_ns) as f64 / 1e6),
        processes,
        nodes,
        psi: cur.psi,
        numa_balancing: cur.numa_balancing,
    }
}

/// One kind's kB out of a node's usage.
type KbOf = fn(&NodeUsage) -> u64;

fn mib(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

fn opt(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:.decimals$}"))
}

fn render(d: &Derived, out: &mut String) {
    let node_ids: Vec<u32> = d.nodes.iter().map(|n| n.node).collect();
    match d.interval_ms {
        Some(ms) => {
            let _ = writeln!(out, "interval {:.0} ms", ms);
        }
        None => out.push_str("one sample (no rates)\n"),
    }
    for p in &d.processes {
        // A thread id typed is named as typed: the process it led to alone was not what was asked.
        let threads_given = |exited: bool| -> Option<String> {
            let specs: Vec<&str> =
                p.given_threads.iter().filter(|g| g.exited == exited).map(|g| g.spec.as_str()).collect();
            let s = if specs.len() == 1 { "" } else { "s" };
            (!specs.is_empty()).then(|| format!("thread{s} {} of process {}", specs.join(", "), p.pid))
        };
        let marker = match (p.exited, threads_given(true)) {
            (false, _) => String::new(),
            (true, None) => "  (exited before the second sample: its first, no rates)".to_string(),
            (true, Some(who)) => format!("  ({who}, as given, exited before the second sample: its first, no rates)"),
        };
        let _ = writeln!(
            out,
            "\nPID {} ({})  threads: {}  RSS {}{marker}",
            p.pid,
            printable(&p.comm),
            p.threads.len(),
            p.rss_kb.map_or_else(|| "-".to_string(), |kb| format!("{:.1} MiB", mib(kb))),
        );
        if let (false, Some(who)) = (p.exited, threads_given(true)) {
            let _ = writeln!(out, "  {who}, as given, exited before the second sample: not among the threads below");
        }
        if let Some(e) = &p.numa_maps_error {
            let _ = writeln!(out, "  numa_maps: {e}");
        }
        if !p.memory.is_empty() {
            let _ = write!(out, "  {:<14}", "memory (MiB)");
            for n in &node_ids {
                let _ = write!(out, "{:>10}", format!("node {n}"));
            }
            let _ = writeln!(out, "{:>10}", "total");
            let kinds: [(&str, KbOf); 6] = [
                ("heap", |u| u.heap_kb),
                ("stack", |u| u.stack_kb),
                ("huge", |u| u.huge_kb),
                ("anon-private", |u| u.anon_kb),
                ("shared-file", |u| u.file_kb),
                ("total", NodeUsage::total_kb),
            ];
            for (label, get) in kinds {
                let _ = write!(out, "  {label:<14}");
                let mut sum = 0;
                for n in &node_ids {
                    let kb = p.memory.iter().find(|u| u.node == *n).map_or(0, get);
                    sum += kb;
                    let _ = write!(out, "{:>10.2}", mib(kb));
                }
                let _ = writeln!(out, "{:>10.2}", mib(sum));
            }
        }
        if !p.policies.is_empty() {
            let list: Vec<String> = p
                .policies
                .iter()
                .map(|u| format!("{} ({}, {:.1} MiB)", u.policy, crate::cmd::plural(u.vmas, "VMA"), mib(u.resident_kb)))
                .collect();
            let _ = writeln!(out, "  policies: {}", list.join(", "));
        }
        let _ = writeln!(
            out,
            "  {:>8} {:<16} {:>7} {:>10} {:>4} {:>5} {:>12} {:>8} {:>11}",
            "TID", "COMM", "CPU%", "CPU-TIME-S", "CPU", "NODE", "ALLOWED-CPUS", "NODES", "DELAY-MS/S"
        );
        for t in &p.threads {
            let _ = writeln!(
                out,
                "  {:>8} {:<16} {:>7} {:>10.2} {:>4} {:>5} {:>12} {:>8} {:>11}",
                t.tid,
                printable(&t.comm),
                opt(t.cpu_percent, 1),
                t.cpu_time_s,
                t.last_cpu,
                t.last_node.map_or_else(|| "-".to_string(), |n| n.to_string()),
                t.cpus_allowed,
                t.mems_allowed,
                opt(t.run_delay_ms_per_s, 1)
            );
        }
        if p.threads.iter().any(|t| t.numa.is_some()) {
            let _ = writeln!(
                out,
                "  NUMA balancing: {:>8} {:>5} {:>6} {:>9} {:>7}  faults per node (task private+shared)",
                "TID", "PREF", "GROUP", "MIGRATED", "FAULTS"
            );
            for t in &p.threads {
                let Some(n) = &t.numa else { continue };
                let faults: Vec<String> =
                    n.faults.iter().map(|f| format!("{}:{}", f.node, f.task_private + f.task_shared)).collect();
                let _ = writeln!(
                    out,
                    "                  {:>8} {:>5} {:>6} {:>9} {:>7}  {}",
                    t.tid,
                    n.preferred_nid.map_or_else(|| "-".to_string(), |x| x.to_string()),
                    n.group_id.map_or_else(|| "-".to_string(), |x| x.to_string()),
                    n.pages_migrated,
                    n.total_faults,
                    faults.join(" ")
                );
            }
        }
    }
    render_nodes(d, out);
}

fn render_nodes(d: &Derived, out: &mut String) {
    let _ = write!(out, "\n{:<32}", "per node");
    for n in &d.nodes {
        let _ = write!(out, "{:>14}", format!("node {}", n.node));
    }
    out.push('\n');
    let row = |out: &mut String, label: &str, cell: &dyn Fn(&NodeView) -> String| {
        let _ = write!(out, "{label:<32}");
        for n in &d.nodes {
            let _ = write!(out, "{:>14}", cell(n));
        }
        out.push('\n');
    };
    row(out, "cpus", &|n| if n.cpus.is_empty() { "-".into() } else { n.cpus.clone() });
    row(out, "cpu busy %", &|n| opt(n.busy_percent, 1));
    row(out, "MemFree MiB", &|n| opt(n.mem_free_kb.map(mib), 1));
    // Counter names in the order of the first node's file (every node prints the same names).
    let names = |get: fn(&NodeView) -> &Counters| -> Vec<String> {
        d.nodes.first().map(|n| get(n).entries().iter().map(|(k, _)| k.clone()).collect()).unwrap_or_default()
    };
    for k in names(|n| &n.numastat) {
        row(out, &format!("numastat {k}"), &|n| n.numastat.get(&k).map_or_else(|| "-".into(), |v| v.to_string()));
    }
    for k in names(|n| &n.vmstat) {
        row(out, &format!("vmstat {k}"), &|n| n.vmstat.get(&k).map_or_else(|| "-".into(), |v| v.to_string()));
    }
    let _ =
        writeln!(out, "numa_balancing: {}", d.numa_balancing.map_or_else(|| "absent".to_string(), |v| v.to_string()));
    for (name, psi) in [("cpu", d.psi.cpu), ("memory", d.psi.memory), ("io", d.psi.io)] {
        let Some(p) = psi else { continue };
        let mut line = format!(
            "psi {name}: some avg10={:.2} avg60={:.2} avg300={:.2} total={}us",
            p.some.avg10, p.some.avg60, p.some.avg300, p.some.total_us
        );
        if let Some(f) = p.full {
            let _ = write!(
                line,
                "; full avg10={:.2} avg60={:.2} avg300={:.2} total={}us",
                f.avg10, f.avg60, f.avg300, f.total_us
            );
        }
        let _ = writeln!(out, "{line}");
    }
}

/// The reader for this view: threads, numa_maps and sched (while balancing is on), kernel threads only
/// when named.
pub fn reader(root: &std::path::Path, named: bool) -> Reader {
    Reader::with_options(root, ReadOptions { kernel_threads: named, ..ReadOptions::default() })
}
