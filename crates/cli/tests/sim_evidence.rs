//! `numapilot sim evidence --quick`: the built binary runs the small matrix and prints every table
//! and a verdict row for every target. Structure only: whether a target passes is the policy's
//! business, not this test's.

use std::process::Command;

const TARGETS: [&str; 9] = [
    "runtime <= 1.05 x hard-bind",
    "runtime < autonuma",
    "runtime < numad",
    "90% local sooner than autonuma",
    "pages migrated <= autonuma",
    "throughput >= 1.20 x default",
    "server and clients on one node",
    "mean per-process throughput > every baseline",
    "stddev/mean across seeds < every baseline",
];

/// Cells of a markdown table row.
fn cells(line: &str) -> Vec<&str> {
    line.trim().trim_matches('|').split('|').map(str::trim).collect()
}

#[test]
fn quick_evidence_prints_every_table_and_a_verdict_per_target() {
    let dir = std::env::temp_dir().join(format!("numapilot-evidence-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let o = Command::new(env!("CARGO_BIN_EXE_numapilot"))
        .args(["sim", "evidence", "--quick", "--seeds", "2", "--threads", "3", "--out", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8(o.stdout).unwrap();
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(o.status.success(), "{err}");
    for title in ["#### autonuma-benchmark", "#### client/server", "#### process types and VM mix", "#### targets"] {
        assert!(text.contains(title), "{title} missing:\n{text}");
    }
    // autonuma-benchmark: 4 tests x 5 policies on the 2-node box, each with its figures.
    let bench: Vec<Vec<&str>> =
        text.lines().filter(|l| l.starts_with("| autonuma-2s12c-24g | numa0")).map(cells).collect();
    assert_eq!(bench.len(), 20, "{text}");
    for row in &bench {
        assert_eq!(row.len(), 8, "{row:?}");
        assert!(row[3].contains(" ± "), "runtime mean ± sd: {row:?}");
        assert!(row[4].parse::<f64>().is_ok(), "ratio to hard-bind: {row:?}");
    }
    let hb: Vec<&Vec<&str>> = bench.iter().filter(|r| r[2] == "hard-bind").collect();
    assert!(hb.len() == 4 && hb.iter().all(|r| r[4] == "1.000"), "{hb:?}");
    for policy in ["default", "hard-bind", "autonuma", "numad", "numapilot"] {
        assert_eq!(bench.iter().filter(|r| r[2] == policy).count(), 4, "{policy}");
    }
    // Engine policies report actions, kernel baselines do not.
    assert!(bench.iter().filter(|r| r[2] == "numad" || r[2] == "numapilot").all(|r| r[7].parse::<u64>().is_ok()));
    assert!(bench.iter().filter(|r| r[2] == "default").all(|r| r[7] == "-"));
    // Targets: every one present, each with a verdict; 5 per test, 2 per pair workload, 2 for the mix.
    let verdicts: Vec<Vec<&str>> = text
        .lines()
        .skip_while(|l| !l.starts_with("#### targets"))
        .filter(|l| l.starts_with("| ") && !l.starts_with("| target"))
        .map(cells)
        .collect();
    assert_eq!(verdicts.len(), 4 * 5 + 2 * 2 + 2, "{text}");
    for t in TARGETS {
        assert!(verdicts.iter().any(|v| v[0] == t), "target {t} missing:\n{text}");
    }
    // A verdict judged against a locality bound below 100% carries it: `PASS (bound 50%)`.
    let base = |cell: &str| -> String {
        match cell.split_once(" (bound ") {
            Some((verdict, rest)) => {
                let pct = rest.strip_suffix("%)").unwrap_or_else(|| panic!("bad bound note: {cell}"));
                assert!(pct.parse::<f64>().is_ok_and(|b| b > 0.0 && b < 100.0), "bad bound: {cell}");
                verdict.to_string()
            }
            None => cell.to_string(),
        }
    };
    for v in &verdicts {
        assert!(["PASS", "PASS (=)", "FAIL", "N/A"].contains(&base(v[4]).as_str()), "{v:?}");
    }
    // Two seeds: the stddev/mean target is judged, not N/A.
    let cv = verdicts.iter().find(|v| v[0] == TARGETS[8]).unwrap();
    assert_ne!(cv[4], "N/A", "{cv:?}");
    let pass = verdicts.iter().filter(|v| base(v[4]) == "PASS").count();
    let equal = verdicts.iter().filter(|v| base(v[4]) == "PASS (=)").count();
    let judged = verdicts.iter().filter(|v| v[4] != "N/A").count();
    let line = if equal > 0 {
        format!("**{} of {judged} targets pass** ({pass} strictly, {equal} on equal page counts).", pass + equal)
    } else {
        format!("**{pass} of {judged} targets pass.**")
    };
    assert!(text.contains(&line), "{line}\n{text}");
    // The real worker count is printed, and the signals only the simulator fills are named.
    assert!(text.contains("wall on 3 threads"), "{text}");
    assert!(text.contains("memory-controller bandwidth, which the live reader does not fill yet"), "{text}");
    // Files: the same markdown, and JSON with every run.
    assert_eq!(std::fs::read_to_string(dir.join("evidence.md")).unwrap(), text);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("evidence.json")).unwrap()).unwrap();
    assert_eq!(json["runs"].as_u64(), Some((4 * 5 + 2 * 6 + 6) * 2));
    assert_eq!(json["verdicts"].as_array().unwrap().len(), verdicts.len());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn evidence_rejects_zero_seeds_and_threads() {
    for (flag, value, msg) in [
        ("--seeds", "0", "--seeds 0: must be in 1..=1000"),
        ("--seeds", "99999999999", "--seeds 99999999999: must be in 1..=1000"),
        ("--threads", "0", "--threads must be at least 1"),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_numapilot"))
            .args(["sim", "evidence", "--quick", flag, value])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1));
        assert!(String::from_utf8(o.stderr).unwrap().contains(msg));
        assert!(o.stdout.is_empty());
    }
}

/// A worker thread that cannot start (a thread limit) ends the run with an error naming it, not a
/// panic: as an unprivileged user limited to one process (RLIMIT_NPROC does not bind root).
#[test]
fn a_worker_that_cannot_start_is_an_error_not_a_panic() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || std::process::Command::new("runuser").arg("--help").output().is_err() {
        eprintln!("skipped: needs root and runuser to become an unprivileged user");
        return;
    }
    let bin = env!("CARGO_BIN_EXE_numapilot");
    let o = std::process::Command::new("runuser")
        .args([
            "-u",
            "nobody",
            "--",
            "bash",
            "-c",
            &format!("ulimit -u 1; exec {bin} sim evidence --quick --threads 4"),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    if err.contains("Permission denied") {
        eprintln!("skipped: the binary is not reachable by nobody: {err}");
        return;
    }
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("starting an evidence worker thread") && !err.contains("panicked"), "{err}");
}
