//! numapilot-wakeups: proves the wake-up tracer on a live kernel.
//!
//! Opens the tracer, starts a child process (this binary again, `--child N`) whose two threads play ping-pong on
//! a futex until each has woken the other at least N times, as counted by the kernel itself (FUTEX_WAKE returns
//! how many waiters it woke, so a hand-off to a thread that had not yet gone to sleep is not counted), then
//! drains the tracer while the child is still alive, and prints one JSON object: the child's pid and thread ids,
//! its own wake counts, the drained pairs involving the child, and the CommSamples they become.
//!
//! ```text
//!   numapilot-wakeups [--round-trips N] [--max-pairs M] [--mount-tracefs]
//! ```
//!
//! Exit 0 with the JSON on success; 1 with the error on stderr when the tracer cannot be opened or the child
//! fails. It does not judge the counts: the tests (crates/ebpf/tests/host.rs, crates/rig/tests/ebpf.rs) do.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use numapilot_ebpf::{to_comm_samples, TracerOptions, WakeupTracer};
use serde::{Deserialize, Serialize};

/// Default wake-ups each thread must perform, N. Default 1000: enough that a broken count (off by one, one
/// direction missing) cannot pass a `>= N` check by luck, few enough to take well under a second under emulation.
const DEFAULT_ROUND_TRIPS: u64 = 1000;

/// Hand-offs the child may take to reach N real wake-ups each way, as a multiple of N. Default 100: on an idle
/// machine most hand-offs wake a sleeping thread; the bound only stops a pathological spin forever.
const MAX_HANDOFF_FACTOR: u64 = 100;

/// Pause before each hand-off, so the other thread is asleep in futex_wait when it is woken. 20 us (timer slack
/// makes it ~70 us): far longer than the few instructions from the turn check to the syscall.
const HANDOFF_PAUSE: std::time::Duration = std::time::Duration::from_micros(20);

#[derive(Debug, Serialize, Deserialize)]
struct ChildReport {
    pid: u32,
    ping_tid: u32,
    pong_tid: u32,
    round_trips: u64,
    ping_woke_pong: u64,
    pong_woke_ping: u64,
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}

fn futex_wait(word: &AtomicU32, expected: u32) {
    // SAFETY: word is a valid aligned u32 for the duration of the call; a null timeout waits indefinitely. EAGAIN
    // (value changed) and EINTR are handled by the caller's loop.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            std::ptr::null::<libc::timespec>(),
        );
    }
}

/// Wakes one waiter; returns how many were woken (0 or 1).
fn futex_wake(word: &AtomicU32) -> u64 {
    // SAFETY: as in futex_wait.
    let r = unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1) };
    r.max(0) as u64
}

/// The child: two threads hand a turn back and forth until each has woken the other `n` times.
fn child(n: u64) -> Result<(), String> {
    let turn = Arc::new(AtomicU32::new(0)); // 0: ping's turn, 1: pong's turn
    let stop = Arc::new(AtomicBool::new(false));
    let pong_woke = Arc::new(AtomicU64::new(0));
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (ack_tx, ack_rx) = std::sync::mpsc::channel::<()>();
    let (exit_tx, exit_rx) = std::sync::mpsc::channel::<()>();
    let pong = {
        let (turn, stop, pong_woke) = (turn.clone(), stop.clone(), pong_woke.clone());
        std::thread::spawn(move || {
            let _ = tid_tx.send(gettid());
            loop {
                while turn.load(Ordering::Acquire) != 1 {
                    futex_wait(&turn, 0);
                }
                if stop.load(Ordering::Acquire) {
                    // Counts are final; stay alive (this tid in /proc) until the parent has drained.
                    let _ = ack_tx.send(());
                    let _ = exit_rx.recv();
                    return;
                }
                // Give ping time to reach futex_wait, so this hand-off is a real wake-up (without the pause a
                // busy ping on the other CPU re-checks the word first and FUTEX_WAKE finds nobody: seen under load,
                // 0 of 100 hand-offs woke ping).
                std::thread::sleep(HANDOFF_PAUSE);
                turn.store(0, Ordering::Release);
                pong_woke.fetch_add(futex_wake(&turn), Ordering::Relaxed);
            }
        })
    };
    let pong_tid = tid_rx.recv().map_err(|_| "pong thread died before reporting its tid".to_string())?;
    let mut ping_woke = 0;
    let mut round_trips = 0;
    let limit = n.saturating_mul(MAX_HANDOFF_FACTOR);
    loop {
        while turn.load(Ordering::Acquire) != 0 {
            futex_wait(&turn, 1);
        }
        if (ping_woke >= n && pong_woke.load(Ordering::Relaxed) >= n) || round_trips >= limit {
            stop.store(true, Ordering::Release);
            turn.store(1, Ordering::Release);
            futex_wake(&turn);
            break;
        }
        round_trips += 1;
        std::thread::sleep(HANDOFF_PAUSE);
        turn.store(1, Ordering::Release);
        ping_woke += futex_wake(&turn);
    }
    ack_rx.recv().map_err(|_| "pong thread died before stopping".to_string())?;
    let report = ChildReport {
        pid: std::process::id(),
        ping_tid: gettid(),
        pong_tid,
        round_trips,
        ping_woke_pong: ping_woke,
        pong_woke_ping: pong_woke.load(Ordering::Relaxed),
    };
    if report.ping_woke_pong < n || report.pong_woke_ping < n {
        return Err(format!("only {report:?} after {limit} hand-offs"));
    }
    let line = serde_json::to_string(&report).map_err(|e| e.to_string())?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|_| out.flush()).map_err(|e| format!("writing the report: {e}"))?;
    // Stay alive (both threads) until the parent has drained and closes our stdin: the
    // pairs are mapped to processes through /proc/TID, which a vanished thread no longer has.
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    drop(exit_tx);
    pong.join().map_err(|_| "pong thread panicked".to_string())
}

fn parent(n: u64, opts: &TracerOptions) -> Result<serde_json::Value, String> {
    let mut tracer = WakeupTracer::open(opts).map_err(|e| e.to_string())?;
    let exe = std::env::current_exe().map_err(|e| format!("finding our own executable: {e}"))?;
    let mut ch = Command::new(&exe)
        .args(["--child", &n.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting the child {}: {e}", exe.display()))?;
    let mut line = String::new();
    let stdout = ch.stdout.take().ok_or("child has no stdout")?;
    BufReader::new(stdout).read_line(&mut line).map_err(|e| format!("reading the child's report: {e}"))?;
    let drained = tracer.drain();
    let report: Result<ChildReport, String> =
        serde_json::from_str(&line).map_err(|e| format!("child report {line:?} is not valid: {e}"));
    // Samples are computed while the child still lives (its threads must be in /proc).
    let samples = drained.as_ref().ok().map(|d| to_comm_samples(&d.pairs));
    drop(ch.stdin.take());
    let status = ch.wait().map_err(|e| format!("waiting for the child: {e}"))?;
    if !status.success() {
        return Err(format!("the child failed ({status})"));
    }
    let report = report?;
    let drained = drained.map_err(|e| e.to_string())?;
    let tids = [report.ping_tid, report.pong_tid];
    let mine = |a: u32, b: u32| tids.contains(&a) || tids.contains(&b);
    let child_pairs: Vec<_> = drained.pairs.iter().filter(|p| mine(p.waker_tid, p.wakee_tid)).collect();
    let child_samples: Vec<_> =
        samples.unwrap_or_default().into_iter().filter(|s| s.a.0 == report.pid || s.b.0 == report.pid).collect();
    Ok(serde_json::json!({
        "child": report,
        "max_pairs": tracer.max_pairs(),
        "pairs_total": drained.pairs.len(),
        "dropped": drained.dropped,
        "child_pairs": child_pairs,
        "samples": child_samples,
    }))
}

fn usage() -> String {
    "usage: numapilot-wakeups [--round-trips N] [--max-pairs M] [--mount-tracefs]".to_string()
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let mut n = DEFAULT_ROUND_TRIPS;
    let mut opts = TracerOptions::default();
    let number = |flag: &str, v: Option<String>| -> Result<u64, String> {
        let v = v.ok_or_else(|| format!("{flag} needs a value; {}", usage()))?;
        v.parse().map_err(|_| format!("{flag} {v:?}: not a non-negative integer"))
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--child" => return child(number("--child", args.next())?),
            "--round-trips" => n = number("--round-trips", args.next())?.max(1),
            "--max-pairs" => {
                let m = number("--max-pairs", args.next())?;
                opts.max_pairs = u32::try_from(m).map_err(|_| format!("--max-pairs {m}: too large"))?;
            }
            "--mount-tracefs" => opts.mount_tracefs = true,
            "-h" | "--help" => {
                println!("{}", usage());
                return Ok(());
            }
            other => return Err(format!("unknown argument {other:?}; {}", usage())),
        }
    }
    let v = parent(n, &opts)?;
    println!("{}", serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?);
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("numapilot-wakeups: {e}");
        std::process::exit(1);
    }
}
