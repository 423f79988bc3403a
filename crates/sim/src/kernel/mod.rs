//! The kernel model: the state the simulated kernel keeps (tasks, processes, memory regions, node
//! usage) and the mechanisms acting on it: page allocation (`alloc`), the scheduler and its load
//! balancer (`sched`), page migration and its cost (`migrate`), and the hook through which a NUMA
//! balancer (the AutoNUMA model in `autonuma`) plugs in.
//!
//! # State
//!
//! ```text
//!   Kernel
//!   ├── procs[]    Proc     pid, comm, starttime, regions [start, end) in `regions`, tasks
//!   ├── tasks[]    Task     tid, proc, cpu, allowed CPUs, state, NUMA stats (preferred node, faults)
//!   ├── regions[]  Region   2 MiB granule: node (or unallocated), owner proc, last accessor, armed
//!   └── node_used[]         regions allocated per node (capacity comes from the topology)
//! ```
//!
//! Indexes: tasks, procs and regions are dense indexes into these vectors and never change during a
//! run (an exited task stays with `TaskState::Exited`). Node ids in this module are *kernel* ids
//! (`u32`), with `NO_NODE` for "not allocated yet"; the dense node index is `Kernel::nidx`.
//!
//! # The NUMA balancer hook
//!
//! The engine calls a [`NumaBalancer`] (the AutoNUMA model) at three points of every epoch, only
//! when `Kernel::numa_balancing` is non-zero (like `/proc/sys/kernel/numa_balancing`):
//!
//! ```text
//!   epoch k:   balancer.scan(now, epoch, &mut kernel)      arm regions: set Region::armed (prot_none)
//!              engine runs the tasks for the epoch          accesses land on nodes; every armed region
//!                                                           that was touched yields one HintFault,
//!                                                           attributed to one accessing task (chosen by
//!                                                           access rate, seeded PRNG), in region order
//!              balancer.on_fault(now, &mut kernel, &fault)  per fault: update stats, Region::last,
//!                -> FaultDecision { migrate_to }            decide a page migration (engine performs it,
//!                                                           with its cost, if the target has room)
//!              balancer.balance(now, &kernel) -> moves      task_numa_migrate: move/swap tasks; the
//!                                                           engine applies those allowed by affinity
//! ```
//!
//! The engine disarms a region when it delivers its fault. The load balancer (`sched`) reads
//! `Task::numa.preferred_nid` when balancing is on, and does not pull a task off its preferred node
//! (the kernel's `migrate_degrades_locality`).
//!
//! # Limits
//!
//! Memory is modelled at the region granule (2 MiB, a THP): a region is on exactly one node. Page
//! counts reported are base pages (4 KiB), 512 per region.

use numapilot_topology::{CpuSet, Topology};

/// Bytes per region: 2 MiB (one x86-64 transparent huge page).
pub const REGION_BYTES: u64 = 2 << 20;

/// Base pages (4 KiB) per region.
pub const PAGES_PER_REGION: u64 = REGION_BYTES / 4096;

/// `Region::node` of a region not yet allocated.
pub const NO_NODE: u32 = u32::MAX;

/// Who touched a region last, like the kernel's `cpupid` stored in the page flags (last CPU and
/// the low bits of the last pid; here the full tid).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CpuPid {
    /// CPU id of the last access.
    pub cpu: u32,
    /// Task index (into `Kernel::tasks`) of the last accessor.
    pub task: u32,
}

/// One region (2 MiB) of a process's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// Node the region is on (kernel id), [`NO_NODE`] if not allocated yet.
    pub node: u32,
    /// Owning process (index into `Kernel::procs`).
    pub proc: u32,
    /// Last accessor recorded by a hinting fault (`None` before the first fault).
    pub last: Option<CpuPid>,
    /// Armed for a NUMA hinting fault (the scanner made it `PROT_NONE`): the next access faults.
    pub armed: bool,
}

/// Life state of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    /// Its process has not started yet.
    NotStarted,
    /// Runnable (or sleeping for the part of its time its duty cycle says).
    Running,
    /// Finished its work.
    Exited,
}

/// Per-task NUMA statistics, written by the NUMA balancer and read by the scheduler and `SimHost`
/// (which shows them like `/proc/PID/task/TID/sched`'s numa fields).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskNuma {
    /// Preferred node (`numa_preferred_nid`), `None` = none (-1).
    pub preferred_nid: Option<u32>,
    /// Hinting faults per node (dense node index), memory side, cumulative (`numa_faults` memory).
    pub faults_mem: Vec<u64>,
    /// Hinting faults per node (dense node index) where the task ran at fault time, cumulative.
    pub faults_cpu: Vec<u64>,
    /// NUMA group id (`numa_group`), `None` when not grouped.
    pub group: Option<u32>,
    /// Scan sequence the task has seen (`numa_scan_seq`).
    pub scan_seq: u32,
    /// Task migrations done to improve locality (`numa_migrations`-like counter).
    pub migrations: u64,
}

/// A simulated thread.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// Thread id.
    pub tid: u32,
    /// Process index (into `Kernel::procs`).
    pub proc: u32,
    /// Thread group index within the process's spec.
    pub group: u32,
    /// Index of the thread within its group.
    pub index: u32,
    /// CPU the task is on (run queue it sits in).
    pub cpu: u32,
    /// CPUs it may run on (`sched_setaffinity`).
    pub allowed: CpuSet,
    /// Life state.
    pub state: TaskState,
    /// Fraction of time it wants a CPU (work duty cycle), 0..1.
    pub duty: f64,
    /// CPU time consumed, user, ns.
    pub utime_ns: u64,
    /// CPU time consumed in the kernel (migration stalls, faults), ns.
    pub stime_ns: u64,
    /// Time the task is stalled by page migrations it is waiting on, ns, still to be served.
    pub stall_ns: u64,
    /// Number of times it changed CPU.
    pub cpu_migrations: u64,
    /// NUMA balancing statistics.
    pub numa: TaskNuma,
}

/// A simulated process.
#[derive(Debug, Clone, PartialEq)]
pub struct Proc {
    /// Process id (also the tid of its main thread).
    pub pid: u32,
    /// Name.
    pub comm: String,
    /// Start time, clock ticks (100 Hz) after boot, like stat field 22.
    pub starttime: u64,
    /// Start time, ns.
    pub start_ns: u64,
    /// Its regions: `[start, end)` indexes into `Kernel::regions`, one range per region spec.
    pub regions: Vec<(usize, usize)>,
    /// Virtual start address of each region spec (for numa_maps and `MoveRanges`).
    pub addrs: Vec<u64>,
    /// Task indexes.
    pub tasks: Vec<usize>,
}

/// The kernel's state of a whole simulated machine.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The machine.
    pub topo: Topology,
    /// Node (kernel id) of each CPU, indexed by CPU id (`NO_NODE` for ids without a CPU).
    pub cpu_node: Vec<u32>,
    /// Capacity of each node in regions (dense node index).
    pub node_capacity: Vec<u64>,
    /// Regions allocated on each node (dense node index).
    pub node_used: Vec<u64>,
    /// Processes.
    pub procs: Vec<Proc>,
    /// Tasks.
    pub tasks: Vec<Task>,
    /// All regions of all processes.
    pub regions: Vec<Region>,
    /// `/proc/sys/kernel/numa_balancing`: 0 off, 1 on.
    pub numa_balancing: i64,
    /// Base pages migrated so far (kernel balancer and policy actions).
    pub pages_migrated: u64,
    /// Regions whose allocation failed (bind set full), cumulative.
    pub alloc_failures: u64,
}

impl Kernel {
    /// An empty kernel for `topo`, each node's capacity in regions from its memory size.
    pub fn new(topo: &Topology) -> Self {
        let max_cpu = topo.cpus.iter().map(|c| c.id).max().map_or(0, |m| m as usize + 1);
        let mut cpu_node = vec![NO_NODE; max_cpu];
        for c in &topo.cpus {
            cpu_node[c.id as usize] = c.node;
        }
        let node_capacity = topo.nodes.iter().map(|n| n.mem_total_kb * 1024 / REGION_BYTES).collect();
        Self {
            topo: topo.clone(),
            cpu_node,
            node_capacity,
            node_used: vec![0; topo.nodes.len()],
            procs: Vec::new(),
            tasks: Vec::new(),
            regions: Vec::new(),
            numa_balancing: 0,
            pages_migrated: 0,
            alloc_failures: 0,
        }
    }

    /// Dense index of node `id` (panics on an id not in the topology: ids are checked when a run
    /// is built).
    pub fn nidx(&self, id: u32) -> usize {
        self.topo.node_idx(id).expect("node id checked when the run was built")
    }

    /// Node (kernel id) of CPU `cpu`.
    pub fn node_of_cpu(&self, cpu: u32) -> u32 {
        self.cpu_node[cpu as usize]
    }

    /// Free regions on the node of dense index `ni`.
    pub fn free_regions(&self, ni: usize) -> u64 {
        self.node_capacity[ni].saturating_sub(self.node_used[ni])
    }

    /// Number of nodes.
    pub fn nr_nodes(&self) -> usize {
        self.topo.nodes.len()
    }

    /// Regions of process `p` per node (dense index), counting allocated regions only.
    pub fn proc_regions_per_node(&self, p: usize) -> Vec<u64> {
        let mut out = vec![0u64; self.nr_nodes()];
        for &(s, e) in &self.procs[p].regions {
            for r in &self.regions[s..e] {
                if r.node != NO_NODE {
                    out[self.nidx(r.node)] += 1;
                }
            }
        }
        out
    }

    /// Places a region on `node` (or moves it there), keeping the per-node counts. Returns false,
    /// changing nothing, when `node` is full. Does not count as a migration (see `migrate`).
    pub fn place(&mut self, region: usize, node: u32) -> bool {
        let to = self.nidx(node);
        let from = self.regions[region].node;
        if from == node {
            return true;
        }
        if self.free_regions(to) == 0 {
            return false;
        }
        if from != NO_NODE {
            let fi = self.nidx(from);
            self.node_used[fi] -= 1;
        }
        self.node_used[to] += 1;
        self.regions[region].node = node;
        true
    }
}

/// One NUMA hinting fault delivered to the balancer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HintFault {
    /// Faulting task (index into `Kernel::tasks`).
    pub task: usize,
    /// Region (index into `Kernel::regions`).
    pub region: usize,
    /// CPU the task ran on.
    pub cpu: u32,
    /// Node of that CPU (kernel id).
    pub cpu_node: u32,
    /// Node the region is on (kernel id).
    pub mem_node: u32,
    /// Base pages the fault covers (512 for a 2 MiB region).
    pub pages: u64,
}

/// What the balancer wants done about one fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FaultDecision {
    /// Migrate the region to this node (kernel id); `None` = leave it.
    pub migrate_to: Option<u32>,
}

/// A task placement change proposed by the balancer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskMove {
    /// Move task (index) to CPU (id).
    Move {
        /// Task index.
        task: usize,
        /// Destination CPU id.
        cpu: u32,
    },
    /// Exchange the CPUs of two tasks.
    Swap {
        /// First task index.
        a: usize,
        /// Second task index.
        b: usize,
    },
}

/// A NUMA balancer plugged into the kernel model (the AutoNUMA model implements it). See the module
/// essay for when each hook is called.
pub trait NumaBalancer: std::fmt::Debug {
    /// Arms regions for hinting faults (sets `Region::armed`) as the scanner would by now.
    /// `epoch_ns` is the length of the epoch about to run.
    fn scan(&mut self, now_ns: u64, epoch_ns: u64, kernel: &mut Kernel);

    /// Handles one hinting fault: updates statistics (task faults, `Region::last`, groups,
    /// preferred node) and decides whether the region migrates.
    fn on_fault(&mut self, now_ns: u64, kernel: &mut Kernel, fault: &HintFault) -> FaultDecision;

    /// Proposes task moves or swaps towards preferred nodes (after the epoch's faults).
    fn balance(&mut self, now_ns: u64, kernel: &Kernel) -> Vec<TaskMove>;
}
