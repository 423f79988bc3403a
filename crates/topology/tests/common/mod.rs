//! Hand-built sysfs trees for tests, and a way to run the real `numactl --hardware` on them.
//!
//! A [`FakeSys`] writes the files the kernel would write, in the kernel's formats (checked against
//! this host's sysfs and fixtures/host-6.18), into a temporary directory laid out like `/`.

#![allow(dead_code)] // each test binary uses a different part

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use numapilot_topology::IdSet;

/// A temporary root directory holding a fake `sys/` tree.
pub struct FakeSys {
    dir: tempfile::TempDir,
}

/// Topology files of one online CPU.
pub struct CpuTopo<'a> {
    pub package: i64,
    /// `None`: no `die_id` file (kernels before 5.2).
    pub die: Option<i64>,
    pub core: u32,
    pub siblings: &'a str,
    /// `shared_cpu_list` of cache index3 (L3); `None`: no cache directory.
    pub llc: Option<&'a str>,
}

impl FakeSys {
    pub fn new() -> Self {
        FakeSys { dir: tempfile::tempdir().expect("tempdir") }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn node_dir(&self) -> PathBuf {
        self.root().join("sys/devices/system/node")
    }

    /// Writes `content` to `rel` under the root, creating directories.
    pub fn write(&self, rel: &str, content: &str) {
        let path = self.root().join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    pub fn mkdir(&self, rel: &str) {
        fs::create_dir_all(self.root().join(rel)).unwrap();
    }

    pub fn remove(&self, rel: &str) {
        let p = self.root().join(rel);
        if p.is_dir() {
            fs::remove_dir_all(p).unwrap();
        } else {
            fs::remove_file(p).unwrap();
        }
    }

    /// A node directory: cpulist, cpumap, meminfo (the kernel's full set of lines), distance.
    pub fn node(&self, id: u32, cpulist: &str, total_kb: u64, free_kb: u64, distance: &str) {
        let cpus = IdSet::parse_list(cpulist).unwrap();
        let base = format!("sys/devices/system/node/node{id}");
        self.write(&format!("{base}/cpulist"), &format!("{cpulist}\n"));
        self.write(&format!("{base}/cpumap"), &format!("{}\n", cpus.to_mask(2)));
        let used = total_kb - free_kb;
        let meminfo = format!(
            "Node {id} MemTotal:       {total_kb:>8} kB\n\
             Node {id} MemFree:        {free_kb:>8} kB\n\
             Node {id} MemUsed:        {used:>8} kB\n\
             Node {id} SwapCached:            0 kB\n\
             Node {id} Active:           647028 kB\n\
             Node {id} HugePages_Total:     0\n\
             Node {id} HugePages_Free:      0\n"
        );
        self.write(&format!("{base}/meminfo"), &meminfo);
        self.write(&format!("{base}/distance"), &format!("{distance}\n"));
    }

    /// Node-level list files.
    pub fn node_lists(&self, online: &str, possible: &str) {
        self.write("sys/devices/system/node/online", &format!("{online}\n"));
        self.write("sys/devices/system/node/possible", &format!("{possible}\n"));
    }

    /// A CPU directory. `online`: `None` writes no `online` file (cpu0 on x86). `topo`: `None` for an
    /// offline CPU (the kernel removes `topology/`). `node_link`: writes a `nodeM` entry.
    pub fn cpu(&self, id: u32, online: Option<bool>, topo: Option<CpuTopo<'_>>, node_link: Option<u32>) {
        let base = format!("sys/devices/system/cpu/cpu{id}");
        self.mkdir(&base);
        if let Some(o) = online {
            self.write(&format!("{base}/online"), if o { "1\n" } else { "0\n" });
        }
        if let Some(n) = node_link {
            self.mkdir(&format!("{base}/node{n}"));
        }
        if let Some(t) = topo {
            self.write(&format!("{base}/topology/physical_package_id"), &format!("{}\n", t.package));
            if let Some(d) = t.die {
                self.write(&format!("{base}/topology/die_id"), &format!("{d}\n"));
            }
            self.write(&format!("{base}/topology/core_id"), &format!("{}\n", t.core));
            self.write(&format!("{base}/topology/thread_siblings_list"), &format!("{}\n", t.siblings));
            if let Some(llc) = t.llc {
                for (k, level, kind, shared) in [
                    (0, 1, "Data", t.siblings),
                    (1, 1, "Instruction", t.siblings),
                    (2, 2, "Unified", t.siblings),
                    (3, 3, "Unified", llc),
                ] {
                    let c = format!("{base}/cache/index{k}");
                    self.write(&format!("{c}/level"), &format!("{level}\n"));
                    self.write(&format!("{c}/type"), &format!("{kind}\n"));
                    self.write(&format!("{c}/shared_cpu_list"), &format!("{shared}\n"));
                }
            }
        }
    }

    /// A simple online CPU with full topology.
    pub fn simple_cpu(&self, id: u32, package: i64, core: u32, siblings: &str, llc: &str) {
        self.cpu(id, Some(true), Some(CpuTopo { package, die: Some(0), core, siblings, llc: Some(llc) }), None);
    }

    /// A PCI device.
    pub fn pci(&self, addr: &str, class: &str, numa_node: Option<&str>, names: &[(&str, &str)]) {
        let base = format!("sys/bus/pci/devices/{addr}");
        self.write(&format!("{base}/class"), &format!("{class}\n"));
        self.write(&format!("{base}/vendor"), "0x15b3\n");
        if let Some(n) = numa_node {
            self.write(&format!("{base}/numa_node"), &format!("{n}\n"));
        }
        for (kind, name) in names {
            self.mkdir(&format!("{base}/{kind}/{name}"));
        }
    }
}

/// Why the real numactl cannot be run here, or `None` when it can.
pub fn numactl_unavailable() -> Option<String> {
    let ok = |cmd: &str| {
        Command::new("sh").arg("-c").arg(format!("command -v {cmd}")).output().is_ok_and(|o| o.status.success())
    };
    for cmd in ["numactl", "unshare", "mount"] {
        if !ok(cmd) {
            return Some(format!("{cmd} not installed"));
        }
    }
    // /proc/self belongs to the effective uid of the process reading it.
    use std::os::unix::fs::MetadataExt as _;
    if fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(u32::MAX) != 0 {
        return Some("not root (a private mount namespace needs CAP_SYS_ADMIN)".into());
    }
    None
}

/// Runs Debian's `numactl --hardware` with `node_dir` bind-mounted over /sys/devices/system/node in
/// a private mount namespace, so libnuma reads the fake tree exactly as it reads the real one.
/// Nothing outside the namespace changes.
pub fn real_numactl_hardware(node_dir: &Path) -> String {
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg("mount --bind \"$1\" /sys/devices/system/node && exec numactl --hardware")
        .arg("sh")
        .arg(node_dir)
        .output()
        .expect("run unshare");
    assert!(out.status.success(), "numactl --hardware failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8")
}

/// The repository's fixtures directory.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// Writes the node directories the kernel would show for `topo` (cpulist, cpumap, meminfo,
/// distance), so the real numactl can print a machine that is not here.
pub fn write_node_tree(fs: &FakeSys, topo: &numapilot_topology::Topology) {
    for (node, row) in topo.nodes.iter().zip(&topo.distances) {
        let distance = row.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(" ");
        fs.node(node.id, &node.cpus.to_list(), node.mem_total_kb, node.mem_free_kb, &distance);
    }
}

/// Whether a test that needs the real numactl should run; panics when it must run and cannot
/// (`NUMAPILOT_REQUIRE_NUMACTL=1`, set by the test script on machines where numactl is installed).
pub fn numactl_or_skip(test: &str) -> bool {
    match numactl_unavailable() {
        None => true,
        Some(why) if std::env::var_os("NUMAPILOT_REQUIRE_NUMACTL").is_some_and(|v| v == "1") => {
            panic!("{test}: the real numactl is required (NUMAPILOT_REQUIRE_NUMACTL=1) but {why}")
        }
        Some(why) => {
            eprintln!("{test}: skipped, {why}");
            false
        }
    }
}

/// Lines of `numactl --hardware` text with the `free:` figures blanked: free memory moves between
/// two reads of a live system and between a fixture's meminfo copy and the numactl run beside it;
/// every other line must be identical.
pub fn without_free_figures(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| match l.split_once(" free: ") {
            Some((head, tail)) if l.starts_with("node ") && tail.ends_with(" MB") => format!("{head} free: <n> MB"),
            _ => l.to_string(),
        })
        .collect()
}
