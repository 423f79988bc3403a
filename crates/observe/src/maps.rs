//! Shared memory between processes, from `/proc/PID/maps`.
//!
//! # Problem
//!
//! Two processes that map the same memory object (a file with `MAP_SHARED`, a SysV shm segment, a
//! memfd, or an anonymous `MAP_SHARED` region inherited across `fork`) touch the same physical pages:
//! like threads of one process they run best on the node that holds those pages. numa_maps shows
//! where each process's pages are, not that two processes share them; maps names the object.
//!
//! # Approach
//!
//! ```text
//!   /proc/P1/maps   7f..000-7f..000 rw-s 00000000 00:01 2051   /memfd:ring (deleted)
//!   /proc/P2/maps   7e..000-7e..000 rw-s 00000000 00:01 2051   /memfd:ring (deleted)
//!                                    │ shared       └─dev─┘ └inode┘
//!        keep lines with the `s` flag and inode != 0
//!        group by (dev, inode, IPC namespace of a SysV segment) over processes
//!            ──► SharedMemory { dev, inode, ipc_ns, path, users: [(P1, bytes), (P2, bytes)], ranges }
//!        keep objects with >= 2 processes
//! ```
//!
//! An object is its (dev, inode), never its path: every memfd is `/memfd:NAME (deleted)` whatever
//! memfd of that name it is, every anonymous shared region `/dev/zero (deleted)`, and each is an
//! inode of its own on the kernel's shmem mount (numbered by `shmem_reserve_inode`, 64-bit, never
//! reused while it lives). A SysV segment is the exception: `ipc/shm.c` (`newseg`) sets its inode
//! number to its shmid, which counts in its IPC namespace from 0 (ids cycle from 0 in each
//! namespace, `ipc/util.c`, `ipc_idr_alloc`), on the same mount as the memfds. So a segment's
//! inode may equal a memfd's, and two containers' first segments are both `00:01 0
//! /SYSV00000000 (deleted)`; a segment is told apart by the IPC namespace of the process that maps
//! it as well (`MapEntry::ipc_ns`, the inode of /proc/PID/ns/ipc, which the [`crate::Reader`]
//! reads for a process that maps a segment). Each user's address ranges of the object are kept
//! (`SharedMemory::ranges`): numa_maps names a VMA's file by path only, and its start address is
//! what tells which object a VMA of `/memfd:ring (deleted)` maps.
//!
//! Format (`fs/proc/task_mmu.c`, `show_vma_header_prefix`, unchanged from 2.6 to 6.18): `start-end`
//! (hex), four permission characters of which the fourth is `s` (VM_MAYSHARE) or `p`, the page offset
//! (hex), `MAJOR:MINOR` of the device (hex, at least two digits each), the inode (decimal), padding,
//! then the path (may hold spaces; a removed file ends in ` (deleted)`; SysV segments show as
//! `/SYSV<key in hex> (deleted)`, memfds as `/memfd:<name> (deleted)`, anonymous shared memory as
//! `/dev/zero (deleted)`, all on the kernel's internal shmem mount).
//!
//! # Units
//!
//! Addresses and sizes in bytes; `dev` as [`crate::SharedMemory::dev`] documents (`major << 32 | minor`).
//!
//! # Limits
//!
//! - A private (`p`) file mapping is not sharing even when two processes map the same library: those
//!   pages are shared read-only page cache, which the kernel replicates nowhere and we cannot move per
//!   process anyway; only `s` mappings count.
//! - The bytes are the mapped length, not the resident pages (numa_maps has those).
//! - maps of every process costs a file read per process (the kernel formats one line per VMA), so the
//!   daemon reads it on a slower cadence (see the daemon's `signals` module).
//! - A SysV segment whose mapper's IPC namespace could not be read (a fixture root, a process that
//!   exited between the two reads) is left out by the reader: its identity is unknown, so it ties
//!   its process to nobody (in one "namespace 0" such segments of one shmid were one object).
//!   A segment is taken to be in its mapper's namespace as it is now: one attached before its
//!   process moved to another (`unshare(CLONE_NEWIPC)`) is not tied to its old namespace's users.

use std::collections::BTreeMap;

use crate::sample::{ObjectId, SharedMemory};
use crate::signal_error::{dec, hex, LineError, SignalFile};

/// One line of `/proc/PID/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapEntry {
    /// First address, bytes.
    pub start: u64,
    /// One past the last address, bytes.
    pub end: u64,
    /// `r` flag.
    pub read: bool,
    /// `w` flag.
    pub write: bool,
    /// `x` flag.
    pub exec: bool,
    /// `s` flag (shared mapping, VM_MAYSHARE); `p` otherwise.
    pub shared: bool,
    /// Offset into the object, bytes (page offset times page size, as the kernel prints it).
    pub offset: u64,
    /// Device, `major << 32 | minor`.
    pub dev: u64,
    /// Inode (0 for anonymous memory, stack, heap, vdso).
    pub inode: u64,
    /// Path or pseudo-name (`[heap]`, `/memfd:x (deleted)`); empty for anonymous memory.
    pub path: String,
    /// For a SysV shm segment (its inode is its shmid, unique only in its IPC namespace), the IPC
    /// namespace of the process that maps it (the inode of /proc/PID/ns/ipc, which
    /// [`crate::Reader::read_maps`] fills in, leaving out the segment when it cannot; 0 as the
    /// parser leaves it);
    /// `None` for every other line.
    pub ipc_ns: Option<u64>,
}

impl MapEntry {
    /// Length, bytes.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Whether the mapping is empty (never, for a kernel line).
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }

    /// Whether the path ends in ` (deleted)` (a removed file, or every shmem-backed object).
    pub fn deleted(&self) -> bool {
        self.path.ends_with(" (deleted)")
    }
}

/// Which lines [`parse_maps_filtered`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapsFilter {
    /// Every line.
    All,
    /// Shared mappings of an object (`s` flag, inode != 0 or a SysV shm segment): the only lines the sharing signal needs;
    /// others are checked for shape but not allocated.
    SharedObjects,
}

/// Parses a whole `/proc/PID/maps`.
pub fn parse_maps(input: &str) -> Result<Vec<MapEntry>, LineError> {
    parse_maps_filtered(input, MapsFilter::All)
}

/// Parses `/proc/PID/maps`, keeping the lines `filter` asks for. Every line is checked.
pub fn parse_maps_filtered(input: &str, filter: MapsFilter) -> Result<Vec<MapEntry>, LineError> {
    if !input.is_empty() && !input.ends_with('\n') {
        let last = input.rsplit('\n').next().unwrap_or(input);
        return Err(LineError::new(
            SignalFile::Maps,
            input.lines().count(),
            None,
            last,
            "no final newline (truncated?)",
        ));
    }
    let mut out = Vec::new();
    for (i, line) in input.lines().enumerate() {
        let n = i + 1;
        let err = |field: &'static str, why: &str| LineError::new(SignalFile::Maps, n, Some(field), line, why);
        let mut rest = line;
        let mut next = |field: &'static str| -> Result<&str, LineError> {
            let t = rest.trim_start_matches(' ');
            let end = t.find(' ').unwrap_or(t.len());
            if end == 0 {
                return Err(LineError::new(SignalFile::Maps, n, Some(field), line, "missing"));
            }
            rest = &t[end..];
            Ok(&t[..end])
        };
        let range = next("range")?;
        let perms = next("perms")?;
        let offset = next("offset")?;
        let dev = next("dev")?;
        let inode = next("inode")?;
        let path = rest.trim_start_matches(' ');
        let (s, e) = range.split_once('-').ok_or_else(|| err("range", "no '-'"))?;
        let start = hex(s).ok_or_else(|| err("range", "bad start address"))?;
        let end = hex(e).ok_or_else(|| err("range", "bad end address"))?;
        if end < start {
            return Err(err("range", "end before start"));
        }
        let p = perms.as_bytes();
        let flag = |i: usize, yes: u8| -> Result<bool, LineError> {
            match p[i] {
                b'-' => Ok(false),
                c if c == yes => Ok(true),
                _ => Err(err("perms", "bad permission character")),
            }
        };
        if p.len() != 4 {
            return Err(err("perms", "not four characters"));
        }
        let (read, write, exec) = (flag(0, b'r')?, flag(1, b'w')?, flag(2, b'x')?);
        let shared = match p[3] {
            b's' => true,
            b'p' => false,
            _ => return Err(err("perms", "fourth character is neither 's' nor 'p'")),
        };
        let offset = hex(offset).ok_or_else(|| err("offset", "bad hex number"))?;
        let (maj, min) = dev.split_once(':').ok_or_else(|| err("dev", "no ':'"))?;
        let maj = hex(maj).filter(|&v| v <= u64::from(u32::MAX)).ok_or_else(|| err("dev", "bad major"))?;
        let min = hex(min).filter(|&v| v <= u64::from(u32::MAX)).ok_or_else(|| err("dev", "bad minor"))?;
        let inode = dec(inode).ok_or_else(|| err("inode", "bad decimal number"))?;
        let keep = match filter {
            MapsFilter::All => true,
            MapsFilter::SharedObjects => shared_object(shared, inode, path),
        };
        if keep {
            out.push(MapEntry {
                start,
                end,
                read,
                write,
                exec,
                shared,
                offset,
                dev: maj << 32 | min,
                inode,
                path: path.to_string(),
                ipc_ns: sysv_segment(path).then_some(0),
            });
        }
    }
    Ok(out)
}

/// Whether a mapping is a shared mapping of an object several processes can map: `s` and an inode, or a SysV
/// shm segment, whose inode is its shmid, so 0 for the first segment a fresh kernel hands out
/// (`/SYSV00000000 (deleted)` with inode 0; ipc/shm.c sets the inode number to the id).
fn shared_object(shared: bool, inode: u64, path: &str) -> bool {
    shared && (inode != 0 || sysv_segment(path))
}

/// Whether `path` is a SysV shm segment's name as maps prints it: `/SYSV`, the key as eight hex
/// digits, ` (deleted)` (`ipc/shm.c`, `newseg`: `sprintf(name, "SYSV%08x", key)`, a file of the
/// kernel's internal mount, hence removed).
pub fn sysv_segment(path: &str) -> bool {
    path.strip_prefix("/SYSV")
        .and_then(|p| p.strip_suffix(" (deleted)"))
        .is_some_and(|key| key.len() == 8 && key.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Groups the shared object mappings of several processes by object ([`crate::ObjectId`]: dev,
/// inode, and for a SysV segment its mapper's IPC namespace): every object mapped shared (`s`,
/// inode != 0, or a SysV segment) by at least two of them, with each process's mapped bytes and
/// address ranges. `maps` yields (pid, that process's entries); entries that are not shared object
/// mappings are ignored. Sorted by object; users and ranges sorted by pid (ranges then by
/// address). The path is the first seen (all processes see the same name). Two objects of one path
/// (two memfds of one name, two anonymous shared regions) stay two.
pub fn group_shared<'a>(maps: impl IntoIterator<Item = (u32, &'a [MapEntry])>) -> Vec<SharedMemory> {
    type Users = (String, BTreeMap<u32, u64>, Vec<(u32, u64, u64)>);
    let mut objects: BTreeMap<ObjectId, Users> = BTreeMap::new();
    for (pid, entries) in maps {
        for e in entries.iter().filter(|e| shared_object(e.shared, e.inode, &e.path)) {
            let id = ObjectId { dev: e.dev, inode: e.inode, ipc_ns: e.ipc_ns };
            let (_, users, ranges) = objects.entry(id).or_insert_with(|| (e.path.clone(), BTreeMap::new(), Vec::new()));
            *users.entry(pid).or_insert(0) += e.len();
            ranges.push((pid, e.start, e.end));
        }
    }
    objects
        .into_iter()
        .filter(|(_, (_, users, _))| users.len() >= 2)
        .map(|(id, (path, users, mut ranges))| {
            ranges.sort_unstable();
            SharedMemory {
                dev: id.dev,
                inode: id.inode,
                ipc_ns: id.ipc_ns,
                path,
                users: users.into_iter().collect(),
                ranges,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Lines as a 6.18 kernel printed them (captured on the development host, addresses shortened).
    const SAMPLE: &str = "\
55d0c0a00000-55d0c0a02000 r--p 00000000 fe:01 1048601                    /usr/bin/cat
7f6e1c000000-7f6e1c021000 rw-p 00000000 00:00 0 \n\
7f6e20000000-7f6e20100000 rw-s 00000000 00:01 2051                       /memfd:ring (deleted)
7f6e30000000-7f6e30010000 rw-s 00000000 00:01 32789                      /SYSV0000abcd (deleted)
7f6e40000000-7f6e40001000 rw-s 00000000 00:01 4096                       /dev/zero (deleted)
7f6e50000000-7f6e50001000 r--s 00002000 103:02 77                        /var/lib/a file with spaces
7ffd5a1f0000-7ffd5a211000 rw-p 00000000 00:00 0                          [stack]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
";

    #[test]
    fn parses_every_kind_of_line() {
        let m = parse_maps(SAMPLE).unwrap();
        assert_eq!(m.len(), 8);
        assert_eq!(m[0].path, "/usr/bin/cat");
        assert_eq!(m[0].dev, 0xfe << 32 | 1);
        assert!(!m[0].shared && m[0].read && !m[0].write);
        assert_eq!(m[1].path, "");
        assert_eq!(m[1].inode, 0);
        assert_eq!(m[2].len(), 0x100000);
        assert!(m[2].shared && m[2].deleted());
        assert_eq!(m[3].path, "/SYSV0000abcd (deleted)");
        assert_eq!(m[5].dev, 0x103 << 32 | 2);
        assert_eq!(m[5].offset, 0x2000);
        assert_eq!(m[5].path, "/var/lib/a file with spaces");
        assert!(m[7].exec && !m[7].read);
        let shared = parse_maps_filtered(SAMPLE, MapsFilter::SharedObjects).unwrap();
        assert_eq!(shared.iter().map(|e| e.inode).collect::<Vec<_>>(), vec![2051, 32789, 4096, 77]);
    }

    #[test]
    fn the_first_sysv_segment_has_inode_0_and_is_still_shared() {
        // A fresh kernel's first IPC_PRIVATE segment is shmid 0, printed as inode 0 (seen on a freshly booted
        // CI machine: the live signals test found no SysV mapping); a private or an inode-less shared line is not.
        let lines = "7f0000000000-7f0000002000 rw-s 00000000 00:01 0   /SYSV00000000 (deleted)\n\
                     7f0000100000-7f0000101000 rw-s 00000000 00:00 0 \n\
                     7f0000200000-7f0000201000 rw-p 00000000 00:01 0   /SYSV00000000 (deleted)\n";
        let kept = parse_maps_filtered(lines, MapsFilter::SharedObjects).unwrap();
        assert_eq!(kept.iter().map(|e| e.start).collect::<Vec<_>>(), vec![0x7f0000000000]);
        let all = parse_maps(lines).unwrap();
        let grouped = group_shared([(1, &all[..]), (2, &all[..1])]);
        assert_eq!(grouped.len(), 1);
        assert_eq!((grouped[0].inode, grouped[0].users.clone()), (0, vec![(1, 0x2000), (2, 0x2000)]));
    }

    #[test]
    fn bad_lines_name_line_and_field() {
        let e = parse_maps("00-10 rw-p 0 00:00 0\n00-10 rw-q 0 00:00 0\n").unwrap_err();
        assert_eq!((e.line, e.field), (2, Some("perms")));
        let e = parse_maps("00-10 rw-p 0 00:00 x\n").unwrap_err();
        assert_eq!(e.field, Some("inode"));
        let e = parse_maps("20-10 rw-p 0 00:00 0\n").unwrap_err();
        assert_eq!(e.field, Some("range"));
        let e = parse_maps("00-10 rw-p 0 0000 0\n").unwrap_err();
        assert_eq!(e.field, Some("dev"));
        let e = parse_maps("00-10 rw-p 0 00:00\n").unwrap_err();
        assert_eq!(e.field, Some("inode"));
        assert!(parse_maps("00-10 rw-p 0 00:00 0").is_err(), "no final newline");
        assert!(parse_maps("").unwrap().is_empty());
    }

    #[test]
    fn groups_objects_of_two_or_more_processes() {
        let a = parse_maps(SAMPLE).unwrap();
        let b = parse_maps(
            "7e0000000000-7e0000200000 rw-s 00000000 00:01 2051   /memfd:ring (deleted)\n\
             7e0000400000-7e0000500000 r--s 00100000 00:01 2051   /memfd:ring (deleted)\n\
             7e0000600000-7e0000601000 rw-p 00000000 00:01 32789  /SYSV0000abcd (deleted)\n",
        )
        .unwrap();
        let c = parse_maps("7e0000000000-7e0000001000 rw-s 00000000 00:01 4097 /dev/zero (deleted)\n").unwrap();
        let g = group_shared([(20, b.as_slice()), (10, a.as_slice()), (30, c.as_slice())]);
        // Only the memfd is mapped shared by two processes (the SysV segment is private in 20, and
        // /dev/zero objects are distinct inodes).
        assert_eq!(g.len(), 1);
        assert_eq!((g[0].dev, g[0].inode), (1, 2051));
        assert_eq!(g[0].path, "/memfd:ring (deleted)");
        assert_eq!(g[0].users, vec![(10, 0x100000), (20, 0x300000)]);
    }

    #[test]
    fn a_sysv_segment_is_not_the_memfd_of_its_inode_number() {
        // A segment's inode is its shmid (ipc/shm.c), on the same mount as memfds, whose inodes are
        // numbered apart (mm/shmem.c): shmid 20 and the memfd of inode 20 are two objects. Each
        // parsed SysV line carries namespace 0 until the reader names it.
        let memfd = parse_maps("7e0000000000-7e0000002000 rw-s 00000000 00:01 20   /memfd:ring (deleted)\n").unwrap();
        let sysv = parse_maps("7e0000000000-7e0000002000 rw-s 00000000 00:01 20   /SYSV0000abcd (deleted)\n").unwrap();
        assert_eq!((memfd[0].ipc_ns, sysv[0].ipc_ns), (None, Some(0)));
        assert!(group_shared([(1, memfd.as_slice()), (2, sysv.as_slice())]).is_empty());
        // The same segment in two processes of one namespace is one object; of two, two.
        let ns = |n: u64| {
            let mut m = sysv.clone();
            m[0].ipc_ns = Some(n);
            m
        };
        let (a, b, c) = (ns(7), ns(7), ns(8));
        let g = group_shared([(1, a.as_slice()), (2, b.as_slice()), (3, c.as_slice())]);
        assert_eq!(g.len(), 1);
        assert_eq!((g[0].ipc_ns, g[0].users.clone()), (Some(7), vec![(1, 0x2000), (2, 0x2000)]));
    }

    #[test]
    fn sysv_names_are_the_kernels_format() {
        assert!(sysv_segment("/SYSV0000abcd (deleted)"));
        assert!(sysv_segment("/SYSVffffffff (deleted)"));
        assert!(!sysv_segment("/SYSV0000abcd"), "a file of that name, not removed");
        assert!(!sysv_segment("/SYSV0000abc (deleted)"), "seven digits");
        assert!(!sysv_segment("/SYSVnotahex0 (deleted)"));
        assert!(!sysv_segment("/memfd:SYSV00000000 (deleted)"));
    }

    #[test]
    fn two_memfds_of_one_name_are_two_objects_each_with_its_ranges() {
        // Process 1 maps two memfds named `ring` (inodes 30 and 31), the first twice; 2 maps the
        // first, 3 the second.
        let p1 = parse_maps(
            "7e0000000000-7e0000002000 rw-s 00000000 00:01 30   /memfd:ring (deleted)\n\
             7e0000004000-7e0000005000 r--s 00002000 00:01 30   /memfd:ring (deleted)\n\
             7e0000008000-7e0000010000 rw-s 00000000 00:01 31   /memfd:ring (deleted)\n",
        )
        .unwrap();
        let p2 = parse_maps("7f0000000000-7f0000002000 rw-s 00000000 00:01 30   /memfd:ring (deleted)\n").unwrap();
        let p3 = parse_maps("7f0000000000-7f0000008000 rw-s 00000000 00:01 31   /memfd:ring (deleted)\n").unwrap();
        let g = group_shared([(1, p1.as_slice()), (2, p2.as_slice()), (3, p3.as_slice())]);
        assert_eq!(
            g.iter().map(|o| (o.inode, o.users.clone())).collect::<Vec<_>>(),
            vec![(30, vec![(1, 0x3000), (2, 0x2000)]), (31, vec![(1, 0x8000), (3, 0x8000)])]
        );
        assert_eq!(
            g[0].ranges_of(1).collect::<Vec<_>>(),
            vec![(0x7e0000000000, 0x7e0000002000), (0x7e0000004000, 0x7e0000005000)]
        );
        assert_eq!(g[0].ranges_of(2).collect::<Vec<_>>(), vec![(0x7f0000000000, 0x7f0000002000)]);
        assert_eq!(g[0].ranges_of(3).count(), 0);
        assert_eq!(g[1].ranges_of(1).collect::<Vec<_>>(), vec![(0x7e0000008000, 0x7e0000010000)]);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse_maps(&s);
        }
    }
}
