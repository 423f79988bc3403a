//! Pre-placement advice on synthetic machines, a captured 4-node fixture and this machine.

use std::path::Path;

use numapilot_daemon::advise::{self, AdviseError, NodeFree};
use numapilot_topology::Topology;

const GIB: u64 = 1 << 30;

fn node(node: u32, free_cpus: f64, free_gib: u64) -> NodeFree {
    NodeFree { node, cpus: 4, free_cpus, mem_free_bytes: free_gib * GIB }
}

fn ids(a: &advise::Advice) -> Vec<u32> {
    a.nodes.iter().collect()
}

#[test]
fn one_node_when_one_fits_the_roomiest() {
    let t = Topology::uniform(4, 4, 8 << 20, 21);
    let free = [node(0, 1.0, 6), node(1, 3.5, 2), node(2, 3.9, 7), node(3, 3.0, 7)];
    let a = advise::advise(&t, &free, 3.0, 4 * GIB).unwrap();
    assert_eq!(ids(&a), vec![2]);
    assert_eq!(a.max_distance, 10);
    // Memory alone decides too.
    let a = advise::advise(&t, &free, 0.0, 6 * GIB + 1).unwrap();
    assert_eq!(ids(&a), vec![2]);
}

#[test]
fn the_closest_pair_when_no_node_fits() {
    // Two sockets of two nodes: 0-1 at 12, 2-3 at 12, across at 32.
    let mut t = Topology::uniform(4, 4, 8 << 20, 32);
    for (a, b) in [(0, 1), (2, 3)] {
        t.distances[a][b] = 12;
        t.distances[b][a] = 12;
    }
    let free = [node(0, 3.0, 2), node(1, 2.0, 2), node(2, 4.0, 3), node(3, 3.0, 3)];
    // 6 CPUs: {2,3} (7 CPUs, same socket) beats {0,2} (7 CPUs, across).
    let a = advise::advise(&t, &free, 6.0, 4 * GIB).unwrap();
    assert_eq!(ids(&a), vec![2, 3]);
    assert_eq!(a.max_distance, 12);
    // 8 CPUs need three nodes.
    let a = advise::advise(&t, &free, 8.0, 0).unwrap();
    assert_eq!(a.nodes.len(), 3);
}

#[test]
fn nothing_fits_says_what_there_is() {
    let t = Topology::uniform(2, 4, 8 << 20, 21);
    let free = [node(0, 1.0, 1), node(1, 1.0, 1)];
    let e = advise::advise(&t, &free, 3.0, 0).unwrap_err();
    assert!(matches!(e, AdviseError::NothingFits { .. }));
    let msg = e.to_string();
    assert!(msg.contains("need 3 CPUs") && msg.contains("2.0 free CPUs") && msg.contains("node 1: 1.0 CPUs"), "{msg}");
    assert!(advise::advise(&t, &free, 0.0, 0).is_err());
    assert!(advise::advise(&t, &free, f64::NAN, 0).is_err());
    // A huge request is echoed as written, not as 301 digits.
    let msg = advise::advise(&t, &free, 1e300, 0).unwrap_err().to_string();
    assert!(msg.contains("need 1e300 CPUs"), "{msg}");
    let msg = advise::advise(&t, &free, f64::INFINITY, 0).unwrap_err().to_string();
    assert!(msg.contains("--cpus inf"), "{msg}");
}

#[test]
fn fixture_of_a_four_node_guest() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/rig-6.12-4node"));
    let t = Topology::from_sysfs(root).unwrap();
    let free = advise::measure(root, &t, None).unwrap();
    assert_eq!(free.len(), 4);
    // The model over the same capture: advise's free memory is the model's (one definition).
    let sample = numapilot_observe::Reader::new(root).sample().unwrap();
    let mut model = numapilot_model::Model::new(t.clone(), numapilot_model::Tunables::default());
    model.update(&sample);
    let mut cache_kb = 0;
    for f in &free {
        // MemFree + Inactive(file) + SReclaimable straight from nodeN/meminfo (numad adds the
        // first of the two; the kernel's MemAvailable counts both).
        let meminfo =
            std::fs::read_to_string(root.join(format!("sys/devices/system/node/node{}/meminfo", f.node))).unwrap();
        let kb = |key: &str| -> u64 {
            meminfo
                .lines()
                .find(|l| l.split_whitespace().nth(2) == Some(key))
                .and_then(|l| l.split_whitespace().nth(3))
                .unwrap_or_else(|| panic!("node {}: no {key}", f.node))
                .parse()
                .unwrap()
        };
        let reclaimable = kb("Inactive(file):") + kb("SReclaimable:");
        cache_kb += reclaimable;
        assert_eq!(f.mem_free_bytes, (kb("MemFree:") + reclaimable).min(kb("MemTotal:")) * 1024, "node {}", f.node);
        let n = model.nodes.iter().find(|n| n.node == f.node).unwrap();
        assert_eq!(f.mem_free_bytes, n.mem_free_bytes, "node {}: advise and the model agree", f.node);
        assert!(f.free_cpus > 0.0 && f.free_cpus <= f.cpus as f64, "{f:?}");
    }
    assert!(cache_kb > 0, "the capture has reclaimable memory, so MemFree alone would differ");
    let smallest = free.iter().map(|f| f.mem_free_bytes).min().unwrap();
    let a = advise::advise(&t, &free, 1.0, smallest).unwrap();
    assert_eq!(a.nodes.len(), 1);
    let all: u64 = free.iter().map(|f| f.mem_free_bytes).sum();
    let a = advise::advise(&t, &free, 1.0, all).unwrap();
    assert_eq!(a.nodes.len(), 4);
    assert!(advise::advise(&t, &free, 1.0, all + 1).is_err());
}

#[test]
fn this_machine_over_a_window() {
    let t = Topology::from_sysfs(Path::new("/")).unwrap();
    let free = advise::measure(Path::new("/"), &t, Some(std::time::Duration::from_millis(200))).unwrap();
    assert_eq!(free.len(), t.nodes.len());
    let a = advise::advise(&t, &free, 0.0, 1 << 20).unwrap();
    assert_eq!(a.nodes.len(), 1);
}

/// Within a launcher's reach (its CPUs and memory nodes): a node's CPUs and idle time count only
/// the CPUs it may use, and a node outside its memory nodes is left out.
#[test]
fn this_machine_within_a_reach() {
    let t = Topology::from_sysfs(Path::new("/")).unwrap();
    let online = t.online_cpus();
    let Some(last) = online.last() else { return };
    let first = t.nodes.iter().find(|n| n.cpus.contains(last)).unwrap().id;
    let one: numapilot_topology::CpuSet = std::iter::once(last).collect();
    let reach = advise::Reach { cpus: one, nodes: t.nodes.iter().map(|n| n.id).collect() };
    let w = Some(std::time::Duration::from_millis(100));
    let free = advise::measure_within(Path::new("/"), &t, w, Some(&reach)).unwrap();
    let node = free.iter().find(|f| f.node == first).unwrap();
    assert_eq!(node.cpus, 1, "{free:?}");
    assert!(node.free_cpus <= 1.0, "{free:?}");
    assert!(free.iter().filter(|f| f.node != first).all(|f| f.cpus == 0), "{free:?}");
    let none = advise::Reach { cpus: online.clone(), nodes: numapilot_topology::NodeSet::default() };
    assert!(advise::measure_within(Path::new("/"), &t, w, Some(&none)).unwrap().is_empty());
}
