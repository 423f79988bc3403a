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
//!   `recover` (next start after a crash) put it back; page moves under a MB/s budget, per-page
//!   failures counted in the `Outcome`, never fatal.

use std::path::PathBuf;

/// How the live host observes and acts. Built by `run` from the config file and the command line.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveOptions {
    /// Root of /proc and /sys (`/` on a live system; tests may point elsewhere for observation only).
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
    /// Touch processes that pinned themselves (affinity narrower than their cpuset, or an explicit
    /// memory policy in numa_maps). Default false.
    pub include_pinned: bool,
    /// Only manage processes with at least this resident memory, kB (numad: 300 MiB). Default 0.
    pub min_rss_kb: u64,
    /// Page-migration budget, MB/s of base pages moved. Default from `Tunables`.
    pub migrate_mb_per_s: u64,
    /// Use cpuset cgroups instead of (in addition to) sched_setaffinity.
    pub cpuset: CpusetMode,
}

/// Whether CPU placement also goes through cpuset cgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CpusetMode {
    /// Thread affinity only (default).
    #[default]
    Off,
    /// Detect the mounted hierarchy (v2 unified or v1 cpuset) and use it.
    Auto,
    /// cgroup v1 cpuset controller.
    V1,
    /// cgroup v2 unified hierarchy.
    V2,
}

use numapilot_observe::Sample;
use numapilot_policy::{Action, Host, HostError, Outcome};
use numapilot_topology::Topology;

/// Why the live host could not start.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// The state file exists but cannot be read or parsed; the message names the path and the fault.
    #[error("{0}")]
    State(String),
    /// /proc or /sys cannot be read.
    #[error("{0}")]
    Unavailable(String),
}

/// What putting processes back did (on shutdown, or at start after a crash).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RestoreReport {
    /// Processes whose original affinity (and cpuset) were put back.
    pub restored: u64,
    /// Processes that had exited (or whose pid now belongs to another process): nothing to do.
    pub gone: u64,
    /// Processes where restoring failed, with the reason (`pid: message`).
    pub failed: Vec<String>,
}

/// The live kernel as a [`Host`].
#[derive(Debug)]
pub struct LiveHost {
    topo: Topology,
    opts: LiveOptions,
}

impl LiveHost {
    /// Opens the live host. If the state file holds originals from a previous run that did not
    /// shut down cleanly, they are restored first and reported.
    pub fn open(topo: Topology, opts: LiveOptions) -> Result<(Self, RestoreReport), LiveError> {
        Ok((Self { topo, opts }, RestoreReport::default()))
    }

    /// The options it runs with.
    pub fn options(&self) -> &LiveOptions {
        &self.opts
    }

    /// Puts every touched process back as it was, and empties the state file.
    pub fn restore_all(&mut self) -> RestoreReport {
        RestoreReport::default()
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
        Err(HostError::Unavailable("live host: sampling not built yet".into()))
    }

    fn apply(&mut self, action: &Action) -> Outcome {
        let _ = action;
        Outcome::Refused { message: "live host: actuation not built yet".into() }
    }
}
