//! Signals beyond the per-task /proc files, gathered each cycle for the live host.
//!
//! # Problem
//!
//! The per-task files say how busy each thread is and where each process's memory lives; they do not
//! say who works with whom across processes, nor which memory each thread touches. Three live sources
//! add that, each optional, each failing alone.
//!
//! # Approach
//!
//! ```text
//!   Signals::open ─┬─ sockets: sock_diag probe (unix peers)      fails? note, TCP only
//!                  ├─ shared:  /proc/PID/maps every maps_every-th cycle
//!                  ├─ perf:    detect PMU ─► open per CPU ─► enable       missing? one note
//!                  │           (page-fault fallback only when SignalTuning::page_faults)
//!                  └─ wakeups: eBPF on sched:sched_waking (`ebpf` feature)   not built/refused? one note
//!   Signals::fill(sample)   (the sample's user processes are the ones looked at)
//!     comm     += sockets::scan(/proc/net/tcp{,6} + unix peers, /proc/PID/fd)   every sockets_every-th
//!                 cycle, the cached pairs of live pids in between
//!     shared    = maps grouped by (dev, inode)     re-read every maps_every-th cycle, the cached
//!                                                  result filtered to live pids in between
//!     accesses += perf rings drained, placed on nodes, aggregated per (thread, page)
//!     comm     += wake-up pairs drained from the BPF map (waker -> wakee, events = wake-ups)
//! ```
//!
//! Every source that is missing says so once, in [`Signals::notes`]; a source that fails at run
//! time adds one note the first time (with the error) and is retried next cycle without a new note
//! until it works again. A process that vanishes mid-scan is skipped by every source.
//!
//! # Units
//!
//! Communication `events` as [`numapilot_observe::sockets`] documents (connected socket pairs, once
//! per cycle); access samples in samples; shared bytes mapped.
//!
//! # Limits and cost
//!
//! See the modules in `numapilot_observe` (`sockets`, `maps`, `pmu`). Measured on the development
//! host (2 CPUs, kernel 6.18, release build) with `cargo run --release -p numapilot-observe --example
//! signals_cost`: 1,000 forked processes in 500 pairs (each pair a unix socketpair and a shared memfd,
//! 100 pairs also a loopback TCP connection; each child holds about 8 fds), median of 7 rounds, on a
//! box shared with other builds (load average 5 to 11 on 2 CPUs, so the figures are inflated):
//!
//! ```text
//!                                              1,106 processes     2,110 processes
//!                                              (load 5)            (load 11)
//!   sock_diag unix dump (~1,010 peers)          0.64 ms             0.46 ms
//!   socket scan: /proc/net/tcp{,6} + fd links   137 ms              155 ms    (every sockets_every-th cycle)
//!   maps of every process (501 shared objects)  148 ms              269 ms    (every maps_every-th cycle)
//! ```
//!
//! Both scans are far above a 50 ms cycle budget at this scale on a loaded 2-CPU box, hence the
//! cadences [`SignalTuning::sockets_every`] (5) and [`SignalTuning::maps_every`] (10): averaged, about
//! 27 + 15 ms per cycle at 1,106 processes. The fd scan is skipped entirely on cycles with no local pair.

use std::path::Path;

use numapilot_ebpf::{TracerOptions, WakeupTracer};
use numapilot_observe::pmu::{self, Detection, EventSpec, NodeMemory, RawSample, Sampler};
use numapilot_observe::{sockets, CommSample, Reader, Sample, SharedMemory};

/// Which sources to try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalOptions {
    /// Socket peers from /proc/net and /proc/PID/fd.
    pub sockets: bool,
    /// Precise memory-access sampling through perf_event_open.
    pub perf: bool,
}

impl Default for SignalOptions {
    fn default() -> Self {
        Self { sockets: true, perf: true }
    }
}

/// How the sources run (beyond on/off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalTuning {
    /// Read shared memory from /proc/PID/maps. Default true.
    pub shared: bool,
    /// Re-read maps every this many [`Signals::fill`] calls (1 = every cycle). Default 10, unit
    /// cycles. Source: the measurement in the module header: maps of 1,000 processes costs several
    /// times the socket scan, and shared mappings change when processes start or map, far more
    /// rarely than a 1 s cycle. What it prevents: maps dominating the observation cost.
    pub maps_every: u32,
    /// Re-scan sockets (the fd links of every process) every this many calls; between scans the last
    /// scan's pairs are repeated for processes still present. Default 5, unit cycles. Source: the
    /// measurement in the module header (the fd scan is the second most costly signal after maps);
    /// connections between local services live for minutes, so a pair is at most 4 cycles late or
    /// stale. What it prevents: the fd scan taking most of a cycle on hosts with many processes.
    pub sockets_every: u32,
    /// Without a PMU, sample page faults instead (coarse: faults, not accesses; see
    /// `numapilot_observe::pmu`). Default false: only useful with kernel NUMA balancing on (hinting
    /// faults) or for programs that keep faulting.
    pub page_faults: bool,
    /// Period of the page-fault fallback, faults per sample. Default
    /// [`pmu::PAGE_FAULT_PERIOD`].
    pub page_fault_period: u64,
    /// Count waker -> wakee pairs with the eBPF tracer (`numapilot_ebpf`; needs the `ebpf` cargo
    /// feature and root). Default true: a build without the feature says so in one note.
    pub wakeups: bool,
    /// Bound of the tracer's pair map, pairs. Default [`numapilot_ebpf::TracerOptions`]'s (16,384).
    /// Source: the tracer's own default. What it prevents: an unbounded kernel map on a host with
    /// many communicating threads; wake-ups beyond it are counted as dropped and noted.
    pub wakeup_max_pairs: u32,
}

impl Default for SignalTuning {
    fn default() -> Self {
        Self {
            shared: true,
            maps_every: 10,
            sockets_every: 5,
            page_faults: false,
            page_fault_period: pmu::PAGE_FAULT_PERIOD,
            wakeups: true,
            wakeup_max_pairs: numapilot_ebpf::TracerOptions::default().max_pairs,
        }
    }
}

/// Counts since open, for status and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SignalStats {
    /// [`Signals::fill`] calls.
    pub cycles: u64,
    /// Cycles on which maps were read.
    pub maps_reads: u64,
    /// Cycles on which sockets were scanned.
    pub socket_scans: u64,
    /// Communication pairs added, summed over cycles.
    pub comm_pairs: u64,
    /// Access samples drained from the rings.
    pub samples: u64,
    /// Samples the kernel lost (ring full).
    pub lost: u64,
    /// Samples that could not be placed on a node.
    pub unplaced: u64,
    /// Wake-up pairs added (eBPF tracer), summed over cycles.
    pub wakeup_pairs: u64,
    /// Wake-ups the tracer could not count because its map was full.
    pub wakeups_dropped: u64,
}

/// What the last [`Signals::fill`] spent, per source: wall time and this thread's CPU time (ns), and
/// how many processes the scans read. For the cost example and the metrics; zero for a source that
/// did not run that cycle.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SignalCost {
    /// The socket scan (unix peers, /proc/net/tcp{,6}, fd links), wall.
    pub sockets_ns: u64,
    /// The same, CPU of the calling thread.
    pub sockets_cpu_ns: u64,
    /// Processes whose fd directory was read this cycle.
    pub fd_pids: usize,
    /// The maps scan, wall.
    pub maps_ns: u64,
    /// The same, CPU of the calling thread.
    pub maps_cpu_ns: u64,
    /// Processes whose maps were read this cycle.
    pub maps_pids: usize,
    /// Draining the PMU rings and the wake-up map, wall.
    pub drain_ns: u64,
}

/// The open signal sources.
#[derive(Debug, Default)]
pub struct Signals {
    notes: Vec<String>,
    reader: Reader,
    sockets: bool,
    unix_diag: bool,
    tuning: SignalTuning,
    shared_cache: Vec<SharedMemory>,
    comm_cache: Vec<CommSample>,
    sampler: Option<Sampler>,
    tracer: Option<WakeupTracer>,
    node_mem: Option<NodeMemory>,
    failing: Vec<&'static str>,
    raw: Vec<RawSample>,
    stats: SignalStats,
    cost: SignalCost,
}

impl Signals {
    /// Opens the sources `opts` asks for, with the default [`SignalTuning`]; one that cannot open
    /// leaves a note and is skipped.
    pub fn open(opts: SignalOptions) -> Self {
        Self::open_with(opts, SignalTuning::default())
    }

    /// Opens the sources with explicit tuning.
    pub fn open_with(opts: SignalOptions, tuning: SignalTuning) -> Self {
        let mut s = Signals {
            reader: Reader::new("/"),
            sockets: opts.sockets,
            tuning: SignalTuning {
                maps_every: tuning.maps_every.max(1),
                sockets_every: tuning.sockets_every.max(1),
                ..tuning
            },
            ..Signals::default()
        };
        if opts.sockets {
            match sockets::unix_peers() {
                Ok(_) => s.unix_diag = true,
                Err(e) => s.notes.push(format!(
                    "sockets: unix peers unavailable ({e}; kernel without CONFIG_UNIX_DIAG?): loopback TCP pairs only"
                )),
            }
        }
        if opts.perf {
            s.open_perf();
        }
        if s.tuning.wakeups {
            let topts = TracerOptions { max_pairs: s.tuning.wakeup_max_pairs, mount_tracefs: true };
            match WakeupTracer::open(&topts) {
                Ok(t) => s.tracer = Some(t),
                Err(e) => s.notes.push(format!("wakeups: {e}; wake-up pairs off")),
            }
        }
        s
    }

    fn open_perf(&mut self) {
        let spec = match pmu::detect(Path::new("/")) {
            Detection::Found(spec) => spec,
            Detection::Missing(line) => {
                if !self.tuning.page_faults {
                    self.notes.push(format!("perf: {line}"));
                    return;
                }
                let why = line.split("; access sampling off").next().unwrap_or(&line);
                self.notes.push(format!(
                    "perf: {why}; using the page-fault fallback instead (faults, not accesses: first touches and \
                     NUMA hinting faults)"
                ));
                EventSpec::page_faults(self.tuning.page_fault_period)
            }
        };
        let cpus = match std::fs::read_to_string("/sys/devices/system/cpu/online")
            .ok()
            .and_then(|t| numapilot_observe::parse::parse_list(&t).ok())
        {
            Some(c) => c,
            None => {
                self.notes.push("perf: cannot read /sys/devices/system/cpu/online; access sampling off".into());
                return;
            }
        };
        match Sampler::open_per_cpu(&spec, cpus.iter()).and_then(|s| s.enable().map(|()| s)) {
            Ok(s) => {
                self.node_mem = NodeMemory::read(Path::new("/")).ok();
                self.sampler = Some(s);
            }
            Err(e) => {
                self.notes.push(format!("perf: {} found but cannot be opened: {e}; access sampling off", spec.name))
            }
        }
    }

    /// One line per source that is missing or failed to open (and the first failure of a source at
    /// run time), for the log.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Whether an access sampler is open.
    pub fn sampling(&self) -> bool {
        self.sampler.is_some()
    }

    /// Counts since open.
    pub fn stats(&self) -> SignalStats {
        self.stats
    }

    /// What the last [`Signals::fill`] spent, per source.
    pub fn last_cost(&self) -> SignalCost {
        self.cost
    }

    /// Records a run-time failure of `source`: a note the first time in a row, nothing after.
    fn failed(&mut self, source: &'static str, e: impl std::fmt::Display) {
        if !self.failing.contains(&source) {
            self.failing.push(source);
            self.notes.push(format!("{source}: {e} (skipped this cycle; retried every cycle)"));
        }
    }

    fn recovered(&mut self, source: &'static str) {
        self.failing.retain(|s| *s != source);
    }

    /// Adds this cycle's signals to `sample` (its processes are those the host observed).
    pub fn fill(&mut self, sample: &mut Sample) {
        self.fill_scoped(sample, None);
    }

    /// [`Signals::fill`], with the maps and socket scans limited to `scan` (sorted pids; `None`:
    /// every process of the sample). Pairs and shared objects found are kept for the scans'
    /// cadence and handed out for processes still in the sample.
    pub fn fill_scoped(&mut self, sample: &mut Sample, scan: Option<&[u32]>) {
        let pids: Vec<u32> = sample.processes.iter().filter(|p| !p.kernel_thread).map(|p| p.pid).collect();
        let scan_pids: &[u32] = scan.unwrap_or(&pids);
        let cycle = self.stats.cycles;
        self.stats.cycles += 1;
        self.cost = SignalCost::default();
        if self.sockets {
            if cycle % u64::from(self.tuning.sockets_every) == 0 {
                let (t, c) = (numapilot_observe::reader::monotonic_ns(), thread_cpu_ns());
                let unix = if self.unix_diag {
                    match sockets::unix_peers() {
                        Ok(u) => Some(u),
                        Err(e) => {
                            self.failed("sockets: unix peers", e);
                            None
                        }
                    }
                } else {
                    None
                };
                match sockets::scan(self.reader.root(), scan_pids, unix.as_deref()) {
                    Ok(found) => {
                        self.recovered("sockets");
                        self.stats.socket_scans += 1;
                        self.cost.fd_pids = found.fds_scanned + found.unreadable;
                        self.comm_cache = found.comm;
                    }
                    Err(e) => self.failed("sockets", e),
                }
                self.cost.sockets_ns = numapilot_observe::reader::monotonic_ns().saturating_sub(t);
                self.cost.sockets_cpu_ns = thread_cpu_ns().saturating_sub(c);
            }
            let live: Vec<CommSample> = self
                .comm_cache
                .iter()
                .filter(|c| pids.binary_search(&c.a.0).is_ok() && pids.binary_search(&c.b.0).is_ok())
                .copied()
                .collect();
            self.stats.comm_pairs += live.len() as u64;
            sample.comm.extend(live);
        }
        if self.tuning.shared {
            if cycle % u64::from(self.tuning.maps_every) == 0 {
                let (t, c) = (numapilot_observe::reader::monotonic_ns(), thread_cpu_ns());
                match self.reader.read_shared(scan_pids) {
                    Ok(found) => {
                        self.recovered("shared memory");
                        self.stats.maps_reads += 1;
                        self.shared_cache = found;
                    }
                    Err(e) => self.failed("shared memory", e),
                }
                self.cost.maps_pids = scan_pids.len();
                self.cost.maps_ns = numapilot_observe::reader::monotonic_ns().saturating_sub(t);
                self.cost.maps_cpu_ns = thread_cpu_ns().saturating_sub(c);
            }
            sample.shared = live_shared(&self.shared_cache, &pids);
        }
        let t = numapilot_observe::reader::monotonic_ns();
        if let Some(sampler) = self.sampler.as_mut() {
            self.raw.clear();
            match sampler.drain(&mut self.raw) {
                Ok(st) => {
                    self.stats.samples += st.samples;
                    self.stats.lost += st.lost;
                    let (acc, ast) = pmu::aggregate(&self.raw, sample.page_size, self.node_mem.as_ref(), true);
                    self.stats.unplaced += ast.unplaced;
                    sample.accesses.extend(acc);
                }
                Err(e) => self.failed("perf", e),
            }
        }
        if let Some(tracer) = self.tracer.as_mut() {
            match tracer.drain() {
                Ok(d) => {
                    if let Some(full) = d.map_full(tracer.max_pairs()) {
                        self.failed("wakeups", full);
                    } else {
                        self.recovered("wakeups");
                    }
                    self.stats.wakeups_dropped += d.dropped;
                    let mut pairs = numapilot_ebpf::to_comm_samples(&d.pairs);
                    pairs.retain(|c| pids.binary_search(&c.a.0).is_ok() && pids.binary_search(&c.b.0).is_ok());
                    self.stats.wakeup_pairs += pairs.len() as u64;
                    sample.comm.extend(pairs);
                }
                Err(e) => self.failed("wakeups", e),
            }
        }
        self.cost.drain_ns = numapilot_observe::reader::monotonic_ns().saturating_sub(t);
    }
}

/// CPU time of the calling thread, ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the struct we own.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The cached objects restricted to processes still present (`pids` sorted), keeping those still
/// shared by two or more.
fn live_shared(cache: &[SharedMemory], pids: &[u32]) -> Vec<SharedMemory> {
    cache
        .iter()
        .filter_map(|o| {
            let users: Vec<(u32, u64)> =
                o.users.iter().copied().filter(|(p, _)| pids.binary_search(p).is_ok()).collect();
            (users.len() >= 2).then(|| SharedMemory { users, ..o.clone() })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(users: &[u32]) -> SharedMemory {
        SharedMemory {
            dev: 1,
            inode: 2,
            path: "/memfd:x (deleted)".into(),
            users: users.iter().map(|&p| (p, 4096)).collect(),
        }
    }

    #[test]
    fn cached_shared_objects_follow_live_processes() {
        let cache = vec![obj(&[1, 2, 3]), SharedMemory { inode: 9, ..obj(&[2, 4]) }];
        let live = live_shared(&cache, &[1, 2, 4]);
        assert_eq!(live.len(), 2);
        assert_eq!(live[0].users, vec![(1, 4096), (2, 4096)]);
        assert_eq!(live_shared(&cache, &[1, 4]).len(), 0, "one user left is no sharing");
    }

    #[test]
    fn fill_on_this_host() {
        let reader = Reader::new("/");
        // Wake-ups off: this process's own threads wake each other (tested in the ebpf crate).
        let tuning = SignalTuning { maps_every: 2, sockets_every: 2, wakeups: false, ..SignalTuning::default() };
        let mut s = Signals::open_with(SignalOptions::default(), tuning);
        // Every missing source says so in one line each; on this host (no PMU) perf is one of them.
        assert!(s.notes().iter().all(|n| !n.contains('\n')));
        if !s.sampling() {
            assert!(s.notes().iter().any(|n| n.starts_with("perf: ")), "{:?}", s.notes());
        }
        let me = std::process::id();
        for _ in 0..3 {
            let mut sample = reader.sample_of(Some(&[me])).unwrap();
            s.fill(&mut sample);
            // A single process shares with nobody and talks to nobody.
            assert!(sample.shared.is_empty());
            assert!(sample.comm.is_empty());
        }
        assert_eq!(s.stats().cycles, 3);
        assert_eq!(s.stats().maps_reads, 2, "maps on cycles 0 and 2");
        assert_eq!(s.stats().socket_scans, 2, "sockets on cycles 0 and 2: {:?}", s.notes());
    }
}

#[cfg(test)]
mod live_tests {
    use super::*;

    #[test]
    fn a_forked_pair_is_seen_talking_and_sharing() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        // SAFETY: a fresh memfd, sized and mapped shared; the child inherits the mapping.
        let len = 2 * 4096;
        let mfd = unsafe { libc::memfd_create(c"numapilot-signals".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(mfd >= 0);
        assert_eq!(unsafe { libc::ftruncate(mfd, len as libc::off_t) }, 0);
        let map = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, mfd, 0)
        };
        assert_ne!(map, libc::MAP_FAILED);
        let (fa, fb) = (std::os::fd::IntoRawFd::into_raw_fd(a), std::os::fd::IntoRawFd::into_raw_fd(b));
        let mut p = [0 as libc::c_int; 2];
        // SAFETY: room for two fds.
        assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
        // SAFETY: the child runs only async-signal-safe calls.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let mut x = [0u8; 1];
            unsafe {
                libc::close(fa);
                libc::close(p[1]);
                libc::read(p[0], x.as_mut_ptr().cast(), 1);
                libc::_exit(0);
            }
        }
        // SAFETY: our ends.
        unsafe {
            libc::close(fb);
            libc::close(p[0]);
        }
        let me = std::process::id();
        let child = pid as u32;
        let reader = Reader::new("/");
        let mut s = Signals::open(SignalOptions { sockets: true, perf: false });
        let mut sample = reader.sample_of(Some(&[me, child])).unwrap();
        s.fill(&mut sample);
        let (lo, hi) = (me.min(child), me.max(child));
        let pair = sample.comm.iter().find(|c| c.a == (lo, lo) && c.b == (hi, hi));
        assert!(pair.is_some_and(|c| c.events >= 1), "{:?}", sample.comm);
        let shared = sample.shared.iter().find(|o| o.path.starts_with("/memfd:numapilot-signals"));
        assert_eq!(
            shared.map(|o| o.users.clone()),
            Some(vec![(lo, len as u64), (hi, len as u64)]),
            "{:?}",
            sample.shared
        );
        // SAFETY: release and reap the child, then clean up.
        unsafe {
            libc::close(p[1]);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
            libc::munmap(map, len);
            libc::close(mfd);
            libc::close(fa);
        }
        // The child is gone: the next cycle (cached maps, not re-read) drops it from the sharing.
        let mut sample = reader.sample_of(Some(&[me, child])).unwrap();
        s.fill(&mut sample);
        assert!(sample.shared.iter().all(|o| o.users.iter().all(|u| u.0 != child)));
        assert!(sample.comm.iter().all(|c| c.a.0 != child && c.b.0 != child));
    }
}

#[cfg(test)]
mod fallback_tests {
    use super::*;

    #[test]
    fn page_fault_fallback_fills_accesses_from_per_cpu_rings() {
        let tuning = SignalTuning { page_faults: true, page_fault_period: 1, ..SignalTuning::default() };
        let mut s = Signals::open_with(SignalOptions { sockets: false, perf: true }, tuning);
        if !s.sampling() {
            // A PMU host opens the PMU instead, and a host without perf_event_open says why: both in notes.
            assert!(!s.notes().is_empty());
            return;
        }
        let len = 16 * 4096;
        // SAFETY: a fresh private mapping of ours, no THP, then touched page by page.
        let region = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(region, libc::MAP_FAILED);
        unsafe { libc::madvise(region, len, libc::MADV_NOHUGEPAGE) };
        for i in 0..16 {
            // SAFETY: inside our mapping.
            unsafe { std::ptr::write_volatile((region as *mut u8).add(i * 4096), 1) };
        }
        let me = std::process::id();
        let mut sample = Reader::new("/").sample_of(Some(&[me])).unwrap();
        s.fill(&mut sample);
        let base = region as u64;
        let ours: Vec<_> =
            sample.accesses.iter().filter(|a| a.pid == me && a.addr >= base && a.addr < base + len as u64).collect();
        if s.notes().iter().any(|n| n.contains("page-fault fallback")) {
            assert_eq!(ours.len(), 16, "one access sample per touched page: {ours:?}");
            assert!(ours.iter().all(|a| a.count == 1));
        }
        assert!(s.stats().samples >= ours.len() as u64);
        // SAFETY: our mapping.
        unsafe { libc::munmap(region, len) };
    }
}

#[cfg(all(test, feature = "ebpf"))]
mod wakeup_tests {
    use super::*;

    /// Two threads of this process hand a byte back and forth through socket pairs (each hand-over
    /// wakes the reader blocked on the other end); the tracer's pairs must reach the sample as `Wakeup` samples of this pid.
    #[test]
    fn wakeup_pairs_reach_the_sample() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: the eBPF tracer needs root");
            return;
        }
        let tuning = SignalTuning { shared: false, ..SignalTuning::default() };
        let mut s = Signals::open_with(SignalOptions { sockets: false, perf: false }, tuning);
        assert!(s.tracer.is_some(), "tracer did not open: {:?}", s.notes());
        use std::io::{Read, Write};
        let (mut a_out, mut b_in) = std::os::unix::net::UnixStream::pair().unwrap();
        let (mut b_out, mut a_in) = std::os::unix::net::UnixStream::pair().unwrap();
        // The second thread stays alive (blocked in read) until the sample is filled: the tracer's
        // pairs of a thread that has exited are skipped, as they should be.
        let b = std::thread::spawn(move || {
            let mut x = [0u8; 1];
            while b_in.read_exact(&mut x).is_ok() {
                b_out.write_all(&x).unwrap();
            }
        });
        let mut x = [1u8; 1];
        for _ in 0..300 {
            a_out.write_all(&x).unwrap();
            a_in.read_exact(&mut x).unwrap();
        }
        let me = std::process::id();
        let mut sample = Reader::new("/").sample_of(Some(&[me])).unwrap();
        s.fill(&mut sample);
        drop(a_out);
        b.join().unwrap();
        let ours: u64 = sample
            .comm
            .iter()
            .filter(|c| c.kind == numapilot_observe::CommKind::Wakeup && c.a.0 == me && c.b.0 == me && c.a.1 != c.b.1)
            .map(|c| c.events)
            .sum();
        assert!(ours >= 300, "wake-ups between our two threads: {ours} ({:?})", sample.comm);
        assert!(s.stats().wakeup_pairs > 0);
    }
}
