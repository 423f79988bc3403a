//! What the launcher needs to know about the machine and this process.
//!
//! ```text
//!   numapilot_topology::Topology::from_sysfs(ROOT)   online nodes, their CPUs, MemTotal, online CPUs
//!   STATUS  Mems_allowed_list / Cpus_allowed_list     this process's cpuset (and affinity)
//!   ROOT/sys/class/{net,block}/NAME, ROOT/sys/bus/pci/devices/ADDR, ROOT/sys/dev/block/MAJ:MIN
//!                                                     device forms of node specs: the nearest
//!                                                     `numa_node` file at or above the device
//! ```
//!
//! A node "has memory" when its MemTotal is above zero (what the kernel's `has_memory` list says
//! for a node that is online).

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use numapilot_topology::{CpuSet, IdSet, NodeSet, Topology};

use super::nodespec::{Device, DeviceNodes};

/// The machine and this process, as far as the launcher is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemView {
    /// The sysfs root (`/` live, a fixture directory in tests), for device lookups.
    pub root: PathBuf,
    /// Online nodes.
    pub online_nodes: NodeSet,
    /// CPUs of each online node.
    pub node_cpus: BTreeMap<u32, CpuSet>,
    /// Nodes with memory.
    pub memory_nodes: NodeSet,
    /// Online CPUs.
    pub online_cpus: CpuSet,
    /// `Mems_allowed_list` of this process.
    pub mems_allowed: NodeSet,
    /// `Cpus_allowed_list` of this process.
    pub cpus_allowed: CpuSet,
}

impl SystemView {
    /// Reads the live system.
    pub fn live() -> Result<SystemView> {
        SystemView::read(Path::new("/"), Path::new("/proc/self/status"))
    }

    /// Reads sysfs under `root` and the process status file `status`.
    pub fn read(root: &Path, status: &Path) -> Result<SystemView> {
        let topo =
            Topology::from_sysfs(root).with_context(|| format!("reading the topology under {}", root.display()))?;
        let text = fs::read_to_string(status).with_context(|| format!("reading {}", status.display()))?;
        SystemView::from_parts(root, &topo, &text).with_context(|| format!("in {}", status.display()))
    }

    /// Builds the view from a topology and the text of a `/proc/PID/status` file.
    pub fn from_parts(root: &Path, topo: &Topology, status: &str) -> Result<SystemView> {
        let field = |name: &str| -> Result<IdSet> {
            let v = status.lines().find_map(|l| l.strip_prefix(name)).with_context(|| format!("no {name} line"))?;
            IdSet::parse_list(v).with_context(|| format!("bad {name} line"))
        };
        Ok(SystemView {
            root: root.to_path_buf(),
            online_nodes: topo.node_ids(),
            node_cpus: topo.nodes.iter().map(|n| (n.id, n.cpus.clone())).collect(),
            memory_nodes: topo.nodes.iter().filter(|n| n.mem_total_kb > 0).map(|n| n.id).collect(),
            online_cpus: topo.online_cpus(),
            mems_allowed: field("Mems_allowed_list:")?,
            cpus_allowed: field("Cpus_allowed_list:")?,
        })
    }

    /// Union of the CPUs of `nodes`.
    pub fn cpus_of(&self, nodes: &NodeSet) -> CpuSet {
        nodes.iter().filter_map(|n| self.node_cpus.get(&n)).fold(CpuSet::new(), |a, c| a.union(c))
    }

    /// Nodes whose CPUs intersect `cpus`.
    pub fn nodes_of_cpus(&self, cpus: &CpuSet) -> NodeSet {
        self.node_cpus.iter().filter(|(_, c)| !c.intersection(cpus).is_empty()).map(|(n, _)| *n).collect()
    }

    fn device_dir_node(&self, dir: &Path, what: &str) -> Result<u32, String> {
        let real = fs::canonicalize(dir).map_err(|_| format!("no {what} ({} does not exist)", dir.display()))?;
        let devices = fs::canonicalize(self.root.join("sys/devices")).unwrap_or_else(|_| self.root.join("sys/devices"));
        let mut cur = real.as_path();
        loop {
            let f = cur.join("numa_node");
            if let Ok(s) = fs::read_to_string(&f) {
                let v: i64 =
                    s.trim().parse().map_err(|_| format!("{}: unexpected content {:?}", f.display(), s.trim()))?;
                return u32::try_from(v)
                    .map_err(|_| format!("{what} has no NUMA node (the kernel reports {v} in {})", f.display()));
            }
            match cur.parent() {
                Some(p) if p.starts_with(&devices) && p != devices => cur = p,
                _ => return Err(format!("{what} has no NUMA node (no numa_node above {})", real.display())),
            }
        }
    }
}

impl DeviceNodes for SystemView {
    fn device_node(&self, device: Device, name: &str) -> Result<u32, String> {
        let plain_name = |kind: &str| -> Result<(), String> {
            if name.is_empty() || name.contains('/') || name == "." || name == ".." {
                Err(format!("bad {kind} name {name:?}"))
            } else {
                Ok(())
            }
        };
        match device {
            Device::Netdev => {
                plain_name("network device")?;
                self.device_dir_node(&self.root.join("sys/class/net").join(name), &format!("network device {name}"))
            }
            Device::Block => {
                plain_name("block device")?;
                self.device_dir_node(&self.root.join("sys/class/block").join(name), &format!("block device {name}"))
            }
            Device::Pci => {
                let addr = parse_pci(name).ok_or_else(|| {
                    format!("bad PCI address {name:?} (expected [segment:]bus:device[.function], hexadecimal)")
                })?;
                self.device_dir_node(&self.root.join("sys/bus/pci/devices").join(&addr), &format!("PCI device {addr}"))
            }
            Device::File => {
                let md = fs::metadata(name).map_err(|e| format!("cannot stat {name}: {e}"))?;
                let ft = md.file_type();
                let dev = if ft.is_block_device() { md.rdev() } else { md.dev() };
                let (maj, min) = (libc::major(dev), libc::minor(dev));
                self.device_dir_node(
                    &self.root.join(format!("sys/dev/block/{maj}:{min}")),
                    &format!("block device {maj}:{min} behind {name}"),
                )
            }
            Device::Ip => Err(format!(
                "ip:{name} is not supported (it needs a routing-table lookup); \
                 use netdev:IFNAME with the interface {name} is reached through"
            )),
        }
    }
}

/// `[seg:]bus:dev[.fn]` in hex to sysfs's `SSSS:BB:DD.F`.
fn parse_pci(s: &str) -> Option<String> {
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use numapilot_topology::{Cpu, Node};

    /// A hand-built topology: `nodes` as (id, cpulist, MemTotal kB); every listed CPU online.
    pub(crate) fn topo(nodes: &[(u32, &str, u64)]) -> Topology {
        let nodes: Vec<Node> = nodes
            .iter()
            .map(|(id, cpus, mem)| Node {
                id: *id,
                cpus: CpuSet::parse_list(cpus).unwrap(),
                mem_total_kb: *mem,
                mem_free_kb: *mem,
            })
            .collect();
        let mut cpus: Vec<Cpu> = nodes
            .iter()
            .flat_map(|n| {
                n.cpus.iter().map(move |c| Cpu {
                    id: c,
                    node: n.id,
                    package: 0,
                    die: 0,
                    core: c,
                    siblings: std::iter::once(c).collect(),
                    llc: None,
                    online: true,
                })
            })
            .collect();
        cpus.sort_by_key(|c| c.id);
        let n = nodes.len();
        Topology {
            possible: nodes.iter().map(|n| n.id).collect(),
            distances: (0..n).map(|i| (0..n).map(|j| if i == j { 10 } else { 20 }).collect()).collect(),
            nodes,
            cpus,
            devices: Vec::new(),
        }
    }

    /// A sparse machine: nodes 0 and 8, node 8 memory-only; in a temp dir a NIC on node 8 reached
    /// through a class symlink, and an NVMe namespace whose numa_node (-1) is on its PCI parent.
    fn machine() -> (tempdir::TempDir, SystemView) {
        let t = tempdir::TempDir::new();
        let r = t.path();
        let w = |p: &str, s: &str| {
            let p = r.join(p);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, s).unwrap();
        };
        w("sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/numa_node", "8\n");
        fs::create_dir_all(r.join("sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/net/eth0")).unwrap();
        fs::create_dir_all(r.join("sys/class/net")).unwrap();
        std::os::unix::fs::symlink(
            "../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/net/eth0",
            r.join("sys/class/net/eth0"),
        )
        .unwrap();
        w("sys/devices/pci0000:00/0000:00:04.0/numa_node", "-1\n");
        fs::create_dir_all(r.join("sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1")).unwrap();
        fs::create_dir_all(r.join("sys/class/block")).unwrap();
        std::os::unix::fs::symlink(
            "../../devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1",
            r.join("sys/class/block/nvme0n1"),
        )
        .unwrap();
        fs::create_dir_all(r.join("sys/bus/pci/devices")).unwrap();
        std::os::unix::fs::symlink(
            "../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0",
            r.join("sys/bus/pci/devices/0000:3b:00.0"),
        )
        .unwrap();
        let status = "Name:\tx\nCpus_allowed_list:\t0-3\nMems_allowed_list:\t0,8\n";
        let v = SystemView::from_parts(r, &topo(&[(0, "0-3", 1 << 20), (8, "", 1 << 20)]), status).unwrap();
        (t, v)
    }

    #[test]
    fn reads_sparse_nodes_and_allowed_sets() {
        let (_t, v) = machine();
        assert_eq!(v.online_nodes.to_list(), "0,8");
        assert_eq!(v.node_cpus[&0].to_list(), "0-3");
        assert!(v.node_cpus[&8].is_empty());
        assert_eq!(v.mems_allowed.to_list(), "0,8");
        assert_eq!(v.cpus_allowed.to_list(), "0-3");
        assert_eq!(v.cpus_of(&NodeSet::parse_list("0,8").unwrap()).to_list(), "0-3");
        assert_eq!(v.nodes_of_cpus(&CpuSet::parse_list("2").unwrap()).to_list(), "0");
    }

    #[test]
    fn devices_resolve_through_sysfs() {
        let (_t, v) = machine();
        assert_eq!(v.device_node(Device::Netdev, "eth0"), Ok(8));
        assert_eq!(v.device_node(Device::Pci, "3b:00.0"), Ok(8));
        assert_eq!(v.device_node(Device::Pci, "0000:3b:00"), Ok(8));
        let e = v.device_node(Device::Block, "nvme0n1").unwrap_err();
        assert!(e.contains("has no NUMA node") && e.contains("-1"), "{e}");
        let e = v.device_node(Device::Netdev, "eth9").unwrap_err();
        assert!(e.starts_with("no network device eth9"), "{e}");
        assert!(v.device_node(Device::Netdev, "../x").unwrap_err().starts_with("bad network device name"));
        assert!(v.device_node(Device::Pci, "zz").unwrap_err().starts_with("bad PCI address"));
        assert!(v.device_node(Device::Ip, "example").unwrap_err().contains("not supported"));
    }

    #[test]
    fn pci_address_forms() {
        assert_eq!(parse_pci("3b:00.0").as_deref(), Some("0000:3b:00.0"));
        assert_eq!(parse_pci("0001:3b:1f.7").as_deref(), Some("0001:3b:1f.7"));
        assert_eq!(parse_pci("0:3b:0").as_deref(), Some("0000:3b:00.0"));
        assert_eq!(parse_pci("3b"), None);
        assert_eq!(parse_pci("3b:20.0"), None);
        assert_eq!(parse_pci("3b:00.8"), None);
    }

    #[test]
    fn live_view_is_consistent() {
        let v = SystemView::live().unwrap();
        assert!(!v.online_nodes.is_empty());
        let status = fs::read_to_string("/proc/self/status").unwrap();
        assert!(status.contains(&format!("Mems_allowed_list:\t{}\n", v.mems_allowed.to_list())));
        assert!(v.mems_allowed.is_subset(&v.online_nodes));
        assert_eq!(v.cpus_of(&v.online_nodes), v.online_cpus);
    }
}

/// A temporary directory removed on drop (tests only; avoids a dependency).
#[cfg(test)]
pub(crate) mod tempdir {
    use std::path::{Path, PathBuf};

    pub struct TempDir(PathBuf);

    impl TempDir {
        pub fn new() -> TempDir {
            static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let p = std::env::temp_dir().join(format!("numapilot-run-test-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            TempDir(p)
        }
        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
