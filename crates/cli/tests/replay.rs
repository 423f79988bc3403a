//! `numapilot replay` as a user runs it: the real perf recording of fixtures/signals-host-6.18, a PEBS-shaped
//! text on a two-node machine, and the errors.

mod cli_common;
use cli_common::numapilot;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Output;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture() -> PathBuf {
    repo().join("fixtures/signals-host-6.18")
}

const FIELDS: &str = "pid,tid,cpu,time,addr,data_src,phys_addr";

fn json_of(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "stderr: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The workload pids the capture script wrote into cmd.txt.
fn workload_pids() -> Vec<u64> {
    let cmd = std::fs::read_to_string(fixture().join("perf/cmd.txt")).unwrap();
    let line = cmd.lines().find_map(|l| l.strip_prefix("workload pids: ")).expect("pids line");
    line.split_whitespace().map(|p| p.parse().unwrap()).collect()
}

#[test]
fn the_real_recording_groups_the_pairs_that_share_a_slice() {
    let script = fixture().join("perf/page-faults.script");
    let root = repo().join("fixtures/host-6.18");
    let o = numapilot(&[
        "replay",
        script.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
        "--fields",
        FIELDS,
        "--window-ms",
        "200",
        "--json",
    ]);
    let v = json_of(&o);
    let lines = std::fs::read_to_string(&script).unwrap().lines().filter(|l| !l.trim().is_empty()).count();
    assert_eq!(v["records"].as_u64().unwrap() as usize, lines);
    // Page faults have no data source and phys_addr 0: every sample is placed by its CPU.
    assert_eq!(v["placement"]["cpu"].as_u64().unwrap() as usize, lines);
    assert_eq!(v["placement"]["unplaced"], 0);
    let pids = workload_pids();
    assert_eq!(pids.len(), 2);
    for pid in &pids {
        let p = v["processes"].as_array().unwrap().iter().find(|p| p["pid"] == *pid).expect("workload process");
        // Its four workers (the threads with the most samples), in two groups of two.
        let mut threads: Vec<&serde_json::Value> = p["threads"].as_array().unwrap().iter().collect();
        threads.sort_by_key(|t| std::cmp::Reverse(t["samples"].as_u64().unwrap()));
        let workers = &threads[..4];
        let mut groups: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
        for t in workers {
            groups.entry(t["group"].as_u64().expect("grouped")).or_default().insert(t["tid"].as_u64().unwrap());
            assert_eq!(t["preferred_node"], 0);
        }
        assert_eq!(groups.len(), 2, "pid {pid}: {groups:?}");
        assert!(groups.values().all(|g| g.len() == 2), "pid {pid}: {groups:?}");
    }
    // The strong edges are exactly the four pairs, each inside one process.
    let strong: Vec<&serde_json::Value> =
        v["edges"].as_array().unwrap().iter().filter(|e| e["tier"] == "strong").collect();
    assert_eq!(strong.len(), 4, "{}", v["edges"]);
    for e in strong {
        assert_eq!(e["a"][0], e["b"][0], "an edge across processes: {e}");
        assert!(e["coaccess"].as_f64().unwrap() > 0.5);
    }

    // The text form says the same in words.
    let o = numapilot(&["replay", script.to_str().unwrap(), "--root", root.to_str().unwrap(), "--fields", FIELDS]);
    assert!(o.status.success());
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("affinity groups:") && out.contains("strongest affinity edges:"), "{out}");
    assert!(out.contains(&format!("{lines} samples")), "{out}");
}

/// PEBS-shaped lines (synthetic: this host has no PMU) on a two-node machine: thread 101 reads remote
/// DRAM only, thread 102 local DRAM only, both on CPU 0 (node 0).
fn pebs_text() -> String {
    // data_src: mem_op LOAD (2) | mem_lvl << 5: REM_RAM1|HIT = 0x102, LOC_RAM|HIT = 0x82.
    let remote = 2u64 | 0x102 << 5;
    let local = 2u64 | 0x82 << 5;
    let mut s = String::new();
    for i in 0..200u64 {
        let t = format!("{}.{:06}", 10 + i / 100, (i % 100) * 10_000);
        s += &format!(
            "  100/101  [000] {t}:  7f00{:08x}  {remote:x} |OP LOAD|LVL Remote RAM (1 hop) hit|SNP None|TLB L1 or L2 hit|LCK No|BLK  N/A   310   0\n",
            0x1000 * (i % 16)
        );
        s += &format!(
            "  100/102  [000] {t}:  7f80{:08x}  {local:x} |OP LOAD|LVL Local RAM hit|SNP None|TLB L1 or L2 hit|LCK No|BLK  N/A   120   0\n",
            0x1000 * (i % 16)
        );
    }
    s
}

#[test]
fn remote_data_source_on_a_two_node_machine() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("pebs.script");
    std::fs::write(&f, pebs_text()).unwrap();
    let v = json_of(&numapilot(&["replay", f.to_str().unwrap(), "--machine", "autonuma-2s12c-24g", "--json"]));
    assert_eq!(v["placement"]["remote"], 200);
    assert_eq!(v["placement"]["cpu"], 200);
    let threads = v["processes"][0]["threads"].as_array().unwrap();
    let t = |tid: u64| threads.iter().find(|t| t["tid"] == tid).unwrap();
    assert_eq!(t(101)["preferred_node"], 1);
    assert_eq!(t(102)["preferred_node"], 0);
    assert!(t(101)["access"]["1"].as_f64().unwrap() > 0.99);
}

/// A count of one takes the singular: one sample in one window, of one thread in one process, was
/// "1 samples, 1 windows ... 1 threads in 1 processes" (a user trial).
#[test]
fn one_of_each_is_said_in_the_singular() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("one.script");
    let first = pebs_text().lines().next().unwrap().to_string();
    std::fs::write(&f, first + "\n").unwrap();
    let o = numapilot(&["replay", f.to_str().unwrap(), "--machine", "autonuma-2s12c-24g"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    let head = format!("replay {}: 1 sample, 1 window of 1000 ms, 1 thread in 1 process; machine: ", f.display());
    assert!(out.starts_with(&head), "{out}");
    let row = out.lines().find(|l| l.trim_start().starts_with("tid")).unwrap();
    assert!(row.contains("     1 sample   node") && !row.contains("samples"), "{row}");

    // Two samples: the plural, and the row's columns where they were.
    let two: String = pebs_text().lines().take(3).map(|l| format!("{l}\n")).collect();
    std::fs::write(&f, two).unwrap();
    let o = numapilot(&["replay", f.to_str().unwrap(), "--machine", "autonuma-2s12c-24g"]);
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains(": 3 samples, 1 window of 1000 ms, 2 threads in 1 process;"), "{out}");
    let rows: Vec<&str> = out.lines().filter(|l| l.trim_start().starts_with("tid")).collect();
    assert!(rows.iter().any(|r| r.contains("     2 samples  node")), "{rows:?}");
    let at = |r: &str| r.find(" node ").unwrap();
    assert!(rows.iter().all(|r| at(r) == at(rows[0])), "{rows:?}");
}

#[test]
fn bad_input_names_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines: Vec<String> = pebs_text().lines().map(String::from).collect();
    lines[4] = lines[4].replace("[000]", "[0x0]");
    let f = dir.path().join("bad.script");
    std::fs::write(&f, lines.join("\n")).unwrap();
    let o = numapilot(&["replay", f.to_str().unwrap(), "--machine", "autonuma-2s12c-24g"]);
    assert!(!o.status.success());
    assert!(o.stdout.is_empty(), "nothing half-done on stdout");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.script") && err.contains("line 5") && err.contains("field cpu"), "{err}");

    // The real recording has no weight column: the default -F list says which column is missing.
    let script = fixture().join("perf/page-faults.script");
    let o = numapilot(&["replay", script.to_str().unwrap(), "--machine", "autonuma-2s12c-24g"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("line 1") && err.contains("field phys_addr"), "{err}");

    let o = numapilot(&["replay", "/nonexistent/x.script"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/x.script"));
    let o = numapilot(&["replay", f.to_str().unwrap(), "--window-ms", "0"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--window-ms"));
    let o = numapilot(&["replay", f.to_str().unwrap(), "--fields", "pid,tid,time"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("addr"));
    for size in ["0", "1000", "9223372036854775808"] {
        let o = numapilot(&["replay", f.to_str().unwrap(), "--page-size", size]);
        assert_eq!(o.status.code(), Some(1), "{size}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("--page-size {size}:")), "{size}");
    }
    let o = numapilot(&["replay", f.to_str().unwrap(), "--fields", "pid,pid,tid,time,addr"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--fields: field \"pid\" given twice"));
    let o = numapilot(&["replay", f.to_str().unwrap(), "--machine", "no-such-preset"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("no-such-preset"));
    let empty = dir.path().join("empty.script");
    std::fs::write(&empty, "# nothing\n").unwrap();
    let o = numapilot(&["replay", empty.to_str().unwrap(), "--machine", "autonuma-2s12c-24g"]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("no sample lines"));
    // A file without newlines is no perf script text, said at its first line: it is read a line
    // at a time, not whole (/dev/zero was read to 4 GiB first; review helper-53).
    let o = numapilot(&["replay", "/dev/zero", "--machine", "autonuma-2s12c-24g"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("/dev/zero:1: a line longer than 64 KiB: not perf script text"), "{err}");
}

/// Every command that prints ends as a Unix filter does when its output goes nowhere: a reader that
/// went away (EPIPE) is a quiet exit 0, a full disk an error naming stdout, never a panic (`sim`,
/// `sim list`, `sim show`, `replay` and `numastat -V` printed with `println!`, which panics).
#[test]
fn output_that_goes_nowhere_is_an_exit_not_a_panic() {
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("pebs.script");
    std::fs::write(&f, pebs_text()).unwrap();
    let script = f.to_str().unwrap();
    let result = dir.path().join("result.json");
    let sim = ["sim", "--machine", "autonuma-2s12c-16g", "--workload", "numa02", "--seeds", "1", "--policy", "default"];
    let o = numapilot(&[&sim[..], &["--json"]].concat());
    assert!(o.status.success());
    std::fs::write(&result, &o.stdout).unwrap();
    let cases: Vec<Vec<&str>> = vec![
        sim.to_vec(),
        [&sim[..], &["--json"]].concat(),
        vec!["sim", "list"],
        vec!["sim", "show", result.to_str().unwrap()],
        vec!["replay", script, "--machine", "autonuma-2s12c-24g"],
        vec!["replay", script, "--machine", "autonuma-2s12c-24g", "--json"],
        vec!["topo", "--preset", "epyc-2s256c"],
    ];
    for args in &cases {
        // EPIPE: the pipe's read end is closed before the command starts.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_numapilot"))
            .args(args)
            .stdout(Stdio::from(writer))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{args:?} into a closed pipe: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        // ENOSPC: /dev/full.
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_numapilot"))
            .args(args)
            .stdout(Stdio::from(full))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?} into /dev/full: {err}");
        assert!(err.contains("writing to stdout") && !err.contains("panicked"), "{args:?}: {err}");
    }
}
