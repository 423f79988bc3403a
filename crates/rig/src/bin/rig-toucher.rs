//! `rig-toucher`: a tiny workload for the multi-node rig and fixture capture.
//!
//! It allocates memory, writes every page of it (so the kernel really backs each page with a frame placed by the
//! task's memory policy), optionally starts more threads that each own a share of the memory, announces that it is
//! ready and then sleeps until killed. Run it under `numactl --interleave=all` and its pages spread over all nodes;
//! run it under `numapilot run --membind=1 --cpunodebind=1` and both its pages and its threads must stay on node 1.
//!
//! ```text
//! rig-toucher [--mb N] [--threads T] [--ready PATH] [--exit | --loop]
//!   --mb N        MiB to allocate and touch in total (default 16)
//!   --threads T   threads in total, including the main one (default 1); memory is split evenly between them
//!   --ready PATH  create PATH (containing the pid) once every page is touched
//!   --exit        exit once touched instead of sleeping (prints the pid and exits 0)
//!   --loop        once ready, keep writing every page of its share again (each thread), pausing LOOP_PAUSE
//!                 between passes, instead of sleeping: the accesses the kernel's NUMA balancing samples
//!                 (hinting faults), so moving the threads to another node's CPUs makes the kernel migrate the
//!                 pages after them
//! ```
//!
//! Pages are written with a non-zero byte so neither the shared zero page nor KSM can stand in for them.

use std::io::Write;
use std::process::ExitCode;
use std::sync::{Arc, Barrier};
use std::time::Duration;

/// Bytes per written stride; 4 KiB is the smallest x86-64 page, so every base page gets one write.
const STRIDE_BYTES: usize = 4096;

/// Pause between two passes over the memory in `--loop` mode. Default 10 ms: a pass over 16 MiB takes well under
/// that even under emulation, so the threads keep touching their pages after every NUMA-balancing scan (the
/// kernel scans each 1 s at the fastest, `sysctl_numa_balancing_scan_period_min` = 1000 ms) while leaving most of
/// the guest's CPU time to the capture running next to them.
const LOOP_PAUSE: Duration = Duration::from_millis(10);

struct Args {
    mb: usize,
    threads: usize,
    ready: Option<String>,
    exit: bool,
    looping: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args { mb: 16, threads: 1, ready: None, exit: false, looping: false };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--mb" => {
                let v = it.next().ok_or("--mb needs a value")?;
                args.mb = v.parse().map_err(|_| format!("--mb: not a number: {v:?}"))?;
            }
            "--threads" => {
                let v = it.next().ok_or("--threads needs a value")?;
                args.threads = v.parse().map_err(|_| format!("--threads: not a number: {v:?}"))?;
                if args.threads == 0 {
                    return Err("--threads must be at least 1".into());
                }
            }
            "--ready" => args.ready = Some(it.next().ok_or("--ready needs a path")?),
            "--exit" => args.exit = true,
            "--loop" => args.looping = true,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if args.exit && args.looping {
        return Err("--exit and --loop exclude each other".into());
    }
    Ok(args)
}

/// Writes one byte per page of `buf` again, forever, with [`LOOP_PAUSE`] between passes.
fn keep_touching(buf: &mut [u8]) -> ! {
    let mut v: u8 = 0x5a;
    loop {
        v = v.wrapping_add(1).max(1);
        for i in (0..buf.len()).step_by(STRIDE_BYTES) {
            buf[i] = v;
        }
        std::hint::black_box(&*buf);
        std::thread::sleep(LOOP_PAUSE);
    }
}

/// Allocates `bytes` and writes one non-zero byte per page; the returned buffer keeps the pages resident.
fn touch(bytes: usize) -> Vec<u8> {
    let mut buf = vec![0u8; bytes];
    for i in (0..bytes).step_by(STRIDE_BYTES) {
        buf[i] = 0x5a;
    }
    // Keep the optimiser from dropping the writes.
    std::hint::black_box(&buf);
    buf
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("rig-toucher: {e}");
            return ExitCode::from(2);
        }
    };
    let total = args.mb * 1024 * 1024;
    let share = total / args.threads;
    // Every thread touches its share, then all meet at the barrier; only then is the process "ready".
    let barrier = Arc::new(Barrier::new(args.threads));
    let mut handles = Vec::new();
    let looping = args.looping;
    for _ in 1..args.threads {
        let b = Arc::clone(&barrier);
        handles.push(std::thread::spawn(move || {
            let mut buf = touch(share);
            b.wait();
            if looping {
                keep_touching(&mut buf);
            }
            loop {
                std::thread::sleep(Duration::from_secs(3600));
                std::hint::black_box(&buf);
            }
        }));
    }
    let mut buf = touch(total - share * (args.threads - 1));
    barrier.wait();
    let pid = std::process::id();
    if let Some(path) = &args.ready {
        // Write to a temporary name then rename, so a watcher never sees a half-written file.
        let tmp = format!("{path}.tmp");
        let res = std::fs::File::create(&tmp)
            .and_then(|mut f| writeln!(f, "{pid}"))
            .and_then(|_| std::fs::rename(&tmp, path));
        if let Err(e) = res {
            eprintln!("rig-toucher: cannot write ready file {path}: {e}");
            return ExitCode::from(1);
        }
    }
    if args.exit {
        println!("{pid}");
        return ExitCode::SUCCESS;
    }
    if args.looping {
        keep_touching(&mut buf);
    }
    loop {
        std::thread::sleep(Duration::from_secs(3600));
        std::hint::black_box(&buf);
    }
}
