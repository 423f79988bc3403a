//! Communication pairs between real processes: a loopback TCP connection, a unix socketpair and a
//! connected unix stream socket, each end held by a different process (this one and a forked child),
//! found through /proc/net/tcp, sock_diag and /proc/PID/fd.

use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, IntoRawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

use numapilot_observe::net::{tcp_pairs, TCP_ESTABLISHED};
use numapilot_observe::sockets::{
    fd_sockets, fd_sockets_from, scan, socket_inodes, tcp_established, tcp_established_by_family, tcp_tables,
    unix_peers,
};
use numapilot_observe::{CommKind, CommSample};

/// Held by every test here: the fork test's child inherits the whole fd table, so another test's
/// sockets open during its fork and scan would be matched too (2 events per inherited pair), and
/// the slices test counts this process's fd links.
static SOCKETS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn inode_of(fd: libc::c_int) -> u64 {
    // SAFETY: fstat on an fd we own into a zeroed stat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::fstat(fd, &mut st) }, 0);
    st.st_ino
}

#[test]
fn tcp_and_unix_peers_across_fork() {
    let _one = SOCKETS.lock().unwrap_or_else(|e| e.into_inner());
    // TCP over loopback: both ends created here, before the fork.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (server, _) = l.accept().unwrap();
    drop(l);
    // TCP over IPv6 loopback, when the host has it (a listing in /proc/net/tcp6).
    let v6 = TcpListener::bind("[::1]:0").ok().map(|l6| {
        let c = TcpStream::connect(l6.local_addr().unwrap()).unwrap();
        let (s, _) = l6.accept().unwrap();
        (c.into_raw_fd(), s.into_raw_fd())
    });
    // A unix socketpair, and a unix stream connected through an abstract-namespace listener.
    let (ua, ub) = UnixStream::pair().unwrap();
    let name = format!("numapilot-test-{}", std::process::id());
    let addr =
        <std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(name.as_bytes())
            .unwrap();
    let ul = UnixListener::bind_addr(&addr).unwrap();
    let uc = UnixStream::connect_addr(&addr).unwrap();
    let (us, _) = ul.accept().unwrap();
    drop(ul);

    let (client, server, ua, ub, uc, us) = (
        client.into_raw_fd(),
        server.into_raw_fd(),
        ua.into_raw_fd(),
        ub.into_raw_fd(),
        uc.into_raw_fd(),
        us.into_raw_fd(),
    );
    let (c6, s6) = v6.unwrap_or((-1, -1));
    let mine = [client, ua, uc, c6];
    let theirs = [server, ub, us, s6];
    let expected_events = if v6.is_some() { 4 } else { 3 };
    let mut p = [0 as libc::c_int; 2];
    // SAFETY: p has room for two fds.
    assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
    // SAFETY: the child calls only async-signal-safe functions (close, read, _exit).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let mut b = [0u8; 1];
        // SAFETY: child side: keep `theirs`, close `mine`, wait, exit.
        unsafe {
            for fd in mine.into_iter().filter(|&fd| fd >= 0) {
                libc::close(fd);
            }
            libc::close(p[1]);
            libc::read(p[0], b.as_mut_ptr().cast(), 1);
            libc::_exit(0);
        }
    }
    // SAFETY: parent side: keep `mine`, close `theirs`.
    unsafe {
        libc::close(p[0]);
        for fd in theirs.into_iter().filter(|&fd| fd >= 0) {
            libc::close(fd);
        }
    }
    let me = std::process::id();
    let child = pid as u32;
    let my_inodes: Vec<u64> = mine.iter().filter(|&&fd| fd >= 0).map(|&fd| inode_of(fd)).collect();

    // This process's fd table holds its three ends.
    let held = socket_inodes(Path::new("/proc"), me).unwrap().unwrap();
    for ino in &my_inodes {
        assert!(held.contains(ino), "inode {ino} not among {held:?}");
    }
    // sock_diag names the peers of both unix ends.
    let peers = unix_peers().unwrap();
    for ino in &my_inodes[1..3] {
        assert!(peers.iter().any(|&(a, _)| a == *ino), "unix inode {ino} has no peer in the dump");
    }

    let got = scan(Path::new("/"), &[me, child], Some(&peers)).unwrap();
    let pair = got.comm.iter().find(|c| c.a.0 == me.min(child) && c.b.0 == me.max(child)).copied();
    assert_eq!(
        pair,
        Some(CommSample {
            a: (me.min(child), me.min(child)),
            b: (me.max(child), me.max(child)),
            kind: CommKind::Socket,
            events: expected_events
        }),
        "{got:?}"
    );
    assert!(got.tcp_pairs > usize::from(v6.is_some()) && got.unix_pairs >= 2, "{got:?}");

    // Without the unix peers only the TCP connection pairs them.
    let tcp_only = scan(Path::new("/"), &[me, child], None).unwrap();
    let pair = tcp_only.comm.iter().find(|c| c.a.0 == me.min(child) && c.b.0 == me.max(child));
    assert_eq!(pair.map(|c| c.events), Some(expected_events - 2), "{tcp_only:?}");

    // Release and reap the child; its pid is then skipped, and this process talks to nobody.
    // SAFETY: our pipe end and child.
    unsafe {
        libc::close(p[1]);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    let after = scan(Path::new("/"), &[me, child], Some(&unix_peers().unwrap())).unwrap();
    assert!(after.comm.iter().all(|c| c.a.0 != child && c.b.0 != child), "{after:?}");
    for fd in mine.into_iter().filter(|&fd| fd >= 0) {
        // SAFETY: our fds.
        unsafe { libc::close(fd) };
    }
}

/// The sock_diag TCP dump gives the ESTABLISHED lines of /proc/net/tcp and tcp6: same 4-tuples,
/// uid and inodes for this test's own loopback connections (IPv4, and IPv6 where the host has it),
/// and their two ends pair up.
#[test]
fn tcp_dump_matches_the_proc_tables() {
    let _one = SOCKETS.lock().unwrap_or_else(|e| e.into_inner());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (server, _) = l.accept().unwrap();
    let v6 = TcpListener::bind("[::1]:0").ok().map(|l6| {
        let c = TcpStream::connect(l6.local_addr().unwrap()).unwrap();
        let (s, _) = l6.accept().unwrap();
        (c, s)
    });
    let mut ours = vec![inode_of(client.as_raw_fd()), inode_of(server.as_raw_fd())];
    if let Some((c, s)) = &v6 {
        ours.extend([inode_of(c.as_raw_fd()), inode_of(s.as_raw_fd())]);
    }
    let dumped = tcp_established().unwrap();
    let files = tcp_tables(Path::new("/")).unwrap();
    assert!(dumped.iter().all(|s| s.state == TCP_ESTABLISHED), "{dumped:?}");
    for ino in &ours {
        let d = dumped.iter().find(|s| s.inode == *ino);
        let f = files.iter().find(|s| s.inode == *ino);
        assert!(d.is_some(), "inode {ino} not in the dump {dumped:?}");
        assert_eq!(d, f, "inode {ino}: dump and /proc/net/tcp differ");
    }
    let pairs = tcp_pairs(&dumped);
    let (a, b) = (ours[0].min(ours[1]), ours[0].max(ours[1]));
    assert!(pairs.iter().any(|p| (p.a, p.b) == (a, b) && p.loopback), "{pairs:?}");
    drop((client, server, l, v6));
}

/// The one dump of both families gives, of this test's own loopback connections (IPv4, and IPv6
/// where the host has it), exactly what the two per-family dumps give, in their order: every
/// IPv4 socket before every IPv6 one (the kernel's walk mixes them by hash bucket).
#[test]
fn one_dump_of_both_families_is_the_two_per_family_dumps() {
    let _one = SOCKETS.lock().unwrap_or_else(|e| e.into_inner());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let v4: Vec<(TcpStream, TcpStream)> = (0..4)
        .map(|_| {
            let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            (c, l.accept().unwrap().0)
        })
        .collect();
    let l6 = TcpListener::bind("[::1]:0").ok();
    let v6: Vec<(TcpStream, TcpStream)> = l6
        .iter()
        .flat_map(|l6| {
            (0..4).map(move |_| {
                let c = TcpStream::connect(l6.local_addr().unwrap()).unwrap();
                (c, l6.accept().unwrap().0)
            })
        })
        .collect();
    let ours: Vec<u64> =
        v4.iter().chain(&v6).flat_map(|(c, s)| [inode_of(c.as_raw_fd()), inode_of(s.as_raw_fd())]).collect();
    let one = tcp_established().unwrap();
    let two = tcp_established_by_family().unwrap();
    // Other processes' connections come and go between the two reads: ours stay.
    let mine = |v: &[numapilot_observe::net::TcpSocket]| -> Vec<numapilot_observe::net::TcpSocket> {
        v.iter().filter(|s| ours.contains(&s.inode)).cloned().collect()
    };
    assert_eq!(mine(&one).len(), ours.len(), "{one:?}");
    assert_eq!(mine(&one), mine(&two));
    let first_v6 = one.iter().position(|s| s.local.0.is_ipv6()).unwrap_or(one.len());
    assert!(one[first_v6..].iter().all(|s| s.local.0.is_ipv6()), "IPv4 after IPv6: {one:?}");
    drop((v4, v6, l, l6));
}

/// A large fd table read in slices of at most 7 links, each slice continuing where the last one
/// stopped, holds the same sockets as one whole read: every end of 60 socketpairs.
#[test]
fn fd_table_in_slices() {
    let _one = SOCKETS.lock().unwrap_or_else(|e| e.into_inner());
    let pairs: Vec<(UnixStream, UnixStream)> = (0..60).map(|_| UnixStream::pair().unwrap()).collect();
    let ours: Vec<u64> = pairs.iter().flat_map(|(a, b)| [inode_of(a.as_raw_fd()), inode_of(b.as_raw_fd())]).collect();
    let proc_dir = Path::new("/proc");
    let me = std::process::id();
    let whole = fd_sockets(proc_dir, me).unwrap().unwrap();
    let (mut from, mut sliced, mut slices, mut links) = (0, Vec::new(), 0, 0);
    loop {
        let c = fd_sockets_from(proc_dir, me, from, 7).unwrap().unwrap();
        assert!(c.links <= 7, "{c:?}");
        links += c.links;
        sliced.extend(c.sockets);
        slices += 1;
        match c.next {
            Some(n) => from = n,
            None => break,
        }
    }
    sliced.sort_unstable();
    sliced.dedup();
    for ino in &ours {
        assert!(whole.sockets.contains(ino) && sliced.contains(ino), "inode {ino} missing");
    }
    assert!(slices >= 120 / 7, "{slices} slices for {links} links");
    assert!(links >= 120, "{links}");
    // Other tests of this binary open and close fds meanwhile: compare only our sockets.
    let mine = |v: &[u64]| v.iter().filter(|i| ours.contains(i)).count();
    assert_eq!(mine(&whole.sockets), mine(&sliced));
    assert_eq!(fd_sockets_from(proc_dir, u32::MAX - 1, 0, 7).unwrap(), None, "no such process");
    drop(pairs);
}
