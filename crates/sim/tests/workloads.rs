//! Workloads beyond autonuma-benchmark (issue 3 section 4): their shapes on every preset machine, the
//! workload files under `workloads/` and the file format's round trips and validation errors.

use std::path::{Path, PathBuf};

use numapilot_sim::workload::file::{self, Count, Format, Named, Shape, Size, WorkloadFile, WorkloadFileError};
use numapilot_sim::workload::{client_server, process_types, vm_mix, Spec};
use numapilot_topology::Topology;

fn catalog() -> Vec<Named> {
    let mut all = client_server::catalog();
    all.extend(process_types::catalog());
    all.extend(vm_mix::catalog());
    all
}

fn presets() -> Vec<(&'static str, Topology)> {
    Topology::preset_names().into_iter().map(|n| (n, Topology::preset(n).unwrap())).collect()
}

fn workloads_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads")
}

#[test]
fn names_are_unique_and_every_workload_is_valid_on_every_preset() {
    let all = catalog();
    let mut names: Vec<&str> = all.iter().map(|w| w.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), all.len(), "duplicate workload names");
    for (machine, topo) in presets() {
        for w in &all {
            let spec = (w.build)(&topo);
            spec.validate().unwrap_or_else(|e| panic!("{} on {machine}: {e}", w.name));
            assert_eq!(spec.name, w.name, "{} on {machine}: spec named differently", w.name);
            // Nothing asks for more memory than the machine has.
            let shape = Shape::of(&topo);
            let fixed: u64 = spec.total_bytes();
            assert!(fixed <= shape.mem_bytes, "{} on {machine}: {fixed} bytes > {}", w.name, shape.mem_bytes);
        }
    }
}

#[test]
fn thread_counts_follow_the_cpu_count() {
    for (machine, topo) in presets() {
        let shape = Shape::of(&topo);
        let redis = client_server::redis_set(&topo);
        let clients = redis.processes[1].threads[0].count;
        assert!((1..=4).contains(&clients), "{machine}: {clients} clients");
        // Server + clients fit on the cores of one node whenever a node has 2+ cores.
        if shape.node_cores >= 2 {
            assert!(clients < shape.node_cores, "{machine}");
        }
        assert_eq!(process_types::static_large(&topo).thread_count() as u32, shape.node_cores, "{machine}");
        assert_eq!(process_types::bandwidth(&topo).thread_count() as u32, shape.cpus, "{machine}");
        let vms = vm_mix::vms(&topo);
        assert!(vms.iter().map(|v| v.vcpus).sum::<u32>() <= shape.cpus, "{machine}: VMs oversubscribe");
        assert!(!vms.is_empty());
    }
}

#[test]
fn vm_mix_on_the_288_core_preset_is_the_papers() {
    let topo = Topology::preset("numaconnect-288c").unwrap();
    let spec = vm_mix::vm_mix(&topo);
    assert_eq!(spec.processes.len(), 20);
    let mut by_size = std::collections::BTreeMap::new();
    for p in &spec.processes {
        let size = p.name.split('-').nth(1).unwrap().to_string();
        let bytes: u64 = p.regions.iter().map(|r| r.bytes).sum();
        let e = by_size.entry(size).or_insert((0, 0, 0u64));
        e.0 += 1;
        e.1 = p.threads[0].count;
        e.2 = bytes;
    }
    assert_eq!(by_size["small"], (12, 4, 16 << 30));
    assert_eq!(by_size["medium"], (4, 8, 32 << 30));
    assert_eq!(by_size["large"], (2, 16, 64 << 30));
    assert_eq!(by_size["huge"], (2, 72, 288 << 30));
    // Arrivals are staggered, largest first.
    assert_eq!(spec.processes[0].start_s, 0.0);
    assert!(spec.processes[0].name.contains("huge"));
    assert!(spec.processes.windows(2).all(|w| w[0].start_s < w[1].start_s));
}

#[test]
fn example_files_load_on_every_preset() {
    let mut seen = 0;
    for entry in std::fs::read_dir(workloads_dir()).unwrap() {
        let path = entry.unwrap().path();
        if Format::from_path(&path).is_none() {
            continue;
        }
        seen += 1;
        for (machine, topo) in presets() {
            let spec = file::load_spec(&path, &topo).unwrap_or_else(|e| panic!("{} on {machine}: {e}", path.display()));
            spec.validate().unwrap();
            assert!(spec.thread_count() >= 1);
        }
    }
    assert!(seen >= 3, "expected the example files under workloads/, found {seen}");
}

#[test]
fn example_file_sizes_and_counts_resolve_against_the_machine() {
    let topo = Topology::preset("autonuma-2s12c-24g").unwrap();
    let shape = Shape::of(&topo);
    let spec = file::load_spec(&workloads_dir().join("db-and-batch.toml"), &topo).unwrap();
    assert_eq!(spec.processes[0].regions[0].bytes, shape.node_bytes * 60 / 100);
    assert_eq!(spec.processes[0].threads[0].count, 12);
    assert_eq!(spec.processes[1].threads[0].count, 12);
    assert_eq!(spec.processes[1].regions[0].bytes, 4 << 30);
    assert_eq!(spec.processes[1].phases.len(), 1);
    let big = Topology::preset("numaconnect-288c").unwrap();
    let spec = file::load_spec(&workloads_dir().join("db-and-batch.toml"), &big).unwrap();
    assert_eq!(spec.processes[0].threads[0].count, 8);
    assert_eq!(spec.processes[1].threads[0].count, 144);
    let json = file::load_spec(&workloads_dir().join("pipeline.json"), &topo).unwrap();
    assert_eq!(json.pacing.len(), 1);
    assert_eq!(json.processes[1].regions[0].grow.unwrap().initial_bytes, 64 << 20);
}

#[test]
fn files_round_trip_through_toml_and_json() {
    let topo = Topology::preset("article-4n96").unwrap();
    for name in ["db-and-batch.toml", "pipeline.json", "numa01-like.toml"] {
        let path = workloads_dir().join(name);
        let original = WorkloadFile::load(&path).unwrap();
        let from_toml = WorkloadFile::parse(&original.to_toml(), Format::Toml, "<toml>").unwrap();
        let from_json = WorkloadFile::parse(&original.to_json(), Format::Json, "<json>").unwrap();
        assert_eq!(from_toml, original, "{name} via TOML");
        assert_eq!(from_json, original, "{name} via JSON");
        assert_eq!(from_toml.resolve(&topo, name).unwrap(), original.resolve(&topo, name).unwrap());
    }
}

#[test]
fn every_builtin_workload_exports_to_a_file_that_loads_back_identical() {
    for machine in ["autonuma-2s12c-24g", "numaconnect-288c"] {
        let topo = Topology::preset(machine).unwrap();
        for w in catalog() {
            let spec: Spec = (w.build)(&topo);
            let exported = WorkloadFile::from_spec(&spec);
            for (text, format) in [(exported.to_toml(), Format::Toml), (exported.to_json(), Format::Json)] {
                let back = file::parse_spec(&text, format, w.name, &topo)
                    .unwrap_or_else(|e| panic!("{} on {machine} ({format:?}): {e}\n{text}", w.name));
                assert_eq!(back, spec, "{} on {machine} ({format:?})", w.name);
            }
        }
    }
}

#[test]
fn sizes_and_counts() {
    let topo = Topology::preset("autonuma-2s12c-24g").unwrap();
    let s = Shape::of(&topo);
    let size = |t: &str| Size::Text(t.into()).resolve(&s);
    assert_eq!(size("3G"), Ok(3 << 30));
    assert_eq!(size("1.5M"), Ok(1536 << 10));
    assert_eq!(size("50%node"), Ok(s.node_bytes / 2));
    assert_eq!(size("100%machine"), Ok(s.mem_bytes));
    assert_eq!(Size::Bytes(4096).resolve(&s), Ok(4096));
    assert!(size("3").unwrap_err().contains("needs a unit"));
    assert!(size("0%node").unwrap_err().contains("(0, 100]"));
    assert!(size("20%socket").unwrap_err().contains("\"socket\""));
    let count = |t: &str| Count::Expr(t.into()).resolve(&s);
    assert_eq!(count("cpus"), Ok(24));
    assert_eq!(count("cores"), Ok(12));
    assert_eq!(count("nodes"), Ok(2));
    assert_eq!(count("node-cpus"), Ok(12));
    assert_eq!(count("node-cores"), Ok(6));
    assert_eq!(count("cpus/2"), Ok(12));
    assert_eq!(count("node-cpus-1"), Ok(11));
    assert_eq!(count("node-cores*2"), Ok(12));
    assert_eq!(count("nodes+1"), Ok(3));
    assert_eq!(count("7"), Ok(7));
    assert!(count("cpus-24").unwrap_err().contains("at least 1"));
    assert!(count("cpus/0").unwrap_err().contains("division by zero"));
    assert!(count("sockets").unwrap_err().contains("unknown term"));
    assert!(count("cpus/x").unwrap_err().contains("not a whole number"));
    assert!(Count::Fixed(0).resolve(&s).is_err());
}

/// A small valid file the error cases below each break in one place.
const BASE: &str = r#"
name = "base"
duration_s = 10

[[processes]]
name = "server"
[[processes.regions]]
name = "buf"
size = "64M"
[[processes.threads]]
name = "main"
work = { unit = "requests", bytes_per_unit = 256, compute_ns = 1000 }
accesses = [{ region = "buf", pattern = "random" }]

[[processes]]
name = "client"
[[processes.regions]]
name = "req"
size = "2M"
[[processes.threads]]
name = "main"
count = 2
work = { unit = "requests", bytes_per_unit = 128, compute_ns = 1000 }
accesses = [{ region = "req", write = true }, { region = "server/buf" }]

[[pacing]]
a = "server/main"
b = "client/main"
"#;

fn resolve(text: &str) -> Result<Spec, WorkloadFileError> {
    let topo = Topology::preset("autonuma-2s12c-24g").unwrap();
    file::parse_spec(text, Format::Toml, "t.toml", &topo)
}

#[test]
fn the_base_file_is_valid() {
    let spec = resolve(BASE).unwrap();
    assert_eq!(spec.thread_count(), 3);
    assert_eq!(spec.processes[1].threads[0].accesses[1].region, "server/buf");
}

#[test]
fn each_validation_error_names_the_field_and_the_reason() {
    // (text replaced, replacement, field named, words of the reason)
    let cases: &[(&str, &str, &str, &str)] = &[
        ("name = \"base\"", "name = \" \"", "name", "must not be empty"),
        ("duration_s = 10", "duration_s = -1", "duration_s", "finite time > 0"),
        ("duration_s = 10", "", "duration_s", "open-ended work"),
        ("name = \"client\"", "name = \"server\"", "processes[1].name", "earlier process"),
        ("name = \"client\"", "name = \"a/b\"", "processes[1].name", "without '/'"),
        ("name = \"client\"", "name = \"client\"\ncount = \"cpus-30\"", "processes[1].count", "at least 1"),
        ("name = \"client\"", "name = \"client\"\nstart_s = -2", "processes[1].start_s", ">= 0"),
        ("name = \"client\"", "name = \"client\"\ncpus = \"0-99\"", "processes[1].cpus", "not online"),
        (
            "name = \"client\"",
            "name = \"client\"\npolicy = { mode = \"bind\", nodes = \"5\" }",
            "processes[1].policy.nodes",
            "not on this machine",
        ),
        (
            "name = \"client\"",
            "name = \"client\"\npolicy = { mode = \"preferred\", node = 3 }",
            "processes[1].policy.node",
            "not on this machine",
        ),
        (
            "name = \"client\"",
            "name = \"client\"\npolicy = { mode = \"weighted-interleave\", nodes = \"0-1\", weights = [1] }",
            "processes[1].policy.weights",
            "1 weights for 2 nodes",
        ),
        ("size = \"64M\"", "size = \"64\"", "processes[0].regions[0].size", "needs a unit"),
        ("size = \"64M\"", "size = 0", "processes[0].regions[0].size", "more than 0"),
        (
            "size = \"64M\"",
            "size = \"64M\"\ntouch = { by = \"node\", node = 7 }",
            "processes[0].regions[0].touch.node",
            "not on this machine",
        ),
        (
            "size = \"64M\"",
            "size = \"64M\"\ngrow = { initial = \"1G\", per_s = \"1M\" }",
            "processes[0].regions[0].grow.initial",
            "more than the region's size",
        ),
        (
            "size = \"64M\"",
            "size = \"64M\"\ngrow = { initial = \"1M\", per_s = \"fast\" }",
            "processes[0].regions[0].grow.per_s",
            "unknown unit",
        ),
        ("name = \"req\"", "name = \"\"", "processes[1].regions[0].name", "non-empty"),
        (
            "name = \"req\"\nsize = \"2M\"",
            "name = \"req\"\nsize = \"2M\"\n[[processes.regions]]\nname = \"req\"\nsize = \"2M\"",
            "processes[1].regions[1].name",
            "earlier region",
        ),
        ("count = 2", "count = 0", "processes[1].threads[0].count", "at least 1"),
        ("count = 2", "count = \"node-cpus/0\"", "processes[1].threads[0].count", "division by zero"),
        ("count = 2", "count = 2\ncpus = \"\"", "processes[1].threads[0].cpus", "is empty"),
        (
            "bytes_per_unit = 128, compute_ns = 1000",
            "bytes_per_unit = -1, compute_ns = 1000",
            "processes[1].threads[0].work.bytes_per_unit",
            ">= 0",
        ),
        (
            "bytes_per_unit = 128, compute_ns = 1000",
            "bytes_per_unit = 0, compute_ns = 0",
            "processes[1].threads[0].work",
            "cost nothing",
        ),
        (
            "bytes_per_unit = 128, compute_ns = 1000",
            "bytes_per_unit = 128, compute_ns = 1000, duty = 1.5",
            "processes[1].threads[0].work.duty",
            "(0, 1]",
        ),
        (
            "bytes_per_unit = 128, compute_ns = 1000",
            "bytes_per_unit = 128, compute_ns = 1000, total = 0",
            "processes[1].threads[0].work.total",
            "finite amount > 0",
        ),
        (
            "accesses = [{ region = \"buf\", pattern = \"random\" }]",
            "",
            "processes[0].threads[0].accesses",
            "no access says where",
        ),
        (
            "{ region = \"req\", write = true }",
            "{ region = \"reqq\", write = true }",
            "processes[1].threads[0].accesses[0].region",
            "no region \"reqq\" in process \"client\"",
        ),
        (
            "{ region = \"server/buf\" }",
            "{ region = \"server/nope\" }",
            "processes[1].threads[0].accesses[1].region",
            "has no region \"nope\"",
        ),
        (
            "{ region = \"server/buf\" }",
            "{ region = \"nobody/buf\" }",
            "processes[1].threads[0].accesses[1].region",
            "no process \"nobody\"",
        ),
        (
            "{ region = \"server/buf\" }",
            "{ region = \"server/buf\", weight = 0 }",
            "processes[1].threads[0].accesses[1].weight",
            "weight > 0",
        ),
        (
            "name = \"server\"\n[[processes.regions]]",
            "name = \"server\"\ncount = 2\n[[processes.regions]]",
            "processes[1].threads[0].accesses[1].region",
            "count 1",
        ),
        ("b = \"client/main\"", "b = \"client/nope\"", "pacing[0].b", "no thread group \"nope\""),
        ("a = \"server/main\"", "a = \"server\"", "pacing[0].a", "not \"process/group\""),
        ("b = \"client/main\"", "b = \"client/main\"\nratio = 0", "pacing[0].ratio", "ratio > 0"),
        (
            "[[pacing]]",
            "[[processes.phases]]\nat_s = 1\ngroup = \"worker\"\naccesses = []\n[[pacing]]",
            "processes[1].phases[0].group",
            "no thread group \"worker\"",
        ),
        (
            "[[pacing]]",
            "[[processes.phases]]\nat_s = -1\ngroup = \"main\"\naccesses = []\n[[pacing]]",
            "processes[1].phases[0].at_s",
            ">= 0",
        ),
        (
            "[[pacing]]",
            "[[processes.phases]]\nat_s = 1\ngroup = \"main\"\naccesses = [{ region = \"zzz\" }]\n[[pacing]]",
            "processes[1].phases[0].accesses[0].region",
            "no region \"zzz\"",
        ),
    ];
    for (from, to, field, reason) in cases {
        assert!(BASE.contains(from), "case {field}: {from:?} not in the base file");
        let text = BASE.replacen(from, to, 1);
        let err = resolve(&text).expect_err(&format!("case {field}: accepted\n{text}"));
        let msg = err.to_string();
        assert_eq!(err.field(), Some(*field), "case {field}: {msg}");
        assert!(msg.starts_with("t.toml: "), "case {field}: {msg}");
        assert!(msg.contains(reason), "case {field}: {msg:?} lacks {reason:?}");
    }
}

#[test]
fn syntax_errors_name_the_file_and_position() {
    let err = resolve(&BASE.replace("duration_s = 10", "duration_s = 10\nspeed = 3")).unwrap_err();
    assert!(matches!(err, WorkloadFileError::Syntax { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.starts_with("t.toml: ") && msg.contains("speed"), "{msg}");
    let topo = Topology::preset("autonuma-2s12c-24g").unwrap();
    let err = file::parse_spec("{\"name\": 3}", Format::Json, "w.json", &topo).unwrap_err();
    assert!(err.to_string().starts_with("w.json: ") && err.to_string().contains("line 1"), "{err}");
    let err = file::load_spec(Path::new("/nonexistent/w.toml"), &topo).unwrap_err();
    assert!(matches!(err, WorkloadFileError::Io { .. }) && err.to_string().contains("/nonexistent/w.toml"));
}

/// A count or size of the wrong kind says what is allowed, at its line (it said "data did not
/// match any variant of untagged enum Count", a type of ours; review helper-53).
#[test]
fn a_count_or_size_of_the_wrong_kind_says_what_is_allowed() {
    for (from, to, allowed) in [
        ("count = 2", "count = -1", "a whole number up to 4294967295, or an expression"),
        ("count = 2", "count = 1.5", "a whole number up to 4294967295, or an expression"),
        ("count = 2", "count = 99999999999", "a whole number up to 4294967295, or an expression"),
        ("size = \"64M\"", "size = -1", "a size: a whole number of bytes, or a string such as"),
        ("size = \"64M\"", "size = 1e30", "a size: a whole number of bytes, or a string such as"),
    ] {
        assert!(BASE.contains(from), "{from:?} not in the base file");
        let text = BASE.replacen(from, to, 1);
        let msg = resolve(&text).expect_err(&format!("{to}: accepted")).to_string();
        assert!(msg.contains(allowed) && !msg.contains("untagged"), "{to}: {msg}");
        assert!(msg.contains(&format!("| {to}")), "{to}: the line is shown: {msg}");
    }
}
