//! `rig-toucher`: a tiny workload for the multi-node rig and fixture capture.
//!
//! It allocates memory, writes every page of it (so the kernel really backs each page with a frame placed by the
//! task's memory policy), optionally starts more threads that each own a share of the memory, announces that it is
//! ready and then sleeps until killed. Run it under `numactl --interleave=all` and its pages spread over all nodes;
//! run it under `numapilot run --membind=1 --cpunodebind=1` and both its pages and its threads must stay on node 1.
//!
//! ```text
//! rig-toucher [--mb N] [--threads T] [--ready PATH] [--exit | --loop | --report] [--uring N]
//!   --mb N        MiB to allocate and touch in total (default 16)
//!   --threads T   threads in total, including the main one (default 1); memory is split evenly between them
//!   --ready PATH  create PATH (containing the pid) once every page is touched
//!   --exit        exit once touched instead of sleeping (prints the pid and exits 0)
//!   --loop        once ready, keep writing every page of its share again (each thread), pausing LOOP_PAUSE
//!                 between passes, instead of sleeping: the accesses the kernel's NUMA balancing samples
//!                 (hinting faults), so moving the threads to another node's CPUs makes the kernel migrate the
//!                 pages after them
//!   --report      once touched, print what this process inherited and where its pages went, then exit 0:
//!                 its `Cpus_allowed_list`, `Mems_allowed_list` and `SigIgn` lines of /proc/self/status and the
//!                 /proc/self/numa_maps line of its own buffer (the main thread's), prefixed `buffer: `: the
//!                 kernel's own view of a command a launcher started (rig/scenarios/launcher.sh)
//!   --uring N     once touched and before ready, set up an io_uring and submit N blocking opens of a FIFO
//!                 nobody opens for writing, each forced to the kernel's io-wq (IOSQE_ASYNC): the process then
//!                 has N io-wq workers ("iou-wrk-TID" threads of its own) blocked in the kernel, as an io_uring
//!                 program (PostgreSQL 18's io_method=io_uring) has while its IO waits; see [`uring`]
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
    report: bool,
    uring: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args { mb: 16, threads: 1, ready: None, exit: false, looping: false, report: false, uring: 0 };
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
            "--uring" => {
                let v = it.next().ok_or("--uring needs a value")?;
                args.uring = v.parse().map_err(|_| format!("--uring: not a number: {v:?}"))?;
            }
            "--exit" => args.exit = true,
            "--loop" => args.looping = true,
            "--report" => args.report = true,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if [args.exit, args.looping, args.report].iter().filter(|&&b| b).count() > 1 {
        return Err("--exit, --loop and --report exclude each other".into());
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
    // Kept for the life of the process: dropping it would close the ring and cancel the opens.
    let _ring = match args.uring {
        0 => None,
        n => match uring::blocked_workers(n) {
            Ok(r) => Some(r),
            Err(e) => {
                eprintln!("rig-toucher: --uring {n}: {e}");
                return ExitCode::from(1);
            }
        },
    };
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
    if args.report {
        return match report(buf.as_ptr() as usize) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("rig-toucher: --report: {e}");
                ExitCode::from(1)
            }
        };
    }
    if args.looping {
        keep_touching(&mut buf);
    }
    loop {
        std::thread::sleep(Duration::from_secs(3600));
        std::hint::black_box(&buf);
    }
}

/// `--report`: the inherited lines of /proc/self/status and the numa_maps line of the VMA holding `addr` (the one
/// with the highest start address not above it: numa_maps gives starts only, and the buffer lies in one VMA).
fn report(addr: usize) -> Result<String, String> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(|e| format!("/proc/self/status: {e}"))?;
    let mut out = String::new();
    for key in ["Cpus_allowed_list:", "Mems_allowed_list:", "SigIgn:"] {
        let line = status.lines().find(|l| l.starts_with(key)).ok_or(format!("no {key} in /proc/self/status"))?;
        out.push_str(line);
        out.push('\n');
    }
    let maps = std::fs::read_to_string("/proc/self/numa_maps").map_err(|e| format!("/proc/self/numa_maps: {e}"))?;
    let line = maps
        .lines()
        .filter_map(|l| Some((usize::from_str_radix(l.split_whitespace().next()?, 16).ok()?, l)))
        .filter(|&(start, _)| start <= addr)
        .max_by_key(|&(start, _)| start)
        .map(|(_, l)| l)
        .ok_or(format!("no numa_maps line at or below {addr:#x}"))?;
    out.push_str("buffer: ");
    out.push_str(line);
    out.push('\n');
    Ok(out)
}

/// A minimal io_uring user written from the kernel's UAPI (`include/uapi/linux/io_uring.h`), raw syscalls only.
///
/// Why opens of a FIFO and not reads of a pipe: an io-wq worker given a read of a pollable file (a pipe) tries it
/// without blocking and, on EAGAIN, arms a poll and goes back to idle (`io_wq_submit_work` in io_uring/io_uring.c:
/// `needs_poll` for opcodes with `pollin`); idle workers beyond the last one exit after `WORKER_IDLE_TIMEOUT` (5 s,
/// io_uring/io-wq.c). An open has no poll: in io-wq it runs blocking (the inline try uses O_NONBLOCK, which a
/// forced-async request skips), and opening a FIFO for reading sleeps in `fifo_open` until a writer comes. Each
/// open pending in io-wq keeps a worker of its own asleep there (a worker that blocks makes io-wq start another
/// for the queued work, `io_wq_worker_sleeping`), so N opens leave N workers for as long as the ring lives.
mod uring {
    use std::ffi::CString;
    use std::io::{Error, Result};
    use std::sync::atomic::{AtomicU32, Ordering};

    /// `struct io_sqring_offsets` (40 bytes).
    #[repr(C)]
    #[derive(Default)]
    struct SqOffsets {
        head: u32,
        tail: u32,
        ring_mask: u32,
        ring_entries: u32,
        flags: u32,
        dropped: u32,
        array: u32,
        resv1: u32,
        user_addr: u64,
    }

    /// `struct io_cqring_offsets` (40 bytes).
    #[repr(C)]
    #[derive(Default)]
    struct CqOffsets {
        head: u32,
        tail: u32,
        ring_mask: u32,
        ring_entries: u32,
        overflow: u32,
        cqes: u32,
        flags: u32,
        resv1: u32,
        user_addr: u64,
    }

    /// `struct io_uring_params` (120 bytes).
    #[repr(C)]
    #[derive(Default)]
    struct Params {
        sq_entries: u32,
        cq_entries: u32,
        flags: u32,
        sq_thread_cpu: u32,
        sq_thread_idle: u32,
        features: u32,
        wq_fd: u32,
        resv: [u32; 3],
        sq_off: SqOffsets,
        cq_off: CqOffsets,
    }

    /// `struct io_uring_sqe` (64 bytes), the fields an open uses.
    #[repr(C)]
    #[derive(Default)]
    struct Sqe {
        opcode: u8,
        flags: u8,
        ioprio: u16,
        fd: i32,
        off: u64,
        addr: u64,
        len: u32,
        op_flags: u32,
        user_data: u64,
        buf_index: u16,
        personality: u16,
        file_index: i32,
        addr3: u64,
        pad: u64,
    }

    const _: () = assert!(std::mem::size_of::<Params>() == 120 && std::mem::size_of::<Sqe>() == 64);

    /// `IORING_OP_OPENAT` (enum io_uring_op: NOP 0 ... FALLOCATE 17, OPENAT 18).
    const OP_OPENAT: u8 = 18;
    /// `IOSQE_ASYNC` (1U << IOSQE_ASYNC_BIT, bit 4): always issue through io-wq.
    const SQE_ASYNC: u8 = 1 << 4;
    /// mmap offsets of the SQ ring and the SQE array.
    const OFF_SQ_RING: i64 = 0;
    const OFF_SQES: i64 = 0x1000_0000;

    /// A ring whose opens are pending; its mappings and descriptors are never released (the process keeps it
    /// until it exits).
    pub struct Ring {
        _fd: i32,
        _fifo: CString,
    }

    fn check(r: i64, what: &str) -> Result<i64> {
        if r < 0 {
            let e = Error::last_os_error();
            return Err(Error::new(e.kind(), format!("{what}: {e}")));
        }
        Ok(r)
    }

    fn map(fd: i32, len: usize, off: i64, what: &str) -> Result<*mut u8> {
        // SAFETY: a fresh shared mapping of the ring's fd at the offsets the UAPI names; never unmapped.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                off,
            )
        };
        if p == libc::MAP_FAILED {
            return check(-1, what).map(|_| std::ptr::null_mut());
        }
        Ok(p.cast())
    }

    /// Sets up a ring and submits `n` forced-async opens (O_RDONLY) of a fresh FIFO under /tmp.
    pub fn blocked_workers(n: usize) -> Result<Ring> {
        let entries = n.next_power_of_two().max(1) as u32;
        let mut p = Params::default();
        // SAFETY: io_uring_setup(entries, params) with a zeroed params struct of the UAPI's layout.
        let fd = check(
            unsafe { libc::syscall(libc::SYS_io_uring_setup, entries, &mut p as *mut Params) },
            "io_uring_setup",
        )? as i32;
        let sq_len = p.sq_off.array as usize + p.sq_entries as usize * 4;
        let sq = map(fd, sq_len, OFF_SQ_RING, "mmap SQ ring")?;
        let sqes = map(fd, p.sq_entries as usize * 64, OFF_SQES, "mmap SQEs")?.cast::<Sqe>();
        let fifo = CString::new(format!("/tmp/rig-toucher-{}.fifo", std::process::id())).expect("no NUL");
        // SAFETY: a NUL-terminated path.
        check(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) } as i64, "mkfifo")?;
        // SAFETY: the offsets the kernel returned lie within the SQ ring mapping of sq_len bytes.
        let (tail, mask, array) = unsafe {
            (
                &*sq.add(p.sq_off.tail as usize).cast::<AtomicU32>(),
                *sq.add(p.sq_off.ring_mask as usize).cast::<u32>(),
                sq.add(p.sq_off.array as usize).cast::<u32>(),
            )
        };
        for i in 0..n as u32 {
            let t = tail.load(Ordering::Relaxed);
            let idx = t & mask;
            let sqe = Sqe {
                opcode: OP_OPENAT,
                flags: SQE_ASYNC,
                fd: libc::AT_FDCWD,
                addr: fifo.as_ptr() as u64,
                op_flags: libc::O_RDONLY as u32,
                user_data: u64::from(i),
                ..Sqe::default()
            };
            // SAFETY: idx < sq_entries; the SQE array and index array are ours until the tail is published.
            unsafe {
                sqes.add(idx as usize).write(sqe);
                array.add(idx as usize).write(idx);
            }
            tail.store(t.wrapping_add(1), Ordering::Release);
            // SAFETY: io_uring_enter(fd, to_submit 1, min_complete 0, flags 0, no signal mask).
            let r = check(
                unsafe {
                    libc::syscall(libc::SYS_io_uring_enter, fd, 1u32, 0u32, 0u32, std::ptr::null::<u8>(), 0usize)
                },
                "io_uring_enter",
            )?;
            if r != 1 {
                return Err(Error::other(format!("io_uring_enter submitted {r} of 1")));
            }
        }
        // Ready means the workers are there and asleep in the open: wait for them (a generous bound), then unlink the
        // FIFO, which each of them already holds by its inode.
        let mut seen = Vec::new();
        for _ in 0..6000 {
            seen = workers_waiting()?;
            if seen.iter().filter(|w| w.as_str() == "wait_for_partner").count() >= n {
                // SAFETY: a NUL-terminated path.
                check(unsafe { libc::unlink(fifo.as_ptr()) } as i64, "unlink FIFO")?;
                return Ok(Ring { _fd: fd, _fifo: fifo });
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Err(Error::other(format!("after 60 s, {n} opens submitted, the io-wq workers wait in: {seen:?}")))
    }

    /// Where each of this process's io-wq workers (threads named `iou-wrk-TID`) sleeps (/proc/self/task/T/wchan).
    fn workers_waiting() -> Result<Vec<String>> {
        let mut out = Vec::new();
        for t in std::fs::read_dir("/proc/self/task")? {
            let dir = t?.path();
            let (Ok(comm), Ok(wchan)) =
                (std::fs::read_to_string(dir.join("comm")), std::fs::read_to_string(dir.join("wchan")))
            else {
                continue;
            };
            if comm.starts_with("iou-wrk-") {
                out.push(wchan.trim().to_string());
            }
        }
        Ok(out)
    }
}
