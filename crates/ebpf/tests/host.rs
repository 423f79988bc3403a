//! The wake-up tracer on this host's kernel: `numapilot-wakeups` (futex ping-pong between two threads of a child
//! process) must find both directions of the ping-pong, at least as many wake-ups as the kernel's FUTEX_WAKE
//! reported, attributed to the child's own pid and thread ids; and a map bounded to one pair must count what it
//! could not hold.
//!
//! Needs the `ebpf` feature (`cargo test -p numapilot-ebpf --features ebpf`) and root (BPF + mounting tracefs when
//! absent). Otherwise each test prints why it is skipped; `NUMAPILOT_EBPF_HOST=0` skips on purpose (e.g. a
//! container whose root may not load BPF).

use std::io::Write;

fn skip(why: &str) {
    // Written to the stderr handle, not with eprintln!, so the test harness does not swallow it.
    let _ = writeln!(std::io::stderr(), "ebpf host test SKIPPED: {why}");
}

#[cfg(not(feature = "ebpf"))]
#[test]
fn tracer_counts_ping_pong_on_this_host() {
    skip("built without the ebpf feature (cargo test -p numapilot-ebpf --features ebpf)");
}

#[cfg(feature = "ebpf")]
mod live {
    use super::skip;
    use serde_json::Value;
    use std::process::Command;

    /// Round trips asked of the child.
    const N: u64 = 500;

    fn can_run() -> bool {
        if std::env::var("NUMAPILOT_EBPF_HOST").is_ok_and(|v| v == "0") {
            skip("NUMAPILOT_EBPF_HOST=0");
            return false;
        }
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            skip("not root (loading BPF programs and mounting tracefs need it)");
            return false;
        }
        true
    }

    fn run(args: &[&str]) -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_numapilot-wakeups"))
            .args(args)
            .arg("--mount-tracefs")
            .output()
            .expect("run numapilot-wakeups");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "numapilot-wakeups {args:?}: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
    }

    fn u(v: &Value) -> u64 {
        v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
    }

    fn count(v: &Value, waker: u64, wakee: u64) -> Option<(u64, u64)> {
        v["child_pairs"]
            .as_array()
            .expect("child_pairs")
            .iter()
            .find(|p| u(&p["waker_tid"]) == waker && u(&p["wakee_tid"]) == wakee)
            .map(|p| (u(&p["waker_pid"]), u(&p["count"])))
    }

    #[test]
    fn tracer_counts_ping_pong_on_this_host() {
        if !can_run() {
            return;
        }
        let v = run(&["--round-trips", &N.to_string()]);
        let c = &v["child"];
        let (pid, ping, pong) = (u(&c["pid"]), u(&c["ping_tid"]), u(&c["pong_tid"]));
        assert_ne!(ping, pong, "{v}");
        for (waker, wakee, woke) in [(ping, pong, u(&c["ping_woke_pong"])), (pong, ping, u(&c["pong_woke_ping"]))] {
            assert!(woke >= N, "the child reports only {woke} wake-ups {waker} -> {wakee}: {v}");
            let (waker_pid, n) = count(&v, waker, wakee).unwrap_or_else(|| panic!("no pair {waker} -> {wakee}: {v}"));
            assert_eq!(waker_pid, pid, "waker {waker} attributed to process {waker_pid}, not {pid}: {v}");
            assert!(n >= woke, "pair {waker} -> {wakee}: tracer counted {n}, FUTEX_WAKE woke {woke}: {v}");
        }
        let samples = v["samples"].as_array().expect("samples");
        for (a, b) in [(ping, pong), (pong, ping)] {
            let s = samples
                .iter()
                .find(|s| s["a"] == serde_json::json!([pid, a]) && s["b"] == serde_json::json!([pid, b]))
                .unwrap_or_else(|| panic!("no CommSample ({pid},{a}) -> ({pid},{b}): {v}"));
            assert_eq!(s["kind"], "wakeup");
            assert!(u(&s["events"]) >= N, "{s}");
        }
    }

    #[test]
    fn an_unprivileged_user_gets_a_permission_error() {
        if !can_run() {
            return;
        }
        use std::os::unix::process::CommandExt;
        // Make sure tracefs is mounted, so the refusal comes from the kernel's permission checks, not a missing
        // mount.
        run(&["--round-trips", "1"]);
        let out = Command::new(env!("CARGO_BIN_EXE_numapilot-wakeups"))
            .args(["--round-trips", "1"])
            .uid(65534) // nobody
            .gid(65534)
            .output()
            .expect("run numapilot-wakeups as nobody");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("no permission to"), "{err}");
    }

    #[test]
    fn a_full_map_counts_what_it_dropped() {
        if !can_run() {
            return;
        }
        // One slot for the whole system: at most one of the ping-pong's two directions fits, so the other's
        // wake-ups (at least N) are dropped and must be counted.
        let v = run(&["--round-trips", &N.to_string(), "--max-pairs", "1"]);
        assert_eq!(u(&v["max_pairs"]), 1);
        assert!(u(&v["pairs_total"]) <= 1, "{v}");
        assert!(u(&v["dropped"]) >= N, "dropped {} < {N}: {v}", v["dropped"]);
    }
}
