//! The daemon's main loop: configuration, the live host, the engine, signals, shutdown.
//!
//! Problem: the engine must step every interval for weeks; a step that fails (a /proc hiccup, the
//! live host not ready) must not stop the daemon; SIGTERM must always put every touched process back;
//! SIGHUP must never replace a working configuration by a broken one; and the operator must be able
//! to ask for status and explanations while all this runs.
//!
//! Approach: one loop thread owns the engine and the host. SIGTERM, SIGINT and SIGHUP are blocked
//! before any other thread starts (threads inherit the mask), so they stay pending for the process
//! and are read from a `signalfd` — no handler, no async-signal-safety questions, no race between
//! checking a flag and going to sleep. The "sleep" between steps is a `poll` on these fds:
//!
//! ```text
//!   poll(signalfd, explain-wake, command pipe, proc connector, page mover; timeout = wait - step time)
//!     wait = the policy's interval, doubled after each quiet step up to idle_max_interval_ms
//!            ([`Backoff`]: nothing planned, no new process, no CPU-load change; back at once
//!            to the interval on any change); while backed off, whether a process was created
//!            is looked at once per interval and a new one ends the wait early (the proc
//!            connector's fork events; without it /proc/loadavg's last pid, [`last_pid`],
//!            which a new thread anywhere moves too)
//!     proc connector  a new thread of a young process (not this one) -> the wait ends
//!               new_thread_wake_ms after it, never sooner than settle_interval_ms after the
//!               last step started ([`young_thread_starts`]): a workload that touches its
//!               memory and then starts its threads is looked at as they start, not up to an
//!               interval later; and before that, at once, the last plan's standing order for
//!               that process, if any (`Engine::on_new_threads`, rule new-threads-follow-memory:
//!               its threads to the node holding its memory; journaled as an action under the
//!               last step's number when carried out, logged as "would" in a dry run, a debug
//!               line only when refused; an exec drops the process's order, a reload or a failed
//!               step all of them); without root or CONFIG_PROC_EVENTS, one log line
//!               a new process (fork) -> watched while young: its stat read every
//!               NEW_PROCESS_CHECK_MS; resident past new_process_min_rss_mib -> the wait ends
//!               likewise ([`grown_processes`], rule "new-process-grows"): the fork rule places
//!               a process while it fills its memory, not after
//!     page mover  a background page move ended -> the wait ends, never sooner than
//!               settle_interval_ms after the last step started ([`Restore::move_wake`]): its
//!               move-done line, its pages and the next move come then, not up to a wait later
//!     signalfd  SIGTERM/SIGINT -> leave the loop -> restore_all() -> journal "restore" -> exit 0
//!               SIGHUP         -> config::load again: ok -> apply; error -> log, keep the old one
//!     explain   answer queued `explain PID` and `advise` requests from the model (between steps;
//!               advise is the policy's launch stage, its promise kept by the policy)
//!     command   the same as signals, for in-process callers (tests) that cannot signal themselves
//!   one node in reach (placeable_nodes: the machine's nodes with a usable CPU or memory, not
//!             cut to the daemon's own cpuset; checked after every step) -> nothing to place: the wait is the
//!             interval with its back-off (not the policy's settle cadence; every step that did
//!             not fail counts as quiet, new processes included), no proc connector,
//!             no early step for a new process, new threads or growth, no action carried out
//!             (a planned action is journaled as not carried out, with why; explain says so)
//!   memory nodes the daemon's own cpuset leaves out (pages_unmovable_to: its Mems_allowed, live
//!             host on / only, read at start and after every step, [`OwnMemoryNodes`]) -> a
//!             warning at start and at each change (an info line when none is left out any more),
//!             a journal `own-memory-nodes` line at each change, status's pages_unmovable_to: the
//!             kernel moves the daemon no page there, threads still go
//!   timeout -> engine.step(host): Ok -> journal each action (dry run: log it), publish status
//!                                 Err -> log (first and changed errors), count, retry next interval
//! ```
//!
//! Units: intervals in ms (config) and ns (engine). Limits: settings that need resources re-opened
//! (socket, metrics address, the state file, `[actuation]`, `[signals]`, the threads' nice) change
//! at restart; a reload that changes them says so in the log. A reload's `[exclude]` and `[include]`
//! hold from the next action (an excluded process must not be moved until a restart), and the
//! observer classifies every process again at the next cycle.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use numapilot_model::{Model, Resource};
/// The back-off of the wait between steps lives with the engine (the simulator steps by it too).
pub use numapilot_policy::cadence::{sampling_stretch, Backoff, BACKOFF_LOAD_CHANGE_CPUS};
use numapilot_policy::{Action, Adaptive, Engine, FinishedMove, Host, Outcome, StepReport};
use numapilot_topology::Topology;

use crate::config::{self, Config, ConfigError, Loaded, Overrides, Source};
use crate::control::{self, ControlError, LoopSide, NodeStatus, ResourceStatus, Shared, Status};
use crate::journal::{self, Journal, JournalError, Record};
use crate::live::{LiveError, LiveHost, LiveOptions, LiveTuning, RestoreReport};
use crate::metrics::{self, MetricsError};
use crate::notify::Notifier;

/// Why the daemon could not start (it exits non-zero; nothing was touched).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The configuration is invalid.
    #[error("{0}")]
    Config(ConfigError),
    /// The topology could not be read.
    #[error("topology: {0}")]
    Topology(String),
    /// The live host could not open (its messages name the state file or what is unavailable).
    #[error("{0}")]
    Live(LiveError),
    /// The control socket could not be created.
    #[error("{0}")]
    Control(ControlError),
    /// The metrics server could not start.
    #[error("{0}")]
    Metrics(MetricsError),
    /// The journal could not be opened.
    #[error("{0}")]
    Journal(JournalError),
    /// Signal set-up failed.
    #[error("signals: {0}")]
    Signals(std::io::Error),
}

// By hand rather than `#[from]`: the messages already carry their causes, and a `source()` would
// print each twice in the command line's error chain.
macro_rules! from_error {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for RunError {
            fn from(e: $t) -> Self {
                RunError::$v(e)
            }
        }
    )*};
}
from_error!(ConfigError => Config, LiveError => Live, ControlError => Control, MetricsError => Metrics, JournalError => Journal);

/// A host the daemon can put back as it was: the live host, or a test host.
pub trait Restore {
    /// Puts every touched process back.
    fn restore_all(&mut self) -> RestoreReport;

    /// Waits for the page move in flight (shutdown) and returns the moves not yet reported.
    /// Default: none (a host without a page mover).
    fn wait_moves(&mut self) -> Vec<FinishedMove> {
        Vec::new()
    }

    /// The page move running now: its pid and host time it started, ns. Default: none.
    fn move_running(&self) -> Option<(u32, u64)> {
        None
    }

    /// A non-blocking socket that is readable when a background page move has ended (the page
    /// mover's wake), polled between steps so the next step comes soon after; the loop empties it.
    /// Default: none.
    fn move_wake(&self) -> Option<&UnixStream> {
        None
    }

    /// Wall time of the last observation's parts, ns: the system files, the stat pass over every
    /// pid, the detail reads (threads, numa_maps), the sample's assembly, the signal scans (maps,
    /// sockets). Default: none known (zeros).
    fn observe_parts_ns(&self) -> [u64; 5] {
        [0; 5]
    }

    /// Why a process the model does not hold is not managed (excluded, a kernel thread, gone ...),
    /// when the host can tell. Default: it cannot.
    fn why_unseen(&self, _pid: u32) -> Option<String> {
        None
    }

    /// Why `advise --pid PID` cannot name `pid`: no process, a thread, one the daemon never
    /// manages. Default: it can.
    fn launch_refusal(&self, _pid: u32) -> Option<String> {
        None
    }

    /// What became of process `pid`, known to the model by `starttime`, since the step that saw it
    /// last, when that changes what `explain` shows (it exited, is a zombie with nothing left to
    /// run, or its pid names another process now): the explanation is of the last step's view and
    /// says so. Default: nothing known.
    fn since_last_step(&self, _pid: u32, _starttime: u64) -> Option<String> {
        None
    }

    /// What the host said at its opening (reserved CPUs, other placers, missing signal sources),
    /// for status and the journal's `start` line. Default: nothing.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }

    /// Takes the exclusions of a reloaded configuration (`[exclude]`: names, pids, cgroups,
    /// include_pinned, min_rss_mib), in force from the next action. Default: nothing to take.
    fn set_exclusions(&mut self, _new: &LiveOptions) {}

    /// Takes a reloaded page-migration budget, MiB/s. Default: nothing to take.
    fn set_migrate_budget(&mut self, _mb_per_s: u64) {}

    /// What putting back processes taken out of numapilot's hands did since the last call
    /// (excluded, or out of `[include]`, while placed). Default: nothing.
    fn take_released(&mut self) -> RestoreReport {
        RestoreReport::default()
    }

    /// Records a process started on this daemon's launch advice for `nodes`, named by its launcher
    /// (`advise --pid`): its narrowing is the advice's, not its own. Default: nothing to record.
    fn adopt(&mut self, _pid: u32, _nodes: &numapilot_topology::NodeSet) {}

    /// The host's own tables kept between steps, by name, appended to `out` (the live host's
    /// observer, signal sources and originals; `numapilot status`'s bookkeeping). Default: none.
    fn bookkeeping(&self, _out: &mut Vec<(&'static str, usize)>) {}

    /// Reads blocked in the kernel now and the count given up since start (`Status::stalled_reads`).
    /// Default: none.
    fn stalled_reads(&self) -> (Vec<crate::control::StalledRead>, u64) {
        (Vec::new(), 0)
    }

    /// The access sampler's event and counts since start (`Status::access_sampler`). Default: no
    /// sampler.
    fn sampler_status(&self) -> Option<crate::control::SamplerStatus> {
        None
    }

    /// Times a signal source went from working to failing since start. Default: none.
    fn signal_source_failures(&self) -> u64 {
        0
    }

    /// A save of the state file failed and none has succeeded since (nothing is changed until one
    /// does: rule originals-on-disk-first). Default: no state file, never.
    fn state_unsaved(&self) -> bool {
        false
    }

    /// Page moves given up as stuck in the kernel: pid and host time handed over, ns. Default: none.
    fn moves_stuck(&self) -> Vec<(u32, u64)> {
        Vec::new()
    }

    /// Why the host changes nothing although asked to act (not a dry run, as root): a /proc of
    /// another pid namespace. Default: it acts.
    fn unasked_refusal(&self) -> Option<String> {
        None
    }

    /// The memory nodes the daemon's own cpuset allows it (`Mems_allowed`) now, read at start and
    /// after every step (`OwnMemoryNodes`); `None`: not known (a host that is not this machine, or
    /// the read failed). Default: none.
    fn own_memory_nodes(&self) -> Option<numapilot_topology::NodeSet> {
        None
    }

    /// The start went through (nothing refuses it after this): what the host made for its files
    /// at its opening stays (the live host's state file lock and its directory). A host dropped
    /// before this call, a refused start, removes them. Default: nothing made.
    fn started(&mut self) {}
}

impl Restore for LiveHost {
    fn why_unseen(&self, pid: u32) -> Option<String> {
        LiveHost::why_unseen(self, pid)
    }

    // Both of the tree the host observes (why-unseen-under-root), as `why_unseen`.
    fn launch_refusal(&self, pid: u32) -> Option<String> {
        crate::live::select::launch_refusal_under(&self.options().root, pid)
    }

    fn since_last_step(&self, pid: u32, starttime: u64) -> Option<String> {
        crate::live::select::since_last_step_under(&self.options().root, pid, starttime)
    }

    fn notes(&self) -> Vec<String> {
        // Its observe-only note is the start line's (dry run) or the not-root announcement.
        LiveHost::notes(self).iter().filter(|n| Some(n.as_str()) != self.refusal()).cloned().collect()
    }

    fn set_exclusions(&mut self, new: &LiveOptions) {
        LiveHost::set_exclusions(self, new)
    }

    fn set_migrate_budget(&mut self, mb_per_s: u64) {
        LiveHost::set_migrate_budget(self, mb_per_s)
    }

    fn adopt(&mut self, pid: u32, nodes: &numapilot_topology::NodeSet) {
        LiveHost::adopt(self, pid, nodes)
    }

    fn started(&mut self) {
        LiveHost::keep_claim(self)
    }

    fn take_released(&mut self) -> RestoreReport {
        LiveHost::take_released(self)
    }

    fn own_memory_nodes(&self) -> Option<numapilot_topology::NodeSet> {
        if self.options().root != std::path::Path::new("/") {
            return None;
        }
        crate::live::select::mems_allowed(std::process::id())
    }

    fn restore_all(&mut self) -> RestoreReport {
        LiveHost::restore_all(self)
    }

    fn wait_moves(&mut self) -> Vec<FinishedMove> {
        LiveHost::end_moves(self)
    }

    fn move_running(&self) -> Option<(u32, u64)> {
        LiveHost::move_running(self)
    }

    fn move_wake(&self) -> Option<&UnixStream> {
        LiveHost::move_wake(self)
    }

    fn bookkeeping(&self, out: &mut Vec<(&'static str, usize)>) {
        LiveHost::bookkeeping(self, out)
    }

    fn stalled_reads(&self) -> (Vec<crate::control::StalledRead>, u64) {
        LiveHost::stalled_reads(self)
    }

    fn sampler_status(&self) -> Option<crate::control::SamplerStatus> {
        LiveHost::sampler_status(self)
    }

    fn signal_source_failures(&self) -> u64 {
        LiveHost::signal_source_failures(self)
    }

    fn state_unsaved(&self) -> bool {
        LiveHost::state_unsaved(self)
    }

    fn moves_stuck(&self) -> Vec<(u32, u64)> {
        LiveHost::moves_stuck(self)
    }

    fn unasked_refusal(&self) -> Option<String> {
        LiveHost::unasked_refusal(self).map(str::to_string)
    }

    fn observe_parts_ns(&self) -> [u64; 5] {
        let t = self.tier_stats();
        [t.system_ns, t.stat_pass_ns, t.details_ns, t.assemble_ns, t.signals_ns]
    }
}

/// Commands for an in-process daemon (what SIGTERM and SIGHUP do for a real one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Stop: restore and return.
    Stop,
    /// Re-read the configuration.
    Reload,
}

/// Sends [`Command`]s to a daemon running [`serve`] in this process.
#[derive(Debug)]
pub struct Handle {
    tx: UnixStream,
}

impl Handle {
    /// Sends a command.
    pub fn send(&self, c: Command) -> std::io::Result<()> {
        use std::io::Write;
        (&self.tx).write_all(&[match c {
            Command::Stop => b's',
            Command::Reload => b'r',
        }])
    }
}

/// How the loop ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Exit {
    /// Steps taken (successful).
    pub steps: u64,
    /// The restore at shutdown.
    pub restore: RestoreReport,
    /// The signal that stopped it (`SIGTERM`, `SIGINT`) or `command`.
    pub why: String,
    /// Wall time of all steps (observe, model, plan, act), s: with `steps`, the mean step.
    pub cycle_s_total: f64,
    /// Wall time of the longest step, s.
    pub cycle_s_max: f64,
    /// Of `cycle_s_total`, the parts spent observing (with the model's update), deciding and
    /// acting (every action's checks and syscalls; page copies run on the mover), s.
    pub phases_s_total: [f64; 3],
    /// Of the observing, the parts of [`Restore::observe_parts_ns`] summed over the steps, s.
    pub observe_parts_s_total: [f64; 5],
}

/// Everything `serve` needs besides the host.
#[derive(Debug)]
pub struct Setup {
    /// Where the configuration comes from (for SIGHUP).
    pub source: Source,
    /// The flags (re-applied on SIGHUP).
    pub overrides: Overrides,
    /// The configuration loaded at start.
    pub loaded: Loaded,
    /// Why the daemon only observes although the config does not ask for a dry run (`not root`).
    pub forced_observe: Option<String>,
    /// The service manager to tell of readiness, reloads and the stop (`NOTIFY_SOCKET`; inert
    /// without it).
    pub notify: Notifier,
}

/// `numapilot daemon`: loads the configuration, opens the live host and runs until SIGTERM/SIGINT.
/// `announce` receives the lines an operator must see at start (observe-only, recovery, addresses).
pub fn run(source: Source, overrides: Overrides, announce: &mut dyn FnMut(&str)) -> Result<Exit, RunError> {
    // Before anything can start a thread (the live host's signal sources may): a thread with
    // SIGTERM unblocked would take the signal's default action, exiting without the restore.
    block_signals().map_err(RunError::Signals)?;
    // Read (and removed from the environment) before any thread starts.
    let notify = Notifier::from_env();
    let loaded = config::load(&source, &overrides)?;
    for w in &loaded.warnings {
        tracing::warn!("{w}");
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        // `[daemon] nice`, before any thread starts: every thread created later inherits it.
        // SAFETY: setpriority on the calling thread (who = 0) with a validated value.
        if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, loaded.config.daemon.nice) } != 0 {
            let e = std::io::Error::last_os_error();
            announce(&format!(
                "numapilot: daemon.nice = {} not set ({e}); the daemon runs at its inherited priority",
                loaded.config.daemon.nice
            ));
        }
    }
    let forced_observe = (!root).then(|| "not running as root".to_string());
    if !root {
        announce("numapilot: not running as root: observe-only (dry run): every action is planned and journaled, none is applied");
    }
    let observe_only = !root || loaded.config.daemon.dry_run;
    let topo = Topology::from_sysfs(std::path::Path::new("/")).map_err(|e| RunError::Topology(e.to_string()))?;
    let tuning = LiveTuning {
        signals: loaded.config.signal_options(),
        signal_tuning: loaded.config.signal_tuning(),
        ..LiveTuning::default()
    };
    let (host, recovered) = LiveHost::open_with(topo, loaded.config.live_options(observe_only), tuning)?;
    // The host's notes (missing signal sources, cpuset hierarchy), once; its observe-only note is
    // the one announced above (not root) or in the start line (dry run).
    for note in host.notes().iter().filter(|n| Some(n.as_str()) != host.refusal()) {
        announce(&format!("numapilot: {note}"));
    }
    if recovered != RestoreReport::default() {
        announce(&format!(
            "numapilot: recovered from an unclean shutdown: restored {} (and {} that inherited their \
             placement), {} gone, {} failed{}",
            numapilot_topology::plural(recovered.restored, "process"),
            numapilot_topology::plural(recovered.inherited, "child process"),
            recovered.gone,
            recovered.failed.len(),
            if recovered.failed.is_empty() { String::new() } else { format!(": {}", recovered.failed.join("; ")) }
        ));
    }
    let setup = Setup { source, overrides, loaded, forced_observe, notify };
    // The host's topology: without the reserved CPUs (`LiveHost::open_with`).
    let topo = numapilot_policy::Host::topology(&host).clone();
    serve(setup, topo, host, Some(recovered), None, announce)
}

struct Signals {
    fd: OwnedFd,
}

fn signal_set() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGHUP);
        // SIGQUIT stops as SIGTERM does; SIGUSR1, SIGUSR2 and SIGALRM mean nothing to numapilot
        // and are logged and ignored. Left to their default action, each ended the daemon without
        // the restore (a logrotate stanza copied from another daemon sends SIGUSR1; review
        // helper-34).
        libc::sigaddset(&mut set, libc::SIGQUIT);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::sigaddset(&mut set, libc::SIGUSR2);
        libc::sigaddset(&mut set, libc::SIGALRM);
        set
    }
}

/// Blocks SIGTERM, SIGINT, SIGQUIT, SIGHUP (and SIGUSR1, SIGUSR2, SIGALRM, ignored) in the calling thread; threads it starts later inherit the
/// mask, so the signals stay pending for the process until the loop reads them from its signalfd.
pub fn block_signals() -> std::io::Result<()> {
    let set = signal_set();
    // SAFETY: the set is initialised; the old mask is not needed.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

impl Signals {
    /// Blocks the three signals in this thread (see [`block_signals`]) and opens a signalfd for them.
    fn open() -> std::io::Result<Self> {
        block_signals()?;
        let set = signal_set();
        // SAFETY: -1 asks for a new fd; the set is initialised.
        let fd = unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd is a new, owned descriptor.
        Ok(Self { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// The pending signals, in order.
    fn read(&self) -> Vec<i32> {
        let mut out = Vec::new();
        loop {
            // SAFETY: signalfd_siginfo is plain data; zeroed is a valid value.
            let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
            let size = std::mem::size_of::<libc::signalfd_siginfo>();
            // SAFETY: info is valid for `size` bytes of writes.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), (&mut info as *mut libc::signalfd_siginfo).cast(), size) };
            if n != size as isize {
                return out;
            }
            out.push(info.ssi_signo as i32);
        }
    }
}

enum Wake {
    Timeout,
    Stop(String),
    Reload,
    /// Young processes started threads (`ThreadWatch`): their standing orders now, a step soon.
    NewThreads(Vec<u32>),
    /// A new process the model does not know yet grew past `new_process_min_rss_mib`
    /// (`ThreadWatch::grown`): step soon.
    Grown,
    /// A background page move ended (`Restore::move_wake`): step soon.
    MoveDone,
}

/// How often the new processes the proc connector announced are checked for growth while any is
/// pending, ms (rule "new-process-grows"). Default 50. Source: a choice, a few checks within the
/// few hundred milliseconds a process takes to first-touch tens of MiB; each check reads one
/// /proc/PID/stat per pending process. What it prevents: a process created and filled between
/// two looks being first placed at the next interval (up to 500 ms later), after its memory and
/// often its threads' start (the rig's race at c4f1fb5: numa01 processes first seen 330-490 ms
/// old, three of six after "go").
const NEW_PROCESS_CHECK_MS: u64 = 50;

/// New processes kept for the growth check, count. Default 64. Source: a choice. What it prevents:
/// a fork storm (a build: thousands of short compilers a second) making each check read thousands
/// of stat files; the oldest are dropped first (the next regular look sees them anyway).
const NEW_PROCESSES_KEPT: usize = 64;

/// What [`grown_processes`] found: whether one grew, and the pending processes to keep watching.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Growth {
    /// A pending process grew past `new_process_min_rss_mib` while young.
    pub grown: bool,
    /// The rest, still pending: (pid, start time in clock ticks).
    pub pending: Vec<(u32, u64)>,
}

/// Checks the new processes announced by the proc connector (`pending`: pid and start time) for
/// growth (rule "new-process-grows"):
///
/// ```text
///   in the model already, seen at new_process_min_rss_mib or more -> dropped (the regular look
///                                     has it)
///   in the model, seen smaller     -> checked as below: a process first seen small at the start
///                                     of its first touch, and held then by a memory policy of
///                                     its own (no settle cadence for it), was not looked at again
///                                     for an interval, until after its threads had started (the
///                                     rig's 4-node numa02, one repetition in three)
///   gone, or its pid reused        -> dropped
///   older than new_process_age_ms  -> dropped (the fork rule is for young processes)
///   resident >= new_process_min_rss_mib -> grown: the loop steps soon; dropped
///   otherwise                      -> kept
/// ```
///
/// `stat_of(pid)`: (start time in clock ticks, age ns, resident bytes), `None` when gone.
pub fn grown_processes(
    pending: &[(u32, u64)],
    model: &Model,
    stat_of: impl Fn(u32) -> Option<(u64, u64, u64)>,
) -> Growth {
    let t = &model.tunables;
    let young_ns = t.new_process_age_ms.saturating_mul(1_000_000);
    let min_rss = t.new_process_min_rss_mib.saturating_mul(1 << 20);
    let mut out = Growth { grown: false, pending: Vec::new() };
    for &(pid, start) in pending {
        if model.procs.get(&pid).is_some_and(|p| p.starttime == start && p.rss_bytes >= min_rss) {
            continue;
        }
        let Some((st, age, rss)) = stat_of(pid) else { continue };
        if st != start || age >= young_ns {
            continue;
        }
        if rss >= min_rss {
            out.grown = true;
            continue;
        }
        out.pending.push((pid, start));
    }
    out
}

/// The proc connector's new-thread events, for the early step of `[daemon] new_thread_wake_ms`.
///
/// ```text
///   event Fork{pid != tgid}: a new thread of process tgid
///     tgid = the daemon itself                        -> nothing
///     tgid in the model: young now (policy's age)     -> wake
///     tgid not in the model: /proc/tgid/stat start time younger than new_process_age_ms -> wake
///   wake: the wait ends at max(event + new_thread_wake_ms, last step start + settle_interval_ms)
/// ```
struct ThreadWatch {
    events: numapilot_observe::proc_events::ProcEvents,
    buf: Vec<numapilot_observe::proc_events::ProcEvent>,
    me: u32,
    reader: numapilot_observe::Reader,
    lost: u64,
    /// New processes (fork events) not checked off yet: pid and start time (rule
    /// "new-process-grows", [`grown_processes`]).
    pending: Vec<(u32, u64)>,
    /// When the pending processes were last checked (monotonic ns).
    checked_ns: u64,
    /// Processes that executed a new program since the loop last looked: their standing orders
    /// go (`Engine::drop_standing`).
    execs: Vec<u32>,
    /// New processes (fork events of a new thread group, not this daemon's) seen since the watch
    /// opened: what ends a backed-off wait (a thread started by any process on the host did, read
    /// from /proc/loadavg's last pid, and a host with a thread pool kept the loop at the interval;
    /// review helper-60).
    forks: u64,
}

impl ThreadWatch {
    /// Opens the subscription, or says once why there is none (`None`: the loop polls as before).
    /// After a failure that will not change (the connector proved silent: another pid namespace)
    /// a later call says nothing and returns `None` at once, so a reload does not wait again.
    fn open(announce: &mut dyn FnMut(&str)) -> Option<Self> {
        static SILENT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if SILENT.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        match numapilot_observe::proc_events::ProcEvents::open() {
            Ok(events) => Some(Self {
                events,
                buf: Vec::new(),
                me: std::process::id(),
                reader: numapilot_observe::Reader::new("/"),
                lost: 0,
                pending: Vec::new(),
                forks: 0,
                checked_ns: 0,
                execs: Vec::new(),
            }),
            Err(e) => {
                if e.io_error().is_some_and(|e| e.kind() == std::io::ErrorKind::TimedOut) {
                    SILENT.store(true, std::sync::atomic::Ordering::Relaxed);
                }
                announce(&format!(
                    "numapilot: proc connector unavailable ({e}; needs CONFIG_PROC_EVENTS, the initial pid namespace, and CAP_NET_ADMIN before Linux 6.6): new threads are seen at the next interval"
                ));
                None
            }
        }
    }

    /// Drains the events; the young processes other than this one that started threads.
    fn young_threads(&mut self, model: &Model) -> Vec<u32> {
        self.buf.clear();
        match self.events.drain(&mut self.buf) {
            Ok(d) => self.lost += u64::from(d.lost),
            Err(e) => {
                tracing::warn!("proc connector: {e}");
                return Vec::new();
            }
        }
        let me = self.me;
        // New processes (not threads) are kept for the growth check; an exec of a process young in
        // the model is noted (the standing order made for the old program goes; orders are only
        // ever made for those, and a build's thousands of execs a second while the loop is backed
        // off do not pile up here).
        let young_ns = model.tunables.new_process_age_ms.saturating_mul(1_000_000);
        for e in &self.buf {
            if let numapilot_observe::proc_events::ProcEvent::Exec { tgid, .. } = *e {
                if model.procs.get(&tgid).is_some_and(|p| p.age_ns(model.now_ns) < young_ns) {
                    self.execs.push(tgid);
                }
            }
            if let numapilot_observe::proc_events::ProcEvent::Fork { pid, tgid, .. } = *e {
                if pid == tgid && pid != me {
                    self.forks += 1;
                }
                if pid == tgid && pid != me && !self.pending.iter().any(|p| p.0 == pid) {
                    if let Ok(Some(st)) = self.reader.read_stat(pid) {
                        self.pending.push((pid, st.starttime));
                    }
                }
            }
        }
        if self.pending.len() > NEW_PROCESSES_KEPT {
            let extra = self.pending.len() - NEW_PROCESSES_KEPT;
            self.pending.drain(..extra);
        }
        let reader = &self.reader;
        let mut tgids: Vec<u32> =
            self.buf.iter().filter(|e| e.is_new_thread()).map(|e| e.tgid()).filter(|&t| t != me).collect();
        tgids.sort_unstable();
        tgids.dedup();
        young_thread_starts(&tgids, model, |tgid| {
            let st = reader.read_stat(tgid).ok().flatten()?;
            Some(age_from_start(st.starttime))
        })
    }

    /// Drops the standing orders of the processes that executed a new program since the last
    /// call (their orders were made for the old program's memory).
    fn drop_exec_orders(&mut self, engine: &mut Engine) {
        for pid in self.execs.drain(..) {
            engine.drop_standing(pid);
        }
    }

    /// Whether a pending new process grew past `new_process_min_rss_mib` ([`grown_processes`]);
    /// the pending list is trimmed either way.
    fn grown(&mut self, model: &Model) -> bool {
        let now = numapilot_observe::reader::monotonic_ns();
        if self.pending.is_empty() || now < self.checked_ns.saturating_add(NEW_PROCESS_CHECK_MS * 1_000_000) {
            return false;
        }
        self.checked_ns = now;
        let page = crate::live::page_size();
        let reader = &self.reader;
        let g = grown_processes(&self.pending, model, |pid| {
            let st = reader.read_stat(pid).ok().flatten()?;
            Some((st.starttime, age_from_start(st.starttime), st.rss_pages.saturating_mul(page)))
        });
        self.pending = g.pending;
        g.grown
    }
}

/// Age now of a process that started `starttime` clock ticks after boot (/proc/PID/stat), ns.
fn age_from_start(starttime: u64) -> u64 {
    let hz = numapilot_observe::reader::clock_ticks_per_sec().max(1);
    let started = (u128::from(starttime) * 1_000_000_000 / u128::from(hz)) as u64;
    numapilot_observe::reader::boottime_ns().saturating_sub(started)
}

/// Which of `tgids` (processes that just started a thread) are young: in the model, by the
/// policy's own age (`young_and_worth`'s age test: younger than `new_process_age_ms` now); not in
/// the model yet, by `age_of` (its age now, ns; `None`: gone or unreadable, not young).
pub fn young_thread_starts(tgids: &[u32], model: &Model, age_of: impl Fn(u32) -> Option<u64>) -> Vec<u32> {
    let young_ns = model.tunables.new_process_age_ms.saturating_mul(1_000_000);
    tgids
        .iter()
        .copied()
        .filter(|&tgid| match model.procs.get(&tgid) {
            Some(p) => p.age_ns(model.now_ns) < young_ns,
            None => age_of(tgid).is_some_and(|age| age < young_ns),
        })
        .collect()
}

/// Runs the loop against `host` until SIGTERM/SIGINT (or [`Command::Stop`] on `commands`).
/// `recovered` is the live host's recovery at open (journaled when non-empty).
pub fn serve<H: Host + Restore>(
    setup: Setup,
    topo: Topology,
    mut host: H,
    recovered: Option<RestoreReport>,
    commands: Option<UnixStream>,
    announce: &mut dyn FnMut(&str),
) -> Result<Exit, RunError> {
    let Setup { source, overrides, loaded, forced_observe, mut notify } = setup;
    let mut config = loaded.config;
    let mut config_file = loaded.file;
    // Blocked before any thread starts, so every later thread inherits the mask.
    let signals = Signals::open().map_err(RunError::Signals)?;
    let started_ns = numapilot_observe::reader::monotonic_ns();
    let mut status =
        Status { version: env!("CARGO_PKG_VERSION").to_string(), pid: std::process::id(), ..Status::default() };
    let shared = Arc::new(Shared { status: Mutex::new(status.clone()), started_ns });
    // What can be refused (the socket taken by another daemon, a metrics address that cannot be
    // bound for any reason but its port being taken, a journal that cannot be opened) is set up
    // before anything is written, and a refusal leaves nothing behind: the socket file goes with
    // the guard, the journal is opened last.
    let (mut loop_side, control, claim) = control::serve(&config.daemon.socket, shared.clone())?;
    // Dropped in this order on every return: the server stops and closes its socket (poked at its
    // path), then the claim removes the path and its lock file, lets the lock go and removes the
    // directories the serve made for it, when empty (a start that failed after this left an empty
    // /run/numapilot).
    let control = (control, claim);
    announce(&format!("numapilot: control socket {}", config.daemon.socket.display()));
    // Held to the end: dropped, the server stops and the port is closed. A port that is taken (any
    // local user may hold an unprivileged port first) does not stop the daemon: said, warned about
    // by status, tried again every METRICS_RETRY_S (review helper-51: the start exited 75 and the
    // unit gave up after ten), and so does an address not on this host yet. Any other failure (a
    // port below 1024 for a daemon not root) stops the start as before. The address
    // is the start's: `daemon.metrics` takes effect at the next start, a reload changes nothing
    // here (review helper-52: a reload to `off` left the warning standing for good).
    let metrics_at = config.metrics();
    let mut metrics_server = None;
    let mut metrics_tried_ns = 0;
    if let Some(addr) = metrics_at {
        metrics_tried_ns = numapilot_observe::reader::monotonic_ns();
        metrics_server = try_metrics(addr, &shared, &mut status, announce)?;
    }
    let mut journal = open_journal(&config)?;
    // The last refusal is behind: what the host made for its state file stays (a start refused
    // before this left its directory behind with the lock in it).
    host.started();
    // Lines dropped by journals a reload replaced.
    let mut dropped_before = 0;
    status.notes = host.notes();
    // Metrics other hosts can reach: said at start, kept in status and the start's journal line.
    let exposed = metrics_at.and_then(metrics::exposure_warning);
    status.notes.extend(exposed.clone());
    let file_of = |f: &Option<std::path::PathBuf>| f.as_ref().map_or("(defaults)".into(), |p| p.display().to_string());
    if let Some(j) = journal.as_mut() {
        let notes = (!status.notes.is_empty()).then(|| status.notes.join("; "));
        let detail =
            format!("numapilot {} (pid {}), configuration {}", status.version, status.pid, file_of(&config_file));
        let dry = config.daemon.dry_run || forced_observe.is_some();
        write_journal(j, &Record::daemon("start", "start", detail, notes, dry));
    }
    if let (Some(j), Some(r)) = (journal.as_mut(), recovered.as_ref()) {
        if *r != RestoreReport::default() {
            write_journal(j, &Record::restore("recovery at start", r, false));
        }
    }
    // One node in reach: nothing to place, so none of the early steps for new processes and
    // threads, and no proc connector (its every fork, exec and exit would be read for nothing).
    let mut placeable = placeable_nodes(&topo);
    let mut single = nothing_to_place(&placeable);
    let wants_watch = |c: &Config, single: &Option<String>| c.daemon.new_thread_wake_ms > 0 && single.is_none();
    let mut watch = if wants_watch(&config, &single) { ThreadWatch::open(announce) } else { None };
    let mut engine = Engine::new(topo, config.tunables.clone(), Box::new(Adaptive::new()));
    let dry_run = |c: &Config| c.daemon.dry_run || forced_observe.is_some();
    // A host that changes nothing unasked (another pid namespace's /proc) says so in status.
    let unasked = host.unasked_refusal();
    engine.dry_run = dry_run(&config) || single.is_some();
    let started_dry = dry_run(&config);
    let describe = |c: &Config, file: &Option<PathBuf>, s: &mut Status| {
        s.config_file = file.as_ref().map(|p| p.display().to_string());
        s.interval_ms = c.interval_ms();
        s.dry_run = dry_run(c);
        s.observe_only_reason = forced_observe
            .clone()
            .or_else(|| unasked.clone())
            .or_else(|| c.daemon.dry_run.then(|| "dry run".to_string()));
    };
    describe(&config, &config_file, &mut status);
    status.placeable_nodes = placeable.to_list();
    status.nothing_to_place = single.clone();
    let mut own_mems = OwnMemoryNodes::read(&host, &engine.model.topo);
    own_mems.show(&mut status);
    publish(&shared, &status);
    let mode = |dry: bool| if dry { "dry run (observe and plan only)" } else { "acting" };
    announce(&format!("numapilot: started, interval {} ms, {}", config.interval_ms(), mode(started_dry)));
    if let Some(why) = &single {
        announce(&format!("numapilot: {}", single_node_line(why)));
    }
    if let Some(line) = own_mems.warning(&engine.model.topo) {
        announce(&format!("numapilot: warning: {line}"));
    }
    if let Some(line) = &exposed {
        announce(&format!("numapilot: warning: {line}"));
    }
    notify.ready(&format!("started, interval {} ms, {}", config.interval_ms(), mode(started_dry)));
    let mut last_error: Option<String> = None;
    let mut backoff = Backoff::new(config.daemon.idle_max_interval_ms);
    let mut cycle_s_max = 0.0_f64;
    let mut observe_parts_s_total = [0.0_f64; 5];
    let mut last_t0: Option<u64> = None;
    let why = 'outer: loop {
        let t0 = numapilot_observe::reader::monotonic_ns();
        if let Some(prev) = last_t0.replace(t0) {
            backoff.stepped(t0.saturating_sub(prev));
        }
        // Actions of this step; None when it failed (never counts as quiet).
        let mut planned = None;
        // Execs seen since the last look (between steps only on new-thread wakes): their orders
        // go before this step keeps any for one wait more; the list never outlives a step.
        if let Some(w) = watch.as_mut() {
            w.drop_exec_orders(&mut engine);
        }
        match engine.step(&mut host) {
            Ok(report) => {
                planned = Some(report.plan.actions.len());
                backoff.sampled(report.access_fill);
                for (sum, ns) in
                    status.phase_s_total.iter_mut().zip([report.observe_ns, report.decide_ns, report.act_ns])
                {
                    *sum += ns as f64 / 1e9;
                }
                for (sum, ns) in observe_parts_s_total.iter_mut().zip(host.observe_parts_ns()) {
                    *sum += ns as f64 / 1e9;
                }
                if last_error.take().is_some() {
                    tracing::info!("engine step succeeded again");
                }
                record_step(&engine, &report, journal.as_mut(), &mut status, dry_run(&config), single.as_deref());
                tracing::debug!(
                    "step {} began at {:.3} s (monotonic clock), {}, standing orders for {:?}",
                    engine.totals.steps,
                    t0 as f64 / 1e9,
                    numapilot_topology::plural(report.plan.actions.len(), "action"),
                    engine.standing().iter().map(|a| a.target.pid).collect::<Vec<_>>()
                );
                record_released(
                    &mut host,
                    "moved into an excluded cgroup or out of [include]",
                    journal.as_mut(),
                    &mut status,
                );
                status.last_error = None;
                status.consecutive_step_errors = 0;
            }
            Err(e) => {
                // No decision stands behind the last plan's orders any more.
                engine.forget_standing();
                let msg = e.to_string();
                if last_error.as_deref() != Some(&msg) {
                    tracing::error!("engine step failed (retrying every interval): {msg}");
                }
                status.step_errors += 1;
                status.consecutive_step_errors += 1;
                status.last_error = Some(msg.clone());
                last_error = Some(msg);
            }
        }
        // The reach again: a node that came online or went away (the host's topology change).
        let now_placeable = placeable_nodes(&engine.model.topo);
        if now_placeable != placeable {
            let now_single = nothing_to_place(&now_placeable);
            match (&single, &now_single) {
                (_, Some(why)) => tracing::warn!("{}", single_node_line(why)),
                (Some(_), None) => tracing::warn!(
                    "nodes {} are in reach now: placing again, with the early steps for new processes and threads",
                    now_placeable.to_list()
                ),
                (None, None) => tracing::info!("nodes in reach now: {}", now_placeable.to_list()),
            }
            placeable = now_placeable;
            single = now_single;
            engine.dry_run = dry_run(&config) || single.is_some();
            if single.is_some() {
                watch = None;
            } else if watch.is_none() && wants_watch(&config, &single) {
                watch = ThreadWatch::open(&mut |m| tracing::warn!("{m}"));
            }
            status.placeable_nodes = placeable.to_list();
            status.nothing_to_place = single.clone();
        }
        // The daemon's own memory nodes again (`AllowedMemoryNodes=` changed by `systemctl
        // set-property`, a container's cpuset.mems rewritten, a node come online), and what
        // they leave out of the machine's memory nodes now.
        own_mems.follow(&host, &engine.model.topo, &mut status, journal.as_mut(), dry_run(&config));
        let cycle_ns = numapilot_observe::reader::monotonic_ns().saturating_sub(t0);
        status.last_cycle_s = cycle_ns as f64 / 1e9;
        status.cycle_s_total += status.last_cycle_s;
        crate::control::count_step(&mut status.step_histogram, status.last_cycle_s);
        cycle_s_max = cycle_s_max.max(status.last_cycle_s);
        fill_model(&engine.model, &engine, &mut status);
        status.bookkeeping = bookkeeping(&engine, &host);
        (status.stalled_reads, status.stalled_reads_total) = host.stalled_reads();
        let now = numapilot_observe::reader::monotonic_ns();
        status.move_running = host.move_running().map(|(pid, at)| (pid, now.saturating_sub(at) as f64 / 1e9));
        status.proc_events_lost = watch.as_ref().map_or(0, |w| w.lost);
        status.access_sampler = host.sampler_status();
        status.signal_source_failures = host.signal_source_failures();
        status.journal_lines_dropped = dropped_before + journal.as_ref().map_or(0, Journal::dropped);
        status.launch_promises = engine.launch_promises(now);
        status.state_unsaved = host.state_unsaved();
        status.moves_stuck =
            host.moves_stuck().into_iter().map(|(pid, at)| (pid, now.saturating_sub(at) as f64 / 1e9)).collect();
        status.journal_failing = journal.as_ref().is_some_and(Journal::failing);
        if let (None, Some(addr)) = (&metrics_server, metrics_at) {
            if now.saturating_sub(metrics_tried_ns) >= control::METRICS_RETRY_S * 1_000_000_000 {
                metrics_tried_ns = now;
                // Bound at start, the address cannot fail otherwise now but by a change of the
                // host (an address removed): said, and tried again.
                metrics_server = match try_metrics(addr, &shared, &mut status, announce) {
                    Ok(server) => server,
                    Err(e) => {
                        status.metrics_unbound = Some(format!("{addr}: {}", e.cause));
                        None
                    }
                };
            }
        }
        status.last_step_mono_ns = now;
        status.last_step_unix_s =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        // The policy's cadence (its settle interval while young processes settle); with one node
        // the interval: a young process has nowhere to be placed.
        let base =
            if single.is_some() { config.interval_ms().saturating_mul(1_000_000) } else { engine.next_interval_ns() };
        // With one node, nothing a step sees (a compiler's every new process) can lead to an
        // action: the back-off runs whatever changed (the cadence essay).
        backoff.set_nothing_to_place(single.is_some());
        let next = backoff.next_wait_ns(base, &engine.model, planned);
        let stretch = backoff.stretch_for(next, base);
        host.set_sampling_stretch(stretch);
        status.sampling_stretch = host.sampling_stretch().unwrap_or(0);
        status.next_interval_ms = next / 1_000_000;
        publish(&shared, &status);
        let mut deadline = t0.saturating_add(next);
        // Backed off: look once per policy interval whether a process was created since this
        // step, and step at once then instead of after the whole wait. With the proc connector,
        // its fork events say so (new processes only); without it, /proc/loadavg's last pid (any
        // new thread too). Not with one node: a new process has nowhere to be placed.
        let created = |watch: &Option<ThreadWatch>| match watch {
            Some(w) => Some(w.forks as u32),
            None => last_pid(),
        };
        let mark = if next > base && single.is_none() { created(&watch) } else { None };
        let mut peek = t0.saturating_add(base);
        // New threads of a young process: the earliest the next step may come.
        let gap = engine.model.tunables.settle_interval_ms.saturating_mul(1_000_000);
        let wake_delay = config.daemon.new_thread_wake_ms.saturating_mul(1_000_000);
        loop {
            let until = if mark.is_some() { peek.min(deadline) } else { deadline };
            let w = watch.as_mut();
            let mut adoptions = Vec::new();
            let wake = wait(
                &signals,
                &mut loop_side,
                commands.as_ref(),
                until,
                (&mut engine, &mut adoptions),
                (&mut status, &shared),
                w,
                host.move_wake(),
                (&|pid| host.why_unseen(pid), &|pid| host.launch_refusal(pid)),
                &|pid, starttime| host.since_last_step(pid, starttime),
            );
            for (pid, nodes) in adoptions {
                host.adopt(pid, &nodes);
            }
            match wake {
                Wake::MoveDone => {
                    // A background move ended: the next step takes it (journal, pages, the next
                    // move) soon, never sooner than the settle interval after this step began.
                    // Counted even when another wake already brought the step as close.
                    if let Some(w) = host.move_wake() {
                        control::drain_socket(w);
                    }
                    let early = numapilot_observe::reader::monotonic_ns().max(t0.saturating_add(gap));
                    deadline = deadline.min(early);
                    status.move_wakes += 1;
                }
                Wake::NewThreads(_) | Wake::Grown => {
                    // The last plan's standing orders for them, now, before their threads have run
                    // long where the kernel started them (rule new-threads-follow-memory).
                    if let Wake::NewThreads(tgids) = &wake {
                        tracing::debug!(
                            "new threads in young processes {tgids:?} at {:.3} s",
                            numapilot_observe::reader::monotonic_ns() as f64 / 1e9
                        );
                        if let Some(w) = watch.as_mut() {
                            w.drop_exec_orders(&mut engine);
                        }
                        for &tgid in tgids {
                            let asked = numapilot_observe::reader::monotonic_ns();
                            if let Some((action, outcome)) = engine.on_new_threads(&mut host, tgid) {
                                tracing::debug!(
                                    "standing order for pid {tgid} carried out in {:.1} ms",
                                    numapilot_observe::reader::monotonic_ns().saturating_sub(asked) as f64 / 1e6
                                );
                                record_standing(&engine, &action, &outcome, journal.as_mut(), &mut status);
                            }
                        }
                    }
                    let grown = matches!(wake, Wake::Grown);
                    if grown {
                        tracing::debug!("a new process grew past new_process_min_rss_mib");
                    }
                    let now = numapilot_observe::reader::monotonic_ns();
                    let early = now.saturating_add(wake_delay).max(t0.saturating_add(gap));
                    if early < deadline {
                        deadline = early;
                        if grown {
                            status.growth_wakes += 1;
                        } else {
                            status.thread_wakes += 1;
                        }
                    }
                    // A process that starts threads faster than the loop drains their events keeps
                    // the poll ready: the step still comes at its time.
                    if now >= deadline {
                        break;
                    }
                }
                Wake::Timeout if until < deadline => {
                    // (The watch's events are drained by `wait` as they come: a timeout had none.)
                    if created(&watch) != mark {
                        status.early_wakes += 1;
                        break;
                    }
                    peek = peek.saturating_add(base.max(1));
                }
                Wake::Timeout => break,
                Wake::Stop(why) => break 'outer why,
                Wake::Reload => {
                    notify.reloading();
                    // Everything that can refuse the file is tried before any of it is taken, so
                    // a reload is taken whole or not at all: what it reserves on this machine (a
                    // file reserving every CPU was taken, and the next start refused it), and a
                    // new journal, opened first (one that could not be opened was skipped and the
                    // rest of the file taken; review helper-50).
                    let checked = config::load(&source, &overrides).map_err(|e| e.to_string()).and_then(|new| {
                        crate::live::reservation_check(&new.config.live_options(false))?;
                        let journal_changed = new.config.daemon.journal != config.daemon.journal
                            || new.config.daemon.journal_max_bytes != config.daemon.journal_max_bytes;
                        let opened = if journal_changed {
                            Some(open_journal(&new.config).map_err(|e| e.to_string())?)
                        } else {
                            None
                        };
                        Ok((new, opened))
                    });
                    match checked {
                        Ok((mut new, opened)) => {
                            for w in &new.warnings {
                                tracing::warn!("{w}");
                            }
                            warn_restart_only(&config, &new.config);
                            // A start as a dry run opened a host that changes nothing (no state
                            // file claimed, no page mover): acting needs a restart.
                            if started_dry && !dry_run(&new.config) {
                                tracing::warn!(
                                    "reloaded configuration sets daemon.dry_run = false: this daemon started as a \
                                     dry run and stays one until the next start"
                                );
                                new.config.daemon.dry_run = true;
                            }
                            // An exclusion (or inclusion) a reload made holds from the next action:
                            // an operator excluding a process must not have it moved until a restart.
                            let live = new.config.live_options(false);
                            host.set_exclusions(&live);
                            host.set_migrate_budget(live.migrate_mb_per_s);
                            record_released(
                                &mut host,
                                "excluded by a configuration reload",
                                journal.as_mut(),
                                &mut status,
                            );
                            if let Some(j) = opened {
                                // The count stays a counter across the change of file.
                                dropped_before += journal.as_ref().map_or(0, Journal::dropped);
                                journal = j;
                            }
                            engine.model.tunables = new.config.tunables.clone();
                            // Orders made under the old tunables (and exclusions) go.
                            engine.forget_standing();
                            backoff = Backoff::new(new.config.daemon.idle_max_interval_ms);
                            if !wants_watch(&new.config, &single) {
                                watch = None;
                            } else if watch.is_none() {
                                watch = ThreadWatch::open(&mut |m| tracing::warn!("{m}"));
                            }
                            engine.dry_run = dry_run(&new.config) || single.is_some();
                            config = new.config;
                            config_file = new.file;
                            status.reloads += 1;
                            tracing::info!("configuration reloaded from {}", file_of(&config_file));
                            if let Some(j) = journal.as_mut() {
                                let detail = format!("configuration {}", file_of(&config_file));
                                let dry = dry_run(&config);
                                write_journal(j, &Record::daemon("reload", "accepted", detail, None, dry));
                            }
                        }
                        Err(e) => {
                            status.reloads_rejected += 1;
                            tracing::error!("configuration reload rejected, keeping the previous one: {e}");
                            if let Some(j) = journal.as_mut() {
                                let detail = format!("configuration {} kept", file_of(&config_file));
                                let why = Some(e.to_string());
                                let dry = dry_run(&config);
                                write_journal(j, &Record::daemon("reload", "rejected", detail, why, dry));
                            }
                        }
                    }
                    describe(&config, &config_file, &mut status);
                    publish(&shared, &status);
                    notify.ready(&format!("running, interval {} ms, {}", config.interval_ms(), mode(dry_run(&config))));
                }
            }
        }
    };
    notify.stopping();
    // A page move still running is asked to stop, waited for (at most `live::SHUTDOWN_MOVE_WAIT`)
    // and journaled before anything is put back.
    let last = host.wait_moves();
    let at_ns = numapilot_observe::reader::monotonic_ns();
    record_finished(&engine, at_ns, &last, journal.as_mut(), &mut status);
    tracing::info!("{why}: restoring every touched process");
    let restore = host.restore_all();
    if let Some(j) = journal.as_mut() {
        write_journal(j, &Record::restore(&format!("shutdown ({why})"), &restore, dry_run(&config)));
    }
    // The listening sockets closed and the socket file gone now, not when the process ends: a page
    // move still in the kernel (a memory map locked behind a hung server) keeps the process, and so
    // every descriptor its threads share, until its call returns.
    drop(metrics_server);
    drop(control);
    if host.move_running().is_some() || !host.moves_stuck().is_empty() {
        tracing::warn!(
            "a page move is still in the kernel: this process ends once its call returns (the socket, the metrics \
             port and the state file are released already)"
        );
    }
    Ok(Exit {
        steps: engine.totals.steps,
        restore,
        why,
        cycle_s_total: status.cycle_s_total,
        cycle_s_max,
        phases_s_total: status.phase_s_total,
        observe_parts_s_total,
    })
}

/// The nodes the daemon can place among: those of `topo` with a usable CPU or with memory.
///
/// A property of the machine, not of the daemon's own cpuset: the kernel holds a placed thread
/// to its own process's cpuset, not the caller's. `sched_setaffinity(pid)` cuts the mask to the
/// target's cpuset (`__sched_setaffinity` in kernel/sched/core.c: `cpuset_cpus_allowed(p)`), and
/// `migrate_pages`/`move_pages` check the new nodes against the target's `mems_allowed`
/// (`kernel_migrate_pages` in mm/mempolicy.c, `kernel_move_pages` and `do_pages_move` in
/// mm/migrate.c: `cpuset_mems_allowed(task)`). A daemon an operator confined to node 0
/// (systemd's `AllowedCPUs=`, `AllowedMemoryNodes=`) still places every other process on every
/// node; the policy keeps each one within its own cpuset (rule confined-within-cpuset).
/// One limit is the caller's: `kernel_migrate_pages` also cuts the new nodes to the caller's
/// `cpuset_mems_allowed(current)` (EINVAL when none is left), so a daemon whose own
/// `Mems_allowed` leaves a node out cannot move pages there with `migrate_pages` (and
/// `move_pages` allocates under the caller's cpuset): the start warns and status shows it
/// ([`pages_unmovable_to`]).
pub fn placeable_nodes(topo: &Topology) -> numapilot_topology::NodeSet {
    topo.nodes.iter().filter(|n| !n.cpus.is_empty() || n.has_memory()).map(|n| n.id).collect()
}

/// The machine's memory nodes the daemon cannot move pages to: those outside `own`, its own
/// cpuset's memory nodes (`Mems_allowed`). `kernel_migrate_pages` cuts the new nodes to the
/// caller's `cpuset_mems_allowed(current)`, and `move_pages` allocates the new pages under the
/// caller's cpuset, so such a node gets no page from the daemon, though its threads are placed
/// there. `None` when every memory node is allowed.
pub fn pages_unmovable_to(topo: &Topology, own: &numapilot_topology::NodeSet) -> Option<numapilot_topology::NodeSet> {
    Some(topo.memory_nodes().difference(own)).filter(|out| !out.is_empty())
}

/// The daemon's own memory nodes (`Mems_allowed`, [`Restore::own_memory_nodes`]) and the
/// machine's memory nodes they leave out ([`pages_unmovable_to`]), as last said: the start's
/// warning, status `own_memory_nodes` and `pages_unmovable_to`.
///
/// Read at start and again after every step ([`OwnMemoryNodes::follow`]: one small file,
/// /proc/self/status, about 1.5 kB): they change while the daemon runs when systemd's
/// `AllowedMemoryNodes=` is changed by `systemctl set-property` or a container's `cpuset.mems` is
/// rewritten (the kernel rebinds the cpuset's tasks at once), and the nodes left out change with
/// the machine (a memory node come online). A change is logged (a warning naming the nodes pages
/// cannot be moved to, or an info line when there are none left), journaled (`own-memory-nodes`)
/// and shown in status. Before, they were read once at start: a daemon narrowed later went on
/// saying every node was reachable, and one widened later went on warning. A read that fails
/// (short of a descriptor) keeps what was said.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct OwnMemoryNodes {
    own: Option<numapilot_topology::NodeSet>,
    unmovable: Option<numapilot_topology::NodeSet>,
}

impl OwnMemoryNodes {
    /// The host's own memory nodes now, and what they leave out of `topo`'s memory nodes.
    fn read<H: Restore>(host: &H, topo: &Topology) -> Self {
        let own = host.own_memory_nodes();
        let unmovable = own.as_ref().and_then(|own| pages_unmovable_to(topo, own));
        OwnMemoryNodes { own, unmovable }
    }

    /// Status's two fields.
    fn show(&self, status: &mut Status) {
        status.own_memory_nodes = status_list(&self.own);
        status.pages_unmovable_to = status_list(&self.unmovable);
    }

    /// The warning when nodes are left out (`control::unmovable_line`).
    fn warning(&self, topo: &Topology) -> Option<String> {
        let (own, out) = (self.own.as_ref()?, self.unmovable.as_ref()?);
        Some(control::unmovable_line(&own.to_list(), Some(&topo.memory_nodes().to_list()), &out.to_list()))
    }

    /// Reads them again; on a change, says so (log, journal, status).
    fn follow<H: Restore>(
        &mut self,
        host: &H,
        topo: &Topology,
        status: &mut Status,
        journal: Option<&mut Journal>,
        dry_run: bool,
    ) {
        let now = Self::read(host, topo);
        if now.own.is_none() || now == *self {
            return;
        }
        let own = status_list(&now.own);
        let (detail, message) = match now.warning(topo) {
            Some(line) => {
                tracing::warn!("the daemon's own memory nodes changed: {line}");
                (
                    format!("own memory nodes {own}, pages cannot be moved to nodes {}", status_list(&now.unmovable)),
                    Some(line),
                )
            }
            None => {
                tracing::info!(
                    "the daemon's own memory nodes changed: {own}, every memory node of the machine ({}): pages can be \
                     moved to each",
                    topo.memory_nodes().to_list()
                );
                (format!("own memory nodes {own}, every memory node of the machine"), None)
            }
        };
        if let Some(j) = journal {
            write_journal(j, &Record::daemon("own-memory-nodes", "changed", detail, message, dry_run));
        }
        now.show(status);
        *self = now;
    }
}

/// A node list as status shows it ("" for none).
fn status_list(nodes: &Option<numapilot_topology::NodeSet>) -> String {
    nodes.as_ref().map_or_else(String::new, |n| n.to_list())
}

/// Why there is nothing to place, when `placeable` (from [`placeable_nodes`]) has one node or
/// none: the machine has one NUMA node with a usable CPU or memory. `None` with two or more.
/// Nothing can move between nodes then, as numad and the kernel's NUMA balancing do nothing on
/// one node.
pub fn nothing_to_place(placeable: &numapilot_topology::NodeSet) -> Option<String> {
    if placeable.len() > 1 {
        return None;
    }
    Some(match placeable.first() {
        None => "the machine has no node with a usable CPU or memory".to_string(),
        Some(n) => format!("the machine has one NUMA node (node {n})"),
    })
}

/// The log line for one node in reach (`why`: [`nothing_to_place`]).
fn single_node_line(why: &str) -> String {
    format!(
        "{why}: nothing to place. The daemon observes (status, explain, stat and metrics stay useful) and moves no \
         thread or page between nodes (restoring what an earlier run placed still runs); it steps at its interval, \
         backing off whatever changes (no new process can lead to an action), without the early steps for new \
         processes and threads. A node that comes online \
         with CPUs or memory is seen at the next step"
    )
}

/// The last pid the kernel handed out (`/proc/loadavg`'s fifth field, `get_loadavg` in
/// fs/proc/loadavg.c: the pid namespace's `last_pid`), or `None` when unreadable. One small read:
/// while backed off the loop compares it once per interval and steps early when a process or
/// thread was created, so a new workload is seen within an interval, not after the whole wait.
pub fn last_pid() -> Option<u32> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().nth(4)?.parse().ok()
}

/// A daemon loop in this process with a command pipe: returns the [`Handle`] and the other end to
/// pass to [`serve`] as `commands`.
pub fn command_pipe() -> std::io::Result<(Handle, UnixStream)> {
    let (tx, rx) = UnixStream::pair()?;
    rx.set_nonblocking(true)?;
    Ok((Handle { tx }, rx))
}

/// Serves metrics on `addr`: the server; `None`, said in `status` (logged the first time), when
/// the port is taken, to be tried again; the error otherwise.
fn try_metrics(
    addr: std::net::SocketAddr,
    shared: &Arc<Shared>,
    status: &mut Status,
    announce: &mut dyn FnMut(&str),
) -> Result<Option<control::Listening>, MetricsError> {
    match metrics::serve(addr, shared.clone()) {
        Ok((bound, server)) => {
            status.metrics_unbound = None;
            announce(&format!("numapilot: metrics on http://{bound}/metrics"));
            Ok(Some(server))
        }
        // Taken, or not (yet) on this host (an address a network brings up after the start: the
        // unit waits for local file systems only; review helper-54).
        Err(e) if matches!(e.cause.kind(), std::io::ErrorKind::AddrInUse | std::io::ErrorKind::AddrNotAvailable) => {
            if status.metrics_unbound.is_none() {
                tracing::error!("{e}: metrics not served; tried again every {} s", control::METRICS_RETRY_S);
            }
            status.metrics_unbound = Some(format!("{addr}: {}", e.cause));
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// A host's answer about a pid: why it is not managed, or why it cannot be named (`None`: it is,
/// or it can).
type PidWhy<'a> = &'a dyn Fn(u32) -> Option<String>;

fn open_journal(c: &Config) -> Result<Option<Journal>, JournalError> {
    if c.daemon.journal.as_os_str().is_empty() {
        return Ok(None);
    }
    Journal::open(&c.daemon.journal, c.daemon.journal_max_bytes).map(Some)
}

fn write_journal(j: &mut Journal, r: &Record) {
    j.write_logged(r);
}

fn publish(shared: &Shared, status: &Status) {
    *shared.status.lock().unwrap_or_else(|p| p.into_inner()) = status.clone();
}

fn warn_restart_only(old: &Config, new: &Config) {
    let mut changed = Vec::new();
    if old.daemon.socket != new.daemon.socket {
        changed.push("daemon.socket");
    }
    if old.daemon.metrics != new.daemon.metrics {
        changed.push("daemon.metrics");
    }
    if old.daemon.state != new.daemon.state {
        changed.push("daemon.state");
    }
    if old.daemon.nice != new.daemon.nice {
        changed.push("daemon.nice");
    }
    // The page-migration budget is taken at a reload (`set_migrate_budget`); the rest of
    // `[actuation]` at the next start.
    let budget_aside =
        |a: &crate::config::ActuationSection| crate::config::ActuationSection { migrate_mb_per_s: None, ..a.clone() };
    if budget_aside(&old.actuation) != budget_aside(&new.actuation) {
        changed.push("[actuation]");
    }
    if old.signals != new.signals {
        changed.push("[signals]");
    }
    if !changed.is_empty() {
        tracing::warn!("reloaded configuration changes {}: these take effect at the next start", changed.join(", "));
    }
}

/// The step's topology change, ended page moves and actions into the journal and the status.
/// `dry`: the configuration's dry run. `held`: why there is nothing to place, when one node is in
/// reach ([`nothing_to_place`]): the engine then carries nothing out, and an action is journaled as
/// planned with that reason in its message (`dry_run` as configured), logged at debug only (the
/// start said it once, and the same plan comes back at every step), never as a dry run's "would".
fn record_step(
    engine: &Engine,
    report: &StepReport,
    mut journal: Option<&mut Journal>,
    s: &mut Status,
    dry: bool,
    held: Option<&str>,
) {
    let step = engine.totals.steps;
    if let Some(what) = &report.topology_change {
        s.topology_changes += 1;
        if let Some(j) = journal.as_deref_mut() {
            let online = engine.model.topo.usable_cpus().to_list_or_none();
            write_journal(j, &Record::topology(step, report.at_ns, what, &online));
        }
    }
    // Page moves that ran in the background and ended since the last step.
    record_finished(engine, report.at_ns, &report.finished, journal.as_deref_mut(), s);
    for (i, action) in report.plan.actions.iter().enumerate() {
        let outcome = report.outcomes.get(i);
        let kind = journal::kind_name(action);
        *s.actions_by_kind.entry(kind.to_string()).or_default() += 1;
        count_outcome(kind, outcome, s);
        let comm = engine.model.procs.get(&action.target.pid).map_or("", |p| p.comm.as_str());
        let tid = action.target.tid.map_or_else(String::new, |t| format!(" tid {t}"));
        let (pid, rule, detail) = (action.target.pid, &action.reason.rule, &action.reason.detail);
        match held {
            Some(why) => tracing::debug!(
                "nothing to place ({why}): {kind} pid {pid} ({comm}){tid} planned, not carried out: [{rule}] {detail}"
            ),
            None if engine.dry_run => {
                tracing::info!("dry run: would {kind} pid {pid} ({comm}){tid}: [{rule}] {detail}")
            }
            None => {}
        }
        if let Some(j) = journal.as_deref_mut() {
            let mut r = Record::action(step, report.at_ns, action, comm, outcome, dry);
            if let Some(why) = held {
                r.message = Some(format!("not carried out: nothing to place: {why}"));
            }
            write_journal(j, &r);
        }
    }
}

/// A standing order taken between two steps (`Engine::on_new_threads`): carried out, counted and
/// journaled as an action (the step number is the last step's; the order may be the plan before's,
/// see `Engine::on_new_threads`), at the time it was carried out; in a dry run, logged and
/// journaled as one it would have carried out; refused (the process sets its own memory policy
/// still, or was excluded since) or gone, a debug line only: the order's condition did not hold
/// (a process started under `numactl --membind` would otherwise add a refusal to the journal and
/// the counters for every thread pool it starts young).
fn record_standing(
    engine: &Engine,
    action: &Action,
    outcome: &Option<Outcome>,
    journal: Option<&mut Journal>,
    s: &mut Status,
) {
    if let Some(o) = outcome.as_ref().filter(|o| !matches!(o, Outcome::Applied { .. } | Outcome::Partial { .. })) {
        tracing::debug!("standing order for pid {} not carried out: {o:?}", action.target.pid);
        return;
    }
    let kind = journal::kind_name(action);
    *s.actions_by_kind.entry(kind.to_string()).or_default() += 1;
    count_outcome(kind, outcome.as_ref(), s);
    s.standing_orders += 1;
    let comm = engine.model.procs.get(&action.target.pid).map_or("", |p| p.comm.as_str());
    match outcome {
        None => tracing::info!(
            "dry run: would {kind} pid {} ({comm}) on its new threads: [{}] {}",
            action.target.pid,
            action.reason.rule,
            action.reason.detail
        ),
        Some(_) => {
            tracing::debug!("standing order for pid {} ({comm}) carried out on its new threads", action.target.pid)
        }
    }
    if let Some(j) = journal {
        let at_ns = numapilot_observe::reader::monotonic_ns();
        write_journal(
            j,
            &Record::action(engine.totals.steps, at_ns, action, comm, outcome.as_ref(), outcome.is_none()),
        );
    }
}

/// Processes the host put back because they left numapilot's hands (`why`): a `restore` journal
/// line and the status counter, when there were any.
fn record_released<H: Restore>(host: &mut H, why: &str, journal: Option<&mut Journal>, s: &mut Status) {
    let r = host.take_released();
    if r == RestoreReport::default() {
        return;
    }
    s.released += r.restored;
    tracing::info!(
        "released ({why}): {} put back, {} inherited, {} gone, {} failed",
        r.restored,
        r.inherited,
        r.gone,
        r.failed.len()
    );
    for f in &r.failed {
        tracing::warn!("putting a released process back failed: {f}");
    }
    if let Some(j) = journal {
        write_journal(j, &Record::restore(&format!("released ({why})"), &r, false));
    }
}

/// Background page moves that ended: a `move-done` journal line each, their failures counted.
fn record_finished(
    engine: &Engine,
    at_ns: u64,
    finished: &[FinishedMove],
    mut journal: Option<&mut Journal>,
    s: &mut Status,
) {
    for f in finished {
        count_outcome(journal::kind_name(&f.action), Some(&f.outcome), s);
        if let Some(j) = journal.as_deref_mut() {
            let comm = engine.model.procs.get(&f.action.target.pid).map_or("", |p| p.comm.as_str());
            write_journal(j, &Record::move_done(engine.totals.steps, at_ns, f, comm));
        }
    }
}

/// Failures of one outcome into the status (pages by cause, actions by kind and outcome).
fn count_outcome(kind: &str, outcome: Option<&Outcome>, s: &mut Status) {
    let failed = match outcome {
        Some(Outcome::Partial { failed, .. }) => {
            for (cause, n) in failed {
                *s.pages_failed_by_cause.entry(crate::live::apply::cause_class(cause)).or_default() += n;
            }
            true
        }
        Some(Outcome::Vanished) | Some(Outcome::Refused { .. }) => true,
        _ => false,
    };
    if failed {
        *s.failures_by_kind.entry(format!("{kind}/{}", journal::outcome_name(outcome))).or_default() += 1;
    }
}

/// Every table the engine and the host keep between steps, by name (`Status::bookkeeping`).
fn bookkeeping(engine: &Engine, host: &impl Restore) -> std::collections::BTreeMap<String, u64> {
    let mut out = engine.bookkeeping();
    host.bookkeeping(&mut out);
    out.into_iter().map(|(k, v)| (k.to_string(), v as u64)).collect()
}

fn fill_model(model: &Model, engine: &Engine, s: &mut Status) {
    let t = &engine.totals;
    s.steps = t.steps;
    s.actions = t.actions;
    s.pages_moved = t.pages_moved;
    s.pages_failed = t.pages_failed;
    s.vanished = t.vanished;
    s.refused = t.refused;
    s.moves_started = t.moves_started;
    s.processes = model.procs.len();
    s.threads = model.tasks.len();
    s.groups = model.groups.groups.len();
    s.local_access = local_access(model);
    // Online but in no node's list: reserved (`Topology::reserve`), or for a moment a CPU just
    // coming online.
    s.reserved_cpus = model.topo.online_cpus().difference(&model.topo.usable_cpus()).to_list();
    s.nodes = model
        .nodes
        .iter()
        .map(|n| NodeStatus {
            node: n.node,
            resources: [
                (Resource::Cpu, "cpu"),
                (Resource::MemBandwidth, "mem-bandwidth"),
                (Resource::MemCapacity, "mem-capacity"),
                (Resource::Io, "io"),
            ]
            .into_iter()
            .map(|(r, name)| {
                let st = n.resource(r);
                ResourceStatus {
                    resource: name.into(),
                    known: st.known,
                    load: st.load,
                    interference: st.interference,
                    bottleneck: st.bottleneck,
                }
            })
            .collect(),
            mem_free_bytes: n.mem_free_bytes,
            mem_total_bytes: n.mem_total_bytes,
            cpu_demand: n.cpu_demand,
        })
        .collect();
}

/// CPU-weighted share of accesses that go to the node a thread runs on: for each thread with an
/// access estimate (samples, NUMA faults, or its process's residency), `access[node it ran on]`,
/// weighted by the CPU it used. `None` when no thread used CPU with an estimate (first sample).
pub fn local_access(model: &Model) -> Option<f64> {
    let (mut num, mut den) = (0.0, 0.0);
    for t in model.tasks.values() {
        let Some(node) = t.node else { continue };
        let Some(idx) = model.node_idx(node) else { continue };
        if t.cpu_rate <= 0.0 || t.access.iter().sum::<f64>() <= 0.0 {
            continue;
        }
        num += t.cpu_rate * t.access.get(idx).copied().unwrap_or(0.0);
        den += t.cpu_rate;
    }
    (den > 0.0).then(|| num / den)
}

/// The wait between two steps: everything the loop answers or wakes for, until `deadline_ns`.
#[allow(clippy::too_many_arguments)]
fn wait(
    signals: &Signals,
    side: &mut LoopSide,
    commands: Option<&UnixStream>,
    deadline_ns: u64,
    (engine, adoptions): (&mut Engine, &mut Vec<(u32, numapilot_topology::NodeSet)>),
    (status, shared): (&mut Status, &Shared),
    mut watch: Option<&mut ThreadWatch>,
    moved: Option<&UnixStream>,
    (unseen, launch_refusal): (PidWhy<'_>, PidWhy<'_>),
    since: &dyn Fn(u32, u64) -> Option<String>,
) -> Wake {
    loop {
        // Always poll, even when the step overran the interval (timeout 0): signals and explain
        // requests must be served by a loop that is permanently behind, too.
        let now = numapilot_observe::reader::monotonic_ns();
        let mut timeout_ms = (deadline_ns.saturating_sub(now).div_ceil(1_000_000)).min(i32::MAX as u64) as i32;
        // New processes pending: look at their growth every NEW_PROCESS_CHECK_MS meanwhile.
        let checking = watch.as_deref().is_some_and(|w| !w.pending.is_empty());
        if checking {
            timeout_ms = timeout_ms.min(NEW_PROCESS_CHECK_MS as i32);
        }
        let mut fds = vec![
            libc::pollfd { fd: signals.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: side.wake.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        ];
        if let Some(c) = commands {
            fds.push(libc::pollfd { fd: c.as_raw_fd(), events: libc::POLLIN, revents: 0 });
        }
        let watch_at = fds.len();
        if let Some(w) = watch.as_deref() {
            fds.push(libc::pollfd { fd: w.events.fd(), events: libc::POLLIN, revents: 0 });
        }
        let moved_at = fds.len();
        if let Some(m) = moved {
            fds.push(libc::pollfd { fd: m.as_raw_fd(), events: libc::POLLIN, revents: 0 });
        }
        // SAFETY: fds is a valid array of fds.len() pollfd structures.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                // Cannot happen with valid fds; never spin: wait out the interval instead.
                tracing::error!("poll: {e}");
                std::thread::sleep(std::time::Duration::from_nanos(deadline_ns.saturating_sub(now)));
            }
            continue; // EINTR (a signal not in our set, e.g. SIGCHLD): poll again
        }
        // A timeout before the deadline (the growth check's cadence) falls through: no fd is
        // ready, so only the growth check below acts.
        if rc == 0 && numapilot_observe::reader::monotonic_ns() >= deadline_ns {
            return Wake::Timeout;
        }
        if fds[0].revents != 0 {
            let mut reload = false;
            for sig in signals.read() {
                match sig {
                    libc::SIGTERM => return Wake::Stop("SIGTERM".into()),
                    libc::SIGINT => return Wake::Stop("SIGINT".into()),
                    libc::SIGQUIT => return Wake::Stop("SIGQUIT".into()),
                    libc::SIGHUP => reload = true,
                    other => tracing::info!(
                        "signal {other} ({}) ignored (numapilot acts on TERM, INT, QUIT and HUP)",
                        match other {
                            libc::SIGUSR1 => "SIGUSR1",
                            libc::SIGUSR2 => "SIGUSR2",
                            libc::SIGALRM => "SIGALRM",
                            _ => "another",
                        }
                    ),
                }
            }
            if reload {
                return Wake::Reload;
            }
        }
        if fds[1].revents != 0 {
            side.drain_wake();
            while let Ok(req) = side.requests.try_recv() {
                match req {
                    control::LoopRequest::Explain { pid, reply } => {
                        let _ = reply.send(explain(engine, status, pid, unseen, since));
                    }
                    control::LoopRequest::Advise { request, reply } => {
                        // A pid the daemon would never manage gets no promise (init, a kernel
                        // thread, a thread id, a zombie, itself, none: each was promised room it
                        // held for 5 s; review helper-55).
                        let refused =
                            request.pid.and_then(|p| launch_refusal(p).map(|why| format!("--pid {p}: {why}")));
                        let answer = match refused {
                            Some(why) => Err(why.into()),
                            None => advise(engine, status, &request),
                        };
                        // A job its launcher named is the advice's: the host's checks before an
                        // action do not take its narrowing for its own (LiveHost::adopt).
                        if let (Ok(a), Some(pid)) = (&answer, request.pid) {
                            adoptions.push((pid, a.nodes.clone()));
                        }
                        let _ = reply.send(answer);
                        // Status shows the promise at once, not from the next step, which a
                        // backed-off loop may not take before the promise ends.
                        status.launch_promises = engine.launch_promises(numapilot_observe::reader::monotonic_ns());
                        publish(shared, status);
                    }
                }
            }
        }
        if moved.is_some() && fds[moved_at].revents != 0 {
            return Wake::MoveDone;
        }
        if let Some(w) = watch.as_deref_mut() {
            if fds[watch_at].revents != 0 {
                let young = w.young_threads(&engine.model);
                if !young.is_empty() {
                    return Wake::NewThreads(young);
                }
            }
            if w.grown(&engine.model) {
                return Wake::Grown;
            }
        }
        if let Some(c) = commands {
            if fds.get(2).is_some_and(|f| f.revents != 0) {
                use std::io::Read;
                let mut buf = [0u8; 16];
                let mut r = c;
                match r.read(&mut buf) {
                    Ok(0) => return Wake::Stop("command pipe closed".into()),
                    Ok(n) => {
                        if buf[..n].contains(&b's') {
                            return Wake::Stop("command".into());
                        }
                        if buf[..n].contains(&b'r') {
                            return Wake::Reload;
                        }
                    }
                    Err(_) => {}
                }
            }
        }
    }
}

fn explain(
    engine: &Engine,
    status: &Status,
    pid: u32,
    why_unseen: impl FnOnce(u32) -> Option<String>,
    since: impl FnOnce(u32, u64) -> Option<String>,
) -> Result<numapilot_policy::adaptive::Explanation, String> {
    if let Some(mut e) = engine.explain(pid) {
        // The view is the last step's: a process that exited since (or whose pid another took)
        // was explained as if it ran on (review helper-55).
        e.since_last_step = engine.model.procs.get(&pid).and_then(|p| since(pid, p.starttime));
        e.nothing_to_place = status.nothing_to_place.clone();
        return Ok(e);
    }
    if status.steps == 0 {
        return Err(match &status.last_error {
            Some(err) => format!(
                "the daemon has not observed the machine yet ({} failed, last: {err})",
                numapilot_topology::plural(status.step_errors, "step")
            ),
            None => "the daemon has not observed the machine yet".into(),
        });
    }
    Err(match why_unseen(pid) {
        Some(why) => format!("process {pid} is not in the daemon's view: {why}"),
        None => format!(
            "process {pid} is not in the daemon's view (new since the last step, or left by the model: nothing of it \
             to explain yet)"
        ),
    })
}

/// The answer to an `advise` request on the control socket: the policy's launch stage on the
/// model of the last step (its promise kept until the process shows), or why there is none, with
/// the figures it went by when the policy says them (the client prints those, as it prints an
/// answer's).
fn advise(
    engine: &mut Engine,
    status: &Status,
    request: &numapilot_policy::LaunchRequest,
) -> Result<numapilot_policy::LaunchAdvice, control::AdviseRefusal> {
    if status.steps == 0 {
        return Err(String::from("the daemon has not observed the machine yet; ask again after its first step").into());
    }
    let now = numapilot_observe::reader::monotonic_ns();
    match engine.advise_launch(now, request) {
        Ok(a) => {
            tracing::info!("advise: {} -> nodes {} [{}] {}", request.name, a.nodes, a.reason.rule, a.reason.detail);
            Ok(a)
        }
        Err(no) => {
            // The policy's figures when it says them: the measurement within the daemon's usable
            // CPUs and the job's reach (or the model's), less its promises. Otherwise what it
            // started from, before them.
            let (free, whose) = match (no.free.is_empty(), request.nodes_now.is_empty()) {
                (false, false) => (
                    no.free.clone(),
                    "as the daemon counts it (the client's measurement within its usable CPUs), less its promises",
                ),
                (false, true) => (no.free.clone(), "in the daemon's view (last step), less its promises"),
                (true, true) => (
                    numapilot_policy::free_from_model(&engine.model),
                    "in the daemon's view (last step), before its promises",
                ),
                (true, false) => (request.nodes_now.clone(), "as measured by the client, before the daemon's promises"),
            };
            let promises = engine.launch_promises(now);
            let why = format!(
                "nothing fits: need {} and {} MiB; free {whose}: {}{}",
                numapilot_topology::plural(numapilot_policy::advise::shown(&request.cpus), "CPU"),
                request.mem_bytes >> 20,
                free.iter()
                    .map(|f| format!("node {}: {:.1} CPUs, {} MiB", f.node, f.free_cpus, f.mem_free_bytes >> 20))
                    .collect::<Vec<_>>()
                    .join("; "),
                if promises.is_empty() {
                    String::new()
                } else {
                    format!("; promised to earlier launches: {}", promises.join("; "))
                }
            );
            Err(control::AdviseRefusal { why, free: no.free })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numapilot_model::{ProcView, ProcessClass, Tunables};

    /// Moves of two processes that stopped half-way on the same refusal count under one cause in
    /// the status (and so one metric series), whatever pids their messages name.
    #[test]
    fn stopped_moves_of_many_processes_are_one_status_cause() {
        let mut s = Status::default();
        for pid in [101, 202, 303] {
            let why = format!("stopped: migrate_pages(pid={pid}, from=0, to=1) failed: EPERM: Operation not permitted");
            let o = Outcome::Partial { pages_moved: 5, failed: vec![(why, 7), ("EBUSY".into(), 1)] };
            count_outcome("migrate-pages", Some(&o), &mut s);
        }
        let want: std::collections::BTreeMap<String, u64> =
            [("EBUSY".to_string(), 3), ("stopped: migrate_pages EPERM".to_string(), 21)].into_iter().collect();
        assert_eq!(s.pages_failed_by_cause, want);
        assert_eq!(s.failures_by_kind.get("migrate-pages/partial"), Some(&3));
    }

    fn proc_view(pid: u32, first_seen_ns: u64, age_at_first_seen_ns: u64) -> ProcView {
        ProcView {
            pid,
            starttime: 1,
            ppid: 1,
            comm: "w".into(),
            tids: vec![pid],
            kernel_owned: 0,
            rss_bytes: 0,
            mem_by_node: vec![],
            shared_by_node: vec![],
            shared_objects: vec![],
            growth_bytes_per_s: 0.0,
            cpu_rate: 0.0,
            pinned: false,
            confined: None,
            mem_policy_pinned: false,
            class: ProcessClass::Unclassified,
            hot: vec![],
            first_seen_ns,
            age_at_first_seen_ns,
            history_ns: 0,
            traffic_bytes_per_s_per_thread: 0.0,
        }
    }

    /// Young by the policy's age (new_process_age_ms, 2 s): in the model, age at first sight plus
    /// the time since; not in the model, the age the lookup gives; gone (no age) is not young.
    #[test]
    fn which_new_threads_wake_the_loop() {
        let topo = Topology::from_sysfs(std::path::Path::new("/")).unwrap();
        let mut m = Model::new(topo, Tunables::default());
        m.now_ns = 10_000_000_000;
        // 10: first seen 1 s ago at 0.5 s old -> 1.5 s: young. 11: first seen 3 s ago -> old.
        m.procs.insert(10, proc_view(10, 9_000_000_000, 500_000_000));
        m.procs.insert(11, proc_view(11, 7_000_000_000, 100_000_000));
        let age = |tgid: u32| match tgid {
            20 => Some(300_000_000),
            21 => Some(60_000_000_000),
            _ => None,
        };
        assert_eq!(young_thread_starts(&[10], &m, age), vec![10]);
        assert!(young_thread_starts(&[11], &m, age).is_empty());
        // The model's view wins over the lookup for a known process.
        assert!(young_thread_starts(&[11], &m, |_| Some(0)).is_empty());
        assert_eq!(young_thread_starts(&[20], &m, age), vec![20]);
        assert!(young_thread_starts(&[21], &m, age).is_empty());
        assert!(young_thread_starts(&[22], &m, age).is_empty());
        assert_eq!(young_thread_starts(&[11, 21, 20], &m, age), vec![20]);
        assert!(young_thread_starts(&[], &m, age).is_empty());
    }

    /// new-process-grows: which pending new processes end the wait (resident past
    /// new_process_min_rss_mib = 16 MiB while younger than new_process_age_ms = 2 s), which stay
    /// pending and which are dropped.
    #[test]
    fn which_new_processes_wake_the_loop_when_they_grow() {
        let topo = Topology::from_sysfs(std::path::Path::new("/")).unwrap();
        let mut m = Model::new(topo, Tunables::default());
        m.now_ns = 10_000_000_000;
        const MIB: u64 = 1 << 20;
        // Start time 1; the model saw 10 at 64 MiB, 11 and 12 at 4 MiB.
        for (pid, seen) in [(10, 64 * MIB), (11, 4 * MIB), (12, 4 * MIB)] {
            let mut p = proc_view(pid, 9_000_000_000, 500_000_000);
            p.rss_bytes = seen;
            m.procs.insert(pid, p);
        }
        // (start time, age ns, resident bytes)
        let stat = |pid: u32| match pid {
            10 => Some((1, 100_000_000, 64 * MIB)),   // in the model at 64 MiB: dropped
            11 => Some((1, 100_000_000, 32 * MIB)),   // in the model small, grown since: wake
            12 => Some((1, 100_000_000, 6 * MIB)),    // in the model small, still small: kept
            20 => Some((7, 300_000_000, 4 * MIB)),    // young, small: kept
            21 => Some((7, 300_000_000, 32 * MIB)),   // young, grown: wake
            22 => Some((7, 3_000_000_000, 32 * MIB)), // old: dropped
            23 => Some((8, 300_000_000, 32 * MIB)),   // pid reused (start time 8, not 7): dropped
            _ => None,                                // gone: dropped
        };
        let all = [(10, 1), (12, 1), (20, 7), (21, 7), (22, 7), (23, 7), (24, 7)];
        let g = grown_processes(&all, &m, stat);
        assert_eq!(g, Growth { grown: true, pending: vec![(12, 1), (20, 7)] });
        let g = grown_processes(&[(10, 1), (11, 1), (12, 1)], &m, stat);
        assert_eq!(g, Growth { grown: true, pending: vec![(12, 1)] });
        let g = grown_processes(&[(20, 7), (22, 7)], &m, stat);
        assert_eq!(g, Growth { grown: false, pending: vec![(20, 7)] });
        assert_eq!(grown_processes(&[], &m, stat), Growth { grown: false, pending: vec![] });
    }
}
