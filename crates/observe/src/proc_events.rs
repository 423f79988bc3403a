//! Process and thread creation as it happens, from the kernel's proc connector.
//!
//! # Problem
//!
//! The daemon looks at /proc once per interval (500 ms to 1 s, longer when backed off). A workload
//! that first-touches its memory and then starts its threads (numa02: the main thread writes the
//! whole buffer, then the workers start) runs with its threads wherever the scheduler put them
//! until the next look, and the look after that is the one that knows their rates: up to an
//! interval and a half of remote accesses for every new workload, and the part of a short job that
//! matters most. Polling /proc faster costs CPU on every idle machine.
//!
//! # Approach
//!
//! The proc connector (drivers/connector/cn_proc.c, `CONFIG_PROC_EVENTS`, root only) multicasts an
//! event for every fork, clone of a thread, exec and exit. One netlink socket subscribed to group
//! `CN_IDX_PROC` turns them into a file descriptor the daemon's loop polls beside its signals:
//!
//! ```text
//!   socket(AF_NETLINK, SOCK_DGRAM, NETLINK_CONNECTOR)  bind(groups = CN_IDX_PROC)
//!   send  nlmsghdr | cn_msg{idx 1, val 1, len 4} | PROC_CN_MCAST_LISTEN   (the old u32 form: every kernel)
//!   recv  nlmsghdr | cn_msg | proc_event{what, cpu, timestamp_ns, event_data}   (one per datagram)
//!           what = FORK  {parent_pid, parent_tgid, child_pid, child_tgid}  child_pid != child_tgid: a thread
//!                  EXEC  {pid, tgid}     EXIT {pid, tgid, code, signal, parent_pid, parent_tgid}
//!   ENOBUFS on recv: the socket's queue overflowed, events were lost (`Drained::lost`)
//!   a datagram from a netlink port other than the kernel's (0), or not in this layout: dropped
//!   whole and counted (`Drained::dropped`): another process can unicast to our socket
//! ```
//!
//! Layouts from include/uapi/linux/connector.h and cn_proc.h (Linux 2.6.15 on; the filtered LISTEN
//! of 6.6 is not used). Pids are the initial pid namespace's. A clone of a thread reports as parent
//! the thread group's parent (`real_parent`), not the thread that called clone: what identifies a
//! new thread is `child_pid != child_tgid`, its process is `child_tgid`.
//!
//! # Limits
//!
//! Root (CAP_NET_ADMIN in the initial user and pid namespaces) and `CONFIG_PROC_EVENTS`; without
//! them [`ProcEvents::open`] fails and the caller polls as before. The kernel ignores a LISTEN from
//! any other namespace without an error, so `open` proves the subscription (a thread it starts
//! must be announced under this process's own ids) and fails when it is not. Every fork on the machine is
//! delivered (there is no per-process filter in the old LISTEN form): a fork storm costs a recv
//! per event, and a queue overflow loses events (counted, never fatal).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::signal_error::SignalError;

/// `NETLINK_CONNECTOR` (include/uapi/linux/netlink.h).
const NETLINK_CONNECTOR: libc::c_int = 11;
/// `CN_IDX_PROC`, `CN_VAL_PROC` (include/uapi/linux/connector.h).
const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
/// `PROC_CN_MCAST_LISTEN` (include/uapi/linux/cn_proc.h).
const PROC_CN_MCAST_LISTEN: u32 = 1;
/// `NLMSG_DONE`: the connector's messages carry this type.
const NLMSG_DONE: u16 = 3;
/// Header sizes: nlmsghdr 16, cn_msg 20, proc_event's what/cpu/timestamp 16.
const NLMSG_HDRLEN: usize = 16;
const CN_MSG_LEN: usize = 20;
const EVENT_HDR_LEN: usize = 16;
/// `enum what` values (cn_proc.h).
const PROC_EVENT_FORK: u32 = 0x0000_0001;
const PROC_EVENT_EXEC: u32 = 0x0000_0002;
const PROC_EVENT_EXIT: u32 = 0x8000_0000;

/// Receive buffer asked for the socket, bytes. Default 1 MiB. Source: an event datagram is 16 +
/// 20 + 40 bytes of payload, about 1 KiB of queue each with the kernel's skb overhead, so 1 MiB
/// holds a burst of ~1,000 forks between two polls (a `make -j` start). Prevents: losing the
/// events of a fork burst while the loop is in a step (SO_RCVBUFFORCE, root: above rmem_max).
const RCVBUF_BYTES: libc::c_int = 1 << 20;

/// One event the daemon cares about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcEvent {
    /// A new process (`pid == tgid`) or a new thread of process `tgid` (`pid != tgid`).
    Fork {
        /// Thread id of the new task.
        pid: u32,
        /// Process (thread group) it belongs to.
        tgid: u32,
        /// The parent process (for a thread: its process's parent).
        parent_tgid: u32,
    },
    /// Process `tgid` (thread `pid`) called execve.
    Exec {
        /// Thread that called it.
        pid: u32,
        /// Its process.
        tgid: u32,
    },
    /// Task `pid` of process `tgid` exited.
    Exit {
        /// The task.
        pid: u32,
        /// Its process.
        tgid: u32,
    },
}

impl ProcEvent {
    /// The process the event is about (for a fork: the new task's).
    pub fn tgid(&self) -> u32 {
        match *self {
            ProcEvent::Fork { tgid, .. } | ProcEvent::Exec { tgid, .. } | ProcEvent::Exit { tgid, .. } => tgid,
        }
    }

    /// Whether this is a new thread of an existing process (not a new process).
    pub fn is_new_thread(&self) -> bool {
        matches!(self, ProcEvent::Fork { pid, tgid, .. } if pid != tgid)
    }
}

/// What one [`ProcEvents::drain`] read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drained {
    /// Datagrams read.
    pub messages: u64,
    /// Events of other kinds (uid, comm, ptrace ...) and the subscription's acknowledgement.
    pub ignored: u64,
    /// The queue overflowed since the last drain (ENOBUFS): some events were lost.
    pub lost: bool,
    /// Datagrams dropped: not from the kernel (netlink port id other than 0), or not in the
    /// connector's layout.
    pub dropped: u64,
}

/// How long [`ProcEvents::open`] waits for the event of a thread it starts, ms. Default 1,000.
/// Source: a choice; the kernel queues the event inside the clone call, so it is there at once
/// when delivered at all. What it prevents: taking a subscription that delivers nothing (another
/// pid namespace) for a working one.
pub const PROVE_WAIT_MS: u64 = 1_000;

/// A subscription to the proc connector. Non-blocking; poll [`ProcEvents::fd`] for `POLLIN`.
#[derive(Debug)]
pub struct ProcEvents {
    fd: OwnedFd,
    buf: Vec<u8>,
}

impl ProcEvents {
    /// Opens the socket and subscribes. Fails without root or without `CONFIG_PROC_EVENTS`, with
    /// the call that failed named.
    pub fn open() -> Result<Self, SignalError> {
        let sys = |what: &str| SignalError::Sys { what: what.to_string(), source: io::Error::last_os_error() };
        // SAFETY: plain socket creation; the descriptor is owned below.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                NETLINK_CONNECTOR,
            )
        };
        if raw < 0 {
            return Err(sys("socket(AF_NETLINK, NETLINK_CONNECTOR)"));
        }
        // SAFETY: `raw` is a new descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let size = RCVBUF_BYTES;
        // SAFETY: the option value is a valid c_int for its length. Best effort: without the
        // privilege the default queue stays (and an overflow is reported by `drain`).
        unsafe {
            libc::setsockopt(
                raw,
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        // SAFETY: a zeroed sockaddr_nl is valid; family and group set; pid 0 lets the kernel pick.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        addr.nl_groups = CN_IDX_PROC;
        // SAFETY: addr is valid for its length.
        let rc = unsafe {
            libc::bind(
                raw,
                (&addr as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(sys("bind(NETLINK_CONNECTOR, CN_IDX_PROC)"));
        }
        let msg = listen_message();
        // SAFETY: a zeroed sockaddr_nl with the family set addresses the kernel (pid 0).
        let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        if send_to(raw, &msg, &kernel) < 0 {
            return Err(sys("sendto(PROC_CN_MCAST_LISTEN)"));
        }
        let mut ev = Self { fd, buf: vec![0u8; 8192] };
        ev.prove()?;
        Ok(ev)
    }

    /// Proves the subscription: a thread started here is announced, under this process's own ids,
    /// within [`PROVE_WAIT_MS`]. The kernel takes a LISTEN only from the initial pid and user
    /// namespaces and ignores any other without an error (cn_proc.c, `cn_proc_mcast_ctl`), and
    /// reports pids as the initial namespace numbers them: a daemon in a container would wait on a
    /// socket that never says anything, or hear pids that are not its own. The events read here
    /// are dropped (the caller reads /proc in full before it uses any).
    fn prove(&mut self) -> Result<(), SignalError> {
        let me = std::process::id();
        let probe = || -> Result<u32, SignalError> {
            std::thread::Builder::new()
                .name("np-prove".into())
                .stack_size(64 << 10)
                // SAFETY: gettid takes no arguments and cannot fail.
                .spawn(|| unsafe { libc::gettid() } as u32)
                .map_err(|e| SignalError::Sys { what: "a thread to prove the proc connector".into(), source: e })?
                .join()
                .map_err(|_| SignalError::Sys {
                    what: "the proc connector's probe thread".into(),
                    source: io::Error::other("panicked"),
                })
        };
        let mut tid = probe()?;
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(PROVE_WAIT_MS);
        let mut out = Vec::new();
        loop {
            let d = self.drain(&mut out)?;
            if out.iter().any(|e| matches!(*e, ProcEvent::Fork { pid, tgid, .. } if pid == tid && tgid == me)) {
                return Ok(());
            }
            // The queue overflowed (a busy machine), maybe over our event: another probe. Only the
            // probe's own event under its own ids proves anything (a host's events seen from another
            // pid namespace flow too, numbered as the host numbers them).
            if d.lost {
                tid = probe()?;
            }
            out.clear();
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(SignalError::Sys {
                    what: format!(
                        "PROC_CN_MCAST_LISTEN: no event for thread {tid} of this process (pid {me}) within \
                         {PROVE_WAIT_MS} ms: the kernel serves only listeners in the initial pid and user \
                         namespaces, and this one seems to run in another"
                    ),
                    source: io::Error::from(io::ErrorKind::TimedOut),
                });
            }
            let mut p = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut p, 1, left.as_millis().clamp(1, 100) as libc::c_int) };
        }
    }

    /// The descriptor to poll for `POLLIN`.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Reads every queued datagram without blocking, appending the events to `out`.
    pub fn drain(&mut self, out: &mut Vec<ProcEvent>) -> Result<Drained, SignalError> {
        let mut d = Drained::default();
        loop {
            // SAFETY: a zeroed sockaddr_nl is valid for the kernel to fill.
            let mut from: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
            let mut from_len = std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
            // SAFETY: the kernel writes at most buf.len() bytes into our buffer and at most
            // from_len bytes into `from`.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                    0,
                    (&mut from as *mut libc::sockaddr_nl).cast(),
                    &mut from_len,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) => return Ok(d),
                    Some(libc::EINTR) => continue,
                    Some(libc::ENOBUFS) => {
                        d.lost = true;
                        continue;
                    }
                    _ => return Err(SignalError::Sys { what: "recv(proc connector)".into(), source: e }),
                }
            }
            if n == 0 {
                return Ok(d);
            }
            d.messages += 1;
            // Only the kernel (port id 0) speaks for the connector; another process's datagram,
            // or one the parser rejects, is dropped whole (counted), never half-used.
            if from.nl_pid != 0 {
                d.dropped += 1;
                continue;
            }
            let before = out.len();
            match parse_datagram(&self.buf[..n as usize], out) {
                Ok(seen) => d.ignored += seen.saturating_sub((out.len() - before) as u64),
                Err(_) => {
                    out.truncate(before);
                    d.dropped += 1;
                }
            }
        }
    }
}

/// `sendto(fd, buf, 0, to)`: the bytes sent, or -1 with errno set.
fn send_to(fd: RawFd, buf: &[u8], to: &libc::sockaddr_nl) -> isize {
    // SAFETY: the buffer and address are valid for the lengths given.
    unsafe {
        libc::sendto(
            fd,
            buf.as_ptr().cast(),
            buf.len(),
            0,
            (to as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    }
}

/// The subscription request: nlmsghdr | cn_msg | u32 PROC_CN_MCAST_LISTEN, native byte order.
fn listen_message() -> Vec<u8> {
    let total = NLMSG_HDRLEN + CN_MSG_LEN + 4;
    let mut m = vec![0u8; total];
    m[0..4].copy_from_slice(&(total as u32).to_ne_bytes());
    m[4..6].copy_from_slice(&NLMSG_DONE.to_ne_bytes());
    let c = NLMSG_HDRLEN;
    m[c..c + 4].copy_from_slice(&CN_IDX_PROC.to_ne_bytes());
    m[c + 4..c + 8].copy_from_slice(&CN_VAL_PROC.to_ne_bytes());
    m[c + 16..c + 18].copy_from_slice(&4u16.to_ne_bytes());
    m[c + CN_MSG_LEN..].copy_from_slice(&PROC_CN_MCAST_LISTEN.to_ne_bytes());
    m
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4).map(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

/// Parses one datagram (one or more netlink messages, each a `cn_msg` carrying a `proc_event`),
/// appending fork, exec and exit events to `out`. Returns how many proc events the datagram held
/// (those of other kinds included). Messages for another connector index are skipped; a message
/// shorter than its headers say is an error naming what did not fit.
pub fn parse_datagram(buf: &[u8], out: &mut Vec<ProcEvent>) -> Result<u64, SignalError> {
    let bad = |reason: String| SignalError::Malformed { what: "proc connector message", reason };
    let mut at = 0usize;
    let mut events = 0u64;
    while at + NLMSG_HDRLEN <= buf.len() {
        let len = u32_at(buf, at).unwrap_or(0) as usize;
        if len < NLMSG_HDRLEN || at + len > buf.len() {
            return Err(bad(format!("netlink length {len} at offset {at} of a {}-byte datagram", buf.len())));
        }
        let msg = &buf[at..at + len];
        // Netlink messages are 4-byte aligned (NLMSG_ALIGN).
        at += len.div_ceil(4) * 4;
        let cn = &msg[NLMSG_HDRLEN..];
        if cn.len() < CN_MSG_LEN {
            return Err(bad(format!("cn_msg of {} bytes, needs {CN_MSG_LEN}", cn.len())));
        }
        let (idx, val) = (u32_at(cn, 0).unwrap_or(0), u32_at(cn, 4).unwrap_or(0));
        if idx != CN_IDX_PROC || val != CN_VAL_PROC {
            continue;
        }
        let data_len = u16::from_ne_bytes([cn[16], cn[17]]) as usize;
        let data = &cn[CN_MSG_LEN..];
        if data.len() < data_len || data_len < EVENT_HDR_LEN {
            return Err(bad(format!(
                "proc_event of {data_len} bytes (cn_msg says), {} present, header needs {EVENT_HDR_LEN}",
                data.len()
            )));
        }
        let ev = &data[..data_len];
        events += 1;
        let what = u32_at(ev, 0).unwrap_or(0);
        let body = &ev[EVENT_HDR_LEN..];
        let need = |n: usize| {
            if body.len() < n {
                Err(bad(format!("event 0x{what:x} with a {}-byte body, needs {n}", body.len())))
            } else {
                Ok(())
            }
        };
        let f = |i: usize| u32_at(body, 4 * i).unwrap_or(0);
        match what {
            PROC_EVENT_FORK => {
                need(16)?;
                out.push(ProcEvent::Fork { parent_tgid: f(1), pid: f(2), tgid: f(3) });
            }
            PROC_EVENT_EXEC => {
                need(8)?;
                out.push(ProcEvent::Exec { pid: f(0), tgid: f(1) });
            }
            PROC_EVENT_EXIT => {
                need(8)?;
                out.push(ProcEvent::Exit { pid: f(0), tgid: f(1) });
            }
            _ => {}
        }
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One connector datagram as the kernel builds it (cn_proc.c `send_msg`): nlmsghdr, cn_msg,
    /// proc_event header (what, cpu, timestamp), body.
    fn datagram(what: u32, body: &[u32]) -> Vec<u8> {
        let data_len = EVENT_HDR_LEN + 4 * body.len();
        let total = NLMSG_HDRLEN + CN_MSG_LEN + data_len;
        let mut m = vec![0u8; total];
        m[0..4].copy_from_slice(&(total as u32).to_ne_bytes());
        m[4..6].copy_from_slice(&NLMSG_DONE.to_ne_bytes());
        let c = NLMSG_HDRLEN;
        m[c..c + 4].copy_from_slice(&CN_IDX_PROC.to_ne_bytes());
        m[c + 4..c + 8].copy_from_slice(&CN_VAL_PROC.to_ne_bytes());
        m[c + 16..c + 18].copy_from_slice(&(data_len as u16).to_ne_bytes());
        let e = c + CN_MSG_LEN;
        m[e..e + 4].copy_from_slice(&what.to_ne_bytes());
        m[e + 4..e + 8].copy_from_slice(&1u32.to_ne_bytes());
        m[e + 8..e + 16].copy_from_slice(&123_456_789u64.to_ne_bytes());
        for (i, v) in body.iter().enumerate() {
            m[e + 16 + 4 * i..e + 20 + 4 * i].copy_from_slice(&v.to_ne_bytes());
        }
        m
    }

    #[test]
    fn parses_fork_thread_exec_exit_and_skips_others() {
        let mut out = Vec::new();
        // A new process 200 of parent 100; a new thread 201 of process 200 (parent: 200's parent).
        assert_eq!(parse_datagram(&datagram(PROC_EVENT_FORK, &[100, 100, 200, 200]), &mut out).unwrap(), 1);
        assert_eq!(parse_datagram(&datagram(PROC_EVENT_FORK, &[100, 100, 201, 200]), &mut out).unwrap(), 1);
        assert_eq!(parse_datagram(&datagram(PROC_EVENT_EXEC, &[200, 200]), &mut out).unwrap(), 1);
        assert_eq!(parse_datagram(&datagram(PROC_EVENT_EXIT, &[201, 200, 0, 17, 100, 100]), &mut out).unwrap(), 1);
        // PROC_EVENT_COMM (0x200): counted, not kept; the subscription's ack (what 0) likewise.
        assert_eq!(parse_datagram(&datagram(0x200, &[200, 200, 0x6e75_6d61, 0, 0, 0]), &mut out).unwrap(), 1);
        assert_eq!(parse_datagram(&datagram(0, &[0]), &mut out).unwrap(), 1);
        assert_eq!(
            out,
            vec![
                ProcEvent::Fork { pid: 200, tgid: 200, parent_tgid: 100 },
                ProcEvent::Fork { pid: 201, tgid: 200, parent_tgid: 100 },
                ProcEvent::Exec { pid: 200, tgid: 200 },
                ProcEvent::Exit { pid: 201, tgid: 200 },
            ]
        );
        assert!(!out[0].is_new_thread());
        assert!(out[1].is_new_thread());
        // Two messages in one datagram.
        let mut two = datagram(PROC_EVENT_FORK, &[1, 1, 300, 300]);
        two.extend(datagram(PROC_EVENT_FORK, &[1, 1, 301, 300]));
        let mut out = Vec::new();
        assert_eq!(parse_datagram(&two, &mut out).unwrap(), 2);
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn rejects_truncated_messages_naming_what_did_not_fit() {
        let mut out = Vec::new();
        let full = datagram(PROC_EVENT_FORK, &[100, 100, 201, 200]);
        let e = parse_datagram(&full[..full.len() - 4], &mut out).unwrap_err().to_string();
        assert!(e.contains("netlink length"), "{e}");
        // A fork body cut short (the cn_msg length says 20 bytes: header + one field).
        let mut short = datagram(PROC_EVENT_FORK, &[100]);
        let e = parse_datagram(&short, &mut out).unwrap_err().to_string();
        assert!(e.contains("0x1 with a 4-byte body, needs 16"), "{e}");
        // Another connector index (e.g. a uvesafb reply) is skipped, not an error.
        short[NLMSG_HDRLEN..NLMSG_HDRLEN + 4].copy_from_slice(&7u32.to_ne_bytes());
        assert_eq!(parse_datagram(&short, &mut out).unwrap(), 0);
        assert!(out.is_empty());
    }

    /// The live kernel: a thread started here is announced as a new thread of this process. Needs
    /// root and CONFIG_PROC_EVENTS (this machine, CI and the rig guests have both); elsewhere the
    /// open error is printed and the test returns.
    #[test]
    fn live_thread_creation_is_announced() {
        let mut ev = match ProcEvents::open() {
            Ok(ev) => ev,
            Err(e) if unsafe { libc::geteuid() } != 0 => {
                eprintln!("skipped, not root: {e}");
                return;
            }
            Err(e) => panic!("proc connector unavailable as root: {e}"),
        };
        let me = std::process::id();
        let tid = std::thread::spawn(|| unsafe { libc::syscall(libc::SYS_gettid) } as u32).join().unwrap();
        let mut out = Vec::new();
        let fork = ProcEvent::Fork { pid: tid, tgid: me, parent_tgid: parent_of(me) };
        let exit = ProcEvent::Exit { pid: tid, tgid: me };
        // The exit event is sent after the thread's join is released (proc_exit_connector runs
        // late in do_exit): a bound for a loaded machine, not a property.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !(out.contains(&fork) && out.contains(&exit)) {
            assert!(
                std::time::Instant::now() < deadline,
                "timed out after 60 s waiting for the fork and exit events of thread {tid} of {me}: {out:?}"
            );
            let mut p = libc::pollfd { fd: ev.fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut p, 1, 100) };
            ev.drain(&mut out).unwrap();
        }
        assert!(out.iter().position(|e| *e == fork) < out.iter().position(|e| *e == exit));
    }

    /// A datagram from another process (netlink port id not 0) is dropped, not parsed: a forged
    /// "new thread" cannot make the daemon step.
    #[test]
    fn a_datagram_not_from_the_kernel_is_dropped() {
        let Ok(mut ev) = ProcEvents::open() else {
            eprintln!("skipped: proc connector unavailable (not root?)");
            return;
        };
        // Our socket's port id.
        // SAFETY: zeroed sockaddr_nl is valid; getsockname writes at most `len` bytes.
        let mut me: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
        let rc = unsafe { libc::getsockname(ev.fd(), (&mut me as *mut libc::sockaddr_nl).cast(), &mut len) };
        assert_eq!(rc, 0);
        // SAFETY: plain socket creation, closed below.
        let other = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, NETLINK_CONNECTOR) };
        assert!(other >= 0);
        let forged = datagram(PROC_EVENT_FORK, &[1, 1, 4242, 4241]);
        let sent = send_to(other, &forged, &me);
        let sent_err = std::io::Error::last_os_error();
        // SAFETY: `other` is ours.
        unsafe { libc::close(other) };
        if sent < 0 {
            eprintln!("the kernel refused the forged datagram itself: {sent_err}");
            return;
        }
        let mut out = Vec::new();
        let mut dropped = 0;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while dropped == 0 {
            assert!(std::time::Instant::now() < deadline, "timed out after 60 s waiting for the forged datagram");
            let mut p = libc::pollfd { fd: ev.fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut p, 1, 100) };
            dropped += ev.drain(&mut out).unwrap().dropped;
        }
        assert!(!out.iter().any(|e| e.tgid() == 4241), "{out:?}");
    }

    fn parent_of(pid: u32) -> u32 {
        let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let rest = &s[s.rfind(')').unwrap() + 2..];
        rest.split_whitespace().nth(1).unwrap().parse().unwrap()
    }
}
