//! Page moves under a budget: which pages, to where, how many per call, and how failures count.
//!
//! # Problem
//!
//! Moving a page costs a copy (4 KiB through both memory controllers), a TLB shootdown on every CPU
//! the process runs on, and a stall of any thread touching the page meanwhile. A daemon that moves a
//! 10 GiB process in one call stalls it for seconds. The policy already plans under its own budget;
//! the host enforces one too, over wall time, whatever the policy asks.
//!
//! # Approach
//!
//! ```text
//!   TokenBucket: tokens += rate x dt (capped at one second's worth); a page action may move
//!                min(action.max_pages, tokens) pages; tokens -= pages asked to move
//!
//!   MigratePages(from, to)   pages on `from` (numa_maps, now) <= allowance, and too few to split?
//!                              yes: migrate_pages(pid, from, to)   moved = on_from before - after
//!                                   (made without CAP_SYS_NICE: own pages only, see below)
//!                              no:  page by page, as below, over every mapping (/proc/PID/maps),
//!                                   n-th node of `from` -> n-th node of `to` (the kernel's own remap)
//!   MoveRanges(ranges, to)   pagemap: present pages of the ranges this process alone maps -> move_pages
//!                            query (where is each)
//!   Interleave(ranges,       -> the pages not yet where they belong -> split into up to `threads`
//!     nodes, weights)           contiguous parts (one per MIN_PAGES_PER_THREAD pages), one thread each
//!                               -> move_pages in batches of MOVE_BATCH -> status per page: the node
//!                               (moved) or -errno (counted), or none (the call stopped at a batch
//!                               that partly failed: located by a query) -> those not there and the
//!                               busy ones (EBUSY, EAGAIN) asked again, one call per target node
//!                               (MOVE_RETRIES), the pid's identity checked before every call
//! ```
//!
//! Per-page errors (EBUSY, ENOMEM, EACCES for a shared page, EFAULT, ENOENT for a page freed
//! meanwhile ...) are counted by name in [`Outcome::Partial`]; the call failing as a whole (ESRCH:
//! gone -> [`Outcome::Vanished`]; EPERM -> [`Outcome::Refused`]) is the only other result.
//!
//! A process whose leader has exited while other threads run on is read and moved through one of
//! those threads' ids ([`mm_id`]): its leader has no memory of its own.
//!
//! Units: pages are base pages of `page_size` bytes; the budget is in MB/s (MiB, 2^20 bytes).
//!
//! # Limits
//!
//! `migrate_pages` cannot be told how many pages to move, so a whole-process move is only made
//! with it when the whole amount fits the allowance and is not split over threads (split-copy
//! goes page by page, when the scan covers every page the process alone maps); its page count
//! comes from numa_maps read before and after (other allocations meanwhile blur it by their size). Shared pages are moved
//! only when this process alone maps them (`MPOL_MF_MOVE`): moving them would disturb other
//! processes; they are neither listed for move_pages (pagemap's exclusive bit; it would answer
//! EACCES) nor, in file and shared-memory mappings, counted for migrate_pages, which skips them
//! (anonymous mappings count whole: numa_maps does not say which of their pages a forked parent
//! still shares, and those stay where they are, counted as not moved; it is made
//! from a thread without CAP_SYS_NICE, `numapilot_actuate::migrate_pages_flags`, since as root the
//! kernel would otherwise use `MPOL_MF_MOVE_ALL`; the rig's race measured 1,236 shared file pages
//! of four processes moved with one numa01 worker's 8,192).
//!
//! A move is synchronous: the caller waits in the call. The live host runs page actions on the page
//! mover's thread ([`super::mover`]) so that the daemon's loop does not (in the rig's guests under
//! TCG one 32 MiB move took 1.5-5 s with the process's workers running).

use std::collections::BTreeMap;

use numapilot_actuate::{exclusive_pages, migrate_pages_flags, move_pages, MoveFlags, PageStatus};
use numapilot_observe::parse::numa_maps::VmaKind;
use numapilot_observe::Reader;
use numapilot_policy::Outcome;
use numapilot_topology::NodeSet;

/// Pages per `move_pages` call. Default 4096 pages = 16 MiB with 4 KiB pages. Source: a choice; the
/// kernel takes any count but copies the address and status arrays in and out in one piece. What it
/// prevents: unbounded temporary arrays for a large range, and a single call holding the target's
/// mmap lock for the whole move.
pub const MOVE_BATCH: usize = 4096;

/// Present pages examined per page action, as a multiple of the pages it may move. Default 4. Source:
/// a choice; a range whose pages are mostly in place already is finished over a few actions instead
/// of one. What it prevents: querying the location of every page of a 100 GiB process to move 1,000
/// of them (each query is a page-table walk under the target's mmap lock).
pub const SCAN_FACTOR: usize = 4;

/// A token bucket over wall time: `rate` pages per second, at most one second's worth saved.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate_pages_per_s: f64,
    tokens: f64,
    last_ns: u64,
}

impl TokenBucket {
    /// A full bucket for `mb_per_s` MiB/s of `page_size`-byte pages, at host time `now_ns`.
    pub fn new(mb_per_s: u64, page_size: u64, now_ns: u64) -> Self {
        let rate = mb_per_s as f64 * 1024.0 * 1024.0 / page_size.max(1) as f64;
        Self { rate_pages_per_s: rate, tokens: rate, last_ns: now_ns }
    }

    /// Pages that may move now (refilled for the time since the last call).
    pub fn available(&mut self, now_ns: u64) -> u64 {
        let dt = now_ns.saturating_sub(self.last_ns) as f64 / 1e9;
        self.last_ns = now_ns.max(self.last_ns);
        self.tokens = (self.tokens + dt * self.rate_pages_per_s).min(self.rate_pages_per_s);
        self.tokens.max(0.0) as u64
    }

    /// Takes `pages` from the bucket.
    pub fn take(&mut self, pages: u64) {
        self.tokens -= pages as f64;
    }

    /// Changes the rate to `mb_per_s` MiB/s (a configuration reload) at host time `now_ns`: the
    /// time before it refills at the old rate, what is in the bucket stays (at most the new
    /// rate's one second), a debt stays a debt.
    pub fn set_rate(&mut self, mb_per_s: u64, page_size: u64, now_ns: u64) {
        self.available(now_ns);
        self.rate_pages_per_s = mb_per_s as f64 * 1024.0 * 1024.0 / page_size.max(1) as f64;
        self.tokens = self.tokens.min(self.rate_pages_per_s);
    }
}

/// Pages moved and failures by cause, accumulated over the calls of one action.
#[derive(Debug, Default)]
pub struct PageTally {
    /// Pages now on their target node that were asked to move.
    pub moved: u64,
    /// Failures by errno name.
    pub failed: BTreeMap<String, u64>,
    /// Pages the action set out to move (its list, or the pages on the source nodes).
    pub planned: u64,
    /// Pages handed to the kernel so far (counted before each call): what the copy may have cost,
    /// charged to the budget also when the action stops half-way.
    pub asked: u64,
    /// Most threads one list of moves was split over (split-copy, `move_list`); 0 until a list
    /// is moved, 1 for a single `migrate_pages` call or an unsplit list.
    pub threads: usize,
}

impl PageTally {
    /// The action's outcome.
    pub fn outcome(self) -> Outcome {
        if self.failed.is_empty() {
            Outcome::Applied { pages_moved: self.moved }
        } else {
            Outcome::Partial { pages_moved: self.moved, failed: self.failed.into_iter().collect() }
        }
    }

    /// The outcome of an action that stopped half-way, refused with `why` after `asked` pages
    /// were handed to the kernel: what it moved and what failed, and the pages it did not get to
    /// under "stopped: why"; a plain refusal when nothing was asked yet.
    pub fn stopped(mut self, why: String) -> Outcome {
        if self.asked == 0 {
            return Outcome::Refused { message: why };
        }
        let left = self.planned.saturating_sub(self.asked).max(1);
        self.fail(&format!("stopped: {why}"), left);
        self.outcome()
    }

    fn fail(&mut self, cause: &str, n: u64) {
        if n > 0 {
            *self.failed.entry(cause.to_string()).or_insert(0) += n;
        }
    }

    /// Adds a part's counts (moved, asked, failures) to this tally.
    fn absorb(&mut self, part: PageTally) {
        self.moved += part.moved;
        self.asked += part.asked;
        for (cause, n) in part.failed {
            self.fail(&cause, n);
        }
    }
}

/// The cause a page failure is counted under in `numapilot status` and the metric
/// `numapilot_pages_failed_total{cause}`: one of a bounded set of names. A cause the kernel
/// gave per page (an errno name, `errno N`, `unverified`) is its own class; a move that stopped
/// half-way (`stopped: WHY`, where WHY is the error's full text as the journal keeps it, with the
/// pid and addresses in it) counts as `stopped: SYSCALL ERRNO` when WHY is a failed system call,
/// `stopped: /proc unreadable` when a file of the process could not be read, and `stopped: other`
/// otherwise. Keyed by the full text, every process whose move stopped added a status key and a
/// metric series of its own for the daemon's lifetime (review helper-33).
pub fn cause_class(cause: &str) -> String {
    let Some(why) = cause.strip_prefix("stopped: ") else {
        return cause.to_string();
    };
    let word = |w: &str, ok: fn(char) -> bool| !w.is_empty() && w.chars().all(ok);
    if let Some((head, rest)) = why.split_once(" failed: ") {
        let syscall = head.split('(').next().unwrap_or("");
        let errno = rest.split(':').next().unwrap_or("").trim();
        if word(syscall, |c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            && (word(errno, |c| c.is_ascii_uppercase() || c.is_ascii_digit()) || errno.starts_with("errno "))
        {
            return format!("stopped: {syscall} {errno}");
        }
    }
    if why.starts_with("reading /proc/") {
        return "stopped: /proc unreadable".into();
    }
    "stopped: other".into()
}

/// Why a page action stopped as a whole.
#[derive(Debug)]
pub enum Stop {
    /// The process is gone: confirmed by /proc/PID/stat (missing, a different start time, or a
    /// zombie that has released its memory), never assumed from a failed read (a stat that could
    /// not be read for want of a descriptor or memory says nothing: not gone).
    Gone,
    /// The kernel refused the call (EPERM, EINVAL ...) or a file of a live process could not be
    /// read, with the message.
    Refused(String),
}

/// Processes whose page moves stop at their next call to the kernel, `(pid, start time, why)`:
/// released from numapilot's hands (excluded, or out of `[include]`) while a move of theirs ran on
/// the page mover, the daemon stopping, a move given up as stuck ([`stop_moves_of`]). A new move of
/// the process clears its entry ([`moves_allowed`]).
static STOPPED: std::sync::Mutex<Vec<(u32, u64, &'static str)>> = std::sync::Mutex::new(Vec::new());

/// Why a move was asked to stop ([`stop_moves_of`]), as its outcome says it.
pub const STOP_RELEASED: &str = "released from numapilot's hands (excluded, or out of [include]) while its pages moved";
/// The daemon is stopping (its restore comes next).
pub const STOP_SHUTDOWN: &str = "the daemon is stopping";
/// Given up as stuck in the kernel (rule stuck-move-abandoned), its call returned since.
pub const STOP_STUCK: &str = "given up as stuck in the kernel (its memory map locked?) before its call returned";

/// Entries of [`STOPPED`] kept at most, unit processes. Default 1,024. Source: a choice, far more
/// than processes released while their pages move. What it prevents: the list growing without
/// bound when processes are released and never moved again (the oldest go first).
const STOPPED_KEPT: usize = 1024;

/// Asks every page move of `(pid, starttime)` in flight (on any thread) to stop before its next
/// call to the kernel: the rest of its pages stay where they are, and the move reports what it
/// moved and "stopped: ..." for the rest.
pub fn stop_moves_of(pid: u32, starttime: u64, why: &'static str) {
    let mut v = STOPPED.lock().unwrap_or_else(|e| e.into_inner());
    v.retain(|&(p, st, _)| (p, st) != (pid, starttime));
    if v.len() >= STOPPED_KEPT {
        v.remove(0);
    }
    v.push((pid, starttime, why));
}

/// Lets page moves of `(pid, starttime)` run again (a new action on it: `apply` checked its
/// exclusions first).
pub fn moves_allowed(pid: u32, starttime: u64) {
    STOPPED.lock().unwrap_or_else(|e| e.into_inner()).retain(|&(p, st, _)| (p, st) != (pid, starttime));
}

/// Whether the moves of `(pid, starttime)` were asked to stop ([`stop_moves_of`]): the refusal to
/// return then.
fn stopped(pid: u32, starttime: u64) -> Result<(), Stop> {
    let v = STOPPED.lock().unwrap_or_else(|e| e.into_inner());
    match v.iter().find(|&&(p, st, _)| (p, st) == (pid, starttime)) {
        Some((_, _, why)) => Err(Stop::Refused((*why).to_string())),
        None => Ok(()),
    }
}

/// What a failure on `pid` means: [`Stop::Gone`] only when /proc/PID/stat confirms the process
/// `(pid, starttime)` no longer exists (stat missing, another start time: the pid was reused, or
/// state X, or Z with no thread left: it exited and its memory is gone); otherwise
/// [`Stop::Refused`] with `why`, also when the stat itself could not be read for want of a file
/// descriptor or memory (EMFILE, ENOMEM ...: [`super::select::stat_now`]): such a read said
/// "gone", and the engine forgot a live process when the daemon ran out of descriptors.
///
/// A read of numa_maps, maps or pagemap can fail, or come back empty, for a process that is alive
/// (EINVAL/EIO from a seq_file racing a page migration, a parse error on a kernel's new field);
/// calling that "vanished" made the engine forget a live process it had half moved (the 2-node
/// rig: a worker left with 32 MiB on the wrong node for the rest of the run).
///
/// A leader that exited while other threads run on (`pthread_exit` in main) is a zombie too, but
/// not gone: its threads run, on the placement numapilot gave them, and its memory is theirs
/// (calls through the leader's pid fail: it has no memory of its own). Its state Z alone made it
/// gone, and the engine forgot a process that still ran (review helper-79).
pub fn confirm_stop(pid: u32, starttime: u64, why: impl FnOnce() -> String) -> Stop {
    match super::select::stat_now(pid) {
        Err(e) => Stop::Refused(format!("{} (whether it is still there is unknown: /proc/{pid}/stat: {e})", why())),
        Ok(Some(st)) if st.starttime == starttime && !st.is_zombie() && !matches!(st.state, 'X' | 'x') => {
            if st.state == 'Z' {
                // `num_threads` counts the zombie leader until the last thread goes.
                Stop::Refused(main_thread_exited(&why(), st.num_threads.saturating_sub(1)))
            } else {
                Stop::Refused(why())
            }
        }
        Ok(_) => Stop::Gone,
    }
}

/// Ok when `pid` still names the process of `starttime` (the check before each page call);
/// otherwise what [`confirm_stop`] makes of it: gone only when its stat says so, a refusal when
/// the stat could not be read. `same_process` alone took an unreadable stat for gone.
fn still_same(pid: u32, starttime: u64, call: &str) -> Result<(), Stop> {
    if super::select::same_process(pid, starttime) {
        return Ok(());
    }
    Err(confirm_stop(pid, starttime, || format!("{call}: not made")))
}

/// The mapped ranges of `pid` from /proc/PID/maps, `(start, len)`, without the kernel's special
/// mappings (`[vsyscall]`, `[vvar]`, `[vdso]`), which have no movable pages. Err: see
/// [`confirm_stop`]; the stop's reason when the moves of `pid` were asked to stop
/// ([`stop_moves_of`]: a page move's read of maps, as of pagemap, is the next call it makes).
pub fn mapped_ranges(pid: u32, starttime: u64) -> Result<Vec<(u64, u64)>, Stop> {
    stopped(pid, starttime)?;
    let id = mm_id(pid);
    ranges_in(&format!("/proc/{id}/maps"), pid, starttime, numapilot_observe::reader::MAX_FILE_BYTES)
}

/// The id the page calls of process `pid` go through: `pid` itself, or, when its leader has
/// exited while other threads run on, one of those threads ([`Reader::mm_thread`]). The kernel
/// takes the memory of the task a call names, and such a leader has none: its maps and pagemap
/// read empty and `move_pages` or `migrate_pages` through its pid fail (EINVAL), so the pages of a
/// process that still ran were never moved. The thread was listed under /proc/PID/task, so it is
/// of the process that `pid` and its start time name (the callers check those first, as for the
/// pid itself). Should that thread exit between the listing and the call, the call fails as for a
/// gone task and [`confirm_stop`] asks the leader's stat what that means; should its id also be
/// reused by a new task in that window, the call reaches that task's memory: the same window the
/// pid check before every call leaves (no pidfd form of `move_pages` closes it), opened here by
/// one thread's exit rather than the whole process's, and only for a process whose leader exited.
pub fn mm_id(pid: u32) -> u32 {
    Reader::new("/").mm_thread(pid).unwrap_or(pid)
}

/// [`mapped_ranges`] from the maps file at `path`, read up to `cap` bytes
/// ([`numapilot_observe::reader::MAX_FILE_BYTES`] live), as every /proc file the daemon reads: a user's
/// process controls its maps' size (one line per mapping, each as long as the mapped file's path,
/// up to 4 kB), and a larger one refuses this move (counted and reported) instead of the root
/// daemon holding gigabytes.
fn ranges_in(path: &str, pid: u32, starttime: u64, cap: usize) -> Result<Vec<(u64, u64)>, Stop> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(cap as u64 + 1).read_to_end(&mut bytes))
        .map_err(|e| confirm_stop(pid, starttime, || format!("reading {path}: {e}")))?;
    if bytes.len() > cap {
        return Err(confirm_stop(pid, starttime, || format!("{path} is larger than {} MiB: not read", cap >> 20)));
    }
    // A mapped file's name is bytes, not UTF-8.
    let text = numapilot_observe::reader::text_of(&bytes);
    let mut out = Vec::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let Some((a, b)) = f.next().and_then(|r| r.split_once('-')) else { continue };
        let name = f.nth(4).unwrap_or("");
        if matches!(name, "[vsyscall]" | "[vvar]" | "[vdso]" | "[vvar_vclock]") {
            continue;
        }
        if let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) {
            if b > a {
                out.push((a, b - a));
            }
        }
    }
    Ok(out)
}

/// Base pages of `pid` per node from numa_maps now that an own-pages move can move: file and
/// shared-memory mappings whose pages some other process maps too (`mapmax` > 1: a library's
/// text, shared page cache) are left out. Counted, they made a numa01 worker's move (its 8,192
/// pages and ~1,100 shared library pages on the same node) look larger than its allowance, which
/// sent it page by page and had every shared page refused (EACCES) and reported as a failure (the
/// rig's race at 9f50e43: two moves "partial", 1,139 and 1,206 EACCES). Anonymous mappings count
/// whatever their `mapmax`, as the model's own memory counts them (`NodeUsage::shared_kb`): a
/// worker forked without exec that wrote its heap keeps a few pages of it shared with its parent,
/// `mapmax` 2 on the whole mapping, and `migrate_pages` moves the rest of it. Left out, that
/// heap was neither moved (nothing else remote: no call made) nor counted when another page's
/// move made the call, and the policy heard "0 pages moved" of a heap that could move. Err: see
/// [`confirm_stop`] (a read or parse error of a live process is `Refused` with the message).
pub fn pages_by_node(reader: &Reader, pid: u32, starttime: u64, page_size: u64) -> Result<BTreeMap<u32, u64>, Stop> {
    let maps = match reader.read_numa_maps(pid) {
        Ok(Some(m)) => m,
        Ok(None) => {
            return Err(confirm_stop(pid, starttime, || {
                format!("/proc/{pid}/numa_maps could not be read (ENOENT/ESRCH/EINVAL) although the process is there")
            }))
        }
        Err(e) => return Err(confirm_stop(pid, starttime, || e.to_string())),
    };
    let mut out = BTreeMap::new();
    let shared = |v: &&numapilot_observe::parse::numa_maps::Vma| {
        v.kind == VmaKind::File && v.resident.as_ref().is_some_and(|r| r.mapmax > 1)
    };
    for vma in maps.vmas.iter().filter(|v| !shared(v)) {
        for (node, kb) in vma.node_kb() {
            *out.entry(node).or_insert(0) += kb * 1024 / page_size.max(1);
        }
    }
    Ok(out)
}

/// The present pages of `ranges` in `pid` that it alone maps (the pages an own-pages move can
/// move; pagemap bit 56), at most `limit`.
fn present(pid: u32, starttime: u64, ranges: &[(u64, u64)], page_size: u64, limit: usize) -> Result<Vec<usize>, Stop> {
    let mut out = Vec::new();
    let id = mm_id(pid);
    for &(start, len) in ranges {
        if out.len() >= limit {
            break;
        }
        // A move asked to stop reads no further pagemap (the read that just returned may have
        // waited behind the process's locked memory map; the next would wait again).
        stopped(pid, starttime)?;
        match returned(exclusive_pages(id, start, len, page_size, limit - out.len())) {
            Ok(Some(p)) => out.extend(p),
            Ok(None) => {
                return Err(confirm_stop(pid, starttime, || {
                    format!("/proc/{id}/pagemap could not be read (ENOENT/ESRCH)")
                }))
            }
            Err(e) => return Err(confirm_stop(pid, starttime, || format!("reading /proc/{id}/pagemap: {e}"))),
        }
    }
    Ok(out)
}

/// Calls the page code has had back from the kernel (pagemap reads, `move_pages`,
/// `migrate_pages`), since the daemon started: the page mover's sign of progress
/// ([`super::mover::Mover::poll`]: a move none of whose calls returns, and whose threads spend
/// no CPU time, for the mover's limit, [`super::mover::STUCK_MOVE_S`] by default, is stuck in the
/// kernel).
static PAGE_CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// [`PAGE_CALLS`] now.
pub fn page_calls() -> u64 {
    PAGE_CALLS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Counts a call that returned ([`PAGE_CALLS`]) and passes its result on.
fn returned<T>(result: T) -> T {
    PAGE_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    result
}

/// Where each page is now (move_pages query), in batches.
fn where_are(pid: u32, starttime: u64, pages: &[usize]) -> Result<Vec<PageStatus>, Stop> {
    let mut out = Vec::with_capacity(pages.len());
    let id = mm_id(pid);
    for chunk in pages.chunks(MOVE_BATCH) {
        match returned(move_pages(id as libc::pid_t, chunk, None, MoveFlags::Own)) {
            Ok(o) => out.extend(o.status),
            // ESRCH, or EINVAL once an exiting process's memory is gone: confirmed, not assumed.
            Err(e) => {
                return Err(confirm_stop(pid, starttime, || format!("move_pages: {e} for a process that is there")))
            }
        }
    }
    Ok(out)
}

/// Fewest pages one thread of a split copy takes (split-copy, `move_list`). Default 1024 pages
/// (4 MiB of 4 KiB pages). Source: a choice; a thread costs tens of microseconds to start, 4 MiB
/// takes milliseconds to migrate on hardware (about a GB/s per caller, Nimble, ASPLOS 2019) and
/// a tenth of a second and more under the rig's TCG. Prevents: small moves paying for threads
/// that save nothing, and a move cut into slivers too small to keep a thread busy.
pub const MIN_PAGES_PER_THREAD: usize = 1024;

/// Threads a list of `pages` moves is split over when up to `threads` may be used: one per
/// [`MIN_PAGES_PER_THREAD`] pages, at least 1, at most `threads`.
pub fn split_count(pages: usize, threads: usize) -> usize {
    (pages / MIN_PAGES_PER_THREAD).clamp(1, threads.max(1))
}

/// Moves `(page, node)` pairs, counting the result in `tally`, split over up to `threads`
/// threads (rule "split-copy", `mover.rs`; see [`run_parts`]), each part by [`move_part`].
fn move_list(pid: u32, starttime: u64, moves: &[PageMove], tally: &mut PageTally, threads: usize) -> Result<(), Stop> {
    tally.planned = tally.planned.max(moves.len() as u64);
    let k = split_count(moves.len(), threads);
    run_parts(moves, k, tally, |part, t| move_part(pid, starttime, part, t))
}

/// Runs `work` over `k` contiguous parts of `moves`, each on a thread of its own (which inherits
/// the caller's CPUs: the destination's, on the page mover), the first part on the caller's. The
/// parts' counts add up in `tally`, and `tally.threads` is the threads that moved a part (1 when
/// the caller alone did; 0 for an empty list). A part that finds the process gone makes the whole
/// `Gone`, else the first refusal is the whole's (every part's moved pages and failures still
/// count). A thread that cannot be started leaves its part to the caller; one that panics has its
/// whole part charged as asked and "unverified" (it may have moved any of it).
fn run_parts<F>(moves: &[PageMove], k: usize, tally: &mut PageTally, work: F) -> Result<(), Stop>
where
    F: Fn(&[PageMove], &mut PageTally) -> Result<(), Stop> + Sync,
{
    if moves.is_empty() {
        return Ok(());
    }
    if k <= 1 {
        tally.threads = tally.threads.max(1);
        return work(moves, tally);
    }
    let per = moves.len().div_ceil(k);
    let mut parts = moves.chunks(per);
    let first = parts.next().unwrap_or_default();
    let one = |part: &[PageMove]| {
        let mut t = PageTally::default();
        let r = work(part, &mut t);
        (t, r)
    };
    let one = &one;
    let (results, started) = std::thread::scope(|scope| {
        let mut here = vec![first];
        let mut spawned = Vec::new();
        for part in parts {
            let b = std::thread::Builder::new().name("numapilot-copy".into());
            match b.spawn_scoped(scope, move || one(part)) {
                Ok(h) => spawned.push((h, part.len() as u64)),
                Err(_) => here.push(part),
            }
        }
        let started = spawned.len();
        let mut out: Vec<(PageTally, Result<(), Stop>)> = here.into_iter().map(one).collect();
        for (h, len) in spawned {
            out.push(h.join().unwrap_or_else(|_| {
                let mut t = PageTally { asked: len, ..PageTally::default() };
                t.fail("unverified", len);
                (t, Err(Stop::Refused("a page-copy thread panicked".into())))
            }));
        }
        (out, started)
    });
    tally.threads = tally.threads.max(1 + started);
    let mut end = Ok(());
    for (part, r) in results {
        tally.absorb(part);
        match (r, &end) {
            (Err(Stop::Gone), _) => end = Err(Stop::Gone),
            (Err(e), Ok(())) => end = Err(e),
            _ => {}
        }
    }
    end
}

/// Further calls for the pages of a batch that did not move for a passing reason: left without a
/// status when the kernel stopped at a batch that partly failed ([`PageStatus::Unreported`],
/// located by a query first: most of them did move), or busy (EBUSY, EAGAIN: isolated or locked
/// by a concurrent migration or fault). A retry comes [`RETRY_PAUSE`] later and makes one call
/// per target node, so that a page that fails again stops only the pages bound for its own node
/// (the kernel's batch is a run of pages with one target, and it stops at the first run that
/// partly fails). Default 2. Source: a choice; the kernel itself tries a busy page 10 times
/// within a call (`NR_MAX_MIGRATE_PAGES_RETRY`, mm/migrate.c). Prevents: one busy page costing
/// the rest of its 4,096-page batch (the kernel's statuses stop there: the rig's race, two copy
/// threads, had a whole 4,095-page part read "not moved"), and retrying for ever a page pinned
/// for good.
pub const MOVE_RETRIES: usize = 2;

/// Pause before a retry of [`MOVE_RETRIES`]. Default 1 ms. Source: a choice, about the time one
/// 4 KiB page takes to migrate under the rig's TCG (32 MiB in 1.5-5 s: 0.2-0.6 ms a page), so a
/// page busy in a concurrent migration or fault is likely free again. Prevents: a retry that
/// meets the same transient state it just failed on.
pub const RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(1);

/// One thread's part of [`move_list`]: batches of [`MOVE_BATCH`]; pages without a status are
/// located, and those and busy ones asked again ([`MOVE_RETRIES`]). The process is checked
/// (pid and start time) before every call, retries and look-ups included.
fn move_part(pid: u32, starttime: u64, moves: &[PageMove], tally: &mut PageTally) -> Result<(), Stop> {
    for chunk in moves.chunks(MOVE_BATCH) {
        // Released meanwhile: the rest stays where it is (before it is counted as asked).
        stopped(pid, starttime)?;
        tally.asked += chunk.len() as u64;
        let mut calls: Vec<Vec<PageMove>> = vec![chunk.to_vec()];
        for attempt in 0..=MOVE_RETRIES {
            let last = attempt == MOVE_RETRIES;
            if attempt > 0 {
                std::thread::sleep(RETRY_PAUSE);
            }
            let mut again = Vec::new();
            for pending in &calls {
                // A move runs for seconds: every call first checks that the pid still names the
                // process (a reused pid's pages at the same addresses are never touched).
                still_same(pid, starttime, "move_pages")?;
                let pages: Vec<usize> = pending.iter().map(|m| m.0).collect();
                let nodes: Vec<u32> = pending.iter().map(|m| m.1).collect();
                let id = mm_id(pid);
                let o = match returned(move_pages(id as libc::pid_t, &pages, Some(&nodes), MoveFlags::Own)) {
                    Ok(o) => o,
                    Err(e) => {
                        return Err(confirm_stop(pid, starttime, || {
                            format!("move_pages: {e} for a process that is there")
                        }))
                    }
                };
                let (busy, unreported) = sort_moved(&o.status, pending, last, tally);
                again.extend(busy);
                if !unreported.is_empty() {
                    // Where are they? Those on their target moved in the batch that stopped the
                    // call; a look-up that fails leaves them "unverified" (counted, not lost).
                    let pages: Vec<usize> = unreported.iter().map(|m| m.0).collect();
                    let now = still_same(pid, starttime, "move_pages").and_then(|()| where_are(pid, starttime, &pages));
                    // A call with one target that ended in an errno (that node out of memory, not
                    // allowed, without memory) would meet it again: its pages not there count
                    // under it. With several targets the pages are asked again, one call per node.
                    let single = pending.iter().all(|m| m.1 == pending[0].1);
                    let errno = o.error.filter(|_| single);
                    match now {
                        Ok(now) => again.extend(sort_located(&now, &unreported, last, errno, tally)),
                        Err(e) => {
                            tally.fail("unverified", unreported.len() as u64);
                            return Err(e);
                        }
                    }
                }
            }
            if again.is_empty() {
                break;
            }
            calls = by_target(again);
        }
    }
    Ok(())
}

/// The pages of `moves` grouped by target node, one list per node (in node order, each in the
/// order given): the calls of a retry.
fn by_target(moves: Vec<PageMove>) -> Vec<Vec<PageMove>> {
    let mut by: BTreeMap<u32, Vec<PageMove>> = BTreeMap::new();
    for m in moves {
        by.entry(m.1).or_default().push(m);
    }
    by.into_values().collect()
}

/// One page to move: its address in the process and its target node.
type PageMove = (usize, u32);

/// Counts the statuses of one `move_pages` call over `pending` in `tally`: moved (on its target),
/// failed (by errno; "not-migrated" when left elsewhere without one). Returns the pages to ask
/// again (busy, unless this was the `last` attempt) and those without a status (to be located).
fn sort_moved(
    status: &[PageStatus],
    pending: &[PageMove],
    last: bool,
    tally: &mut PageTally,
) -> (Vec<PageMove>, Vec<PageMove>) {
    let (mut again, mut unreported) = (Vec::new(), Vec::new());
    for (s, &m) in status.iter().zip(pending) {
        match *s {
            PageStatus::Node(n) if n == m.1 => tally.moved += 1,
            // The kernel left it elsewhere without a per-page error.
            PageStatus::Node(_) => tally.fail("not-migrated", 1),
            PageStatus::Failed(e) if (e == libc::EBUSY || e == libc::EAGAIN) && !last => again.push(m),
            PageStatus::Failed(e) => tally.fail(&numapilot_actuate::errno_name(e), 1),
            PageStatus::Unreported => unreported.push(m),
        }
    }
    (again, unreported)
}

/// Counts where the pages a call left without a status are now (`now`, a query): on their target
/// they moved; elsewhere they count under `errno` when the call ended in one for their node, else
/// they are asked again unless this was the `last` attempt ("not-migrated" then); a query error
/// (the page unmapped meanwhile) is counted by errno.
fn sort_located(
    now: &[PageStatus],
    unreported: &[PageMove],
    last: bool,
    errno: Option<i32>,
    tally: &mut PageTally,
) -> Vec<PageMove> {
    let mut again = Vec::new();
    for (s, &m) in now.iter().zip(unreported) {
        match (*s, errno) {
            (PageStatus::Node(n), _) if n == m.1 => tally.moved += 1,
            (PageStatus::Node(_), Some(e)) => tally.fail(&numapilot_actuate::errno_name(e), 1),
            (PageStatus::Node(_), None) if !last => again.push(m),
            (PageStatus::Node(_) | PageStatus::Unreported, _) => tally.fail("not-migrated", 1),
            (PageStatus::Failed(e), _) => tally.fail(&numapilot_actuate::errno_name(e), 1),
        }
    }
    again
}

/// Moves the present pages of `ranges` so that page `i` of them goes to `target(i, node now)`, at
/// most `allowance` moves, split over up to `threads` threads (`move_list`). Returns the number
/// of moves asked for.
///
/// `skip_in_place`: leave out pages already on their target (the host always does: they cost no
/// copy and must not use the budget or count as moved). Without it every present page with a
/// target is handed to the kernel, which reports an in-place page as on its node; only a test on a
/// single-node machine, where every page is already in place, wants that, to drive the kernel's
/// move path (per-page errors, batch sizes) for real.
#[allow(clippy::too_many_arguments)]
pub fn move_to_targets(
    pid: u32,
    starttime: u64,
    ranges: &[(u64, u64)],
    page_size: u64,
    allowance: u64,
    skip_in_place: bool,
    mut target: impl FnMut(usize, u32) -> Option<u32>,
    tally: &mut PageTally,
    threads: usize,
) -> Result<u64, Stop> {
    let scan = (allowance as usize).saturating_mul(SCAN_FACTOR).max(MOVE_BATCH);
    let pages = present(pid, starttime, ranges, page_size, scan)?;
    // Asked to stop while the pages were listed (released, shutdown, or given up as stuck while
    // that read waited behind a locked memory map): no query, no move; the stop is reported, not
    // a move of nothing.
    stopped(pid, starttime)?;
    let status = where_are(pid, starttime, &pages)?;
    let mut moves = Vec::new();
    for (i, (&page, s)) in pages.iter().zip(&status).enumerate() {
        if moves.len() as u64 >= allowance {
            break;
        }
        let now = match *s {
            PageStatus::Node(n) => n,
            // Not locatable (never touched since the pagemap read, or gone): nothing to move.
            PageStatus::Failed(_) | PageStatus::Unreported if skip_in_place => continue,
            PageStatus::Failed(_) | PageStatus::Unreported => u32::MAX,
        };
        if let Some(to) = target(i, now) {
            if to != now || !skip_in_place {
                moves.push((page, to));
            }
        }
    }
    move_list(pid, starttime, &moves, tally, threads)?;
    Ok(moves.len() as u64)
}

/// The page-by-page stand-in for migrate_pages: the n-th node of `from` goes to the n-th node of
/// `to` (wrapping when `to` is shorter), as the kernel's `node_remap`; nodes of `from` that are in
/// `to` stay. The kernel's `do_migrate_pages` differs there: with `from` and `to` of the same size
/// it moves those nodes too (its own comment: "\[2,3,4\] -> \[3,4,5\] moves everything"). The policies
/// ask for disjoint sets, where both agree (review note).
pub fn remap(from: &NodeSet, to: &NodeSet, node: u32) -> Option<u32> {
    if !from.contains(node) || to.contains(node) {
        return None;
    }
    let idx = from.iter().position(|n| n == node)?;
    let tos: Vec<u32> = to.iter().collect();
    tos.get(idx % tos.len().max(1)).copied()
}

/// A whole-process MigratePages within `allowance` pages (see the module essay), numa_maps read
/// through `reader` (the daemon's: under its stall guard); with `threads`
/// above 1 and enough pages to split ([`split_count`]), page by page over up to `threads` threads
/// instead of one `migrate_pages` call (split-copy, `mover.rs`).
#[allow(clippy::too_many_arguments)]
pub fn migrate(
    reader: &Reader,
    pid: u32,
    starttime: u64,
    from: &NodeSet,
    to: &NodeSet,
    page_size: u64,
    allowance: u64,
    tally: &mut PageTally,
    threads: usize,
) -> Result<u64, Stop> {
    let before = pages_by_node(reader, pid, starttime, page_size)?;
    let on_from: u64 = before.iter().filter(|(n, _)| from.contains(**n) && !to.contains(**n)).map(|(_, p)| p).sum();
    if on_from == 0 {
        return Ok(0);
    }
    // Split only when the page-by-page scan below covers every page the process alone maps (it
    // stops after `allowance x SCAN_FACTOR` present pages, wherever they are): otherwise pages
    // already in place could fill the scan and the same move would find nothing to move, time
    // after time, where one migrate_pages call moves them all.
    let all: u64 = before.values().sum();
    let scan = allowance.saturating_mul(SCAN_FACTOR as u64).max(MOVE_BATCH as u64);
    let split = split_count(usize::try_from(on_from).unwrap_or(usize::MAX), threads) > 1 && all <= scan;
    if on_from <= allowance && !split {
        tally.threads = 1;
        still_same(pid, starttime, "migrate_pages")?;
        stopped(pid, starttime)?;
        tally.planned = on_from;
        tally.asked = on_from;
        // Own pages only: as root, plain migrate_pages would move the page cache other processes map too.
        // ESRCH, or EINVAL once an exiting process's memory is gone: confirmed, not assumed. An
        // error after some pages moved (ENOMEM on a later node pair) still counts what moved.
        let id = mm_id(pid);
        let (not_moved, failed) = match returned(migrate_pages_flags(id as libc::pid_t, from, to, MoveFlags::Own)) {
            Ok(n) => (n, None),
            Err(e) => {
                match confirm_stop(pid, starttime, || format!("migrate_pages: {e} for a process that is there")) {
                    Stop::Gone => return Err(Stop::Gone),
                    refused => (0, Some(refused)),
                }
            }
        };
        match pages_by_node(reader, pid, starttime, page_size) {
            Ok(after) => {
                let left: u64 =
                    after.iter().filter(|(n, _)| from.contains(**n) && !to.contains(**n)).map(|(_, p)| p).sum();
                tally.moved += on_from.saturating_sub(left);
            }
            // The move was made; only its count is unknown (numa_maps of the live process did not
            // read after it): every page asked for is reported as unverified, not as moved.
            Err(Stop::Refused(_)) => tally.fail("unverified", on_from.saturating_sub(not_moved)),
            Err(Stop::Gone) => return Err(Stop::Gone),
        }
        if let Some(stop) = failed {
            return Err(stop);
        }
        // The kernel's count is of folios (a THP counts 1): a lower bound of the pages left.
        tally.fail("not-migrated", not_moved);
        return Ok(on_from);
    }
    let ranges = mapped_ranges(pid, starttime)?;
    move_to_targets(pid, starttime, &ranges, page_size, allowance, true, |_, now| remap(from, to, now), tally, threads)
}

/// Node for page `i` of a weighted interleave over `nodes` with `weights` (equal when empty): a
/// repeating pattern of `weight[k]` pages per node k.
pub fn interleave_target(nodes: &[u32], weights: &[u32], i: usize) -> Option<u32> {
    if nodes.is_empty() {
        return None;
    }
    let w: Vec<u64> = if weights.len() == nodes.len() {
        weights.iter().map(|&x| u64::from(x)).collect()
    } else {
        vec![1; nodes.len()]
    };
    let total: u64 = w.iter().sum();
    if total == 0 {
        return Some(nodes[i % nodes.len()]);
    }
    let mut r = i as u64 % total;
    for (k, &wk) in w.iter().enumerate() {
        if r < wk {
            return Some(nodes[k]);
        }
        r -= wk;
    }
    nodes.last().copied()
}

/// A refusal of a process whose main thread has exited while `left` other threads run on, the
/// verb agreeing with the count ("1 other thread runs on", "2 other threads run on").
fn main_thread_exited(why: &str, left: u32) -> String {
    let runs = if left == 1 { "runs" } else { "run" };
    format!("{why} (its main thread has exited; {} {runs} on)", numapilot_topology::plural(left, "other thread"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The count of the threads left and its verb agree (it said "1 other thread(s) run on").
    #[test]
    fn a_main_thread_gone_says_how_many_threads_run_on_in_agreeing_words() {
        assert_eq!(
            main_thread_exited("move_pages: Invalid argument", 1),
            "move_pages: Invalid argument (its main thread has exited; 1 other thread runs on)"
        );
        assert_eq!(
            main_thread_exited("move_pages: Invalid argument", 2),
            "move_pages: Invalid argument (its main thread has exited; 2 other threads run on)"
        );
    }

    #[test]
    fn a_stopped_moves_cause_is_counted_without_its_pid() {
        let err = |pid: u32| {
            numapilot_actuate::Error::Syscall {
                syscall: "migrate_pages",
                args: format!("pid={pid}, from=0, to=1"),
                errno: libc::EPERM,
            }
            .to_string()
        };
        let (a, b) = (err(101), err(202));
        assert_ne!(a, b);
        let stopped = |why: String| {
            let t = PageTally { planned: 10, asked: 4, ..PageTally::default() };
            match t.stopped(why) {
                Outcome::Partial { failed, .. } => failed.into_iter().next().unwrap().0,
                o => panic!("{o:?}"),
            }
        };
        assert_eq!(cause_class(&stopped(a)), "stopped: migrate_pages EPERM");
        assert_eq!(cause_class(&stopped(b)), "stopped: migrate_pages EPERM");
        assert_eq!(
            cause_class(&stopped("reading /proc/77/maps: Permission denied".into())),
            "stopped: /proc unreadable"
        );
        assert_eq!(cause_class(&stopped("a page-copy thread panicked".into())), "stopped: other");
        for per_page in ["ENOMEM", "EBUSY", "errno 200", "unverified"] {
            assert_eq!(cause_class(per_page), per_page);
        }
    }

    #[test]
    fn a_move_refused_half_way_reports_what_it_moved() {
        // Nothing handed to the kernel yet: a plain refusal.
        let t = PageTally { planned: 4096, ..PageTally::default() };
        assert_eq!(t.stopped("EPERM".into()), Outcome::Refused { message: "EPERM".into() });
        // Two batches of a 4,096-page list asked, 1,000 moved, 24 busy, then a refusal: the
        // moved pages and the failures are reported, and the pages it did not get to.
        let mut t = PageTally { planned: 4096, asked: 1024, moved: 1000, ..PageTally::default() };
        t.fail("EBUSY", 24);
        assert_eq!(
            t.stopped("Operation not permitted".into()),
            Outcome::Partial {
                pages_moved: 1000,
                failed: vec![("EBUSY".into(), 24), ("stopped: Operation not permitted".into(), 3072)],
            }
        );
    }

    #[test]
    fn a_copy_is_split_one_thread_per_four_mib_up_to_the_threads_allowed() {
        assert_eq!(split_count(0, 4), 1);
        assert_eq!(split_count(2 * MIN_PAGES_PER_THREAD - 1, 4), 1);
        assert_eq!(split_count(2 * MIN_PAGES_PER_THREAD, 4), 2);
        assert_eq!(split_count(100 * MIN_PAGES_PER_THREAD, 4), 4);
        assert_eq!(split_count(100 * MIN_PAGES_PER_THREAD, 1), 1);
        assert_eq!(split_count(100 * MIN_PAGES_PER_THREAD, 0), 1, "0 threads allowed still moves");
    }

    /// A call that stopped at a batch that partly failed: the pages it left without a status are
    /// located, and those not on their target, like busy ones, are asked again, except after the
    /// last attempt, when they count as failures. Never read as moved (or as on node 0).
    #[test]
    fn pages_left_without_a_status_are_located_and_busy_ones_asked_again() {
        use PageStatus::{Failed, Node, Unreported};
        let pending: Vec<(usize, u32)> = (0..6).map(|i| (0x1000 * (i + 1), 1)).collect();
        let status = [Node(1), Failed(libc::EBUSY), Unreported, Failed(libc::EACCES), Node(0), Unreported];
        let mut t = PageTally::default();
        let (again, unreported) = sort_moved(&status, &pending, false, &mut t);
        assert_eq!((again, unreported.clone()), (vec![pending[1]], vec![pending[2], pending[5]]));
        assert_eq!(t.moved, 1);
        assert_eq!(t.failed, BTreeMap::from([("EACCES".into(), 1), ("not-migrated".into(), 1)]));
        // Located: the first moved with its batch, the second did not.
        let again = sort_located(&[Node(1), Node(0)], &unreported, false, None, &mut t);
        assert_eq!((again, t.moved), (vec![pending[5]], 2));
        // The last attempt: busy and elsewhere are final.
        let mut t = PageTally::default();
        let (again, _) = sort_moved(&status, &pending, true, &mut t);
        assert!(again.is_empty());
        assert_eq!(t.failed.get("EBUSY"), Some(&1));
        let again = sort_located(&[Node(0), Failed(libc::ENOENT)], &unreported, true, None, &mut t);
        assert!(again.is_empty());
        assert_eq!((t.failed.get("not-migrated"), t.failed.get("ENOENT")), (Some(&2), Some(&1)));
        // A one-target call that ended in ENOMEM: its pages not there count under it, not retried.
        let mut t = PageTally::default();
        let again = sort_located(&[Node(1), Node(0)], &unreported, false, Some(libc::ENOMEM), &mut t);
        assert!(again.is_empty());
        assert_eq!((t.moved, t.failed.get("ENOMEM")), (1, Some(&1)));
    }

    /// split-copy's parts: each on a thread of its own but the first, their counts added up, the
    /// threads that moved a part counted; a vanished process wins over a refusal, which wins over
    /// success; a panicked part is charged whole and "unverified".
    #[test]
    fn parts_run_on_threads_of_their_own_and_their_ends_combine() {
        let moves: Vec<PageMove> = (0..4000).map(|i| (0x1000 * i, 1)).collect();
        let me = std::thread::current().id();
        let ids = std::sync::Mutex::new(Vec::new());
        let each = |part: &[PageMove], t: &mut PageTally| {
            ids.lock().unwrap().push(std::thread::current().id());
            t.asked += part.len() as u64;
            t.moved += part.len() as u64;
            Ok(())
        };
        let mut t = PageTally::default();
        assert!(run_parts(&moves, 4, &mut t, each).is_ok());
        assert_eq!((t.asked, t.moved, t.threads), (4000, 4000, 4));
        let ids = ids.into_inner().unwrap();
        assert_eq!(ids.iter().filter(|&&i| i == me).count(), 1, "the caller moves one part, threads the rest");
        assert_eq!(ids.iter().collect::<std::collections::HashSet<_>>().len(), 4);
        // One part: the caller alone; nothing to move: no thread.
        let mut t = PageTally::default();
        assert!(run_parts(&moves, 1, &mut t, |_, _| Ok(())).is_ok());
        assert_eq!(t.threads, 1);
        let mut t = PageTally::default();
        assert!(run_parts(&[], 4, &mut t, |_, _| Ok(())).is_ok());
        assert_eq!(t.threads, 0);
        // Ends: part 1 refused, part 3 gone: gone; only refusals: the first one's reason.
        let ends = |part: &[PageMove], t: &mut PageTally| {
            t.asked += part.len() as u64;
            match part[0].0 / 0x1000 {
                1000 => Err(Stop::Refused("first".into())),
                2000 => Err(Stop::Refused("second".into())),
                3000 => Err(Stop::Gone),
                _ => Ok(()),
            }
        };
        let mut t = PageTally::default();
        assert!(matches!(run_parts(&moves, 4, &mut t, ends), Err(Stop::Gone)));
        assert_eq!(t.asked, 4000);
        let mut t = PageTally::default();
        let r = run_parts(&moves[..3000], 3, &mut t, ends);
        assert!(matches!(r, Err(Stop::Refused(ref m)) if m == "first"), "{r:?}");
        // A part that panics (not the caller's): charged whole, unverified, refused.
        let mut t = PageTally::default();
        let r = run_parts(&moves, 2, &mut t, |part, t| {
            if part[0].0 != 0 {
                panic!("a test part");
            }
            t.asked += part.len() as u64;
            t.moved += part.len() as u64;
            Ok(())
        });
        assert!(matches!(r, Err(Stop::Refused(ref m)) if m.contains("panicked")), "{r:?}");
        assert_eq!((t.asked, t.moved, t.failed.get("unverified").copied()), (4000, 2000, Some(2000)));
    }

    #[test]
    fn a_retry_makes_one_call_per_target_node() {
        let calls = by_target(vec![(0x1000, 1), (0x2000, 0), (0x3000, 1), (0x4000, 2)]);
        assert_eq!(calls, vec![vec![(0x2000, 0)], vec![(0x1000, 1), (0x3000, 1)], vec![(0x4000, 2)]]);
    }

    #[test]
    fn the_parts_of_a_split_copy_add_up() {
        let mut t = PageTally { planned: 3000, asked: 1000, moved: 990, threads: 2, ..PageTally::default() };
        t.fail("EBUSY", 10);
        let mut part = PageTally { asked: 2000, moved: 1995, ..PageTally::default() };
        part.fail("EBUSY", 3);
        part.fail("ENOMEM", 2);
        t.absorb(part);
        assert_eq!((t.planned, t.asked, t.moved, t.threads), (3000, 3000, 2985, 2));
        assert_eq!(t.failed, BTreeMap::from([("EBUSY".to_string(), 13), ("ENOMEM".to_string(), 2)]));
    }

    #[test]
    fn bucket_refills_over_time_and_caps_at_one_second() {
        // 1 MiB/s of 4 KiB pages = 256 pages/s.
        let mut b = TokenBucket::new(1, 4096, 0);
        assert_eq!(b.available(0), 256);
        b.take(256);
        assert_eq!(b.available(0), 0);
        assert_eq!(b.available(500_000_000), 128);
        assert_eq!(b.available(10_000_000_000), 256);
    }

    #[test]
    fn a_new_rate_refills_at_the_old_rate_before_it_and_caps_at_its_own_second() {
        // 1 MiB/s (256 pages/s) emptied at 0; 2 MiB/s from 0.5 s: 128 pages came at the old rate.
        let mut b = TokenBucket::new(1, 4096, 0);
        b.take(256);
        b.set_rate(2, 4096, 500_000_000);
        assert_eq!(b.available(500_000_000), 128);
        assert_eq!(b.available(1_000_000_000), 128 + 256);
        assert_eq!(b.available(10_000_000_000), 512);
        // Lowered: what is in the bucket is cut to the new rate's second.
        b.set_rate(1, 4096, 10_000_000_000);
        assert_eq!(b.available(10_000_000_000), 256);
    }

    #[test]
    fn remap_follows_position() {
        let from = NodeSet::parse_list("0-1").unwrap();
        let to = NodeSet::parse_list("2-3").unwrap();
        assert_eq!(remap(&from, &to, 0), Some(2));
        assert_eq!(remap(&from, &to, 1), Some(3));
        assert_eq!(remap(&from, &to, 2), None);
        let to1 = NodeSet::parse_list("1").unwrap();
        assert_eq!(remap(&from, &to1, 0), Some(1));
        assert_eq!(remap(&from, &to1, 1), None);
    }

    /// A maps file past the cap refuses the move with a message naming it, not read whole; one
    /// at the cap is read. The pid and start time are this process's, so the refusal is not
    /// mistaken for the process having gone.
    #[test]
    fn a_maps_file_past_the_cap_refuses_the_move() {
        let pid = std::process::id();
        let starttime = super::super::select::read_stat(pid).unwrap().starttime;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("maps");
        let p = path.to_str().unwrap();
        // Exactly at a 4 kB cap (a line, then blank lines): read, and its one range found.
        let mut text = b"7f0000000000-7f0000001000 r--p 00000000 00:00 0 \n".to_vec();
        text.resize(4096, b'\n');
        std::fs::write(&path, &text).unwrap();
        assert_eq!(ranges_in(p, pid, starttime, 4096).unwrap(), vec![(0x7f00_0000_0000, 4096)]);
        // One byte more: refused, naming the file.
        text.push(b'\n');
        std::fs::write(&path, &text).unwrap();
        match ranges_in(p, pid, starttime, 4096) {
            Err(Stop::Refused(m)) => assert!(m.contains("maps is larger than"), "{m}"),
            other => panic!("{other:?}"),
        }
        // The live cap: a (sparse) file one byte past 64 MiB is refused through the cap the
        // daemon uses.
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(numapilot_observe::reader::MAX_FILE_BYTES as u64 + 1).unwrap();
        match ranges_in(p, pid, starttime, numapilot_observe::reader::MAX_FILE_BYTES) {
            Err(Stop::Refused(m)) => assert!(m.contains("maps is larger than 64 MiB"), "{m}"),
            other => panic!("{other:?}"),
        }
        // This process's own maps, through the public function: read, with this stack in them.
        let here = 0u8;
        let addr = std::ptr::addr_of!(here) as u64;
        let own = mapped_ranges(pid, starttime).unwrap();
        assert!(own.iter().any(|&(a, l)| a <= addr && addr < a + l), "{addr:#x} in none of {own:x?}");
    }

    /// A move asked to stop makes no further call: neither the read of maps nor of pagemap nor
    /// the query of where its pages are; its stop's reason is what it reports (a move given up as
    /// stuck whose read returned at last reported "applied, 0 pages" when its pages were already
    /// in place). Allowed again, the same calls run. A child process of its own, so no other test
    /// moving this process's pages is stopped.
    #[test]
    fn a_stopped_move_makes_no_further_call_and_reports_why() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        let starttime = crate::live::select::read_starttime(pid).unwrap();
        let ps = numapilot_observe::reader::page_size();
        let ranges = mapped_ranges(pid, starttime).unwrap();
        assert!(!ranges.is_empty());
        let calls = || PAGE_CALLS.load(std::sync::atomic::Ordering::Relaxed);
        let move_all = |tally: &mut PageTally| {
            move_to_targets(pid, starttime, &ranges, ps, 1 << 20, true, |_, _| Some(0), tally, 1)
        };
        stop_moves_of(pid, starttime, STOP_STUCK);
        match mapped_ranges(pid, starttime) {
            Err(Stop::Refused(m)) => assert_eq!(m, STOP_STUCK),
            other => panic!("maps read for a stopped move: {other:?}"),
        }
        match move_all(&mut PageTally::default()) {
            Err(Stop::Refused(m)) => assert_eq!(m, STOP_STUCK),
            other => panic!("a stopped move went on: {other:?}"),
        }
        moves_allowed(pid, starttime);
        let before = calls();
        assert!(mapped_ranges(pid, starttime).is_ok());
        assert!(move_all(&mut PageTally::default()).is_ok(), "allowed again, the move runs");
        assert!(calls() > before, "the allowed move made its calls");
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn weighted_pattern() {
        let v: Vec<u32> = (0..6).filter_map(|i| interleave_target(&[1, 3], &[2, 1], i)).collect();
        assert_eq!(v, vec![1, 1, 3, 1, 1, 3]);
        let v: Vec<u32> = (0..4).filter_map(|i| interleave_target(&[0, 2], &[], i)).collect();
        assert_eq!(v, vec![0, 2, 0, 2]);
    }
}
