//! A hung file server for tests: a FUSE file system served from a thread of the test process over
//! the kernel's own `/dev/fuse` protocol (`include/uapi/linux/fuse.h`, protocol 7.31), with one
//! regular file, `file` (64 KiB, read-only), whose reads are never answered until
//! [`HungServer::release`] answers them all with EIO. A process that faults on that file's pages
//! with its memory-map lock held waits in the kernel as it would behind a hung NFS server.
//!
//! Only what opening, stat-ing and mapping one file needs is answered (INIT, LOOKUP, GETATTR, OPEN,
//! FLUSH, RELEASE); everything else gets ENOSYS, which the kernel takes as "not implemented".
//!
//! [`HungServer::mount_with_program`] adds a program, an executable file whose reads are answered
//! (a copy of a real program, to run from the mount) and whose attributes are never cached by the
//! kernel, so every stat of it asks the server; once [`HungServer::hang_stats`] is called those
//! GETATTRs are held too, until [`HungServer::release`] answers them with EIO.

#![allow(dead_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const FUSE_LOOKUP: u32 = 1;
const FUSE_FORGET: u32 = 2;
const FUSE_GETATTR: u32 = 3;
const FUSE_OPEN: u32 = 14;
const FUSE_READ: u32 = 15;
const FUSE_RELEASE: u32 = 18;
const FUSE_FLUSH: u32 = 25;
const FUSE_INIT: u32 = 26;
const FUSE_INTERRUPT: u32 = 36;
const FUSE_BATCH_FORGET: u32 = 42;

const ROOT_ID: u64 = 1;
const FILE_ID: u64 = 2;
const PROGRAM_ID: u64 = 3;
/// Size of `file`, bytes.
pub const FILE_BYTES: u64 = 64 << 10;

struct Shared {
    dev: OwnedFd,
    /// Whether reads are answered now, and the READ requests not answered yet (their `unique`);
    /// one lock, so no read is held after the release took the list.
    held: Mutex<(bool, Vec<u64>)>,
    /// The program's name and bytes, when there is one.
    program: Option<(Vec<u8>, Vec<u8>)>,
    /// Whether the program's GETATTRs are held now, and those held (their `unique`).
    stats: Mutex<(bool, Vec<u64>)>,
}

/// A mounted hung file server (see the module essay); unmounted (lazily) when dropped.
pub struct HungServer {
    shared: Arc<Shared>,
    pub mount: PathBuf,
}

fn attr(ino: u64, mode: u32, size: u64) -> Vec<u8> {
    let mut a = Vec::with_capacity(88);
    for v in [ino, size, size.div_ceil(512), 0, 0, 0] {
        a.extend_from_slice(&v.to_le_bytes());
    }
    // atimensec, mtimensec, ctimensec, mode, nlink, uid, gid, rdev, blksize, flags
    for v in [0u32, 0, 0, mode, 1, 0, 0, 0, 4096, 0] {
        a.extend_from_slice(&v.to_le_bytes());
    }
    a
}

fn attr_of(node: u64, program_bytes: u64) -> Vec<u8> {
    match node {
        ROOT_ID => attr(ROOT_ID, 0o040_755, 0),
        PROGRAM_ID => attr(PROGRAM_ID, 0o100_555, program_bytes),
        _ => attr(FILE_ID, 0o100_444, FILE_BYTES),
    }
}

impl Shared {
    fn reply(&self, unique: u64, error: i32, payload: &[u8]) {
        let mut m = Vec::with_capacity(16 + payload.len());
        m.extend_from_slice(&(16 + payload.len() as u32).to_le_bytes());
        m.extend_from_slice(&error.to_le_bytes());
        m.extend_from_slice(&unique.to_le_bytes());
        m.extend_from_slice(payload);
        // SAFETY: writes our buffer to our descriptor; a failed reply (the request was
        // interrupted, the connection gone) is the kernel's to drop.
        unsafe { libc::write(self.dev.as_raw_fd(), m.as_ptr().cast(), m.len()) };
    }

    fn release(&self) {
        let mut h = self.held.lock().unwrap();
        h.0 = true;
        for u in std::mem::take(&mut h.1) {
            self.reply(u, -libc::EIO, &[]);
        }
        let mut s = self.stats.lock().unwrap();
        s.0 = false;
        for u in std::mem::take(&mut s.1) {
            self.reply(u, -libc::EIO, &[]);
        }
    }

    fn program_bytes(&self) -> u64 {
        self.program.as_ref().map_or(0, |(_, b)| b.len() as u64)
    }

    fn serve(&self) {
        let mut buf = vec![0u8; 1 << 20];
        loop {
            // SAFETY: reads into our buffer from our descriptor.
            let n = unsafe { libc::read(self.dev.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                // ENODEV: unmounted and the last user gone.
                return;
            }
            let b = &buf[..n as usize];
            if b.len() < 40 {
                return;
            }
            let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
            let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
            let (opcode, unique, node) = (u32_at(4), u64_at(8), u64_at(16));
            match opcode {
                FUSE_INIT => {
                    let mut out = Vec::with_capacity(64);
                    // major, minor, max_readahead (none: every page is its own READ), flags
                    for v in [7u32, 31, 0, 0] {
                        out.extend_from_slice(&v.to_le_bytes());
                    }
                    out.extend_from_slice(&16u16.to_le_bytes()); // max_background
                    out.extend_from_slice(&12u16.to_le_bytes()); // congestion_threshold
                    out.extend_from_slice(&65536u32.to_le_bytes()); // max_write
                    out.extend_from_slice(&1u32.to_le_bytes()); // time_gran
                    out.extend_from_slice(&32u16.to_le_bytes()); // max_pages
                    out.extend_from_slice(&0u16.to_le_bytes()); // map_alignment
                    out.resize(64, 0); // flags2, unused
                    self.reply(unique, 0, &out);
                }
                FUSE_LOOKUP => {
                    let name = &b[40..];
                    let name = &name[..name.iter().position(|&c| c == 0).unwrap_or(name.len())];
                    let program = self.program.as_ref().is_some_and(|(n, _)| n == name);
                    if node == ROOT_ID && (name == b"file" || program) {
                        // nodeid, generation, entry_valid, attr_valid (the program's: 0, never
                        // cached), their nanoseconds.
                        let (id, valid) = if program { (PROGRAM_ID, 0) } else { (FILE_ID, 3600) };
                        let mut out = Vec::with_capacity(128);
                        for v in [id, 0, 3600, valid] {
                            out.extend_from_slice(&v.to_le_bytes());
                        }
                        out.extend_from_slice(&[0; 8]);
                        out.extend_from_slice(&attr_of(id, self.program_bytes()));
                        self.reply(unique, 0, &out);
                    } else {
                        self.reply(unique, -libc::ENOENT, &[]);
                    }
                }
                FUSE_GETATTR => {
                    if node == PROGRAM_ID {
                        let mut s = self.stats.lock().unwrap();
                        if s.0 {
                            s.1.push(unique);
                            continue;
                        }
                    }
                    let valid: u64 = if node == PROGRAM_ID { 0 } else { 3600 };
                    let mut out = Vec::with_capacity(104);
                    out.extend_from_slice(&valid.to_le_bytes());
                    out.extend_from_slice(&[0; 8]);
                    out.extend_from_slice(&attr_of(node, self.program_bytes()));
                    self.reply(unique, 0, &out);
                }
                FUSE_OPEN => self.reply(unique, 0, &[0; 16]),
                // fuse_read_in: fh, offset, size, ...: the program's bytes are served.
                FUSE_READ if node == PROGRAM_ID => {
                    let bytes = self.program.as_ref().map_or(&[][..], |(_, b)| b);
                    let offset = (u64_at(48) as usize).min(bytes.len());
                    let end = offset.saturating_add(u32_at(56) as usize).min(bytes.len());
                    self.reply(unique, 0, &bytes[offset..end]);
                }
                FUSE_READ => {
                    let mut h = self.held.lock().unwrap();
                    if h.0 {
                        self.reply(unique, -libc::EIO, &[]);
                    } else {
                        h.1.push(unique);
                    }
                }
                FUSE_FLUSH | FUSE_RELEASE => self.reply(unique, 0, &[]),
                FUSE_FORGET | FUSE_BATCH_FORGET | FUSE_INTERRUPT => {}
                _ => self.reply(unique, -libc::ENOSYS, &[]),
            }
        }
    }
}

impl HungServer {
    /// Mounts a hung server on a new directory under `parent`.
    pub fn mount(parent: &Path) -> io::Result<HungServer> {
        Self::mount_serving(parent, None)
    }

    /// [`HungServer::mount`] with a program `name` of `bytes` beside `file` (see the module
    /// essay).
    pub fn mount_with_program(parent: &Path, name: &str, bytes: Vec<u8>) -> io::Result<HungServer> {
        Self::mount_serving(parent, Some((name.as_bytes().to_vec(), bytes)))
    }

    fn mount_serving(parent: &Path, program: Option<(Vec<u8>, Vec<u8>)>) -> io::Result<HungServer> {
        let mount = parent.join("hung-fuse");
        std::fs::create_dir_all(&mount)?;
        // SAFETY: a constant NUL-terminated path.
        let fd = unsafe { libc::open(c"/dev/fuse".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::other(format!("/dev/fuse: {}", io::Error::last_os_error())));
        }
        // SAFETY: a descriptor we just opened and own from here on.
        let dev = unsafe { OwnedFd::from_raw_fd(fd) };
        let target = std::ffi::CString::new(mount.as_os_str().as_encoded_bytes()).unwrap();
        let data = std::ffi::CString::new(format!("fd={fd},rootmode=40000,user_id=0,group_id=0,allow_other")).unwrap();
        // SAFETY: valid NUL-terminated strings.
        let r = unsafe {
            libc::mount(c"numapilot-test".as_ptr(), target.as_ptr(), c"fuse".as_ptr(), 0, data.as_ptr().cast())
        };
        if r != 0 {
            return Err(io::Error::other(format!("mount fuse on {}: {}", mount.display(), io::Error::last_os_error())));
        }
        let shared = Arc::new(Shared {
            dev,
            held: Mutex::new((false, Vec::new())),
            program,
            stats: Mutex::new((false, Vec::new())),
        });
        let s = shared.clone();
        std::thread::spawn(move || s.serve());
        Ok(HungServer { shared, mount })
    }

    /// The file whose reads hang.
    pub fn file(&self) -> PathBuf {
        self.mount.join("file")
    }

    /// READ requests held now.
    pub fn held(&self) -> usize {
        self.shared.held.lock().unwrap().1.len()
    }

    /// The program's path (see [`HungServer::mount_with_program`]).
    pub fn program(&self) -> Option<PathBuf> {
        self.shared.program.as_ref().map(|(n, _)| self.mount.join(String::from_utf8_lossy(n).as_ref()))
    }

    /// From now on every GETATTR of the program is held (a stat of it waits), until
    /// [`HungServer::release`].
    pub fn hang_stats(&self) {
        self.shared.stats.lock().unwrap().0 = true;
    }

    /// The program's GETATTRs held now.
    pub fn stats_held(&self) -> usize {
        self.shared.stats.lock().unwrap().1.len()
    }

    /// Answers every held READ, and every later one, with EIO: the server is no longer hung.
    pub fn release(&self) {
        self.shared.release();
    }

    /// A handle that can release the server from another thread (a watchdog).
    pub fn releaser(&self) -> impl Fn() + Send + 'static {
        let s = self.shared.clone();
        move || s.release()
    }
}

impl Drop for HungServer {
    fn drop(&mut self) {
        self.release();
        let target = std::ffi::CString::new(self.mount.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; MNT_DETACH: the mount goes once its last user does.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        let _ = std::fs::remove_dir(&self.mount);
    }
}
