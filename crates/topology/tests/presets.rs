//! The built-in machines: their shape against the sources named in each machines/*.toml, and the
//! invariants every machine must keep.

use std::collections::BTreeSet;
use std::path::Path;

use numapilot_topology::{presets, IdSet, Topology, TopologyError};

struct Shape {
    nodes: usize,
    packages: usize,
    cores: usize,
    cpus: usize,
    mem_gb: u64,
}

fn shape(t: &Topology) -> Shape {
    Shape {
        nodes: t.nodes.len(),
        packages: t.packages().len(),
        cores: t.core_count(),
        cpus: t.cpus.len(),
        mem_gb: t.nodes.iter().map(|n| n.mem_total_kb).sum::<u64>() >> 20,
    }
}

fn check(name: &str, nodes: usize, packages: usize, cores: usize, cpus: usize, mem_gb: u64) -> Topology {
    let t = Topology::preset(name).unwrap();
    let s = shape(&t);
    assert_eq!(
        (s.nodes, s.packages, s.cores, s.cpus, s.mem_gb),
        (nodes, packages, cores, cpus, mem_gb),
        "{name}: (nodes, packages, cores, cpus, GB)"
    );
    t
}

#[test]
fn autonuma_boxes() {
    // published-results.md: "2 nodes, 12 cores, 24 GB" and "2 sockets x 6 cores, 16 GB".
    let t = check("autonuma-2s12c-24g", 2, 2, 12, 24, 24);
    assert_eq!(t.cpu(0).unwrap().siblings.to_list(), "0,12");
    check("autonuma-2s12c-16g", 2, 2, 12, 24, 16);
}

#[test]
fn article_box() {
    // Seed 003: 4 nodes, 96 CPUs, ~128 GB each (128402 + 128965 + 129017 + 129010 MB = 503 GB).
    let t = check("article-4n96", 4, 2, 48, 96, 503);
    assert_eq!(t.node(1).unwrap().cpus.to_list(), "12-23,60-71");
    assert_eq!(t.cpu(12).unwrap().die, 1, "node 1 is the second die of package 0");
    assert_eq!(t.cpu(24).unwrap().package, 1);
}

#[test]
fn ring_box() {
    let t = check("ring-8n64c", 8, 4, 64, 64, 128);
    let d: BTreeSet<u32> = t.distances.iter().flatten().copied().collect();
    assert_eq!(d.into_iter().collect::<Vec<_>>(), vec![10, 11, 21, 32]);
}

#[test]
fn epyc_box() {
    // 2 x 128 cores, SMT2, NPS1; 32 MB L3 per 8-core CCD -> 16 CCDs per socket.
    let t = check("epyc-2s256c", 2, 2, 256, 512, 1536);
    let c = t.cpu(0).unwrap();
    assert_eq!(c.siblings.to_list(), "0,256");
    assert_eq!(c.llc.as_ref().unwrap().to_list(), "0-7,256-263");
    let llcs: BTreeSet<IdSet> = t.cpus.iter().filter_map(|c| c.llc.clone()).collect();
    assert_eq!(llcs.len(), 32);
    assert!(llcs.iter().all(|l| l.len() == 16));
    assert_eq!(t.devices.len(), 2);
    assert_eq!(t.devices.iter().filter_map(|d| d.node).collect::<Vec<_>>(), vec![0, 1]);
}

#[test]
fn numaconnect_box() {
    // Seed 004: 6 servers, 48 cores and 192 GB each: 288 cores, 1152 GB; 8-core Opteron 6380 dies.
    let t = check("numaconnect-288c", 36, 18, 288, 288, 1152);
    assert!(t.nodes.iter().all(|n| n.cpus.len() == 8 && n.mem_total_kb == 32 << 20));
    // Distances follow the documented structure: node = server*6 + package_in_server*2 + die;
    // servers on a 2 x 3 torus (row s/3, column s%3).
    for a in 0..36u32 {
        for b in 0..36u32 {
            let (sa, sb) = (a / 6, b / 6);
            let expected = if a == b {
                10
            } else if a / 2 == b / 2 {
                16
            } else if sa == sb {
                22
            } else if (sa / 3 != sb / 3) as u32 + (sa % 3 != sb % 3) as u32 == 1 {
                160
            } else {
                200
            };
            assert_eq!(t.distance(a, b), Some(expected), "distance({a}, {b})");
            let (ca, cb) = (t.cpu(a * 8).unwrap(), t.cpu(b * 8).unwrap());
            assert_eq!(ca.package == cb.package, a / 2 == b / 2, "packages of nodes {a}, {b}");
        }
    }
    let per_server: Vec<usize> = (0..6u32)
        .map(|s| {
            (0..36u32).filter(|&n| t.distance(s * 6, n) == Some(160)).map(|n| n / 6).collect::<BTreeSet<_>>().len()
        })
        .collect();
    assert_eq!(per_server, vec![3; 6], "every server has 3 servers one ring hop away");
}

#[test]
fn every_preset_is_a_sane_machine() {
    for name in presets::names() {
        let t = Topology::preset(name).unwrap();
        let n = t.nodes.len();
        assert_eq!(t.distances.len(), n, "{name}");
        for i in 0..n {
            assert_eq!(t.distances[i][i], 10, "{name}");
            for j in 0..n {
                assert_eq!(t.distances[i][j], t.distances[j][i], "{name}: symmetric");
            }
        }
        // Conservation: every CPU in exactly one node; siblings and LLCs inside the CPU's node.
        let in_nodes: usize = t.nodes.iter().map(|n| n.cpus.len()).sum();
        assert_eq!(in_nodes, t.cpus.len(), "{name}");
        for c in &t.cpus {
            assert!(t.node(c.node).unwrap().cpus.contains(c.id), "{name}: cpu {}", c.id);
            let node_cpus = &t.node(c.node).unwrap().cpus;
            assert!(c.siblings.is_subset(node_cpus) && c.siblings.contains(c.id), "{name}: cpu {}", c.id);
            let llc = c.llc.as_ref().unwrap();
            assert!(llc.is_subset(node_cpus) && c.siblings.is_subset(llc), "{name}: cpu {}", c.id);
        }
        assert!(t.nodes.iter().all(|n| n.mem_total_kb > 0), "{name}");
        // JSON of the topology reads back as the same topology.
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<Topology>(&json).unwrap(), t, "{name}");
        // The description is there for --list-presets.
        assert!(presets::list().iter().any(|(p, d)| p == &name && !d.is_empty()), "{name}");
    }
}

#[test]
fn machines_directory_holds_exactly_the_presets() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../machines");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".toml"))
        .collect();
    files.sort();
    let mut expected: Vec<String> = presets::names().iter().map(|n| format!("{n}.toml")).collect();
    expected.sort();
    assert_eq!(files, expected);
    for name in presets::names() {
        let from_file = Topology::from_machine_file(&dir.join(format!("{name}.toml"))).unwrap();
        assert_eq!(from_file, Topology::preset(name).unwrap(), "{name}");
    }
}

#[test]
fn schema_example_in_machines_readme_is_valid() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../machines/README.md")).unwrap();
    let block = readme.split("```toml\n").nth(1).and_then(|rest| rest.split("```").next()).expect("a toml block");
    let t = numapilot_topology::machine::parse_topology(block, numapilot_topology::machine::Format::Toml, "README.md")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((t.nodes.len(), t.cpus.len()), (2, 512));
    assert!(!t.cpu(5).unwrap().online);
    assert_eq!(t.cpu(0).unwrap().siblings.to_list(), "0,256");
}

#[test]
fn unknown_preset_lists_the_valid_ones() {
    match Topology::preset("epyc") {
        Err(e @ TopologyError::UnknownPreset { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("\"epyc\""), "{msg}");
            for name in presets::names() {
                assert!(msg.contains(name), "{msg}");
            }
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(Topology::preset_names(), presets::names());
    assert_eq!(presets::names().len(), 6);
}
