//! What the launcher needs to know about the machine and this process.
//!
//! ```text
//!   numapilot_topology::Topology::from_sysfs(ROOT)   online nodes, their CPUs, MemTotal, online CPUs
//!   STATUS  Mems_allowed_list / Cpus_allowed_list     this process's cpuset (and affinity), read with
//!                                                     numapilot_observe's status parser
//!   CGROUP  cpuset.cpus.effective (v2) or             the cpuset's own CPUs (live only), to say whether
//!           cpuset.effective_cpus (v1)                the affinity or the cpuset keeps a CPU out
//!   numapilot_topology::sysfs::device_node(ROOT, ..)  device forms of node specs (netdev:, pci:,
//!                                                     block:, file:): the nearest `numa_node` file
//!                                                     at or above the device
//! ```
//!
//! Everything about the machine is asked of the [`Topology`]; the view adds only what belongs to
//! this process and the root the devices are looked up under.
//!
//! No node directory (sysfs not mounted, as in many containers and chroots, or a kernel built
//! without NUMA): the view is one node, node 0, holding every online CPU (or this process's
//! allowed CPUs when the CPU directory is missing too) and the memory `/proc/meminfo` reports,
//! with a warning, as libnuma assumes one node when it cannot read sysfs. A plain launch, `-C`
//! and `--show` then run as numactl's do (a review of 2026-11-30: every launch failed); a node
//! list other than node 0 is refused as out of range, and a kernel without NUMA refuses a memory
//! policy itself (reported, nothing run).

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use numapilot_actuate::CpusetHierarchy;
use numapilot_observe::parse::status::parse_status;
use numapilot_topology::sysfs::{device_node, DeviceName};
use numapilot_topology::{Cpu, CpuSet, Node, NodeSet, Topology, TopologyError};

use super::nodespec::{Device, DeviceNodes};

/// The machine and this process, as far as the launcher is concerned.
#[derive(Debug, Clone, PartialEq)]
pub struct SystemView {
    /// The sysfs root (`/` live, a fixture directory in tests), for device lookups.
    pub root: PathBuf,
    /// The machine: online nodes, their CPUs and memory, online CPUs.
    pub topo: Topology,
    /// `Mems_allowed_list` of this process.
    pub mems_allowed: NodeSet,
    /// `Cpus_allowed_list` of this process: its CPU affinity, within its cpuset.
    pub cpus_allowed: CpuSet,
    /// The CPUs of this process's cpuset (its cgroup's effective CPUs), to tell a CPU the affinity
    /// keeps out from one the cpuset does; `None` when no cpuset hierarchy could be read, or for
    /// a fixture.
    pub cpuset_cpus: Option<CpuSet>,
    /// Why the machine was taken for one node (no node directory under the root), for the
    /// launcher's warning; `None` when the topology was read.
    pub assumed_one_node: Option<String>,
}

impl SystemView {
    /// Reads the live system.
    pub fn live() -> Result<SystemView> {
        let mut v = SystemView::read(Path::new("/"), Path::new("/proc/self/status"))?;
        v.cpuset_cpus = CpusetHierarchy::detect(None)
            .and_then(|h| numapilot_daemon::live::select::cpuset_effective_cpus(&h, std::process::id()));
        Ok(v)
    }

    /// Reads sysfs under `root` and the process status file `status`.
    pub fn read(root: &Path, status: &Path) -> Result<SystemView> {
        let text = fs::read_to_string(status).with_context(|| format!("reading {}", status.display()))?;
        let st = parse_status(&text).with_context(|| format!("in {}", status.display()))?;
        let (topo, assumed_one_node) = match Topology::from_sysfs(root) {
            Ok(t) => (t, None),
            Err(e @ TopologyError::NoNuma { .. }) => (one_node(root, &st.cpus_allowed), Some(e.to_string())),
            Err(e) => return Err(e).with_context(|| format!("reading the topology under {}", root.display())),
        };
        Ok(SystemView {
            root: root.to_path_buf(),
            topo,
            mems_allowed: st.mems_allowed,
            cpus_allowed: st.cpus_allowed,
            cpuset_cpus: None,
            assumed_one_node,
        })
    }

    /// The nodes a memory node list is read against: the allowed nodes that are online, or every
    /// online node with `--all`.
    pub fn mem_domain(&self, all: bool) -> NodeSet {
        let online = self.topo.node_ids();
        if all {
            online
        } else {
            self.mems_allowed.intersection(&online)
        }
    }

    /// The CPUs a CPU list is read against: the allowed CPUs that are online, or every online CPU
    /// with `--all`.
    pub fn cpu_domain(&self, all: bool) -> CpuSet {
        let online = self.topo.online_cpus();
        if all {
            online
        } else {
            self.cpus_allowed.intersection(&online)
        }
    }

    /// libnuma's `numa_all_nodes_ptr`: Mems_allowed, or every online node when that is empty.
    pub fn all_nodes(&self) -> NodeSet {
        if self.mems_allowed.is_empty() {
            self.topo.node_ids()
        } else {
            self.mems_allowed.clone()
        }
    }
}

/// The machine as one node, node 0, when sysfs has no node directory: every online CPU
/// (`sys/devices/system/cpu/online` under `root`, else `allowed`, this process's CPUs) and
/// `proc/meminfo`'s MemTotal and MemFree under `root` (0 when unreadable).
fn one_node(root: &Path, allowed: &CpuSet) -> Topology {
    let online = numapilot_topology::sysfs::cpu_list(root, "online")
        .ok()
        .flatten()
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| allowed.clone());
    let meminfo = fs::read_to_string(root.join("proc/meminfo")).unwrap_or_default();
    let kb = |key: &str| {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':')?.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let cpus = online
        .iter()
        .map(|c| Cpu {
            id: c,
            node: 0,
            package: 0,
            die: 0,
            core: c,
            siblings: std::iter::once(c).collect(),
            llc: None,
            online: true,
        })
        .collect();
    Topology {
        nodes: vec![Node {
            id: 0,
            cpus: online,
            mem_total_kb: kb("MemTotal"),
            mem_free_kb: kb("MemFree"),
            mem_total_unknown: false,
            mem_free_unknown: false,
        }],
        possible: std::iter::once(0).collect(),
        distances: vec![vec![10]],
        cpus,
        devices: Vec::new(),
    }
}

impl DeviceNodes for SystemView {
    fn device_node(&self, device: Device, name: &str) -> Result<u32, String> {
        let name = match device {
            Device::Netdev => DeviceName::Net(name),
            Device::Block => DeviceName::Block(name),
            Device::Pci => DeviceName::Pci(name),
            Device::File => {
                let md = fs::metadata(name).map_err(|e| format!("cannot stat {name}: {e}"))?;
                let dev = if md.file_type().is_block_device() { md.rdev() } else { md.dev() };
                DeviceName::BlockNumber { major: libc::major(dev), minor: libc::minor(dev) }
            }
            Device::Ip => {
                return Err(format!(
                    "ip:{name} is not supported (it needs a routing-table lookup); \
                     use netdev:IFNAME with the interface {name} is reached through"
                ))
            }
        };
        device_node(&self.root, name).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A hand-built topology: `nodes` as (id, cpulist, MemTotal kB); every listed CPU online.
    pub(crate) fn topo(nodes: &[(u32, &str, u64)]) -> Topology {
        let nodes: Vec<Node> = nodes
            .iter()
            .map(|(id, cpus, mem)| Node {
                id: *id,
                cpus: CpuSet::parse_list(cpus).unwrap(),
                mem_total_kb: *mem,
                mem_free_kb: *mem,
                mem_total_unknown: false,
                mem_free_unknown: false,
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

    /// A view of `topo` for a process allowed CPUs `cpus` and nodes `mems`, devices under `root`.
    pub(crate) fn view(root: &Path, topo: Topology, cpus: &str, mems: &str) -> SystemView {
        SystemView {
            root: root.to_path_buf(),
            topo,
            mems_allowed: NodeSet::parse_list(mems).unwrap(),
            cpus_allowed: CpuSet::parse_list(cpus).unwrap(),
            cpuset_cpus: None,
            assumed_one_node: None,
        }
    }

    /// A sparse machine: nodes 0 and 8, node 8 memory-only; in a temp dir a NIC on node 8 reached
    /// through a class symlink, and an NVMe namespace whose numa_node (-1) is on its PCI parent.
    fn machine() -> (tempfile::TempDir, SystemView) {
        let t = tempfile::tempdir().unwrap();
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
        let v = view(r, topo(&[(0, "0-3", 1 << 20), (8, "", 1 << 20)]), "0-3", "0,8");
        (t, v)
    }

    #[test]
    fn sparse_nodes_and_allowed_sets() {
        let (_t, v) = machine();
        assert_eq!(v.topo.node_ids().to_list(), "0,8");
        assert_eq!(v.topo.node(0).unwrap().cpus.to_list(), "0-3");
        assert!(v.topo.node(8).unwrap().cpus.is_empty());
        assert_eq!(v.mems_allowed.to_list(), "0,8");
        assert_eq!(v.cpus_allowed.to_list(), "0-3");
        assert_eq!(v.topo.cpus_of_nodes(&NodeSet::parse_list("0,8").unwrap()).to_list(), "0-3");
        assert_eq!(v.topo.nodes_of_cpus(&CpuSet::parse_list("2").unwrap()).to_list(), "0");
        assert_eq!(v.mem_domain(false).to_list(), "0,8");
        assert_eq!(v.all_nodes().to_list(), "0,8");
    }

    #[test]
    fn domains_are_the_allowed_online_ids_or_everything_with_all() {
        // Allowed: CPU 9 and node 3 are not online (a cpuset written before a hot-unplug).
        let v = view(Path::new("/"), topo(&[(0, "0-3", 1 << 20), (1, "4-7", 1 << 20)]), "2-5,9", "1,3");
        assert_eq!(v.cpu_domain(false).to_list(), "2-5");
        assert_eq!(v.cpu_domain(true).to_list(), "0-7");
        assert_eq!(v.mem_domain(false).to_list(), "1");
        assert_eq!(v.mem_domain(true).to_list(), "0-1");
        let v = view(Path::new("/"), v.topo, "0", "");
        assert_eq!(v.all_nodes().to_list(), "0-1", "an empty Mems_allowed means every node, as in libnuma");
    }

    #[test]
    fn reads_a_captured_status_file() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/host-6.18");
        // The first captured pid, as the capture script recorded it (a recapture changes the pids).
        let notes = fs::read_to_string(fixture.join("expected/cmd.txt")).unwrap();
        let pid = notes.lines().find_map(|l| l.strip_prefix("pids: ")?.split_whitespace().next()).unwrap();
        let status = fixture.join(format!("proc/{pid}/status"));
        let v = SystemView::read(&fixture, &status).unwrap();
        let text = fs::read_to_string(&status).unwrap();
        assert!(text.contains(&format!("Mems_allowed_list:\t{}\n", v.mems_allowed.to_list())), "{text}");
        assert!(text.contains(&format!("Cpus_allowed_list:\t{}\n", v.cpus_allowed.to_list())), "{text}");
        assert_eq!(v.topo, Topology::from_sysfs(&fixture).unwrap());
        let cut = fixture.join(format!("proc/{pid}/nonexistent"));
        let e = format!("{:#}", SystemView::read(&fixture, &cut).unwrap_err());
        assert!(e.contains("nonexistent"), "{e}");
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
        assert!(v.device_node(Device::File, "/nonexistent/x").unwrap_err().starts_with("cannot stat /nonexistent/x"));
    }

    /// No node directory (sysfs not mounted, a kernel without NUMA): one node, node 0, with the
    /// online CPUs and /proc/meminfo's memory, and the reason kept for the launcher's warning; no
    /// CPU directory either: the process's allowed CPUs.
    #[test]
    fn no_node_directory_is_one_node() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        fs::create_dir_all(root.join("sys/devices/system/cpu")).unwrap();
        fs::create_dir_all(root.join("proc")).unwrap();
        fs::write(root.join("sys/devices/system/cpu/online"), "0-3\n").unwrap();
        fs::write(root.join("proc/meminfo"), "MemTotal:       8000 kB\nMemFree:        5000 kB\n").unwrap();
        let status = root.join("status");
        // This process's own status with its CPU and node lists replaced.
        let own = fs::read_to_string("/proc/self/status").unwrap();
        let text: String = own
            .lines()
            .map(|l| match l.split_once(':') {
                Some(("Cpus_allowed_list", _)) => "Cpus_allowed_list:\t1-2".to_string(),
                Some(("Mems_allowed_list", _)) => "Mems_allowed_list:\t0".to_string(),
                _ => l.to_string(),
            })
            .map(|l| l + "\n")
            .collect();
        fs::write(&status, text).unwrap();
        let v = SystemView::read(root, &status).unwrap();
        assert!(v.assumed_one_node.as_deref().is_some_and(|w| w.contains("sys/devices/system/node")), "{v:?}");
        assert_eq!(v.topo.node_ids().to_list(), "0");
        assert_eq!(v.topo.online_cpus().to_list(), "0-3");
        assert_eq!((v.topo.nodes[0].mem_total_kb, v.topo.nodes[0].mem_free_kb), (8000, 5000));
        assert_eq!(v.cpu_domain(false).to_list(), "1-2");
        assert_eq!(v.mem_domain(false).to_list(), "0");
        fs::remove_dir_all(root.join("sys")).unwrap();
        let v = SystemView::read(root, &status).unwrap();
        assert_eq!(v.topo.online_cpus().to_list(), "1-2");
        // A node directory that is there but malformed is still an error, not one node.
        fs::create_dir_all(root.join("sys/devices/system/node/node0")).unwrap();
        assert!(SystemView::read(root, &status).is_err());
    }

    #[test]
    fn live_view_is_consistent() {
        let v = SystemView::live().unwrap();
        let online = v.topo.node_ids();
        assert!(!online.is_empty());
        let status = fs::read_to_string("/proc/self/status").unwrap();
        assert!(status.contains(&format!("Mems_allowed_list:\t{}\n", v.mems_allowed.to_list())));
        assert!(v.mems_allowed.is_subset(&online));
        assert_eq!(v.topo.cpus_of_nodes(&online), v.topo.online_cpus());
    }
}
