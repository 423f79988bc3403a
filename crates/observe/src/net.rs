//! Socket tables: `/proc/net/tcp`, `/proc/net/tcp6`, `/proc/net/unix`, and the local TCP pairs in them.
//!
//! # Problem
//!
//! Two processes talking over a loopback TCP connection are a communication pair (the slides' network
//! 4-tuple): the kernel lists both ends of the connection in the same table, one as
//! (A:a -> B:b), the other as (B:b -> A:a), each with the inode of its socket. Matching the two lines
//! and then finding which process holds each inode (see [`crate::sockets`]) names the pair.
//!
//! # Approach
//!
//! ```text
//!   /proc/net/tcp   0: 0100007F:9C40 0100007F:1F90 01 ... 0 0 53121   client end   inode 53121
//!                   1: 0100007F:1F90 0100007F:9C40 01 ... 0 0 53122   server end   inode 53122
//!                      └─ local ───┘ └─ remote ──┘ └ ESTABLISHED
//!   index ESTABLISHED ends by (local, remote); an end whose (remote, local) is also indexed is half
//!   of a local pair ──► TcpPair { inodes (53121, 53122) }
//! ```
//!
//! Formats (`net/ipv4/tcp_ipv4.c` `get_tcp4_sock`, `net/ipv6/tcp_ipv6.c` `get_tcp6_sock`, unchanged
//! since 2.6): after a header line, one line per socket: slot, `local`, `remote` as
//! `ADDR:PORT`, the state (hex, `01` = ESTABLISHED, `include/net/tcp_states.h`), queues, timers,
//! retransmits, uid, timeout, then the inode (decimal; 0 for TIME_WAIT and request sockets, which
//! have no file). IPv4 addresses are the network-order 32-bit value printed with `%08X` as a native
//! integer (so `0100007F` is 127.0.0.1 on a little-endian host); IPv6 addresses are four such words.
//! Ports are host-order hex. `/proc/net/unix` (`net/unix/af_unix.c` `unix_seq_show`): a kernel
//! pointer with `:`, refcount, protocol, flags (`00010000` = listening), type (`0001` stream, `0002`
//! dgram, `0005` seqpacket), state (`01` unconnected, `03` connected), inode, optional path
//! (`@name` for the abstract namespace). It does not name peers: those come from sock_diag
//! ([`crate::sockets::unix_peers`]).
//!
//! # Limits
//!
//! - Any ESTABLISHED connection whose two ends are both in the table is matched: loopback (127/8, ::1,
//!   ::ffff:127.x) is the usual case, a connection to the host's own external address counts too.
//! - The tables are those of the reader's network namespace; processes in other namespaces (containers)
//!   have their own `/proc/PID/net/tcp`, not read here.
//! - Addresses are decoded with the reading host's byte order: fixtures come from little-endian hosts.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::signal_error::{dec, hex, LineError, SignalFile};

/// TCP state ESTABLISHED (`include/net/tcp_states.h`).
pub const TCP_ESTABLISHED: u8 = 1;
/// TCP state LISTEN.
pub const TCP_LISTEN: u8 = 10;

/// One socket line of `/proc/net/tcp` or `tcp6`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSocket {
    /// Local address and port.
    pub local: (IpAddr, u16),
    /// Remote address and port.
    pub remote: (IpAddr, u16),
    /// State (`include/net/tcp_states.h`: 1 ESTABLISHED, 10 LISTEN, ...).
    pub state: u8,
    /// Owner's uid.
    pub uid: u32,
    /// Socket inode; 0 for sockets without a file (TIME_WAIT, request sockets).
    pub inode: u64,
}

/// One line of `/proc/net/unix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnixSocket {
    /// Flags (`0x10000` = listening, `__SO_ACCEPTCON`).
    pub flags: u32,
    /// Socket type: 1 stream, 2 dgram, 5 seqpacket.
    pub sock_type: u16,
    /// State: 1 unconnected, 2 connecting, 3 connected, 4 disconnecting (`SS_*`).
    pub state: u8,
    /// Inode.
    pub inode: u64,
    /// Bound path (`@` first for the abstract namespace); empty when unbound.
    pub path: String,
}

fn ipv4(tok: &str) -> Option<IpAddr> {
    if tok.len() != 8 {
        return None;
    }
    let v = hex(tok)? as u32;
    Some(IpAddr::V4(Ipv4Addr::from(v.to_ne_bytes())))
}

fn ipv6(tok: &str) -> Option<IpAddr> {
    if tok.len() != 32 {
        return None;
    }
    let mut b = [0u8; 16];
    for w in 0..4 {
        let v = hex(&tok[w * 8..w * 8 + 8])? as u32;
        b[w * 4..w * 4 + 4].copy_from_slice(&v.to_ne_bytes());
    }
    Some(IpAddr::V6(Ipv6Addr::from(b)))
}

/// Parses `/proc/net/tcp` (`v6` false) or `/proc/net/tcp6` (`v6` true). The header line is skipped.
pub fn parse_tcp(input: &str, v6: bool) -> Result<Vec<TcpSocket>, LineError> {
    let file = if v6 { SignalFile::Tcp6 } else { SignalFile::Tcp };
    let mut out = Vec::new();
    for (i, line) in input.lines().enumerate() {
        let n = i + 1;
        if i == 0 && line.trim_start().starts_with("sl") {
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        let err = |field: &'static str, why: &str| LineError::new(file, n, Some(field), line, why);
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        if f.len() < 10 {
            return Err(LineError::new(file, n, None, line, format!("{} fields, at least 10 expected", f.len())));
        }
        let addr = |field: &'static str, tok: &str| -> Result<(IpAddr, u16), LineError> {
            let (a, p) = tok.split_once(':').ok_or_else(|| err(field, "no ':'"))?;
            let ip = if v6 { ipv6(a) } else { ipv4(a) }.ok_or_else(|| err(field, "bad address"))?;
            let port = hex(p).filter(|&p| p <= 0xffff).ok_or_else(|| err(field, "bad port"))?;
            Ok((ip, port as u16))
        };
        let local = addr("local_address", f[1])?;
        let remote = addr("rem_address", f[2])?;
        let state = hex(f[3]).filter(|&s| s <= 0xff).ok_or_else(|| err("st", "bad state"))? as u8;
        let uid = dec(f[7]).filter(|&u| u <= u64::from(u32::MAX)).ok_or_else(|| err("uid", "bad uid"))? as u32;
        let inode = dec(f[9]).ok_or_else(|| err("inode", "bad inode"))?;
        out.push(TcpSocket { local, remote, state, uid, inode });
    }
    Ok(out)
}

/// Parses `/proc/net/unix`. The header line is skipped.
///
/// Not for decisions: the kernel prints each socket's path raw (`unix_seq_show`), so any user can
/// bind an abstract name holding a newline and a line of their making, which splits a line here
/// (an error for the whole table) or adds a socket that is not there (review of 2026-11-29). The
/// daemon takes unix peers from the `NETLINK_SOCK_DIAG` dump (`sockets::unix_peers`), which
/// carries the inode and peer as numbers; this parser reads captured fixtures and shows tables.
pub fn parse_unix(input: &str) -> Result<Vec<UnixSocket>, LineError> {
    let mut out = Vec::new();
    for (i, line) in input.lines().enumerate() {
        let n = i + 1;
        if i == 0 && line.starts_with("Num") {
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        let err = |field: &'static str, why: &str| LineError::new(SignalFile::Unix, n, Some(field), line, why);
        let mut it = line.splitn(8, ' ').filter(|t| !t.is_empty());
        let mut next = |field: &'static str| it.next().ok_or_else(|| err(field, "missing"));
        let num = next("Num")?;
        if !num.ends_with(':') {
            return Err(err("Num", "no ':'"));
        }
        let _refcount = hex(next("RefCount")?).ok_or_else(|| err("RefCount", "bad hex number"))?;
        let _protocol = hex(next("Protocol")?).ok_or_else(|| err("Protocol", "bad hex number"))?;
        let flags = hex(next("Flags")?).filter(|&v| v <= 0xffff_ffff).ok_or_else(|| err("Flags", "bad hex number"))?;
        let sock_type = hex(next("Type")?).filter(|&v| v <= 0xffff).ok_or_else(|| err("Type", "bad hex number"))?;
        let state = hex(next("St")?).filter(|&v| v <= 0xff).ok_or_else(|| err("St", "bad hex number"))?;
        // The inode is right-aligned in 5 columns, so the split above may leave leading blanks.
        let rest = line.split_ascii_whitespace().skip(6).collect::<Vec<_>>();
        let inode = rest.first().and_then(|t| dec(t)).ok_or_else(|| err("Inode", "bad decimal number"))?;
        let path = rest.get(1..).map(|p| p.join(" ")).unwrap_or_default();
        out.push(UnixSocket { flags: flags as u32, sock_type: sock_type as u16, state: state as u8, inode, path });
    }
    Ok(out)
}

/// Whether an address is a loopback address (127/8, ::1, or 127/8 mapped into IPv6).
pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => a.is_loopback(),
        IpAddr::V6(a) => a.is_loopback() || a.to_ipv4_mapped().is_some_and(|m| m.is_loopback()),
    }
}

/// An address and port.
type Endpoint = (IpAddr, u16);

/// A connection whose two ends are both on this host: the inodes of the two sockets, smaller first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TcpPair {
    /// One end's socket inode.
    pub a: u64,
    /// The other end's socket inode.
    pub b: u64,
    /// Whether the connection runs over a loopback address.
    pub loopback: bool,
}

/// The local pairs among ESTABLISHED sockets with an inode: ends A and B where A's (local, remote)
/// is B's (remote, local). IPv4 ends in `tcp6` as `::ffff:a.b.c.d` match IPv4 ends in `tcp` after
/// mapping. Sorted, each pair once.
pub fn tcp_pairs(sockets: &[TcpSocket]) -> Vec<TcpPair> {
    let norm = |(ip, port): (IpAddr, u16)| -> (IpAddr, u16) {
        match ip {
            IpAddr::V6(a) => (a.to_ipv4_mapped().map_or(ip, IpAddr::V4), port),
            v4 => (v4, port),
        }
    };
    let mut by_ends: HashMap<(Endpoint, Endpoint), u64> = HashMap::new();
    for s in sockets.iter().filter(|s| s.state == TCP_ESTABLISHED && s.inode != 0) {
        by_ends.insert((norm(s.local), norm(s.remote)), s.inode);
    }
    let mut out: Vec<TcpPair> = by_ends
        .iter()
        .filter_map(|(&(l, r), &ino)| {
            let peer = *by_ends.get(&(r, l))?;
            (ino < peer).then_some(TcpPair { a: ino, b: peer, loopback: is_loopback(l.0) && is_loopback(r.0) })
        })
        .collect();
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // Shape as a 6.18 kernel prints it (header and a LISTEN, two ESTABLISHED ends, a TIME_WAIT).
    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 53120 1 0000000000000000 100 0 0 10 0
   1: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 53121 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:1F90 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 53122 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:1F90 0100007F:9C41 06 00000000:00000000 03:00001702 00000000     0        0 0 3 0000000000000000
";

    #[test]
    fn tcp_table_and_pairs() {
        let t = parse_tcp(TCP, false).unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!(t[1].local, (IpAddr::V4(Ipv4Addr::LOCALHOST), 0x9c40));
        assert_eq!(t[1].remote, (IpAddr::V4(Ipv4Addr::LOCALHOST), 8080));
        assert_eq!((t[1].state, t[1].uid, t[1].inode), (1, 1000, 53121));
        assert_eq!(t[0].state, TCP_LISTEN);
        assert_eq!(t[3].inode, 0);
        assert_eq!(tcp_pairs(&t), vec![TcpPair { a: 53121, b: 53122, loopback: true }]);
    }

    #[test]
    fn tcp6_mapped_end_matches_v4_end() {
        let v6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0000000000000000FFFF00000100007F:1F90 0000000000000000FFFF00000100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 700 1 0000000000000000 20 4 0 10 -1
   1: 00000000000000000000000001000000:1F91 00000000000000000000000001000000:A000 01 00000000:00000000 00:00000000 00000000     0        0 701 1 0000000000000000 20 4 0 10 -1
   2: 00000000000000000000000001000000:A000 00000000000000000000000001000000:1F91 01 00000000:00000000 00:00000000 00000000     0        0 702 1 0000000000000000 20 4 0 10 -1
";
        let mut all = parse_tcp(v6, true).unwrap();
        assert_eq!(all[1].local.0, IpAddr::V6(Ipv6Addr::LOCALHOST));
        assert!(is_loopback(all[0].local.0));
        all.push(parse_tcp(TCP, false).unwrap()[1]);
        let p = tcp_pairs(&all);
        assert_eq!(p.iter().map(|p| (p.a, p.b)).collect::<Vec<_>>(), vec![(700, 53121), (701, 702)]);
    }

    #[test]
    fn bad_tcp_lines() {
        let e = parse_tcp("  sl  local_address\n   0: 0100007F:1F90 00000000:0000 0A\n", false).unwrap_err();
        assert_eq!(e.line, 2);
        let e =
            parse_tcp("   0: 0100007G:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1 1 0\n", false)
                .unwrap_err();
        assert_eq!((e.line, e.field), (1, Some("local_address")));
        let e = parse_tcp(
            "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 x1 1 0\n",
            false,
        )
        .unwrap_err();
        assert_eq!(e.field, Some("inode"));
    }

    #[test]
    fn unix_table() {
        let u = "Num       RefCount Protocol Flags    Type St Inode Path
0000000000000000: 00000002 00000000 00010000 0001 01 20517 /run/systemd/notify
0000000000000000: 00000003 00000000 00000000 0001 03 61234
0000000000000000: 00000002 00000000 00000000 0002 01    17 @abstract name
";
        let t = parse_unix(u).unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!((t[0].flags, t[0].sock_type, t[0].state, t[0].inode), (0x10000, 1, 1, 20517));
        assert_eq!(t[0].path, "/run/systemd/notify");
        assert_eq!((t[1].state, t[1].inode, t[1].path.as_str()), (3, 61234, ""));
        assert_eq!((t[2].inode, t[2].path.as_str()), (17, "@abstract name"));
        let e = parse_unix("0000000000000000: 00000002 00000000 00010000 0001 01 x\n").unwrap_err();
        assert_eq!((e.line, e.field), (1, Some("Inode")));
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse_tcp(&s, false);
            let _ = parse_tcp(&s, true);
            let _ = parse_unix(&s);
        }
    }
}
