//! The eBPF wake-up tracer (crate numapilot-ebpf, cargo feature `ebpf`) on real kernels: the 2-node guest's
//! Debian 6.12 kernel, and this host's when running as root.
//!
//! `numapilot-wakeups` is built with the feature (a real `cargo build`, so a tree where the feature does not build
//! fails here), put in the guest with the libraries it loads (libbpf, libelf, zlib), and run by
//! `rig/scenarios/ebpf.sh`. Each run's child process plays futex ping-pong between two threads until each has
//! woken the other N times as the kernel's FUTEX_WAKE reports; the tracer's drained pairs must hold both
//! directions with at least those counts, attributed to the child's pid and the thread ids the child printed, and
//! the CommSamples must name both ends. Without a working tracer (nothing attached, wrong record layout, wrong
//! key order, waker and wakee swapped) the pairs are missing or wrong and the tests fail.
//!
//! Skipped (with a message) unless `NUMAPILOT_RIG=1`, like the other rig tests; scripts/test.sh always sets it.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use numapilot_rig::image::binary_files;
use numapilot_rig::provision::build_binary;
use numapilot_rig::{GuestRun, GuestSpec, Rig, RigOptions};
use serde_json::Value;

const SCENARIO: &str = include_str!("../../../rig/scenarios/ebpf.sh");

/// Round trips the scenario asks for (`--round-trips 300` in rig/scenarios/ebpf.sh).
const N: u64 = 300;

fn enabled(what: &str) -> bool {
    if std::env::var("NUMAPILOT_RIG").is_ok_and(|v| v == "1") {
        return true;
    }
    let _ = writeln!(std::io::stderr(), "rig ebpf test {what} SKIPPED: set NUMAPILOT_RIG=1 (scripts/test.sh does)");
    false
}

fn wakeups_binary() -> &'static PathBuf {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| {
        let release = RigOptions::default().release;
        build_binary("numapilot-ebpf", "numapilot-wakeups", &["numapilot-ebpf/ebpf".to_string()], release)
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .unwrap_or_else(|e| panic!("building numapilot-wakeups with the ebpf feature failed: {e}"))
}

fn guest() -> &'static GuestRun {
    static RUN: OnceLock<Result<GuestRun, String>> = OnceLock::new();
    RUN.get_or_init(|| {
        let opts = RigOptions::default();
        let (rig, t) = Rig::prepare(&opts).map_err(|e| format!("rig could not be prepared: {e}"))?;
        eprintln!("rig prepared: {t:?}, kernel {}", rig.kernel().origin);
        let files = binary_files(wakeups_binary(), "usr/local/bin/numapilot-wakeups", &opts.out_dir)
            .map_err(|e| e.to_string())?;
        let spec = GuestSpec::presets().into_iter().find(|s| s.name == "2node").ok_or("no 2node preset")?;
        let run = rig.boot(&spec, "ebpf", SCENARIO, &files).map_err(|e| e.to_string())?;
        eprintln!(
            "guest {} (ebpf): userspace after {:.2} s, wall {} ms",
            run.guest,
            run.boot_s.unwrap_or(f64::NAN),
            run.wall_ms
        );
        if run.scenario_rc != 0 {
            return Err(format!("scenario exit {}; console tail:\n{}", run.scenario_rc, run.console_tail()));
        }
        Ok(run)
    })
    .as_ref()
    .unwrap_or_else(|e| panic!("ebpf guest could not be run: {e}"))
}

fn section_json(run: &GuestRun, name: &str) -> Value {
    let s = run.section(name).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.rc, 0, "guest {}: {name} exit {}; stderr: {}", run.guest, s.rc, s.stderr());
    serde_json::from_str(&s.stdout()).unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {}", s.stdout()))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Judges one numapilot-wakeups report: both ping-pong directions counted at least as often as FUTEX_WAKE woke,
/// and at least N times, attributed to the child's pid and tids, and present as CommSamples of kind wakeup.
fn judge_ping_pong(v: &Value, n: u64) {
    let c = &v["child"];
    let (pid, ping, pong) = (u(&c["pid"]), u(&c["ping_tid"]), u(&c["pong_tid"]));
    assert_ne!(ping, pong, "{v}");
    let pairs = v["child_pairs"].as_array().expect("child_pairs");
    let samples = v["samples"].as_array().expect("samples");
    for (waker, wakee, woke) in [(ping, pong, u(&c["ping_woke_pong"])), (pong, ping, u(&c["pong_woke_ping"]))] {
        assert!(woke >= n, "the child reports only {woke} wake-ups {waker} -> {wakee}: {v}");
        let p = pairs
            .iter()
            .find(|p| u(&p["waker_tid"]) == waker && u(&p["wakee_tid"]) == wakee)
            .unwrap_or_else(|| panic!("no pair {waker} -> {wakee} among {pairs:?}"));
        assert_eq!(u(&p["waker_pid"]), pid, "waker {waker} attributed to the wrong process: {p}");
        assert!(u(&p["count"]) >= woke, "pair {waker} -> {wakee}: counted {}, FUTEX_WAKE woke {woke}", p["count"]);
        let s = samples
            .iter()
            .find(|s| s["a"] == serde_json::json!([pid, waker]) && s["b"] == serde_json::json!([pid, wakee]))
            .unwrap_or_else(|| panic!("no CommSample ({pid},{waker}) -> ({pid},{wakee}) among {samples:?}"));
        assert_eq!(s["kind"], "wakeup");
        assert!(u(&s["events"]) >= woke, "{s}");
    }
}

#[test]
fn guest_tracer_counts_ping_pong_both_ways() {
    if !enabled("guest_tracer_counts_ping_pong_both_ways") {
        return;
    }
    let run = guest();
    let kernel = run.section("kernel").map(|s| s.stdout()).unwrap_or_default();
    assert!(kernel.starts_with("6.12."), "the guest runs {kernel:?}, not the Debian 6.12 kernel");
    judge_ping_pong(&section_json(run, "wakeups"), N);
}

#[test]
fn guest_tracer_works_on_the_second_node() {
    if !enabled("guest_tracer_works_on_the_second_node") {
        return;
    }
    judge_ping_pong(&section_json(guest(), "wakeups-node1"), N);
}

#[test]
fn guest_full_map_counts_its_drops() {
    if !enabled("guest_full_map_counts_its_drops") {
        return;
    }
    let v = section_json(guest(), "wakeups-full");
    assert_eq!(u(&v["max_pairs"]), 1, "{v}");
    assert!(u(&v["pairs_total"]) <= 1, "{v}");
    assert!(u(&v["dropped"]) >= N, "dropped {} < {N}: {v}", v["dropped"]);
}

/// The same binary on this host's kernel, as root (CI runs as root); skipped with the reason otherwise.
#[test]
fn host_tracer_counts_ping_pong_both_ways() {
    if !enabled("host_tracer_counts_ping_pong_both_ways") {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        let _ = writeln!(std::io::stderr(), "rig ebpf host test SKIPPED: not root (BPF needs it)");
        return;
    }
    let out = Command::new(wakeups_binary())
        .args(["--round-trips", &N.to_string(), "--mount-tracefs"])
        .output()
        .expect("run numapilot-wakeups");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "numapilot-wakeups on the host: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    judge_ping_pong(&serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}")), N);
}
