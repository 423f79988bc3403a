//! `render::numactl_hardware` against Debian's real `numactl --hardware` (2.0.16), byte for byte.
//!
//! The real tool reads /sys/devices/system/node, so each case builds a node tree and runs numactl in
//! a private mount namespace with the tree bind-mounted over that path (nothing outside the test's
//! namespace changes). Cases cover what is easy to get wrong: sparse ids, CPU-less and memory-less
//! nodes, ids and distances of three digits, sizes that are not whole MB, no node 0, and every
//! preset. The comparison on this machine's own sysfs runs through the binary, in the cli crate's
//! tests/topo.rs.

mod common;

use common::{numactl_or_skip, real_numactl_hardware, write_node_tree, FakeSys};
use numapilot_topology::{presets, render::numactl_hardware, sysfs::read_topology, Topology};

/// Builds a tree with the given nodes `(id, cpulist, total_kb, free_kb)` and matrix, with minimal
/// CPU directories, and returns it.
fn tree(nodes: &[(u32, &str, u64, u64)], distances: &[&[u32]]) -> FakeSys {
    let fs = FakeSys::new();
    for (&(id, cpus, total, free), row) in nodes.iter().zip(distances) {
        let row = row.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(" ");
        fs.node(id, cpus, total, free, &row);
        for c in numapilot_topology::IdSet::parse_list(cpus).unwrap().iter() {
            fs.simple_cpu(c, 0, c, &c.to_string(), cpus);
        }
    }
    fs
}

fn assert_same_as_numactl(name: &str, fs: &FakeSys) {
    let ours = numactl_hardware(&read_topology(fs.root()).unwrap());
    let real = real_numactl_hardware(&fs.node_dir());
    assert_eq!(ours, real, "{name}: ours (left) differs from numactl --hardware (right)");
}

#[test]
fn sparse_ids_and_cpuless_node_match_numactl() {
    if !numactl_or_skip("sparse_ids_and_cpuless_node_match_numactl") {
        return;
    }
    let fs = tree(&[(0, "0-3", 8_000_000, 7_000_000), (8, "", 4_000_000, 3_999_999)], &[&[10, 20], &[20, 10]]);
    assert_same_as_numactl("sparse 0,8", &fs);
    let text = numactl_hardware(&read_topology(fs.root()).unwrap());
    assert!(text.starts_with("available: 2 nodes (0,8)\n"), "{text}");
    assert!(text.contains("node 8 cpus:\n"), "CPU-less node prints no CPUs and no trailing space: {text}");
}

/// A node whose meminfo is missing or cut short (gVisor's sysfs has none): numactl says its memory
/// is `<not available>` and prints the rest; so does ours (it was an error, and every launch failed
/// with it; review helper-56).
#[test]
fn a_node_without_meminfo_matches_numactl() {
    if !numactl_or_skip("a_node_without_meminfo_matches_numactl") {
        return;
    }
    let fs = tree(&[(0, "0-1", 8_388_608, 7_340_032), (1, "2-3", 8_388_608, 8_000_000)], &[&[10, 21], &[21, 10]]);
    fs.remove("sys/devices/system/node/node1/meminfo");
    assert_same_as_numactl("node 1 without meminfo", &fs);
    let text = numactl_hardware(&read_topology(fs.root()).unwrap());
    assert!(text.contains("node 1 size: <not available>\nnode 1 free: <not available>\n"), "{text}");
    fs.write("sys/devices/system/node/node1/meminfo", "Node 1 MemTotal:  8388608 kB\n");
    let n1 = read_topology(fs.root()).unwrap().node(1).unwrap().clone();
    assert!(!n1.mem_total_unknown && n1.mem_free_unknown && n1.mem_total_kb == 8_388_608, "{n1:?}");
    // (Cut short, numactl's own output also warns on stderr; stdout is compared.)
    assert_same_as_numactl("node 1 with MemTotal only", &fs);
    fs.write("sys/devices/system/node/node1/meminfo", "Node 1 MemFree:  8000000 kB\n");
    assert_same_as_numactl("node 1 with MemFree only", &fs);
}

#[test]
fn four_nodes_10_11_20_with_smt_numbering_match_numactl() {
    if !numactl_or_skip("four_nodes_10_11_20_with_smt_numbering_match_numactl") {
        return;
    }
    let fs = tree(
        &[
            (0, "0-5,24-29", 16_000_000, 1_000),
            (1, "6-11,30-35", 16_000_000, 15_999_999),
            (2, "12-17,36-41", 16_777_216, 0),
            (3, "18-23,42-47", 16_000_000, 16_000_000),
        ],
        &[&[10, 11, 20, 20], &[11, 10, 20, 20], &[20, 20, 10, 11], &[20, 20, 11, 10]],
    );
    assert_same_as_numactl("4 nodes 10/11/20", &fs);
}

#[test]
fn three_digit_ids_and_distances_no_node_zero_and_rounding_match_numactl() {
    if !numactl_or_skip("three_digit_ids_and_distances_no_node_zero_and_rounding_match_numactl") {
        return;
    }
    // Node ids 1, 2, 100 (no node 0); distances 160/200; sizes 1023 kB (0 MB), 1025 kB (1 MB);
    // node 2 has CPUs and no memory.
    let fs = tree(
        &[(1, "0-1", 1_023, 1_023), (2, "2-3", 0, 0), (100, "", 1_025, 1_024)],
        &[&[10, 16, 160], &[16, 10, 200], &[160, 200, 10]],
    );
    assert_same_as_numactl("ids 1,2,100", &fs);
    let text = numactl_hardware(&read_topology(fs.root()).unwrap());
    assert!(text.contains("available: 3 nodes (1-2,100)\n"), "{text}");
    assert!(text.contains("node   1   2  100 \n"), "{text}");
    assert!(text.contains(" 100:  160  200  10 \n"), "{text}");
}

/// The highest CPU id libnuma on this machine can represent: it sizes its CPU masks from the
/// running kernel (`/sys/devices/system/cpu/kernel_max`), and prints nothing for a node whose cpumap
/// names a CPU above that.
fn libnuma_max_cpu() -> u32 {
    std::fs::read_to_string("/sys/devices/system/cpu/kernel_max").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

#[test]
fn every_preset_prints_as_numactl_would() {
    if !numactl_or_skip("every_preset_prints_as_numactl_would") {
        return;
    }
    let max_cpu = libnuma_max_cpu();
    let mut compared = 0;
    for name in presets::names() {
        let topo = Topology::preset(name).unwrap();
        if topo.cpus.iter().any(|c| c.id > max_cpu) {
            eprintln!(
                "preset {name}: CPU ids above this kernel's kernel_max {max_cpu}; numactl here cannot print them"
            );
            continue;
        }
        compared += 1;
        let fs = FakeSys::new();
        write_node_tree(&fs, &topo);
        let real = real_numactl_hardware(&fs.node_dir());
        assert_eq!(numactl_hardware(&topo), real, "preset {name}");
    }
    assert!(compared >= 4, "only {compared} presets could be compared");
}

#[test]
fn article_preset_reproduces_the_seed_output() {
    // The NUMA article seed's `numactl --hardware` (shared/seeds/003), with numactl's spacing.
    let expected = "\
available: 4 nodes (0-3)
node 0 cpus: 0 1 2 3 4 5 6 7 8 9 10 11 48 49 50 51 52 53 54 55 56 57 58 59
node 0 size: 128402 MB
node 0 free: 49043 MB
node 1 cpus: 12 13 14 15 16 17 18 19 20 21 22 23 60 61 62 63 64 65 66 67 68 69 70 71
node 1 size: 128965 MB
node 1 free: 849 MB
node 2 cpus: 24 25 26 27 28 29 30 31 32 33 34 35 72 73 74 75 76 77 78 79 80 81 82 83
node 2 size: 129017 MB
node 2 free: 25550 MB
node 3 cpus: 36 37 38 39 40 41 42 43 44 45 46 47 84 85 86 87 88 89 90 91 92 93 94 95
node 3 size: 129010 MB
node 3 free: 10116 MB
node distances:
node   0   1   2   3 
  0:  10  11  20  20 
  1:  11  10  20  20 
  2:  20  20  10  11 
  3:  20  20  11  10 
";
    assert_eq!(numactl_hardware(&Topology::preset("article-4n96").unwrap()), expected);
}
