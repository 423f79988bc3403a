//! Running a plan: start the workers, release them together, sample until they exit.
//!
//! # Approach
//!
//! ```text
//!   spawn worker 0 .. n-1 (separate processes)  -> read each one's {"ready"} line
//!   read start times; vmstat at start; "go" to every worker; t = 0
//!   loop every POLL (10 ms):
//!       reap exited workers (runtime = exit - t0), a failed one stops the run
//!       within the first interval: Recorder::sample each worker not sampled yet, kept once it
//!         sees all the worker's threads (they start after "go")
//!       at every interval: Recorder::sample each live worker, vmstat since t = 0
//!       past --timeout: kill the workers we started, mark the run timed out
//!   vmstat at end; each worker's {"done"} report from its stdout -> BenchResult
//! ```
//!
//! The parent keeps every `Child` and reaps it itself (`try_wait`), so a pid it samples or kills
//! is always one of its own unreaped children, never a reused pid. A worker that dies before it is
//! ready, or exits with an error, makes the whole run an error after the other workers are killed:
//! nothing keeps writing memory behind a failed run.
//!
//! Limits: runtimes are measured to [`POLL`]; the worker's own `runtime_s` (go to threads joined)
//! is exact and is what `mib_per_s` uses.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use numapilot_topology::Topology;

use crate::error::BenchError;
use crate::recorder::{Recorder, Watched};
use crate::result::{
    converge_by, converge_s, BenchResult, Config, Host, Migrated, ProcessResult, SamplePoint, VmstatPoint, SCHEMA,
};
use crate::spec::Plan;
use crate::worker::{Message, Ready, WorkerReport};

/// How often the parent looks for exited workers: 10 ms, the precision of the runtimes it
/// reports; cheap (one `waitpid(WNOHANG)` per worker).
pub const POLL: Duration = Duration::from_millis(10);

/// How to start a worker process: `program args... '<WorkerConfig JSON>'`.
#[derive(Debug, Clone)]
pub struct Launcher {
    /// The program (the numapilot binary).
    pub program: PathBuf,
    /// Arguments before the configuration (`["bench", "--worker"]`).
    pub args: Vec<OsString>,
}

/// How to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Sampling interval.
    pub interval: Duration,
    /// Kill the workers after this long.
    pub timeout: Option<Duration>,
    /// Root of the /proc and /sys trees read (`/`).
    pub root: PathBuf,
}

struct Worker {
    child: Child,
    stdout: BufReader<ChildStdout>,
    ready: Ready,
    watched: Watched,
    exited: Option<(f64, Option<i32>, bool)>,
    /// The signal that ended it, when one did.
    signal: Option<i32>,
    series: Vec<SamplePoint>,
}

impl Worker {
    /// Whether `s` may be this worker's first sample: it sees every worker thread the worker
    /// starts at "go". A sample taken at "go" itself mostly saw none, so it had no local share,
    /// and a process local from the start read converged only at the next sample, an interval
    /// later (`converge_s 1.0` on a one-node host; review helper-103).
    fn sees_its_threads(&self, s: &crate::recorder::ProcessSample) -> bool {
        s.thread_nodes.iter().sum::<u32>() as usize >= self.watched.threads.len()
    }
}

/// How a worker ended, for the error: a SIGKILL nobody here sent is most often the kernel's OOM
/// killer (a buffer larger than the memory left), so the message points there.
fn ended(status: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match status.signal() {
        Some(libc::SIGKILL) => format!("{status}: the kernel's OOM killer ends processes so, see dmesg"),
        _ => status.to_string(),
    }
}

fn kill_all(children: &mut [Child]) {
    for c in children.iter_mut() {
        let _ = c.kill();
        let _ = c.wait();
    }
}

fn mib(kb: &[u64]) -> Vec<f64> {
    kb.iter().map(|&k| k as f64 / 1024.0).collect()
}

/// Spawns one worker and waits for its `ready` line.
fn spawn(
    launcher: &Launcher,
    cfg_json: &str,
    index: usize,
) -> Result<(Child, BufReader<ChildStdout>, Ready), BenchError> {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    let mut command = Command::new(&launcher.program);
    command.args(&launcher.args).arg(cfg_json).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
    // The kernel kills the worker when this process ends, from before the worker's program runs
    // (the death signal survives the exec): set only in the worker, after its start-up, a parent
    // killed in between left an orphan first-touching its whole buffer (review helper-58: 2 of 30
    // runs killed 4-23 ms after the start). A parent gone before the prctl is seen by getppid.
    // SAFETY: between fork and exec the closure calls only async-signal-safe functions (prctl,
    // getppid, _exit) and allocates nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|e| BenchError::Io {
        what: "starting a worker",
        path: launcher.program.clone(),
        source: e,
    })?;
    let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    let read = stdout.read_line(&mut line);
    match (read, serde_json::from_str::<Message>(line.trim())) {
        (Ok(_), Ok(Message::Ready(r))) => Ok((child, stdout, r)),
        (_, _) => {
            // A worker that ended on its own (its stdout closed as it exited) is reaped as it
            // ended, given a second to; one still running is killed here.
            let t0 = Instant::now();
            let mut own = child.try_wait().ok().flatten();
            while own.is_none() && t0.elapsed() < Duration::from_secs(1) {
                std::thread::sleep(Duration::from_millis(10));
                own = child.try_wait().ok().flatten();
            }
            let status = match own {
                Some(s) => ended(&s),
                None => {
                    let _ = child.kill();
                    child.wait().map(|s| s.to_string()).unwrap_or_else(|e| e.to_string())
                }
            };
            let reason = if line.trim().is_empty() {
                // A worker that failed says why on stderr; one killed by a signal said nothing.
                let said = if status.contains("exit status") { "; its message is above" } else { "" };
                format!("exited before it was ready ({status}{said})")
            } else {
                format!("unexpected first line {:?} ({status})", line.trim())
            };
            Err(BenchError::Worker { index, reason })
        }
    }
}

/// Runs `plan` on machine `topo`, workers started by `launcher`.
pub fn run(plan: &Plan, topo: &Topology, launcher: &Launcher, opts: &RunOptions) -> Result<BenchResult, BenchError> {
    let recorder = Recorder::new(opts.root.clone(), topo);
    let numa_balancing = recorder.numa_balancing()?;
    let mut workers: Vec<Worker> = Vec::new();
    for cfg in &plan.processes {
        let json = serde_json::to_string(cfg).expect("plain struct");
        match spawn(launcher, &json, cfg.index) {
            Ok((child, stdout, ready)) => {
                let watched = Watched {
                    pid: ready.pid,
                    starttime: 0,
                    buffer: Some((ready.buffer_start, ready.buffer_len)),
                    threads: cfg.threads.iter().map(|t| (t.offset, t.len)).collect(),
                };
                workers.push(Worker { child, stdout, ready, watched, exited: None, signal: None, series: Vec::new() });
            }
            Err(e) => {
                let mut children: Vec<Child> = workers.into_iter().map(|w| w.child).collect();
                kill_all(&mut children);
                return Err(e);
            }
        }
    }
    for index in 0..workers.len() {
        match recorder.starttime(workers[index].ready.pid) {
            Ok(Some(st)) => workers[index].watched.starttime = st,
            Ok(None) | Err(_) => {
                let mut children: Vec<Child> = workers.into_iter().map(|w| w.child).collect();
                kill_all(&mut children);
                return Err(BenchError::Worker { index, reason: "vanished after it was ready".into() });
            }
        }
    }
    let start_counters = recorder.migrated()?;
    let t0 = Instant::now();
    let go_monotonic_s = numapilot_observe::reader::monotonic_ns() as f64 / 1e9;
    for (i, w) in workers.iter_mut().enumerate() {
        let mut stdin = w.child.stdin.take().expect("piped");
        if let Err(e) = stdin.write_all(b"go\n").and_then(|_| stdin.flush()) {
            let mut children: Vec<Child> = workers.into_iter().map(|w| w.child).collect();
            kill_all(&mut children);
            return Err(BenchError::Worker { index: i, reason: format!("could not be told to go: {e}") });
        }
    }
    let mut vmstat = Vec::new();
    let mut next_sample = t0;
    let mut timed_out = false;
    loop {
        let now = Instant::now();
        for (i, w) in workers.iter_mut().enumerate() {
            if w.exited.is_some() {
                continue;
            }
            let status = w.child.try_wait().map_err(|e| BenchError::Worker { index: i, reason: e.to_string() })?;
            if let Some(status) = status {
                use std::os::unix::process::ExitStatusExt as _;
                w.signal = status.signal();
                w.exited = Some(((now - t0).as_secs_f64(), status.code(), status.success()));
            }
        }
        if let Some(i) = workers.iter().position(|w| w.exited.is_some_and(|(_, _, ok)| !ok)) {
            let status = workers[i].exited.and_then(|(_, code, _)| code);
            let signal = workers[i].signal;
            let mut children: Vec<Child> = workers.into_iter().map(|w| w.child).collect();
            kill_all(&mut children);
            let how = match (status, signal) {
                (Some(c), _) => format!("exited with status {c}"),
                (None, Some(libc::SIGKILL)) => {
                    "was killed by SIGKILL (the kernel's OOM killer ends processes so, see dmesg)".to_string()
                }
                (None, Some(s)) => format!("was killed by signal {s}"),
                (None, None) => "was killed by a signal".to_string(),
            };
            // Only a worker that exited on its own printed why (one killed by a signal said nothing).
            let said = if status.is_some() { " (its message is above)" } else { "" };
            return Err(BenchError::Worker { index: i, reason: format!("{how}{said}") });
        }
        if workers.iter().all(|w| w.exited.is_some()) {
            break;
        }
        if opts.timeout.is_some_and(|t| now - t0 >= t) {
            timed_out = true;
            for w in workers.iter_mut().filter(|w| w.exited.is_none()) {
                let _ = w.child.kill();
                let status = w.child.wait().ok();
                w.exited = Some(((Instant::now() - t0).as_secs_f64(), status.and_then(|s| s.code()), true));
            }
            break;
        }
        let due = now >= next_sample;
        // Within the first interval a worker not sampled yet is sampled at every poll until a
        // sample sees its threads (`Worker::sees_its_threads`); the first due sample after that
        // takes whatever it sees.
        let first_interval = now < t0 + opts.interval;
        if due || first_interval {
            let t_s = (now - t0).as_secs_f64();
            for w in workers.iter_mut().filter(|w| w.exited.is_none() && (due || w.series.is_empty())) {
                if let Some(s) = recorder.sample(&w.watched)? {
                    if first_interval && w.series.is_empty() && !w.sees_its_threads(&s) {
                        continue;
                    }
                    let buffer_mib = mib(&s.buffer_kb);
                    let local_pct = SamplePoint::compute_local_pct(&buffer_mib, &s.thread_nodes);
                    w.series.push(SamplePoint {
                        t_s,
                        buffer_mib,
                        mem_mib: mib(&s.mem_kb),
                        thread_nodes: s.thread_nodes,
                        local_pct,
                        thread_local_pct: s.thread_local_pct,
                    });
                }
            }
            if due {
                vmstat.push(VmstatPoint { t_s, migrated: recorder.migrated()?.since(&start_counters) });
                next_sample += opts.interval;
                if next_sample <= Instant::now() {
                    next_sample = Instant::now() + opts.interval;
                }
            }
        }
        let wait = next_sample.saturating_duration_since(Instant::now()).min(POLL);
        std::thread::sleep(wait);
    }
    let migrated: Migrated = recorder.migrated()?.since(&start_counters);
    let nodes = recorder.nodes().to_vec();
    let mut processes = Vec::new();
    for (i, mut w) in workers.into_iter().enumerate() {
        let mut rest = String::new();
        let _ = w.stdout.read_to_string(&mut rest);
        let report: Option<WorkerReport> = rest.lines().find_map(|l| match serde_json::from_str::<Message>(l) {
            Ok(Message::Done(r)) => Some(r),
            _ => None,
        });
        if report.is_none() && !timed_out {
            return Err(BenchError::Worker { index: i, reason: "exited without its report".into() });
        }
        let (runtime_s, exit_code, _) = w.exited.expect("every worker exited");
        let cfg = &plan.processes[i];
        let (passes, bytes_written, mib_per_s) = match &report {
            Some(r) if !r.threads.is_empty() => {
                let bytes: u64 = r.threads.iter().map(|t| t.bytes_written).sum();
                let passes = r.threads.iter().map(|t| t.passes).sum::<f64>() / r.threads.len() as f64;
                let secs = if r.runtime_s > 0.0 { r.runtime_s } else { runtime_s };
                (passes, bytes, bytes as f64 / (1 << 20) as f64 / secs.max(1e-9))
            }
            _ => (0.0, 0, 0.0),
        };
        let last_with_threads = w.series.iter().rev().find(|p| p.thread_nodes.iter().any(|&n| n > 0));
        let final_thread_nodes = last_with_threads
            .map(|p| nodes.iter().zip(&p.thread_nodes).filter(|(_, &c)| c > 0).map(|(&n, _)| n).collect())
            .unwrap_or_default();
        processes.push(ProcessResult {
            index: i,
            pid: w.ready.pid,
            threads: cfg.threads.len() as u32,
            mb: cfg.bytes >> 20,
            runtime_s,
            exit_code,
            passes,
            bytes_written,
            mib_per_s,
            converge_s: converge_s(&w.series),
            thread_converge_s: converge_by(&w.series, |p| p.thread_local_pct),
            final_thread_local_pct: w.series.iter().rev().find_map(|p| p.thread_local_pct),
            final_local_pct: w.series.iter().rev().find_map(|p| p.local_pct),
            final_thread_nodes,
            series: w.series,
        });
    }
    let runtime_s = processes.iter().map(|p| p.runtime_s).fold(0.0, f64::max);
    let kernel = std::fs::read_to_string(opts.root.join("proc/sys/kernel/osrelease"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    Ok(BenchResult {
        schema: SCHEMA.to_string(),
        test: plan.name.test,
        bind: plan.name.bind,
        name: plan.name.full(),
        config: Config {
            processes: plan.processes.len(),
            threads_per_process: plan.threads_per_process,
            mb_per_process: plan.mb_per_process,
            work: plan.work,
            force_node: plan.force_node,
            interval_s: opts.interval.as_secs_f64(),
            timeout_s: opts.timeout.map(|t| t.as_secs_f64()),
        },
        host: Host { kernel, nodes: nodes.clone(), cpus: topo.online_cpus().len() as u32, numa_balancing },
        nodes,
        runtime_s,
        timed_out,
        converge_s: BenchResult::overall_converge_s(&processes),
        migrated,
        vmstat,
        processes,
        go_monotonic_s: Some(go_monotonic_s),
        recorder_cpu_s: self_cpu_s(),
    })
}

/// CPU time of this process so far (user + system, all its threads), s; `None` if `getrusage`
/// fails.
fn self_cpu_s() -> Option<f64> {
    // SAFETY: getrusage writes the struct we own and reads nothing else.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return None;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(tv(ru.ru_utime) + tv(ru.ru_stime))
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt as _;
    use std::process::ExitStatus;

    /// A worker ended by SIGKILL (the OOM killer's signal) is reported with where to look; another
    /// end as the status reads.
    #[test]
    fn a_sigkill_points_at_the_oom_killer() {
        let killed = super::ended(&ExitStatus::from_raw(libc::SIGKILL));
        assert!(killed.contains("SIGKILL") && killed.contains("OOM killer") && killed.contains("dmesg"), "{killed}");
        assert_eq!(super::ended(&ExitStatus::from_raw(3 << 8)), "exit status: 3");
    }
}
