//! The daemon cycle's cost on a real load: 1,000 processes x 10 threads (most sleeping, some
//! spinning part of the time), observed by the live host and modelled and planned by the adaptive
//! policy, as `numapilot daemon` does each cycle (dry run: no action is applied).
//!
//! ```text
//!   cargo run --release -p numapilot-daemon --example cycle_cost -- \
//!       [--procs 1000] [--threads 10] [--spinners 20] [--duty 5] [--cycles 20] [--warmup 3] [--interval-ms 1000] [--signals 1]
//!       [--numad-seconds 0] [--record FILE] [--daemon-seconds 0 [--idle-max-ms 15000] [--daemon-warmup 10]]
//!       [--narrowed 0]
//!   cargo run --release -p numapilot-daemon --example cycle_cost -- --replay FILE [--reps 5]
//! ```
//!
//! The load is this example's own binary started again as children (`--child sleep|spin`): each
//! child has `--threads` threads; a spinning child's main thread is busy `--duty` percent of each
//! 100 ms and sleeps the rest. Per measured cycle (after `--warmup` cycles, default 3; the steady state
//! of a long-running daemon needs 35: from the 31st cycle a process idle since the start has its
//! stat read one cycle in four, `TierOptions::idle_after_ms`) it prints the wall time
//! of observe (`LiveHost::sample`) and of model + plan (`Model::update` + `Policy::decide`), the
//! CPU time this process used in the cycle (all its threads, `getrusage`), and how many processes
//! the tiers read; then means, the worst cycle, CPU as a share of one core at the interval, and the
//! resident memory (VmRSS, VmHWM). Children are killed (by pid) at the end.
//!
//! With `--numad-seconds N` it then runs Debian's numad (`/usr/bin/numad -i 1:1`, one scan a second) on the same
//! load for N seconds and prints numad's CPU per scan (utime + stime from its /proc/PID/stat, read after a 2 s
//! warm-up and N seconds later) beside ours, as a ratio: issue 5's "numad's cost on the same load". numad is
//! stopped with SIGTERM (by the pid in its pid file) afterwards.
//!
//! With `--ab` it instead runs two observers side by side on the same load, each with its own
//! model and policy: A reads as before the cycle-cost work of issue 5 (one thread, every thread's
//! stat read: `TierOptions { threads: 1, carry_idle_threads: false }`), B with the default tiers;
//! each cycle runs both, A first on even cycles and B first on odd ones, and the end prints each
//! one's mean and worst wall (`--a-threads N` and `--a-carry 0|1` set A's two tiers instead) and CPU per cycle (observe + model + plan) and B / A: a ratio under
//! the same noise, on a machine shared with other work.
//!
//! With `--narrowed N` the first N children narrow themselves to the first online CPU before they start
//! their threads (as processes the daemon placed, or that an operator confined, run): the observer then
//! reads each one's cpuset CPUs from the cgroup files (once per 10 s per process and per cgroup path,
//! `CPUSET_RECHECK_NS`), which the default load never asks for.
//!
//! With `--record FILE` every measured cycle's sample is written to FILE (one JSON line each).
//! `--replay FILE` then runs only model + plan over those samples, `--reps` times from a fresh
//! model and policy, and prints the CPU time (this thread's clock) of `Model::update` and of
//! `Policy::decide` per cycle, and a digest of every plan and grouping: the same recording
//! through two builds gives their cost on the same input, and the digests must be equal (the
//! same decisions). Cycles before the fourth of each repetition are warm-up and not counted.
//!
//! With `--daemon-seconds N` the example then runs the daemon's own loop (`run::serve`, dry run,
//! no journal, no metrics, control socket and state file under the temp directory) over the same
//! load: after `--daemon-warmup` seconds it reads this process's utime + stime from
//! /proc/self/stat, again N seconds later, and prints the CPU as a share of one core, with the
//! idle back-off at `--idle-max-ms` (the default 15,000, as the daemon's; a value at or below the 1,000 ms interval
//! turns it off). The load's children are other processes: their CPU is not counted.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use std::io::{BufRead, Write};

use numapilot_daemon::config::{Loaded, Overrides, Source};
use numapilot_daemon::live::{LiveHost, LiveOptions, LiveTuning};
use numapilot_daemon::run::{self, Command as DaemonCommand};
use numapilot_daemon::signals::SignalOptions;
use numapilot_policy::{Adaptive, Host, Policy};
use numapilot_topology::Topology;

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().unwrap_or_else(|_| panic!("{name}: not a number: {v}")))
        .unwrap_or(default)
}

fn child(mode: &str, threads: u64, duty: u64, narrow: bool) -> ! {
    // Die with the parent: a measuring run killed early (its output piped into `head`, a ^C) once left
    // its 1,000 children behind.
    // SAFETY: prctl with PR_SET_PDEATHSIG takes a signal number and touches no memory of ours.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    if narrow {
        let first = numapilot_actuate::sched_getaffinity(0).ok().and_then(|s| s.first());
        if let Some(cpu) = first {
            let one: numapilot_topology::CpuSet = std::iter::once(cpu).collect();
            let _ = numapilot_actuate::sched_setaffinity(0, &one);
        }
    }
    for _ in 1..threads {
        std::thread::spawn(|| loop {
            std::thread::sleep(Duration::from_secs(3600));
        });
    }
    if mode == "spin" {
        let busy = Duration::from_millis(duty.min(100));
        let idle = Duration::from_millis(100 - duty.min(100));
        let mut x = 0u64;
        loop {
            let t = Instant::now();
            while t.elapsed() < busy {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
            std::thread::sleep(idle);
        }
    }
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn cpu_ns() -> u64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn status_kb(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// CPU time of the calling thread, ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the struct we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// utime + stime of this process (all threads), clock ticks, from /proc/self/stat.
fn self_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 (utime, stime); `after` starts at field 3.
    let num = |i: usize| f.get(i - 3).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    num(14) + num(15)
}

fn opt_str<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map(String::as_str)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        child(&args[i + 1], arg(&args, "--threads", 10), arg(&args, "--duty", 5), args.iter().any(|a| a == "--narrow"));
    }
    if let Some(file) = opt_str(&args, "--replay") {
        replay(file, arg(&args, "--reps", 5));
        return;
    }
    let record = opt_str(&args, "--record")
        .map(|f| std::io::BufWriter::new(std::fs::File::create(f).unwrap_or_else(|e| panic!("--record {f}: {e}"))));
    let mut record = record;
    let procs = arg(&args, "--procs", 1000);
    let threads = arg(&args, "--threads", 10);
    let spinners = arg(&args, "--spinners", 20);
    let duty = arg(&args, "--duty", 5);
    let cycles = arg(&args, "--cycles", 20);
    let interval = Duration::from_millis(arg(&args, "--interval-ms", 1000));
    let signals = arg(&args, "--signals", 1) != 0;
    let numad_seconds = arg(&args, "--numad-seconds", 0);
    let narrowed = arg(&args, "--narrowed", 0);

    let exe = std::env::current_exe().expect("own path");
    let mut kids: Vec<Child> = Vec::with_capacity(procs as usize);
    for i in 0..procs {
        let mode = if i < spinners { "spin" } else { "sleep" };
        let c = Command::new(&exe)
            .args(["--child", mode, "--threads", &threads.to_string(), "--duty", &duty.to_string()])
            .args(if i < narrowed { &["--narrow"][..] } else { &[][..] })
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn a child");
        kids.push(c);
    }
    // Let every child start its threads.
    std::thread::sleep(Duration::from_secs(3));

    let topo = Topology::from_sysfs(Path::new("/")).expect("topology");
    // The state file in a directory of its own: the live host refuses one in a directory other
    // users may write (such as /tmp itself), as the daemon does.
    let state_dir = std::env::temp_dir().join(format!("numapilot-cycle-cost-{}", std::process::id()));
    std::fs::create_dir_all(&state_dir).expect("state directory");
    let state = state_dir.join("state.json");
    // `--exclude-cgroup PREFIX`: a cgroup list set, so every process's cgroups are read again every
    // `cgroup_recheck_ms` (the cost of `[exclude] cgroups` / `[include] cgroups`).
    let exclude_cgroups: Vec<String> =
        opt_str(&args, "--exclude-cgroup").map(|p| vec![p.to_string()]).unwrap_or_default();
    let opts = LiveOptions { state_path: state.clone(), observe_only: true, exclude_cgroups, ..LiveOptions::default() };
    let mut tuning = LiveTuning::default();
    if !signals {
        tuning.signals = SignalOptions { sockets: false, perf: false };
    }
    if args.iter().any(|a| a == "--ab") {
        let a = (arg(&args, "--a-threads", 1) as usize, arg(&args, "--a-carry", 0) != 0);
        ab(&topo, opts, tuning, cycles, interval, a);
        for mut k in kids {
            let _ = k.kill();
            let _ = k.wait();
        }
        let _ = std::fs::remove_dir_all(&state_dir);
        return;
    }
    let (mut host, _) = LiveHost::open_with(topo.clone(), opts, tuning).expect("live host");
    for n in host.notes() {
        println!("note: {n}");
    }
    let mut model = numapilot_model::Model::new(topo, numapilot_model::Tunables::default());
    let mut policy = Adaptive::new();

    let mut rows = Vec::new();
    let warmup = arg(&args, "--warmup", 3);
    for c in 0..cycles + warmup {
        let start = Instant::now();
        let cpu0 = cpu_ns();
        let sample = host.sample().expect("sample");
        let observed = start.elapsed();
        if let (Some(w), true) = (record.as_mut(), c >= warmup) {
            serde_json::to_writer(&mut *w, &sample).expect("write the recording");
            w.write_all(b"\n").expect("write the recording");
        }
        let observe_cpu = cpu_ns() - cpu0;
        model.update(&sample);
        // As `Engine::step` does: the carried processes' details go back to the observer.
        host.recycle(sample);
        let plan = policy.decide(&model);
        let wall = start.elapsed();
        let cpu = cpu_ns() - cpu0;
        let st = host.tier_stats();
        let sc = host.signal_cost();
        if c >= warmup {
            println!(
                "cycle {:>3}: wall {:>6.1} ms (observe {:>5.1}, model+plan {:>5.1}), cpu {:>6.1} ms (observe {:>5.1}, \
                 of it signals {:>5.1} wall), observe phases (wall): system {:.1}, stat pass {:.1}, details {:.1}, \
                 assemble {:.1}; (cpu): stat pass {:.1}, details {:.1}, assemble {:.1}; signals: sockets {:.1} wall \
                 {:.1} cpu over {} fd dirs ({} links), maps {:.1} wall {:.1} cpu over {} procs ({} lines), drain {:.1}; {} procs / {} threads, \
                 stats carried (long idle) {}, threads read {}, numa_maps read {} ({} refreshes, {} MB RSS, {} refreshes wait), \
                 {} actions planned, {} cgroup rechecks",
                c - warmup,
                wall.as_secs_f64() * 1e3,
                observed.as_secs_f64() * 1e3,
                (wall - observed).as_secs_f64() * 1e3,
                cpu as f64 / 1e6,
                observe_cpu as f64 / 1e6,
                st.signals_ns as f64 / 1e6,
                st.system_ns as f64 / 1e6,
                st.stat_pass_ns as f64 / 1e6,
                st.details_ns as f64 / 1e6,
                st.assemble_ns as f64 / 1e6,
                st.stat_pass_cpu_ns as f64 / 1e6,
                st.details_cpu_ns as f64 / 1e6,
                st.assemble_cpu_ns as f64 / 1e6,
                sc.sockets_ns as f64 / 1e6,
                sc.sockets_cpu_ns as f64 / 1e6,
                sc.fd_pids,
                sc.fd_links,
                sc.maps_ns as f64 / 1e6,
                sc.maps_cpu_ns as f64 / 1e6,
                sc.maps_pids,
                sc.maps_lines,
                sc.drain_ns as f64 / 1e6,
                st.processes,
                st.threads,
                st.stat_rested,
                st.threads_read,
                st.maps_read,
                st.maps_refreshed,
                st.maps_rss_kb / 1024,
                st.maps_deferred,
                plan.actions.len(),
                st.cgroup_rechecks
            );
            rows.push((
                wall.as_secs_f64() * 1e3,
                observed.as_secs_f64() * 1e3,
                cpu as f64 / 1e6,
                observe_cpu as f64 / 1e6,
            ));
        } else {
            println!(
                "warm-up {c}: wall {:.1} ms, cpu {:.1} ms, {} procs / {} threads",
                wall.as_secs_f64() * 1e3,
                cpu as f64 / 1e6,
                st.processes,
                st.threads
            );
        }
        if let Some(rest) = interval.checked_sub(start.elapsed()) {
            std::thread::sleep(rest);
        }
    }
    let n = rows.len().max(1) as f64;
    let mean = |f: fn(&(f64, f64, f64, f64)) -> f64| rows.iter().map(f).sum::<f64>() / n;
    let worst = rows.iter().map(|r| r.0).fold(0.0, f64::max);
    let worst_cpu = rows.iter().map(|r| r.2).fold(0.0, f64::max);
    let mut walls: Vec<f64> = rows.iter().map(|r| r.0).collect();
    walls.sort_by(f64::total_cmp);
    let median = walls.get(walls.len() / 2).copied().unwrap_or(0.0);
    let over = numapilot_topology::plural(walls.iter().filter(|&&w| w >= 50.0).count(), "cycle");
    let cpu = mean(|r| r.2);
    println!(
        "mean over {} cycles (signals {}): wall {:.1} ms (observe {:.1} ms), median wall {median:.1} ms, worst wall \
         {:.1} ms, {over} at or over 50 ms; cpu {:.1} ms per cycle (observe {:.1} ms, worst cycle {worst_cpu:.1} \
         ms) = {:.2} % of one core at {} ms; VmRSS {:.1} MB, VmHWM {:.1} MB; load average {}",
        rows.len(),
        if signals { "on" } else { "off" },
        mean(|r| r.0),
        mean(|r| r.1),
        worst,
        cpu,
        mean(|r| r.3),
        cpu / interval.as_secs_f64() / 10.0,
        interval.as_millis(),
        status_kb("VmRSS:") as f64 / 1024.0,
        status_kb("VmHWM:") as f64 / 1024.0,
        load_average()
    );
    if let Some(mut w) = record.take() {
        w.flush().expect("write the recording");
    }
    drop(host);
    let daemon_seconds = arg(&args, "--daemon-seconds", 0);
    if daemon_seconds > 0 {
        daemon_cpu(
            daemon_seconds,
            arg(&args, "--daemon-warmup", 10),
            arg(&args, "--idle-max-ms", numapilot_daemon::config::DEFAULT_IDLE_MAX_INTERVAL_MS),
            signals,
        );
    }
    if numad_seconds > 0 {
        match numad_cpu_per_scan(numad_seconds) {
            // numad's CPU is read in clock ticks (10 ms at USER_HZ 100): none over the whole window means it did
            // not scan processes at all, as on a one-node machine, where it has nothing to place.
            Ok(0.0) => println!(
                "numad 20150602 on the same load (-i 1:1, {numad_seconds} s): no CPU tick in {numad_seconds} s (it \
                 scans no processes on a machine with {}); no ratio",
                numapilot_topology::plural(host_nodes(), "node")
            ),
            Ok(numad) => println!(
                "numad 20150602 on the same load (-i 1:1, {numad_seconds} s): {numad:.1} ms CPU per scan; ours / numad = \
                 {:.2} (per cycle against per scan)",
                cpu / numad
            ),
            Err(e) => println!("numad: not measured: {e}"),
        }
    }
    for mut k in kids {
        let _ = k.kill();
        let _ = k.wait();
    }
    let _ = std::fs::remove_dir_all(&state_dir);
}

/// The `--ab` comparison (see the module essay).
fn ab(topo: &Topology, opts: LiveOptions, tuning: LiveTuning, cycles: u64, interval: Duration, a: (usize, bool)) {
    let mut old = tuning.clone();
    old.tiers.threads = a.0;
    old.tiers.carry_idle_threads = a.1;
    let name_a = format!("A (threads {}, carry_idle_threads {})", a.0, a.1);
    let mut sides = Vec::new();
    for (name, t) in [(name_a.as_str(), old), ("B (default tiers)", tuning)] {
        let mut o = opts.clone();
        o.state_path = o.state_path.with_extension(format!("{}.json", sides.len()));
        let (host, _) = LiveHost::open_with(topo.clone(), o, t).expect("live host");
        let model = numapilot_model::Model::new(topo.clone(), numapilot_model::Tunables::default());
        sides.push((name, host, model, Adaptive::new(), Vec::<(f64, f64, f64, f64)>::new()));
    }
    for c in 0..cycles + 3 {
        let start = Instant::now();
        for k in 0..2 {
            let i = if c % 2 == 0 { k } else { 1 - k };
            let (_, host, model, policy, rows) = &mut sides[i];
            let t0 = Instant::now();
            let cpu0 = cpu_ns();
            let sample = host.sample().expect("sample");
            let observed = t0.elapsed();
            let observe_cpu = cpu_ns() - cpu0;
            model.update(&sample);
            host.recycle(sample);
            let _plan = policy.decide(model);
            let wall = t0.elapsed();
            let cpu = cpu_ns() - cpu0;
            if c >= 3 {
                rows.push((
                    wall.as_secs_f64() * 1e3,
                    observed.as_secs_f64() * 1e3,
                    cpu as f64 / 1e6,
                    observe_cpu as f64 / 1e6,
                ));
            }
        }
        if let Some(rest) = interval.checked_sub(start.elapsed()) {
            std::thread::sleep(rest);
        }
    }
    let mut means = Vec::new();
    for (name, host, _, _, rows) in &sides {
        let n = rows.len().max(1) as f64;
        let m = |f: fn(&(f64, f64, f64, f64)) -> f64| rows.iter().map(f).sum::<f64>() / n;
        let worst = rows.iter().map(|r| r.0).fold(0.0, f64::max);
        let st = host.tier_stats();
        println!(
            "{name}: mean over {} cycles: wall {:.1} ms (observe {:.1}), worst wall {worst:.1} ms, cpu {:.1} ms \
             (observe {:.1}); {} procs / {} threads",
            rows.len(),
            m(|r| r.0),
            m(|r| r.1),
            m(|r| r.2),
            m(|r| r.3),
            st.processes,
            st.threads
        );
        means.push((m(|r| r.0), m(|r| r.1), worst, m(|r| r.2), m(|r| r.3)));
    }
    let (a, b) = (means[0], means[1]);
    println!(
        "B / A: wall {:.2} (observe {:.2}), worst {:.2}, cpu {:.2} (observe {:.2}); load average {}",
        b.0 / a.0,
        b.1 / a.1,
        b.2 / a.2,
        b.3 / a.3,
        b.4 / a.4,
        load_average()
    );
}

/// The 1, 5 and 15 minute load averages, as /proc/loadavg prints them.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split(' ').take(3).collect::<Vec<_>>().join(" ")
}

/// Online NUMA nodes of this host.
fn host_nodes() -> usize {
    Topology::from_sysfs(Path::new("/")).map_or(0, |t| t.nodes.len())
}

/// Debian's numad on the running load: CPU ms per one-second scan over `seconds`.
fn numad_cpu_per_scan(seconds: u64) -> Result<f64, String> {
    const PIDFILE: &str = "/var/run/numad.pid";
    let _ = std::fs::remove_file(PIDFILE);
    // numad daemonizes: the command returns once the daemon runs and its pid file names it.
    let st = Command::new("/usr/bin/numad").args(["-i", "1:1"]).status().map_err(|e| format!("/usr/bin/numad: {e}"))?;
    if !st.success() {
        return Err(format!("/usr/bin/numad -i 1:1 exited with {st}"));
    }
    let mut pid = None;
    for _ in 0..50 {
        if let Some(p) = std::fs::read_to_string(PIDFILE).ok().and_then(|t| t.trim().parse::<i32>().ok()) {
            pid = Some(p);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let pid = pid.ok_or_else(|| format!("{PIDFILE} did not appear"))?;
    let ticks = || -> Result<u64, String> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|e| format!("numad {pid}: {e}"))?;
        let after = stat.rsplit_once(')').map(|(_, r)| r).ok_or("numad stat: no comm")?;
        let f: Vec<&str> = after.split_whitespace().collect();
        // Fields 14 and 15 (utime, stime); `after` starts at field 3.
        let num = |i: usize| f.get(i - 3).and_then(|v| v.parse::<u64>().ok()).ok_or("numad stat: short");
        Ok(num(14)? + num(15)?)
    };
    std::thread::sleep(Duration::from_secs(2));
    let t0 = ticks();
    std::thread::sleep(Duration::from_secs(seconds));
    let t1 = ticks();
    // SAFETY: kill with a pid read from numad's own pid file, which this function started.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let (t0, t1) = (t0?, t1?);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Ok((t1 - t0) as f64 * 1000.0 / hz / seconds as f64)
}

/// Model + plan over a recording (see the module essay): CPU per cycle and a digest of the
/// decisions.
fn replay(file: &str, reps: u64) {
    let f = std::fs::File::open(file).unwrap_or_else(|e| panic!("--replay {file}: {e}"));
    let samples: Vec<numapilot_observe::Sample> = std::io::BufReader::new(f)
        .lines()
        .map(|l| serde_json::from_str(&l.expect("read the recording")).expect("a sample"))
        .collect();
    let topo = Topology::from_sysfs(Path::new("/")).expect("topology");
    let (mut model_ns, mut plan_ns, mut counted) = (Vec::new(), Vec::new(), 0u64);
    let mut digests = Vec::new();
    for _ in 0..reps.max(1) {
        let mut model = numapilot_model::Model::new(topo.clone(), numapilot_model::Tunables::default());
        let mut policy = Adaptive::new();
        let mut digest = std::collections::hash_map::DefaultHasher::new();
        for (c, sample) in samples.iter().enumerate() {
            let t0 = thread_cpu_ns();
            model.update(sample);
            let t1 = thread_cpu_ns();
            let plan = policy.decide(&model);
            let t2 = thread_cpu_ns();
            use std::hash::Hash;
            format!("{:?}", plan.actions).hash(&mut digest);
            for (id, g) in &model.groups.groups {
                (id, &g.tasks).hash(&mut digest);
                g.cpu.to_bits().hash(&mut digest);
                g.mem_bytes.hash(&mut digest);
            }
            if c >= 3 {
                model_ns.push(t1 - t0);
                plan_ns.push(t2 - t1);
                counted += 1;
            }
        }
        digests.push(std::hash::Hasher::finish(&digest));
    }
    let stats = |v: &mut Vec<u64>| {
        v.sort_unstable();
        let mean = v.iter().sum::<u64>() as f64 / v.len().max(1) as f64 / 1e6;
        let median = v.get(v.len() / 2).copied().unwrap_or(0) as f64 / 1e6;
        (mean, median)
    };
    let (mm, md) = stats(&mut model_ns);
    let (pm, pd) = stats(&mut plan_ns);
    let first = samples.first();
    println!(
        "replay of {} samples ({} procs / {} threads in the first) x {} reps, {counted} cycles counted: \
         model {mm:.2} ms cpu mean ({md:.2} median), plan {pm:.2} ms ({pd:.2}), model+plan {:.2} ms mean; \
         decision digest {:016x}{}",
        samples.len(),
        first.map_or(0, |s| s.processes.len()),
        first.map_or(0, |s| s.processes.iter().map(|p| p.threads.len()).sum::<usize>()),
        reps.max(1),
        mm + pm,
        digests[0],
        if digests.iter().all(|d| *d == digests[0]) { "" } else { " (DIFFERS between repetitions)" }
    );
}

/// The daemon's own loop over the running load for `warmup + seconds`, dry run; prints its CPU.
fn daemon_cpu(seconds: u64, warmup: u64, idle_max_ms: u64, signals: bool) {
    let dir = std::env::temp_dir().join(format!("numapilot-cycle-cost-daemon-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let config = dir.join("numapilot.toml");
    let text = format!(
        "[daemon]\ndry_run = true\njournal = \"\"\nmetrics = \"off\"\nstate = {:?}\nsocket = {:?}\n\
         idle_max_interval_ms = {idle_max_ms}\n{}",
        dir.join("state.json").display().to_string(),
        dir.join("control.sock").display().to_string(),
        if signals { "" } else { "[signals]\nsockets = false\nperf = false\n" }
    );
    std::fs::write(&config, text).expect("write the config");
    let source = Source::Explicit(config);
    let overrides = Overrides::default();
    let loaded: Loaded = numapilot_daemon::config::load(&source, &overrides).expect("config");
    let interval = loaded.config.interval_ms();
    let topo = Topology::from_sysfs(Path::new("/")).expect("topology");
    let tuning = LiveTuning {
        signals: loaded.config.signal_options(),
        signal_tuning: loaded.config.signal_tuning(),
        ..LiveTuning::default()
    };
    let (host, _) = LiveHost::open_with(topo.clone(), loaded.config.live_options(true), tuning).expect("live host");
    let steps = Arc::new(Mutex::new(Vec::new()));
    let host = Counted { inner: host, steps: steps.clone() };
    let (handle, commands) = run::command_pipe().expect("command pipe");
    let setup = run::Setup { source, overrides, loaded, forced_observe: None, notify: Default::default() };
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let timer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(warmup));
        let (t0, from_ns) = (self_ticks(), numapilot_observe::reader::monotonic_ns());
        std::thread::sleep(Duration::from_secs(seconds));
        let (t1, to_ns) = (self_ticks(), numapilot_observe::reader::monotonic_ns());
        let _ = handle.send(DaemonCommand::Stop);
        (t1 - t0, from_ns, to_ns)
    });
    let exit = run::serve(setup, topo, host, None, Some(commands), &mut |_| {}).expect("daemon loop");
    let (ticks, from_ns, to_ns) = timer.join().expect("timer");
    let cpu_s = ticks as f64 / hz;
    // The steps inside the measured window, by the wait before them, and the young processes
    // (first seen by the model younger than new_process_age_ms, which set the settle cadence).
    let steps = steps.lock().expect("steps");
    let window: Vec<&Step> = steps.iter().filter(|s| s.at_ns >= from_ns && s.at_ns <= to_ns).collect();
    let mut gaps = [0usize; 3];
    let mut young: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for w in steps.windows(2).filter(|w| w[1].at_ns >= from_ns && w[1].at_ns <= to_ns) {
        let gap_ms = (w[1].at_ns - w[0].at_ns) / 1_000_000;
        gaps[if gap_ms < 900 {
            0
        } else if gap_ms < 1900 {
            1
        } else {
            2
        }] += 1;
        if gap_ms < 900 {
            for c in &w[0].young {
                *young.entry(c.clone()).or_default() += 1;
            }
        }
    }
    let mut top: Vec<(String, usize)> = young.into_iter().collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let top: Vec<String> = top.iter().take(8).map(|(c, n)| format!("{c} x{n}")).collect();
    println!(
        "daemon loop steps in the window: {} ({} after < 0.9 s: the settle cadence, {} after ~1 s, {} after >= 1.9 s: \
         backed off); CPU per step {:.1} ms; young processes before the settle-cadence steps: {}",
        window.len(),
        gaps[0],
        gaps[1],
        gaps[2],
        cpu_s * 1e3 / window.len().max(1) as f64,
        if top.is_empty() { "none".to_string() } else { top.join(", ") }
    );
    println!(
        "daemon loop (dry run, interval {interval} ms, idle_max_interval_ms {idle_max_ms}{}): {} steps in {} s; \
         CPU over the last {seconds} s (after {warmup} s): {:.2} s = {:.2} % of one core",
        if idle_max_ms <= interval { ", back-off off" } else { "" },
        exit.steps,
        warmup + seconds,
        cpu_s,
        cpu_s / seconds as f64 * 100.0
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// One step of the daemon loop as its host saw it: when it sampled, and the names of the
/// processes in the sample younger than the default `new_process_age_ms` (2 s).
struct Step {
    at_ns: u64,
    young: Vec<String>,
}

/// The live host, recording each step (see [`Step`]) for the daemon measurement.
struct Counted {
    inner: LiveHost,
    steps: Arc<Mutex<Vec<Step>>>,
}

impl Host for Counted {
    fn topology(&self) -> &Topology {
        self.inner.topology()
    }

    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }

    fn sample(&mut self) -> Result<numapilot_observe::Sample, numapilot_policy::HostError> {
        let s = self.inner.sample()?;
        let hz = s.clock_ticks_per_sec.max(1);
        let young_ns = numapilot_model::Tunables::default().new_process_age_ms * 1_000_000;
        let young = s
            .processes
            .iter()
            .filter(|p| !p.kernel_thread)
            .filter(|p| s.boottime_ns.saturating_sub(p.starttime * 1_000_000_000 / hz) < young_ns)
            .map(|p| p.comm.clone())
            .collect();
        self.steps.lock().expect("steps").push(Step { at_ns: s.monotonic_ns, young });
        Ok(s)
    }

    fn apply(&mut self, action: &numapilot_policy::Action) -> numapilot_policy::Outcome {
        self.inner.apply(action)
    }

    fn recycle(&mut self, sample: numapilot_observe::Sample) {
        self.inner.recycle(sample);
    }
}

impl run::Restore for Counted {
    fn restore_all(&mut self) -> numapilot_daemon::live::RestoreReport {
        self.inner.restore_all()
    }
}
