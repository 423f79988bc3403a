//! Workload files: describing, in TOML or JSON a person can write, a workload the simulator runs.
//!
//! # Problem
//!
//! The built-in workloads (autonuma-benchmark, client/server, the four process types, the VM mix)
//! cover what the seeds measured; everything else (a database beside a batch job, a service whose
//! heap grows after an hour) must be describable without writing Rust. A [`Spec`] is plain data and
//! already deserializes, but it is machine-bound: it counts bytes and threads, while a person thinks
//! "one thread per CPU of a node" and "60% of a node's memory", and wants the same file to run on the
//! 2-node box and on the 288-core system. A hand-written file can also be wrong in ways that would
//! make a run meaningless (an access to a region that does not exist, a node the machine lacks), and
//! the error must say where, in the file's own terms.
//!
//! # Approach
//!
//! Two stages, as the machine files do (raw, then resolved against the machine):
//!
//! ```text
//!   text --parse--> WorkloadFile --resolve(topology)--> Spec --Spec::validate--> run
//!          (syntax,        (sizes and counts           (safety net: the same
//!           unknown keys)   from the machine, every      checks in Spec terms)
//!                           field checked, named
//!                           processes[1].threads[0].count)
//! ```
//!
//! The schema is the [`Spec`] schema with two kinds of value made machine-relative:
//!
//! ```text
//!   size  = 3221225472 | "3G" | "512M" | "1.5T"      bytes, or binary units as the kernel counts
//!         | "60%node" | "25%machine"                 of the smallest CPU node's / whole machine's memory
//!   count = 12 | "cpus" | "cores" | "nodes"          whole machine (online CPUs, cores, CPU nodes)
//!         | "node-cpus" | "node-cores"               of the smallest CPU node
//!         | "<term>/2" | "<term>*2" | "<term>-1" | "<term>+1"    one integer operation, result >= 1
//! ```
//!
//! ```toml
//! name = "db-and-batch"
//! duration_s = 30
//! [[processes]]
//! name = "db"
//! [[processes.regions]]
//! name = "pool"
//! size = "60%node"
//! [[processes.threads]]
//! name = "worker"
//! count = "node-cpus"
//! work = { unit = "queries", bytes_per_unit = 512, compute_ns = 2000 }
//! accesses = [{ region = "pool", pattern = "random" }]
//! ```
//!
//! `throughput_from = ["server"]` and `throughput_unit = "requests/s"` (top level) say which
//! processes carry the workload's throughput figure and in which unit; without them every process
//! does if they all count one unit, else each process's own figure is reported.
//!
//! Regions (`touch`, `policy`, `grow = { initial = SIZE, per_s = SIZE }`), thread groups (`cpus`,
//! `work`, `accesses`), phases and pacing take the same keys as the [`Spec`] types. Unknown keys are
//! refused (a misspelt key would otherwise silently take its default).
//!
//! Validation names the field in the file's terms and the reason, like the machine files do:
//! `app.toml: processes[0].threads[1].accesses[2].region: no region "bufer" in process "db" ...`.
//!
//! # Units
//!
//! Sizes in bytes once resolved (K/M/G/T are KiB/MiB/GiB/TiB); times in seconds; CPU cost in ns.
//!
//! # Limits
//!
//! A count expression has one operation (no parentheses); percentages are of MemTotal, not of free
//! memory. [`WorkloadFile::from_spec`] writes every size in bytes and every count as a number, so an
//! exported file is exact but no longer machine-relative.

use std::path::{Path, PathBuf};

use numapilot_topology::{CpuSet, NodeSet, Topology};
use serde::{Deserialize, Serialize};

use super::{
    Access, FirstTouch, Growth, MemPolicySpec, Pace, Phase, ProcessSpec, RegionSpec, Spec, SpecError, ThreadGroup, Work,
};

/// The machine figures workloads are sized from (thread counts, memory sizes).
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    /// Online CPUs of the machine.
    pub cpus: u32,
    /// Online cores (SMT siblings counted once).
    pub cores: u32,
    /// Online nodes that have CPUs, by kernel id.
    pub cpu_nodes: Vec<u32>,
    /// Online CPUs of the smallest CPU node.
    pub node_cpus: u32,
    /// Cores of the smallest CPU node.
    pub node_cores: u32,
    /// MemTotal of the CPU node with the least memory, bytes.
    pub node_bytes: u64,
    /// MemTotal of the whole machine, bytes.
    pub mem_bytes: u64,
}

impl Shape {
    /// The figures of `topo`.
    pub fn of(topo: &Topology) -> Shape {
        let online = topo.online_cpus();
        let mut cpu_nodes = Vec::new();
        let mut node_cpus = u32::MAX;
        let mut node_cores = u32::MAX;
        let mut node_bytes = u64::MAX;
        for n in &topo.nodes {
            let cpus = n.cpus.intersection(&online);
            if cpus.is_empty() {
                continue;
            }
            cpu_nodes.push(n.id);
            node_cpus = node_cpus.min(cpus.len() as u32);
            let cores: std::collections::BTreeSet<(u32, u32, u32)> =
                cpus.iter().filter_map(|c| topo.cpu(c)).map(|c| (c.package, c.die, c.core)).collect();
            node_cores = node_cores.min(cores.len() as u32);
            node_bytes = node_bytes.min(n.mem_total_kb * 1024);
        }
        if cpu_nodes.is_empty() {
            // A topology always has CPUs; keep the figures sane if one does not.
            (node_cpus, node_cores, node_bytes) = (1, 1, 0);
        }
        Shape {
            cpus: online.len().max(1) as u32,
            cores: topo.core_count().max(1) as u32,
            cpu_nodes,
            node_cpus: node_cpus.max(1),
            node_cores: node_cores.max(1),
            node_bytes,
            mem_bytes: topo.nodes.iter().map(|n| n.mem_total_kb * 1024).sum(),
        }
    }
}

/// A size in a workload file: bytes, or a string (`"3G"`, `"60%node"`, `"25%machine"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Size {
    /// Bytes.
    Bytes(u64),
    /// A size with a unit or a share of the machine.
    Text(String),
}

impl Size {
    /// Bytes of this size on a machine of shape `shape`.
    pub fn resolve(&self, shape: &Shape) -> Result<u64, String> {
        let text = match self {
            Size::Bytes(b) => return Ok(*b),
            Size::Text(t) => t.trim(),
        };
        if let Some((pct, of)) = text.split_once('%') {
            let p: f64 = pct.trim().parse().map_err(|_| format!("{text:?}: {pct:?} is not a number"))?;
            if !(p > 0.0 && p <= 100.0) {
                return Err(format!("{text:?}: a share must be in (0, 100] percent"));
            }
            let base = match of.trim() {
                "node" => shape.node_bytes,
                "machine" => shape.mem_bytes,
                other => return Err(format!("{text:?}: {other:?} is neither \"node\" nor \"machine\"")),
            };
            return Ok((base as f64 * p / 100.0) as u64);
        }
        let kb = numapilot_topology::machine::parse_size_kb(text)?;
        kb.checked_mul(1024).ok_or_else(|| format!("{text:?} is too large"))
    }
}

/// A thread or process count: a number or a machine expression (`"node-cpus"`, `"cpus/2"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Count {
    /// A fixed count.
    Fixed(u32),
    /// An expression over the machine's shape.
    Expr(String),
}

/// Reads a [`Size`] or a [`Count`]: a whole number in range, or a string, with a message that says
/// which (serde's untagged enums said "data did not match any variant of untagged enum Count",
/// naming a type of ours and not what is allowed; review helper-53).
struct NumberOrText<T> {
    expecting: &'static str,
    number: fn(u64) -> Option<T>,
    text: fn(String) -> T,
}

impl<'de, T> serde::de::Visitor<'de> for NumberOrText<T> {
    type Value = T;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<T, E> {
        (self.number)(v).ok_or_else(|| E::invalid_value(serde::de::Unexpected::Unsigned(v), &self))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<T, E> {
        match u64::try_from(v) {
            Ok(u) => self.visit_u64(u),
            Err(_) => Err(E::invalid_value(serde::de::Unexpected::Signed(v), &self)),
        }
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<T, E> {
        Err(E::invalid_value(serde::de::Unexpected::Float(v), &self))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<T, E> {
        Ok((self.text)(v.to_string()))
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NumberOrText {
            expecting: "a size: a whole number of bytes, or a string such as \"3G\", \"60%node\" or \"25%machine\"",
            number: |v| Some(Size::Bytes(v)),
            text: Size::Text,
        })
    }
}

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NumberOrText {
            expecting: "a count: a whole number up to 4294967295, or an expression such as \"node-cpus\" or \"cpus/2\"",
            number: |v| u32::try_from(v).ok().map(Count::Fixed),
            text: Count::Expr,
        })
    }
}

impl Default for Count {
    fn default() -> Self {
        Count::Fixed(1)
    }
}

fn is_one(c: &Count) -> bool {
    *c == Count::Fixed(1)
}

impl Count {
    /// The count on a machine of shape `shape`; at least 1.
    pub fn resolve(&self, shape: &Shape) -> Result<u32, String> {
        let text = match self {
            Count::Fixed(0) => return Err("must be at least 1".into()),
            Count::Fixed(n) => return Ok(*n),
            Count::Expr(t) => t.trim(),
        };
        let (term, op) = match text.find(['/', '*', '+']).or_else(|| {
            text.rfind('-').filter(|&i| {
                // "node-cpus" is a term; "node-cpus-1" has the operator after it.
                text[i + 1..].trim().bytes().all(|b| b.is_ascii_digit()) && !text[i + 1..].trim().is_empty()
            })
        }) {
            Some(i) => (text[..i].trim(), Some((text.as_bytes()[i], text[i + 1..].trim()))),
            None => (text, None),
        };
        let base = match term {
            "cpus" => shape.cpus,
            "cores" => shape.cores,
            "nodes" => shape.cpu_nodes.len() as u32,
            "node-cpus" => shape.node_cpus,
            "node-cores" => shape.node_cores,
            t if t.bytes().all(|b| b.is_ascii_digit()) && !t.is_empty() => {
                t.parse().map_err(|_| format!("{text:?}: {t:?} is too large"))?
            }
            t => {
                return Err(format!(
                    "{text:?}: unknown term {t:?}; use a number, cpus, cores, nodes, node-cpus or node-cores, \
                     optionally with one of /N *N -N +N"
                ));
            }
        };
        let value = match op {
            None => base as i64,
            Some((op, arg)) => {
                let n: i64 = arg.parse().map_err(|_| format!("{text:?}: {arg:?} is not a whole number"))?;
                match op {
                    b'/' if n == 0 => return Err(format!("{text:?}: division by zero")),
                    b'/' => base as i64 / n,
                    b'*' => (base as i64).checked_mul(n).ok_or_else(|| format!("{text:?} is too large"))?,
                    b'+' => (base as i64).checked_add(n).ok_or_else(|| format!("{text:?} is too large"))?,
                    _ => (base as i64).checked_sub(n).ok_or_else(|| format!("{text:?} is too large"))?,
                }
            }
        };
        if value < 1 {
            return Err(format!("{text:?} is {value} on this machine; a count must be at least 1"));
        }
        u32::try_from(value).map_err(|_| format!("{text:?} is too large"))
    }
}

/// A workload file: the [`Spec`] schema with machine-relative sizes and counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadFile {
    /// Short name.
    pub name: String,
    /// One line for humans.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Simulated duration, s (required when some work is open-ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// Closed loops between thread groups (`"process/group"`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pacing: Vec<Pace>,
    /// Processes whose work is the workload's throughput figure (see [`Spec::throughput_from`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_from: Option<Vec<String>>,
    /// Unit of that figure, e.g. `requests/s` (see [`Spec::throughput_unit`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_unit: Option<String>,
    /// The processes.
    pub processes: Vec<FileProcess>,
}

/// A process kind of a workload file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileProcess {
    /// Process name.
    pub name: String,
    /// Identical instances.
    #[serde(default, skip_serializing_if = "is_one")]
    pub count: Count,
    /// Start time, s.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub start_s: f64,
    /// Allowed CPUs (list form, `"0-11"`); omitted = all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<CpuSet>,
    /// CPUs of its cpuset (list form; `ProcessSpec::cpuset`); omitted = the whole machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpuset: Option<CpuSet>,
    /// Default memory policy.
    #[serde(default, skip_serializing_if = "is_local")]
    pub policy: MemPolicySpec,
    /// Memory regions.
    #[serde(default)]
    pub regions: Vec<FileRegion>,
    /// Thread groups.
    pub threads: Vec<FileThreads>,
    /// Changes of behaviour over time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<Phase>,
    /// Its launcher asks the placement policy for nodes before starting it (rule
    /// "launch-advice"; `ProcessSpec::launch_advice`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub launch_advice: bool,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

fn is_local(p: &MemPolicySpec) -> bool {
    *p == MemPolicySpec::Local
}

/// A region of a workload file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileRegion {
    /// Name, unique in the process.
    pub name: String,
    /// Size when fully grown.
    pub size: Size,
    /// Who places the pages first.
    #[serde(default)]
    pub touch: FirstTouch,
    /// Memory policy of this region; omitted = the process's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<MemPolicySpec>,
    /// Growth over time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grow: Option<FileGrowth>,
}

/// Growth of a region in a workload file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileGrowth {
    /// Size present at start.
    pub initial: Size,
    /// Size added per simulated second.
    pub per_s: Size,
}

/// A thread group of a workload file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileThreads {
    /// Group name, unique in the process.
    pub name: String,
    /// Number of threads.
    #[serde(default, skip_serializing_if = "is_one")]
    pub count: Count,
    /// Allowed CPUs; omitted = the process's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<CpuSet>,
    /// Work of each thread.
    pub work: Work,
    /// Memory accesses of a unit of work.
    #[serde(default)]
    pub accesses: Vec<Access>,
}

/// Text format of a workload file: the same two formats, told apart the same way, as machine files.
pub use numapilot_topology::machine::Format;

/// A workload file was rejected.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadFileError {
    /// The file could not be read.
    #[error("cannot read workload file {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Not valid TOML/JSON, or not the schema (unknown key, wrong type); the parser's message
    /// names the position.
    #[error("{file}: {message}")]
    Syntax {
        /// File name (or `<input>`).
        file: String,
        /// The parser's message.
        message: String,
    },
    /// The file parses but describes an impossible workload, or one this machine cannot run.
    #[error("{file}: {field}: {reason}")]
    Invalid {
        /// File name (or `<input>`).
        file: String,
        /// The field in the file's terms: `processes[1].threads[0].count`.
        field: String,
        /// Why it is rejected.
        reason: String,
    },
}

impl WorkloadFileError {
    /// The field an `Invalid` error names (`None` for I/O and syntax errors).
    pub fn field(&self) -> Option<&str> {
        match self {
            WorkloadFileError::Invalid { field, .. } => Some(field),
            _ => None,
        }
    }
}

/// Field and reason, before the file name is attached.
struct Bad(String, String);

fn bad(field: impl Into<String>, reason: impl Into<String>) -> Bad {
    Bad(field.into(), reason.into())
}

impl WorkloadFile {
    /// Parses workload-file text; `file` names the source in errors.
    pub fn parse(text: &str, format: Format, file: &str) -> Result<WorkloadFile, WorkloadFileError> {
        let syntax = |message: String| WorkloadFileError::Syntax { file: file.to_string(), message };
        match format {
            Format::Toml => toml::from_str(text).map_err(|e| syntax(e.to_string().trim_end().to_string())),
            Format::Json => serde_json::from_str(text).map_err(|e| syntax(e.to_string())),
        }
    }

    /// Reads and parses a workload file; the format comes from the extension, else the content.
    pub fn load(path: &Path) -> Result<WorkloadFile, WorkloadFileError> {
        let text = numapilot_topology::machine::read_description(path)
            .map_err(|source| WorkloadFileError::Io { path: path.to_path_buf(), source })?;
        let format = Format::from_path(path).unwrap_or_else(|| Format::sniff(&text));
        WorkloadFile::parse(&text, format, &path.display().to_string())
    }

    /// TOML text of this file.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a WorkloadFile always serializes to TOML")
    }

    /// JSON text of this file (pretty).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a WorkloadFile always serializes to JSON")
    }

    /// The file that describes `spec` exactly (sizes in bytes, counts as numbers).
    pub fn from_spec(spec: &Spec) -> WorkloadFile {
        WorkloadFile {
            name: spec.name.clone(),
            description: spec.description.clone(),
            duration_s: spec.duration_s,
            pacing: spec.pacing.clone(),
            throughput_from: spec.throughput_from.clone(),
            throughput_unit: spec.throughput_unit.clone(),
            processes: spec
                .processes
                .iter()
                .map(|p| FileProcess {
                    name: p.name.clone(),
                    count: Count::Fixed(p.count),
                    start_s: p.start_s,
                    launch_advice: p.launch_advice,
                    cpus: p.cpus.clone(),
                    cpuset: p.cpuset.clone(),
                    policy: p.policy.clone(),
                    regions: p
                        .regions
                        .iter()
                        .map(|r| FileRegion {
                            name: r.name.clone(),
                            size: Size::Bytes(r.bytes),
                            touch: r.touch,
                            policy: r.policy.clone(),
                            grow: r.grow.map(|g| FileGrowth {
                                initial: Size::Bytes(g.initial_bytes),
                                per_s: Size::Bytes(g.bytes_per_s.round() as u64),
                            }),
                        })
                        .collect(),
                    threads: p
                        .threads
                        .iter()
                        .map(|g| FileThreads {
                            name: g.name.clone(),
                            count: Count::Fixed(g.count),
                            cpus: g.cpus.clone(),
                            work: g.work.clone(),
                            accesses: g.accesses.clone(),
                        })
                        .collect(),
                    phases: p.phases.clone(),
                })
                .collect(),
        }
    }

    /// Checks every field and builds the [`Spec`] for machine `topo`; `file` names the source in
    /// errors.
    pub fn resolve(&self, topo: &Topology, file: &str) -> Result<Spec, WorkloadFileError> {
        let spec = self.build(topo).map_err(|Bad(field, reason)| WorkloadFileError::Invalid {
            file: file.to_string(),
            field,
            reason,
        })?;
        // Safety net: the engine's own checks, in Spec terms. Everything they refuse should have
        // been refused above with the file's field name.
        spec.validate().map_err(|e| WorkloadFileError::Invalid {
            file: file.to_string(),
            field: "workload".into(),
            reason: e.to_string(),
        })?;
        Ok(spec)
    }

    fn build(&self, topo: &Topology) -> Result<Spec, Bad> {
        let shape = Shape::of(topo);
        let online = topo.online_cpus();
        let node_ids = topo.node_ids();
        if self.name.trim().is_empty() {
            return Err(bad("name", "must not be empty"));
        }
        if self.processes.is_empty() {
            return Err(bad("processes", "no process; a workload needs at least one [[processes]]"));
        }
        if let Some(d) = self.duration_s {
            if !(d > 0.0 && d.is_finite()) {
                return Err(bad("duration_s", format!("{d} is not a finite time > 0")));
            }
        }
        let mut processes = Vec::with_capacity(self.processes.len());
        let mut open_ended = None;
        for (pi, p) in self.processes.iter().enumerate() {
            let pf = |f: &str| format!("processes[{pi}].{f}");
            if p.name.trim().is_empty() || p.name.contains('/') {
                return Err(bad(pf("name"), format!("{:?}: must be non-empty and without '/'", p.name)));
            }
            if self.processes[..pi].iter().any(|o| o.name == p.name) {
                return Err(bad(pf("name"), format!("{:?} is used by an earlier process", p.name)));
            }
            let count = p.count.resolve(&shape).map_err(|r| bad(pf("count"), r))?;
            if !(p.start_s >= 0.0 && p.start_s.is_finite()) {
                return Err(bad(pf("start_s"), format!("{} is not a finite time >= 0", p.start_s)));
            }
            check_cpus(p.cpus.as_ref(), &online, &pf("cpus"))?;
            check_cpus(p.cpuset.as_ref(), &online, &pf("cpuset"))?;
            check_policy(&p.policy, &node_ids, &pf("policy"))?;
            let mut regions = Vec::with_capacity(p.regions.len());
            for (ri, r) in p.regions.iter().enumerate() {
                let rf = |f: &str| pf(&format!("regions[{ri}].{f}"));
                if r.name.trim().is_empty() || r.name.contains('/') {
                    return Err(bad(rf("name"), format!("{:?}: must be non-empty and without '/'", r.name)));
                }
                if p.regions[..ri].iter().any(|o| o.name == r.name) {
                    return Err(bad(rf("name"), format!("{:?} is used by an earlier region of {:?}", r.name, p.name)));
                }
                let bytes = r.size.resolve(&shape).map_err(|e| bad(rf("size"), e))?;
                if bytes == 0 {
                    return Err(bad(rf("size"), "must be more than 0 bytes"));
                }
                if let FirstTouch::Node { node } = r.touch {
                    if !node_ids.contains(node) {
                        return Err(bad(rf("touch.node"), format!("node {node} is not on this machine ({node_ids})")));
                    }
                }
                if let Some(pol) = &r.policy {
                    check_policy(pol, &node_ids, &rf("policy"))?;
                }
                let grow = match &r.grow {
                    None => None,
                    Some(g) => {
                        let initial = g.initial.resolve(&shape).map_err(|e| bad(rf("grow.initial"), e))?;
                        let per_s = g.per_s.resolve(&shape).map_err(|e| bad(rf("grow.per_s"), e))?;
                        if initial > bytes {
                            return Err(bad(
                                rf("grow.initial"),
                                format!("{initial} bytes is more than the region's size ({bytes} bytes)"),
                            ));
                        }
                        Some(Growth { initial_bytes: initial, bytes_per_s: per_s as f64 })
                    }
                };
                regions.push(RegionSpec {
                    name: r.name.clone(),
                    bytes,
                    touch: r.touch,
                    policy: r.policy.clone(),
                    grow,
                });
            }
            if p.threads.is_empty() {
                return Err(bad(pf("threads"), "no thread group; a process needs at least one [[processes.threads]]"));
            }
            let mut threads = Vec::with_capacity(p.threads.len());
            for (gi, g) in p.threads.iter().enumerate() {
                let gf = |f: &str| pf(&format!("threads[{gi}].{f}"));
                if g.name.trim().is_empty() || g.name.contains('/') {
                    return Err(bad(gf("name"), format!("{:?}: must be non-empty and without '/'", g.name)));
                }
                if p.threads[..gi].iter().any(|o| o.name == g.name) {
                    return Err(bad(gf("name"), format!("{:?} is used by an earlier group of {:?}", g.name, p.name)));
                }
                let n = g.count.resolve(&shape).map_err(|r| bad(gf("count"), r))?;
                check_cpus(g.cpus.as_ref(), &online, &gf("cpus"))?;
                check_work(&g.work, &gf("work"))?;
                if g.work.total.is_none() && open_ended.is_none() {
                    open_ended = Some(gf("work.total"));
                }
                if g.work.bytes_per_unit > 0.0 && g.accesses.is_empty() {
                    return Err(bad(
                        gf("accesses"),
                        format!(
                            "work.bytes_per_unit is {} but no access says where the bytes go",
                            g.work.bytes_per_unit
                        ),
                    ));
                }
                self.check_accesses(pi, &g.accesses, &gf("accesses"))?;
                threads.push(ThreadGroup {
                    name: g.name.clone(),
                    count: n,
                    cpus: g.cpus.clone(),
                    work: g.work.clone(),
                    accesses: g.accesses.clone(),
                });
            }
            for (hi, ph) in p.phases.iter().enumerate() {
                let hf = |f: &str| pf(&format!("phases[{hi}].{f}"));
                if !(ph.at_s >= 0.0 && ph.at_s.is_finite()) {
                    return Err(bad(hf("at_s"), format!("{} is not a finite time >= 0", ph.at_s)));
                }
                if !p.threads.iter().any(|g| g.name == ph.group) {
                    let names: Vec<&str> = p.threads.iter().map(|g| g.name.as_str()).collect();
                    return Err(bad(
                        hf("group"),
                        format!(
                            "no thread group {:?} in process {:?} (groups: {})",
                            ph.group,
                            p.name,
                            names.join(", ")
                        ),
                    ));
                }
                if let Some(c) = ph.compute_ns {
                    if !(c >= 0.0 && c.is_finite()) {
                        return Err(bad(hf("compute_ns"), format!("{c} is not a finite cost >= 0")));
                    }
                }
                self.check_accesses(pi, &ph.accesses, &hf("accesses"))?;
            }
            processes.push(ProcessSpec {
                name: p.name.clone(),
                count,
                start_s: p.start_s,
                cpus: p.cpus.clone(),
                cpuset: p.cpuset.clone(),
                policy: p.policy.clone(),
                regions,
                threads,
                phases: p.phases.clone(),
                launch_advice: p.launch_advice,
            });
        }
        if let (Some(field), None) = (&open_ended, self.duration_s) {
            return Err(bad(
                "duration_s",
                format!("{field} is omitted (open-ended work), so the workload needs a duration"),
            ));
        }
        for (i, pc) in self.pacing.iter().enumerate() {
            for (side, name) in [("a", &pc.a), ("b", &pc.b)] {
                self.check_group_ref(name, &processes).map_err(|r| bad(format!("pacing[{i}].{side}"), r))?;
            }
            if !(pc.ratio > 0.0 && pc.ratio.is_finite()) {
                return Err(bad(format!("pacing[{i}].ratio"), format!("{} is not a finite ratio > 0", pc.ratio)));
            }
        }
        let spec = Spec {
            name: self.name.clone(),
            description: self.description.clone(),
            processes,
            duration_s: self.duration_s,
            pacing: self.pacing.clone(),
            throughput_from: self.throughput_from.clone(),
            throughput_unit: self.throughput_unit.clone(),
        };
        if let Err(SpecError::Invalid { what, reason, .. }) = spec.throughput_of() {
            return Err(bad(what, reason));
        }
        Ok(spec)
    }

    fn check_accesses(&self, pi: usize, accesses: &[Access], field: &str) -> Result<(), Bad> {
        let p = &self.processes[pi];
        for (ai, a) in accesses.iter().enumerate() {
            let af = |f: &str| format!("{field}[{ai}].{f}");
            if !(a.weight > 0.0 && a.weight.is_finite()) {
                return Err(bad(af("weight"), format!("{} is not a finite weight > 0", a.weight)));
            }
            match a.region.split_once('/') {
                None => {
                    if !p.regions.iter().any(|r| r.name == a.region) {
                        let names: Vec<&str> = p.regions.iter().map(|r| r.name.as_str()).collect();
                        return Err(bad(
                            af("region"),
                            format!(
                                "no region {:?} in process {:?} (regions: {}; another process's region is \
                                 \"process/region\")",
                                a.region,
                                p.name,
                                if names.is_empty() { "none".to_string() } else { names.join(", ") }
                            ),
                        ));
                    }
                }
                Some((proc_name, region)) => {
                    let Some(other) = self.processes.iter().find(|o| o.name == proc_name) else {
                        return Err(bad(af("region"), format!("{:?}: no process {proc_name:?}", a.region)));
                    };
                    if other.count != Count::Fixed(1) {
                        return Err(bad(
                            af("region"),
                            format!("{:?}: process {proc_name:?} must have count 1 to be shared with", a.region),
                        ));
                    }
                    if !other.regions.iter().any(|r| r.name == region) {
                        return Err(bad(
                            af("region"),
                            format!("{:?}: process {proc_name:?} has no region {region:?}", a.region),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    fn check_group_ref(&self, name: &str, processes: &[ProcessSpec]) -> Result<(), String> {
        let Some((proc_name, group)) = name.split_once('/') else {
            return Err(format!("{name:?} is not \"process/group\""));
        };
        let Some(p) = processes.iter().find(|p| p.name == proc_name) else {
            return Err(format!("{name:?}: no process {proc_name:?}"));
        };
        if p.count != 1 {
            return Err(format!("{name:?}: process {proc_name:?} must have count 1 to be paced"));
        }
        if !p.threads.iter().any(|g| g.name == group) {
            return Err(format!("{name:?}: process {proc_name:?} has no thread group {group:?}"));
        }
        Ok(())
    }
}

fn check_cpus(cpus: Option<&CpuSet>, online: &CpuSet, field: &str) -> Result<(), Bad> {
    let Some(cpus) = cpus else { return Ok(()) };
    if cpus.is_empty() {
        return Err(bad(field, "is empty; omit it to allow all CPUs"));
    }
    let missing = cpus.difference(online);
    if !missing.is_empty() {
        return Err(bad(field, format!("CPUs {missing} are not online on this machine (online: {online})")));
    }
    Ok(())
}

fn check_policy(policy: &MemPolicySpec, nodes: &NodeSet, field: &str) -> Result<(), Bad> {
    let set = match policy {
        MemPolicySpec::Local => return Ok(()),
        MemPolicySpec::Preferred { node } => {
            if !nodes.contains(*node) {
                return Err(bad(format!("{field}.node"), format!("node {node} is not on this machine ({nodes})")));
            }
            return Ok(());
        }
        MemPolicySpec::Bind { nodes: s }
        | MemPolicySpec::PreferredMany { nodes: s }
        | MemPolicySpec::Interleave { nodes: s } => s,
        MemPolicySpec::WeightedInterleave { nodes: s, weights } => {
            if weights.len() != s.len() {
                return Err(bad(
                    format!("{field}.weights"),
                    format!("{} weights for {} nodes; give one per node, in node id order", weights.len(), s.len()),
                ));
            }
            if weights.contains(&0) {
                return Err(bad(format!("{field}.weights"), "weights must be at least 1"));
            }
            s
        }
    };
    if set.is_empty() {
        return Err(bad(format!("{field}.nodes"), "is empty"));
    }
    let missing = set.difference(nodes);
    if !missing.is_empty() {
        return Err(bad(format!("{field}.nodes"), format!("nodes {missing} are not on this machine ({nodes})")));
    }
    Ok(())
}

fn check_work(w: &Work, field: &str) -> Result<(), Bad> {
    if let Some(t) = w.total {
        if !(t > 0.0 && t.is_finite()) {
            return Err(bad(
                format!("{field}.total"),
                format!("{t} is not a finite amount > 0; omit it for open-ended work"),
            ));
        }
    }
    if !(w.bytes_per_unit >= 0.0 && w.bytes_per_unit.is_finite()) {
        return Err(bad(format!("{field}.bytes_per_unit"), format!("{} is not finite and >= 0", w.bytes_per_unit)));
    }
    if !(w.compute_ns >= 0.0 && w.compute_ns.is_finite()) {
        return Err(bad(format!("{field}.compute_ns"), format!("{} is not finite and >= 0", w.compute_ns)));
    }
    if w.bytes_per_unit + w.compute_ns <= 0.0 {
        return Err(bad(field, "bytes_per_unit and compute_ns are both 0: a unit of work would cost nothing"));
    }
    if !(w.duty > 0.0 && w.duty <= 1.0) {
        return Err(bad(format!("{field}.duty"), format!("{} is not in (0, 1]", w.duty)));
    }
    Ok(())
}

/// Loads a workload file and resolves it for machine `topo`.
pub fn load_spec(path: &Path, topo: &Topology) -> Result<Spec, WorkloadFileError> {
    WorkloadFile::load(path)?.resolve(topo, &path.display().to_string())
}

/// Parses workload-file text and resolves it for machine `topo`; `file` names the source in errors.
pub fn parse_spec(text: &str, format: Format, file: &str, topo: &Topology) -> Result<Spec, WorkloadFileError> {
    WorkloadFile::parse(text, format, file)?.resolve(topo, file)
}

/// A built-in workload: its name (what `--workload` takes), one line for listings, and the
/// constructor that sizes it for a machine.
#[derive(Debug, Clone, Copy)]
pub struct Named {
    /// Name, e.g. `redis-set`.
    pub name: &'static str,
    /// One line for `--list` output.
    pub description: &'static str,
    /// Builds the workload for a machine.
    pub build: fn(&Topology) -> Spec,
}

impl Named {
    /// A named workload.
    pub const fn new(name: &'static str, description: &'static str, build: fn(&Topology) -> Spec) -> Named {
        Named { name, description, build }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fuzzed workload files (review helper-39): numbers at the edge of 64 bits and sizes far past
    /// any machine are errors naming the field, not overflows, aborts or runs without end.
    #[test]
    fn fuzzed_workload_files_are_errors() {
        let topo = Topology::preset("autonuma-2s12c-24g").unwrap();
        let file = |process: &str, region: &str, threads: &str| {
            format!(
                "name = \"w\"\nduration_s = 10\n[[processes]]\nname = \"p\"\n{process}\n[[processes.regions]]\n\
                 name = \"r\"\nsize = \"{region}\"\n[[processes.threads]]\nname = \"t\"\ncount = \"{threads}\"\n\
                 work = {{ unit = \"ops\", bytes_per_unit = 64, compute_ns = 10 }}\n\
                 accesses = [{{ region = \"r\", pattern = \"random\" }}]\n"
            )
        };
        let err = |text: String| parse_spec(&text, Format::Toml, "w.toml", &topo).unwrap_err().to_string();
        for (text, want) in [
            (file("", "1G", "cpus*9223372036854775807"), "too large"),
            (file("", "1G", "cpus+9223372036854775807"), "too large"),
            (file("", "1G", "cpus-9223372036854775807"), "at least 1"),
            (file("start_s = 1e300", "1G", "1"), "start_s"),
            (file("", "1G", "1000000"), "threads in all"),
            (file("", "16777215T", "1"), "region sizes"),
            (file("", "1G", "1").replace("duration_s = 10", "duration_s = 1e300"), "duration_s"),
        ] {
            let e = err(text);
            assert!(e.contains(want), "{want}: {e}");
        }
        assert!(parse_spec(&file("", "1G", "cpus*2"), Format::Toml, "w.toml", &topo).is_ok());
    }

    /// The example in the module documentation parses and resolves.
    #[test]
    fn module_doc_example_is_valid() {
        let text = r#"
name = "db-and-batch"
duration_s = 30
[[processes]]
name = "db"
[[processes.regions]]
name = "pool"
size = "60%node"
[[processes.threads]]
name = "worker"
count = "node-cpus"
work = { unit = "queries", bytes_per_unit = 512, compute_ns = 2000 }
accesses = [{ region = "pool", pattern = "random" }]
"#;
        let topo = Topology::preset("ring-8n64c").unwrap();
        let shape = Shape::of(&topo);
        let spec = parse_spec(text, Format::Toml, "doc", &topo).unwrap();
        assert_eq!(spec.processes[0].threads[0].count, shape.node_cpus);
        assert_eq!(spec.processes[0].regions[0].bytes, (shape.node_bytes as f64 * 0.6) as u64);
        assert_eq!(spec.processes[0].threads[0].accesses[0].pattern, super::super::Pattern::Random);
    }

    #[test]
    fn throughput_from_names_processes_of_the_file() {
        let text = |from: &str| {
            format!(
                r#"
name = "pair"
duration_s = 5
throughput_from = [{from}]
throughput_unit = "requests/s"
[[processes]]
name = "server"
[[processes.threads]]
name = "main"
work = {{ unit = "requests", bytes_per_unit = 0, compute_ns = 1000 }}
[[processes]]
name = "client"
[[processes.threads]]
name = "main"
work = {{ unit = "requests", bytes_per_unit = 0, compute_ns = 1000 }}
"#
            )
        };
        let topo = Topology::preset("autonuma-2s12c-24g").unwrap();
        let spec = parse_spec(&text("\"server\""), Format::Toml, "pair.toml", &topo).unwrap();
        let of = spec.throughput_of().unwrap().unwrap();
        assert_eq!((of.processes, of.unit.as_str()), (vec![0], "requests/s"));
        let back = WorkloadFile::from_spec(&spec).to_toml();
        assert!(back.contains("throughput_from") && back.contains("requests/s"), "{back}");
        let e = parse_spec(&text("\"srv\""), Format::Toml, "pair.toml", &topo).unwrap_err().to_string();
        assert!(e.contains("pair.toml") && e.contains("throughput_from") && e.contains("srv"), "{e}");
    }

    #[test]
    fn shape_of_a_machine_with_smt() {
        let topo = Topology::preset("epyc-2s256c").unwrap();
        let s = Shape::of(&topo);
        assert_eq!((s.cpus, s.cores, s.cpu_nodes.len(), s.node_cpus, s.node_cores), (512, 256, 2, 256, 128));
        assert_eq!(s.mem_bytes, topo.nodes.iter().map(|n| n.mem_total_kb * 1024).sum::<u64>());
    }
}
