//! CPU and node hotplug seen from sysfs: the daemon's live host reads
//! `/sys/devices/system/cpu/online` (and `node/online`, `node/has_memory`) each cycle and reads the
//! topology again when one changes ([`HotplugWatch::look`]). These tests take the rig's 2-node
//! guest sysfs (a real 6.12 kernel's files, `fixtures/rig-6.12-2node`) and change it the way the
//! kernel does when node 1's CPUs go offline and come back, or a node with memory alone comes and
//! goes. The rig's daemon-safety scenario takes CPUs offline on the running guest.

use std::path::{Path, PathBuf};

mod common;

use numapilot_daemon::live::{Hotplug, HotplugWatch, HOTPLUG_UNSETTLED_LOOKS};
use numapilot_topology::{CpuSet, NodeSet, Topology};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/rig-6.12-2node")
}

/// A copy of the fixture in a temporary directory (removed when the first value drops) and
/// its root.
fn copied_fixture() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    common::copy_tree(&fixture(), &root);
    (dir, root)
}

fn write(root: &Path, rel: &str, text: &str) {
    std::fs::write(root.join(rel), text).unwrap();
}

fn cpus(list: &str) -> CpuSet {
    CpuSet::parse_list(list).unwrap()
}

/// What the kernel shows once CPUs 2 and 3 (all of node 1's) are offline: `online` 0-1, their
/// `online` files 0, node 1's cpulist empty, and no `topology/` directory for an offline CPU.
fn offline_node1(root: &Path) {
    for cpu in [2, 3] {
        write(root, &format!("sys/devices/system/cpu/cpu{cpu}/online"), "0\n");
        std::fs::remove_dir_all(root.join(format!("sys/devices/system/cpu/cpu{cpu}/topology"))).unwrap();
    }
    write(root, "sys/devices/system/node/node1/cpulist", "\n");
    write(root, "sys/devices/system/cpu/online", "0-1\n");
}

#[test]
fn offlined_cpus_leave_the_topology_and_come_back_with_it() {
    let (dir, root) = copied_fixture();
    let start = Topology::from_sysfs(&root).unwrap();
    assert_eq!(start.online_cpus(), cpus("0-3"));
    let mut w = HotplugWatch::default();

    // Nothing changed: nothing read again, however often it is asked.
    for _ in 0..3 {
        assert!(matches!(w.look(&root, &start), Hotplug::Same));
    }

    offline_node1(&root);
    let off = match w.look(&root, &start) {
        Hotplug::Changed(t) => t,
        other => panic!("node 1 offline not seen: {other:?}"),
    };
    assert_eq!(off.online_cpus(), cpus("0-1"));
    let node1 = off.nodes.iter().find(|n| n.id == 1).expect("node 1 keeps its memory, so it stays a node");
    assert!(node1.cpus.is_empty(), "node 1 has no CPU to place a thread on: {:?}", node1.cpus);
    // Seen once: the next look at the same file is free and finds nothing new.
    assert!(matches!(w.look(&root, &off), Hotplug::Same));

    // Back online: the fixture's own files again.
    let back_root = dir.path().join("back");
    common::copy_tree(&fixture(), &back_root);
    let back = match w.look(&back_root, &off) {
        Hotplug::Changed(t) => t,
        other => panic!("CPUs back online not seen: {other:?}"),
    };
    assert_eq!(back.online_cpus(), cpus("0-3"));
    assert_eq!(back.nodes.iter().find(|n| n.id == 1).unwrap().cpus, cpus("2-3"));
}

#[test]
fn a_topology_caught_mid_change_is_read_again_until_it_agrees_with_the_file() {
    let (_dir, root) = copied_fixture();
    offline_node1(&root);
    let off = Topology::from_sysfs(&root).unwrap();
    let mut w = HotplugWatch::default();
    assert!(matches!(w.look(&root, &off), Hotplug::Same));

    // CPU 2 back first: `online` already says 0-3 (as the rig's guest once showed) while CPU 3
    // still reads offline.
    write(&root, "sys/devices/system/cpu/online", "0-3\n");
    write(&root, "sys/devices/system/cpu/cpu2/online", "1\n");
    common::copy_tree(
        &fixture().join("sys/devices/system/cpu/cpu2/topology"),
        &root.join("sys/devices/system/cpu/cpu2/topology"),
    );
    write(&root, "sys/devices/system/node/node1/cpulist", "2\n");
    let partial = match w.look(&root, &off) {
        Hotplug::Changed(t) => t,
        other => panic!("CPU 2 back not seen: {other:?}"),
    };
    assert_eq!(partial.online_cpus(), cpus("0-2"));

    // The file has not changed since, but the topology did not agree with it: read again.
    write(&root, "sys/devices/system/cpu/cpu3/online", "1\n");
    common::copy_tree(
        &fixture().join("sys/devices/system/cpu/cpu3/topology"),
        &root.join("sys/devices/system/cpu/cpu3/topology"),
    );
    write(&root, "sys/devices/system/node/node1/cpulist", "2-3\n");
    let whole = match w.look(&root, &partial) {
        Hotplug::Changed(t) => t,
        other => panic!("CPU 3 back not seen after a mid-change read: {other:?}"),
    };
    assert_eq!(whole.online_cpus(), cpus("0-3"));
    assert!(matches!(w.look(&root, &whole), Hotplug::Same));
}

#[test]
fn a_cpu_online_before_its_node_lists_it_is_read_again_until_the_node_does() {
    // Seen in the rig's 2-node guest bringing CPUs 2 and 3 back: `online` 0-3 and both CPUs'
    // own files 1 while node 1's cpulist still said "2". Taken as settled (the per-CPU flags
    // agreed with the file), node 1 kept one CPU for good and CPU 3 was never placed on again.
    let (_dir, root) = copied_fixture();
    offline_node1(&root);
    let off = Topology::from_sysfs(&root).unwrap();
    let mut w = HotplugWatch::default();
    assert!(matches!(w.look(&root, &off), Hotplug::Same));
    common::copy_tree(&fixture().join("sys/devices/system/cpu"), &root.join("sys/devices/system/cpu"));
    write(&root, "sys/devices/system/node/node1/cpulist", "2\n");
    // The kernel's cpuN/nodeM link (the capture left links out): how CPU 3's node is known
    // while no cpulist names it.
    std::os::unix::fs::symlink("../../node/node1", root.join("sys/devices/system/cpu/cpu3/node1")).unwrap();
    let partial = match w.look(&root, &off) {
        Hotplug::Changed(t) => t,
        other => panic!("CPUs back not seen: {other:?}"),
    };
    assert_eq!(partial.online_cpus(), cpus("0-3"), "the per-CPU files say online");
    assert_eq!(partial.usable_cpus(), cpus("0-2"), "node 1 names CPU 2 alone");
    assert!(!w.settled(), "the node's list disagrees with the file: looked at again");
    // Nothing changed yet: read again, the same partial view, not settled (within the bound).
    assert!(matches!(w.look(&root, &partial), Hotplug::Same));
    assert!(!w.settled());
    write(&root, "sys/devices/system/node/node1/cpulist", "2-3\n");
    let whole = match w.look(&root, &partial) {
        Hotplug::Changed(t) => t,
        other => panic!("CPU 3 listed by node 1 not seen: {other:?}"),
    };
    assert_eq!(whole.nodes.iter().find(|n| n.id == 1).unwrap().cpus, cpus("2-3"));
    assert!(w.settled());
    assert!(matches!(w.look(&root, &whole), Hotplug::Same));
}

#[test]
fn a_cpu_gone_from_its_node_before_its_own_file_says_so_is_read_again() {
    // Going offline the other way round: `online` and node 1's cpulist no longer name CPUs 2
    // and 3 while their own `online` files (read after the cpulists) still say 1. The topology
    // read then has them online (through the cpuN/node1 links) but on no node's list: usable
    // agrees with the file, the per-CPU flags do not, and settling there would leave CPUs 2-3
    // "online" for the policy's own-mask checks and the sampler until the file changed again.
    let (_dir, root) = copied_fixture();
    let start = Topology::from_sysfs(&root).unwrap();
    let mut w = HotplugWatch::default();
    assert!(matches!(w.look(&root, &start), Hotplug::Same));
    for cpu in [2, 3] {
        std::os::unix::fs::symlink("../../node/node1", root.join(format!("sys/devices/system/cpu/cpu{cpu}/node1")))
            .unwrap();
    }
    write(&root, "sys/devices/system/node/node1/cpulist", "\n");
    write(&root, "sys/devices/system/cpu/online", "0-1\n");
    let partial = match w.look(&root, &start) {
        Hotplug::Changed(t) => t,
        other => panic!("node 1's CPUs leaving not seen: {other:?}"),
    };
    // Handed over clipped to the file: CPUs 2-3 read offline although their own files say 1.
    assert_eq!((partial.online_cpus(), partial.usable_cpus()), (cpus("0-1"), cpus("0-1")));
    assert!(!w.settled(), "the per-CPU files disagree with `online`: looked at again");
    offline_node1(&root);
    assert!(matches!(w.look(&root, &partial), Hotplug::Same), "the clipped topology was already right");
    assert!(w.settled(), "settled once the files agree");
}

#[test]
fn going_offline_a_node_listing_a_cpu_its_own_file_calls_offline_is_not_placed_on() {
    // CI's rig run: `online` 0-1 and CPU 2's own file 0 while node 1's cpulist still said "2".
    let (_dir, root) = copied_fixture();
    let start = Topology::from_sysfs(&root).unwrap();
    let mut w = HotplugWatch::default();
    assert!(matches!(w.look(&root, &start), Hotplug::Same));
    offline_node1(&root);
    write(&root, "sys/devices/system/node/node1/cpulist", "2\n");
    let partial = match w.look(&root, &start) {
        Hotplug::Changed(t) => t,
        other => panic!("node 1's CPUs leaving not seen: {other:?}"),
    };
    let node1 = partial.nodes.iter().find(|n| n.id == 1).unwrap();
    assert!(node1.cpus.is_empty(), "CPU 2 is offline by its own file: not placeable, {:?}", node1.cpus);
    assert!(!w.settled(), "node 1's cpulist disagrees: looked at again");
    write(&root, "sys/devices/system/node/node1/cpulist", "\n");
    assert!(matches!(w.look(&root, &partial), Hotplug::Same));
    assert!(w.settled());
}

#[test]
fn a_topology_that_cannot_be_read_is_kept_and_tried_again() {
    let (_dir, root) = copied_fixture();
    let start = Topology::from_sysfs(&root).unwrap();
    let mut w = HotplugWatch::default();
    offline_node1(&root);
    // A required file that does not parse: the error names it, and the next look tries again.
    write(&root, "sys/devices/system/node/node0/distance", "ten\n");
    for _ in 0..2 {
        match w.look(&root, &start) {
            Hotplug::Unreadable { online, error } => {
                assert_eq!(online, cpus("0-1"));
                assert!(error.contains("node0/distance"), "the error names the file: {error}");
            }
            other => panic!("an unreadable topology must be reported: {other:?}"),
        }
    }
    write(&root, "sys/devices/system/node/node0/distance", "10 21\n");
    assert!(matches!(w.look(&root, &start), Hotplug::Changed(_)));
}

#[test]
fn a_root_without_the_online_files_changes_nothing() {
    let (_dir, root) = copied_fixture();
    let start = Topology::from_sysfs(&root).unwrap();
    for f in ["cpu/online", "node/online", "node/has_memory"] {
        std::fs::remove_file(root.join("sys/devices/system").join(f)).unwrap();
    }
    offline_node1(&root);
    std::fs::remove_file(root.join("sys/devices/system/cpu/online")).unwrap();
    let mut w = HotplugWatch::default();
    assert!(matches!(w.look(&root, &start), Hotplug::Same));
    assert!(!w.settled());
}

#[test]
fn a_change_the_per_cpu_files_do_not_show_yet_is_looked_at_again() {
    // Offlining: the kernel updates `online` before the CPU's own files say so (its device goes
    // offline only once cpu_down returned). The first look reads the old per-CPU files: the
    // topology is handed over clipped to the file at once (CPUs 2-3 not placed on), and the next
    // look, with the file unchanged, reads again until the per-CPU files agree.
    let (_dir, root) = copied_fixture();
    let start = Topology::from_sysfs(&root).unwrap();
    let mut w = HotplugWatch::default();
    assert!(matches!(w.look(&root, &start), Hotplug::Same));
    write(&root, "sys/devices/system/cpu/online", "0-1\n");
    let clipped = match w.look(&root, &start) {
        Hotplug::Changed(t) => t,
        other => panic!("the file's change is followed at once: {other:?}"),
    };
    assert_eq!((clipped.online_cpus(), clipped.usable_cpus()), (cpus("0-1"), cpus("0-1")));
    assert!(!w.settled(), "not settled: the next look reads sysfs again");
    assert!(matches!(w.look(&root, &clipped), Hotplug::Same));
    assert!(!w.settled());
    offline_node1(&root);
    assert!(matches!(w.look(&root, &clipped), Hotplug::Same), "nothing new once the per-CPU files show it");
    assert!(w.settled());
}

#[test]
fn cpus_the_file_lists_without_a_node_do_not_make_it_read_every_cycle() {
    let (_dir, root) = copied_fixture();
    let start = Topology::from_sysfs(&root).unwrap();
    // CPU 4 in `online` but nowhere else (no cpu4 directory, no node lists it).
    write(&root, "sys/devices/system/cpu/online", "0-4\n");
    let mut w = HotplugWatch::default();
    for _ in 0..HOTPLUG_UNSETTLED_LOOKS {
        assert!(!w.settled());
        assert!(matches!(w.look(&root, &start), Hotplug::Same));
    }
    assert!(w.settled(), "taken as it is after {HOTPLUG_UNSETTLED_LOOKS} looks: not read in full every cycle");
}

/// With CPU 3 reserved (isolated, or `reserved_cpus`), the topology in use lists 0-2: an unchanged
/// file is not taken for a disagreement (no read again), and a topology read after node 1's CPUs
/// went offline and came back leaves CPU 3 out again.
#[test]
fn a_reserved_cpu_stays_out_of_every_topology_read_again() {
    let (dir, root) = copied_fixture();
    let mut start = Topology::from_sysfs(&root).unwrap();
    start.reserve(&cpus("3"));
    let mut w = HotplugWatch::with_reserved(cpus("3"));
    assert!(matches!(w.look(&root, &start), Hotplug::Same), "the topology in use agrees with the file");
    offline_node1(&root);
    let off = match w.look(&root, &start) {
        Hotplug::Changed(t) => t,
        other => panic!("node 1 offline not seen: {other:?}"),
    };
    assert_eq!(off.usable_cpus(), cpus("0-1"));
    let back_root = dir.path().join("back");
    common::copy_tree(&fixture(), &back_root);
    let back = match w.look(&back_root, &off) {
        Hotplug::Changed(t) => t,
        other => panic!("CPUs back online not seen: {other:?}"),
    };
    assert_eq!(back.online_cpus(), cpus("0-3"));
    assert_eq!(back.usable_cpus(), cpus("0-2"), "CPU 3 is reserved again");
    assert_eq!(back.nodes.iter().find(|n| n.id == 1).unwrap().cpus, cpus("2"));
    assert!(matches!(w.look(&back_root, &back), Hotplug::Same));
}

/// Init (pid 1) under `root` with its affinity `mask` (systemd's `CPUAffinity=`): this process's
/// status with its `Cpus_allowed_list` line changed.
fn init_with_affinity(root: &Path, mask: &str) {
    let me = std::fs::read_to_string("/proc/self/status").unwrap();
    let status: String = me
        .lines()
        .map(|l| {
            if l.starts_with("Cpus_allowed_list:") {
                format!("Cpus_allowed_list:\t{mask}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    std::fs::create_dir_all(root.join("proc/1")).unwrap();
    std::fs::write(root.join("proc/1/status"), status).unwrap();
}

/// Rule reserved-cpus-after-hotplug: on a host that keeps CPU 3 out of init's affinity
/// (`CPUAffinity=0-2`), CPU 3 offline when the daemon started was not judged then (it is judged
/// among the CPUs online); when it comes online it is reserved, not placed on, and the change is
/// said once. A watch that keeps the start's reservation as it was (the code before) hands over
/// CPU 3 as a CPU to place on.
#[test]
fn a_kept_cpu_offline_at_start_is_reserved_when_it_comes_online() {
    let (dir, root) = copied_fixture();
    write(&root, "sys/devices/system/cpu/cpu3/online", "0\n");
    std::fs::remove_dir_all(root.join("sys/devices/system/cpu/cpu3/topology")).unwrap();
    write(&root, "sys/devices/system/node/node1/cpulist", "2\n");
    write(&root, "sys/devices/system/cpu/online", "0-2\n");
    init_with_affinity(&root, "0-2");
    let start = Topology::from_sysfs(&root).unwrap();
    assert_eq!(start.online_cpus(), cpus("0-2"));
    let none = CpuSet::new();
    let (reserved, note) = numapilot_daemon::live::reserved_cpus(&root, &none, true, &start.online_cpus()).unwrap();
    assert!(reserved.is_empty() && note.is_none(), "nothing to keep among the CPUs online: {note:?}");
    let mut judged = HotplugWatch::with_reservation(reserved.clone(), none.clone(), true);
    let mut kept_as_was = HotplugWatch::with_reserved(reserved);
    assert!(matches!(judged.look(&root, &start), Hotplug::Same));
    assert!(matches!(kept_as_was.look(&root, &start), Hotplug::Same));

    let back = dir.path().join("back");
    common::copy_tree(&fixture(), &back);
    init_with_affinity(&back, "0-2");
    let topo = match judged.look(&back, &start) {
        Hotplug::Changed(t) => t,
        other => panic!("CPU 3 online not seen: {other:?}"),
    };
    assert_eq!(topo.online_cpus(), cpus("0-3"));
    assert_eq!(topo.usable_cpus(), cpus("0-2"), "CPU 3, outside init's affinity, is placed on");
    let said = judged.take_reservation_change().expect("the new reservation is said");
    assert_eq!(
        said,
        "CPUs 3 reserved (outside init's affinity (systemd CPUAffinity=): 3): no process is placed on them"
    );
    assert_eq!(judged.take_reservation_change(), None, "said once");
    assert!(matches!(judged.look(&back, &topo), Hotplug::Same));
    match kept_as_was.look(&back, &start) {
        Hotplug::Changed(t) => assert_eq!(t.usable_cpus(), cpus("0-3"), "the control keeps the start's reservation"),
        other => panic!("CPU 3 online not seen: {other:?}"),
    }
}

/// What the kernel shows once a node with memory and no CPU (CXL memory, memory hot-add) is
/// online as node 2: its directory (no CPUs, `mem_kb` of memory: 0 before its memory is
/// onlined), a third distance on every row, and `node/online`. `has_memory` is written by the
/// caller: the kernel sets it when the memory comes online, after the node.
fn memory_node2_online(root: &Path, mem_kb: u64) {
    let dir = root.join("sys/devices/system/node/node2");
    std::fs::create_dir_all(&dir).unwrap();
    write(root, "sys/devices/system/node/node2/cpulist", "\n");
    write(root, "sys/devices/system/node/node2/cpumap", "0\n");
    write(
        root,
        "sys/devices/system/node/node2/meminfo",
        &format!("Node 2 MemTotal:       {mem_kb} kB\nNode 2 MemFree:        {mem_kb} kB\n"),
    );
    write(root, "sys/devices/system/node/node2/distance", "30 30 10\n");
    write(root, "sys/devices/system/node/node0/distance", "10 21 30\n");
    write(root, "sys/devices/system/node/node1/distance", "21 10 30\n");
    write(root, "sys/devices/system/node/possible", "0-2\n");
    write(root, "sys/devices/system/node/online", "0-2\n");
}

/// A node that comes online with memory alone changes no CPU: the watch read only
/// `cpu/online`, and the daemon never learnt of the node (nor of one going away). Now
/// `node/online` and `node/has_memory` are read too: the node is seen when it comes online, its
/// memory when `has_memory` lists it (looked at again while the node's own meminfo lags), and
/// its going away.
/// A topology handed over as a view (two nodes over a machine whose sysfs shows one: how the
/// daemon's tests place on this one-node host) stays in use at the first look: the node files are
/// taken as they are then, and only a later change of them is a change. Judged on the node files at
/// the first look, the view was read again from sysfs and the machine's one node took its place
/// (the daemon's early-wake tests then ran with nothing to place).
#[test]
fn a_view_of_more_nodes_than_the_files_stays_at_the_first_look() {
    let (_dir, root) = copied_fixture();
    let machine = Topology::from_sysfs(&root).unwrap();
    // A view: the same CPUs, node 1's memory left out (its node files still say 0-1).
    let mut view = machine.clone();
    view.nodes[1].mem_total_kb = 0;
    view.nodes[1].mem_free_kb = 0;
    assert_ne!(view.memory_nodes(), machine.memory_nodes(), "the view differs from the files");
    let mut w = HotplugWatch::default();
    assert!(matches!(w.look(&root, &view), Hotplug::Same), "a view must stay at the first look");
    assert!(w.settled());
    assert!(matches!(w.look(&root, &view), Hotplug::Same));
    // A node file that changes after it is still seen.
    memory_node2_online(&root, 0);
    assert!(matches!(w.look(&root, &view), Hotplug::Changed(_)), "a node coming online must be seen");
}

#[test]
fn a_node_with_memory_alone_is_seen_coming_and_going() {
    let (_dir, root) = copied_fixture();
    let start = Topology::from_sysfs(&root).unwrap();
    let mut w = HotplugWatch::default();
    assert!(matches!(w.look(&root, &start), Hotplug::Same));
    assert!(w.settled());

    // The node comes online, its memory not yet.
    memory_node2_online(&root, 0);
    let node = match w.look(&root, &start) {
        Hotplug::Changed(t) => t,
        other => panic!("a node coming online must be seen: {other:?}"),
    };
    assert_eq!(node.node_ids(), NodeSet::parse_list("0-2").unwrap());
    assert!(node.nodes[2].cpus.is_empty());
    assert_eq!(node.memory_nodes(), NodeSet::parse_list("0-1").unwrap());
    assert_eq!(node.online_cpus(), start.online_cpus(), "no CPU changed");
    assert!(w.settled());
    assert!(matches!(w.look(&root, &node), Hotplug::Same));

    // Its memory comes online: `has_memory` first, the node's meminfo a moment later.
    write(&root, "sys/devices/system/node/has_memory", "0-2\n");
    assert!(matches!(w.look(&root, &node), Hotplug::Same), "meminfo shows no memory yet");
    assert!(!w.settled(), "looked at again while meminfo lags has_memory");
    memory_node2_online(&root, 4 << 20);
    let memory = match w.look(&root, &node) {
        Hotplug::Changed(t) => t,
        other => panic!("the node's memory must be seen: {other:?}"),
    };
    assert_eq!(memory.memory_nodes(), NodeSet::parse_list("0-2").unwrap());
    assert_eq!(memory.nodes[2].mem_total_kb, 4 << 20);
    assert!(w.settled());
    assert_eq!(
        numapilot_daemon::live::node_change_from(&memory, &start).as_deref(),
        Some("nodes online 0-1 -> 0-2, nodes with memory 0-1 -> 0-2")
    );

    // It goes away again.
    std::fs::remove_dir_all(root.join("sys/devices/system/node/node2")).unwrap();
    write(&root, "sys/devices/system/node/node0/distance", "10 21\n");
    write(&root, "sys/devices/system/node/node1/distance", "21 10\n");
    write(&root, "sys/devices/system/node/has_memory", "0-1\n");
    write(&root, "sys/devices/system/node/online", "0-1\n");
    let gone = match w.look(&root, &memory) {
        Hotplug::Changed(t) => t,
        other => panic!("a node going away must be seen: {other:?}"),
    };
    assert_eq!(gone.node_ids(), start.node_ids());
    assert_eq!(gone.memory_nodes(), start.memory_nodes());
    assert!(matches!(w.look(&root, &gone), Hotplug::Same));
}
