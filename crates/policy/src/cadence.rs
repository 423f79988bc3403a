//! The engine's cadence: how long to wait between steps, and how densely to sample accesses
//! while waiting.
//!
//! # Problem
//!
//! A placement daemon runs for weeks on machines that are mostly settled. Stepping an idle
//! machine every second costs observation for nothing (issue 5's target: under 1% of a core), so
//! the wait between steps backs off while nothing changes. But the access sampler (PEBS / IBS /
//! SPE, or the page-fault fallback) does not know about the back-off: at a fixed period it keeps
//! interrupting every CPU at the same rate, and a step that comes 15 s later finds its ring
//! buffers overflowed (records lost) after paying for all of them. AutoNUMA has the same problem
//! and the same answer: its scanner's period grows while a task's faults are local and shrinks
//! when they are not (`update_task_scan_period` in kernel/sched/fair.c, between
//! `numa_balancing_scan_period_min_ms` 1000 and `_max_ms` 60000).
//!
//! # Approach
//!
//! ```text
//!   after each step:  wait = Backoff::next_wait_ns(policy interval, model, actions planned)
//!                       quiet (nothing planned, no new process, no node's CPU demand moved by
//!                       >= BACKOFF_LOAD_CHANGE_CPUS, the policy's holds over): doubled, up to the cap
//!                       otherwise: the policy's interval
//!                     stretch = sampling_stretch(wait, interval) = wait / interval, in 1..=64
//!                     host.set_sampling_stretch(stretch): sample period = base period x stretch
//! ```
//!
//! Samples per step stay what they are at the interval (a step that looks 15 s later sees about
//! as many samples as one that looks after 1 s), so the model's evidence per decision is
//! unchanged, while the sampling's cost per second falls with the back-off. Any change snaps both
//! back at once. The daemon's loop and the simulator's run loop use the same [`Backoff`], so the
//! simulator steps the engine at the daemon's cadence and charges the sampling it would pay.
//!
//! # Units
//!
//! Waits in ns (the config's cap in ms), CPU demand in CPUs, the stretch a plain multiple.
//!
//! # Limits
//!
//! A change the model cannot see between steps (a running process entering a new phase) is seen
//! only at the next step, from samples taken at the stretched period; the daemon wakes early for new
//! processes and threads (its loop, not this module).

use numapilot_model::Model;

/// Default cap of the back-off, ms (the daemon's `[daemon] idle_max_interval_ms`, documented
/// there, and the simulator's `SimOptions::idle_max_interval_ms`). Default 15 000 ms. Source:
/// numad's own longest interval (numad(8) `-i`: 5 s min, 15 s max). What it prevents: an idle
/// machine observed every second for nothing.
pub const IDLE_MAX_INTERVAL_MS: u64 = 15_000;

/// Largest sampling stretch, a multiple of the base sample period. Default 64. Source: a bound,
/// beyond the 15 s / 1 s of the default cap; with a longer cap the samples per step fall instead
/// of the period growing without end. What it prevents: a period so long (a one-day cap) that a
/// thread's whole working set yields no sample between two steps.
pub const MAX_SAMPLING_STRETCH: u32 = 64;

/// The access-sampling stretch for a wait of `wait_ns` when the policy's own interval is
/// `base_ns`: `wait / base` rounded down, in `1..=MAX_SAMPLING_STRETCH`.
pub fn sampling_stretch(wait_ns: u64, base_ns: u64) -> u32 {
    let x = wait_ns / base_ns.max(1);
    x.clamp(1, u64::from(MAX_SAMPLING_STRETCH)) as u32
}

/// CPU demand change on any node, CPUs, that counts as a load change for [`Backoff`]. Default
/// 0.25 CPU. Source: a choice, the size of a quarter of one busy thread (the policy's own
/// imbalance threshold is 0.25 of a node's load). What it prevents: a process waking up or going
/// to sleep being looked at only after the longest back-off wait.
pub const BACKOFF_LOAD_CHANGE_CPUS: f64 = 0.25;

/// Steady-state back-off of the wait between steps.
///
/// ```text
///   step -> planned nothing, no new (pid, starttime) in the model, no node's CPU demand moved
///           by >= BACKOFF_LOAD_CHANGE_CPUS since the last step, and at least
///           tunables.hold_periods steps since the last step that planned an action?
///     yes: quiet += 1   wait = min(interval x 2^quiet, max(cap, interval))
///     no:  quiet  = 0   wait = interval        (the policy's, e.g. settle interval for young processes)
/// ```
///
/// With the default 1 s interval and 5 s cap an idle machine is stepped after 2, 4, 5, 5 ... s.
/// A process exiting is not a change (nothing to do for it); a step that failed is not quiet.
/// Signals, `explain` and reloads wake the loop whatever the wait. The policy's holds (a moved
/// unit stays for `hold_periods` decisions) are counted in steps: backing off while one runs would
/// stretch it from seconds to minutes, and a placement the hold kept would be looked at again only
/// then (rule "holds-at-interval"; the rig's 2-node numa01: both processes held on one node with a
/// 500 ms interval backing off towards 15 s, for the rest of a 20 s run).
#[derive(Debug, Clone)]
pub struct Backoff {
    cap_ns: u64,
    quiet: u32,
    last: Option<Seen>,
    /// Steps since the last one that planned an action (`u32::MAX`: none yet).
    since_action: u32,
}

/// What the last step's model held: its processes `(pid, starttime)` and each node's CPU demand.
type Seen = (std::collections::BTreeSet<(u32, u64)>, Vec<f64>);

impl Backoff {
    /// A back-off up to `cap_ms` (`[daemon] idle_max_interval_ms`).
    pub fn new(cap_ms: u64) -> Self {
        Self { cap_ns: cap_ms.saturating_mul(1_000_000), quiet: 0, last: None, since_action: u32::MAX }
    }

    /// Quiet steps in a row so far.
    pub fn quiet_steps(&self) -> u32 {
        self.quiet
    }

    /// Records a step (`planned`: its action count, `None` when it failed) over `model` as it is
    /// after the step, and returns the wait before the next one, ns, given the policy's `base_ns`.
    pub fn next_wait_ns(&mut self, base_ns: u64, model: &Model, planned: Option<usize>) -> u64 {
        let procs: std::collections::BTreeSet<(u32, u64)> =
            model.procs.values().map(|p| (p.pid, p.starttime)).collect();
        let loads: Vec<f64> = model.nodes.iter().map(|n| n.cpu_demand).collect();
        self.since_action = match planned {
            Some(n) if n > 0 => 0,
            _ => self.since_action.saturating_add(1),
        };
        let quiet = planned == Some(0)
            && self.since_action > model.tunables.hold_periods
            && self.last.as_ref().is_some_and(|(old_procs, old_loads)| {
                procs.is_subset(old_procs)
                    && old_loads.len() == loads.len()
                    && old_loads.iter().zip(&loads).all(|(a, b)| (a - b).abs() < BACKOFF_LOAD_CHANGE_CPUS)
            });
        self.last = Some((procs, loads));
        if !quiet || self.cap_ns <= base_ns {
            self.quiet = 0;
            return base_ns;
        }
        self.quiet = self.quiet.saturating_add(1).min(32);
        base_ns.saturating_mul(1u64 << self.quiet.min(20)).min(self.cap_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stretch_follows_the_wait_in_whole_intervals_within_its_bounds() {
        let s = 1_000_000_000;
        assert_eq!(sampling_stretch(s, s), 1);
        assert_eq!(sampling_stretch(s / 2, s), 1, "a wait cut short never samples more densely");
        assert_eq!(sampling_stretch(2 * s, s), 2);
        assert_eq!(sampling_stretch(15 * s, s), 15);
        assert_eq!(sampling_stretch(15 * s + s / 2, s), 15);
        assert_eq!(sampling_stretch(86_400 * s, s), MAX_SAMPLING_STRETCH);
        assert_eq!(sampling_stretch(s, 0), MAX_SAMPLING_STRETCH, "a zero interval is not a division by zero");
    }
}
