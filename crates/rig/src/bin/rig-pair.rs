//! `rig-pair`: processes that talk to each other or share memory, for the rig's co-placement scenario
//! (rig/scenarios/pairs.sh, crates/rig/tests/pairs.rs).
//!
//! Two unrelated processes (neither forks the other) work together in one of two ways the daemon's signals see:
//!
//! ```text
//! rig-pair server (--tcp PORT | --unix PATH) [COMMON]   keeps a buffer of --mb MiB; every connection gets a thread
//!                                                       that answers each 8-byte request by touching the next
//!                                                       --pages pages of the buffer and sending 8 bytes back
//! rig-pair client (--tcp PORT | --unix PATH) [COMMON]   connects (127.0.0.1:PORT or PATH), then in a loop: a
//!                                                       request, the answer, --pages pages of its own --mb MiB
//!                                                       touched, --pause-us of sleep
//! rig-pair share-owner --unix PATH [COMMON]             a memfd of --mb MiB, every page written, offered on PATH:
//!                                                       each connection gets the descriptor (SCM_RIGHTS) and is
//!                                                       closed; then the owner keeps touching the memfd
//! rig-pair share-user --unix PATH [COMMON]              takes the memfd from PATH (the connection then closed: no
//!                                                       socket is left between the two), maps it, and keeps
//!                                                       touching it and its own --mb MiB
//!
//! COMMON: [--mb N] [--pages K] [--pause-us U] [--ready FILE]
//!   --mb N        MiB of memory of its own (the server's buffer, the owner's memfd; default 16)
//!   --pages K     pages touched per round (default 64), walking round the memory
//!   --pause-us U  sleep after each round, microseconds (default 2000): the load it puts on a CPU
//!   --ready FILE  written (holding the pid) once its memory is touched and, for a client or a user, it is
//!                 connected: the rig's `rig_start` protocol
//! ```
//!
//! Every page is written with a non-zero byte once before the process is ready, so the kernel backs it with a frame
//! on the node of the CPU that wrote it (first touch) and neither the zero page nor KSM stands in for it. The
//! processes never set an affinity or a memory policy: where they start is for the caller to arrange (the scenario
//! starts each under a CPU binding, then widens it back to every CPU), so the daemon treats them as its own to place.
//!
//! Errors name the argument or the system call and exit 2 (usage) or 1 (run time); a peer that goes away ends a
//! server's connection thread, and ends a client with exit 1.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::ExitCode;
use std::time::Duration;

/// Bytes between two written bytes: 4 KiB, the smallest x86-64 page, so every base page is touched.
const PAGE: usize = 4096;

/// Bytes of a request and of an answer.
const MSG: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Server,
    Client,
    ShareOwner,
    ShareUser,
}

#[derive(Debug, Clone)]
enum Endpoint {
    Tcp(u16),
    Unix(String),
}

#[derive(Debug)]
struct Args {
    mode: Mode,
    endpoint: Endpoint,
    mb: usize,
    pages: usize,
    pause: Duration,
    ready: Option<String>,
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let (mode, rest) = args.split_first().ok_or("a mode is needed: server, client, share-owner or share-user")?;
    let mode = match mode.as_str() {
        "server" => Mode::Server,
        "client" => Mode::Client,
        "share-owner" => Mode::ShareOwner,
        "share-user" => Mode::ShareUser,
        other => return Err(format!("unknown mode {other:?}: server, client, share-owner or share-user")),
    };
    let mut endpoint = None;
    let (mut mb, mut pages, mut pause_us, mut ready) = (16usize, 64usize, 2000u64, None);
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        let number = |v: &String| v.parse::<u64>().map_err(|_| format!("{a}: not a whole number: {v:?}"));
        match a.as_str() {
            "--tcp" => {
                let v = value()?;
                let port = v.parse::<u16>().ok().filter(|&p| p > 0).ok_or(format!("--tcp: not a port: {v:?}"))?;
                endpoint = Some(Endpoint::Tcp(port));
            }
            "--unix" => endpoint = Some(Endpoint::Unix(value()?.clone())),
            "--mb" => mb = number(value()?)? as usize,
            "--pages" => pages = number(value()?)? as usize,
            "--pause-us" => pause_us = number(value()?)?,
            "--ready" => ready = Some(value()?.clone()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let endpoint = endpoint.ok_or("--tcp PORT or --unix PATH is needed")?;
    if matches!(mode, Mode::ShareOwner | Mode::ShareUser) && matches!(endpoint, Endpoint::Tcp(_)) {
        return Err("share-owner and share-user pass the memfd over a unix socket: --unix PATH".into());
    }
    if mb == 0 && mode != Mode::ShareUser {
        return Err("--mb must be at least 1".into());
    }
    if pages == 0 {
        return Err("--pages must be at least 1".into());
    }
    Ok(Args { mode, endpoint, mb, pages, pause: Duration::from_micros(pause_us), ready })
}

/// Memory this process touches: a private anonymous buffer or a shared mapping of a memfd.
struct Memory {
    ptr: *mut u8,
    len: usize,
    /// Next page of the round-robin walk.
    next: usize,
}

// SAFETY: the mapping is owned by this value alone; the threads that touch it each hold their own `Memory`
// (a server's connection threads each walk a view of the same buffer, see `Memory::view`), and every write is a
// single byte whose value nobody reads back for correctness.
unsafe impl Send for Memory {}

impl Memory {
    /// `len` bytes mapped from `fd` (shared) or anonymous (private), not yet touched.
    fn map(len: usize, fd: Option<RawFd>) -> Result<Memory, String> {
        let (flags, fd) = match fd {
            Some(fd) => (libc::MAP_SHARED, fd),
            None => (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1),
        };
        // SAFETY: a fresh mapping chosen by the kernel; the result is checked.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, fd, 0) };
        if p == libc::MAP_FAILED {
            return Err(format!("mmap of {len} bytes: {}", std::io::Error::last_os_error()));
        }
        Ok(Memory { ptr: p.cast(), len, next: 0 })
    }

    /// Another walker over the same pages (the mapping outlives every view: it is never unmapped).
    fn view(&self, start_page: usize) -> Memory {
        Memory { ptr: self.ptr, len: self.len, next: start_page % self.pages().max(1) }
    }

    fn pages(&self) -> usize {
        self.len / PAGE
    }

    /// Writes one non-zero byte to each of the next `k` pages (wrapping); returns a byte read back.
    fn touch(&mut self, k: usize, v: u8) -> u8 {
        let n = self.pages();
        if n == 0 {
            return 0;
        }
        let mut acc = 0u8;
        for _ in 0..k {
            // SAFETY: `next < n`, so the byte is inside the mapping.
            unsafe {
                let p = self.ptr.add(self.next * PAGE);
                std::ptr::write_volatile(p, v.max(1));
                acc ^= std::ptr::read_volatile(p.add(1));
            }
            self.next = (self.next + 1) % n;
        }
        acc
    }

    /// Every page once (first touch).
    fn touch_all(&mut self) {
        let n = self.pages();
        self.touch(n, 0x5a);
    }
}

fn ready(path: &Option<String>) -> Result<(), String> {
    let Some(path) = path else { return Ok(()) };
    // A temporary name, then a rename: a watcher never sees a half-written file.
    let tmp = format!("{path}.tmp");
    std::fs::File::create(&tmp)
        .and_then(|mut f| writeln!(f, "{}", std::process::id()))
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| format!("ready file {path}: {e}"))
}

/// A connected stream of either kind.
enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    fn exchange(&mut self, out: &[u8; MSG], back: &mut [u8; MSG]) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.write_all(out).and_then(|_| s.read_exact(back)),
            Stream::Unix(s) => s.write_all(out).and_then(|_| s.read_exact(back)),
        }
    }

    /// Reads a request; `Ok(false)` at end of stream.
    fn request(&mut self, buf: &mut [u8; MSG]) -> std::io::Result<bool> {
        let r = match self {
            Stream::Tcp(s) => s.read_exact(buf),
            Stream::Unix(s) => s.read_exact(buf),
        };
        match r {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn answer(&mut self, buf: &[u8; MSG]) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.write_all(buf),
            Stream::Unix(s) => s.write_all(buf),
        }
    }
}

fn serve(a: &Args) -> Result<(), String> {
    let mut mem = Memory::map(a.mb << 20, None)?;
    mem.touch_all();
    let accept: Box<dyn FnMut() -> Result<Stream, String>> = match &a.endpoint {
        Endpoint::Tcp(port) => {
            let l = TcpListener::bind(("127.0.0.1", *port)).map_err(|e| format!("listen on 127.0.0.1:{port}: {e}"))?;
            Box::new(move || {
                let (s, _) = l.accept().map_err(|e| format!("accept: {e}"))?;
                // Requests are 8 bytes: no Nagle delay between a request and its answer.
                s.set_nodelay(true).map_err(|e| format!("TCP_NODELAY: {e}"))?;
                Ok(Stream::Tcp(s))
            })
        }
        Endpoint::Unix(path) => {
            let l = UnixListener::bind(path).map_err(|e| format!("listen on {path}: {e}"))?;
            Box::new(move || l.accept().map(|(s, _)| Stream::Unix(s)).map_err(|e| format!("accept: {e}")))
        }
    };
    ready(&a.ready)?;
    let mut accept = accept;
    let mut n = 0usize;
    loop {
        let mut s = accept()?;
        let mut walk = mem.view(n * 4096);
        n += 1;
        let pages = a.pages;
        std::thread::spawn(move || {
            let mut req = [0u8; MSG];
            // The connection ends when the client goes; an error ends it too (the server serves on).
            while let Ok(true) = s.request(&mut req) {
                let v = walk.touch(pages, req[0]);
                req[1] = v;
                if s.answer(&req).is_err() {
                    break;
                }
            }
        });
    }
}

fn client(a: &Args) -> Result<(), String> {
    let mut mem = Memory::map(a.mb << 20, None)?;
    mem.touch_all();
    let mut s = match &a.endpoint {
        Endpoint::Tcp(port) => {
            let s =
                TcpStream::connect(("127.0.0.1", *port)).map_err(|e| format!("connect to 127.0.0.1:{port}: {e}"))?;
            s.set_nodelay(true).map_err(|e| format!("TCP_NODELAY: {e}"))?;
            Stream::Tcp(s)
        }
        Endpoint::Unix(path) => Stream::Unix(UnixStream::connect(path).map_err(|e| format!("connect to {path}: {e}"))?),
    };
    ready(&a.ready)?;
    let (mut out, mut back) = ([0u8; MSG], [0u8; MSG]);
    for round in 0u64.. {
        out[0] = (round as u8).max(1);
        s.exchange(&out, &mut back).map_err(|e| format!("request {round}: {e}"))?;
        mem.touch(a.pages, back[1].wrapping_add(1));
        std::thread::sleep(a.pause);
    }
    Ok(())
}

/// Builds the message a descriptor travels in, one byte of data (`byte`) and a control buffer with
/// room for one SCM_RIGHTS descriptor, and hands it to `f` for its `sendmsg` or `recvmsg`: the
/// header's pointers (the data, the buffer) are valid until `f` returns.
fn with_fd_message<R>(byte: u8, f: impl FnOnce(&mut libc::msghdr) -> R) -> R {
    let mut data = [byte];
    let mut iov = libc::iovec { iov_base: data.as_mut_ptr().cast(), iov_len: 1 };
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    // In u64 words: aligned as cmsghdr needs.
    let mut cbuf = vec![0u64; space.div_ceil(8)];
    // SAFETY: msghdr is plain data; all-zero is a valid empty value, filled in below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    f(&mut msg)
}

/// Sends `fd` over `s` as SCM_RIGHTS with one byte of data.
fn send_fd(s: &UnixStream, fd: RawFd) -> std::io::Result<()> {
    with_fd_message(1, |msg| {
        // SAFETY: the control buffer holds one header with room for one descriptor (with_fd_message).
        unsafe {
            let c = libc::CMSG_FIRSTHDR(msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<RawFd>(), fd);
        }
        // SAFETY: every pointer in `msg` is valid for the call.
        if unsafe { libc::sendmsg(s.as_raw_fd(), msg, 0) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    })
}

/// Receives one descriptor sent as SCM_RIGHTS on `s`.
fn recv_fd(s: &UnixStream) -> Result<OwnedFd, String> {
    with_fd_message(0, |msg| {
        // SAFETY: every pointer in `msg` is valid for the call; MSG_CMSG_CLOEXEC keeps the descriptor from
        // children.
        let n = unsafe { libc::recvmsg(s.as_raw_fd(), msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            return Err(format!("recvmsg: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: the kernel filled msg_control up to msg_controllen; CMSG_FIRSTHDR checks the length.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(msg);
            if c.is_null() || (*c).cmsg_level != libc::SOL_SOCKET || (*c).cmsg_type != libc::SCM_RIGHTS {
                return Err("the owner sent no descriptor (no SCM_RIGHTS message)".into());
            }
            let fd = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<RawFd>());
            Ok(OwnedFd::from_raw_fd(fd))
        }
    })
}

/// Keeps touching each of `mems` in turn, `pages` pages of each per round, forever.
fn keep_touching(mems: &mut [Memory], pages: usize, pause: Duration) -> ! {
    let mut v: u8 = 0x5a;
    loop {
        v = v.wrapping_add(1).max(1);
        for m in mems.iter_mut() {
            std::hint::black_box(m.touch(pages, v));
        }
        std::thread::sleep(pause);
    }
}

fn share_owner(a: &Args) -> Result<(), String> {
    let Endpoint::Unix(path) = &a.endpoint else { unreachable!("checked in parse_args") };
    let len = a.mb << 20;
    // SAFETY: a fresh memfd; the name is a C string literal.
    let fd = unsafe { libc::memfd_create(c"rig-pair".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(format!("memfd_create: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: `fd` was just returned by memfd_create and is owned here alone.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: plain system call on an owned descriptor.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
        return Err(format!("ftruncate of the memfd to {len} bytes: {}", std::io::Error::last_os_error()));
    }
    let mut mem = Memory::map(len, Some(fd.as_raw_fd()))?;
    mem.touch_all();
    let l = UnixListener::bind(path).map_err(|e| format!("listen on {path}: {e}"))?;
    ready(&a.ready)?;
    let raw = fd.as_raw_fd();
    std::thread::spawn(move || {
        let _keep = fd;
        for s in l.incoming().flatten() {
            // One descriptor per connection, then the connection closes: no socket stays between the two.
            if let Err(e) = send_fd(&s, raw) {
                eprintln!("rig-pair share-owner: sending the memfd: {e}");
            }
        }
    });
    keep_touching(&mut [mem], a.pages, a.pause)
}

fn share_user(a: &Args) -> Result<(), String> {
    let Endpoint::Unix(path) = &a.endpoint else { unreachable!("checked in parse_args") };
    let s = UnixStream::connect(path).map_err(|e| format!("connect to {path}: {e}"))?;
    let fd = recv_fd(&s)?;
    drop(s);
    // SAFETY: stat is plain data; all-zero is a valid value, filled in by fstat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat on an owned descriptor into a local buffer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(format!("fstat of the memfd: {}", std::io::Error::last_os_error()));
    }
    let shared = Memory::map(st.st_size as usize, Some(fd.as_raw_fd()))?;
    let mut mems = vec![shared];
    if a.mb > 0 {
        let mut own = Memory::map(a.mb << 20, None)?;
        own.touch_all();
        mems.push(own);
    }
    // Its own view of every shared page once, so both processes map the whole memfd before the daemon looks.
    mems[0].touch_all();
    ready(&a.ready)?;
    keep_touching(&mut mems, a.pages, a.pause)
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse_args(&argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("rig-pair: {e}");
            return ExitCode::from(2);
        }
    };
    let r = match args.mode {
        Mode::Server => serve(&args),
        Mode::Client => client(&args),
        Mode::ShareOwner => share_owner(&args),
        Mode::ShareUser => share_user(&args),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rig-pair: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Result<Args, String> {
        parse_args(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn bad_arguments_name_what_is_wrong() {
        for (line, says) in [
            ("", "a mode is needed"),
            ("talk --tcp 1", "unknown mode \"talk\""),
            ("server", "--tcp PORT or --unix PATH"),
            ("server --tcp 0", "--tcp: not a port: \"0\""),
            ("client --tcp 70000", "not a port"),
            ("client --unix /x --mb", "--mb needs a value"),
            ("client --unix /x --pages 0", "--pages must be at least 1"),
            ("server --unix /x --mb 0", "--mb must be at least 1"),
            ("share-owner --tcp 5000", "over a unix socket"),
            ("client --unix /x --pause-us fast", "--pause-us: not a whole number: \"fast\""),
            ("client --unix /x --loud", "unknown argument \"--loud\""),
        ] {
            let e = args(line).expect_err(line);
            assert!(e.contains(says), "{line:?}: {e}");
        }
        let a = args("share-user --unix /tmp/s --mb 0 --ready /tmp/r").unwrap();
        assert_eq!((a.mode, a.mb, a.ready.as_deref()), (Mode::ShareUser, 0, Some("/tmp/r")));
    }

    /// The descriptor the owner sends is the memfd itself: a write through the user's mapping is read through the
    /// owner's (one object, two processes' worth of mappings here in one).
    #[test]
    fn a_memfd_passed_over_a_socket_is_the_same_memory() {
        let (a, b) = UnixStream::pair().unwrap();
        // SAFETY: as in share_owner.
        let fd = unsafe { libc::memfd_create(c"rig-pair-test".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), 2 * PAGE as libc::off_t) }, 0);
        send_fd(&a, fd.as_raw_fd()).unwrap();
        let got = recv_fd(&b).unwrap();
        assert_ne!(got.as_raw_fd(), fd.as_raw_fd(), "a new descriptor in the receiver");
        let mut mine = Memory::map(2 * PAGE, Some(fd.as_raw_fd())).unwrap();
        let mut theirs = Memory::map(2 * PAGE, Some(got.as_raw_fd())).unwrap();
        theirs.touch(2, 0x33);
        // SAFETY: inside the two-page mapping.
        assert_eq!(unsafe { std::ptr::read_volatile(mine.ptr.add(PAGE)) }, 0x33);
        mine.touch(1, 0x44);
        assert_eq!(unsafe { std::ptr::read_volatile(theirs.ptr) }, 0x44);
    }
}
