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
//!                     stretch = sampling_stretch(min(wait, last period as it turned out),
//!                                                interval) = wait / interval, in 1..=64
//!                               x density (1, 2, 4 ... 64: the last window's fill, turned
//!                                 into a fill per interval at the base period (per second
//!                                 at least once two steps planned nothing), over FILL_HIGH:
//!                                 doubled; under FILL_LOW: halved)
//!                     host.set_sampling_stretch(stretch): sample period = base period x stretch
//! ```
//!
//! The density is the other half of the cost: a fixed period samples a streaming thread at a rate
//! proportional to its bandwidth (a core streaming 10 GB/s at one sample per 10 000 cache lines
//! gives 15 600 samples/s, several times what a ring holds between steps), and the PMU interrupts
//! for every record, those the full ring drops included. Keeping the fullest buffer between
//! FILL_LOW and FILL_HIGH bounds the records per window, and so the cost, whatever the workload;
//! the perf tool's frequency mode does it per event inside the kernel, at the price of samples
//! whose weights differ (here one factor holds for every event, carried by the samples). While
//! young processes are stepped every 100 ms a window is a tenth of a second, so a bound per
//! window alone would let the sampler run at ten times the settled rate; once the policy has
//! planned nothing for two steps the fill is measured per second at least
//! ([`DENSITY_SPAN_MIN_NS`]), so the cost per second is bounded there too, while a policy that is
//! acting (a placement being made) keeps the dense sampling its decisions need.
//!
//! A step after a whole wait sees about as many samples as one after the interval (a step that
//! looks 15 s later sees about as many as one that looks after 1 s), so the model's evidence per
//! decision is kept while the sampling's cost per second falls with the back-off. Any change
//! snaps both back at once. A wait can end early (a new process, a new thread, a page move that
//! ended): the stretch for the next wait is bounded by the last period as it turned out, so a
//! loop woken every second keeps sampling at about the base period, and a step cut short finds
//! fewer samples only for that one window. The samples carry their stretch
//! (`Sample::access_period_scale`), so rates computed from them (the model's traffic per thread)
//! do not fall with it. The daemon's loop and the simulator's run loop use the same [`Backoff`], so the
//! simulator steps the engine at the daemon's cadence and charges the sampling it would pay.
//!
//! With one node in the daemon's reach (the machine has one, or its cpuset allows it one) there
//! is nothing to place, and nothing the model sees can lead to an action: the daemon says so
//! ([`Backoff::set_nothing_to_place`]) and every step that did not fail counts as quiet, new
//! processes, load changes and the plan it does not carry out included. A build starting
//! compilers all the time would otherwise keep the loop at its interval for good (a new process
//! is a change), observing for nothing; the status, explain and metrics are then up to the cap
//! old, as on any idle machine.
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

/// Largest sampling stretch from the wait, and largest density divisor from the buffers' fill,
/// each a multiple of the base sample period (the two multiply: at most 4096). Default 64.
/// Source: a bound, beyond the 15 s / 1 s of the default cap; with a longer cap the samples per
/// step fall instead of the period growing without end. What it prevents: a period so long (a
/// one-day cap) that a thread's whole working set yields no sample between two steps.
pub const MAX_SAMPLING_STRETCH: u32 = 64;

/// The access-sampling stretch for a wait of `wait_ns` when the policy's own interval is
/// `base_ns`: `wait / base` rounded down, in `1..=MAX_SAMPLING_STRETCH`.
pub fn sampling_stretch(wait_ns: u64, base_ns: u64) -> u32 {
    let x = wait_ns / base_ns.max(1);
    x.clamp(1, u64::from(MAX_SAMPLING_STRETCH)) as u32
}

/// Access-sampler buffer fill above which the sampling density halves (the period doubles), a
/// fraction of what a buffer holds (`Sample::access_fill`). Default 0.5. Source: a choice, half
/// the ring: a burst twice the window's rate still fits. What it prevents: a streaming workload
/// whose samples overflow the rings between steps, paying the PMU interrupt for every record the
/// full ring then drops (this host's page-fault rings overflowed under the test suite's own
/// faults; the simulator's lone streamer overfills its per-thread cap at the base period).
pub const FILL_HIGH: f64 = 0.5;

/// Fill below which the density doubles again (the period halves), down to the base period.
/// Default 0.125. Source: a choice, a quarter of [`FILL_HIGH`]: a factor of 2 in either
/// direction lands inside the band, so a steady workload settles instead of oscillating. What
/// it prevents: a workload that calmed down being sampled sparsely for good.
pub const FILL_LOW: f64 = 0.125;

/// Shortest span the density measures the sampling rate over, ns: the fill is turned into a
/// fill per policy interval or per this span, whichever is longer. Default 1 s (the daemon's
/// default `interval_ms`). Source: the cost bound: FILL_HIGH of a ring a second is 1,024
/// memory-access samples a CPU (the daemon's 2,048-record ring), 0.2% of a CPU at ~2 us a sample
/// (`numapilot_sim::host::PMU_SAMPLE_COST_NS`). What it prevents: young processes, stepped every
/// 100 ms (`settle_interval_ms`), sampled ten times as densely, at ten times the cost, as the bound a
/// settled machine keeps (the simulator's 288-core numa02_SMT: 4,000 samples a second a thread,
/// 0.8% of its time, for the whole of its 2.4 s run). Applied only once two steps in a row
/// planned nothing: measured per second from the start, the same run sampled its placement
/// sparsely (50 samples a thread a window), moved threads in more steps and ran 2.54 s
/// against 2.45 s (hard-bind 2.33 s); from the second quiet step, 2.44 s.
pub const DENSITY_SPAN_MIN_NS: u64 = 1_000_000_000;

/// Steps in a row that planned nothing before the density is measured per second
/// ([`DENSITY_SPAN_MIN_NS`]). Default 2. Source: a choice: one quiet step can fall between two
/// moves of one placement (a page move still running); two say the placement is made. What it
/// prevents: sparse sampling while the policy is still deciding.
pub const DENSITY_QUIET_STEPS: u32 = 2;

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
/// With the default 1 s interval and 15 s cap an idle machine is stepped after 2, 4, 8, 15, 15 ... s.
/// With nothing to place ([`Backoff::set_nothing_to_place`]) every step that did not fail is quiet.
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
    /// Steps in a row that planned nothing and did not fail (the density's
    /// [`DENSITY_QUIET_STEPS`]; unlike `since_action`, a host that never acted counts from 0).
    quiet_run: u32,
    /// The time between the last two steps' starts as it turned out, ns ([`Backoff::stepped`]):
    /// shorter than the wait planned when a wake cut it short.
    last_period_ns: Option<u64>,
    /// The sampling density's divisor from the buffers' fill ([`Backoff::sampled`]), a power of
    /// two in `1..=MAX_SAMPLING_STRETCH`.
    density: u32,
    /// The last window's fill, its length (ns) and the stretch in force over it.
    last_fill: Option<(f64, u64, u32)>,
    /// The stretch [`Backoff::stretch_for`] returned last (in force over the coming window).
    last_stretch: u32,
    /// One node in reach: no step that did not fail is a change ([`Backoff::set_nothing_to_place`]).
    nothing_to_place: bool,
}

/// What the last step's model held: its processes `(pid, starttime)` and each node's CPU demand.
type Seen = (std::collections::BTreeSet<(u32, u64)>, Vec<f64>);

impl Backoff {
    /// A back-off up to `cap_ms` (`[daemon] idle_max_interval_ms`).
    pub fn new(cap_ms: u64) -> Self {
        Self {
            cap_ns: cap_ms.saturating_mul(1_000_000),
            quiet: 0,
            last: None,
            since_action: u32::MAX,
            quiet_run: 0,
            last_period_ns: None,
            density: 1,
            last_fill: None,
            last_stretch: 1,
            nothing_to_place: false,
        }
    }

    /// Whether there is nothing to place (one node in the daemon's reach), said before each
    /// [`Backoff::next_wait_ns`]. While so, a step that did not fail is quiet whatever it saw: a
    /// new process, a load change, an action planned (not carried out) or a hold running cannot
    /// lead to an action. Off again (a second node in reach), the next step is judged as usual
    /// against the one before. Default: off.
    pub fn set_nothing_to_place(&mut self, on: bool) {
        self.nothing_to_place = on;
    }

    /// Records how full the access sampler's buffers got over the last window
    /// (`Sample::access_fill`, a fraction; 0 without a sampler), the window being the period
    /// since the previous step ([`Backoff::stepped`]) at the stretch then in force. The next
    /// [`Backoff::stretch_for`] turns it into a fill per policy interval at the base period and
    /// chooses the density from that: doubled while it would exceed [`FILL_HIGH`], halved while
    /// under [`FILL_LOW`] when the half still stays under FILL_HIGH. Normalising by the window
    /// keeps the density about the sampling rate, not the window's length: the back-off's ramp
    /// (windows longer than the stretch they ran at) and a young process's 100 ms steps would
    /// otherwise move it. The perf tool's frequency mode solves the same problem inside the
    /// kernel (`-F`: the period re-tuned per event to a target rate); a fixed base period times
    /// these factors keeps every sample's weight known (`Sample::access_period_scale`).
    pub fn sampled(&mut self, fill: f64) {
        self.last_fill = self.last_period_ns.map(|w| (fill, w, self.last_stretch));
    }

    /// The density divisor in force (1: as the wait alone asks).
    pub fn density(&self) -> u32 {
        self.density
    }

    /// Records the time from the previous step's start to this one's, ns (called as a step
    /// starts, from the second step on).
    pub fn stepped(&mut self, period_ns: u64) {
        self.last_period_ns = Some(period_ns);
    }

    /// The sampling stretch for a coming wait of `wait_ns` (the policy's interval `base_ns`):
    /// [`sampling_stretch`] of the shorter of that wait and the last period as it turned out,
    /// times the density divisor the buffers' fill asks for ([`Backoff::sampled`]; up to
    /// 64 x 64). A
    /// loop whose waits keep being cut short (new processes waking it every second while the
    /// back-off plans 15 s) would otherwise sample 15 times more sparsely than its steps come;
    /// after a cut-short wait the period is the base one again until a whole wait is seen.
    pub fn stretch_for(&mut self, wait_ns: u64, base_ns: u64) -> u32 {
        let t = sampling_stretch(wait_ns.min(self.last_period_ns.unwrap_or(wait_ns)), base_ns);
        if let Some((fill, window, then)) = self.last_fill.take().filter(|f| f.1 > 0) {
            // The fill one policy interval (at least DENSITY_SPAN_MIN_NS) at the base period
            // gives; a stretch of t covers a wait of t intervals, so the density alone sets the
            // coming window's fill (under FILL_HIGH x the interval's share of the span).
            let settled = self.quiet_run >= DENSITY_QUIET_STEPS;
            let span = if settled { base_ns.max(DENSITY_SPAN_MIN_NS) } else { base_ns };
            let per_base = fill * f64::from(then) * span as f64 / window as f64;
            let at = |d: u32| per_base / f64::from(d);
            let mut d = self.density;
            while at(d) > FILL_HIGH && d < MAX_SAMPLING_STRETCH {
                d *= 2;
            }
            while d > 1 && at(d) < FILL_LOW && at(d / 2) <= FILL_HIGH {
                d /= 2;
            }
            self.density = d;
        }
        self.last_stretch = t * self.density;
        self.last_stretch
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
        // Nothing to place: a plan is not carried out, so it is no action.
        let planned = if self.nothing_to_place { planned.map(|_| 0) } else { planned };
        self.since_action = match planned {
            Some(n) if n > 0 => 0,
            _ => self.since_action.saturating_add(1),
        };
        self.quiet_run = if planned == Some(0) { self.quiet_run.saturating_add(1) } else { 0 };
        let quiet = planned == Some(0)
            && (self.nothing_to_place && self.last.is_some()
                || self.since_action > model.tunables.hold_periods
                    && self.last.as_ref().is_some_and(|(old_procs, old_loads)| {
                        procs.is_subset(old_procs)
                            && old_loads.len() == loads.len()
                            && old_loads.iter().zip(&loads).all(|(a, b)| (a - b).abs() < BACKOFF_LOAD_CHANGE_CPUS)
                    }));
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
    fn a_wait_cut_short_brings_the_stretch_down_until_a_whole_wait_is_seen() {
        let s = 1_000_000_000;
        let mut b = Backoff::new(15_000);
        assert_eq!(b.stretch_for(8 * s, s), 8, "no period seen yet: the wait planned");
        b.stepped(8 * s);
        assert_eq!(b.stretch_for(15 * s, s), 8, "the last whole wait bounds the next stretch");
        b.stepped(s + s / 10);
        assert_eq!(b.stretch_for(15 * s, s), 1, "woken after 1.1 s: the base period");
        b.stepped(15 * s);
        assert_eq!(b.stretch_for(15 * s, s), 15);
        assert_eq!(b.stretch_for(s, s), 1, "a short wait planned: short, whatever came before");
    }

    /// A workload sampled at `rate` buffer-fills per second at the base period, over windows of
    /// the given lengths (s): the fill each window ends with, and the stretch asked for next.
    fn drive(b: &mut Backoff, rate: impl Fn(usize) -> f64, windows: &[f64], base_s: f64) -> Vec<(f64, u32)> {
        let s = 1e9;
        let mut stretch = 1;
        let mut out = Vec::new();
        for (i, &w) in windows.iter().enumerate() {
            b.stepped((w * s) as u64);
            let fill = rate(i) * w / f64::from(stretch);
            b.sampled(fill);
            let next = windows.get(i + 1).copied().unwrap_or(w);
            stretch = b.stretch_for((next * s) as u64, (base_s * s) as u64);
            out.push((fill, stretch));
        }
        out
    }

    #[test]
    fn the_density_keeps_the_buffers_fill_in_its_band() {
        // A streamer filling its rings 3.8 times a second at the base period, stepped every
        // second: one full window, then a stretch of 8 and every fill inside the band.
        let mut b = Backoff::new(15_000);
        let run = drive(&mut b, |_| 3.8, &[1.0; 8], 1.0);
        assert!(run[0].0 > FILL_HIGH, "the premise: {run:?}");
        assert!(run[1..].iter().all(|&(f, st)| (FILL_LOW..=FILL_HIGH).contains(&f) && st == 8), "{run:?}");
        // The loop backs off (2, 4, 8, 15 s windows): the wait's own factor lags a step (bounded
        // by the last period, so a wait cut short never under-samples), so each ramp window runs
        // at up to twice the fill, still under a full buffer; the density does not move, and the
        // fill is back in the band once the wait stops growing.
        let mut b = Backoff::new(15_000);
        let run = drive(&mut b, |_| 3.8, &[1.0, 1.0, 2.0, 4.0, 8.0, 15.0, 15.0, 15.0], 1.0);
        assert!(run[1..].iter().all(|&(f, _)| f <= 2.0 * FILL_HIGH), "{run:?}");
        assert!((FILL_LOW..=FILL_HIGH).contains(&run.last().unwrap().0), "{run:?}");
        assert_eq!(b.density(), 8, "{run:?}");
        assert_eq!(run.last().unwrap().1, 120);
        // Young processes step every 100 ms (windows at a tenth of the fill); when they settle
        // the first 1 s window is already sampled at the density a 1 s window needs.
        let mut b = Backoff::new(15_000);
        let run = drive(&mut b, |_| 0.6, &[0.1, 0.1, 0.1, 0.1, 1.0, 1.0], 1.0);
        assert!(run.iter().all(|&(f, _)| f <= FILL_HIGH), "{run:?}");
        // The workload calms down: back to the base period at once.
        let mut b = Backoff::new(15_000);
        let run = drive(&mut b, |i| if i < 3 { 3.8 } else { 0.01 }, &[1.0; 6], 1.0);
        assert_eq!(run.last().unwrap().1, 1, "{run:?}");
        // No sampler reports 0: the density stays at 1; an absurd rate is bounded.
        let mut b = Backoff::new(15_000);
        drive(&mut b, |_| 0.0, &[1.0; 3], 1.0);
        assert_eq!(b.density(), 1);
        drive(&mut b, |_| 1e9, &[1.0; 3], 1.0);
        assert_eq!(b.density(), MAX_SAMPLING_STRETCH, "bounded");
    }

    #[test]
    fn young_steps_sample_densely_while_the_policy_acts_and_within_the_per_second_bound_once_quiet() {
        // A streamer filling its rings three times a second at the base period, stepped every
        // 100 ms (young processes): three steps that plan an action, five quiet ones, one more
        // action, one quiet.
        let ms = 1_000_000;
        let topo = numapilot_topology::Topology::uniform(2, 4, 8 << 20, 20);
        let model = Model::new(topo, numapilot_model::Tunables::default());
        let mut b = Backoff::new(15_000);
        let mut stretch = 1;
        let mut run = Vec::new();
        for planned in [1, 1, 1, 0, 0, 0, 0, 0, 1, 0] {
            b.stepped(100 * ms);
            let fill = 3.0 * 0.1 / f64::from(stretch);
            b.sampled(fill);
            let wait = b.next_wait_ns(100 * ms, &model, Some(planned));
            assert_eq!(wait, 100 * ms, "not backed off within the holds");
            stretch = b.stretch_for(wait, 100 * ms);
            run.push(stretch);
        }
        // Acting, and the first quiet step: a window's fill (0.3) is in the band, base period.
        // From the second quiet step: 3 rings a second is over FILL_HIGH a second, so 8 x
        // sparser (0.375 a second). The next action measures per window again: halved while
        // under FILL_LOW, back into the band at once (0.15 a window at 2).
        assert_eq!(run, [1, 1, 1, 1, 8, 8, 8, 8, 2, 2], "per step: {run:?}");
        // A host whose policy never acted (or whose steps fail) is no exception: quiet steps in a
        // row count from the first one; a failed step starts the count again.
        let mut b = Backoff::new(15_000);
        let mut stretch = 1;
        let mut run = Vec::new();
        for planned in [Some(0), Some(0), Some(0), None, Some(0), Some(0)] {
            b.stepped(100 * ms);
            b.sampled(3.0 * 0.1 / f64::from(stretch));
            let wait = b.next_wait_ns(100 * ms, &model, planned);
            stretch = b.stretch_for(wait, 100 * ms);
            run.push(stretch);
        }
        assert_eq!(run, [1, 8, 8, 2, 2, 8], "never acted, one failed step: {run:?}");
    }

    /// Nothing to place: a load change and a plan (not carried out) are no change, holds or not;
    /// the first step, with nothing to compare, and a failed one are not quiet; off again, a load
    /// change brings the interval back.
    #[test]
    fn with_nothing_to_place_every_step_that_did_not_fail_is_quiet() {
        let s = 1_000_000_000;
        let topo = numapilot_topology::Topology::uniform(1, 4, 8 << 20, 10);
        let mut model = Model::new(topo, numapilot_model::Tunables::default());
        let mut b = Backoff::new(15_000);
        b.set_nothing_to_place(true);
        let mut waits = Vec::new();
        for (load, planned) in
            [(0.0, Some(0)), (2.0, Some(3)), (0.5, Some(1)), (3.0, Some(0)), (3.0, None), (1.0, Some(2))]
        {
            model.nodes[0].cpu_demand = load;
            waits.push(b.next_wait_ns(s, &model, planned) / s);
        }
        assert_eq!(waits, [1, 2, 4, 8, 1, 2]);
        b.set_nothing_to_place(false);
        model.nodes[0].cpu_demand = 2.0;
        assert_eq!(b.next_wait_ns(s, &model, Some(0)), s, "a second node: a load change is a change again");
    }

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
