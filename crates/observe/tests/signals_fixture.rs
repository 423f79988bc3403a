//! The socket-table parsers on real kernel files: fixtures/signals-host-6.18 (captured by
//! scripts/capture-signals.sh while one loopback TCP connection and one unix socketpair were open).

use std::path::{Path, PathBuf};

use numapilot_observe::net::{parse_tcp, parse_unix, tcp_pairs, TcpPair};
use numapilot_observe::sockets::scan;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/signals-host-6.18")
}

/// (kind, [inode a, inode b], [ports]) from expected/sockets.txt.
fn expected(kind: &str) -> Vec<u64> {
    let text = std::fs::read_to_string(fixture().join("expected/sockets.txt")).unwrap();
    let line = text.lines().find(|l| l.starts_with(kind)).unwrap();
    line.split_whitespace().skip(1).map(|t| t.parse().unwrap()).collect()
}

#[test]
fn real_tcp_table_has_the_captured_loopback_pair() {
    let tcp = std::fs::read_to_string(fixture().join("root/proc/net/tcp")).unwrap();
    let socks = parse_tcp(&tcp, false).unwrap();
    let tcp6 = std::fs::read_to_string(fixture().join("root/proc/net/tcp6")).unwrap();
    let socks6 = parse_tcp(&tcp6, true).unwrap();
    let e = expected("tcp");
    let (a, b) = (e[0].min(e[1]), e[0].max(e[1]));
    let mut all = socks.clone();
    all.extend(socks6);
    let pairs = tcp_pairs(&all);
    assert!(pairs.contains(&TcpPair { a, b, loopback: true }), "{pairs:?}");
    // The client end's local port is the one the capture printed.
    let client = socks.iter().find(|s| s.inode == e[0]).unwrap();
    assert_eq!(u64::from(client.local.1), e[2]);
    assert_eq!(client.state, 1);

    // Scanning the fixture root finds the pair but no holder (the fixture has no /proc/PID/fd).
    let got = scan(&fixture().join("root"), &[], None).unwrap();
    assert!(got.tcp_pairs >= 1);
    assert!(got.comm.is_empty());
    assert_eq!(got.unowned, 2 * got.tcp_pairs);
}

#[test]
fn real_unix_table_has_the_socketpair() {
    let text = std::fs::read_to_string(fixture().join("root/proc/net/unix")).unwrap();
    let socks = parse_unix(&text).unwrap();
    let e = expected("unix");
    for ino in &e {
        let s = socks.iter().find(|s| s.inode == *ino).unwrap_or_else(|| panic!("inode {ino} missing"));
        assert_eq!((s.sock_type, s.state), (1, 3), "a connected stream socket");
        assert!(s.path.is_empty());
    }
}
