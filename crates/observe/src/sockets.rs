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
//!   /proc/net/tcp, tcp6 ──► ESTABLISHED ends matched by 4-tuple  ─┐
//!   sock_diag (AF_UNIX, UDIAG_SHOW_PEER) ──► (inode, peer inode) ─┴─► pairs of socket inodes
//!                                                        none? stop here (no fd scan at all)
//!   /proc/PID/fd/*  readlink "socket:[N]" ──► inode -> pids     (every process: an inode may have several holders)
//!   pair (a, b) ──► holders(a) x holders(b), different pids ──► CommSample { (pa,pa), (pb,pb), Socket, events }
//! ```
//!
//! The unix peers come from the `NETLINK_SOCK_DIAG` dump (`include/uapi/linux/sock_diag.h`,
//! `unix_diag.h`; kernel side `net/unix/diag.c`, in every kernel since 3.3 with `CONFIG_UNIX_DIAG`):
//! one `SOCK_DIAG_BY_FAMILY` request with `NLM_F_DUMP` for family `AF_UNIX`, all states, asking for
//! `UDIAG_SHOW_PEER`; each reply is a `unix_diag_msg` (inode) followed by attributes, of which
//! `UNIX_DIAG_PEER` carries the peer's inode as a u32. Written here with raw `libc` calls: no crate,
//! nothing run. `/proc/net/unix` has the same sockets but not their peers.
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
//! - Cost: one readlink per open fd of every process, but only on cycles where some local pair
//!   exists. The scan does not stop once every wanted inode has a holder: a socketpair whose two ends
//!   both stay open in parent and child after a fork would then be seen in the parent only, as a pair
//!   of the parent with itself, and missed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::net::{parse_tcp, tcp_pairs};
use crate::sample::{CommKind, CommSample};
use crate::signal_error::SignalError;

/// The socket inodes a process holds: `/proc/PID/fd/*` links of the form `socket:[N]`. `Ok(None)` when
/// the process is gone; an fd closed while being read is skipped.
pub fn socket_inodes(proc_dir: &Path, pid: u32) -> Result<Option<Vec<u64>>, SignalError> {
    let dir = proc_dir.join(pid.to_string()).join("fd");
    let rd = match std::fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if gone(&e) => return Ok(None),
        Err(e) => return Err(SignalError::Io { path: dir, source: e }),
    };
    let mut out = Vec::new();
    for ent in rd {
        let ent = match ent {
            Ok(e) => e,
            Err(e) if gone(&e) => return Ok(None),
            Err(e) => return Err(SignalError::Io { path: dir, source: e }),
        };
        let link = match std::fs::read_link(ent.path()) {
            Ok(l) => l,
            Err(e) if gone(&e) => continue,
            Err(e) => return Err(SignalError::Io { path: ent.path(), source: e }),
        };
        if let Some(ino) = socket_link_inode(link.as_os_str().as_bytes()) {
            out.push(ino);
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(Some(out))
}

/// The inode of an fd link text `socket:[N]` (`fs/d_path.c` `dynamic_dname` via `sockfs_dname`).
pub fn socket_link_inode(link: &[u8]) -> Option<u64> {
    let n = link.strip_prefix(b"socket:[")?.strip_suffix(b"]")?;
    std::str::from_utf8(n).ok().and_then(crate::signal_error::dec)
}

fn gone(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ESRCH))
}

// ----- sock_diag ------------------------------------------------------------------------------------

/// `SOCK_DIAG_BY_FAMILY` (`include/uapi/linux/sock_diag.h`).
const SOCK_DIAG_BY_FAMILY: u16 = 20;
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
    let sys = |what: &str| SignalError::Sys { what: what.to_string(), source: io::Error::last_os_error() };
    // SAFETY: plain socket creation; the descriptor is owned by `Fd`.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_SOCK_DIAG) };
    if fd < 0 {
        return Err(sys("socket(AF_NETLINK, NETLINK_SOCK_DIAG)"));
    }
    let fd = Fd(fd);
    // nlmsghdr (16) + unix_diag_req (24), native byte order as netlink uses.
    let mut req = [0u8; NLMSG_HDRLEN + 24];
    let len = req.len() as u32;
    req[0..4].copy_from_slice(&len.to_ne_bytes());
    req[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
    req[6..8].copy_from_slice(&flags.to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes()); // sequence number
    let body = &mut req[NLMSG_HDRLEN..];
    body[0] = libc::AF_UNIX as u8; // sdiag_family
    body[1] = 0; // sdiag_protocol
    body[4..8].copy_from_slice(&u32::MAX.to_ne_bytes()); // udiag_states: all
    body[8..12].copy_from_slice(&0u32.to_ne_bytes()); // udiag_ino: any
    body[12..16].copy_from_slice(&UDIAG_SHOW_PEER.to_ne_bytes());
    body[16..24].copy_from_slice(&[0xff; 8]); // udiag_cookie: none (INET_DIAG_NOCOOKIE)
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
        return Err(sys("sendto(sock_diag unix dump)"));
    }
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: the kernel writes at most buf.len() bytes into our buffer.
        let n = unsafe { libc::recv(fd.0, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(SignalError::Sys { what: "recv(sock_diag unix dump)".into(), source: e });
        }
        if n == 0 {
            return Err(SignalError::Malformed {
                what: "sock_diag reply",
                reason: "end of stream before NLMSG_DONE".into(),
            });
        }
        if parse_unix_diag(&buf[..n as usize], &mut out)? {
            return Ok(out);
        }
    }
}

/// Parses one datagram of a sock_diag unix dump into `out`; `Ok(true)` when it held `NLMSG_DONE`.
pub fn parse_unix_diag(mut b: &[u8], out: &mut Vec<(u64, u64)>) -> Result<bool, SignalError> {
    let bad = |reason: String| SignalError::Malformed { what: "sock_diag reply", reason };
    let u16_at = |b: &[u8], i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
    let u32_at = |b: &[u8], i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
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
                return Err(SignalError::Sys {
                    what: "sock_diag unix dump".into(),
                    source: io::Error::from_raw_os_error(-code),
                });
            }
            _ if ty == SOCK_DIAG_BY_FAMILY => {
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
            }
            _ => {}
        }
        let step = (len + 3) & !3;
        b = if step >= b.len() { &[] } else { &b[step..] };
    }
    Ok(false)
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

/// Reads the socket tables under `root` (`root/proc/net/tcp`, `tcp6`; a missing table is empty), the
/// unix peers when `unix` is given (from [`unix_peers`] on the live system), and the fds of `pids`,
/// and returns the process pairs.
pub fn scan(root: &Path, pids: &[u32], unix: Option<&[(u64, u64)]>) -> Result<SocketScan, SignalError> {
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
    let tcp = tcp_pairs(&sockets);
    let mut pairs: Vec<(u64, u64)> = tcp.iter().map(|p| (p.a, p.b)).collect();
    let mut unix_pairs = 0;
    if let Some(u) = unix {
        let mut seen = HashSet::new();
        for &(a, b) in u {
            let k = (a.min(b), a.max(b));
            if seen.insert(k) {
                pairs.push(k);
                unix_pairs += 1;
            }
        }
    }
    let mut out = SocketScan { tcp_pairs: tcp.len(), unix_pairs, ..SocketScan::default() };
    if pairs.is_empty() {
        return Ok(out);
    }
    let wanted: HashSet<u64> = pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
    let mut holders: HashMap<u64, Vec<u32>> = HashMap::new();
    let mut found = 0;
    for &pid in pids {
        let inodes = match socket_inodes(&proc_dir, pid) {
            Ok(Some(i)) => i,
            Ok(None) => continue,
            // Another user namespace's or a protected process (even root meets EACCES on the fds of
            // some, e.g. a sandbox's init): skipped and counted, never fatal.
            Err(e)
                if e.io_error().is_some_and(|e| matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM))) =>
            {
                out.unreadable += 1;
                continue;
            }
            Err(e) => return Err(e),
        };
        out.fds_scanned += 1;
        for ino in inodes.into_iter().filter(|i| wanted.contains(i)) {
            let h = holders.entry(ino).or_default();
            if h.is_empty() {
                found += 1;
            }
            h.push(pid);
        }
    }
    out.unowned = wanted.len() - found;
    let mut events: BTreeMap<(u32, u32), u64> = BTreeMap::new();
    for (a, b) in pairs {
        let (Some(ha), Some(hb)) = (holders.get(&a), holders.get(&b)) else { continue };
        for &pa in ha {
            for &pb in hb {
                if pa != pb {
                    *events.entry((pa.min(pb), pa.max(pb))).or_insert(0) += 1;
                }
            }
        }
    }
    out.comm = events
        .into_iter()
        .map(|((a, b), n)| CommSample { a: (a, a), b: (b, b), kind: CommKind::Socket, events: n })
        .collect();
    Ok(out)
}

/// The path of a process's fd directory under `root`, for messages.
pub fn fd_dir(root: &Path, pid: u32) -> PathBuf {
    root.join("proc").join(pid.to_string()).join("fd")
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
