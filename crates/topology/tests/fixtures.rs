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

fn without_free_figures(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| match l.split_once(" free: ") {
            Some((head, tail)) if l.starts_with("node ") && tail.ends_with(" MB") => format!("{head} free: <n> MB"),
            _ => l.to_string(),
        })
        .collect()
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
            without_free_figures(&ours),
            without_free_figures(&expected),
            "{}: ours:\n{ours}\nnumactl at capture:\n{expected}",
            name(dir)
        );
        compared += 1;
    }
    assert!(compared >= 1);
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

/// What each known fixture must show; fixtures not captured yet are reported and skipped.
#[test]
fn known_fixtures_have_their_documented_shape() {
    let dirs = fixture_dirs();
    let by_name = |n: &str| dirs.iter().find(|d| name(d) == n);

    let host = Topology::from_sysfs(by_name("host-6.18").expect("host fixture")).unwrap();
    assert_eq!((host.nodes.len(), host.cpus.len()), (1, 2));
    assert_eq!(host.node(0).unwrap().cpus.to_list(), "0-1");
    assert!(host.cpus.iter().all(|c| c.online && c.llc.as_ref().is_some_and(|l| l.to_list() == "0-1")));
    assert!(host.devices.iter().any(|d| d.class == numapilot_topology::DeviceClass::Network));

    // fixtures/README.md: rig-6.12-4node has 4 nodes, distances 10/11/20, a CPU-less node and a
    // PCI device on node 1.
    if let Some(dir) = by_name("rig-6.12-4node") {
        let t = Topology::from_sysfs(dir).unwrap();
        assert_eq!(t.nodes.len(), 4);
        let d: BTreeSet<u32> = t.distances.iter().flatten().copied().collect();
        assert_eq!(d.into_iter().collect::<Vec<_>>(), vec![10, 11, 20]);
        assert!(t.nodes.iter().any(|n| n.is_cpuless()), "a CPU-less node");
        assert!(t.devices.iter().any(|dev| dev.node == Some(1)), "a device on node 1: {:?}", t.devices);
    } else {
        eprintln!("fixtures/rig-6.12-4node not captured yet");
    }
    for (fixture, nodes) in [("rig-6.12-2node", 2), ("rig-6.12-8node", 8)] {
        match by_name(fixture) {
            Some(dir) => assert_eq!(Topology::from_sysfs(dir).unwrap().nodes.len(), nodes, "{fixture}"),
            None => eprintln!("fixtures/{fixture} not captured yet"),
        }
    }
}
