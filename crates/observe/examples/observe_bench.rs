//! Benchmark of one full observation (every process and thread, numa_maps included) against Debian's
//! `numastat -p PATTERN` over the same processes.
//!
//! ```text
//!   observe_bench [--procs 1000] [--threads 10] [--runs 7] [--workers 0] [--no-numastat] [--exec CMD ARGS...]
//!     1. spawns PROCS copies of itself ("child" mode: THREADS-1 extra threads, all asleep until stdin
//!        reaches EOF), tagged with the marker word numapilot-bench-child on their command line
//!     2. waits until every child has all its threads (with --exec: runs CMD now, then stops)
//!     3. RUNS times, in a fresh process each ("observe-once" mode): one Reader::sample() of the whole
//!        system; that process reports the wall time of the call and its own peak RSS (VmHWM)
//!     4. RUNS times in this process (warm): the same call, wall time
//!     5. RUNS times: `numastat -p numapilot-bench-child > /dev/null`, wall time
//!     6. prints medians and the ratio; closes the children's stdin so they exit
//! ```
//!
//! Wall-clock numbers depend on the machine and its load; nothing in the test suite checks them.
//! Run it with `scripts/bench-observe.sh` (release build).

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use numapilot_observe::{ReadOptions, Reader};

const MARKER: &str = "numapilot-bench-child";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("");
    let result = match mode {
        "child" => child(&args[2..]),
        "observe-once" => observe_once(&args[2..]),
        _ => driver(&args[1..]),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("observe_bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn flag<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> Result<T, String> {
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .ok_or_else(|| format!("{name} needs a value"))?
            .parse()
            .map_err(|_| format!("bad value for {name}")),
    }
}

/// Child mode: THREADS-1 sleeping threads plus the main thread, which waits for EOF on stdin.
fn child(args: &[String]) -> Result<(), String> {
    let threads: usize = args.iter().find_map(|a| a.strip_prefix("--threads=")).unwrap_or("10").parse().unwrap_or(10);
    for _ in 1..threads {
        std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(|| loop {
                std::thread::park();
            })
            .map_err(|e| e.to_string())?;
    }
    let mut sink = [0u8; 16];
    while std::io::stdin().read(&mut sink).map_err(|e| e.to_string())? > 0 {}
    std::process::exit(0);
}

fn opts(workers: usize) -> ReadOptions {
    ReadOptions { workers, ..ReadOptions::default() }
}

/// observe-once mode: one full observation; prints "wall_ns processes threads vm_hwm_kb".
fn observe_once(args: &[String]) -> Result<(), String> {
    let workers = flag(args, "--workers", 0usize)?;
    let mut o = opts(workers);
    o.threads = !args.iter().any(|a| a == "--no-threads");
    o.numa_maps = !args.iter().any(|a| a == "--no-numa-maps");
    if args.iter().any(|a| a == "--sched") {
        o.sched = numapilot_observe::SchedMode::Always;
    }
    let reader = Reader::with_options("/", o);
    let base_rss = reader.read_status(std::process::id()).ok().flatten().and_then(|s| s.vm_rss_kb).unwrap_or(0);
    let cpu0 = cpu_time();
    let t = Instant::now();
    let sample = reader.sample().map_err(|e| e.to_string())?;
    let wall = t.elapsed();
    let cpu = cpu_time() - cpu0;
    let hwm = reader
        .read_status(std::process::id())
        .map_err(|e| e.to_string())?
        .and_then(|s| s.vm_hwm_kb)
        .ok_or("no VmHWM for self")?;
    println!("{} {} {} {} {}", wall.as_nanos(), sample.processes.len(), sample.thread_count(), hwm, cpu.as_nanos());
    if args.iter().any(|a| a == "--verbose") {
        let vmas: usize = sample.processes.iter().filter_map(|p| p.numa_maps.as_ref()).map(|m| m.vmas.len()).sum();
        eprintln!(
            "rss before {base_rss} kB; {vmas} VMAs; json {} bytes",
            serde_json::to_string(&sample).map_or(0, |j| j.len())
        );
    }
    Ok(())
}

/// User + system CPU time of this process (all its threads) so far.
fn cpu_time() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// A pipe (read end, write end), close-on-exec (the children get the read end as their stdin).
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn driver(args: &[String]) -> Result<(), String> {
    let procs = flag(args, "--procs", 1000usize)?;
    let threads = flag(args, "--threads", 10usize)?;
    let runs = flag(args, "--runs", 7usize)?.max(1);
    let workers = flag(args, "--workers", 0usize)?;
    let with_numastat = !args.iter().any(|a| a == "--no-numastat");
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;

    // One pipe for all children: when this process drops the writer (or dies), they all see EOF.
    let (reader_end, writer_end) = pipe().map_err(|e| e.to_string())?;
    let mut children = Vec::with_capacity(procs);
    let spawn_start = Instant::now();
    for _ in 0..procs {
        let stdin = reader_end.try_clone().map_err(|e| e.to_string())?;
        let c = Command::new(&exe)
            .arg("child")
            .arg(MARKER)
            .arg(format!("--threads={threads}"))
            .stdin(Stdio::from(stdin))
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawning child {}: {e}", children.len()))?;
        children.push(c);
    }
    drop(reader_end);
    // Wait until every child runs all its threads.
    let reader = Reader::new("/");
    for c in &children {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let n = reader.read_status(c.id()).map_err(|e| e.to_string())?.map_or(0, |s| s.threads as usize);
            if n >= threads {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("child {} has {n} of {threads} threads after 60 s", c.id()));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    eprintln!("spawned {procs} processes x {threads} threads in {:.0} ms", ms(spawn_start.elapsed()));

    // --exec CMD ARGS...: run a command while the children exist, instead of the benchmark.
    if let Some(i) = args.iter().position(|a| a == "--exec") {
        let cmd = args.get(i + 1).ok_or("--exec needs a command")?;
        let st = Command::new(cmd).args(&args[i + 2..]).status().map_err(|e| format!("{cmd}: {e}"))?;
        drop(writer_end);
        for mut c in children {
            let _ = c.wait();
        }
        return if st.success() { Ok(()) } else { Err(format!("{cmd} exited with {st}")) };
    }

    // Fresh-process observations: cold caches for this process, honest peak RSS.
    let mut cold = Vec::new();
    let mut cold_cpu = Vec::new();
    let mut hwm = Vec::new();
    let mut seen = (0usize, 0usize);
    for _ in 0..runs {
        let out = Command::new(&exe)
            .arg("observe-once")
            .arg("--workers")
            .arg(workers.to_string())
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!("observe-once failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let f: Vec<u64> = text.split_whitespace().filter_map(|t| t.parse().ok()).collect();
        if f.len() != 5 {
            return Err(format!("observe-once printed {text:?}"));
        }
        cold.push(Duration::from_nanos(f[0]));
        seen = (f[1] as usize, f[2] as usize);
        hwm.push(f[3]);
        cold_cpu.push(Duration::from_nanos(f[4]));
    }
    // Warm observations in this process.
    let reader = Reader::with_options("/", opts(workers));
    let mut warm = Vec::new();
    let mut warm_cpu = Vec::new();
    for _ in 0..runs {
        let c = cpu_time();
        let t = Instant::now();
        let s = reader.sample().map_err(|e| e.to_string())?;
        warm.push(t.elapsed());
        warm_cpu.push(cpu_time() - c);
        std::hint::black_box(&s);
    }
    let mut numastat = Vec::new();
    if with_numastat {
        for _ in 0..runs {
            let t = Instant::now();
            let st = Command::new("numastat")
                .arg("-p")
                .arg(MARKER)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map_err(|e| format!("numastat: {e} (apt-get install numactl)"))?;
            numastat.push(t.elapsed());
            if !st.success() {
                return Err(format!("numastat -p {MARKER} failed: {st}"));
            }
        }
    }

    drop(writer_end);
    for mut c in children {
        let _ = c.wait();
    }

    hwm.sort_unstable();
    let cold_m = median(&mut cold);
    let warm_m = median(&mut warm);
    println!("observation of {} processes / {} threads ({} runs, workers={})", seen.0, seen.1, runs, workers);
    println!(
        "  fresh process: median {:.1} ms wall, {:.1} ms CPU (user+sys); peak RSS (VmHWM) max {} kB",
        ms(cold_m),
        ms(median(&mut cold_cpu)),
        hwm[hwm.len() - 1]
    );
    println!("  warm         : median {:.1} ms wall, {:.1} ms CPU", ms(warm_m), ms(median(&mut warm_cpu)));
    let mut load = String::new();
    if let Ok(l) = std::fs::read_to_string("/proc/loadavg") {
        load = l.split(' ').take(3).collect::<Vec<_>>().join(" ");
    }
    println!("  load average during the run: {load}");
    if with_numastat {
        let n = median(&mut numastat);
        println!("numastat -p {MARKER} ({procs} processes): median {:.1} ms wall", ms(n));
        println!("ratio observation/numastat: {:.2} (fresh) {:.2} (warm)", ms(cold_m) / ms(n), ms(warm_m) / ms(n));
    }
    Ok(())
}
