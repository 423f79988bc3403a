//! The sysfs reader on trees captured from real kernels (fixtures/, written by
//! scripts/capture-fixtures.sh): our numactl-style text must equal the real `numactl --hardware`
//! taken at the same moment (expected/numactl-hardware.txt) in every line but the `free:` figures,
//! which move between the copy of meminfo and the run of numactl.

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use numapilot_topology::{render, MachineFile, Topology};

/// Every fixture directory that holds a sysfs node tree.
fn fixture_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(common::fixtures_dir())
        .expect("fixtures/ exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("sys/devices/system/node").is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn name(dir: &std::path::Path) -> String {
    dir.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn numactl_text_equals_the_captured_numactl_output() {
    let dirs = fixture_dirs();
    assert!(dirs.iter().any(|d| name(d) == "host-6.18"), "fixtures/host-6.18 is missing: {dirs:?}");
    let mut compared = 0;
    for dir in &dirs {
        let expected_path = dir.join("expected/numactl-hardware.txt");
        let Ok(expected) = std::fs::read_to_string(&expected_path) else { continue };
        let topo = Topology::from_sysfs(dir).unwrap_or_else(|e| panic!("{}: {e}", name(dir)));
        let ours = render::numactl_hardware(&topo);
        assert_eq!(
            common::without_free_figures(&ours),
            common::without_free_figures(&expected),
            "{}: ours:\n{ours}\nnumactl at capture:\n{expected}",
            name(dir)
        );
        compared += 1;
    }
    assert!(compared >= 4, "host and the three rig guests");
}

#[test]
fn every_fixture_is_a_consistent_machine() {
    for dir in fixture_dirs() {
        let n = name(&dir);
        let t = Topology::from_sysfs(&dir).unwrap_or_else(|e| panic!("{n}: {e}"));
        for (i, row) in t.distances.iter().enumerate() {
            assert_eq!(row[i], 10, "{n}");
        }
        for node in &t.nodes {
            for c in node.cpus.iter() {
                let cpu = t.cpu(c).unwrap_or_else(|| panic!("{n}: node {} CPU {c} has no entry", node.id));
                assert!(cpu.online && cpu.node == node.id, "{n}: cpu {c}");
                assert!(cpu.siblings.contains(c), "{n}: cpu {c}");
                if let Some(llc) = &cpu.llc {
                    assert!(llc.contains(c) && cpu.siblings.is_subset(llc), "{n}: cpu {c}");
                }
            }
        }
        assert!(t.node_ids().is_subset(&t.possible), "{n}");
        // Tiers exist for every pair, local exactly on the diagonal.
        let tiers = t.tiers();
        for i in 0..t.nodes.len() {
            for j in 0..t.nodes.len() {
                assert_eq!(tiers.tiers[i][j] == numapilot_topology::Tier::Local, i == j, "{n}");
            }
        }
        // The exported machine file rebuilds the same machine (when every CPU node has memory,
        // which machine files require).
        if t.nodes.iter().all(|node| node.is_cpuless() || node.mem_total_kb > 0) {
            let file = MachineFile::from_topology(&t, Some(&n));
            assert_eq!(file.build().unwrap_or_else(|e| panic!("{n}: {e}")), t, "{n}");
        }
        // The other printers run on it.
        assert!(render::tree(&t).starts_with("machine: "), "{n}");
        assert!(render::json(&t).contains("\"tiers\""), "{n}");
    }
}

fn set(s: &str) -> numapilot_topology::IdSet {
    numapilot_topology::IdSet::parse_list(s).unwrap()
}

fn distances(t: &Topology) -> Vec<u32> {
    let d: BTreeSet<u32> = t.distances.iter().flatten().copied().collect();
    d.into_iter().collect()
}

/// `(same-socket, one-hop, far)` from `node`.
fn rings(t: &Topology, node: u32) -> (numapilot_topology::IdSet, numapilot_topology::IdSet, numapilot_topology::IdSet) {
    use numapilot_topology::Tier;
    let m = t.tiers();
    (m.nodes_at(node, Tier::SameSocket), m.nodes_at(node, Tier::OneHop), m.nodes_at(node, Tier::Far))
}

fn fixture(name: &str) -> Topology {
    let dir = common::fixtures_dir().join(name);
    Topology::from_sysfs(&dir).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The note of a CPU hotplug change says what each node has now, CPUs and memory: the 8-node
/// guest's memory-only node 7 reads "CPUs none, memory ..." (it read "CPUs none" alone, as a node
/// with nothing would), and so does a node whose CPUs all went offline; the memory is the node's
/// MemTotal from its meminfo.
#[test]
fn a_cpu_change_note_says_what_each_node_has() {
    let before = fixture("rig-6.12-8node");
    let node7 = before.node(7).unwrap();
    assert!(node7.cpus.is_empty() && node7.mem_total_kb > 0, "node 7 is memory-only: {node7:?}");
    let mut after = before.clone();
    let node0 = after.node(0).unwrap().cpus.clone();
    after.clip_to_online(&before.online_cpus().difference(&node0));
    let note = after.cpu_change_from(&before);
    let mib = |n: u32| before.node(n).unwrap().mem_total_kb / 1024;
    assert!(note.contains(&format!("node 7: CPUs none, memory {} MiB", mib(7))), "{note}");
    assert!(note.contains(&format!("node 0: CPUs none, memory {} MiB", mib(0))), "{note}");
    let node1 = before.node(1).unwrap();
    assert!(note.contains(&format!("node 1: CPUs {}, memory {} MiB", node1.cpus.to_list(), mib(1))), "{note}");
    let mut empty = node7.clone();
    empty.mem_total_kb = 0;
    assert_eq!(empty.describe(), "node 7: CPUs none, no memory");
    empty.mem_total_unknown = true;
    assert_eq!(empty.describe(), "node 7: CPUs none, memory of unknown size");
}

/// Each fixture's shape as fixtures/README.md documents it (and its cmd.txt's GuestSpec says).
#[test]
fn host_fixture_shape() {
    let host = fixture("host-6.18");
    assert_eq!((host.nodes.len(), host.cpus.len()), (1, 2));
    assert_eq!(host.node(0).unwrap().cpus.to_list(), "0-1");
    assert!(host.cpus.iter().all(|c| c.online && c.llc.as_ref().is_some_and(|l| l.to_list() == "0-1")));
    assert!(host.devices.iter().any(|d| d.class == numapilot_topology::DeviceClass::Network));
}

#[test]
fn rig_2node_shape() {
    // 2 nodes x 2 CPUs, distance 21.
    let t = fixture("rig-6.12-2node");
    assert_eq!(t.nodes.iter().map(|n| n.cpus.to_list()).collect::<Vec<_>>(), ["0-1", "2-3"]);
    assert_eq!(distances(&t), [10, 21]);
    assert_eq!(t.tier(0, 1), numapilot_topology::Tier::OneHop);
}

#[test]
fn rig_4node_shape() {
    // 2 sockets x 2 dies, one node per die, 10/11/20; NVMe on node 1, NIC on node 2.
    let t = fixture("rig-6.12-4node");
    assert_eq!(t.nodes.len(), 4);
    assert_eq!(distances(&t), [10, 11, 20]);
    assert_eq!(t.cpus.iter().map(|c| c.package).collect::<Vec<_>>(), [0, 0, 0, 0, 1, 1, 1, 1]);
    // QEMU puts the L3 per die: the LLC of CPU 2 is its node's CPUs.
    assert_eq!(t.cpu(2).unwrap().llc, Some(set("2-3")));
    assert_eq!(rings(&t, 0), (set("1"), set("2-3"), set("")));
    assert_eq!(rings(&t, 3), (set("2"), set("0-1"), set("")));
    let dev = |class| t.devices.iter().find(|d| d.class == class).unwrap_or_else(|| panic!("{:?}", t.devices));
    let nvme = dev(numapilot_topology::DeviceClass::Nvme);
    assert_eq!((nvme.node, nvme.names.clone()), (Some(1), vec!["nvme0".to_string()]));
    let nic = dev(numapilot_topology::DeviceClass::Network);
    assert_eq!((nic.node, nic.names.clone()), (Some(2), vec!["eth0".to_string()]));
}

#[test]
fn rig_8node_shape() {
    // 4 sockets of 2 nodes in a ring (10/12/20/30), nodes 0-6 with one CPU, node 7 memory-only.
    // Each vCPU is its own package in this guest, so same-socket comes from 12 <= 12 alone;
    // m = 20, 30 >= 25 -> far. Node 7 is 12 from node 6: same socket.
    let t = fixture("rig-6.12-8node");
    assert_eq!(t.nodes.len(), 8);
    assert_eq!(distances(&t), [10, 12, 20, 30]);
    assert!(t.node(7).unwrap().is_cpuless() && t.node(7).unwrap().mem_total_kb > 0);
    assert_eq!(t.online_cpus(), set("0-6"));
    assert_eq!(rings(&t, 0), (set("1"), set("2-3,6-7"), set("4-5")));
    assert_eq!(rings(&t, 7), (set("6"), set("0-1,4-5"), set("2-3")));
}
