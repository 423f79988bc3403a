//! `numapilot daemon` as a child process (dry run, temporary socket, journal, state file and
//! metrics port) and the commands that talk to it: status, explain, metrics over TCP, SIGHUP with a
//! bad config, SIGTERM exits 0 after restoring.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod cli_common;

const BIN: &str = env!("CARGO_BIN_EXE_numapilot");

struct Daemon {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    dir: tempfile::TempDir,
    socket: PathBuf,
    config: PathBuf,
}

impl Daemon {
    fn start(extra_config: &str) -> Daemon {
        Self::start_as(extra_config, None)
    }

    fn start_as(extra_config: &str, uid: Option<u32>) -> Daemon {
        Self::start_with(extra_config, uid, &[])
    }

    /// With `args` after the daemon's own (flags override the file).
    fn start_with(extra_config: &str, uid: Option<u32>, args: &[&str]) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        if let Some(uid) = uid {
            let c = std::ffi::CString::new(dir.path().as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid path; chown of our own temporary directory.
            assert_eq!(unsafe { libc::chown(c.as_ptr(), uid, uid) }, 0);
        }
        let socket = dir.path().join("run/numapilot.sock");
        let config = dir.path().join("numapilot.toml");
        std::fs::write(
            &config,
            format!(
                "[daemon]\ninterval_ms = 200\njournal = \"{}\"\nstate = \"{}\"\n\n[tunables]\nsettle_interval_ms = 100\n{extra_config}",
                dir.path().join("journal.jsonl").display(),
                dir.path().join("state.json").display(),
            ),
        )
        .unwrap();
        let mut cmd = Command::new(BIN);
        // A free port unless the test names one.
        let metrics: &[&str] = if args.contains(&"--metrics") { &[] } else { &["--metrics", "127.0.0.1:0"] };
        if let Some(uid) = uid {
            use std::os::unix::process::CommandExt;
            cmd.uid(uid).gid(uid);
            // Not a dry run by flag: being non-root alone must make it observe-only.
            cmd.arg("daemon").args(metrics).arg("--config");
        } else {
            cmd.args(["daemon", "--dry-run"]).args(metrics).arg("--config");
        }
        let mut child = cmd
            .arg(&config)
            .arg("--socket")
            .arg(&socket)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Daemon { child, lines, seen: Vec::new(), dir, socket, config }
    }

    /// Waits for a stderr line containing `needle` (the daemon's log is its interface here).
    fn wait_line(&mut self, needle: &str) -> String {
        if let Some(l) = self.seen.iter().find(|l| l.contains(needle)) {
            return l.clone();
        }
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(60) {
            if let Ok(l) = self.lines.recv_timeout(Duration::from_millis(200)) {
                self.seen.push(l.clone());
                if l.contains(needle) {
                    return l;
                }
            }
        }
        panic!("no line with {needle:?}; saw:\n{}", self.seen.join("\n"));
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill on our own child's pid.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, sig) }, 0);
    }

    fn cli(&self, args: &[&str]) -> std::process::Output {
        Command::new(BIN).args(args).arg("--socket").arg(&self.socket).output().unwrap()
    }

    fn status_json(&self) -> serde_json::Value {
        let out = self.cli(&["status", "--json"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Sends `sig` and waits (at most 60 s) for the daemon to exit; its exit status.
    fn stop_with(&mut self, sig: i32, name: &str) -> std::process::ExitStatus {
        self.signal(sig);
        let t0 = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "daemon did not exit on {name}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_status(&self, pred: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
        let t0 = Instant::now();
        loop {
            let s = self.status_json();
            if pred(&s) {
                return s;
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "status never matched: {s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn scrape(addr: &str) -> String {
    scrape_path(addr, "/metrics")
}

fn scrape_path(addr: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn daemon_status_metrics_hup_and_term() {
    let mut d = Daemon::start("");
    d.wait_line("numapilot: started");
    let metrics = d.wait_line("metrics on http://");
    let addr = metrics.split("http://").nth(1).unwrap().trim_end_matches("/metrics").to_string();
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");

    // The socket exists, mode 0600, in a directory the daemon created.
    let mode = std::fs::metadata(&d.socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    // status, text and JSON.
    let s = d.wait_status(|s| s["steps"].as_u64().unwrap() + s["step_errors"].as_u64().unwrap() >= 2);
    // `[daemon] nice` (default -10), set before any thread started: every thread has it
    // (/proc/PID/task/TID/stat field 19; the loop, the socket's and the metrics' threads).
    let tasks: Vec<_> =
        std::fs::read_dir(format!("/proc/{}/task", d.child.id())).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(tasks.len() >= 2, "{tasks:?}");
    for t in &tasks {
        let stat = std::fs::read_to_string(t.join("stat")).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let nice: i32 = after.split(' ').nth(16).unwrap().parse().unwrap();
        assert_eq!(nice, -10, "{}: {stat}", t.display());
    }
    assert_eq!(s["dry_run"], true);
    assert_eq!(s["interval_ms"], 200);
    assert_eq!(s["pid"].as_u64().unwrap(), d.child.id() as u64);
    assert_eq!(s["config_file"].as_str().unwrap(), d.config.display().to_string());
    let out = d.cli(&["status"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("dry run") && text.contains("interval 200 ms") && text.contains("steps "), "{text}");

    // Metrics over TCP.
    let m = scrape(&addr);
    assert!(m.starts_with("HTTP/1.1 200 OK"), "{m}");
    assert!(m.contains("# TYPE numapilot_steps_total counter"), "{m}");
    assert!(m.contains("numapilot_build_info{version=\""), "{m}");
    assert!(m.contains("\nnumapilot_dry_run 1\n"), "{m}");
    assert!(m.contains("\nprocess_resident_memory_bytes "), "{m}");

    // SIGHUP with a broken file: rejected, logged, the daemon keeps running and answering.
    let good = std::fs::read_to_string(&d.config).unwrap();
    std::fs::write(&d.config, good.replace("interval_ms = 200", "interval_ms = \"soon\"")).unwrap();
    d.signal(libc::SIGHUP);
    let l = d.wait_line("configuration reload rejected");
    assert!(l.contains(&format!("{}:2:", d.config.display())), "{l}");
    let s = d.wait_status(|s| s["reloads_rejected"] == 1);
    assert_eq!(s["interval_ms"], 200);
    assert!(d.child.try_wait().unwrap().is_none());
    // A good one is applied.
    std::fs::write(&d.config, good.replace("interval_ms = 200", "interval_ms = 300")).unwrap();
    d.signal(libc::SIGHUP);
    let s = d.wait_status(|s| s["reloads"] == 1);
    assert_eq!(s["interval_ms"], 300);

    // SIGTERM: restore, journal it, exit 0, remove the socket.
    let status = d.stop_with(libc::SIGTERM, "SIGTERM");
    assert!(status.success(), "{status:?}");
    d.wait_line("stopped (SIGTERM)");
    assert!(!d.socket.exists());
    let journal = std::fs::read_to_string(d.dir.path().join("journal.jsonl")).unwrap();
    let last: serde_json::Value = serde_json::from_str(journal.lines().last().unwrap()).unwrap();
    assert_eq!(last["event"], "restore", "{journal}");
    assert_eq!(last["rule"], "shutdown (SIGTERM)");
    assert_eq!(last["dry_run"], true);
    // The daemon's own life: its start first (the configuration file, the start's notes as
    // status has them), then each reload, rejected with the reason or accepted.
    let lines: Vec<serde_json::Value> = journal.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!((lines[0]["event"].as_str(), lines[0]["kind"].as_str()), (Some("start"), Some("daemon")), "{journal}");
    assert!(lines[0]["detail"].as_str().unwrap().ends_with(&format!("configuration {}", d.config.display())));
    assert_eq!(
        lines[0]["message"].as_str().unwrap_or(""),
        s["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect::<Vec<_>>().join("; ")
    );
    let reloads: Vec<&serde_json::Value> = lines.iter().filter(|l| l["event"] == "reload").collect();
    assert_eq!(reloads.len(), 2, "{journal}");
    assert_eq!(reloads[0]["rule"], "rejected");
    assert!(reloads[0]["message"].as_str().unwrap().contains(&format!("{}:2:", d.config.display())), "{journal}");
    assert_eq!(reloads[1]["rule"], "accepted");
    assert_eq!(s["journal_lines_dropped"], 0);
    // Every journal line is one JSON object with the documented fields.
    for line in journal.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        for k in ["time", "pid", "starttime", "comm", "kind", "rule", "detail", "outcome", "dry_run"] {
            assert!(v.get(k).is_some(), "{k} missing in {line}");
        }
    }
}

/// `status --check`, a monitoring plugin's check: OK (0) with what the daemon does; WARNING (1)
/// while its journal cannot be written (/dev/full: every write fails with ENOSPC), said on the
/// plain status too; CRITICAL (2) with no daemon or one that does not answer within --timeout;
/// UNKNOWN (3) when the socket is no socket or the configuration cannot be read.
#[test]
fn status_check_reports_health_as_a_monitoring_plugin() {
    let check = |socket: &Path, json: bool| {
        let mut args = vec!["status", "--check", "--socket", socket.to_str().unwrap()];
        if json {
            args.push("--json");
        }
        let o = Command::new(BIN).args(&args).output().unwrap();
        (o.status.code(), String::from_utf8(o.stdout).unwrap())
    };
    let mut d = Daemon::start("");
    d.wait_line("numapilot: started");
    d.wait_status(|s| s["steps"].as_u64().unwrap_or(0) >= 2);
    let (code, out) = check(&d.socket, false);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.starts_with("OK: numapilot ") && out.contains(", observe only (dry run), ") && out.contains("last step "),
        "{out}"
    );
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(d.stop_with(libc::SIGTERM, "SIGTERM").success());

    let mut d = Daemon::start_with("", None, &["--journal", "/dev/full"]);
    d.wait_line("numapilot: started");
    d.wait_status(|s| s["journal_lines_dropped"].as_u64().unwrap_or(0) >= 1 && s["steps"].as_u64().unwrap_or(0) >= 2);
    let (code, out) = check(&d.socket, false);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.starts_with("WARNING: the journal cannot be written: "), "{out}");
    let (code, json) = check(&d.socket, true);
    assert_eq!(code, Some(1), "{json}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["level"], "WARNING", "{v}");
    assert_eq!(v["reasons"][0]["level"], "WARNING", "{v}");
    let plain = d.cli(&["status"]);
    assert!(String::from_utf8_lossy(&plain.stdout).contains("\nWARNING: the journal cannot be written"), "{plain:?}");
    let socket = d.socket.clone();
    assert!(d.stop_with(libc::SIGTERM, "SIGTERM").success());

    let (code, out) = check(&socket, false);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.starts_with("CRITICAL: not running: "), "{out}");
    let not_a_socket = tempfile::NamedTempFile::new().unwrap();
    let (code, out) = check(not_a_socket.path(), false);
    assert_eq!(code, Some(3), "{out}");
    assert!(out.starts_with("UNKNOWN: "), "{out}");
    // A configuration that cannot be read is UNKNOWN with its reason (exit 1 and nothing on stdout
    // read as a WARNING without text in a monitoring agent).
    let o = Command::new(BIN).args(["status", "--check", "--config", "/nonexistent/numapilot.toml"]).output().unwrap();
    let out = String::from_utf8(o.stdout).unwrap();
    assert_eq!(o.status.code(), Some(3), "{out}");
    assert!(out.starts_with("UNKNOWN: ") && out.contains("/nonexistent/numapilot.toml"), "{out}");
    // A command line the check cannot read is UNKNOWN too, not clap's usage status 2 (CRITICAL to a
    // monitoring agent; review helper-55); without --check, the usual usage error.
    for bad in [&["--timeout", "abc"][..], &["--bogus"]] {
        let o = Command::new(BIN).args(["status", "--check"]).args(bad).output().unwrap();
        let out = String::from_utf8(o.stdout).unwrap();
        assert_eq!(o.status.code(), Some(3), "{bad:?}: {out}");
        assert!(out.starts_with("UNKNOWN: ") && out.contains(bad[bad.len() - 1]), "{bad:?}: {out}");
    }
    assert_eq!(Command::new(BIN).args(["status", "--bogus"]).output().unwrap().status.code(), Some(2));
    // Also with stdout failing: it panicked, exit 101 (review helper-57).
    let full = std::fs::File::create("/dev/full").unwrap();
    let o = Command::new(BIN).args(["status", "--check", "--bogus"]).stdout(full).output().unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", String::from_utf8_lossy(&o.stderr));
    // A daemon that takes the request and never answers (hung) is CRITICAL after --timeout.
    let dir = tempfile::tempdir().unwrap();
    let hung = dir.path().join("hung.sock");
    let listener = std::os::unix::net::UnixListener::bind(&hung).unwrap();
    let (done, until_done) = mpsc::channel::<()>();
    let held = std::thread::spawn(move || {
        // Takes the connection and holds it, answering nothing, until the client has ended (a
        // fixed 3 s could end before a client the machine kept from a CPU read its timeout).
        if let Ok((s, _)) = listener.accept() {
            let _ = until_done.recv();
            drop(s);
        }
    });
    let o = Command::new(BIN).args(["status", "--check", "--timeout", "0.5", "--socket"]).arg(&hung).output().unwrap();
    drop(done);
    let out = String::from_utf8(o.stdout).unwrap();
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(out.starts_with("CRITICAL: not answering: ") && out.contains("within 0.5 s"), "{out}");
    let _ = held.join();
}

/// SIGUSR1, SIGUSR2 and SIGALRM are logged and ignored, SIGQUIT stops with the restore, as
/// SIGTERM does: left to their default action each ended the daemon without putting anything
/// back (review helper-34).
#[test]
fn stray_signals_are_ignored_and_sigquit_restores() {
    let mut d = Daemon::start("");
    d.wait_line("numapilot: started");
    for sig in [libc::SIGUSR1, libc::SIGUSR2, libc::SIGALRM] {
        d.signal(sig);
        d.wait_line(&format!("signal {sig} ("));
    }
    let before = d.status_json()["steps"].as_u64().unwrap();
    d.wait_status(|s| s["steps"].as_u64().unwrap() > before);
    assert!(d.child.try_wait().unwrap().is_none(), "a stray signal ended the daemon");
    let status = d.stop_with(libc::SIGQUIT, "SIGQUIT");
    assert!(status.success(), "{status:?}");
    d.wait_line("stopped (SIGQUIT)");
    let journal = std::fs::read_to_string(d.dir.path().join("journal.jsonl")).unwrap();
    let last: serde_json::Value = serde_json::from_str(journal.lines().last().unwrap()).unwrap();
    assert_eq!(last["rule"], "shutdown (SIGQUIT)");
}

#[test]
fn explain_a_real_process_through_the_socket() {
    let mut d = Daemon::start("");
    d.wait_line("numapilot: started");
    // A real process with two threads' worth of work would be ideal; `sleep` is a real process the
    // live host observes.
    let mut target = Command::new("sleep").arg("300").spawn().unwrap();
    let pid = target.id();
    // Its name is asserted below as the daemon read it: the steps are counted from when the
    // process runs as `sleep`, not from `spawn`, which returns before the exec sets the name.
    cli_common::wait_for_comm(pid, "sleep");
    // The daemon must have stepped at least twice after that.
    let s0 = d.status_json()["steps"].as_u64().unwrap();
    let s = d.wait_status(|s| s["steps"].as_u64().unwrap() >= s0 + 2 || s["step_errors"].as_u64().unwrap() >= 3);
    assert!(
        s["steps"].as_u64().unwrap() >= s0 + 2,
        "the live host never produced a sample (steps {}, errors {}, last error {})",
        s["steps"],
        s["step_errors"],
        s["last_error"]
    );
    let out = d.cli(&["explain", &pid.to_string(), "--json"]);
    // A user other than root is turned away with a clear message.
    let denied = {
        use std::os::unix::process::CommandExt;
        Command::new(BIN).uid(65534).gid(65534).args(["status", "--socket"]).arg(&d.socket).output().unwrap()
    };
    let _ = target.kill();
    let _ = target.wait();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let e: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(e["pid"].as_u64().unwrap(), pid as u64);
    assert_eq!(e["comm"], "sleep");
    assert_eq!(denied.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&denied.stderr).contains("permission denied"), "{denied:?}");
    assert!(e["why"].as_str().is_some_and(|w| !w.is_empty()));
}

/// Every string of a daemon's answer is printed on one line with its control characters escaped,
/// root's daemon's too (reply-strings-escaped): a stand-in root daemon on a real socket whose
/// status and explanation carry a newline and a terminal escape (as a cgroup's or a mapped file's
/// name can, which the daemon passes on). Only names were escaped at the source: the rest printed
/// the newline as a line break of its own (security review).
#[test]
fn status_and_explain_print_a_replys_control_characters_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("root.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let forged = "/evil\nlast step failed: forged\u{1b}[2J";
    let status = {
        let mut v = serde_json::to_value(numapilot_daemon::control::Status::default()).unwrap();
        v["last_error"] = serde_json::Value::String("reading /sys/fs/cgroup/x/evil\nnote: forged\u{1b}[2J".into());
        v["notes"] = serde_json::json!(["a note\twith\na line break"]);
        serde_json::json!({ "ok": true, "status": v }).to_string()
    };
    let explain = serde_json::json!({ "ok": true, "explain": {
        "pid": 4242, "comm": "x", "class": "unclassified", "pinned": false, "threads": 1, "cpu": 0.0,
        "rss_bytes": 0, "mem_by_node": [], "groups": [], "preferred_node": null, "last_actions": [],
        "why": format!("its cgroup {forged}"), "since_last_step": "gone\n  preferred node 1: forged" } })
    .to_string();
    let answers = [status.clone(), explain.clone(), status, explain];
    let server = std::thread::spawn(move || {
        for answer in answers {
            let (stream, _) = listener.accept().unwrap();
            let mut line = String::new();
            BufReader::new(&stream).read_line(&mut line).unwrap();
            writeln!(&stream, "{answer}").unwrap();
        }
    });
    let ask = |args: &[&str]| {
        let out = Command::new(BIN).args(args).arg("--socket").arg(&socket).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    for (args, said) in [
        (
            &["status"][..],
            &[
                "last step failed: reading /sys/fs/cgroup/x/evil\\nnote: forged\\u{1b}[2J\n",
                "note: a note\\twith\\na line break\n",
            ][..],
        ),
        (
            &["explain", "4242"],
            &[
                "  its cgroup /evil\\nlast step failed: forged\\u{1b}[2J\n",
                "  since the last step: gone\\n  preferred node 1: forged\n",
            ],
        ),
    ] {
        let out = ask(args);
        for line in said {
            assert!(out.contains(line), "{args:?}: {out}");
        }
        assert!(!out.contains('\x1b') && !out.contains('\t'), "{args:?}: {out}");
        assert!(
            !out.lines().any(|l| l.starts_with("note: forged") || l.starts_with("  preferred node 1: forged")),
            "{out}"
        );
    }
    // --json: the same strings, escaped, in valid JSON.
    let s: serde_json::Value = serde_json::from_str(&ask(&["status", "--json"])).unwrap();
    assert_eq!(s["last_error"], "reading /sys/fs/cgroup/x/evil\\nnote: forged\\u{1b}[2J");
    let e: serde_json::Value = serde_json::from_str(&ask(&["explain", "4242", "--json"])).unwrap();
    assert_eq!(e["why"], "its cgroup /evil\\nlast step failed: forged\\u{1b}[2J");
    server.join().unwrap();
}

/// The daemon's explanation is of its last step's view: a process that exited since is said to
/// have, as a zombie or reaped (it was explained as if it ran on; review helper-55). The answer
/// between the exit and the next step is the one that needs it: tried until one lands there.
#[test]
fn explain_says_a_process_exited_since_the_last_step() {
    let mut d = Daemon::start("");
    d.wait_line("numapilot: started");
    let (mut zombie_seen, mut exited_seen) = (false, false);
    for _ in 0..20 {
        let mut target = Command::new("sleep").arg("300").spawn().unwrap();
        let pid = target.id().to_string();
        // Until a step has seen it (60 s: a bound for a loaded machine; it was 100 tries 50 ms apart).
        let t0 = Instant::now();
        while !d.cli(&["explain", &pid]).status.success() {
            assert!(t0.elapsed() < Duration::from_secs(60), "timed out: the daemon never held {pid}");
            std::thread::sleep(Duration::from_millis(50));
        }
        let alive: serde_json::Value = serde_json::from_slice(&d.cli(&["explain", &pid, "--json"]).stdout).unwrap();
        assert!(alive.get("since_last_step").is_none(), "{alive}");
        target.kill().unwrap();
        // Killed, not reaped yet: a zombie.
        while !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap().contains(") Z ") {
            std::thread::sleep(Duration::from_millis(1));
        }
        let o = d.cli(&["explain", &pid, "--json"]);
        if o.status.success() {
            let e: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            let since = e["since_last_step"].as_str().unwrap_or_default();
            assert!(since.contains("a zombie, not yet reaped"), "{e}");
            zombie_seen = true;
        }
        target.wait().unwrap();
        let o = d.cli(&["explain", &pid]);
        if o.status.success() {
            let text = String::from_utf8_lossy(&o.stdout);
            assert!(text.contains("since the last step: it exited (this is the view of the last step)"), "{text}");
            exited_seen = true;
        } else {
            assert!(String::from_utf8_lossy(&o.stderr).contains("no such process"), "{o:?}");
        }
        if zombie_seen && exited_seen {
            break;
        }
    }
    assert!(zombie_seen && exited_seen, "no answer came before the next step ({zombie_seen}, {exited_seen})");
}

#[test]
fn explain_without_a_daemon_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN).args(["explain", "1", "--socket"]).arg(dir.path().join("none.sock")).output().unwrap();
    // LSB's "not running", told from a failure.
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no numapilot daemon is listening") && err.contains("--local"), "{err}");
    let out = Command::new(BIN).args(["status", "--socket"]).arg(dir.path().join("none.sock")).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
}

/// `status` and `explain` ask the socket the daemon's configuration names (`--config FILE`, by
/// default /etc/numapilot.toml): a socket moved in the file needed `--socket` on every call. A
/// file given that does not load is an error naming it; no daemon there is exit 3.
#[test]
fn status_asks_the_socket_the_configuration_names() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("elsewhere.sock");
    let config = dir.path().join("np.toml");
    std::fs::write(
        &config,
        format!(
            "[daemon]\ninterval_ms = 200\nsocket = \"{}\"\njournal = \"\"\nstate = \"{}\"\nmetrics = \"off\"\n\n[tunables]\nsettle_interval_ms = 100\n",
            socket.display(),
            dir.path().join("state.json").display()
        ),
    )
    .unwrap();
    let status = |cfg: &Path| Command::new(BIN).args(["status", "--json", "--config"]).arg(cfg).output().unwrap();
    assert_eq!(status(&config).status.code(), Some(3), "no daemon yet");
    let mut daemon = Command::new(BIN)
        .args(["daemon", "--dry-run", "--config"])
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let out = loop {
        let out = status(&config);
        if out.status.success() || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["steps"].is_u64(), "{v}");
    let me = std::process::id().to_string();
    let out = Command::new(BIN).args(["explain", &me, "--config"]).arg(&config).output().unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("no numapilot daemon"), "{out:?}");
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[daemon]\nsockett = 1\n").unwrap();
    let out = status(&bad);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.toml"), "{out:?}");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    assert!(daemon.wait().unwrap().success());
}

/// Root's `status`, `explain` and `advise` take the socket from a configuration file only when no
/// other user may write it or replace it (the daemon's own trust check): they ask that socket and
/// print its answer, so a file another user could write let that user choose what root talks to
/// (the clients skipped the check). Such a file given with `--config` is an error naming it and
/// why; the default file is said on stderr and the default socket asked. A user's own client still
/// reads a file it may write, and the default layout (/etc/numapilot.toml root's, 0644) is followed.
#[test]
fn a_root_client_believes_no_configuration_another_user_could_write() {
    use std::os::unix::fs::chown;
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root (file owners and modes)");
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("theirs.sock");
    let config = dir.path().join("np.toml");
    std::fs::write(&config, format!("[daemon]\nsocket = \"{}\"\n", socket.display())).unwrap();
    let mode = |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    let run = |args: &[&str], cfg: &Path| Command::new(BIN).args(args).arg("--config").arg(cfg).output().unwrap();
    let err = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).into_owned();
    mode(&config, 0o644);
    let o = run(&["status"], &config);
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
    assert!(err(&o).contains(&format!("listening on {}", socket.display())), "{}", err(&o));
    // Others may write it: refused, naming the file and who may write it; the socket is not asked.
    mode(&config, 0o666);
    let refused = |o: &std::process::Output, code: i32, why: &str| {
        let e = format!("{}{}", err(o), String::from_utf8_lossy(&o.stdout));
        assert_eq!(o.status.code(), Some(code), "{e}");
        assert!(e.contains(&format!("{}: not trusted: {why}", config.display())), "{e}");
        assert!(!e.contains("theirs.sock"), "{e}");
    };
    refused(&run(&["status"], &config), 1, "other users may write it (mode 666)");
    refused(&run(&["explain", "1"], &config), 1, "other users may write it (mode 666)");
    // The monitoring check cannot run: UNKNOWN.
    refused(&run(&["status", "--check"], &config), 3, "other users may write it (mode 666)");
    // A user's own client reads it (a non-root client may talk to no other user's socket that
    // could answer as the daemon; the daemon answers root only).
    mode(dir.path(), 0o755);
    let o = {
        use std::os::unix::process::CommandExt as _;
        Command::new(BIN).args(["status", "--config"]).arg(&config).uid(65534).gid(65534).output().unwrap()
    };
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
    assert!(err(&o).contains(&format!("listening on {}", socket.display())), "{}", err(&o));
    // Another user's file, and a file in a directory another user may write.
    mode(&config, 0o644);
    chown(&config, Some(65534), Some(65534)).unwrap();
    refused(&run(&["status"], &config), 1, "it belongs to uid 65534, not root's");
    chown(&config, Some(0), Some(0)).unwrap();
    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    mode(&open, 0o777);
    let config = open.join("np.toml");
    std::fs::copy(dir.path().join("np.toml"), &config).unwrap();
    mode(&config, 0o644);
    let o = run(&["status"], &config);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(
        err(&o).contains(&format!("its directory {} may be written by other users", open.display())),
        "{}",
        err(&o)
    );

    // The default file, /etc/numapilot.toml, shown in a private mount namespace through an overlay
    // of /etc whose upper directory holds it (and /run an empty tmpfs: no daemon at the default
    // socket), so nothing outside the test sees it.
    let upper = dir.path().join("upper");
    let work = dir.path().join("work");
    std::fs::DirBuilder::new().mode(0o755).create(&upper).unwrap();
    std::fs::create_dir(&work).unwrap();
    let default = upper.join("numapilot.toml");
    std::fs::write(&default, format!("[daemon]\nsocket = \"{}\"\n", socket.display())).unwrap();
    let with_default = |args: &str| {
        let script = format!(
            "mount -t overlay overlay -o lowerdir=/etc,upperdir={},workdir={} /etc && mount -t tmpfs none /run || exit 9; \
             exec {BIN} {args}",
            upper.display(),
            work.display()
        );
        Command::new("unshare").args(["-m", "--propagation", "private", "sh", "-c", &script]).output().unwrap()
    };
    mode(&default, 0o644);
    let o = with_default("status");
    if o.status.code() == Some(9) {
        eprintln!("SKIP (default file): cannot mount in a private namespace here: {}", err(&o));
        return;
    }
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
    assert!(err(&o).contains(&format!("listening on {}", socket.display())), "{}", err(&o));
    mode(&default, 0o664);
    let o = with_default("status");
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
    let e = err(&o);
    assert!(
        e.contains("/etc/numapilot.toml: not trusted: other users may write it (mode 664)")
            && e.contains("(asking the default socket /run/numapilot/numapilot.sock)")
            && e.contains("listening on /run/numapilot/numapilot.sock")
            && !e.contains("theirs.sock"),
        "{e}"
    );
}

/// `explain --local` as root with a default file another user may write: no daemon answers at the
/// default socket, and --local explains as a daemon with that file would; the daemon refuses to
/// start on it (exit 1), so --local refuses it too, in one message with the daemon's reason. It
/// said it passed the file over for the default socket, then refused it for the socket's reason.
/// The file is shown in a private mount namespace, as in
/// `a_root_client_believes_no_configuration_another_user_could_write`.
#[test]
fn explain_local_refuses_the_default_file_the_daemon_refuses() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root (a mount namespace)");
    let dir = tempfile::tempdir().unwrap();
    let (upper, work) = (dir.path().join("upper"), dir.path().join("work"));
    std::fs::DirBuilder::new().mode(0o755).create(&upper).unwrap();
    std::fs::create_dir(&work).unwrap();
    let default = upper.join("numapilot.toml");
    std::fs::write(&default, "[daemon]\ndry_run = true\n").unwrap();
    std::fs::set_permissions(&default, std::fs::Permissions::from_mode(0o664)).unwrap();
    let with_default = |args: &str| {
        let script = format!(
            "mount -t overlay overlay -o lowerdir=/etc,upperdir={},workdir={} /etc && mount -t tmpfs none /run || exit 9; \
             exec {BIN} {args}",
            upper.display(),
            work.display()
        );
        Command::new("unshare").args(["-m", "--propagation", "private", "sh", "-c", &script]).output().unwrap()
    };
    let daemon = with_default("daemon --metrics off");
    if daemon.status.code() == Some(9) {
        eprintln!("SKIP: cannot mount in a private namespace here: {}", String::from_utf8_lossy(&daemon.stderr));
        return;
    }
    let why =
        "/etc/numapilot.toml: not trusted: other users may write it (mode 664) (a configuration steers a root daemon)";
    let err = String::from_utf8_lossy(&daemon.stderr);
    assert_eq!(daemon.status.code(), Some(1), "{err}");
    assert!(err.contains(why), "{err}");
    let local = with_default(&format!("explain {} --local", std::process::id()));
    let err = String::from_utf8_lossy(&local.stderr);
    assert_eq!(local.status.code(), Some(1), "{err}");
    assert!(local.stdout.is_empty(), "{}", String::from_utf8_lossy(&local.stdout));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(why)
            && err.contains("the daemon refuses to start on it, and --local explains as that daemon would")
            && err.contains("no daemon answers at /run/numapilot/numapilot.sock"),
        "{err}"
    );
    // Without --local the file is passed over for the default socket, and said so, as before.
    let plain = with_default(&format!("explain {}", std::process::id()));
    let err = String::from_utf8_lossy(&plain.stderr);
    assert_eq!(plain.status.code(), Some(3), "{err}");
    assert!(err.contains("(asking the default socket /run/numapilot/numapilot.sock)"), "{err}");
}

/// Under systemd's `Type=notify` the daemon says READY=1 once its socket answers, RELOADING=1 and
/// READY=1 around a SIGHUP, STOPPING=1 at SIGTERM, to the datagram socket NOTIFY_SOCKET names.
#[test]
fn the_service_manager_is_told_ready_reloading_and_stopping() {
    use std::os::unix::net::UnixDatagram;
    let dir = tempfile::tempdir().unwrap();
    let notify_path = dir.path().join("notify");
    let manager = UnixDatagram::bind(&notify_path).unwrap();
    manager.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let socket = dir.path().join("np.sock");
    let config = dir.path().join("np.toml");
    std::fs::write(
        &config,
        format!(
            "[daemon]\ninterval_ms = 200\njournal = \"\"\nstate = \"{}\"\nmetrics = \"off\"\n\n[tunables]\nsettle_interval_ms = 100\n",
            dir.path().join("state.json").display()
        ),
    )
    .unwrap();
    let mut daemon = Command::new(BIN)
        .args(["daemon", "--dry-run", "--config"])
        .arg(&config)
        .arg("--socket")
        .arg(&socket)
        .env("NOTIFY_SOCKET", &notify_path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 1024];
    let mut next = || {
        let n = manager.recv(&mut buf).expect("a message before the timeout");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let ready = next();
    assert!(ready.starts_with("READY=1\nSTATUS=started"), "{ready}");
    assert!(ready.contains(&format!("MAINPID={}", daemon.id())), "{ready}");
    // Ready means answering: the socket is there and status works at once.
    let out = Command::new(BIN).args(["status", "--socket"]).arg(&socket).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGHUP) };
    assert!(next().starts_with("RELOADING=1\nMONOTONIC_USEC="));
    assert!(next().starts_with("READY=1\nSTATUS=running"));
    // SAFETY: as above.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    assert_eq!(next(), "STOPPING=1");
    assert!(daemon.wait().unwrap().success());
}

/// What the daemon never manages is said as it says it, by `explain` and `explain --local` alike:
/// init, a kernel thread, a thread id, a zombie (review helper-55: init read "CPU below
/// min_group_cpu" locally, a thread id "new since the last step").
#[test]
fn explain_names_what_is_never_managed() {
    let dir = tempfile::tempdir().unwrap();
    // A zombie: a child that exited and is not reaped yet (waited for: a fixed 300 ms was a guess).
    let mut zombie = Command::new("true").spawn().unwrap();
    let stat = format!("/proc/{}/stat", zombie.id());
    let t0 = Instant::now();
    while !std::fs::read_to_string(&stat).unwrap().contains(") Z ") {
        assert!(t0.elapsed() < Duration::from_secs(60), "timed out waiting for the child to be a zombie");
        std::thread::sleep(Duration::from_millis(5));
    }
    let tid = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|t| *t != std::process::id().to_string());
    let me = std::process::id();
    let mut cases = vec![
        ("1".to_string(), "init: never managed".to_string()),
        ("2".into(), "a kernel thread: never managed".into()),
        (zombie.id().to_string(), "a zombie".into()),
    ];
    if let Some(t) = tid {
        cases.push((t, format!("a thread of process {me}, not a process")));
    }
    for (pid, why) in &cases {
        let o = Command::new(BIN)
            .args(["explain", pid, "--local", "--socket"])
            .arg(dir.path().join("none.sock"))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{pid}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(&format!("process {pid}: {why}")), "{pid}: {err}");
    }
    let mut d = Daemon::start("");
    d.wait_line("numapilot: started");
    d.wait_status(|s| s["steps"].as_u64().unwrap_or(0) >= 1);
    // A zombie is never held (it was, planned and counted, until reaped); one that became a zombie
    // after the daemon's last look is explained from that look, saying it is one since:
    // explain_says_a_process_exited_since_the_last_step.
    for (pid, why) in &cases {
        let o = d.cli(&["explain", pid]);
        assert!(!o.status.success(), "{pid}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(why.as_str()), "{pid}: {err}");
    }
    let _ = zombie.wait();
}

#[test]
fn explain_local_observes_twice() {
    let dir = tempfile::tempdir().unwrap();
    let me = std::process::id();
    let out = Command::new(BIN)
        .args(["explain", &me.to_string(), "--local", "--socket"])
        .arg(dir.path().join("none.sock"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("no daemon running: local view"), "{text}");
    assert!(text.contains(&format!("process {me} (")), "{text}");
}

/// A real process whose name holds a newline and ESC (a copy of `sh` run under that name: the
/// kernel takes its comm from the file name) is explained with `--local` as the daemon's answer
/// would show it: escaped, one line, no escape sequence reaching the terminal.
#[test]
fn explain_local_escapes_a_process_name() {
    let dir = tempfile::tempdir().unwrap();
    let name = "np\n\x1b[31mred";
    let exe = dir.path().join(name);
    std::fs::copy("/bin/sh", &exe).unwrap();
    // The shell says it runs, then waits for its stdin to end: its comm is the new name by its
    // first line (the exec sets it before the program runs; `spawn` may return before that).
    let mut kid = Command::new(&exe)
        .args(["-c", "echo running; read x"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(kid.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line, "running\n");
    let pid = kid.id().to_string();
    assert_eq!(std::fs::read(format!("/proc/{pid}/comm")).unwrap(), format!("{name}\n").as_bytes());
    let out = Command::new(BIN)
        .args(["explain", &pid, "--local", "--socket"])
        .arg(dir.path().join("none.sock"))
        .output()
        .unwrap();
    drop(kid.stdin.take());
    let _ = kid.wait();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("process {pid} (np\\n\\u{{1b}}[31mred)")), "{text}");
    assert!(!text.contains('\x1b') && !text.lines().any(|l| l.starts_with("\x1b") || l.starts_with("red")), "{text:?}");
}

/// `explain --local --config FILE` explains as a daemon with that file would: a process pinned to
/// CPU 0 is "placed by someone else" by default, and not once every other CPU is reserved
/// (`[actuation] reserved_cpus`: its mask is then every CPU placement may use). A bad file is an
/// error naming it.
#[test]
fn explain_local_takes_the_daemons_config() {
    let online = numapilot_topology::Topology::from_sysfs(std::path::Path::new("/")).unwrap().online_cpus();
    if online.len() < 2 || !online.contains(0) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut kid = Command::new(BIN).args(["run", "--physcpubind=0", "sleep", "30"]).spawn().unwrap();
    // `run` pins itself, then execs sleep: explained before the exec, it is a numapilot tool.
    // Waited for (its name), not slept for.
    cli_common::wait_for_comm(kid.id(), "sleep");
    let run = |config: &std::path::Path| {
        Command::new(BIN)
            .args(["explain", &kid.id().to_string(), "--local", "--json", "--socket"])
            .arg(dir.path().join("none.sock"))
            .arg("--config")
            .arg(config)
            .output()
            .unwrap()
    };
    let explain = |config: &std::path::Path| {
        let out = run(config);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["pinned"].as_bool().expect("pinned")
    };
    let plain = dir.path().join("plain.toml");
    std::fs::write(&plain, "[daemon]\ndry_run = true\n").unwrap();
    assert!(explain(&plain), "pinned to CPU 0 of {}: placed by someone else", online.to_list());
    let reserving = dir.path().join("reserving.toml");
    let others = online.difference(&std::iter::once(0).collect());
    std::fs::write(&reserving, format!("[actuation]\nreserved_cpus = \"{}\"\n", others.to_list())).unwrap();
    assert!(!explain(&reserving), "CPU 0 is every CPU placement may use: no pin");
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[actuation]\nreserved_cpus = \"x\"\n").unwrap();
    let out = run(&bad);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&bad.display().to_string()) && err.contains("reserved_cpus"), "{err}");
    let _ = kid.kill();
    let _ = kid.wait();
}

#[test]
fn a_bad_config_stops_the_daemon_before_anything_happens() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.toml");
    let socket = dir.path().join("s.sock");
    std::fs::write(&config, "[daemon]\ndry_run = true\n\n[exclude]\ncomm = [\"sshd\"]\nexclude_me = 1\n").unwrap();
    let out = Command::new(BIN)
        .args(["daemon", "--metrics", "off", "--config"])
        .arg(&config)
        .arg("--socket")
        .arg(&socket)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{}:6:", config.display())) && err.contains("exclude_me"), "{err}");
    assert!(!socket.exists());
    // --check says the same, and accepts a good file.
    let out = Command::new(BIN).args(["daemon", "--check", "--config"]).arg(&config).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    std::fs::write(&config, "[daemon]\ndry_run = true\n").unwrap();
    let out = Command::new(BIN).args(["daemon", "--check", "--config"]).arg(&config).output().unwrap();
    assert!(out.status.success());
    // A missing explicit file is an error.
    let out =
        Command::new(BIN).args(["daemon", "--check", "--config"]).arg(dir.path().join("no.toml")).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no.toml"));
    // A bad flag is named.
    let out = Command::new(BIN)
        .args(["daemon", "--check", "--metrics", "everywhere", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("command line: --metrics \"everywhere\""));
    // A log level that is none: it used to pass and leave the daemon silent (read as a target).
    let out = Command::new(BIN).args(["daemon", "--check", "--log", "loud", "--config"]).arg(&config).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--log \"loud\""),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // --journal "" is the documented "no journal" (clap's path parser refused it).
    let out = Command::new(BIN).args(["daemon", "--check", "--journal", "", "--config"]).arg(&config).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).ends_with("with the command line's flags\n"));
    for ok in ["debug", "numapilot_daemon=debug,warn"] {
        let out = Command::new(BIN).args(["daemon", "--check", "--log", ok, "--config"]).arg(&config).output().unwrap();
        assert!(out.status.success(), "{ok}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // RUST_LOG overrides --log and is checked the same way (it silenced every line, errors too).
    let out = Command::new(BIN)
        .args(["daemon", "--check", "--config"])
        .arg(&config)
        .env("RUST_LOG", "loud")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("RUST_LOG \"loud\""), "{out:?}");
}

/// `daemon --check` says what the file and the flags contradict, each once, as a warning (exit 0,
/// configuration OK): an inclusion given by a flag that an exclusion cancels (a file's inclusion
/// that `--exclude` names is that flag's purpose: not said), an included cgroup under an excluded
/// prefix, an interval above the back-off cap (no back-off: 0 says it on purpose; a flag that
/// lowers the file's interval undoes it), the page-fault fallback asked for with perf off, and a
/// source's cadence (`maps_every`, `sockets_every`) set while the source is off.
/// None of these was said; a file's contradiction repeated by a flag is said once, at the file's
/// line.
#[test]
fn daemon_check_warns_of_each_contradiction_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("np.toml");
    let f = config.display().to_string();
    // Lines 1 to 5; what a case adds starts at line 6.
    let base = format!(
        "[daemon]\njournal = \"\"\nstate = \"{}\"\nsocket = \"{}\"\nmetrics = \"off\"\n",
        dir.path().join("state.json").display(),
        dir.path().join("np.sock").display()
    );
    let check = |extra: &str, flags: &[&str]| -> Vec<String> {
        std::fs::write(&config, format!("{base}{extra}")).unwrap();
        let o = Command::new(BIN).args(["daemon", "--check", "--config"]).arg(&config).args(flags).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{extra:?} {flags:?}: {err}");
        assert!(String::from_utf8_lossy(&o.stdout).starts_with("configuration OK"), "{o:?}");
        err.lines().filter_map(|l| l.strip_prefix("numapilot: warning: ")).map(str::to_string).collect()
    };
    let never = "exclusions win, so it is never managed";
    // An --include the file excludes, given twice: one warning naming the flag and the file's line.
    assert_eq!(
        check("[exclude]\ncomm = [\"sshd\"]\n", &["--include", "sshd", "--include", "sshd", "--include", "redis"]),
        [format!("command line: --include \"sshd\": exclude.comm of {f}:7 names it too: {never}")]
    );
    assert_eq!(
        check("", &["--include-pid", "7", "--exclude-pid", "7"]),
        [format!("command line: --include-pid 7: --exclude-pid 7 names it too: {never}")]
    );
    // The file's own contradiction (its inclusion listed twice) repeated by a flag: once, the file's.
    assert_eq!(
        check("[exclude]\ncomm = [\"sshd\"]\n[include]\ncomm = [\"sshd\", \"sshd\"]\n", &["--include", "sshd"]),
        [format!("{f}:9: include.comm and exclude.comm both name \"sshd\": {never}")]
    );
    assert_eq!(check("[include]\ncomm = [\"redis\"]\n", &["--exclude", "redis"]), Vec::<String>::new());
    assert_eq!(
        check("[exclude]\ncgroups = [\"/system.slice\"]\n[include]\ncgroups = [\"/system.slice/redis.service\", \"/user.slice\"]\n", &[]),
        [format!("{f}:9: include.cgroups \"/system.slice/redis.service\" is under exclude.cgroups \"/system.slice\": {never}")]
    );
    // The back-off cap below the interval.
    let no_backoff = "the longest wait between steps is below the shortest, so there is no back-off";
    let w = check("idle_max_interval_ms = 5000\ninterval_ms = 10000\n", &[]);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with(&format!(
            "{f}:7: daemon.interval_ms = 10000 is above daemon.idle_max_interval_ms = 5000 ({f}:6): {no_backoff}"
        )),
        "{w:?}"
    );
    assert_eq!(
        check("idle_max_interval_ms = 5000\ninterval_ms = 10000\n", &["--interval-ms", "1000"]),
        Vec::<String>::new()
    );
    let w = check("idle_max_interval_ms = 5000\ninterval_ms = 10000\n", &["--interval-ms", "20000"]);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with(&format!(
            "command line: --interval-ms 20000: above daemon.idle_max_interval_ms = 5000 ({f}:6): {no_backoff}"
        )),
        "{w:?}"
    );
    let w = check("", &["--interval-ms", "20000"]);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with(&format!(
            "command line: --interval-ms 20000: above daemon.idle_max_interval_ms (15000 ms, its default): {no_backoff}"
        )),
        "{w:?}"
    );
    assert_eq!(check("idle_max_interval_ms = 0\n", &["--interval-ms", "20000"]), Vec::<String>::new());
    assert_eq!(check("idle_max_interval_ms = 1000\n", &[]), Vec::<String>::new());
    // The page-fault fallback with perf off.
    let w = check("[signals]\nperf = false\npage_faults = true\n", &[]);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with(&format!("{f}:8: signals.page_faults = true has no effect: signals.perf = false")),
        "{w:?}"
    );
    assert_eq!(check("[signals]\nperf = true\npage_faults = true\n", &[]), Vec::<String>::new());
    // A source's cadence with the source off: said at the cadence's line; not said when the
    // source is on, nor for the default cadence of a source that is off.
    let w = check("[signals]\nshared = false\nmaps_every = 3\nsockets = false\nsockets_every = 2\n", &[]);
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w[0].starts_with(&format!("{f}:8: signals.maps_every has no effect: signals.shared = false")), "{w:?}");
    assert!(
        w[1].starts_with(&format!("{f}:10: signals.sockets_every has no effect: signals.sockets = false")),
        "{w:?}"
    );
    assert_eq!(check("[signals]\nshared = true\nmaps_every = 3\n", &[]), Vec::<String>::new());
    assert_eq!(check("[signals]\nshared = false\nsockets = false\n", &[]), Vec::<String>::new());
}

/// A configuration that reserves every online CPU of this machine cannot work here: `--check`
/// refuses it (it passed, and the unit's ExecStartPre with it) and a start exits 1 with nothing
/// made (it exited 75, which the unit restarts on, every 5 s for good). A list naming CPUs this
/// machine lacks (one file for a fleet) passes, and `--check` says which.
#[test]
fn a_reservation_of_every_cpu_is_a_configuration_error() {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let write = |reserved: &str| {
        let config = dir.path().join("np.toml");
        std::fs::write(
            &config,
            format!(
                "[daemon]\njournal = \"{}\"\nstate = \"{}\"\nmetrics = \"off\"\n\n[actuation]\nreserved_cpus = \"{reserved}\"\n",
                dir.path().join("j.jsonl").display(),
                dir.path().join("state.json").display(),
            ),
        )
        .unwrap();
        config
    };
    let config = write(online.trim());
    let out = Command::new(BIN).args(["daemon", "--check", "--config"]).arg(&config).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("every online CPU is reserved") && out.stdout.is_empty(), "{err}");
    let out = Command::new(BIN)
        .args(["daemon", "--config"])
        .arg(&config)
        .arg("--socket")
        .arg(dir.path().join("np.sock"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("every online CPU is reserved"), "{err}");
    assert!(!dir.path().join("state.json").exists() && !dir.path().join("np.sock").exists());
    let config = write("4000-4001");
    let out = Command::new(BIN).args(["daemon", "--check", "--config"]).arg(&config).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("[actuation] reserved_cpus: 4000-4001, not on this machine: 4000-4001"), "{err}");
}

/// A metrics port someone else holds does not stop the daemon (any local user may bind an
/// unprivileged port first: the start exited 75 and the unit gave up after ten; review
/// helper-51): it runs, `status --check` warns, and the port is bound once it is free.
#[test]
fn a_taken_metrics_port_is_warned_about_and_tried_again() {
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = squatter.local_addr().unwrap().to_string();
    let mut d = Daemon::start_with("", None, &["--metrics", &addr]);
    d.wait_line("numapilot: started");
    d.wait_line("metrics not served");
    let check = d.cli(&["status", "--check"]);
    let text = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "{text}");
    assert!(text.contains(&format!("WARNING: metrics not served: {addr}: ")), "{text}");
    drop(squatter);
    d.wait_line(&format!("metrics on http://{addr}/metrics"));
    let healthz = scrape_path(&addr, "/healthz");
    assert!(healthz.starts_with("HTTP/1.1 200 OK"), "{healthz}");
    assert!(d.cli(&["status", "--check"]).status.success());
    assert!(d.stop_with(libc::SIGTERM, "SIGTERM").success());
}

/// A reload is taken whole or not at all (review helper-50): a file that reserves every CPU (the
/// next start would refuse it) and one whose new journal cannot be opened are rejected, nothing of
/// them taken (the journal's failure skipped the journal and took the rest); a FIFO put where the
/// file was is refused at once, where its read held the loop, SIGTERM included.
#[test]
fn a_reload_is_taken_whole_or_not_at_all() {
    let mut d = Daemon::start("");
    d.wait_line("numapilot: started");
    let good = std::fs::read_to_string(&d.config).unwrap();
    let faster = good.replace("interval_ms = 200", "interval_ms = 300");
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    std::fs::write(
        &d.config,
        format!(
            "{faster}
[actuation]
reserved_cpus = \"{}\"\n",
            online.trim()
        ),
    )
    .unwrap();
    d.signal(libc::SIGHUP);
    let s = d.wait_status(|s| s["reloads_rejected"] == 1);
    assert_eq!(s["interval_ms"], 200, "nothing of a rejected file taken");
    d.wait_line("every online CPU is reserved");
    // A new journal under a directory another user owns is not opened: the reload is rejected.
    let theirs = d.dir.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    let elsewhere = theirs.join("j.jsonl");
    let moved =
        faster.replace(&d.dir.path().join("journal.jsonl").display().to_string(), &elsewhere.display().to_string());
    assert_ne!(moved, faster);
    std::fs::write(&d.config, moved).unwrap();
    d.signal(libc::SIGHUP);
    let s = d.wait_status(|s| s["reloads_rejected"] == 2);
    assert_eq!(s["interval_ms"], 200, "the rest of the file not taken without its journal");
    assert!(!elsewhere.exists());
    // A FIFO where the file was: refused at once, and the daemon still stops on SIGTERM.
    std::fs::remove_file(&d.config).unwrap();
    let c = std::ffi::CString::new(d.config.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid path in the test's own directory.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    d.signal(libc::SIGHUP);
    d.wait_status(|s| s["reloads_rejected"] == 3);
    d.wait_line("a FIFO: a configuration is a regular file");
    assert!(d.stop_with(libc::SIGTERM, "SIGTERM").success());
    let journal = std::fs::read_to_string(d.dir.path().join("journal.jsonl")).unwrap();
    let rejected: Vec<serde_json::Value> = journal
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["event"] == "reload")
        .collect();
    assert_eq!(rejected.len(), 3, "{journal}");
    assert!(rejected.iter().all(|l| l["rule"] == "rejected"), "{journal}");
}

/// The daemon's log lines off a terminal carry no colour codes (they did, into files, pipes and
/// the journal, which stored them as binary blobs), and on systemd's journal (stderr the stream
/// `JOURNAL_STREAM` names) each starts with its sd-daemon(3) priority and carries no time of its
/// own; a `JOURNAL_STREAM` naming another file (inherited, stderr redirected) is not the journal.
#[test]
fn log_lines_are_plain_off_a_terminal_and_carry_their_priority_on_the_journal() {
    use std::os::unix::fs::MetadataExt as _;
    for mode in ["plain", "journal", "inherited"] {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("np.toml");
        std::fs::write(
            &config,
            format!(
                "[daemon]\ninterval_ms = 200\njournal = \"{}\"\nstate = \"{}\"\nmetrics = \"off\"\n\n[tunables]\nsettle_interval_ms = 100\n",
                dir.path().join("j.jsonl").display(),
                dir.path().join("state.json").display(),
            ),
        )
        .unwrap();
        let log = dir.path().join("stderr.log");
        let file = std::fs::File::create(&log).unwrap();
        let meta = file.metadata().unwrap();
        let mut cmd = Command::new(BIN);
        cmd.args(["daemon", "--dry-run", "--config"])
            .arg(&config)
            .arg("--socket")
            .arg(dir.path().join("np.sock"))
            .env_remove("RUST_LOG")
            .env_remove("NO_COLOR")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(file));
        match mode {
            "journal" => cmd.env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino())),
            "inherited" => cmd.env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino() + 1)),
            _ => cmd.env_remove("JOURNAL_STREAM"),
        };
        let mut child = cmd.spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !std::fs::read_to_string(&log).unwrap().contains("started") {
            assert!(Instant::now() < deadline, "{mode}: no start: {}", std::fs::read_to_string(&log).unwrap());
            std::thread::sleep(Duration::from_millis(50));
        }
        // An ignored signal is an INFO line of the loop's; SIGTERM then ends the run.
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGUSR1) };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !std::fs::read_to_string(&log).unwrap().contains("SIGUSR1") {
            assert!(Instant::now() < deadline, "{mode}: no SIGUSR1 line: {}", std::fs::read_to_string(&log).unwrap());
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: as above.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        assert!(child.wait().unwrap().success());
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(!text.contains('\x1b'), "{mode}: colour codes off a terminal: {text:?}");
        let line = text.lines().find(|l| l.contains("signal 10 (SIGUSR1) ignored")).expect("the SIGUSR1 line");
        if mode == "journal" {
            assert!(line.starts_with("<6>signal 10 (SIGUSR1) ignored"), "{line:?}");
            // The start's own lines too: notices, with their prefix.
            assert!(text.lines().any(|l| l.starts_with("<5>numapilot: started")), "{text}");
            assert!(text.lines().any(|l| l.starts_with("<5>numapilot: stopped (SIGTERM)")), "{text}");
        } else {
            assert!(line.contains(" INFO ") && line.starts_with("20"), "{mode}: time and level: {line:?}");
        }
    }
}

#[test]
fn a_description_file_that_is_no_such_thing_is_refused_in_a_moment() {
    // /dev/zero (a wrong path, an endless source) used to be read until memory ran out; a file over
    // the 16 MiB cap and one that is not text are named as such. The sparse file costs no disk.
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.toml");
    std::fs::File::create(&big).unwrap().set_len((16 << 20) + 1).unwrap();
    let binary = dir.path().join("binary.toml");
    std::fs::write(&binary, [0x80u8, 0xff, 0x00, 0x41]).unwrap();
    let big_s = big.to_str().unwrap();
    let cases: [(Vec<&str>, &str, &str); 6] = [
        (vec!["sim", "show", "/dev/zero"], "/dev/zero", "larger than 256 MiB: not a numapilot sim result"),
        (
            vec!["daemon", "--check", "--config", "/dev/zero"],
            "/dev/zero",
            "a device: a configuration is a regular file",
        ),
        (vec!["daemon", "--check", "--config", big_s], big_s, "larger than 16 MiB"),
        (vec!["daemon", "--check", "--config", binary.to_str().unwrap()], "binary.toml", "not UTF-8 text"),
        (vec!["sim", "--machine", "/dev/zero", "--workload", "numa01"], "/dev/zero", "larger than 16 MiB"),
        (vec!["sim", "--machine", "article-4n96", "--workload", "/dev/zero"], "/dev/zero", "larger than 16 MiB"),
    ];
    for (args, path, why) in cases {
        let out = Command::new(BIN).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(path) && err.contains(why), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn a_daemon_refused_at_start_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    // The socket's directories do not exist yet: the start makes them, and a refused start removes
    // them again (it left an empty /run/numapilot).
    let (config, journal, socket) =
        (dir.path().join("n.toml"), dir.path().join("journal.jsonl"), dir.path().join("run/np/s.sock"));
    let write_config = |journal: &Path| {
        let state = dir.path().join("state.json");
        let text = format!("[daemon]\njournal = \"{}\"\nstate = \"{}\"\n", journal.display(), state.display());
        std::fs::write(&config, text).unwrap();
    };
    write_config(&journal);
    let start = |metrics: &str| {
        Command::new(BIN)
            .args(["daemon", "--dry-run", "--metrics", metrics, "--config"])
            .arg(&config)
            .arg("--socket")
            .arg(&socket)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    // The journal cannot be opened (a file where its directory should be): refused after the
    // socket was bound, which goes again. (A metrics port taken no longer refuses the start.)
    std::fs::write(dir.path().join("afile"), "").unwrap();
    write_config(&dir.path().join("afile/journal.jsonl"));
    let out = start("off");
    // Not the configuration's fault: EX_TEMPFAIL, which the unit restarts on (1 it does not).
    assert_eq!(out.status.code(), Some(75), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("afile"), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!socket.exists() && !journal.exists(), "left: socket {} journal {}", socket.exists(), journal.exists());
    assert!(!dir.path().join("run").exists(), "the socket's directories were left behind");
    // A directory that was there before stays.
    std::fs::create_dir(dir.path().join("run")).unwrap();
    let out = start("off");
    assert_eq!(out.status.code(), Some(75), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(dir.path().join("run").is_dir() && !dir.path().join("run/np").exists());
    std::fs::create_dir(dir.path().join("run/np")).unwrap();
    write_config(&journal);
    // Another daemon listens on the socket: refused, its socket left alone, no journal of ours.
    let other = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let out = start("off");
    assert_eq!(out.status.code(), Some(75));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("another daemon"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(socket.exists() && !journal.exists());
    drop(other);
}

/// A start that acts takes the state file's lock before anything else can refuse it; one refused
/// after that (another daemon on the socket, a journal that cannot be opened, a state file of
/// another pid namespace) removes the lock file and the directories it made for it (the state
/// directory, default /run/numapilot, stayed behind with `.state.json.lock` in it). A directory or
/// lock file that was there before stays.
#[test]
fn an_acting_start_refused_after_taking_the_state_lock_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("n.toml");
    std::fs::write(&config, "").unwrap();
    let start = |state: &Path, socket: &Path, journal: &Path| {
        // As root and no dry run: a start that acts, so it takes the state file's lock.
        Command::new(BIN)
            .args(["daemon", "--metrics", "off", "--config"])
            .arg(&config)
            .arg("--socket")
            .arg(socket)
            .arg("--state")
            .arg(state)
            .arg("--journal")
            .arg(journal)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let refused = |out: &std::process::Output, why: &str| {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(75), "{err}");
        assert!(err.contains(why), "{err}");
    };
    let journal = dir.path().join("journal.jsonl");
    // Another daemon listens on the socket: refused after the claim, which made st/deep for the
    // lock.
    let state = dir.path().join("st/deep/state.json");
    std::fs::create_dir(dir.path().join("run")).unwrap();
    let socket = dir.path().join("run/s.sock");
    let other = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    refused(&start(&state, &socket, &journal), "another daemon is already listening there");
    assert!(!dir.path().join("st").exists(), "the state directory and its lock were left behind");
    assert!(socket.exists() && !journal.exists());
    drop(other);
    std::fs::remove_file(&socket).unwrap();
    // The journal cannot be opened (a file where its directory should be): the socket goes, and so
    // does the state's directory. One that was there before stays, without the lock made in it.
    std::fs::write(dir.path().join("afile"), "").unwrap();
    let bad_journal = dir.path().join("afile/journal.jsonl");
    refused(&start(&state, &socket, &bad_journal), "afile");
    assert!(!dir.path().join("st").exists() && !socket.exists());
    std::fs::DirBuilder::new().mode(0o700).create(dir.path().join("st")).unwrap();
    refused(&start(&state, &socket, &bad_journal), "afile");
    assert!(dir.path().join("st").is_dir() && !dir.path().join("st/deep").exists());
    // A state file of another pid namespace is refused in the host's opening, after the claim:
    // the file stays as it was, the lock goes; a lock file that was there before stays.
    let kept = dir.path().join("kept");
    std::fs::DirBuilder::new().mode(0o700).create(&kept).unwrap();
    let foreign = "{\"version\":1,\"pid_ns\":1,\"processes\":[{\"pid\":1,\"starttime\":1,\"comm\":\"x\",\
                   \"default_cpus\":\"0\",\"threads\":{},\"cpuset\":null}]}";
    std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(kept.join("state.json")).unwrap();
    std::fs::write(kept.join("state.json"), foreign).unwrap();
    refused(&start(&kept.join("state.json"), &socket, &journal), "written in another pid namespace");
    assert_eq!(std::fs::read_to_string(kept.join("state.json")).unwrap(), foreign);
    assert!(!kept.join(".state.json.lock").exists(), "the lock made for the refused start was left");
    std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(kept.join(".state.json.lock")).unwrap();
    refused(&start(&kept.join("state.json"), &socket, &journal), "written in another pid namespace");
    assert!(kept.join(".state.json.lock").exists(), "a lock file that was there before was removed");
    assert!(!socket.exists() && !journal.exists());
}

/// Two daemons started at the same moment on one socket and state file, over a stale socket (as a
/// kill -9 leaves): exactly one runs and answers; the other exits 75 with one message naming what
/// is held and the pid holding it, and removes nothing of the running one's. Dry runs meet at the
/// socket's lock, starts that act at the state file's. The loser's message named no pid, and two
/// dry runs could both find the socket stale: one removed the socket the other had just bound and
/// both ran, or the loser failed on a missing file or an address in use (review helper-79).
#[test]
fn two_daemons_started_at_once_leave_one_running() {
    use std::os::unix::net::UnixDatagram;
    for round in 0..20 {
        let acting = round % 2 == 1;
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("n.toml");
        std::fs::write(&config, "[daemon]\njournal = \"\"\nmetrics = \"off\"\n").unwrap();
        let notify = dir.path().join("notify");
        let manager = UnixDatagram::bind(&notify).unwrap();
        manager.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        std::fs::DirBuilder::new().mode(0o700).create(dir.path().join("run")).unwrap();
        let socket = dir.path().join("run/np.sock");
        drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
        let state = dir.path().join("st/state.json");
        let start = |k: usize| {
            let mut cmd = Command::new(BIN);
            cmd.args(["daemon", "--config"]).arg(&config).arg("--socket").arg(&socket).arg("--state").arg(&state);
            if acting {
                // It acts (root, no dry run), on no process: none has this name.
                cmd.args(["--include", "np-none-such"]);
            } else {
                cmd.arg("--dry-run");
            }
            cmd.env("NOTIFY_SOCKET", &notify)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.path().join(format!("err{k}"))).unwrap())
                .spawn()
                .unwrap()
        };
        // Killed and reaped when dropped: a failing round leaves no daemon running.
        struct Both([Child; 2]);
        impl Drop for Both {
            fn drop(&mut self) {
                for d in &mut self.0 {
                    let _ = d.kill();
                    let _ = d.wait();
                }
            }
        }
        let mut both = Both([start(0), start(1)]);
        let daemons = &mut both.0;
        // The one that runs says so (READY=1 once its socket answers).
        let mut buf = [0u8; 1024];
        let n = manager.recv(&mut buf).unwrap_or_else(|e| panic!("round {round}: no daemon became ready: {e}"));
        let ready = String::from_utf8_lossy(&buf[..n]).into_owned();
        assert!(ready.starts_with("READY=1"), "round {round}: {ready}");
        let pid: u32 = ready.split_once("MAINPID=").and_then(|(_, p)| p.trim().parse().ok()).expect("MAINPID");
        let w = daemons.iter().position(|d| d.id() == pid).expect("the ready one is ours");
        let l = 1 - w;
        let t0 = Instant::now();
        let lost = loop {
            if let Some(st) = daemons[l].try_wait().unwrap() {
                break st;
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "round {round}: both daemons run");
            std::thread::sleep(Duration::from_millis(20));
        };
        let err = std::fs::read_to_string(dir.path().join(format!("err{l}"))).unwrap();
        assert_eq!(lost.code(), Some(75), "round {round}: {err}");
        let held = if acting {
            format!(
                "state file {}: in use by another numapilot daemon, pid {pid} (numapilot), which holds {}",
                state.display(),
                dir.path().join("st/.state.json.lock").display()
            )
        } else {
            format!(
                "control socket {}: in use by another numapilot daemon, pid {pid} (numapilot), which holds {}",
                socket.display(),
                dir.path().join("run/.np.sock.lock").display()
            )
        };
        let refusals: Vec<&str> = err.lines().filter(|l| l.contains("exit 75")).collect();
        assert!(refusals.len() == 1 && refusals[0].contains(&held), "round {round}: {err}");
        // The running one lost nothing: it runs, its socket answers, its locks are there.
        assert!(daemons[w].try_wait().unwrap().is_none(), "round {round}: the running daemon exited");
        let out = Command::new(BIN).args(["status", "--json", "--socket"]).arg(&socket).output().unwrap();
        assert!(out.status.success(), "round {round}: {}", String::from_utf8_lossy(&out.stderr));
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(status["pid"].as_u64(), Some(u64::from(pid)), "round {round}");
        assert!(dir.path().join("run/.np.sock.lock").exists(), "round {round}");
        assert_eq!(dir.path().join("st/.state.json.lock").exists(), acting, "round {round}");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        assert!(daemons[w].wait().unwrap().success(), "round {round}");
        // Its socket and the socket's lock go with it.
        assert!(!socket.exists() && !dir.path().join("run/.np.sock.lock").exists(), "round {round}");
    }
}

#[test]
fn advise_on_a_fixture_and_a_machine_file() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/rig-6.12-4node"));
    let out = Command::new(BIN).args(["advise", "--cpus", "1", "--mem", "100M", "--root"]).arg(root).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let nodes = String::from_utf8(out.stdout).unwrap();
    // One node id, usable as `numactl -N X -m X`.
    assert!(nodes.trim().parse::<u32>().is_ok(), "{nodes:?}");
    // Nothing fits: with --strict a failure; without, every node (the fixture's four), as numad -w
    // answers, and the reason on stderr.
    let out = Command::new(BIN)
        .args(["advise", "--cpus", "1", "--mem", "100T", "--strict", "--root"])
        .arg(root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing fits") && out.stdout.is_empty());
    let out = Command::new(BIN).args(["advise", "--cpus", "1", "--mem", "100T", "--root"]).arg(root).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "0-3\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nothing fits") && err.contains("advising every node the job can use, 0-3"), "{err}");
    let out = Command::new(BIN)
        .args(["advise", "--cpus", "1", "--mem", "100T", "--json", "--root"])
        .arg(root)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((v["fits"].as_bool(), v["advice"]["nodes"].as_str()), (Some(false), Some("0-3")), "{v}");
    assert!(v["why"].as_str().is_some_and(|w| w.contains("nothing fits")), "{v}");
    // One shape for every answer (there were three; review helper-55): the same keys when it fits.
    let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    let out = Command::new(BIN)
        .args(["advise", "--cpus", "1", "--mem", "1M", "--json", "--root"])
        .arg(root)
        .output()
        .unwrap();
    let fits: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(keys(&fits), keys(&v), "{fits}");
    assert_eq!((fits["fits"].as_bool(), fits["why"].is_null()), (Some(true), true), "{fits}");
    assert!(fits["source"].as_str().is_some_and(|s| s.starts_with("fixture ")), "{fits}");
    let out = Command::new(BIN).args(["advise", "--cpus", "1", "--mem", "100", "--root"]).arg(root).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--mem"));
    // The article's machine: 24 CPUs per node, distances 10/11/20. 30 CPUs need two nodes, and the
    // two of one socket (distance 11), not two across sockets (20).
    let machine = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../machines/article-4n96.toml"));
    let out = Command::new(BIN)
        .args(["advise", "--cpus", "30", "--mem", "1G", "--json", "--machine"])
        .arg(machine)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["advice"]["max_distance"], 11, "{v}");
    assert!(["0-1", "2-3"].contains(&v["advice"]["nodes"].as_str().unwrap()), "{v}");
    // A preset name works as --machine too (as for sim and replay).
    let out = Command::new(BIN).args(["advise", "--cpus", "30", "--machine", "article-4n96"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Node 1 has 849 MiB free: 1 CPU and 10 GiB fits on node 0 (49043 MiB free) alone.
    let out =
        Command::new(BIN).args(["advise", "--cpus", "1", "--mem", "10G", "--machine"]).arg(machine).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "0\n");
}

/// `numapilot advise` on this machine under `taskset -c LAST` (as in a container's cpuset): its
/// job would inherit one CPU, so the node is measured and offered with that one CPU only, and the
/// source says so; without it, the node's every CPU.
#[test]
fn advise_counts_only_the_cpus_the_launcher_may_use() {
    let Ok(t) = numapilot_topology::Topology::from_sysfs(Path::new("/")) else { return };
    let online = t.online_cpus();
    if online.len() < 2 || std::process::Command::new("taskset").arg("-V").output().is_err() {
        return;
    }
    let last = online.last().unwrap().to_string();
    let advise = |taskset: bool| {
        let mut c = if taskset {
            let mut c = Command::new("taskset");
            c.args(["-c", &last, BIN]);
            c
        } else {
            Command::new(BIN)
        };
        let out = c.args(["advise", "--cpus", "0", "--mem", "1M", "--json", "--no-daemon"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let narrow = advise(true);
    let cpus: u64 = narrow["nodes"].as_array().unwrap().iter().map(|n| n["cpus"].as_u64().unwrap()).sum();
    assert_eq!(cpus, 1, "{narrow}");
    assert!(narrow["source"].as_str().unwrap().contains(&format!("within this process's CPUs {last}")), "{narrow}");
    let wide = advise(false);
    let cpus: u64 = wide["nodes"].as_array().unwrap().iter().map(|n| n["cpus"].as_u64().unwrap()).sum();
    assert_eq!(cpus, online.len() as u64, "{wide}");
    assert!(!wide["source"].as_str().unwrap().contains("within"), "{wide}");
}

/// `numapilot advise` while a daemon runs: the client measures the machine and the daemon answers
/// (rule launch-advice) keeping its promise, so a second request for the same room gets nothing
/// where the first got a node; `--no-daemon` measures the machine alone; `--pid` needs the daemon.
#[test]
fn advise_asks_the_running_daemon_which_keeps_its_promise() {
    let mut d = Daemon::start("");
    d.wait_line("numapilot: started");
    let s = d.wait_status(|s| s["steps"].as_u64().unwrap() >= 1 || s["step_errors"].as_u64().unwrap() >= 3);
    assert!(s["steps"].as_u64().unwrap() >= 1, "no step: {s}");
    // 60% of the roomiest node's free memory as the client measures it (MemFree + reclaimable
    // page cache and slab, as the daemon's model counts it): one request fits, a second while the first is promised does not (the whole machine holds less
    // than two). Free memory can still fall under the request between the two measurements on a
    // shared machine, so a first request refused that way is made again, up to 3 times. The
    // second request is judged only when it came while the first's promise held (5 s from the
    // advice, LAUNCH_PROMISE_NS): a loaded machine can start the second client later, and then
    // the promise is let lapse (the status lists none) and the pair asked again, up to 3 times.
    let (mut tries, mut late) = (0, 0);
    let mut promised_at;
    let (mem, first, second) = loop {
        let measured = d.cli(&["advise", "--cpus", "0", "--mem", "1M", "--no-daemon", "--window-ms", "100", "--json"]);
        assert!(measured.status.success(), "{}", String::from_utf8_lossy(&measured.stderr));
        let m: serde_json::Value = serde_json::from_slice(&measured.stdout).unwrap();
        let free: Vec<u64> =
            m["nodes"].as_array().unwrap().iter().map(|n| n["mem_free_bytes"].as_u64().unwrap()).collect();
        let (max, total) = (*free.iter().max().unwrap(), free.iter().sum::<u64>());
        assert!(max * 6 / 10 * 2 > total, "a machine with several roomy nodes needs another test: {free:?}");
        let mem = format!("{}M", (max * 6 / 10) >> 20);
        let first = d.cli(&["advise", "--cpus", "0", "--mem", &mem, "--window-ms", "100", "--json"]);
        promised_at = Instant::now();
        tries += 1;
        if !first.status.success() {
            if tries == 3 || !String::from_utf8_lossy(&first.stderr).contains("nothing fits") {
                break (mem, first, None);
            }
            continue;
        }
        let second = d.cli(&["advise", "--cpus", "0", "--mem", &mem, "--window-ms", "100", "--strict"]);
        if promised_at.elapsed() < Duration::from_millis(4500) {
            break (mem, first, Some(second));
        }
        late += 1;
        assert!(late < 3, "timed out: no second request came within the first's 5 s promise in 3 tries");
        d.wait_status(|s| s["launch_promises"].as_array().is_some_and(|l| l.is_empty()));
        tries = 0;
    };
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let v: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    assert!(v["source"].as_str().unwrap().starts_with("the running daemon"), "{v}");
    assert_eq!(v["advice"]["reason"]["rule"], "launch-advice", "{v}");
    // The shape of every advise answer (review helper-55): the advised nodes' figures beside the
    // daemon's reason, fits, why.
    assert!(v["advice"]["mem_free_bytes"].as_u64().is_some() && v["advice"]["max_distance"].as_u64().is_some(), "{v}");
    assert_eq!((v["fits"].as_bool(), v["why"].is_null()), (Some(true), true), "{v}");
    assert!(v["nodes"].as_array().is_some_and(|n| !n.is_empty()), "the client's measurement is shown: {v}");
    let second = second.expect("asked once the first was advised");
    assert_eq!(second.status.code(), Some(1), "{second:?}");
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("nothing fits") && err.contains("the running daemon"), "{err}");
    // The refusal says what the first launch was promised, and status lists it (the promise holds
    // 5 s; a loaded host's status call could come later, so its absence alone is no failure).
    assert!(err.contains("promised to earlier launches: a launch without a pid on nodes"), "{err}");
    let s = d.status_json();
    let listed = s["launch_promises"].as_array().unwrap();
    // Published as the advice was given; held 5 s (LAUNCH_PROMISE_NS).
    if promised_at.elapsed() < Duration::from_secs(4) {
        assert_eq!(listed.len(), 1, "{s}");
    }
    assert!(listed.iter().all(|l| l.as_str().unwrap().starts_with("a launch without a pid")), "{s}");
    // Without --strict the job still gets an answer: every node, as numad -w gives (while the first
    // promise holds: 5 s, which a loaded host's calls can outlast).
    let third = d.cli(&["advise", "--cpus", "0", "--mem", &mem, "--window-ms", "100"]);
    assert!(third.status.success(), "{third:?}");
    let err = String::from_utf8_lossy(&third.stderr);
    if promised_at.elapsed() < Duration::from_secs(4) {
        assert!(err.contains("the running daemon") && err.contains("advising every node the job can use"), "{err}");
    }
    // A --pid that names no process is refused before the daemon is asked.
    let out = d.cli(&["advise", "--cpus", "0", "--mem", "1M", "--pid", "4000000000", "--window-ms", "100"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--pid 4000000000: no such process"), "{out:?}");
    // A pid the daemon never manages gets no promise, said why (each was promised room; review
    // helper-55): init, a kernel thread, the daemon, a thread id of a process.
    let daemon_pid = d.child.id().to_string();
    let tid = std::fs::read_dir(format!("/proc/{daemon_pid}/task"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|t| *t != daemon_pid)
        .expect("the daemon has threads");
    for (pid, why) in [
        ("1", "init: never managed"),
        ("2", "a kernel thread: never managed"),
        (daemon_pid.as_str(), "numapilot itself: never managed"),
        (tid.as_str(), &format!("a thread of process {daemon_pid}, not a process") as &str),
    ] {
        let out = d.cli(&["advise", "--cpus", "0", "--mem", "1M", "--pid", pid, "--window-ms", "100"]);
        assert_eq!(out.status.code(), Some(1), "--pid {pid}: {out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("--pid {pid}: {why}")), "--pid {pid}: {out:?}");
    }
    // Asked again for one pid, the new promise replaces the old: not charged against it (the
    // second of two same-pid asks was refused for the first's room; review helper-55).
    // Half the first request (30% of the roomiest node): it fits beside the first launch's promise
    // once, not twice.
    let half = format!("{}M", mem.trim_end_matches('M').parse::<u64>().unwrap() / 2);
    let mut job = Command::new("sleep").arg("30").spawn().unwrap();
    let job_pid = job.id().to_string();
    for n in 0..2 {
        let out =
            d.cli(&["advise", "--cpus", "0", "--mem", &half, "--pid", &job_pid, "--window-ms", "100", "--strict"]);
        assert!(out.status.success(), "ask {n} for pid {job_pid}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let _ = job.kill();
    let _ = job.wait();
    // The machine itself, measured: the room is there (nothing was started).
    let measured = d.cli(&["advise", "--cpus", "0", "--mem", &mem, "--no-daemon", "--window-ms", "100", "--json"]);
    assert!(measured.status.success(), "{}", String::from_utf8_lossy(&measured.stderr));
    let v: serde_json::Value = serde_json::from_slice(&measured.stdout).unwrap();
    assert!(v["source"].as_str().unwrap().starts_with("this machine"), "{v}");
    // --pid: the daemon's promise to a process; with no daemon, or offline, an error.
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["advise", "--cpus", "1", "--pid", "4242", "--socket"])
        .arg(dir.path().join("none.sock"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--pid needs the running daemon"), "{out:?}");
    let out = Command::new(BIN)
        .args(["advise", "--cpus", "1", "--pid", "4242", "--machine", "article-4n96"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not with --machine or --root"), "{out:?}");
}

/// `numapilot advise` while a daemon that reserves CPU 0 runs, under `taskset`: the figures the
/// client prints are those the daemon advised from, its view within the client's reach, the same
/// nodes in the text and JSON answers; and when nothing fits, those it refused by, in its reason
/// and in the JSON alike.
///
/// ```text
///   taskset -c 0 (only the reserved CPU): node 0 has no CPU the job may use; a request for 0.1 CPU
///                fits nowhere (it got node 0 for CPU 0's idle time: the daemon counted
///                min(1 measured, 1 usable) CPUs), and node 0 shows 0 CPUs, in the answer that
///                fits and the one that does not (the client showed its 1 when nothing fit)
///   taskset -c 1: 1 GiB asked, then 1 MiB: the second answer's figures are node 0 less the
///                first promise, as its reason says (the client showed its own measurement);
///                then 1 PiB: nothing fits, and the figures shown are those less the promise too
/// ```
#[test]
fn advise_shows_the_daemons_figures_within_the_clients_reach() {
    let Ok(t) = numapilot_topology::Topology::from_sysfs(Path::new("/")) else { return };
    if t.online_cpus().iter().take(2).collect::<Vec<_>>() != [0, 1]
        || std::process::Command::new("taskset").arg("-V").output().is_err()
    {
        eprintln!("needs CPUs 0 and 1 online and taskset: skipped");
        return;
    }
    let mut d = Daemon::start("[actuation]\nreserved_cpus = \"0\"\n");
    d.wait_line("numapilot: started");
    let s = d.wait_status(|s| s["steps"].as_u64().unwrap() >= 1 || s["step_errors"].as_u64().unwrap() >= 3);
    assert!(s["steps"].as_u64().unwrap() >= 1, "no step: {s}");
    let on = |cpu: &str, args: &[&str]| {
        Command::new("taskset")
            .args(["-c", cpu, BIN, "advise", "--window-ms", "100", "--socket"])
            .arg(&d.socket)
            .args(args)
            .output()
            .unwrap()
    };
    let json = |out: &std::process::Output| -> serde_json::Value {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let nodes_of = |v: &serde_json::Value| -> Vec<u64> {
        let list = v["advice"]["nodes"].as_str().unwrap();
        numapilot_topology::NodeSet::parse_list(list).unwrap().iter().map(u64::from).collect()
    };
    let node0 =
        |v: &serde_json::Value| v["nodes"].as_array().unwrap().iter().find(|n| n["node"] == 0).cloned().unwrap();

    // Each node's figures as the reason of a refusal says them ("node N: C CPUs, M MiB").
    let said_in_why = |v: &serde_json::Value| {
        let why = v["why"].as_str().unwrap();
        for n in v["nodes"].as_array().unwrap() {
            let said = format!(
                "node {}: {:.1} CPUs, {} MiB",
                n["node"],
                n["free_cpus"].as_f64().unwrap(),
                n["mem_free_bytes"].as_u64().unwrap() >> 20
            );
            assert!(why.contains(&said), "the reason does not say the figures shown ({said}): {v}");
        }
    };

    // Only the reserved CPU within reach: no CPU of node 0 for the job. Nothing fits, and the
    // figures shown are the daemon's, as its reason says them: node 0 with no CPU.
    let v = json(&on("0", &["--cpus", "0.1", "--mem", "1M", "--json"]));
    assert_eq!(v["fits"], false, "{v}");
    assert_eq!((node0(&v)["cpus"].as_u64(), node0(&v)["free_cpus"].as_f64()), (Some(0), Some(0.0)), "{v}");
    assert!(v["source"].as_str().unwrap().contains("figures the daemon's"), "{v}");
    assert_eq!(v["advice"]["free_cpus"].as_f64(), Some(0.0), "{v}");
    said_in_why(&v);
    let out = on("0", &["--cpus", "0.1", "--mem", "1M", "--strict"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nothing fits") && err.contains("node 0: 0.0 CPUs"), "{out:?}");
    let out = on("0", &["--cpus", "0.1", "--mem", "1M"]);
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("node 0: 0.0 CPUs") && err.contains("advising every node"), "{out:?}");
    let v = json(&on("0", &["--cpus", "0", "--mem", "1M", "--json"]));
    assert_eq!(v["advice"]["reason"]["rule"], "launch-advice", "{v}");
    assert_eq!((node0(&v)["cpus"].as_u64(), node0(&v)["free_cpus"].as_f64()), (Some(0), Some(0.0)), "{v}");
    assert_eq!(v["advice"]["free_cpus"].as_f64(), Some(0.0), "{v}");
    assert!(v["source"].as_str().unwrap().contains("figures the daemon's"), "{v}");
    let text = on("0", &["--cpus", "0", "--mem", "1M"]);
    assert!(text.status.success(), "{text:?}");
    assert_eq!(String::from_utf8_lossy(&text.stdout).trim(), v["advice"]["nodes"].as_str().unwrap());

    // Within reach (CPU 1): a promise of 1 GiB, then the figures of the next answer are less it,
    // as the daemon's reason says.
    let first = json(&on("1", &["--cpus", "0", "--mem", "1G", "--json"]));
    assert_eq!(first["fits"], true, "{first}");
    let v = json(&on("1", &["--cpus", "0", "--mem", "1M", "--json"]));
    let detail = v["advice"]["reason"]["detail"].as_str().unwrap().to_string();
    let said = detail.split(" have ").nth(1).unwrap_or_else(|| panic!("{detail}"));
    let (cpus, rest) = said.split_once(" free CPUs and ").unwrap();
    let mib: u64 = rest.split_once(" MiB free").unwrap().0.parse().unwrap();
    let advice = &v["advice"];
    assert_eq!(format!("{:.1}", advice["free_cpus"].as_f64().unwrap()), cpus, "{v}");
    assert_eq!(advice["mem_free_bytes"].as_u64().unwrap() >> 20, mib, "{v}");
    // The advice adds up from the nodes shown.
    let shown: u64 = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| nodes_of(&v).contains(&n["node"].as_u64().unwrap()))
        .map(|n| n["mem_free_bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(advice["mem_free_bytes"].as_u64(), Some(shown), "{v}");
    assert_eq!(node0(&v)["cpus"].as_u64(), Some(1), "CPU 1, usable and within reach: {v}");

    // Nothing fits while the promises hold: the figures shown are less them too, as the reason says.
    let no = json(&on("1", &["--cpus", "1", "--mem", "1000T", "--json"]));
    assert_eq!(no["fits"], false, "{no}");
    // One CPU is said as one ("need 1 CPUs" before).
    assert!(no["why"].as_str().unwrap().contains("nothing fits: need 1 CPU and "), "{no}");
    assert!(no["source"].as_str().unwrap().contains("figures the daemon's"), "{no}");
    assert!(no["why"].as_str().unwrap().contains("less its promises"), "{no}");
    assert_eq!(node0(&no)["cpus"].as_u64(), Some(1), "{no}");
    said_in_why(&no);
}

/// `numapilot advise` asking a daemon from before the figures were sent (a stand-in answering as it
/// did: the advice without `free`, a refusal with only its reason): the client shows its own
/// measurement and the source says so, whether the request fits or not.
#[test]
fn advise_from_a_daemon_that_sends_no_figures_shows_the_clients_own() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("old.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let answers = [
        r#"{"ok":true,"advice":{"nodes":"0","reason":{"rule":"launch-advice","detail":"an older daemon"}}}"#,
        r#"{"ok":false,"error":"nothing fits: need 1 CPU and 1 MiB; free as measured by the client, before the daemon's promises: node 0: 0.0 CPUs, 0 MiB"}"#,
    ];
    let server = std::thread::spawn(move || {
        for answer in answers {
            let (stream, _) = listener.accept().unwrap();
            let mut line = String::new();
            BufReader::new(&stream).read_line(&mut line).unwrap();
            assert!(line.contains(r#""cmd":"advise""#), "{line}");
            writeln!(&stream, "{answer}").unwrap();
        }
    });
    let ask = || {
        let out = Command::new(BIN)
            .args(["advise", "--cpus", "1", "--mem", "1M", "--window-ms", "100", "--json", "--socket"])
            .arg(&socket)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    // The CPUs this client counts per node, measured alone (the stand-in's refusal said node 0
    // has none: not shown).
    let counted = |v: &serde_json::Value| -> Vec<(u64, u64)> {
        v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| (n["node"].as_u64().unwrap(), n["cpus"].as_u64().unwrap()))
            .collect()
    };
    let out = Command::new(BIN)
        .args(["advise", "--cpus", "0", "--mem", "1M", "--window-ms", "100", "--json", "--no-daemon"])
        .output()
        .unwrap();
    let alone = counted(&serde_json::from_slice(&out.stdout).unwrap());
    assert!(alone.iter().any(|&(_, c)| c > 0), "{alone:?}");
    for fits in [true, false] {
        let v = ask();
        assert_eq!(v["fits"], fits, "{v}");
        assert!(v["source"].as_str().unwrap().ends_with("figures as measured here (the daemon sent none)"), "{v}");
        assert_eq!(counted(&v), alone, "{v}");
    }
    server.join().unwrap();
}

#[test]
fn advise_refuses_a_bad_request_or_window_before_measuring() {
    // Each refused at once (no measuring window first), naming the flag.
    for (args, flag) in [
        (&["advise", "--cpus=-1"][..], "--cpus"),
        (&["advise", "--cpus", "inf"][..], "--cpus"),
        // Beyond any machine: an error naming the value, not a request that does not fit (it was
        // answered with every node and exit 0; a user trial).
        (
            &["advise", "--cpus", "1e300", "--no-daemon"][..],
            "--cpus 1e300: more CPUs than a machine can have (at most 65536)",
        ),
        (&["advise", "--cpus", "65536.5", "--machine", "article-4n96"][..], "--cpus 65536.5: more CPUs"),
        (&["advise", "--cpus", "1", "--window-ms", "0"][..], "--window-ms"),
        (&["advise", "--cpus", "1", "--window-ms", "99999999999"][..], "--window-ms"),
        // 16 EiB and up overflowed the bytes (a panic; review helper-55).
        (
            &["advise", "--cpus", "1", "--no-daemon", "--mem", "18014398509481984K"][..],
            "--mem 18014398509481984K: is too large",
        ),
        (&["advise", "--cpus", "1", "--no-daemon", "--mem", "16777216T"][..], "--mem 16777216T: is too large"),
    ] {
        let out = Command::new(BIN).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag) && !err.contains("nothing fits"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// `advise --config FILE` asks the socket the file names, as `status` and `explain` do (the file
/// said advise reads it, and `--config` was an unknown argument; review helper-103): here a socket
/// no daemon listens on, said on stderr before this machine is measured. A file named that is
/// missing is an error naming it, and nothing is measured or printed.
#[test]
fn advise_takes_the_socket_from_the_config_file_it_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("from-config.sock");
    // Bound, then closed: a socket file nothing listens on.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let config = dir.path().join("np.toml");
    std::fs::write(&config, format!("[daemon]\nsocket = \"{}\"\n", socket.display())).unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    let advise = |cfg: &Path| {
        Command::new(BIN)
            .args(["advise", "--cpus", "0", "--mem", "1M", "--window-ms", "100", "--config"])
            .arg(cfg)
            .output()
            .unwrap()
    };
    let out = advise(&config);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains(&socket.display().to_string()) && err.contains("measuring this machine alone"), "{err}");
    assert!(!out.stdout.is_empty());
    let missing = dir.path().join("missing.toml");
    let out = advise(&missing);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("{}: cannot read: No such file", missing.display())), "{err}");
    assert!(out.stdout.is_empty(), "{err}");
    // A file advise would not read is refused with what makes it so.
    let out = Command::new(BIN)
        .args(["advise", "--cpus", "1", "--machine", "article-4n96", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("'--machine <PRESET|FILE>' cannot be used with '--config <FILE>'"),
        "{out:?}"
    );
}

#[test]
fn the_systemd_unit_verifies() {
    let unit = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../packaging/numapilot.service"));
    let text = std::fs::read_to_string(unit).unwrap();
    // The keys that make shutdown restore and the daemon restart on failure.
    for key in [
        "ExecStart=/usr/local/bin/numapilot daemon",
        "KillSignal=SIGTERM",
        "Restart=on-failure",
        "Type=notify",
        "ExecReload=/bin/kill -HUP $MAINPID",
    ] {
        assert!(text.lines().any(|l| l == key), "{key} missing");
    }
    let mut section = "";
    for line in text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        if line.starts_with('[') {
            section = line;
            assert!(["[Unit]", "[Service]", "[Install]"].contains(&section), "{line}");
        } else {
            assert!(!section.is_empty() && line.contains('='), "{line}");
        }
    }
    let Ok(status) = Command::new("systemd-analyze").arg("--version").output() else {
        eprintln!("systemd-analyze not installed: checked the keys only");
        return;
    };
    assert!(status.status.success());
    // systemd-analyze verify needs the executables to exist: point them at the built binary.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("numapilot.service");
    std::fs::write(&copy, text.replace("/usr/local/bin/numapilot", BIN)).unwrap();
    // It checks the Documentation= pages too: the manual tree `numapilot man --out` writes, as an
    // install puts it under /usr/local/share/man.
    let man = dir.path().join("man");
    assert!(Command::new(BIN).args(["man", "--out"]).arg(&man).status().unwrap().success());
    let out = Command::new("systemd-analyze").arg("verify").arg(&copy).env("MANPATH", &man).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // Unknown keys are only warnings (exit 0): no line may mention the file.
    assert!(!err.contains("numapilot.service"), "{err}");
}

#[test]
fn non_root_observes_only_and_says_so_once() {
    const NOBODY: u32 = 65534;
    let mut d = Daemon::start_as("", Some(NOBODY));
    d.wait_line("numapilot: started");
    let s = d.wait_status(|s| s["steps"].as_u64().unwrap() >= 1);
    assert_eq!(s["dry_run"], true);
    assert_eq!(s["observe_only_reason"], "not running as root");
    let mode = std::fs::metadata(&d.socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let status = d.stop_with(libc::SIGTERM, "SIGTERM");
    assert!(status.success(), "{status:?}");
    d.wait_line("stopped (SIGTERM)");
    let about_root = d.seen.iter().filter(|l| l.contains("not running as root")).count();
    assert_eq!(about_root, 1, "{}", d.seen.join("\n"));
}

fn cpus_allowed(pid: u32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).unwrap().trim().to_string()
}

#[test]
fn start_after_a_crash_restores_from_the_state_file_and_says_so() {
    let all = cpus_allowed(std::process::id());
    if all == "0" {
        eprintln!("one CPU: nothing to narrow, skipped");
        return;
    }
    // A process as a crashed daemon left it: narrowed to CPU 0, its original in the state file.
    let mut target = Command::new("sleep").arg("300").spawn().unwrap();
    let pid = target.id();
    // SAFETY: a zeroed cpu_set_t with CPU 0 set, for our own child.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        assert_eq!(libc::sched_setaffinity(pid as i32, std::mem::size_of::<libc::cpu_set_t>(), &set), 0);
    }
    assert_eq!(cpus_allowed(pid), "0");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let starttime: u64 = stat.rsplit(')').next().unwrap().split_whitespace().nth(19).unwrap().parse().unwrap();
    let mut d = Daemon::start("");
    // Daemon::start wrote the config; the state file path is in it. Stop this one first: the state
    // file must be in place before a daemon opens the live host.
    d.wait_line("numapilot: started");
    d.signal(libc::SIGTERM);
    let _ = d.child.wait();
    let state = d.dir.path().join("state.json");
    std::fs::write(
        &state,
        format!(
            "{{\"version\":1,\"processes\":[{{\"pid\":{pid},\"starttime\":{starttime},\"comm\":\"sleep\",\
             \"default_cpus\":\"{all}\",\"threads\":{{}},\"cpuset\":null}}]}}"
        ),
    )
    .unwrap();
    // Starts a daemon on the state file, reads its log up to "started", notes the target's CPUs,
    // stops it (SIGTERM).
    let start = |extra: &[&str]| {
        let mut child = Command::new(BIN)
            .arg("daemon")
            .args(extra)
            .args(["--metrics", "off", "--config"])
            .arg(&d.config)
            .arg("--socket")
            .arg(&d.socket)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut seen = String::new();
        let mut line = String::new();
        while err.read_line(&mut line).unwrap() > 0 {
            seen.push_str(&line);
            if line.contains("numapilot: started") {
                break;
            }
            line.clear();
        }
        let now = cpus_allowed(pid);
        // SAFETY: our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        assert!(child.wait().unwrap().success());
        (seen, now)
    };
    // A dry run does not act, restoring included: the record stays for a start that acts.
    let (seen, now) = start(&["--dry-run"]);
    assert!(seen.contains("1 record of an earlier run left as it is (this start changes no process"), "{seen}");
    assert_eq!(now, "0");
    assert!(std::fs::read_to_string(&state).unwrap().contains(&format!("\"pid\":{pid}")));
    let (seen, restored) = start(&[]);
    let _ = target.kill();
    let _ = target.wait();
    assert!(seen.contains("recovered from an unclean shutdown: restored 1 process (and "), "{seen}");
    assert_eq!(restored, all);
    let journal = std::fs::read_to_string(d.dir.path().join("journal.jsonl")).unwrap();
    assert!(
        journal
            .lines()
            .any(|l| l.contains("\"rule\":\"recovery at start\"") && l.contains("restored 1, inherited 0, gone 0")),
        "{journal}"
    );
}

#[test]
fn non_root_with_root_paths_gets_one_error_and_a_hint() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j.jsonl"); // root's temporary directory: not writable by nobody
                                              // A socket path nobody can bind (in a directory of nobody's), so the journal is what is
                                              // refused, after the socket is bound.
    let theirs = dir.path().join("nobodys");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    // nobody may pass through root's directory to its own, not make files in it.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let socket = theirs.join("np.sock");
    // The state file in nobody's directory too: the default one is root's, and a state file a root
    // daemon left there (this host's, or an earlier test's) was refused first (a CI run read
    // "state file /run/numapilot/state.json: cannot read").
    let out = Command::new(BIN)
        .uid(65534)
        .gid(65534)
        .args(["daemon", "--metrics", "off", "--config", "/dev/null", "--socket"])
        .arg(&socket)
        .arg("--state")
        .arg(theirs.join("state.json"))
        .arg("--journal")
        .arg(&journal)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("Permission denied").count(), 1, "{err}");
    assert!(err.contains(&format!("journal {}", journal.display())), "{err}");
    assert!(err.contains("give writable paths with --journal, --state and --socket"), "{err}");
    assert!(err.contains(&format!("journal {}: Permission denied", journal.display())), "{err}");
    assert!(!socket.exists(), "the refused daemon's socket is gone");
}

/// `daemon --check` says when metrics would be served to other hosts (an address that is not
/// loopback, in the file or by `--metrics`), as the start does; loopback and `off` say nothing.
#[test]
fn daemon_check_warns_of_metrics_other_hosts_can_reach() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("np.toml");
    let check = |metrics: &str, flags: &[&str]| -> String {
        std::fs::write(
            &config,
            format!(
                "[daemon]\njournal = \"\"\nstate = \"{}\"\nsocket = \"{}\"\nmetrics = \"{metrics}\"\n",
                dir.path().join("state.json").display(),
                dir.path().join("np.sock").display()
            ),
        )
        .unwrap();
        let o = Command::new(BIN).args(["daemon", "--check", "--config"]).arg(&config).args(flags).output().unwrap();
        assert!(o.status.success(), "{metrics} {flags:?}: {o:?}");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let warned = "are served to every host that can reach this one, without authentication";
    let err = check("0.0.0.0:9469", &[]);
    assert!(err.contains("numapilot: warning: metrics on 0.0.0.0:9469 (every address of this host)"), "{err}");
    assert!(err.contains(warned), "{err}");
    let err = check("127.0.0.1:9469", &["--metrics", "192.0.2.1:9469"]);
    assert!(
        err.contains("metrics on 192.0.2.1:9469 (an address other hosts may reach)") && err.contains(warned),
        "{err}"
    );
    for (metrics, flags) in
        [("127.0.0.1:9469", &[][..]), ("[::1]:9469", &[]), ("off", &[]), ("0.0.0.0:9469", &["--metrics", "off"])]
    {
        let err = check(metrics, flags);
        assert!(!err.contains(warned), "{metrics} {flags:?}: {err}");
    }
}

/// The control socket is root's twice over: another user is kept out by its 0600 mode and 0700
/// directory, and, were those opened up (an operator's chmod, a socket passed on), by the daemon's
/// own `SO_PEERCRED` check on every connection, which answers only "permission denied" and
/// nothing of the state. A user's `numapilot status` exits non-zero either way.
#[test]
fn another_user_gets_nothing_from_the_control_socket() {
    use std::os::unix::process::CommandExt;
    let mut d = Daemon::start("");
    d.wait_line("numapilot: started");
    d.wait_status(|s| s["steps"].as_u64().unwrap() >= 1);
    // Search permission on every directory above the socket, so only the socket's own directory
    // and mode keep uid 65534 out (the temporary directory is 0700).
    let run = d.socket.parent().unwrap();
    let mut p = run.parent().unwrap();
    loop {
        let mode = std::fs::metadata(p).unwrap().permissions().mode();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode | 0o011)).unwrap();
        if p == d.dir.path() {
            break;
        }
        p = p.parent().unwrap();
    }
    let as_nobody = || {
        Command::new(BIN).args(["status", "--json", "--socket"]).arg(&d.socket).uid(65534).gid(65534).output().unwrap()
    };
    let out = as_nobody();
    assert!(!out.status.success(), "a user read the status through a 0600 socket: {out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    // The file modes opened up: the daemon itself refuses the user.
    std::fs::set_permissions(run, std::fs::Permissions::from_mode(0o711)).unwrap();
    std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = as_nobody();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a user read the status: {out:?}");
    assert!(err.contains("permission denied: uid 65534 is not root"), "{err}");
    assert!(out.stdout.is_empty() && !err.contains("steps"), "{out:?}");
    // Root still gets its answer.
    assert!(d.cli(&["status"]).status.success());
}
