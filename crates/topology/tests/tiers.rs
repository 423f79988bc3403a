//! Distance tiers on the machines the tier rule was designed for (see the essay in `tiers.rs`), each
//! expectation worked out by hand from the rule:
//!
//! ```text
//!   Local: from == to;  SameSocket: d <= 12, or same package and d < 20;
//!   otherwise m = smallest cross-socket distance: OneHop if d < 1.25 m, else Far
//! ```

use numapilot_topology::machine::{parse_topology, Format};
use numapilot_topology::{IdSet, Tier, Topology};

fn machine(toml: &str) -> Topology {
    parse_topology(toml, Format::Toml, "<test>").unwrap()
}

fn set(s: &str) -> IdSet {
    IdSet::parse_list(s).unwrap()
}

/// `(same-socket, one-hop, far)` from `node`.
fn rings(t: &Topology, node: u32) -> (IdSet, IdSet, IdSet) {
    let m = t.tiers();
    (m.nodes_at(node, Tier::SameSocket), m.nodes_at(node, Tier::OneHop), m.nodes_at(node, Tier::Far))
}

#[test]
fn two_sockets_10_21() {
    let t = machine(
        r#"distances = [[10, 21], [21, 10]]
        [[nodes]]
        id = 0
        cpus = "0-3"
        mem_gb = 4
        package = 0
        [[nodes]]
        id = 1
        cpus = "4-7"
        mem_gb = 4
        package = 1"#,
    );
    assert_eq!(t.tier(0, 0), Tier::Local);
    assert_eq!(t.tier(0, 1), Tier::OneHop, "the only remote distance is one hop");
    assert_eq!(t.tier(1, 0), Tier::OneHop);
}

#[test]
fn ring_10_11_21_32() {
    // 4 sockets in a ring, 2 nodes each: 11 same socket, 21 neighbour socket, 32 opposite socket.
    // m = 21; 32 >= 26.25 -> far.
    let t = Topology::preset("ring-8n64c").unwrap();
    assert_eq!(rings(&t, 0), (set("1"), set("2-3,6-7"), set("4-5")));
    assert_eq!(rings(&t, 5), (set("4"), set("2-3,6-7"), set("0-1")));
}

#[test]
fn article_10_11_20() {
    let t = Topology::preset("article-4n96").unwrap();
    assert_eq!(rings(&t, 0), (set("1"), set("2-3"), set("")));
    assert_eq!(t.tier(3, 2), Tier::SameSocket);
    assert_eq!(t.tier(3, 0), Tier::OneHop);
}

#[test]
fn numaconnect_10_16_22_160_200() {
    // 16: the other die of the package; 22: another package of the server (m = 22);
    // 160 and 200: other servers, both >= 27.5 -> far.
    let t = Topology::preset("numaconnect-288c").unwrap();
    assert_eq!(t.distance(0, 1), Some(16));
    assert_eq!(t.distance(0, 2), Some(22));
    assert_eq!(t.distance(0, 6), Some(160));
    assert_eq!(t.distance(0, 24), Some(200));
    assert_eq!(rings(&t, 0), (set("1"), set("2-5"), set("6-35")));
    assert_eq!(rings(&t, 9), (set("8"), set("6-7,10-11"), set("0-5,12-35")));
}

#[test]
fn epyc_10_32_is_one_hop() {
    let t = Topology::preset("epyc-2s256c").unwrap();
    assert_eq!(t.tier(0, 1), Tier::OneHop, "32 is the machine's smallest remote distance");
}

#[test]
fn distance_11_is_same_socket_even_when_packages_differ() {
    // A guest that gives each node its own socket but firmware-style 11 between sub-nodes.
    let t = machine(
        r#"distances = [[10, 11, 20], [11, 10, 20], [20, 20, 10]]
        [[nodes]]
        id = 0
        cpus = "0"
        mem_gb = 1
        package = 0
        [[nodes]]
        id = 1
        cpus = "1"
        mem_gb = 1
        package = 1
        [[nodes]]
        id = 2
        cpus = "2"
        mem_gb = 1
        package = 2"#,
    );
    assert_eq!(t.tier(0, 1), Tier::SameSocket);
    assert_eq!(t.tier(0, 2), Tier::OneHop);
}

#[test]
fn shared_package_at_remote_distance_is_not_same_socket() {
    // QEMU's default puts every vCPU in one socket even with two nodes 21 apart: the distance is
    // what the guest kernel acts on.
    let t = machine(
        r#"distances = [[10, 21], [21, 10]]
        [[nodes]]
        id = 0
        cpus = "0-1"
        mem_gb = 1
        package = 0
        [[nodes]]
        id = 1
        cpus = "2-3"
        mem_gb = 1
        package = 0"#,
    );
    assert_eq!(t.tier(0, 1), Tier::OneHop);
}

#[test]
fn cpuless_node_joins_nearest_socket() {
    // CXL-style memory node 2 behind socket 0: 14 from node 0, 26 from node 1.
    // Node 2 belongs to package 0 (14 < 20): 0 <-> 2 same socket. Cross distances: 21, 26;
    // m = 21, 26 < 26.25 -> one hop.
    let t = machine(
        r#"distances = [[10, 21, 14], [21, 10, 26], [14, 26, 10]]
        [[nodes]]
        id = 0
        cpus = "0-3"
        mem_gb = 8
        package = 0
        [[nodes]]
        id = 1
        cpus = "4-7"
        mem_gb = 8
        package = 1
        [[nodes]]
        id = 2
        memory = "64G""#,
    );
    assert_eq!(t.node_packages()[2], set("0"));
    assert_eq!(t.tier(0, 2), Tier::SameSocket);
    assert_eq!(t.tier(2, 0), Tier::SameSocket);
    assert_eq!(t.tier(1, 2), Tier::OneHop);
    assert_eq!(t.tier(0, 1), Tier::OneHop);
}

#[test]
fn far_memory_blade() {
    // Memory-only node 9 at 160 from a 2-socket machine: m = 21, 160 -> far. It belongs to no
    // package (nearest CPU node is at 160 >= 20).
    let t = machine(
        r#"distances = [[10, 21, 160], [21, 10, 160], [160, 160, 10]]
        [[nodes]]
        id = 0
        cpus = "0-3"
        mem_gb = 8
        [[nodes]]
        id = 1
        cpus = "4-7"
        mem_gb = 8
        [[nodes]]
        id = 9
        memory = "1T""#,
    );
    assert!(t.node_packages()[2].is_empty());
    assert_eq!(t.tier(0, 9), Tier::Far);
    assert_eq!(t.tier(9, 1), Tier::Far);
    assert_eq!(t.tier(0, 1), Tier::OneHop);
    // On a single-socket machine the blade is the nearest remote memory there is: one hop.
    let t = machine(
        r#"distances = [[10, 160], [160, 10]]
        [[nodes]]
        id = 0
        cpus = "0-3"
        mem_gb = 8
        [[nodes]]
        id = 1
        memory = "1T""#,
    );
    assert_eq!(t.tier(0, 1), Tier::OneHop);
}

#[test]
fn equivalent_links_20_and_21_are_one_class() {
    let t = machine(
        r#"distances = [[10, 20, 21], [20, 10, 21], [21, 21, 10]]
        [[nodes]]
        id = 0
        cpus = "0"
        mem_gb = 1
        [[nodes]]
        id = 1
        cpus = "1"
        mem_gb = 1
        [[nodes]]
        id = 2
        cpus = "2"
        mem_gb = 1"#,
    );
    assert_eq!(rings(&t, 0), (set(""), set("1-2"), set("")));
}

#[test]
fn opteron_4p_16_is_one_hop_22_is_far() {
    // 4 packages x 2 dies: dies of a package 16 apart; across packages 16 (direct HyperTransport
    // link) or 22 (two links). Same package + 16 < 20 -> same socket; cross m = 16, 22 >= 20 -> far.
    let mut rows = Vec::new();
    for a in 0..8u32 {
        let row: Vec<String> = (0..8u32)
            .map(|b| match (a == b, a / 2 == b / 2, (a / 2 + b / 2) % 2 == 1) {
                (true, _, _) => "10",
                (_, true, _) => "16",
                (_, _, true) => "16",
                _ => "22",
            })
            .map(str::to_string)
            .collect();
        rows.push(format!("[{}]", row.join(", ")));
    }
    let mut toml = format!("distances = [{}]\n", rows.join(", "));
    for n in 0..8 {
        toml += &format!("[[nodes]]\nid = {n}\ncpus = \"{}-{}\"\nmem_gb = 8\npackage = {}\n", n * 8, n * 8 + 7, n / 2);
    }
    let t = machine(&toml);
    assert_eq!(t.distance(0, 2), Some(16));
    assert_eq!(t.distance(0, 4), Some(22));
    assert_eq!(rings(&t, 0), (set("1"), set("2-3,6-7"), set("4-5")));
}

#[test]
fn asymmetric_matrix_tiers_follow_each_direction() {
    let t = machine(
        r#"asymmetric = true
        distances = [[10, 21, 21], [21, 10, 21], [32, 21, 10]]
        [[nodes]]
        id = 0
        cpus = "0"
        mem_gb = 1
        [[nodes]]
        id = 1
        cpus = "1"
        mem_gb = 1
        [[nodes]]
        id = 2
        cpus = "2"
        mem_gb = 1"#,
    );
    assert_eq!(t.tier(0, 2), Tier::OneHop);
    assert_eq!(t.tier(2, 0), Tier::Far);
}

#[test]
fn unknown_node_has_no_tier() {
    let t = Topology::preset("autonuma-2s12c-16g").unwrap();
    assert_eq!(t.try_tier(0, 7), None);
    assert_eq!(t.tiers().get(7, 0), None);
    assert!(t.tiers().nodes_at(7, Tier::Local).is_empty());
    let caught = std::panic::catch_unwind(|| t.tier(0, 7));
    assert!(caught.is_err(), "tier() on an unknown node is a caller bug and panics");
}

#[test]
fn tiers_are_ordered_and_named() {
    assert!(Tier::Local < Tier::SameSocket && Tier::SameSocket < Tier::OneHop && Tier::OneHop < Tier::Far);
    let names: Vec<String> = Tier::ALL.iter().map(|t| serde_json::to_string(t).unwrap()).collect();
    assert_eq!(names, ["\"local\"", "\"same-socket\"", "\"one-hop\"", "\"far\""]);
    assert_eq!(Tier::ALL.map(|t| t.to_string()), ["local", "same-socket", "one-hop", "far"]);
}
