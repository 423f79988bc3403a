//! Machine files: describing, in a few lines a person can write, a machine that is not here.
//!
//! # Problem
//!
//! Policies must be tried on machines we do not have: a 2 x 128-core EPYC, a 36-node NumaConnect
//! system. A full [`Topology`] lists every CPU with its package, die, core, siblings and cache, which
//! is thousands of lines nobody writes by hand. And a hand-written description can describe a machine
//! the kernel would never present (a CPU in two nodes, a remote node nearer than local memory), which
//! would make every result computed on it meaningless.
//!
//! # Approach
//!
//! A compact schema, the same in TOML and JSON (one serde type, [`MachineFile`]):
//!
//! ```text
//!   smt = 2                         threads per core (default 1), per node overridable
//!   cores_per_llc = 8               cores sharing a last-level cache (default: the whole node)
//!   distances = [[10, 32],          square, one row and column per entry of `nodes`, in file order
//!                [32, 10]]
//!   [[nodes]]  id = 0   cpus = "0-127,256-383"   memory = "768G"   package = 0
//!   [[nodes]]  id = 1   cpus = "128-255,384-511" memory = "768G"   package = 1
//!   [[devices]] address = "0000:41:00.0"  class = "network"  node = 0  names = ["eth0"]
//!   [[cpu]]    id = 5  online = false         optional per-CPU overrides
//!   [sim]      node_bandwidth_gbs = 16.0      optional simulator parameters, passed through
//!                                             unread (numapilot-sim's `machine` module owns them)
//! ```
//!
//! Everything per CPU is generated from that structure, the way Linux numbers x86 CPUs:
//!
//! ```text
//!   node CPUs sorted: c0 c1 ... c(n-1),  smt = t,  cores = n / t
//!   core k (k < cores) = threads { c(k), c(k + cores), ..., c(k + (t-1)*cores) }
//!        e.g. node 0 = "0-11,48-59", smt 2:  core 0 = {0,48}, core 11 = {11,59}
//!   core ids count up within a package, across its nodes in id order
//!   die    = position of the node among the CPU nodes of its package (one die per node)
//!   LLC g  = cores [g*cores_per_llc, (g+1)*cores_per_llc) and all their threads
//!   package: as given on every CPU node, or, when no node gives one, inferred: nodes at
//!            distance <= 12 (sub-NUMA clusters, dies of one package) share a package
//! ```
//!
//! Validation rejects what the kernel would not produce, naming the field in the file's terms and the
//! reason: a matrix that is not square; an entry below 10 or above 255 (a SLIT entry is one byte);
//! a diagonal that is not 10 (the kernel drops such a SLIT: drivers/acpi/numa/srat.c `slit_valid`,
//! drivers/of/of_numa.c; an off-diagonal 10 is kept, as `numa=fake`'s emulated nodes of one
//! physical node read so, and a tree of them exported must load again; review helper-54); an
//! asymmetric matrix unless
//! `asymmetric = true` (the kernel copies the firmware's table as it is, and firmware for some
//! machines does describe asymmetric links, so it is allowed but must be asked for); duplicate node
//! ids; a CPU in two nodes; a node with CPUs and no memory; a node with neither; a device or CPU
//! override naming a node or CPU that does not exist.
//!
//! # Units
//!
//! Sizes are strings with a binary unit, as the kernel and numactl count: `"512K"`, `"128402M"`,
//! `"8G"`, `"1.5T"` (K = KiB, M = MiB, G = GiB, T = TiB; `KB`/`KiB` spellings accepted), or plain
//! integers in `mem_gb` / `mem_mb`. Internally everything is kB, like `nodeN/meminfo`.
//!
//! # Limitations
//!
//! - The CPU numbering rule is Linux's usual x86 enumeration; machines numbered otherwise (threads
//!   adjacent: core 0 = {0,1}) need per-CPU `[[cpu]]` overrides, or a file written by
//!   [`MachineFile::from_topology`].
//! - Memory-less nodes with CPUs exist on some machines (e.g. POWER LPARs) but are rejected: every
//!   allocation from such a node is remote, which the placement model does not describe.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{FieldError, MachineError};
use crate::tiers::{LOCAL_DISTANCE, SAME_SOCKET_MAX_DISTANCE};
use crate::{Cpu, CpuSet, DeviceClass, IdSet, Node, PciDevice, Topology};

/// One shared copy of each distinct set (see [`IdSet::shared`]).
#[derive(Default)]
pub(crate) struct Distinct(std::collections::HashSet<CpuSet>);

impl Distinct {
    /// `set`, shared with every equal set this has seen.
    pub(crate) fn share(&mut self, set: CpuSet) -> CpuSet {
        if let Some(s) = self.0.get(&set) {
            return s.clone();
        }
        let s = set.shared();
        self.0.insert(s.clone());
        s
    }
}

/// Largest node id Linux supports: MAX_NUMNODES = 1 << NODES_SHIFT, and NODES_SHIFT is at most 10
/// on x86-64 (arch/x86/Kconfig).
pub const MAX_NODE_ID: u32 = 1023;

/// Largest SLIT entry: the table holds one byte per entry (ACPI 6.5, 5.2.17); 255 means unreachable.
pub const MAX_DISTANCE: u32 = 255;

/// A machine description, as written in a TOML or JSON machine file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineFile {
    /// Short name (presets use their preset name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// One line saying what machine this is and where its figures come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Threads per core for every node (default 1); a node's own `smt` wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smt: Option<u32>,
    /// Cores per last-level cache for every node (default: all cores of the node); a node's own wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores_per_llc: Option<u32>,
    /// Accept an asymmetric distance matrix (default false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub asymmetric: bool,
    /// Possible node ids (`node/possible`), a list like `"0-7"`; default: the nodes given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub possible: Option<String>,
    /// Distance matrix, one row and one column per entry of `nodes`, in file order. May be omitted
    /// for a single node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub distances: Vec<Vec<u32>>,
    /// The nodes.
    pub nodes: Vec<NodeSpec>,
    /// Per-CPU overrides of the generated values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu: Vec<CpuSpec>,
    /// PCI devices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceSpec>,
    /// Simulator parameters (`[sim]` table), carried through unread: this crate does not interpret
    /// them; the simulator (numapilot-sim, `machine` module) defines and validates the keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sim: Option<SimTable>,
}

/// The `[sim]` table of a machine file: opaque to the topology crate.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SimTable(pub toml::Table);

// Machine files compare by value; a table holding a NaN float would compare unequal to itself,
// which only makes two such files "different", never a wrong topology.
impl Eq for SimTable {}

/// A node in a machine file.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// Kernel node id (sparse ids allowed).
    pub id: u32,
    /// CPU list, e.g. `"0-11,48-59"`; empty or absent for a memory-only node.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cpus: String,
    /// Memory size with a unit: `"8G"`, `"128402M"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// Memory in GiB (alternative to `memory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_gb: Option<u64>,
    /// Memory in MiB (alternative to `memory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_mb: Option<u64>,
    /// Free memory with a unit (default: all of it), as `numactl --hardware` would show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free: Option<String>,
    /// Physical package (socket) id of the node's CPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<u32>,
    /// Die id within the package (default: the node's position among its package's nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub die: Option<u32>,
    /// Threads per core on this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smt: Option<u32>,
    /// Cores per last-level cache on this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores_per_llc: Option<u32>,
}

/// Overrides for one CPU; every field left out keeps its generated value.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuSpec {
    /// CPU id (must be in some node's `cpus`).
    pub id: u32,
    /// Physical package id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<u32>,
    /// Die id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub die: Option<u32>,
    /// Core id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core: Option<u32>,
    /// SMT siblings including this CPU, list form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub siblings: Option<String>,
    /// CPUs sharing the last-level cache, list form; `""` for "no cache information".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llc: Option<String>,
    /// Whether the CPU is online (default true). An offline CPU is left out of its node's CPUs and
    /// of the generated siblings and LLC of the other CPUs, as the kernel leaves it out of
    /// `nodeN/cpulist`, `thread_siblings_list` and `shared_cpu_list`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub online: Option<bool>,
}

/// A PCI device in a machine file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpec {
    /// PCI address, e.g. `0000:41:00.0`.
    pub address: String,
    /// `network`, `gpu`, `nvme`, `storage` or `other`.
    pub class: DeviceClass,
    /// Raw class code; default a representative code of `class`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_code: Option<u32>,
    /// Node the device hangs off; absent = no affinity (the kernel's -1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<u32>,
    /// Interface or controller names (`eth0`, `nvme0`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
}

/// Text format of a machine file (and of the simulator's workload files, which reuse it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// TOML.
    Toml,
    /// JSON.
    Json,
}

impl Format {
    /// The format a path's extension names (`.toml`, `.json`), if any.
    pub fn from_path(path: &Path) -> Option<Format> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "toml" => Some(Format::Toml),
            "json" => Some(Format::Json),
            _ => None,
        }
    }

    /// Guess from content: JSON starts with `{`.
    pub fn sniff(text: &str) -> Format {
        if text.trim_start().starts_with('{') {
            Format::Json
        } else {
            Format::Toml
        }
    }
}

impl MachineFile {
    /// Parses machine-file text. `file` names the source in errors.
    ///
    /// JSON may also be a full topology as `numapilot topo --json` prints it: it is read as the
    /// machine file that describes that topology exactly ([`MachineFile::from_topology`]).
    pub fn parse(text: &str, format: Format, file: &str) -> Result<MachineFile, MachineError> {
        let syntax = |message: String| MachineError::Syntax { file: file.to_string(), message };
        match format {
            Format::Toml => toml::from_str(text).map_err(|e| syntax(e.to_string().trim_end().to_string())),
            Format::Json => serde_json::from_str(text).or_else(|e| match serde_json::from_str::<Topology>(text) {
                // A distance matrix that is not square (one row per node, each as long) cannot
                // be written out (it was indexed as one, and a ragged one panicked; review
                // helper-39).
                Ok(topo) if !topo.distances.iter().all(|r| r.len() == topo.distances.len()) => Err(syntax(format!(
                    "distances: {} rows of lengths {:?}; a topology's matrix has one row per node, each as long",
                    topo.distances.len(),
                    topo.distances.iter().map(Vec::len).collect::<Vec<_>>()
                ))),
                Ok(topo) => Ok(MachineFile::from_topology(&topo, None)),
                // Text shaped as a topology (`numapilot topo --json`: nodes with mem_total_kb)
                // is reported against that schema, not the machine file's (whose error named
                // mem_total_kb an unknown field; review helper-39).
                Err(te) if text.contains("\"mem_total_kb\"") => {
                    Err(syntax(format!("as a topology (topo --json): {te}")))
                }
                Err(_) => Err(syntax(e.to_string())),
            }),
        }
    }

    /// Reads and parses a machine file; the format comes from the extension, else from the content.
    pub fn load(path: &Path) -> Result<MachineFile, MachineError> {
        let text = read_description(path).map_err(|source| MachineError::Io { path: path.to_path_buf(), source })?;
        let format = Format::from_path(path).unwrap_or_else(|| Format::sniff(&text));
        MachineFile::parse(&text, format, &path.display().to_string())
    }

    /// TOML text of this file.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a MachineFile always serializes to TOML")
    }

    /// JSON text of this file (pretty).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a MachineFile always serializes to JSON")
    }

    /// Validates the description and builds the machine it describes.
    pub fn build(&self) -> Result<Topology, FieldError> {
        Builder::new(self)?.build()
    }

    /// A machine file that describes `topo` exactly: every CPU's package, die, core, siblings, LLC
    /// and online state is written out, so building it gives `topo` back (for any topology the
    /// validation accepts; see the module documentation for what it rejects).
    pub fn from_topology(topo: &Topology, name: Option<&str>) -> MachineFile {
        let nodes = topo
            .nodes
            .iter()
            .map(|n| {
                let all_cpus: CpuSet = topo.cpus.iter().filter(|c| c.node == n.id).map(|c| c.id).collect();
                NodeSpec {
                    id: n.id,
                    cpus: all_cpus.union(&n.cpus).to_list(),
                    memory: Some(format!("{}K", n.mem_total_kb)),
                    free: Some(format!("{}K", n.mem_free_kb)),
                    ..NodeSpec::default()
                }
            })
            .collect();
        let cpu = topo
            .cpus
            .iter()
            .map(|c| CpuSpec {
                id: c.id,
                package: Some(c.package),
                die: Some(c.die),
                core: Some(c.core),
                siblings: Some(c.siblings.to_list()),
                llc: Some(c.llc.as_ref().map(IdSet::to_list).unwrap_or_default()),
                online: Some(c.online),
            })
            .collect();
        let devices = topo
            .devices
            .iter()
            .map(|d| DeviceSpec {
                address: d.address.clone(),
                class: d.class,
                class_code: Some(d.class_code),
                node: d.node,
                names: d.names.clone(),
            })
            .collect();
        let symmetric = (0..topo.distances.len())
            .all(|i| (0..topo.distances.len()).all(|j| topo.distances[i][j] == topo.distances[j][i]));
        MachineFile {
            name: name.map(str::to_string),
            description: None,
            smt: None,
            cores_per_llc: None,
            asymmetric: !symmetric,
            possible: (topo.possible != topo.node_ids()).then(|| topo.possible.to_list()),
            distances: topo.distances.clone(),
            nodes,
            cpu,
            devices,
            sim: None,
        }
    }
}

/// Loads a machine file and builds its topology; errors name the file, the field and the reason.
pub fn load_topology(path: &Path) -> Result<Topology, MachineError> {
    let file = MachineFile::load(path)?;
    file.build().map_err(|e| e.in_file(&path.display().to_string()))
}

/// Parses machine-file text and builds its topology; `file` names the source in errors.
pub fn parse_topology(text: &str, format: Format, file: &str) -> Result<Topology, MachineError> {
    MachineFile::parse(text, format, file)?.build().map_err(|e| e.in_file(file))
}

/// Parses a size with a binary unit into kB: `"8G"` -> 8388608, `"1.5M"` -> 1536.
pub fn parse_size_kb(text: &str) -> Result<u64, String> {
    let t = text.trim();
    // Zero needs no unit (`numad -w 1:0`), and a sign is said as such ("unknown unit \"-1\"" said
    // nothing of what was wrong; review helper-55).
    if t.bytes().all(|b| b == b'0') && !t.is_empty() {
        return Ok(0);
    }
    if t.starts_with('-') {
        return Err(format!("{text:?}: a size cannot be negative"));
    }
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = (t[..split].trim(), t[split..].trim());
    let mult: u64 = match unit.to_ascii_uppercase().as_str() {
        "K" | "KB" | "KIB" => 1,
        "M" | "MB" | "MIB" => 1 << 10,
        "G" | "GB" | "GIB" => 1 << 20,
        "T" | "TB" | "TIB" => 1 << 30,
        "" => return Err(format!("{text:?} needs a unit: K, M, G or T (binary, as the kernel counts)")),
        _ => return Err(format!("{text:?}: unknown unit {unit:?}; use K, M, G or T")),
    };
    let bad = || format!("{text:?} is not a size like \"8G\" or \"1.5T\"");
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let too_big = || format!("{text:?} is too large");
    let whole = int.parse::<u64>().map_err(|_| too_big())?.checked_mul(mult).ok_or_else(too_big)?;
    if frac.is_empty() {
        return Ok(whole);
    }
    if frac.len() > 9 {
        return Err(bad());
    }
    let scale = 10u64.pow(frac.len() as u32);
    let part = frac.parse::<u64>().map_err(|_| bad())?.checked_mul(mult).ok_or_else(too_big)?;
    if part % scale != 0 {
        return Err(format!("{text:?} is not a whole number of kB"));
    }
    whole.checked_add(part / scale).ok_or_else(too_big)
}

/// Field name helpers: the file's own terms.
fn node_field(i: usize, name: &str) -> String {
    format!("nodes[{i}].{name}")
}

struct Builder<'a> {
    file: &'a MachineFile,
    /// File indexes of the nodes, sorted by node id.
    order: Vec<usize>,
    /// Parsed CPU list of each node, by file index.
    cpus: Vec<CpuSet>,
    /// (MemTotal, MemFree) kB by file index.
    mem: Vec<(u64, u64)>,
    /// Distances by file index.
    dist: Vec<Vec<u32>>,
}

impl<'a> Builder<'a> {
    fn new(file: &'a MachineFile) -> Result<Self, FieldError> {
        if file.nodes.is_empty() {
            return Err(FieldError::new("nodes", "no nodes; a machine has at least one"));
        }
        let mut seen: BTreeMap<u32, usize> = BTreeMap::new();
        for (i, n) in file.nodes.iter().enumerate() {
            if n.id > MAX_NODE_ID {
                return Err(FieldError::new(
                    node_field(i, "id"),
                    format!("{} is above {MAX_NODE_ID}, the largest node id Linux supports", n.id),
                ));
            }
            if let Some(j) = seen.insert(n.id, i) {
                return Err(FieldError::new(
                    node_field(i, "id"),
                    format!("duplicate node id {} (also nodes[{j}])", n.id),
                ));
            }
        }
        let order: Vec<usize> = seen.values().copied().collect();

        let mut cpus = Vec::with_capacity(file.nodes.len());
        let mut owner: BTreeMap<u32, usize> = BTreeMap::new();
        for (i, n) in file.nodes.iter().enumerate() {
            let set = IdSet::parse_list(&n.cpus).map_err(|e| FieldError::new(node_field(i, "cpus"), e.to_string()))?;
            for c in set.iter() {
                if let Some(j) = owner.insert(c, i) {
                    return Err(FieldError::new(
                        node_field(i, "cpus"),
                        format!("CPU {c} is also in nodes[{j}] (node {}); a CPU belongs to one node", file.nodes[j].id),
                    ));
                }
            }
            cpus.push(set);
        }

        let mut mem = Vec::with_capacity(file.nodes.len());
        for (i, n) in file.nodes.iter().enumerate() {
            mem.push(node_memory(i, n, &cpus[i])?);
        }

        let dist = check_distances(file)?;
        Ok(Builder { file, order, cpus, mem, dist })
    }

    fn build(self) -> Result<Topology, FieldError> {
        let file = self.file;
        let packages = self.packages()?;
        let mut generated: BTreeMap<u32, Cpu> = BTreeMap::new();
        let mut next_core: BTreeMap<u32, u32> = BTreeMap::new();
        let mut dies_used: BTreeMap<u32, u32> = BTreeMap::new();
        for &i in &self.order {
            let spec = &file.nodes[i];
            let set = &self.cpus[i];
            if set.is_empty() {
                for (field, given) in [
                    ("package", spec.package.is_some()),
                    ("die", spec.die.is_some()),
                    ("smt", spec.smt.is_some()),
                    ("cores_per_llc", spec.cores_per_llc.is_some()),
                ] {
                    if given {
                        return Err(FieldError::new(
                            node_field(i, field),
                            "given for a node without CPUs; it describes CPUs, and this node has none",
                        ));
                    }
                }
                continue;
            }
            let package = packages[i].expect("every CPU node has a package");
            let die = match spec.die {
                Some(d) => d,
                None => {
                    let d = dies_used.entry(package).or_insert(0);
                    *d += 1;
                    *d - 1
                }
            };
            let (smt, smt_field) = match (spec.smt, file.smt) {
                (Some(s), _) => (s, node_field(i, "smt")),
                (None, Some(s)) => (s, "smt".to_string()),
                (None, None) => (1, node_field(i, "cpus")),
            };
            if smt == 0 {
                return Err(FieldError::new(smt_field, "must be at least 1 thread per core"));
            }
            let list: Vec<u32> = set.iter().collect();
            let n = list.len() as u32;
            if n % smt != 0 {
                return Err(FieldError::new(
                    node_field(i, "cpus"),
                    format!("{n} CPUs do not divide into cores of {smt} threads (smt = {smt})"),
                ));
            }
            let cores = n / smt;
            let (per_llc, llc_field) = match (spec.cores_per_llc, file.cores_per_llc) {
                (Some(c), _) => (c, node_field(i, "cores_per_llc")),
                (None, Some(c)) => (c, "cores_per_llc".to_string()),
                (None, None) => (cores, node_field(i, "cores_per_llc")),
            };
            if per_llc == 0 {
                return Err(FieldError::new(llc_field, "must be at least 1 core per cache"));
            }
            if cores % per_llc != 0 {
                return Err(FieldError::new(
                    llc_field,
                    format!("node {}'s {cores} cores do not divide into last-level caches of {per_llc} cores", spec.id),
                ));
            }
            let threads = |k: u32| -> CpuSet { (0..smt).map(|t| list[(k + t * cores) as usize]).collect() };
            // One copy of each cache's set and each core's siblings, held by all their CPUs (a
            // copy each was 4 MB a topology at 65,536 CPUs, and the simulator holds three).
            let llcs: Vec<CpuSet> = (0..cores / per_llc)
                .map(|g| (g * per_llc..(g + 1) * per_llc).fold(CpuSet::new(), |acc, k| acc.union(&threads(k))).shared())
                .collect();
            let base = next_core.entry(package).or_insert(0);
            for k in 0..cores {
                let siblings = threads(k).shared();
                for c in siblings.iter() {
                    generated.insert(
                        c,
                        Cpu {
                            id: c,
                            node: spec.id,
                            package,
                            die,
                            core: *base + k,
                            siblings: siblings.clone(),
                            llc: Some(llcs[(k / per_llc) as usize].clone()),
                            online: true,
                        },
                    );
                }
            }
            *base += cores;
        }

        self.apply_cpu_overrides(&mut generated)?;
        let devices = self.devices()?;

        let nodes: Vec<Node> = self
            .order
            .iter()
            .map(|&i| {
                let id = file.nodes[i].id;
                let online: CpuSet = self.cpus[i].iter().filter(|c| generated[c].online).collect();
                Node {
                    id,
                    cpus: online,
                    mem_total_kb: self.mem[i].0,
                    mem_free_kb: self.mem[i].1,
                    mem_total_unknown: false,
                    mem_free_unknown: false,
                }
            })
            .collect();
        // A machine runs on at least one CPU: one without (every node's list empty, or every CPU
        // offline) was taken, and the simulator then blamed the workload (review helper-53).
        if nodes.iter().all(|n| n.cpus.is_empty()) {
            let field = match self.order.first() {
                Some(&i) if generated.is_empty() => node_field(i, "cpus"),
                _ => "cpus".to_string(),
            };
            return Err(FieldError::new(field, "no node has an online CPU: a machine needs at least one"));
        }
        let distances: Vec<Vec<u32>> =
            self.order.iter().map(|&a| self.order.iter().map(|&b| self.dist[a][b]).collect()).collect();
        let node_ids: IdSet = nodes.iter().map(|n| n.id).collect();
        let possible = match &file.possible {
            Some(text) => {
                let set = IdSet::parse_list(text).map_err(|e| FieldError::new("possible", e.to_string()))?;
                if let Some(missing) = node_ids.difference(&set).iter().next() {
                    return Err(FieldError::new(
                        "possible",
                        format!("does not contain node {missing}, which is online"),
                    ));
                }
                set
            }
            None => node_ids,
        };
        Ok(Topology { nodes, possible, distances, cpus: generated.into_values().collect(), devices })
    }

    /// Package of each node (by file index); `None` for CPU-less nodes.
    fn packages(&self) -> Result<Vec<Option<u32>>, FieldError> {
        let file = self.file;
        let cpu_nodes: Vec<usize> = self.order.iter().copied().filter(|&i| !self.cpus[i].is_empty()).collect();
        let given: Vec<usize> = cpu_nodes.iter().copied().filter(|&i| file.nodes[i].package.is_some()).collect();
        let mut out = vec![None; file.nodes.len()];
        if !given.is_empty() {
            if let Some(&i) = cpu_nodes.iter().find(|i| file.nodes[**i].package.is_none()) {
                return Err(FieldError::new(
                    node_field(i, "package"),
                    format!(
                        "missing while nodes[{}] gives one; give a package for every node with CPUs, or for none",
                        given[0]
                    ),
                ));
            }
            for &i in &cpu_nodes {
                out[i] = file.nodes[i].package;
            }
            return Ok(out);
        }
        // Infer: connected components of "distance <= SAME_SOCKET_MAX_DISTANCE", numbered in order
        // of their lowest node id.
        let mut next = 0;
        for (pos, &i) in cpu_nodes.iter().enumerate() {
            if out[i].is_some() {
                continue;
            }
            out[i] = Some(next);
            let mut stack = vec![i];
            while let Some(a) = stack.pop() {
                for &b in &cpu_nodes[pos..] {
                    let near = self.dist[a][b].min(self.dist[b][a]) <= SAME_SOCKET_MAX_DISTANCE;
                    if out[b].is_none() && near {
                        out[b] = Some(next);
                        stack.push(b);
                    }
                }
            }
            next += 1;
        }
        Ok(out)
    }

    fn apply_cpu_overrides(&self, cpus: &mut BTreeMap<u32, Cpu>) -> Result<(), FieldError> {
        let all: CpuSet = cpus.keys().copied().collect();
        // The kernel drops an offline CPU from its siblings' thread_siblings and shared_cpu_map
        // (drivers/base/cacheinfo.c, arch/x86/kernel/smpboot.c): do the same to generated sets.
        let offline: CpuSet = self.file.cpu.iter().filter(|s| s.online == Some(false)).map(|s| s.id).collect();
        if !offline.is_empty() {
            // Still one copy of each set for all its CPUs.
            let mut distinct = Distinct::default();
            for cpu in cpus.values_mut().filter(|c| !offline.contains(c.id)) {
                cpu.siblings = distinct.share(cpu.siblings.difference(&offline));
                cpu.llc = cpu.llc.as_ref().map(|l| distinct.share(l.difference(&offline)));
            }
        }
        let mut seen: BTreeMap<u32, usize> = BTreeMap::new();
        for (i, spec) in self.file.cpu.iter().enumerate() {
            let field = |name: &str| format!("cpu[{i}].{name}");
            if !all.contains(spec.id) {
                return Err(FieldError::new(field("id"), format!("CPU {} is in no node's cpus", spec.id)));
            }
            if let Some(j) = seen.insert(spec.id, i) {
                return Err(FieldError::new(
                    field("id"),
                    format!("CPU {} is described twice (also cpu[{j}])", spec.id),
                ));
            }
            let parse_set = |name: &str, text: &str| -> Result<CpuSet, FieldError> {
                let set = IdSet::parse_list(text).map_err(|e| FieldError::new(field(name), e.to_string()))?;
                if let Some(stray) = set.difference(&all).iter().next() {
                    return Err(FieldError::new(field(name), format!("names CPU {stray}, which is in no node's cpus")));
                }
                Ok(set)
            };
            let siblings = spec.siblings.as_deref().map(|t| parse_set("siblings", t)).transpose()?;
            if siblings.as_ref().is_some_and(|s| !s.contains(spec.id)) {
                return Err(FieldError::new(field("siblings"), format!("does not contain CPU {} itself", spec.id)));
            }
            let llc = match spec.llc.as_deref() {
                None => None,
                Some(t) if t.trim().is_empty() => Some(None),
                Some(t) => {
                    let set = parse_set("llc", t)?;
                    if !set.contains(spec.id) {
                        return Err(FieldError::new(field("llc"), format!("does not contain CPU {} itself", spec.id)));
                    }
                    Some(Some(set))
                }
            };
            let cpu = cpus.get_mut(&spec.id).expect("checked above");
            if let Some(p) = spec.package {
                cpu.package = p;
            }
            if let Some(d) = spec.die {
                cpu.die = d;
            }
            if let Some(c) = spec.core {
                cpu.core = c;
            }
            if let Some(s) = siblings {
                cpu.siblings = s;
            }
            if let Some(l) = llc {
                cpu.llc = l;
            }
            if let Some(o) = spec.online {
                cpu.online = o;
            }
        }
        Ok(())
    }

    fn devices(&self) -> Result<Vec<PciDevice>, FieldError> {
        let ids: IdSet = self.file.nodes.iter().map(|n| n.id).collect();
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        let mut out = Vec::with_capacity(self.file.devices.len());
        for (i, d) in self.file.devices.iter().enumerate() {
            let field = |name: &str| format!("devices[{i}].{name}");
            if d.address.trim().is_empty() {
                return Err(FieldError::new(field("address"), "empty; give the PCI address, e.g. 0000:41:00.0"));
            }
            if let Some(j) = seen.insert(d.address.as_str(), i) {
                return Err(FieldError::new(
                    field("address"),
                    format!("duplicate address {} (also devices[{j}])", d.address),
                ));
            }
            if let Some(n) = d.node {
                if !ids.contains(n) {
                    return Err(FieldError::new(
                        field("node"),
                        format!("unknown node {n}; the machine's nodes are {ids}"),
                    ));
                }
            }
            let class_code = d.class_code.unwrap_or_else(|| d.class.default_class_code());
            let implied = DeviceClass::from_class_code(class_code);
            if d.class_code.is_some() && implied != d.class && d.class != DeviceClass::Other {
                return Err(FieldError::new(
                    field("class_code"),
                    format!("{class_code:#08x} is a {} class code, but class = {:?}", implied.name(), d.class.name()),
                ));
            }
            out.push(PciDevice {
                address: d.address.clone(),
                class: d.class,
                class_code,
                node: d.node,
                names: d.names.clone(),
            });
        }
        out.sort_by(|a, b| a.address.cmp(&b.address));
        Ok(out)
    }
}

/// Most memory one node may have, kB: 1 EiB (2^50 kB). Source: a bound of ours, 2^14 times the
/// largest single system of 2026 (64 TiB). What it prevents: a typo of a unit (`16777216T`) making
/// byte totals over nodes overflow 64 bits.
pub const MAX_NODE_KB: u64 = 1 << 50;

/// (MemTotal, MemFree) kB of node `i`.
fn node_memory(i: usize, n: &NodeSpec, cpus: &CpuSet) -> Result<(u64, u64), FieldError> {
    let given = [n.memory.is_some(), n.mem_gb.is_some(), n.mem_mb.is_some()].iter().filter(|g| **g).count();
    if given > 1 {
        return Err(FieldError::new(node_field(i, "memory"), "give one of memory, mem_gb and mem_mb, not several"));
    }
    let (total, field) = if let Some(text) = &n.memory {
        (parse_size_kb(text).map_err(|r| FieldError::new(node_field(i, "memory"), r))?, "memory")
    } else if let Some(gb) = n.mem_gb {
        (gb.checked_mul(1 << 20).ok_or_else(|| FieldError::new(node_field(i, "mem_gb"), "too large"))?, "mem_gb")
    } else if let Some(mb) = n.mem_mb {
        (mb.checked_mul(1 << 10).ok_or_else(|| FieldError::new(node_field(i, "mem_mb"), "too large"))?, "mem_mb")
    } else if cpus.is_empty() {
        return Err(FieldError::new(
            node_field(i, "memory"),
            format!("missing, and node {} has no CPUs either; a node needs CPUs or memory", n.id),
        ));
    } else {
        return Err(FieldError::new(
            node_field(i, "memory"),
            format!("missing; node {} has CPUs {} and needs memory (e.g. memory = \"16G\")", n.id, cpus),
        ));
    };
    // 1 EiB a node: far above any machine, and far enough below 2^64 bytes that sums over nodes and
    // byte counts of it (kB x 1024) never overflow (16 EiB overflowed them; review helper-39).
    if total > MAX_NODE_KB {
        return Err(FieldError::new(
            node_field(i, field),
            format!("{total} kB is more than a node holds (at most 1 EiB)"),
        ));
    }
    if total == 0 {
        let reason = if cpus.is_empty() {
            format!("0, and node {} has no CPUs either; a node needs CPUs or memory", n.id)
        } else {
            format!("0 on node {} which has CPUs {}; a node with CPUs needs memory", n.id, cpus)
        };
        return Err(FieldError::new(node_field(i, field), reason));
    }
    let free = match &n.free {
        Some(text) => parse_size_kb(text).map_err(|r| FieldError::new(node_field(i, "free"), r))?,
        None => total,
    };
    if free > total {
        return Err(FieldError::new(node_field(i, "free"), format!("{free} kB is more than the node's {total} kB")));
    }
    Ok((total, free))
}

/// Checks the distance matrix (in file order) and returns it; a single node may omit it.
fn check_distances(file: &MachineFile) -> Result<Vec<Vec<u32>>, FieldError> {
    let n = file.nodes.len();
    if file.distances.is_empty() {
        if n == 1 {
            return Ok(vec![vec![LOCAL_DISTANCE]]);
        }
        return Err(FieldError::new("distances", format!("missing; {n} nodes need a {n} x {n} matrix")));
    }
    let d = &file.distances;
    if d.len() != n {
        return Err(FieldError::new(
            "distances",
            format!(
                "{} rows for {n} nodes; the matrix must be square, one row and column per entry of `nodes`",
                d.len()
            ),
        ));
    }
    for (r, row) in d.iter().enumerate() {
        if row.len() != n {
            return Err(FieldError::new(
                format!("distances[{r}]"),
                format!("{} entries for {n} nodes; the matrix must be square", row.len()),
            ));
        }
    }
    let at = |r: usize, c: usize| format!("distances[{r}][{c}]");
    for (r, row) in d.iter().enumerate() {
        for (c, &v) in row.iter().enumerate() {
            if v < LOCAL_DISTANCE {
                return Err(FieldError::new(
                    at(r, c),
                    format!("{v} is below 10, the local distance (SLIT values 0-9 are reserved)"),
                ));
            }
            if v > MAX_DISTANCE {
                return Err(FieldError::new(
                    at(r, c),
                    format!("{v} is above 255, the largest value a SLIT entry can hold"),
                ));
            }
        }
    }
    for (r, row) in d.iter().enumerate() {
        let local = row[r];
        if local != LOCAL_DISTANCE {
            return Err(FieldError::new(
                at(r, r),
                format!(
                    "{local} on the diagonal; a node's distance to itself must be 10 (the kernel rejects any other)"
                ),
            ));
        }
    }
    if !file.asymmetric {
        for (r, row) in d.iter().enumerate() {
            if let Some((c, &v)) = row.iter().enumerate().take(r).find(|&(c, &v)| v != d[c][r]) {
                return Err(FieldError::new(
                    at(r, c),
                    format!(
                        "{v} differs from distances[{c}][{r}] = {}; the matrix must be symmetric. Firmware can \
                         describe asymmetric links and the kernel passes them through: set `asymmetric = true` \
                         if this machine really has them",
                        d[c][r]
                    ),
                ));
            }
        }
    }
    Ok(d.clone())
}
/// Largest file [`read_description`] reads, bytes: 16 MiB. Machine, workload and daemon config
/// files are written by hand or generated from a machine's sysfs (the 288-core preset is 11 kB);
/// the cap turns a wrong path (`/dev/zero`, a disk image, a log) into an error in a moment, not a
/// read that fills memory or never ends.
pub const MAX_DESCRIPTION_BYTES: u64 = 16 << 20;

/// Reads a description file (machine, workload, daemon config) as UTF-8 text, refusing one larger
/// than [`MAX_DESCRIPTION_BYTES`] (the error says so; its kind is `InvalidData`).
pub fn read_description(path: &Path) -> std::io::Result<String> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.take(MAX_DESCRIPTION_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_DESCRIPTION_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {} MiB: not a description file", MAX_DESCRIPTION_BYTES >> 20),
        ));
    }
    String::from_utf8(bytes)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not UTF-8 text ({e})")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// How many separate copies of their sets the CPUs of `t` hold: (LLC sets, siblings sets).
    fn copies(t: &Topology) -> (usize, usize) {
        let llc: HashSet<_> = t.cpus.iter().filter_map(|c| c.llc.as_ref().map(IdSet::words_at)).collect();
        let sib: HashSet<_> = t.cpus.iter().map(|c| c.siblings.words_at()).collect();
        (llc.len(), sib.len())
    }

    #[test]
    fn cpus_of_one_cache_or_core_hold_one_copy_of_its_set() {
        // Every CPU held its own copy of its last-level cache's set and of its siblings: at
        // 65,536 CPUs 4 MB a topology, and the simulator holds three (scaling review). 16,384
        // CPUs, 8 cores (16 CPUs) a cache: 1,024 caches, 8,192 cores, and copies of the topology
        // share them too.
        let nodes: String = (0..4)
            .map(|i| {
                let (a, b) = (i * 2048, 8192 + i * 2048);
                format!("[[nodes]]\nid = {i}\ncpus = \"{a}-{},{b}-{}\"\nmem_gb = 64\n", a + 2047, b + 2047)
            })
            .collect();
        let text = format!("smt = 2\ncores_per_llc = 8\ndistances = [[10, 21, 21, 21], [21, 10, 21, 21], [21, 21, 10, 21], [21, 21, 21, 10]]\n{nodes}");
        let t = MachineFile::parse(&text, Format::Toml, "m").unwrap().build().unwrap();
        assert_eq!(t.cpus.len(), 16384);
        assert_eq!(copies(&t), (1024, 8192));
        let clone = t.clone();
        assert!(t
            .cpus
            .iter()
            .zip(&clone.cpus)
            .all(|(a, b)| a.llc.as_ref().unwrap().words_at() == b.llc.as_ref().unwrap().words_at()
                && a.siblings.words_at() == b.siblings.words_at()));
        // With a CPU offline, dropped from its mates' sets, as many copies still.
        let t = MachineFile::parse(&format!("{text}[[cpu]]\nid = 5\nonline = false\n"), Format::Toml, "m")
            .unwrap()
            .build()
            .unwrap();
        assert_eq!(t.cpu(8197).unwrap().siblings, IdSet::parse_list("8197").unwrap());
        // CPU 5 keeps the sets it had; its mates share the new ones.
        assert_eq!(copies(&t), (1025, 8193));
    }
}
