//! Page migration: `migrate_pages` (a whole process, node set to node set) and `move_pages`
//! (chosen pages to chosen nodes, or just where they are).
//!
//! These are for the daemon: moving a running process's memory after it has been placed. They
//! live here because this crate is the only one allowed to change the system.
//!
//! # migrate_pages(pid, from, to)
//!
//! ```text
//!   from = {0,1}  to = {2,3}      node 0 -> 2, node 1 -> 3 (the kernel keeps relative positions:
//!                                 do_migrate_pages() remaps the n-th source to the n-th target)
//!   from = {0-7}  to = {3,4,5}    sizes differ: nodes already in `to` are skipped, the rest remap
//! ```
//!
//! Moves every page of process `pid` that sits on a `from` node. Returns the number of pages that
//! could not be moved (not an error: pages come and go, some are pinned). Needs the ptrace-read
//! right over the target; targets outside the process's cpuset need CAP_SYS_NICE (EPERM); the
//! target nodes are intersected with *our* cpuset. Pages shared with other processes move only
//! with CAP_SYS_NICE (the kernel then uses MPOL_MF_MOVE_ALL).
//!
//! # migrate_pages_flags(pid, from, to, MoveFlags::Own)
//!
//! The kernel gives migrate_pages no flags argument: `kernel_migrate_pages()` (mm/mempolicy.c)
//! passes `capable(CAP_SYS_NICE) ? MPOL_MF_MOVE_ALL : MPOL_MF_MOVE` to `do_migrate_pages()`, so a
//! daemon running as root moves every shared page the target maps: the C library's and the
//! executable's page cache, a segment several processes share. In the rig's race (2-node guest,
//! numa01, 32 MiB buffer) one migrate_pages as root moved 9,428 pages, 1,236 of them file pages
//! mapped by four processes, towards one of them. `Own` makes the call from a short-lived thread
//! that first clears CAP_SYS_NICE from its own effective set (capabilities are per thread:
//! capset(2) changes only the caller's), so the kernel takes MPOL_MF_MOVE and skips every folio
//! it sees as mapped more than once (`migrate_folio_add()`, not counted as a failure); the
//! permission to act on the target (ptrace-read: CAP_SYS_PTRACE or the same uid) is unchanged.
//! The LTP test migrate_pages02 checks the same rule from the other side (shared memory moves
//! only with CAP_SYS_NICE).
//!
//! # move_pages(pid, pages, nodes, flags)
//!
//! ```text
//!   pages  [a0, a1, a2]           addresses in process `pid` (any address within the page)
//!   nodes  [ 1,  1,  2] or None   None: only report where each page is
//!   status [ 1, -14, 2]           per page: the node it is on now, or -errno
//! ```
//!
//! Per-page errors are not failures of the call; they are counted by errno in
//! [`MovePagesOutcome::failures_by_errno`]. Their meanings (move_pages(2), mm/migrate.c):
//! EACCES shared page (needs [`MoveFlags::All`]), EBUSY page busy (retry later), EFAULT zero page or
//! unmapped address, EIO page cannot be written back, EINVAL dirty page the filesystem cannot
//! migrate, ENOENT page not present (never touched), ENOMEM no memory on the target node. The call
//! itself fails for ESRCH (no such process), EPERM, EINVAL (bad flags or node), E2BIG; a move that
//! meets a target node without memory (ENODEV), outside the process's cpuset (EACCES) or out of
//! memory (ENOMEM) has moved and reported the batches before it, so it returns its statuses with
//! the errno ([`MovePagesOutcome::error`]).
//!
//! Both calls take node masks with the `maxnode` convention of [`crate::bitmap`].

use std::collections::BTreeMap;
use std::os::raw::{c_int, c_long, c_ulong, c_void};

use numapilot_topology::NodeSet;

use crate::affinity::Pid;
use crate::bitmap::{KernelBitmap, MAX_MASK_BITS};
use crate::error::{errno_name, Error, Result};

/// Moves all pages of process `pid` (0 = this process) from the nodes in `from` to the nodes in
/// `to`, keeping their relative positions (`migrate_pages(2)`). `pid` may be any thread's id, as
/// for [`move_pages`].
///
/// Returns the kernel's count of what could not be moved: folios, not base pages (mm/migrate.c,
/// `migrate_pages()`: "the number of {normal folio, large folio, hugetlb} that were not
/// migrated"), so a failed 2 MiB THP counts 1: a lower bound of the base pages left behind.
pub fn migrate_pages(pid: Pid, from: &NodeSet, to: &NodeSet) -> Result<u64> {
    for (arg, set) in [("old_nodes", from), ("new_nodes", to)] {
        if set.is_empty() {
            return Err(Error::InvalidArgument {
                syscall: "migrate_pages",
                arg,
                reason: "the node set is empty".into(),
            });
        }
        if set.last().is_some_and(|m| m >= MAX_MASK_BITS) {
            return Err(Error::InvalidArgument {
                syscall: "migrate_pages",
                arg,
                reason: format!("node {} is beyond the largest node mask the kernel accepts", set.last().unwrap_or(0)),
            });
        }
    }
    // Both masks must be read with the same maxnode: size them alike.
    let width = from.last().max(to.last()).map_or(0, |m| m + 1);
    let old = KernelBitmap::from_set(from, width);
    let new = KernelBitmap::from_set(to, width);
    debug_assert_eq!(old.maxnode(), new.maxnode());
    // SAFETY: both masks hold `maxnode - 1` bits and outlive the call; the kernel only reads them.
    let rc =
        unsafe { libc::syscall(libc::SYS_migrate_pages, pid as c_long, old.maxnode(), old.as_ptr(), new.as_ptr()) };
    if rc < 0 {
        return Err(Error::last_os(
            "migrate_pages",
            format!("pid={pid}, maxnode={}, old_nodes={from}, new_nodes={to}", old.maxnode()),
        ));
    }
    Ok(rc as u64)
}

/// As [`migrate_pages`], saying which pages may move: [`MoveFlags::Own`], only pages this process
/// alone maps, whatever our capabilities (see the module essay); [`MoveFlags::All`], shared pages
/// too, which the kernel grants only when we hold CAP_SYS_NICE (without it, `All` moves what `Own`
/// does).
pub fn migrate_pages_flags(pid: Pid, from: &NodeSet, to: &NodeSet, flags: MoveFlags) -> Result<u64> {
    match flags {
        MoveFlags::All => migrate_pages(pid, from, to),
        // `pid` 0 (this process) stays this process on the other thread: threads share the mm.
        MoveFlags::Own => without_cap_sys_nice("migrate_pages", || migrate_pages(pid, from, to)),
    }
}

/// Runs `f` on a short-lived thread of ours whose effective capability set lacks CAP_SYS_NICE
/// (the calling thread and every other keep theirs), for calls whose kernel side widens what they
/// do when the caller is `capable(CAP_SYS_NICE)`. `syscall` names the call in the error if the
/// thread panics.
pub fn without_cap_sys_nice<T: Send>(syscall: &'static str, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    std::thread::scope(|sc| {
        sc.spawn(|| {
            drop_effective_cap(CAP_SYS_NICE)?;
            f()
        })
        .join()
        .unwrap_or_else(|_| {
            Err(Error::InvalidArgument { syscall, arg: "-", reason: "the thread making the call panicked".into() })
        })
    })
}

/// `CAP_SYS_NICE` (include/uapi/linux/capability.h): bit 23.
pub const CAP_SYS_NICE: u32 = 23;

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const CAP_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

fn capget_self() -> Result<[CapData; 2]> {
    let mut h = CapHeader { version: CAP_VERSION_3, pid: 0 };
    let mut d = [CapData::default(); 2];
    // SAFETY: the header and two data words are ours and sized for version 3.
    let rc = unsafe { libc::syscall(libc::SYS_capget, &mut h as *mut CapHeader, d.as_mut_ptr()) };
    if rc < 0 {
        return Err(Error::last_os("capget", "pid=0 (this thread)".to_string()));
    }
    Ok(d)
}

/// Whether capability `cap` is in the calling thread's effective set.
pub fn has_effective_cap(cap: u32) -> Result<bool> {
    let d = capget_self()?;
    Ok(d.get((cap / 32) as usize).is_some_and(|w| w.effective & (1 << (cap % 32)) != 0))
}

/// Clears capability `cap` from the calling thread's effective set (the permitted set keeps it;
/// other threads are not affected). Nothing to do when it is not there.
fn drop_effective_cap(cap: u32) -> Result<()> {
    let mut d = capget_self()?;
    let (w, bit) = ((cap / 32) as usize, 1u32 << (cap % 32));
    if d[w].effective & bit == 0 {
        return Ok(());
    }
    d[w].effective &= !bit;
    let mut h = CapHeader { version: CAP_VERSION_3, pid: 0 };
    // SAFETY: as in capget_self; the kernel only reads the data words.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &mut h as *mut CapHeader, d.as_ptr()) };
    if rc < 0 {
        return Err(Error::last_os("capset", format!("clearing capability {cap} from this thread's effective set")));
    }
    Ok(())
}

/// Which pages `move_pages` may move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MoveFlags {
    /// `MPOL_MF_MOVE`: only pages mapped by this process alone.
    #[default]
    Own,
    /// `MPOL_MF_MOVE_ALL`: shared pages too (needs CAP_SYS_NICE).
    All,
}

impl MoveFlags {
    fn bits(self) -> c_int {
        match self {
            MoveFlags::Own => 1 << 1,
            MoveFlags::All => 1 << 2,
        }
    }
}

/// Where one page is (or why it could not be moved or located).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PageStatus {
    /// The page is on this node (after the move, when a move was asked).
    Node(u32),
    /// The kernel's per-page error, as a positive errno.
    Failed(i32),
    /// No status came back for this page: the call stopped before storing it. When migrating a
    /// batch fails for some of its pages (a page busy or pinned past the kernel's retries),
    /// `do_pages_move` (mm/migrate.c) returns the number of pages not migrated or not attempted
    /// and stores no status for that batch (some of whose pages did move) nor for any page after
    /// it. Where such a page is must be asked again (a query), and it may be moved again.
    Unreported,
}

/// What `status` holds before the call: a value the kernel never writes (it writes a node id,
/// 0 or more, or a negative errno above -4096), so a page it left alone reads as
/// [`PageStatus::Unreported`], not as node 0.
const UNREPORTED: c_int = c_int::MIN;

/// The result of a `move_pages` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MovePagesOutcome {
    /// One status per requested page, in request order.
    pub status: Vec<PageStatus>,
    /// The call's return value: 0, or the number of pages that were not migrated or not attempted
    /// (kernels with "mm: move_pages: report the number of non-attempted pages"), whose status is
    /// [`PageStatus::Unreported`].
    pub not_migrated: u64,
    /// The call ended with this errno after moving and reporting what it had queued before
    /// (do_pages_move's `out_flush`): ENOMEM (a target node's memory ran out), EACCES (a target
    /// node outside the process's cpuset), ENODEV (a target node without memory). The statuses it
    /// stored stand; the other pages are [`PageStatus::Unreported`]. `None`: the call succeeded.
    pub error: Option<i32>,
}

/// The errnos after which a `move_pages` call that moves has stored the statuses of the batches
/// before the failing page (see [`MovePagesOutcome::error`]).
const PARTIAL_ERRNOS: [i32; 3] = [libc::ENOMEM, libc::EACCES, libc::ENODEV];

impl MovePagesOutcome {
    /// Per-page failures counted by errno (`EFAULT -> 3` ...).
    pub fn failures_by_errno(&self) -> BTreeMap<i32, usize> {
        let mut m = BTreeMap::new();
        for s in &self.status {
            if let PageStatus::Failed(e) = s {
                *m.entry(*e).or_insert(0) += 1;
            }
        }
        m
    }

    /// Number of pages with a per-page error.
    pub fn failed(&self) -> usize {
        self.status.iter().filter(|s| matches!(s, PageStatus::Failed(_))).count()
    }

    /// Number of pages reported on `node`.
    pub fn on_node(&self, node: u32) -> usize {
        self.status.iter().filter(|s| **s == PageStatus::Node(node)).count()
    }

    /// The failures rendered for people: `"EFAULT x3, ENOENT x1"`.
    pub fn failure_summary(&self) -> String {
        self.failures_by_errno().iter().map(|(e, n)| format!("{} x{n}", errno_name(*e))).collect::<Vec<_>>().join(", ")
    }

    /// Number of pages the kernel left without a status ([`PageStatus::Unreported`]).
    pub fn unreported(&self) -> usize {
        self.status.iter().filter(|s| matches!(s, PageStatus::Unreported)).count()
    }

    fn from_raw(raw: &[c_int], rc: c_long) -> Self {
        let status = raw
            .iter()
            .map(|&s| match s {
                UNREPORTED => PageStatus::Unreported,
                s if s >= 0 => PageStatus::Node(s as u32),
                s => PageStatus::Failed(-s),
            })
            .collect();
        MovePagesOutcome { status, not_migrated: rc.max(0) as u64, error: None }
    }
}

/// Moves the pages at `pages` (addresses in process `pid`, 0 = this process) to `nodes` (one node
/// per page), or with `nodes = None` only reports where each page is (`move_pages(2)`). `pid` may
/// be any thread's id: the kernel takes that task's memory (a leader that has exited has none: EINVAL
/// through its pid, while its other threads' ids reach the process's memory).
///
/// Addresses are plain numbers: they belong to the target process and are never dereferenced here.
pub fn move_pages(pid: Pid, pages: &[usize], nodes: Option<&[u32]>, flags: MoveFlags) -> Result<MovePagesOutcome> {
    if let Some(n) = nodes {
        if n.len() != pages.len() {
            return Err(Error::InvalidArgument {
                syscall: "move_pages",
                arg: "nodes",
                reason: format!("{} target nodes for {} pages", n.len(), pages.len()),
            });
        }
    }
    if pages.is_empty() {
        return Ok(MovePagesOutcome { status: Vec::new(), not_migrated: 0, error: None });
    }
    let addrs: Vec<*const c_void> = pages.iter().map(|&a| a as *const c_void).collect();
    let targets: Option<Vec<c_int>> = nodes.map(|n| n.iter().map(|&x| x as c_int).collect());
    let mut status: Vec<c_int> = vec![UNREPORTED; pages.len()];
    let node_ptr = targets.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
    // SAFETY: `addrs`, `targets` (when given) and `status` hold `pages.len()` elements each and
    // outlive the call; the kernel reads the first two and writes `status`. The addresses are
    // interpreted in the target process by the kernel, not dereferenced by us.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            pid as c_long,
            pages.len() as c_ulong,
            addrs.as_ptr(),
            node_ptr,
            status.as_mut_ptr(),
            flags.bits() as c_long,
        )
    };
    if rc < 0 {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        if nodes.is_some() && PARTIAL_ERRNOS.contains(&errno) {
            return Ok(MovePagesOutcome { error: Some(errno), ..MovePagesOutcome::from_raw(&status, 0) });
        }
        let what = match nodes {
            Some(_) => "nodes=[..]",
            None => "nodes=NULL (query)",
        };
        let args = format!("pid={pid}, count={}, {what}, flags={flags:?}", pages.len());
        return Err(Error::Syscall { syscall: "move_pages", args, errno });
    }
    Ok(MovePagesOutcome::from_raw(&status, rc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_counts_failures_by_errno() {
        let raw = [0, 1, -libc::EFAULT, -libc::ENOENT, -libc::EFAULT, 1];
        let o = MovePagesOutcome::from_raw(&raw, 0);
        assert_eq!(o.on_node(1), 2);
        assert_eq!(o.on_node(0), 1);
        assert_eq!(o.failed(), 3);
        let by = o.failures_by_errno();
        assert_eq!(by.get(&libc::EFAULT), Some(&2));
        assert_eq!(by.get(&libc::ENOENT), Some(&1));
        assert_eq!(o.failure_summary(), "ENOENT x1, EFAULT x2");
    }

    #[test]
    fn a_page_the_kernel_left_without_a_status_is_not_read_as_node_0() {
        // A batch that partly failed: the kernel stored statuses up to it and returned the count
        // of pages not migrated or not attempted; the rest keep what the caller wrote.
        let raw = [1, 1, UNREPORTED, UNREPORTED, UNREPORTED];
        let o = MovePagesOutcome::from_raw(&raw, 3);
        assert_eq!(o.on_node(0), 0);
        assert_eq!((o.on_node(1), o.unreported(), o.failed(), o.not_migrated), (2, 3, 0, 3));
    }

    /// A move to a node without memory (node 1 of a one-node machine, or any node this machine
    /// lacks) on the real kernel: the call's errno comes back with the statuses, not as an error
    /// that drops them; a query never reports one.
    #[test]
    fn a_move_that_meets_a_node_without_memory_keeps_its_statuses() {
        let online = std::fs::read_to_string("/sys/devices/system/node/has_memory").unwrap_or_default();
        let nodes = NodeSet::parse_list(online.trim()).unwrap_or_default();
        let Some(missing) = (0..64u32).find(|n| !nodes.contains(*n)) else { return };
        let page = vec![7u8; 4096 * 3];
        let addr = (page.as_ptr() as usize).div_ceil(4096) * 4096;
        let here = move_pages(0, &[addr], None, MoveFlags::Own).unwrap();
        let PageStatus::Node(n) = here.status[0] else { panic!("{here:?}") };
        assert_eq!(here.error, None);
        // First page to its own node (stored), second to the node without memory (ENODEV there).
        let o = move_pages(0, &[addr, addr + 4096], Some(&[n, missing]), MoveFlags::Own).unwrap();
        assert_eq!(o.error, Some(libc::ENODEV), "{o:?}");
        assert_eq!(o.status[0], PageStatus::Node(n), "{o:?}");
        assert_eq!(o.status[1], PageStatus::Unreported, "{o:?}");
        std::hint::black_box(&page);
    }

    #[test]
    fn argument_checks_before_the_call() {
        assert!(matches!(
            move_pages(0, &[0x1000], Some(&[0, 1]), MoveFlags::Own),
            Err(Error::InvalidArgument { arg: "nodes", .. })
        ));
        assert!(matches!(
            migrate_pages(0, &NodeSet::new(), &NodeSet::parse_list("0").unwrap()),
            Err(Error::InvalidArgument { .. })
        ));
        assert_eq!(move_pages(0, &[], None, MoveFlags::Own).unwrap().status, vec![]);
    }
}
