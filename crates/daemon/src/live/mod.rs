//! The live host: the [`numapilot_policy::Host`] the daemon steps the engine against.
//!
//! (Contract written by the lead; the live-host helper owns this module and fills it in.)
//!
//! - `sample()`: an [`numapilot_observe::Reader`] observation of the processes the daemon may manage,
//!   plus [`crate::signals::Signals::fill`]; cheap enough for the 50 ms cycle target (tiered: per-process
//!   files every cycle, per-thread and numa_maps only where they can matter).
//! - `apply()`: confirms the target is the same process (pid + start time) before any syscall; refuses
//!   excluded, kernel and self-pinned processes unless configured; saves the original affinity (and
//!   cpuset) of a process before first touching it, to the state file, so `restore_all` (SIGTERM) and
//!   `recover` (next start after a crash) put it back, and changes nothing while a save of that file
//!   fails (rule originals-on-disk-first); page moves under a MB/s budget, per-page failures counted
//!   in the `Outcome`, never fatal. A record is dropped only when /proc shows its process gone, never
//!   on a read that failed for want of a descriptor or memory.
//! - Release: a touched process the operator takes out of numapilot's hands while it runs (a
//!   reload's `[exclude]` or `[include]`, or a move into or out of a listed cgroup, seen by the
//!   observer's re-check) is put back as at shutdown (its original affinity and cpuset; its pages
//!   stay) and its record dropped ([`LiveHost::take_released`] reports it to the loop's journal).
//!
//! # Modules
//!
//! ```text
//!   observe   tiered sampling (per-process stat every cycle; threads and numa_maps where they
//!             can matter), with the tunables that decide it ([`TierOptions`])
//!   select    identity (pid + start time), kernel threads, exclusions, self-pinned processes
//!   apply     page moves: token-bucket budget, pagemap + move_pages batches, migrate_pages
//!   state     originals of every touched process, the state file, restore
//! ```
//! Cpuset cgroups (v1/v2) are written by `numapilot_actuate::cgroup`; this module decides when.
//!
//! # Non-root, dry run
//!
//! Without root (effective uid 0), with `observe_only`, or with a `root` other than `/`, `sample()`
//! works as always and every `apply()` is refused with one reason ([`LiveHost::refusal`]), which the
//! daemon logs once.

use std::path::{Path, PathBuf};

use numapilot_actuate::{sched_getaffinity, set_process_affinity_while, CgroupVersion, CpusetHierarchy};
use numapilot_observe::Sample;
use numapilot_policy::{Action, ActionKind, Host, HostError, Outcome};
use numapilot_topology::{CpuSet, NodeSet, Topology};

use crate::signals::{SignalOptions, SignalTuning, Signals};

pub mod apply;
pub mod mover;
pub mod observe;
pub mod select;
pub mod state;

pub use observe::{TierOptions, TierStats};

use apply::{PageTally, Stop, TokenBucket};
use state::{CpusetOriginal, LeftAlone, Originals, ProcessOriginal};

/// How the live host observes and acts. Built by `run` from the config file and the command line;
/// [`LiveOptions::default`] gives every default below.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveOptions {
    /// Root of /proc and /sys (`/` on a live system; tests may point elsewhere for observation only:
    /// with any other root every action is refused).
    pub root: PathBuf,
    /// Where the originals of every touched process are kept (default `/run/numapilot/state.json`).
    pub state_path: PathBuf,
    /// Never act: observe and plan only (non-root, or `--dry-run`).
    pub observe_only: bool,
    /// Process names (`comm`) never touched.
    pub exclude_comm: Vec<String>,
    /// Pids never touched.
    pub exclude_pids: Vec<u32>,
    /// Cgroup path prefixes (as in /proc/PID/cgroup) whose processes are never touched.
    pub exclude_cgroups: Vec<String>,
    /// When any of the three is non-empty, only processes matching one of them (by name, pid or
    /// cgroup prefix) are managed (`[include]`, numad's `-S 0 -p PID`); the others are load, never
    /// read in detail, planned for or touched. Exclusions win. Default: all empty (everything).
    pub include_comm: Vec<String>,
    /// Pids managed (see [`LiveOptions::include_comm`]).
    pub include_pids: Vec<u32>,
    /// Cgroup path prefixes whose processes are managed (see [`LiveOptions::include_comm`]).
    pub include_cgroups: Vec<String>,
    /// Touch processes that pinned themselves (affinity narrower than their cpuset, or an explicit
    /// memory policy in numa_maps). Default false.
    pub include_pinned: bool,
    /// Only manage processes with at least this resident memory, kB (numad: 300 MiB). Default 0.
    /// Smaller processes are left out of the sample (and so never planned for).
    pub min_rss_kb: u64,
    /// Page-migration budget, MB/s (MiB) of base pages moved, enforced by the host over wall time
    /// whatever the policy asks. Default 4096, the model's `Tunables::migrate_budget_mib_per_s`.
    pub migrate_mb_per_s: u64,
    /// Use cpuset cgroups in addition to sched_setaffinity.
    pub cpuset: CpusetMode,
    /// Most threads one page move's copy is split over (`[actuation] mover_threads`; rule
    /// split-copy, [`mover`]). Default [`DEFAULT_MOVER_THREADS`].
    pub mover_threads: usize,
    /// CPUs never placed on (`[actuation] reserved_cpus`, numad's `-R`). Default none.
    pub reserved_cpus: CpuSet,
    /// Reserve the CPUs the host keeps for work placed on purpose as well (`[actuation]
    /// reserve_isolated`: `isolcpus=` and those outside init's affinity;
    /// [`reserved_cpus`]). Default true.
    pub reserve_isolated: bool,
}

/// Default of [`LiveOptions::mover_threads`] (`[actuation] mover_threads`): 4 threads. Source:
/// Nimble (Yan et al., ASPLOS 2019) finds one migrating thread leaves most of the memory bandwidth
/// unused and gains from migrating pages concurrently; 4 is our choice of how many of the
/// destination's CPUs a move may take at once (never more than the CPUs it runs on, one per
/// `apply::MIN_PAGES_PER_THREAD` pages). Prevents: a large move crawling at one caller's rate
/// while the process waits for its pages (the rig's 4-node guest: 32 MiB in 2.1-4.8 s from one
/// thread), and a move taking every CPU of a large node.
pub const DEFAULT_MOVER_THREADS: usize = 4;

impl Default for LiveOptions {
    fn default() -> Self {
        Self {
            root: PathBuf::from("/"),
            state_path: PathBuf::from("/run/numapilot/state.json"),
            observe_only: false,
            exclude_comm: Vec::new(),
            exclude_pids: Vec::new(),
            exclude_cgroups: Vec::new(),
            include_comm: Vec::new(),
            include_pids: Vec::new(),
            include_cgroups: Vec::new(),
            include_pinned: false,
            min_rss_kb: 0,
            migrate_mb_per_s: numapilot_model::Tunables::default().migrate_budget_mib_per_s,
            cpuset: CpusetMode::Off,
            mover_threads: DEFAULT_MOVER_THREADS,
            reserved_cpus: CpuSet::new(),
            reserve_isolated: true,
        }
    }
}

/// Settings of the live host beyond [`LiveOptions`] (kept apart so that code building a
/// `LiveOptions` literal keeps compiling as these grow): the signal sources, the tiers of the
/// observation, the affinity re-listing bound. [`LiveHost::open`] uses the defaults;
/// [`LiveHost::open_with`] takes them.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveTuning {
    /// Signal sources beyond /proc's per-task files ([`Signals`]), filled into every sample.
    pub signals: SignalOptions,
    /// How those sources run (cadences of the maps and socket scans, page faults, wake-ups).
    pub signal_tuning: SignalTuning,
    /// Thresholds of the tiered observation.
    pub tiers: TierOptions,
    /// Listings of /proc/PID/task when setting a whole process's affinity, until no new thread
    /// appears. Default 8. Source: a choice; a process that keeps creating threads for 8 rounds is
    /// caught on the next cycle. What it prevents: looping forever on a thread factory.
    pub affinity_rounds: u32,
    /// Page actions run on the page mover's thread ([`mover`]) while the loop goes on, their
    /// outcome reported when they end (`Host::finished_moves`). Default true. Source: the rig's
    /// race, where a synchronous 32 MiB move under TCG held the loop for 1.8-5 s. What it
    /// prevents: no decision for any process while one process's pages are copied. False: each
    /// page action is done inside `apply`, its outcome final (tests that want that).
    pub background_moves: bool,
    /// How long a background page move may go without progress (no call of the page code
    /// returning, no CPU time in the mover's threads) before it is given up as stuck in the
    /// kernel, ms (rule stuck-move-abandoned, [`mover::STUCK_MOVE_S`], where its source and what
    /// it prevents are). Default 60 000. Not in the configuration file: tests give a shorter one
    /// to see the rule on a real locked memory map within seconds. 0 counts as 1 ms.
    pub stuck_move_ms: u64,
}

impl Default for LiveTuning {
    fn default() -> Self {
        Self {
            signals: SignalOptions::default(),
            signal_tuning: SignalTuning::default(),
            tiers: TierOptions::default(),
            affinity_rounds: 8,
            background_moves: true,
            stuck_move_ms: mover::STUCK_MOVE_S * 1000,
        }
    }
}

/// Whether CPU placement also goes through cpuset cgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CpusetMode {
    /// Thread affinity only (default).
    #[default]
    Off,
    /// Detect the mounted hierarchy (v2 unified with the cpuset controller first, else v1 cpuset)
    /// and use it; affinity only (with a note) when neither is mounted.
    Auto,
    /// cgroup v1 cpuset controller (open fails when it is not mounted).
    V1,
    /// cgroup v2 unified hierarchy with the cpuset controller (open fails when not available).
    V2,
}

/// Why the live host could not start.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// The state file exists but cannot be read or parsed; the message names the path and the fault.
    #[error("{0}")]
    State(String),
    /// /proc or /sys cannot be read, or a configured cpuset hierarchy is not mounted.
    #[error("{0}")]
    Unavailable(String),
    /// The configuration cannot work on this machine (it reserves every online CPU): a start
    /// again would fail the same way (the daemon exits 1, as for a bad file, not 75).
    #[error("{0}")]
    Config(String),
}

/// What putting processes back did (on shutdown, or at start after a crash).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RestoreReport {
    /// Processes whose original affinity (and cpuset) were put back.
    pub restored: u64,
    /// Processes that had exited (or whose pid now belongs to another process): nothing to do.
    pub gone: u64,
    /// Descendants of touched processes, never touched themselves, that still carried the mask or
    /// cpuset numapilot had set on their ancestor when they forked: put back to the ancestor's
    /// originals.
    pub inherited: u64,
    /// Processes where restoring failed, with the reason (`pid: message`).
    pub failed: Vec<String>,
}

/// The CPUs placement never uses (rule reserved-cpus): `[actuation] reserved_cpus`, and unless
/// `reserve_isolated` is off those the host keeps for work placed on purpose: the kernel's
/// isolated CPUs (`isolcpus=`, `ROOT/sys/devices/system/cpu/isolated`), and the CPUs among
/// `online` and init's cpuset that init (pid 1) may not run on (systemd's `CPUAffinity=`,
/// inherited by every service: tuned's cpu-partitioning profile sets it to all but its isolated
/// cores and boots those `nohz_full=` without `isolcpus=`; such CPUs are named nohz_full too when
/// they are). On such a host every process's default mask leaves them out, so without them the
/// daemon took every process for one that pinned itself and managed nothing. `nohz_full=` alone
/// reserves nothing: HPC hosts boot most CPUs so and run their unpinned work there (review
/// helper-44: `nohz_full=1-63` would have left two CPUs to place on). Init's mask counts only in
/// the initial pid namespace (a container's init may be its application, pinned by its entrypoint)
/// or on a fixture root; init itself is never managed (`select::exclusion`), so its mask is never
/// numapilot's. With a note saying which and why when there are any. Judged at start and again
/// whenever CPU hotplug changes the CPUs online ([`HotplugWatch::with_reservation`]). A sysfs file that cannot be read or parsed stops the start (a kept
/// CPU taken for a free one would be placed on); init's status absent (a fixture root) or
/// unreadable (`hidepid=`) counts as every CPU.
pub fn reserved_cpus(
    root: &Path,
    configured: &CpuSet,
    reserve_isolated: bool,
    online: &CpuSet,
) -> Result<(CpuSet, Option<String>), LiveError> {
    let hint = " (set [actuation] reserve_isolated = false to place on them)";
    let mut why = Vec::new();
    let mut all = CpuSet::new();
    if reserve_isolated {
        let err = |e: numapilot_topology::TopologyError| LiveError::Unavailable(format!("{e}{hint}"));
        let isolated = numapilot_topology::sysfs::isolated_cpus(root).map_err(err)?;
        let nohz = numapilot_topology::sysfs::nohz_full_cpus(root).map_err(err)?;
        let live = root == Path::new("/");
        // PROC_PID_INIT_INO (include/linux/proc_ns.h): the initial pid namespace's inode.
        const INITIAL_PID_NS: u64 = 0xEFFF_FFFC;
        let host_init = !live || state::pid_namespace() == Some(INITIAL_PID_NS);
        let init = host_init.then(|| numapilot_observe::Reader::new(root).read_status(1).ok().flatten()).flatten();
        // Within init's cpuset: an init confined to a cpuset runs on its CPUs, which is no
        // CPUAffinity= of anyone's (those CPUs are out of reach anyway, rule confined-within-cpuset).
        let init_cpuset = live
            .then(|| state::allowed_cpus(1, CpusetHierarchy::detect(None).as_ref()))
            .flatten()
            .map_or_else(|| online.clone(), |c| online.intersection(&c));
        let outside_init = init.map_or_else(CpuSet::new, |st| init_cpuset.difference(&st.cpus_allowed));
        let kept_nohz = outside_init.intersection(&nohz);
        // Each CPU named under the first reason that holds: isolcpus= leaves init without its
        // CPUs too, which is not a second reservation.
        for (set, what) in [
            (isolated, "isolated by the kernel (isolcpus=)"),
            (kept_nohz, "adaptive ticks (nohz_full=) outside init's affinity"),
            (outside_init, "outside init's affinity (systemd CPUAffinity=)"),
        ] {
            let new = set.difference(&all);
            if !new.is_empty() {
                why.push(format!("{what}: {}", new.to_list()));
                all = all.union(&new);
            }
        }
    }
    if !configured.is_empty() {
        // A list written for a fleet may name CPUs this machine lacks: said, not refused.
        let possible = numapilot_topology::sysfs::cpu_list(root, "possible").ok().flatten();
        let missing = possible.map_or_else(CpuSet::new, |p| configured.difference(&p));
        let absent =
            if missing.is_empty() { String::new() } else { format!(", not on this machine: {}", missing.to_list()) };
        why.push(format!("[actuation] reserved_cpus: {}{absent}", configured.to_list()));
        all = all.union(configured);
    }
    if all.is_empty() {
        return Ok((all, None));
    }
    let note = format!("CPUs {} reserved ({}): no process is placed on them", all.to_list(), why.join("; "));
    Ok((all, Some(note)))
}

/// A note per other placer found running at start: numad (by its process name; it moves whole
/// processes by its own rule, and the two would undo each other's placements; the unit's
/// `Conflicts=numad.service` covers only a numad systemd started) and the kernel's NUMA balancing
/// (`kernel.numa_balancing` not 0: supported, its fault statistics are a signal here, but its page
/// and task moves go on beside numapilot's). Said once, at start; nothing is stopped.
pub fn other_placers(root: &Path) -> Vec<String> {
    let reader = numapilot_observe::Reader::new(root);
    let mut notes = Vec::new();
    let numad: Vec<String> = reader
        .pids()
        .unwrap_or_default()
        .into_iter()
        .filter(|&pid| reader.read_stat(pid).ok().flatten().is_some_and(|st| st.comm == "numad"))
        .map(|pid| pid.to_string())
        .collect();
    if !numad.is_empty() {
        notes.push(format!(
            "numad is running (pid {}): it places processes too, and the two would undo each other's placements; \
             stop it (systemctl disable --now numad) or keep the processes it manages out of numapilot's ([exclude])",
            numad.join(", ")
        ));
    }
    if let Ok(Some(mode)) = reader.read_numa_balancing() {
        if mode != 0 {
            notes.push(format!(
                "the kernel's NUMA balancing is on (kernel.numa_balancing = {mode}): its fault statistics are read, \
                 and its own page and task moves go on beside numapilot's (sysctl kernel.numa_balancing=0 leaves \
                 placement to numapilot)"
            ));
        }
    }
    notes
}

/// Takes the reserved CPUs ([`reserved_cpus`]) out of `topo`; a reservation that leaves no CPU
/// to place on is [`LiveError::Config`] (`numapilot daemon --check` runs this too, so the unit's
/// `ExecStartPre` stops such a file before a start that would fail on it).
pub fn reserve(topo: &mut Topology, opts: &LiveOptions) -> Result<(CpuSet, Option<String>), LiveError> {
    let (reserved, note) = reserved_cpus(&opts.root, &opts.reserved_cpus, opts.reserve_isolated, &topo.usable_cpus())?;
    topo.reserve(&reserved);
    if topo.usable_cpus().is_empty() {
        return Err(LiveError::Config(format!(
            "every online CPU is reserved ({}): nothing left to place processes on",
            note.unwrap_or_default()
        )));
    }
    Ok((reserved, note))
}

/// What `opts` reserves on this machine, read afresh from sysfs: `Err` with the reason when it
/// leaves no CPU to place on (a start would fail on it), else a note when something is reserved
/// or the topology could not be read. `numapilot daemon --check` runs it, and so does a reload
/// before it accepts a file: a reload took a file the next start refused (review helper-50).
pub fn reservation_check(opts: &LiveOptions) -> Result<Option<String>, String> {
    match Topology::from_sysfs(&opts.root) {
        Ok(mut topo) => match reserve(&mut topo, opts) {
            Ok((_, note)) => Ok(note),
            Err(LiveError::Config(m)) => Err(m),
            Err(e) => Ok(Some(e.to_string())),
        },
        Err(e) => Ok(Some(format!("the topology could not be read ({e})"))),
    }
}

/// What one look at the hotplug files found ([`HotplugWatch::look`]).
#[derive(Debug)]
pub enum Hotplug {
    /// Nothing to do: the files are unreadable (no hotplug, a fixture root), unchanged since the
    /// last look, or name what the topology already has (also when the topology, read
    /// mid-change, does not show the change yet: then it is looked at again next time).
    Same,
    /// The topology read again, with other online CPUs, other nodes or other nodes with memory
    /// than before.
    Changed(Topology),
    /// The files changed but the topology could not be read again (looked at again next time).
    Unreadable {
        /// The online CPUs the file lists (the topology's own when the file cannot be read).
        online: CpuSet,
        /// Why the topology could not be read.
        error: String,
    },
}

/// Looks after a topology that disagrees with the hotplug files, at most this many
/// times in a row, before the files are taken as they are. Default 5 (cycles). Source: a choice; the
/// kernel's per-CPU files catch up with `online` within one hotplug operation (milliseconds), and
/// a sysfs that never agrees (a CPU listed online that no node and no cpuN directory names)
/// would otherwise be read in full every cycle. What it prevents: that cost, for ever.
pub const HOTPLUG_UNSETTLED_LOOKS: u32 = 5;

/// The files a [`HotplugWatch`] reads each look, each `None` when it cannot be read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct HotplugFiles {
    /// `ROOT/sys/devices/system/cpu/online`: the CPUs online.
    cpus: Option<CpuSet>,
    /// `ROOT/sys/devices/system/node/online`: the nodes online, with or without CPUs.
    nodes: Option<NodeSet>,
    /// `ROOT/sys/devices/system/node/has_memory`: the nodes with memory online.
    memory: Option<NodeSet>,
}

impl HotplugFiles {
    /// One short read of each file. `has_normal_memory` is not read: which zone a node's memory
    /// is in does not change where pages may go, and `has_memory` changes with it.
    fn read(root: &Path) -> Self {
        let node = |name: &str| node_list(root, name);
        HotplugFiles {
            cpus: numapilot_topology::sysfs::cpu_list(root, "online").ok().flatten(),
            nodes: node("online"),
            memory: node("has_memory"),
        }
    }

    fn none(&self) -> bool {
        self.cpus.is_none() && self.nodes.is_none() && self.memory.is_none()
    }

    /// Whether `t` shows what the files say: its online CPUs (their own files) and the CPUs its
    /// nodes list both the online CPUs (less `reserved`, which no node lists once reserved), its
    /// nodes the nodes online, and its nodes with memory those of `has_memory`. A file not read
    /// agrees with anything.
    fn agree(&self, t: &Topology, reserved: &CpuSet) -> bool {
        self.cpus.as_ref().is_none_or(|c| t.online_cpus() == *c && t.listed_cpus() == c.difference(reserved))
            && self.nodes.as_ref().is_none_or(|n| t.node_ids() == *n)
            && self.memory.as_ref().is_none_or(|m| t.memory_nodes() == *m)
    }
}

/// A node list of `ROOT/sys/devices/system/node` (`online`, `has_memory`), `None` when it is
/// absent or does not parse (the look then goes by the other files). Read through
/// [`numapilot_topology::sysfs::MAX_ATTRIBUTE_BYTES`] at most.
fn node_list(root: &Path, name: &str) -> Option<NodeSet> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(root.join("sys/devices/system/node").join(name))
        .ok()?
        .take(numapilot_topology::sysfs::MAX_ATTRIBUTE_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    NodeSet::parse_list(text.lines().next().unwrap_or("").trim()).ok()
}

/// How the machine changed from `before` to `after` beyond its CPUs, for the log: the nodes
/// online and the nodes with memory, each when it changed (`nodes online 0-1 -> 0-2, nodes
/// with memory 0-1 -> 0-2`); `None` when neither did.
pub fn node_change_from(after: &Topology, before: &Topology) -> Option<String> {
    let mut parts = Vec::new();
    for (what, a, b) in [
        ("nodes online", after.node_ids(), before.node_ids()),
        ("nodes with memory", after.memory_nodes(), before.memory_nodes()),
    ] {
        if a != b {
            parts.push(format!("{what} {} -> {}", b.to_list_or_none(), a.to_list_or_none()));
        }
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// CPU and memory hotplug seen through `ROOT/sys/devices/system/cpu/online`,
/// `ROOT/sys/devices/system/node/online` and `ROOT/sys/devices/system/node/has_memory`, one
/// short read of each a look. The node files catch a node that comes online with memory and no
/// CPU (CXL memory, memory hot-add) or goes away, which the CPU file never shows.
#[derive(Debug, Default)]
pub struct HotplugWatch {
    /// The files as last settled: unchanged files cost nothing more.
    last: Option<HotplugFiles>,
    /// Looks in a row that found the topology disagreeing with the file.
    unsettled: u32,
    /// Whether a look was taken (the first judges the CPU file alone, [`HotplugWatch::look`]).
    looked: bool,
    /// CPUs taken out of every topology read again ([`Topology::reserve`]).
    reserved: CpuSet,
    /// The CPU file as last read, settled or not ([`HotplugWatch::online_seen`]).
    seen: Option<CpuSet>,
    /// How the reservation was made ([`reserved_cpus`]'s `[actuation]` inputs), so it is judged
    /// again over the CPUs online after each change; `None`: `reserved` stays as given.
    rule: Option<(CpuSet, bool)>,
    /// The reservation's note when a change made it differ from the one before (taken by
    /// [`HotplugWatch::take_reservation_change`]).
    reservation_change: Option<String>,
}

impl HotplugWatch {
    /// The files against `before`, the topology in use; when they disagree the topology is read
    /// again from sysfs. A topology agrees with the files when its online CPUs (their own
    /// `online` files) and the CPUs its nodes list are both the CPU file's, its nodes are the
    /// nodes online and its nodes with memory are `has_memory`'s ([`HotplugFiles::agree`]); the
    /// topology handed over is clipped to the CPU file ([`Topology::clip_to_online`]), so what
    /// the policy places on ([`Topology::usable_cpus`]) is online by every source. The files are
    /// settled (not looked at again until one changes) unless the look must be repeated: the
    /// re-read failed, or caught sysfs mid-change.
    /// sysfs is read file by file, so one read is no snapshot: going offline, a CPU leaves
    /// `online` and its node's cpulist before its own file reads 0; coming back, the rig's 2-node
    /// guest read `online` and both CPUs' own files 0-3 while node 1's cpulist still listed CPU 2
    /// alone (compared on the per-CPU files only, that topology was settled and CPU 3 never used
    /// again). Then the next looks read again until they agree, at most
    /// [`HOTPLUG_UNSETTLED_LOOKS`] times in a row (a topology that cannot be read likewise:
    /// logged at each of those looks, then left until a file changes again).
    /// Only the CPU file was read before: a node that came online with memory alone (CXL, memory
    /// hot-add) was never seen, nor one that went away.
    pub fn look(&mut self, root: &Path, before: &Topology) -> Hotplug {
        let files = HotplugFiles::read(root);
        if files.none() {
            return Hotplug::Same;
        }
        if files.cpus.is_some() && self.seen != files.cpus {
            self.seen.clone_from(&files.cpus);
        }
        if self.last.as_ref() == Some(&files) {
            return Hotplug::Same;
        }
        // The topology in use already agrees (the first look, or the files back where they
        // were), unless the last read caught sysfs mid-change: then it is read again. Its nodes
        // list neither the offline CPUs nor the reserved ones. The first look judges the CPU
        // file alone and takes the node files as they are: the topology in use was read from the
        // same files a moment before (a node-only change in between waits for the next change of
        // a file), or it is a view a caller chose on purpose (the daemon's tests place on a
        // two-node view of a one-node machine): judged on the node files, such a view was read
        // again from sysfs at the first step and the machine's one node took its place.
        let first = self.last.is_none() && !self.looked;
        self.looked = true;
        let judged =
            if first { HotplugFiles { cpus: files.cpus.clone(), ..HotplugFiles::default() } } else { files.clone() };
        if self.unsettled == 0 && judged.agree(before, &self.reserved) {
            self.settle(files);
            return Hotplug::Same;
        }
        match Topology::from_sysfs(root) {
            Ok(mut topo) => {
                // Judged on the read as it came (a disagreement means looking again), handed
                // over clipped to the file, so no CPU any source calls offline is placed on
                // meanwhile (CI's rig run: going offline, node 1's cpulist still named CPU 2,
                // whose own file already said 0).
                if files.agree(&topo, &CpuSet::new()) {
                    self.settle(files.clone());
                } else {
                    self.unsettle(files.clone());
                }
                if let Some(online) = &files.cpus {
                    topo.clip_to_online(online);
                }
                self.judge_reservation(root, &topo.online_cpus());
                topo.reserve(&self.reserved);
                if topo.online_cpus() == before.online_cpus()
                    && topo.usable_cpus() == before.usable_cpus()
                    && node_change_from(&topo, before).is_none()
                {
                    Hotplug::Same
                } else {
                    Hotplug::Changed(topo)
                }
            }
            Err(e) => {
                let online = files.cpus.clone().unwrap_or_else(|| before.online_cpus());
                self.unsettle(files);
                Hotplug::Unreadable { online, error: e.to_string() }
            }
        }
    }

    /// A watch that takes `reserved` out of every topology it reads again (the live host's own
    /// is made with the CPUs it reserved at start).
    pub fn with_reserved(reserved: CpuSet) -> Self {
        HotplugWatch { reserved, ..HotplugWatch::default() }
    }

    /// A watch that judges the reservation again ([`reserved_cpus`] with `[actuation]`'s
    /// `configured` list and `reserve_isolated`) over the CPUs online whenever it reads the
    /// topology again: a CPU the host keeps (outside init's affinity) that was offline at start
    /// is reserved when it comes online, not placed on (rule reserved-cpus-after-hotplug; judged
    /// once at start, such a CPU was free for placement; review helper-44).
    pub fn with_reservation(reserved: CpuSet, configured: CpuSet, reserve_isolated: bool) -> Self {
        HotplugWatch { reserved, rule: Some((configured, reserve_isolated)), ..HotplugWatch::default() }
    }

    /// The reservation's new note, once, after a change made it differ.
    pub fn take_reservation_change(&mut self) -> Option<String> {
        self.reservation_change.take()
    }

    fn judge_reservation(&mut self, root: &Path, online: &CpuSet) {
        let Some((configured, reserve_isolated)) = &self.rule else { return };
        match reserved_cpus(root, configured, *reserve_isolated, online) {
            Ok((reserved, note)) if reserved != self.reserved => {
                self.reserved = reserved;
                self.reservation_change = Some(note.unwrap_or_else(|| {
                    "no CPU online is reserved now (a CPU kept for the host went offline, or none is kept any more)"
                        .into()
                }));
            }
            Ok(_) => {}
            // The sysfs files of the reservation unreadable mid-change: the old one stays.
            Err(e) => tracing::warn!("CPU hotplug: the reserved CPUs could not be judged again ({e}); kept"),
        }
    }

    fn settle(&mut self, files: HotplugFiles) {
        self.last = Some(files);
        self.unsettled = 0;
    }

    /// One more look that must be repeated; after [`HOTPLUG_UNSETTLED_LOOKS`] of them in a row
    /// the files are settled as they are.
    fn unsettle(&mut self, files: HotplugFiles) {
        self.unsettled += 1;
        if self.unsettled >= HOTPLUG_UNSETTLED_LOOKS {
            self.settle(files);
        } else {
            self.last = None;
        }
    }

    /// The online CPUs as the file read at the last look (`None` before one read it).
    pub fn online_seen(&self) -> Option<&CpuSet> {
        self.seen.as_ref()
    }

    /// Whether the files as last read are settled (not read again until one changes).
    pub fn settled(&self) -> bool {
        self.last.is_some()
    }
}

/// The live kernel as a [`Host`].
#[derive(Debug)]
pub struct LiveHost {
    /// Children of processes on record seen at the last sample, not on record themselves: pid ->
    /// (start time, a copy of the parent's record) (rule inheritors-on-record,
    /// [`LiveHost::adopt_inheritors`]).
    inheritors: std::collections::BTreeMap<u32, (u64, ProcessOriginal)>,
    topo: Topology,
    opts: LiveOptions,
    observer: observe::TieredObserver,
    /// numa_maps reads of the loop outside the observer (the self-pinned check before an action),
    /// under the observer's deadline guard.
    mm_reader: numapilot_observe::Reader,
    signals: Signals,
    originals: Originals,
    budget: TokenBucket,
    cpuset: Option<CpusetHierarchy>,
    /// The hierarchy a process's cpuset CPUs are read from, for confinement and the pinned check
    /// (`cpuset` when configured, else any cpuset hierarchy mounted; `None` off the live system).
    cpuset_read: Option<CpusetHierarchy>,
    refusal: Option<String>,
    notes: Vec<String>,
    page_size: u64,
    affinity_rounds: u32,
    /// Cycles a process counts as busy for the signal scans: the longer of their cadences.
    signal_window: u32,
    /// /proc/stat as read when the last step ended (`Host::step_done`), for the next sample's
    /// `cpu_base` (rule "observer-not-load", model load.rs).
    cpu_base: Option<numapilot_observe::parse::proc_stat::ProcStat>,
    /// The page mover (`LiveTuning::background_moves`; none when observing only).
    mover: Option<mover::Mover>,
    /// Processes started on this daemon's launch advice, named by their launcher (`advise --pid`):
    /// pid -> (start time, the advised nodes). Their CPU narrowing and a memory policy within those
    /// nodes are the advice's, not "placed by themselves" ([`LiveHost::adopt`]).
    adopted: std::collections::BTreeMap<u32, (u64, NodeSet)>,
    /// A topology read again after CPU hotplug, not yet taken by the engine
    /// ([`Host::take_topology_change`]).
    topo_change: Option<Topology>,
    /// CPU and node hotplug: the files of [`HotplugWatch`] as last settled.
    hotplug: HotplugWatch,
    /// What putting back processes taken out of numapilot's hands did since the run loop last
    /// asked ([`LiveHost::take_released`]).
    released: RestoreReport,
    /// Pids whose release could not be judged or done at the last look ([`LiveHost::release_left`]:
    /// their stat unreadable for want of a descriptor or memory, or their restore failed and was
    /// kept for another try): pid -> (whether a reload narrowed the scope then, looks so far).
    /// Looked at again at each sample until judged, gone, or [`RELEASE_LOOKS`] looks.
    release_pending: std::collections::BTreeMap<u32, (bool, u32)>,
}

/// Looks at a pid whose release could not be judged or done ([`LiveHost::release_left`]), one a
/// sample, before it is given up with a log line. Default 10 (samples: 10 s at the default
/// interval, longer while the loop backs off). Source: a choice; a daemon short of descriptors or
/// memory for longer has bigger troubles, which its logs show. What it prevents: a process taken
/// out of numapilot's hands while its stat could not be read staying where numapilot put it
/// until the next reload or shutdown (it was looked at once), and a pid looked at every sample
/// for ever.
pub const RELEASE_LOOKS: u32 = 10;

/// Adopted processes kept, count. Default 4096. Source: a choice, far above the launches a host
/// makes within a process's lifetime. What it prevents: a launcher naming pids in a loop growing
/// the table without bound (the oldest entries, by pid order, go first once gone processes are
/// dropped).
const ADOPTED_KEPT: usize = 4096;

/// Longest wait at shutdown for the page move in flight before the restore goes on without it.
/// Default 10 s. Source: a choice within systemd's `TimeoutStopSec=60` of the unit, leaving the
/// restore most of it; a move asked to stop ends at its next batch, well under a second. Prevents:
/// a copy stuck in the kernel keeping the daemon from restoring anything before SIGKILL.
pub const SHUTDOWN_MOVE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Whether `m`, the mask a thread of `pid` has now, is one numapilot set on the process (`ours`,
/// `state::masks_we_set`), as set or as the kernel cut it since to the CPUs online and to the
/// cpuset (`state::carries_ours`). What it may be cut to is read once per caller (`allowed`), and
/// only for a mask that is not one of ours as it stands.
fn is_ours(
    pid: u32,
    m: &CpuSet,
    ours: &[CpuSet],
    allowed: &mut Option<Option<CpuSet>>,
    cpuset_read: Option<&CpusetHierarchy>,
) -> bool {
    ours.contains(m)
        || (ours.iter().any(|s| m.is_subset(s)) && {
            let a = allowed.get_or_insert_with(|| state::allowed_cpus(pid, cpuset_read));
            state::carries_ours(m, ours, a.as_ref())
        })
}

/// Why the /proc mounted here cannot name this daemon's processes, if it cannot: it belongs to
/// another pid namespace (a container given the host's /proc, or a daemon started with `unshare
/// --pid` and no /proc of its own), so /proc/PID is not the process `sched_setaffinity(PID)` or
/// `move_pages(PID)` would act on, and the pid and start-time check would confirm the wrong one.
/// `/proc/self` names this process as that /proc numbers it.
fn foreign_proc() -> Option<String> {
    let me = std::process::id();
    let seen = std::fs::read_link("/proc/self");
    match seen.as_ref().ok().and_then(|t| t.to_str()).and_then(|t| t.parse::<u32>().ok()) {
        Some(p) if p == me => None,
        Some(p) => Some(format!(
            "the /proc mounted here belongs to another pid namespace (/proc/self is {p}, this process is pid \
             {me}): its pids are not the ones system calls take, so numapilot changes no process (mount a /proc \
             of this namespace, or run in the host's)"
        )),
        None => Some(format!(
            "/proc/self does not name this process ({}): /proc belongs to another pid namespace, so numapilot \
             changes no process",
            match seen {
                Ok(t) => t.display().to_string(),
                Err(e) => e.to_string(),
            }
        )),
    }
}

/// Candidate children kept for rule inheritors-on-record between two samples, count. Default 1,024.
/// Source: a choice, far above the children a handful of placed processes keep alive. What it
/// prevents: a placed process that forks thousands of children a cycle (a build driver) growing
/// the table with it; past it, the children left out are found by the restore's walk from their
/// parent as before, while it lives.
const INHERITORS_KEPT: usize = 1024;

/// This kernel's base page size, bytes.
pub(crate) use numapilot_observe::reader::page_size;

impl LiveHost {
    /// Opens the live host. If the state file holds originals from a previous run that did not
    /// shut down cleanly, they are restored first and reported (and the file emptied), before
    /// anything else happens.
    pub fn open(topo: Topology, opts: LiveOptions) -> Result<(Self, RestoreReport), LiveError> {
        Self::open_with(topo, opts, LiveTuning::default())
    }

    /// [`LiveHost::open`] with explicit [`LiveTuning`] (signal sources, observation tiers).
    pub fn open_with(
        mut topo: Topology,
        opts: LiveOptions,
        tuning: LiveTuning,
    ) -> Result<(Self, RestoreReport), LiveError> {
        // Before anything is restored or claimed: a reservation that leaves nothing to place on
        // stops the start with nothing done.
        let (reserved, reserved_note) = reserve(&mut topo, &opts)?;
        // The daemon keeps off them too: the threads it starts from here on (the page mover, the
        // readers) inherit this thread's mask. Under `isolcpus=` its default mask is without them
        // already; `reserved_cpus` needs this. Only a host that acts (an observer changes nothing).
        // SAFETY: geteuid has no preconditions.
        let acting = !opts.observe_only && unsafe { libc::geteuid() } == 0 && opts.root == Path::new("/");
        if let Some(own) = sched_getaffinity(0).ok().filter(|_| acting && !reserved.is_empty()) {
            let without = own.difference(&reserved);
            if without != own && !without.is_empty() {
                if let Err(e) = numapilot_actuate::sched_setaffinity(0, &without) {
                    tracing::warn!("could not keep the daemon off the reserved CPUs {}: {e}", reserved.to_list());
                }
            }
        }
        let mut report = RestoreReport::default();
        let mut stale_note = None;
        // /proc is checked before the state file is touched: crash recovery reads start times
        // there and acts on the pids it names, so with no /proc, or one of another pid namespace
        // (whose pids are not the ones system calls take), it would have restored the wrong
        // processes or read every record as gone and emptied the file (review helper-37).
        let proc_dir = opts.root.join("proc");
        if !proc_dir.join("self").exists() {
            return Err(LiveError::Unavailable(format!("{} is not a mounted /proc", proc_dir.display())));
        }
        let foreign = if opts.root == Path::new("/") { foreign_proc() } else { None };
        // A start that acts owns the state file first (`Originals::claim`): one that is refused
        // there (another daemon acting on the same file) has restored and written nothing.
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        let acts = !opts.observe_only && euid == 0 && opts.root == Path::new("/") && foreign.is_none();
        let originals = if acts {
            Originals::claim(&opts.state_path).map_err(LiveError::State)?
        } else {
            Originals::new(&opts.state_path)
        };
        if let Some(file) = Originals::load(&opts.state_path).map_err(LiveError::State)? {
            // Records of another boot name pids of processes long gone: another process may
            // have each pid and start time now.
            let other_boot = file.boot_id.as_ref().is_some_and(|b| state::boot_id().as_ref() != Some(b));
            // Records of another pid namespace (a daemon in a container given the host's state
            // directory, or the host's daemon's file seen from a container) name pids of another
            // numbering: not restored, and not overwritten by this start either.
            let other_ns = file.pid_ns.filter(|&ns| !file.processes.is_empty() && state::pid_namespace() != Some(ns));
            if !acts && !file.processes.is_empty() {
                // Restoring is acting: a dry run (or a user without the rights, or a daemon that
                // cannot trust /proc) leaves the file for the next start that acts.
                stale_note =
                    Some(state::left_alone_message(&opts.state_path, file.processes.len(), &LeftAlone::NoActing));
            } else if let Some(ns) = other_ns {
                let why = LeftAlone::OtherNamespace { theirs: ns, ours: state::pid_namespace() };
                return Err(LiveError::State(state::left_alone_message(&opts.state_path, file.processes.len(), &why)));
            } else if other_boot {
                stale_note =
                    Some(state::left_alone_message(&opts.state_path, file.processes.len(), &LeftAlone::OtherBoot));
            } else {
                let records = file.processes.iter().map(|r| (r.pid, r.clone())).collect();
                state::restore_records(&records, &mut report);
            }
            if !file.processes.is_empty() && acts {
                originals.save().map_err(LiveError::State)?;
            }
        }
        let mut notes: Vec<String> = stale_note.into_iter().collect();
        notes.extend(reserved_note);
        notes.extend(other_placers(&opts.root));
        let cpuset = match opts.cpuset {
            CpusetMode::Off => None,
            CpusetMode::Auto => {
                let h = CpusetHierarchy::detect(None);
                if h.is_none() {
                    notes.push(
                        "cpuset: no cgroup hierarchy with the cpuset controller is mounted; thread affinity only"
                            .into(),
                    );
                }
                h
            }
            CpusetMode::V1 | CpusetMode::V2 => {
                let v = if opts.cpuset == CpusetMode::V1 { CgroupVersion::V1 } else { CgroupVersion::V2 };
                Some(CpusetHierarchy::detect(Some(v)).ok_or_else(|| {
                    LiveError::Unavailable(format!(
                        "cpuset {v:?} was asked for but no such hierarchy with the cpuset controller is mounted"
                    ))
                })?)
            }
        };
        let refusal = if euid != 0 {
            Some(format!("not running as root (effective uid {euid}): observe-only, numapilot changes no process"))
        } else if let Some(why) = foreign {
            Some(why)
        } else if opts.observe_only {
            Some("observe-only mode (dry run): numapilot changes no process".to_string())
        } else if opts.root != Path::new("/") {
            Some(format!("observing {} instead of the live system: numapilot changes no process", opts.root.display()))
        } else {
            None
        };
        if let Some(r) = &refusal {
            notes.push(r.clone());
        }
        let mut signals = Signals::open_under(&opts.root, tuning.signals, tuning.signal_tuning);
        notes.extend(signals.notes().iter().cloned());
        let ps = page_size();
        let observer = observe::TieredObserver::new(&opts, &tuning.tiers);
        let mm_reader = numapilot_observe::Reader::new("/").with_guard(observer.guard().clone());
        // No mover when nothing is acted on; a thread that cannot start leaves moves synchronous.
        let mover = if tuning.background_moves && refusal.is_none() {
            let reader = mm_reader.clone();
            let work: mover::Work = std::sync::Arc::new(move |j: &mover::Job, threads: usize| {
                let t = j.action.target;
                run_page_job(&reader, &j.action.kind, t.pid, t.starttime, ps, j.allowance, threads)
            });
            match mover::Mover::spawn(work, std::sync::Arc::new(mover::mover_progress)) {
                Ok(m) => Some(m.with_stuck_after(std::time::Duration::from_millis(tuning.stuck_move_ms))),
                Err(e) => {
                    notes.push(format!("page mover: thread not started ({e}); page moves run inside the loop"));
                    None
                }
            }
        } else {
            None
        };
        // The hierarchy confined processes' cpusets are read from (read only; placing through
        // cpusets is `cpuset` above): the one configured, else any mounted, on the live system.
        let cpuset_read =
            if opts.root == Path::new("/") { cpuset.clone().or_else(|| CpusetHierarchy::detect(None)) } else { None };
        let mut observer = observer;
        observer.set_cpusets(cpuset_read.clone());
        signals.set_guard(observer.guard().clone());
        let host = Self {
            mm_reader,
            observer,
            cpuset_read,
            originals,
            budget: TokenBucket::new(opts.migrate_mb_per_s, ps, numapilot_observe::reader::monotonic_ns()),
            signals,
            cpuset,
            refusal,
            notes,
            page_size: ps,
            affinity_rounds: tuning.affinity_rounds,
            signal_window: tuning.signal_tuning.maps_every.max(tuning.signal_tuning.sockets_every).max(1),
            cpu_base: None,
            mover,
            adopted: std::collections::BTreeMap::new(),
            inheritors: std::collections::BTreeMap::new(),
            topo_change: None,
            hotplug: HotplugWatch::with_reservation(reserved, opts.reserved_cpus.clone(), opts.reserve_isolated),
            released: RestoreReport::default(),
            release_pending: std::collections::BTreeMap::new(),
            topo,
            opts,
        };
        Ok((host, report))
    }

    /// CPU and node hotplug: `/sys/devices/system/cpu/online`, `/sys/devices/system/node/online`
    /// and `has_memory` (one short read each a cycle) against the topology's online CPUs, nodes and
    /// nodes with memory; when they differ the topology is read again from sysfs (a node whose
    /// CPUs all went offline then has none, so nothing is placed there, CPUs that came back are
    /// used again, and a node that came online with memory alone takes pages), handed to the
    /// engine through [`Host::take_topology_change`], and logged once.
    /// Without the reads (a kernel without hotplug, a fixture root) the topology stays; when the
    /// re-read fails it stays too and the re-read is tried again next cycle (one log line each).
    ///
    /// Why: a topology read once at start believed an offlined node's CPUs idle: the rig's 2-node
    /// guest, node 1's CPUs taken offline, had the daemon ask for CPUs 2-3 every step (EINVAL,
    /// refused), move a process's memory there, and take every thread's `sched_getaffinity` (the
    /// kernel's mask within the online CPUs) for a process that had narrowed itself.
    fn follow_hotplug(&mut self) {
        match self.hotplug.look(&self.opts.root, &self.topo) {
            Hotplug::Same => {}
            Hotplug::Changed(topo) => {
                let cpus =
                    topo.online_cpus() != self.topo.online_cpus() || topo.usable_cpus() != self.topo.usable_cpus();
                if cpus {
                    tracing::warn!("CPU hotplug: {}; topology read again", topo.cpu_change_from(&self.topo));
                }
                if let Some(nodes) = node_change_from(&topo, &self.topo) {
                    tracing::warn!("node hotplug: {nodes}; topology read again");
                }
                if let Some(note) = self.hotplug.take_reservation_change() {
                    tracing::warn!("CPU hotplug: {note}");
                }
                self.topo = topo.clone();
                self.topo_change = Some(topo);
            }
            Hotplug::Unreadable { online, error } => tracing::warn!(
                "hotplug: online CPUs {} -> {}, but the topology could not be read again ({error}); \
                 keeping the old one (read again at the next cycles)",
                self.topo.usable_cpus().to_list_or_none(),
                online.to_list_or_none()
            ),
        }
        // The observer judges narrowed threads against the online CPUs and reads cpusets' CPUs
        // again when they change.
        if let Some(on) = self.hotplug.online_seen() {
            self.observer.online_changed(on);
        }
        // The access sampler's per-CPU events on the CPUs online and not reserved (no PMU
        // interrupt beside an isolated CPU's task, which is never placed), every cycle (a slice
        // compare when nothing changed), so a re-open that failed is tried again.
        let on: Vec<u32> = self.topo.usable_cpus().iter().collect();
        self.signals.follow_cpus(&on);
    }

    /// The options it runs with.
    pub fn options(&self) -> &LiveOptions {
        &self.opts
    }

    /// Why every action is refused (non-root, observe-only, a fixture root), or `None` when the host
    /// acts.
    pub fn refusal(&self) -> Option<&str> {
        self.refusal.as_deref()
    }

    /// Why every action is refused though the daemon was asked to act, as root (a /proc of another
    /// pid namespace, a root that is not the live system), or `None`.
    pub fn unasked_refusal(&self) -> Option<&str> {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        self.refusal.as_deref().filter(|_| root && !self.opts.observe_only)
    }

    /// One line per thing the operator should know once (observe-only and why, a cpuset hierarchy
    /// that is missing, signal sources that are missing).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Counts of the last observation (processes, threads, how many were read in each tier).
    pub fn tier_stats(&self) -> TierStats {
        self.observer.stats
    }

    /// What the signal sources spent in the last sample, per source.
    pub fn signal_cost(&self) -> crate::signals::SignalCost {
        self.signals.last_cost()
    }

    /// The access sampler's counts since start, for status and the metrics; `None` without a
    /// sampler (no PMU and no page-fault fallback, or `[signals]` turned it off).
    pub fn sampler_status(&self) -> Option<crate::control::SamplerStatus> {
        let (event, precise) = self.signals.sampler_event()?;
        let st = self.signals.stats();
        Some(crate::control::SamplerStatus {
            event: event.to_string(),
            precise,
            samples: st.samples,
            not_accesses: st.dropped.saturating_sub(st.malformed + st.unattributed),
            undecodable: st.malformed,
            no_thread: st.unattributed,
            truncations: st.aux_truncated,
            unplaced: st.unplaced,
            lost: st.lost,
            throttles: st.throttles,
            reopens: st.sampler_reopens,
        })
    }

    /// Times a signal source went from working to failing at run time since start (each logged
    /// once as a warning).
    pub fn signal_source_failures(&self) -> u64 {
        self.signals.stats().source_failures
    }

    /// When `pid`'s numa_maps was last read ([`observe::TieredObserver::numa_maps_read_ns`]).
    pub fn numa_maps_read_ns(&self, pid: u32) -> Option<u64> {
        self.observer.numa_maps_read_ns(pid)
    }

    /// The processes of the last sample whose maps and sockets the signal scans read (see
    /// [`observe::TieredObserver::detail_pids`]), sorted.
    pub fn scan_pids(&self) -> Vec<u32> {
        self.observer.detail_pids(u64::from(self.signal_window))
    }

    /// The cpuset hierarchy in use, if any.
    pub fn cpuset_hierarchy(&self) -> Option<&CpusetHierarchy> {
        self.cpuset.as_ref()
    }

    /// The live host's tables, by name (the observer's, the signal sources', the originals',
    /// processes adopted from launch advice): with `Engine::bookkeeping`, what `numapilot status`
    /// reports as bookkeeping and the metric `numapilot_bookkeeping_entries` exports.
    pub fn bookkeeping(&self, out: &mut Vec<(&'static str, usize)>) {
        self.observer.bookkeeping(out);
        self.signals.bookkeeping(out);
        self.originals.bookkeeping(out);
        out.push(("host.adopted", self.adopted.len()));
        out.push(("host.inheritors", self.inheritors.len()));
    }

    /// The start went through: the state file's lock and the directories made for it stay
    /// ([`Originals::keep_claim`]); a host dropped before this removes them.
    pub fn keep_claim(&mut self) {
        self.originals.keep_claim();
    }

    /// A save of the state file failed and none has succeeded since: nothing is changed until one
    /// does (rule originals-on-disk-first; `numapilot status --check` says so).
    pub fn state_unsaved(&self) -> bool {
        self.originals.unsaved()
    }

    /// Processes whose read of numa_maps or maps is blocked in the kernel now (left out of the
    /// observation until it returns), and the reads given up as stalled since start.
    pub fn stalled_reads(&self) -> (Vec<crate::control::StalledRead>, u64) {
        let g = self.observer.guard();
        let now = g
            .stuck()
            .into_iter()
            .map(|s| crate::control::StalledRead { pid: s.pid, file: s.path, for_s: s.for_.as_secs_f64() })
            .collect();
        (now, g.counts().stalled)
    }

    /// Cpuset cgroups of exited processes whose removal failed and is tried again each cycle.
    pub fn unreleased_cgroups(&self) -> usize {
        self.originals.unreleased()
    }

    /// Processes whose originals are held (touched and not yet restored): `(pid, starttime)`.
    pub fn touched(&self) -> Vec<(u32, u64)> {
        self.originals.procs.values().map(|p| (p.pid, p.starttime)).collect()
    }

    /// Takes a reloaded page-migration budget, MiB/s (`[actuation] migrate_mb_per_s`, else
    /// `[tunables] migrate_budget_mib_per_s`): the host enforces the budget the policy plans to
    /// from the next action. Before, the policy took a reload's budget and the host kept the one
    /// it started with, refusing a raised budget's moves as "used up" (a review of 2026-11-30).
    pub fn set_migrate_budget(&mut self, mb_per_s: u64) {
        if mb_per_s != self.opts.migrate_mb_per_s && mb_per_s > 0 {
            self.budget.set_rate(mb_per_s, self.page_size, numapilot_observe::reader::monotonic_ns());
            self.opts.migrate_mb_per_s = mb_per_s;
        }
    }

    /// Takes the exclusions and inclusions of `new` (names, pids, cgroups, include_pinned,
    /// min_rss_kb); every action checks them, so they hold from the next one (a configuration
    /// reload), and when a list changed the observer classifies every process again.
    pub fn set_exclusions(&mut self, new: &LiveOptions) {
        let o = &self.opts;
        // A reload that narrows what is managed without naming anyone (rule reload-narrows-scope):
        // a larger `min_rss_mib`, or `include_pinned` turned off. A process placed before it that
        // falls outside is put back as one a reload excludes; before, it stayed where numapilot
        // had put it until the daemon stopped, and a process that had pinned itself stayed off its
        // own pin although the operator had just said to leave such processes alone (a review of
        // 2026-11-30).
        let scope_narrowed = (o.include_pinned && !new.include_pinned) || new.min_rss_kb > o.min_rss_kb;
        let lists_changed = o.exclude_comm != new.exclude_comm
            || o.exclude_pids != new.exclude_pids
            || o.exclude_cgroups != new.exclude_cgroups
            || o.include_comm != new.include_comm
            || o.include_pids != new.include_pids
            || o.include_cgroups != new.include_cgroups;
        self.opts.exclude_comm.clone_from(&new.exclude_comm);
        self.opts.exclude_pids.clone_from(&new.exclude_pids);
        self.opts.exclude_cgroups.clone_from(&new.exclude_cgroups);
        self.opts.include_comm.clone_from(&new.include_comm);
        self.opts.include_pids.clone_from(&new.include_pids);
        self.opts.include_cgroups.clone_from(&new.include_cgroups);
        self.opts.include_pinned = new.include_pinned;
        self.opts.min_rss_kb = new.min_rss_kb;
        // Every process is classified again: one newly included is read (and planned for) from
        // the next cycle, one newly excluded leaves the sample and is put back as it was before
        // numapilot touched it; the rest keep what was read.
        if lists_changed {
            self.observer.reclassify(&self.opts);
            let left = self.observer.take_left();
            self.release_left(&left, scope_narrowed);
        } else if scope_narrowed {
            self.release_left(&[], true);
        }
    }

    /// Why process `pid`, which the model does not hold, is not managed, as far as one look can
    /// tell (for `explain`: "not in the daemon's view" named no reason, review helper-43): gone,
    /// a kernel thread, a rule of the lists (the daemon itself, its tools, `[exclude]`,
    /// `[include]`), a memory map locked in the kernel, or resident memory under `min_rss_mib`.
    /// `None`: none of those (a process seen since the last step, or one the model let go).
    pub fn why_unseen(&self, pid: u32) -> Option<String> {
        // From the tree it observes (why-unseen-under-root): on another root, the live system's
        // stat, status and cgroups of that pid described another process, or none.
        let root = &self.opts.root;
        let stat = match select::stat_under(root, pid) {
            Ok(Some(s)) => s,
            Ok(None) => return Some("no such process (it exited, or never was)".into()),
            Err(e) => return Some(unknown_whether_there(pid, &e)),
        };
        // A thread id, a zombie, init, a kernel thread: said as such (a thread id read "new since
        // the last step"; review helper-55).
        // (Init and the daemon itself are named by the exclusions below, as before.)
        if let Some(why) = select::launch_refusal_under(root, pid).filter(|_| pid != 1 && pid != std::process::id()) {
            return Some(why);
        }
        if stat.is_kernel_thread() {
            return Some("a kernel thread: never managed".into());
        }
        let cgroups = || select::cgroup_paths_under(root, pid, None).ok().flatten();
        if let Some(why) = select::exclusion(&self.opts, pid, &stat.comm, cgroups) {
            return Some(why);
        }
        if self.observer.guard().is_stuck(pid) {
            return Some(
                "its memory map is locked (a read of it is blocked in the kernel): left alone until it returns".into(),
            );
        }
        let rss_kb = stat.rss_pages.saturating_mul(self.page_size) / 1024;
        (rss_kb < self.opts.min_rss_kb).then(|| {
            format!(
                "its resident memory, {} MiB, is under [daemon] min_rss_mib ({} MiB): ignored, as kernel threads are",
                rss_kb / 1024,
                self.opts.min_rss_kb / 1024
            )
        })
    }

    /// Why process `r` (alive, `stat` its stat now) is outside what the options manage for a
    /// reason other than the lists, or `None`: its resident memory under `min_rss_kb`, or, with
    /// `include_pinned` off, a memory policy of its own in numa_maps or an original CPU mask (as
    /// recorded before numapilot's first change) narrower than its cpuset allows. An original that
    /// was exactly its cpuset's CPUs then (`cpuset_cpus` of the record) is no pin, though the
    /// cpuset has grown since. A memory policy that cannot be read counts as its own (`select::pinned`,
    /// as for an action: put back). `Err`: its cpuset could not be read, so whether its original was
    /// a pin is unknown (it counted as no pin, and the process stayed where numapilot put it).
    fn out_of_scope(
        &self,
        r: &state::ProcessOriginal,
        stat: &numapilot_observe::parse::stat::TaskStat,
    ) -> Result<Option<String>, String> {
        let rss_kb = stat.rss_pages.saturating_mul(self.page_size) / 1024;
        if rss_kb < self.opts.min_rss_kb {
            return Ok(Some(format!(
                "resident memory {} MiB is under min_rss_mib {}",
                rss_kb / 1024,
                self.opts.min_rss_kb / 1024
            )));
        }
        if self.opts.include_pinned {
            return Ok(None);
        }
        let advised = self.adopted.get(&r.pid).filter(|(st, _)| *st == r.starttime).map(|(_, n)| n);
        if let Some(why) = select::pinned(&self.mm_reader, &self.topo, self.cpuset_read.as_ref(), r.pid, true, advised)
        {
            return Ok(Some(why));
        }
        if advised.is_some() {
            return Ok(None);
        }
        let Some(allowed) = select::cpuset_cpus(&self.topo, self.cpuset_read.as_ref(), r.pid) else {
            return Err("its cpuset could not be read: whether its original mask was a pin is unknown".into());
        };
        let allowed = allowed.intersection(&self.topo.usable_cpus());
        let then = r.cpuset_cpus.as_deref();
        Ok(std::iter::once(&r.default_cpus).chain(r.threads.values()).find_map(|orig| {
            let mask = CpuSet::parse_list(orig).ok()?;
            let pinned = Some(orig.as_str()) != then && !allowed.is_subset(&mask.intersection(&allowed));
            pinned.then(|| {
                format!(
                    "it had pinned itself to CPUs {orig} before numapilot placed it (its cpuset allows {})",
                    allowed.to_list()
                )
            })
        }))
    }

    /// Puts back every process numapilot changed that the lists now leave out (excluded, or not in
    /// a set `[include]`): its original affinity and cpuset, as at shutdown; its pages stay where
    /// they are. Without it an operator's exclusion stopped further moves but left the process
    /// pinned where numapilot had put it until the daemon stopped, and a later reload including it
    /// again found numapilot's own mask and read it as the process's own pin. The report is added
    /// to what [`LiveHost::take_released`] returns. `seen_leaving`: the pids the observer saw leave
    /// since it was last asked (`TieredObserver::take_left`). `scope`: a reload narrowed the
    /// options (rule reload-narrows-scope), so a process [`LiveHost::out_of_scope`] names goes
    /// back too (only then: a process shrinking under `min_rss_mib` while it runs stays placed).
    ///
    /// A process whose stat cannot be read (EMFILE, ENOMEM) cannot be judged: it is kept pending
    /// and looked at again at each sample, as is one whose cgroups (a cgroup list set) or, for a
    /// narrowed scope, cpuset cannot be read so (`select::exclusion_known`,
    /// [`LiveHost::out_of_scope`]'s `Err`), and one whose restore failed (or a descendant of which
    /// could not be found, judged or put back) and was kept on record for another try, until put
    /// back, judged to stay, gone, or [`RELEASE_LOOKS`] looks (then one log line). Before, it was
    /// looked at once and left where numapilot put it; an unreadable cgroup counted as excluded
    /// (a process still managed was put back) and an unreadable cpuset as in scope (one a reload
    /// took out stayed placed).
    fn release_left(&mut self, seen_leaving: &[u32], scope: bool) {
        let mut pending = std::mem::take(&mut self.release_pending);
        let mut unsure: Vec<(u32, bool, String)> = Vec::new();
        // The processes the observer saw leave: a page move of theirs stops at its next batch,
        // whether or not anything else of theirs is on record (a move needs no record). Every
        // record is checked below.
        let look: std::collections::BTreeSet<u32> = seen_leaving.iter().chain(pending.keys()).copied().collect();
        for &pid in &look {
            match select::stat_now(pid) {
                Ok(Some(st)) => apply::stop_moves_of(pid, st.starttime, apply::STOP_RELEASED),
                Ok(None) => {}
                Err(e) if !self.originals.procs.contains_key(&pid) => {
                    unsure.push((pid, scope, format!("/proc/{pid}/stat: {e}")));
                }
                // A record is judged below, with the same read.
                Err(_) => {}
            }
        }
        let mut left: Vec<u32> = Vec::new();
        for r in self.originals.procs.values() {
            let scope = scope || pending.get(&r.pid).is_some_and(|&(s, _)| s);
            let stat = match select::stat_now(r.pid) {
                Ok(Some(stat)) if stat.starttime == r.starttime => stat,
                // Gone (or another process): its record goes with the exited ones.
                Ok(_) => continue,
                Err(e) => {
                    unsure.push((r.pid, scope, format!("/proc/{}/stat: {e}", r.pid)));
                    continue;
                }
            };
            // A verdict that rests on a read that failed for want of a descriptor or memory (its
            // cgroups, its cpuset) is judged again at the next sample, as an unreadable stat is:
            // taken as "excluded" it put back a process still managed, taken as "in scope" it left
            // one a reload excluded where numapilot put it.
            let came_from = r.cpuset.as_ref().map(|c| c.original.as_str());
            let out =
                select::exclusion_known(&self.opts, r.pid, &stat.comm, || select::cgroup_paths_now(r.pid, came_from))
                    .and_then(|why| match why {
                        Some(why) => Ok(Some(why)),
                        None if scope => self.out_of_scope(r, &stat).inspect(|why| {
                            if let Some(why) = why {
                                tracing::info!(
                                    "pid {} ({}): put back after a reload: {why}",
                                    r.pid,
                                    numapilot_model::tasks::printable(&stat.comm)
                                )
                            }
                        }),
                        None => Ok(None),
                    });
            match out {
                Ok(Some(_)) => left.push(r.pid),
                Ok(None) => {}
                Err(why) => unsure.push((r.pid, scope, why)),
            }
        }
        if !left.is_empty() {
            // A page move of theirs still running stops before its next call to the kernel.
            for pid in &left {
                if let Some(r) = self.originals.procs.get(pid) {
                    apply::stop_moves_of(r.pid, r.starttime, apply::STOP_RELEASED);
                }
            }
            let r = self.originals.release(&left);
            let acc = &mut self.released;
            acc.restored += r.restored;
            acc.gone += r.gone;
            acc.inherited += r.inherited;
            acc.failed.extend(r.failed);
            // A restore that failed and was kept on record for another try is tried again at the
            // next sample (the record's own count, `state::RESTORE_TRIES`, bounds it).
            for pid in &left {
                if self.originals.procs.contains_key(pid) {
                    unsure.push((*pid, scope, "its restore failed".into()));
                }
            }
        }
        let mut given_up = Vec::new();
        for (pid, scope, why) in unsure {
            let looks = pending.remove(&pid).map_or(0, |(_, n)| n) + 1;
            if looks >= RELEASE_LOOKS {
                given_up.push(format!("{pid} ({why})"));
            } else {
                self.release_pending.insert(pid, (scope, looks));
            }
        }
        if !given_up.is_empty() {
            tracing::warn!(
                "whether {} left numapilot's hands could not be judged, or {} could not be put back, in \
                 {RELEASE_LOOKS} looks; left as they are until the next reload or shutdown: pid {}",
                numapilot_topology::plural(given_up.len(), "process"),
                if given_up.len() == 1 { "it" } else { "they" },
                given_up.join(", pid ")
            );
        }
    }

    /// Whether a release is pending ([`LiveHost::release_left`]: a process that could not be judged
    /// or put back, looked at again at the next sample).
    pub fn release_pending(&self) -> usize {
        self.release_pending.len()
    }

    /// What putting back processes taken out of numapilot's hands (a reload's `[exclude]` or
    /// `[include]`, or a process moved into or out of a listed cgroup) did since the last call;
    /// the default report when nothing was put back.
    pub fn take_released(&mut self) -> RestoreReport {
        std::mem::take(&mut self.released)
    }

    /// Puts every touched process back as it was, and empties the state file.
    pub fn restore_all(&mut self) -> RestoreReport {
        // Observe-only changed nothing, and the file may hold an earlier run's records, left for a
        // start that acts (see open_with).
        if self.opts.observe_only || (self.originals.procs.is_empty() && !self.opts.state_path.exists()) {
            return RestoreReport::default();
        }
        self.originals.restore_all()
    }

    /// The parent's original mask and the inherited one when `pid` inherited a mask this daemon
    /// set on its parent `ppid` at fork: the parent is on record (same start time) and every
    /// thread of `pid` runs under one mask numapilot set on it (`state::inherited_mask`), not the
    /// parent's original. `Ok(None)` otherwise. `Err`: whether it did cannot be told (the parent's
    /// stat, or the child's threads or masks, unreadable for want of a descriptor or memory): the
    /// action is refused and tried again, where the child was taken for one that had not
    /// inherited (and, `include_pinned` on, recorded with numapilot's mask as its original).
    fn inherited(&self, pid: u32, ppid: u32) -> Result<Option<(CpuSet, CpuSet)>, String> {
        let Some(rec) = self.originals.procs.get(&ppid) else { return Ok(None) };
        match select::still_there(ppid, rec.starttime) {
            Some(true) => {}
            Some(false) => return Ok(None),
            None => return Err(format!("the stat of its parent {ppid} could not be read")),
        }
        let Some(original) = CpuSet::parse_list(&rec.default_cpus).ok().filter(|c| !c.is_empty()) else {
            return Ok(None);
        };
        let mask = state::inherited_mask(pid, rec, self.cpuset_read.as_ref())?;
        Ok(mask.filter(|m| *m != original).map(|m| (original, m)))
    }

    /// Rule inheritors-on-record: children of processes on record that carry a mask numapilot set
    /// on their parent are put on record themselves, with their parent's original, so that a
    /// restore puts them back after the parent has gone. Until then a child was found only
    /// through its parent (`restore_inherited` walks the descendants of live records, and
    /// [`LiveHost::inherited`] asks the parent's record): once the parent exited (a script
    /// that starts a server and ends; a double fork) its record went, the child was reparented,
    /// and it kept numapilot's mask after the daemon stopped, taken meanwhile for self-pinned
    /// (review helper-37).
    ///
    /// ```text
    ///   sample N:   a process whose parent is on record, itself not   -> a candidate, with a
    ///                                                                     copy of the parent's record
    ///   sample N+1: the candidate alive (same start time), not on record, every thread on one
    ///               mask numapilot set on the parent (`state::inherited_mask`)
    ///                                                                  -> on record (saved)
    /// ```
    ///
    /// A child that lives less than one cycle (a build's compilers) is never written down. What is
    /// read: the sample's parent ids, and the threads' masks of the candidates only. A candidate
    /// that cannot be judged (its stat, threads or masks unreadable for want of a descriptor or
    /// memory) stays a candidate for the next sample: it was dropped, and once its parent had
    /// left the record nothing led to it again.
    fn adopt_inheritors(&mut self, s: &Sample) {
        let candidates = std::mem::take(&mut self.inheritors);
        let mut added = false;
        for (pid, (starttime, parent)) in candidates {
            if self.originals.procs.contains_key(&pid) {
                continue;
            }
            match select::still_there(pid, starttime) {
                Some(true) => {}
                Some(false) => continue,
                None => {
                    self.inheritors.insert(pid, (starttime, parent));
                    continue;
                }
            }
            let Some(original) = CpuSet::parse_list(&parent.default_cpus).ok().filter(|c| !c.is_empty()) else {
                continue;
            };
            match state::inherited_mask(pid, &parent, self.cpuset_read.as_ref()) {
                Ok(Some(mask)) if mask != original => {}
                Ok(_) => continue,
                Err(_) => {
                    self.inheritors.insert(pid, (starttime, parent));
                    continue;
                }
            }
            let comm = select::read_stat(pid).map(|st| numapilot_model::tasks::printable(&st.comm)).unwrap_or_default();
            let rec = self.originals.entry(pid, starttime, &comm, &original);
            for m in &parent.set_cpus {
                if let Ok(c) = CpuSet::parse_list(m) {
                    rec.note_set(&c);
                }
            }
            if rec.cpuset_cpus.is_none() {
                rec.cpuset_cpus.clone_from(&parent.cpuset_cpus);
            }
            added = true;
        }
        if added {
            if let Err(e) = self.originals.save() {
                tracing::warn!("state file, after recording children that inherited numapilot's mask: {e}");
            }
        }
        for p in &s.processes {
            if self.inheritors.len() >= INHERITORS_KEPT {
                break;
            }
            let Some(parent) = self.originals.procs.get(&p.stat.ppid) else { continue };
            if self.originals.procs.contains_key(&p.pid) || parent.set_cpus.is_empty() {
                continue;
            }
            self.inheritors.insert(p.pid, (p.stat.starttime, parent.clone()));
        }
    }

    /// Why process `pid`, on record (numapilot changed it), counts as placed by someone else since:
    /// a thread whose mask is none of the masks numapilot set (as the kernel cuts them:
    /// [`is_ours`]), not its original as recorded, and narrower than its cpuset allows (an
    /// operator's `taskset -p`, the program's own `pthread_setaffinity_np`). `None` for a
    /// process not on record or on a record from before the masks were kept. The check before
    /// an action looked at a process's threads only until numapilot first changed it: a pin set
    /// after that was overwritten by the next placement, and the restore then put back the
    /// original from before numapilot, so the pin was lost for good (review helper-37).
    fn repinned(&self, pid: u32, starttime: u64) -> Option<String> {
        let rec = self.originals.procs.get(&pid).filter(|r| r.starttime == starttime)?;
        let ours = state::masks_we_set(rec);
        if ours.is_empty() {
            return None;
        }
        // Threads that cannot be listed (no descriptor or memory left) may hide a pin: refused, as
        // a pin, until they can (they counted as none, and the next placement went ahead).
        let tids = match numapilot_actuate::list_threads(pid) {
            Ok(tids) => tids?,
            Err(e) => {
                return Some(format!(
                    "its threads could not be listed (/proc/{pid}/task: {e}): whether one was placed since is unknown"
                ))
            }
        };
        let mut cut: Option<Option<CpuSet>> = None;
        let mut allowed: Option<Option<CpuSet>> = None;
        for tid in tids {
            let Ok(m) = sched_getaffinity(tid as libc::pid_t) else { continue };
            if is_ours(pid, &m, &ours, &mut cut, self.cpuset_read.as_ref())
                || rec.threads.get(&tid).is_some_and(|o| CpuSet::parse_list(o).ok().as_ref() == Some(&m))
            {
                continue;
            }
            let allowed = allowed.get_or_insert_with(|| {
                select::cpuset_cpus(&self.topo, self.cpuset_read.as_ref(), pid)
                    .map(|c| c.intersection(&self.topo.usable_cpus()))
            });
            // Not narrowed (every CPU it may use): nobody's placement. Nor a mask the kernel
            // keeps (an io-wq worker born since, on 5.12-6.2: bound to one node).
            if allowed.as_ref().is_some_and(|a| !a.is_empty() && a.is_subset(&m))
                || numapilot_actuate::kernel_owns_affinity(pid, tid)
            {
                continue;
            }
            return Some(format!(
                "thread {tid} runs on CPUs {}, set since numapilot placed the process and not by numapilot (nor \
                 its original): the program's or an operator's own placement",
                m.to_list()
            ));
        }
        None
    }

    /// Records the originals of `pid` (every current thread's mask, the leader's as default) unless
    /// held already, and writes the state file. Err: the message why nothing may be changed.
    ///
    /// For a process on record, a thread born since with a mask of its own (not one numapilot set,
    /// which it would have inherited from its creator) is recorded with that mask before the next
    /// change, so a restore gives the program its own choice back; a thread that inherited
    /// numapilot's mask stays off the record and a restore gives it the leader's original. (With
    /// `include_pinned` off, a thread born since with a mask narrower than its cpuset makes the
    /// process its own placement: [`LiveHost::repinned`] refuses the change before this.)
    fn record(&mut self, pid: u32, starttime: u64, comm: &str, cpus: &CpuSet) -> Result<(), Outcome> {
        // Rule originals-on-disk-first: after a failed save, nothing changes until what is on
        // record in memory is on disk too (`Originals::unsaved`).
        if self.originals.unsaved() {
            self.save()?;
        }
        if self.originals.has(pid, starttime) {
            let Some(rec) = self.originals.procs.get_mut(&pid) else { return Ok(()) };
            let ours = state::masks_we_set(rec);
            let mut added = rec.note_set(cpus);
            let Ok(Some(tids)) = numapilot_actuate::list_threads(pid) else {
                return if added { self.save() } else { Ok(()) };
            };
            // Threads that ended since are dropped from the record: a process that lives for
            // weeks and starts and ends threads, placed thread by thread, kept the original of
            // every thread it ever had (in memory and in the state file, rewritten whole at each
            // change; review helper-33), and a tid reused by a later thread of it would have been
            // put back on a dead thread's mask.
            let before = rec.threads.len();
            // Gone only when its task directory says so: one listing can skip a live thread (a
            // readdir of a process's tasks resumes by position when threads exit between two of
            // its calls; review helper-37), and its original would be lost.
            rec.threads
                .retain(|t, _| tids.binary_search(t).is_ok() || numapilot_actuate::process::still_listed(pid, *t));
            added |= rec.threads.len() != before;
            let new: Vec<u32> = tids.into_iter().filter(|t| !rec.threads.contains_key(t)).collect();
            // Ours as the kernel reports it now, cut to the CPUs online and to the cpuset, not
            // only equal (`state::carries_ours`: after a CPU went offline or the cpuset narrowed,
            // a thread that inherited numapilot's mask read smaller and was recorded with it as
            // its own original, review of 2026-11-30). What the cut is cut to is read once, and
            // only for a mask that is not one of ours as it stands.
            let mut allowed: Option<Option<CpuSet>> = None;
            for tid in new {
                if let Ok(m) = sched_getaffinity(tid as libc::pid_t) {
                    if !is_ours(pid, &m, &ours, &mut allowed, self.cpuset_read.as_ref()) {
                        rec.threads.insert(tid, m.to_list());
                        added = true;
                    }
                }
            }
            return if added { self.save() } else { Ok(()) };
        }
        let leader = match sched_getaffinity(pid as libc::pid_t) {
            Ok(c) => c,
            Err(e) if e.errno() == Some(libc::ESRCH) => return Err(Outcome::Vanished),
            Err(e) => return Err(Outcome::Refused { message: format!("reading the original affinity: {e}") }),
        };
        let tids = match numapilot_actuate::list_threads(pid) {
            Ok(Some(t)) => t,
            Ok(None) => return Err(Outcome::Vanished),
            Err(e) => match apply::confirm_stop(pid, starttime, || format!("listing /proc/{pid}/task: {e}")) {
                Stop::Gone => return Err(Outcome::Vanished),
                Stop::Refused(message) => return Err(Outcome::Refused { message }),
            },
        };
        let mut masks = Vec::with_capacity(tids.len());
        for tid in tids {
            if let Ok(m) = sched_getaffinity(tid as libc::pid_t) {
                masks.push((tid, m.to_list()));
            }
        }
        // Its cpuset's CPUs now: a mask equal to them is put back as every possible CPU, so it
        // follows the cpuset again (rule restore-follows-cpuset, `ProcessOriginal::cpuset_cpus`).
        let cpuset_cpus =
            self.cpuset_read.as_ref().and_then(|h| select::cpuset_effective_cpus(h, pid)).map(|c| c.to_list());
        let rec = self.originals.entry(pid, starttime, comm, &leader);
        rec.threads.extend(masks);
        if rec.cpuset_cpus.is_none() {
            rec.cpuset_cpus = cpuset_cpus;
        }
        rec.note_set(cpus);
        self.save()
    }

    fn save(&mut self) -> Result<(), Outcome> {
        self.originals.save().map_err(|e| Outcome::Refused {
            message: format!("{e}; nothing is changed without its original on record"),
        })
    }

    fn set_affinity(&mut self, pid: u32, tid: Option<u32>, starttime: u64, comm: &str, cpus: &CpuSet) -> Outcome {
        // Online and not reserved: a plan naming a reserved CPU is refused, whoever made it.
        let usable = self.topo.usable_cpus();
        if cpus.is_empty() || !cpus.is_subset(&usable) {
            return Outcome::Refused {
                message: format!(
                    "CPUs {} are not a non-empty subset of the CPUs placement may use {}",
                    cpus.to_list(),
                    usable.to_list()
                ),
            };
        }
        if let Err(o) = self.record(pid, starttime, comm, cpus) {
            return o;
        }
        if let Some(tid) = tid {
            if !Path::new(&format!("/proc/{pid}/task/{tid}")).exists() {
                return Outcome::Vanished;
            }
            // A thread created since `record` listed them is recorded with its mask now, unless
            // that is one numapilot set (it inherited it from a thread of ours): such a thread
            // goes back to the leader's original, as `record` leaves every such thread off the
            // record (it was recorded with numapilot's mask as its own original and put back on
            // it at restore; review helper-33).
            let rec = self.originals.procs.get_mut(&pid);
            if let (Some(rec), Ok(m)) = (rec, sched_getaffinity(tid as libc::pid_t)) {
                if !rec.threads.contains_key(&tid)
                    && !is_ours(pid, &m, &state::masks_we_set(rec), &mut None, self.cpuset_read.as_ref())
                {
                    rec.threads.insert(tid, m.to_list());
                    if let Err(o) = self.save() {
                        return o;
                    }
                }
            }
            // Right before the call (the state file's fsync came between): the process is the one
            // meant and the thread is one of its own (a tid reused by another process's thread is
            // not under this pid's task directory).
            if !select::same_process(pid, starttime) {
                return vanished_or_refused(pid, starttime, "setting a thread's affinity");
            }
            if !Path::new(&format!("/proc/{pid}/task/{tid}")).exists() {
                return Outcome::Vanished;
            }
            return match numapilot_actuate::sched_setaffinity(tid as libc::pid_t, cpus) {
                Ok(()) => Outcome::Applied { pages_moved: 0 },
                Err(e) if e.errno() == Some(libc::ESRCH) => Outcome::Vanished,
                Err(e) => Outcome::Refused { message: e.to_string() },
            };
        }
        // A process an operator or a container runtime confined to a cpuset keeps its cgroup: moved
        // into one of numapilot's, it would leave the container's memory, pids and CPU limits (v2)
        // until the daemon exits. It gets thread affinity only, within its cpuset.
        // The cgroup placement this call made, to be undone when the threads then refuse their
        // mask: `(hierarchy, None)` the process was moved into numapilot's cgroup now, `(hierarchy,
        // Some(cpus))` the cgroup it was in already had `cpus` before.
        let mut cgroup_undo: Option<(CpusetHierarchy, Option<CpuSet>)> = None;
        if let Some(h) = self.cpuset.clone() {
            // Moved out of the cgroup numapilot made for it by someone else since (an operator, a
            // service manager): that move is theirs. Our cgroup is emptied (anything left in it goes
            // back to the original) and removed, and the process gets thread affinity only from now
            // on (`cpuset_declined`), never moved back (a review of 2026-11-29: the next placement
            // pulled it back into numapilot's cgroup, out of the one it had been put in).
            if let Err(o) = self.leave_cpuset_if_moved(&h, pid) {
                return o;
            }
            let rec = self.originals.procs.get(&pid);
            let ours = rec.is_some_and(|r| r.cpuset.is_some());
            let declined = rec.is_some_and(|r| r.cpuset_declined);
            // Under v2 a move into numapilot's cgroup also takes the process out of its cgroup's
            // memory, pids, CPU and IO limits: one whose cgroup sets any gets affinity only.
            let limited = || {
                h.version == CgroupVersion::V2
                    && h.cgroup_of(pid).ok().flatten().is_none_or(|cg| select::v2_limited(&h, &cg))
            };
            let confined = declined
                || (!ours
                    && (select::cpuset_effective_cpus(&h, pid)
                        .is_some_and(|c| !self.topo.online_cpus().is_subset(&c))
                        || limited()));
            if !confined {
                let before = match rec.and_then(|r| r.cpuset.as_ref()) {
                    Some(cs) => std::fs::read_to_string(h.dir(&cs.made_path()).join("cpuset.cpus"))
                        .ok()
                        .and_then(|c| CpuSet::parse_list(c.trim()).ok())
                        .filter(|c| !c.is_empty())
                        .map(Some),
                    None => Some(None),
                };
                if let Err(o) = self.place_cpuset(&h, pid, starttime, cpus) {
                    return o;
                }
                cgroup_undo = before.map(|b| (h, b));
            }
        }
        // Every thread listed now has its original on record (`record` above), or carries a mask
        // numapilot set. A thread born during the change inherited its creator's mask, which may
        // already be ours: a restore gives it the leader's original (the record's default), so
        // nothing more is recorded here.
        if !select::same_process(pid, starttime) {
            return vanished_or_refused(pid, starttime, "setting its affinity");
        }
        let r = set_process_affinity_while(
            pid,
            cpus,
            self.affinity_rounds,
            |_, _| {},
            || select::same_process(pid, starttime),
        );
        match r {
            Ok(Some(_)) => Outcome::Applied { pages_moved: 0 },
            // The check between rounds said no, or the call found no such process: gone only
            // when its stat confirms it.
            Ok(None) => vanished_or_refused(pid, starttime, "setting its affinity"),
            Err(e) if e.errno() == Some(libc::ESRCH) => vanished_or_refused(pid, starttime, "setting its affinity"),
            Err(e) => {
                // A refused placement changes nothing: the walk put its threads back, and the
                // cgroup placement made before it is undone too (the process stayed in
                // numapilot's cgroup on the refused CPUs, which the policies took for not placed).
                if let Some((h, before)) = cgroup_undo {
                    self.undo_cpuset(&h, pid, starttime, cpus, before);
                }
                Outcome::Refused { message: e.to_string() }
            }
        }
    }

    /// Undoes the cgroup placement of a refused [`LiveHost::set_affinity`] onto `cpus`: `before`
    /// `None`, the process was moved into numapilot's cgroup by it: the cgroup is released
    /// (emptied back to the original, removed) and the record drops it, saved; `Some(old)`, the
    /// cgroup it was in already gets its CPUs back. Either way the threads the cgroup cut to
    /// `cpus` get their masks from before: the walk read them after the cut and put them back so,
    /// and the kernel holds a task to the last mask it was given (since Linux 6.2), so a cgroup
    /// widened again would not widen them. Failures are logged (the record keeps what a restore
    /// needs).
    fn undo_cpuset(&mut self, h: &CpusetHierarchy, pid: u32, starttime: u64, cpus: &CpuSet, before: Option<CpuSet>) {
        let Some(rec) = self.originals.procs.get(&pid).filter(|r| r.starttime == starttime) else { return };
        let Some(cs) = rec.cpuset.clone() else { return };
        let mut errors = Vec::new();
        let mut released = false;
        match &before {
            Some(old) => {
                if let Err(e) = h.place(pid, &cs.made, old, || select::same_process(pid, starttime)) {
                    errors.push(format!("numapilot's cgroup {} not given back CPUs {old}: {e}", cs.made_path()));
                }
            }
            None => {
                let e = state::release_cgroup(&cs);
                released = e.is_empty();
                errors.extend(e);
            }
        }
        // Each thread still within `cpus`: the cgroup's old CPUs (the earlier placement, which
        // every thread carried), or, moved out of the cgroup, the original `record` took before
        // it (the leader's for a thread born since).
        let default = CpuSet::parse_list(&rec.default_cpus).ok().filter(|c| !c.is_empty());
        let r = numapilot_actuate::process::set_threads_affinity_each_while(
            pid,
            self.affinity_rounds,
            |tid| {
                let now = sched_getaffinity(tid as libc::pid_t).ok()?;
                if !now.is_subset(cpus) {
                    return None;
                }
                match (&before, rec.threads.get(&tid)) {
                    (Some(old), _) => Some(old.clone()),
                    (None, Some(c)) => CpuSet::parse_list(c).ok(),
                    (None, None) => default.clone(),
                }
            },
            |_, _, _| None,
            || select::same_process(pid, starttime),
        );
        match r {
            Ok(Some(done)) => errors.extend(done.refused.iter().map(|r| format!("thread {}: {}", r.tid, r.error))),
            Ok(None) => {}
            Err(e) => errors.push(e.to_string()),
        }
        for e in &errors {
            tracing::warn!("pid {pid}: undoing a refused placement: {e}");
        }
        if released {
            if let Some(rec) = self.originals.procs.get_mut(&pid) {
                rec.cpuset = None;
            }
            if let Err(o) = self.save() {
                tracing::warn!("pid {pid}: state file after a refused placement: {o:?}");
            }
        }
    }

    /// When `pid`'s record holds a cgroup numapilot made for it and the process is no longer in
    /// it, someone else moved it: the made cgroup is released (emptied back to the original,
    /// removed) and the record says so (`cpuset_declined`), saved. A process still in it, or
    /// without such a record, is left as it is.
    fn leave_cpuset_if_moved(&mut self, h: &CpusetHierarchy, pid: u32) -> Result<(), Outcome> {
        let Some(cs) = self.originals.procs.get(&pid).and_then(|r| r.cpuset.clone()) else { return Ok(()) };
        let made = cs.made_path();
        match h.cgroup_of(pid) {
            Ok(Some(now)) if now != made => {}
            _ => return Ok(()),
        }
        for e in state::release_cgroup(&cs) {
            tracing::warn!("pid {pid} left numapilot's cgroup: {e}");
        }
        if let Some(rec) = self.originals.procs.get_mut(&pid) {
            rec.cpuset = None;
            rec.cpuset_declined = true;
        }
        self.save()
    }

    fn place_cpuset(&mut self, h: &CpusetHierarchy, pid: u32, starttime: u64, cpus: &CpuSet) -> Result<(), Outcome> {
        let name = format!("{pid}-{starttime}");
        let has = self.originals.procs.get(&pid).is_some_and(|r| r.cpuset.is_some());
        if !has {
            let mut original = match h.cgroup_of(pid) {
                Ok(Some(c)) => c,
                Ok(None) => return Err(Outcome::Vanished),
                Err(e) => return Err(Outcome::Refused { message: format!("reading /proc/{pid}/cgroup: {e}") }),
            };
            // A child forked inside the cgroup numapilot made for its parent: it belongs where
            // the parent came from (recording numapilot's own cgroup as its original left it in a
            // one-node cpuset, removed under it, after a restore: a review of 2026-11-29).
            if select::in_numapilot_cgroup(&original) {
                let from =
                    self.originals.procs.values().find_map(|r| {
                        r.cpuset.as_ref().filter(|c| c.made_path() == original).map(|c| c.original.clone())
                    });
                match from {
                    Some(f) => original = f,
                    None => {
                        return Err(Outcome::Refused {
                            message: format!(
                                "cpuset: pid {pid} is in {original}, a numapilot cgroup of no process on record"
                            ),
                        })
                    }
                }
            }
            let version = if h.version == CgroupVersion::V1 { "v1" } else { "v2" };
            if let Some(rec) = self.originals.procs.get_mut(&pid) {
                rec.cpuset = Some(CpusetOriginal {
                    version: version.into(),
                    mount: h.mount.clone(),
                    original,
                    made: name.clone(),
                });
            }
            self.save()?;
        }
        if !select::same_process(pid, starttime) {
            return Err(vanished_or_refused(pid, starttime, "cpuset"));
        }
        // Asked again right before the write into cgroup.procs (a pid reused meanwhile would put
        // another process in numapilot's cgroup, and a restore into this one's original cgroup).
        match h.place(pid, &name, cpus, || select::same_process(pid, starttime)) {
            Ok(_) => Ok(()),
            Err(e) if e.errno() == Some(libc::ESRCH) => Err(vanished_or_refused(pid, starttime, "cpuset")),
            Err(e) => {
                if !has {
                    self.forget_unplaced_cpuset(h, pid);
                }
                Err(Outcome::Refused { message: format!("cpuset: {e}") })
            }
        }
    }

    /// After a first placement into a cgroup of numapilot's failed: the record (saved before the
    /// write, for crash recovery) names a cgroup the process never joined. Left so, the next
    /// action found the process outside it, took that for an operator's move and gave up cgroup
    /// placement for the process for good (`cpuset_declined`; review helper-37). While it is not
    /// in the made cgroup the record drops it again (the cgroup, made empty, removed with it), so
    /// the next action tries anew.
    fn forget_unplaced_cpuset(&mut self, h: &CpusetHierarchy, pid: u32) {
        let Some(cs) = self.originals.procs.get(&pid).and_then(|r| r.cpuset.clone()) else { return };
        if h.cgroup_of(pid).ok().flatten().is_none_or(|now| now == cs.made_path()) {
            return;
        }
        for e in state::release_cgroup(&cs) {
            tracing::warn!("pid {pid}: numapilot's cgroup after a failed placement: {e}");
        }
        if let Some(rec) = self.originals.procs.get_mut(&pid) {
            rec.cpuset = None;
        }
        if let Err(o) = self.save() {
            tracing::warn!("pid {pid}: state file after a failed cgroup placement: {o:?}");
        }
    }

    /// The page move running now, if any: its pid and the host time it was handed over, ns.
    pub fn move_running(&self) -> Option<(u32, u64)> {
        self.mover.as_ref().and_then(|m| m.running())
    }

    /// Page moves given up as stuck in the kernel (rule stuck-move-abandoned) and still there: pid
    /// and the host time each was handed over, ns.
    pub fn moves_stuck(&self) -> Vec<(u32, u64)> {
        self.mover.as_ref().map_or_else(Vec::new, |m| m.stuck().into_iter().map(|(p, at, _)| (p, at)).collect())
    }

    /// Records that `pid` was started on this daemon's launch advice for `nodes` (its launcher
    /// named it: `numapilot advise --pid`): from now on, a CPU mask its launcher narrowed and a
    /// memory policy within `nodes` do not make it "placed by itself" for the checks before each
    /// action (`select::pinned`). Keyed by its start time now (a launcher that execs keeps both);
    /// a pid that does not exist is not recorded.
    pub fn adopt(&mut self, pid: u32, nodes: &NodeSet) {
        let stat = match select::stat_now(pid) {
            Ok(Some(s)) => s,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!("advise --pid {pid}: not recorded: {}", unknown_whether_there(pid, &e));
                return;
            }
        };
        // An entry goes when its process is gone, not when its stat cannot be read (short of
        // descriptors or memory): that process may run on, on the advice it was given.
        self.adopted.retain(|&p, (st, _)| select::still_there(p, *st) != Some(false));
        while self.adopted.len() >= ADOPTED_KEPT {
            let first = *self.adopted.keys().next().expect("non-empty");
            self.adopted.remove(&first);
        }
        self.adopted.insert(pid, (stat.starttime, nodes.clone()));
    }

    /// The page mover's wake socket, readable once a move has ended ([`mover::Mover::wake`]).
    pub fn move_wake(&self) -> Option<&std::os::unix::net::UnixStream> {
        self.mover.as_ref().map(|m| m.wake())
    }

    /// Waits for the page move in flight, if any (shutdown), and returns every move that ended
    /// and was not yet reported.
    pub fn wait_moves(&mut self) -> Vec<numapilot_policy::FinishedMove> {
        let done = self.mover.as_mut().map(|m| m.wait()).unwrap_or_default();
        self.finish(done)
    }

    /// At shutdown, before the restore: ends the page move in flight and returns the moves not yet
    /// reported (the daemon's `Restore::wait_moves`).
    pub fn end_moves(&mut self) -> Vec<numapilot_policy::FinishedMove> {
        // The move in flight is asked to stop before its next batch (its pages so far stay where
        // they went), then waited for at most SHUTDOWN_MOVE_WAIT: one system call can stay in the
        // kernel for as long as the process it copies is stuck (its mmap lock held behind a task
        // in D state), and waiting for it without end left the restore to never happen once
        // systemd's SIGKILL came (review helper-34).
        if let Some((pid, _)) = self.mover.as_ref().and_then(|m| m.running()) {
            if let Some(st) = select::read_starttime(pid) {
                apply::stop_moves_of(pid, st, apply::STOP_SHUTDOWN);
            }
        }
        let done = self.mover.as_mut().map(|m| m.wait_for(SHUTDOWN_MOVE_WAIT)).unwrap_or_default();
        if let Some((pid, _)) = self.mover.as_ref().and_then(|m| m.running()) {
            tracing::warn!(
                "a page move of pid {pid} is still in the kernel after {} s: restoring without it",
                SHUTDOWN_MOVE_WAIT.as_secs()
            );
        }
        self.finish(done)
    }

    /// Charges ended moves to the budget and reports them.
    fn finish(&mut self, done: Vec<mover::Done>) -> Vec<numapilot_policy::FinishedMove> {
        done.into_iter()
            .map(|d| {
                self.budget.take(d.asked);
                // Its numa_maps are read again next cycle, as after a synchronous move: the carried
                // read is from before the move (the policy would ask for the same move again).
                if matches!(d.outcome, Outcome::Applied { .. } | Outcome::Partial { .. }) {
                    self.observer.refresh(d.job.action.target.pid);
                }
                numapilot_policy::FinishedMove {
                    action: d.job.action,
                    outcome: d.outcome,
                    started_ns: d.job.started_ns,
                    ended_ns: d.ended_ns,
                    ran_on: d.ran_on,
                    threads: d.threads,
                }
            })
            .collect()
    }

    fn check_nodes(&self, nodes: &NodeSet) -> Result<(), Outcome> {
        let known = self.topo.node_ids();
        if nodes.is_empty() || !nodes.is_subset(&known) {
            return Err(Outcome::Refused {
                message: format!(
                    "nodes {} are not a non-empty subset of this machine's nodes {}",
                    nodes.to_list(),
                    known.to_list()
                ),
            });
        }
        Ok(())
    }

    fn pages(&mut self, action: &Action) -> Outcome {
        let (pid, starttime, kind) = (action.target.pid, action.target.starttime, &action.kind);
        let (max, nodes) = match kind {
            ActionKind::MigratePages { from, to, max_pages } => {
                if let Err(o) = self.check_nodes(from).and_then(|_| self.check_nodes(to)) {
                    return o;
                }
                (*max_pages, to.clone())
            }
            ActionKind::MoveRanges { to, .. } => (None, std::iter::once(*to).collect()),
            ActionKind::Interleave { nodes, max_pages, .. } => (*max_pages, nodes.clone()),
            ActionKind::SetAffinity { .. } => return Outcome::Refused { message: "not a page action".into() },
        };
        if let Err(o) = self.check_nodes(&nodes) {
            return o;
        }
        let now = numapilot_observe::reader::monotonic_ns();
        let avail = self.budget.available(now);
        let allowance = max.map_or(avail, |m| m.min(avail));
        if allowance == 0 {
            return if avail == 0 {
                Outcome::Refused {
                    message: format!("page-migration budget of {} MB/s is used up for now", self.opts.migrate_mb_per_s),
                }
            } else {
                Outcome::Applied { pages_moved: 0 }
            };
        }
        if let Some(mover) = self.mover.as_mut() {
            if mover.stuck_on(pid) {
                return Outcome::Refused {
                    message: format!(
                        "an earlier move of pid {pid}'s pages is stuck in the kernel (its memory map locked?); no \
                         other until it returns"
                    ),
                };
            }
            // copy-on-destination (mover.rs): the copy runs on the CPUs of the nodes the pages go to.
            let cpus = Some(self.topo.cpus_of_nodes(&nodes)).filter(|c| !c.is_empty());
            let threads = self.opts.mover_threads.max(1);
            let job = mover::Job { action: action.clone(), allowance, started_ns: now, cpus, threads };
            // `apply` checked its exclusions: a move of it stopped at an earlier release may run
            // again, but only once no move is running (a stopped one still in flight stays stopped).
            if mover.running().is_none() {
                apply::moves_allowed(pid, starttime);
            }
            if mover.submit(job) {
                return Outcome::Started { pages: allowance };
            }
            return Outcome::Refused {
                message: match mover.running() {
                    None if mover.stuck().len() >= mover::MAX_STUCK_MOVES => format!(
                        "{} page moves are stuck in the kernel (memory maps locked behind a file server?); no move \
                         starts until one returns",
                        mover.stuck().len()
                    ),
                    Some((p, at)) => format!(
                        "the page mover is still moving pid {p}'s pages (for {} ms); this move is planned again later",
                        now.saturating_sub(at) / 1_000_000
                    ),
                    None => "the page mover thread is gone".into(),
                },
            };
        }
        // In the loop, the copy runs where the daemon runs, split as on the mover.
        apply::moves_allowed(pid, starttime);
        let threads = mover::copy_threads(self.opts.mover_threads, None);
        let (outcome, asked, _) =
            run_page_job(&self.mm_reader, &action.kind, pid, starttime, self.page_size, allowance, threads);
        self.budget.take(asked);
        outcome
    }
}

impl Host for LiveHost {
    fn topology(&self) -> &Topology {
        &self.topo
    }

    fn now_ns(&self) -> u64 {
        numapilot_observe::reader::monotonic_ns()
    }

    fn sample(&mut self) -> Result<Sample, HostError> {
        // Records of processes that exited since: dropped, their cpuset cgroups removed.
        let (_, errors) = self.originals.prune_gone();
        for e in errors {
            tracing::warn!("cleaning up after an exited process: {e}");
        }
        self.follow_hotplug();
        let now = self.now_ns();
        let moved_from = self
            .originals
            .procs
            .iter()
            .filter_map(|(&pid, r)| r.cpuset.as_ref().map(|c| (pid, (r.starttime, c.original.clone()))))
            .collect();
        self.observer.set_moved_from(moved_from);
        let mut s = self.observer.sample(&self.opts, now).map_err(|e| HostError::Unavailable(e.to_string()))?;
        if !self.opts.observe_only && self.refusal.is_none() {
            self.adopt_inheritors(&s);
        }
        // A cgroup re-check found a managed process moved out of numapilot's hands.
        // (Taken once and handed over: taking it again inside found it empty, and the page moves
        // of processes that left by a cgroup move or a rename were not stopped.)
        let left = self.observer.take_left();
        if !left.is_empty() || !self.release_pending.is_empty() {
            self.release_left(&left, false);
        }
        let t = self.now_ns();
        // Scan maps and sockets of the processes that can matter, over the scans' cadence.
        let scan = self.scan_pids();
        self.signals.fill_scoped(&mut s, Some(&scan));
        self.observer.stats.signals_ns = self.now_ns().saturating_sub(t);
        s.cpu_base = self.cpu_base.take();
        Ok(s)
    }

    fn recycle(&mut self, sample: Sample) {
        self.observer.recycle(sample);
    }

    fn set_sampling_stretch(&mut self, stretch: u32) {
        self.signals.set_sampling_stretch(stretch);
    }

    fn sampling_stretch(&self) -> Option<u32> {
        self.signals.sampling_stretch()
    }

    fn take_topology_change(&mut self) -> Option<Topology> {
        self.topo_change.take()
    }

    fn step_done(&mut self) {
        // One small read (a line per CPU): the next sample's CPU load starts here.
        self.cpu_base = numapilot_observe::Reader::new(&self.opts.root).read_proc_stat().ok().flatten();
    }

    fn finished_moves(&mut self) -> Vec<numapilot_policy::FinishedMove> {
        // The wakes of the moves taken here would only wake the loop for nothing after this step.
        if let Some(m) = &self.mover {
            m.drain_wake();
        }
        // Rule stuck-move-abandoned (mover.rs): a move none of whose calls returned for
        // `LiveTuning::stuck_move_ms` (STUCK_MOVE_S) is left to the kernel and asked to stop should its call return; a new
        // mover thread takes the moves of every other process.
        // Ended jobs first: one whose result is waiting is no stuck one.
        let done = self.mover.as_mut().map(|m| m.drain()).unwrap_or_default();
        let now = numapilot_observe::reader::monotonic_ns();
        if let Some(m) = self.mover.as_mut() {
            if let Some(pid) = m.poll(now) {
                if let Some(st) = select::read_starttime(pid) {
                    apply::stop_moves_of(pid, st, apply::STOP_STUCK);
                }
                tracing::warn!(
                    "page mover: the move of pid {pid}'s pages has had no system call return for {:.0} s (its memory \
                     map locked?); left to the kernel, later moves go on in a new mover thread, none of pid {pid} \
                     until it returns",
                    m.stuck_after().as_secs_f64()
                );
            }
        }
        self.finish(done)
    }

    fn apply(&mut self, action: &Action) -> Outcome {
        let t_in = numapilot_observe::reader::monotonic_ns();
        if let Some(r) = &self.refusal {
            return Outcome::Refused { message: r.clone() };
        }
        let t = action.target;
        // Vanished only when /proc says so: a stat that cannot be read for want of a descriptor or
        // memory is a refusal, and the process stays known to the engine for the next step.
        let stat = match select::stat_now(t.pid) {
            Ok(Some(s)) if s.starttime == t.starttime => s,
            Ok(_) => return Outcome::Vanished,
            Err(e) => {
                return Outcome::Refused {
                    message: format!("{}; tried again next step", unknown_whether_there(t.pid, &e)),
                }
            }
        };
        // The name as the model keeps it (control characters escaped): a process chooses its name,
        // and a newline in it began a line of its own in the log that named it.
        let name = numapilot_model::tasks::printable(&stat.comm);
        let who = format!("pid {} ({name})", t.pid);
        if stat.is_kernel_thread() {
            return Outcome::Refused { message: format!("{who} is a kernel thread") };
        }
        // A process numapilot moved into a cpuset of its own is matched by the cgroup it came from
        // too: under cgroup v2 its only path is then numapilot's.
        let original_cgroup = self
            .originals
            .procs
            .get(&t.pid)
            .filter(|r| r.starttime == t.starttime)
            .and_then(|r| r.cpuset.as_ref())
            .map(|c| c.original.as_str());
        let cgroups = || select::cgroup_paths_with(t.pid, original_cgroup);
        if let Some(why) = select::exclusion(&self.opts, t.pid, &stat.comm, cgroups) {
            return Outcome::Refused { message: format!("{who}: {why}") };
        }
        // Never act on what cannot be seen: a process whose memory map is locked (a read of it
        // blocked in the kernel) would hold the page mover or a cgroup write the same way.
        let guard = self.observer.guard();
        if let Some(s) = guard.is_stuck(t.pid).then(|| guard.stuck()).into_iter().flatten().find(|s| s.pid == t.pid) {
            return Outcome::Refused {
                message: format!(
                    "{who}: its memory map is locked ({} blocked in the kernel for {:.1} s); left alone until the \
                     read returns",
                    s.path,
                    s.for_.as_secs_f64()
                ),
            };
        }
        let inherited = if self.originals.has(t.pid, t.starttime) {
            None
        } else {
            match self.inherited(t.pid, stat.ppid) {
                Ok(i) => i,
                Err(why) => {
                    return Outcome::Refused {
                        message: format!(
                            "{who}: whether it inherited numapilot's mask from its parent {} is unknown ({why}); \
                             tried again next step",
                            stat.ppid
                        ),
                    }
                }
            }
        };
        let checked = numapilot_observe::reader::monotonic_ns();
        if !self.opts.include_pinned {
            if let Some(why) = self.repinned(t.pid, t.starttime) {
                return Outcome::Refused { message: format!("{who}: {why}; left alone (include_pinned is off)") };
            }
            let ours = self.originals.has(t.pid, t.starttime) || inherited.is_some();
            let advised = self.adopted.get(&t.pid).filter(|(st, _)| *st == t.starttime).map(|(_, n)| n);
            if let Some(why) =
                select::pinned(&self.mm_reader, &self.topo, self.cpuset_read.as_ref(), t.pid, ours, advised)
            {
                return Outcome::Refused { message: format!("{who}: {why}; left alone (include_pinned is off)") };
            }
        }
        if let Some((original, ours)) = inherited {
            // Its original is what it would have had without us: the parent's original; the mask
            // it inherited is one numapilot set.
            let parent_cpuset = self.originals.procs.get(&stat.ppid).and_then(|r| r.cpuset_cpus.clone());
            let rec = self.originals.entry(t.pid, t.starttime, &name, &original);
            rec.note_set(&ours);
            // Its original is its parent's, and so is the cpuset that original was (rule
            // restore-follows-cpuset).
            if rec.cpuset_cpus.is_none() {
                rec.cpuset_cpus = parent_cpuset;
            }
            if let Err(o) = self.save() {
                return o;
            }
        }
        let set = numapilot_observe::reader::monotonic_ns();
        let outcome = match &action.kind {
            ActionKind::SetAffinity { cpus } => self.set_affinity(t.pid, t.tid, t.starttime, &name, cpus),
            _ => self.pages(action),
        };
        tracing::trace!(
            "apply pid {}: checks {:.1} ms (pinned {:.1} ms), action {:.1} ms",
            t.pid,
            set.saturating_sub(t_in) as f64 / 1e6,
            set.saturating_sub(checked) as f64 / 1e6,
            numapilot_observe::reader::monotonic_ns().saturating_sub(set) as f64 / 1e6
        );
        if matches!(outcome, Outcome::Applied { .. } | Outcome::Partial { .. }) {
            self.observer.refresh(t.pid);
        }
        outcome
    }
}

/// What a stat read that failed for want of a descriptor or memory (`select::stat_now`'s `Err`)
/// says of `pid`: nothing. The words for the refusal or note that says so.
fn unknown_whether_there(pid: u32, e: &std::io::Error) -> String {
    format!("pid {pid}: whether it is still there is unknown (/proc/{pid}/stat: {e})")
}

/// What it means that `pid` failed the check that it is still the process of `starttime` right
/// before `what`, or that the call found no such process (ESRCH): [`Outcome::Vanished`] only when
/// its stat confirms it (`apply::confirm_stop`), else a refusal. `same_process` alone takes a
/// stat that cannot be read (no descriptor or memory left) for gone, and the engine forgot a
/// process that was there.
fn vanished_or_refused(pid: u32, starttime: u64, what: &str) -> Outcome {
    match apply::confirm_stop(pid, starttime, || format!("pid {pid}: {what}: not done")) {
        Stop::Gone => Outcome::Vanished,
        Stop::Refused(message) => Outcome::Refused { message },
    }
}

/// One page action, synchronously, its copy split over up to `threads` threads: the outcome, the
/// pages asked of the kernel (charged to the budget by the caller) and the most threads a copy
/// used (0: nothing was handed to the kernel). The page mover runs the same code on its thread.
fn run_page_job(
    reader: &numapilot_observe::Reader,
    kind: &ActionKind,
    pid: u32,
    starttime: u64,
    ps: u64,
    allowance: u64,
    threads: usize,
) -> (Outcome, u64, usize) {
    let mut tally = PageTally::default();
    let r = match kind {
        ActionKind::MigratePages { from, to, .. } => {
            apply::migrate(reader, pid, starttime, from, to, ps, allowance, &mut tally, threads)
        }
        ActionKind::MoveRanges { ranges, to } => {
            apply::move_to_targets(pid, starttime, ranges, ps, allowance, true, |_, _| Some(*to), &mut tally, threads)
        }
        ActionKind::Interleave { ranges, nodes, weights, .. } => {
            let ranges = if ranges.is_empty() {
                match apply::mapped_ranges(pid, starttime) {
                    Ok(r) => r,
                    Err(Stop::Gone) => return (Outcome::Vanished, 0, 0),
                    Err(Stop::Refused(m)) => return (Outcome::Refused { message: m }, 0, 0),
                }
            } else {
                ranges.clone()
            };
            let list: Vec<u32> = nodes.iter().collect();
            apply::move_to_targets(
                pid,
                starttime,
                &ranges,
                ps,
                allowance,
                true,
                |i, _| apply::interleave_target(&list, weights, i),
                &mut tally,
                threads,
            )
        }
        ActionKind::SetAffinity { .. } => Ok(0),
    };
    // A move that stops half-way (the process exited, or the kernel refused a later batch) is
    // charged what it handed the kernel, and a refused one reports what it moved before.
    let used = tally.threads;
    match r {
        Ok(asked) => (tally.outcome(), asked, used),
        Err(Stop::Gone) => (Outcome::Vanished, tally.asked, used),
        Err(Stop::Refused(m)) => {
            let asked = tally.asked;
            (tally.stopped(m), asked, used)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread whose CPUs the kernel keeps, met by the check before a second action on a process
    /// numapilot placed ([`LiveHost::repinned`]), is no pin set since: on kernels 5.12 to 6.2 an
    /// io_uring program's io-wq worker born after the placement is bound to one node and flagged
    /// PF_NO_SETAFFINITY, and read as the program's own placement it made every later action on
    /// the program refused. No user process owns such a thread on this host's kernel (6.3 dropped
    /// the flag from io-wq workers); a per-CPU kernel thread (`ksoftirqd/0`: flagged, bound to one
    /// CPU) stands in, with a record as if numapilot had placed it on another CPU.
    #[test]
    fn a_thread_the_kernel_keeps_is_no_pin_set_since_placement() {
        let topo = Topology::from_sysfs(Path::new("/")).unwrap();
        let online = topo.online_cpus();
        let Some((pid, mask)) = select::task_the_kernel_keeps(&topo) else {
            eprintln!("skipped: no task flagged PF_NO_SETAFFINITY narrower than the online CPUs (one CPU?)");
            return;
        };
        let Some(start) = select::read_starttime(pid) else {
            eprintln!("skipped: {pid} exited");
            return;
        };
        // A mask numapilot set that is not the thread's: the online CPUs outside its mask.
        let ours: CpuSet = online.iter().filter(|c| !mask.contains(*c)).collect();
        let dir = std::env::temp_dir().join(format!("numapilot-repinned-kernel-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let opts = LiveOptions { state_path: dir.join("state.json"), ..LiveOptions::default() };
        let (mut host, _) = LiveHost::open(topo, opts).unwrap();
        host.originals.entry(pid, start, "kthread", &online).note_set(&ours);
        let why = host.repinned(pid, start);
        // Off the record again before anything could restore it.
        host.originals.procs.remove(&pid);
        drop(host);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(why, None, "task {pid} on CPUs {} (numapilot's mask {})", mask.to_list(), ours.to_list());
    }
}
