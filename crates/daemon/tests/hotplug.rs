//! CPU hotplug seen from sysfs: the daemon's live host reads `/sys/devices/system/cpu/online`
//! each cycle and reads the topology again when it changes ([`reread_after_hotplug`]). These
//! tests take the rig's 2-node guest sysfs (a real 6.12 kernel's files, `fixtures/rig-6.12-2node`)
//! and change it the way the kernel does when node 1's CPUs go offline and come back. The rig's
//! daemon-safety scenario does the same on the running guest.

use std::path::{Path, PathBuf};

use numapilot_daemon::live::{reread_after_hotplug, Hotplug};
use numapilot_topology::{CpuSet, Topology};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/rig-6.12-2node")
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let ty = e.file_type().unwrap();
        let dest = to.join(e.file_name());
        if ty.is_dir() {
            copy_tree(&e.path(), &dest);
        } else if ty.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(e.path()).unwrap(), &dest).unwrap();
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
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
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    copy_tree(&fixture(), &root);
    let start = Topology::from_sysfs(&root).unwrap();
    assert_eq!(start.online_cpus(), cpus("0-3"));
    let mut last = None;

    // Nothing changed: nothing read again, however often it is asked.
    for _ in 0..3 {
        assert!(matches!(reread_after_hotplug(&root, &start.online_cpus(), &mut last), Hotplug::Same));
    }

    offline_node1(&root);
    let off = match reread_after_hotplug(&root, &start.online_cpus(), &mut last) {
        Hotplug::Changed(t) => t,
        other => panic!("node 1 offline not seen: {other:?}"),
    };
    assert_eq!(off.online_cpus(), cpus("0-1"));
    let node1 = off.nodes.iter().find(|n| n.id == 1).expect("node 1 keeps its memory, so it stays a node");
    assert!(node1.cpus.is_empty(), "node 1 has no CPU to place a thread on: {:?}", node1.cpus);
    // Seen once: the next look at the same file is free and finds nothing new.
    assert!(matches!(reread_after_hotplug(&root, &off.online_cpus(), &mut last), Hotplug::Same));

    // Back online: the fixture's own files again.
    let back_root = dir.path().join("back");
    copy_tree(&fixture(), &back_root);
    let back = match reread_after_hotplug(&back_root, &off.online_cpus(), &mut last) {
        Hotplug::Changed(t) => t,
        other => panic!("CPUs back online not seen: {other:?}"),
    };
    assert_eq!(back.online_cpus(), cpus("0-3"));
    assert_eq!(back.nodes.iter().find(|n| n.id == 1).unwrap().cpus, cpus("2-3"));
}

#[test]
fn a_topology_caught_mid_change_is_read_again_until_it_agrees_with_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    copy_tree(&fixture(), &root);
    offline_node1(&root);
    let off = Topology::from_sysfs(&root).unwrap();
    let mut last = None;
    assert!(matches!(reread_after_hotplug(&root, &off.online_cpus(), &mut last), Hotplug::Same));

    // CPU 2 back first: `online` already says 0-3 (as the rig's guest once showed) while CPU 3
    // still reads offline.
    write(&root, "sys/devices/system/cpu/online", "0-3\n");
    write(&root, "sys/devices/system/cpu/cpu2/online", "1\n");
    copy_tree(
        &fixture().join("sys/devices/system/cpu/cpu2/topology"),
        &root.join("sys/devices/system/cpu/cpu2/topology"),
    );
    write(&root, "sys/devices/system/node/node1/cpulist", "2\n");
    let partial = match reread_after_hotplug(&root, &off.online_cpus(), &mut last) {
        Hotplug::Changed(t) => t,
        other => panic!("CPU 2 back not seen: {other:?}"),
    };
    assert_eq!(partial.online_cpus(), cpus("0-2"));

    // The file has not changed since, but the topology did not agree with it: read again.
    write(&root, "sys/devices/system/cpu/cpu3/online", "1\n");
    copy_tree(
        &fixture().join("sys/devices/system/cpu/cpu3/topology"),
        &root.join("sys/devices/system/cpu/cpu3/topology"),
    );
    write(&root, "sys/devices/system/node/node1/cpulist", "2-3\n");
    let whole = match reread_after_hotplug(&root, &partial.online_cpus(), &mut last) {
        Hotplug::Changed(t) => t,
        other => panic!("CPU 3 back not seen after a mid-change read: {other:?}"),
    };
    assert_eq!(whole.online_cpus(), cpus("0-3"));
    assert!(matches!(reread_after_hotplug(&root, &whole.online_cpus(), &mut last), Hotplug::Same));
}

#[test]
fn a_topology_that_cannot_be_read_is_kept_and_tried_again() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    copy_tree(&fixture(), &root);
    let start = Topology::from_sysfs(&root).unwrap();
    let mut last = None;
    offline_node1(&root);
    // A required file that does not parse: the error names it, and the next look tries again.
    write(&root, "sys/devices/system/node/node0/distance", "ten\n");
    for _ in 0..2 {
        match reread_after_hotplug(&root, &start.online_cpus(), &mut last) {
            Hotplug::Unreadable { online, error } => {
                assert_eq!(online, cpus("0-1"));
                assert!(error.contains("node0/distance"), "the error names the file: {error}");
            }
            other => panic!("an unreadable topology must be reported: {other:?}"),
        }
    }
    write(&root, "sys/devices/system/node/node0/distance", "10 21\n");
    assert!(matches!(reread_after_hotplug(&root, &start.online_cpus(), &mut last), Hotplug::Changed(_)));
}

#[test]
fn a_root_without_the_online_file_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    copy_tree(&fixture(), &root);
    let start = Topology::from_sysfs(&root).unwrap();
    std::fs::remove_file(root.join("sys/devices/system/cpu/online")).unwrap();
    offline_node1(&root);
    std::fs::remove_file(root.join("sys/devices/system/cpu/online")).unwrap();
    let mut last = None;
    assert!(matches!(reread_after_hotplug(&root, &start.online_cpus(), &mut last), Hotplug::Same));
    assert!(last.is_none());
}
