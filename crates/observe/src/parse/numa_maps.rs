//! `/proc/PID/numa_maps`: one line per VMA with its memory policy and resident pages per node.
//!
//! Written by `show_numa_map()` in `fs/proc/task_mmu.c`; the policy text by `mpol_to_str()` in
//! `mm/mempolicy.c`. Checked against 6.18 (this host) and 6.12 (rig guests); format as in
//! `Documentation/admin-guide/mm/numa_memory_policy.rst` and `proc(5)`.
//!
//! ```text
//!   7f8df254e000 default file=/usr/lib/x86_64-linux-gnu/libc.so.6 mapped=226 mapmax=15 N0=226 kernelpagesize_kB=4
//!   564dd1a61000 interleave:0-1 heap anon=1486 dirty=1486 active=0 N0=743 N1=743 kernelpagesize_kB=4
//!   7f0000000000 bind=static:1 file=/anon_hugepage\040(deleted) huge dirty=4 N1=4 kernelpagesize_kB=2048
//!   7f8df2718000 default                       <- a VMA with no resident page: the line ends here
//!   ^start       ^policy     ^kind             ^counters (pages)  ^per node (pages)   ^page size of the VMA
//! ```
//!
//! Policy (`mpol_to_str`): `<mode>[=<flags>][:<nodelist>]` with mode one of `default`, `prefer`,
//! `bind`, `interleave`, `weighted interleave` (6.9+), `local`, `prefer (many)` (5.15+), or `unknown`;
//! flags `static` or `relative`, and/or `balancing` (`relative|balancing`, 5.12+). Two mode names hold a
//! space, so the policy is matched by name, never split on blanks. The kernel formats it into a 64-byte
//! buffer: a very long node list is silently cut there and cannot be detected.
//!
//! Kind: `file=PATH`, else `heap` (the brk area), else `stack` (the main stack; `stack:TID` for thread
//! stacks before 4.5), then ` huge` for hugetlbfs VMAs. The path is written by `seq_path` with
//! `"\n\t= "` escaped as 3-digit octal (`\040` for a space, so ` (deleted)` reads `\040(deleted)`),
//! so it is always one token: a bare word where a `key=value` belongs is corruption.
//!
//! Units: every count is in pages OF THAT VMA, whose size is `kernelpagesize_kB` (4 for normal and
//! transparent-huge memory, whose THPs are counted as 512 base pages; 2048 or 1048576 for hugetlbfs).
//! So `N0=4 kernelpagesize_kB=2048` is 8 MiB on node 0. Counters that are zero are not printed.
//!
//! Empty file: kernel threads and zombies have no mm, so the file reads as empty (or fails with
//! EINVAL/ESRCH while the process exits); that is the Reader's business, not an error here.
//!
//! Truncation: a line whose counters are cut before `kernelpagesize_kB=` (always last once any page is
//! counted) is an error; a line cut inside the policy is an unknown policy, also an error.

use std::collections::HashSet;
use std::sync::Arc;

use numapilot_topology::NodeSet;
use serde::{Deserialize, Serialize};

use crate::error::{FileKind, ParseError};

/// Memory policy mode, as `mpol_to_str` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyMode {
    /// `default`: the task's policy applies (usually local allocation).
    Default,
    /// `prefer`: one preferred node, fall back to others.
    Preferred,
    /// `bind`: only these nodes.
    Bind,
    /// `interleave`: round-robin over these nodes.
    Interleave,
    /// `weighted interleave`: round-robin weighted per node (`/sys/kernel/mm/mempolicy`), 6.9+.
    WeightedInterleave,
    /// `local`: the node of the CPU that allocates.
    Local,
    /// `prefer (many)`: a set of preferred nodes, 5.15+.
    PreferredMany,
    /// `unknown`: the kernel did not recognise its own mode (it warns once).
    Unknown,
}

impl PolicyMode {
    /// Whether the mode places memory explicitly on chosen nodes (bind, prefer, prefer (many),
    /// interleave, weighted interleave): what a process or an administrator set, as opposed to
    /// `default` and `local`, which leave placement to the kernel (and `unknown`).
    pub fn is_explicit(self) -> bool {
        matches!(
            self,
            PolicyMode::Bind
                | PolicyMode::Preferred
                | PolicyMode::PreferredMany
                | PolicyMode::Interleave
                | PolicyMode::WeightedInterleave
        )
    }

    /// The kernel's name for the mode.
    pub fn name(self) -> &'static str {
        match self {
            PolicyMode::Default => "default",
            PolicyMode::Preferred => "prefer",
            PolicyMode::Bind => "bind",
            PolicyMode::Interleave => "interleave",
            PolicyMode::WeightedInterleave => "weighted interleave",
            PolicyMode::Local => "local",
            PolicyMode::PreferredMany => "prefer (many)",
            PolicyMode::Unknown => "unknown",
        }
    }

    const ALL: [PolicyMode; 8] = [
        // Longest names first where one is a prefix of another ("prefer (many)" before "prefer").
        PolicyMode::WeightedInterleave,
        PolicyMode::PreferredMany,
        PolicyMode::Default,
        PolicyMode::Preferred,
        PolicyMode::Bind,
        PolicyMode::Interleave,
        PolicyMode::Local,
        PolicyMode::Unknown,
    ];
}

/// A memory policy as shown in numa_maps.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MemPolicy {
    /// The mode.
    pub mode: PolicyMode,
    /// `=static`: `MPOL_F_STATIC_NODES`.
    pub static_nodes: bool,
    /// `=relative`: `MPOL_F_RELATIVE_NODES`.
    pub relative_nodes: bool,
    /// `balancing`: `MPOL_F_NUMA_BALANCING` (5.12+).
    pub balancing: bool,
    /// The node list (empty for default/local).
    pub nodes: NodeSet,
}

impl MemPolicy {
    /// The default policy with no flags and no nodes.
    pub fn default_policy() -> Self {
        MemPolicy {
            mode: PolicyMode::Default,
            static_nodes: false,
            relative_nodes: false,
            balancing: false,
            nodes: NodeSet::new(),
        }
    }

    /// Formats the policy exactly as the kernel does.
    pub fn to_kernel_string(&self) -> String {
        let mut s = self.mode.name().to_string();
        if self.static_nodes || self.relative_nodes || self.balancing {
            s.push('=');
            if self.static_nodes {
                s.push_str("static");
            } else if self.relative_nodes {
                s.push_str("relative");
            }
            if self.balancing {
                if self.static_nodes || self.relative_nodes {
                    s.push('|');
                }
                s.push_str("balancing");
            }
        }
        if !self.nodes.is_empty() {
            s.push(':');
            s.push_str(&self.nodes.to_list());
        }
        s
    }
}

/// What a VMA maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VmaKind {
    /// A file (`file=`), including shared anonymous memory (`/dev/zero`, memfd, SysV shm).
    File,
    /// The brk heap (`heap`).
    Heap,
    /// The main stack (`stack`, or `stack:TID` on kernels before 4.5).
    Stack,
    /// Anonymous memory (no tag): malloc arenas, thread stacks, mmap(MAP_ANONYMOUS|MAP_PRIVATE).
    Anon,
}

/// Resident pages of a VMA per node: `N<node>=<pages>`, sorted by node. Most VMAs sit on one node, so
/// one entry is kept inline and only VMAs spread over several nodes allocate.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum NodePages {
    /// No page resident.
    #[default]
    Empty,
    /// All pages on one node: (node, pages).
    One((u32, u64)),
    /// Pages on several nodes, sorted by node.
    Many(Box<[(u32, u64)]>),
}

impl NodePages {
    /// The (node, pages) entries, sorted by node.
    pub fn as_slice(&self) -> &[(u32, u64)] {
        match self {
            NodePages::Empty => &[],
            NodePages::One(t) => std::slice::from_ref(t),
            NodePages::Many(v) => v,
        }
    }

    /// Builds from (node, pages) entries sorted by node.
    pub fn from_vec(v: Vec<(u32, u64)>) -> Self {
        match v.as_slice() {
            [] => NodePages::Empty,
            [t] => NodePages::One(*t),
            _ => NodePages::Many(v.into_boxed_slice()),
        }
    }
}

impl Serialize for NodePages {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.as_slice().serialize(s)
    }
}

impl<'de> Deserialize<'de> for NodePages {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(NodePages::from_vec(Vec::<(u32, u64)>::deserialize(d)?))
    }
}

/// The counters of a VMA that has resident pages (everything after the kind on its line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resident {
    /// Total resident pages (`mapped=`, or `anon=`/`dirty=` when the kernel left `mapped=` out because
    /// it equals one of them).
    pub pages: u64,
    /// `anon=`: anonymous pages.
    pub anon: u64,
    /// `dirty=`: dirty pages.
    pub dirty: u64,
    /// `mapmax=`: highest map count of any page (0 when at most 1). Shared file pages have > 1.
    pub mapmax: u64,
    /// `swapcache=`.
    pub swapcache: u64,
    /// `active=`: printed only when fewer than all pages are active; `None` means all (or hugetlb).
    pub active: Option<u64>,
    /// `writeback=`.
    pub writeback: u64,
    /// `N<node>=<pages>`.
    pub node_pages: NodePages,
    /// `kernelpagesize_kB=`: the page size the counts are in.
    pub kernel_page_kb: u64,
}

/// One VMA (line) of numa_maps.
///
/// Kept small (about 50 bytes, plus about 110 for a VMA with resident pages) because a full
/// observation of a busy machine holds tens of thousands: policy and path are shared allocations,
/// the counters of a VMA without resident pages are absent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vma {
    /// Start address.
    pub start: u64,
    /// The policy governing the VMA (its own, else the task's); shared between equal policies.
    pub policy: Arc<MemPolicy>,
    /// The path for [`VmaKind::File`], with the kernel's octal escapes (`\040`) decoded. Shared
    /// between VMAs of the same file (see [`PathInterner`]).
    pub file: Option<Arc<str>>,
    /// What the VMA maps.
    pub kind: VmaKind,
    /// A hugetlbfs VMA (`huge`).
    pub huge: bool,
    /// Resident pages; `None` when nothing of the VMA is resident (the kernel ends the line there).
    pub resident: Option<Box<Resident>>,
}

impl Vma {
    /// Resident pages per node (in units of the VMA's page size), sorted by node.
    pub fn node_pages(&self) -> &[(u32, u64)] {
        self.resident.as_ref().map_or(&[], |r| r.node_pages.as_slice())
    }

    /// The page size the counts are in, kB; `None` without resident pages.
    pub fn kernel_page_kb(&self) -> Option<u64> {
        self.resident.as_ref().map(|r| r.kernel_page_kb)
    }

    /// Resident kB per node: pages times the VMA's page size.
    pub fn node_kb(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        let ps = self.kernel_page_kb().unwrap_or(0);
        self.node_pages().iter().map(move |&(n, p)| (n, p.saturating_mul(ps)))
    }

    /// The usage category of the VMA: [`MemKind`].
    pub fn mem_kind(&self) -> MemKind {
        // Precedence as numastat's: a hugetlb VMA is Huge whatever else it is.
        if self.huge {
            MemKind::Huge
        } else {
            match self.kind {
                VmaKind::Heap => MemKind::Heap,
                VmaKind::Stack => MemKind::Stack,
                VmaKind::Anon => MemKind::AnonPrivate,
                VmaKind::File => MemKind::File,
            }
        }
    }
}

/// Usage category of resident memory, per VMA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemKind {
    /// hugetlbfs pages.
    Huge,
    /// brk heap.
    Heap,
    /// main stack.
    Stack,
    /// anonymous private memory (malloc arenas, thread stacks, anonymous mmap).
    AnonPrivate,
    /// file-backed or shared memory (page cache of mapped files, their copy-on-write pages, shmem).
    File,
}

/// Resident memory of one process on one node, by kind, in kB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeUsage {
    /// Kernel node id.
    pub node: u32,
    /// hugetlbfs, kB.
    pub huge_kb: u64,
    /// brk heap, kB.
    pub heap_kb: u64,
    /// main stack, kB.
    pub stack_kb: u64,
    /// anonymous private, kB.
    pub anon_kb: u64,
    /// file-backed or shared, kB.
    pub file_kb: u64,
    /// Of all the kinds above, kB in file and shared-memory VMAs whose pages some other process
    /// maps too (`mapmax` > 1: a library's text, page cache or shmem shared between processes).
    /// Not a kind of its own (already counted in `total_kb`): the part an own-pages move cannot
    /// move (the daemon's page mover moves only the pages the process alone maps), so a plan
    /// that counted it would ask for the same move every decision. Anonymous memory is never
    /// counted here: a forked worker's heap with a few copy-on-write pages still shared with its
    /// parent has `mapmax` 2 on the whole mapping, and most of it moves.
    #[serde(default)]
    pub shared_kb: u64,
}

impl NodeUsage {
    /// All kinds together, kB.
    pub fn total_kb(&self) -> u64 {
        // Saturating: the counts come from a file (one of 2^64 pages overflowed; review helper-39).
        [self.heap_kb, self.stack_kb, self.anon_kb, self.file_kb].into_iter().fold(self.huge_kb, u64::saturating_add)
    }

    fn add(&mut self, kind: MemKind, kb: u64) {
        let slot = match kind {
            MemKind::Huge => &mut self.huge_kb,
            MemKind::Heap => &mut self.heap_kb,
            MemKind::Stack => &mut self.stack_kb,
            MemKind::AnonPrivate => &mut self.anon_kb,
            MemKind::File => &mut self.file_kb,
        };
        *slot = slot.saturating_add(kb);
    }
}

/// All VMAs of a process.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaMaps {
    /// The VMAs in address order.
    pub vmas: Vec<Vma>,
}

/// The VMAs of one memory policy and what they hold resident.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyUsage {
    /// The policy as the kernel prints it (`bind:1`, `interleave:0-3`, `default`).
    pub policy: String,
    /// VMAs with this policy.
    pub vmas: usize,
    /// Their resident memory, kB (numa_maps shows resident pages, not VMA sizes).
    pub resident_kb: u64,
}

impl NumaMaps {
    /// VMAs and resident kB per memory policy, in order of first appearance.
    pub fn usage_by_policy(&self) -> Vec<PolicyUsage> {
        let mut out: Vec<(Arc<MemPolicy>, PolicyUsage)> = Vec::new();
        for vma in &self.vmas {
            let kb: u64 = vma.node_kb().map(|(_, kb)| kb).fold(0, u64::saturating_add);
            // Policies are interned: nearly always one pointer comparison.
            let i = match out.iter().position(|(p, _)| Arc::ptr_eq(p, &vma.policy) || **p == *vma.policy) {
                Some(i) => i,
                None => {
                    let usage = PolicyUsage { policy: vma.policy.to_kernel_string(), vmas: 0, resident_kb: 0 };
                    out.push((Arc::clone(&vma.policy), usage));
                    out.len() - 1
                }
            };
            out[i].1.vmas += 1;
            out[i].1.resident_kb = out[i].1.resident_kb.saturating_add(kb);
        }
        out.into_iter().map(|(_, u)| u).collect()
    }

    /// Resident kB per node and kind, sorted by node; nodes with nothing resident are left out.
    pub fn usage_by_node(&self) -> Vec<NodeUsage> {
        let mut out: Vec<NodeUsage> = Vec::new();
        for vma in &self.vmas {
            let kind = vma.mem_kind();
            // Only a file or shared-memory mapping counts whole: numa_maps gives the highest map
            // count of a mapping, not which pages have it, and a worker forked without exec
            // (php-fpm, a postgres backend) keeps a few copy-on-write pages of its heap shared
            // with its parent: counted shared, its whole heap would never be asked for, though
            // the page mover moves its private pages (review helper-75).
            let shared = vma.kind == VmaKind::File && vma.resident.as_ref().is_some_and(|r| r.mapmax > 1);
            for (node, kb) in vma.node_kb() {
                let i = match out.binary_search_by_key(&node, |u| u.node) {
                    Ok(i) => i,
                    Err(i) => {
                        out.insert(i, NodeUsage { node, ..NodeUsage::default() });
                        i
                    }
                };
                out[i].add(kind, kb);
                if shared {
                    out[i].shared_kb = out[i].shared_kb.saturating_add(kb);
                }
            }
        }
        out
    }
}

/// A fast non-cryptographic hash (the multiply-rotate scheme of rustc's FxHasher) for the interners:
/// their keys are paths and policies read from the kernel, not attacker-chosen input to a long-lived
/// table, and SipHash was a tenth of the cost of parsing numa_maps. The model's and the planner's
/// per-thread tables (keys of pid and tid) use it too.
///
/// Integers are hashed by the typed writes below, each exactly what [`Hasher::write`] gives their
/// native bytes (one round per 8 bytes, then one per remaining byte), so every hash, and every hash
/// table's iteration order, is what it was when they went through `write`; inlined, without the
/// slice loop: a `u64` key (`TaskKey`) cost about 33 instructions a hash through `write`, a fifth
/// of the model's and planner's per-thread lookups on 10,000 threads (callgrind over a
/// `cycle_cost --replay`).
///
/// [`Hasher::write`]: std::hash::Hasher::write
#[derive(Debug, Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

/// The multiplier of one round (rustc's FxHasher).
const FX_K: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    /// One round over 8 bytes, read little-endian (as [`std::hash::Hasher::write`] reads a chunk).
    #[inline]
    fn word(&mut self, w: u64) {
        self.hash = (self.hash.rotate_left(5) ^ w).wrapping_mul(FX_K);
    }

    /// One round per byte (as `write` treats the bytes after the last whole chunk).
    #[inline]
    fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.word(u64::from(b));
        }
    }
}

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.word(u64::from_le_bytes(w));
        }
        self.bytes(chunks.remainder());
    }

    // Each as `write(&i.to_ne_bytes())` (the default) computes it.
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.word(u64::from(i));
    }

    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.bytes(&i.to_ne_bytes());
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.bytes(&i.to_ne_bytes());
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.word(u64::from_le_bytes(i.to_ne_bytes()));
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        let b = i.to_ne_bytes();
        match <[u8; 8]>::try_from(&b[..]) {
            Ok(w) => self.word(u64::from_le_bytes(w)),
            Err(_) => self.bytes(&b),
        }
    }

    fn finish(&self) -> u64 {
        self.hash
    }
}

/// [`FxHasher`] as a `BuildHasher`.
pub type FxBuild = std::hash::BuildHasherDefault<FxHasher>;

/// Shares one allocation between equal paths and equal policies: every process maps libc, each file
/// is mapped by several adjacent VMAs, and nearly every VMA has the default policy, so a full
/// observation holds each path and policy once instead of tens of thousands of times.
#[derive(Debug, Default)]
pub struct PathInterner {
    paths: HashSet<Arc<str>, FxBuild>,
    policies: HashSet<Arc<MemPolicy>, FxBuild>,
    // Adjacent VMAs nearly always repeat the previous path and policy: compared first, no hashing.
    last_path: Option<Arc<str>>,
    last_policy: Option<Arc<MemPolicy>>,
}

impl PathInterner {
    /// The shared copy of `policy`.
    pub fn intern_policy(&mut self, policy: MemPolicy) -> Arc<MemPolicy> {
        if let Some(p) = self.last_policy.as_ref().filter(|p| ***p == policy) {
            return Arc::clone(p);
        }
        let p = match self.policies.get(&policy) {
            Some(p) => Arc::clone(p),
            None => {
                let p = Arc::new(policy);
                self.policies.insert(Arc::clone(&p));
                p
            }
        };
        self.last_policy = Some(Arc::clone(&p));
        p
    }

    /// The shared copy of `path`.
    pub fn intern(&mut self, path: &str) -> Arc<str> {
        if let Some(p) = self.last_path.as_ref().filter(|p| &***p == path) {
            return Arc::clone(p);
        }
        let p = match self.paths.get(path) {
            Some(p) => Arc::clone(p),
            None => {
                let p: Arc<str> = Arc::from(path);
                self.paths.insert(Arc::clone(&p));
                p
            }
        };
        self.last_path = Some(Arc::clone(&p));
        p
    }
}

/// Parses a whole numa_maps file. Empty input is an empty map (kernel thread or zombie).
pub fn parse_numa_maps(input: &str) -> Result<NumaMaps, ParseError> {
    parse_numa_maps_with(input, &mut PathInterner::default())
}

/// [`parse_numa_maps`] sharing path strings through `paths`.
pub fn parse_numa_maps_with(input: &str, paths: &mut PathInterner) -> Result<NumaMaps, ParseError> {
    super::complete(FileKind::NumaMaps, input)?;
    let b = input.as_bytes();
    // About 60 bytes per line: a fair first guess that avoids most regrowth.
    let mut vmas = Vec::with_capacity(b.len() / 60 + 1);
    let (mut pos, mut n) = (0, 0);
    while pos < b.len() {
        let end = super::find_byte(b, pos, b'\n');
        n += 1;
        if end > pos {
            vmas.push(parse_line(&input[pos..end], n, paths)?);
        }
        pos = end + 1;
    }
    vmas.shrink_to_fit();
    Ok(NumaMaps { vmas })
}

/// Parses one numa_maps line; `line_no` is used in errors.
pub fn parse_numa_maps_line(line: &str, line_no: usize) -> Result<Vma, ParseError> {
    parse_line(line, line_no, &mut PathInterner::default())
}

fn parse_line(line: &str, line_no: usize, paths: &mut PathInterner) -> Result<Vma, ParseError> {
    // A byte scanner: this runs for every VMA of every process (tens of thousands per observation),
    // where splitting into &str tokens and matching them cost four times as much.
    let k = FileKind::NumaMaps;
    let err = |field, reason: &str| ParseError::new(k, line_no, field, line, reason);
    let b = line.as_bytes();
    let sp = super::find_byte(b, 0, b' ');
    if sp == b.len() {
        return Err(err(Some("policy"), "no policy after address"));
    }
    if sp == 0 || sp > 16 {
        return Err(err(Some("address"), "address is not hexadecimal"));
    }
    let mut start = 0u64;
    for &c in &b[..sp] {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => return Err(err(Some("address"), "address is not hexadecimal")),
        };
        start = start << 4 | u64::from(d);
    }
    let (policy, rest) = parse_policy(&line[sp + 1..]).map_err(|reason| err(Some("policy"), &reason))?;

    let mut kind = VmaKind::Anon;
    let mut file = None;
    let mut huge = false;
    let mut r = Resident {
        pages: 0,
        anon: 0,
        dirty: 0,
        mapmax: 0,
        swapcache: 0,
        active: None,
        writeback: 0,
        node_pages: NodePages::Empty,
        kernel_page_kb: 0,
    };
    // At most a few nodes per VMA; a small stack array avoids a Vec per line.
    let mut nodes: [(u32, u64); 8] = [(0, 0); 8];
    let mut n_nodes = 0usize;
    let mut more_nodes: Vec<(u32, u64)> = Vec::new();
    let mut mapped = None;
    let mut seen_counter = false;
    let mut page_kb = None;
    let rb = rest.as_bytes();
    let mut i = 0;
    while i < rb.len() {
        if rb[i] == b' ' {
            i += 1;
            continue;
        }
        let end = super::find_byte(rb, i, b' ');
        let tok = &rest[i..end];
        let t = tok.as_bytes();
        i = end;
        if let Some(path) = t.strip_prefix(b"file=") {
            if file.is_some() || seen_counter || kind != VmaKind::Anon {
                return Err(err(Some("file"), "file= in an unexpected place"));
            }
            kind = VmaKind::File;
            let path = &tok[tok.len() - path.len()..];
            file = Some(if path.contains('\\') {
                paths.intern(&numapilot_topology::sysfs::unescape_octal(path))
            } else {
                paths.intern(path)
            });
            continue;
        }
        if !seen_counter {
            match t {
                b"huge" => {
                    huge = true;
                    continue;
                }
                b"heap" if kind == VmaKind::Anon => {
                    kind = VmaKind::Heap;
                    continue;
                }
                b"stack" if kind == VmaKind::Anon => {
                    kind = VmaKind::Stack;
                    continue;
                }
                _ => {}
            }
            if let Some(tid) = t.strip_prefix(b"stack:") {
                if kind == VmaKind::Anon && super::dec(tid).is_some() {
                    kind = VmaKind::Stack;
                    continue;
                }
            }
        }
        let eq = super::find_byte(t, 0, b'=');
        if eq == t.len() || eq == 0 {
            return Err(err(None, &format!("unexpected word {tok:?}")));
        }
        let (key, value) = (&t[..eq], &t[eq + 1..]);
        seen_counter = true;
        if page_kb.is_some() {
            // kernelpagesize_kB is always the last field: anything after it is corruption.
            return Err(err(Some("kernelpagesize_kB"), "field after kernelpagesize_kB"));
        }
        let numv = |field: &'static str| {
            super::dec(value).ok_or_else(|| err(Some(field), &format!("bad number {:?}", &tok[eq + 1..])))
        };
        if key[0] == b'N' && key.len() > 1 {
            let node = super::dec(&key[1..])
                .and_then(|v| u32::try_from(v).ok())
                .ok_or_else(|| err(Some("N<node>"), &format!("bad node in {tok:?}")))?;
            let pages = numv("N<node>")?;
            let last = match more_nodes.last() {
                Some(t) => Some(t.0),
                None => n_nodes.checked_sub(1).map(|i| nodes[i].0),
            };
            if last.is_some_and(|l| l >= node) {
                return Err(err(Some("N<node>"), "node ids not increasing"));
            }
            if n_nodes < nodes.len() && more_nodes.is_empty() {
                nodes[n_nodes] = (node, pages);
                n_nodes += 1;
            } else {
                if more_nodes.is_empty() {
                    more_nodes.extend_from_slice(&nodes[..n_nodes]);
                }
                more_nodes.push((node, pages));
            }
            continue;
        }
        match key {
            b"anon" => r.anon = numv("anon")?,
            b"dirty" => r.dirty = numv("dirty")?,
            b"mapped" => mapped = Some(numv("mapped")?),
            b"mapmax" => r.mapmax = numv("mapmax")?,
            b"swapcache" => r.swapcache = numv("swapcache")?,
            b"active" => r.active = Some(numv("active")?),
            b"writeback" => r.writeback = numv("writeback")?,
            b"kernelpagesize_kB" => {
                let v = numv("kernelpagesize_kB")?;
                if v == 0 {
                    return Err(err(Some("kernelpagesize_kB"), "page size 0"));
                }
                page_kb = Some(v);
            }
            // Unknown key=value: a field from a newer kernel; ignored.
            _ => {}
        }
    }
    let resident = if seen_counter {
        let Some(kb) = page_kb else {
            return Err(err(Some("kernelpagesize_kB"), "counters without kernelpagesize_kB (truncated line?)"));
        };
        r.kernel_page_kb = kb;
        // mapped= is left out when it equals anon or dirty (show_numa_map: pages != anon && pages != dirty).
        r.pages = mapped.unwrap_or(r.anon.max(r.dirty));
        r.node_pages = if more_nodes.is_empty() {
            match n_nodes {
                0 => NodePages::Empty,
                1 => NodePages::One(nodes[0]),
                n => NodePages::Many(nodes[..n].to_vec().into_boxed_slice()),
            }
        } else {
            NodePages::Many(more_nodes.into_boxed_slice())
        };
        Some(Box::new(r))
    } else {
        None
    };
    Ok(Vma { start, policy: paths.intern_policy(policy), file, kind, huge, resident })
}

/// Splits the policy off the front of `rest`; returns the policy and what follows it.
fn parse_policy(rest: &str) -> Result<(MemPolicy, &str), String> {
    // Nearly every VMA has the default policy: answer it without the general parse.
    if let Some(tail) = rest.strip_prefix("default") {
        if tail.is_empty() || tail.starts_with(' ') {
            return Ok((MemPolicy::default_policy(), tail));
        }
    }
    let mode = PolicyMode::ALL
        .into_iter()
        .find(|m| {
            rest.strip_prefix(m.name())
                .is_some_and(|after| matches!(after.bytes().next(), None | Some(b' ' | b'=' | b':')))
        })
        .ok_or_else(|| format!("unknown policy {:?}", rest.split(' ').next().unwrap_or("")))?;
    let after = &rest[mode.name().len()..];
    let end = after.find(' ').unwrap_or(after.len());
    let (mut spec, tail) = after.split_at(end);
    let mut policy = MemPolicy { mode, ..MemPolicy::default_policy() };
    if let Some(f) = spec.strip_prefix('=') {
        let flags_end = f.find(':').unwrap_or(f.len());
        let (flags, after_flags) = f.split_at(flags_end);
        if flags.is_empty() {
            return Err("empty policy flags".to_string());
        }
        for flag in flags.split('|') {
            match flag {
                "static" => policy.static_nodes = true,
                "relative" => policy.relative_nodes = true,
                "balancing" => policy.balancing = true,
                _ => return Err(format!("unknown policy flag {flag:?}")),
            }
        }
        spec = after_flags;
    }
    if let Some(list) = spec.strip_prefix(':') {
        if list.is_empty() {
            return Err("empty node list".to_string());
        }
        policy.nodes = NodeSet::parse_list(list).map_err(|e| e.to_string())?;
    } else if !spec.is_empty() {
        return Err(format!("junk after policy: {spec:?}"));
    }
    Ok((policy, tail))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const FX_U32_4242: u64 = 0xc115_9f74_a818_bd27;
    const FX_U64_KEY: u64 = 0x433b_5399_ab23_ada2;
    const FX_PAIR: u64 = 0x7903_5871_fe0b_bf46;
    const BASH: &str = include_str!("../../tests/data/host-6.18/numa_maps-bash");
    const INTERLEAVE: &str = include_str!("../../tests/data/host-6.18/numa_maps-interleave");

    fn one(line: &str) -> Vma {
        parse_numa_maps_line(line, 1).unwrap()
    }

    /// Hashes `f` writes into a fresh [`FxHasher`] to.
    fn fx(f: impl FnOnce(&mut FxHasher)) -> u64 {
        let mut h = FxHasher::default();
        f(&mut h);
        std::hash::Hasher::finish(&h)
    }

    proptest! {
        // Every typed write hashes exactly as `write` of the native bytes (the default every
        // `Hasher` has), from any state: hash values, and so the iteration order of every table
        // keyed through FxBuild (the model's and the planner's), are those of before the typed
        // writes.
        #[test]
        fn typed_writes_hash_as_their_bytes(seed in any::<u64>(), a in any::<u64>()) {
            use std::hash::Hasher;
            let start = |h: &mut FxHasher| h.write_u64(seed);
            prop_assert_eq!(fx(|h| { start(h); h.write_u8(a as u8) }), fx(|h| { start(h); h.write(&(a as u8).to_ne_bytes()) }));
            prop_assert_eq!(fx(|h| { start(h); h.write_u16(a as u16) }), fx(|h| { start(h); h.write(&(a as u16).to_ne_bytes()) }));
            prop_assert_eq!(fx(|h| { start(h); h.write_u32(a as u32) }), fx(|h| { start(h); h.write(&(a as u32).to_ne_bytes()) }));
            prop_assert_eq!(fx(|h| { start(h); h.write_u64(a) }), fx(|h| { start(h); h.write(&a.to_ne_bytes()) }));
            prop_assert_eq!(fx(|h| { start(h); h.write_usize(a as usize) }), fx(|h| { start(h); h.write(&(a as usize).to_ne_bytes()) }));
        }
    }

    /// The hashes of a pid (`u32`) and of a packed task key (`u64`), as the byte-wise `write` gave
    /// them before the typed writes (values computed with it): what the tables' orders rest on.
    #[test]
    fn integer_hashes_are_the_byte_wise_ones() {
        use std::hash::Hash;
        let of = |x: &dyn Fn(&mut FxHasher)| fx(|h| x(h));
        assert_eq!(of(&|h| 4242u32.hash(h)), FX_U32_4242);
        assert_eq!(of(&|h| ((4242u64 << 32) | 4250).hash(h)), FX_U64_KEY);
        assert_eq!(of(&|h| (7u32, 9u64).hash(h)), FX_PAIR);
    }

    /// Page counts at the top of u64 (a fuzzed file; review helper-39): the sums saturate instead
    /// of overflowing (a panic in debug builds, nonsense in release).
    #[test]
    fn huge_page_counts_saturate() {
        let m = parse_numa_maps(
            "7f0000000000 default anon=1 N0=18446744073709551615 N1=1 kernelpagesize_kB=4\n\
             7f0000001000 default heap anon=1 N0=4611686018427387904 kernelpagesize_kB=4\n\
             7f0000002000 default stack anon=1 N0=4611686018427387904 kernelpagesize_kB=4\n",
        )
        .unwrap();
        assert_eq!(m.usage_by_policy()[0].resident_kb, u64::MAX);
        let by_node = m.usage_by_node();
        assert_eq!(by_node.iter().find(|u| u.node == 0).map(NodeUsage::total_kb), Some(u64::MAX));
    }

    #[test]
    fn usage_by_policy_counts_vmas_and_resident_memory() {
        let text = "7f00 bind:1 anon=4096 dirty=4096 N1=4096 kernelpagesize_kB=4\n\
                    7f10 default file=/usr/bin/x mapped=3 N0=3 kernelpagesize_kB=4\n\
                    7f20 bind:1 anon=2 dirty=2 N1=2 kernelpagesize_kB=4\n\
                    7f30 bind:1\n\
                    7f40 interleave:0-1 anon=4 dirty=4 N0=2 N1=2 kernelpagesize_kB=4\n";
        let u = parse_numa_maps(text).unwrap().usage_by_policy();
        let got: Vec<(&str, usize, u64)> = u.iter().map(|p| (p.policy.as_str(), p.vmas, p.resident_kb)).collect();
        assert_eq!(got, [("bind:1", 3, (4096 + 2) * 4), ("default", 1, 12), ("interleave:0-1", 1, 16)]);
        // Conservation on a real process: the policies hold every resident kB.
        let m = parse_numa_maps(BASH).unwrap();
        let by_policy: u64 = m.usage_by_policy().iter().map(|p| p.resident_kb).sum();
        let by_node: u64 = m.usage_by_node().iter().map(NodeUsage::total_kb).sum();
        assert_eq!(by_policy, by_node);
        assert_eq!(m.usage_by_policy().iter().map(|p| p.vmas).sum::<usize>(), m.vmas.len());
    }

    #[test]
    fn parses_a_real_process() {
        let m = parse_numa_maps(BASH).unwrap();
        assert_eq!(m.vmas.len(), BASH.lines().count());
        let heap = m.vmas.iter().find(|v| v.kind == VmaKind::Heap).unwrap();
        assert!(heap.resident.as_ref().unwrap().anon > 0 && heap.kernel_page_kb() == Some(4));
        let stack = m.vmas.iter().find(|v| v.kind == VmaKind::Stack).unwrap();
        assert_eq!(stack.node_pages(), &[(0, 4)]);
        let r = stack.resident.as_ref().unwrap();
        assert_eq!(r.mapmax, 3);
        assert_eq!(r.active, Some(1));
        assert!(m.vmas.iter().all(|v| v.policy.mode == PolicyMode::Default));
        assert!(m.vmas.iter().any(|v| v.file.as_deref() == Some("/usr/bin/bash")));
        // Conservation: per-node kB summed over kinds equals the sum over VMAs.
        let total: u64 = m.usage_by_node().iter().map(NodeUsage::total_kb).sum();
        let direct: u64 = m.vmas.iter().flat_map(|v| v.node_kb()).map(|(_, kb)| kb).sum();
        assert_eq!(total, direct);
        assert!(total > 0);
    }

    #[test]
    fn interleave_task_policy_applies_to_every_vma() {
        let m = parse_numa_maps(INTERLEAVE).unwrap();
        assert!(m.vmas.iter().all(|v| v.policy.mode == PolicyMode::Interleave));
        assert!(m.vmas.iter().all(|v| v.policy.nodes.to_list() == "0"));
        let u = m.usage_by_node();
        assert_eq!(u.len(), 1);
        // The 3 MB shell variable lives in the heap.
        assert!(u[0].heap_kb > 3000, "{u:?}");
    }

    #[test]
    fn every_policy_form() {
        let cases = [
            ("default", PolicyMode::Default, "", false, false, false),
            ("local", PolicyMode::Local, "", false, false, false),
            ("prefer:1", PolicyMode::Preferred, "1", false, false, false),
            ("bind:0-1", PolicyMode::Bind, "0-1", false, false, false),
            ("interleave:0-1", PolicyMode::Interleave, "0-1", false, false, false),
            ("weighted interleave:0,2", PolicyMode::WeightedInterleave, "0,2", false, false, false),
            ("prefer (many):0-1", PolicyMode::PreferredMany, "0-1", false, false, false),
            ("bind=static:1", PolicyMode::Bind, "1", true, false, false),
            ("interleave=relative:0-3", PolicyMode::Interleave, "0-3", false, true, false),
            ("bind=balancing:0-1", PolicyMode::Bind, "0-1", false, false, true),
            ("prefer (many)=relative|balancing:0-1", PolicyMode::PreferredMany, "0-1", false, true, true),
            ("unknown", PolicyMode::Unknown, "", false, false, false),
        ];
        for (text, mode, nodes, st, rel, bal) in cases {
            let v = one(&format!("7f0000000000 {text} anon=2 dirty=2 N1=2 kernelpagesize_kB=4"));
            assert_eq!(v.policy.mode, mode, "{text}");
            assert_eq!(v.policy.nodes.to_list(), nodes, "{text}");
            assert_eq!((v.policy.static_nodes, v.policy.relative_nodes, v.policy.balancing), (st, rel, bal));
            assert_eq!(v.policy.to_kernel_string(), text);
            assert_eq!(v.node_pages(), &[(1, 2)]);
            assert_eq!(v.kind, VmaKind::Anon);
        }
    }

    #[test]
    fn hugetlb_counts_are_in_huge_pages() {
        let v = one("7f0000000000 bind:1 file=/anon_hugepage\\040(deleted) huge dirty=4 N1=4 kernelpagesize_kB=2048");
        assert!(v.huge);
        assert_eq!(v.file.as_deref(), Some("/anon_hugepage (deleted)"));
        assert_eq!(v.mem_kind(), MemKind::Huge);
        assert_eq!(v.node_kb().collect::<Vec<_>>(), vec![(1, 8192)]);
        assert_eq!(v.resident.as_ref().unwrap().pages, 4);
        let m = NumaMaps { vmas: vec![v] };
        assert_eq!(m.usage_by_node(), vec![NodeUsage { node: 1, huge_kb: 8192, ..Default::default() }]);
    }

    #[test]
    fn transparent_huge_pages_are_counted_in_base_pages() {
        let v = one("7f1234400000 default anon=1024 dirty=1024 N0=512 N1=512 kernelpagesize_kB=4");
        assert_eq!(v.node_kb().collect::<Vec<_>>(), vec![(0, 2048), (1, 2048)]);
        assert_eq!(v.mem_kind(), MemKind::AnonPrivate);
    }

    #[test]
    fn kinds_and_usage_by_node() {
        let text = "\
55d000000000 default file=/usr/bin/x mapped=10 mapmax=3 N0=10 kernelpagesize_kB=4
55d100000000 default heap anon=6 dirty=6 N0=2 N1=4 kernelpagesize_kB=4
7ffc00000000 default stack anon=3 dirty=3 N1=3 kernelpagesize_kB=4
7f0000000000 interleave:0-1 anon=8 dirty=8 N0=4 N1=4 kernelpagesize_kB=4
7f1000000000 default file=/dev/hugepages/x huge dirty=1 N0=1 kernelpagesize_kB=2048
7f2000000000 default
";
        let m = parse_numa_maps(text).unwrap();
        assert_eq!(m.vmas.len(), 6);
        assert_eq!(m.vmas[5].kernel_page_kb(), None);
        assert!(m.vmas[5].resident.is_none());
        // Default policies are one shared allocation.
        assert!(Arc::ptr_eq(&m.vmas[0].policy, &m.vmas[5].policy));
        let u = m.usage_by_node();
        assert_eq!(
            u,
            vec![
                NodeUsage { node: 0, huge_kb: 2048, heap_kb: 8, stack_kb: 0, anon_kb: 16, file_kb: 40, shared_kb: 40 },
                NodeUsage { node: 1, huge_kb: 0, heap_kb: 16, stack_kb: 12, anon_kb: 16, file_kb: 0, shared_kb: 0 },
            ]
        );
    }

    #[test]
    fn memory_other_processes_map_too_is_counted_as_shared_of_its_kind() {
        // A library's text mapped by 15 processes, a private copy-on-write page of it, anonymous
        // memory partly still shared with a forked parent (mapmax=2: not counted shared, its
        // private pages move) and private anonymous memory.
        let text = "\
7f8d00000000 default file=/usr/lib/libc.so.6 mapped=226 mapmax=15 N1=226 kernelpagesize_kB=4
7f8d10000000 default file=/usr/lib/libc.so.6 anon=2 dirty=2 N1=2 kernelpagesize_kB=4
7f8d20000000 default anon=5 dirty=5 mapmax=2 N0=1 N1=4 kernelpagesize_kB=4
7f8d30000000 default anon=7 dirty=7 N1=7 kernelpagesize_kB=4
";
        let u = parse_numa_maps(text).unwrap().usage_by_node();
        assert_eq!(u[0], NodeUsage { node: 0, anon_kb: 4, ..Default::default() });
        assert_eq!(u[1], NodeUsage { node: 1, anon_kb: 44, file_kb: 912, shared_kb: 904, ..Default::default() });
        assert_eq!(u[1].total_kb(), 956, "shared memory is counted once, in its kind");
    }

    #[test]
    fn many_nodes_and_json_round_trip() {
        let nodes: Vec<String> = (0..12).map(|n| format!("N{n}={}", n + 1)).collect();
        let line = format!("7f0000000000 interleave:0-11 anon=78 dirty=78 {} kernelpagesize_kB=4", nodes.join(" "));
        let v = one(&line);
        assert_eq!(v.node_pages().len(), 12);
        assert_eq!(v.node_pages()[11], (11, 12));
        let m = NumaMaps { vmas: vec![v, one("7f1000000000 default heap anon=1 dirty=1 N3=1 kernelpagesize_kB=4")] };
        let back: NumaMaps = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back, m);
        assert!(matches!(back.vmas[1].resident.as_ref().unwrap().node_pages, NodePages::One((3, 1))));
    }

    #[test]
    fn mapped_is_implied_when_left_out() {
        let v = one("7f0000000000 default anon=5 dirty=5 N0=5 kernelpagesize_kB=4");
        assert_eq!(v.resident.as_ref().unwrap().pages, 5);
        let v = one("7f0000000000 default file=/x mapped=9 mapmax=2 N0=9 kernelpagesize_kB=4");
        let r = v.resident.as_ref().unwrap();
        assert_eq!((r.pages, r.mapmax, r.anon), (9, 2, 0));
    }

    #[test]
    fn thread_stack_form_of_old_kernels_and_escaped_paths() {
        // stack:TID (before 4.5).
        let v = one("7f0000000000 default stack:1234 anon=1 dirty=1 N0=1 kernelpagesize_kB=4");
        assert_eq!(v.kind, VmaKind::Stack);
        let v = one("7f0000000000 default file=/tmp/a\\040b\\011c\\075d\\q mapped=1 N0=1 kernelpagesize_kB=4");
        assert_eq!(v.file.as_deref(), Some("/tmp/a b\tc=d\\q"));
    }

    #[test]
    fn unknown_fields_from_newer_kernels_are_ignored() {
        let v = one("7f0000000000 default anon=1 dirty=1 shiny=7 N0=1 kernelpagesize_kB=4");
        assert_eq!(v.node_pages(), &[(0, 1)]);
    }

    #[test]
    fn truncated_and_malformed_lines_are_errors() {
        let full = "7f8df26f7000 default file=/usr/lib/x86_64-linux-gnu/libc.so.6 anon=4 dirty=4 active=0 N0=4 kernelpagesize_kB=4";
        // Every cut inside the counters (after the first '=') must fail; cuts in the path/kind may parse.
        let first_counter = full.find(" anon=").unwrap();
        for cut in first_counter + 2..full.len() - 1 {
            assert!(parse_numa_maps_line(&full[..cut], 1).is_err(), "cut at {cut}: {:?}", &full[..cut]);
        }
        for cut in 0..13 {
            assert!(parse_numa_maps_line(&full[..cut], 1).is_err(), "cut at {cut}");
        }
        assert!(parse_numa_maps_line("7f8df26f7000 defau", 1).is_err());
        assert!(parse_numa_maps_line("7f8df26f7000 interleave:", 1).is_err());
        assert!(parse_numa_maps_line("7f8df26f7000 interleave:0-", 1).is_err());
        assert!(parse_numa_maps_line("7f8df26f7000 bind=bogus:1", 1).is_err());
        assert!(parse_numa_maps_line("xyz default", 1).is_err());
        assert!(parse_numa_maps_line("7f8df26f7000 default N0=x kernelpagesize_kB=4", 1).is_err());
        assert!(parse_numa_maps_line("7f8df26f7000 default N1=1 N0=1 kernelpagesize_kB=4", 1).is_err());
        assert!(parse_numa_maps_line("7f8df26f7000 default N0=1 kernelpagesize_kB=4 N1=1", 1).is_err());
        assert!(parse_numa_maps_line("7f8df26f7000 default N0=1 kernelpagesize_kB=0", 1).is_err());
        assert!(parse_numa_maps_line("7f8df26f7000 default banana", 1).is_err());
        let e = parse_numa_maps(&format!("{full}\n7f8df26f8000 default anon=1 N0=1\n")).unwrap_err();
        assert_eq!(e.line, 2);
        assert_eq!(e.field, Some("kernelpagesize_kB"));
    }

    #[test]
    fn equal_paths_share_one_allocation() {
        let m = parse_numa_maps(BASH).unwrap();
        let libc: Vec<&Arc<str>> =
            m.vmas.iter().filter_map(|v| v.file.as_ref()).filter(|f| f.ends_with("libc.so.6")).collect();
        assert!(libc.len() >= 2);
        assert!(libc.windows(2).all(|w| Arc::ptr_eq(w[0], w[1])));
    }

    #[test]
    fn empty_file_is_an_empty_map() {
        assert_eq!(parse_numa_maps("").unwrap().vmas.len(), 0);
    }

    proptest! {
        #[test]
        fn arbitrary_input_never_panics(s in "\\PC*") {
            let _ = parse_numa_maps(&s);
        }

        #[test]
        fn tokenish_input_never_panics(words in proptest::collection::vec(
            "(7f[0-9a-f]{8}|default|bind|interleave:0-1|prefer \\(many\\):1|file=/x\\\\04|huge|heap|stack|N[0-9]{1,2}=[0-9]{1,3}|kernelpagesize_kB=[0-9]|anon=[0-9]|=|x=)",
            0..12)) {
            let _ = parse_numa_maps_line(&words.join(" "), 1);
        }

        #[test]
        fn policy_round_trips(mode in 0usize..7, nodes in proptest::collection::btree_set(0u32..64, 1..6),
                              flag in 0usize..4) {
            let mode = [PolicyMode::Preferred, PolicyMode::Bind, PolicyMode::Interleave,
                        PolicyMode::WeightedInterleave, PolicyMode::PreferredMany, PolicyMode::Bind,
                        PolicyMode::Interleave][mode];
            let p = MemPolicy {
                mode,
                static_nodes: flag == 1,
                relative_nodes: flag == 2,
                balancing: flag == 3,
                nodes: nodes.into_iter().collect(),
            };
            let text = p.to_kernel_string();
            let v = parse_numa_maps_line(&format!("7f0000000000 {text} heap"), 1).unwrap();
            prop_assert_eq!(&*v.policy, &p);
            prop_assert_eq!(v.kind, VmaKind::Heap);
        }
    }
}
