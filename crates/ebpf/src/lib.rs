//! numapilot-ebpf: who wakes whom, counted in the kernel.
//!
//! # Problem
//!
//! Threads that communicate should share a node: the data one writes, the other reads. Sockets and shared mappings
//! show some of that communication in /proc, but not the futexes, pipes, eventfds and condition variables through
//! which threads of one process (or of several) hand work to each other. Every such hand-off ends in the kernel
//! waking the receiving thread, and the kernel announces each wake-up on the `sched:sched_waking` tracepoint, in
//! the context of the thread that does the waking.
//!
//! # Approach
//!
//! A small BPF program (`src/bpf/wakeup.bpf.c`) attached to that tracepoint counts wake-ups per (waker thread,
//! wakee thread) in a bounded hash map; user space drains the map once per daemon cycle (each entry read and
//! deleted atomically by `BPF_MAP_LOOKUP_AND_DELETE_ELEM`, so a wake-up counted during the drain lands in the next
//! cycle instead of being lost) and turns the pairs into [`CommSample`]s of kind [`CommKind::Wakeup`], mapping the
//! wakee's thread id to its process through `/proc/TID/status` (`Tgid:`).
//!
//! ```text
//!   thread A (tid 101, pid 100) writes a pipe        kernel: try_to_wake_up(B) -> sched_waking(pid=B)
//!          |                                                       |  (runs in A's context)
//!          v                                                       v
//!   BPF on_sched_waking: skip the idle task and self-wakes; pairs[(101, B)] += 1, waker tgid 100
//!          |
//!   user space, every cycle: WakeupTracer::drain -> [(100, 101, B, n)]  -> to_comm_samples: B -> Tgid via /proc
//!          -> CommSample { a: (100, 101), b: (tgid(B), B), kind: Wakeup, events: n }
//! ```
//!
//! What is skipped: wake-ups by the idle task (tid 0) and a thread waking itself, in the kernel; in user space,
//! pairs where either end is a kernel thread (`PF_KTHREAD` in `/proc/TID/stat`), has exited by the time of the
//! drain, or whose waker tid now belongs to another process. What is NOT skipped: wake-ups raised in hard-irq,
//! soft-irq or NMI context (timers, network receive, I/O completion), where the "waker" is whichever task the
//! interrupt happened to land on. Telling them apart needs the trace entry's `common_flags`, which the kernel
//! overwrites before a BPF program runs (see the BPF source), or the CPU's preempt count, which needs kernel BTF;
//! such pairs are scattered and low-count next to a real producer/consumer pair (measured on the 2-node guest: a
//! 300-round ping-pong gives 301 and 302 per direction, the other pairs of the same run 1 to 12), so a consumer
//! should weigh pairs by `events`.
//!
//! # Units and limits
//!
//! Counts are wake-ups since the previous drain. The map holds at most [`TracerOptions::max_pairs`] distinct pairs
//! per cycle (default [`DEFAULT_MAX_PAIRS`]); wake-ups of new pairs beyond that are not counted but tallied in
//! [`Drained::dropped`], so a full map shows in the metrics instead of silently biasing the signal. A wake-up that
//! races with the deletion of its own pair's entry during a drain can be lost (one count, rarely). Loading needs
//! root (or `CAP_BPF` + `CAP_PERFMON`) and the tracepoint's id from tracefs (`/sys/kernel/tracing`, which
//! [`TracerOptions::mount_tracefs`] can mount when absent). The BPF program declares the tracepoint record itself
//! and uses no CO-RE relocations, so it needs no kernel BTF. Overhead: one hash lookup per wake-up in the kernel.
//!
//! Built without the `ebpf` cargo feature, everything here still compiles and [`WakeupTracer::open`] returns
//! [`EbpfError::NotBuilt`], so a daemon can log one line and carry on with its other signals.

#![deny(missing_docs)]

mod comm;
mod error;
#[cfg(feature = "ebpf")]
mod tracer;

use std::path::PathBuf;

pub use comm::{read_tid_info, to_comm_samples, to_comm_samples_with, TidInfo};
pub use error::EbpfError;
pub use numapilot_observe::{CommKind, CommSample};
use serde::{Deserialize, Serialize};

/// Default bound of the pair map, distinct (waker, wakee) pairs per cycle. 16,384 entries of 8-byte keys and
/// 16-byte values are about 1 MiB of kernel memory with the hash table's overhead; a host with 10,000 threads that
/// each talk to one or two partners fits, and a larger churn shows as [`Drained::dropped`].
pub const DEFAULT_MAX_PAIRS: u32 = 16_384;

/// Where tracefs is expected, in order (the second is the legacy path through debugfs).
pub const TRACEFS_PATHS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// How to open the tracer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracerOptions {
    /// Bound of the pair map (see [`DEFAULT_MAX_PAIRS`]); at least 1.
    pub max_pairs: u32,
    /// Mount tracefs on `/sys/kernel/tracing` when no tracefs is mounted (as systemd does at boot; minimal
    /// systems and containers may lack it). Default false: the tracer then fails with
    /// [`EbpfError::TracefsMissing`] instead of changing the mount table.
    pub mount_tracefs: bool,
}

impl Default for TracerOptions {
    fn default() -> Self {
        TracerOptions { max_pairs: DEFAULT_MAX_PAIRS, mount_tracefs: false }
    }
}

/// Wake-ups of one thread pair since the previous drain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct WakeupPair {
    /// Process (thread group) of the waker.
    pub waker_pid: u32,
    /// Thread that woke.
    pub waker_tid: u32,
    /// Thread that was woken.
    pub wakee_tid: u32,
    /// Wake-ups counted.
    pub count: u64,
}

/// What one drain read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drained {
    /// Pairs with their counts, sorted by (waker_tid, wakee_tid).
    pub pairs: Vec<WakeupPair>,
    /// Wake-ups not counted because the pair map was full (see [`TracerOptions::max_pairs`]).
    pub dropped: u64,
}

impl Drained {
    /// [`EbpfError::MapFull`] when wake-ups were dropped this cycle (for the log), else `None`.
    pub fn map_full(&self, max_pairs: u32) -> Option<EbpfError> {
        (self.dropped > 0).then_some(EbpfError::MapFull { max_pairs, dropped: self.dropped })
    }
}

/// A loaded and attached wake-up tracer; detached and unloaded when dropped.
#[derive(Debug)]
pub struct WakeupTracer {
    #[cfg(feature = "ebpf")]
    inner: tracer::Tracer,
    #[cfg(not(feature = "ebpf"))]
    _never: std::convert::Infallible,
}

impl WakeupTracer {
    /// Whether this build has the tracer (the `ebpf` cargo feature).
    pub const fn built_in() -> bool {
        cfg!(feature = "ebpf")
    }

    /// Loads the BPF program and attaches it to `sched:sched_waking`.
    pub fn open(opts: &TracerOptions) -> Result<WakeupTracer, EbpfError> {
        if opts.max_pairs == 0 {
            return Err(EbpfError::BadOption { option: "max_pairs", reason: "must be at least 1".into() });
        }
        #[cfg(feature = "ebpf")]
        {
            Ok(WakeupTracer { inner: tracer::Tracer::open(opts)? })
        }
        #[cfg(not(feature = "ebpf"))]
        {
            Err(EbpfError::NotBuilt)
        }
    }

    /// Reads and resets the counts: every pair counted since the previous drain (or the open), and the wake-ups
    /// dropped because the map was full.
    pub fn drain(&mut self) -> Result<Drained, EbpfError> {
        #[cfg(feature = "ebpf")]
        {
            self.inner.drain()
        }
        #[cfg(not(feature = "ebpf"))]
        {
            match self._never {}
        }
    }

    /// The bound of the pair map in the kernel, pairs.
    pub fn max_pairs(&self) -> u32 {
        #[cfg(feature = "ebpf")]
        {
            self.inner.max_pairs()
        }
        #[cfg(not(feature = "ebpf"))]
        {
            match self._never {}
        }
    }
}

/// The mounted tracefs holding the `sched_waking` event, if any.
pub fn find_tracefs() -> Option<PathBuf> {
    TRACEFS_PATHS.iter().map(PathBuf::from).find(|p| p.join("events/sched/sched_waking/id").is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_map_size_is_rejected_by_name() {
        let e = WakeupTracer::open(&TracerOptions { max_pairs: 0, mount_tracefs: false }).unwrap_err();
        assert!(e.to_string().contains("max_pairs"), "{e}");
    }

    #[cfg(not(feature = "ebpf"))]
    #[test]
    fn without_the_feature_open_says_so() {
        assert!(!WakeupTracer::built_in());
        let e = WakeupTracer::open(&TracerOptions::default()).unwrap_err();
        assert!(matches!(e, EbpfError::NotBuilt));
        assert!(e.to_string().contains("built without the ebpf feature"), "{e}");
    }
}
