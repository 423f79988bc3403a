//! Workload specifications: what the simulated machine runs.
//!
//! # Problem
//!
//! The simulator must run very different programs through one engine: autonuma-benchmark (processes
//! of N threads zeroing private buffers a fixed number of times), a Redis-like server and its
//! benchmark clients exchanging requests through shared buffers, long-running services whose
//! memory grows, virtual machines with dozens of vCPUs and hundreds of GiB. A [`Spec`] describes any
//! of them as plain data (serde, so it can also come from a TOML/JSON file), independent of the
//! machine it runs on; generators that need the machine (thread counts from the CPU count) take the
//! topology and return a `Spec`.
//!
//! # Approach
//!
//! ```text
//!   Spec
//!   └── processes[]  ProcessSpec          `count` identical instances, start time, affinity, policy
//!       ├── regions[]  RegionSpec         named buffers: size, who touches them first, mempolicy, growth
//!       ├── threads[]  ThreadGroup        `count` identical threads with a Work budget and an access mix
//!       │   └── accesses[] Access         region (or "process/region"), weight, slice, pattern, write
//!       └── phases[]   Phase              at time t, a thread group switches to another access mix
//! ```
//!
//! A thread's work is counted in *units* (bytes zeroed, requests served, ...). One unit costs
//! `compute_ns` of pure CPU time plus `bytes` of memory traffic, spread over its accesses by weight;
//! the engine turns the traffic into time from where the touched memory lives (see `engine`).
//! A fixed budget (`Work::total`) makes the process finish (runtime is the figure); no budget makes
//! it open-ended (throughput, units/s, is the figure).
//!
//! Slices: `Slice::Whole` means every thread of the group touches the whole region (numa01's shared
//! buffer); `Slice::PerThread` gives thread i of a group of n the i-th n-th of the region (numa02's
//! per-thread slices, and the slice thread i first-touches under `FirstTouch::Threads`).
//!
//! Communication: a [`Pace`] ties two thread groups into a closed loop (clients can send no faster
//! than the server answers, the server serves no more than clients send): each epoch both progress
//! at the slower side's rate, scaled by `ratio`.
//!
//! # Units
//!
//! Bytes for sizes, nanoseconds for CPU cost, seconds for times in the spec. Node and CPU ids are
//! kernel ids of the machine the spec is run on; a spec naming ids the machine lacks is refused when
//! the run is built (`SimError`), not silently clamped.
//!
//! # Limits
//!
//! Cross-process region references (`"server/buf"`) must name a process with `count = 1`. Accesses
//! within a region are uniform over the slice: hot spots inside one region are modelled by splitting
//! it into several regions.

pub mod autonuma_bench;
pub mod client_server;
pub mod file;
pub mod locality;
pub mod process_types;
pub mod vm_mix;

use numapilot_topology::{CpuSet, NodeSet};
use serde::{Deserialize, Serialize};

fn one_u32() -> u32 {
    1
}

fn one_f64() -> f64 {
    1.0
}

fn is_one_u32(v: &u32) -> bool {
    *v == 1
}

/// A workload: processes that run on the simulated machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// Short name (`numa01`, `vm-mix`, ...).
    pub name: String,
    /// One line for humans.
    #[serde(default)]
    pub description: String,
    /// The processes.
    pub processes: Vec<ProcessSpec>,
    /// Simulated duration, s. Required when some work is open-ended; for fixed work the run ends
    /// when every budget is spent. A workload of fixed work only whose work is not done by this
    /// time is an error ("work not finished": its figure, the runtime, would read as this time);
    /// beside open-ended work, a fixed job cut short here just has no finish time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// Closed loops between thread groups (client/server).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pacing: Vec<Pace>,
    /// Processes (spec names, every instance) whose open-ended work is the workload's throughput
    /// figure. `None`: every process, if they all count work in one unit, else no single figure (the
    /// report gives each process's own). An empty list: no single figure. The redis pair names only
    /// the server: each request is counted once by the server and once by a client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_from: Option<Vec<String>>,
    /// Unit of that figure (`requests/s`); default: the processes' work unit per second. Required
    /// when the processes named in `throughput_from` count different units (the author then says
    /// what the sum means).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_unit: Option<String>,
}

/// Which processes carry a workload's throughput figure, and in which unit.
#[derive(Debug, Clone, PartialEq)]
pub struct ThroughputOf {
    /// Indexes into `Spec::processes`.
    pub processes: Vec<usize>,
    /// Unit of the figure, per second (`requests/s`).
    pub unit: String,
}

/// One kind of process, started `count` times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessSpec {
    /// Process name (its `comm`); instances are named `name`, or `name-<i>` when `count > 1`.
    pub name: String,
    /// Identical instances.
    #[serde(default = "one_u32", skip_serializing_if = "is_one_u32")]
    pub count: u32,
    /// Start time, s after the beginning of the run.
    #[serde(default)]
    pub start_s: f64,
    /// CPUs every thread may run on (`taskset`); `None` = all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<CpuSet>,
    /// CPUs of the cpuset it runs in (a container's `--cpuset-cpus`, an operator's cgroup); `None`
    /// = the whole machine. Unlike `cpus`, no mask given later reaches past it: the kernel cuts
    /// every `sched_setaffinity` to it (and refuses one with no CPU of it), and the host reports
    /// it as the process's cpuset (`ProcessSample::cpuset_cpus`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpuset: Option<CpuSet>,
    /// The process's default memory policy (`set_mempolicy`); regions may override it.
    #[serde(default)]
    pub policy: MemPolicySpec,
    /// Memory regions (buffers).
    pub regions: Vec<RegionSpec>,
    /// Threads. The first thread of the first group is the main thread (the one `FirstTouch::Main`
    /// means).
    pub threads: Vec<ThreadGroup>,
    /// Changes of behaviour over time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<Phase>,
    /// Whether its launcher asks the placement policy for nodes before starting it, with its
    /// threads as CPUs and its regions as memory (a VM manager's `placement='auto'`: libvirt asks
    /// numad `-w`; rule "launch-advice"). Policies without a launch stage give no advice.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub launch_advice: bool,
}

/// A named buffer of a process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegionSpec {
    /// Name, unique in the process.
    pub name: String,
    /// Size when fully grown, bytes (rounded up to whole regions of the simulator's granule).
    pub bytes: u64,
    /// Who places the pages first.
    #[serde(default)]
    pub touch: FirstTouch,
    /// Memory policy of this region (`mbind`); `None` = the process's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<MemPolicySpec>,
    /// Growing memory: bytes present at start (the rest appears at `grow_bytes_per_s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grow: Option<Growth>,
}

/// Growth of a region over time (a cache filling, a heap growing).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Growth {
    /// Bytes allocated when the process starts.
    pub initial_bytes: u64,
    /// Bytes added per simulated second until `RegionSpec::bytes` is reached.
    pub bytes_per_s: f64,
}

/// Who first touches a region, which decides where first-touch allocation puts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "by")]
pub enum FirstTouch {
    /// The process's main thread, at start, before the other threads run (numa01, numa02).
    #[default]
    Main,
    /// Each thread touches the slices it accesses, as it first runs (per-thread allocation).
    Threads,
    /// The memory starts on this node whatever the policy (the autonuma-benchmark's "all memory
    /// starts in one node"); the policy applies to later allocations and to growth.
    Node {
        /// Kernel node id.
        node: u32,
    },
}

/// A memory policy, as `set_mempolicy`/`mbind` take it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "mode")]
pub enum MemPolicySpec {
    /// MPOL_DEFAULT: first touch on the toucher's node, fallback by distance when full.
    #[default]
    Local,
    /// MPOL_BIND: only these nodes (nearest first from the toucher); allocation fails over to
    /// nothing — a full bind set is an out-of-memory condition the run reports.
    Bind {
        /// Allowed nodes.
        nodes: NodeSet,
    },
    /// MPOL_PREFERRED: this node first, then by distance from it.
    Preferred {
        /// Preferred node.
        node: u32,
    },
    /// MPOL_PREFERRED_MANY: the nearest of these nodes first, then any by distance.
    PreferredMany {
        /// Preferred nodes.
        nodes: NodeSet,
    },
    /// MPOL_INTERLEAVE: round robin over these nodes, by region.
    Interleave {
        /// Nodes interleaved over.
        nodes: NodeSet,
    },
    /// MPOL_WEIGHTED_INTERLEAVE: round robin with per-node weights (`weights[i]` regions on the
    /// i-th node of `nodes`, in id order, per round).
    WeightedInterleave {
        /// Nodes interleaved over.
        nodes: NodeSet,
        /// One positive weight per node of `nodes`, in id order.
        weights: Vec<u32>,
    },
}

/// `count` identical threads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThreadGroup {
    /// Group name, unique in the process (`worker`, `vcpu`, `server`, ...).
    pub name: String,
    /// Number of threads.
    #[serde(default = "one_u32", skip_serializing_if = "is_one_u32")]
    pub count: u32,
    /// CPUs these threads may run on; `None` = the process's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<CpuSet>,
    /// The work of each thread.
    pub work: Work,
    /// Where the memory traffic of a unit of work goes.
    pub accesses: Vec<Access>,
}

/// The work of one thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Work {
    /// Units to do before the thread exits; `None` = run until the end (open-ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// Name of the unit (`bytes`, `requests`, `ops`), for reports.
    #[serde(default = "default_unit")]
    pub unit: String,
    /// Memory traffic per unit, bytes (1 for "bytes zeroed"; e.g. 400 for a 200-byte request that
    /// is written and read once).
    #[serde(default = "one_f64")]
    pub bytes_per_unit: f64,
    /// Pure CPU time per unit on an idle core, ns (instructions that do not miss the caches).
    #[serde(default)]
    pub compute_ns: f64,
    /// Fraction of the thread's time it wants a CPU, 0..1 (1 = always runnable; 0.3 = a service
    /// sleeping 70% of the time). Sleeping time does no work and leaves the CPU to others.
    #[serde(default = "one_f64")]
    pub duty: f64,
}

fn default_unit() -> String {
    "bytes".to_string()
}

/// One stream of memory accesses of a thread group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Access {
    /// Region name in the same process, or `"process/region"` for another process's region
    /// (shared memory, e.g. a client writing into a server's buffer).
    pub region: String,
    /// Share of the unit's bytes that go here (weights of a group's accesses are normalised).
    #[serde(default = "one_f64")]
    pub weight: f64,
    /// Which part of the region each thread touches.
    #[serde(default)]
    pub slice: Slice,
    /// How the accesses are issued.
    #[serde(default)]
    pub pattern: Pattern,
    /// Writes (dirtying cache lines) rather than reads.
    #[serde(default)]
    pub write: bool,
}

/// The part of a region a thread accesses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Slice {
    /// The whole region, shared by all threads of the group.
    #[default]
    Whole,
    /// Thread i of a group of n accesses the i-th of n equal slices.
    PerThread,
}

/// Access pattern, which decides how much latency the core can hide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Sequential streaming (memset, memcpy, scans): hardware prefetch keeps many misses in flight;
    /// bandwidth-bound.
    #[default]
    Stream,
    /// Dependent random accesses (pointer chasing, hash lookups): one miss at a time;
    /// latency-bound.
    Random,
}

/// A change of behaviour at a given time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phase {
    /// When, s after the process started.
    pub at_s: f64,
    /// Which thread group changes.
    pub group: String,
    /// Its new access mix.
    pub accesses: Vec<Access>,
    /// Its new CPU cost per unit, ns (`None` = unchanged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_ns: Option<f64>,
}

/// A closed loop between two thread groups: per epoch, `b` does `ratio` units for each unit of `a`,
/// and both go at the pace of the slower side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pace {
    /// `"process/group"` of side a (e.g. the server).
    pub a: String,
    /// `"process/group"` of side b (e.g. the clients).
    pub b: String,
    /// Units of b per unit of a.
    #[serde(default = "one_f64")]
    pub ratio: f64,
}

/// Errors of a workload spec (checked before a run starts; nothing is simulated on a bad spec).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    /// A field has an invalid value; `what` names it (`process numa01, region mem: bytes`).
    #[error("workload {workload}: {what}: {reason}")]
    Invalid {
        /// Workload name.
        workload: String,
        /// The field.
        what: String,
        /// Why it is wrong.
        reason: String,
    },
}

/// Longest simulated time a workload may name (a start, a phase, its duration), s. Default 86,400
/// (one day). Source: `numapilot sim --duration`'s own bound. What it prevents: a file whose
/// `duration_s = 1e300` runs for ever, or whose `start_s` overflows the simulator's ns clock.
pub const MAX_SIM_S: f64 = 86_400.0;

/// Most threads a workload may start in all, count. Default 262,144 (2^18). Source: a bound of
/// ours, a thousand times the largest preset's vCPUs (the VM mix: 256). What it prevents: a
/// `count = 10000000` that takes gigabytes before the first epoch (each thread is a task).
pub const MAX_THREADS: u64 = 1 << 18;

/// Most memory a workload's regions may hold in all, bytes. Default 4 TiB. Source: a bound of ours,
/// 3.5 times the largest preset's memory (numaconnect-288c, 1,152 GiB). What it prevents: a region
/// of `16777215T` aborting the simulator (it keeps a record per 2 MiB).
pub const MAX_REGION_BYTES: u64 = 4 << 40;

impl Spec {
    /// The unit a process counts its work in (`requests`), `None` when its thread groups differ.
    pub fn process_unit(p: &ProcessSpec) -> Option<&str> {
        let first = p.threads.first()?.work.unit.as_str();
        p.threads.iter().all(|g| g.work.unit == first).then_some(first)
    }

    /// The processes whose work makes the workload's throughput figure and its unit, `None` when
    /// there is no single figure (processes counting different units and no `throughput_from`, or an
    /// empty `throughput_from`). Errors name a process `throughput_from` lists but the spec lacks, or
    /// a mix of units without `throughput_unit`.
    pub fn throughput_of(&self) -> Result<Option<ThroughputOf>, SpecError> {
        let bad = |what: &str, reason: String| SpecError::Invalid {
            workload: self.name.clone(),
            what: what.to_string(),
            reason,
        };
        let processes: Vec<usize> = match &self.throughput_from {
            None => (0..self.processes.len()).collect(),
            Some(names) => {
                let mut idx = Vec::new();
                for n in names {
                    match self.processes.iter().position(|p| &p.name == n) {
                        Some(i) if !idx.contains(&i) => idx.push(i),
                        Some(_) => {}
                        None => {
                            let valid: Vec<&str> = self.processes.iter().map(|p| p.name.as_str()).collect();
                            return Err(bad(
                                "throughput_from",
                                format!("no process named {n} (processes: {})", valid.join(", ")),
                            ));
                        }
                    }
                }
                idx
            }
        };
        if processes.is_empty() {
            return Ok(None);
        }
        let units: Vec<Option<&str>> = processes.iter().map(|&i| Self::process_unit(&self.processes[i])).collect();
        let one = units[0].filter(|u| units.iter().all(|x| x == &Some(*u)));
        match (one, &self.throughput_unit, &self.throughput_from) {
            (_, Some(u), _) => Ok(Some(ThroughputOf { processes, unit: u.clone() })),
            (Some(u), None, _) => Ok(Some(ThroughputOf { processes, unit: format!("{u}/s") })),
            (None, None, None) => Ok(None),
            (None, None, Some(_)) => Err(bad(
                "throughput_from",
                "the processes named count work in different units: give throughput_unit".to_string(),
            )),
        }
    }

    /// Checks internal consistency (names resolve, sizes and weights positive, open-ended work has
    /// a duration). Machine-dependent checks (node and CPU ids) happen when a run is built.
    pub fn validate(&self) -> Result<(), SpecError> {
        let bad = |what: String, reason: &str| SpecError::Invalid {
            workload: self.name.clone(),
            what,
            reason: reason.to_string(),
        };
        if self.processes.is_empty() {
            return Err(bad("processes".into(), "no process"));
        }
        // A run in which no process starts before it ends runs nothing: its throughput read 0,
        // exit 0 (review helper-53). (Some starting later is a shortened run of a workload with
        // arrivals, as `--duration` makes.)
        if let Some(d) = self.duration_s {
            if let Some(first) = self.processes.iter().min_by(|a, b| a.start_s.total_cmp(&b.start_s)) {
                if first.start_s >= d {
                    return Err(bad(
                        format!("process {}: start_s = {}", first.name, first.start_s),
                        &format!(
                            "at or after the run's duration_s ({d} s), and no process starts sooner: nothing would run"
                        ),
                    ));
                }
            }
        }
        let mut open = false;
        for p in &self.processes {
            if p.count == 0 {
                return Err(bad(format!("process {}: count", p.name), "must be at least 1"));
            }
            if p.threads.is_empty() {
                return Err(bad(format!("process {}: threads", p.name), "no thread group"));
            }
            if !(p.start_s >= 0.0 && p.start_s <= MAX_SIM_S) {
                return Err(bad(format!("process {}: start_s", p.name), "must be a time in [0, 86400] s"));
            }

            for (i, r) in p.regions.iter().enumerate() {
                if r.bytes == 0 {
                    return Err(bad(format!("process {}, region {}: bytes", p.name, r.name), "must be > 0"));
                }
                if p.regions[..i].iter().any(|o| o.name == r.name) {
                    return Err(bad(format!("process {}, region {}", p.name, r.name), "duplicate name"));
                }
                if let Some(g) = r.grow {
                    if g.initial_bytes > r.bytes || !(g.bytes_per_s >= 0.0 && g.bytes_per_s.is_finite()) {
                        return Err(bad(
                            format!("process {}, region {}: grow", p.name, r.name),
                            "initial_bytes must be <= bytes and bytes_per_s finite and >= 0",
                        ));
                    }
                }
                if let Some(MemPolicySpec::WeightedInterleave { nodes, weights }) = &r.policy {
                    if weights.len() != nodes.len() || weights.contains(&0) {
                        return Err(bad(
                            format!("process {}, region {}: policy weights", p.name, r.name),
                            "one positive weight per node",
                        ));
                    }
                }
            }
            for g in &p.threads {
                let what = |f: &str| format!("process {}, thread group {}: {f}", p.name, g.name);
                if g.count == 0 {
                    return Err(bad(what("count"), "must be at least 1"));
                }
                if g.work.total.is_none() {
                    open = true;
                }
                if let Some(t) = g.work.total {
                    if !(t > 0.0 && t.is_finite()) {
                        return Err(bad(what("work.total"), "must be finite and > 0"));
                    }
                }
                if !(g.work.bytes_per_unit >= 0.0 && g.work.compute_ns >= 0.0)
                    || g.work.bytes_per_unit + g.work.compute_ns <= 0.0
                {
                    return Err(bad(what("work"), "bytes_per_unit and compute_ns must be >= 0, not both 0"));
                }
                if !(g.work.duty > 0.0 && g.work.duty <= 1.0) {
                    return Err(bad(what("work.duty"), "must be in (0, 1]"));
                }
                if g.work.bytes_per_unit > 0.0 && g.accesses.is_empty() {
                    return Err(bad(what("accesses"), "memory traffic but no access"));
                }
                self.check_accesses(p, &g.accesses, &what("accesses"))?;
            }
            for ph in &p.phases {
                if !(ph.at_s >= 0.0 && ph.at_s <= MAX_SIM_S) {
                    return Err(bad(format!("process {}: phase at_s", p.name), "must be a time in [0, 86400] s"));
                }
                if !p.threads.iter().any(|g| g.name == ph.group) {
                    return Err(bad(format!("process {}: phase group {}", p.name, ph.group), "no such thread group"));
                }
                self.check_accesses(p, &ph.accesses, &format!("process {}: phase at {} s", p.name, ph.at_s))?;
            }
        }
        // Bounded in all (review helper-39: a few lines of a file took gigabytes or aborted).
        let threads: u64 = self
            .processes
            .iter()
            .map(|p| u64::from(p.count).saturating_mul(p.threads.iter().map(|g| u64::from(g.count)).sum::<u64>()))
            .fold(0, u64::saturating_add);
        if threads > MAX_THREADS {
            return Err(bad("thread counts".into(), &format!("{threads} threads in all; at most {MAX_THREADS}")));
        }
        let bytes: u64 = self
            .processes
            .iter()
            .map(|p| u64::from(p.count).saturating_mul(p.regions.iter().map(|r| r.bytes).fold(0, u64::saturating_add)))
            .fold(0, u64::saturating_add);
        if bytes > MAX_REGION_BYTES {
            return Err(bad("region sizes".into(), &format!("{bytes} bytes in all; at most 4 TiB")));
        }
        self.throughput_of()?;
        if open && self.duration_s.is_none() {
            return Err(bad("duration_s".into(), "open-ended work needs a duration"));
        }
        if let Some(d) = self.duration_s {
            if !(d > 0.0 && d <= MAX_SIM_S) {
                return Err(bad("duration_s".into(), "must be in (0, 86400] s"));
            }
        }
        for pc in &self.pacing {
            for side in [&pc.a, &pc.b] {
                if self.find_group(side).is_none() {
                    return Err(bad(format!("pacing {side}"), "no such process/group (process count must be 1)"));
                }
            }
            if !(pc.ratio > 0.0 && pc.ratio.is_finite()) {
                return Err(bad("pacing ratio".into(), "must be finite and > 0"));
            }
        }
        Ok(())
    }

    fn check_accesses(&self, p: &ProcessSpec, accesses: &[Access], what: &str) -> Result<(), SpecError> {
        for a in accesses {
            if !(a.weight > 0.0 && a.weight.is_finite()) {
                return Err(SpecError::Invalid {
                    workload: self.name.clone(),
                    what: format!("{what}: {} weight", a.region),
                    reason: "must be finite and > 0".into(),
                });
            }
            if self.resolve_region(p, &a.region).is_none() {
                return Err(SpecError::Invalid {
                    workload: self.name.clone(),
                    what: format!("{what}: region {}", a.region),
                    reason: "no such region (a process/region reference needs a process with count 1)".into(),
                });
            }
        }
        Ok(())
    }

    /// Resolves a region reference made from process `from`: `(process index, region index)`.
    pub fn resolve_region(&self, from: &ProcessSpec, name: &str) -> Option<(usize, usize)> {
        match name.split_once('/') {
            Some((proc_name, region)) => {
                let pi = self.processes.iter().position(|p| p.name == proc_name && p.count == 1)?;
                let ri = self.processes[pi].regions.iter().position(|r| r.name == region)?;
                Some((pi, ri))
            }
            None => {
                let pi = self.processes.iter().position(|p| std::ptr::eq(p, from))?;
                let ri = from.regions.iter().position(|r| r.name == name)?;
                Some((pi, ri))
            }
        }
    }

    /// Resolves `"process/group"`: `(process index, group index)`.
    pub fn find_group(&self, name: &str) -> Option<(usize, usize)> {
        let (proc_name, group) = name.split_once('/')?;
        let pi = self.processes.iter().position(|p| p.name == proc_name && p.count == 1)?;
        let gi = self.processes[pi].threads.iter().position(|g| g.name == group)?;
        Some((pi, gi))
    }

    /// Total threads over all process instances.
    pub fn thread_count(&self) -> usize {
        self.processes
            .iter()
            .map(|p| p.count as usize * p.threads.iter().map(|g| g.count as usize).sum::<usize>())
            .sum()
    }

    /// Total bytes of all regions of all instances, fully grown.
    pub fn total_bytes(&self) -> u64 {
        self.processes.iter().map(|p| p.count as u64 * p.regions.iter().map(|r| r.bytes).sum::<u64>()).sum()
    }
}

/// A built-in workload named on a command line, `NAME[@SCALE]`: an autonuma-benchmark test at that
/// scale (default 1), `vm-mix`, `vm-mix-unasked`, or a process-types name, built for `topo` (the simulator's
/// examples take this form). `None` for a name that is none of these, a scale that is not a
/// number, or a test the machine cannot run at that scale.
pub fn builtin(arg: &str, topo: &numapilot_topology::Topology) -> Option<Spec> {
    let (name, scale) = match arg.split_once('@') {
        Some((w, s)) => (w, s.parse::<f64>().ok()?),
        None => (arg, 1.0),
    };
    if autonuma_bench::NAMES.contains(&name) {
        autonuma_bench::spec(name, topo, scale).ok()
    } else if name == "vm-mix" {
        Some(vm_mix::vm_mix(topo))
    } else if name == "vm-mix-unasked" {
        Some(vm_mix::vm_mix_unasked(topo))
    } else {
        process_types::catalog().into_iter().find(|n| n.name == name).map(|n| (n.build)(topo))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_names_resolve_and_others_do_not() {
        let topo = crate::Machine::preset("autonuma-2s12c-24g").expect("preset").topo;
        let full = builtin("numa01", &topo).expect("numa01");
        let small = builtin("numa01@0.05", &topo).expect("numa01 at a scale");
        assert_ne!(format!("{small:?}"), format!("{full:?}"), "the scale must change the test (its work)");
        assert_eq!(format!("{full:?}"), format!("{:?}", builtin("numa01@1", &topo).expect("numa01 at 1")));
        let asked = builtin("vm-mix", &topo).expect("vm-mix");
        assert_eq!(asked.name, "vm-mix");
        assert!(asked.processes.iter().all(|p| p.launch_advice), "every VM's launcher asks");
        let unasked = builtin("vm-mix-unasked", &topo).expect("vm-mix-unasked");
        assert!(unasked.processes.iter().all(|p| !p.launch_advice), "no VM's launcher asks");
        assert_eq!(unasked.processes.len(), asked.processes.len());
        assert_eq!(builtin("process-mix", &topo).expect("process-mix").name, "process-mix");
        assert!(builtin("numa01@big", &topo).is_none(), "a scale that is no number");
        assert!(builtin("no-such-workload", &topo).is_none());
    }

    fn tiny() -> Spec {
        Spec {
            name: "tiny".into(),
            description: String::new(),
            duration_s: None,
            pacing: vec![],
            throughput_from: None,
            throughput_unit: None,
            processes: vec![ProcessSpec {
                cpuset: None,
                name: "p".into(),
                count: 1,
                start_s: 0.0,
                cpus: None,
                policy: MemPolicySpec::Local,
                regions: vec![RegionSpec {
                    name: "mem".into(),
                    bytes: 1 << 30,
                    touch: FirstTouch::Main,
                    policy: None,
                    grow: None,
                }],
                threads: vec![ThreadGroup {
                    name: "worker".into(),
                    count: 4,
                    cpus: None,
                    work: Work {
                        total: Some(1e9),
                        unit: "bytes".into(),
                        bytes_per_unit: 1.0,
                        compute_ns: 0.0,
                        duty: 1.0,
                    },
                    accesses: vec![Access {
                        region: "mem".into(),
                        weight: 1.0,
                        slice: Slice::PerThread,
                        pattern: Pattern::Stream,
                        write: true,
                    }],
                }],
                phases: vec![],
                launch_advice: false,
            }],
        }
    }

    #[test]
    fn valid_spec_passes_and_round_trips_toml() {
        let s = tiny();
        s.validate().unwrap();
        let text = toml::to_string(&s).unwrap();
        let back: Spec = toml::from_str(&text).unwrap();
        assert_eq!(back, s);
        assert_eq!(s.thread_count(), 4);
        assert_eq!(s.total_bytes(), 1 << 30);
    }

    #[test]
    fn throughput_comes_from_the_processes_named_in_their_unit() {
        let mut s = tiny();
        let mut q = s.processes[0].clone();
        q.name = "q".into();
        s.processes.push(q);
        // One unit over all: every process, unit per second.
        let u = s.processes[0].threads[0].work.unit.clone();
        assert_eq!(s.throughput_of().unwrap(), Some(ThroughputOf { processes: vec![0, 1], unit: format!("{u}/s") }));
        // Different units: no single figure, unless named with a unit.
        s.processes[1].threads[0].work.unit = "queries".into();
        assert_eq!(s.throughput_of().unwrap(), None);
        s.throughput_from = Some(vec!["q".into()]);
        assert_eq!(s.throughput_of().unwrap(), Some(ThroughputOf { processes: vec![1], unit: "queries/s".into() }));
        s.throughput_from = Some(vec!["p".into(), "q".into()]);
        let e = s.throughput_of().unwrap_err().to_string();
        assert!(e.contains("throughput_unit"), "{e}");
        s.throughput_unit = Some("ops/s".into());
        assert_eq!(s.throughput_of().unwrap().unwrap().unit, "ops/s");
        s.throughput_from = Some(vec![]);
        assert_eq!(s.throughput_of().unwrap(), None);
        s.throughput_from = Some(vec!["nope".into()]);
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("throughput_from") && e.contains("nope") && e.contains("p, q"), "{e}");
    }

    #[test]
    fn bad_references_are_named() {
        let mut s = tiny();
        s.processes[0].threads[0].accesses[0].region = "nope".into();
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("region nope"), "{e}");
        let mut s = tiny();
        s.processes[0].threads[0].work.total = None;
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("duration_s"), "{e}");
        let mut s = tiny();
        s.processes[0].regions[0].bytes = 0;
        assert!(s.validate().unwrap_err().to_string().contains("region mem: bytes"));
        // A process starting when the run ends would never run (review helper-53).
        let mut s = tiny();
        s.processes[0].threads[0].work.total = None;
        s.duration_s = Some(2.0);
        s.processes[0].start_s = 2.0;
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("process p: start_s = 2: at or after the run's duration_s (2 s)"), "{e}");
        s.processes[0].start_s = 1.5;
        s.validate().unwrap();
    }

    #[test]
    fn cross_process_reference_resolves() {
        let mut s = tiny();
        let mut client = s.processes[0].clone();
        client.name = "client".into();
        client.regions.clear();
        client.threads[0].accesses[0].region = "p/mem".into();
        s.processes.push(client);
        s.validate().unwrap();
        assert_eq!(s.resolve_region(&s.processes[1], "p/mem"), Some((0, 0)));
    }
}
