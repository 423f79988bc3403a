//! Node load and interference, per node and resource, with a bottleneck flag that does not flap.
//!
//! # Problem
//!
//! A placement rule must know whether a node can take more work and whether the work already there
//! suffers. NUMA-ICON measures both per resource: **load** = time the resource was busy / period
//! (how busy), **interference** = time work waited for it / period (how contended); a node whose
//! load or interference crosses a threshold is a **bottleneck** for that resource.
//!
//! # Approach
//!
//! ```text
//!   resource       load                                   interference
//!   CPU            Δbusy / Δ(busy+idle) ticks of the       Σ run delay of the tasks on the node
//!                  node's CPUs (/proc/stat); else          / node CPUs (schedstat, when any task
//!                  Σ task cpu_rate / node CPUs             has it: 0 on a node without tasks);
//!                                                          only when none has: PSI cpu some
//!                                                          avg10 / 100 (system-wide, every node)
//!   MemCapacity    1 - (MemFree + Inactive(file) +         PSI memory some avg10 / 100 (system-
//!                  SReclaimable) / MemTotal (nodeN/        wide), only on nodes whose use is at
//!                  meminfo; reclaimable cache is free)     or above mem_capacity_low
//!   MemBandwidth   (bytes - migration copies) /            saturated time / window x the
//!                  (capacity x window) (uncore)            workload's share of the bytes
//!   IO             PSI io some avg10 / 100, on nodes with  same value (PSI has one figure)
//!                  PCI devices only
//!
//!   bottleneck:  off ──(load >= high  OR  interference >= i_high)──► on
//!                on  ──(load <  low   AND interference <  i_low )──► off
//!
//!        high ─────────────────────────────   enter
//!              ╱╲  ╱╲  ╱╲     stays on          (no flapping between the marks)
//!        low  ─────────────────────────────   leave
//! ```
//!
//! Memory bandwidth is the workload's demand: the bytes of page-migration copies (the sample's
//! `migrate_bytes`, when the source can tell them) are left out (rule "copies-are-not-demand"). A
//! move is transient traffic of the mover, over when the pages have arrived, and says nothing of
//! what the node's threads ask for. Counted as demand, the VM mix's first seconds on the 288-core
//! machine (young processes' memory following their threads at up to 32 GiB/s, whole working sets
//! in a few plans) loaded controllers to 1.8-9x their capacity and flagged their nodes as
//! bandwidth bottlenecks, which then refused the very vCPUs whose memory was there (a medium
//! rabbit's vCPUs sent to another server at 2.55 s, seed 1, with "memory bandwidth load 1.78" on
//! their memory node). The saturated time is shared out by bytes: copies that are 80% of a
//! controller's traffic leave 20% of its saturated time to the workload.
//!
//! A resource whose inputs are absent is `known = false`, has zero figures and is never a
//! bottleneck (a CPU-less node has no CPU resource; without an uncore PMU there is no bandwidth
//! figure; IO is only known on nodes with devices and a kernel with PSI).
//!
//! # Units
//!
//! Loads and interference are fractions of the period (interference may exceed 1 when several
//! tasks wait for each CPU). Memory in bytes, CPU demand in CPUs.
//!
//! # Limits
//!
//! PSI is system-wide: when it is the only CPU interference signal, every node gets the same
//! figure. IO "load" is not measured: the issue defines it as device busy time / period
//! (`/proc/diskstats` io_ticks of the node's devices), which the sample does not carry yet; PSI io
//! `some` (time tasks stalled on IO, strictly an interference figure) stands in for both.
//! The first sample has no tick delta: the CPU load then comes from task rates (0 on the first).
//!
//! The observer's own CPU time is not the node's load (rule "observer-not-load"): a host that reads
//! /proc/stat when its step ends (`Sample::cpu_base`, the live daemon) has the CPU load measured
//! from there, so only the time the observer slept counts. Without it, a short period after a slow
//! step was mostly the daemon's own work: in the rig's 2-node guest under TCG its step (two reader
//! threads, ~0.1 s) filled a 2-CPU node, which was flagged a CPU bottleneck and refused the very
//! process whose memory was there (numa02 copied its 64 MiB instead of moving 2 threads). It still
//! happens once in a while (a look 50 ms after the step: one pass of the race's own samplers fills
//! a 2-CPU node's 10 ticks). Tried and not kept (2026-11-27, `scripts/evidence.sh`): windows under
//! 10 ticks per CPU keep the CPU bottleneck flag as it was (VM mix 1.376 -> 1.280 x default), or
//! may clear it but not set it (1.265): in the simulator the flags set at the first-touch cadence
//! (30 ms looks) are what keeps the VMs' vCPUs off their busy nodes.

use numapilot_observe::Sample;
use serde::{Deserialize, Serialize};

use crate::Model;

/// A resource of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Resource {
    /// CPU time.
    Cpu,
    /// Memory-controller bandwidth.
    MemBandwidth,
    /// Memory capacity.
    MemCapacity,
    /// IO (devices attached to the node).
    Io,
}

/// Load, interference and bottleneck state of one resource of one node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceState {
    /// Whether the sample had what this resource needs (else the figures are 0 and it is never a
    /// bottleneck).
    pub known: bool,
    /// Busy time / period (use / capacity for memory capacity), 0..1.
    pub load: f64,
    /// Waiting time / period.
    pub interference: f64,
    /// Bottleneck flag (entered above the high marks, left below the low marks).
    pub bottleneck: bool,
}

/// One node's resources.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeLoad {
    /// Kernel node id.
    pub node: u32,
    /// CPU.
    pub cpu: ResourceState,
    /// Memory bandwidth.
    pub mem_bw: ResourceState,
    /// Memory capacity.
    pub mem_capacity: ResourceState,
    /// IO.
    pub io: ResourceState,
    /// Free memory, bytes: MemFree plus reclaimable page cache and slab (Inactive(file),
    /// SReclaimable) when the node's meminfo has them.
    pub mem_free_bytes: u64,
    /// Total memory, bytes.
    pub mem_total_bytes: u64,
    /// CPU demand of the tasks that ran here in the last period, and of the processes the host
    /// leaves unmanaged (`Sample::unmanaged_cpu`), CPUs.
    pub cpu_demand: f64,
}

impl NodeLoad {
    /// A node with nothing known yet.
    pub fn new(node: u32) -> Self {
        Self {
            node,
            cpu: ResourceState::default(),
            mem_bw: ResourceState::default(),
            mem_capacity: ResourceState::default(),
            io: ResourceState::default(),
            mem_free_bytes: 0,
            mem_total_bytes: 0,
            cpu_demand: 0.0,
        }
    }

    /// The state of one resource.
    pub fn resource(&self, r: Resource) -> &ResourceState {
        match r {
            Resource::Cpu => &self.cpu,
            Resource::MemBandwidth => &self.mem_bw,
            Resource::MemCapacity => &self.mem_capacity,
            Resource::Io => &self.io,
        }
    }

    /// Whether any resource of the node is a bottleneck.
    pub fn any_bottleneck(&self) -> bool {
        self.cpu.bottleneck || self.mem_bw.bottleneck || self.mem_capacity.bottleneck || self.io.bottleneck
    }
}

/// Shortest window, in clock ticks per CPU of the node, over which the CPU load is measured from
/// the end of the observer's previous step (`Sample::cpu_base`) rather than from the previous
/// sample. Default 5 (50 ms at USER_HZ 100). Source: the tick counters' grain: under 5 ticks a CPU
/// reads busy or idle in steps of 20% or more. Prevents: a look that comes right after the previous
/// step (a new-thread wake-up, the settle cadence behind a slow step) judging a node's load from
/// one or two ticks; such a look measures over the whole period instead, the observer's step
/// included.
pub const CPU_BASE_MIN_TICKS_PER_CPU: u64 = 5;

/// Recomputes every node's figures from the sample and the tasks, and moves the bottleneck flags
/// through their hysteresis.
pub(crate) fn update(model: &mut Model, sample: &Sample) {
    let tun = &model.tunables;
    let topo = &model.topo;
    let nn = topo.nodes.len();
    model.state.node_ticks.resize(nn, None);
    // Per node: CPU demand and run delay of the tasks that ran there, and whether any had schedstat.
    let mut demand = vec![0.0f64; nn];
    let mut delay = vec![0.0f64; nn];
    let mut delay_known = vec![false; nn];
    for t in model.tasks.values() {
        let Some(i) = t.node.and_then(|n| topo.node_idx(n)) else { continue };
        demand[i] += t.cpu_rate;
        if let Some(d) = t.run_delay {
            delay[i] += d;
            delay_known[i] = true;
        }
    }
    // The CPU interference source is chosen once for the whole sample, never per node: when any
    // task has schedstat, every node's interference is its tasks' run delay (0 for a node with no
    // task); system-wide PSI is the fallback only when no run delay is known anywhere. (PSI is high
    // exactly when some other node is oversubscribed: handing it to an idle node would flag the
    // best destination as a bottleneck.)
    // Processes the host leaves unmanaged (excluded, outside `[include]`): no task stands for
    // them, but they take CPU where they run (a CPU its node does not list, a reserved one, is
    // no node's).
    for u in &sample.unmanaged_cpu {
        if let Some(i) = topo.node_listing(u.cpu).and_then(|n| topo.node_idx(n)) {
            demand[i] += u.cpus;
        }
    }
    let any_delay = delay_known.iter().any(|&k| k);
    let psi = |p: Option<numapilot_observe::Psi>| p.map(|p| p.some.avg10 / 100.0);
    let psi_cpu = psi(sample.psi.cpu);
    let psi_mem = psi(sample.psi.memory);
    let psi_io = psi(sample.psi.io);
    let first = model.updates == 0;
    // Every node's CPU time, in one pass over /proc/stat's lines each (a pass per node cost the
    // nodes times the CPUs).
    let sets: Vec<&numapilot_topology::CpuSet> = topo.nodes.iter().map(|n| &n.cpus).collect();
    let (times_now, times_base) = (sample.cpu_times_within_each(&sets), sample.cpu_times_within_each_base(&sets));
    for (i, node) in topo.nodes.iter().enumerate() {
        let ns = sample.nodes.iter().find(|n| n.node == node.id);
        let nl = &mut model.nodes[i];
        nl.node = node.id;
        nl.cpu_demand = demand[i];

        // CPU.
        let ncpus = node.cpus.len();
        // Over the CPUs this topology gives the node (reserved ones left out: their load is not
        // the node's room), not sysfs's list in the sample.
        let known = ns.is_some();
        let ticks = times_now.as_ref().map(|t| t[i]).filter(|_| known).map(|t| (t.busy(), t.total()));
        let stored = std::mem::replace(&mut model.state.node_ticks[i], ticks);
        // From the end of the observer's previous step when the host read /proc/stat there
        // (rule "observer-not-load") and that window is long enough to measure.
        let base = times_base.as_ref().map(|t| t[i]).filter(|_| known).map(|t| (t.busy(), t.total()));
        let prev = match (base, ticks) {
            (Some((b0, t0)), Some((_, t1))) if t1 >= t0.saturating_add(CPU_BASE_MIN_TICKS_PER_CPU * ncpus as u64) => {
                Some((b0, t0))
            }
            _ => stored,
        };
        let (cpu_known, cpu_load, cpu_interf) = if ncpus == 0 || first {
            (false, 0.0, 0.0)
        } else {
            let load = match (prev, ticks) {
                (Some((b0, t0)), Some((b1, t1))) if t1 > t0 && b1 >= b0 => (b1 - b0) as f64 / (t1 - t0) as f64,
                _ => demand[i] / ncpus as f64,
            };
            let interf = if any_delay { delay[i] / ncpus as f64 } else { psi_cpu.unwrap_or(0.0) };
            (true, load.clamp(0.0, 1.0), interf.max(0.0))
        };
        set(
            &mut nl.cpu,
            cpu_known,
            cpu_load,
            cpu_interf,
            [tun.cpu_load_high, tun.cpu_load_low, tun.cpu_interference_high, tun.cpu_interference_low],
        );

        // Memory capacity.
        // Free = MemFree + the page cache and slab the kernel reclaims before it runs out
        // (`NodeSample::mem_free_reclaimable_kb`: the one definition `advise` uses too).
        let total = ns.and_then(|n| n.meminfo.mem_total_kb()).unwrap_or(node.mem_total_kb);
        let free = ns.and_then(|n| n.mem_free_reclaimable_kb()).unwrap_or(node.mem_free_kb).min(total);
        nl.mem_total_bytes = total.saturating_mul(1024);
        nl.mem_free_bytes = free.saturating_mul(1024);
        let (known, load) = if total > 0 { (true, 1.0 - free as f64 / total as f64) } else { (false, 0.0) };
        // PSI memory is system-wide: it counts only on nodes that are themselves filling up (use at
        // or above mem_capacity_low), so one full node does not make every node a bottleneck.
        let interf = if known && load >= tun.mem_capacity_low { psi_mem.unwrap_or(0.0) } else { 0.0 };
        let marks = [tun.mem_capacity_high, tun.mem_capacity_low, tun.mem_pressure_high, tun.mem_pressure_low];
        set(&mut nl.mem_capacity, known, load, interf, marks);

        // Memory bandwidth.
        let bw = ns.and_then(|n| n.mem_bw).filter(|b| b.window_ns > 0 && b.capacity_bytes_per_s > 0);
        // The workload's traffic: page-migration copies (this policy's moves, the kernel's) are
        // left out of the load, and the saturated time is the workload's share of it by bytes
        // (rule "copies-are-not-demand", see the essay).
        let (known, load, interf) = match bw {
            Some(b) => {
                let cap = b.capacity_bytes_per_s as f64 * b.window_ns as f64 / 1e9;
                let own = b.bytes.saturating_sub(b.migrate_bytes);
                let own_share = if b.bytes > 0 { own as f64 / b.bytes as f64 } else { 1.0 };
                (true, own as f64 / cap, own_share * b.saturated_ns as f64 / b.window_ns as f64)
            }
            None => (false, 0.0, 0.0),
        };
        let marks =
            [tun.mem_bw_load_high, tun.mem_bw_load_low, tun.mem_bw_interference_high, tun.mem_bw_interference_low];
        set(&mut nl.mem_bw, known, load, interf, marks);

        // IO: PSI on nodes with devices.
        let has_dev = topo.devices.iter().any(|d| d.node == Some(node.id));
        let (known, v) = match (has_dev, psi_io) {
            (true, Some(v)) => (true, v),
            _ => (false, 0.0),
        };
        let marks = [tun.io_pressure_high, tun.io_pressure_low, tun.io_pressure_high, tun.io_pressure_low];
        set(&mut nl.io, known, v, v, marks);
    }
}

/// Sets one resource's figures and moves its bottleneck flag through the two-mark hysteresis:
/// `marks` = [load high, load low, interference high, interference low].
pub(crate) fn set(r: &mut ResourceState, known: bool, load: f64, interference: f64, marks: [f64; 4]) {
    let [high, low, ihigh, ilow] = marks;
    let (load, interference) = if known && load.is_finite() && interference.is_finite() {
        (load.max(0.0), interference.max(0.0))
    } else {
        (0.0, 0.0)
    };
    r.known = known;
    r.load = load;
    r.interference = interference;
    r.bottleneck = if !known {
        false
    } else if r.bottleneck {
        !(load < low && interference < ilow)
    } else {
        load >= high || interference >= ihigh
    };
}
