//! `numapilot stat --threads`: the per-thread view, live (a busy thread must show CPU use and where it
//! ran) and on a captured rig fixture (the toucher bound by `numactl --membind=1 --cpunodebind=1` must
//! show its memory on node 1 under a `bind:1` policy and its threads on node 1's CPUs).

mod cli_common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_numapilot")
}

fn run(args: &[&str]) -> Output {
    Command::new(bin()).args(args).stdin(Stdio::null()).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `numapilot ARGS` (a live `stat --threads`) with `between` run between its two samples, whatever
/// the machine's load: the command is started traced (ptrace) and run to the entry of its
/// interval's sleep, the one sleep of its main thread, which comes once the first sample is taken;
/// held there while `between` runs (a process exits, a thread ends); then let go, it sleeps its
/// interval and takes the second sample. The exits were timed instead (a child exiting 1.5 s after
/// its message, the first sample assumed to come before that): a wall-clock assumption that
/// failed under load.
fn stat_holding_between(args: &[&str], between: impl FnOnce()) -> Output {
    use std::os::unix::process::CommandExt as _;
    let mut cmd = Command::new(bin());
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: between fork and exec only a system call (async-signal-safe) and errno are touched.
    unsafe {
        cmd.pre_exec(|| {
            if libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    // The exec's SIGTRAP first.
    assert_eq!(next_stop(&mut child), libc::SIGTRAP);
    // SAFETY: a ptrace request on our stopped tracee.
    unsafe { libc::ptrace(libc::PTRACE_SETOPTIONS, pid, 0, libc::PTRACE_O_TRACESYSGOOD | libc::PTRACE_O_EXITKILL) };
    let mut pass = 0;
    loop {
        // SAFETY: as above; `pass` is a signal the command got, handed on.
        assert_eq!(unsafe { libc::ptrace(libc::PTRACE_SYSCALL, pid, 0, pass) }, 0);
        let sig = next_stop(&mut child);
        if sig != libc::SIGTRAP | 0x80 {
            pass = sig;
            continue;
        }
        pass = 0;
        // Stopped at a system call: its number is the first field.
        let call = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap();
        let nr: i64 = call.split_whitespace().next().unwrap().parse().unwrap();
        if nr == libc::SYS_clock_nanosleep || nr == libc::SYS_nanosleep {
            break;
        }
    }
    between();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::ptrace(libc::PTRACE_DETACH, pid, 0, 0) }, 0);
    child.wait_with_output().unwrap()
}

/// The signal of the traced `child`'s next stop; a panic with its error output when it exited
/// instead (before its interval: the first sample failed).
fn next_stop(child: &mut Child) -> i32 {
    let mut st = 0;
    // SAFETY: waitpid on our own child with a valid status pointer.
    assert_eq!(unsafe { libc::waitpid(child.id() as libc::pid_t, &mut st, 0) }, child.id() as libc::pid_t);
    if libc::WIFSTOPPED(st) {
        return libc::WSTOPSIG(st);
    }
    let mut err = String::new();
    let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err);
    panic!("the command ended before its interval (wait status {st:#x}): {err}");
}

/// A shell spinning on one CPU until dropped.
struct Busy(Child);

impl Busy {
    fn start() -> Busy {
        Busy(Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn live_busy_thread_shows_cpu_use_and_where_it_ran() {
    let busy = Busy::start();
    let pid = busy.0.id();
    let out = run(&["stat", "--threads", "-p", &pid.to_string(), "--interval", "400", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Two raw samples, and the derived figures of the later one.
    assert_eq!(j["samples"].as_array().unwrap().len(), 2);
    let d = &j["derived"];
    let interval = d["interval_ms"].as_f64().unwrap();
    assert!(interval >= 400.0, "{interval}");
    let procs = d["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 1);
    assert_eq!(procs[0]["pid"].as_u64(), Some(pid as u64));
    let t = &procs[0]["threads"][0];
    assert_eq!(t["tid"].as_u64(), Some(pid as u64));
    let cpu = t["cpu_percent"].as_f64().unwrap();
    assert!(cpu > 0.0, "a spinning shell used no CPU: {t}");
    // The last CPU is one the thread may run on, and the node shown is the node that lists it.
    let last = t["last_cpu"].as_u64().unwrap() as u32;
    let allowed = t["cpus_allowed"].as_str().unwrap();
    assert!(numapilot_topology::CpuSet::parse_list(allowed).unwrap().contains(last), "{t}");
    let node = t["last_node"].as_u64().unwrap();
    let cpulist = std::fs::read_to_string(format!("/sys/devices/system/node/node{node}/cpulist")).unwrap();
    assert!(numapilot_topology::CpuSet::parse_list(cpulist.trim()).unwrap().contains(last));
    assert!(t["run_delay_ms_per_s"].as_f64().is_some(), "schedstat is on in every Debian kernel: {t}");
    // The raw sample holds the same thread; its stat field 39 is where it was at that moment.
    let raw = &j["samples"][1]["processes"][0]["threads"][0];
    assert_eq!(raw["stat"]["processor"].as_u64(), Some(last as u64));
    // Per-node section: busy % over the interval, with our spinner somewhere.
    let nodes = d["nodes"].as_array().unwrap();
    assert!(!nodes.is_empty());
    let busiest = nodes.iter().map(|n| n["busy_percent"].as_f64().unwrap()).fold(0.0, f64::max);
    assert!(busiest > 0.0, "{nodes:?}");
    assert!(nodes.iter().all(|n| n["vmstat"]["numa_hit"].as_u64().is_some()));

    // The text view: a row for the thread with a CPU % figure.
    let out = run(&["stat", "--threads", "-p", &pid.to_string(), "--interval", "200"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.starts_with("interval "), "{s}");
    let row = s.lines().find(|l| l.split_whitespace().next() == Some(&pid.to_string())).expect("thread row");
    let pct: f64 = row.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert!(pct > 0.0, "{row}");
    assert!(s.contains("\nper node"), "{s}");
    drop(busy);
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures").join(name)
}

/// The first pid of expected/cmd.txt: the rig toucher bound to node 1 (rig/scenarios/capture.sh).
fn bound_pid(fx: &Path) -> String {
    let cmd = std::fs::read_to_string(fx.join("expected/cmd.txt")).unwrap();
    cmd.lines().find_map(|l| l.strip_prefix("pids: ")).unwrap().split_whitespace().next().unwrap().to_string()
}

#[test]
fn fixture_bound_toucher_has_its_memory_and_threads_on_node_1() {
    let fx = fixture("rig-6.12-2node");
    let pid = bound_pid(&fx);
    let root = fx.to_str().unwrap();
    let out = run(&["stat", "--threads", "--root", root, "-p", &pid, "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("one sample"), "{}", text(&out.stderr));
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["samples"].as_array().unwrap().len(), 1);
    let d = &j["derived"];
    assert!(d["interval_ms"].is_null());
    let p = &d["processes"][0];
    assert_eq!(p["comm"], "rig-toucher");
    let mem = p["memory"].as_array().unwrap();
    // Its anonymous memory (heap, stack, private) is all on node 1, where it wrote 4 MiB; file pages sit where the
    // page cache put them (fixtures/README.md), so they are not judged.
    let kb = |node: u64, kind: &str| mem.iter().find(|u| u["node"] == node).map_or(0, |u| u[kind].as_u64().unwrap());
    for kind in ["anon_kb", "heap_kb", "stack_kb"] {
        assert_eq!(kb(0, kind), 0, "{kind}: {mem:?}");
    }
    assert!(kb(1, "anon_kb") >= 4096, "{mem:?}");
    let policies = p["policies"].as_array().unwrap();
    assert!(policies.iter().any(|u| u["policy"] == "bind:1" && u["resident_kb"].as_u64().unwrap() >= 4096));
    let threads = p["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 2);
    for t in threads {
        assert_eq!(t["last_node"], 1, "{t}");
        assert_eq!(t["cpus_allowed"], "2-3");
        assert!(t["cpu_percent"].is_null() && t["run_delay_ms_per_s"].is_null());
        // numa_balancing was on in the guest: the sched block was read.
        assert!(t["numa"]["faults"].as_array().is_some_and(|f| f.len() == 2), "{t}");
    }
    // The text view says the same in its own words.
    let out = run(&["stat", "--threads", "--root", root, "-p", &pid]);
    let s = text(&out.stdout);
    assert!(s.starts_with("one sample (no rates)\n"), "{s}");
    assert!(s.contains("policies: bind:1 ("), "{s}");
    let anon = s.lines().find(|l| l.trim_start().starts_with("anon-private")).unwrap();
    let v: Vec<f64> = anon.split_whitespace().skip(1).map(|x| x.parse().unwrap()).collect();
    assert_eq!(v[0], 0.0, "{anon}");
    assert!(v[1] >= 4.0, "{anon}");
    // Per-node section: vmstat numa_* counters of each node, from nodeN/vmstat.
    let want = std::fs::read_to_string(fx.join("sys/devices/system/node/node1/vmstat")).unwrap();
    let hit = want.lines().find_map(|l| l.strip_prefix("numa_hit ")).unwrap();
    let row = s.lines().find(|l| l.starts_with("vmstat numa_hit ")).unwrap();
    assert_eq!(row.split_whitespace().nth(3), Some(hit), "{row}");
}

#[test]
fn bad_targets_are_errors_naming_them() {
    let out = run(&["stat", "--threads", "-p", "4194305", "--interval", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("4194305"), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    let out = run(&["stat", "--threads", "-p", "no-such-process-pattern-xyzzy", "--interval", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no-such-process-pattern-xyzzy"), "{}", text(&out.stderr));
    let out = run(&["stat", "--threads", "--interval", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let out = run(&["stat", "--threads", "-n"]);
    assert_eq!(out.status.code(), Some(2), "--threads and -n conflict: {}", text(&out.stderr));
}

/// A process names itself (its /proc/self/comm): control characters in the name are escaped in
/// both text views (`stat --threads` and the numastat table of `stat -p`), so an escape sequence
/// in a name never reaches the terminal of the root user reading them; JSON keeps the name as read
/// (escaped by JSON itself). Before, both printed the bytes raw (a review of 2026-11-30).
#[test]
fn control_characters_in_a_name_are_escaped() {
    struct Named(Child);
    impl Drop for Named {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = Command::new("perl")
        .args([
            "-e",
            r#"open(F, ">/proc/self/comm") or die; print F "\e[2Jx\aname"; close F; print "ok\n"; $| = 1; sleep 60"#,
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("perl (Debian's perl-base)");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
    assert_eq!(line, "ok\n");
    let named = Named(child);
    let pid = named.0.id().to_string();
    for args in [&["stat", "--threads", "-p", &pid, "--interval", "100"][..], &["stat", "-p", &pid][..]] {
        let out = run(args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        assert!(
            !out.stdout.iter().any(|&b| b == 0x1b || b == 0x07),
            "{args:?}: raw control bytes: {:?}",
            text(&out.stdout)
        );
        assert!(text(&out.stdout).contains(r"\u{1b}[2Jx\u{7}name"), "{args:?}: {}", text(&out.stdout));
    }
    let out = run(&["stat", "--threads", "-p", &pid, "--interval", "100", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.to_string().contains(r"\u001b[2Jx\u0007name"), "{v}");
}

/// `--interval` belongs to `--threads`: alone it is a usage error naming what it needs (it was
/// silently ignored, review helper-41); without it the tables come out as before.
#[test]
fn an_interval_without_threads_is_a_usage_error() {
    let out = run(&["stat", "--interval", "100"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(text(&out.stderr).contains("--threads"), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    assert!(run(&["stat"]).status.success());
}

/// A process that exits between the two samples is shown from the first, marked, without rates
/// (it vanished from the view, although the module said so; review helper-61).
#[test]
fn a_process_that_exits_between_the_samples_is_shown_from_the_first() {
    let mut child = std::process::Command::new("sleep").arg("600").spawn().unwrap();
    // The first sample must read it as `sleep`, the name asserted below: `spawn` returns before
    // the exec sets it.
    cli_common::wait_for_comm(child.id(), "sleep");
    let pid = child.id().to_string();
    // Killed and reaped between the samples, so the second finds no /proc entry.
    let out = stat_holding_between(&["stat", "--threads", "-p", &pid, "--interval", "100"], || {
        child.kill().unwrap();
        child.wait().unwrap();
    });
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains(&format!("PID {pid} (sleep)")), "{s}");
    assert!(s.contains("exited before the second sample"), "{s}");
    let out = run(&["stat", "--threads", "-p", &pid, "--interval", "1"]);
    assert_eq!(out.status.code(), Some(1), "a pid typed that is gone stays an error");
}

/// On a fixture: a process a pattern matched that is gone by the first sample (here a /proc entry
/// without its stat) is skipped, the others shown (one short-lived match failed the whole view);
/// a thread id typed as a pid is its process, shown once; a --root without nodes is refused (it
/// printed an empty table, exit 0) (review helper-61).
#[test]
fn patterns_skip_what_went_and_thread_ids_are_their_process() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("fx");
    let copied = std::process::Command::new("cp").arg("-r").arg(fixture("rig-6.12-2node")).arg(&root).status().unwrap();
    assert!(copied.success());
    let gone = root.join("proc/99999");
    std::fs::create_dir(&gone).unwrap();
    std::fs::write(gone.join("status"), "Name:\trig-toucher\nTgid:\t99999\nPid:\t99999\n").unwrap();
    std::fs::write(gone.join("cmdline"), "rig-toucher\0").unwrap();
    let r = root.to_str().unwrap();
    let out = run(&["stat", "--threads", "--root", r, "-p", "rig-toucher"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert_eq!(s.matches("(rig-toucher)").count(), 3, "{s}");
    assert!(!s.contains("PID 99999"), "{s}");
    // A thread of process 178 typed as a pid: process 178, once.
    let tid = std::fs::read_dir(root.join("proc/178/task"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|t| t != "178")
        .expect("process 178 of the fixture has a second thread");
    std::fs::create_dir(root.join(format!("proc/{tid}"))).unwrap();
    for f in ["stat", "status", "cmdline"] {
        std::fs::copy(root.join(format!("proc/178/task/{tid}/{f}")), root.join(format!("proc/{tid}/{f}")))
            .or_else(|_| std::fs::copy(root.join(format!("proc/178/{f}")), root.join(format!("proc/{tid}/{f}"))))
            .unwrap();
    }
    let out = run(&["stat", "--threads", "--root", r, "-p", "178", "-p", &tid]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert_eq!(s.matches("\nPID ").count(), 1, "{s}");
    assert!(text(&out.stderr).contains(&format!("{tid} is a thread of process 178")), "{}", text(&out.stderr));
    // No node directory: refused, as the table modes refuse it.
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(empty.join("proc")).unwrap();
    let out = run(&["stat", "--threads", "--root", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(text(&out.stderr).contains("no node directories"), "{}", text(&out.stderr));
    // The live root spelled otherwise is live (two samples), not a fixture.
    let out = run(&["stat", "--threads", "--root", "/proc/..", "-p", "1", "--interval", "10"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("interval "), "{}", text(&out.stdout));
    // A pattern may start with '-', as numastat's getopt takes it.
    let out = run(&["stat", "-p", "-zz9-no-such"]);
    assert!(text(&out.stdout).contains("Found no processes containing pattern: \"-zz9-no-such\""), "{out:?}");
}

/// Set to a mode, the test binary run again is a child of the tests below (`child_entry`).
const CHILD_VAR: &str = "NUMAPILOT_STAT_THREADS_CHILD";

/// The child: starts a second thread, prints `tid N` (that thread's id), then waits for a line on
/// its standard input: in mode `process-exits` the whole process exits then; in `thread-exits` the
/// thread returns then and the process stays (until killed).
#[test]
#[ignore = "a child of the tests below, run by them"]
fn child_entry() {
    let Ok(mode) = std::env::var(CHILD_VAR) else { return };
    let thread_exits = mode == "thread-exits";
    let line = || {
        let mut l = String::new();
        std::io::stdin().read_line(&mut l).unwrap();
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let link = std::fs::read_link("/proc/thread-self").unwrap();
        tx.send(link.file_name().unwrap().to_string_lossy().into_owned()).unwrap();
        if thread_exits {
            line();
        } else {
            std::thread::sleep(std::time::Duration::from_secs(600));
        }
    });
    let tid = rx.recv().unwrap();
    println!("tid {tid}");
    std::io::Write::flush(&mut std::io::stdout()).unwrap();
    if thread_exits {
        t.join().unwrap();
        std::thread::sleep(std::time::Duration::from_secs(600));
    } else {
        line();
        std::process::exit(0);
    }
}

/// The test binary run again as `child_entry` in `mode`; its second thread's id. A line written to
/// its standard input ends what `mode` says.
fn threaded_child(mode: &str) -> (Child, String) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_entry", "--ignored", "--nocapture", "--test-threads=1", "-q"])
        .env(CHILD_VAR, mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = std::io::BufReader::new(child.stdout.take().unwrap());
    let tid = std::io::BufRead::lines(out)
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("tid ").map(str::to_string))
        .expect("the child prints its thread's id");
    (child, tid)
}

/// Tells a `threaded_child` to end what its mode says.
fn tell(child: &mut Child) {
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), b"go\n").unwrap();
}

/// A thread id given as a pid is its process; when that process exits between the two samples,
/// the view names the thread id given, not only the process (it said `PID 1200 ... exited`, an id
/// the user never typed). A pid that names nothing is named as typed (`0099`, `""`).
#[test]
fn a_thread_given_is_named_when_its_process_exits_between_the_samples() {
    let (mut child, tid) = threaded_child("process-exits");
    let pid = child.id().to_string();
    assert_ne!(tid, pid);
    // Exited and reaped between the samples, so the second finds no /proc entry.
    let out = stat_holding_between(&["stat", "--threads", "-p", &tid, "--interval", "100"], || {
        tell(&mut child);
        assert!(child.wait().unwrap().success());
    });
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains(&format!("{tid} is a thread of process {pid}")), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    let header = s.lines().find(|l| l.starts_with(&format!("PID {pid} ("))).unwrap_or_else(|| panic!("{s}"));
    assert!(
        header.contains(&format!("(thread {tid} of process {pid}, as given, exited before the second sample")),
        "{header}"
    );
    // Gone now: each pid is named as typed, a thread id too.
    for (spec, said) in
        [(format!("0{pid}"), format!("0{pid}")), (tid.clone(), tid.clone()), (String::new(), "\"\"".into())]
    {
        let out = run(&["stat", "--threads", "-p", &spec, "--interval", "1"]);
        assert_eq!(out.status.code(), Some(1), "{spec:?}: {out:?}");
        assert!(text(&out.stderr).contains(&format!("no such process: {said}")), "{spec:?}: {}", text(&out.stderr));
    }
}

/// A thread id given (as `0TID`) whose thread exits between the samples while its process lives
/// on: the process is shown from the second sample, and the view says the thread given is gone,
/// naming it as typed.
#[test]
fn a_thread_given_that_exits_alone_is_said_gone() {
    struct Reaped(Child);
    impl Drop for Reaped {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let (child, tid) = threaded_child("thread-exits");
    let mut child = Reaped(child);
    let pid = child.0.id();
    let spec = format!("0{tid}");
    // The thread ends between the samples: gone from /proc before the second.
    let out = stat_holding_between(&["stat", "--threads", "-p", &spec, "--interval", "100", "--json"], || {
        tell(&mut child.0);
        while std::path::Path::new(&format!("/proc/{pid}/task/{tid}")).exists() {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    });
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &v["derived"]["processes"][0];
    assert_eq!(p["pid"].as_u64(), Some(pid as u64), "{p}");
    assert_eq!(p["exited"], false, "{p}");
    assert_eq!(
        p["given_threads"],
        serde_json::json!([{ "spec": spec, "tid": tid.parse::<u64>().unwrap(), "exited": true }])
    );
    assert!(!p["threads"].as_array().unwrap().iter().any(|t| t["tid"].as_u64() == tid.parse().ok()), "{p}");
    drop(child);
}
