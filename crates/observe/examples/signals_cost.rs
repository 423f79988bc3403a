//! Per-cycle cost of the live signals with many processes: the socket scan (sock_diag dump, /proc/net/tcp,
//! /proc/PID/fd of every process) and the shared-memory scan (/proc/PID/maps of every process).
//!
//! `cargo run --release -p numapilot-observe --example signals_cost [PAIRS] [ROUNDS]` (root; default 500 pairs =
//! 1,000 processes, 7 rounds). Each pair of forked children holds the two ends of a unix socketpair and maps one
//! memfd shared; the first 100 pairs also hold the two ends of a loopback TCP connection. The children block on a
//! pipe and exit when this program ends. Prints the median and minimum wall time of each scan over the rounds, and
//! the median CPU time (this thread's clock) of the sock_diag TCP dump of both families at once
//! (`tcp_established`) against one per family (`tcp_established_by_family`), each a walk of the whole
//! established hash. `PAIRS` 0 starts no child (the TCP dumps then cost what the host's own table does).

use std::net::{TcpListener, TcpStream};
use std::os::fd::IntoRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Instant;

use numapilot_observe::sockets::{scan, tcp_established, tcp_established_by_family, unix_peers};
use numapilot_observe::Reader;

fn main() {
    let mut args = std::env::args().skip(1);
    let pairs: usize = args.next().map_or(500, |a| a.parse().expect("PAIRS"));
    let rounds: usize = args.next().map_or(7, |a| a.parse().expect("ROUNDS"));
    let mut release = [0 as libc::c_int; 2];
    // SAFETY: room for two fds.
    assert_eq!(unsafe { libc::pipe(release.as_mut_ptr()) }, 0);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut children = Vec::new();
    for i in 0..pairs {
        let (a, b) = UnixStream::pair().unwrap();
        let (a, b) = (a.into_raw_fd(), b.into_raw_fd());
        let tcp = (i < 100).then(|| {
            let c = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (s, _) = listener.accept().unwrap();
            (c.into_raw_fd(), s.into_raw_fd())
        });
        // SAFETY: a memfd of one page mapped shared, inherited by both children.
        let mfd = unsafe { libc::memfd_create(c"signals-cost".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(mfd >= 0);
        unsafe { libc::ftruncate(mfd, 4096) };
        let map = unsafe {
            libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, mfd, 0)
        };
        assert_ne!(map, libc::MAP_FAILED);
        for side in 0..2 {
            let (keep, drop_) = if side == 0 { (a, b) } else { (b, a) };
            let tcp_drop = tcp.map(|(c, s)| if side == 0 { s } else { c });
            // SAFETY: the child calls only async-signal-safe functions.
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0, "fork failed after {} children", children.len());
            if pid == 0 {
                let mut x = [0u8; 1];
                unsafe {
                    libc::close(drop_);
                    if let Some(fd) = tcp_drop {
                        libc::close(fd);
                    }
                    libc::close(release[1]);
                    libc::read(release[0], x.as_mut_ptr().cast(), 1);
                    libc::_exit(0);
                }
            }
            let _ = keep;
            children.push(pid);
        }
        // SAFETY: the parent keeps none of the pair's resources.
        unsafe {
            libc::close(a);
            libc::close(b);
            if let Some((c, s)) = tcp {
                libc::close(c);
                libc::close(s);
            }
            libc::munmap(map, 4096);
            libc::close(mfd);
        }
    }
    let reader = Reader::new("/");
    let pids = reader.pids().unwrap();
    println!("{} children in {pairs} pairs; {} processes on the system", children.len(), pids.len());
    let mut t_diag = Vec::new();
    let mut t_scan = Vec::new();
    let mut t_maps = Vec::new();
    let (mut t_tcp_one, mut t_tcp_two) = (Vec::new(), Vec::new());
    let mut last = (0, 0, 0, 0);
    for _ in 0..rounds {
        let c = thread_cpu_ms();
        let tcp = tcp_established().unwrap().len();
        t_tcp_one.push(thread_cpu_ms() - c);
        let c = thread_cpu_ms();
        let tcp_two = tcp_established_by_family().unwrap().len();
        t_tcp_two.push(thread_cpu_ms() - c);
        // Both read the same table; a connection may open or close between the two reads.
        let _ = (tcp, tcp_two);
        let t = Instant::now();
        let peers = unix_peers().unwrap();
        t_diag.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        let s = scan(Path::new("/"), &pids, Some(&peers)).unwrap();
        t_scan.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        let shared = reader.read_shared(&pids).unwrap();
        t_maps.push(t.elapsed().as_secs_f64() * 1e3);
        last = (s.comm.len(), s.fds_scanned, shared.len(), peers.len());
    }
    let stat = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[0])
    };
    let (d, dm) = stat(&mut t_diag);
    let (s, sm) = stat(&mut t_scan);
    let (m, mm) = stat(&mut t_maps);
    let ((one, _), (two, _)) = (stat(&mut t_tcp_one), stat(&mut t_tcp_two));
    println!("sock_diag unix dump ({} sockets with a peer): median {d:.2} ms, min {dm:.2} ms", last.3);
    println!(
        "socket scan (tcp tables + fds of {} processes, {} pairs found): median {s:.2} ms, min {sm:.2} ms",
        last.1, last.0
    );
    println!("maps scan ({} processes, {} shared objects): median {m:.2} ms, min {mm:.2} ms", pids.len(), last.2);
    println!(
        "sock_diag TCP dump, CPU: both families at once median {one:.2} ms, one per family {two:.2} ms (ratio {:.2})",
        one / two
    );
    // SAFETY: closing the write end releases every child; then reap them.
    unsafe { libc::close(release[1]) };
    for pid in children {
        // SAFETY: our children.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
    }
}

/// CPU time of the calling thread, ms.
fn thread_cpu_ms() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the struct we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}
