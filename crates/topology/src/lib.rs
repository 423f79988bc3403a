//! The machine numapilot places work on: NUMA nodes, CPUs, memory, distances and devices.
//!
//! A [`Topology`] is an immutable value. It is read once from sysfs (`sysfs` module, with an
//! overridable root so fixtures from other kernels can be read), from a machine file describing a
//! machine that is not here (`machine` module), or from a built-in preset (`presets` module).
//! Everything above this crate (observation, model, policy, simulator) takes a `&Topology`.
//!
//! ```text
//!   Topology
//!   ├── nodes[]      kernel id (sparse: 0 and 8 is legal), CPUs, MemTotal/MemFree
//!   ├── distances    dense square matrix, row/column i = nodes[i]  (SLIT: 10 = local)
//!   ├── cpus[]       id, node, package, die, core, SMT siblings, LLC, online
//!   └── devices[]    PCI address, class (network/gpu/nvme/...), numa_node
//! ```
//!
//! Node ids are the kernel's. A *dense index* (position in `nodes`) exists only to index the
//! distance matrix and per-node arrays; the two are never mixed: ids are `u32` named `id`/`node`,
//! indexes are `usize` named `idx`.
//!
//! Derived from a topology: the distance tier between two nodes (`tiers` module: local, same
//! socket, one hop, far), and its printed forms (`render` module: `numactl --hardware` text, a tree,
//! JSON). Readers fail with typed errors (`error` module) that name the file, line or field.
//!
//! ```
//! use numapilot_topology::{render, Tier, Topology};
//!
//! let t = Topology::preset("article-4n96").unwrap();
//! assert_eq!(t.tier(0, 1), Tier::SameSocket);
//! assert_eq!(t.tier(0, 2), Tier::OneHop);
//! assert!(render::numactl_hardware(&t).starts_with("available: 4 nodes (0-3)\n"));
//! ```

#![deny(missing_docs)]

pub mod error;
pub mod machine;
pub mod presets;
pub mod render;
pub mod set;
pub mod sysfs;
pub mod tiers;
pub mod words;
/// Work counters for tests (`work_counters!`), expanded by the crates that count.
mod work;

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use error::{DeviceError, FieldError, MachineError, TopologyError};
pub use machine::MachineFile;
pub use set::{CpuSet, IdSet, NodeSet, SetParseError};
pub use tiers::TierMatrix;
pub use words::plural;

/// A NUMA node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// Kernel node id (`/sys/devices/system/node/nodeN`).
    pub id: u32,
    /// CPUs on this node (may be empty: a memory-only node, e.g. CXL or a paper's memory blade).
    pub cpus: CpuSet,
    /// MemTotal of the node, kB (`nodeN/meminfo`). Zero for a node without memory.
    pub mem_total_kb: u64,
    /// MemFree of the node, kB, when it was read. For machine files and presets, equal to total.
    pub mem_free_kb: u64,
    /// The node's `meminfo` is missing or has no MemTotal line (gVisor's sysfs writes a node's
    /// `cpulist`, `cpumap` and `distance` only, and a node going away leaves its directory listed
    /// a moment longer): `mem_total_kb` reads 0 and `numactl --hardware` says `<not available>`,
    /// as for libnuma's `numa_node_size64` failing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mem_total_unknown: bool,
    /// The same for MemFree (`mem_free_kb` reads 0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mem_free_unknown: bool,
}

impl Node {
    /// Whether the node has memory: MemTotal above zero, or not known (its meminfo unreadable:
    /// numactl binds to such a node, going by Mems_allowed, and so does ours; taken for a node
    /// without memory, `--membind` to it was refused; review helper-62).
    pub fn has_memory(&self) -> bool {
        self.mem_total_kb > 0 || self.mem_total_unknown
    }

    /// What the node has: `node 1: CPUs 2-3, memory 4096 MiB`; `CPUs none` for a node without
    /// CPUs (a memory-only node, or one whose CPUs are offline), `no memory` for a node without
    /// memory, `memory of unknown size` when its MemTotal could not be read.
    pub fn describe(&self) -> String {
        let mem = if self.mem_total_unknown {
            "memory of unknown size".to_string()
        } else if self.mem_total_kb == 0 {
            "no memory".to_string()
        } else {
            format!("memory {} MiB", self.mem_total_kb / 1024)
        };
        format!("node {}: CPUs {}, {mem}", self.id, self.cpus.to_list_or_none())
    }

    /// Whether the node has no CPUs (a memory-only node).
    pub fn is_cpuless(&self) -> bool {
        self.cpus.is_empty()
    }
}

/// A logical CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cpu {
    /// Kernel CPU id.
    pub id: u32,
    /// Kernel id of the node the CPU belongs to.
    pub node: u32,
    /// Physical package (socket) id, `topology/physical_package_id`.
    pub package: u32,
    /// Die id, `topology/die_id` (0 when the kernel does not say). Kernels differ on its scope:
    /// numbered within the package on some, unique across the machine on others (the 6.12 rig
    /// guests report die 1 for package 1), so identify a die by `(package, die)`.
    pub die: u32,
    /// Core id, `topology/core_id` (unique within a package/die, not machine-wide).
    pub core: u32,
    /// SMT siblings including this CPU, `topology/thread_siblings_list`.
    pub siblings: CpuSet,
    /// CPUs sharing this CPU's last-level cache (`cache/index3/shared_cpu_list`, else the highest
    /// index present); `None` when the kernel exposes no cache information.
    pub llc: Option<CpuSet>,
    /// Whether the CPU is online.
    pub online: bool,
}

/// What a PCI device is, for placing work near it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceClass {
    /// Network controller (PCI class 0x02).
    Network,
    /// Display / 3D controller, GPU (0x03) or processing accelerator (0x12).
    Gpu,
    /// NVMe controller (0x0108).
    Nvme,
    /// Other mass storage (0x01, not NVMe).
    Storage,
    /// Anything else.
    Other,
}

/// A PCI device and the node it hangs off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PciDevice {
    /// PCI address, e.g. `0000:3b:00.0`.
    pub address: String,
    /// Class derived from the PCI class code.
    pub class: DeviceClass,
    /// Raw PCI class code (`class` file, e.g. 0x020000).
    pub class_code: u32,
    /// Kernel node id from `numa_node`, `None` when the kernel reports -1 (no affinity).
    pub node: Option<u32>,
    /// Interface or block names bound to it, when known (`net/eth0` -> `eth0`, `nvme/nvme0`).
    pub names: Vec<String>,
}

/// Distance tier between two nodes, derived from the distance matrix.
///
/// The rule (see the `tiers` module) is relative to the machine: one hop is the class of the
/// machine's smallest cross-socket distance, so 21 on a Xeon and 32 on a 2-socket EPYC are both
/// `OneHop`, while 32 behind 21 on a 4-socket ring is `Far`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tier {
    /// The node itself (distance 10 in SLIT terms).
    Local,
    /// Another node in the same package (SNC/NPS sub-node or another die, typically 11-12; the
    /// die pair of an Opteron at 16), or memory attached to this socket (a CPU-less node nearest to it).
    SameSocket,
    /// One interconnect hop away: the machine's smallest cross-socket distance and anything within
    /// 25% of it (e.g. 20-21, 22 on Opteron servers, 32 on a 2-socket EPYC).
    OneHop,
    /// Further: a second hop or a slower fabric (e.g. 32 behind 21, 160/200 to another
    /// NumaConnect server).
    Far,
}

/// The whole machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    /// Online nodes, sorted by kernel id. Position in this vector is the node's dense index.
    pub nodes: Vec<Node>,
    /// Possible nodes (`node/possible`), a superset of the online ones.
    pub possible: NodeSet,
    /// Distance matrix over `nodes`, dense: `distances[i][j]` for `nodes[i]` -> `nodes[j]`.
    pub distances: Vec<Vec<u32>>,
    /// All CPUs the kernel knows of (online or not), sorted by id.
    pub cpus: Vec<Cpu>,
    /// PCI devices with their node.
    pub devices: Vec<PciDevice>,
}

impl Topology {
    /// A uniform synthetic machine: `nodes` nodes (ids 0..nodes) of `cpus_per_node` CPUs each
    /// (numbered node by node, one package per node, no SMT, one LLC per node) and `mem_kb_per_node` kB
    /// of memory each (all free), at distance 10 locally and `remote_distance` between nodes. For
    /// tests, examples and benchmarks that need a machine of a given shape without a machine file.
    pub fn uniform(nodes: u32, cpus_per_node: u32, mem_kb_per_node: u64, remote_distance: u32) -> Topology {
        let mut ns = Vec::new();
        let mut cpus = Vec::new();
        for n in 0..nodes {
            let set: CpuSet = (n * cpus_per_node..(n + 1) * cpus_per_node).collect();
            let llc = set.clone().shared();
            for c in set.iter() {
                cpus.push(Cpu {
                    id: c,
                    node: n,
                    package: n,
                    die: 0,
                    core: c,
                    siblings: std::iter::once(c).collect(),
                    llc: Some(llc.clone()),
                    online: true,
                });
            }
            ns.push(Node {
                id: n,
                cpus: set,
                mem_total_kb: mem_kb_per_node,
                mem_free_kb: mem_kb_per_node,
                mem_total_unknown: false,
                mem_free_unknown: false,
            });
        }
        let distances =
            (0..nodes).map(|i| (0..nodes).map(|j| if i == j { 10 } else { remote_distance }).collect()).collect();
        Topology { possible: (0..nodes).collect(), nodes: ns, distances, cpus, devices: Vec::new() }
    }

    /// Dense index of the node with kernel id `id`.
    pub fn node_idx(&self, id: u32) -> Option<usize> {
        self.nodes.binary_search_by_key(&id, |n| n.id).ok()
    }

    /// The node with kernel id `id`.
    pub fn node(&self, id: u32) -> Option<&Node> {
        self.node_idx(id).map(|i| &self.nodes[i])
    }

    /// Kernel ids of the online nodes.
    pub fn node_ids(&self) -> NodeSet {
        self.nodes.iter().map(|n| n.id).collect()
    }

    /// Distance between two nodes by kernel id.
    pub fn distance(&self, from: u32, to: u32) -> Option<u32> {
        Some(self.distances[self.node_idx(from)?][self.node_idx(to)?])
    }

    /// The CPU with kernel id `id`.
    pub fn cpu(&self, id: u32) -> Option<&Cpu> {
        self.cpus.binary_search_by_key(&id, |c| c.id).ok().map(|i| &self.cpus[i])
    }

    /// How the online CPUs changed from `before` to this topology, with what each node has now,
    /// its CPUs and its memory: `online CPUs 0-3 -> 0-1 (node 0: CPUs 0-1, memory 3968 MiB, node
    /// 1: CPUs none, memory 4096 MiB)` (CPU hotplug messages). A node's memory is its MemTotal as
    /// read with this topology ([`Node::describe`]), so a node left without CPUs is told from one
    /// left with nothing.
    pub fn cpu_change_from(&self, before: &Topology) -> String {
        let nodes: Vec<String> = self.nodes.iter().map(Node::describe).collect();
        format!(
            "online CPUs {} -> {} ({})",
            before.usable_cpus().to_list_or_none(),
            self.usable_cpus().to_list_or_none(),
            nodes.join(", ")
        )
    }

    /// All online CPUs.
    pub fn online_cpus(&self) -> CpuSet {
        self.cpus.iter().filter(|c| c.online).map(|c| c.id).collect()
    }

    /// Online CPUs that their node's CPU list names: the CPUs a thread can be placed on. The same
    /// as [`Topology::online_cpus`] except when sysfs was read mid-hotplug: a CPU coming back
    /// reads `online` 1 in its own file before its node's `cpulist` names it (the rig's 2-node
    /// guest: node 1 read "2" with CPUs 2 and 3 both online), and such a CPU is not placeable yet.
    pub fn usable_cpus(&self) -> CpuSet {
        self.online_cpus().intersection(&self.listed_cpus())
    }

    /// The CPUs the nodes' CPU lists name, together.
    pub fn listed_cpus(&self) -> CpuSet {
        self.nodes.iter().fold(CpuSet::new(), |acc, n| acc.union(&n.cpus))
    }

    /// Makes a topology read mid-hotplug conservative against `online`, the CPUs
    /// `/sys/devices/system/cpu/online` lists: a CPU that file leaves out reads offline, and a
    /// node lists only CPUs that read online. sysfs is read file by file, so during a hotplug
    /// operation the three sources (`online`, a CPU's own file, its node's cpulist) can disagree;
    /// after this no CPU any of them calls offline is placeable. Changes nothing on a topology
    /// that agrees with the file.
    pub fn clip_to_online(&mut self, online: &CpuSet) {
        for c in &mut self.cpus {
            c.online &= online.contains(c.id);
        }
        let on = self.online_cpus();
        for n in &mut self.nodes {
            n.cpus = n.cpus.intersection(&on);
        }
    }

    /// Takes `reserved` out of the nodes' CPU lists: CPUs placement must never use (the kernel's
    /// isolated CPUs, an operator's `reserved_cpus`, as numad's `-R`). They stay in `cpus` and stay
    /// online, so a thread seen running there still has a CPU, but they are no longer
    /// [`Topology::usable_cpus`]: no node offers them, [`Topology::cpus_of_nodes`] leaves them out,
    /// and a node left with none is CPU-less to its users (its memory still counts). Apply it again
    /// to a topology read anew (after CPU hotplug). Idempotent; an empty set changes nothing.
    pub fn reserve(&mut self, reserved: &CpuSet) {
        if reserved.is_empty() {
            return;
        }
        for n in &mut self.nodes {
            n.cpus = n.cpus.difference(reserved);
        }
    }

    /// The node whose CPU list names `cpu`: where a thread running on it counts. `None` for a CPU
    /// offline, reserved ([`Topology::reserve`]) or unknown.
    pub fn node_listing(&self, cpu: u32) -> Option<u32> {
        let node = self.cpu(cpu)?.node;
        self.node(node).filter(|n| n.cpus.contains(cpu)).map(|n| n.id)
    }

    /// Union of the CPUs of the given nodes.
    pub fn cpus_of_nodes(&self, nodes: &NodeSet) -> CpuSet {
        self.nodes.iter().filter(|n| nodes.contains(n.id)).fold(CpuSet::new(), |acc, n| acc.union(&n.cpus))
    }

    /// Online nodes whose CPUs meet `cpus`.
    pub fn nodes_of_cpus(&self, cpus: &CpuSet) -> NodeSet {
        self.nodes.iter().filter(|n| !n.cpus.intersection(cpus).is_empty()).map(|n| n.id).collect()
    }

    /// Online nodes with memory ([`Node::has_memory`]: what the kernel's `has_memory` list holds
    /// for an online node).
    pub fn memory_nodes(&self) -> NodeSet {
        self.nodes.iter().filter(|n| n.has_memory()).map(|n| n.id).collect()
    }

    /// Reads the machine from sysfs under `root` (`/` for this machine, or a fixture directory).
    pub fn from_sysfs(root: &Path) -> Result<Topology, TopologyError> {
        sysfs::read_topology(root)
    }

    /// Reads a machine file (TOML or JSON); errors name the file, the field and the reason.
    pub fn from_machine_file(path: &Path) -> Result<Topology, MachineError> {
        machine::load_topology(path)
    }

    /// A built-in machine by name (see [`presets::names`]); an unknown name is an error listing the
    /// valid ones.
    pub fn preset(name: &str) -> Result<Topology, TopologyError> {
        presets::topology(name)
    }

    /// Names of the built-in machines.
    pub fn preset_names() -> Vec<&'static str> {
        presets::names()
    }

    /// Distinct physical packages of the online CPUs.
    pub fn packages(&self) -> IdSet {
        self.cpus.iter().filter(|c| c.online).map(|c| c.package).collect()
    }

    /// Number of distinct online cores (package, die, core).
    pub fn core_count(&self) -> usize {
        let cores: std::collections::BTreeSet<(u32, u32, u32)> =
            self.cpus.iter().filter(|c| c.online).map(|c| (c.package, c.die, c.core)).collect();
        cores.len()
    }
}
