//! The control socket: `numapilot status` and `numapilot explain PID` talking to the running daemon.
//!
//! Problem: the daemon's view (groups, preferred nodes, why) lives in its memory; operators need it
//! without stopping the daemon, and nobody but root may read it (it names every process and can be
//! used to learn what runs where).
//!
//! Approach: a unix stream socket, created mode 0600 (umask set around `bind`, then `chmod`), in a
//! 0700 directory, and a `SO_PEERCRED` check on every connection: only uid 0 (or the daemon's own
//! uid, when it runs unprivileged in observe-only mode) is answered. One request per line, one JSON
//! response per line:
//!
//! ```text
//!   client                                  daemon (server thread)          engine loop
//!   {"cmd":"status"}            ──────────>  Status snapshot (Mutex) <──── updated after each step
//!   {"cmd":"explain","pid":812} ──────────>  request queue ─── wake ─────>  policy.explain(model, pid)
//!   {"ok":true,"explain":{...}} <──────────  reply channel  <────────────  (answered between steps)
//!   {"cmd":"advise","cpus":4,"mem_bytes":..,"pid":913}                    engine.advise_launch(..)
//!                               ──────────>  request queue ─── wake ─────>  (the launch stage: its
//!   {"ok":true,"advice":{...}}  <──────────  reply channel  <────────────  promise is kept)
//!   {"ok":false,"error":"nothing fits: ..","nodes_free":[..]}              (no room: the figures
//!                                                                           it went by)
//! ```
//!
//! The status is a snapshot the loop publishes after each step, so `status` never waits for a step.
//! `explain` needs the model itself, which the loop owns (the policy is not `Send`), so the request
//! is queued, the loop is woken through a pipe, answers between steps, and the server waits for the
//! reply (at most [`EXPLAIN_TIMEOUT`]). Limits: one connection served at a time, requests at most
//! 4 KiB, a client that has not sent its whole request within [`CLIENT_TIMEOUT`] is dropped (one
//! deadline for the request, not for each read: a byte every few seconds held the server for hours).
//!
//! One daemon has the socket's path at a time: [`serve`] takes an flock on `.NAME.lock` beside the
//! socket before it looks for a live server or removes a stale socket, and holds it until the
//! server stops; a second daemon started at the same moment is refused there, naming the pid that
//! holds it, and removes nothing (socket-start-locked).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use numapilot_policy::adaptive::Explanation;
use numapilot_policy::{LaunchAdvice, LaunchRequest};
use numapilot_topology::plural;
use serde::{Deserialize, Serialize};

/// Control clients served at once, each on a thread of its own; more are served by the accepting
/// thread in turn. Default 16. Source: judgement: a person's `status`, monitoring checks and a
/// launcher's `advise` at once, with room. Prevents: one silent client holding every other for its
/// request deadline, and unbounded threads (only root and the daemon's user can connect).
const MAX_CONTROL_CLIENTS: usize = 16;

/// How long a client may take to send its whole request line.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the server waits for the engine loop to answer an `explain` (one step of a 1000-process
/// machine takes well under a second; a step stuck longer than this is reported, not waited for).
pub const EXPLAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest request line, bytes.
const MAX_REQUEST: u64 = 4096;

/// A control-socket failure.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The socket could not be created.
    #[error("control socket {path}: {reason}")]
    Bind {
        /// The socket path.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// No daemon listens at the path.
    #[error("no numapilot daemon is listening on {path} ({reason})")]
    NotRunning {
        /// The socket path.
        path: PathBuf,
        /// The connect error.
        reason: String,
    },
    /// Something other than a socket is at the path (a regular file, a directory): a wrong `--socket`,
    /// not a stopped daemon.
    #[error("{path} is {what}, not a control socket (check --socket)")]
    NotASocket {
        /// The path.
        path: PathBuf,
        /// What is there ("a regular file", "a directory", ...).
        what: &'static str,
    },
    /// The daemon accepted the request but gave no complete answer within the time asked (a loop
    /// or a server thread that is hung).
    #[error("{path}: no complete answer within {secs} s")]
    NoAnswer {
        /// The socket path.
        path: PathBuf,
        /// The time given, seconds.
        secs: f64,
    },
    /// The socket exists but this user may not use it (it is root-only).
    #[error("permission denied on {path}: the control socket is root-only (run as root)")]
    Denied {
        /// The socket path.
        path: PathBuf,
    },
    /// The daemon answered with an error, or the exchange failed.
    #[error("{0}")]
    Request(String),
    /// The daemon found no room for an `advise` and sent the figures it went by
    /// ([`Response::nodes_free`]; a daemon that sends none gives [`ControlError::Request`]).
    #[error("{why}")]
    NothingFits {
        /// The daemon's reason, said as [`ControlError::Request`]'s.
        why: String,
        /// Each node it chose among, with what it counted free.
        free: Vec<numapilot_policy::advise::NodeFree>,
    },
}

/// One resource of one node, as status and metrics show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceStatus {
    /// `cpu`, `mem-bandwidth`, `mem-capacity`, `io`.
    pub resource: String,
    /// Whether the sample had what the resource needs.
    pub known: bool,
    /// Load, 0..1.
    pub load: f64,
    /// Interference (waiting time / period).
    pub interference: f64,
    /// Bottleneck flag.
    pub bottleneck: bool,
}

/// One node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeStatus {
    /// Kernel node id.
    pub node: u32,
    /// Its resources.
    pub resources: Vec<ResourceStatus>,
    /// Free memory (MemFree plus reclaimable), bytes.
    pub mem_free_bytes: u64,
    /// Total memory, bytes.
    pub mem_total_bytes: u64,
    /// CPU demand of the tasks that ran there, CPUs.
    pub cpu_demand: f64,
}

/// The access sampler as `status` shows it: its event and what became of its samples since the
/// daemon started (`signals::SignalStats`). The discard counts are disjoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SamplerStatus {
    /// The event sampled (`page-faults`, `cpu/mem-loads,ldlat=30/`, `ibs_op/cnt_ctl=1/` ...).
    pub event: String,
    /// A PMU sampling memory accesses (PEBS, IBS); false for the page-fault fallback.
    pub precise: bool,
    /// Samples read from the rings, kept or not.
    pub samples: u64,
    /// Of those, discarded as no user-space memory access worth placing by (no data address, no
    /// load or store, an L1 or L2 hit, a kernel-mode op).
    pub not_accesses: u64,
    /// Of those, discarded because their IBS RAW payload was not the op's registers (a kernel
    /// writing a layout numapilot does not decode).
    pub undecodable: u64,
    /// Of those, discarded because they named no thread still running (ARM SPE records without
    /// a CONTEXT packet before any context switch on their CPU, or of a thread that has exited).
    #[serde(default)]
    pub no_thread: u64,
    /// Of those, kept but on no node (the page not resident, or of no node numapilot knows).
    pub unplaced: u64,
    /// Samples the kernel lost (a ring full, or dropped by the PMU driver): not in `samples`.
    pub lost: u64,
    /// Times the kernel throttled the sampler for sampling too fast.
    pub throttles: u64,
    /// Times the sampler's AUX area (ARM SPE) was full and records were lost.
    #[serde(default)]
    pub truncations: u64,
    /// Times the sampler was opened again on other CPUs (CPU hotplug).
    pub reopens: u64,
}

impl SamplerStatus {
    /// Samples that reached the model: read, not discarded, on a node.
    pub fn used(&self) -> u64 {
        self.samples.saturating_sub(self.not_accesses + self.undecodable + self.no_thread + self.unplaced)
    }
}

/// What `numapilot status` shows (and the metrics expose).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// numapilot version.
    pub version: String,
    /// The daemon's pid.
    pub pid: u32,
    /// Seconds since the daemon started (filled when served).
    pub uptime_s: f64,
    /// The config file read (`None`: defaults).
    pub config_file: Option<String>,
    /// Step interval, ms.
    pub interval_ms: u64,
    /// The interval the policy chose after the last step, ms (shorter than `interval_ms` while
    /// young processes settle: `tunables.settle_interval_ms`).
    #[serde(default)]
    pub next_interval_ms: u64,
    /// The access sampler's period for the coming wait, as a multiple of its base period (the
    /// back-off's stretch times the density the buffers' fill asked for,
    /// `numapilot_policy::cadence`) as the host applied it; 1 at the base period, 0 without an
    /// access sampler (the usual case without a PMU or the page-fault fallback) or before the
    /// first step.
    #[serde(default)]
    pub sampling_stretch: u32,
    /// The access sampler's event and counts since start; `None` without one (a host where
    /// neither a PMU nor the page-fault fallback opens, or before the first step).
    #[serde(default)]
    pub access_sampler: Option<SamplerStatus>,
    /// Times a signal source (access sampler, socket tables, wake-up tracer ...) went from
    /// working to failing at run time; each is logged once as a warning and tried again.
    #[serde(default)]
    pub signal_source_failures: u64,
    /// Dry run: plans journaled, never applied.
    pub dry_run: bool,
    /// Why the daemon only observes, when it does (`not root`, `dry run`).
    pub observe_only_reason: Option<String>,
    /// Steps completed.
    pub steps: u64,
    /// Steps that failed (logged, retried at the next interval).
    pub step_errors: u64,
    /// Backed-off waits ended early because a process was created meanwhile (with the proc
    /// connector; without it, any new thread too, from /proc/loadavg's last pid).
    #[serde(default)]
    pub early_wakes: u64,
    /// Waits ended early because a young process started threads (the proc connector's events;
    /// `[daemon] new_thread_wake_ms`).
    #[serde(default)]
    pub thread_wakes: u64,
    /// Standing orders carried out between steps when their process started threads (rule
    /// new-threads-follow-memory; also in `actions_by_kind` and the outcome counters).
    #[serde(default)]
    pub standing_orders: u64,
    /// Waits ended early because a new process, not yet in the model, grew past
    /// `new_process_min_rss_mib` while young (rule "new-process-grows", the proc connector's fork
    /// events and a stat read every 50 ms while any is pending).
    #[serde(default)]
    pub growth_wakes: u64,
    /// Background page moves that ended during a wait and ended it (the page mover's wake; also
    /// counted when another wake had already brought the step as close): its `move-done` line,
    /// its pages and the next move come then, not an interval later.
    #[serde(default)]
    pub move_wakes: u64,
    /// Times the machine changed under the daemon (CPU hotplug: the topology read again; a
    /// `topology` journal line each).
    #[serde(default)]
    pub topology_changes: u64,
    /// Online CPUs placement never uses (`[actuation] reserved_cpus`, the kernel's isolated CPUs),
    /// a CPU list; empty when none.
    #[serde(default)]
    pub reserved_cpus: String,
    /// The nodes the daemon can place among, a node list: the machine's nodes with a usable CPU
    /// or memory (the daemon's own cpuset does not narrow them). Empty before the first step.
    #[serde(default)]
    pub placeable_nodes: String,
    /// Why there is nothing to place, when the list above has one node (or none): the machine
    /// has one NUMA node. The daemon then observes only
    /// (status, explain and metrics stay useful), moves no thread or page, and steps at its
    /// interval without the early steps for new processes and threads.
    #[serde(default)]
    pub nothing_to_place: Option<String>,
    /// The memory nodes the daemon's own cpuset allows it (its `Mems_allowed`), a node list read
    /// at start and after every step (it changes with `AllowedMemoryNodes=` or the container's
    /// `cpuset.mems`); empty when not read (not the live host on `/`).
    #[serde(default)]
    pub own_memory_nodes: String,
    /// The machine's memory nodes the daemon cannot move pages to, a node list: those its own
    /// cpuset does not allow it (the kernel cuts `migrate_pages`' new nodes to the caller's
    /// cpuset, and `move_pages` allocates under it). Threads are still placed there. Empty when
    /// none.
    #[serde(default)]
    pub pages_unmovable_to: String,
    /// Times the proc connector's queue overflowed and events were lost (each counted once per
    /// drain); the next regular step sees what they announced.
    #[serde(default)]
    pub proc_events_lost: u64,
    /// The last step error, if the last step failed.
    pub last_error: Option<String>,
    /// Actions planned.
    pub actions: u64,
    /// Base pages moved.
    pub pages_moved: u64,
    /// Base pages that failed to move.
    pub pages_failed: u64,
    /// Actions on vanished targets.
    pub vanished: u64,
    /// Actions the host refused.
    pub refused: u64,
    /// Page actions handed to the page mover (they run while the loop goes on; their pages count
    /// in `pages_moved` when they end).
    #[serde(default)]
    pub moves_started: u64,
    /// The page move running now (or ended since the last step and not yet taken), if any: the
    /// process and for how long, seconds.
    #[serde(default)]
    pub move_running: Option<(u32, f64)>,
    /// Actions by kind (`set-affinity` ...).
    pub actions_by_kind: BTreeMap<String, u64>,
    /// Failed actions by kind and outcome (`set-affinity/refused` ...).
    pub failures_by_kind: BTreeMap<String, u64>,
    /// Pages not moved by cause (`EBUSY`, `stopped: migrate_pages EPERM` ...: a bounded set of
    /// names, `live::apply::cause_class`; the journal keeps each failure's full text).
    pub pages_failed_by_cause: BTreeMap<String, u64>,
    /// Configuration reloads accepted / rejected (SIGHUP).
    pub reloads: u64,
    /// Configuration reloads rejected.
    pub reloads_rejected: u64,
    /// What the start said about this machine, once on stderr: reserved CPUs and why, other
    /// placers running, signal sources missing (no PMU, no eBPF, no proc connector), the cpuset
    /// hierarchy. Also the journal's `start` line.
    #[serde(default)]
    pub notes: Vec<String>,
    /// Journal lines not written (a full disk, a directory gone); the first failure of a streak
    /// is logged.
    #[serde(default)]
    pub journal_lines_dropped: u64,
    /// Launch advice still counted against the free capacity (`numapilot advise` answers), one
    /// line each: nodes, CPUs, memory, age and how long it is held. As of the last step.
    #[serde(default)]
    pub launch_promises: Vec<String>,
    /// Processes put back as they were before numapilot touched them (affinity, cpuset) because
    /// the operator took them out of its hands while it ran: a reload's `[exclude]` or
    /// `[include]`, or a move into or out of a listed cgroup.
    #[serde(default)]
    pub released: u64,
    /// Processes and threads in the model.
    pub processes: usize,
    /// Threads in the model.
    pub threads: usize,
    /// Affinity groups.
    pub groups: usize,
    /// Estimated share of memory accesses that are node-local (CPU-weighted over threads with an
    /// access estimate), 0..1; `None` before two samples.
    pub local_access: Option<f64>,
    /// Duration of the last step (observe + model + plan + act), seconds.
    pub last_cycle_s: f64,
    /// Sum of all step durations, seconds.
    pub cycle_s_total: f64,
    /// Of `cycle_s_total`, the time spent observing (with the model's update), deciding and
    /// acting, seconds (the engine's `StepReport` phases).
    #[serde(default)]
    pub phase_s_total: [f64; 3],
    /// Per node.
    pub nodes: Vec<NodeStatus>,
    /// Entries in each table the daemon keeps between steps, by name: the engine's (`model.*`,
    /// `policy.*`, `engine.*`: `Engine::bookkeeping`) and the live host's (`observer.*`,
    /// `signals.*`, `state.*`, `host.*`). Each stays the size of what is alive while processes
    /// come and go (`crates/sim/tests/bounded_state.rs`, the live churn test in
    /// `crates/daemon/tests/live.rs`); an operator watching the daemon's memory over weeks sees
    /// which table holds it. Also the metric `numapilot_bookkeeping_entries`.
    #[serde(default)]
    pub bookkeeping: BTreeMap<String, u64>,
    /// Processes left out now because a read of their numa_maps or maps sleeps in the kernel
    /// (their memory map is locked, e.g. behind a hung file server: `numapilot_observe::stall`),
    /// with the file and for how long. Also the metric `numapilot_stalled_processes`.
    #[serde(default)]
    pub stalled_reads: Vec<StalledRead>,
    /// Reads given up as stalled since the daemon started.
    #[serde(default)]
    pub stalled_reads_total: u64,
    /// Steps (failed ones too) by duration: the count whose duration was at most each bound of
    /// [`STEP_BUCKETS_S`] and above the one before, the last entry the steps above every bound
    /// (not cumulative; the metric `numapilot_step_duration_seconds` sums them as Prometheus's
    /// histogram does). Empty before the first step.
    #[serde(default)]
    pub step_histogram: Vec<u64>,
    /// Wall clock (Unix time, seconds) when the last step ended; 0 before the first. Also the
    /// metric `numapilot_last_step_timestamp_seconds`, for an alert on a loop that stopped.
    #[serde(default)]
    pub last_step_unix_s: f64,
    /// Seconds since the last step ended, filled when served (`None` before the first step).
    #[serde(default)]
    pub since_last_step_s: Option<f64>,
    /// Monotonic clock when the last step ended, ns (the daemon's own; `since_last_step_s` is
    /// computed from it when served).
    #[serde(skip)]
    pub last_step_mono_ns: u64,
    /// A save of the state file failed and has not succeeded since: the daemon changes nothing
    /// until it does (rule originals-on-disk-first).
    #[serde(default)]
    pub state_unsaved: bool,
    /// The journal's last write failed (a full disk, a directory gone): lines are being dropped.
    #[serde(default)]
    pub journal_failing: bool,
    /// The metrics address could not be bound (the port taken): why. The daemon runs on and
    /// tries again every [`METRICS_RETRY_S`].
    #[serde(default)]
    pub metrics_unbound: Option<String>,
    /// Steps that failed in a row up to the last one (0 when it succeeded).
    #[serde(default)]
    pub consecutive_step_errors: u64,
    /// Page moves given up as stuck in the kernel and still there (rule stuck-move-abandoned:
    /// none of their calls returned and their threads spent no CPU time for the mover's limit,
    /// `live::mover::STUCK_MOVE_S` by default): the process and seconds
    /// since the move was handed over. Moves of other processes go on.
    #[serde(default)]
    pub moves_stuck: Vec<(u32, f64)>,
}

/// Upper bounds of the step-duration histogram, seconds (`Status::step_histogram`). Source:
/// Prometheus's default buckets cut to the range a step lives in, with 0.05 s as one bound since
/// it is issue 5's cycle budget (a quantile over the budget reads off a bucket edge). Prevents:
/// bounds between which a budget overrun could not be told.
pub const STEP_BUCKETS_S: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// Adds one step of `secs` to a histogram laid out as [`Status::step_histogram`].
pub fn count_step(histogram: &mut Vec<u64>, secs: f64) {
    histogram.resize(STEP_BUCKETS_S.len() + 1, 0);
    let i = STEP_BUCKETS_S.iter().position(|b| secs <= *b).unwrap_or(STEP_BUCKETS_S.len());
    histogram[i] += 1;
}

/// How well the daemon is doing, as `numapilot status --check` reports it (the levels and exit
/// statuses of a monitoring plugin: 0 OK, 1 WARNING, 2 CRITICAL; the client adds CRITICAL for no
/// daemon or no answer, and 3, UNKNOWN, for a daemon it could not ask).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum HealthLevel {
    /// Stepping, changes possible, nothing dropped.
    Ok,
    /// Working, but something needs a look (stalled reads, journal lines dropped).
    Warning,
    /// Not doing its job: the last step failed, no step for long, or nothing may be changed.
    Critical,
}

impl HealthLevel {
    /// Its name as a monitoring plugin prints it (`OK`, `WARNING`, `CRITICAL`).
    pub fn name(self) -> &'static str {
        match self {
            HealthLevel::Ok => "OK",
            HealthLevel::Warning => "WARNING",
            HealthLevel::Critical => "CRITICAL",
        }
    }

    /// The process exit status for this level (0, 1, 2).
    pub fn exit_code(self) -> u8 {
        match self {
            HealthLevel::Ok => 0,
            HealthLevel::Warning => 1,
            HealthLevel::Critical => 2,
        }
    }
}

/// The verdict and every reason behind it, worst first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Health {
    /// The worst level of the reasons (OK when there are none).
    pub level: HealthLevel,
    /// One line per condition found, with its level.
    pub reasons: Vec<(HealthLevel, String)>,
}

/// Steps failed in a row that make the verdict CRITICAL (fewer: WARNING). Default 3. Source:
/// judgement: a step fails for a passing reason (a descriptor limit hit once, a /proc read racing
/// an exit) and is retried at the next interval; three in a row (3 s at the default interval) is
/// a condition, not a passing one. Prevents: a probe's 503 and a page for every passing failure.
pub const FAILED_STEPS_CRITICAL: u64 = 3;

/// How long past its planned wait a step may be late before the loop counts as stuck, seconds.
/// Default 30 s. Source: judgement: a step that observes 10,000 threads on a machine saturated by
/// the work it places took up to 2 s in the rig (docs/race-history.md); 30 s is far past any step
/// seen, short enough for an operator's check interval. Prevents: a loop stuck in the kernel (a
/// blocked read the stall guard does not cover) reading as healthy because its last step succeeded.
pub const STUCK_GRACE_S: f64 = 30.0;

impl Status {
    /// The status text's line on the access sampler: its event, what its samples became and what
    /// the kernel lost; `None` before the first step.
    fn sampler_line(&self) -> Option<String> {
        if self.steps == 0 {
            return None;
        }
        let Some(a) = &self.access_sampler else {
            return Some("access sampling: off (no precise-sampling PMU, and `[signals] page_faults` off or refused: see the notes)".into());
        };
        let mut discarded = Vec::new();
        for (n, what) in [
            (a.not_accesses, "no memory access worth placing"),
            (a.undecodable, "undecodable"),
            (a.no_thread, "of no thread still running"),
            (a.unplaced, "on no node"),
        ] {
            if n > 0 {
                discarded.push(format!("{n} {what}"));
            }
        }
        let mut kernel = Vec::new();
        if a.lost > 0 {
            kernel.push(format!("{} lost by the kernel", plural(a.lost, "sample")));
        }
        if a.throttles > 0 {
            kernel.push(format!("throttled {}", plural(a.throttles, "time")));
        }
        if a.truncations > 0 {
            kernel.push(format!("its AUX area full {}", plural(a.truncations, "time")));
        }
        if a.reopens > 0 {
            kernel.push(format!("opened again {} (CPU hotplug)", plural(a.reopens, "time")));
        }
        Some(format!(
            "access sampling: {} ({}): {} read, {} used{}{}",
            a.event,
            if a.precise { "the PMU's memory-access samples" } else { "page faults: no PMU sampler" },
            plural(a.samples, "sample"),
            a.used(),
            if discarded.is_empty() { String::new() } else { format!(" ({})", discarded.join(", ")) },
            if kernel.is_empty() { String::new() } else { format!("; {}", kernel.join(", ")) },
        ))
    }

    /// The health verdict of this snapshot (as served: `since_last_step_s` filled).
    pub fn health(&self) -> Health {
        let mut reasons = Vec::new();
        if let Some(e) = &self.last_error {
            // One failure is retried at the next interval; a run of them is the daemon not working.
            let n = self.consecutive_step_errors.max(1);
            let level = if n >= FAILED_STEPS_CRITICAL { HealthLevel::Critical } else { HealthLevel::Warning };
            reasons.push((level, format!("the last {n} step{} failed: {e}", if n == 1 { "" } else { "s" })));
        }
        match self.since_last_step_s {
            // Never stepped (not one ended, failed or not), past the grace. A snapshot without the
            // age (a daemon older than this client) tells nothing either way.
            None if self.steps + self.step_errors == 0 && self.uptime_s > STUCK_GRACE_S => reasons.push((
                HealthLevel::Critical,
                format!("no step has completed in the {:.0} s since the start", self.uptime_s),
            )),
            Some(age) if age > self.next_interval_ms as f64 / 1e3 + STUCK_GRACE_S => reasons.push((
                HealthLevel::Critical,
                format!(
                    "no step for {age:.0} s (the next was due {:.1} s after the last)",
                    self.next_interval_ms as f64 / 1e3
                ),
            )),
            _ => {}
        }
        if let Some(why) = self.observe_only_reason.as_ref().filter(|r| r.as_str() != "dry run") {
            reasons.push((HealthLevel::Warning, format!("changes no process though not a dry run: {why}")));
        }
        if self.state_unsaved {
            reasons.push((
                HealthLevel::Critical,
                "the state file cannot be saved: nothing is changed until it can (see the log)".to_string(),
            ));
        }
        if self.journal_failing {
            reasons.push((
                HealthLevel::Warning,
                format!(
                    "the journal cannot be written: {} line{} dropped so far",
                    self.journal_lines_dropped,
                    if self.journal_lines_dropped == 1 { "" } else { "s" }
                ),
            ));
        }
        if let Some(why) = &self.metrics_unbound {
            reasons.push((
                HealthLevel::Warning,
                format!(
                    "metrics not served: {why} (tried again every {METRICS_RETRY_S} s; what answers on that port \
                     now is not this daemon)"
                ),
            ));
        }
        for (pid, secs) in &self.moves_stuck {
            reasons.push((
                HealthLevel::Warning,
                format!(
                    "a move of pid {pid}'s pages, started {secs:.0} s ago, is stuck in the kernel (its memory map \
                     locked?); other moves go on"
                ),
            ));
        }
        if !self.stalled_reads.is_empty() {
            let pids: Vec<String> = self.stalled_reads.iter().map(|r| r.pid.to_string()).collect();
            reasons.push((
                HealthLevel::Warning,
                format!("left out, a read of their memory map blocked in the kernel: pid {}", pids.join(", ")),
            ));
        }
        reasons.sort_by_key(|r| std::cmp::Reverse(r.0));
        Health { level: reasons.first().map_or(HealthLevel::Ok, |r| r.0), reasons }
    }

    /// One line for an OK check: what the daemon is doing.
    pub fn summary(&self) -> String {
        let mode = match (&self.observe_only_reason, self.dry_run) {
            (Some(r), _) => format!("observe only ({r})"),
            (None, true) => "dry run".into(),
            (None, false) => "acting".into(),
        };
        let last = self.since_last_step_s.map_or_else(|| "no step yet".into(), |a| format!("last step {a:.1} s ago"));
        let local = self.local_access.map_or_else(String::new, |l| format!(", local access {:.0}%", l * 100.0));
        let one = if self.nothing_to_place.is_some() { ", nothing to place (one node)" } else { "" };
        format!(
            "numapilot {}, pid {}, {mode}{one}, {}, {last}{local}",
            self.version,
            self.pid,
            plural(self.processes, "process")
        )
    }
}

/// What a daemon whose own cpuset leaves memory nodes out cannot do, and the fix: `own` its
/// memory nodes, `machine` the machine's (when known), `out` those it cannot move pages to (node
/// lists).
pub fn unmovable_line(own: &str, machine: Option<&str>, out: &str) -> String {
    let machine = machine.map_or_else(String::new, |m| format!(" of the machine's {m}"));
    format!(
        "pages cannot be moved to memory nodes {out}: the daemon's own cpuset allows it memory nodes {own}{machine} \
         (the kernel moves pages only to the caller's allowed nodes; threads are still placed there). \
         Allow the daemon every memory node (AllowedMemoryNodes= on its unit, the container's cpuset.mems)"
    )
}

/// A read blocked in the kernel ([`Status::stalled_reads`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StalledRead {
    /// The process.
    pub pid: u32,
    /// The file.
    pub file: String,
    /// Since when, seconds ago.
    pub for_s: f64,
}

/// A request on the socket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "lowercase")]
pub enum Request {
    /// The status snapshot.
    Status,
    /// The explanation of one process.
    Explain {
        /// Process id.
        pid: u32,
    },
    /// Launch advice (rule launch-advice): nodes for a job about to start, from the daemon's model
    /// and its promises to earlier launches (`numapilot advise` while a daemon runs, as `numad -w`
    /// asks a running numad).
    Advise {
        /// CPUs the job needs.
        cpus: f64,
        /// Memory it needs, bytes.
        mem_bytes: u64,
        /// The pid the job will run as (a launcher that execs keeps its pid): the daemon adopts
        /// that process as placed by its advice (rule launch-holds). Without one the advice only
        /// reserves its capacity for a few seconds, and the job, narrowed by its launcher, counts
        /// as placed by someone else.
        #[serde(default)]
        pid: Option<u32>,
        /// Free CPUs and memory per node as the client just measured them (`numapilot advise`
        /// measures over `--window-ms`, as numad refreshes its nodes before each `-w` answer);
        /// empty: the daemon goes by the model of its last step.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        nodes_now: Vec<numapilot_policy::advise::NodeFree>,
        /// The CPUs the job may use (the client's affinity within its cpuset), when fewer than the
        /// machine's: `nodes_now` counts these, and the daemon counts a node's CPUs within both
        /// these and its usable ones (not reserved). Absent: every CPU.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reach_cpus: Option<numapilot_topology::CpuSet>,
    },
}

/// The response line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// Whether the request succeeded.
    pub ok: bool,
    /// The error, when not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// For `status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// For `explain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explain: Option<Explanation>,
    /// For `advise`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advice: Option<LaunchAdvice>,
    /// For an `advise` that nothing fits (`ok` false): each node the daemon chose among, with the
    /// free CPUs and memory it went by (as [`LaunchAdvice::free`]), so the client shows the
    /// daemon's view, not its own measurement. Absent from a daemon from before this field, or a
    /// policy that does not say (numad).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes_free: Vec<numapilot_policy::advise::NodeFree>,
}

impl Response {
    fn error(e: impl Into<String>) -> Self {
        Self { ok: false, error: Some(e.into()), ..Self::answer() }
    }

    /// A success with nothing in it yet.
    fn answer() -> Self {
        Self { ok: true, error: None, status: None, explain: None, advice: None, nodes_free: Vec::new() }
    }
}

/// Why an `advise` got no advice: the reason, and when nothing fits, the daemon's figures
/// ([`Response::nodes_free`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AdviseRefusal {
    /// The reason.
    pub why: String,
    /// Each node the daemon chose among with what it counted free; empty when it does not say.
    pub free: Vec<numapilot_policy::advise::NodeFree>,
}

impl From<String> for AdviseRefusal {
    fn from(why: String) -> Self {
        Self { why, free: Vec::new() }
    }
}

/// A request waiting for the engine loop (it needs the model and the policy, which the loop owns).
#[derive(Debug)]
pub enum LoopRequest {
    /// `explain PID`.
    Explain {
        /// The process.
        pid: u32,
        /// Where the loop sends the answer (`Err`: the reason there is none).
        reply: mpsc::Sender<Result<Explanation, String>>,
    },
    /// `advise`.
    Advise {
        /// The request.
        request: LaunchRequest,
        /// Where the loop sends the answer (`Err`: why there is none, with the figures it went by).
        reply: mpsc::Sender<Result<LaunchAdvice, AdviseRefusal>>,
    },
}

/// What the server shares with the engine loop.
#[derive(Debug)]
pub struct Shared {
    /// The latest status.
    pub status: Mutex<Status>,
    /// When the daemon started (monotonic ns).
    pub started_ns: u64,
}

impl Shared {
    /// The latest status as served: with the time since the start and since the last step now.
    pub fn snapshot(&self) -> Status {
        let mut s = self.status.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let now = numapilot_observe::reader::monotonic_ns();
        s.uptime_s = now.saturating_sub(self.started_ns) as f64 / 1e9;
        s.since_last_step_s = (s.last_step_mono_ns > 0).then(|| now.saturating_sub(s.last_step_mono_ns) as f64 / 1e9);
        s
    }
}

/// The server side handed to the loop: the queue of explain requests and the wake-up pipe's read end.
#[derive(Debug)]
pub struct LoopSide {
    /// Pending explain and advise requests.
    pub requests: mpsc::Receiver<LoopRequest>,
    /// Readable when a request is queued (drain it with [`LoopSide::drain_wake`]).
    pub wake: UnixStream,
}

impl LoopSide {
    /// Empties the wake pipe (non-blocking).
    pub fn drain_wake(&mut self) {
        drain_socket(&self.wake);
    }
}

/// Reads a non-blocking wake-up socket until it is empty (or fails): the bytes only say "look".
pub fn drain_socket(s: &UnixStream) {
    let mut buf = [0u8; 64];
    while matches!((&*s).read(&mut buf), Ok(n) if n > 0) {}
}

/// A server thread (the control socket's, the metrics port's) that stops accepting and closes its
/// listening socket when this is dropped: the flag is set and the listener poked with a connection
/// of our own, which its accept returns, so the thread sees the flag and drops the listener. Not
/// joined (a client being served finishes first). Why: the daemon's threads' descriptors are
/// closed by the kernel only when every thread has exited, and a page-mover thread asleep in the
/// kernel (a process's memory map locked behind a hung file server) keeps the process from exiting
/// after its restore: its metrics port stayed bound and its control socket answered, so the
/// restarted daemon found both taken (review helper-46).
pub struct Listening {
    stop: Arc<std::sync::atomic::AtomicBool>,
    poke: Box<dyn Fn() + Send + Sync>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Listening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listening").field("stopped", &self.stop).finish_non_exhaustive()
    }
}

impl Listening {
    /// Wraps a server thread that checks `stop` after each accept; `poke` connects to its listener.
    pub fn new(
        stop: Arc<std::sync::atomic::AtomicBool>,
        poke: Box<dyn Fn() + Send + Sync>,
        thread: std::thread::JoinHandle<()>,
    ) -> Self {
        Listening { stop, poke, thread: Some(thread) }
    }

    /// Stops it and waits at most `limit` for its thread to end (tests): whether it ended.
    pub fn stop_within(mut self, limit: Duration) -> bool {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        (self.poke)();
        let thread = self.thread.take();
        let t0 = Instant::now();
        while thread.as_ref().is_some_and(|t| !t.is_finished()) {
            if t0.elapsed() > limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        if !self.stop.swap(true, std::sync::atomic::Ordering::SeqCst) {
            (self.poke)();
        }
    }
}

/// The control socket's path while a server has it: the lock beside the socket (`.NAME.lock`),
/// held for the server's life, and the directories made for it. Dropped, it removes the socket
/// (once bound) and the lock file while the lock is still held, then lets the lock go, then
/// removes the directories made, when empty: a daemon that stops, or a start refused after the
/// lock, leaves none of them behind.
#[derive(Debug)]
pub struct SocketClaim {
    socket: PathBuf,
    bound: bool,
    lock_path: PathBuf,
    lock: Option<std::fs::File>,
    /// Dropped after the lock is let go (field order).
    _dirs: crate::paths::MadeDirs,
}

impl Drop for SocketClaim {
    fn drop(&mut self) {
        if self.bound {
            let _ = std::fs::remove_file(&self.socket);
        }
        // Only while the path is still the file locked.
        if self.lock.as_ref().is_some_and(|f| crate::paths::same_file(f, &self.lock_path)) {
            let _ = std::fs::remove_file(&self.lock_path);
        }
        drop(self.lock.take());
    }
}

/// Creates the socket (mode 0600, missing directories above it created 0700) and starts the server
/// thread. One server has the path at a time: an exclusive lock on `.NAME.lock` beside the socket
/// is taken first and held until the returned claim is dropped, so two daemons started at once
/// never both bind, nor does one remove the other's socket as stale; the one refused says which
/// pid holds it. A stale socket file from a previous run is replaced; one a server still listens
/// on (a server that takes no lock) is left alone and its pid named; a path that exists and is
/// not a socket is an error (never deleted). The claim removes the socket, its lock and the
/// directories made when dropped (at once when this fails).
pub fn serve(path: &Path, shared: Arc<Shared>) -> Result<(LoopSide, Listening, SocketClaim), ControlError> {
    let bind_err = |reason: String| ControlError::Bind { path: path.to_path_buf(), reason };
    // Directories made here go again when the start fails (here, or later: they are returned,
    // and `run` drops them with the socket): a failed start left an empty /run/numapilot.
    let mut made = crate::paths::MadeDirs::default();
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.exists() {
        made = crate::paths::make_dirs(dir, 0o700)
            .map_err(|e| bind_err(format!("cannot create {}: {e}", dir.display())))?;
    }
    // socket-dir-trusted: another user who owns the directory, or may write to it without the
    // sticky bit, can rename the daemon's socket away and listen at its path (and root's
    // `numapilot status` then talks to that user's server: review of 2026-11-29).
    // And so every directory above it (a review of 2026-11-30): one whose parent another user
    // may write in can be renamed aside and a directory of theirs put in its place, with
    // their server at the socket's path, as the state file's check already holds.
    crate::paths::trusted_dir(dir).map_err(bind_err)?;
    // socket-start-locked: the check for a live server, the stale socket's removal and the bind
    // below are three steps; two daemons started at once both found the stale socket, and one
    // removed the socket the other had just bound (or failed on its bind), review helper-79.
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "numapilot.sock".into());
    let lock_path = dir.join(format!(".{name}.lock"));
    let (lock, _) = crate::paths::take_lock(&lock_path).map_err(|e| match e {
        crate::paths::LockError::Held(who) => bind_err(format!(
            "in use by another numapilot daemon, {who}, which holds {}: stop it first, or give this one its own \
             --socket",
            lock_path.display()
        )),
        crate::paths::LockError::Other(why) => bind_err(why),
    })?;
    let mut claim = SocketClaim { socket: path.to_path_buf(), bound: false, lock_path, lock: Some(lock), _dirs: made };
    match std::fs::symlink_metadata(path) {
        Ok(m) => {
            use std::os::unix::fs::FileTypeExt;
            if !m.file_type().is_socket() {
                return Err(bind_err("exists and is not a socket; not replacing it".into()));
            }
            if let Ok(s) = UnixStream::connect(path) {
                // The pid shows as 0 for a server in another pid namespace.
                let who = peer_cred(&s)
                    .ok()
                    .filter(|c| c.pid > 0)
                    .map_or_else(|| "pid unknown".into(), |c| crate::paths::process_words(c.pid as u32));
                return Err(bind_err(format!("another daemon is already listening there, {who}")));
            }
            std::fs::remove_file(path).map_err(|e| bind_err(format!("cannot remove the stale socket: {e}")))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(bind_err(e.to_string())),
    }
    // SAFETY: umask only changes the process's file-creation mask; restored right after bind.
    let old = unsafe { libc::umask(0o177) };
    let listener = UnixListener::bind(path);
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    let listener = listener.map_err(|e| bind_err(e.to_string()))?;
    claim.bound = true;
    // 0600 on the socket just bound, set through a descriptor of it, never by path: a chmod by path
    // follows a link swapped in after the bind, and the umask at bind is process-wide (another
    // thread's umask call can come between ours and the bind).
    private_socket(path).map_err(bind_err)?;
    let (tx, rx) = mpsc::channel();
    let (wake_w, wake_r) = UnixStream::pair().map_err(|e| bind_err(format!("wake pipe: {e}")))?;
    wake_r.set_nonblocking(true).map_err(|e| bind_err(format!("wake pipe: {e}")))?;
    wake_w.set_nonblocking(true).map_err(|e| bind_err(format!("wake pipe: {e}")))?;
    // SAFETY: geteuid has no preconditions.
    let own_uid = unsafe { libc::geteuid() };
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = Arc::clone(&stop);
    let handle = std::thread::Builder::new()
        .name("numapilot-control".into())
        .spawn(move || {
            // control-clients-apart: each client on a thread of its own, at most
            // MAX_CONTROL_CLIENTS at once (more are served here, in turn). Served one at a time, a
            // root client that connected and sent nothing held every other for its 5 s deadline,
            // and six of them made a healthy daemon read "not answering" (review helper-55).
            let active = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            for conn in listener.incoming() {
                if stopped.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = conn else {
                    std::thread::sleep(ACCEPT_RETRY);
                    continue;
                };
                let serve_here = |stream: UnixStream| {
                    if let Err(e) = handle_client(stream, &shared, own_uid, &tx, &wake_w) {
                        tracing::debug!("control client: {e}");
                    }
                };
                if active.fetch_add(1, std::sync::atomic::Ordering::AcqRel) >= MAX_CONTROL_CLIENTS {
                    active.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                    serve_here(stream);
                    continue;
                }
                let Ok(wake) = wake_w.try_clone() else {
                    active.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                    serve_here(stream);
                    continue;
                };
                let (shared2, tx2, active2) = (Arc::clone(&shared), tx.clone(), Arc::clone(&active));
                // A copy to serve it here with, should no thread start.
                let fallback = stream.try_clone();
                let spawned = std::thread::Builder::new()
                    .name("numapilot-control-client".into())
                    .stack_size(256 << 10)
                    .spawn(move || {
                        if let Err(e) = handle_client(stream, &shared2, own_uid, &tx2, &wake) {
                            tracing::debug!("control client: {e}");
                        }
                        active2.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                    });
                if spawned.is_err() {
                    active.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                    if let Ok(s) = fallback {
                        serve_here(s);
                    }
                }
            }
        })
        .map_err(|e| bind_err(format!("thread: {e}")))?;
    let at = path.to_path_buf();
    let poke = Box::new(move || drop(UnixStream::connect(&at)));
    Ok((LoopSide { requests: rx, wake: wake_r }, Listening::new(stop, poke, handle), claim))
}

/// A socket the server reads one request from, under one deadline for the whole request: each
/// read waits at most what is left of it, and once it has passed, reads fail (TimedOut).
pub(crate) struct Deadline<'a, S> {
    stream: &'a S,
    until: Instant,
}

/// Seconds between two tries to bind a metrics address that was taken. Default 10. Source: a
/// choice, a scrape interval's order. Prevents: a port someone else holds (any local user may bind
/// an unprivileged port before the daemon starts) stopping the daemon, whose unit then gave up
/// after ten restarts (review helper-51); and a retry storm while it stays taken.
pub const METRICS_RETRY_S: u64 = 10;

/// The sockets [`Deadline`] reads: a stream whose read timeout can be set.
pub(crate) trait ReadTimeout {
    fn set_timeout(&self, d: Duration) -> std::io::Result<()>;
}

impl ReadTimeout for UnixStream {
    fn set_timeout(&self, d: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(d))
    }
}

impl ReadTimeout for std::net::TcpStream {
    fn set_timeout(&self, d: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(d))
    }
}

impl<'a, S> Deadline<'a, S> {
    pub(crate) fn new(stream: &'a S, within: Duration) -> Self {
        Self { stream, until: Instant::now() + within }
    }
}

impl<S: ReadTimeout> Read for Deadline<'_, S>
where
    for<'b> &'b S: Read,
{
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "request not complete within its deadline"));
        }
        self.stream.set_timeout(left)?;
        let mut s = self.stream;
        // A socket's read timeout comes back as EAGAIN (WouldBlock) on Linux: the same deadline.
        s.read(buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock => {
                std::io::Error::new(std::io::ErrorKind::TimedOut, "request not complete within its deadline")
            }
            _ => e,
        })
    }
}

/// After a failed accept (EMFILE, ENFILE, ENOMEM: out of descriptors or memory), wait this long
/// before the next: retrying at once spins a CPU while the condition lasts.
pub(crate) const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// Makes the socket at `path` mode 0600 through an O_PATH descriptor opened without following a
/// link; an error when `path` is not a socket.
fn private_socket(path: &Path) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt as _;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: a NUL-terminated path; the descriptor is closed below.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    // SAFETY: fd is ours; st is written by fstat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let r = if unsafe { libc::fstat(fd, &mut st) } != 0 {
        Err(std::io::Error::last_os_error().to_string())
    } else if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        Err("not the socket just bound (a link or another file is there now)".to_string())
    } else {
        // chmod through the descriptor's /proc entry acts on the inode it names, not on a path.
        std::fs::set_permissions(format!("/proc/self/fd/{fd}"), std::fs::Permissions::from_mode(0o600))
            .map_err(|e| e.to_string())
    };
    // SAFETY: closing our own descriptor once.
    unsafe { libc::close(fd) };
    r
}

/// The uid of the process at the other end (`SO_PEERCRED`).
pub fn peer_uid(stream: &UnixStream) -> std::io::Result<u32> {
    peer_cred(stream).map(|c| c.uid)
}

/// The credentials of the process at the other end (`SO_PEERCRED`): for a connection made to a
/// listening socket, the process that listened.
fn peer_cred(stream: &UnixStream) -> std::io::Result<libc::ucred> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: cred and len are valid for writes of the sizes given; the fd is a connected socket.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred)
}

fn handle_client(
    stream: UnixStream,
    shared: &Shared,
    own_uid: u32,
    tx: &mpsc::Sender<LoopRequest>,
    wake: &UnixStream,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    stream.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let uid = peer_uid(&stream)?;
    let mut out = &stream;
    if uid != 0 && uid != own_uid {
        let r = Response::error(format!("permission denied: uid {uid} is not root"));
        return writeln!(out, "{}", serde_json::to_string(&r).unwrap_or_default());
    }
    let mut line = String::new();
    let request = Deadline::new(&stream, CLIENT_TIMEOUT);
    BufReader::new(request.take(MAX_REQUEST)).read_line(&mut line)?;
    let response = match serde_json::from_str::<Request>(line.trim()) {
        Err(e) => Response::error(format!("bad request {:?}: {e}", line.trim())),
        Ok(Request::Status) => {
            let s = shared.snapshot();
            Response { status: Some(s), ..Response::answer() }
        }
        Ok(Request::Explain { pid }) => match ask_loop(tx, wake, |reply| LoopRequest::Explain { pid, reply }) {
            Ok(e) => Response { explain: Some(e), ..Response::answer() },
            Err(reason) => Response::error(reason),
        },
        Ok(Request::Advise { cpus, mem_bytes, pid, nodes_now, reach_cpus }) => {
            let checked = numapilot_policy::advise::check_request(cpus, mem_bytes)
                .and_then(|()| numapilot_policy::advise::check_nodes_now(&nodes_now));
            match checked {
                Err(e) => Response::error(e.to_string()),
                Ok(()) => {
                    let request =
                        LaunchRequest { pid, name: "a job".to_string(), cpus, mem_bytes, nodes_now, reach_cpus };
                    match ask_loop(tx, wake, |reply| LoopRequest::Advise { request, reply }) {
                        Ok(a) => Response { advice: Some(a), ..Response::answer() },
                        Err(no) => Response { nodes_free: no.free, ..Response::error(no.why) },
                    }
                }
            }
        }
    };
    writeln!(out, "{}", serde_json::to_string(&response).unwrap_or_default())
}

/// Queues a request for the engine loop, wakes it and waits for its answer (at most
/// [`EXPLAIN_TIMEOUT`]); `Err` says why there is none.
fn ask_loop<T, E: From<String>>(
    tx: &mpsc::Sender<LoopRequest>,
    wake: &UnixStream,
    request: impl FnOnce(mpsc::Sender<Result<T, E>>) -> LoopRequest,
) -> Result<T, E> {
    let (rtx, rrx) = mpsc::channel();
    if tx.send(request(rtx)).is_err() {
        return Err(String::from("the engine loop has stopped").into());
    }
    let _ = (&*wake).write(&[1]);
    match rrx.recv_timeout(EXPLAIN_TIMEOUT) {
        Ok(answer) => answer,
        Err(_) => Err(String::from("the engine loop did not answer in time (a step is running long)").into()),
    }
}

/// `value` with the control characters of every string in it escaped ([`escape_controls`]): what
/// the client does to every answer (reply-strings-escaped), for output made without a daemon, as
/// `explain --local`'s, so it prints as the daemon's answer would. `value` must deserialise from
/// its own serialisation (every reply type does).
pub fn escaped<T: Serialize + serde::de::DeserializeOwned>(value: &T) -> Result<T, serde_json::Error> {
    let mut v = serde_json::to_value(value)?;
    escape_controls(&mut v);
    serde_json::from_value(v)
}

/// Escapes the control characters of every string in `v` as the model escapes process names
/// (`numapilot_model::tasks::printable`: a newline as `\n`, ESC as `\u{1b}`), so each prints on
/// one line and sends nothing to a terminal. A string already escaped at the source is unchanged.
fn escape_controls(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s) if s.chars().any(char::is_control) => {
            *s = numapilot_model::tasks::printable(s);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(escape_controls),
        serde_json::Value::Object(o) => o.values_mut().for_each(escape_controls),
        _ => {}
    }
}

/// Largest answer the client reads, bytes: 16 MiB (an `explain` of a process with thousands of
/// threads is tens of kB). Prevents: a server that never ends its line filling the client's memory.
const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// Sends `request` as one line on `stream` and reads the answer's line by `deadline`. A server may
/// answer and close before it reads the request (the daemon refuses another user's connection so,
/// at once): the write then fails with a broken pipe while the answer waits to be read. The
/// answer is read whatever the write said; the write's error is returned only when no answer
/// came. (Written first, a user's `status` said "Broken pipe" instead of the daemon's "permission
/// denied" whenever the refusal was sent before the client wrote: one run in three of the CLI
/// test of it.)
fn exchange(stream: &UnixStream, request: &str, deadline: std::time::Instant) -> std::io::Result<String> {
    let sent = writeln!(&mut &*stream, "{request}");
    let answer = read_response_line(stream, deadline);
    match sent {
        Err(e) if !answer.as_ref().is_ok_and(|a| !a.is_empty()) => Err(e),
        _ => answer,
    }
}

/// One response line, read within `deadline` and at most [`MAX_RESPONSE_BYTES`].
fn read_response_line(stream: &UnixStream, deadline: std::time::Instant) -> std::io::Result<String> {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "no complete answer in time"));
        }
        stream.set_read_timeout(Some(left))?;
        let n = match (&*stream).read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "no complete answer in time"))
            }
            Err(e) => return Err(e),
        };
        if n == 0 {
            break;
        }
        if let Some(i) = buf[..n].iter().position(|&b| b == b'\n') {
            out.extend_from_slice(&buf[..i]);
            break;
        }
        out.extend_from_slice(&buf[..n]);
        if out.len() > MAX_RESPONSE_BYTES {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("answer longer than {} MiB", MAX_RESPONSE_BYTES >> 20),
            ));
        }
    }
    String::from_utf8(out).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// What is at `path` when it exists and is not a socket (`connect` says only "Connection refused").
fn not_a_socket(path: &Path) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = std::fs::metadata(path).ok()?.file_type();
    (!t.is_socket()).then(|| crate::paths::kind_name(t))
}

/// Client: sends one request to the daemon at `path` and returns its response (an `ok: false`
/// response becomes [`ControlError::Request`]).
pub fn request(path: &Path, req: &Request) -> Result<Response, ControlError> {
    request_within(path, req, EXPLAIN_TIMEOUT + CLIENT_TIMEOUT)
}

/// As [`request`], with the whole answer due within `limit` ([`ControlError::NoAnswer`] past it).
pub fn request_within(path: &Path, req: &Request, limit: Duration) -> Result<Response, ControlError> {
    let started = std::time::Instant::now();
    let stream = connect_within(path, started, limit)?.map_err(|e| match e.kind() {
        std::io::ErrorKind::PermissionDenied => ControlError::Denied { path: path.to_path_buf() },
        _ => match not_a_socket(path) {
            Some(what) => ControlError::NotASocket { path: path.to_path_buf(), what },
            None => ControlError::NotRunning { path: path.to_path_buf(), reason: e.to_string() },
        },
    })?;
    // What is left of the limit for the request and its answer (the limit is said as given).
    let total = limit;
    let limit = limit.saturating_sub(started.elapsed()).max(Duration::from_millis(1));
    let io = |e: std::io::Error| ControlError::Request(format!("{}: {e}", path.display()));
    // Whoever answers (a daemon of another user: a non-root daemon observes only), every string of
    // its answer is printed with its control characters escaped (reply-strings-escaped): a user's
    // server at a path root was pointed to wrote terminal escapes to root's terminal (review of
    // 2026-11-29), and root's own daemon passes on strings processes chose (a cgroup's or a mapped
    // file's name) whose newline began a line of its own in `status` and `explain`. The deadline and
    // size cap below bound any server.
    let deadline = std::time::Instant::now() + limit;
    stream.set_read_timeout(Some(limit)).map_err(io)?;
    stream.set_write_timeout(Some(limit)).map_err(io)?;
    let line =
        exchange(&stream, &serde_json::to_string(req).expect("a request serialises"), deadline).map_err(|e| match e
            .kind()
        {
            std::io::ErrorKind::TimedOut => {
                ControlError::NoAnswer { path: path.to_path_buf(), secs: total.as_secs_f64() }
            }
            _ => io(e),
        })?;
    let unreadable = |e: serde_json::Error| {
        ControlError::Request(format!("{}: unreadable response {:?}: {e}", path.display(), line.trim()))
    };
    let mut v: serde_json::Value = serde_json::from_str(line.trim()).map_err(unreadable)?;
    escape_controls(&mut v);
    let resp: Response = serde_json::from_value(v).map_err(unreadable)?;
    if !resp.ok {
        // Said with the socket it came from, and cut: a server's error of 15 MiB was written whole
        // to stderr (review helper-55).
        let mut why = resp.error.unwrap_or_else(|| "request failed".into());
        if why.len() > MAX_SERVER_ERROR {
            let mut cut = MAX_SERVER_ERROR;
            while !why.is_char_boundary(cut) {
                cut -= 1;
            }
            why.truncate(cut);
            why.push_str(" ...");
        }
        let why = format!("{} (from {})", why, path.display());
        if !resp.nodes_free.is_empty() {
            return Err(ControlError::NothingFits { why, free: resp.nodes_free });
        }
        return Err(ControlError::Request(why));
    }
    Ok(resp)
}

/// Longest error of a server's shown, bytes.
const MAX_SERVER_ERROR: usize = 1024;

/// Connects to the socket at `path` by `deadline`: `Err` when the connection is refused (no daemon,
/// a path that is no socket, a path too long for one); `Ok(Err)` with the system's error; a
/// listener whose queue is full (a hung daemon, its backlog filled by checks) is tried again until
/// the deadline, then [`ControlError::NoAnswer`]. `UnixStream::connect` waited without end there:
/// `status --check --timeout 2` never answered (review helper-55).
fn connect_within(
    path: &Path,
    started: std::time::Instant,
    limit: Duration,
) -> Result<std::io::Result<UnixStream>, ControlError> {
    let deadline = started + limit;
    use std::os::unix::ffi::OsStrExt as _;
    use std::os::unix::io::FromRawFd as _;
    let bytes = path.as_os_str().as_bytes();
    // sun_path holds 108 bytes with the terminating NUL (unix(7)): no daemon can listen at a longer
    // path, which is an error of the path, not "no daemon".
    if bytes.len() > 107 || bytes.contains(&0) {
        return Err(ControlError::Request(format!(
            "{}: not a usable socket path ({} bytes; a unix socket's path takes at most 107, no NUL)",
            path.display(),
            bytes.len()
        )));
    }
    // SAFETY: an all-zero sockaddr_un is valid; the path is copied within its bounds (checked).
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let len = (std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1) as libc::socklen_t;
    // SAFETY: socket(2) with constant arguments.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0) };
    if fd < 0 {
        return Ok(Err(std::io::Error::last_os_error()));
    }
    // SAFETY: a descriptor just made and owned by nothing else.
    let stream = unsafe { UnixStream::from_raw_fd(fd) };
    loop {
        // SAFETY: `addr` is a valid sockaddr_un of `len` bytes.
        let r = unsafe { libc::connect(fd, std::ptr::addr_of!(addr).cast(), len) };
        if r == 0 {
            break;
        }
        let e = std::io::Error::last_os_error();
        // A unix stream socket says EAGAIN when the listener's queue is full (unix(7)).
        if e.raw_os_error() != Some(libc::EAGAIN) {
            return Ok(Err(e));
        }
        let now = std::time::Instant::now();
        if now >= deadline {
            return Err(ControlError::NoAnswer { path: path.to_path_buf(), secs: limit.as_secs_f64() });
        }
        std::thread::sleep(Duration::from_millis(20).min(deadline - now));
    }
    Ok(stream.set_nonblocking(false).map(|()| stream))
}

impl Status {
    /// Renders for `numapilot status`.
    pub fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let mode = match (&self.observe_only_reason, self.dry_run) {
            (Some(r), _) => format!("observe only ({r})"),
            (None, true) => "dry run".into(),
            (None, false) => "acting".into(),
        };
        let _ = writeln!(s, "numapilot {} daemon, pid {}, up {:.0} s, {mode}", self.version, self.pid, self.uptime_s);
        for (level, reason) in self.health().reasons {
            let _ = writeln!(s, "{}: {reason}", level.name());
        }
        let _ = writeln!(
            s,
            "config {}, interval {} ms{}{}",
            self.config_file.as_deref().unwrap_or("(defaults)"),
            self.interval_ms,
            match self.next_interval_ms.cmp(&self.interval_ms) {
                _ if self.steps == 0 => String::new(),
                std::cmp::Ordering::Less => format!(" (now {} ms: young processes settling)", self.next_interval_ms),
                std::cmp::Ordering::Greater if self.nothing_to_place.is_some() =>
                    format!(" (now {} ms: backed off, nothing to place)", self.next_interval_ms),
                std::cmp::Ordering::Greater =>
                    format!(" (now {} ms: backed off, nothing changed)", self.next_interval_ms),
                std::cmp::Ordering::Equal => String::new(),
            },
            if self.sampling_stretch > 1 {
                format!(", access sampling at {} x its base period", self.sampling_stretch)
            } else {
                String::new()
            }
        );
        let _ = writeln!(
            s,
            "steps {} ({} failed, {} early after a new process, {} early after new threads, {} early after a new process grew, {} early after a page move ended), actions {} ({} on new threads between steps), pages moved {}, failed {}, vanished {}, refused {}",
            self.steps,
            self.step_errors,
            self.early_wakes,
            self.thread_wakes,
            self.growth_wakes,
            self.move_wakes,
            self.actions,
            self.standing_orders,
            self.pages_moved,
            self.pages_failed,
            self.vanished,
            self.refused
        );
        if let Some(why) = &self.nothing_to_place {
            let _ = writeln!(
                s,
                "nothing to place: {why}; observing only (no thread or page is moved), stepping at the interval \
                 backing off whatever changes, without early steps for new processes and threads"
            );
        }
        if !self.pages_unmovable_to.is_empty() {
            let _ = writeln!(s, "{}", unmovable_line(&self.own_memory_nodes, None, &self.pages_unmovable_to));
        }
        if self.topology_changes > 0 {
            let _ = writeln!(
                s,
                "CPU hotplug seen {}: topology read again (journal `topology` lines)",
                plural(self.topology_changes, "time")
            );
        }
        if !self.reserved_cpus.is_empty() {
            let _ = writeln!(s, "reserved CPUs {}: no process is placed on them", self.reserved_cpus);
        }
        if self.moves_started > 0 || self.move_running.is_some() {
            let _ = writeln!(
                s,
                "page moves in the background {}{}",
                self.moves_started,
                self.move_running
                    .map_or_else(String::new, |(pid, secs)| format!(", one running: pid {pid} for {secs:.1} s"))
            );
        }
        if let Some(e) = &self.last_error {
            let _ = writeln!(s, "last step failed: {e}");
        }
        let local = self.local_access.map_or_else(|| "unknown".into(), |l| format!("{:.0}%", l * 100.0));
        let _ = writeln!(
            s,
            "processes {}, threads {}, groups {}, local access {local}, last step {:.1} ms{}",
            self.processes,
            self.threads,
            self.groups,
            self.last_cycle_s * 1e3,
            self.since_last_step_s.map_or_else(String::new, |a| format!(", ended {a:.1} s ago"))
        );
        if let Some(line) = self.sampler_line() {
            let _ = writeln!(s, "{line}");
        }
        for n in &self.nodes {
            let res: Vec<String> = n
                .resources
                .iter()
                .filter(|r| r.known)
                .map(|r| {
                    format!(
                        "{} {:.0}%/{:.0}%{}",
                        r.resource,
                        r.load * 100.0,
                        r.interference * 100.0,
                        if r.bottleneck { " BOTTLENECK" } else { "" }
                    )
                })
                .collect();
            let _ = writeln!(
                s,
                "node {}: free {} / {} MiB, cpu demand {:.2}; load/interference: {}",
                n.node,
                n.mem_free_bytes >> 20,
                n.mem_total_bytes >> 20,
                n.cpu_demand,
                if res.is_empty() { "nothing known yet".into() } else { res.join(", ") }
            );
        }
        if !self.actions_by_kind.is_empty() {
            let k: Vec<String> = self.actions_by_kind.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let _ = writeln!(s, "actions by kind: {}", k.join(", "));
        }
        if !self.failures_by_kind.is_empty() {
            let k: Vec<String> = self.failures_by_kind.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let _ = writeln!(s, "failures by kind: {}", k.join(", "));
        }
        if self.reloads + self.reloads_rejected > 0 {
            let _ = writeln!(s, "config reloads: {} accepted, {} rejected", self.reloads, self.reloads_rejected);
        }
        if self.journal_lines_dropped > 0 {
            let _ = writeln!(
                s,
                "journal: {} dropped (not written: see the log)",
                plural(self.journal_lines_dropped, "line")
            );
        }
        for p in &self.launch_promises {
            let _ = writeln!(s, "launch promise: {p}");
        }
        for n in &self.notes {
            let _ = writeln!(s, "note: {n}");
        }
        if !self.bookkeeping.is_empty() {
            let total: u64 = self.bookkeeping.values().sum();
            let mut largest: Vec<(&String, &u64)> = self.bookkeeping.iter().collect();
            largest.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            let top: Vec<String> = largest.iter().take(3).map(|(k, v)| format!("{k} {v}")).collect();
            let _ = writeln!(
                s,
                "bookkeeping: {total} {} in {} (largest: {}; all with --json)",
                if total == 1 { "entry" } else { "entries" },
                plural(self.bookkeeping.len(), "table"),
                top.join(", ")
            );
        }
        if self.released > 0 {
            let _ = writeln!(s, "released (excluded or left [include] while placed, put back): {}", self.released);
        }
        if !self.stalled_reads.is_empty() {
            let r: Vec<String> =
                self.stalled_reads.iter().map(|r| format!("pid {} ({}, {:.0} s)", r.pid, r.file, r.for_s)).collect();
            let _ = writeln!(
                s,
                "left out, a read of their memory map blocked in the kernel: {} (given up {} since start)",
                r.join(", "),
                plural(self.stalled_reads_total, "time")
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The health verdict: OK with nothing to say; each condition at its level, the worst first;
    /// a loop counts as stuck only past its due time plus the grace, and before its first step
    /// only once the grace has passed since the start.
    #[test]
    fn health_names_each_condition_at_its_level() {
        let fresh =
            Status { since_last_step_s: Some(0.5), next_interval_ms: 1000, uptime_s: 100.0, ..Status::default() };
        assert_eq!(fresh.health(), Health { level: HealthLevel::Ok, reasons: vec![] });
        let late_within_grace = Status { since_last_step_s: Some(1.0 + STUCK_GRACE_S - 0.1), ..fresh.clone() };
        assert_eq!(late_within_grace.health().level, HealthLevel::Ok);
        let stuck = Status { since_last_step_s: Some(1.0 + STUCK_GRACE_S + 0.1), ..fresh.clone() };
        assert_eq!(stuck.health().level, HealthLevel::Critical);
        assert!(stuck.health().reasons[0].1.starts_with("no step for 31 s"), "{:?}", stuck.health());
        let starting = Status { since_last_step_s: None, uptime_s: 2.0, ..fresh.clone() };
        assert_eq!(starting.health().level, HealthLevel::Ok);
        let never = Status { uptime_s: STUCK_GRACE_S + 1.0, ..starting };
        assert_eq!(never.health().level, HealthLevel::Critical);
        // A daemon older than the client sends no age: nothing said about stepping (it said
        // "no step has completed in the 3600 s since the start" of a daemon that steps; helper-46).
        let older = Status { steps: 500, ..never.clone() };
        assert_eq!(older.health().level, HealthLevel::Ok);
        // Changing nothing unasked (another pid namespace's /proc, not root) is worth a look; a
        // dry run is what was asked for.
        let dry = Status { observe_only_reason: Some("dry run".into()), ..fresh.clone() };
        assert_eq!(dry.health().level, HealthLevel::Ok);
        let foreign = Status { observe_only_reason: Some("/proc is another pid namespace's".into()), ..fresh.clone() };
        assert_eq!(foreign.health().level, HealthLevel::Warning);
        // One failed step is a warning; FAILED_STEPS_CRITICAL in a row are critical.
        let failed = |n: u64| Status { last_error: Some("EMFILE".into()), consecutive_step_errors: n, ..fresh.clone() };
        assert_eq!(failed(1).health().level, HealthLevel::Warning);
        assert_eq!(failed(FAILED_STEPS_CRITICAL - 1).health().level, HealthLevel::Warning);
        assert_eq!(failed(FAILED_STEPS_CRITICAL).health().level, HealthLevel::Critical);

        let mut s = fresh.clone();
        s.stalled_reads = vec![StalledRead { pid: 9, file: "/proc/9/maps".into(), for_s: 4.0 }];
        assert_eq!(s.health().level, HealthLevel::Warning);
        s.moves_stuck = vec![(44, 75.4)];
        assert_eq!(s.health().reasons.len(), 2);
        s.journal_failing = true;
        s.journal_lines_dropped = 3;
        s.state_unsaved = true;
        s.last_error = Some("reading /proc/stat: EMFILE".into());
        s.consecutive_step_errors = 4;
        let h = s.health();
        assert_eq!(h.level, HealthLevel::Critical);
        let levels: Vec<HealthLevel> = h.reasons.iter().map(|r| r.0).collect();
        use HealthLevel::{Critical, Warning};
        assert_eq!(levels, [Critical, Critical, Warning, Warning, Warning]);
        assert!(h.reasons.iter().any(|r| r.1.starts_with("a move of pid 44's pages, started 75 s ago, is stuck")));
        assert!(h.reasons.iter().any(|r| r.1 == "the last 4 steps failed: reading /proc/stat: EMFILE"), "{h:?}");
        assert!(h.reasons.iter().any(|r| r.1.contains("3 lines dropped")), "{h:?}");
        assert!(h.reasons.iter().any(|r| r.1.contains("pid 9")), "{h:?}");
        assert_eq!(
            [HealthLevel::Ok, HealthLevel::Warning, HealthLevel::Critical].map(HealthLevel::exit_code),
            [0, 1, 2]
        );
    }

    /// A step on a bucket's bound counts in that bucket (Prometheus's `le`), one above every bound
    /// in the last entry.
    #[test]
    fn steps_are_counted_in_the_bucket_whose_bound_holds_them() {
        let mut h = Vec::new();
        for secs in [0.0, 0.005, 0.0051, 0.05, 10.0, 10.5] {
            count_step(&mut h, secs);
        }
        assert_eq!(h, [2, 1, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1]);
    }

    /// An advise request whose measurement no machine gives (a node twice, NaN free CPUs) is
    /// answered with an error naming the entry, without reaching the engine loop (a review of
    /// 2026-11-30: unchecked, it reached the sums, and node memory near 2^63 bytes panicked a
    /// debug build).
    #[test]
    fn an_advise_request_with_a_bad_measurement_is_refused_naming_it() {
        let shared = Shared { status: Mutex::new(Status::default()), started_ns: 0 };
        let (tx, rx) = mpsc::channel();
        let (wake, _wake_peer) = UnixStream::pair().unwrap();
        for (nodes, says) in [
            (
                r#"[{"node":0,"cpus":2,"free_cpus":1.0,"mem_free_bytes":1},{"node":0,"cpus":2,"free_cpus":1.0,"mem_free_bytes":1}]"#,
                "node 0 is listed twice",
            ),
            (r#"[{"node":1,"cpus":2,"free_cpus":3.0,"mem_free_bytes":1}]"#, "node 1: free_cpus 3"),
        ] {
            let (server, mut client) = UnixStream::pair().unwrap();
            writeln!(client, r#"{{"cmd":"advise","cpus":1,"mem_bytes":1,"nodes_now":{nodes}}}"#).unwrap();
            handle_client(server, &shared, 0, &tx, &wake).unwrap();
            let mut line = String::new();
            BufReader::new(&client).read_line(&mut line).unwrap();
            let r: Response = serde_json::from_str(&line).unwrap();
            assert!(!r.ok && r.error.as_deref().is_some_and(|e| e.contains(says)), "{line}");
            assert!(rx.try_recv().is_err(), "the loop was asked");
        }
    }

    /// A server that answered and closed before the request was written: the answer is read
    /// and returned, not the write's broken pipe; with no answer, the write's error is.
    #[test]
    fn an_answer_sent_before_the_request_was_written_is_read() {
        let deadline = || std::time::Instant::now() + Duration::from_secs(60);
        let (client, server) = UnixStream::pair().unwrap();
        writeln!(&server, r#"{{"ok":false,"error":"permission denied: uid 65534 is not root"}}"#).unwrap();
        drop(server);
        let answer = exchange(&client, r#"{"cmd":"status"}"#, deadline()).expect("the answer sent first");
        assert!(answer.contains("permission denied"), "{answer}");
        let (client, server) = UnixStream::pair().unwrap();
        drop(server);
        let e = exchange(&client, r#"{"cmd":"status"}"#, deadline()).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
    }

    #[test]
    fn a_request_trickled_byte_by_byte_ends_at_its_deadline() {
        // The client sends a byte every 20 ms and never a newline, until the server's end is
        // closed: under a per-read timeout it would hold the server for as long as it likes;
        // under the request's deadline the read fails once the deadline has passed. (A writer
        // that stopped after 500 bytes let a read starved of CPU for 10 s end at its EOF.)
        let (server, client) = UnixStream::pair().unwrap();
        let writer = std::thread::spawn(move || {
            let mut c = &client;
            while c.write_all(b"x").is_ok() {
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let mut line = String::new();
        let e = BufReader::new(Deadline::new(&server, Duration::from_millis(300)).take(MAX_REQUEST))
            .read_line(&mut line)
            .unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
        assert!(!line.contains('\n') && line.len() < 500, "read {} bytes", line.len());
        drop(server);
        writer.join().unwrap();
    }

    /// A count of one reads in the singular in `status` and `status --check`'s summary; two in
    /// the plural.
    #[test]
    fn counts_of_one_are_said_in_the_singular() {
        let one = Status {
            processes: 1,
            topology_changes: 1,
            journal_lines_dropped: 1,
            bookkeeping: [("model.procs".to_string(), 1)].into_iter().collect(),
            stalled_reads: vec![StalledRead { pid: 7, file: "numa_maps".into(), for_s: 3.0 }],
            stalled_reads_total: 1,
            ..Status::default()
        };
        let (text, summary) = (one.render(), one.summary());
        assert!(summary.contains(", 1 process, "), "{summary}");
        for said in [
            "CPU hotplug seen 1 time: ",
            "journal: 1 line dropped ",
            "bookkeeping: 1 entry in 1 table (",
            "(given up 1 time since start)",
        ] {
            assert!(text.contains(said), "{said:?} in {text}");
        }
        let two = Status { processes: 2, topology_changes: 2, journal_lines_dropped: 2, stalled_reads_total: 2, ..one };
        let (text, summary) = (two.render(), two.summary());
        assert!(summary.contains(", 2 processes, "), "{summary}");
        for said in ["CPU hotplug seen 2 times: ", "journal: 2 lines dropped ", "(given up 2 times since start)"] {
            assert!(text.contains(said), "{said:?} in {text}");
        }
    }

    #[test]
    fn a_request_within_its_deadline_is_read_whole() {
        let (server, client) = UnixStream::pair().unwrap();
        (&client).write_all(b"{\"cmd\":\"status\"}\n").unwrap();
        let mut line = String::new();
        BufReader::new(Deadline::new(&server, CLIENT_TIMEOUT).take(MAX_REQUEST)).read_line(&mut line).unwrap();
        assert_eq!(line, "{\"cmd\":\"status\"}\n");
    }
}
