//! A bench run killed while its workers start leaves none of them running: the kernel's death
//! signal is asked for in the worker before its program runs (review helper-58: asked for by the
//! worker itself, after its start-up, a parent killed in between left an orphan first-touching its
//! whole buffer).
//!
//! The bench parent is this test binary run again in a role of its own (`BENCH_PARENT_ROLE`), so
//! it can be killed without killing the test; its workers are started by a slow launcher (a shell
//! that sleeps before it would exec the worker), which widens the window to half a second.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use numapilot_bench::{plan, run, Launcher, Options, RunOptions};
use numapilot_topology::Topology;

const ROLE: &str = "BENCH_PARENT_ROLE";

/// The bench parent's role: runs numa02 with the slow launcher, whose "worker" never says ready.
#[test]
#[ignore = "run by the_workers_die_with_a_parent_killed_while_they_start only"]
fn bench_parent_role() {
    let Ok(marker) = std::env::var(ROLE) else { return };
    let topo = Topology::from_sysfs(Path::new("/")).unwrap();
    let opts = Options { mb: Some(1), threads: Some(1), loops: Some(1), ..Options::default() };
    let plan = plan("numa02", &opts, &topo, numapilot_bench::worker::page_bytes()).unwrap();
    let launcher = Launcher {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), format!("sleep 0.5; exec sleep {marker}").into(), "sh".into()],
    };
    let opts = RunOptions { interval: Duration::from_millis(100), timeout: None, root: "/".into() };
    let _ = run(&plan, &topo, &launcher, &opts);
}

/// Pids whose command line has `needle` as an argument.
fn running(needle: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).any(|a| a == needle.as_bytes()))
        })
        .collect()
}

#[test]
fn the_workers_die_with_a_parent_killed_while_they_start() {
    // A sleep length no other process uses: the worker's command line, once the shell execs.
    let marker = format!("3600.{}", std::process::id());
    let script = format!("sleep 0.5; exec sleep {marker}");
    let mut parent = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "bench_parent_role", "--ignored", "--nocapture"])
        .env(ROLE, &marker)
        .spawn()
        .unwrap();
    // The worker's shell, started and sleeping before its exec.
    let t0 = Instant::now();
    let mut shells = Vec::new();
    while shells.is_empty() && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(5));
        shells = running(&script);
    }
    assert!(!shells.is_empty(), "the worker never started");
    parent.kill().unwrap();
    parent.wait().unwrap();
    // The death signal went out as the parent exited: its worker goes, as the shell before its
    // exec or as the worker it became. Waited for (60 s), not slept for: a fixed 1.5 s could end
    // before a loaded machine ran the killed shell's exit. Without the death signal the shell
    // execs the worker after its half second and the worker runs on past the wait.
    let t0 = Instant::now();
    let left = loop {
        let left: Vec<u32> = running(&script).into_iter().chain(running(&marker)).collect();
        if left.is_empty() || t0.elapsed() >= Duration::from_secs(60) {
            break left;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    for pid in &left {
        // SAFETY: kill with a pid and a signal number.
        unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
    }
    assert!(left.is_empty(), "workers outlived their killed parent by 60 s: {left:?}");
}
