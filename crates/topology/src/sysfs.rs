//! Reading the machine from sysfs, under an overridable root.
//!
//! # Problem
//!
//! The kernel publishes the NUMA machine in three sysfs trees. We want one [`Topology`] value from
//! them, read the same way from the live system (`root = /`) and from a fixture directory captured
//! on another kernel (`root = fixtures/rig-6.12-4node`), with every oddity real kernels produce:
//! sparse node ids, nodes without CPUs, nodes without memory, offline CPUs, kernels without `die_id`,
//! guests without an L3 cache, PCI devices with no NUMA affinity.
//!
//! # Approach
//!
//! ```text
//!  ROOT/sys/devices/system/node/
//!      possible                       "0-7"       (ids the firmware could bring online)
//!      nodeN/  (one per online node)  the node set is the set of these directories, as libnuma's
//!         cpulist                     "0-3,8"     set_configured_nodes() sees it; `online` agrees
//!         meminfo                     "Node 0 MemTotal:  1234 kB" ... MemFree
//!         distance                    "10 21"     one entry per online node, in id order
//!  ROOT/sys/devices/system/cpu/
//!      cpuN/online                    "1"/"0"; absent = online (cpu0 on x86 cannot be unplugged)
//!      cpuN/topology/                 only for online CPUs:
//!         physical_package_id, die_id (absent before Linux 5.2 -> 0), core_id,
//!         thread_siblings_list
//!      cpuN/cache/indexK/             level, type, shared_cpu_list; the highest level that is not an
//!                                     instruction cache is the last-level cache (index3 on most x86)
//!      cpuN/nodeM                     link to the CPU's node; used for offline CPUs, which the
//!                                     node's cpulist omits
//!  ROOT/sys/bus/pci/devices/ADDR/
//!      class "0x020000", numa_node "-1" (-1 = no affinity), net/IFNAME, nvme/NAME, infiniband/NAME
//!  ROOT/sys/class/{net,block}/NAME, ROOT/sys/dev/block/MAJ:MIN
//!                                     links into sys/devices; [`device_node`] follows one and takes
//!                                     the nearest `numa_node` at or above the device (a block
//!                                     device's is on its PCI controller)
//! ```
//!
//! Files the kernel always writes for an object that exists (a node's `cpulist` and `distance`) are
//! required: their absence or a line that does not parse is a typed error naming the path and the
//! line. Files that depend on kernel version, architecture or configuration (`die_id`, `cache/`,
//! `online`, `possible`, the whole PCI tree, a device's `numa_node`) are optional and fall back to
//! documented defaults, and so are those other sysfs implementations leave out although the kernel
//! always writes them: a node's `meminfo` (its memory then unknown, `Node::mem_total_unknown`), a CPU's
//! `physical_package_id` and `core_id` (0; cores then told apart by their SMT siblings). gVisor's
//! sysfs has neither, and a launch must not fail for what it does not need.
//!
//! # Units and terms
//!
//! Memory is kB as the kernel prints it (`kB` in meminfo means KiB). Node ids and CPU ids are the
//! kernel's. A negative `physical_package_id` or `die_id` (some firmware and virtual machines report
//! -1 for "unknown") is read as 0.
//!
//! # Limitations
//!
//! - An offline CPU has no `topology/` directory, so its package, die and core read as 0 and its
//!   siblings as itself; only its node (from the `cpuN/nodeM` link or `nodeM/cpuN`) is real. An
//!   offline CPU whose node cannot be found is left out (it can run nothing until it comes online, and
//!   the next read will see it).
//! - PCI devices are kept only when work can usefully be placed near them: network (class 0x02, and
//!   InfiniBand 0x0c06), GPU and accelerators (0x03, 0x12), NVMe (0x0108) and other mass storage
//!   (0x01). Bridges, USB and the like are skipped.
//! - A PCI device that disappears while it is read (hot unplug) is skipped.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{DeviceError, TopologyError};
use crate::{Cpu, CpuSet, DeviceClass, IdSet, Node, PciDevice, Topology};

/// Reads the whole topology under `root` (use `/` for the running system).
pub fn read_topology(root: &Path) -> Result<Topology, TopologyError> {
    let node_dir = root.join("sys/devices/system/node");
    let cpu_dir = root.join("sys/devices/system/cpu");

    let node_ids = numbered_entries(&node_dir, "node")?;
    if node_ids.is_empty() {
        return Err(TopologyError::NoNuma { path: node_dir });
    }
    // Linux numbers nodes below MAX_NUMNODES (1024 at most): a larger id is no sysfs the kernel
    // wrote (node4294967295 sized a node set of 4 Gi bits: 1 GB; review helper-53).
    if let Some(&id) = node_ids.iter().find(|&&id| id > crate::machine::MAX_NODE_ID) {
        return Err(TopologyError::Inconsistent {
            path: node_dir.join(format!("node{id}")),
            reason: format!("node id {id} is above {}, the largest Linux supports", crate::machine::MAX_NODE_ID),
        });
    }
    let possible = match read_optional(&node_dir.join("possible"))? {
        Some(text) => parse_list(&node_dir.join("possible"), &text)?.union(&node_ids.iter().copied().collect()),
        None => node_ids.iter().copied().collect(),
    };

    let mut nodes = Vec::with_capacity(node_ids.len());
    let mut distances = Vec::with_capacity(node_ids.len());
    for &id in &node_ids {
        let dir = node_dir.join(format!("node{id}"));
        let cpus = read_node_cpus(&dir)?;
        let (total, free) = read_node_meminfo(&dir.join("meminfo"))?;
        let row = read_distance_row(&dir.join("distance"), node_ids.len())?;
        nodes.push(Node {
            id,
            cpus,
            mem_total_kb: total.unwrap_or(0),
            mem_free_kb: free.unwrap_or(0),
            mem_total_unknown: total.is_none(),
            mem_free_unknown: free.is_none(),
        });
        distances.push(row);
    }

    let cpus = read_cpus(&cpu_dir, &node_dir, &nodes)?;
    let devices = read_pci_devices(&root.join("sys/bus/pci/devices"))?;

    Ok(Topology { nodes, possible, distances, cpus, devices })
}

/// The node's CPUs: `cpulist`, or `cpumap` (mask form) on a tree that lacks the list form.
fn read_node_cpus(dir: &Path) -> Result<CpuSet, TopologyError> {
    let list = dir.join("cpulist");
    if let Some(text) = read_optional(&list)? {
        return parse_list(&list, &text);
    }
    let map = dir.join("cpumap");
    match read_optional(&map)? {
        Some(text) => IdSet::parse_mask(text.trim()).map_err(|e| malformed(&map, 1, text.trim(), &e.to_string())),
        None => Err(TopologyError::Missing { path: list }),
    }
}

/// `(MemTotal, MemFree)` in kB from a node's meminfo (`Node 0 MemTotal:  1234 kB`), each `None`
/// when the file is missing or lacks its line ([`Node::mem_total_unknown`]).
///
/// The kernel prints every line of the file for every node (drivers/base/node.c, node_read_meminfo;
/// a node without memory has `MemTotal: 0 kB`), but not every sysfs is the kernel's: gVisor's has
/// no meminfo, and a node going away can lose the file between the listing and the read. numactl
/// then shows the node's memory as `<not available>` and launches all the same (a missing file
/// was an error here, and with it every launch failed; review helper-56). A number that does not
/// parse stays an error naming the line.
fn read_node_meminfo(path: &Path) -> Result<(Option<u64>, Option<u64>), TopologyError> {
    let Some(text) = read_optional(path)? else { return Ok((None, None)) };
    let mut total = None;
    let mut free = None;
    for (i, line) in text.lines().enumerate() {
        let Some((key, value)) = line.split_once(':') else { continue };
        let slot = match key.split_whitespace().last() {
            Some("MemTotal") => &mut total,
            Some("MemFree") => &mut free,
            _ => continue,
        };
        let number = value.trim().strip_suffix("kB").map(str::trim).unwrap_or("");
        let kb = number.parse::<u64>().map_err(|_| malformed(path, i + 1, line, "expected a number of kB"))?;
        *slot = Some(kb);
    }
    Ok((total, free))
}

/// One row of the distance matrix: one number per online node, in node id order.
fn read_distance_row(path: &Path, nodes: usize) -> Result<Vec<u32>, TopologyError> {
    let text = read_required(path)?;
    let line = text.lines().next().unwrap_or("");
    let row = line
        .split_whitespace()
        .map(|t| t.parse::<u32>().map_err(|_| malformed(path, 1, line, &format!("distance {t:?} is not a number"))))
        .collect::<Result<Vec<_>, _>>()?;
    if row.len() != nodes {
        return Err(malformed(path, 1, line, &format!("{} distances for {nodes} online nodes", row.len())));
    }
    // A SLIT entry is one byte, 10 the local distance, 0-9 reserved: what a machine file may say
    // too (a tree with 0 or 4294967295 was read, exported, and its export refused; review
    // helper-53).
    if let Some(v) = row.iter().find(|&&v| !(10..=255).contains(&v)) {
        return Err(malformed(path, 1, line, &format!("distance {v} is outside 10..=255 (a SLIT entry)")));
    }
    Ok(row)
}

fn read_cpus(cpu_dir: &Path, node_dir: &Path, nodes: &[Node]) -> Result<Vec<Cpu>, TopologyError> {
    if !cpu_dir.is_dir() {
        return Err(TopologyError::Missing { path: cpu_dir.to_path_buf() });
    }
    let ids = numbered_entries(cpu_dir, "cpu")?;
    let global_online = match read_optional(&cpu_dir.join("online"))? {
        Some(text) => Some(parse_list(&cpu_dir.join("online"), &text)?),
        None => None,
    };
    let mut owner: BTreeMap<u32, u32> = BTreeMap::new();
    for node in nodes {
        for cpu in node.cpus.iter() {
            if let Some(prev) = owner.insert(cpu, node.id) {
                return Err(TopologyError::Inconsistent {
                    path: node_dir.join(format!("node{}/cpulist", node.id)),
                    reason: format!("CPU {cpu} is also listed by node {prev}"),
                });
            }
        }
    }
    for (&cpu, &node) in &owner {
        if ids.binary_search(&cpu).is_err() {
            return Err(TopologyError::Inconsistent {
                path: node_dir.join(format!("node{node}/cpulist")),
                reason: format!("lists CPU {cpu} but {} does not exist", cpu_dir.join(format!("cpu{cpu}")).display()),
            });
        }
    }

    let mut cpus = Vec::with_capacity(ids.len());
    // One copy of each siblings and cache set for all the CPUs that read it.
    let mut distinct = crate::machine::Distinct::default();
    for id in ids {
        let dir = cpu_dir.join(format!("cpu{id}"));
        let online = match read_optional(&dir.join("online"))? {
            Some(text) => match text.trim() {
                "1" => true,
                "0" => false,
                other => return Err(malformed(&dir.join("online"), 1, other, "expected 0 or 1")),
            },
            // No per-CPU file: the CPU cannot be hot-unplugged (cpu0 on x86) or the kernel has no
            // CPU hotplug; the global list says, and without it the CPU runs.
            None => global_online.as_ref().is_none_or(|set| set.contains(id)),
        };
        let node = match owner.get(&id) {
            Some(&n) => Some(n),
            None => node_of_unlisted_cpu(&dir, node_dir, id, nodes)?,
        };
        let Some(node) = node else { continue };
        let topo = dir.join("topology");
        let cpu = if topo.is_dir() {
            // Optional: gVisor's sysfs gives a CPU's topology masks without its ids (a package or
            // core read as 0 here; cores told apart by their siblings below).
            let package = read_id_or_zero(&topo.join("physical_package_id"), false)?;
            let die = read_id_or_zero(&topo.join("die_id"), false)?;
            let core = read_id_or_zero(&topo.join("core_id"), false)?;
            let siblings = distinct.share(read_siblings(&topo, id)?);
            let llc = read_llc(&dir.join("cache"))?.map(|l| distinct.share(l));
            Cpu { id, node, package, die, core, siblings, llc, online }
        } else {
            let siblings: CpuSet = [id].into_iter().collect();
            Cpu { id, node, package: 0, die: 0, core: 0, siblings, llc: None, online }
        };
        cpus.push(cpu);
    }
    cores_by_siblings(&mut cpus);
    Ok(cpus)
}

/// Where two online CPUs of one package and die share a core id without being each other's SMT
/// siblings, the ids do not tell cores apart, and every online CPU of that package and die takes
/// the lowest CPU of its siblings as its core id instead (as lscpu counts cores from
/// `thread_siblings`). arm64 device-tree machines number `core_id` from 0 in each cluster
/// (drivers/base/arch_topology.c, parse_cluster), and a sysfs without the ids (gVisor's, or no
/// `topology/` directory) reads every core as 0: whole packages were one core, and numad's and the
/// policy's core counts with them (review helper-56). Offline CPUs keep what they read.
fn cores_by_siblings(cpus: &mut [Cpu]) {
    let mut seen: BTreeMap<(u32, u32, u32), &Cpu> = BTreeMap::new();
    let mut ambiguous = std::collections::BTreeSet::new();
    for c in cpus.iter().filter(|c| c.online) {
        match seen.get(&(c.package, c.die, c.core)) {
            Some(other) if !other.siblings.contains(c.id) || !c.siblings.contains(other.id) => {
                ambiguous.insert((c.package, c.die));
            }
            Some(_) => {}
            None => {
                seen.insert((c.package, c.die, c.core), c);
            }
        }
    }
    for c in cpus.iter_mut().filter(|c| c.online && ambiguous.contains(&(c.package, c.die))) {
        c.core = c.siblings.first().unwrap_or(c.id);
    }
}

/// The node of a CPU no node's cpulist names (an offline CPU): the `cpuN/nodeM` link, else a
/// `nodeM/cpuN` link; `None` when neither exists.
fn node_of_unlisted_cpu(cpu: &Path, node_dir: &Path, id: u32, nodes: &[Node]) -> Result<Option<u32>, TopologyError> {
    let linked = numbered_entries(cpu, "node")?;
    if let Some(&n) = linked.iter().find(|n| nodes.iter().any(|node| node.id == **n)) {
        return Ok(Some(n));
    }
    Ok(nodes.iter().map(|n| n.id).find(|n| node_dir.join(format!("node{n}/cpu{id}")).exists()))
}

/// A `physical_package_id` / `die_id` / `core_id` file; -1 ("unknown") reads as 0.
fn read_id_or_zero(path: &Path, required: bool) -> Result<u32, TopologyError> {
    let text = if required {
        read_required(path)?
    } else {
        match read_optional(path)? {
            Some(t) => t,
            None => return Ok(0),
        }
    };
    let t = text.trim();
    let v: i64 = t.parse().map_err(|_| malformed(path, 1, t, "expected an integer"))?;
    u32::try_from(v.max(0)).map_err(|_| malformed(path, 1, t, "id out of range"))
}

fn read_siblings(topo: &Path, id: u32) -> Result<CpuSet, TopologyError> {
    for name in ["thread_siblings_list", "core_cpus_list"] {
        let path = topo.join(name);
        if let Some(text) = read_optional(&path)? {
            let mut set = parse_list(&path, &text)?;
            set.insert(id);
            return Ok(set);
        }
    }
    Ok([id].into_iter().collect())
}

/// The CPUs sharing the last-level cache: `shared_cpu_list` of the highest-level data or unified
/// cache under `cache/indexK`. `None` when the kernel exposes no cache information.
fn read_llc(cache: &Path) -> Result<Option<CpuSet>, TopologyError> {
    let mut best: Option<(u32, CpuSet)> = None;
    for k in numbered_entries(cache, "index")? {
        let dir = cache.join(format!("index{k}"));
        let (Some(level), Some(kind), Some(shared)) = (
            read_optional(&dir.join("level"))?,
            read_optional(&dir.join("type"))?,
            read_optional(&dir.join("shared_cpu_list"))?,
        ) else {
            continue;
        };
        if kind.trim() == "Instruction" {
            continue;
        }
        let level_path = dir.join("level");
        let level: u32 =
            level.trim().parse().map_err(|_| malformed(&level_path, 1, level.trim(), "expected a number"))?;
        let set = parse_list(&dir.join("shared_cpu_list"), &shared)?;
        if best.as_ref().is_none_or(|(l, _)| level > *l) {
            best = Some((level, set));
        }
    }
    Ok(best.map(|(_, set)| set))
}

fn read_pci_devices(dir: &Path) -> Result<Vec<PciDevice>, TopologyError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if is_absent(&e) => return Ok(Vec::new()),
        Err(source) => return Err(TopologyError::Io { path: dir.to_path_buf(), source }),
    };
    let mut addresses: Vec<String> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| TopologyError::Io { path: dir.to_path_buf(), source })?;
        addresses.push(entry.file_name().to_string_lossy().into_owned());
    }
    addresses.sort();
    let mut devices = Vec::new();
    for address in addresses {
        let dev = dir.join(&address);
        // A device that vanishes between the listing and this read was unplugged: skip it.
        let Some(class_text) = read_optional(&dev.join("class"))? else { continue };
        let t = class_text.trim();
        let class_code = u32::from_str_radix(t.trim_start_matches("0x"), 16)
            .map_err(|_| malformed(&dev.join("class"), 1, t, "expected a hexadecimal class code"))?;
        let class = DeviceClass::from_class_code(class_code);
        if class == DeviceClass::Other {
            continue;
        }
        let node = read_numa_node(&dev.join("numa_node"))?.and_then(|v| u32::try_from(v).ok());
        let names = device_names(&dev)?;
        devices.push(PciDevice { address, class, class_code, node, names });
    }
    Ok(devices)
}

/// A device's `numa_node` file as the kernel wrote it (-1: no affinity); `None` when absent.
fn read_numa_node(path: &Path) -> Result<Option<i64>, TopologyError> {
    let Some(text) = read_optional(path)? else { return Ok(None) };
    let t = text.trim();
    t.parse().map(Some).map_err(|_| malformed(path, 1, t, "expected an integer"))
}

/// A device named the way a user names it (numactl's `netdev:`, `block:`, `pci:`, `file:` specs),
/// to find its node with [`device_node`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceName<'a> {
    /// A network interface: `ROOT/sys/class/net/NAME`.
    Net(&'a str),
    /// A block device by kernel name: `ROOT/sys/class/block/NAME`.
    Block(&'a str),
    /// A PCI function, `[segment:]bus:device[.function]` in hexadecimal:
    /// `ROOT/sys/bus/pci/devices/SSSS:BB:DD.F`.
    Pci(&'a str),
    /// A block device by number (a device node's `st_rdev`, a file's `st_dev`):
    /// `ROOT/sys/dev/block/MAJOR:MINOR`.
    BlockNumber {
        /// Major number.
        major: u32,
        /// Minor number.
        minor: u32,
    },
}

/// The node the device `name` is attached to: the `numa_node` file of the device or of its
/// nearest parent below `ROOT/sys/devices` that has one (an NVMe namespace's is on its controller).
///
/// Errors name the device: a malformed name, no such device, a node of -1 ("no affinity"), or no
/// `numa_node` at all (a virtual device).
pub fn device_node(root: &Path, name: DeviceName<'_>) -> Result<u32, DeviceError> {
    let plain = |kind: &'static str, n: &str| {
        if n.is_empty() || n.contains('/') || n == "." || n == ".." {
            Err(DeviceError::BadName { kind, name: n.to_string() })
        } else {
            Ok(())
        }
    };
    let (dir, device) = match name {
        DeviceName::Net(n) => {
            plain("network device", n)?;
            (root.join("sys/class/net").join(n), format!("network device {n}"))
        }
        DeviceName::Block(n) => {
            plain("block device", n)?;
            (root.join("sys/class/block").join(n), format!("block device {n}"))
        }
        DeviceName::Pci(a) => {
            let addr = canonical_pci_address(a).ok_or_else(|| DeviceError::BadPciAddress { address: a.to_string() })?;
            (root.join("sys/bus/pci/devices").join(&addr), format!("PCI device {addr}"))
        }
        DeviceName::BlockNumber { major, minor } => {
            (root.join(format!("sys/dev/block/{major}:{minor}")), format!("block device {major}:{minor}"))
        }
    };
    let real = fs::canonicalize(&dir).map_err(|_| DeviceError::NotFound { device: device.clone(), path: dir })?;
    let devices = fs::canonicalize(root.join("sys/devices")).unwrap_or_else(|_| root.join("sys/devices"));
    let mut cur = real.as_path();
    loop {
        let file = cur.join("numa_node");
        if let Some(value) = read_numa_node(&file)? {
            return u32::try_from(value).map_err(|_| DeviceError::NoAffinity { device, value, path: file });
        }
        match cur.parent() {
            Some(p) if p.starts_with(&devices) && p != devices => cur = p,
            _ => return Err(DeviceError::NoNumaNodeFile { device, path: real }),
        }
    }
}

/// A PCI address as users write it, `[segment:]bus:device[.function]` in hexadecimal (`3b:00.0`,
/// `0:3b:0`), in sysfs's form `SSSS:BB:DD.F`; `None` when it does not parse or a part is out of
/// range (segment 16 bits, bus 8, device 5, function 3: the PCI address fields).
pub fn canonical_pci_address(s: &str) -> Option<String> {
    let (head, func) = match s.split_once('.') {
        Some((h, f)) => (h, u32::from_str_radix(f, 16).ok()?),
        None => (s, 0),
    };
    let parts: Vec<&str> = head.split(':').collect();
    let hex = |p: &str| if p.is_empty() { None } else { u32::from_str_radix(p, 16).ok() };
    let (seg, bus, dev) = match parts.as_slice() {
        [b, d] => (0, hex(b)?, hex(d)?),
        [s, b, d] => (hex(s)?, hex(b)?, hex(d)?),
        _ => return None,
    };
    if seg > 0xffff || bus > 0xff || dev > 0x1f || func > 7 {
        return None;
    }
    Some(format!("{seg:04x}:{bus:02x}:{dev:02x}.{func:x}"))
}

/// Interface and controller names bound to a device: `net/eth0`, `nvme/nvme0`, `infiniband/mlx5_0`,
/// directly under the device or one level down (virtio puts them under `virtioN/net/`).
fn device_names(dev: &Path) -> Result<Vec<String>, TopologyError> {
    const KINDS: [&str; 3] = ["net", "nvme", "infiniband"];
    let mut names = Vec::new();
    let mut dirs = vec![dev.to_path_buf()];
    if let Ok(entries) = fs::read_dir(dev) {
        let mut subs: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("virtio"))
            .map(|e| e.path())
            .collect();
        subs.sort();
        dirs.extend(subs);
    }
    for d in dirs {
        for kind in KINDS {
            let Ok(entries) = fs::read_dir(d.join(kind)) else { continue };
            let mut found: Vec<String> =
                entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
            found.sort();
            names.extend(found);
        }
    }
    Ok(names)
}

impl DeviceClass {
    /// The class of a PCI class code (the 24-bit `class` file: base class, subclass, prog-if).
    ///
    /// Base classes from the PCI Code and ID Assignment Specification: 0x01 mass storage (0x0108 is
    /// NVM Express), 0x02 network, 0x03 display, 0x12 processing accelerator, 0x0c06 InfiniBand.
    pub fn from_class_code(code: u32) -> Self {
        let base = (code >> 16) & 0xff;
        let sub = (code >> 8) & 0xff;
        match (base, sub) {
            (0x01, 0x08) => DeviceClass::Nvme,
            (0x01, _) => DeviceClass::Storage,
            (0x02, _) | (0x0c, 0x06) => DeviceClass::Network,
            (0x03, _) | (0x12, _) => DeviceClass::Gpu,
            _ => DeviceClass::Other,
        }
    }

    /// A representative class code for a class, used when a machine file gives none.
    pub fn default_class_code(self) -> u32 {
        match self {
            DeviceClass::Network => 0x02_00_00,
            DeviceClass::Gpu => 0x03_00_00,
            DeviceClass::Nvme => 0x01_08_02,
            DeviceClass::Storage => 0x01_06_01,
            DeviceClass::Other => 0xff_00_00,
        }
    }

    /// Lower-case name, as in machine files and JSON.
    pub fn name(self) -> &'static str {
        match self {
            DeviceClass::Network => "network",
            DeviceClass::Gpu => "gpu",
            DeviceClass::Nvme => "nvme",
            DeviceClass::Storage => "storage",
            DeviceClass::Other => "other",
        }
    }
}

/// Ids of the entries `PREFIXN` of a directory (`node0`, `cpu12`, `index3`), sorted; entries whose
/// suffix is not a number (`cpufreq`, `cpuidle`) are ignored. A missing directory has none.
fn numbered_entries(dir: &Path, prefix: &str) -> Result<Vec<u32>, TopologyError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if is_absent(&e) || e.kind() == io::ErrorKind::NotADirectory => return Ok(Vec::new()),
        Err(source) => return Err(TopologyError::Io { path: dir.to_path_buf(), source }),
    };
    let mut ids = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| TopologyError::Io { path: dir.to_path_buf(), source })?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if let Some(rest) = name.strip_prefix(prefix) {
            if !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()) {
                match rest.parse::<u32>() {
                    Ok(id) => ids.push(id),
                    // Skipped, the error then blamed another file (review helper-53).
                    Err(_) => {
                        return Err(TopologyError::Inconsistent {
                            path: dir.join(&*name),
                            reason: format!("{name}: the number is too large for an id"),
                        })
                    }
                }
            }
        }
    }
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

/// The CPUs the kernel isolated at boot (`isolcpus=`, its `domain` flag, the default):
/// `ROOT/sys/devices/system/cpu/isolated`, one CPU list, empty when none are. Absent before Linux
/// 4.12 and on fixture roots: then none. The kernel keeps these CPUs out of its load balancing and
/// out of every task's default affinity (measured in the rig's 6.12 guest booted with
/// `isolcpus=3`: the file read "3", pid 1 and every shell's `Cpus_allowed_list` 0-2), so only a
/// task placed there on purpose runs there. `nohz_full` CPUs are not included here
/// ([`nohz_full_cpus`]): on their own they stay in the balancing and in the default affinity.
pub fn isolated_cpus(root: &Path) -> Result<IdSet, TopologyError> {
    cpu_list_file(root, "isolated")
}

/// The CPUs booted with `nohz_full=` (adaptive ticks: no scheduler tick while one task runs):
/// `ROOT/sys/devices/system/cpu/nohz_full`, one CPU list; "(null)" or empty when none (how
/// kernels built with `CONFIG_NO_HZ_FULL` print it unset), absent without it and on fixture roots:
/// then none. A host partitioned for latency-bound work boots them for one pinned task each
/// (tuned's cpu-partitioning profile: `nohz_full=` its isolated cores, and systemd's default
/// affinity the others, without `isolcpus=`; `profiles/cpu-partitioning/tuned.conf`); a second
/// runnable task there brings the tick back.
pub fn nohz_full_cpus(root: &Path) -> Result<IdSet, TopologyError> {
    cpu_list_file(root, "nohz_full")
}

/// `ROOT/sys/devices/system/cpu/NAME`, a CPU list that reads "(null)" or empty for none.
fn cpu_list_file(root: &Path, name: &str) -> Result<IdSet, TopologyError> {
    Ok(cpu_list(root, name)?.unwrap_or_default())
}

/// One of the CPU lists of `ROOT/sys/devices/system/cpu` (`online`, `possible`, `present`,
/// `isolated`, `nohz_full`, `offline`), as the kernel prints them (`cpumap_print_list`): `None`
/// when the file is absent (fixture roots, old kernels), the CPUs otherwise ("(null)", how
/// `nohz_full` reads unset on some kernels, and an empty line are none). A line that is not a CPU
/// list is an error naming the file.
pub fn cpu_list(root: &Path, name: &str) -> Result<Option<IdSet>, TopologyError> {
    let path = root.join("sys/devices/system/cpu").join(name);
    match read_optional(&path)? {
        Some(text) if text.trim() == "(null)" => Ok(Some(IdSet::new())),
        Some(text) => parse_list(&path, &text).map(Some),
        None => Ok(None),
    }
}

fn parse_list(path: &Path, text: &str) -> Result<IdSet, TopologyError> {
    let line = text.lines().next().unwrap_or("").trim();
    IdSet::parse_list(line).map_err(|e| malformed(path, 1, line, &e.to_string()))
}

/// Whether an I/O error means "not there": the file does not exist, or the device behind it went
/// away while we looked (ENODEV/ENXIO from a sysfs attribute of an unplugged device).
fn is_absent(e: &io::Error) -> bool {
    // Linux errno values, include/uapi/asm-generic/errno-base.h.
    const ENXIO: i32 = 6;
    const ENODEV: i32 = 19;
    e.kind() == io::ErrorKind::NotFound || matches!(e.raw_os_error(), Some(ENXIO | ENODEV))
}

/// Most bytes read from one sysfs or procfs file of the topology, 1 MiB. Source: a bound of ours; the
/// largest such file (a node's `cpulist` or `distance` on a machine of thousands of CPUs, the
/// `meminfo`) is a few KiB. What it prevents: a `--root` tree whose file is a link to /dev/zero
/// (or a huge file) reading until memory runs out (review helper-39: 1 GB and growing).
pub const MAX_ATTRIBUTE_BYTES: u64 = 1 << 20;

fn read_optional(path: &Path) -> Result<Option<String>, TopologyError> {
    use std::io::Read as _;
    let io = |source| TopologyError::Io { path: path.to_path_buf(), source };
    let mut f = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if is_absent(&e) => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let mut bytes = Vec::new();
    match (&mut f).take(MAX_ATTRIBUTE_BYTES + 1).read_to_end(&mut bytes) {
        Ok(_) => {}
        Err(e) if is_absent(&e) => return Ok(None),
        Err(e) => return Err(io(e)),
    }
    if bytes.len() as u64 > MAX_ATTRIBUTE_BYTES {
        return Err(io(io::Error::new(io::ErrorKind::InvalidData, "larger than 1 MiB: not a sysfs attribute")));
    }
    String::from_utf8(bytes).map(Some).map_err(|e| io(io::Error::new(io::ErrorKind::InvalidData, e.to_string())))
}

fn read_required(path: &Path) -> Result<String, TopologyError> {
    read_optional(path)?.ok_or_else(|| TopologyError::Missing { path: path.to_path_buf() })
}

fn malformed(path: &Path, line: usize, text: &str, reason: &str) -> TopologyError {
    TopologyError::Malformed { path: path.to_path_buf(), line, text: text.to_string(), reason: reason.to_string() }
}

/// `text` with the kernel's `\\ooo` octal escapes decoded (`seq_path`/`mangle_path`: a space in a
/// mount point or a mapped file's path shows as `\\040` in mountinfo and numa_maps); a backslash
/// not followed by three octal digits of a byte value stays as it is. Bytes that are not UTF-8
/// are replaced (U+FFFD).
pub fn unescape_octal(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            let v = u32::from(b[i + 1] - b'0') * 64 + u32::from(b[i + 2] - b'0') * 8 + u32::from(b[i + 3] - b'0');
            if let Ok(byte) = u8::try_from(v) {
                out.push(byte);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod shared_tests {
    use std::path::Path;

    use crate::Topology;

    /// CPUs that read the same siblings or cache list hold one copy of the set, on this host's
    /// sysfs and on the trees captured from real kernels.
    #[test]
    fn cpus_reading_one_list_hold_one_set() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
        let mut shared = 0;
        for root in [Path::new("/").to_path_buf(), fixtures.join("host-6.18"), fixtures.join("rig-6.12-4node")] {
            let t = Topology::from_sysfs(&root).unwrap_or_else(|e| panic!("{}: {e}", root.display()));
            for a in &t.cpus {
                for b in t.cpus.iter().filter(|b| b.id > a.id) {
                    if let (Some(x), Some(y)) = (&a.llc, &b.llc) {
                        if x == y {
                            assert_eq!(x.words_at(), y.words_at(), "{}: CPUs {} and {}", root.display(), a.id, b.id);
                            shared += 1;
                        }
                    }
                    if a.siblings == b.siblings {
                        assert_eq!(a.siblings.words_at(), b.siblings.words_at(), "{}", root.display());
                    }
                }
            }
        }
        assert!(shared > 0, "no two CPUs share a last-level cache");
    }
}

#[cfg(test)]
mod unescape_tests {
    use super::unescape_octal;

    /// A file of a `--root` tree that never ends (a link to /dev/zero) is an error after 1 MiB, not
    /// a read until memory runs out (review helper-39).
    #[test]
    fn an_endless_attribute_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("possible");
        std::os::unix::fs::symlink("/dev/zero", &p).unwrap();
        let e = super::read_optional(&p).unwrap_err().to_string();
        assert!(e.contains("larger than 1 MiB"), "{e}");
        assert_eq!(super::read_optional(&d.path().join("absent")).unwrap(), None);
    }

    #[test]
    fn octal_escapes_decode_as_the_kernel_writes_them() {
        assert_eq!(unescape_octal("/mnt/a\\040b"), "/mnt/a b");
        assert_eq!(unescape_octal("tab\\011nl\\012bs\\134"), "tab\tnl\nbs\\");
        assert_eq!(unescape_octal("end\\040"), "end ");
        // Not an escape: too few digits, not octal, or past a byte.
        assert_eq!(unescape_octal("a\\04"), "a\\04");
        assert_eq!(unescape_octal("a\\089"), "a\\089");
        assert_eq!(unescape_octal("a\\400"), "a\\400");
        assert_eq!(unescape_octal("caf\u{e9}"), "caf\u{e9}");
    }
}
