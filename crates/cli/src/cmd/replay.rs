//! `numapilot replay FILE`: drive the model with a `perf mem` recording taken elsewhere.
//!
//! ```text
//!   FILE (perf script -F pid,tid,cpu,time,addr,data_src,weight,phys_addr)
//!     └─ read a line at a time, observe::replay::parse_line ──► records (line-numbered; a bad line
//!        stops everything; at most 16 Mi samples, 64 KiB a line, 4 GiB in all)
//!          sorted by time, cut into --window-ms windows
//!          per window: node of each record (below) ──► AccessSample per (pid, tid, page)
//!                      + every process/thread seen so far (last CPU of each)  ──► Sample ──► Model::update
//!   print: processes and threads (samples, learned access shares, preferred node), affinity groups,
//!          strongest affinity edges; --json for machines
//! ```
//!
//! Node of a record, first that applies:
//! 1. its physical address (non-zero) inside a memory block of a node, when the machine's memory
//!    layout is known: `--root DIR` (DIR/sys/devices/system/memory/block_size_bytes and
//!    nodeN/memoryM), or this machine by default. A `--machine` file or preset has no layout.
//! 2. its CPU's node (from the machine), when the data source does not say remote: local DRAM, a
//!    cache hit (the home node of cached data is not told; taking the CPU's node biases such samples
//!    towards local), or no data source (software events);
//! 3. remote per the data source: the other memory node on a two-node machine; on larger machines
//!    which remote node is unknown, so the record is counted as unplaced.
//!
//! Limits: the recording's threads have no CPU times here (perf samples are not ticks), so the
//! model sees them as idle (CPU rate 0): groups and preferred nodes come from the accesses alone.
//! Threads and processes stay in every later window once seen (a recording does not say when they
//! exited), so the work grows with windows x threads: measured (review helper-39, debug build,
//! records 1 s apart, 1 s windows) 2,000 records of 2,000 distinct threads 36 s, while the same
//! threads in one window take 0.3 s; a recording of thousands of short-lived threads over a long
//! time is better replayed with longer `--window-ms`. Input is read a line at a time, up to 4 GiB
//! and 16 Mi samples. Pages are 4 KiB
//! (`--page-size` to change).

/// `writeln!` into a String (which cannot fail).
macro_rules! outln {
    ($o:expr, $($t:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($o, $($t)*);
    }};
}

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// Most bytes of `perf script` text read, 4 GiB. Source: a bound of ours, an hour of PEBS load
/// samples at perf's default rate on a large machine is a few GiB of text. What it prevents: a path
/// to /dev/zero, or a wrong file, read for ever.
const MAX_SCRIPT_BYTES: u64 = 4 << 30;

/// Most samples kept, 16 Mi (about 1.4 GiB of records). Source: a bound of ours, under the
/// memory of a small machine. What it prevents: the records of a 4 GiB text (about 5.5 times its
/// size) taking all memory: 800 MB of lines aborted on a failed allocation (review helper-53).
const MAX_RECORDS: usize = 16 << 20;

/// Longest line read, 64 KiB (a `perf script` sample line is under 300 bytes). What it prevents: a
/// file without newlines (/dev/zero) read into one line until memory runs out.
const MAX_LINE_BYTES: u64 = 64 << 10;

/// The sample lines of `a.file`, read a line at a time (the text is never held whole), each
/// parsed as it comes; the first bad line is the error, naming it.
fn read_records(a: &Args, fields: ScriptFields) -> anyhow::Result<Vec<numapilot_observe::replay::ScriptRecord>> {
    use std::io::{BufRead as _, Read as _};
    let file = std::fs::File::open(&a.file).with_context(|| format!("reading {}", a.file.display()))?;
    let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
    let (mut records, mut buf, mut n, mut total) = (Vec::new(), Vec::new(), 0usize, 0u64);
    loop {
        buf.clear();
        let got = (&mut reader)
            .take(MAX_LINE_BYTES + 1)
            .read_until(b'\n', &mut buf)
            .with_context(|| format!("reading {}", a.file.display()))?;
        if got == 0 {
            return Ok(records);
        }
        n += 1;
        total += got as u64;
        if got as u64 > MAX_LINE_BYTES {
            anyhow::bail!(
                "{}:{n}: a line longer than {} KiB: not perf script text",
                a.file.display(),
                MAX_LINE_BYTES >> 10
            );
        }
        if total > MAX_SCRIPT_BYTES {
            anyhow::bail!("{}: larger than {} GiB; split the recording", a.file.display(), MAX_SCRIPT_BYTES >> 30);
        }
        let line = String::from_utf8_lossy(&buf);
        let parsed = parse_line(line.trim_end_matches(['\n', '\r']), n, fields).map_err(|e| {
            let hint = if matches!(e.field, Some("weight" | "phys_addr" | "data_src" | "cpu" | "end")) {
                format!(" (the text's columns must be those of --fields {})", a.fields)
            } else {
                String::new()
            };
            anyhow::anyhow!("{}: {e}{hint}", a.file.display())
        })?;
        if let Some(r) = parsed {
            if records.len() >= MAX_RECORDS {
                anyhow::bail!(
                    "{}: more than {} samples; split the recording (perf script --time) or record at a lower rate",
                    a.file.display(),
                    MAX_RECORDS
                );
            }
            records.push(r);
        }
    }
}

use anyhow::Context;
use clap::ValueHint;
use numapilot_model::{Model, TaskKey, Tunables};
use numapilot_observe::pmu::NodeMemory;
use numapilot_observe::replay::{aggregate_records, locality, parse_line, window_ranges, Locality, ScriptFields};
use numapilot_observe::{NodeSample, ProcessSample, Sample, TaskStat, ThreadSample};
use numapilot_topology::Topology;
use serde_json::json;

/// `numapilot replay`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("source").args(["root", "machine"])))]
pub struct Args {
    /// `perf script` text (`-F pid,tid,cpu,time,addr,data_src,weight,phys_addr`).
    pub file: PathBuf,
    /// The recording machine's sysfs as a fixture root (topology and memory blocks).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// The recording machine as a machine file or preset name (no memory layout: no phys_addr use).
    #[arg(long, value_name = "FILE|PRESET", value_parser = super::Known(super::preset_values), hide_possible_values = true, value_hint = ValueHint::AnyPath)]
    pub machine: Option<String>,
    /// Length of one model update's window, ms of the recording's clock.
    #[arg(long, value_name = "N", default_value_t = 1000, value_hint = ValueHint::Other)]
    pub window_ms: u64,
    /// The `-F` list the text was printed with (perf refuses `weight` for events recorded without it).
    #[arg(long, value_name = "LIST", default_value = "pid,tid,cpu,time,addr,data_src,weight,phys_addr", value_hint = ValueHint::Other)]
    pub fields: String,
    /// Page size of the recording machine, bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 4096, value_hint = ValueHint::Other)]
    pub page_size: u64,
    /// Strongest edges to print.
    #[arg(long, value_name = "N", default_value_t = 10, value_hint = ValueHint::Other)]
    pub edges: usize,
    /// JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// How the records were placed on nodes.
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
struct Placement {
    phys: u64,
    cpu: u64,
    remote: u64,
    unplaced: u64,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    if a.window_ms == 0 {
        anyhow::bail!("--window-ms must be at least 1");
    }
    // 4 KiB to 1 GiB: the base pages of the kernels perf runs on (4, 16, 64 KiB) and the huge ones.
    if !(a.page_size.is_power_of_two() && (4096..=1 << 30).contains(&a.page_size)) {
        anyhow::bail!("--page-size {}: must be a power of two from 4096 to 1073741824 bytes", a.page_size);
    }
    let fields = ScriptFields::parse(&a.fields).map_err(|e| anyhow::anyhow!("--fields: {e}"))?;
    let (topo, mem, source) = machine(&a)?;
    let mut records = read_records(&a, fields)?;
    if records.is_empty() {
        anyhow::bail!("{}: no sample lines", a.file.display());
    }
    records.sort_by_key(|r| r.time_ns);

    let memory_nodes: Vec<u32> = topo.memory_nodes().iter().collect();
    let mut placement = Placement::default();
    let mut node_of = |r: &numapilot_observe::replay::ScriptRecord| -> Option<u32> {
        if let (Some(p), Some(m)) = (r.phys_addr.filter(|&p| p != 0), mem.as_ref()) {
            if let Some(n) = m.node_of(p) {
                placement.phys += 1;
                return Some(n);
            }
        }
        let cpu_node = r.cpu.and_then(|c| topo.cpu(c)).map(|c| c.node);
        let remote = r.data_src.map(locality) == Some(Locality::Remote);
        match (cpu_node, remote) {
            (Some(n), false) => {
                placement.cpu += 1;
                Some(n)
            }
            (Some(n), true) if memory_nodes.len() == 2 => {
                placement.remote += 1;
                memory_nodes.iter().copied().find(|&m| m != n)
            }
            _ => {
                placement.unplaced += 1;
                None
            }
        }
    };

    let mut model = Model::try_new(topo.clone(), Tunables::default()).context("model tunables")?;
    let mut seen: BTreeMap<u32, BTreeMap<u32, u32>> = BTreeMap::new();
    let mut samples_of: BTreeMap<(u32, u32), u64> = BTreeMap::new();
    let windows = window_ranges(&records, a.window_ms.saturating_mul(1_000_000));
    for (end_ns, range) in &windows {
        let slice = &records[range.clone()];
        for r in slice {
            let last_cpu = r.cpu.unwrap_or(0);
            seen.entry(r.pid).or_default().insert(r.tid, last_cpu);
            *samples_of.entry((r.pid, r.tid)).or_insert(0) += 1;
        }
        let (accesses, _) = aggregate_records(slice, a.page_size, &mut node_of);
        let sample = build_sample(&topo, &seen, accesses, *end_ns, a.page_size);
        model.update(&sample);
    }
    report(&a, &model, &samples_of, records.len(), windows.len(), placement, &source)
}

/// The machine: (topology, memory layout if known, description).
fn machine(a: &Args) -> anyhow::Result<(Topology, Option<NodeMemory>, String)> {
    if let Some(m) = &a.machine {
        let topo = super::machine_topology(m)?;
        return Ok((topo, None, format!("machine {m} (no memory layout)")));
    }
    let root = a.root.clone().unwrap_or_else(|| PathBuf::from("/"));
    let topo = super::topology_under(&root)?;
    let mem = NodeMemory::read(&root).ok();
    let what = if a.root.is_some() { format!("fixture {}", root.display()) } else { "this machine".to_string() };
    let layout = if mem.is_some() { "memory blocks known" } else { "no memory blocks" };
    Ok((topo, mem, format!("{what} ({layout})")))
}

fn build_sample(
    topo: &Topology,
    seen: &BTreeMap<u32, BTreeMap<u32, u32>>,
    accesses: Vec<numapilot_observe::AccessSample>,
    now_ns: u64,
    page_size: u64,
) -> Sample {
    let cpus = Arc::new(topo.online_cpus());
    let mems = Arc::new(topo.node_ids());
    let processes = seen
        .iter()
        .map(|(&pid, threads)| ProcessSample {
            pid,
            starttime: 0,
            comm: String::new(),
            kernel_thread: false,
            read_ns: now_ns,
            stat: TaskStat { pid, state: 'R', num_threads: threads.len() as u32, ..TaskStat::default() },
            rss_kb: None,
            numa_maps: None,
            numa_maps_error: None,
            node_usage: Vec::new(),
            threads: threads
                .iter()
                .map(|(&tid, &cpu)| ThreadSample {
                    tid,
                    stat: TaskStat { pid: tid, state: 'R', processor: cpu, ..TaskStat::default() },
                    cpus_allowed: Arc::clone(&cpus),
                    mems_allowed: Arc::clone(&mems),
                    voluntary_ctxt_switches: None,
                    nonvoluntary_ctxt_switches: None,
                    sched: None,
                    schedstat: None,
                })
                .collect(),
            cpuset_cpus: None,
        })
        .collect();
    let nodes = topo.nodes.iter().map(NodeSample::from_topology).collect();
    // A recording's own period (access_period_scale 1); `access_sample_bytes` describes it.
    Sample { page_size, processes, nodes, accesses, ..Sample::empty_at(now_ns) }
}

/// Shares per node (kernel ids), for printing.
fn shares(model: &Model, v: &[f64]) -> BTreeMap<u32, f64> {
    model.topo.nodes.iter().zip(v).map(|(n, &s)| (n.id, (s * 1000.0).round() / 1000.0)).collect()
}

fn preferred(model: &Model, v: &[f64]) -> Option<u32> {
    let (i, &best) = v.iter().enumerate().max_by(|x, y| x.1.total_cmp(y.1))?;
    (best > 0.0).then(|| model.topo.nodes[i].id)
}

fn report(
    a: &Args,
    model: &Model,
    samples_of: &BTreeMap<(u32, u32), u64>,
    records: usize,
    windows: usize,
    placement: Placement,
    source: &str,
) -> anyhow::Result<ExitCode> {
    let mut procs = Vec::new();
    let mut by_pid: BTreeMap<u32, Vec<(u32, u64)>> = BTreeMap::new();
    for (&(pid, tid), &n) in samples_of {
        by_pid.entry(pid).or_default().push((tid, n));
    }
    for (pid, threads) in &by_pid {
        let ts: Vec<_> = threads
            .iter()
            .map(|&(tid, n)| {
                let view = model.tasks.get(&TaskKey { pid: *pid, tid });
                let access = view.map(|v| v.access.clone()).unwrap_or_default();
                json!({
                    "tid": tid,
                    "samples": n,
                    "preferred_node": preferred(model, &access),
                    "access": shares(model, &access),
                    "group": model.groups.of_task.get(&TaskKey { pid: *pid, tid }),
                })
            })
            .collect();
        procs.push(json!({ "pid": pid, "threads": ts }));
    }
    let groups: Vec<_> = model
        .groups
        .groups
        .values()
        .filter(|g| g.tasks.iter().any(|t| samples_of.contains_key(&(t.pid, t.tid))))
        .map(|g| {
            json!({
                "id": g.id,
                "tasks": g.tasks.iter().map(|t| [t.pid, t.tid]).collect::<Vec<_>>(),
                "pids": g.pids,
                "preferred_node": preferred(model, &g.access),
                "access": shares(model, &g.access),
            })
        })
        .collect();
    let mut edges: Vec<_> = model.graph.edges.iter().collect();
    edges.sort_by(|x, y| y.1.strength.total_cmp(&x.1.strength).then(x.0.cmp(y.0)));
    let edges: Vec<_> = edges
        .into_iter()
        .take(a.edges)
        .map(|((x, y), e)| {
            json!({
                "a": [x.pid, x.tid], "b": [y.pid, y.tid],
                "strength": (e.strength * 1000.0).round() / 1000.0,
                "coaccess": (e.coaccess * 1000.0).round() / 1000.0,
                "comm": (e.comm * 1000.0).round() / 1000.0,
                "tier": e.tier,
            })
        })
        .collect();
    let out = json!({
        "file": a.file.display().to_string(),
        "machine": source,
        "records": records,
        "windows": windows,
        "window_ms": a.window_ms,
        "placement": placement,
        "processes": procs,
        "groups": groups,
        "edges": edges,
    });
    if a.json {
        return super::run::print_out(&format!("{}\n", serde_json::to_string_pretty(&out)?));
    }
    // The text goes out in one write (a reader that went away is a quiet end, not a panic).
    let mut o = String::new();
    outln!(
        o,
        "replay {}: {}, {} of {} ms, {} in {}; machine: {source}",
        a.file.display(),
        super::plural(records, "sample"),
        super::plural(windows, "window"),
        a.window_ms,
        super::plural(samples_of.len(), "thread"),
        super::plural(by_pid.len(), "process")
    );
    outln!(
        o,
        "node of each sample: {} by physical address, {} by CPU, {} remote (two-node rule), {} unplaced",
        placement.phys,
        placement.cpu,
        placement.remote,
        placement.unplaced
    );
    let fmt_shares = |v: &serde_json::Value| -> String {
        v.as_object()
            .map(|o| {
                o.iter().map(|(k, s)| format!("n{k} {:.2}", s.as_f64().unwrap_or(0.0))).collect::<Vec<_>>().join(" ")
            })
            .unwrap_or_default()
    };
    let node = |v: &serde_json::Value| v.as_u64().map_or("-".to_string(), |n| n.to_string());
    outln!(o, "\nprocesses (threads: samples, preferred node, learned access shares, group):");
    for p in &procs {
        outln!(o, "  pid {}", p["pid"]);
        for t in p["threads"].as_array().into_iter().flatten() {
            outln!(
                o,
                "    tid {:>8}  {:<14}  node {:>2}  [{}]  group {}",
                // A JSON value prints without the width: as text first.
                t["tid"].to_string(),
                super::plural(format!("{:>6}", t["samples"].to_string()), "sample"),
                node(&t["preferred_node"]),
                fmt_shares(&t["access"]),
                node(&t["group"])
            );
        }
    }
    outln!(o, "\naffinity groups:");
    for g in &groups {
        let tasks: Vec<String> =
            g["tasks"].as_array().into_iter().flatten().map(|t| format!("{}/{}", t[0], t[1])).collect();
        outln!(
            o,
            "  group {}: node {} [{}]  {}",
            g["id"],
            node(&g["preferred_node"]),
            fmt_shares(&g["access"]),
            tasks.join(" ")
        );
    }
    outln!(o, "\nstrongest affinity edges:");
    if edges.is_empty() {
        outln!(o, "  none");
    }
    for e in &edges {
        outln!(
            o,
            "  {}/{} - {}/{}  strength {:.3} (co-access {:.3}, communication {:.3}) tier {}",
            e["a"][0],
            e["a"][1],
            e["b"][0],
            e["b"][1],
            e["strength"].as_f64().unwrap_or(0.0),
            e["coaccess"].as_f64().unwrap_or(0.0),
            e["comm"].as_f64().unwrap_or(0.0),
            e["tier"].as_str().unwrap_or("-")
        );
    }
    super::run::print_out(&o)
}
