//! numactl's shared-memory mode: a memory policy set on a System V segment or on a file of tmpfs
//! or hugetlbfs, which outlives the command (`numactl --length 1g --file /dev/shm/db -m 0`).
//!
//! # Problem
//!
//! A process's policy (`set_mempolicy`) is inherited by what it runs and dies with it. Memory that
//! several processes share and that lives on its own, a database's System V buffer segment, a file
//! on tmpfs or hugetlbfs that applications map, has a policy of its own: the kernel keeps a shared
//! policy per segment (`shmem`'s `shared_policy`, per page range), set by `mbind` on any mapping of
//! it and used for every page allocated there later, whoever faults it. numactl(8) sets it so
//! ("it can set persistent policy for shared memory segments or files"); scripts that place a
//! segment before the applications start use it, and they run unchanged against this launcher.
//!
//! # Approach
//!
//! ```text
//!   options, in the order given (numactl applies each as it reads it; here the whole line is read
//!   and every node list checked first, so a bad one changes nothing):
//!     --length/-L SIZE --offset/-o SIZE --shmmode/-M OCTAL --huge/-u --shmid/-I ID   describe the
//!                                                    segment the next --shm/--file attaches
//!     --file/-f PATH   open it (created with --shmmode, 0600 by default, when missing and a length
//!                      is given), extended to --offset + --length, mapped MAP_SHARED at --offset
//!     --shm/-S KEYFILE ftok(KEYFILE, --shmid) (the key file created when missing), shmget (the
//!                      segment created with --length when missing; its own size otherwise),
//!                      shmat, the region starting --offset into it (SHM_HUGETLB with --huge)
//!     a memory policy  mbind on the region (MPOL_MF_STRICT after --strict)
//!     --touch/-T       every page of the region touched, so it is allocated under the policy now
//!     --dump/-d        the policy of each run of pages:  START-END: NAME : NODES
//!     --dump-nodes/-D  the node of each run of pages:    START-END: NODE    (faults them in)
//!     --verify/-V      touches, then checks every page's policy and node against the policy given
//! ```
//!
//! Offsets printed are the region's, `--offset` included, 16 hex digits, as numactl prints them.
//! The region's page size is the file system's block size for a file (the huge page size on
//! hugetlbfs) and the base or huge page size for a System V segment; the length must be a multiple
//! of it.
//!
//! # Differences from numactl 2.0.16, on purpose
//!
//! A size must read whole (`1x` is an error; numactl reads 1); a length or offset that is not a
//! multiple of the page size is refused before the file is created or extended (numactl creates
//! it, then fails); a key file is not left behind by a `--shm` line whose segment cannot be made
//! (no key file and no `--length`, or a length the kernel refuses; numactl leaves it); `--preferred` on a segment sets the preferred node (numactl 2.0.16 fails with
//! EINVAL); the policy line of `--dump` names preferred-many and weighted-interleave (numactl
//! 2.0.16 prints them as `[5]` and `[6]`). Messages name the option and value they are about.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use numapilot_actuate::{CurrentPolicy, MbindFlags, MemPolicy, Mode, ModeFlags};
use numapilot_topology::NodeSet;

use super::numactl::PolicyOpt;

/// What the next `--shm`/`--file` attaches: the options given before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Describe {
    /// `--length`, bytes.
    pub length: Option<u64>,
    /// `--offset`, bytes.
    pub offset: u64,
    /// `--shmmode`: permission bits of a file or segment created.
    pub mode: u32,
    /// `--huge`: a System V segment of huge pages.
    pub huge: bool,
    /// `--shmid`: the project id `ftok` mixes into the key.
    pub id: i32,
}

impl Default for Describe {
    fn default() -> Self {
        // numactl's defaults (shm.c): mode 0600, id 0.
        Describe { length: None, offset: 0, mode: 0o600, huge: false, id: 0 }
    }
}

/// Which kind of segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `--shm KEYFILE`: System V shared memory.
    SysV,
    /// `--file PATH`.
    File,
}

/// One step of the shared-memory mode, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Attach a segment (the option as written, for messages).
    Attach(Kind, PathBuf, Describe, String),
    /// Set a memory policy on the attached region.
    Policy(PolicyOpt),
    /// `--strict`: later policies fail when pages already stand elsewhere.
    Strict,
    /// `--touch` (the option as written).
    Touch(String),
    /// `--dump`.
    Dump,
    /// `--dump-nodes`.
    DumpNodes,
    /// `--verify` against this policy.
    Verify(PolicyOpt),
}

/// A size as numactl's `--length`/`--offset` take it: a number as C `strtoull(s, 0)` reads it
/// (decimal, `0x` hex, `0` octal; `nodespec::parse_number`), optionally followed by one of `k`,
/// `m`, `g` (either case), powers of 1024. Err: what it should have been.
pub fn size(s: &str) -> Result<u64, &'static str> {
    let (digits, shift) = match s.char_indices().last() {
        Some((i, c)) if "kKmMgG".contains(c) => (&s[..i], 10 * (1 + "kKmMgG".find(c).unwrap_or(0) as u32 / 2)),
        _ => (s, 0),
    };
    let n = super::nodespec::parse_number(digits).map_err(|_| "a size (a number, optionally followed by k, m or g)")?;
    n.checked_mul(1u64 << shift).ok_or("a size that fits in 64 bits")
}

/// `--shmmode`: octal permission bits.
pub fn mode(s: &str) -> Result<u32, &'static str> {
    u32::from_str_radix(s, 8).ok().filter(|m| !s.is_empty() && *m <= 0o7777).ok_or("an octal mode (0600)")
}

/// `--shmid`: a number as `strtoul(s, 0)` reads it (ftok keeps its low 8 bits).
pub fn shm_id(s: &str) -> Result<i32, &'static str> {
    super::nodespec::parse_number(s).ok().and_then(|n| i32::try_from(n).ok()).ok_or("a number")
}

/// An attached region: where it starts in this process, how long it is, the offset numactl prints,
/// its page size, and how to let go of it.
struct Region {
    base: *mut u8,
    len: usize,
    offset: u64,
    page: usize,
    detach: Detach,
}

enum Detach {
    Unmap(*mut libc::c_void, usize),
    Shmdt(*mut libc::c_void),
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the mapping or attachment was made by `attach_*` and is released once.
        unsafe {
            match self.detach {
                Detach::Unmap(p, n) => {
                    libc::munmap(p, n);
                }
                Detach::Shmdt(p) => {
                    libc::shmdt(p);
                }
            }
        }
    }
}

impl Region {
    fn pages(&self) -> impl Iterator<Item = usize> {
        (0..self.len).step_by(self.page.max(1))
    }

    fn at(&self, off: usize) -> *const libc::c_void {
        // SAFETY: `off` < len: inside the region.
        unsafe { self.base.add(off) as *const libc::c_void }
    }

    /// Touches every page (a read and a write of its first byte, as libnuma's
    /// `numa_police_memory`), so each is allocated now, under the policy.
    fn touch(&self) {
        for off in self.pages() {
            // SAFETY: inside the mapping, readable and writable (PROT_READ | PROT_WRITE / shmat
            // read-write); the byte is written back unchanged.
            unsafe {
                let p = self.base.add(off);
                std::ptr::write_volatile(p, std::ptr::read_volatile(p));
            }
        }
    }
}

/// The base page size.
fn page_size() -> usize {
    numapilot_observe::reader::page_size() as usize
}

/// The huge page size (`Hugepagesize:` of /proc/meminfo), the base page size when unknown.
fn huge_page_size() -> usize {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("Hugepagesize:")?.trim().strip_suffix("kB")?.trim().parse::<usize>().ok())
        })
        .map_or_else(page_size, |kb| kb * 1024)
}

fn check_aligned(len: u64, offset: u64, page: usize, opt: &str) -> anyhow::Result<()> {
    if len == 0 {
        bail!("policy region length not specified before {opt}");
    }
    if len % page as u64 != 0 || offset % page as u64 != 0 {
        bail!(
            "policy region not page aligned: --length {len} and --offset {offset} must be multiples of the page size \
             ({page} bytes)"
        );
    }
    Ok(())
}

fn attach_file(path: &Path, d: &Describe, opt: &str) -> anyhow::Result<Region> {
    let shown = path.display();
    let file = match std::fs::OpenOptions::new().read(true).write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if d.length.is_none() {
                bail!("{shown}: need a --length to create a shared file");
            }
            // The page size of what it will be: its directory's file system block size.
            let page = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .and_then(|p| std::fs::metadata(p).ok())
                .map_or_else(page_size, |m| m.blksize() as usize);
            check_aligned(d.length.unwrap_or(0), d.offset, page, opt)?;
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(d.mode)
                .open(path)
                .with_context(|| format!("cannot create file {shown}"))?
        }
        Err(e) => return Err(e).with_context(|| format!("cannot open {shown}")),
    };
    let meta = file.metadata().with_context(|| format!("{shown}: stat"))?;
    let page = meta.blksize() as usize;
    let len = d.length.unwrap_or(0);
    check_aligned(len, d.offset, page, opt)?;
    // Extended to cover the region (numactl: offset + length), never shrunk.
    let end = d.offset.checked_add(len).context("--offset + --length past 64 bits")?;
    if end > meta.len() {
        file.set_len(end).with_context(|| format!("{shown}: extending it to {end} bytes (--offset + --length)"))?;
    }
    let n = usize::try_from(len).context("--length larger than the address space")?;
    // SAFETY: a fresh shared mapping of a file we opened read-write; the kernel checks the offset.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            n,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            std::os::fd::AsRawFd::as_raw_fd(&file),
            d.offset as libc::off_t,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("{shown}: mmap"));
    }
    Ok(Region { base: p as *mut u8, len: n, offset: d.offset, page, detach: Detach::Unmap(p, n) })
}

fn attach_sysv(keyfile: &Path, d: &Describe, opt: &str, prefix: &str) -> anyhow::Result<Region> {
    let shown = keyfile.display();
    let page = if d.huge { huge_page_size() } else { page_size() };
    if let Some(len) = d.length {
        check_aligned(len, d.offset, page, opt)?;
    }
    let c = CString::new(keyfile.as_os_str().as_bytes()).with_context(|| format!("{shown}: a NUL in the name"))?;
    // SAFETY: a valid C string.
    let mut key = unsafe { libc::ftok(c.as_ptr(), d.id) };
    let ftok_error = std::io::Error::last_os_error();
    // A key file this call creates, removed again unless a segment comes of it: a refused line
    // leaves nothing behind (numactl leaves the empty key file).
    let mut made_key: Option<KeyFileMade> = None;
    if key == -1 {
        // No key file, so no segment to attach: without --length none can be made either, and
        // the key file is not created just to refuse the line after it.
        if d.length.is_none() && ftok_error.raw_os_error() == Some(libc::ENOENT) {
            bail!("{shown}: need a --length to create a sysv shared memory segment (there is no such key file)");
        }
        eprintln!("{prefix}: Creating shm key file {shown} mode {:04o}", d.mode);
        // Made new when it was missing, so only a file this call made is removed again.
        let missing = ftok_error.raw_os_error() == Some(libc::ENOENT);
        std::fs::OpenOptions::new()
            .write(true)
            .create(!missing)
            .create_new(missing)
            .truncate(false)
            .mode(d.mode)
            .open(keyfile)
            .with_context(|| format!("cannot create key for shm {shown}"))?;
        if missing {
            made_key = Some(KeyFileMade(Some(keyfile.to_path_buf())));
        }
        // SAFETY: as above.
        key = unsafe { libc::ftok(c.as_ptr(), d.id) };
        if key == -1 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("cannot get key for newly created shm key file {shown}"));
        }
    }
    let flags = if d.huge { libc::SHM_HUGETLB } else { 0 };
    let want = usize::try_from(d.length.unwrap_or(0)).context("--length larger than the address space")?;
    // SAFETY: plain system calls with integer arguments.
    let mut id = unsafe { libc::shmget(key, want, flags) };
    if id < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOENT) {
        if d.length.is_none() {
            bail!("{shown}: need a --length to create a sysv shared memory segment");
        }
        eprintln!(
            "{prefix}: Creating shared memory segment {shown} id {} mode {:04o} length {:.0}MB",
            d.id,
            d.mode,
            want as f64 / (1024.0 * 1024.0)
        );
        // SAFETY: as above.
        id = unsafe { libc::shmget(key, want, libc::IPC_CREAT | d.mode as libc::c_int | flags) };
    }
    if id < 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("shared memory segment of {shown}"));
    }
    // The segment exists now and is named by the key file: it stays.
    if let Some(k) = made_key.as_mut() {
        k.keep();
    }
    let len = match d.length {
        Some(l) => l,
        None => {
            // SAFETY: a zeroed shmid_ds for the kernel to fill.
            let mut ds: libc::shmid_ds = unsafe { std::mem::zeroed() };
            // SAFETY: a valid segment id and struct.
            if unsafe { libc::shmctl(id, libc::IPC_STAT, &mut ds) } < 0 {
                return Err(std::io::Error::last_os_error()).with_context(|| format!("{shown}: shmctl IPC_STAT"));
            }
            ds.shm_segsz as u64
        }
    };
    check_aligned(len, d.offset, page, opt)?;
    // SAFETY: attach at an address the kernel picks, read-write.
    let p = unsafe { libc::shmat(id, std::ptr::null(), 0) };
    if p as isize == -1 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("{shown}: shmat"));
    }
    let n = usize::try_from(len).context("--length larger than the address space")?;
    let off = usize::try_from(d.offset).context("--offset larger than the address space")?;
    // numactl's region starts --offset into the attachment.
    let base = (p as *mut u8).wrapping_add(off);
    Ok(Region { base, len: n, offset: d.offset, page, detach: Detach::Shmdt(p) })
}

/// A key file `attach_sysv` created, removed when dropped: on a refusal before its segment exists.
struct KeyFileMade(Option<PathBuf>);

impl KeyFileMade {
    /// Its segment exists: the key file names it and stays.
    fn keep(&mut self) {
        self.0 = None;
    }
}

impl Drop for KeyFileMade {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The name `--dump` gives a mode (numactl's `policy_name`), `[N]` for one it does not know.
fn mode_name(raw: i32) -> String {
    Mode::from_raw(raw).map_or_else(|| format!("[{raw}]"), |m| m.name().to_string())
}

/// numactl's `printmask("", mask)`: `: ` then each node and a blank.
fn mask_text(nodes: &NodeSet) -> String {
    let mut s = String::from(": ");
    for n in nodes.iter() {
        s.push_str(&format!("{n} "));
    }
    s
}

fn dump(r: &Region, out: &mut String) -> anyhow::Result<()> {
    let mut runs: Vec<(usize, usize, CurrentPolicy)> = Vec::new();
    for off in r.pages() {
        let pol = numapilot_actuate::get_mempolicy_at(r.at(off)).context("get_mempolicy on the segment")?;
        match runs.last_mut() {
            Some((_, end, p)) if p.raw_mode == pol.raw_mode && p.nodes == pol.nodes => *end = off + r.page,
            _ => runs.push((off, off + r.page, pol)),
        }
    }
    for (start, end, p) in runs {
        if p.raw_mode == 0 {
            continue;
        }
        out.push_str(&format!(
            "{:016x}-{:016x}: {} {}\n",
            r.offset + start as u64,
            r.offset + end.min(r.len) as u64,
            mode_name(p.raw_mode),
            mask_text(&p.nodes)
        ));
    }
    Ok(())
}

fn dump_nodes(r: &Region, out: &mut String) -> anyhow::Result<()> {
    let mut runs: Vec<(usize, usize, u32)> = Vec::new();
    for off in r.pages() {
        let node = numapilot_actuate::node_of_address(r.at(off)).context("get_mempolicy on the segment")?;
        match runs.last_mut() {
            Some((_, end, n)) if *n == node => *end = off + r.page,
            _ => runs.push((off, off + r.page, node)),
        }
    }
    for (start, end, node) in runs {
        out.push_str(&format!("{:016x}-{:016x}: {node}\n", r.offset + start as u64, r.offset + end.min(r.len) as u64));
    }
    Ok(())
}

/// `--verify`: every page under `want`, on a node it allows (interleaved pages in turn over its
/// nodes). Mismatches are printed to stdout as numactl does, `Ok(false)`.
fn verify(r: &Region, want: &MemPolicy, prefix: &str, out: &mut String) -> anyhow::Result<bool> {
    let nodes = want.nodes();
    let mut ok = true;
    let line = |out: &mut String, off: usize, text: &str| {
        out.push_str(&format!("{prefix} verify {:x}({off:x}): {text}\n", r.at(off) as usize));
    };
    let mut next = None;
    for off in r.pages() {
        let got = numapilot_actuate::get_mempolicy_at(r.at(off)).context("get_mempolicy")?;
        if got.mode != Some(want.mode()) {
            line(out, off, &format!("wrong policy {}, expected {}", mode_name(got.raw_mode), want.mode().name()));
            return Ok(false);
        }
        if got.nodes != nodes {
            line(out, off, "mismatched node mask");
            out.push_str(&format!("expected{}\nreal{}\n", mask_text(&nodes), mask_text(&got.nodes)));
            ok = false;
        }
        let node = numapilot_actuate::node_of_address(r.at(off)).context("get_mempolicy")?;
        match want {
            MemPolicy::Interleave(set) | MemPolicy::WeightedInterleave(set) => {
                if !set.contains(node) {
                    line(out, off, &format!("interleave node out of range {node}"));
                    ok = false;
                }
                let expect = *next.get_or_insert(node);
                if node != expect {
                    line(out, off, &format!("expected interleave node {expect}, got {node}"));
                    return Ok(false);
                }
                // The next node of the set after this one, round.
                next = set.iter().find(|&n| n > node).or_else(|| set.iter().next());
            }
            MemPolicy::Bind(set) | MemPolicy::PreferredMany(set) if !set.contains(node) => {
                line(out, off, &format!("unexpected node {node}"));
                ok = false;
            }
            _ => {}
        }
    }
    Ok(ok)
}

/// Runs the steps. `policy_of` turns a policy option into the policy (its node list checked
/// against the machine); every one is resolved before anything is created or changed.
pub fn execute(
    steps: &[Step],
    policy_of: impl Fn(&PolicyOpt) -> anyhow::Result<MemPolicy>,
    prefix: &str,
) -> anyhow::Result<ExitCode> {
    let mut resolved = Vec::new();
    for s in steps {
        if let Step::Policy(p) | Step::Verify(p) = s {
            resolved.push(policy_of(p)?);
        }
    }
    let mut resolved = resolved.into_iter();
    let mut region: Option<Region> = None;
    let mut strict = false;
    let mut out = String::new();
    let mut code = ExitCode::SUCCESS;
    let flush = |out: &mut String| -> anyhow::Result<()> {
        let r = super::print_out(out);
        out.clear();
        r.map(|_| ())
    };
    for s in steps {
        match s {
            Step::Attach(kind, path, d, opt) => {
                // The segment before goes first (numactl attaches anew, the old mapping left).
                drop(region.take());
                region = Some(match kind {
                    Kind::File => attach_file(path, d, opt)?,
                    Kind::SysV => attach_sysv(path, d, opt, prefix)?,
                });
            }
            Step::Strict => strict = true,
            Step::Policy(p) => {
                let r = region.as_ref().context("no segment")?;
                let policy = resolved.next().context("policy")?;
                numapilot_actuate::mbind(
                    r.base as *const libc::c_void,
                    r.len,
                    &policy,
                    ModeFlags::NONE,
                    MbindFlags { strict, ..MbindFlags::default() },
                )
                .with_context(|| {
                    format!(
                        "{}: setting the policy of the segment",
                        p.spec.as_ref().map_or("--localalloc".into(), |s| s.label())
                    )
                })?;
            }
            Step::Touch(opt) => {
                let r = region.as_ref().context("no segment")?;
                if r.offset >= r.len as u64 {
                    bail!("region offset {:#x} beyond its length {:#x} at {opt}", r.offset, r.len);
                }
                r.touch();
            }
            Step::Dump => dump(region.as_ref().context("no segment")?, &mut out)?,
            Step::DumpNodes => dump_nodes(region.as_ref().context("no segment")?, &mut out)?,
            Step::Verify(_) => {
                let r = region.as_ref().context("no segment")?;
                let want = resolved.next().context("policy")?;
                if r.offset >= r.len as u64 {
                    bail!("region offset {:#x} beyond its length {:#x} at --verify", r.offset, r.len);
                }
                r.touch();
                if !verify(r, &want, prefix, &mut out)? {
                    code = ExitCode::from(1);
                }
            }
        }
        flush(&mut out)?;
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_as_numactl_reads_them_whole() {
        assert_eq!(size("4096"), Ok(4096));
        assert_eq!(size("1k"), Ok(1024));
        assert_eq!(size("1m"), Ok(1 << 20));
        assert_eq!(size("2G"), Ok(2 << 30));
        assert_eq!(size("0x1000"), Ok(4096));
        assert_eq!(size("010"), Ok(8));
        assert_eq!(size(" 1"), Ok(1), "leading blanks are strtoull's to skip");
        for bad in ["", "k", "1x", "1kb", "-1", "1 ", "08"] {
            assert!(size(bad).is_err(), "{bad:?}");
        }
        assert!(size("99999999999g").is_err());
        assert_eq!(mode("0644"), Ok(0o644));
        assert!(mode("9").is_err() && mode("").is_err());
        assert_eq!(shm_id("0x10"), Ok(16));
        assert!(shm_id("x").is_err());
    }

    #[test]
    fn dump_lines_as_numactl_prints_them() {
        let nodes: NodeSet = [0u32, 2].into_iter().collect();
        assert_eq!(mask_text(&nodes), ": 0 2 ");
        assert_eq!(mask_text(&NodeSet::new()), ": ");
        assert_eq!(mode_name(2), "bind");
        assert_eq!(mode_name(99), "[99]");
    }
}
