//! `rig-sampler`: the race scenario's own record of where the workers' memory and threads are (the judge's
//! evidence, `crates/rig/src/race.rs`), read from the kernel's files and copied verbatim, never parsed here.
//!
//! ```text
//! rig-sampler COMM[,COMM...] OUT INTERVAL_MS STOP
//!   every INTERVAL_MS (plus the time of the reads) until the file STOP exists, appends to OUT:
//!     S <first field of /proc/uptime>
//!     for every process whose /proc/PID/comm is one of the COMMs, in pid order:
//!       P <pid>
//!       <its /proc/PID/numa_maps, verbatim>
//!       T <its /proc/PID/task/TID/stat line>      one per thread, in tid order
//!       E
//!   once STOP exists:
//!     C <its own /proc/self/stat line>            its CPU time (utime, stime): the cost of the reads
//! ```
//!
//! # Why a program
//!
//! The shell sampler it replaces read the same files with busybox: a `cat` (fork + exec) per file, or the shell's
//! `read` builtin (one system call per byte). Under QEMU's TCG that cost 0.45-0.65 s per pass and 8-9 s of guest
//! CPU per 25 s case at a 200 ms interval in the 2-node guest (measured 2026-11-26), a load that slowed the
//! balancers it was timing; reads in one process are a few system calls per file.
//!
//! A process or thread that exits between the listing and the read is left out of that pass (its record ends
//! with whatever was read), never an error: the host's parser takes a numa_maps that is empty.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// Pids (numeric entries of /proc) whose comm is one of the comma-separated `comms`, ascending.
fn pids_named(comms: &str) -> Vec<u32> {
    let Ok(dir) = fs::read_dir("/proc") else { return Vec::new() };
    let wanted: Vec<&str> = comms.split(',').collect();
    let mut pids: Vec<u32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| wanted.contains(&c.trim_end_matches('\n')))
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// One pass: the record of every process named one of `comm`, as text.
fn pass(comm: &str) -> String {
    let up = fs::read_to_string("/proc/uptime").unwrap_or_default();
    let mut s = format!("S {}\n", up.split_whitespace().next().unwrap_or("0"));
    for pid in pids_named(comm) {
        s.push_str(&format!("P {pid}\n"));
        if let Ok(maps) = fs::read_to_string(format!("/proc/{pid}/numa_maps")) {
            s.push_str(&maps);
            if !maps.is_empty() && !maps.ends_with('\n') {
                s.push('\n');
            }
        }
        let mut tids: Vec<u32> = fs::read_dir(format!("/proc/{pid}/task"))
            .map(|d| d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
            .unwrap_or_default();
        tids.sort_unstable();
        for tid in tids {
            if let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")) {
                s.push_str(&format!("T {}\n", stat.trim_end_matches('\n')));
            }
        }
        s.push_str("E\n");
    }
    s
}

fn run(comm: &str, out: &Path, interval: Duration, stop: &Path) -> std::io::Result<()> {
    let mut f: File = OpenOptions::new().append(true).create(true).open(out)?;
    while !stop.exists() {
        f.write_all(pass(comm).as_bytes())?;
        std::thread::sleep(interval);
    }
    let me = fs::read_to_string("/proc/self/stat")?;
    writeln!(f, "C {}", me.trim_end_matches('\n'))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [comm, out, ms, stop] = args.as_slice() else {
        eprintln!("usage: rig-sampler COMM[,COMM...] OUT INTERVAL_MS STOP");
        return ExitCode::from(2);
    };
    let Ok(ms) = ms.parse::<u64>() else {
        eprintln!("rig-sampler: INTERVAL_MS {ms:?} is not a number of milliseconds");
        return ExitCode::from(2);
    };
    match run(comm, Path::new(out), Duration::from_millis(ms), Path::new(stop)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rig-sampler: {out}: {e}");
            ExitCode::FAILURE
        }
    }
}
