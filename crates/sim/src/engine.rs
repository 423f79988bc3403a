//! The epoch loop and the memory access model: how fast every thread progresses, given where it
//! runs and where its memory is.
//!
//! # Problem
//!
//! A thread's speed on a NUMA machine depends on the latency of the memory it touches (local, same
//! socket, one hop, far), on how loaded the memory controllers and links on the way are, on whether
//! its SMT sibling is busy, on whether it waits for CPU time, and on stalls while its pages migrate.
//! The simulator must turn the kernel model's state into that speed for hundreds of threads and a
//! terabyte of memory, thousands of times per simulated minute, deterministically.
//!
//! # Approach
//!
//! Time advances in epochs (10 ms by default). Each epoch:
//!
//! ```text
//!   start processes due, phases, growth  -> first-touch allocation (kernel::alloc)
//!   load balancer pass                    -> task CPUs (kernel::sched); CPU shares, SMT busy
//!   access model (below)                  -> units of work done, bytes per (task, node)
//!   AutoNUMA (if on): view of this epoch  -> hinting faults, page migrations (kernel::migrate,
//!                                            cost charged), task moves/swaps
//!   finish tasks whose budget ran out; sample every `sample_s` (memory per node, local %)
//! ```
//!
//! Access model. A task's unit of work costs `compute_ns` plus `bytes_per_unit / 64` cache lines.
//! Its accesses are spread over nodes by the regions of its ranges (kept as per-range, per-node
//! counts updated on every allocation and migration, so an epoch never walks all regions):
//!
//! ```text
//!   time/unit = compute_ns / f_c  +  lines * sum_n share_n * (1 - hit) * lat(c, n) * m(c, n) / mlp / f_m
//!               + lines * hit * llc_latency / mlp / f_m
//!   lat(c, n)   idle latency CPU node c -> memory node n (machine::MachineModel)
//!   m(c, n)     contention: max over the resources on the route n -> c (controller of n, links)
//!               of their slow-down m_r >= 1
//!   f_c, f_m    SMT: 1 alone, gain/2 while the sibling is busy (weighted by its busy fraction)
//!   mlp         lines in flight: stream_mlp for streaming accesses, random_mlp for dependent ones
//!   hit         LLC hit share: random accesses min(1, LLC / working set of the LLC's tasks);
//!               streams hit only when the whole working set fits
//! ```
//!
//! Contention is solved as a fixed point: with the current `m_r`, every task's rate gives the
//! traffic on each resource; a resource loaded beyond its capacity raises its `m_r` by the overload
//! ratio, an under-loaded one lowers it (never below 1). Four iterations per epoch, warm-started
//! from the previous epoch's `m_r`, converge within a few epochs for steady workloads. Migration
//! copies add their bytes to the next epoch's loads.
//!
//! # Units
//!
//! ns (`u64`) for time, bytes for traffic (capacities in bytes/ns = GB/s), regions of 2 MiB.
//!
//! # Limits
//!
//! Work is fluid (fractions of units per epoch); within an epoch every task runs at one speed.
//! A region's accesses are uniform over the range that covers it. Noise: each task's progress per
//! epoch is multiplied by `1 + U(-noise, noise)` from the run's seed (OS jitter), so seeds differ
//! while each seed is exactly reproducible.
//!
//! What else a seed varies, as live runs vary it: processes starting together arrive in a
//! seed-dependent order ([`FORK_JITTER_NS`]), and wherever the scheduler has equally good
//! candidates (idle CPUs or nodes at fork, equally loaded groups and CPUs when balancing) it picks
//! one with a generator of its own (`kernel::sched::Tie`). Where the machine is symmetric for the
//! workload (numa01/numa02 under `default`) this changes which CPUs, not the runtime; where it is
//! not (two processes whose main threads may land on one node or on two, the process mix, the VM
//! mix) runtimes differ by seed.
//!
//! Host signals kept per run for `SimHost`: CPU time per CPU (user, system), run delay and
//! switch-ins per task, bytes per (task, range) since the host last took them, bytes and saturated
//! time per memory controller, and system-wide PSI stall totals.

use std::collections::HashMap;

use numapilot_topology::{CpuSet, NodeSet, Topology};

use crate::kernel::alloc;
use crate::kernel::autonuma::{AutoNuma, AutoNumaParams, AutoNumaView, RegionState, TaskRun};
use crate::kernel::migrate::{self, MigrationCost};
use crate::kernel::sched::Sched;
use crate::kernel::{Kernel, Proc, Region, Task, TaskState, NO_NODE, REGION_BYTES};
use crate::machine::{MachineModel, MachineParams};
use crate::result::SeriesPoint;
use crate::workload::{FirstTouch, MemPolicySpec, Pattern, Slice, Spec};
use crate::SimError;

/// First simulated pid; threads take the following ids (pid, pid+1, ...).
pub const PID_BASE: u32 = 1000;

/// Cost of one NUMA hinting fault to the faulting task: a minor page fault, the PTE update and the
/// statistics, ns. Default 2 µs (minor faults cost 1-3 µs on 2012-2024 x86 servers); prevents
/// hinting faults from being free, which would favour scanning more than the kernel can afford.
pub const HINT_FAULT_NS: u64 = 2_000;

/// Contention slow-down above which a memory controller counts as saturated for
/// `NodeSample::mem_bw` (`saturated_ns`): 1.05, i.e. the traffic asked of it exceeds its capacity
/// by more than 5% and every flow through it is throttled. Below that the fixed point's residue
/// (a slow-down converging towards 1) would count controllers that merely run near capacity.
pub const SATURATED_SLOWDOWN: f64 = 1.05;

/// Fork/exec jitter of process starts, ns: each process arrives `U(0, 4 ms)` after its start time,
/// drawn from the run's seed. A shell or orchestrator launching several processes "at once" starts
/// them one after the other, each fork + exec + dynamic loading taking 0.5-2 ms on a Linux server,
/// and the order in which they first run depends on which CPU wakes first; 4 ms covers two or three
/// such launches. Makes processes that start at the same time start in a seed-dependent order (and
/// so take the idle CPUs in that order). It orders starts within an epoch and nothing else: below
/// the 10 ms epoch, a start time stays the workload's (a 4 ms shift of the start would only bias
/// throughput, units / (end - start), by the jitter over the run).
pub const FORK_JITTER_NS: f64 = 4e6;

/// Fixed-point iterations of the contention model per epoch, default 4 (warm-started from the
/// previous epoch's slow-downs, so a steady workload is at its fixed point after a few epochs;
/// measured: the calibration ratios change by < 0.5% between 4 and 16 iterations). Bounds the cost
/// of an epoch to 5 passes over the (task, node) shares.
const CONTENTION_ITERATIONS: usize = 4;

/// Options of one simulation run.
#[derive(Debug, Clone, PartialEq)]
pub struct SimOptions {
    /// Epoch length, ms (default 10: below the kernel's NUMA scan and balance periods).
    pub epoch_ms: f64,
    /// Sampling interval of the convergence series, s (default 1).
    pub sample_s: f64,
    /// Cap on simulated time for fixed-work runs, s (default 3600).
    pub max_s: f64,
    /// Relative per-epoch progress noise (default 0.02: OS jitter of a few percent, the spread of
    /// repeated autonuma-benchmark runs; makes seeds differ, never a seed's own result).
    pub noise: f64,
    /// AutoNUMA tunables (used by the `autonuma` policy; its seed is replaced by the run's seed).
    pub autonuma: AutoNumaParams,
    /// Tunables of the engine policies (`numapilot`, `numad`; the kernel baselines ignore them),
    /// validated before any run starts.
    pub tunables: numapilot_policy::Tunables,
    /// Stall charged to a thread per emulated access sample under `numapilot`, ns (default
    /// `host::PMU_SAMPLE_COST_NS`, 2 us; 0 shows what placement alone gives: the VM mix's
    /// comparison with hard-bind, `workload/vm_mix.rs`). Other policies sample nothing.
    pub pmu_sample_cost_ns: u64,
    /// Cap of the back-off of `numapilot`'s wait between steps, ms, as the daemon's
    /// `[daemon] idle_max_interval_ms` (default `numapilot_policy::cadence::IDLE_MAX_INTERVAL_MS`,
    /// 15 s; 0 steps at the policy's interval throughout, as the simulator did before). While
    /// backed off the access sampling is stretched by the same factor (`cadence` module essay).
    pub idle_max_interval_ms: u64,
    /// Whether the access sampling is stretched while `numapilot` backs off (default true, as
    /// the daemon does; false keeps the base period through long waits, paying for every sample:
    /// what the stretch saves, measured apart from the back-off).
    pub stretch_sampling: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            epoch_ms: 10.0,
            sample_s: 1.0,
            max_s: 3600.0,
            noise: 0.02,
            autonuma: AutoNumaParams::default(),
            tunables: numapilot_policy::Tunables::default(),
            pmu_sample_cost_ns: crate::host::PMU_SAMPLE_COST_NS,
            idle_max_interval_ms: numapilot_policy::cadence::IDLE_MAX_INTERVAL_MS,
            stretch_sampling: true,
        }
    }
}

/// A machine to simulate: topology + performance parameters.
#[derive(Debug, Clone)]
pub struct Machine {
    /// Name (preset name or file).
    pub name: String,
    /// The topology.
    pub topo: Topology,
    /// The performance parameters.
    pub params: MachineParams,
}

impl Machine {
    /// A built-in machine: its topology and its machine file's `[sim]` parameters (defaults for
    /// keys not given). An unknown name is an error listing the valid ones.
    pub fn preset(name: &str) -> Result<Self, SimError> {
        let file = numapilot_topology::presets::machine_file(name).map_err(|_| SimError::Unknown {
            kind: "machine",
            name: name.to_string(),
            valid: numapilot_topology::presets::names().join(", "),
        })?;
        Self::from_machine_file(name, &file, &format!("<preset {name}>"))
    }

    /// A built-in machine by name, else the machine file at that path (the examples' MACHINE
    /// argument; the CLI's `--machine` adds the list of presets to its error).
    pub fn preset_or_file(arg: &str) -> Result<Self, SimError> {
        if numapilot_topology::presets::names().contains(&arg) {
            Self::preset(arg)
        } else {
            Self::from_path(std::path::Path::new(arg))
        }
    }

    /// A machine from a machine file on disk.
    pub fn from_path(path: &std::path::Path) -> Result<Self, SimError> {
        let file = numapilot_topology::MachineFile::load(path).map_err(|e| SimError::Machine(e.to_string()))?;
        Self::from_machine_file(&path.display().to_string(), &file, &path.display().to_string())
    }

    /// A machine from a parsed machine file; `source` names it in errors.
    pub fn from_machine_file(
        name: &str,
        file: &numapilot_topology::MachineFile,
        source: &str,
    ) -> Result<Self, SimError> {
        let topo = file.build().map_err(|e| SimError::Machine(format!("{source}: {e}")))?;
        let params = match &file.sim {
            Some(t) => MachineParams::from_table(&t.0, source)?,
            None => MachineParams::default(),
        };
        Ok(Self { name: name.to_string(), topo, params })
    }
}

/// The baseline placement policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Baseline {
    /// No balancing: first touch, the load balancer, nothing else.
    Default,
    /// autonuma-benchmark HARD_BIND: each process (or, for one process, each thread with its
    /// slices) bound, CPU and memory, to its share of the nodes.
    HardBind,
    /// INVERSE_BIND: CPUs as HARD_BIND, memory on the other half of the nodes.
    InverseBind,
    /// `numactl --interleave=all`: default-policy memory interleaved over all nodes with memory.
    Interleave,
    /// The kernel's NUMA balancing (the AutoNUMA model) on.
    AutoNuma,
}

impl Baseline {
    /// Names accepted by [`Baseline::parse`].
    pub const NAMES: [&'static str; 5] = ["default", "hard-bind", "inverse-bind", "interleave", "autonuma"];

    /// Parses a policy name; an unknown one is an error listing the valid names.
    pub fn parse(name: &str) -> Result<Self, SimError> {
        Ok(match name {
            "default" => Self::Default,
            "hard-bind" => Self::HardBind,
            "inverse-bind" => Self::InverseBind,
            "interleave" => Self::Interleave,
            "autonuma" => Self::AutoNuma,
            _ => {
                return Err(SimError::Unknown { kind: "policy", name: name.to_string(), valid: Self::NAMES.join(", ") })
            }
        })
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): the run's deterministic generator.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(pub u64);

impl SplitMix64 {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..n` (0 when `n` is 0 or 1, without drawing).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        (((self.next_u64() >> 11) as u128 * n as u128) >> 53) as usize
    }
}

/// A flattened region spec of one process instance.
#[derive(Debug, Clone)]
pub(crate) struct RSpecRt {
    pub(crate) proc: usize,
    /// Global index of its first region.
    pub(crate) start: usize,
    /// Regions when fully grown.
    pub(crate) len: usize,
    /// Size as the workload gave it, bytes (a spec smaller than one region has no huge page).
    pub(crate) bytes: u64,
    /// Regions allocated so far from the start (growth allocates in order).
    pub(crate) grown: usize,
    pub(crate) policy: MemPolicySpec,
    /// Whether `policy` was set explicitly (spec or baseline): such regions are not movable by
    /// AutoNUMA and `FirstTouch::Node` does not override them.
    pub(crate) explicit: bool,
    pub(crate) touch: FirstTouch,
    pub(crate) grow: Option<crate::workload::Growth>,
    /// Accessed by tasks of another process.
    pub(crate) shared: bool,
    /// Per-slice policy overrides (hard/inverse bind of per-thread slices): `[start, end)` global.
    pub(crate) slice_policy: Vec<(usize, usize, MemPolicySpec)>,
    /// Ranges over this spec.
    pub(crate) ranges: Vec<u32>,
    /// `(task, access index)` of every access into this spec.
    pub(crate) accessors: Vec<(u32, u32)>,
}

/// A range of regions some task accesses, with its per-node counts.
#[derive(Debug, Clone)]
pub(crate) struct Range {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) counts: Vec<u32>,
    pub(crate) allocated: u32,
}

/// One access stream of a task.
#[derive(Debug, Clone)]
pub(crate) struct Acc {
    pub(crate) range: u32,
    pub(crate) weight: f64,
    pub(crate) random: bool,
}

/// Run-time state of a task beyond the kernel's.
#[derive(Debug, Clone)]
pub(crate) struct TaskRt {
    pub(crate) accs: Vec<Acc>,
    pub(crate) total: Option<f64>,
    pub(crate) done: f64,
    pub(crate) bytes_per_unit: f64,
    pub(crate) compute_ns: f64,
    pub(crate) finish_ns: Option<u64>,
    /// CPU time in the last epoch, ns.
    pub(crate) ran_ns: u64,
    /// Bytes per access in the last epoch.
    pub(crate) acc_bytes: Vec<f64>,
    /// Bytes per range touched since the host last took them (`Sim::take_access_window`), with the
    /// time of the last epoch that touched it: `(range, bytes, last_ns)`. Keyed by range, not by
    /// access index, so a phase change does not lose what was touched before it.
    pub(crate) acc_win: Vec<(u32, f64, u64)>,
    /// The access sampling's cost not paid yet, ns: system time the task spends on PMU interrupts
    /// and buffer drains ([`Sim::sample_stall_per_byte`]), paid before it runs again. Not a memory
    /// stall: it adds to the task's and its CPU's system time, not to PSI memory.
    pub(crate) sampling_ns: f64,
}

/// Run-time state of a process instance.
#[derive(Debug, Clone)]
pub(crate) struct ProcRt {
    pub(crate) name: String,
    pub(crate) spec: usize,
    pub(crate) start_ns: u64,
    /// Its start time plus the seed's fork jitter: the order in which processes due in the same
    /// epoch start (see [`FORK_JITTER_NS`]).
    pub(crate) arrival_ns: u64,
    pub(crate) started: bool,
    pub(crate) finish_ns: Option<u64>,
    pub(crate) open_ended: bool,
    pub(crate) units: f64,
    pub(crate) win_local: f64,
    pub(crate) win_total: f64,
    pub(crate) series: Vec<SeriesPoint>,
    /// Region spec indexes of this instance.
    pub(crate) rspecs: Vec<usize>,
    /// Phases not yet applied: (time, group index, accesses, compute).
    pub(crate) phases: Vec<(u64, usize, Vec<crate::workload::Access>, Option<f64>)>,
    /// Its launcher asked the policy for nodes before it started (`ProcessSpec::launch_advice`).
    pub(crate) launch_asked: bool,
    /// The nodes the launch advice gave, if any: its threads' CPUs were narrowed to them and its
    /// memory without a policy of its own prefers them (`numactl --cpunodebind --preferred-many`:
    /// a task policy, which numa_maps does not show and which leaves its pages movable).
    pub(crate) launch_nodes: Option<NodeSet>,
}

/// One simulation: machine, kernel, workload, policy; advanced epoch by epoch.
#[derive(Debug)]
pub struct Sim {
    /// The kernel state.
    pub kernel: Kernel,
    /// The performance model.
    pub model: MachineModel,
    pub(crate) spec: Spec,
    pub(crate) sched: Sched,
    pub(crate) autonuma: Option<AutoNuma>,
    pub(crate) policy: Baseline,
    pub(crate) opts: SimOptions,
    pub(crate) rng: SplitMix64,
    /// The run's seed (for a model created mid-run).
    pub(crate) seed: u64,
    pub(crate) now_ns: u64,
    pub(crate) epoch_ns: u64,
    pub(crate) rspecs: Vec<RSpecRt>,
    pub(crate) ranges: Vec<Range>,
    pub(crate) trt: Vec<TaskRt>,
    pub(crate) prt: Vec<ProcRt>,
    /// Contention slow-down per resource.
    pub(crate) mult: Vec<f64>,
    /// Migration traffic to add to the next epoch's loads, bytes per resource.
    pub(crate) pending: Vec<f64>,
    /// Load of each resource in the contention loop, bytes (current for those in `used` only).
    pub(crate) load: Vec<f64>,
    /// The resources an epoch updates: every one with pending traffic or a slow-down above 1,
    /// then those on the routes of the epoch's accesses (`in_use` marks them). The others carry
    /// nothing and keep a slow-down of 1.
    pub(crate) used: Vec<u32>,
    pub(crate) in_use: Vec<bool>,
    pub(crate) local_bytes: f64,
    pub(crate) total_bytes: f64,
    pub(crate) next_sample_ns: u64,
    /// LLC index of every CPU id, and the LLC's CPU count.
    pub(crate) cpu_llc: Vec<u32>,
    pub(crate) llc_count: usize,
    pub(crate) hint_faults: u64,
    /// Tie-breaks of the scheduler (fork placement, load balancer) and start order; a stream of
    /// its own so that placement and noise draws do not shift each other.
    pub(crate) tie_rng: SplitMix64,
    /// CPU time given to tasks per CPU id since the start, user and system (stalls), ns.
    pub(crate) cpu_user_ns: Vec<u64>,
    pub(crate) cpu_sys_ns: Vec<u64>,
    /// Bytes through each node's memory controller since the start (dense node index).
    pub(crate) ctrl_bytes: Vec<f64>,
    /// Of `ctrl_bytes`, the page-migration copies (the policy's and AutoNUMA's), bytes.
    pub(crate) ctrl_migrate_bytes: Vec<f64>,
    /// Time each controller spent saturated (slow-down above [`SATURATED_SLOWDOWN`]), ns.
    pub(crate) ctrl_saturated_ns: Vec<u64>,
    /// System-wide PSI stall totals since the start, ns: cpu some, memory some, memory full
    /// (per-CPU stall states weighted by each CPU's non-idle time, as `kernel/sched/psi.c`
    /// aggregates them).
    pub(crate) psi_ns: [f64; 3],
    /// Stall charged to a task per byte it accesses, ns: the emulated access sampling's cost as
    /// it is paid, sample by sample while the task runs (0 unless a `SimHost` samples: its cost
    /// per sample over the bytes one sample stands for at the period in force).
    pub(crate) sample_stall_per_byte: f64,
}

fn ns(s: f64) -> u64 {
    (s * 1e9).round() as u64
}

impl Sim {
    /// Builds a run of `spec` on `machine` under `policy` with `seed`. Checks the workload against
    /// the machine (node and CPU ids, non-empty affinities) before anything runs.
    pub fn new(
        machine: &Machine,
        spec: &Spec,
        policy: Baseline,
        seed: u64,
        opts: &SimOptions,
    ) -> Result<Self, SimError> {
        spec.validate()?;
        machine.params.validate().map_err(|e| SimError::Machine(format!("{}: {e}", machine.name)))?;
        if !(opts.epoch_ms > 0.0 && opts.sample_s > 0.0 && opts.max_s > 0.0 && opts.noise >= 0.0 && opts.noise < 1.0) {
            return Err(SimError::Machine("options: epoch_ms, sample_s, max_s must be > 0, noise in [0, 1)".into()));
        }
        let topo = &machine.topo;
        let mismatch = |reason: String| SimError::Mismatch { workload: spec.name.clone(), reason };
        // A process more memory than the machine has was run without it placed, and nothing said
        // so (review helper-53). (Processes that together overcommit it may still run one after
        // another: what finds no room then is counted in the result, `alloc_failures`.)
        let machine_bytes: u64 = topo.nodes.iter().map(|n| n.mem_total_kb.saturating_mul(1024)).sum();
        if let Some(p) = spec.processes.iter().find(|p| p.regions.iter().map(|r| r.bytes).sum::<u64>() > machine_bytes)
        {
            let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
            return Err(mismatch(format!(
                "process {}: its regions take {:.1} GiB, more than the machine's {:.1} GiB of memory",
                p.name,
                gib(p.regions.iter().map(|r| r.bytes).sum()),
                gib(machine_bytes)
            )));
        }
        let mut kernel = Kernel::new(topo);
        let model = MachineModel::new(topo, machine.params.clone());
        let sched = Sched::new(&kernel);
        let online = topo.online_cpus();
        let node_ids = topo.node_ids();
        let check_nodes = |p: &MemPolicySpec, what: &str| -> Result<(), SimError> {
            let ids: Vec<u32> = match p {
                MemPolicySpec::Local => vec![],
                MemPolicySpec::Preferred { node } => vec![*node],
                MemPolicySpec::Bind { nodes }
                | MemPolicySpec::PreferredMany { nodes }
                | MemPolicySpec::Interleave { nodes }
                | MemPolicySpec::WeightedInterleave { nodes, .. } => nodes.iter().collect(),
            };
            match ids.iter().find(|n| !node_ids.contains(**n)) {
                Some(n) => Err(mismatch(format!("{what}: node {n} is not a node of this machine ({node_ids})"))),
                None => Ok(()),
            }
        };
        let mut rng = SplitMix64(seed ^ 0x5157_6e75_6d61_7069);
        let mut jitter = SplitMix64(seed ^ 0x666f_726b_6a69_7474);
        let mut rspecs: Vec<RSpecRt> = Vec::new();
        let mut prt: Vec<ProcRt> = Vec::new();
        let mut trt: Vec<TaskRt> = Vec::new();
        let mut next_pid = PID_BASE;
        // Region spec index of (spec process, region) for instance 0 of count-1 processes, for
        // cross-process references.
        let mut first_rspec_of: Vec<usize> = Vec::new();
        // Pass 1: processes, regions, tasks.
        for (si, ps) in spec.processes.iter().enumerate() {
            first_rspec_of.push(rspecs.len());
            check_nodes(&ps.policy, &format!("process {} policy", ps.name))?;
            if let Some(c) = &ps.cpus {
                if c.intersection(&online).is_empty() {
                    return Err(mismatch(format!("process {}: cpus {c} has no online CPU of this machine", ps.name)));
                }
            }
            if let Some(c) = &ps.cpuset {
                if c.intersection(&online).is_empty() {
                    return Err(mismatch(format!("process {}: cpuset {c} has no online CPU of this machine", ps.name)));
                }
            }
            for inst in 0..ps.count {
                let pi = kernel.procs.len();
                let name = if ps.count > 1 { format!("{}-{inst}", ps.name) } else { ps.name.clone() };
                let pid = next_pid;
                let first_region = kernel.regions.len();
                let mut ranges_of_proc = Vec::new();
                let mut addrs = Vec::new();
                let mut addr = 0x7f00_0000_0000u64 + (pi as u64) * (1 << 40);
                let mut my_rspecs = Vec::new();
                for (ri, r) in ps.regions.iter().enumerate() {
                    if let Some(p) = &r.policy {
                        check_nodes(p, &format!("process {}, region {} policy", ps.name, r.name))?;
                    }
                    if let FirstTouch::Node { node } = r.touch {
                        if !node_ids.contains(node) {
                            return Err(mismatch(format!(
                                "process {}, region {}: touch node {node} is not a node of this machine ({node_ids})",
                                ps.name, r.name
                            )));
                        }
                    }
                    let n = r.bytes.div_ceil(REGION_BYTES) as usize;
                    let start = kernel.regions.len();
                    let rs = rspecs.len() as u32;
                    kernel.regions.extend(std::iter::repeat_n(Region { node: NO_NODE, proc: pi as u32, rspec: rs }, n));
                    ranges_of_proc.push((start, start + n));
                    addrs.push(addr);
                    addr += (n as u64) * REGION_BYTES + (1 << 30);
                    let (policy, explicit) = match (&r.policy, &ps.policy) {
                        (Some(p), _) => (p.clone(), true),
                        (None, MemPolicySpec::Local) => (MemPolicySpec::Local, false),
                        (None, p) => (p.clone(), true),
                    };
                    let _ = ri;
                    my_rspecs.push(rspecs.len());
                    rspecs.push(RSpecRt {
                        proc: pi,
                        start,
                        len: n,
                        bytes: r.bytes,
                        grown: 0,
                        policy,
                        explicit,
                        touch: r.touch,
                        grow: r.grow,
                        shared: false,
                        slice_policy: Vec::new(),
                        ranges: Vec::new(),
                        accessors: Vec::new(),
                    });
                }
                let mut tasks = Vec::new();
                let mut open_ended = false;
                for (gi, g) in ps.threads.iter().enumerate() {
                    let mut allowed = online.clone();
                    if let Some(c) = &ps.cpus {
                        allowed = allowed.intersection(c);
                    }
                    if let Some(c) = &ps.cpuset {
                        allowed = allowed.intersection(c);
                    }
                    if let Some(c) = &g.cpus {
                        allowed = allowed.intersection(c);
                    }
                    if allowed.is_empty() {
                        return Err(mismatch(format!(
                            "process {}, thread group {}: no online CPU allowed",
                            ps.name, g.name
                        )));
                    }
                    open_ended |= g.work.total.is_none();
                    for ti in 0..g.count {
                        let task = kernel.tasks.len();
                        tasks.push(task);
                        kernel.tasks.push(Task {
                            state: TaskState::NotStarted,
                            duty: g.work.duty,
                            ..Task::new(
                                next_pid,
                                pi as u32,
                                gi as u32,
                                ti,
                                allowed.first().expect("non-empty"),
                                allowed.clone(),
                            )
                        });
                        next_pid += 1;
                        trt.push(TaskRt {
                            accs: Vec::new(),
                            total: g.work.total,
                            done: 0.0,
                            bytes_per_unit: g.work.bytes_per_unit,
                            compute_ns: g.work.compute_ns,
                            finish_ns: None,
                            ran_ns: 0,
                            acc_bytes: Vec::new(),
                            acc_win: Vec::new(),
                            sampling_ns: 0.0,
                        });
                    }
                }
                let start_ns = ns(ps.start_s);
                let arrival_ns = start_ns + (jitter.unit() * FORK_JITTER_NS) as u64;
                kernel.procs.push(Proc {
                    pid,
                    comm: name.clone(),
                    starttime: start_ns / 10_000_000,
                    start_ns,
                    first_region,
                    regions: ranges_of_proc,
                    addrs,
                    tasks,
                    cpuset: ps.cpuset.clone(),
                });
                kernel.proc_node.push(vec![0; topo.nodes.len()]);
                let phases = ps
                    .phases
                    .iter()
                    .map(|ph| {
                        let gi = ps.threads.iter().position(|g| g.name == ph.group).expect("validated");
                        (start_ns + ns(ph.at_s), gi, ph.accesses.clone(), ph.compute_ns)
                    })
                    .collect();
                prt.push(ProcRt {
                    name,
                    spec: si,
                    start_ns,
                    arrival_ns,
                    started: false,
                    finish_ns: None,
                    open_ended,
                    units: 0.0,
                    win_local: 0.0,
                    win_total: 0.0,
                    series: Vec::new(),
                    rspecs: my_rspecs,
                    phases,
                    launch_asked: false,
                    launch_nodes: None,
                });
            }
        }
        let cpu_llc_info = llc_map(topo);
        let max_cpu = kernel.cpu_node.len();
        let nodes_n = topo.nodes.len();
        let mut sim = Sim {
            mult: vec![1.0; model.resources()],
            pending: vec![0.0; model.resources()],
            load: vec![0.0; model.resources()],
            used: Vec::new(),
            in_use: vec![false; model.resources()],
            kernel,
            model,
            spec: spec.clone(),
            sched,
            autonuma: None,
            policy,
            opts: opts.clone(),
            rng: SplitMix64(rng.next_u64()),
            seed,
            now_ns: 0,
            epoch_ns: (opts.epoch_ms * 1e6).round().max(1.0) as u64,
            rspecs,
            ranges: Vec::new(),
            trt,
            prt,
            local_bytes: 0.0,
            total_bytes: 0.0,
            next_sample_ns: ns(opts.sample_s),
            cpu_llc: cpu_llc_info.0,
            llc_count: cpu_llc_info.1,
            hint_faults: 0,
            tie_rng: SplitMix64(seed ^ 0x7469_6562_7265_616b),
            cpu_user_ns: vec![0; max_cpu],
            cpu_sys_ns: vec![0; max_cpu],
            ctrl_bytes: vec![0.0; nodes_n],
            ctrl_migrate_bytes: vec![0.0; nodes_n],
            ctrl_saturated_ns: vec![0; nodes_n],
            psi_ns: [0.0; 3],
            sample_stall_per_byte: 0.0,
        };
        // Pass 2: accesses (ranges) of every task, now that all region specs exist.
        for task in 0..sim.kernel.tasks.len() {
            let pi = sim.kernel.tasks[task].proc as usize;
            let gi = sim.kernel.tasks[task].group as usize;
            let si = sim.prt[pi].spec;
            let accesses = spec.processes[si].threads[gi].accesses.clone();
            sim.set_accesses(task, &accesses, &first_rspec_of)?;
        }
        sim.apply_baseline()?;
        if policy == Baseline::AutoNuma {
            sim.autonuma = Some(sim.new_autonuma(true));
            sim.kernel.numa_balancing = 1;
        }
        Ok(sim)
    }

    /// A fresh AutoNUMA model for this run (tunables from the options, the run's seed).
    fn new_autonuma(&self, enabled: bool) -> AutoNuma {
        let topo = &self.kernel.topo;
        let mut params = self.opts.autonuma.clone();
        params.seed = self.seed;
        params.enabled = enabled;
        params.region_bytes = REGION_BYTES;
        let cpus_per_node =
            topo.nodes.iter().map(|n| topo.cpus.iter().filter(|c| c.online && c.node == n.id).count() as u32).collect();
        AutoNuma::new(params, cpus_per_node)
    }

    /// Writes `/proc/sys/kernel/numa_balancing` (0 off, anything else on), as a policy action or a
    /// workload phase would; the model follows at the next epoch (see [`Sim::step`]).
    pub fn set_numa_balancing(&mut self, value: i64) {
        self.kernel.numa_balancing = value;
    }

    /// Makes the AutoNUMA model follow `kernel.numa_balancing`, whoever wrote it: switched on in a
    /// run that had no model, one is created (scanning starts after the scan delay, like the
    /// kernel's `init_numa_balancing` for a running mm); a change calls [`AutoNuma::set_enabled`].
    fn sync_numa_balancing(&mut self) {
        let on = self.kernel.numa_balancing != 0;
        if on && self.autonuma.is_none() {
            let mut an = self.new_autonuma(false);
            an.set_enabled(true);
            self.autonuma = Some(an);
        }
        if let Some(an) = self.autonuma.as_mut() {
            if an.enabled() != on {
                an.set_enabled(on);
            }
        }
    }

    /// Resolves and installs the access list of `task` (at build time and on phase changes).
    fn set_accesses(
        &mut self,
        task: usize,
        accesses: &[crate::workload::Access],
        first_rspec_of: &[usize],
    ) -> Result<(), SimError> {
        let pi = self.kernel.tasks[task].proc as usize;
        let gi = self.kernel.tasks[task].group as usize;
        let ti = self.kernel.tasks[task].index as usize;
        let si = self.prt[pi].spec;
        let count = self.spec.processes[si].threads[gi].count as usize;
        let wsum: f64 = accesses.iter().map(|a| a.weight).sum();
        // Drop this task's previous accessor entries.
        for rs in &mut self.rspecs {
            rs.accessors.retain(|&(t, _)| t as usize != task);
        }
        let resolved: Vec<Option<(usize, usize)>> = {
            let ps = &self.spec.processes[si];
            accesses.iter().map(|a| self.spec.resolve_region(ps, &a.region)).collect()
        };
        let mut accs = Vec::new();
        for (ai, a) in accesses.iter().enumerate() {
            let (tp, tr) = resolved[ai].ok_or_else(|| SimError::Mismatch {
                workload: self.spec.name.clone(),
                reason: format!("region {} does not resolve", a.region),
            })?;
            let rs = if tp == si { self.prt[pi].rspecs[tr] } else { first_rspec_of[tp] + tr };
            let (s0, len) = (self.rspecs[rs].start, self.rspecs[rs].len);
            let (start, end) = match a.slice {
                Slice::Whole => (s0, s0 + len),
                Slice::PerThread => {
                    let a0 = s0 + len * ti / count;
                    let a1 = (s0 + len * (ti + 1) / count).max(a0 + 1).min(s0 + len);
                    (a0.min(s0 + len - 1), a1)
                }
            };
            let range = self.range_id(rs, start, end);
            if self.rspecs[rs].proc != pi {
                self.rspecs[rs].shared = true;
            }
            self.rspecs[rs].accessors.push((task as u32, ai as u32));
            accs.push(Acc { range, weight: a.weight / wsum, random: a.pattern == Pattern::Random });
        }
        self.trt[task].acc_bytes = vec![0.0; accs.len()];
        self.trt[task].accs = accs;
        Ok(())
    }

    /// The id of range `[start, end)` of region spec `rs`, creating it (with its counts) if new.
    fn range_id(&mut self, rs: usize, start: usize, end: usize) -> u32 {
        for &r in &self.rspecs[rs].ranges {
            let x = &self.ranges[r as usize];
            if x.start == start && x.end == end {
                return r;
            }
        }
        let mut counts = vec![0u32; self.kernel.nr_nodes()];
        let mut allocated = 0;
        for reg in &self.kernel.regions[start..end] {
            if reg.node != NO_NODE {
                counts[self.kernel.nidx(reg.node)] += 1;
                allocated += 1;
            }
        }
        let id = self.ranges.len() as u32;
        self.ranges.push(Range { start, end, counts, allocated });
        self.rspecs[rs].ranges.push(id);
        id
    }

    /// Applies the baseline policy's bindings (before anything is allocated).
    fn apply_baseline(&mut self) -> Result<(), SimError> {
        let topo = &self.kernel.topo;
        let all_mem: NodeSet = topo.nodes.iter().filter(|n| n.mem_total_kb > 0).map(|n| n.id).collect();
        match self.policy {
            Baseline::Default | Baseline::AutoNuma => Ok(()),
            Baseline::Interleave => {
                for rs in &mut self.rspecs {
                    if !rs.explicit {
                        rs.policy = MemPolicySpec::Interleave { nodes: all_mem.clone() };
                        rs.explicit = true;
                    }
                }
                Ok(())
            }
            Baseline::HardBind | Baseline::InverseBind => {
                let cpu_nodes: Vec<u32> = topo.nodes.iter().filter(|n| !n.cpus.is_empty()).map(|n| n.id).collect();
                let n = cpu_nodes.len();
                let chunk = |u: usize, units: usize| -> Vec<usize> {
                    if units <= n {
                        let a = u * n / units;
                        let b = ((u + 1) * n / units).max(a + 1);
                        (a..b).collect()
                    } else {
                        vec![u * n / units]
                    }
                };
                let inverse = self.policy == Baseline::InverseBind;
                let mem_of = |idx: &[usize]| -> NodeSet {
                    idx.iter().map(|&i| cpu_nodes[if inverse { (i + n / 2) % n } else { i }]).collect()
                };
                let cpus_of = |idx: &[usize]| -> CpuSet {
                    let set: NodeSet = idx.iter().map(|&i| cpu_nodes[i]).collect();
                    topo.cpus_of_nodes(&set)
                };
                let nprocs = self.kernel.procs.len();
                if nprocs >= 2 {
                    // Each process gets a contiguous share of the nodes sized by the larger of its
                    // share of the threads and of the memory (equal processes: equal halves).
                    let threads: Vec<f64> = self.kernel.procs.iter().map(|p| p.tasks.len() as f64).collect();
                    let bytes: Vec<f64> = self
                        .kernel
                        .procs
                        .iter()
                        .map(|p| p.regions.iter().map(|&(s, e)| (e - s) as f64).sum::<f64>())
                        .collect();
                    let (tt, tb) = (threads.iter().sum::<f64>().max(1.0), bytes.iter().sum::<f64>().max(1.0));
                    let w: Vec<f64> = (0..nprocs).map(|p| (threads[p] / tt).max(bytes[p] / tb)).collect();
                    let wt: f64 = w.iter().sum();
                    let mut cum = 0.0;
                    let mut chunks = Vec::new();
                    for wp in &w {
                        let a = ((cum / wt * n as f64 + 1e-9).floor() as usize).min(n - 1);
                        cum += wp;
                        let b = ((cum / wt * n as f64 + 1e-9).floor() as usize).clamp(a + 1, n);
                        chunks.push((a..b).collect::<Vec<usize>>());
                    }
                    for (p, idx) in chunks.into_iter().enumerate() {
                        let cpus = cpus_of(&idx);
                        let mem = mem_of(&idx);
                        for &t in &self.kernel.procs[p].tasks.clone() {
                            let allowed = self.kernel.tasks[t].allowed.intersection(&cpus);
                            if !allowed.is_empty() {
                                self.kernel.tasks[t].allowed = allowed;
                            }
                        }
                        for &rs in &self.prt[p].rspecs {
                            self.rspecs[rs].policy = MemPolicySpec::Bind { nodes: mem.clone() };
                            self.rspecs[rs].explicit = true;
                        }
                    }
                } else {
                    let tasks = self.kernel.procs[0].tasks.clone();
                    let units = tasks.len();
                    for (u, &t) in tasks.iter().enumerate() {
                        let idx = chunk(u, units);
                        let cpus = cpus_of(&idx);
                        let mem = mem_of(&idx);
                        let allowed = self.kernel.tasks[t].allowed.intersection(&cpus);
                        if !allowed.is_empty() {
                            self.kernel.tasks[t].allowed = allowed;
                        }
                        // Bind the per-thread slices this thread accesses.
                        let pi = self.kernel.tasks[t].proc as usize;
                        let gi = self.kernel.tasks[t].group as usize;
                        let si = self.prt[pi].spec;
                        let slices: Vec<bool> = self.spec.processes[si].threads[gi]
                            .accesses
                            .iter()
                            .map(|a| a.slice == Slice::PerThread)
                            .collect();
                        for (ai, acc) in self.trt[t].accs.iter().enumerate() {
                            if !slices[ai] {
                                continue;
                            }
                            let r = &self.ranges[acc.range as usize];
                            let rs = self.kernel.regions[r.start].rspec as usize;
                            self.rspecs[rs].slice_policy.push((
                                r.start,
                                r.end,
                                MemPolicySpec::Bind { nodes: mem.clone() },
                            ));
                        }
                    }
                    // Memory outside any slice: whole-buffer regions bound to all CPU nodes' memory.
                }
                Ok(())
            }
        }
    }

    /// When process `p` (index) arrives: its start time plus the seed's fork jitter. Processes due
    /// in the same epoch start in this order; the jitter never delays a start to a later epoch nor
    /// moves a process's start time (its CPU time and throughput count from the epoch it started).
    pub fn arrival_ns(&self, p: usize) -> Option<u64> {
        self.prt.get(p).map(|r| r.arrival_ns)
    }

    /// Current simulated time, ns.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Epoch length, ns.
    pub fn epoch_ns(&self) -> u64 {
        self.epoch_ns
    }

    /// The AutoNUMA model, when the run has it.
    pub fn autonuma(&self) -> Option<&AutoNuma> {
        self.autonuma.as_ref()
    }

    /// Policy of region `g` (global index).
    fn policy_of(&self, g: usize) -> MemPolicySpec {
        let rs = &self.rspecs[self.kernel.regions[g].rspec as usize];
        for (s, e, p) in &rs.slice_policy {
            if (*s..*e).contains(&g) {
                return p.clone();
            }
        }
        if let (MemPolicySpec::Local, false, Some(nodes)) = (&rs.policy, rs.explicit, &self.prt[rs.proc].launch_nodes) {
            return MemPolicySpec::PreferredMany { nodes: nodes.clone() };
        }
        rs.policy.clone()
    }

    /// Processes that start at the next [`Sim::step`] and whose launcher asks the placement
    /// policy for nodes first (`ProcessSpec::launch_advice`), not asked yet, in start order: their
    /// index and request (CPUs: their threads; memory: their regions' full size).
    pub fn launches_due(&self) -> Vec<(usize, numapilot_policy::LaunchRequest)> {
        let now = self.now_ns;
        let mut due: Vec<usize> = (0..self.prt.len())
            .filter(|&p| {
                let r = &self.prt[p];
                !r.started && !r.launch_asked && r.start_ns <= now && self.spec.processes[r.spec].launch_advice
            })
            .collect();
        due.sort_by_key(|&p| (self.prt[p].arrival_ns, p));
        let nodes_now = self.nodes_free_now();
        due.into_iter()
            .map(|p| {
                let r = &self.prt[p];
                let mem: u64 = r.rspecs.iter().map(|&rs| self.rspecs[rs].bytes).sum();
                let req = numapilot_policy::LaunchRequest {
                    pid: Some(self.kernel.procs[p].pid),
                    name: r.name.clone(),
                    cpus: self.kernel.procs[p].tasks.len() as f64,
                    mem_bytes: mem,
                    nodes_now: nodes_now.clone(),
                    reach_cpus: None,
                };
                (p, req)
            })
            .collect()
    }

    /// Free CPUs and memory per node now, as a launcher measuring the machine would find them:
    /// CPUs not running a task (a task running is a CPU busy) and free memory (the node's
    /// MemFree).
    pub fn nodes_free_now(&self) -> Vec<numapilot_policy::advise::NodeFree> {
        let k = &self.kernel;
        let mut busy = vec![0u32; k.topo.nodes.len()];
        for t in &k.tasks {
            if t.state == TaskState::Running {
                busy[k.nidx(k.node_of_cpu(t.cpu))] += 1;
            }
        }
        k.topo
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let cpus = n.cpus.len() as u32;
                numapilot_policy::advise::NodeFree {
                    node: n.id,
                    cpus,
                    free_cpus: f64::from(cpus.saturating_sub(busy[i])),
                    mem_free_bytes: k.free_regions(i) * REGION_BYTES,
                }
            })
            .collect()
    }

    /// Records the launch advice for process `p` (index) before it starts: `None` (no advice)
    /// starts it as if nobody had been asked; nodes narrow its threads' CPUs to theirs (where
    /// that leaves any) and make its memory prefer them. Asked once.
    pub fn apply_launch(&mut self, p: usize, nodes: Option<&NodeSet>) {
        if self.prt[p].started || self.prt[p].launch_asked {
            return;
        }
        self.prt[p].launch_asked = true;
        let Some(nodes) = nodes else { return };
        let cpus = self.kernel.topo.cpus_of_nodes(nodes);
        if cpus.is_empty() {
            return;
        }
        for t in self.kernel.procs[p].tasks.clone() {
            let allowed = self.kernel.tasks[t].allowed.intersection(&cpus);
            if !allowed.is_empty() {
                self.kernel.tasks[t].allowed = allowed;
            }
        }
        self.prt[p].launch_nodes = Some(nodes.clone());
    }

    /// Per-node shares (dense node index) of the accesses to range `r` when its memory is
    /// interleaved page by page inside one region, `None` when the region granule says where it is.
    ///
    /// A buffer smaller than one region (2 MiB) gets no transparent huge page: the kernel
    /// interleaves its 4 KiB pages one by one (mm/mempolicy.c, interleave index from the page
    /// offset), so a 1.6 MiB buffer interleaved over two nodes is half on each. Placing the whole
    /// granule on one node instead made `interleave` look local for small shared buffers (redis:
    /// 95.7% local, 1.28x the default's throughput on autonuma-2s12c-24g). Larger buffers are
    /// interleaved per region (one huge page each), which the counts already say.
    pub(crate) fn page_interleave(&self, r: &Range) -> Option<Vec<f64>> {
        let rs = &self.rspecs[self.kernel.regions.get(r.start)?.rspec as usize];
        if rs.bytes >= REGION_BYTES || r.allocated == 0 || !rs.slice_policy.is_empty() {
            return None;
        }
        let nn = self.kernel.nr_nodes();
        let mut w = vec![0.0; nn];
        match &rs.policy {
            MemPolicySpec::Interleave { nodes } => {
                for n in nodes.iter() {
                    if let Some(i) = self.kernel.topo.node_idx(n) {
                        w[i] = 1.0;
                    }
                }
            }
            MemPolicySpec::WeightedInterleave { nodes, weights } => {
                for (n, &wt) in nodes.iter().zip(weights.iter()) {
                    if let Some(i) = self.kernel.topo.node_idx(n) {
                        w[i] = wt as f64;
                    }
                }
            }
            _ => return None,
        }
        // Only nodes with memory (and room for the pages at all) take interleaved pages.
        for (i, x) in w.iter_mut().enumerate() {
            if self.kernel.node_capacity[i] == 0 {
                *x = 0.0;
            }
        }
        let sum: f64 = w.iter().sum();
        if sum <= 0.0 {
            return None;
        }
        w.iter_mut().for_each(|x| *x /= sum);
        Some(w)
    }

    /// Share of range `r`'s accesses that land on dense node `n`.
    fn range_share(&self, r: &Range, n: usize) -> f64 {
        match self.page_interleave(r) {
            Some(w) => w[n],
            None if r.allocated > 0 => r.counts[n] as f64 / r.allocated as f64,
            None => 0.0,
        }
    }

    /// Updates range counts after region `g` went from `from` to `to` (kernel ids).
    fn note_move(&mut self, g: usize, from: u32, to: u32) {
        let rs = self.kernel.regions[g].rspec as usize;
        let fi = (from != NO_NODE).then(|| self.kernel.nidx(from));
        let ti = self.kernel.nidx(to);
        for &r in &self.rspecs[rs].ranges {
            let x = &mut self.ranges[r as usize];
            if (x.start..x.end).contains(&g) {
                match fi {
                    Some(f) => x.counts[f] -= 1,
                    None => x.allocated += 1,
                }
                x.counts[ti] += 1;
            }
        }
    }

    /// Allocates region `g` for a toucher on node `toucher` (kernel id) by its policy.
    fn alloc_region(&mut self, g: usize, toucher: u32) {
        if self.kernel.regions[g].node != NO_NODE {
            return;
        }
        let rs = self.kernel.regions[g].rspec as usize;
        let mut policy = self.policy_of(g);
        let explicit =
            self.rspecs[rs].explicit || self.rspecs[rs].slice_policy.iter().any(|(s, e, _)| (*s..*e).contains(&g));
        if let (FirstTouch::Node { node }, false) = (self.rspecs[rs].touch, explicit) {
            policy = MemPolicySpec::Preferred { node };
        }
        let offset = (g - self.rspecs[rs].start) as u64;
        if let Ok(n) = alloc::allocate(&mut self.kernel, g, &policy, toucher, offset) {
            self.note_move(g, NO_NODE, n);
        }
    }

    /// Migrates region `g` to node `to`, returning the cost (charged by the caller to a task) or
    /// `None` when it did not move.
    pub(crate) fn migrate_region(&mut self, g: usize, to: u32) -> Result<Option<MigrationCost>, migrate::MigrateError> {
        let from = self.kernel.regions[g].node;
        let cost = migrate::migrate(&mut self.kernel, &self.model, g, to)?;
        if let Some(c) = &cost {
            self.note_move(g, from, to);
            c.charge(&self.model, &mut self.pending);
            for r in c.resources(&self.model) {
                if !self.in_use[r] {
                    self.in_use[r] = true;
                    self.used.push(r as u32);
                }
            }
        }
        Ok(cost)
    }

    /// Regions of `rspec` that should exist at `now` (growth).
    fn target_regions(&self, rs: usize, now: u64) -> usize {
        let r = &self.rspecs[rs];
        match r.grow {
            None => r.len,
            Some(g) => {
                let since = now.saturating_sub(self.prt[r.proc].start_ns) as f64 / 1e9;
                let bytes = g.initial_bytes as f64 + g.bytes_per_s * since;
                ((bytes / REGION_BYTES as f64).ceil() as usize).min(r.len)
            }
        }
    }

    fn start_process(&mut self, p: usize) {
        self.prt[p].started = true;
        let tasks = self.kernel.procs[p].tasks.clone();
        for &t in &tasks {
            let allowed = self.kernel.tasks[t].allowed.clone();
            let rng = &mut self.tie_rng;
            if let Some(cpu) = self.sched.place_new(&self.kernel, &allowed, &mut |n| rng.below(n)) {
                self.kernel.tasks[t].cpu = cpu;
            }
            self.kernel.tasks[t].state = TaskState::Running;
            self.kernel.tasks[t].timeslices += 1;
        }
        let main_node = self.kernel.node_of_cpu(self.kernel.tasks[tasks[0]].cpu);
        // Per-thread first touch: each thread its per-thread slices, in thread order.
        for &t in &tasks {
            let node = self.kernel.node_of_cpu(self.kernel.tasks[t].cpu);
            for ai in 0..self.trt[t].accs.len() {
                let r = self.trt[t].accs[ai].range as usize;
                let (s, e) = (self.ranges[r].start, self.ranges[r].end);
                let rs = self.kernel.regions[s].rspec as usize;
                if self.rspecs[rs].proc != p || self.rspecs[rs].touch != FirstTouch::Threads {
                    continue;
                }
                let target = self.rspecs[rs].start + self.target_regions(rs, self.now_ns);
                for g in s..e.min(target) {
                    self.alloc_region(g, node);
                }
            }
        }
        // Everything else present at start: the main thread (or the forced node).
        for &rs in &self.prt[p].rspecs.clone() {
            let target = self.target_regions(rs, self.now_ns);
            let s = self.rspecs[rs].start;
            for g in s..s + target {
                self.alloc_region(g, main_node);
            }
            self.rspecs[rs].grown = target;
        }
        // The chart's first point: placement at start, local share expected from it.
        let pct = self.expected_local_pct(p);
        let mem_mib = self.kernel.proc_node[p].iter().map(|&r| (r * REGION_BYTES) as f64 / (1 << 20) as f64).collect();
        self.prt[p].series.push(SeriesPoint { t_s: self.now_ns as f64 / 1e9, mem_mib, local_pct: pct });
    }

    /// Share of process `p`'s accesses that would be local given where its threads and memory are
    /// now (access weights over the regions of each access's range), %.
    fn expected_local_pct(&self, p: usize) -> f64 {
        let (mut local, mut total) = (0.0, 0.0);
        for &t in &self.kernel.procs[p].tasks {
            let cnode = self.kernel.nidx(self.kernel.node_of_cpu(self.kernel.tasks[t].cpu));
            for a in &self.trt[t].accs {
                let r = &self.ranges[a.range as usize];
                if r.allocated > 0 {
                    local += a.weight * self.range_share(r, cnode);
                    total += a.weight;
                }
            }
        }
        if total > 0.0 {
            100.0 * local / total
        } else {
            0.0
        }
    }

    /// Advances one epoch. Returns false when the run is over (all fixed work done, or the
    /// duration / cap reached).
    pub fn step(&mut self) -> bool {
        let now = self.now_ns;
        let epoch = self.epoch_ns;
        // Starts, in arrival order (start time plus the seed's fork jitter).
        let mut due: Vec<usize> =
            (0..self.prt.len()).filter(|&p| !self.prt[p].started && self.prt[p].start_ns <= now).collect();
        due.sort_by_key(|&p| (self.prt[p].arrival_ns, p));
        for p in due {
            self.start_process(p);
        }
        // Phases, growth.
        for p in 0..self.prt.len() {
            if !self.prt[p].started || self.prt[p].finish_ns.is_some() {
                continue;
            }
            let due: Vec<_> = {
                let ph = &mut self.prt[p].phases;
                let (now_due, later): (Vec<_>, Vec<_>) = ph.drain(..).partition(|x| x.0 <= now);
                *ph = later;
                now_due
            };
            for (_, gi, accesses, compute) in due {
                for t in self.kernel.procs[p].tasks.clone() {
                    if self.kernel.tasks[t].group as usize == gi {
                        let first: Vec<usize> = self.first_rspec_of();
                        let _ = self.set_accesses(t, &accesses, &first);
                        if let Some(c) = compute {
                            self.trt[t].compute_ns = c;
                        }
                    }
                }
            }
            for rs in self.prt[p].rspecs.clone() {
                if self.rspecs[rs].grow.is_none() {
                    continue;
                }
                let target = self.target_regions(rs, now);
                let grown = self.rspecs[rs].grown;
                if target > grown {
                    let main = self.kernel.procs[p].tasks[0];
                    let node = self.kernel.node_of_cpu(self.kernel.tasks[main].cpu);
                    let s = self.rspecs[rs].start;
                    for g in s + grown..s + target {
                        self.alloc_region(g, node);
                    }
                    self.rspecs[rs].grown = target;
                }
            }
        }
        self.sync_numa_balancing();
        // Scheduler.
        {
            // With balancing off the load balancer ignores preferred nodes (the kernel's
            // migrate_degrades_locality returns "no opinion" when sched_numa_balancing is off).
            let an = self.autonuma.as_ref().filter(|a| a.enabled());
            let tasks = &self.kernel.tasks;
            let topo = &self.kernel.topo;
            let pref = |t: usize| -> Option<u32> {
                an.and_then(|a| a.preferred_node(tasks[t].tid)).and_then(|i| topo.nodes.get(i).map(|n| n.id))
            };
            // The balancer mutates the kernel; preferred nodes are read before.
            let prefs: Vec<Option<u32>> = (0..tasks.len()).map(pref).collect();
            let rng = &mut self.tie_rng;
            self.sched.balance(&mut self.kernel, &|t| prefs[t], &mut |n| rng.below(n));
        }
        let (share, busy) = Sched::shares(&self.kernel);
        self.run_accesses(&share, &busy);
        // AutoNUMA.
        if self.autonuma.is_some() {
            self.autonuma_epoch();
        }
        self.now_ns += epoch;
        // Finishes and samples.
        for p in 0..self.prt.len() {
            if !self.prt[p].started || self.prt[p].finish_ns.is_some() || self.prt[p].open_ended {
                continue;
            }
            let tasks = &self.kernel.procs[p].tasks;
            if tasks.iter().all(|&t| self.kernel.tasks[t].state == TaskState::Exited) {
                let f = tasks.iter().filter_map(|&t| self.trt[t].finish_ns).max().unwrap_or(self.now_ns);
                self.prt[p].finish_ns = Some(f);
                self.sample_process(p, f);
            }
        }
        if self.now_ns >= self.next_sample_ns {
            let t = self.next_sample_ns;
            for p in 0..self.prt.len() {
                if self.prt[p].started && self.prt[p].finish_ns.is_none() {
                    self.sample_process(p, t);
                }
            }
            self.next_sample_ns += ns(self.opts.sample_s);
        }
        !self.finished()
    }

    fn first_rspec_of(&self) -> Vec<usize> {
        // Instance 0 of each spec process: its first region spec.
        let mut out = vec![usize::MAX; self.spec.processes.len()];
        for p in &self.prt {
            if out[p.spec] == usize::MAX {
                out[p.spec] = p.rspecs.first().copied().unwrap_or(0);
            }
        }
        out
    }

    /// Processes started so far: what the daemon's back-off compares while it waits (the live
    /// loop reads /proc/loadavg's last pid once per interval; every simulated process starts its
    /// threads with it).
    pub fn started_processes(&self) -> usize {
        self.prt.iter().filter(|r| r.started).count()
    }

    /// Whether the run is over.
    pub fn finished(&self) -> bool {
        let t = self.now_ns as f64 / 1e9;
        if let Some(d) = self.spec.duration_s {
            return t >= d - 1e-9;
        }
        let fixed_done = self.prt.iter().all(|p| p.finish_ns.is_some());
        fixed_done || t >= self.opts.max_s
    }

    /// Whether every fixed-work process finished.
    pub fn all_work_done(&self) -> bool {
        self.prt.iter().all(|p| p.open_ended || p.finish_ns.is_some())
    }

    fn sample_process(&mut self, p: usize, t_ns: u64) {
        let mem_mib = self.kernel.proc_node[p].iter().map(|&r| (r * REGION_BYTES) as f64 / (1 << 20) as f64).collect();
        let pr = &mut self.prt[p];
        let local_pct = if pr.win_total > 0.0 {
            100.0 * pr.win_local / pr.win_total
        } else {
            pr.series.last().map_or(0.0, |s| s.local_pct)
        };
        pr.win_local = 0.0;
        pr.win_total = 0.0;
        pr.series.push(SeriesPoint { t_s: t_ns as f64 / 1e9, mem_mib, local_pct });
    }

    /// The access model for one epoch (see the module essay).
    #[allow(clippy::needless_range_loop)] // tasks are indexed in several parallel vectors
    fn run_accesses(&mut self, share: &[f64], busy: &[f64]) {
        let epoch = self.epoch_ns as f64;
        let prm = &self.model.params;
        let nn = self.kernel.nr_nodes();
        let ntasks = self.kernel.tasks.len();
        // LLC working sets: distinct ranges touched by the running tasks of each LLC.
        let llc_bytes = prm.llc_mib * (1 << 20) as f64;
        let mut llc_ranges: Vec<Vec<u32>> = vec![Vec::new(); self.llc_count];
        for t in 0..ntasks {
            if share[t] <= 0.0 {
                continue;
            }
            let l = self.cpu_llc[self.kernel.tasks[t].cpu as usize] as usize;
            for a in &self.trt[t].accs {
                if !llc_ranges[l].contains(&a.range) {
                    llc_ranges[l].push(a.range);
                }
            }
        }
        let llc_ws: Vec<f64> = llc_ranges
            .iter()
            .map(|rs| rs.iter().map(|&r| self.ranges[r as usize].allocated as f64 * REGION_BYTES as f64).sum())
            .collect();
        // Per task: node weights (line-time weight, traffic weight), hit time, compute time.
        struct Prep {
            task: usize,
            cnode: usize,
            run_ns: f64,
            /// Of the time not run, the sampling's cost paid (the rest is memory stall).
            sampling_ns: f64,
            tc: f64,
            lines: f64,
            hit_ns: f64,
            f_m: f64,
            nodes: Vec<(usize, f64, f64)>,
        }
        let mut preps: Vec<Prep> = Vec::new();
        for t in 0..ntasks {
            self.trt[t].ran_ns = 0;
            self.trt[t].acc_bytes.iter_mut().for_each(|b| *b = 0.0);
            if share[t] <= 0.0 {
                continue;
            }
            let task = &self.kernel.tasks[t];
            let cpu = task.cpu as usize;
            let mut run = share[t] * epoch;
            let stall = (task.stall_ns as f64).min(run);
            run -= stall;
            let sampling = self.trt[t].sampling_ns.min(run);
            run -= sampling;
            let sib_busy = self
                .kernel
                .topo
                .cpu(task.cpu)
                .map(|c| c.siblings.iter().filter(|&s| s as usize != cpu).map(|s| busy[s as usize]).fold(0.0, f64::max))
                .unwrap_or(0.0);
            let f_c = (1.0 - sib_busy) + sib_busy * prm.smt_gain_compute / 2.0;
            let f_m = (1.0 - sib_busy) + sib_busy * prm.smt_gain_memory / 2.0;
            let cnode = self.kernel.nidx(self.kernel.node_of_cpu(task.cpu));
            let l = self.cpu_llc[cpu] as usize;
            let mut nodes: Vec<(usize, f64, f64)> = Vec::new();
            let mut hit_ns = 0.0;
            for a in &self.trt[t].accs {
                let r = &self.ranges[a.range as usize];
                if r.allocated == 0 {
                    continue;
                }
                let mlp = if a.random { prm.random_mlp } else { prm.stream_mlp };
                let hit = if a.random {
                    (llc_bytes / llc_ws[l].max(1.0)).min(1.0)
                } else if llc_ws[l] <= llc_bytes {
                    1.0
                } else {
                    0.0
                };
                hit_ns += a.weight * hit * prm.llc_latency_ns / mlp;
                let miss = a.weight * (1.0 - hit);
                if miss <= 0.0 {
                    continue;
                }
                let inv = 1.0 / r.allocated as f64;
                let shares: Vec<f64> = match self.page_interleave(r) {
                    Some(w) => w,
                    None => r.counts.iter().map(|&c| c as f64 * inv).collect(),
                };
                for (n, &sh) in shares.iter().enumerate() {
                    if sh <= 0.0 {
                        continue;
                    }
                    let frac = sh * miss;
                    match nodes.iter_mut().find(|x| x.0 == n) {
                        Some(x) => {
                            x.1 += frac / mlp;
                            x.2 += frac;
                        }
                        None => nodes.push((n, frac / mlp, frac)),
                    }
                }
            }
            let tr = &self.trt[t];
            preps.push(Prep {
                task: t,
                cnode,
                run_ns: run,
                sampling_ns: sampling,
                tc: tr.compute_ns / f_c,
                lines: tr.bytes_per_unit / 64.0,
                hit_ns,
                f_m,
                nodes,
            });
            let _ = stall;
        }
        // Contention fixed point, over the resources in use (`used`): every directed link was
        // updated, a million at 1,024 nodes, and the loads and capacities of all built anew each
        // epoch, though a few threads load a handful.
        for p in &preps {
            for &(n, _, _) in &p.nodes {
                for &r in self.model.route(n, p.cnode) {
                    if !self.in_use[r as usize] {
                        self.in_use[r as usize] = true;
                        self.used.push(r);
                    }
                }
            }
        }
        let lat = &self.model.latency;
        let mut units = vec![0.0; preps.len()];
        for iter in 0..=CONTENTION_ITERATIONS {
            for &r in &self.used {
                self.load[r as usize] = self.pending[r as usize];
            }
            for (i, p) in preps.iter().enumerate() {
                let mut mem = p.hit_ns;
                for &(n, lw, _) in &p.nodes {
                    let m = self.model.route(n, p.cnode).iter().map(|&r| self.mult[r as usize]).fold(1.0, f64::max);
                    mem += lw * lat[p.cnode][n] * m;
                }
                let t_unit = p.tc + p.lines * mem / p.f_m;
                let u = if t_unit > 0.0 { p.run_ns / t_unit } else { 0.0 };
                units[i] = u;
                let bytes = u * self.trt[p.task].bytes_per_unit;
                for &(n, _, tw) in &p.nodes {
                    for &r in self.model.route(n, p.cnode) {
                        self.load[r as usize] += bytes * tw;
                    }
                }
            }
            self.apply_pacing(&preps.iter().map(|p| p.task).collect::<Vec<_>>(), &mut units);
            if iter == CONTENTION_ITERATIONS {
                break;
            }
            crate::work::count("engine.resources_updated", self.used.len() as u64);
            for &r in &self.used {
                let r = r as usize;
                let ratio = self.load[r] / (self.model.capacity[r] * epoch);
                self.mult[r] = (self.mult[r] * ratio).max(1.0);
            }
        }
        // Controllers: migration copies of this epoch, saturation.
        for n in 0..nn {
            self.ctrl_bytes[n] += self.pending[n];
            self.ctrl_migrate_bytes[n] += self.pending[n];
            if self.mult[n] > SATURATED_SLOWDOWN {
                self.ctrl_saturated_ns[n] += self.epoch_ns;
            }
        }
        // Noise, then the closed loops again so paced groups stay exactly in step.
        let noise = self.opts.noise;
        for u in units.iter_mut() {
            *u *= 1.0 + noise * (2.0 * self.rng.unit() - 1.0);
        }
        self.apply_pacing(&preps.iter().map(|p| p.task).collect::<Vec<_>>(), &mut units);
        // Per CPU this epoch: shared (someone waits), stall time (memory stalls).
        let mut cpu_shared: Vec<bool> = vec![false; busy.len()];
        let mut cpu_stall: Vec<f64> = vec![0.0; busy.len()];
        // Apply progress.
        for (i, p) in preps.iter().enumerate() {
            let mut u = units[i];
            let t = p.task;
            let run_total = share[t] * epoch;
            let stall = (run_total - p.run_ns).max(0.0);
            let mut ran = p.run_ns;
            // Share of the epoch the task was alive (it may finish inside it).
            let mut alive = 1.0;
            let tr = &mut self.trt[t];
            let mut last_ns = self.now_ns + self.epoch_ns;
            let mut finished_now = false;
            if let Some(total) = tr.total {
                let remaining = (total - tr.done).max(0.0);
                if u >= remaining {
                    finished_now = true;
                    let frac = if u > 0.0 { remaining / u } else { 0.0 };
                    let f = self.now_ns + ((stall + frac * p.run_ns) / share[t].max(1e-12)) as u64;
                    tr.finish_ns = Some(f);
                    last_ns = f.min(last_ns);
                    alive = if run_total > 0.0 { (stall + frac * p.run_ns) / run_total } else { 0.0 };
                    ran *= frac;
                    u = remaining;
                    self.kernel.tasks[t].state = TaskState::Exited;
                }
            }
            tr.done += u;
            tr.ran_ns = (ran + stall) as u64;
            let bytes = u * tr.bytes_per_unit;
            // The access samples this epoch's work triggered, paid from the next epoch on; the
            // part of the time not run that paid earlier ones is not a memory stall.
            let paid = p.sampling_ns;
            tr.sampling_ns = (tr.sampling_ns - paid).max(0.0) + bytes * self.sample_stall_per_byte;
            let mem_stall = (stall - paid).max(0.0);
            // A task that finished in this epoch pays what is left before it exits (its finish
            // time moves out by it), instead of never.
            let mut stall = stall;
            if finished_now {
                let left = std::mem::take(&mut tr.sampling_ns);
                if let Some(f) = tr.finish_ns.as_mut() {
                    *f += (left / share[t].max(1e-12)) as u64;
                }
                stall += left;
            }
            for (ai, a) in tr.accs.iter().enumerate() {
                let b = bytes * a.weight;
                tr.acc_bytes[ai] = b;
                if b > 0.0 {
                    match tr.acc_win.iter_mut().find(|w| w.0 == a.range) {
                        Some(w) => {
                            w.1 += b;
                            w.2 = last_ns;
                        }
                        None => tr.acc_win.push((a.range, b, last_ns)),
                    }
                }
            }
            let task = &mut self.kernel.tasks[t];
            task.utime_ns += ran as u64;
            task.stime_ns += stall as u64;
            task.stall_ns -= (mem_stall as u64).min(task.stall_ns);
            // Run delay: the part of the time it wanted a CPU (duty x epoch) that the others
            // queued on its CPU got; switch-ins: one per base slice while sharing, one per wake-up.
            let want = task.duty * epoch;
            let shared = run_total < want - 1e-6;
            task.wait_ns += ((want - run_total).max(0.0) * alive) as u64;
            if shared {
                task.timeslices += ((ran + stall) / crate::kernel::sched::BASE_SLICE_NS as f64).ceil() as u64;
            } else if task.duty < 1.0 {
                task.timeslices += 1;
            }
            let cpu = task.cpu as usize;
            self.cpu_user_ns[cpu] += ran as u64;
            self.cpu_sys_ns[cpu] += stall as u64;
            cpu_shared[cpu] |= shared;
            cpu_stall[cpu] += mem_stall;
            let pi = task.proc as usize;
            let mut local = 0.0;
            let mut total = 0.0;
            for &(n, _, tw) in &p.nodes {
                total += bytes * tw;
                self.ctrl_bytes[n] += bytes * tw;
                if n == p.cnode {
                    local += bytes * tw;
                }
            }
            let pr = &mut self.prt[pi];
            pr.units += u;
            pr.win_local += local;
            pr.win_total += total;
            self.local_bytes += local;
            self.total_bytes += total;
        }
        // Pending traffic is all on resources in use; those no longer slowed down leave the list.
        for &r in &self.used {
            self.pending[r as usize] = 0.0;
        }
        let (mult, in_use) = (&self.mult, &mut self.in_use);
        self.used.retain(|&r| {
            let slowed = mult[r as usize] != 1.0;
            in_use[r as usize] = slowed;
            slowed
        });
        // PSI: a CPU's "some" state for cpu while a task waits on it; for memory the share of its
        // time its tasks stalled on memory (page migrations, hinting faults), "full" only where that
        // task is alone on the CPU. System-wide: weighted by each CPU's non-idle time.
        let nonidle: f64 = busy.iter().sum();
        if nonidle > 0.0 {
            let (mut cpu_some, mut mem_some, mut mem_full) = (0.0, 0.0, 0.0);
            for c in 0..busy.len() {
                if busy[c] <= 0.0 {
                    continue;
                }
                let stall = (cpu_stall[c] / epoch).min(1.0);
                if cpu_shared[c] {
                    cpu_some += busy[c];
                } else {
                    mem_full += stall * busy[c];
                }
                mem_some += stall * busy[c];
            }
            self.psi_ns[0] += epoch * cpu_some / nonidle;
            self.psi_ns[1] += epoch * mem_some / nonidle;
            self.psi_ns[2] += epoch * mem_full / nonidle;
        }
    }

    /// Closed loops between thread groups: both sides progress at the slower side's pace.
    fn apply_pacing(&self, tasks: &[usize], units: &mut [f64]) {
        for pc in &self.spec.pacing {
            let (Some(a), Some(b)) = (self.spec.find_group(&pc.a), self.spec.find_group(&pc.b)) else {
                continue;
            };
            let in_group = |t: usize, (sp, g): (usize, usize)| {
                let task = &self.kernel.tasks[t];
                self.prt[task.proc as usize].spec == sp && task.group as usize == g
            };
            let sum =
                |g| -> f64 { tasks.iter().zip(units.iter()).filter(|(&t, _)| in_group(t, g)).map(|(_, u)| u).sum() };
            let (ua, ub) = (sum(a), sum(b));
            let pace_a = ua.min(ub / pc.ratio);
            let pace_b = pace_a * pc.ratio;
            let (sa, sb) = (if ua > 0.0 { pace_a / ua } else { 0.0 }, if ub > 0.0 { pace_b / ub } else { 0.0 });
            for (i, &t) in tasks.iter().enumerate() {
                if in_group(t, a) {
                    units[i] *= sa;
                } else if in_group(t, b) {
                    units[i] *= sb;
                }
            }
        }
    }

    /// One AutoNUMA epoch: build the view, take the model's decisions, apply them with their cost.
    fn autonuma_epoch(&mut self) {
        let runs: Vec<TaskRun> = self
            .kernel
            .tasks
            .iter()
            .enumerate()
            .filter(|(_, t)| t.state != TaskState::NotStarted && t.state != TaskState::Exited)
            .map(|(i, t)| {
                let mut allowed = 0u64;
                for (ni, n) in self.kernel.topo.nodes.iter().enumerate().take(64) {
                    if !n.cpus.intersection(&t.allowed).is_empty() {
                        allowed |= 1 << ni;
                    }
                }
                TaskRun {
                    tid: t.tid,
                    pid: self.kernel.procs[t.proc as usize].pid,
                    cpu: t.cpu,
                    node: self.kernel.nidx(self.kernel.node_of_cpu(t.cpu)),
                    ran_ns: self.trt[i].ran_ns,
                    allowed_nodes: if self.kernel.nr_nodes() > 64 { u64::MAX } else { allowed },
                }
            })
            .collect();
        let mut an = self.autonuma.take().expect("autonuma run");
        let actions = {
            // Region specs touched this epoch: armed regions of the others cannot fault, and the
            // model asks about every armed region every epoch.
            let active: Vec<bool> = self
                .rspecs
                .iter()
                .map(|rs| {
                    rs.accessors
                        .iter()
                        .any(|&(t, ai)| self.trt[t as usize].acc_bytes.get(ai as usize).is_some_and(|&b| b > 0.0))
                })
                .collect();
            let view = View { sim: self, runs: &runs, active: &active };
            an.step(self.now_ns + self.epoch_ns, &view)
        };
        self.hint_faults += actions.faults.len() as u64;
        for f in &actions.faults {
            if let Some(t) = self.task_of_tid(f.tid) {
                self.kernel.tasks[t].stall_ns += HINT_FAULT_NS;
            }
        }
        for m in &actions.migrations {
            let Some(p) = self.proc_of_pid(m.pid) else { continue };
            let g = self.kernel.procs[p].first_region + m.region;
            let to = self.kernel.topo.nodes[m.to].id;
            match self.migrate_region(g, to) {
                Ok(Some(cost)) => {
                    self.kernel.numa_pages_migrated += crate::kernel::PAGES_PER_REGION;
                    if let Some(t) = self.task_of_tid(m.tid) {
                        self.kernel.tasks[t].stall_ns += cost.stall_ns;
                    }
                }
                Ok(None) => {}
                Err(_) => an.migration_failed(m),
            }
        }
        let load = Sched::loads(&self.kernel);
        for mv in &actions.task_moves {
            let Some(t) = self.task_of_tid(mv.tid) else { continue };
            match mv.swap_with.and_then(|o| self.task_of_tid(o)) {
                Some(o) => {
                    let (ca, cb) = (self.kernel.tasks[t].cpu, self.kernel.tasks[o].cpu);
                    if self.kernel.tasks[t].allowed.contains(cb) && self.kernel.tasks[o].allowed.contains(ca) {
                        self.kernel.tasks[t].cpu = cb;
                        self.kernel.tasks[o].cpu = ca;
                        self.kernel.tasks[t].cpu_migrations += 1;
                        self.kernel.tasks[o].cpu_migrations += 1;
                    }
                }
                None => {
                    let Some(node) = self.kernel.topo.nodes.get(mv.to_node) else { continue };
                    let dst =
                        node.cpus.iter().filter(|&c| self.kernel.tasks[t].allowed.contains(c)).min_by(|&a, &b| {
                            load[a as usize]
                                .partial_cmp(&load[b as usize])
                                .unwrap_or(std::cmp::Ordering::Equal)
                                .then(a.cmp(&b))
                        });
                    if let Some(c) = dst {
                        self.kernel.tasks[t].cpu = c;
                        self.kernel.tasks[t].cpu_migrations += 1;
                    }
                }
            }
        }
        self.autonuma = Some(an);
    }

    /// Task index of a tid.
    pub fn task_of_tid(&self, tid: u32) -> Option<usize> {
        self.kernel.tasks.binary_search_by_key(&tid, |t| t.tid).ok()
    }

    /// Process index of a pid.
    pub fn proc_of_pid(&self, pid: u32) -> Option<usize> {
        self.kernel.procs.binary_search_by_key(&pid, |p| p.pid).ok()
    }

    /// Processes' run-time figures for results: (name, pid, finish, units, series, open-ended).
    pub(crate) fn proc_results(&self) -> impl Iterator<Item = (&ProcRt, u32)> {
        self.prt.iter().zip(self.kernel.procs.iter().map(|p| p.pid))
    }

    /// Share of all memory bytes so far that were node-local, %.
    pub fn local_access_pct(&self) -> f64 {
        if self.total_bytes > 0.0 {
            100.0 * self.local_bytes / self.total_bytes
        } else {
            0.0
        }
    }
}

/// LLC index of every CPU id (CPUs sharing an LLC set share an index, numbered in the order of
/// their first CPU) and the number of LLCs. A CPU without LLC information takes its node's CPUs.
/// Each set is looked up in a table of the sets seen (comparing it with each of them was CPUs x
/// LLCs, 268 million comparisons at 65,536 CPUs).
fn llc_map(topo: &Topology) -> (Vec<u32>, usize) {
    let max = topo.cpus.iter().map(|c| c.id as usize + 1).max().unwrap_or(0);
    let mut map = vec![0u32; max];
    let empty = CpuSet::new();
    let mut seen: HashMap<&CpuSet, u32> = HashMap::new();
    for c in &topo.cpus {
        let set = c.llc.as_ref().or_else(|| topo.node(c.node).map(|n| &n.cpus)).unwrap_or(&empty);
        crate::work::count("llc.sets_compared", 1);
        let next = seen.len() as u32;
        map[c.id as usize] = *seen.entry(set).or_insert(next);
    }
    (map, seen.len().max(1))
}

/// The AutoNUMA model's view of one epoch.
struct View<'a> {
    sim: &'a Sim,
    runs: &'a [TaskRun],
    /// Per region spec: touched by some task this epoch.
    active: &'a [bool],
}

impl AutoNumaView for View<'_> {
    fn tasks(&self) -> &[TaskRun] {
        self.runs
    }

    fn node_has_memory(&self, node: usize) -> bool {
        self.sim.kernel.node_capacity.get(node).is_some_and(|&c| c > 0)
    }

    fn region_count(&self, pid: u32) -> usize {
        self.sim.proc_of_pid(pid).map_or(0, |p| {
            let pr = &self.sim.kernel.procs[p];
            pr.regions.last().map_or(0, |&(_, e)| e - pr.first_region)
        })
    }

    fn region(&self, pid: u32, idx: usize) -> Option<RegionState> {
        let p = self.sim.proc_of_pid(pid)?;
        let g = self.sim.kernel.procs[p].first_region + idx;
        let r = self.sim.kernel.regions.get(g)?;
        if r.node == NO_NODE || r.proc as usize != p {
            return None;
        }
        let rs = &self.sim.rspecs[r.rspec as usize];
        let pinned = rs.explicit || rs.slice_policy.iter().any(|(s, e, _)| (*s..*e).contains(&g));
        Some(RegionState { node: self.sim.kernel.nidx(r.node), movable: !pinned, shared: rs.shared })
    }

    fn rss_bytes(&self, pid: u32) -> u64 {
        self.sim.proc_of_pid(pid).map_or(0, |p| self.sim.kernel.proc_node[p].iter().sum::<u64>() * REGION_BYTES)
    }

    fn accessors(&self, pid: u32, idx: usize, out: &mut Vec<(u32, u64)>) {
        let Some(p) = self.sim.proc_of_pid(pid) else { return };
        let g = self.sim.kernel.procs[p].first_region + idx;
        let Some(r) = self.sim.kernel.regions.get(g) else { return };
        if !self.active[r.rspec as usize] {
            return;
        }
        for &(t, ai) in &self.sim.rspecs[r.rspec as usize].accessors {
            let tr = &self.sim.trt[t as usize];
            let Some(acc) = tr.accs.get(ai as usize) else { continue };
            let range = &self.sim.ranges[acc.range as usize];
            if !(range.start..range.end).contains(&g) || range.allocated == 0 {
                continue;
            }
            let bytes = tr.acc_bytes[ai as usize] / range.allocated as f64;
            if bytes > 0.0 {
                out.push((self.sim.kernel.tasks[t as usize].tid, (bytes as u64).max(1)));
            }
        }
    }
}

impl Sim {
    /// Checks the bookkeeping invariants: per-node and per-process region counts match the regions,
    /// no node is over capacity, every range's per-node counts match its regions, every running
    /// task sits on a CPU it is allowed. For tests and debugging; O(all regions).
    pub fn check_invariants(&self) -> Result<(), String> {
        let k = &self.kernel;
        let nn = k.nr_nodes();
        let mut used = vec![0u64; nn];
        let mut per_proc = vec![vec![0u64; nn]; k.procs.len()];
        for r in &k.regions {
            if r.node != NO_NODE {
                let i = k.nidx(r.node);
                used[i] += 1;
                per_proc[r.proc as usize][i] += 1;
            }
        }
        if used != k.node_used {
            return Err(format!("node_used {:?} but regions say {used:?}", k.node_used));
        }
        if per_proc != k.proc_node {
            return Err("proc_node does not match the regions".into());
        }
        for (i, (&u, &c)) in used.iter().zip(&k.node_capacity).enumerate() {
            if u > c {
                return Err(format!("node index {i}: {u} regions over capacity {c}"));
            }
        }
        for (ri, r) in self.ranges.iter().enumerate() {
            let mut counts = vec![0u32; nn];
            for reg in &k.regions[r.start..r.end] {
                if reg.node != NO_NODE {
                    counts[k.nidx(reg.node)] += 1;
                }
            }
            if counts != r.counts || counts.iter().sum::<u32>() != r.allocated {
                return Err(format!("range {ri}: counts {:?} but regions say {counts:?}", r.counts));
            }
        }
        for t in &k.tasks {
            if t.state == TaskState::Running && !t.allowed.contains(t.cpu) {
                return Err(format!("task {} on CPU {} outside its affinity {}", t.tid, t.cpu, t.allowed));
            }
        }
        Ok(())
    }

    /// Takes the bytes every task touched per range since the previous call (or the start):
    /// `(task, range, bytes, time of the last epoch that touched it)`, in task order. What a
    /// precise-sampling PMU would have seen; the host turns it into samples.
    pub(crate) fn take_access_window(&mut self) -> Vec<(usize, u32, f64, u64)> {
        let mut out = Vec::new();
        for (t, tr) in self.trt.iter_mut().enumerate() {
            for (range, bytes, last) in tr.acc_win.drain(..) {
                out.push((t, range, bytes, last));
            }
        }
        out
    }

    /// Units of work done by each task so far, in task order.
    pub fn work_done(&self) -> Vec<f64> {
        self.trt.iter().map(|t| t.done).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A machine file of `nodes` x `cpus` CPUs as `scripts/machine-file.sh` writes it (SMT 2, 8
    /// cores a last-level cache, the second threads half the machine later); without `llcs`, one
    /// last-level cache a node.
    fn machine(nodes: u32, cpus: u32, llcs: bool) -> Machine {
        let half = nodes * cpus / 2;
        let cores = cpus / 2;
        let mut t = String::from("name = \"m\"\nsmt = 2\ndistances = [\n");
        if llcs {
            t.insert_str(0, "cores_per_llc = 8\n");
        }
        for i in 0..nodes {
            let row: Vec<String> = (0..nodes)
                .map(|j| {
                    (if i == j {
                        10
                    } else if i / 2 == j / 2 {
                        11
                    } else {
                        21
                    })
                    .to_string()
                })
                .collect();
            t += &format!("[{}],\n", row.join(", "));
        }
        t += "]\n";
        for i in 0..nodes {
            let (a, b) = (i * cores, half + i * cores);
            t += &format!(
                "[[nodes]]\nid = {i}\ncpus = \"{a}-{},{b}-{}\"\nmem_gb = 64\npackage = {}\n",
                a + cores - 1,
                b + cores - 1,
                i / 2
            );
        }
        let file = numapilot_topology::MachineFile::parse(&t, numapilot_topology::machine::Format::Toml, "m").unwrap();
        Machine::from_machine_file("m", &file, "m").unwrap()
    }

    #[test]
    fn set_up_of_many_cpus_is_linear_in_them() {
        // The LLC index of each CPU compared its LLC set with every set seen before (CPUs x
        // LLCs), and the scheduler's domains tested every CPU of a node against the LLC set of
        // each of its CPUs (CPUs x CPUs of a node) and walked all CPUs for each node: at 65,536
        // CPUs most of the set-up (scaling review). For 16 x the CPUs (4 x the nodes, 4 x the
        // CPUs a node), about 16 x the work (256 x when quadratic).
        // Without LLC sizes a node is one LLC, and its cores were found by testing every CPU of
        // it against the siblings of each.
        let mut grew = Vec::new();
        for llcs in [true, false] {
            let mut counts = Vec::new();
            for (nodes, cpus) in [(4, 64), (16, 256)] {
                let m = machine(nodes, cpus, llcs);
                let spec = crate::workload::builtin("latency", &m.topo).unwrap();
                crate::work::take();
                Sim::new(&m, &spec, Baseline::Default, 1, &SimOptions::default()).unwrap();
                counts.push(crate::work::take());
            }
            for name in [
                "llc.sets_compared",
                "sched.node_cpus_looked_at",
                "sched.llc_members_tested",
                "sched.core_members_tested",
            ] {
                let (s, l) = (counts[0].get(name).copied().unwrap_or(0), counts[1].get(name).copied().unwrap_or(0));
                assert!(s > 0, "{name}: none counted ({:?})", counts[0]);
                let g = l as f64 / s as f64;
                if g >= 24.0 {
                    grew.push(format!("llcs {llcs}: {name}: {s} -> {l}, {g:.1} x"));
                }
            }
        }
        assert!(grew.is_empty(), "for 16 x the CPUs: {grew:?}");
    }

    #[test]
    fn llc_indexes_are_numbered_by_first_cpu() {
        // As comparing with every set seen numbered them: CPUs of equal sets share an index, a
        // CPU without LLC information takes its node's CPUs, indexes in the order of first CPUs.
        let mut t = Topology::preset("article-4n96").unwrap();
        for c in &mut t.cpus {
            if c.id % 5 == 0 {
                c.llc = None;
            }
        }
        t.cpus[7].llc = Some(t.nodes[0].cpus.clone());
        let (map, count) = llc_map(&t);
        let mut seen: Vec<CpuSet> = Vec::new();
        for c in &t.cpus {
            let set = c.llc.clone().unwrap_or_else(|| t.node(c.node).unwrap().cpus.clone());
            let i = seen.iter().position(|s| *s == set).unwrap_or_else(|| {
                seen.push(set);
                seen.len() - 1
            });
            assert_eq!(map[c.id as usize], i as u32, "CPU {}", c.id);
        }
        assert_eq!(count, seen.len());
    }

    #[test]
    fn an_epoch_updates_the_resources_in_use_not_every_link() {
        // Each contention iteration of every epoch updated every resource: at 1,024 nodes a
        // million directed links, and the vectors of loads and capacities built anew each epoch,
        // most of a run's time though two threads use a handful of them (scaling review). The
        // same workload on 4 x the nodes (16 x the links) must update about as many.
        let mut updated = Vec::new();
        for nodes in [8, 32] {
            let m = machine(nodes, 16, true);
            let spec = crate::workload::builtin("latency", &m.topo).unwrap();
            let mut sim = Sim::new(&m, &spec, Baseline::Default, 1, &SimOptions::default()).unwrap();
            crate::work::take();
            for _ in 0..20 {
                sim.step();
            }
            updated.push(crate::work::take().get("engine.resources_updated").copied().unwrap_or(0));
        }
        let g = updated[1] as f64 / updated[0] as f64;
        assert!(updated[0] > 0 && g < 2.0, "resources updated {updated:?}: {g:.1} x for 4 x the nodes");
    }
}
