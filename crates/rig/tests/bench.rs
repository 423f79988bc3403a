//! `numapilot bench` in the 2-node guest (rig/scenarios/bench.sh): the recorder's figures against numa_maps and
//! task stat read by the scenario itself, and the "memory forced onto node 0" numa02/numa01 runs with
//! kernel NUMA balancing off and on (figures printed with `-- --nocapture`). Skipped unless `NUMAPILOT_RIG=1`.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use numapilot_rig::checks::{bytes_by_node, parse_hardware, parse_numa_maps, stat_processor};
use numapilot_rig::{GuestRun, GuestSpec, Rig, RigOptions};
use serde_json::Value;

const SCENARIO: &str = include_str!("../../../rig/scenarios/bench.sh");

const MIB: u64 = 1 << 20;

/// Buffer a sample may miss per worker thread while kernel balancing migrates it, MiB: one transparent huge page
/// (2 MiB on x86-64). Measured: a balancing-on sample of numa02 (2 threads) counted 60 of 64 MiB.
const IN_FLIGHT_MIB_PER_THREAD: f64 = 2.0;

fn ok_text(run: &GuestRun, name: &str) -> String {
    let s = run.section(name).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.rc, 0, "section {name} exit {}; stderr: {}", s.rc, s.stderr());
    s.stdout()
}

fn json(run: &GuestRun, name: &str) -> Value {
    serde_json::from_str(&ok_text(run, name)).unwrap_or_else(|e| panic!("{name}: not JSON: {e}"))
}

/// `buffer_mib` of every sample of process `p`, as per-node f64 vectors.
fn buffers(p: &Value) -> Vec<Vec<f64>> {
    p["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["buffer_mib"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect())
        .collect()
}

fn summary(name: &str, r: &Value) -> String {
    let mut s = format!(
        "{name}: runtime {:.1} s, converge_s {}, numa_pages_migrated {}, pgmigrate_success {}",
        r["runtime_s"].as_f64().unwrap(),
        r["converge_s"],
        r["migrated"]["numa_pages_migrated"],
        r["migrated"]["pgmigrate_success"]
    );
    for p in r["processes"].as_array().unwrap() {
        let last = buffers(p).last().cloned().unwrap_or_default();
        s.push_str(&format!(
            "\n  process {}: converge_s {}, final local {}%, thread_converge_s {}, final thread-local {}%, threads on {}, \
             buffer MiB per node at the end {last:?}",
            p["index"],
            p["converge_s"],
            p["final_local_pct"],
            p["thread_converge_s"],
            p["final_thread_local_pct"],
            p["final_thread_nodes"]
        ));
    }
    s
}

#[test]
fn bench_recorder_agrees_with_numa_maps_in_the_2node_guest() {
    if std::env::var("NUMAPILOT_RIG").map_or(true, |v| v != "1") {
        let _ = writeln!(std::io::stderr(), "rig bench test SKIPPED: set NUMAPILOT_RIG=1 to boot QEMU guests");
        return;
    }
    let (rig, _) = Rig::prepare(&RigOptions::default()).expect("rig");
    let mut spec = GuestSpec::presets().into_iter().find(|s| s.name == "2node").expect("2node preset");
    spec.timeout = Duration::from_secs(300);
    let run = rig.boot(&spec, "bench", SCENARIO, &[]).expect("boot");
    assert_eq!(run.scenario_rc, 0, "scenario failed; console tail:\n{}", run.console_tail());
    let hw = parse_hardware(&ok_text(&run, "hw")).expect("numactl --hardware");
    let cpu_node: BTreeMap<u32, u32> =
        hw.cpus.iter().flat_map(|(&n, cpus)| cpus.iter().map(move |&c| (c, n))).collect();
    assert_eq!(hw.cpus.len(), 2);

    // 1. Balancing off: the buffer (the anonymous VMA of 64 MiB) is on node 0 in the scenario's numa_maps, and
    //    every sample of the recorder says the same.
    let off = json(&run, "bench-off");
    let wpid: u64 = ok_text(&run, "off-worker-pid").trim().parse().expect("worker pid");
    let p = &off["processes"][0];
    assert_eq!(p["pid"].as_u64(), Some(wpid), "the scenario read the files of the recorded process");
    let vmas = parse_numa_maps(&ok_text(&run, "off-numa-maps")).unwrap();
    let buffer: Vec<_> = vmas
        .iter()
        .filter(|v| !v.file && v.pages.values().sum::<u64>() * v.page_kb * 1024 == 64 * MIB)
        .cloned()
        .collect();
    assert_eq!(buffer.len(), 1, "one 64 MiB anonymous VMA: {vmas:?}");
    assert_eq!(bytes_by_node(&buffer, |_| true), BTreeMap::from([(0, 64 * MIB)]));
    let nodes: Vec<u64> = off["nodes"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).collect();
    assert_eq!(nodes, [0, 1]);
    let series = buffers(p);
    assert!(series.len() >= 5, "{series:?}");
    for s in &series {
        assert_eq!(s, &vec![64.0, 0.0], "recorder vs numa_maps");
    }
    // The worker threads the scenario saw: two named bench-t*, each on a CPU the recorder maps to a node.
    let tids = ok_text(&run, "off-tids");
    let mut workers = 0;
    for tid in tids.split_whitespace() {
        let stat = ok_text(&run, &format!("off-task-{tid}-stat"));
        if stat.contains("(bench-t") {
            workers += 1;
            assert!(cpu_node.contains_key(&stat_processor(&stat).unwrap()));
        }
    }
    assert_eq!(workers, 2);
    assert!(p["series"].as_array().unwrap().iter().any(|s| s["thread_nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum::<u64>()
        == 2));
    // Nothing migrated with balancing off (pages of other processes could move only through explicit calls).
    assert_eq!(off["migrated"]["numa_pages_migrated"].as_u64(), Some(0), "{}", summary("off", &off));
    eprintln!("{}", summary("numa02, balancing off", &off));

    // 2. Balancing on: sane figures (every page of each buffer counted at each sample, within what is in flight),
    //    reported for the table.
    for (name, mb) in [("bench-on", 64.0), ("bench01-on", 32.0)] {
        let r = json(&run, name);
        assert_eq!(r["timed_out"], Value::Bool(false));
        for p in r["processes"].as_array().unwrap() {
            // Pages being migrated at the instant of the read are migration entries, not present pages, and
            // numa_maps skips them: up to one 2 MiB THP per worker thread (each migrates the page it faults on)
            // plus one more for the kernel's own work. Never more than the buffer.
            let in_flight = IN_FLIGHT_MIB_PER_THREAD * (p["threads"].as_f64().unwrap() + 1.0);
            for s in buffers(p) {
                let total: f64 = s.iter().sum();
                assert!(total <= mb && total >= mb - in_flight, "{name}: {total} MiB of {mb} counted: {s:?}");
            }
        }
        assert!(r["migrated"]["numa_pages_migrated"].as_u64().is_some());
        eprintln!("{}", summary(name, &r));
    }

    // 3. A bad node in the guest: exit 1, the flag named.
    let bad = run.section("bad").unwrap();
    assert_eq!(bad.rc, 1);
    assert!(bad.stderr().contains("--force-node"), "{}", bad.stderr());
}
