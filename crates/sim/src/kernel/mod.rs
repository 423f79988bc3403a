//! The kernel model: the state the simulated kernel keeps (tasks, processes, memory regions, node
//! usage) and the mechanisms acting on it: page allocation (`alloc`), the scheduler and its load
//! balancer (`sched`), page migration and its cost (`migrate`). The AutoNUMA model (`autonuma`) is
//! a separate decision-maker the engine consults through its `AutoNumaView` trait.
//!
//! # State
//!
//! ```text
//!   Kernel
//!   ├── procs[]    Proc     pid, comm, starttime, its regions = one contiguous block, tasks
//!   ├── tasks[]    Task     tid, proc, cpu, allowed CPUs, state, CPU time, pending stall,
//!   │                       run delay and switch-ins (schedstat)
//!   ├── regions[]  Region   2 MiB granule: node (or NO_NODE), owner proc, region spec
//!   ├── node_used[]         regions allocated per node (capacity from the topology's MemTotal)
//!   └── proc_node[p][n]     regions of process p on node n (kept by `place`, O(1) per move)
//! ```
//!
//! Indexes: tasks, procs and regions are dense indexes into these vectors and never change during a
//! run (an exited task stays, `TaskState::Exited`). Node ids are *kernel* ids (`u32`) in `Region`
//! and `Task`; per-node vectors are indexed by the dense node index (`Kernel::nidx`).
//!
//! # Hooks for the AutoNUMA model
//!
//! Every epoch, when `numa_balancing` is on, the engine builds an `AutoNumaView` over this state:
//! the tasks with the CPU they ran on and their CPU time in the epoch, each process's regions in
//! address order (`Proc::first_region` + index; unallocated = not resident; regions under an explicit
//! memory policy are not movable), and for each armed region the tasks that touched it with their
//! bytes. It applies the returned page migrations through `migrate` (cost charged to the faulting
//! task; a full target reports `migration_failed`), the task moves (idle allowed CPU of the node)
//! and swaps, and a hinting-fault cost per fault. The load balancer asks `preferred_node` and does
//! not pull a task off its preferred node.
//!
//! # Limits
//!
//! Memory is modelled at the region granule (2 MiB, a THP): a region is on exactly one node. Page
//! counts are base pages (4 KiB), 512 per region.

pub mod alloc;
pub mod autonuma;
pub mod migrate;
pub mod sched;

use numapilot_topology::{CpuSet, Topology};

/// Bytes per region: 2 MiB (one x86-64 transparent huge page).
pub const REGION_BYTES: u64 = 2 << 20;

/// Base pages (4 KiB) per region.
pub const PAGES_PER_REGION: u64 = REGION_BYTES / 4096;

/// `Region::node` of a region not yet allocated.
pub const NO_NODE: u32 = u32::MAX;

/// One region (2 MiB) of a process's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// Node the region is on (kernel id), [`NO_NODE`] if not allocated yet.
    pub node: u32,
    /// Owning process (index into `Kernel::procs`).
    pub proc: u32,
    /// Region spec it belongs to (index into the run's flattened region specs).
    pub rspec: u32,
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
    /// Time runnable but waiting for its CPU (run delay, `sched_info.run_delay`), ns: the part of
    /// the time it wanted a CPU that went to the other tasks queued on the same CPU.
    pub wait_ns: u64,
    /// Times it was switched in (`sched_info.pcount`, schedstat's third number); see
    /// `sched::BASE_SLICE_NS` for how the fluid model counts them.
    pub timeslices: u64,
}

impl Task {
    /// A running task that has used no CPU yet, on `cpu`, allowed on `allowed`, wanting a CPU all the time
    /// (set `state` and `duty` with struct-update syntax where they differ).
    pub fn new(tid: u32, proc: u32, group: u32, index: u32, cpu: u32, allowed: CpuSet) -> Self {
        Task {
            tid,
            proc,
            group,
            index,
            cpu,
            allowed,
            state: TaskState::Running,
            duty: 1.0,
            utime_ns: 0,
            stime_ns: 0,
            stall_ns: 0,
            cpu_migrations: 0,
            wait_ns: 0,
            timeslices: 0,
        }
    }
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
    /// Index of its first region in `Kernel::regions` (its regions are one contiguous block).
    pub first_region: usize,
    /// Its regions: `[start, end)` indexes into `Kernel::regions`, one range per region spec.
    pub regions: Vec<(usize, usize)>,
    /// Virtual start address of each region spec (for numa_maps and `MoveRanges`).
    pub addrs: Vec<u64>,
    /// Task indexes.
    pub tasks: Vec<usize>,
    /// Its cpuset's CPUs (`ProcessSpec::cpuset`), `None` for the whole machine: no affinity
    /// reaches past them.
    pub cpuset: Option<CpuSet>,
}

/// The kernel's state of a whole simulated machine.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The machine.
    pub topo: Topology,
    /// Node (kernel id) of each CPU, indexed by CPU id (`NO_NODE` for ids without a CPU).
    pub cpu_node: Vec<u32>,
    /// Dense index of each node id (`usize::MAX` for ids that are not nodes).
    node_index: Vec<usize>,
    /// Capacity of each node in regions (dense node index).
    pub node_capacity: Vec<u64>,
    /// Regions allocated on each node (dense node index).
    pub node_used: Vec<u64>,
    /// Regions of each process per node: `proc_node[p][n]`.
    pub proc_node: Vec<Vec<u64>>,
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
    /// Base pages migrated by the NUMA balancer (`numa_pages_migrated`).
    pub numa_pages_migrated: u64,
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
        let max_node = topo.nodes.iter().map(|n| n.id as usize + 1).max().unwrap_or(0);
        let mut node_index = vec![usize::MAX; max_node];
        for (i, n) in topo.nodes.iter().enumerate() {
            node_index[n.id as usize] = i;
        }
        let node_capacity = topo.nodes.iter().map(|n| n.mem_total_kb * 1024 / REGION_BYTES).collect();
        Self {
            topo: topo.clone(),
            cpu_node,
            node_index,
            node_capacity,
            node_used: vec![0; topo.nodes.len()],
            proc_node: Vec::new(),
            procs: Vec::new(),
            tasks: Vec::new(),
            regions: Vec::new(),
            numa_balancing: 0,
            pages_migrated: 0,
            numa_pages_migrated: 0,
            alloc_failures: 0,
        }
    }

    /// Dense index of node `id` (panics on an id not in the topology: ids are checked when a run
    /// is built).
    pub fn nidx(&self, id: u32) -> usize {
        let i = self.node_index[id as usize];
        debug_assert!(i != usize::MAX, "node id checked when the run was built");
        i
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
        let p = self.regions[region].proc as usize;
        if from != NO_NODE {
            let fi = self.nidx(from);
            self.node_used[fi] -= 1;
            self.proc_node[p][fi] -= 1;
        }
        self.node_used[to] += 1;
        self.proc_node[p][to] += 1;
        self.regions[region].node = node;
        true
    }
}
