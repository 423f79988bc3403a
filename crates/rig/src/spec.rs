//! Guest descriptions and their translation into QEMU options.
//!
//! A [`GuestSpec`] says what NUMA machine to emulate: nodes (CPUs and memory each; a node without CPUs is a
//! memory-only node, as CXL expanders and HBM appear), the SMP layout (sockets, dies, cores, threads: QEMU numbers
//! vCPUs socket-major, and each node takes the next run of vCPU indexes), the distance matrix (ACPI SLIT, which
//! the kernel reports unchanged in `/sys/devices/system/node/nodeN/distance`) and PCI devices placed on a node.
//!
//! ```text
//!   GuestSpec                                 qemu-system-x86_64 ...
//!   node 0: 2 CPUs, 384 MiB   ------------>   -object memory-backend-ram,id=m0,size=384M
//!                                             -numa node,nodeid=0,cpus=0-1,memdev=m0
//!   node 3: 0 CPUs, 256 MiB   ------------>   -numa node,nodeid=3,memdev=m3          (memory-only node)
//!   distances[0][1] = 11      ------------>   -numa dist,src=0,dst=1,val=11          (every ordered pair)
//!   nvme on node 1            ------------>   -device pxb-pcie,id=pxb0,bus_nr=32,numa_node=1,bus=pcie.0
//!                                             -device pcie-root-port,id=rp0,bus=pxb0,chassis=1
//!                                             -device nvme,drive=nvd0,serial=numapilot0,bus=rp0
//! ```
//!
//! A PCI device gets its node from the PCI expander bridge it sits behind: QEMU describes each `pxb-pcie` as an
//! extra host bridge with an ACPI `_PXM`, so the guest kernel fills `/sys/bus/pci/devices/ADDR/numa_node` exactly
//! as firmware does on a multi-socket server.
//!
//! QEMU runs with single-threaded TCG (`-accel tcg,thread=single`: all vCPUs take turns on one host thread).
//! With multi-threaded TCG the guest kernel's live code patching (static keys flipped with `int3` breakpoints,
//! arch/x86/kernel/alternative.c) races with stale translations on other vCPU threads: we saw
//! `Oops: int3 ... RIP: enqueue_timer` and a panic during an 8-vCPU boot. Single-threaded TCG invalidates
//! translations before any other vCPU runs, and on a 2-core host it boots an 8-vCPU guest no slower (measured:
//! 4.2-6.0 s to userspace single-threaded, 4.7-6.6 s multi-threaded), while two guests can still run side by side.
//!
//! Limits (checked by [`GuestSpec::validate`]): node ids are dense `0..n` (QEMU refuses gaps; sparse ids are
//! exercised by the fixtures and unit tests instead), distances are 10 on the diagonal and 11..=254 elsewhere
//! (ACPI SLIT: 10 is local, 255 means unreachable), each node has at least [`MIN_NODE_MEM_MB`] of memory, at most
//! [`MAX_PCI_DEVICES`] devices. Units: memory in MiB, timeouts in seconds.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::error::{Result, RigError};

/// Smallest memory per node, MiB. Default 64: the kernel ignores nodes under 4 MiB (`NODE_MIN_SIZE`) and a node
/// must also hold its own `struct page` array and per-node kernel structures; 64 MiB leaves room for a workload.
pub const MIN_NODE_MEM_MB: u64 = 64;

/// Most PCI devices per guest. Each sits behind its own expander bridge with 32 bus numbers (`bus_nr` 32, 64, ...),
/// and bus numbers end at 255.
pub const MAX_PCI_DEVICES: usize = 7;

/// Default time a guest may take from QEMU start to power-off, seconds. Default 300: a 8-vCPU guest boots in about
/// 10 s alone under TCG on a 2-core host and a scenario takes a few seconds more; the margin covers guests booting
/// in parallel on a loaded CI machine. A hung guest is killed after this, with its console tail in the error.
pub const DEFAULT_TIMEOUT_S: u64 = 300;

/// One NUMA node of the guest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeSpec {
    /// vCPUs on this node (0: a memory-only node).
    pub cpus: u32,
    /// Memory of this node, MiB.
    pub mem_mb: u64,
}

/// The SMP layout QEMU gives the guest (`-smp cpus=,sockets=,dies=,cores=,threads=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SmpLayout {
    /// Sockets (packages).
    pub sockets: u32,
    /// Dies per socket.
    pub dies: u32,
    /// Cores per die.
    pub cores: u32,
    /// Threads per core.
    pub threads: u32,
}

impl SmpLayout {
    /// Total vCPUs of the layout.
    pub fn total(&self) -> u32 {
        self.sockets * self.dies * self.cores * self.threads
    }
}

/// Kind of PCI device placed on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum PciKind {
    /// An NVMe controller with a small sparse raw disk (driver built into the Debian cloud kernel).
    Nvme,
    /// A VMware vmxnet3 network card with no outside connection. Its driver (a module of the cloud kernel, loaded by
    /// the guest's init) binds at the PCI function, so the interface appears under `ADDR/net/` as with hardware
    /// NICs (a virtio-net interface would hang under `ADDR/virtioN/net/` instead).
    Vmxnet3,
}

/// A PCI device behind an expander bridge on `node`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PciDeviceSpec {
    /// NUMA node of the expander bridge (the device's `numa_node` in the guest).
    pub node: u32,
    /// Device kind.
    pub kind: PciKind,
}

/// A guest machine to boot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GuestSpec {
    /// Short name, used for output directories and fixture names (`[a-z0-9-]`).
    pub name: String,
    /// Nodes, indexed by node id.
    pub nodes: Vec<NodeSpec>,
    /// SMP layout; its total must equal the sum of the nodes' CPUs.
    pub smp: SmpLayout,
    /// Distance matrix (row = from, column = to); `None` leaves QEMU's default (10 local, 20 remote).
    pub distances: Option<Vec<Vec<u32>>>,
    /// PCI devices and their nodes.
    pub pci: Vec<PciDeviceSpec>,
    /// Extra kernel command-line arguments (`isolcpus=3`), after the rig's own
    /// (`console=ttyS0 quiet panic=-1`). Each is one `key` or `key=value` token of printable ASCII without
    /// spaces or quotes ([`GuestSpec::validate`]), so no argument can split into two or end the command line.
    pub kernel_args: Vec<String>,
    /// Wall-clock limit from QEMU start to power-off.
    #[serde(skip)]
    pub timeout: Duration,
}

/// Size of the sparse raw disk behind each NVMe controller, MiB (nothing is written to it).
const NVME_DISK_MB: u64 = 16;

impl GuestSpec {
    /// 2 nodes of 2 vCPUs and 512 MiB each, one socket per node, distance 21 (a common two-socket SLIT).
    pub fn two_node() -> Self {
        GuestSpec {
            name: "2node".into(),
            nodes: vec![NodeSpec { cpus: 2, mem_mb: 512 }, NodeSpec { cpus: 2, mem_mb: 512 }],
            smp: SmpLayout { sockets: 2, dies: 1, cores: 2, threads: 1 },
            distances: Some(vec![vec![10, 21], vec![21, 10]]),
            pci: vec![],
            kernel_args: vec![],
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_S),
        }
    }

    /// The 4-node box of the NUMA article seed, scaled down: two sockets with two dies each, one node per die,
    /// 2 vCPUs and 384 MiB per node; distances 10 within a node, 11 to the other die of the same socket, 20 across
    /// sockets. An NVMe controller sits on node 1 and a vmxnet3 network card on node 2.
    pub fn four_node_article() -> Self {
        GuestSpec {
            name: "4node".into(),
            nodes: vec![NodeSpec { cpus: 2, mem_mb: 384 }; 4],
            smp: SmpLayout { sockets: 2, dies: 2, cores: 2, threads: 1 },
            distances: Some(distance_matrix(4, |i, j| {
                if i == j {
                    10
                } else if i / 2 == j / 2 {
                    11
                } else {
                    20
                }
            })),
            pci: vec![
                PciDeviceSpec { node: 1, kind: PciKind::Nvme },
                PciDeviceSpec { node: 2, kind: PciKind::Vmxnet3 },
            ],
            kernel_args: vec![],
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_S),
        }
    }

    /// 8 nodes: four sockets of two nodes in a ring; nodes 0-6 have one vCPU and 192 MiB each, node 7 is a
    /// memory-only node of 256 MiB on socket 3 (as a CXL expander appears). Distances: 10 local, 12 same socket,
    /// 20 to a neighbouring socket, 30 to the opposite one.
    pub fn eight_node() -> Self {
        let mut nodes = vec![NodeSpec { cpus: 1, mem_mb: 192 }; 7];
        nodes.push(NodeSpec { cpus: 0, mem_mb: 256 });
        GuestSpec {
            name: "8node".into(),
            nodes,
            smp: SmpLayout { sockets: 7, dies: 1, cores: 1, threads: 1 },
            distances: Some(distance_matrix(8, |i, j| {
                let (si, sj) = (i / 2, j / 2);
                let hops = si.abs_diff(sj).min(4 - si.abs_diff(sj));
                match (i == j, hops) {
                    (true, _) => 10,
                    (false, 0) => 12,
                    (false, 1) => 20,
                    _ => 30,
                }
            })),
            pci: vec![],
            kernel_args: vec![],
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_S),
        }
    }

    /// The three guests the tests and fixtures use, by name.
    pub fn presets() -> Vec<GuestSpec> {
        vec![Self::two_node(), Self::four_node_article(), Self::eight_node()]
    }

    /// A preset by name (`2node`, `4node`, `8node`).
    pub fn preset(name: &str) -> Option<GuestSpec> {
        Self::presets().into_iter().find(|g| g.name == name)
    }

    /// Total vCPUs.
    pub fn total_cpus(&self) -> u32 {
        self.nodes.iter().map(|n| n.cpus).sum()
    }

    /// Total memory, MiB.
    pub fn total_mem_mb(&self) -> u64 {
        self.nodes.iter().map(|n| n.mem_mb).sum()
    }

    /// The vCPU indexes of `node` (QEMU numbering; the guest kernel keeps it for x86 with `-smp` topology).
    pub fn node_cpus(&self, node: usize) -> std::ops::Range<u32> {
        let first: u32 = self.nodes[..node].iter().map(|n| n.cpus).sum();
        first..first + self.nodes[node].cpus
    }

    /// The distance from `a` to `b` as the guest kernel will report it.
    pub fn distance(&self, a: usize, b: usize) -> u32 {
        match &self.distances {
            Some(d) => d[a][b],
            None if a == b => 10,
            None => 20,
        }
    }

    fn err(&self, field: impl Into<String>, reason: impl Into<String>) -> RigError {
        RigError::Spec { guest: self.name.clone(), field: field.into(), reason: reason.into() }
    }

    /// Checks the spec against what QEMU and the kernel accept; the first problem is returned, naming the field.
    pub fn validate(&self) -> Result<()> {
        if self.name.is_empty() || !self.name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            return Err(self.err("name", format!("{:?} must be non-empty [a-z0-9-]", self.name)));
        }
        if self.nodes.is_empty() {
            return Err(self.err("nodes", "at least one node is needed"));
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if n.mem_mb < MIN_NODE_MEM_MB {
                return Err(self.err(
                    format!("nodes[{i}].mem_mb"),
                    format!("{} MiB is below the minimum of {MIN_NODE_MEM_MB} MiB", n.mem_mb),
                ));
            }
        }
        if self.total_cpus() == 0 {
            return Err(self.err("nodes", "no node has CPUs"));
        }
        let s = &self.smp;
        if s.sockets == 0 || s.dies == 0 || s.cores == 0 || s.threads == 0 {
            return Err(self.err("smp", "sockets, dies, cores and threads must all be at least 1"));
        }
        if s.total() != self.total_cpus() {
            return Err(self.err(
                "smp",
                format!(
                    "{} sockets x {} dies x {} cores x {} threads = {} vCPUs, but the nodes have {}",
                    s.sockets,
                    s.dies,
                    s.cores,
                    s.threads,
                    s.total(),
                    self.total_cpus()
                ),
            ));
        }
        if let Some(d) = &self.distances {
            let n = self.nodes.len();
            if d.len() != n {
                return Err(self.err("distances", format!("{} rows for {n} nodes", d.len())));
            }
            for (i, row) in d.iter().enumerate() {
                if row.len() != n {
                    return Err(self.err(format!("distances[{i}]"), format!("{} columns for {n} nodes", row.len())));
                }
                for (j, &v) in row.iter().enumerate() {
                    let ok = if i == j { v == 10 } else { (11..=254).contains(&v) };
                    if !ok {
                        let want = if i == j { "10 (local)" } else { "11..=254" };
                        return Err(self.err(format!("distances[{i}][{j}]"), format!("{v} is not {want}")));
                    }
                }
            }
        }
        if self.pci.len() > MAX_PCI_DEVICES {
            return Err(self.err("pci", format!("{} devices, at most {MAX_PCI_DEVICES}", self.pci.len())));
        }
        for (k, p) in self.pci.iter().enumerate() {
            if p.node as usize >= self.nodes.len() {
                return Err(self.err(
                    format!("pci[{k}].node"),
                    format!("node {} does not exist ({} nodes)", p.node, self.nodes.len()),
                ));
            }
        }
        for (k, a) in self.kernel_args.iter().enumerate() {
            if a.is_empty() || !a.bytes().all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\'') {
                return Err(self.err(
                    format!("kernel_args[{k}]"),
                    format!("{a:?} must be one non-empty token of printable ASCII without quotes"),
                ));
            }
        }
        if self.timeout.is_zero() {
            return Err(self.err("timeout", "must be positive"));
        }
        Ok(())
    }

    /// Names of the disk images the NVMe devices need, in `dir` (created sparse by the runner), with sizes in MiB.
    pub fn nvme_images(&self, dir: &Path) -> Vec<(std::path::PathBuf, u64)> {
        self.pci
            .iter()
            .enumerate()
            .filter(|(_, p)| p.kind == PciKind::Nvme)
            .map(|(k, _)| (dir.join(format!("nvme{k}.img")), NVME_DISK_MB))
            .collect()
    }

    /// The QEMU command-line arguments (without the program name) to boot this guest.
    ///
    /// `console` receives the guest's first serial port (kernel console, `ttyS0`), `results` its second (`ttyS1`,
    /// the results channel); `dir` holds the NVMe disk images. Paths must not contain commas (QEMU's option
    /// separator).
    pub fn qemu_args(
        &self,
        kernel: &Path,
        initrd: &Path,
        console: &Path,
        results: &Path,
        dir: &Path,
    ) -> Result<Vec<OsString>> {
        self.validate()?;
        let mut a: Vec<String> = Vec::new();
        let mut push = |items: &[&str]| a.extend(items.iter().map(|s| s.to_string()));
        let path = |p: &Path| -> Result<String> {
            let s = p.to_str().ok_or_else(|| self.err("paths", format!("{} is not UTF-8", p.display())))?;
            if s.contains(',') {
                return Err(self.err("paths", format!("{s} contains a comma, which QEMU options cannot carry")));
            }
            Ok(s.to_string())
        };
        let s = &self.smp;
        push(&["-M", "q35", "-accel", "tcg,thread=single", "-cpu", "max"]);
        push(&[
            "-smp",
            &format!(
                "cpus={},sockets={},dies={},cores={},threads={}",
                s.total(),
                s.sockets,
                s.dies,
                s.cores,
                s.threads
            ),
        ]);
        push(&["-m", &format!("{}M", self.total_mem_mb())]);
        for (i, n) in self.nodes.iter().enumerate() {
            push(&["-object", &format!("memory-backend-ram,id=m{i},size={}M", n.mem_mb)]);
            let cpus = self.node_cpus(i);
            let node = if n.cpus == 0 {
                format!("node,nodeid={i},memdev=m{i}")
            } else {
                format!("node,nodeid={i},cpus={}-{},memdev=m{i}", cpus.start, cpus.end - 1)
            };
            push(&["-numa", &node]);
        }
        if let Some(d) = &self.distances {
            for (i, row) in d.iter().enumerate() {
                for (j, v) in row.iter().enumerate() {
                    if i != j {
                        push(&["-numa", &format!("dist,src={i},dst={j},val={v}")]);
                    }
                }
            }
        }
        let images = self.nvme_images(dir);
        let mut img = images.iter();
        for (k, p) in self.pci.iter().enumerate() {
            push(&["-device", &format!("pxb-pcie,id=pxb{k},bus_nr={},numa_node={},bus=pcie.0", 32 * (k + 1), p.node)]);
            push(&["-device", &format!("pcie-root-port,id=rp{k},bus=pxb{k},chassis={},slot=0", k + 1)]);
            match p.kind {
                PciKind::Nvme => {
                    let (file, _) = img.next().expect("one image per NVMe device");
                    push(&["-drive", &format!("file={},if=none,id=nvd{k},format=raw", path(file)?)]);
                    push(&["-device", &format!("nvme,drive=nvd{k},serial=numapilot{k},bus=rp{k}")]);
                }
                PciKind::Vmxnet3 => {
                    // A hub port with nothing else on the hub: the card has a peer but no outside connection.
                    push(&["-netdev", &format!("hubport,id=net{k},hubid={k}")]);
                    push(&["-device", &format!("vmxnet3,netdev=net{k},bus=rp{k},mac=52:54:00:12:34:{k:02x}")]);
                }
            }
        }
        push(&["-kernel", &path(kernel)?, "-initrd", &path(initrd)?]);
        let mut cmdline = String::from("console=ttyS0 quiet panic=-1");
        for a in &self.kernel_args {
            cmdline.push(' ');
            cmdline.push_str(a);
        }
        push(&["-append", &cmdline]);
        push(&["-nodefaults", "-display", "none", "-no-reboot"]);
        push(&["-serial", &format!("file:{}", path(console)?)]);
        push(&["-serial", &format!("file:{}", path(results)?)]);
        Ok(a.into_iter().map(OsString::from).collect())
    }
}

/// Builds an `n` x `n` matrix from `f(from, to)`.
pub fn distance_matrix(n: usize, f: impl Fn(usize, usize) -> u32) -> Vec<Vec<u32>> {
    (0..n).map(|i| (0..n).map(|j| f(i, j)).collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(g: &GuestSpec) -> Vec<String> {
        let p = Path::new("/r");
        g.qemu_args(&p.join("vmlinuz"), &p.join("initrd"), &p.join("con"), &p.join("res"), p)
            .unwrap()
            .into_iter()
            .map(|s| s.into_string().unwrap())
            .collect()
    }

    fn has_pair(a: &[String], flag: &str, value: &str) -> bool {
        a.windows(2).any(|w| w[0] == flag && w[1] == value)
    }

    #[test]
    fn presets_validate() {
        for g in GuestSpec::presets() {
            g.validate().unwrap_or_else(|e| panic!("{}: {e}", g.name));
        }
    }

    #[test]
    fn two_node_args_describe_nodes_cpus_and_distances() {
        let a = args(&GuestSpec::two_node());
        assert!(has_pair(&a, "-accel", "tcg,thread=single"));
        assert!(has_pair(&a, "-smp", "cpus=4,sockets=2,dies=1,cores=2,threads=1"));
        assert!(has_pair(&a, "-m", "1024M"));
        assert!(has_pair(&a, "-numa", "node,nodeid=0,cpus=0-1,memdev=m0"));
        assert!(has_pair(&a, "-numa", "node,nodeid=1,cpus=2-3,memdev=m1"));
        assert!(has_pair(&a, "-numa", "dist,src=0,dst=1,val=21"));
        assert!(has_pair(&a, "-numa", "dist,src=1,dst=0,val=21"));
        assert!(has_pair(&a, "-serial", "file:/r/con"));
        assert!(has_pair(&a, "-serial", "file:/r/res"));
        assert!(!a.iter().any(|s| s.contains("pxb")));
    }

    #[test]
    fn kernel_args_follow_the_rigs_own_and_bad_ones_are_refused() {
        let mut g = GuestSpec::two_node();
        assert!(has_pair(&args(&g), "-append", "console=ttyS0 quiet panic=-1"));
        g.kernel_args = vec!["isolcpus=domain,3".into(), "nosmt".into()];
        assert!(has_pair(&args(&g), "-append", "console=ttyS0 quiet panic=-1 isolcpus=domain,3 nosmt"));
        for bad in ["", "a b", "init=\"x\"", "x'y", "tab\there"] {
            g.kernel_args = vec!["nosmt".into(), bad.into()];
            let e = g.validate().unwrap_err().to_string();
            assert!(e.contains("kernel_args[1]"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn article_distances_are_10_11_20() {
        let g = GuestSpec::four_node_article();
        assert_eq!(g.distances.as_ref().unwrap()[0], vec![10, 11, 20, 20]);
        assert_eq!(g.distances.as_ref().unwrap()[3], vec![20, 20, 11, 10]);
        let a = args(&g);
        assert!(has_pair(&a, "-numa", "dist,src=2,dst=3,val=11"));
        assert!(has_pair(&a, "-numa", "dist,src=3,dst=0,val=20"));
        assert!(has_pair(&a, "-device", "pxb-pcie,id=pxb0,bus_nr=32,numa_node=1,bus=pcie.0"));
        assert!(has_pair(&a, "-device", "nvme,drive=nvd0,serial=numapilot0,bus=rp0"));
        assert!(has_pair(&a, "-drive", "file=/r/nvme0.img,if=none,id=nvd0,format=raw"));
        assert!(has_pair(&a, "-device", "pxb-pcie,id=pxb1,bus_nr=64,numa_node=2,bus=pcie.0"));
        assert!(has_pair(&a, "-device", "vmxnet3,netdev=net1,bus=rp1,mac=52:54:00:12:34:01"));
    }

    #[test]
    fn eight_node_has_a_memory_only_node() {
        let g = GuestSpec::eight_node();
        let a = args(&g);
        assert!(has_pair(&a, "-numa", "node,nodeid=7,memdev=m7"));
        assert!(has_pair(&a, "-numa", "node,nodeid=6,cpus=6-6,memdev=m6"));
        assert_eq!(g.distance(0, 1), 12);
        assert_eq!(g.distance(0, 2), 20);
        assert_eq!(g.distance(0, 4), 30);
        assert_eq!(g.distance(0, 6), 20, "sockets 0 and 3 are ring neighbours");
        assert_eq!(g.node_cpus(7), 7..7);
    }

    #[test]
    fn bad_specs_name_the_field() {
        let mut g = GuestSpec::two_node();
        g.distances.as_mut().unwrap()[1][1] = 11;
        assert!(g.validate().unwrap_err().to_string().contains("distances[1][1]"));

        let mut g = GuestSpec::two_node();
        g.distances.as_mut().unwrap()[0][1] = 10;
        assert!(g.validate().unwrap_err().to_string().contains("distances[0][1]: 10 is not 11..=254"));

        let mut g = GuestSpec::two_node();
        g.distances = Some(vec![vec![10, 21]]);
        assert!(g.validate().unwrap_err().to_string().contains("1 rows for 2 nodes"));

        let mut g = GuestSpec::two_node();
        g.nodes[1].cpus = 3;
        assert!(g.validate().unwrap_err().to_string().contains("but the nodes have 5"));

        let mut g = GuestSpec::two_node();
        g.nodes[0].mem_mb = 32;
        assert!(g.validate().unwrap_err().to_string().contains("nodes[0].mem_mb"));

        let mut g = GuestSpec::two_node();
        g.pci.push(PciDeviceSpec { node: 2, kind: PciKind::Nvme });
        assert!(g.validate().unwrap_err().to_string().contains("pci[0].node: node 2 does not exist"));

        let mut g = GuestSpec::two_node();
        g.name = "Two Node".into();
        assert!(g.validate().unwrap_err().to_string().contains("name"));

        let g = GuestSpec::two_node();
        let p = Path::new("/a,b");
        let e = g.qemu_args(p, p, p, p, p).unwrap_err().to_string();
        assert!(e.contains("comma"), "{e}");
    }
}
