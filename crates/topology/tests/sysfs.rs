//! The sysfs reader on hand-built trees: sparse node ids, CPU-less nodes, offline CPUs, old kernels
//! without `die_id`, caches, PCI devices, and every kind of malformed or missing file.

mod common;

use common::{CpuTopo, FakeSys};
use numapilot_topology::{sysfs::read_topology, DeviceClass, IdSet, TopologyError};

fn set(s: &str) -> IdSet {
    IdSet::parse_list(s).unwrap()
}

/// Node 0 with CPUs 0-3 (two cores of two threads) and offline CPU 4; node 8 memory-only.
fn sparse_machine() -> FakeSys {
    let fs = FakeSys::new();
    fs.node_lists("0,8", "0-15");
    fs.node(0, "0-3", 8_000_000, 7_000_000, "10 20");
    fs.node(8, "", 4_000_000, 3_999_999, "20 10");
    fs.write("sys/devices/system/cpu/online", "0-3\n");
    fs.write("sys/devices/system/cpu/possible", "0-4\n");
    fs.write("sys/devices/system/cpu/present", "0-4\n");
    // cpu0: no `online` file (x86 boot CPU), no die_id (kernel before 5.2).
    fs.cpu(0, None, Some(CpuTopo { package: 0, die: None, core: 0, siblings: "0,2", llc: Some("0-3") }), Some(0));
    fs.cpu(1, Some(true), Some(CpuTopo { package: 0, die: None, core: 1, siblings: "1,3", llc: Some("0-3") }), Some(0));
    fs.cpu(2, Some(true), Some(CpuTopo { package: 0, die: None, core: 0, siblings: "0,2", llc: Some("0-3") }), Some(0));
    fs.cpu(3, Some(true), Some(CpuTopo { package: 0, die: None, core: 1, siblings: "1,3", llc: Some("0-3") }), Some(0));
    // cpu4: offline: no topology directory, not in node0/cpulist, but linked to node 0.
    fs.cpu(4, Some(false), None, Some(0));
    fs
}

#[test]
fn sparse_node_ids_cpuless_node_and_offline_cpu() {
    let fs = sparse_machine();
    let t = read_topology(fs.root()).unwrap();
    assert_eq!(t.nodes.iter().map(|n| n.id).collect::<Vec<_>>(), vec![0, 8]);
    assert_eq!(t.node_ids(), set("0,8"));
    assert_eq!(t.possible, set("0-15"));
    assert_eq!(t.node_idx(8), Some(1), "dense index and kernel id are kept apart");
    assert_eq!(t.distance(0, 8), Some(20));
    assert_eq!(t.distances, vec![vec![10, 20], vec![20, 10]]);

    let n0 = t.node(0).unwrap();
    assert_eq!(n0.cpus, set("0-3"));
    assert_eq!((n0.mem_total_kb, n0.mem_free_kb), (8_000_000, 7_000_000));
    let n8 = t.node(8).unwrap();
    assert!(n8.is_cpuless());
    assert_eq!((n8.mem_total_kb, n8.mem_free_kb), (4_000_000, 3_999_999));

    assert_eq!(t.cpus.len(), 5, "offline CPUs are kept");
    let c0 = t.cpu(0).unwrap();
    assert!(c0.online, "no online file means online");
    assert_eq!((c0.node, c0.package, c0.die, c0.core), (0, 0, 0, 0));
    assert_eq!(c0.siblings, set("0,2"));
    assert_eq!(c0.llc, Some(set("0-3")));
    let c4 = t.cpu(4).unwrap();
    assert!(!c4.online);
    assert_eq!(c4.node, 0, "node from the cpu4/node0 link");
    assert_eq!(c4.siblings, set("4"));
    assert_eq!(c4.llc, None);
    assert_eq!(t.online_cpus(), set("0-3"));
    assert_eq!(t.core_count(), 2);
}

#[test]
fn die_id_read_when_present_and_negative_ids_read_as_zero() {
    let fs = FakeSys::new();
    fs.node(0, "0-1", 1024, 1024, "10");
    fs.cpu(0, None, Some(CpuTopo { package: -1, die: Some(-1), core: 0, siblings: "0", llc: None }), None);
    fs.cpu(1, None, Some(CpuTopo { package: 3, die: Some(2), core: 7, siblings: "1", llc: None }), None);
    let t = read_topology(fs.root()).unwrap();
    let (c0, c1) = (t.cpu(0).unwrap(), t.cpu(1).unwrap());
    assert_eq!((c0.package, c0.die), (0, 0));
    assert_eq!((c1.package, c1.die, c1.core), (3, 2, 7));
    assert_eq!(c0.llc, None, "no cache directory: no LLC");
}

#[test]
fn offline_cpu_node_from_node_directory_and_unplaceable_cpu_left_out() {
    let fs = sparse_machine();
    fs.remove("sys/devices/system/cpu/cpu4/node0");
    fs.mkdir("sys/devices/system/node/node8/cpu4");
    let t = read_topology(fs.root()).unwrap();
    assert_eq!(t.cpu(4).unwrap().node, 8, "node from node8/cpu4");

    fs.remove("sys/devices/system/node/node8/cpu4");
    let t = read_topology(fs.root()).unwrap();
    assert!(t.cpu(4).is_none(), "an offline CPU with no node is left out");
    assert_eq!(t.cpus.len(), 4);
}

#[test]
fn global_online_list_used_when_cpu_has_no_online_file() {
    let fs = sparse_machine();
    fs.write("sys/devices/system/cpu/online", "1-3\n");
    let t = read_topology(fs.root()).unwrap();
    assert!(!t.cpu(0).unwrap().online);
}

#[test]
fn llc_is_highest_non_instruction_cache() {
    let fs = FakeSys::new();
    fs.node(0, "0-1", 1024, 1024, "10");
    fs.simple_cpu(0, 0, 0, "0", "0-1");
    fs.simple_cpu(1, 0, 1, "1", "0-1");
    // CPU 1: a level-4 instruction cache (not a data path) must not win; L3 stays the LLC.
    fs.write("sys/devices/system/cpu/cpu1/cache/index4/level", "4\n");
    fs.write("sys/devices/system/cpu/cpu1/cache/index4/type", "Instruction\n");
    fs.write("sys/devices/system/cpu/cpu1/cache/index4/shared_cpu_list", "1\n");
    // CPU 0: no L3 (a guest CPU model without one): the L2 is the last level.
    fs.remove("sys/devices/system/cpu/cpu0/cache/index3");
    let t = read_topology(fs.root()).unwrap();
    assert_eq!(t.cpu(0).unwrap().llc, Some(set("0")), "L2 shared list (the siblings)");
    assert_eq!(t.cpu(1).unwrap().llc, Some(set("0-1")));
}

#[test]
fn cpumap_used_when_cpulist_missing() {
    let fs = FakeSys::new();
    fs.node(0, "0-1,33", 1024, 1024, "10");
    fs.remove("sys/devices/system/node/node0/cpulist");
    for c in [0, 1, 33] {
        fs.simple_cpu(c, 0, c, &c.to_string(), "0-1,33");
    }
    let t = read_topology(fs.root()).unwrap();
    assert_eq!(t.node(0).unwrap().cpus, set("0-1,33"));
}

#[test]
fn pci_devices_classified_with_node_and_names() {
    let fs = sparse_machine();
    fs.pci("0000:3b:00.0", "0x020000", Some("0"), &[("net", "eth0"), ("net", "eth1")]);
    fs.pci("0000:3b:00.1", "0x020700", Some("8"), &[("infiniband", "mlx5_2")]);
    fs.pci("0000:5e:00.0", "0x0c0600", Some("0"), &[]);
    fs.pci("0000:af:00.0", "0x030200", Some("-1"), &[]);
    fs.pci("0000:b0:00.0", "0x120000", None, &[]);
    fs.pci("0000:d8:00.0", "0x010802", Some("8"), &[("nvme", "nvme0")]);
    fs.pci("0000:00:17.0", "0x010601", Some("0"), &[]);
    fs.pci("0000:00:00.0", "0x060000", Some("0"), &[]); // host bridge: skipped
    fs.pci("0000:00:14.0", "0x0c0330", Some("0"), &[]); // USB: skipped
    fs.pci("0000:00:03.0", "0x020000", Some("-1"), &[]);
    fs.mkdir("sys/bus/pci/devices/0000:00:03.0/virtio0/net/ens3"); // virtio-net names one level down
    let t = read_topology(fs.root()).unwrap();
    let found: Vec<(&str, DeviceClass, Option<u32>, Vec<&str>)> = t
        .devices
        .iter()
        .map(|d| (d.address.as_str(), d.class, d.node, d.names.iter().map(String::as_str).collect()))
        .collect();
    assert_eq!(
        found,
        vec![
            ("0000:00:03.0", DeviceClass::Network, None, vec!["ens3"]),
            ("0000:00:17.0", DeviceClass::Storage, Some(0), vec![]),
            ("0000:3b:00.0", DeviceClass::Network, Some(0), vec!["eth0", "eth1"]),
            ("0000:3b:00.1", DeviceClass::Network, Some(8), vec!["mlx5_2"]),
            ("0000:5e:00.0", DeviceClass::Network, Some(0), vec![]),
            ("0000:af:00.0", DeviceClass::Gpu, None, vec![]),
            ("0000:b0:00.0", DeviceClass::Gpu, None, vec![]),
            ("0000:d8:00.0", DeviceClass::Nvme, Some(8), vec!["nvme0"]),
        ]
    );
    assert_eq!(t.devices[2].class_code, 0x020000);
}

#[test]
fn no_pci_tree_means_no_devices() {
    let t = read_topology(sparse_machine().root()).unwrap();
    assert!(t.devices.is_empty());
}

fn expect_err(fs: &FakeSys) -> TopologyError {
    read_topology(fs.root()).expect_err("the tree is invalid")
}

#[test]
fn malformed_meminfo_names_path_and_line() {
    let fs = sparse_machine();
    fs.write("sys/devices/system/node/node8/meminfo", "Node 8 MemTotal:  4000000 kB\nNode 8 MemFree:   lots kB\n");
    match expect_err(&fs) {
        TopologyError::Malformed { path, line, text, .. } => {
            assert!(path.ends_with("node/node8/meminfo"), "{path:?}");
            assert_eq!(line, 2);
            assert_eq!(text, "Node 8 MemFree:   lots kB");
        }
        e => panic!("unexpected {e}"),
    }
    // A file without either line is memory unknown, not an error (what numactl shows as
    // `<not available>`; gVisor's sysfs has no meminfo at all).
    fs.write("sys/devices/system/node/node8/meminfo", "Node 8 MemFree:  4000000 kB\n");
    let t = read_topology(fs.root()).unwrap();
    let n8 = t.node(8).unwrap();
    assert!(n8.mem_total_unknown && !n8.mem_free_unknown && n8.mem_total_kb == 0, "{n8:?}");
    assert_eq!(n8.mem_free_kb, 4_000_000);
    assert!(!t.node(0).unwrap().mem_total_unknown);
}

#[test]
fn distance_row_of_wrong_length_is_malformed() {
    let fs = sparse_machine();
    fs.write("sys/devices/system/node/node0/distance", "10 20 30\n");
    let e = expect_err(&fs);
    let msg = e.to_string();
    assert!(matches!(e, TopologyError::Malformed { line: 1, .. }), "{msg}");
    assert!(msg.contains("node0/distance") && msg.contains("3 distances for 2 online nodes"), "{msg}");
    fs.write("sys/devices/system/node/node0/distance", "10 x\n");
    let e = expect_err(&fs).to_string();
    // A reason that does not quote the line is followed by it.
    assert!(e.ends_with("distance \"x\" is not a number: \"10 x\""), "{e}");
    // Outside a SLIT entry's range, as a machine file may not say either (such a tree was read,
    // and its export refused; review helper-53).
    for row in ["0 20", "10 4294967295", "10 256"] {
        fs.write("sys/devices/system/node/node0/distance", &format!("{row}\n"));
        let e = expect_err(&fs).to_string();
        assert!(e.contains("node0/distance") && e.contains("is outside 10..=255"), "{row}: {e}");
    }
}

/// A node id past what Linux supports, or too large to read, is an error naming the directory
/// (node4294967295 sized a node set of 1 GB; node99999999999999999999 was skipped and another
/// file blamed; review helper-53).
#[test]
fn node_directories_past_linuxs_ids_are_named() {
    let fs = sparse_machine();
    fs.write("sys/devices/system/node/node4294967295/distance", "10\n");
    let e = expect_err(&fs).to_string();
    assert!(e.contains("node4294967295") && e.contains("above 1023"), "{e}");
    let fs = sparse_machine();
    fs.write("sys/devices/system/node/node99999999999999999999/distance", "10\n");
    let e = expect_err(&fs).to_string();
    assert!(e.contains("node99999999999999999999: the number is too large for an id"), "{e}");
}

#[test]
fn bad_cpulist_is_malformed() {
    let fs = sparse_machine();
    fs.write("sys/devices/system/node/node0/cpulist", "0-3,z\n");
    let e = expect_err(&fs);
    assert!(matches!(e, TopologyError::Malformed { .. }), "{e}");
    assert!(e.to_string().contains("node0/cpulist") && e.to_string().contains("\"z\""), "{e}");
    // The line once: the list parser quotes it already, so the error does not add it again.
    assert!(e.to_string().ends_with(":1: bad id or range \"z\" in \"0-3,z\""), "{e}");
    fs.write("sys/devices/system/node/node0/cpulist", "0-zz\n");
    let e = expect_err(&fs).to_string();
    assert_eq!(e.matches("0-zz").count(), 1, "{e}");
}

#[test]
fn required_files_missing() {
    let rel = "sys/devices/system/node/node8/distance";
    let fs = sparse_machine();
    fs.remove(rel);
    match expect_err(&fs) {
        TopologyError::Missing { path } => assert!(path.ends_with(rel.trim_start_matches("sys/")), "{path:?}"),
        e => panic!("{rel}: unexpected {e}"),
    }
    // What gVisor's sysfs leaves out although the kernel always writes it: a node's meminfo (its
    // memory unknown) and a CPU's ids (0, cores told apart by siblings). Neither is an error.
    let fs = sparse_machine();
    fs.remove("sys/devices/system/node/node0/meminfo");
    let n0 = read_topology(fs.root()).unwrap().node(0).unwrap().clone();
    assert!(n0.mem_total_unknown && n0.mem_free_unknown, "{n0:?}");
    let fs = sparse_machine();
    for c in 0..4 {
        fs.remove(&format!("sys/devices/system/cpu/cpu{c}/topology/physical_package_id"));
        fs.remove(&format!("sys/devices/system/cpu/cpu{c}/topology/core_id"));
    }
    let t = read_topology(fs.root()).unwrap();
    let cores: Vec<u32> = (0..4).map(|c| t.cpu(c).unwrap().core).collect();
    assert_eq!(cores, [0, 1, 0, 1], "cores from the siblings 0,2 and 1,3");
    let fs = sparse_machine();
    fs.remove("sys/devices/system/node/node0/cpulist");
    fs.remove("sys/devices/system/node/node0/cpumap");
    assert!(matches!(expect_err(&fs), TopologyError::Missing { path } if path.ends_with("node0/cpulist")));
}

#[test]
fn no_node_directory_is_no_numa() {
    let fs = FakeSys::new();
    fs.mkdir("sys/devices/system/cpu/cpu0");
    assert!(matches!(expect_err(&fs), TopologyError::NoNuma { .. }));
}

#[test]
fn inconsistent_trees_rejected() {
    let fs = sparse_machine();
    fs.write("sys/devices/system/node/node0/cpulist", "0-3,9\n");
    let e = expect_err(&fs);
    assert!(matches!(e, TopologyError::Inconsistent { .. }) && e.to_string().contains("lists CPU 9"), "{e}");

    let fs = sparse_machine();
    fs.write("sys/devices/system/node/node8/cpulist", "3\n");
    let e = expect_err(&fs);
    assert!(e.to_string().contains("CPU 3 is also listed by node 0"), "{e}");

    let fs = sparse_machine();
    fs.write("sys/devices/system/cpu/cpu2/online", "2\n");
    assert!(matches!(expect_err(&fs), TopologyError::Malformed { .. }));

    let fs = sparse_machine();
    fs.pci("0000:00:01.0", "network", Some("0"), &[]);
    let e = expect_err(&fs);
    assert!(e.to_string().contains("0000:00:01.0/class"), "{e}");
}

/// A NIC on node 8 reached through a class symlink, an NVMe namespace whose controller says -1, a
/// block device by number, and a virtual interface with no `numa_node` anywhere.
#[test]
fn device_node_follows_links_to_the_nearest_numa_node() {
    use numapilot_topology::sysfs::{device_node, DeviceName};
    use numapilot_topology::DeviceError;
    use std::os::unix::fs::symlink;

    let fs = FakeSys::new();
    let r = fs.root();
    let bdf = "pci0000:3a/0000:3a:00.0/0000:3b:00.0";
    let nic = format!("sys/devices/{bdf}");
    fs.write(&format!("{nic}/numa_node"), "8\n");
    fs.mkdir(&format!("{nic}/net/eth0"));
    fs.mkdir(&format!("{nic}/block/sda"));
    for (link, target) in [
        ("sys/class/net/eth0", format!("../../devices/{bdf}/net/eth0")),
        ("sys/bus/pci/devices/0000:3b:00.0", format!("../../../devices/{bdf}")),
        ("sys/dev/block/8:0", format!("../../devices/{bdf}/block/sda")),
    ] {
        fs.mkdir(link.rsplit_once('/').unwrap().0);
        symlink(target, r.join(link)).unwrap();
    }
    fs.write("sys/devices/pci0000:00/0000:00:04.0/numa_node", "-1\n");
    fs.mkdir("sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1");
    fs.mkdir("sys/class/block");
    symlink("../../devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1", r.join("sys/class/block/nvme0n1")).unwrap();
    fs.mkdir("sys/devices/virtual/net/lo");
    symlink("../../devices/virtual/net/lo", r.join("sys/class/net/lo")).unwrap();

    assert_eq!(device_node(r, DeviceName::Net("eth0")).unwrap(), 8);
    assert_eq!(device_node(r, DeviceName::Pci("3b:00.0")).unwrap(), 8);
    assert_eq!(device_node(r, DeviceName::Pci("0000:3b:00")).unwrap(), 8);
    assert_eq!(device_node(r, DeviceName::BlockNumber { major: 8, minor: 0 }).unwrap(), 8);
    let e = device_node(r, DeviceName::Block("nvme0n1")).unwrap_err();
    assert!(matches!(e, DeviceError::NoAffinity { value: -1, .. }), "{e:?}");
    assert!(e.to_string().starts_with("block device nvme0n1 has no NUMA node (the kernel reports -1 in"), "{e}");
    let e = device_node(r, DeviceName::Net("lo")).unwrap_err();
    assert!(matches!(e, DeviceError::NoNumaNodeFile { .. }), "{e:?}");
    let e = device_node(r, DeviceName::Net("eth9")).unwrap_err();
    assert!(e.to_string().starts_with("no network device eth9 ("), "{e}");
    for bad in ["", ".", "..", "../x"] {
        assert!(matches!(device_node(r, DeviceName::Net(bad)), Err(DeviceError::BadName { .. })), "{bad:?}");
    }
    let e = device_node(r, DeviceName::Pci("zz")).unwrap_err();
    assert_eq!(e.to_string(), "bad PCI address \"zz\" (expected [segment:]bus:device[.function], hexadecimal)");
    fs.write(&format!("{nic}/numa_node"), "eight\n");
    let e = device_node(r, DeviceName::Net("eth0")).unwrap_err();
    assert!(matches!(e, DeviceError::Sysfs(TopologyError::Malformed { line: 1, .. })), "{e:?}");
}

#[test]
fn device_node_on_a_captured_guest() {
    use numapilot_topology::sysfs::{device_node, DeviceName};
    // fixtures/rig-6.12-4node: the NVMe controller behind the expander bridge on node 1, the
    // vmxnet3 NIC on node 2 (rig spec), the q35 host bridge with no affinity.
    let root = common::fixtures_dir().join("rig-6.12-4node");
    let topo = numapilot_topology::Topology::from_sysfs(&root).unwrap();
    let mut checked = 0;
    for d in &topo.devices {
        let got = device_node(&root, DeviceName::Pci(&d.address));
        assert_eq!(got.ok(), d.node, "{}", d.address);
        checked += usize::from(d.node.is_some());
    }
    assert!(checked >= 2, "{:?}", topo.devices);
    assert!(device_node(&root, DeviceName::Pci("0:0.0")).is_err());
}

#[test]
fn pci_addresses_in_every_form() {
    use numapilot_topology::sysfs::canonical_pci_address as pci;
    assert_eq!(pci("3b:00.0").as_deref(), Some("0000:3b:00.0"));
    assert_eq!(pci("0001:3b:1f.7").as_deref(), Some("0001:3b:1f.7"));
    assert_eq!(pci("0:3b:0").as_deref(), Some("0000:3b:00.0"));
    assert_eq!(pci("3b"), None);
    assert_eq!(pci("3b:20.0"), None);
    assert_eq!(pci("3b:00.8"), None);
    assert_eq!(pci(":00.0"), None);
}

/// `isolated` as the 6.12 guest booted with `isolcpus=3` wrote it, empty (no isolcpus), absent (old
/// kernels, fixture roots) or "(null)" (how `nohz_full` reads unset): the CPUs, or none; a line
/// that is not a CPU list is an error naming the file. `nohz_full` the same, each from its own file.
#[test]
fn isolated_and_nohz_full_cpus_read_from_sysfs() {
    use numapilot_topology::sysfs::{isolated_cpus, nohz_full_cpus};
    type Read = fn(&std::path::Path) -> Result<IdSet, numapilot_topology::TopologyError>;
    let reads: [(&str, Read); 2] = [("isolated", isolated_cpus), ("nohz_full", nohz_full_cpus)];
    for (name, read) in reads {
        let fs = sparse_machine();
        let file = format!("sys/devices/system/cpu/{name}");
        assert_eq!(read(fs.root()).unwrap(), IdSet::new(), "{name} absent: none");
        for (text, want) in [("3\n", "3"), ("\n", ""), ("1-2,3\n", "1-3"), ("(null)\n", "")] {
            fs.write(&file, text);
            assert_eq!(read(fs.root()).unwrap(), set(want), "{name} {text:?}");
        }
        let other =
            if name == "isolated" { "sys/devices/system/cpu/nohz_full" } else { "sys/devices/system/cpu/isolated" };
        fs.write(other, "0-1\n");
        assert_eq!(read(fs.root()).unwrap(), IdSet::new(), "{name} read from its own file");
        fs.write(&file, "three\n");
        let e = read(fs.root()).unwrap_err().to_string();
        assert!(e.contains(&file) && e.contains("three"), "{e}");
    }
    // The same reader for the other lists, an absent file told from an empty one.
    use numapilot_topology::sysfs::cpu_list;
    let fs = sparse_machine();
    assert_eq!(cpu_list(fs.root(), "possible").unwrap(), Some(set("0-4")), "the sparse machine's");
    assert_eq!(cpu_list(fs.root(), "offline").unwrap(), None, "absent");
    fs.write("sys/devices/system/cpu/offline", "\n");
    assert_eq!(cpu_list(fs.root(), "offline").unwrap(), Some(IdSet::new()), "empty");
}

/// Reserved CPUs leave their nodes' lists and the usable CPUs, but stay known and online; a node
/// whose CPUs are all reserved offers none.
#[test]
fn reserved_cpus_leave_the_nodes_but_stay_online() {
    let fs = sparse_machine();
    let mut t = read_topology(fs.root()).unwrap();
    t.reserve(&set("1,3"));
    assert_eq!(t.node(0).unwrap().cpus, set("0,2"));
    assert_eq!(t.usable_cpus(), set("0,2"));
    assert_eq!(t.online_cpus(), set("0-3"), "still online");
    assert_eq!(t.cpu(3).map(|c| c.node), Some(0), "still known, with its node");
    assert_eq!(t.cpus_of_nodes(&set("0,8")), set("0,2"));
    let again = t.clone();
    t.reserve(&set("1,3"));
    assert_eq!(t, again, "idempotent");
    t.reserve(&set("0-3"));
    assert!(t.node(0).unwrap().cpus.is_empty() && t.usable_cpus().is_empty());
}

/// Core ids that do not tell cores apart: arm64 device-tree machines number `core_id` from 0 in
/// each cluster, so two cores of one package share an id; a CPU without a `topology/` directory
/// while online reads core 0. Both are read as the lowest CPU of their siblings, for every online
/// CPU of that package (review helper-56: whole packages were one core, and numad's and the
/// policy's core counts with them). A package whose ids are unique keeps the kernel's.
#[test]
fn cores_sharing_an_id_without_being_siblings_are_told_apart() {
    let fs = FakeSys::new();
    fs.node_lists("0", "0");
    fs.node(0, "0-3", 8_000_000, 7_000_000, "10");
    // Two clusters of two single-thread cores, core_id restarting at 0 in each.
    for (cpu, core) in [(0, 0), (1, 1), (2, 0), (3, 1)] {
        fs.cpu(
            cpu,
            Some(true),
            Some(CpuTopo { package: 0, die: None, core, siblings: &cpu.to_string(), llc: Some("0-3") }),
            Some(0),
        );
    }
    let t = read_topology(fs.root()).unwrap();
    let cores: Vec<u32> = t.cpus.iter().map(|c| c.core).collect();
    assert_eq!(cores, [0, 1, 2, 3]);
    // SMT siblings sharing a core id stay one core, with the kernel's id.
    let t = read_topology(sparse_machine().root()).unwrap();
    let cores: Vec<u32> = t.cpus.iter().filter(|c| c.online).map(|c| c.core).collect();
    assert_eq!(cores, [0, 1, 0, 1]);
    // An online CPU without a topology directory is a core of its own.
    let fs = FakeSys::new();
    fs.node_lists("0", "0");
    fs.node(0, "0-1", 8_000_000, 7_000_000, "10");
    fs.cpu(0, Some(true), None, Some(0));
    fs.cpu(1, Some(true), None, Some(0));
    let t = read_topology(fs.root()).unwrap();
    assert_eq!(t.cpus.iter().map(|c| c.core).collect::<Vec<_>>(), [0, 1]);
}
