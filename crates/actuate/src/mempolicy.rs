//! NUMA memory policies: `set_mempolicy`, `get_mempolicy`, `mbind`.
//!
//! # Problem
//!
//! A memory policy tells the kernel on which nodes to allocate a thread's (or an address range's)
//! future pages. The kernel interface is three raw system calls with C bitmaps, a mode integer whose
//! top bits carry flags, and an off-by-one size argument; libc has no wrappers. This module is the
//! typed front of those calls.
//!
//! # Terms
//!
//! ```text
//!   mode                 value  kernel  nodes              allocation
//!   -------------------  -----  ------  -----------------  -----------------------------------------
//!   default              0      2.6.7   none               the thread's policy falls back to system
//!                                                          default: local node first
//!   preferred            1      2.6.7   exactly one        that node first, then fall back
//!   bind                 2      2.6.7   one or more        only these nodes (OOM rather than spill)
//!   interleave           3      2.6.7   one or more        round robin page by page
//!   local                4      3.8     none               the node of the CPU that allocates
//!   preferred-many       5      5.15    one or more        these nodes first, nearest first, then fall back
//!   weighted-interleave  6      6.9     one or more        round robin weighted by
//!                                                          /sys/kernel/mm/mempolicy/weighted_interleave
//!
//!   mode flag                   bit      meaning
//!   MPOL_F_STATIC_NODES         1 << 15  nodes are absolute; not remapped when the cpuset changes
//!   MPOL_F_RELATIVE_NODES       1 << 14  nodes are indexes into the cpuset's allowed nodes
//!   MPOL_F_NUMA_BALANCING       1 << 13  (bind, 5.12+) let NUMA balancing migrate among the bound nodes
//! ```
//!
//! A policy set with `set_mempolicy` applies to the *calling thread* only and is inherited by threads
//! and processes it creates and kept across `execve` — which is what `numactl` (and `numapilot run`)
//! rely on: set, then exec.
//!
//! # Unsupported modes
//!
//! An older kernel answers EINVAL to a mode it does not know (`mode >= MPOL_MAX` in
//! `sanitize_mpol_flags`), but EINVAL also means "no usable node in the mask". To tell the two apart
//! without changing anything we ask `mbind` about an empty range: `kernel_mbind` checks the mode and
//! flags first and `do_mbind` returns 0 for a zero-length range before looking at any node or page
//! ([`kernel_supports`]). A failed call is then reported as [`Error::Unsupported`] naming the policy.
//!
//! # Limits
//!
//! See [`crate::bitmap`] for the mask sizes and the `maxnode` quirk. Node ids must be below the
//! kernel's `MAX_NUMNODES` (EINVAL otherwise).

use std::fmt;
use std::os::raw::{c_int, c_long, c_ulong, c_void};

use numapilot_topology::{IdSet, NodeSet};

use crate::bitmap::{KernelBitmap, MAX_MASK_BITS};
use crate::error::{Error, Result};

/// A memory policy mode, with the kernel's numbering (`include/uapi/linux/mempolicy.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(i32)]
pub enum Mode {
    /// `MPOL_DEFAULT`.
    Default = 0,
    /// `MPOL_PREFERRED`.
    Preferred = 1,
    /// `MPOL_BIND`.
    Bind = 2,
    /// `MPOL_INTERLEAVE`.
    Interleave = 3,
    /// `MPOL_LOCAL`.
    Local = 4,
    /// `MPOL_PREFERRED_MANY` (Linux 5.15).
    PreferredMany = 5,
    /// `MPOL_WEIGHTED_INTERLEAVE` (Linux 6.9).
    WeightedInterleave = 6,
}

impl Mode {
    /// All modes, in kernel order.
    pub const ALL: [Mode; 7] = [
        Mode::Default,
        Mode::Preferred,
        Mode::Bind,
        Mode::Interleave,
        Mode::Local,
        Mode::PreferredMany,
        Mode::WeightedInterleave,
    ];

    /// The mode with kernel number `raw` (flags already removed).
    pub fn from_raw(raw: i32) -> Option<Mode> {
        Mode::ALL.get(usize::try_from(raw).ok()?).copied()
    }

    /// The kernel number.
    pub fn raw(self) -> i32 {
        self as i32
    }

    /// The name numactl uses (`default`, `preferred`, `bind`, `interleave`, `local`,
    /// `preferred-many`, `weighted-interleave`).
    pub fn name(self) -> &'static str {
        match self {
            Mode::Default => "default",
            Mode::Preferred => "preferred",
            Mode::Bind => "bind",
            Mode::Interleave => "interleave",
            Mode::Local => "local",
            Mode::PreferredMany => "preferred-many",
            Mode::WeightedInterleave => "weighted-interleave",
        }
    }

    /// The Linux release that introduced the mode.
    pub fn since(self) -> &'static str {
        match self {
            Mode::Default | Mode::Preferred | Mode::Bind | Mode::Interleave => "2.6.7",
            Mode::Local => "3.8",
            Mode::PreferredMany => "5.15",
            Mode::WeightedInterleave => "6.9",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Mode flags, or-ed into the mode argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ModeFlags(u32);

impl ModeFlags {
    /// No flags.
    pub const NONE: ModeFlags = ModeFlags(0);
    /// `MPOL_F_STATIC_NODES`: the node mask is absolute and is not remapped when the cpuset's
    /// allowed nodes change (2.6.26).
    pub const STATIC_NODES: ModeFlags = ModeFlags(1 << 15);
    /// `MPOL_F_RELATIVE_NODES`: node ids are positions within the cpuset's allowed nodes (2.6.26).
    pub const RELATIVE_NODES: ModeFlags = ModeFlags(1 << 14);
    /// `MPOL_F_NUMA_BALANCING`: with `bind`, let automatic NUMA balancing move pages among the bound
    /// nodes (5.12); newer kernels also accept it with `preferred-many`.
    pub const NUMA_BALANCING: ModeFlags = ModeFlags(1 << 13);
    /// All flags the kernel defines for the mode argument (`MPOL_MODE_FLAGS`).
    pub const ALL: ModeFlags = ModeFlags((1 << 15) | (1 << 14) | (1 << 13));

    /// The raw bits.
    pub fn bits(self) -> u32 {
        self.0
    }

    /// The known flags within `bits`; other bits are dropped.
    pub fn from_bits_truncate(bits: u32) -> ModeFlags {
        ModeFlags(bits & Self::ALL.0)
    }

    /// Whether every flag of `other` is set in `self`.
    pub fn contains(self, other: ModeFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether no flag is set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    fn names(self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.contains(Self::STATIC_NODES) {
            v.push("MPOL_F_STATIC_NODES");
        }
        if self.contains(Self::RELATIVE_NODES) {
            v.push("MPOL_F_RELATIVE_NODES");
        }
        if self.contains(Self::NUMA_BALANCING) {
            v.push("MPOL_F_NUMA_BALANCING");
        }
        v
    }
}

impl std::ops::BitOr for ModeFlags {
    type Output = ModeFlags;
    fn bitor(self, rhs: ModeFlags) -> ModeFlags {
        ModeFlags(self.0 | rhs.0)
    }
}

impl fmt::Display for ModeFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = self.names();
        if names.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&names.join("|"))
        }
    }
}

/// A memory policy: a mode with the nodes it needs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MemPolicy {
    /// Remove the thread's policy: the system default (allocate on the local node first).
    Default,
    /// Allocate on the node of the CPU doing the allocation.
    Local,
    /// Allocate on this node first, fall back to others.
    Preferred(u32),
    /// Allocate on these nodes first (nearest first), fall back to others (5.15).
    PreferredMany(NodeSet),
    /// Allocate only on these nodes.
    Bind(NodeSet),
    /// Spread page by page over these nodes.
    Interleave(NodeSet),
    /// Spread over these nodes weighted by the system's interleave weights (6.9).
    WeightedInterleave(NodeSet),
}

impl MemPolicy {
    /// The mode.
    pub fn mode(&self) -> Mode {
        match self {
            MemPolicy::Default => Mode::Default,
            MemPolicy::Local => Mode::Local,
            MemPolicy::Preferred(_) => Mode::Preferred,
            MemPolicy::PreferredMany(_) => Mode::PreferredMany,
            MemPolicy::Bind(_) => Mode::Bind,
            MemPolicy::Interleave(_) => Mode::Interleave,
            MemPolicy::WeightedInterleave(_) => Mode::WeightedInterleave,
        }
    }

    /// The node mask passed to the kernel (empty for `Default` and `Local`).
    pub fn nodes(&self) -> NodeSet {
        match self {
            MemPolicy::Default | MemPolicy::Local => NodeSet::new(),
            MemPolicy::Preferred(n) => std::iter::once(*n).collect(),
            MemPolicy::PreferredMany(s)
            | MemPolicy::Bind(s)
            | MemPolicy::Interleave(s)
            | MemPolicy::WeightedInterleave(s) => s.clone(),
        }
    }

    /// Builds a policy from a mode and the kernel's node mask, as `get_mempolicy` reports them.
    /// `None` when the mode needs nodes and the mask is empty, except `Preferred` with no node:
    /// before 5.14 ("mm/mempolicy: don't handle MPOL_LOCAL like a fake MPOL_PREFERRED") the kernel
    /// kept a local policy as preferred with a "local" flag and reports it that way, so it reads
    /// as `Local` (a rollback or restore of `numactl --localalloc` failed on 5.4-5.13).
    pub fn from_mode(mode: Mode, nodes: NodeSet) -> Option<MemPolicy> {
        if mode == Mode::Preferred && nodes.is_empty() {
            return Some(MemPolicy::Local);
        }
        let needs_nodes = !matches!(mode, Mode::Default | Mode::Local);
        if needs_nodes && nodes.is_empty() {
            return None;
        }
        Some(match mode {
            Mode::Default => MemPolicy::Default,
            Mode::Local => MemPolicy::Local,
            Mode::Preferred => MemPolicy::Preferred(IdSet::first(&nodes)?),
            Mode::PreferredMany => MemPolicy::PreferredMany(nodes),
            Mode::Bind => MemPolicy::Bind(nodes),
            Mode::Interleave => MemPolicy::Interleave(nodes),
            Mode::WeightedInterleave => MemPolicy::WeightedInterleave(nodes),
        })
    }

    /// Checks what we can check without the kernel: a mode that needs nodes has some, node ids fit
    /// in the largest mask the kernel accepts, the flags are compatible with each other and the mode.
    pub fn validate(&self, flags: ModeFlags, syscall: &'static str) -> Result<()> {
        let nodes = self.nodes();
        let bad = |arg: &'static str, reason: String| Err(Error::InvalidArgument { syscall, arg, reason });
        if !matches!(self, MemPolicy::Default | MemPolicy::Local) && nodes.is_empty() {
            return bad("nodes", format!("{} needs at least one node", self.mode()));
        }
        if let Some(max) = IdSet::last(&nodes) {
            if max >= MAX_MASK_BITS {
                return bad("nodes", format!("node {max} is beyond the largest node mask the kernel accepts"));
            }
        }
        if flags.contains(ModeFlags::STATIC_NODES | ModeFlags::RELATIVE_NODES) {
            return bad("mode", "MPOL_F_STATIC_NODES and MPOL_F_RELATIVE_NODES exclude each other".into());
        }
        if matches!(self, MemPolicy::Default) && !flags.is_empty() {
            return bad("mode", format!("default takes no mode flags, got {flags}"));
        }
        if matches!(self, MemPolicy::Local)
            && (flags.contains(ModeFlags::STATIC_NODES) || flags.contains(ModeFlags::RELATIVE_NODES))
        {
            return bad("mode", format!("local takes no node flags, got {flags}"));
        }
        if flags.contains(ModeFlags::NUMA_BALANCING)
            && !matches!(self, MemPolicy::Bind(_) | MemPolicy::PreferredMany(_))
        {
            return bad(
                "mode",
                format!("MPOL_F_NUMA_BALANCING applies to bind and preferred-many, not {}", self.mode()),
            );
        }
        Ok(())
    }

    fn describe(&self, flags: ModeFlags) -> String {
        let mut s = format!("mode={}", self.mode());
        if !flags.is_empty() {
            s.push_str(&format!("|{flags}"));
        }
        if !matches!(self, MemPolicy::Default | MemPolicy::Local) {
            s.push_str(&format!(", nodes={}", self.nodes()));
        }
        s
    }
}

impl fmt::Display for MemPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemPolicy::Default | MemPolicy::Local => f.write_str(self.mode().name()),
            _ => write!(f, "{}:{}", self.mode(), self.nodes()),
        }
    }
}

/// `MPOL_F_NODE` for `get_mempolicy`.
const MPOL_F_NODE: c_ulong = 1;
/// `MPOL_F_ADDR` for `get_mempolicy`.
const MPOL_F_ADDR: c_ulong = 2;
/// `MPOL_F_MEMS_ALLOWED` for `get_mempolicy`.
const MPOL_F_MEMS_ALLOWED: c_ulong = 4;

/// The first node-mask width tried by `get_mempolicy` (the kernel wants at least `nr_node_ids`
/// bits): 1024 is `MAX_NUMNODES` with x86-64's largest `CONFIG_NODES_SHIFT` (10). On EINVAL the
/// width doubles up to [`MAX_MASK_BITS`], as libnuma's `set_nodemask_size` does.
const GET_MASK_START_BITS: u32 = 1024;

/// Sets the calling thread's memory policy (`set_mempolicy(2)`).
///
/// Affects only the calling thread and what it starts afterwards (threads, children, an `exec`ed
/// program). On EINVAL for a mode or flag the kernel does not know, the error is
/// [`Error::Unsupported`].
pub fn set_mempolicy(policy: &MemPolicy, flags: ModeFlags) -> Result<()> {
    policy.validate(flags, "set_mempolicy")?;
    let mask = KernelBitmap::from_set(&policy.nodes(), 0);
    let (ptr, maxnode) = match policy {
        MemPolicy::Default | MemPolicy::Local => (std::ptr::null(), 0),
        _ => (mask.as_ptr(), mask.maxnode()),
    };
    let mode = policy.mode().raw() | flags.bits() as i32;
    // SAFETY: `ptr` is null (with maxnode 0) or points to `mask`, which holds `maxnode - 1` bits
    // and outlives the call; the kernel only reads it.
    let rc = unsafe { libc::syscall(libc::SYS_set_mempolicy, mode as c_long, ptr, maxnode) };
    if rc != 0 {
        let args = format!("{}, maxnode={maxnode}", policy.describe(flags));
        return Err(unsupported_or(Error::last_os("set_mempolicy", args), policy.mode(), flags));
    }
    Ok(())
}

/// Restores a policy exactly as [`get_mempolicy`] reported it (raw mode with flags, and nodes).
pub fn restore_mempolicy(current: &CurrentPolicy) -> Result<()> {
    match current.policy() {
        Some(p) => set_mempolicy(&p, current.flags),
        None => Err(Error::InvalidArgument {
            syscall: "set_mempolicy",
            arg: "mode",
            reason: format!("cannot restore unknown policy mode {}", current.raw_mode),
        }),
    }
}

/// A thread's or an address's policy as `get_mempolicy(2)` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentPolicy {
    /// The mode value exactly as returned, flags included (numactl --show prints unknown values
    /// like `[8194]`, bind | MPOL_F_NUMA_BALANCING, from this).
    pub raw_mode: i32,
    /// The mode without flags, when we know it.
    pub mode: Option<Mode>,
    /// The mode flags.
    pub flags: ModeFlags,
    /// The node mask the kernel returned (for STATIC/RELATIVE policies, the mask as the user gave
    /// it; empty for default and local).
    pub nodes: NodeSet,
}

impl CurrentPolicy {
    fn from_raw(raw_mode: i32, nodes: NodeSet) -> Self {
        let flags = ModeFlags::from_bits_truncate(raw_mode as u32);
        let mode = Mode::from_raw(raw_mode & !(ModeFlags::ALL.bits() as i32));
        CurrentPolicy { raw_mode, mode, flags, nodes }
    }

    /// The policy as a [`MemPolicy`], when the mode is known and consistent with the nodes.
    pub fn policy(&self) -> Option<MemPolicy> {
        MemPolicy::from_mode(self.mode?, self.nodes.clone())
    }
}

/// The calling thread's memory policy (`get_mempolicy(&mode, mask, maxnode, 0, 0)`).
pub fn get_mempolicy() -> Result<CurrentPolicy> {
    let (mode, nodes) = get_with_mask(0, 0, "get_mempolicy", "flags=0")?;
    Ok(CurrentPolicy::from_raw(mode, nodes))
}

/// The policy that governs address `addr` of the calling process (`MPOL_F_ADDR`): the VMA's policy,
/// or the thread's when the VMA has none.
pub fn get_mempolicy_at(addr: *const c_void) -> Result<CurrentPolicy> {
    let (mode, nodes) =
        get_with_mask(addr as c_ulong, MPOL_F_ADDR, "get_mempolicy", &format!("addr={addr:p}, flags=MPOL_F_ADDR"))?;
    Ok(CurrentPolicy::from_raw(mode, nodes))
}

/// The node holding the page at `addr` of the calling process (`MPOL_F_NODE | MPOL_F_ADDR`).
/// The page must be present (touch it first); otherwise the kernel faults it in per policy.
pub fn node_of_address(addr: *const c_void) -> Result<u32> {
    get_node(addr as c_ulong, MPOL_F_NODE | MPOL_F_ADDR, || format!("addr={addr:p}, flags=MPOL_F_NODE|MPOL_F_ADDR"))
}

/// The node the calling thread's interleave policy will use next (`MPOL_F_NODE` without an
/// address). EINVAL unless the thread's policy is interleave or weighted-interleave.
pub fn interleave_next_node() -> Result<u32> {
    get_node(0, MPOL_F_NODE, || "flags=MPOL_F_NODE".into())
}

/// `get_mempolicy(&node, NULL, 0, addr, flags)` for the `MPOL_F_NODE` forms, which return a node id
/// in the mode argument and take no mask; `what` describes the arguments for the error.
fn get_node(addr: c_ulong, flags: c_ulong, what: impl FnOnce() -> String) -> Result<u32> {
    let mut node: c_int = -1;
    // SAFETY: `node` is a valid int for the kernel to write; no mask is passed (NULL, maxnode 0).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut node as *mut c_int,
            std::ptr::null_mut::<c_ulong>(),
            0 as c_ulong,
            addr,
            flags,
        )
    };
    if rc != 0 {
        return Err(Error::last_os("get_mempolicy", what()));
    }
    Ok(node as u32)
}

/// The nodes the calling thread may allocate from (its cpuset's `mems_allowed`,
/// `MPOL_F_MEMS_ALLOWED`).
pub fn mems_allowed() -> Result<NodeSet> {
    Ok(get_with_mask(0, MPOL_F_MEMS_ALLOWED, "get_mempolicy", "flags=MPOL_F_MEMS_ALLOWED")?.1)
}

fn get_with_mask(addr: c_ulong, flags: c_ulong, syscall: &'static str, what: &str) -> Result<(i32, NodeSet)> {
    let mut bits = GET_MASK_START_BITS;
    loop {
        let mut mask = KernelBitmap::zeroed(bits);
        let mut mode: c_int = 0;
        // SAFETY: `mode` and `mask` are valid for writing; `maxnode - 1` is the mask's bit width, and
        // the kernel writes at most ALIGN(maxnode - 1, 64) / 8 bytes, which is the mask's size.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_get_mempolicy,
                &mut mode as *mut c_int,
                mask.as_mut_ptr(),
                mask.maxnode(),
                addr,
                flags,
            )
        };
        if rc == 0 {
            return Ok((mode, mask.to_set()));
        }
        let err = Error::last_os(syscall, format!("{what}, maxnode={}", mask.maxnode()));
        // EINVAL also means "maxnode < nr_node_ids": widen and retry, up to the kernel's ceiling.
        if err.errno() == Some(libc::EINVAL) && bits < MAX_MASK_BITS {
            bits *= 2;
            continue;
        }
        return Err(err);
    }
}

/// How `mbind` treats pages already in the range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MbindFlags {
    /// `MPOL_MF_STRICT`: fail with EIO if pages are on nodes outside the policy (and, with a move
    /// flag, could not be moved).
    pub strict: bool,
    /// `MPOL_MF_MOVE`: migrate the process's own (unshared) pages to conform.
    pub move_pages: bool,
    /// `MPOL_MF_MOVE_ALL`: migrate shared pages too (needs CAP_SYS_NICE).
    pub move_all: bool,
}

impl MbindFlags {
    fn bits(self) -> c_ulong {
        c_ulong::from(self.strict) | (c_ulong::from(self.move_pages) << 1) | (c_ulong::from(self.move_all) << 2)
    }
}

/// Sets the policy of the address range `[addr, addr + len)` of the calling process (`mbind(2)`).
///
/// `addr` must be page aligned and the range mapped (EFAULT otherwise; EINVAL for a misaligned
/// start). The policy governs future page faults in the range; with [`MbindFlags::move_pages`] the
/// kernel also migrates pages already there. This never changes memory contents, so it is safe to
/// call on any range: the kernel checks the addresses.
pub fn mbind(addr: *const c_void, len: usize, policy: &MemPolicy, flags: ModeFlags, how: MbindFlags) -> Result<()> {
    policy.validate(flags, "mbind")?;
    let mask = KernelBitmap::from_set(&policy.nodes(), 0);
    let (ptr, maxnode) = match policy {
        MemPolicy::Default | MemPolicy::Local => (std::ptr::null(), 0),
        _ => (mask.as_ptr(), mask.maxnode()),
    };
    let mode = (policy.mode().raw() | flags.bits() as i32) as c_ulong;
    // SAFETY: the kernel validates the range against the process's mappings and only changes
    // placement metadata (and, with MOVE, physically migrates pages transparently); `ptr` is null or
    // points to `mask` of `maxnode - 1` bits, alive for the call.
    let rc = unsafe { libc::syscall(libc::SYS_mbind, addr as c_ulong, len as c_ulong, mode, ptr, maxnode, how.bits()) };
    if rc != 0 {
        let args = format!("addr={addr:p}, len={len}, {}, maxnode={maxnode}, flags={how:?}", policy.describe(flags));
        return Err(unsupported_or(Error::last_os("mbind", args), policy.mode(), flags));
    }
    Ok(())
}

/// Whether the running kernel accepts `mode` with `flags`, asked without changing anything:
/// `mbind` of an empty range checks the mode and flags (`sanitize_mpol_flags`) and returns before
/// touching nodes or pages.
///
/// `false` only when the kernel answers EINVAL. Any other failure (e.g. EPERM from a container's
/// seccomp filter, which blocks the NUMA calls without CAP_SYS_NICE) says nothing about the mode and
/// counts as supported, so a real error is not mistaken for a missing feature.
pub fn kernel_supports(mode: Mode, flags: ModeFlags) -> bool {
    let raw = (mode.raw() | flags.bits() as i32) as c_ulong;
    // SAFETY: a zero-length range at address 0: the kernel returns before reading any mask or page.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            0 as c_ulong,
            0 as c_ulong,
            raw,
            std::ptr::null::<c_ulong>(),
            0 as c_ulong,
            0 as c_ulong,
        )
    };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL)
}

/// Turns an EINVAL into [`Error::Unsupported`] when the kernel does not know the mode or flags.
fn unsupported_or(err: Error, mode: Mode, flags: ModeFlags) -> Error {
    if err.errno() != Some(libc::EINVAL) {
        return err;
    }
    let syscall = match &err {
        Error::Syscall { syscall, .. } => *syscall,
        _ => "set_mempolicy",
    };
    if !kernel_supports(mode, ModeFlags::NONE) {
        return Error::Unsupported { what: mode.name().to_string(), since: mode.since(), syscall };
    }
    if !flags.is_empty() && !kernel_supports(mode, flags) {
        let since = if flags.contains(ModeFlags::NUMA_BALANCING) {
            if mode == Mode::Bind {
                "5.12"
            } else {
                "a release after 5.12 (5.12 accepts it with bind only)"
            }
        } else {
            "2.6.26"
        };
        return Error::Unsupported { what: format!("{mode} with {flags}"), since, syscall };
    }
    err
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(s: &str) -> NodeSet {
        NodeSet::parse_list(s).unwrap()
    }

    #[test]
    fn modes_round_trip_kernel_numbers() {
        for m in Mode::ALL {
            assert_eq!(Mode::from_raw(m.raw()), Some(m));
        }
        assert_eq!(Mode::from_raw(7), None);
        assert_eq!(Mode::from_raw(-1), None);
        assert_eq!(Mode::WeightedInterleave.raw(), 6);
        assert_eq!(Mode::PreferredMany.name(), "preferred-many");
    }

    #[test]
    fn current_policy_splits_flags_from_mode() {
        // numactl --balancing --membind=0 makes get_mempolicy return 8194 = bind | NUMA_BALANCING.
        let c = CurrentPolicy::from_raw(8194, nodes("0"));
        assert_eq!(c.mode, Some(Mode::Bind));
        assert_eq!(c.flags, ModeFlags::NUMA_BALANCING);
        assert_eq!(c.policy(), Some(MemPolicy::Bind(nodes("0"))));
        let c = CurrentPolicy::from_raw(1 | (1 << 15), nodes("8"));
        assert_eq!(c.policy(), Some(MemPolicy::Preferred(8)));
        assert_eq!(c.flags, ModeFlags::STATIC_NODES);
        assert_eq!(CurrentPolicy::from_raw(9, NodeSet::new()).mode, None);
    }

    #[test]
    fn validate_refuses_what_the_kernel_would() {
        assert!(MemPolicy::Bind(NodeSet::new()).validate(ModeFlags::NONE, "x").is_err());
        assert!(MemPolicy::Local.validate(ModeFlags::NONE, "x").is_ok());
        assert!(MemPolicy::Local.validate(ModeFlags::STATIC_NODES, "x").is_err());
        assert!(MemPolicy::Bind(nodes("0,8"))
            .validate(ModeFlags::STATIC_NODES | ModeFlags::RELATIVE_NODES, "x")
            .is_err());
        assert!(MemPolicy::Interleave(nodes("0")).validate(ModeFlags::NUMA_BALANCING, "x").is_err());
        assert!(MemPolicy::Bind(nodes("0")).validate(ModeFlags::NUMA_BALANCING, "x").is_ok());
        let e = MemPolicy::Bind(nodes("40000")).validate(ModeFlags::NONE, "set_mempolicy").unwrap_err();
        assert!(e.to_string().contains("node 40000"), "{e}");
    }

    #[test]
    fn nodes_of_each_policy() {
        assert_eq!(MemPolicy::Preferred(8).nodes(), nodes("8"));
        assert!(MemPolicy::Local.nodes().is_empty());
        assert_eq!(MemPolicy::WeightedInterleave(nodes("0,2")).nodes(), nodes("0,2"));
        assert_eq!(MemPolicy::from_mode(Mode::Bind, NodeSet::new()), None);
        assert_eq!(MemPolicy::from_mode(Mode::Local, NodeSet::new()), Some(MemPolicy::Local));
        // 5.4-5.13 report a local policy as preferred with no node.
        assert_eq!(MemPolicy::from_mode(Mode::Preferred, NodeSet::new()), Some(MemPolicy::Local));
        assert_eq!(MemPolicy::Bind(nodes("0-1")).to_string(), "bind:0-1");
    }

    #[test]
    fn flags_display() {
        assert_eq!(ModeFlags::NONE.to_string(), "none");
        assert_eq!(
            (ModeFlags::STATIC_NODES | ModeFlags::NUMA_BALANCING).to_string(),
            "MPOL_F_STATIC_NODES|MPOL_F_NUMA_BALANCING"
        );
    }
}
