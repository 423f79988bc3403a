//! Machine files: the per-CPU structure generated from a compact description, every rejection (each
//! naming the field and the reason), TOML/JSON equivalence, and round trips (proptest).

mod common;

use std::path::Path;

use numapilot_topology::machine::{parse_size_kb, parse_topology, CpuSpec, DeviceSpec, Format, MachineFile, NodeSpec};
use numapilot_topology::{DeviceClass, IdSet, MachineError, Topology};
use proptest::prelude::*;

fn set(s: &str) -> IdSet {
    IdSet::parse_list(s).unwrap()
}

fn build(toml: &str) -> Topology {
    parse_topology(toml, Format::Toml, "<test>").unwrap_or_else(|e| panic!("{e}"))
}

/// The rejection of `toml`, as `(field, reason)`.
fn reject(toml: &str) -> (String, String) {
    match parse_topology(toml, Format::Toml, "bad.toml") {
        Err(MachineError::Invalid { file, field, reason }) => {
            assert_eq!(file, "bad.toml");
            (field, reason)
        }
        Err(e) => panic!("expected a field error, got: {e}"),
        Ok(_) => panic!("accepted an invalid machine:\n{toml}"),
    }
}

const TWO_NODES: &str = r#"
smt = 2
cores_per_llc = 2
distances = [[10, 21], [21, 10]]
[[nodes]]
id = 0
cpus = "0-3,8-11"
memory = "8G"
[[nodes]]
id = 1
cpus = "4-7,12-15"
memory = "8G"
free = "1.5G"
"#;

#[test]
fn generates_cores_siblings_llc_packages_like_linux_numbers_them() {
    let t = build(TWO_NODES);
    assert_eq!(t.nodes.len(), 2);
    assert_eq!(t.node(1).unwrap().mem_total_kb, 8 << 20);
    assert_eq!(t.node(1).unwrap().mem_free_kb, 1536 << 10);
    assert_eq!(t.node(0).unwrap().mem_free_kb, 8 << 20, "free defaults to total");
    // Node 0: CPUs 0-3,8-11, smt 2 -> 4 cores, core k = {k, k+8} (list positions k and k+4).
    let c0 = t.cpu(0).unwrap();
    assert_eq!(c0.siblings, set("0,8"));
    assert_eq!(t.cpu(11).unwrap().siblings, set("3,11"));
    assert_eq!((c0.core, t.cpu(3).unwrap().core, t.cpu(11).unwrap().core), (0, 3, 3));
    // 2 cores per LLC: cores 0-1 and 2-3.
    assert_eq!(c0.llc, Some(set("0-1,8-9")));
    assert_eq!(t.cpu(10).unwrap().llc, Some(set("2-3,10-11")));
    // No packages given: nodes 21 apart are different packages, numbered by lowest node.
    assert_eq!((c0.package, t.cpu(4).unwrap().package), (0, 1));
    assert_eq!(t.cpu(4).unwrap().core, 0, "core ids restart in each package");
    assert!(t.cpus.iter().all(|c| c.online));
    assert_eq!(t.core_count(), 8);
    assert_eq!(t.packages(), set("0-1"));
}

#[test]
fn dies_and_packages_inferred_from_distance() {
    // 11 apart -> one package; dies numbered by position in the package; core ids continue across
    // the package's nodes.
    let t = build(
        r#"distances = [[10, 11, 20], [11, 10, 20], [20, 20, 10]]
        [[nodes]]
        id = 0
        cpus = "0-1"
        mem_gb = 1
        [[nodes]]
        id = 1
        cpus = "2-3"
        mem_gb = 1
        [[nodes]]
        id = 2
        cpus = "4-5"
        mem_gb = 1"#,
    );
    let c = |id| t.cpu(id).unwrap();
    assert_eq!((c(0).package, c(0).die, c(0).core), (0, 0, 0));
    assert_eq!((c(2).package, c(2).die, c(2).core), (0, 1, 2));
    assert_eq!((c(4).package, c(4).die, c(4).core), (1, 0, 0));
}

#[test]
fn sparse_ids_out_of_order_are_sorted_with_their_distances() {
    let t = build(
        r#"possible = "0-15"
        distances = [[10, 20, 30], [20, 10, 25], [30, 25, 10]]
        [[nodes]]
        id = 8
        cpus = "4-7"
        mem_gb = 2
        [[nodes]]
        id = 0
        cpus = "0-3"
        mem_gb = 1
        [[nodes]]
        id = 3
        memory = "512M""#,
    );
    assert_eq!(t.node_ids(), set("0,3,8"));
    assert_eq!(t.possible, set("0-15"));
    // File order 8,0,3 -> sorted 0,3,8.
    assert_eq!(t.distances, vec![vec![10, 25, 20], vec![25, 10, 30], vec![20, 30, 10]]);
    assert_eq!(t.distance(8, 3), Some(30));
    assert!(t.node(3).unwrap().is_cpuless());
    assert_eq!(t.cpu(5).unwrap().node, 8);
}

#[test]
fn cpu_overrides_and_offline_cpus() {
    let t = build(
        r#"distances = [[10]]
        [[nodes]]
        id = 0
        cpus = "0-3"
        mem_gb = 1
        [[cpu]]
        id = 3
        online = false
        [[cpu]]
        id = 0
        package = 5
        die = 1
        core = 9
        siblings = "0-1"
        llc = """#,
    );
    assert_eq!(t.node(0).unwrap().cpus, set("0-2"), "an offline CPU leaves its node's list, as in sysfs");
    assert!(!t.cpu(3).unwrap().online);
    let c0 = t.cpu(0).unwrap();
    assert_eq!((c0.package, c0.die, c0.core), (5, 1, 9));
    assert_eq!(c0.siblings, set("0-1"));
    assert_eq!(c0.llc, None);
    assert_eq!(t.cpu(1).unwrap().llc, Some(set("0-2")), "others keep generated values, without offline CPU 3");
}

#[test]
fn devices_with_nodes_and_default_class_codes() {
    let t = build(
        r#"distances = [[10, 21], [21, 10]]
        [[nodes]]
        id = 0
        cpus = "0"
        mem_gb = 1
        [[nodes]]
        id = 1
        cpus = "1"
        mem_gb = 1
        [[devices]]
        address = "0000:c1:00.0"
        class = "nvme"
        node = 1
        names = ["nvme0"]
        [[devices]]
        address = "0000:41:00.0"
        class = "network"
        class_code = 0x020700
        [[devices]]
        address = "0000:01:00.0"
        class = "gpu"
        node = 0"#,
    );
    let d: Vec<_> = t.devices.iter().map(|d| (d.address.as_str(), d.class, d.class_code, d.node)).collect();
    assert_eq!(
        d,
        vec![
            ("0000:01:00.0", DeviceClass::Gpu, 0x030000, Some(0)),
            ("0000:41:00.0", DeviceClass::Network, 0x020700, None),
            ("0000:c1:00.0", DeviceClass::Nvme, 0x010802, Some(1)),
        ]
    );
}

/// A machine without an online CPU is refused, naming the field (it was taken, and the simulator
/// blamed the workload; review helper-53).
#[test]
fn a_machine_without_an_online_cpu_is_refused() {
    let (field, why) = reject("[[nodes]]\nid = 0\ncpus = \"\"\nmemory = \"1G\"\n");
    assert_eq!(
        (field.as_str(), why.as_str()),
        ("nodes[0].cpus", "no node has an online CPU: a machine needs at least one")
    );
    let (field, _) = reject("[[nodes]]\nid = 0\ncpus = \"0\"\nmemory = \"1G\"\n[[cpu]]\nid = 0\nonline = false\n");
    assert_eq!(field, "cpus");
}

#[test]
fn single_node_may_omit_distances() {
    let t = build("[[nodes]]\nid = 0\ncpus = \"0-1\"\nmem_mb = 2048\n");
    assert_eq!(t.distances, vec![vec![10]]);
    assert_eq!(t.node(0).unwrap().mem_total_kb, 2 << 20);
}

#[test]
fn sizes() {
    assert_eq!(parse_size_kb("512K"), Ok(512));
    assert_eq!(parse_size_kb("128402M"), Ok(128402 * 1024));
    assert_eq!(parse_size_kb("8G"), Ok(8 << 20));
    assert_eq!(parse_size_kb("8GiB"), Ok(8 << 20));
    assert_eq!(parse_size_kb("1.5T"), Ok(3 << 29));
    assert_eq!(parse_size_kb(" 2 gb "), Ok(2 << 20));
    assert!(parse_size_kb("8").unwrap_err().contains("needs a unit"));
    assert!(parse_size_kb("8X").unwrap_err().contains("unknown unit"));
    assert!(parse_size_kb("0.1K").unwrap_err().contains("whole number of kB"));
    assert!(parse_size_kb("1.2.3G").is_err());
    assert!(parse_size_kb("G").is_err());
    assert!(parse_size_kb("99999999999999999T").unwrap_err().contains("too large"));
    // Zero needs no unit; a sign is said as such (it read "unknown unit \"-1\"").
    assert_eq!(parse_size_kb("0"), Ok(0));
    assert_eq!(parse_size_kb(" 00 "), Ok(0));
    assert_eq!(parse_size_kb("-1"), Err("\"-1\": a size cannot be negative".to_string()));
    assert!(parse_size_kb("").unwrap_err().contains("needs a unit"));
}

#[test]
fn a_machine_of_many_cpus_keeps_per_cpu_sets_small() {
    // 4 nodes x 4,096 CPUs, SMT 2, 8 cores per LLC, numbered as Linux numbers x86 CPUs: the SMT
    // siblings of CPU c are c and c + 8,192, the LLC 16 CPUs in two runs as far apart. Each
    // CPU's two sets keep 2 words each: as bitmaps up to their highest member they took 64-128
    // words each (per CPU: memory grew with the square of the CPUs; 0.8 GB at 65,536).
    let half = 8192;
    let nodes: String = (0..4)
        .map(|i| {
            let (a, b) = (i * 2048, half + i * 2048);
            format!("[[nodes]]\nid = {i}\ncpus = \"{a}-{},{b}-{}\"\nmem_gb = 64\n", a + 2047, b + 2047)
        })
        .collect();
    let row = |i: usize| (0..4).map(|j| if i == j { "10" } else { "21" }).collect::<Vec<_>>().join(", ");
    let distances = (0..4).map(|i| format!("[{}]", row(i))).collect::<Vec<_>>().join(", ");
    let t = build(&format!("smt = 2\ncores_per_llc = 8\ndistances = [{distances}]\n{nodes}"));
    assert_eq!(t.cpus.len(), 16384);
    let c = t.cpu(5).unwrap();
    assert_eq!(c.siblings, set("5,8197"));
    assert_eq!(c.llc.as_ref().unwrap(), &set("0-7,8192-8199"));
    let words: usize =
        t.cpus.iter().map(|c| c.siblings.stored_words() + c.llc.as_ref().map_or(0, IdSet::stored_words)).sum();
    assert!(words <= 4 * t.cpus.len(), "{words} words in the per-CPU sets of {} CPUs", t.cpus.len());
}

/// A valid 2-node file with `line` substituted in: each rejection test breaks one thing.
fn two_nodes_with(distances: &str, node1: &str) -> String {
    format!("distances = {distances}\n[[nodes]]\nid = 0\ncpus = \"0-3\"\nmem_gb = 4\n[[nodes]]\nid = 1\n{node1}\n")
}

const OK_DIST: &str = "[[10, 21], [21, 10]]";

#[test]
fn rejects_non_square_matrix() {
    let (f, r) = reject(&two_nodes_with("[[10, 21], [21, 10], [30, 30]]", "cpus = \"4-7\"\nmem_gb = 4"));
    assert_eq!(f, "distances");
    assert!(r.contains("3 rows for 2 nodes") && r.contains("square"), "{r}");
    let (f, r) = reject(&two_nodes_with("[[10, 21], [21]]", "cpus = \"4-7\"\nmem_gb = 4"));
    assert_eq!(f, "distances[1]");
    assert!(r.contains("1 entries for 2 nodes"), "{r}");
    let (f, _) = reject(&two_nodes_with("[]", "cpus = \"4-7\"\nmem_gb = 4"));
    assert_eq!(f, "distances");
}

#[test]
fn rejects_asymmetric_matrix_unless_asked() {
    let bad = two_nodes_with("[[10, 21], [31, 10]]", "cpus = \"4-7\"\nmem_gb = 4");
    let (f, r) = reject(&bad);
    assert_eq!(f, "distances[1][0]");
    assert!(r.contains("31 differs from distances[0][1] = 21") && r.contains("asymmetric = true"), "{r}");
    let t = build(&format!("asymmetric = true\n{bad}"));
    assert_eq!((t.distance(0, 1), t.distance(1, 0)), (Some(21), Some(31)));
}

#[test]
fn rejects_a_diagonal_other_than_10() {
    // An off-diagonal 10 is what `numa=fake`'s emulated nodes of one physical node read: kept, so a
    // sysfs tree of them exported loads again (review helper-54).
    let t = build(&two_nodes_with("[[10, 10], [10, 10]]", "cpus = \"4-7\"\nmem_gb = 4"));
    assert_eq!(t.distance(0, 1), Some(10));
    let (f, r) = reject(&two_nodes_with("[[10, 21], [21, 12]]", "cpus = \"4-7\"\nmem_gb = 4"));
    assert_eq!(f, "distances[1][1]");
    assert!(r.contains("must be 10"), "{r}");
}

#[test]
fn rejects_distance_out_of_slit_range() {
    let (f, r) = reject(&two_nodes_with("[[10, 5], [5, 10]]", "cpus = \"4-7\"\nmem_gb = 4"));
    assert_eq!(f, "distances[0][1]");
    assert!(r.contains("below 10"), "{r}");
    let (f, r) = reject(&two_nodes_with("[[10, 300], [300, 10]]", "cpus = \"4-7\"\nmem_gb = 4"));
    assert_eq!(f, "distances[0][1]");
    assert!(r.contains("above 255"), "{r}");
}

#[test]
fn rejects_cpu_in_two_nodes_and_bad_cpu_lists() {
    let (f, r) = reject(&two_nodes_with(OK_DIST, "cpus = \"3-7\"\nmem_gb = 4"));
    assert_eq!(f, "nodes[1].cpus");
    assert!(r.contains("CPU 3 is also in nodes[0] (node 0)"), "{r}");
    let (f, r) = reject(&two_nodes_with(OK_DIST, "cpus = \"4-x\"\nmem_gb = 4"));
    assert_eq!(f, "nodes[1].cpus");
    assert!(r.contains("\"4-x\""), "{r}");
}

#[test]
fn rejects_zero_or_missing_memory_on_a_node_with_cpus() {
    let (f, r) = reject(&two_nodes_with(OK_DIST, "cpus = \"4-7\"\nmem_gb = 0"));
    assert_eq!(f, "nodes[1].mem_gb");
    assert!(r.contains("0 on node 1 which has CPUs 4-7"), "{r}");
    let (f, r) = reject(&two_nodes_with(OK_DIST, "cpus = \"4-7\"\nmemory = \"0G\""));
    assert_eq!(f, "nodes[1].memory");
    assert!(r.contains("needs memory"), "{r}");
    let (f, r) = reject(&two_nodes_with(OK_DIST, "cpus = \"4-7\""));
    assert_eq!(f, "nodes[1].memory");
    assert!(r.contains("missing"), "{r}");
    let (f, r) = reject(&two_nodes_with(OK_DIST, ""));
    assert_eq!(f, "nodes[1].memory");
    assert!(r.contains("no CPUs either"), "{r}");
    let (f, r) = reject(&two_nodes_with(OK_DIST, "cpus = \"4-7\"\nmem_gb = 4\nmem_mb = 4096"));
    assert_eq!(f, "nodes[1].memory");
    assert!(r.contains("one of"), "{r}");
    let (f, r) = reject(&two_nodes_with(OK_DIST, "cpus = \"4-7\"\nmemory = \"4\""));
    assert_eq!(f, "nodes[1].memory");
    assert!(r.contains("needs a unit"), "{r}");
    let (f, r) = reject(&two_nodes_with(OK_DIST, "cpus = \"4-7\"\nmem_gb = 4\nfree = \"5G\""));
    assert_eq!(f, "nodes[1].free");
    assert!(r.contains("more than"), "{r}");
}

#[test]
fn rejects_duplicate_and_out_of_range_node_ids() {
    let (f, r) = reject(
        "distances = [[10, 21], [21, 10]]\n[[nodes]]\nid = 0\ncpus = \"0\"\nmem_gb = 1\n[[nodes]]\nid = 0\ncpus = \"1\"\nmem_gb = 1\n",
    );
    assert_eq!(f, "nodes[1].id");
    assert!(r.contains("duplicate node id 0 (also nodes[0])"), "{r}");
    let (f, r) = reject("[[nodes]]\nid = 4096\ncpus = \"0\"\nmem_gb = 1\n");
    assert_eq!(f, "nodes[0].id");
    assert!(r.contains("1023"), "{r}");
    let (f, _) = reject("nodes = []\n");
    assert_eq!(f, "nodes");
}

#[test]
fn rejects_unknown_node_or_cpu_references() {
    let dev = "[[devices]]\naddress = \"0000:41:00.0\"\nclass = \"network\"\nnode = 7\n";
    let (f, r) = reject(&format!("{}{dev}", two_nodes_with(OK_DIST, "cpus = \"4-7\"\nmem_gb = 4")));
    assert_eq!(f, "devices[0].node");
    assert!(r.contains("unknown node 7") && r.contains("0-1"), "{r}");
    let (f, r) = reject(&format!("{}[[cpu]]\nid = 99\n", two_nodes_with(OK_DIST, "cpus = \"4-7\"\nmem_gb = 4")));
    assert_eq!(f, "cpu[0].id");
    assert!(r.contains("CPU 99 is in no node's cpus"), "{r}");
    let (f, r) = reject(&format!(
        "{}[[cpu]]\nid = 1\nsiblings = \"1,42\"\n",
        two_nodes_with(OK_DIST, "cpus = \"4-7\"\nmem_gb = 4")
    ));
    assert_eq!(f, "cpu[0].siblings");
    assert!(r.contains("CPU 42"), "{r}");
    let (f, r) = reject(&format!(
        "{}[[cpu]]\nid = 1\nsiblings = \"2-3\"\n",
        two_nodes_with(OK_DIST, "cpus = \"4-7\"\nmem_gb = 4")
    ));
    assert_eq!(f, "cpu[0].siblings");
    assert!(r.contains("itself"), "{r}");
    let (f, _) =
        reject(&format!("{}[[cpu]]\nid = 1\n[[cpu]]\nid = 1\n", two_nodes_with(OK_DIST, "cpus = \"4-7\"\nmem_gb = 4")));
    assert_eq!(f, "cpu[1].id");
    let (f, r) = reject(&format!("possible = \"1-3\"\n{}", two_nodes_with(OK_DIST, "cpus = \"4-7\"\nmem_gb = 4")));
    assert_eq!(f, "possible");
    assert!(r.contains("node 0"), "{r}");
}

#[test]
fn rejects_bad_device_entries() {
    let base = two_nodes_with(OK_DIST, "cpus = \"4-7\"\nmem_gb = 4");
    let (f, r) = reject(&format!(
        "{base}[[devices]]\naddress = \"0000:41:00.0\"\nclass = \"network\"\n[[devices]]\naddress = \"0000:41:00.0\"\nclass = \"gpu\"\n"
    ));
    assert_eq!(f, "devices[1].address");
    assert!(r.contains("duplicate"), "{r}");
    let (f, r) =
        reject(&format!("{base}[[devices]]\naddress = \"0000:41:00.0\"\nclass = \"nvme\"\nclass_code = 0x020000\n"));
    assert_eq!(f, "devices[0].class_code");
    assert!(r.contains("network class code"), "{r}");
}

#[test]
fn rejects_structure_that_does_not_divide() {
    let (f, r) = reject(&format!("smt = 3\n{}", two_nodes_with(OK_DIST, "cpus = \"4-7\"\nmem_gb = 4")));
    assert_eq!(f, "nodes[0].cpus");
    assert!(r.contains("4 CPUs do not divide into cores of 3 threads"), "{r}");
    let (f, r) = reject(&two_nodes_with(OK_DIST, "cpus = \"4-7\"\nmem_gb = 4\ncores_per_llc = 3"));
    assert_eq!(f, "nodes[1].cores_per_llc");
    assert!(r.contains("4 cores do not divide"), "{r}");
    let (f, _) = reject(&format!("cores_per_llc = 0\n{}", two_nodes_with(OK_DIST, "cpus = \"4-7\"\nmem_gb = 4")));
    assert_eq!(f, "cores_per_llc");
    let (f, _) = reject(&two_nodes_with(OK_DIST, "cpus = \"4-7\"\nmem_gb = 4\nsmt = 0"));
    assert_eq!(f, "nodes[1].smt");
    let (f, r) = reject(&two_nodes_with(OK_DIST, "cpus = \"4-7\"\nmem_gb = 4\npackage = 1"));
    assert_eq!(f, "nodes[0].package");
    assert!(r.contains("missing while nodes[1] gives one"), "{r}");
    let (f, r) = reject(&two_nodes_with(OK_DIST, "memory = \"4G\"\nsmt = 2"));
    assert_eq!(f, "nodes[1].smt");
    assert!(r.contains("without CPUs"), "{r}");
}

#[test]
fn syntax_errors_name_the_file_and_position() {
    match MachineFile::parse("nodes = [\n  { id = 0, cpus = 7 },\n]\n", Format::Toml, "m.toml") {
        Err(MachineError::Syntax { file, message }) => {
            assert_eq!(file, "m.toml");
            assert!(message.contains("line 2"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    match MachineFile::parse("[[nodes]]\nid = 0\nmemroy = \"1G\"\n", Format::Toml, "m.toml") {
        Err(MachineError::Syntax { message, .. }) => assert!(message.contains("memroy"), "{message}"),
        other => panic!("{other:?}"),
    }
    match MachineFile::parse(
        "{\"nodes\": [{\"id\": 0, \"cpus\": \"0\", \"mem_gb\": 1}], \"smt\": \"two\"}",
        Format::Json,
        "m.json",
    ) {
        Err(MachineError::Syntax { file, message }) => {
            assert_eq!(file, "m.json");
            assert!(message.contains("line 1"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    match MachineFile::parse("[[devices]]\naddress = \"x\"\nclass = \"toaster\"\n", Format::Toml, "m.toml") {
        Err(MachineError::Syntax { message, .. }) => {
            assert!(message.contains("toaster") && message.contains("network"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn toml_and_json_describe_the_same_machine() {
    let toml_file = MachineFile::parse(TWO_NODES, Format::Toml, "a").unwrap();
    let json = toml_file.to_json();
    assert!(json.trim_start().starts_with('{'));
    let json_file = MachineFile::parse(&json, Format::Json, "b").unwrap();
    assert_eq!(toml_file, json_file);
    assert_eq!(toml_file.build().unwrap(), json_file.build().unwrap());
}

#[test]
fn topology_json_reads_as_a_machine_file() {
    // What `numapilot topo --json` prints (topology + tiers) loads back as the same machine.
    let t = build(TWO_NODES);
    let text = numapilot_topology::render::json(&t);
    assert_eq!(parse_topology(&text, Format::Json, "topo.json").unwrap(), t);
}

#[test]
fn load_detects_format_by_extension_or_content() {
    let dir = tempfile::tempdir().unwrap();
    let file = MachineFile::parse(TWO_NODES, Format::Toml, "a").unwrap();
    let expected = file.build().unwrap();
    for (name, text) in
        [("m.toml", file.to_toml()), ("m.json", file.to_json()), ("m.machine", file.to_json()), ("m", file.to_toml())]
    {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        assert_eq!(Topology::from_machine_file(&path).unwrap(), expected, "{name}");
    }
    let missing = Topology::from_machine_file(Path::new("/nonexistent/m.toml")).unwrap_err();
    assert!(matches!(missing, MachineError::Io { .. }) && missing.to_string().contains("/nonexistent/m.toml"));
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, two_nodes_with("[[10, 21], [31, 10]]", "cpus = \"4-7\"\nmem_gb = 4")).unwrap();
    let e = Topology::from_machine_file(&bad).unwrap_err().to_string();
    assert!(e.contains("bad.toml: distances[1][0]: 31 differs"), "{e}");
}

#[test]
fn sysfs_topology_exports_to_a_machine_file_and_back() {
    // The sparse tree of the sysfs tests, with an offline CPU and a device: export, reload, equal.
    let fs = common::FakeSys::new();
    fs.node_lists("0,8", "0-15");
    fs.node(0, "0-2", 8_000_000, 7_000_000, "10 20");
    fs.node(8, "", 4_000_000, 3_999_999, "20 10");
    for c in 0..3 {
        fs.simple_cpu(c, 1, c + 4, &c.to_string(), "0-2");
    }
    fs.cpu(3, Some(false), None, Some(0));
    fs.pci("0000:3b:00.0", "0x020000", Some("8"), &[("net", "eth0")]);
    let t = Topology::from_sysfs(fs.root()).unwrap();
    let file = MachineFile::from_topology(&t, Some("sparse"));
    let text = file.to_toml();
    assert_eq!(parse_topology(&text, Format::Toml, "export").unwrap(), t, "{text}");
    assert_eq!(parse_topology(&file.to_json(), Format::Json, "export").unwrap(), t);
}

// ---- property tests ----

/// A random valid machine file: 1-5 nodes with sparse ids in file order, some memory-only, smt and
/// cores_per_llc that divide, a symmetric matrix, optional packages, devices and CPU overrides.
fn valid_machine() -> impl Strategy<Value = MachineFile> {
    let node = (1u32..=4, 1u32..=6, prop_oneof![Just(1u32), Just(2), Just(4)], 1u64..=512, 0u8..3, any::<bool>());
    (
        proptest::collection::btree_set(0u32..64, 1..=5),
        proptest::collection::vec(node, 5),
        proptest::collection::vec(11u32..=255, 25),
        any::<bool>(),
        proptest::collection::vec((0usize..5, any::<bool>()), 0..3),
        any::<bool>(),
    )
        .prop_map(|(ids, shapes, dists, give_packages, devs, shuffle)| {
            let mut ids: Vec<u32> = ids.into_iter().collect();
            if shuffle {
                ids.reverse();
            }
            let n = ids.len();
            let mut next_cpu = 0u32;
            let mut nodes = Vec::new();
            for (i, &id) in ids.iter().enumerate() {
                let (per_llc, llcs, smt, mem, mem_kind, cpuless) = shapes[i];
                let cpuless = cpuless && i > 0;
                let cores = per_llc * llcs;
                let count = if cpuless { 0 } else { cores * smt };
                let cpus: IdSet = (next_cpu..next_cpu + count).collect();
                next_cpu += count + (id % 3); // leave gaps sometimes
                let mut spec = NodeSpec { id, cpus: cpus.to_list(), ..NodeSpec::default() };
                match mem_kind {
                    0 => spec.memory = Some(format!("{mem}M")),
                    1 => spec.mem_gb = Some(mem),
                    _ => spec.mem_mb = Some(mem),
                }
                if count > 0 {
                    spec.smt = Some(smt);
                    spec.cores_per_llc = Some(per_llc);
                    if give_packages {
                        spec.package = Some(i as u32 / 2);
                    }
                }
                nodes.push(spec);
            }
            if give_packages && nodes.iter().all(|s| s.cpus.is_empty()) {
                nodes[0].package = None;
            }
            let mut distances = vec![vec![10u32; n]; n];
            for a in 0..n {
                for b in 0..a {
                    distances[a][b] = dists[a * 5 + b];
                    distances[b][a] = dists[a * 5 + b];
                }
            }
            let devices = devs
                .iter()
                .enumerate()
                .map(|(k, &(node, placed))| DeviceSpec {
                    address: format!("0000:{:02x}:00.0", k),
                    class: [DeviceClass::Network, DeviceClass::Nvme, DeviceClass::Gpu][k % 3],
                    class_code: None,
                    node: placed.then(|| ids[node % n]),
                    names: vec![format!("dev{k}")],
                })
                .collect();
            // CPU 0 offline, while another CPU stays online (a machine needs one).
            let total: usize = nodes.iter().map(|s| IdSet::parse_list(&s.cpus).map_or(0, |c| c.len())).sum();
            let cpu = if next_cpu > 2 && total > 1 {
                vec![CpuSpec { id: 0, online: Some(false), ..CpuSpec::default() }]
            } else {
                vec![]
            };
            MachineFile {
                name: Some("generated".into()),
                description: None,
                smt: None,
                cores_per_llc: None,
                asymmetric: false,
                possible: None,
                distances,
                nodes,
                cpu,
                devices,
                sim: None,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn valid_machine_files_round_trip_through_toml_and_json(file in valid_machine()) {
        let topo = file.build().map_err(|e| TestCaseError::fail(format!("generated file rejected: {e}")))?;
        let toml_text = file.to_toml();
        let from_toml = MachineFile::parse(&toml_text, Format::Toml, "t").map_err(|e| TestCaseError::fail(format!("{e}\n{toml_text}")))?;
        prop_assert_eq!(&from_toml, &file);
        let from_json = MachineFile::parse(&file.to_json(), Format::Json, "j").unwrap();
        prop_assert_eq!(&from_json, &file);
        prop_assert_eq!(&from_toml.build().unwrap(), &topo);
        // Conservation: every CPU of the file is in exactly one node's cpus (or offline), once.
        let listed: usize = file.nodes.iter().map(|n| IdSet::parse_list(&n.cpus).unwrap().len()).sum();
        prop_assert_eq!(topo.cpus.len(), listed);
        let online_in_nodes: usize = topo.nodes.iter().map(|n| n.cpus.len()).sum();
        prop_assert_eq!(online_in_nodes, topo.cpus.iter().filter(|c| c.online).count());
        for c in &topo.cpus {
            prop_assert!(c.siblings.contains(c.id));
            let llc = c.llc.as_ref().expect("generated CPUs have an LLC");
            prop_assert!(llc.contains(c.id));
            let node_cpus: IdSet = topo.cpus.iter().filter(|o| o.node == c.node).map(|o| o.id).collect();
            prop_assert!(llc.is_subset(&node_cpus) && c.siblings.is_subset(llc));
        }
        // And the exported description of the built machine builds the same machine.
        let exported = MachineFile::from_topology(&topo, None);
        prop_assert_eq!(&exported.build().unwrap(), &topo);
    }

    #[test]
    fn any_text_is_rejected_or_accepted_without_panicking(text in "\\PC{0,200}") {
        let _ = parse_topology(&text, Format::Toml, "fuzz");
        let _ = parse_topology(&text, Format::Json, "fuzz");
    }
}

/// Bad input found by fuzzing (review helper-39), each an error naming what is wrong, no panic:
/// a topology JSON (`topo --json`) whose distance matrix is ragged (indexed as square, it
/// panicked), one with a bad value (reported against the machine file's schema, "unknown field
/// mem_total_kb"), and a node of 16 EiB (its byte count overflowed 64 bits downstream).
#[test]
fn fuzzed_machine_files_are_errors_not_panics() {
    let ragged = r#"{"nodes":[{"id":0,"cpus":"0","mem_total_kb":1024,"mem_free_kb":1024},
        {"id":1,"cpus":"1","mem_total_kb":1024,"mem_free_kb":1024}],
        "possible":"0-1","distances":[[10],[20,10]],"cpus":[],"devices":[]}"#;
    let e = parse_topology(ragged, Format::Json, "ragged.json").unwrap_err().to_string();
    assert!(e.contains("ragged.json") && e.contains("distances") && e.contains("[1, 2]"), "{e}");
    let t = Topology::from_sysfs(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/rig-6.12-2node")))
        .expect("the 2-node fixture");
    let json = serde_json::to_string(&t).unwrap();
    let total = format!("\"mem_total_kb\":{}", t.nodes[0].mem_total_kb);
    assert!(json.contains(&total), "{json}");
    let bad = json.replacen(&total, "\"mem_total_kb\":-1", 1);
    let e = parse_topology(&bad, Format::Json, "t.json").unwrap_err().to_string();
    assert!(e.contains("as a topology") && !e.contains("unknown field `mem_total_kb`"), "{e}");
    let (field, reason) = reject("[[nodes]]\nid = 0\ncpus = \"0-1\"\nmemory = \"16777216T\"\n");
    assert!(field.contains("memory") && reason.contains("more than a node holds"), "{field}: {reason}");
}
