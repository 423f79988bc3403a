//! Signals beyond the per-task /proc files, gathered each cycle for the live host.
//!
//! (Contract written by the lead; the signals helper owns this module and fills it in.)
//!
//! [`Signals::fill`] adds to a [`numapilot_observe::Sample`]: communication pairs (loopback TCP 4-tuples
//! and unix-socket peers matched to the owning processes' socket inodes), precise access samples where
//! a PMU offers them, and (with the `ebpf` feature) wake-up pairs. Every source that is missing says
//! so once, in [`Signals::notes`], and the others carry on.

use numapilot_observe::Sample;

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

/// The open signal sources.
#[derive(Debug, Default)]
pub struct Signals {
    notes: Vec<String>,
}

impl Signals {
    /// Opens the sources `opts` asks for; one that cannot open leaves a note and is skipped.
    pub fn open(opts: SignalOptions) -> Self {
        let _ = opts;
        Self::default()
    }

    /// One line per source that is missing or failed to open, for the log.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Adds this cycle's signals to `sample` (its processes are those the host observed).
    pub fn fill(&mut self, sample: &mut Sample) {
        let _ = sample;
    }
}
