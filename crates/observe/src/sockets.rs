//! Communication pairs from sockets: which processes hold the two ends of a local connection.
//!
//! # Problem
//!
//! A client and a server on one host that talk over loopback TCP or a unix socket bounce cache lines
//! and wake each other: they belong on one node. The kernel knows both ends of every connection, but
//! names them by socket inode, not by process.
//!
//! # Approach
//!
//! ```text
//!   sock_diag (IPv4+IPv6 at once, TCP, ESTABLISHED) ─┐  (or /proc/net/tcp, tcp6: tcp_tables)
//!     ──► ESTABLISHED ends matched by 4-tuple        ─┐
//!   sock_diag (AF_UNIX, UDIAG_SHOW_PEER) ──► (inode, peer inode) ─┴─► pairs of socket inodes (pairs)
//!                                                        none? stop here (no fd scan at all)
//!   /proc/PID/fd/*  readlink "socket:[N]" ──► inode -> pids     (every process: an inode may have several holders)
//!   pair (a, b) ──► holders(a) x holders(b), different pids ──► CommSample { (pa,pa), (pb,pb), Socket, events }
//!                                                                   (match_holders)
//! ```
//!
//! [`scan`] does all of it at once; the daemon reads the tables each cycle and the fd links of a
//! few processes per cycle, keeping each process's socket inodes between its reads, and matches
//! the two with [`match_holders`].
//!
//! The unix peers come from the `NETLINK_SOCK_DIAG` dump (`include/uapi/linux/sock_diag.h`,
//! `unix_diag.h`; kernel side `net/unix/diag.c`, in every kernel since 3.3 with `CONFIG_UNIX_DIAG`):
//! one `SOCK_DIAG_BY_FAMILY` request with `NLM_F_DUMP` for family `AF_UNIX`, all states, asking for
//! `UDIAG_SHOW_PEER`; each reply is a `unix_diag_msg` (inode) followed by attributes, of which
//! `UNIX_DIAG_PEER` carries the peer's inode as a u32. Written here with raw `libc` calls: no crate,
//! nothing run. `/proc/net/unix` has the same sockets but not their peers.
//!
//! The TCP ends come the same way ([`tcp_established`]; `include/uapi/linux/inet_diag.h`, kernel side
//! `net/ipv4/inet_diag.c`, `CONFIG_INET_DIAG`, since 2.6): one dump for protocol TCP with
//! `idiag_states` = ESTABLISHED only; each reply is an `inet_diag_msg` with the 4-tuple (ports and
//! addresses in network byte order), uid and inode: what a line of `/proc/net/tcp{,6}` holds. The
//! reason is cost: reading `/proc/net/tcp` walks the whole established hash table (262,144 buckets
//! on the 24 GB development host, sized by memory, not by connections) for every `read` call,
//! listening sockets included, and `tcp6` walks it again: about 3.4 ms of CPU per file with 3
//! sockets open (measured: `perf stat -r 20 cat /proc/net/tcp /proc/net/tcp6`, 9.4 ms with the
//! process start), against about 1.2 ms for `ss -tn state established` (both dumps, the process
//! start included): the dump resumes where the last message stopped and skips empty buckets
//! without a lock. The dump is still a walk of every bucket, once per request: a
//! `SOCK_DIAG_BY_FAMILY` request names one family (`AF_INET` or `AF_INET6`; `AF_UNSPEC` has no
//! handler there), so the two families took two walks, 1.25 ms of CPU each in the daemon cycle
//! benchmark (`perf record` of `cycle_cost`, 10.7% of a 23 ms cycle for the two), the costliest
//! signal. The older `TCPDIAG_GETSOCK` request (`struct inet_diag_req`, still in every kernel with
//! inet_diag) dumps with family `AF_UNSPEC`, both families in one walk: [`tcp_established`] asks
//! that, and per family ([`tcp_established_by_family`]) only when a kernel refuses it: 1.22 ms of
//! CPU a call against 2.08 ms for the two (median of 21 rounds of `cargo run --release -p
//! numapilot-observe --example signals_cost -- 0 21` on the development host, 1,076 processes
//! running). [`tcp_tables`] (the files) stays for fixture roots and kernels without inet_diag.
//!
//! # Units
//!
//! `events` of a pair: the number of connected socket pairs between the two processes, counted once
//! per observation (the kernel keeps no per-socket message count for unix sockets, and the TCP ones in
//! `tcp_info` are only reachable through inet_diag, not read here). Ends are processes (`tid = pid`,
//! as [`crate::CommSample`] documents); the model resolves them to each process's busiest thread.
//!
//! # Limits
//!
//! - An inode held by several processes (an fd inherited across fork and kept) gives a pair for each
//!   combination of holders with different pids: the sharing is real, which one talks is unknown.
//! - Only the reader's network namespace (see [`crate::net`]); sockets in other namespaces are missed.
//! - Cost: one readlink per open fd of every process read, but only when some local pair
//!   exists. The scan does not stop once every wanted inode has a holder: a socketpair whose two ends
//!   both stay open in parent and child after a fork would then be seen in the parent only, as a pair
//!   of the parent with itself, and missed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::net::{parse_tcp, tcp_pairs, TcpSocket, TCP_ESTABLISHED};
use crate::sample::{CommKind, CommSample};
use crate::signal_error::SignalError;

/// The socket inodes a process holds: `/proc/PID/fd/*` links of the form `socket:[N]`. `Ok(None)` when
/// the process is gone; an fd closed while being read is skipped.
pub fn socket_inodes(proc_dir: &Path, pid: u32) -> Result<Option<Vec<u64>>, SignalError> {
    Ok(fd_sockets(proc_dir, pid)?.map(|f| f.sockets))
}

/// What one read of a process's fd directory found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FdSockets {
    /// Socket inodes held, sorted, each once.
    pub sockets: Vec<u64>,
    /// Fd links read (the directory's entries): the work the read cost.
    pub links: usize,
}

/// [`socket_inodes`] with the number of fd links read: the whole table in one
/// [`fd_sockets_from`].
pub fn fd_sockets(proc_dir: &Path, pid: u32) -> Result<Option<FdSockets>, SignalError> {
    Ok(fd_sockets_from(proc_dir, pid, 0, usize::MAX)?.map(|c| FdSockets { sockets: c.sockets, links: c.links }))
}

/// The inode of an fd link text `socket:[N]` (`fs/d_path.c` `dynamic_dname` via `sockfs_dname`).
pub fn socket_link_inode(link: &[u8]) -> Option<u64> {
    let n = link.strip_prefix(b"socket:[")?.strip_suffix(b"]")?;
    std::str::from_utf8(n).ok().and_then(crate::signal_error::dec)
}

/// One slice of a process's fd table ([`fd_sockets_from`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FdChunk {
    /// Socket inodes held in this slice, sorted, each once.
    pub sockets: Vec<u64>,
    /// Fd links read.
    pub links: usize,
    /// Directory position to continue from next time; `None` when the table was read to its end.
    pub next: Option<u64>,
}

/// `struct linux_dirent64` header length before the name: `d_ino` (8), `d_off` (8), `d_reclen` (2),
/// `d_type` (1).
const DIRENT64_NAME: usize = 19;

/// Reads at most `max_links` fd links of `/proc/PID/fd`, starting at directory position `from` (0:
/// the beginning; else a [`FdChunk::next`] of an earlier call), so that a process holding tens of
/// thousands of descriptors can be read over several calls. `Ok(None)` when the process is gone. The
/// directory is listed with `getdents64` into a buffer sized for the links wanted and each link read
/// with `readlinkat` on the directory (no path walk from /); positions are the kernel's for this
/// directory (`fs/proc/fd.c`: an fd number plus 2), so a slice starts at the first fd still open at
/// or after where the last one stopped, whatever was opened or closed in between.
pub fn fd_sockets_from(proc_dir: &Path, pid: u32, from: u64, max_links: usize) -> Result<Option<FdChunk>, SignalError> {
    let path = proc_dir.join(pid.to_string()).join("fd");
    let io_err = |path: &Path, e: io::Error| SignalError::Io { path: path.to_path_buf(), source: e };
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io_err(&path, io::Error::from_raw_os_error(libc::EINVAL)))?;
    // SAFETY: a NUL-terminated path; the descriptor is owned by `Fd`.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return if gone(&e) { Ok(None) } else { Err(io_err(&path, e)) };
    }
    let dir = Fd(fd);
    // SAFETY: lseek on our descriptor.
    if from > 0 && unsafe { libc::lseek(dir.0, from as libc::off_t, libc::SEEK_SET) } < 0 {
        let e = io::Error::last_os_error();
        return if gone(&e) { Ok(None) } else { Err(io_err(&path, e)) };
    }
    let max_links = max_links.max(1);
    // An fd's entry takes 24-32 bytes ("." and ".." 24): room for the links wanted, so the kernel
    // lists (and instantiates) little more than that.
    let mut buf = vec![0u8; max_links.saturating_add(2).min(1024) * 32];
    let mut out = FdChunk { next: Some(from), ..FdChunk::default() };
    let mut link = [0u8; 64];
    'list: loop {
        // SAFETY: the kernel writes at most buf.len() bytes into our buffer.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, dir.0, buf.as_mut_ptr(), buf.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if gone(&e) { Ok(None) } else { Err(io_err(&path, e)) };
        }
        if n == 0 {
            out.next = None;
            break;
        }
        let mut b = &buf[..n as usize];
        while b.len() >= DIRENT64_NAME {
            let off = i64::from_ne_bytes(b[8..16].try_into().expect("8 bytes"));
            let reclen = u16::from_ne_bytes([b[16], b[17]]) as usize;
            if reclen < DIRENT64_NAME || reclen > b.len() {
                return Err(SignalError::Malformed {
                    what: "getdents64 reply",
                    reason: format!("record length {reclen} with {} bytes left", b.len()),
                });
            }
            let name = &b[DIRENT64_NAME..reclen];
            let name = &name[..name.iter().position(|&c| c == 0).unwrap_or(name.len())];
            if name != b"." && name != b".." {
                if out.links >= max_links {
                    break 'list;
                }
                out.links += 1;
                let mut cname = [0u8; 24];
                if name.len() < cname.len() {
                    cname[..name.len()].copy_from_slice(name);
                    // SAFETY: a NUL-terminated name relative to our directory descriptor; the kernel
                    // writes at most link.len() bytes.
                    let len =
                        unsafe { libc::readlinkat(dir.0, cname.as_ptr().cast(), link.as_mut_ptr().cast(), link.len()) };
                    if len > 0 {
                        if let Some(ino) = socket_link_inode(&link[..len as usize]) {
                            out.sockets.push(ino);
                        }
                    } else if len < 0 {
                        let e = io::Error::last_os_error();
                        // An fd closed since the listing is skipped; the process gone ends the read.
                        if e.raw_os_error() == Some(libc::ESRCH) {
                            return Ok(None);
                        }
                        if !gone(&e) {
                            return Err(io_err(&path.join(String::from_utf8_lossy(name).as_ref()), e));
                        }
                    }
                }
            }
            out.next = Some(off as u64);
            b = &b[reclen..];
        }
    }
    out.sockets.sort_unstable();
    out.sockets.dedup();
    Ok(Some(out))
}

fn gone(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ESRCH))
}

// ----- sock_diag ------------------------------------------------------------------------------------

/// `SOCK_DIAG_BY_FAMILY` (`include/uapi/linux/sock_diag.h`).
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `TCPDIAG_GETSOCK` (`include/uapi/linux/inet_diag.h`): the older inet_diag request, whose dump
/// asks for family `AF_UNSPEC` (`inet_diag_dump_compat` in `net/ipv4/inet_diag.c`), so one walk
/// of the established hash answers for IPv4 and IPv6; its replies carry this type.
const TCPDIAG_GETSOCK: u16 = 18;
/// `struct inet_diag_req` length, bytes: family, source and destination lengths, ext (4),
/// `inet_diag_sockid` (48), states, dbs (2 x 4).
const INET_DIAG_REQ_LEN: usize = 60;
/// `UDIAG_SHOW_PEER` (`include/uapi/linux/unix_diag.h`).
const UDIAG_SHOW_PEER: u32 = 0x4;
/// `UNIX_DIAG_PEER`, the third attribute of the enum in `unix_diag.h`.
const UNIX_DIAG_PEER: u16 = 2;
/// Netlink header length (`struct nlmsghdr`), bytes.
const NLMSG_HDRLEN: usize = 16;
/// `struct unix_diag_msg` length, bytes.
const UNIX_DIAG_MSG_LEN: usize = 16;

/// Closes a file descriptor when dropped.
#[derive(Debug)]
struct Fd(libc::c_int);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: we own the descriptor and close it once.
        unsafe { libc::close(self.0) };
    }
}

/// The connected unix sockets of the reader's network namespace and their peers, from one
/// `NETLINK_SOCK_DIAG` dump: `(inode, peer inode)` for every socket that has a peer (both directions
/// appear, as the kernel lists both ends).
pub fn unix_peers() -> Result<Vec<(u64, u64)>, SignalError> {
    // unix_diag_req (24 bytes).
    let mut body = [0u8; 24];
    body[0] = libc::AF_UNIX as u8; // sdiag_family
    body[1] = 0; // sdiag_protocol
    body[4..8].copy_from_slice(&u32::MAX.to_ne_bytes()); // udiag_states: all
    body[8..12].copy_from_slice(&0u32.to_ne_bytes()); // udiag_ino: any
    body[12..16].copy_from_slice(&UDIAG_SHOW_PEER.to_ne_bytes());
    body[16..24].copy_from_slice(&[0xff; 8]); // udiag_cookie: none (INET_DIAG_NOCOOKIE)
    let mut out = Vec::new();
    diag_dump(SOCK_DIAG_BY_FAMILY, &body, "sock_diag unix dump", &mut |b| parse_unix_diag(b, &mut out))?;
    Ok(out)
}

/// `struct inet_diag_msg` length, bytes: family, state, timer, retrans (4), `inet_diag_sockid` (48),
/// expires, rqueue, wqueue, uid, inode (5 x 4).
const INET_DIAG_MSG_LEN: usize = 72;

/// The ESTABLISHED TCP sockets of the reader's network namespace, IPv4 and IPv6, from one
/// `NETLINK_SOCK_DIAG` dump of both families (`TCPDIAG_GETSOCK` with `idiag_states` =
/// ESTABLISHED; see the module essay): the lines of `/proc/net/tcp` and `tcp6` in that state, at a
/// fraction of their cost. The IPv4 sockets come first, then the IPv6 ones, each in the kernel's
/// order, as [`tcp_established_by_family`] gives them. A kernel that refuses the request (one
/// without the older interface) is asked per family from then on. Fields as [`TcpSocket`]
/// documents; IPv4 ends of an IPv6 socket appear as `::ffff:a.b.c.d`, as in `tcp6`.
pub fn tcp_established() -> Result<Vec<TcpSocket>, SignalError> {
    use std::sync::atomic::{AtomicBool, Ordering};
    static REFUSED: AtomicBool = AtomicBool::new(false);
    if REFUSED.load(Ordering::Relaxed) {
        return tcp_established_by_family();
    }
    // inet_diag_req: family AF_UNSPEC (the kernel sets it anyway), no lengths or ext, a zero
    // sockid (any), states, dbs 0.
    let mut body = [0u8; INET_DIAG_REQ_LEN];
    body[52..56].copy_from_slice(&(1u32 << TCP_ESTABLISHED).to_ne_bytes());
    let mut out = Vec::new();
    match diag_dump(TCPDIAG_GETSOCK, &body, "sock_diag inet dump", &mut |b| parse_inet_diag(b, &mut out)) {
        Ok(()) => {}
        Err(SignalError::Sys { source, .. })
            if matches!(source.raw_os_error(), Some(libc::EINVAL | libc::EOPNOTSUPP | libc::ENOENT)) =>
        {
            REFUSED.store(true, Ordering::Relaxed);
            return tcp_established_by_family();
        }
        Err(e) => return Err(e),
    }
    // One walk gives the families mixed, by hash bucket; the per-family dumps gave IPv4 first.
    let (mut v4, v6): (Vec<TcpSocket>, Vec<TcpSocket>) = out.into_iter().partition(|s| s.local.0.is_ipv4());
    v4.extend(v6);
    Ok(v4)
}

/// [`tcp_established`] from two dumps, one per family (`inet_diag_req_v2` for `AF_INET`, then
/// `AF_INET6`): each walks the whole established hash table, so this costs twice the one dump of
/// both. For kernels that refuse that one, and to check it against.
pub fn tcp_established_by_family() -> Result<Vec<TcpSocket>, SignalError> {
    let mut out = Vec::new();
    for family in [libc::AF_INET, libc::AF_INET6] {
        // inet_diag_req_v2 (56 bytes): family, protocol, ext, pad, states, then a zero sockid (any).
        let mut body = [0u8; 56];
        body[0] = family as u8;
        body[1] = libc::IPPROTO_TCP as u8;
        body[4..8].copy_from_slice(&(1u32 << TCP_ESTABLISHED).to_ne_bytes());
        diag_dump(SOCK_DIAG_BY_FAMILY, &body, "sock_diag inet dump", &mut |b| parse_inet_diag(b, &mut out))?;
    }
    Ok(out)
}

/// Sends one dump request of netlink type `ty` (`SOCK_DIAG_BY_FAMILY`, `TCPDIAG_GETSOCK`) whose
/// body (after the netlink header) is `body`, and hands each reply datagram to `parse` until it
/// reports `NLMSG_DONE` (`Ok(true)`).
fn diag_dump(
    ty: u16,
    body: &[u8],
    what: &'static str,
    parse: &mut dyn FnMut(&[u8]) -> Result<bool, SignalError>,
) -> Result<(), SignalError> {
    let sys = |what: &str| SignalError::Sys { what: what.to_string(), source: io::Error::last_os_error() };
    // SAFETY: plain socket creation; the descriptor is owned by `Fd`.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_SOCK_DIAG) };
    if fd < 0 {
        return Err(sys("socket(AF_NETLINK, NETLINK_SOCK_DIAG)"));
    }
    let fd = Fd(fd);
    // nlmsghdr (16) + body, native byte order as netlink uses.
    let mut req = vec![0u8; NLMSG_HDRLEN + body.len()];
    let len = req.len() as u32;
    req[0..4].copy_from_slice(&len.to_ne_bytes());
    req[4..6].copy_from_slice(&ty.to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
    req[6..8].copy_from_slice(&flags.to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes()); // sequence number
    req[NLMSG_HDRLEN..].copy_from_slice(body);
    // SAFETY: a zeroed sockaddr_nl with the family set addresses the kernel (pid 0).
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: the buffer and address are valid for the lengths given.
    let sent = unsafe {
        libc::sendto(
            fd.0,
            req.as_ptr().cast(),
            req.len(),
            0,
            (&kernel as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if sent < 0 {
        return Err(sys(&format!("sendto({what})")));
    }
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: zeroed is a valid sockaddr_nl; the kernel writes at most buf.len() bytes into
        // our buffer and at most `len` into `from`.
        let mut from: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
        let n = unsafe {
            libc::recvfrom(
                fd.0,
                buf.as_mut_ptr().cast(),
                buf.len(),
                0,
                (&mut from as *mut libc::sockaddr_nl).cast(),
                &mut len,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(SignalError::Sys { what: format!("recv({what})"), source: e });
        }
        // Only the kernel (port 0) answers a dump; anything else is not its reply (as the proc
        // connector's reader checks).
        if from.nl_pid != 0 {
            continue;
        }
        if n == 0 {
            return Err(SignalError::Malformed {
                what: "sock_diag reply",
                reason: "end of stream before NLMSG_DONE".into(),
            });
        }
        if parse(&buf[..n as usize])? {
            return Ok(());
        }
    }
}

/// Walks the netlink messages of one sock_diag datagram, handing the body of each message of a
/// type in `types` to `on_msg`; `Ok(true)` when it held `NLMSG_DONE`.
fn parse_diag(
    mut b: &[u8],
    types: &[u16],
    what: &'static str,
    on_msg: &mut dyn FnMut(&[u8]) -> Result<(), SignalError>,
) -> Result<bool, SignalError> {
    let bad = |reason: String| SignalError::Malformed { what: "sock_diag reply", reason };
    while b.len() >= NLMSG_HDRLEN {
        let len = u32_at(b, 0) as usize;
        let ty = u16_at(b, 4);
        if len < NLMSG_HDRLEN || len > b.len() {
            return Err(bad(format!("message length {len} with {} bytes left", b.len())));
        }
        let msg = &b[NLMSG_HDRLEN..len];
        match i32::from(ty) {
            libc::NLMSG_DONE => return Ok(true),
            libc::NLMSG_ERROR => {
                let code = if msg.len() >= 4 { u32_at(msg, 0) as i32 } else { 0 };
                return Err(SignalError::Sys { what: what.into(), source: io::Error::from_raw_os_error(-code) });
            }
            _ if types.contains(&ty) => on_msg(msg)?,
            _ => {}
        }
        let step = (len + 3) & !3;
        b = if step >= b.len() { &[] } else { &b[step..] };
    }
    Ok(false)
}

fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_ne_bytes([b[i], b[i + 1]])
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// Parses one datagram of a sock_diag unix dump into `out`; `Ok(true)` when it held `NLMSG_DONE`.
pub fn parse_unix_diag(b: &[u8], out: &mut Vec<(u64, u64)>) -> Result<bool, SignalError> {
    let bad = |reason: String| SignalError::Malformed { what: "sock_diag reply", reason };
    parse_diag(b, &[SOCK_DIAG_BY_FAMILY], "sock_diag unix dump", &mut |msg| {
        if msg.len() < UNIX_DIAG_MSG_LEN {
            return Err(bad(format!("unix_diag_msg of {} bytes", msg.len())));
        }
        let ino = u64::from(u32_at(msg, 4));
        let mut a = &msg[UNIX_DIAG_MSG_LEN..];
        while a.len() >= 4 {
            let alen = u16_at(a, 0) as usize;
            let aty = u16_at(a, 2) & 0x3fff; // without NLA_F_NESTED / NLA_F_NET_BYTEORDER
            if alen < 4 || alen > a.len() {
                return Err(bad(format!("attribute length {alen} with {} bytes left", a.len())));
            }
            if aty == UNIX_DIAG_PEER && alen >= 8 {
                let peer = u64::from(u32_at(a, 4));
                if peer != 0 {
                    out.push((ino, peer));
                }
            }
            let step = (alen + 3) & !3;
            if step >= a.len() {
                break;
            }
            a = &a[step..];
        }
        Ok(())
    })
}

/// Parses one datagram of a sock_diag inet (TCP) dump into `out`, of either request
/// (`SOCK_DIAG_BY_FAMILY` or `TCPDIAG_GETSOCK` messages); `Ok(true)` when it held `NLMSG_DONE`. Each message is an `inet_diag_msg`: family (byte 0), state (1), then the sockid
/// with source and destination ports (bytes 4, 6, big-endian) and addresses (8..24, 24..40, network
/// order; an IPv4 address in the first 4 bytes), uid (64) and inode (68), both native order.
/// Attributes after it are ignored (none is asked for).
pub fn parse_inet_diag(b: &[u8], out: &mut Vec<TcpSocket>) -> Result<bool, SignalError> {
    parse_diag(b, &[SOCK_DIAG_BY_FAMILY, TCPDIAG_GETSOCK], "sock_diag inet dump", &mut |msg| {
        if msg.len() < INET_DIAG_MSG_LEN {
            return Err(SignalError::Malformed {
                what: "sock_diag reply",
                reason: format!("inet_diag_msg of {} bytes", msg.len()),
            });
        }
        let port = |i: usize| u16::from_be_bytes([msg[i], msg[i + 1]]);
        let addr = |i: usize| -> Option<IpAddr> {
            match i32::from(msg[0]) {
                libc::AF_INET => Some(IpAddr::V4(Ipv4Addr::new(msg[i], msg[i + 1], msg[i + 2], msg[i + 3]))),
                libc::AF_INET6 => {
                    let mut a = [0u8; 16];
                    a.copy_from_slice(&msg[i..i + 16]);
                    Some(IpAddr::V6(Ipv6Addr::from(a)))
                }
                _ => None,
            }
        };
        let (Some(local), Some(remote)) = (addr(8), addr(24)) else { return Ok(()) };
        out.push(TcpSocket {
            local: (local, port(4)),
            remote: (remote, port(6)),
            state: msg[1],
            uid: u32_at(msg, 64),
            inode: u64::from(u32_at(msg, 68)),
        });
        Ok(())
    })
}

// ----- the scan ---------------------------------------------------------------------------------------

/// What one socket scan found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SocketScan {
    /// Process-level pairs (`tid = pid`), `a < b`, sorted.
    pub comm: Vec<CommSample>,
    /// Local TCP connections seen (pairs of sockets with both ends here).
    pub tcp_pairs: usize,
    /// Connected unix socket pairs seen.
    pub unix_pairs: usize,
    /// Processes whose fd directory was read.
    pub fds_scanned: usize,
    /// Processes whose fd directory could not be read (EACCES, EPERM): skipped.
    pub unreadable: usize,
    /// Socket inodes of a pair held by no scanned process (kernel sockets, other namespaces, or a
    /// process outside `pids`).
    pub unowned: usize,
}

/// The TCP sockets of `root/proc/net/tcp` and `tcp6` (a missing table is empty), every state:
/// the file form of [`tcp_established`], for fixture roots and kernels without inet_diag.
pub fn tcp_tables(root: &Path) -> Result<Vec<TcpSocket>, SignalError> {
    let proc_dir = root.join("proc");
    let mut sockets = Vec::new();
    for (name, v6) in [("tcp", false), ("tcp6", true)] {
        let path = proc_dir.join("net").join(name);
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(SignalError::Io { path, source: e }),
        };
        let text = String::from_utf8_lossy(&text);
        sockets.extend(parse_tcp(&text, v6).map_err(|e| SignalError::Parse { path: path.clone(), source: e })?);
    }
    Ok(sockets)
}

/// The pairs of socket inodes with both ends on this host: local TCP connections among `tcp`
/// ([`tcp_pairs`]) and connected unix sockets (`unix`, from [`unix_peers`]), each pair once, smaller
/// inode first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SocketPairs {
    /// The pairs: TCP first (sorted), then unix (in dump order).
    pub pairs: Vec<(u64, u64)>,
    /// How many of them are TCP connections.
    pub tcp: usize,
    /// How many are unix socket pairs.
    pub unix: usize,
}

/// Most processes that may hold one end of a socket pair for the pair to count, processes.
/// Default 8. Source: judgement, as the model's `shared_max_users` for shared memory: a socket held
/// by dozens of processes was inherited by a pre-fork server's children, not opened between two
/// workers. Prevents: O(holders^2) process pairs from one socket (one socketpair inherited by
/// 1,000 forked children gave 500,500 pairs and 0.39 s a scan, review of 2026-11-29).
pub const MAX_SOCKET_HOLDERS: usize = 8;

impl SocketPairs {
    /// Pairs from the TCP sockets and the unix peers. A unix pair counts only when each end names
    /// the other as its peer: a connected stream socket and its accepted end, or a socketpair. A
    /// datagram socket `connect()`ed to another names it, but the other names no one: any user may
    /// connect sockets to a service's bound datagram socket without the service taking part (500
    /// of them sending nothing read as a strong pair before).
    pub fn new(tcp: &[TcpSocket], unix: Option<&[(u64, u64)]>) -> Self {
        let t = tcp_pairs(tcp);
        let mut pairs: Vec<(u64, u64)> = t.iter().map(|p| (p.a, p.b)).collect();
        let mut n_unix = 0;
        if let Some(u) = unix {
            let directed: HashSet<(u64, u64)> = u.iter().copied().collect();
            let mut seen = HashSet::new();
            for &(a, b) in u {
                if !directed.contains(&(b, a)) {
                    continue;
                }
                let k = (a.min(b), a.max(b));
                if seen.insert(k) {
                    pairs.push(k);
                    n_unix += 1;
                }
            }
        }
        SocketPairs { pairs, tcp: t.len(), unix: n_unix }
    }

    /// Every inode of a pair.
    pub fn inodes(&self) -> HashSet<u64> {
        self.pairs.iter().flat_map(|&(a, b)| [a, b]).collect()
    }
}

/// The process pairs of `pairs` given who holds which socket: `holders` yields each process with its
/// socket inodes (sorted, as [`fd_sockets`] gives them); a pid appears once. Returns the process
/// pairs (`tid = pid`, `a < b`, sorted by pid, `events` the number of socket pairs between them) and
/// the number of inodes of a pair that no process in `holders` holds. A pair with an end held by
/// more than [`MAX_SOCKET_HOLDERS`] processes gives none.
pub fn match_holders<'a>(
    pairs: &SocketPairs,
    holders: impl IntoIterator<Item = (u32, &'a [u64])>,
) -> (Vec<CommSample>, usize) {
    let wanted = pairs.inodes();
    let mut by_inode: HashMap<u64, Vec<u32>> = HashMap::new();
    for (pid, inodes) in holders {
        for &ino in inodes.iter().filter(|i| wanted.contains(i)) {
            by_inode.entry(ino).or_default().push(pid);
        }
    }
    let unowned = wanted.len() - by_inode.len();
    let mut events: BTreeMap<(u32, u32), u64> = BTreeMap::new();
    for &(a, b) in &pairs.pairs {
        let (Some(ha), Some(hb)) = (by_inode.get(&a), by_inode.get(&b)) else { continue };
        if ha.len() > MAX_SOCKET_HOLDERS || hb.len() > MAX_SOCKET_HOLDERS {
            continue;
        }
        for &pa in ha {
            for &pb in hb {
                if pa != pb {
                    *events.entry((pa.min(pb), pa.max(pb))).or_insert(0) += 1;
                }
            }
        }
    }
    let comm = events
        .into_iter()
        .map(|((a, b), n)| CommSample { a: (a, a), b: (b, b), kind: CommKind::Socket, events: n })
        .collect();
    (comm, unowned)
}

/// Whether a read error is a permission refusal (another user namespace's or a protected process:
/// even root meets EACCES on the fds of some, e.g. a sandbox's init), which is skipped, never fatal.
pub fn refused(e: &SignalError) -> bool {
    e.io_error().is_some_and(|e| matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)))
}

/// Reads the socket tables under `root` (`root/proc/net/tcp`, `tcp6`; a missing table is empty), the
/// unix peers when `unix` is given (from [`unix_peers`] on the live system), and the fds of `pids`,
/// and returns the process pairs.
pub fn scan(root: &Path, pids: &[u32], unix: Option<&[(u64, u64)]>) -> Result<SocketScan, SignalError> {
    let proc_dir = root.join("proc");
    let pairs = SocketPairs::new(&tcp_tables(root)?, unix);
    let mut out = SocketScan { tcp_pairs: pairs.tcp, unix_pairs: pairs.unix, ..SocketScan::default() };
    if pairs.pairs.is_empty() {
        return Ok(out);
    }
    let mut held: Vec<(u32, Vec<u64>)> = Vec::new();
    for &pid in pids {
        match fd_sockets(&proc_dir, pid) {
            Ok(Some(f)) => {
                out.fds_scanned += 1;
                held.push((pid, f.sockets));
            }
            Ok(None) => {}
            Err(e) if refused(&e) => out.unreadable += 1,
            Err(e) => return Err(e),
        }
    }
    let (comm, unowned) = match_holders(&pairs, held.iter().map(|(p, i)| (*p, i.as_slice())));
    out.comm = comm;
    out.unowned = unowned;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_links() {
        assert_eq!(socket_link_inode(b"socket:[12345]"), Some(12345));
        assert_eq!(socket_link_inode(b"pipe:[12345]"), None);
        assert_eq!(socket_link_inode(b"socket:[]"), None);
        assert_eq!(socket_link_inode(b"socket:[12x]"), None);
        assert_eq!(socket_link_inode(b"/dev/null"), None);
    }

    fn msg(ino: u32, attrs: &[(u16, &[u8])]) -> Vec<u8> {
        let mut body = vec![1u8, 1, 3, 0];
        body.extend(ino.to_ne_bytes());
        body.extend([0u8; 8]);
        for (ty, payload) in attrs {
            let l = 4 + payload.len();
            body.extend((l as u16).to_ne_bytes());
            body.extend(ty.to_ne_bytes());
            body.extend(*payload);
            while body.len() % 4 != 0 {
                body.push(0);
            }
        }
        let mut m = ((NLMSG_HDRLEN + body.len()) as u32).to_ne_bytes().to_vec();
        m.extend(SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        m.extend([0u8; 10]);
        m.extend(body);
        m
    }

    /// One inet_diag_msg: (family, state), (source, port), (destination, port), (uid, inode).
    fn inet_msg(
        fs: (u8, u8),
        (src, sport): (&[u8], u16),
        (dst, dport): (&[u8], u16),
        (uid, ino): (u32, u32),
    ) -> Vec<u8> {
        let mut body = vec![fs.0, fs.1, 0, 0];
        body.extend(sport.to_be_bytes());
        body.extend(dport.to_be_bytes());
        let mut a = [0u8; 16];
        a[..src.len()].copy_from_slice(src);
        body.extend(a);
        let mut a = [0u8; 16];
        a[..dst.len()].copy_from_slice(dst);
        body.extend(a);
        body.extend([0u8; 4 + 8]); // if, cookie
        body.extend([0u8; 12]); // expires, rqueue, wqueue
        body.extend(uid.to_ne_bytes());
        body.extend(ino.to_ne_bytes());
        assert_eq!(body.len(), INET_DIAG_MSG_LEN);
        let mut m = ((NLMSG_HDRLEN + body.len()) as u32).to_ne_bytes().to_vec();
        m.extend(SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        m.extend([0u8; 10]);
        m.extend(body);
        m
    }

    #[test]
    fn synthetic_inet_dump() {
        let lo = [127, 0, 0, 1];
        let mut d = inet_msg((libc::AF_INET as u8, 1), (&lo, 40000), (&lo, 8080), (1000, 53121));
        d.extend(inet_msg((libc::AF_INET as u8, 1), (&lo, 8080), (&lo, 40000), (0, 53122)));
        let mut v6 = [0u8; 16];
        v6[15] = 1;
        d.extend(inet_msg((libc::AF_INET6 as u8, 1), (&v6, 8081), (&v6, 40001), (0, 700)));
        let mut out = Vec::new();
        assert!(!parse_inet_diag(&d, &mut out).unwrap());
        assert_eq!(out.len(), 3);
        assert_eq!(out[0].local, (IpAddr::V4(Ipv4Addr::LOCALHOST), 40000));
        assert_eq!(out[0].remote, (IpAddr::V4(Ipv4Addr::LOCALHOST), 8080));
        assert_eq!((out[0].state, out[0].uid, out[0].inode), (1, 1000, 53121));
        assert_eq!(out[2].local, (IpAddr::V6(Ipv6Addr::LOCALHOST), 8081));
        let p = tcp_pairs(&out);
        assert_eq!(p.iter().map(|p| (p.a, p.b)).collect::<Vec<_>>(), vec![(53121, 53122)]);
        let mut cut = inet_msg((libc::AF_INET as u8, 1), (&lo, 1), (&lo, 2), (0, 1));
        cut.truncate(cut.len() - 8);
        let n = cut.len() as u32;
        cut[0..4].copy_from_slice(&n.to_ne_bytes());
        assert!(parse_inet_diag(&cut, &mut Vec::new()).is_err());
    }

    /// The replies of the both-families request (`TCPDIAG_GETSOCK`, the request's own type on every
    /// message) parse as the per-family ones do; the unix parser takes no such message.
    #[test]
    fn synthetic_both_families_dump() {
        let lo = [127, 0, 0, 1];
        let mut v6 = [0u8; 16];
        v6[15] = 1;
        let as_compat = |mut m: Vec<u8>| {
            m[4..6].copy_from_slice(&TCPDIAG_GETSOCK.to_ne_bytes());
            m
        };
        let mut d = as_compat(inet_msg((libc::AF_INET6 as u8, 1), (&v6, 8081), (&v6, 40001), (0, 700)));
        d.extend(as_compat(inet_msg((libc::AF_INET as u8, 1), (&lo, 40000), (&lo, 8080), (1000, 53121))));
        let mut out = Vec::new();
        assert!(!parse_inet_diag(&d, &mut out).unwrap());
        assert_eq!(out.iter().map(|s| s.inode).collect::<Vec<_>>(), vec![700, 53121]);
        assert_eq!(out[0].local, (IpAddr::V6(Ipv6Addr::LOCALHOST), 8081));
        assert_eq!((out[1].state, out[1].uid), (1, 1000));
        let mut unix = Vec::new();
        assert!(!parse_unix_diag(&d, &mut unix).unwrap());
        assert!(unix.is_empty(), "{unix:?}");
    }

    #[test]
    fn holders_make_process_pairs() {
        let pairs = SocketPairs { pairs: vec![(10, 11), (20, 21)], tcp: 1, unix: 1 };
        let held: Vec<(u32, Vec<u64>)> = vec![(7, vec![10, 20, 99]), (3, vec![11]), (5, vec![21])];
        let (comm, unowned) = match_holders(&pairs, held.iter().map(|(p, i)| (*p, i.as_slice())));
        assert_eq!(unowned, 0);
        let got: Vec<_> = comm.iter().map(|c| (c.a.0, c.b.0, c.events)).collect();
        assert_eq!(got, vec![(3, 7, 1), (5, 7, 1)]);
        let (comm, unowned) = match_holders(&pairs, held[..1].iter().map(|(p, i)| (*p, i.as_slice())));
        assert!(comm.is_empty());
        assert_eq!(unowned, 2);
    }

    #[test]
    fn a_socket_held_by_many_processes_gives_no_pairs() {
        // One end inherited by MAX_SOCKET_HOLDERS processes: pairs; by one more: none.
        let pairs = SocketPairs { pairs: vec![(10, 11)], tcp: 0, unix: 1 };
        for n in [MAX_SOCKET_HOLDERS as u32, MAX_SOCKET_HOLDERS as u32 + 1] {
            let mut held: Vec<(u32, Vec<u64>)> = (0..n).map(|p| (100 + p, vec![10])).collect();
            held.push((1, vec![11]));
            let (comm, _) = match_holders(&pairs, held.iter().map(|(p, i)| (*p, i.as_slice())));
            let want = if n as usize <= MAX_SOCKET_HOLDERS { n as usize } else { 0 };
            assert_eq!(comm.len(), want, "{n} holders");
        }
    }

    #[test]
    fn a_one_sided_unix_peer_is_no_pair() {
        // 10 <-> 11 both ways (a stream connection); 20 -> 21 only (a datagram socket connected to
        // a bound one that names no peer).
        let p = SocketPairs::new(&[], Some(&[(10, 11), (11, 10), (20, 21)]));
        assert_eq!(p.pairs, vec![(10, 11)]);
        assert_eq!(p.unix, 1);
    }

    /// The same on this host's kernel: a datagram socket connected to a bound one is listed with
    /// its peer, the bound one without, and gives no pair; a socketpair gives one.
    #[test]
    fn a_connected_datagram_socket_is_no_pair_on_this_kernel() {
        use std::os::unix::fs::MetadataExt;
        use std::os::unix::net::{UnixDatagram, UnixStream};
        let ino = |fd: std::os::fd::RawFd| std::fs::metadata(format!("/proc/self/fd/{fd}")).unwrap().ino();
        use std::os::fd::AsRawFd;
        let path = std::env::temp_dir().join(format!("numapilot-dgram-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let bound = UnixDatagram::bind(&path).unwrap();
        let client = UnixDatagram::unbound().unwrap();
        client.connect(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let (s1, s2) = UnixStream::pair().unwrap();
        let (b, c, p1, p2) =
            (ino(bound.as_raw_fd()), ino(client.as_raw_fd()), ino(s1.as_raw_fd()), ino(s2.as_raw_fd()));
        let Ok(peers) = unix_peers() else { return }; // no CONFIG_UNIX_DIAG: nothing to check
        assert!(peers.contains(&(c, b)), "the connected datagram socket names its peer");
        assert!(!peers.iter().any(|&(x, _)| x == b), "the bound one names none");
        let pairs = SocketPairs::new(&[], Some(&peers));
        assert!(pairs.pairs.contains(&(p1.min(p2), p1.max(p2))), "the socketpair is a pair");
        assert!(!pairs.pairs.contains(&(b.min(c), b.max(c))), "the one-sided datagram peer is not");
    }

    #[test]
    fn synthetic_dump() {
        let mut d = msg(10, &[(0, b"@x\0"), (UNIX_DIAG_PEER, &11u32.to_ne_bytes())]);
        d.extend(msg(12, &[]));
        let mut out = Vec::new();
        assert!(!parse_unix_diag(&d, &mut out).unwrap());
        assert_eq!(out, vec![(10, 11)]);
        let mut done = 20u32.to_ne_bytes().to_vec();
        done.extend((libc::NLMSG_DONE as u16).to_ne_bytes());
        done.extend([0u8; 14]);
        assert!(parse_unix_diag(&done, &mut out).unwrap());
        let mut cut = msg(10, &[(UNIX_DIAG_PEER, &11u32.to_ne_bytes())]);
        cut.truncate(cut.len() - 2);
        assert!(parse_unix_diag(&cut, &mut Vec::new()).is_err());
    }
}
