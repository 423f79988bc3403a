//! The daemon's configuration file: read, checked completely, then turned into options.
//!
//! Problem: a daemon that runs as root and moves other people's processes must never start on a
//! half-understood configuration. A misspelt key silently ignored (`exlude = [...]`) would touch
//! processes the administrator meant to protect.
//!
//! Approach: the file is TOML, deserialised with `deny_unknown_fields` everywhere, then every value
//! is checked (ours here, the engine's with [`Tunables::validate`]). Every error carries the file and
//! the line: serde errors carry a byte span, mapped to the dotted key whose span holds it (a wrong
//! type or an unknown key is said as `daemon.nice = "high": expected an integer`), and for a value
//! rejected after parsing the key is looked up again in a span-keeping parse ([`toml::de::DeTable`]). Command-line flags are applied on top of
//! the file *before* the checks, so a bad flag is rejected the same way (naming the flag).
//!
//! ```text
//!   /etc/numapilot.toml ──parse (spans)──> Config ──flags──> Config' ──validate──> LiveOptions,
//!        │ unknown key / bad type: FILE:LINE: reason            │ bad value: FILE:LINE: reason
//!        └ missing: defaults (only for the default path)        └ --flag: reason
//! ```
//!
//! Units are in the key names (`_ms`, `_mb_per_s`, `_bytes`, `_mib`). Limits: TOML only; a key given
//! twice is a TOML error; environment variables are not read.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use numapilot_model::Tunables;
use numapilot_topology::CpuSet;
use serde::{Deserialize, Serialize};

use crate::live::{CpusetMode, LiveOptions};
use crate::signals::{SignalOptions, SignalTuning};

/// Where the daemon looks for its configuration when `--config` is not given.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/numapilot.toml";
/// Default control socket. `/run` is a tmpfs cleared at boot; the directory is created 0700.
pub const DEFAULT_SOCKET_PATH: &str = "/run/numapilot/numapilot.sock";
/// Default state file (the originals of every touched process, for restore after a crash).
pub const DEFAULT_STATE_PATH: &str = "/run/numapilot/state.json";
/// Default journal (JSON lines, one per action).
pub const DEFAULT_JOURNAL_PATH: &str = "/var/log/numapilot/journal.jsonl";
/// Default metrics address: loopback only, so nothing about the machine's processes leaves the host
/// unless the administrator asks. Port 9469: unassigned in the Prometheus default-port allocation
/// list's range of exporters at the time of writing (9100-9999 is the exporters' range).
pub const DEFAULT_METRICS_ADDR: &str = "127.0.0.1:9469";
/// Default journal size bound, bytes: 64 MiB, then the file is rotated to `.1` (one old file kept).
/// At ~300 bytes per action that is ~200k actions, weeks of a busy machine; prevents the journal
/// filling /var/log.
pub const DEFAULT_JOURNAL_MAX_BYTES: u64 = 64 << 20;

/// A configuration error: the file (or flag), the line when known, and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The file, or `command line` for a flag.
    pub file: String,
    /// 1-based line, when the error is tied to one.
    pub line: Option<usize>,
    /// What is wrong, naming the key.
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{}: {}", self.file, l, self.reason),
            None => write!(f, "{}: {}", self.file, self.reason),
        }
    }
}

/// `[daemon]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DaemonSection {
    /// Period between two engine steps, ms. When set, it replaces `tunables.interval_ms` (the same
    /// number; this is its operator-facing name). Default: `tunables.interval_ms` (1000).
    pub interval_ms: Option<u64>,
    /// Plan and journal every action but never apply one. Default false; `--dry-run` sets it, and a
    /// daemon not running as root always runs so. A dry run claims no state file, restores no
    /// earlier run's records (they wait for a start that acts) and starts no page mover, so a
    /// reload that turns it off takes effect at the next start only. Source: a choice: the journal
    /// and `explain` show what numapilot would do before it does anything. Prevents: a first start
    /// on a host changing processes before anyone has read what it would change.
    pub dry_run: bool,
    /// Journal path (JSON lines, one per action with its rule, detail and outcome; see
    /// `journal.rs`). Default [`DEFAULT_JOURNAL_PATH`]; `""` disables it. An absolute path; its
    /// directory is made 0700 when missing and must be one a root daemon may trust (`paths.rs`).
    /// Source: /var/log, where numad keeps its log too (numad(8): `/var/log/numad.log`). Prevents:
    /// a move nobody can account for afterwards ("why did numapilot move my database at 03:12?").
    pub journal: PathBuf,
    /// Journal size bound before rotation to `.1`, bytes. Default [`DEFAULT_JOURNAL_MAX_BYTES`].
    pub journal_max_bytes: u64,
    /// State file: the original affinity (and cpuset) of every process the daemon touched, written
    /// before each change. Default [`DEFAULT_STATE_PATH`]. An absolute path in a directory a root
    /// daemon may trust (`paths.rs`); one acting daemon per file (an flock on `.NAME.lock` beside
    /// it). Source: /run, a tmpfs cleared at boot (records of another boot would name other
    /// processes' pids, and are not restored). Prevents: a crash leaving processes where numapilot
    /// put them: the next start restores them from this file.
    pub state: PathBuf,
    /// Control socket for `status`, `explain` and `advise`. Default [`DEFAULT_SOCKET_PATH`]. An
    /// absolute path of at most 107 bytes (unix(7) `sun_path`), in a directory a root daemon may
    /// trust (`paths.rs`); made mode 0600, and only root (SO_PEERCRED) is answered. Source: /run,
    /// the place of run-time sockets, a tmpfs cleared at boot. Prevents: another user talking to
    /// the daemon, or putting a socket of their own where root's `numapilot status` looks.
    pub socket: PathBuf,
    /// Prometheus metrics address (`IP:PORT`) or `off`. Default [`DEFAULT_METRICS_ADDR`].
    pub metrics: String,
    /// Longest wait between two steps when nothing changes, ms: after a step that planned nothing,
    /// saw no new process and no CPU-load change, the next wait doubles (from the policy's
    /// interval) up to this, and snaps back to the policy's interval at the first change (see
    /// [`crate::run::Backoff`]). While backed off, a new pid (`/proc/loadavg`, read once per
    /// interval) ends the wait at once, so a new process is still seen within an interval.
    /// Default [`DEFAULT_IDLE_MAX_INTERVAL_MS`] (15,000 ms); 0, or the interval itself, turns the
    /// back-off off; a value between them does too, and is warned about (an interval set above
    /// the cap, [`merged_warnings`]). Source: numad's own maximum interval, 15 s (numad(8), `-i`:
    /// default min_interval 5 s, max 15 s); at 5 s the daemon loop measured 1.58 % of a core on
    /// the 1,000-process load (cycle_cost --daemon-seconds 60, 79 ms per step). What it prevents:
    /// a daemon observing an idle machine every second for nothing (the cost target: under 1 % of
    /// a core). At most one day. The access sampler's period stretches with the wait (see
    /// `numapilot_policy::cadence`), so a backed-off daemon also samples less.
    pub idle_max_interval_ms: u64,
    /// A new thread in a young process ends the wait between steps, ms after it appeared (the
    /// proc connector announces every thread as it is created; `0` turns this off). The step then
    /// comes at this delay, but never sooner than `tunables.settle_interval_ms` after the previous
    /// step started (at most one early step per settle interval, whatever the fork rate). A process
    /// is young while it is younger than `tunables.new_process_age_ms`; the daemon's own threads
    /// and older processes' thread pools wake nothing. Default [`DEFAULT_NEW_THREAD_WAKE_MS`]
    /// (20 ms). The same wake, and the same 0 = off, serves a new process that grows past
    /// `tunables.new_process_min_rss_mib` while young (rule "new-process-grows" in run.rs), and
    /// the same events carry out standing orders at once (rule "new-threads-follow-memory"; off
    /// with them at 0).
    /// Source: a burst of thread creations (numa02's workers, a thread pool) takes well
    /// under 20 ms; waiting that long lets one step see the whole burst. Prevents: a workload that
    /// first-touches its memory and then starts its threads running them where the scheduler put
    /// them for up to a whole interval before the daemon's first look (the rig's 4-node numa02 at a
    /// 500 ms interval: its first look came 0.05-0.6 s after the workers started).
    pub new_thread_wake_ms: u64,
    /// Scheduling priority of the daemon's threads (the loop, the page mover, the readers), as
    /// nice(1): -20 (most favoured) to 19. Set at start, before any thread exists, as root only
    /// (a non-root daemon observes only and keeps its priority); a reload that changes it says it
    /// takes effect at restart. Default [`DEFAULT_NICE`] (-10). Source: the rig's numa01 race
    /// (`scripts/race.sh --reps 2 --tests numa01 --balancers numapilot --no-readme`, 2026-11-27):
    /// with every guest CPU busy with the workload's threads, a step at nice 0 took 140-180 ms on
    /// average (observe 116-150 ms, mostly waiting for a CPU), at -10 60-93 ms (observe 48-77 ms),
    /// and a page move started 0.21-0.32 s after "go" instead of 0.43-0.70 s. The daemon's own
    /// CPU stays what it is (its cost target: under 1% of a core), so the workload loses nothing
    /// it would otherwise use. Prevents: the placer's observations and decisions queueing behind
    /// the very load it is placing, so that a saturated machine is the one it reacts to slowest.
    pub nice: i32,
}

/// Default of `[daemon] nice` (see [`DaemonSection::nice`]).
pub const DEFAULT_NICE: i32 = -10;

/// Default of `[daemon] new_thread_wake_ms`, ms (see [`DaemonSection::new_thread_wake_ms`]).
pub const DEFAULT_NEW_THREAD_WAKE_MS: u64 = 20;

/// Default of `[daemon] idle_max_interval_ms`, ms (see [`DaemonSection::idle_max_interval_ms`]).
pub const DEFAULT_IDLE_MAX_INTERVAL_MS: u64 = numapilot_policy::cadence::IDLE_MAX_INTERVAL_MS;

impl Default for DaemonSection {
    fn default() -> Self {
        Self {
            interval_ms: None,
            dry_run: false,
            journal: PathBuf::from(DEFAULT_JOURNAL_PATH),
            journal_max_bytes: DEFAULT_JOURNAL_MAX_BYTES,
            state: PathBuf::from(DEFAULT_STATE_PATH),
            socket: PathBuf::from(DEFAULT_SOCKET_PATH),
            metrics: DEFAULT_METRICS_ADDR.to_string(),
            idle_max_interval_ms: DEFAULT_IDLE_MAX_INTERVAL_MS,
            new_thread_wake_ms: DEFAULT_NEW_THREAD_WAKE_MS,
            nice: DEFAULT_NICE,
        }
    }
}

/// `[exclude]`: processes never touched.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExcludeSection {
    /// Process names (`comm`, as in /proc/PID/comm, at most 15 bytes), matched whole. Default
    /// empty. `--exclude COMM` adds to it. An excluded process is never planned for or touched, and
    /// its CPU counts in the load of the node it runs on, so placement leaves room for it; one
    /// placed before a reload excludes it is put back. Source: numad's `-x PID`, here by name too.
    /// Prevents: numapilot moving a process the operator keeps for themselves (a latency-critical
    /// service placed by hand, a monitoring agent).
    pub comm: Vec<String>,
    /// Pids, as [`ExcludeSection::comm`]. Default empty. `--exclude-pid PID` adds to it. Source:
    /// numad's `-x PID`. Prevents: as [`ExcludeSection::comm`], for one process.
    pub pids: Vec<u32>,
    /// Cgroup path prefixes as in /proc/PID/cgroup (e.g. `/system.slice/sshd.service`), matched
    /// on whole path components, on every hierarchy line (v1 and v2), as [`ExcludeSection::comm`].
    /// Default empty. Source: a choice: a systemd unit or a container is a cgroup, and numad's
    /// pids do not name a service's future processes. Prevents: as [`ExcludeSection::comm`], for
    /// every process of a service or container, present and future.
    pub cgroups: Vec<String>,
    /// Also manage processes that placed themselves (affinity narrower than their cpuset, an
    /// explicit memory policy in numa_maps). Default false; `--include-pinned` sets it. A mask
    /// numapilot set (or that a child inherited from a parent it placed) is no such placement.
    /// Source: a choice, the adaptive policy's own rule; numad considers such processes (numad.c
    /// dates the bind of a process found bound 30 minutes back). Prevents: undoing a placement
    /// someone made on purpose (taskset, numactl --membind, a program's own binding).
    pub include_pinned: bool,
    /// Also manage kernel threads. Default false (the kernel places its own threads); `true` is
    /// rejected: the live host never touches kernel threads.
    pub include_kernel: bool,
    /// Only manage processes with at least this resident memory, MiB. Default 0 (every process).
    /// A smaller process is ignored as kernel threads are: never read in detail, planned for or
    /// touched, and its CPU counts in no node's CPU demand; one placed before a reload raises it
    /// is put back. Source: numad's 300 MB (its `MEMORY_THRESHOLD`, the baseline's
    /// `numad_min_rss_mib`); the default is 0 because the adaptive policy places small processes
    /// too, in the affinity groups of those they talk to or share memory with. Prevents: small
    /// processes taking part in placement where they should not (the rig's race sets 16 to keep
    /// its own samplers, ~0.5 CPU under TCG, out of the guest's placement).
    pub min_rss_mib: u64,
}

/// `[include]`: when any list is set, the only processes managed (numad's `-S 0 -p PID`).
///
/// Every list defaults to empty: with all three empty, every process is managed. A process no set
/// list names is never read in detail, planned for or touched; its CPU counts in the load of the
/// node it runs on (as an excluded process's does), so placement leaves room for it. Exclusions
/// win. Source: numad's `-S 0` (scan only the explicit inclusion list) with `-p PID`, here by name
/// and cgroup too. Prevents: numapilot acting on a host where only some services are its to place
/// (the others placed by hand, or by another tool).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IncludeSection {
    /// Process names (`comm`, at most 15 bytes), matched whole. Default empty. `--include COMM`
    /// adds to it.
    pub comm: Vec<String>,
    /// Pids. Default empty. `--include-pid PID` adds to it (numad's `-p PID`).
    pub pids: Vec<u32>,
    /// Cgroup path prefixes as in /proc/PID/cgroup (e.g. `/system.slice/postgresql.service`: a
    /// service and all its workers), matched on whole path components. Default empty. A process
    /// moved into or out of a listed cgroup is classified again (every 10 s while a cgroup list is
    /// set).
    pub cgroups: Vec<String>,
}

/// `[actuation]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ActuationSection {
    /// Page-migration budget, MiB/s (the key says MB for brevity; the budget counts 2^20 bytes).
    /// Default: `tunables.migrate_budget_mib_per_s` (4096). What it prevents: page copies taking a
    /// node's memory bandwidth from the workload they are for.
    pub migrate_mb_per_s: Option<u64>,
    /// `off` (thread affinity only, default), `auto` (the mounted hierarchy: v2 with the cpuset
    /// controller first, else v1; affinity only, with a note, when neither is), `v1`, `v2` (the
    /// start fails when that hierarchy is not mounted). A cpuset is enforced by the kernel on
    /// every thread, present and future, which the process's own `sched_setaffinity` cannot widen.
    /// Under v2 a process whose cgroup (or an ancestor) sets a memory, pids, CPU or IO limit keeps
    /// its cgroup and gets affinity only, and a process confined to a narrower cpuset keeps it.
    /// Source: numad 20150602 binds by thread affinity alone (its 2012 version used a cpuset
    /// cgroup). Prevents (the default): moving processes out of their own cgroups, which changes
    /// a systemd unit's accounting until they are moved back.
    pub cpuset: CpusetName,
    /// Most threads one page move's copy is split over, 1 to [`MAX_MOVER_THREADS`] (rule
    /// split-copy, `live/mover.rs`). Default [`crate::live::DEFAULT_MOVER_THREADS`] (4); 1 keeps
    /// every move on one thread.
    pub mover_threads: Option<u64>,
    /// CPUs no process is ever placed on, a CPU list (`"0,6-7"`), as numad's `-R`: housekeeping
    /// CPUs, those of a real-time or DPDK task. Default empty. They leave the nodes' CPU lists the
    /// policy sees (`Topology::reserve`): no mask numapilot writes names them, their load is not
    /// a node's, and a process whose mask is every CPU but these did not pin itself.
    pub reserved_cpus: String,
    /// Also reserve the CPUs the host keeps for work placed on purpose: those the kernel isolated
    /// at boot (`isolcpus=`, `/sys/devices/system/cpu/isolated`) and those init (pid 1) may not
    /// run on (systemd's `CPUAffinity=`, every service's default; tuned's cpu-partitioning profile
    /// sets it and `nohz_full=` without `isolcpus=`; `nohz_full=` alone reserves nothing, as HPC
    /// hosts run unpinned work there). Default true. Source: the kernel's and tuned's
    /// partitioning. Prevents: on such a host every process runs on the other CPUs by default, so
    /// a node-wide mask numapilot wrote would put threads on a kept CPU, where the kernel never
    /// balances them away, beside the task it was kept for; and every
    /// process's default mask read as a pin of its own, so nothing was managed.
    pub reserve_isolated: bool,
}

impl Default for ActuationSection {
    fn default() -> Self {
        ActuationSection {
            migrate_mb_per_s: None,
            cpuset: CpusetName::default(),
            mover_threads: None,
            reserved_cpus: String::new(),
            reserve_isolated: true,
        }
    }
}

/// Largest `[actuation] mover_threads`: 256 threads. Source: a bound of ours, the widest node of the
/// machines we model (`machines/epyc-2s256c.toml`: 256 CPUs a node); the mover never uses more
/// threads than the CPUs it runs on. Prevents: a typo asking for millions of threads.
pub const MAX_MOVER_THREADS: u64 = 256;

/// The cpuset mode as written in the file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CpusetName {
    /// Thread affinity only.
    #[default]
    Off,
    /// Detect the hierarchy.
    Auto,
    /// cgroup v1.
    V1,
    /// cgroup v2.
    V2,
}

impl From<CpusetName> for CpusetMode {
    fn from(c: CpusetName) -> Self {
        match c {
            CpusetName::Off => CpusetMode::Off,
            CpusetName::Auto => CpusetMode::Auto,
            CpusetName::V1 => CpusetMode::V1,
            CpusetName::V2 => CpusetMode::V2,
        }
    }
}

/// `[signals]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SignalsSection {
    /// Socket peers (loopback TCP, unix sockets) as communication pairs. Default true. The
    /// connected ends come from the kernel's sock_diag tables every cycle, their holders from the
    /// processes' fd links (`sockets_every`); a missing source leaves one note. Source: NUMA-ICON's
    /// communication signal (`numapilot_model::affinity`: a connected pair counts at
    /// `comm_socket_strength`). Prevents: a client and the server it talks to over a local socket
    /// placed on different nodes when nothing else relates them (no shared mapping, no sampled
    /// co-access).
    pub sockets: bool,
    /// Memory shared between processes (the same file, SysV segment or memfd mapped by several), read
    /// from /proc/PID/maps. Default true ([`SignalTuning::shared`] documents source and what it
    /// prevents).
    pub shared: bool,
    /// Precise memory-access sampling with perf_event_open where the PMU has it (Intel PEBS load
    /// latency, AMD IBS op, ARM SPE). Default true; no PMU (most VMs)
    /// leaves one note and the other signals carry on. Source: NUMA-ICON's "record the threads that
    /// recently touched the same page" (`numapilot_observe::pmu`). Prevents: placing by residency
    /// alone (numa_maps says where pages are, not which thread uses them): without samples the
    /// access shares fall back to the kernel's NUMA-fault statistics or residency, co-access to the
    /// kernel's NUMA groups, and a process whose threads run on different nodes has its memory
    /// interleaved over them instead of split by the ranges each thread uses.
    pub perf: bool,
    /// Re-read each scanned process's /proc/PID/maps (shared memory between processes) once per
    /// this many cycles, the reads spread over them. Default 10, unit cycles, >= 1
    /// ([`SignalTuning::maps_every`] documents source and what it prevents).
    pub maps_every: u32,
    /// Re-read each scanned process's fd links (who holds which socket) once per this many cycles,
    /// the reads spread over them; the socket pairs are read every cycle. Default 5, unit cycles, >= 1
    /// ([`SignalTuning::sockets_every`]).
    pub sockets_every: u32,
    /// Without a PMU, sample page faults instead (faults, not accesses). Default false
    /// ([`SignalTuning::page_faults`] documents source and what it prevents).
    pub page_faults: bool,
    /// Count waker -> wakee pairs with the eBPF tracer (a build without the `ebpf` feature says so
    /// once). Default true ([`SignalTuning::wakeups`] documents source and what it prevents).
    pub wakeups: bool,
}

impl Default for SignalsSection {
    fn default() -> Self {
        let t = SignalTuning::default();
        Self {
            sockets: true,
            shared: t.shared,
            perf: true,
            maps_every: t.maps_every,
            sockets_every: t.sockets_every,
            page_faults: t.page_faults,
            wakeups: t.wakeups,
        }
    }
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `[daemon]`.
    pub daemon: DaemonSection,
    /// `[exclude]`.
    pub exclude: ExcludeSection,
    /// `[include]`.
    pub include: IncludeSection,
    /// `[actuation]`.
    pub actuation: ActuationSection,
    /// `[signals]`.
    pub signals: SignalsSection,
    /// `[tunables]`: the engine's [`Tunables`].
    pub tunables: Tunables,
}

/// Command-line flags that override the file. `None`/empty: keep the file's value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// `--dry-run`.
    pub dry_run: bool,
    /// `--interval-ms`.
    pub interval_ms: Option<u64>,
    /// `--journal`.
    pub journal: Option<PathBuf>,
    /// `--state`.
    pub state: Option<PathBuf>,
    /// `--socket`.
    pub socket: Option<PathBuf>,
    /// `--metrics ADDR|off`.
    pub metrics: Option<String>,
    /// `--exclude COMM` (added to the file's list).
    pub exclude_comm: Vec<String>,
    /// `--exclude-pid PID` (added).
    pub exclude_pids: Vec<u32>,
    /// `--include-pinned`.
    pub include_pinned: bool,
    /// `--include COMM` (added to `[include] comm`).
    pub include_comm: Vec<String>,
    /// `--include-pid PID` (added to `[include] pids`).
    pub include_pids: Vec<u32>,
}

/// The flag that overrides configuration key `key` (dotted), if any.
fn flag_of(key: &str) -> Option<&'static str> {
    Some(match key {
        "daemon.interval_ms" => "--interval-ms",
        "daemon.journal" => "--journal",
        "daemon.state" => "--state",
        "daemon.socket" => "--socket",
        "daemon.metrics" => "--metrics",
        "exclude.comm" => "--exclude",
        "exclude.pids" => "--exclude-pid",
        "include.comm" => "--include",
        "include.pids" => "--include-pid",
        _ => return None,
    })
}

/// Where the configuration comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The default path: a missing file means defaults.
    Default,
    /// `--config FILE`: a missing file is an error.
    Explicit(PathBuf),
}

impl Source {
    /// The path read.
    pub fn path(&self) -> &Path {
        match self {
            Source::Default => Path::new(DEFAULT_CONFIG_PATH),
            Source::Explicit(p) => p,
        }
    }
}

/// A validated configuration, with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    /// The values (flags applied, `daemon.interval_ms` folded into `tunables.interval_ms`).
    pub config: Config,
    /// The file read, `None` when the default file was absent.
    pub file: Option<PathBuf>,
    /// What is valid but probably not meant, as `FILE:LINE: text` or `command line: text`
    /// ([`merged_warnings`]), each once: said by `--check`, at start and at a reload, never
    /// refused.
    pub warnings: Vec<String>,
}

/// What a valid file says that is probably not meant, from the file alone ([`merged_warnings`]
/// with no flags).
pub fn warnings(text: &str, file: &str, c: &Config) -> Vec<String> {
    merged_warnings(text, file, c, c, &Overrides::default())
}

/// What a valid configuration says that is probably not meant (review helper-50), each said once:
/// `own` is the file's configuration alone, `c` the one in force (the flags `o` applied).
///
/// ```text
///   a process included and excluded (exclusions win: never managed; a cgroup under an excluded
///     prefix too)                            file alone: FILE:LINE of the inclusion
///                                            an --include / --include-pid: the flag, and what
///                                              excludes it (a file's inclusion that --exclude
///                                              names is that flag's purpose: not said)
///   both interval keys set apart             the file's (daemon.interval_ms wins)
///   the back-off cap below the interval      the interval's line, or --interval-ms when the flag
///     (0 < idle_max_interval_ms < interval:    set it; a flag that undoes the file's is no finding
///     no back-off)
///   signals.page_faults without perf         the file's (the fallback needs perf_event_open)
/// ```
///
/// A finding the file alone makes is said at its line even when a flag repeats it; one only the
/// flags make names the flag (`command line:`); a finding of the file's that the flags undo is not
/// said. The same line is never said twice (an inclusion listed twice).
pub fn merged_warnings(text: &str, file: &str, own: &Config, c: &Config, o: &Overrides) -> Vec<String> {
    let mut out = Vec::new();
    let at = |keys: &[&str]| key_line(text, keys).map_or_else(|| file.to_string(), |l| format!("{file}:{l}"));
    let pids = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>();
    // Per kind: the file's inclusions and exclusions, those in force, those the flags add to the
    // inclusions, and the flags' names.
    let kinds = [
        (
            "comm",
            [
                own.include.comm.clone(),
                own.exclude.comm.clone(),
                c.include.comm.clone(),
                c.exclude.comm.clone(),
                o.include_comm.clone(),
            ],
            ("--include", "--exclude"),
        ),
        (
            "pids",
            [
                pids(&own.include.pids),
                pids(&own.exclude.pids),
                pids(&c.include.pids),
                pids(&c.exclude.pids),
                pids(&o.include_pids),
            ],
            ("--include-pid", "--exclude-pid"),
        ),
        (
            "cgroups",
            [
                own.include.cgroups.clone(),
                own.exclude.cgroups.clone(),
                c.include.cgroups.clone(),
                c.exclude.cgroups.clone(),
                Vec::new(),
            ],
            ("", ""),
        ),
    ];
    for (what, [own_inc, own_exc, inc, exc, flag_inc], (include, exclude)) in kinds {
        // The exclusion that covers `i`: the same entry, or for cgroups a prefix of it.
        let covers = |list: &[String], i: &str| {
            list.iter().find(|e| *e == i || (what == "cgroups" && crate::live::select::cgroup_matches(i, e))).cloned()
        };
        // As typed: a pid bare, a name quoted (it may hold a space).
        let shown = |v: &str| if what == "pids" { v.to_string() } else { format!("{v:?}") };
        let never = "exclusions win, so it is never managed";
        for i in &inc {
            let Some(by) = covers(&exc, i) else { continue };
            if let Some(by) = covers(&own_exc, i).filter(|_| own_inc.contains(i)) {
                let line = at(&["include", what]);
                out.push(if by == *i {
                    format!("{line}: include.{what} and exclude.{what} both name {i:?}: {never}")
                } else {
                    format!("{line}: include.{what} {i:?} is under exclude.{what} {by:?}: {never}")
                });
            } else if flag_inc.contains(i) {
                // (A file's inclusion that only an --exclude names is that flag's purpose: not said.)
                let whose = if covers(&own_exc, i).is_some() {
                    format!("exclude.{what} of {} names it", at(&["exclude", what]))
                } else {
                    format!("{exclude} {} names it", shown(&by))
                };
                out.push(format!("command line: {include} {}: {whose} too: {never}", shown(i)));
            }
        }
    }
    if let (Some(l), Some(daemon)) = (key_line_exact(text, &["tunables", "interval_ms"]), own.daemon.interval_ms) {
        if let Ok(table) = text.parse::<toml::Table>() {
            let set = table.get("tunables").and_then(|t| t.get("interval_ms")).and_then(toml::Value::as_integer);
            if set.is_some_and(|v| v != daemon as i64) {
                out.push(format!(
                    "{file}:{l}: tunables.interval_ms = {} is replaced by daemon.interval_ms = {daemon}",
                    set.unwrap_or_default()
                ));
            }
        }
    }
    out.extend(backoff_warning(text, file, own, c));
    if c.signals.page_faults && !c.signals.perf {
        out.push(format!(
            "{}: signals.page_faults = true has no effect: signals.perf = false turns the page-fault fallback off \
             too (it samples through perf_event_open as well)",
            at(&["signals", "page_faults"])
        ));
    }
    // A source's cadence set in the file while the source itself is off (helper-96's trial: `shared = false`
    // beside a `maps_every` the reader took for doing something).
    for (on, switch, every, source) in [
        (c.signals.shared, "shared", "maps_every", "the shared-memory source (/proc/PID/maps)"),
        (c.signals.sockets, "sockets", "sockets_every", "the socket source (fd links)"),
    ] {
        if !on && key_line_exact(text, &["signals", every]).is_some() {
            out.push(format!(
                "{}: signals.{every} has no effect: signals.{switch} = false turns {source} off",
                at(&["signals", every])
            ));
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|w| seen.insert(w.clone()));
    out
}

/// A back-off cap above 0 but below the interval in force: the wait between steps never grows,
/// which is what 0 (or the interval itself) says on purpose (see
/// [`DaemonSection::idle_max_interval_ms`]). Said at the file's interval (or cap) line when the
/// file's interval is the one in force, else naming `--interval-ms`.
fn backoff_warning(text: &str, file: &str, own: &Config, c: &Config) -> Option<String> {
    let (cap, interval) = (c.daemon.idle_max_interval_ms, c.tunables.interval_ms);
    if cap == 0 || cap >= interval {
        return None;
    }
    let line = |keys: &[&str]| key_line_exact(text, keys);
    let cap_line = line(&["daemon", "idle_max_interval_ms"]);
    let cap_said = match cap_line {
        Some(l) => format!("daemon.idle_max_interval_ms = {cap} ({file}:{l})"),
        None => format!("daemon.idle_max_interval_ms ({cap} ms, its default)"),
    };
    let why = "the longest wait between steps is below the shortest, so there is no back-off: every step comes \
               at the interval (idle_max_interval_ms = 0 turns the back-off off without this warning)";
    if own.tunables.interval_ms != interval {
        return Some(format!("command line: --interval-ms {interval}: above {cap_said}: {why}"));
    }
    let set = [("daemon", "interval_ms"), ("tunables", "interval_ms")]
        .into_iter()
        .find_map(|(t, k)| line(&[t, k]).map(|l| (format!("{t}.{k} = {interval}"), l)));
    Some(match set {
        Some((key, l)) => format!("{file}:{l}: {key} is above {cap_said}: {why}"),
        None => format!(
            "{}: daemon.idle_max_interval_ms = {cap} is below the interval ({interval} ms, its default): {why}",
            cap_line.map_or_else(|| file.to_string(), |l| format!("{file}:{l}"))
        ),
    })
}

/// Reads, overrides and validates. The single entry point the daemon uses at start, on SIGHUP and
/// for `--check`: the file must be one a root daemon may believe (`paths::trusted_config`), and
/// its three files usable as what they are.
pub fn load(source: &Source, overrides: &Overrides) -> Result<Loaded, ConfigError> {
    load_as(source, overrides, Checks::Daemon)
}

/// Reads and validates as a client of the daemon (`status`, `explain`, `advise`) does, for the
/// socket and the tunables: without the daemon's checks of what its journal, state file and
/// socket paths are (a default file whose journal path was a directory sent the client to the
/// default socket; review helper-52). Who owns the file and who may write it is checked for a
/// root client only (`paths::trusted_config`, as the daemon checks it): root asks the socket the
/// file names and shows its answer, so a file another user may write, or may replace through its
/// directory, would let that user choose what root talks to. A user's own 0664 file stays readable
/// by that user's client (it was refused for them; review helper-52).
pub fn load_for_client(source: &Source) -> Result<Loaded, ConfigError> {
    load_as(source, &Overrides::default(), Checks::Client)
}

/// Which checks a load makes beyond the file's own content.
#[derive(Clone, Copy, PartialEq)]
enum Checks {
    Daemon,
    Client,
}

fn load_as(source: &Source, overrides: &Overrides, checks: Checks) -> Result<Loaded, ConfigError> {
    let path = source.path();
    let (text, file) = match read_config_file(path, checks) {
        Ok(t) => (t, Some(path.to_path_buf())),
        Err(ReadFailure::Io(e)) if e.kind() == std::io::ErrorKind::NotFound && *source == Source::Default => {
            (String::new(), None)
        }
        Err(ReadFailure::Io(e)) => {
            return Err(ConfigError {
                file: path.display().to_string(),
                line: None,
                reason: format!("cannot read: {e}"),
            })
        }
        Err(ReadFailure::Content(line, reason)) => {
            return Err(ConfigError { file: path.display().to_string(), line, reason })
        }
    };
    let name = path.display().to_string();
    // One reading gives both the file's own values and those in force: the warnings need the two
    // (the file's were taken from a second parse, whose failure would have dropped them).
    let (own, config) = parse_both(&text, &name, overrides, checks)?;
    let warnings = merged_warnings(&text, &name, &own, &config, overrides);
    Ok(Loaded { config, file, warnings })
}

/// Why a configuration file could not be read: the system's error, or what is wrong with what it
/// holds (the line when known).
enum ReadFailure {
    Io(std::io::Error),
    Content(Option<usize>, String),
}

/// Reads the configuration file: a regular file of at most
/// [`numapilot_topology::machine::MAX_DESCRIPTION_BYTES`] of UTF-8 text. It is opened without
/// blocking and refused unless regular: a FIFO at the path held the start, or a reload and with it
/// the whole loop (SIGTERM included), until something wrote to it (review helper-50); a device
/// (`/dev/zero`) is no configuration either.
fn read_config_file(path: &Path, checks: Checks) -> Result<String, ReadFailure> {
    use std::io::Read as _;
    use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(ReadFailure::Io)?;
    let meta = file.metadata().map_err(ReadFailure::Io)?;
    let kind = meta.file_type();
    // `--config /dev/null`, the usual way to say "no file, the defaults", stays one.
    if kind.is_char_device() && std::os::unix::fs::MetadataExt::rdev(&meta) == libc::makedev(1, 3) {
        return Ok(String::new());
    }
    if !kind.is_file() {
        let what = crate::paths::kind_name(kind);
        return Err(ReadFailure::Content(None, format!("{what}: a configuration is a regular file")));
    }
    // SAFETY: geteuid has no preconditions.
    let root_client = checks == Checks::Client && unsafe { libc::geteuid() } == 0;
    if checks == Checks::Daemon || root_client {
        let what = if root_client {
            "root's client asks the socket it names: another user could choose what root talks to"
        } else {
            "a configuration steers a root daemon"
        };
        crate::paths::trusted_config(path, &meta)
            .map_err(|why| ReadFailure::Content(None, format!("not trusted: {why} ({what})")))?;
    }
    let cap = numapilot_topology::machine::MAX_DESCRIPTION_BYTES;
    let mut bytes = Vec::new();
    file.take(cap + 1).read_to_end(&mut bytes).map_err(ReadFailure::Io)?;
    if bytes.len() as u64 > cap {
        return Err(ReadFailure::Content(
            None,
            format!(
                "larger than {} MiB: too large for a configuration (the example with every key is 34 kB)",
                cap >> 20
            ),
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        let column = at - bytes[..at].iter().rposition(|&b| b == b'\n').map_or(0, |n| n + 1) + 1;
        ReadFailure::Content(Some(line), format!("not UTF-8 text: byte {column} of this line"))
    })
}

/// Parses `text` (named `file` in errors), applies the flags, validates (as the daemon does).
pub fn parse_with_overrides(text: &str, file: &str, overrides: &Overrides) -> Result<Config, ConfigError> {
    parse_as(text, file, overrides, Checks::Daemon)
}

fn parse_as(text: &str, file: &str, overrides: &Overrides, checks: Checks) -> Result<Config, ConfigError> {
    parse_both(text, file, overrides, checks).map(|(_, config)| config)
}

/// [`parse_as`], returning the file's own configuration (validated alone, before the flags) with
/// the one in force (the flags applied and validated).
fn parse_both(text: &str, file: &str, overrides: &Overrides, checks: Checks) -> Result<(Config, Config), ConfigError> {
    let validate_daemon = |c: &Config| validate_daemon(c, checks);
    let mut config: Config = toml::from_str(text).map_err(|e| {
        if let Some((line, reason)) = said_at_its_key(text, &e) {
            return ConfigError { file: file.to_string(), line: Some(line), reason };
        }
        let mut reason = e.message().trim_end().to_string();
        // The text the error is about, when the message does not quote it ("duplicate key" named
        // no key; review helper-50).
        let at = e.span().and_then(|s| text.get(s)).map(str::trim).unwrap_or_default();
        if !at.is_empty() && at.len() <= 60 && !at.contains('\n') && !reason.contains(at) {
            reason = format!("{reason}: `{at}`");
        }
        ConfigError { file: file.to_string(), line: e.span().map(|s| line_of_offset(text, s.start)), reason }
    })?;
    let at = |keys: &[&str], reason: String| ConfigError { file: file.to_string(), line: key_line(text, keys), reason };
    // The file's own values first, so an error points at the file rather than at a flag.
    validate_daemon(&config).map_err(|(keys, reason)| at(&keys, reason))?;
    if let Some(ms) = config.daemon.interval_ms {
        config.tunables.interval_ms = ms;
    }
    if let Err(e) = config.tunables.validate() {
        let keys: Vec<&str> = if e.field == "interval_ms" && config.daemon.interval_ms.is_some() {
            vec!["daemon", "interval_ms"]
        } else {
            vec!["tunables", e.field]
        };
        let mut err = if keys[0] == "daemon" {
            at(&keys, format!("daemon.interval_ms = {}: {}", e.value, e.reason))
        } else {
            at(&keys, format!("[tunables] {e}"))
        };
        if e.field == "settle_interval_ms" && key_line_exact(text, &["tunables", "settle_interval_ms"]).is_none() {
            // The default settle interval became invalid through the interval the file set: its
            // line, not the [tunables] header's (key_line falls back to the table), and its name
            // (the file has no settle interval to blame).
            let key = if config.daemon.interval_ms.is_some() { "daemon.interval_ms" } else { "tunables.interval_ms" };
            if let Some(l) = key_line_exact(text, &["daemon", "interval_ms"])
                .or_else(|| key_line_exact(text, &["tunables", "interval_ms"]))
            {
                err.line = Some(l);
            }
            if let Some(why) = below_settle(&config.tunables) {
                err.reason = format!("{key} = {}: {why}", config.tunables.interval_ms);
            }
        } else if key_line_exact(text, &keys).is_none() {
            // A rule between two fields, broken by the one the file sets against the other's
            // default: said at the line the file set, naming it (a high mark set below the low
            // mark's default read "FILE:1: tunable cpu_load_low = 0.75", the [tunables] header's
            // line and a key the file does not have; review helper-50).
            // Every partner the file sets is named (which of them broke the rule depends on the
            // values; review helper-52), at the first one's line.
            let set: Vec<(&str, usize)> =
                e.partners.iter().filter_map(|p| key_line_exact(text, &["tunables", p]).map(|l| (*p, l))).collect();
            if let Some(&(_, line)) = set.first() {
                let values = serde_json::to_value(&config.tunables).unwrap_or_default();
                let named: Vec<String> = set.iter().map(|(p, _)| format!("{p} = {}", values[*p])).collect();
                err.line = Some(line);
                err.reason = format!(
                    "[tunables] tunable {}: against {} = {} (not set in this file: its default): {}",
                    named.join(", "),
                    e.field,
                    e.value,
                    e.reason
                );
            }
        }
        return Err(err);
    }
    let own = config.clone();
    apply_overrides(&mut config, overrides);
    let flag_err = |reason: String| ConfigError { file: "command line".into(), line: None, reason };
    validate_daemon(&config).map_err(|(keys, reason)| {
        // The file passed: the bad value came from a flag, named as the user typed it
        // ("--interval-ms 0: must be > 0 ms"), its key after it.
        let key = keys.join(".");
        let rest = reason.strip_prefix(&key).map(|r| r.trim_start_matches([' ', '=', ':']).to_string());
        match (flag_of(&key), rest) {
            (Some(flag), Some(rest)) => flag_err(format!("{flag} {rest}")),
            (Some(flag), None) => flag_err(format!("{flag}: {reason}")),
            (None, _) if reason.starts_with(&key) => flag_err(reason),
            (None, _) => flag_err(format!("{key}: {reason}")),
        }
    })?;
    config.tunables.validate().map_err(|e| match below_settle(&config.tunables) {
        Some(why) if e.field == "settle_interval_ms" && overrides.interval_ms.is_some() => {
            flag_err(format!("--interval-ms {}: {why}", config.tunables.interval_ms))
        }
        _ if e.field == "interval_ms" && overrides.interval_ms.is_some() => {
            flag_err(format!("--interval-ms {}: {}", e.value, e.reason))
        }
        _ => flag_err(format!("{e}")),
    })?;
    Ok((own, config))
}

/// A value of the wrong type or an unknown key, said with the full dotted key and in plain words
/// (`daemon.nice = "high": expected an integer`, `unknown key daemon.bogus; known keys: ...`)
/// rather than in serde's (`invalid type: string "high", expected i32`, `unknown field `bogus``,
/// which named neither the table nor, for a type, the key; review helper-103). The key is the one
/// whose span in a span-keeping parse holds the error's. `None` for an error tied to no key (a
/// TOML syntax error, said as the parser says it).
fn said_at_its_key(text: &str, e: &toml::de::Error) -> Option<(usize, String)> {
    let span = e.span()?;
    let root = toml::de::DeTable::parse(text).ok()?;
    let mut path = Vec::new();
    let found = key_at(root.get_ref(), span.start, &mut path)?;
    let line = line_of_offset(text, span.start);
    let key = path.join(".");
    let message = e.message().trim_end();
    // The value as written, when it is short enough to repeat.
    let written = |s: std::ops::Range<usize>| {
        text.get(s).map(str::trim).filter(|t| !t.is_empty() && t.len() <= 60 && !t.contains('\n'))
    };
    let shown = |s: std::ops::Range<usize>| written(s).map_or_else(|| key.clone(), |v| format!("{key} = {v}"));
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let name = rest.split('`').next().unwrap_or_default();
        let known = backticked(rest.split_once("expected").map_or("", |(_, k)| k));
        let top = path.len() == 1;
        let near = nearest(name, &known)
            .map(|k| if top { format!(" (did you mean [{k}]?)") } else { format!(" (did you mean {k}?)") })
            .unwrap_or_default();
        let unknown = if found.is_table { format!("table [{key}]") } else { format!("key {key}") };
        let parent = path[..path.len() - 1].join(".");
        let known = if parent.is_empty() {
            let tables: Vec<String> = known.iter().map(|k| format!("[{k}]")).collect();
            format!("known tables: {}", tables.join(", "))
        } else if known.len() > MAX_KEYS_LISTED {
            format!(
                "[{parent}] has {}, each described in the full example, {FULL_EXAMPLE_PATH}",
                numapilot_topology::plural(known.len(), "key")
            )
        } else {
            format!("known keys of [{parent}]: {}", known.join(", "))
        };
        return Some((line, format!("unknown {unknown}{near}; {known}")));
    }
    if let Some(rest) = message.strip_prefix("unknown variant `") {
        let known: Vec<String> =
            backticked(rest.split_once("expected").map_or("", |(_, k)| k)).iter().map(|k| format!("{k:?}")).collect();
        return Some((line, format!("{}: expected one of {}", shown(found.value), known.join(", "))));
    }
    if found.item.is_some() && path.len() == 1 {
        // `[[daemon]]`: a section given as an array of tables.
        return Some((line, format!("[[{key}]]: expected one table [{key}], not an array of tables")));
    }
    // toml's own words for a value that is neither a string nor a table where an enum goes.
    let (got, expected) = if message.starts_with("wanted string or table") {
        ("", "a string")
    } else {
        message
            .strip_prefix("invalid type: ")
            .or_else(|| message.strip_prefix("invalid value: "))?
            .rsplit_once(", expected ")?
    };
    let plain = plain_type(expected, got, &key);
    // An item of a list: the list's key, and which item.
    if let Some((i, item)) = found.item {
        let list = plain_type("a sequence", "", &key);
        let item = written(item).map(|t| format!(" = {t}")).unwrap_or_default();
        return Some((line, format!("{key} item {}{item}: expected {plain} ({key} is {list})", i + 1)));
    }
    Some((line, format!("{}: expected {plain}", shown(found.value))))
}

/// Most known keys an unknown key's error lists; a table with more ([tunables]) is referred to
/// the full example instead (its 84 names made a line of 1,800 characters).
const MAX_KEYS_LISTED: usize = 16;

/// Where the packages install `packaging/numapilot.toml`, the example that describes every key.
pub const FULL_EXAMPLE_PATH: &str = "/usr/share/doc/numapilot/examples/numapilot.toml";

/// What [`key_at`] found: the key's value span, whether it is a table, and the item of an array
/// value the offset is in (0-based, with its span).
struct KeyAt {
    value: std::ops::Range<usize>,
    is_table: bool,
    item: Option<(usize, std::ops::Range<usize>)>,
}

/// The deepest key whose name or value holds byte `at`, its path pushed on `path`.
fn key_at(table: &toml::de::DeTable<'_>, at: usize, path: &mut Vec<String>) -> Option<KeyAt> {
    for (k, v) in table.iter() {
        path.push(k.get_ref().to_string());
        if let Some(t) = v.get_ref().as_table() {
            if let Some(found) = key_at(t, at, path) {
                return Some(found);
            }
        }
        let item = v.get_ref().as_array().and_then(|a| {
            a.iter().enumerate().find(|(_, item)| item.span().contains(&at)).map(|(i, item)| (i, item.span()))
        });
        if k.span().contains(&at) || v.span().contains(&at) {
            return Some(KeyAt { value: v.span(), is_table: v.get_ref().is_table(), item });
        }
        path.pop();
    }
    None
}

/// The names in backticks of a serde message's list (`` `a`, `b` ``).
fn backticked(list: &str) -> Vec<&str> {
    list.split('`').skip(1).step_by(2).collect()
}

/// The known name within two edits of `name`, if exactly one is.
fn nearest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    let close: Vec<&str> = known.iter().copied().filter(|k| edits(name, k) <= 2).collect();
    (close.len() == 1).then(|| close[0])
}

/// Levenshtein distance, by characters.
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(here + 1);
            prev = here;
        }
    }
    row[b.len()]
}

/// A serde "expected" (`i32`, `a sequence`, `struct DaemonSection`) in plain words, for the key
/// `key` that was given `got` (`integer `-5``, `string "high"`).
fn plain_type(expected: &str, got: &str, key: &str) -> String {
    let range = |min: i128, max: i128| {
        let given = got.strip_prefix("integer `").and_then(|g| g.trim_end_matches('`').parse::<i128>().ok());
        match given {
            Some(g) if min == 0 && g < 0 => "an integer >= 0".to_string(),
            Some(g) if min == 0 && g > max => format!("an integer <= {max}"),
            Some(_) => format!("an integer in {min}..={max}"),
            None => "an integer".to_string(),
        }
    };
    match expected {
        "i8" => range(i8::MIN.into(), i8::MAX.into()),
        "i16" => range(i16::MIN.into(), i16::MAX.into()),
        "i32" => range(i32::MIN.into(), i32::MAX.into()),
        "i64" => range(i64::MIN.into(), i64::MAX.into()),
        "u8" => range(0, u8::MAX.into()),
        "u16" => range(0, u16::MAX.into()),
        "u32" => range(0, u32::MAX.into()),
        "u64" | "usize" => range(0, u64::MAX.into()),
        "f32" | "f64" => "a number".into(),
        "a boolean" => "true or false".into(),
        "a string" | "path string" | "a borrowed string" => "a string".into(),
        "a sequence" => match key.rsplit('.').next() {
            Some("comm" | "cgroups") => "a list of strings".into(),
            Some("pids") => "a list of integers".into(),
            _ => "a list".into(),
        },
        _ if expected.starts_with("struct ") || expected == "a map" => format!("a table ([{key}])"),
        _ if expected.starts_with("enum ") => "a string".into(),
        other => other.to_string(),
    }
}

/// An interval below the settle interval, said as the interval's fault ("must be at least ..."): the tunables' own check names the settle interval, which the operator did not set
/// (review helper-41: `--interval-ms 50` read "tunable settle_interval_ms = 100: must be in
/// 1..=interval_ms").
fn below_settle(t: &Tunables) -> Option<String> {
    (t.settle_interval_ms > 0 && t.settle_interval_ms > t.interval_ms).then(|| {
        format!(
            "must be at least tunables.settle_interval_ms ({} ms; set that lower too to go below it)",
            t.settle_interval_ms
        )
    })
}

fn apply_overrides(c: &mut Config, o: &Overrides) {
    if o.dry_run {
        c.daemon.dry_run = true;
    }
    if let Some(ms) = o.interval_ms {
        c.daemon.interval_ms = Some(ms);
        c.tunables.interval_ms = ms;
    }
    if let Some(j) = &o.journal {
        c.daemon.journal = j.clone();
    }
    if let Some(s) = &o.state {
        c.daemon.state = s.clone();
    }
    if let Some(s) = &o.socket {
        c.daemon.socket = s.clone();
    }
    if let Some(m) = &o.metrics {
        c.daemon.metrics = m.clone();
    }
    c.exclude.comm.extend(o.exclude_comm.iter().cloned());
    c.exclude.pids.extend(o.exclude_pids.iter().copied());
    if o.include_pinned {
        c.exclude.include_pinned = true;
    }
    c.include.comm.extend(o.include_comm.iter().cloned());
    c.include.pids.extend(o.include_pids.iter().copied());
}

type KeyError = (Vec<&'static str>, String);

/// The daemon's three files must be usable as what they are, so that `--check` (and a reload)
/// says so at the key's line rather than a start failing on it with exit 75, the status of a
/// temporary failure that the unit restarts (review helper-50): no NUL byte, not a directory's
/// name (`/x/`), nothing else already there (a directory, a FIFO, a symbolic link, a regular file
/// where the socket goes), and no two of them the same file (journal lines written into the state
/// file).
fn check_file_paths(d: &DaemonSection) -> Result<(), KeyError> {
    use std::os::unix::ffi::OsStrExt as _;
    use std::os::unix::fs::FileTypeExt as _;
    let files = [("journal", &d.journal), ("state", &d.state), ("socket", &d.socket)];
    for (key, p) in files {
        let bytes = p.as_os_str().as_bytes();
        if bytes.is_empty() {
            continue;
        }
        let bad = |why: &str| Err((vec!["daemon", key], format!("daemon.{key} = {:?}: {why}", p.display())));
        if bytes.contains(&0) {
            return bad("contains a NUL byte");
        }
        if bytes.ends_with(b"/") {
            return bad("ends in /: names a directory, not a file");
        }
        let Ok(meta) = std::fs::symlink_metadata(p) else { continue };
        let kind = meta.file_type();
        // A journal may also be a character device of root's (/dev/null), as the journal allows.
        let device = key == "journal" && kind.is_char_device() && std::os::unix::fs::MetadataExt::uid(&meta) == 0;
        let fits = if key == "socket" { kind.is_socket() } else { kind.is_file() || device };
        if !fits {
            let why = if kind.is_symlink() {
                " (the daemon's files are never opened through one)"
            } else if kind.is_file() {
                ", not a socket (a socket is made there at start)"
            } else {
                ""
            };
            return bad(&format!("exists and is {}{why}", crate::paths::kind_name(kind)));
        }
    }
    for (i, (a, pa)) in files.iter().enumerate() {
        for (b, pb) in &files[i + 1..] {
            if !pa.as_os_str().is_empty() && same_file_name(pa, pb) {
                return Err((
                    vec!["daemon", b],
                    format!("daemon.{b} = {:?}: the same file as daemon.{a}; each needs one of its own", pb.display()),
                ));
            }
        }
    }
    Ok(())
}

/// Whether two absolute paths name the same file: the same after `.` and repeated `/` are taken
/// out, or the same existing file.
fn same_file_name(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    if a.components().eq(b.components()) {
        return true;
    }
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

fn validate_daemon(c: &Config, checks: Checks) -> Result<(), KeyError> {
    let d = &c.daemon;
    if let Some(ms) = d.interval_ms {
        if ms == 0 {
            return Err((vec!["daemon", "interval_ms"], "daemon.interval_ms = 0: must be > 0 ms".into()));
        }
    }
    if d.idle_max_interval_ms > 86_400_000 {
        return Err((
            vec!["daemon", "idle_max_interval_ms"],
            format!("daemon.idle_max_interval_ms = {}: must be at most 86400000 ms (one day)", d.idle_max_interval_ms),
        ));
    }
    if d.new_thread_wake_ms > 60_000 {
        return Err((
            vec!["daemon", "new_thread_wake_ms"],
            format!(
                "daemon.new_thread_wake_ms = {}: must be at most 60000 ms (0 turns the wake-up off)",
                d.new_thread_wake_ms
            ),
        ));
    }
    if !(-20..=19).contains(&d.nice) {
        return Err((vec!["daemon", "nice"], format!("daemon.nice = {}: must be in -20..=19 (as nice(1))", d.nice)));
    }
    if d.journal_max_bytes < 4096 {
        return Err((
            vec!["daemon", "journal_max_bytes"],
            format!("daemon.journal_max_bytes = {}: must be >= 4096 (one action line must fit)", d.journal_max_bytes),
        ));
    }
    for (key, p) in [("state", &d.state), ("socket", &d.socket)] {
        if p.as_os_str().is_empty() || !p.is_absolute() {
            return Err((vec!["daemon", key], format!("daemon.{key} = {:?}: must be an absolute path", p.display())));
        }
    }
    if !d.journal.as_os_str().is_empty() && !d.journal.is_absolute() {
        return Err((
            vec!["daemon", "journal"],
            format!("daemon.journal = {:?}: must be an absolute path (or \"\" for none)", d.journal.display()),
        ));
    }
    if checks == Checks::Daemon {
        check_file_paths(d)?;
    }
    // sun_path is 108 bytes including the terminating NUL (unix(7)).
    if d.socket.as_os_str().len() > 107 {
        return Err((vec!["daemon", "socket"], "daemon.socket: path longer than 107 bytes (unix(7) sun_path)".into()));
    }
    metrics_addr(&d.metrics).map_err(|r| (vec!["daemon", "metrics"], r))?;
    check_process_lists("exclude", &c.exclude.comm, &c.exclude.pids, &c.exclude.cgroups)?;
    check_process_lists("include", &c.include.comm, &c.include.pids, &c.include.cgroups)?;
    if c.exclude.include_kernel {
        return Err((
            vec!["exclude", "include_kernel"],
            "exclude.include_kernel = true: not supported: the live host never touches kernel threads \
             (the kernel places its own threads)"
                .into(),
        ));
    }
    for (key, v) in [("maps_every", c.signals.maps_every), ("sockets_every", c.signals.sockets_every)] {
        if v == 0 {
            return Err((vec!["signals", key], format!("signals.{key} = 0: must be >= 1 (cycles)")));
        }
    }
    if let Some(n) = c.actuation.mover_threads.filter(|n| !(1..=MAX_MOVER_THREADS).contains(n)) {
        return Err((
            vec!["actuation", "mover_threads"],
            format!("actuation.mover_threads = {n}: must be 1 to {MAX_MOVER_THREADS} (1: one thread per move)"),
        ));
    }
    if let Err(e) = CpuSet::parse_list(&c.actuation.reserved_cpus) {
        return Err((vec!["actuation", "reserved_cpus"], format!("actuation.reserved_cpus: {e}")));
    }
    if c.actuation.migrate_mb_per_s == Some(0) {
        return Err((
            vec!["actuation", "migrate_mb_per_s"],
            "actuation.migrate_mb_per_s = 0: must be > 0 (to stop migrating, use dry_run)".into(),
        ));
    }
    Ok(())
}

/// The process lists of `[exclude]` or `[include]` (`section`): names of 1 to 15 bytes, pids
/// above 0, cgroup paths from the root.
fn check_process_lists(
    section: &'static str,
    comm: &[String],
    pids: &[u32],
    cgroups: &[String],
) -> Result<(), KeyError> {
    for name in comm {
        if name.is_empty() || name.len() > 15 || name.contains('\n') {
            return Err((
                vec![section, "comm"],
                format!("{section}.comm {name:?}: a process name is 1 to 15 bytes (TASK_COMM_LEN 16 with its NUL)"),
            ));
        }
    }
    if pids.contains(&0) {
        return Err((vec![section, "pids"], format!("{section}.pids: 0 is not a process id")));
    }
    for cg in cgroups {
        if !cg.starts_with('/') {
            return Err((
                vec![section, "cgroups"],
                format!("{section}.cgroups {cg:?}: a cgroup path starts with '/' as in /proc/PID/cgroup"),
            ));
        }
    }
    Ok(())
}

/// Parses a metrics address: `off`, or `IP:PORT`.
pub fn metrics_addr(text: &str) -> Result<Option<SocketAddr>, String> {
    if text == "off" {
        return Ok(None);
    }
    text.parse::<SocketAddr>().map(Some).map_err(|_| {
        // Say which half is wrong when the port is a number out of range (the rest may be right).
        let port = text.rsplit_once(':').and_then(|(_, p)| p.parse::<u64>().ok()).filter(|&p| p > 65535);
        match port {
            Some(p) => format!("daemon.metrics = {text:?}: port {p} is out of range (0-65535)"),
            None => format!("daemon.metrics = {text:?}: expected IP:PORT (e.g. {DEFAULT_METRICS_ADDR}) or \"off\""),
        }
    })
}

impl Config {
    /// The engine step interval, ms.
    pub fn interval_ms(&self) -> u64 {
        self.tunables.interval_ms
    }

    /// The metrics address, `None` when off. Valid after validation.
    pub fn metrics(&self) -> Option<SocketAddr> {
        metrics_addr(&self.daemon.metrics).ok().flatten()
    }

    /// The live host's options. `observe_only` is the caller's (dry run or not root).
    pub fn live_options(&self, observe_only: bool) -> LiveOptions {
        LiveOptions {
            root: PathBuf::from("/"),
            state_path: self.daemon.state.clone(),
            observe_only,
            exclude_comm: self.exclude.comm.clone(),
            exclude_pids: self.exclude.pids.clone(),
            exclude_cgroups: self.exclude.cgroups.clone(),
            include_comm: self.include.comm.clone(),
            include_pids: self.include.pids.clone(),
            include_cgroups: self.include.cgroups.clone(),
            include_pinned: self.exclude.include_pinned,
            min_rss_kb: self.exclude.min_rss_mib.saturating_mul(1024),
            migrate_mb_per_s: self.actuation.migrate_mb_per_s.unwrap_or(self.tunables.migrate_budget_mib_per_s),
            cpuset: self.actuation.cpuset.into(),
            mover_threads: self
                .actuation
                .mover_threads
                .map_or(crate::live::DEFAULT_MOVER_THREADS, |n| usize::try_from(n).unwrap_or(1)),
            // Validated when the file was read.
            reserved_cpus: CpuSet::parse_list(&self.actuation.reserved_cpus).unwrap_or_default(),
            reserve_isolated: self.actuation.reserve_isolated,
        }
    }

    /// The signal sources to open.
    pub fn signal_options(&self) -> SignalOptions {
        SignalOptions { sockets: self.signals.sockets, perf: self.signals.perf }
    }

    /// How the signal sources run (`[signals]` cadences and switches; the rest at their defaults).
    pub fn signal_tuning(&self) -> SignalTuning {
        SignalTuning {
            shared: self.signals.shared,
            maps_every: self.signals.maps_every,
            sockets_every: self.signals.sockets_every,
            page_faults: self.signals.page_faults,
            wakeups: self.signals.wakeups,
            ..SignalTuning::default()
        }
    }
}

/// 1-based line of a byte offset.
pub fn line_of_offset(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())].iter().filter(|&&b| b == b'\n').count() + 1
}

/// The line of the key `keys` (a path of table names then the key), from a span-keeping parse;
/// falls back to the table header's line when the key is absent, `None` when neither is there.
pub fn key_line(text: &str, keys: &[&str]) -> Option<usize> {
    key_line_in(text, keys, false)
}

/// [`key_line`] of the key itself: `None` when the file does not have it (no fallback to its table).
pub fn key_line_exact(text: &str, keys: &[&str]) -> Option<usize> {
    key_line_in(text, keys, true)
}

fn key_line_in(text: &str, keys: &[&str], exact: bool) -> Option<usize> {
    let root = toml::de::DeTable::parse(text).ok()?;
    let mut table = root.get_ref();
    let mut line = None;
    for (i, k) in keys.iter().enumerate() {
        let Some((key, value)) = table.get_key_value(*k) else { return if exact { None } else { line } };
        line = Some(line_of_offset(text, key.span().start));
        if i + 1 < keys.len() {
            match value.get_ref().as_table() {
                Some(t) => table = t,
                None => return line,
            }
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_lines_follow_tables() {
        let text = "# c\n[daemon]\ndry_run = true\n\n[tunables]\ntier_medium = 0.5\n";
        assert_eq!(key_line(text, &["tunables", "tier_medium"]), Some(6));
        assert_eq!(key_line(text, &["daemon", "dry_run"]), Some(3));
        assert_eq!(key_line(text, &["daemon", "nothing"]), Some(2));
        assert_eq!(key_line(text, &["exclude", "comm"]), None);
        assert_eq!(key_line_exact(text, &["daemon", "nothing"]), None);
        assert_eq!(key_line_exact(text, &["daemon", "dry_run"]), Some(3));
        assert_eq!(line_of_offset(text, 0), 1);
    }
}
