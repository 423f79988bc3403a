//! The raw [`Sample`]: everything one observation read, typed but not interpreted.
//!
//! ```text
//!   Sample
//!   ├── clocks        monotonic / boottime / unix time, USER_HZ, page size
//!   ├── processes[]   pid, starttime, comm, stat (whole process), VmRSS,
//!   │   │             numa_maps (VMAs with policy) + per-node kB by kind
//!   │   └── threads[] tid, stat (cpu time, last cpu), status (allowed CPUs/nodes),
//!   │                 sched (NUMA faults, preferred node, group), schedstat (run delay)
//!   ├── nodes[]       id, CPUs, meminfo (MemFree...), numastat counters, vmstat numa_* counters
//!   ├── cpu           /proc/stat (per-CPU busy/idle ticks)
//!   ├── vmstat        numa_* / pgmigrate_* counters
//!   └── psi           cpu / memory / io pressure, when the kernel has PSI
//! ```
//!
//! Nothing is derived here beyond two conveniences the output needs (per-node kB by kind from
//! numa_maps, summed per-node CPU time); rates and models come from two samples (see [`crate::rate`]
//! and the `model` crate). A `Sample` serializes to JSON, so a recorded run can be replayed.

use std::sync::Arc;

use numapilot_topology::{CpuSet, NodeSet};
use serde::{Deserialize, Serialize};

use crate::counters::Counters;
use crate::parse::meminfo::Meminfo;
use crate::parse::numa_maps::{NodeUsage, NumaMaps};
use crate::parse::proc_stat::{CpuTimes, ProcStat};
use crate::parse::psi::Psi;
use crate::parse::sched::SchedInfo;
use crate::parse::schedstat::SchedStat;
use crate::parse::stat::TaskStat;

/// One observation of the whole machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// CLOCK_MONOTONIC when the observation started, ns.
    pub monotonic_ns: u64,
    /// CLOCK_BOOTTIME when the observation started, ns (comparable with `starttime` ticks).
    pub boottime_ns: u64,
    /// Wall-clock time when the observation started, ms since the epoch.
    pub unix_ms: u64,
    /// How long the observation took, ns.
    pub duration_ns: u64,
    /// Clock ticks per second (USER_HZ) for the tick counts in stat files.
    pub clock_ticks_per_sec: u64,
    /// Base page size, bytes.
    pub page_size: u64,
    /// Processes, sorted by pid. Those that exited while being read are left out.
    pub processes: Vec<ProcessSample>,
    /// NUMA nodes, sorted by id.
    pub nodes: Vec<NodeSample>,
    /// /proc/stat.
    pub cpu: Option<ProcStat>,
    /// /proc/stat as read when the observer's previous step ended, when the host took one (the live
    /// daemon does; readers and the simulator do not). Node CPU load is measured from there to
    /// `cpu`, so the observer's own step (observe, model, plan, act: its reader threads can keep a
    /// small node's CPUs busy) is not counted as the node's load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_base: Option<ProcStat>,
    /// NUMA-related /proc/vmstat counters.
    pub vmstat: Counters,
    /// Pressure stall information.
    pub psi: PsiSample,
    /// `/proc/sys/kernel/numa_balancing` (0 off, 1 on, 2 memory tiering, 3 both); `None` if absent.
    pub numa_balancing: Option<i64>,
    /// Memory-access samples taken since the previous observation (a PMU's precise sampling: Intel
    /// PEBS load latency, AMD IBS op, ARM SPE; a replayed `perf mem` recording; the simulator's
    /// emulation of them). Empty when no source is available, which is the usual case.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accesses: Vec<AccessSample>,
    /// The sampling period `accesses` were taken at, as a multiple of the source's base period
    /// (the one `Tunables::access_sample_bytes` describes): the engine's sampling stretch in force
    /// over the window (`numapilot_policy::cadence`). 0 and 1 both mean the base period
    /// ([`Sample::access_scale`]). A rate computed from the samples (the model's traffic per
    /// thread) multiplies by it, so a stretched period does not read as less traffic.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub access_period_scale: u32,
    /// How full the access sampler's fullest buffer was over the window, a fraction of what it
    /// holds (>= 1: it overflowed, samples taken over samples kept); 0 without a sampler. The
    /// engine's cadence stretches the period while it is high and relaxes it while it is low
    /// (`numapilot_policy::cadence`), so the sampling's cost stays bounded on any workload.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub access_fill: f64,
    /// Communication between threads since the previous observation (socket peers, wake-ups).
    /// Empty when no source is available.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comm: Vec<CommSample>,
    /// Memory objects mapped by more than one process (the same file, SysV shm segment or memfd,
    /// identified by device and inode from /proc/PID/maps, a SysV segment by its IPC namespace
    /// too; never by path). Empty when not read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared: Vec<SharedMemory>,
    /// CPU used by processes the operator took out of management (excluded, or outside an
    /// `[include]` list), by the CPU each one's leader last ran on: load of work the model has no
    /// task for. The model adds it to its node's CPU demand, so placement leaves room for it.
    /// Empty when there is none (the simulator; a host that manages every process).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmanaged_cpu: Vec<CpuUse>,
}

/// CPU time used on one CPU over the last period, in CPUs (1.0: the CPU's whole time).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CpuUse {
    /// The CPU.
    pub cpu: u32,
    /// CPUs of time.
    pub cpus: f64,
}

/// One memory object (file, SysV shm segment, memfd) mapped shared by several processes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SharedMemory {
    /// Device of the backing inode, `major << 32 | minor` (as /proc/PID/maps prints `MM:mm`, hex).
    pub dev: u64,
    /// Inode number (a SysV segment's is its shmid).
    pub inode: u64,
    /// For a SysV shm segment, the IPC namespace its users are in (the inode of /proc/PID/ns/ipc;
    /// 0 when not known): its shmid is unique only there. `None` for any other object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipc_ns: Option<u64>,
    /// Path as /proc/PID/maps shows it (`/SYSV0000abcd (deleted)`, `/memfd:name (deleted)`, a file).
    /// Not its identity: memfds of one name, or anonymous shared regions, share a path.
    pub path: String,
    /// The processes mapping it: `(pid, bytes mapped)`, sorted by pid, at least two.
    pub users: Vec<(u32, u64)>,
    /// Where they map it: `(pid, start, end)` of each mapping, addresses in bytes, sorted. What
    /// tells which of a process's VMAs of a path (numa_maps shows no inode) are this object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranges: Vec<(u32, u64, u64)>,
}

impl SharedMemory {
    /// What identifies the object.
    pub fn id(&self) -> ObjectId {
        ObjectId { dev: self.dev, inode: self.inode, ipc_ns: self.ipc_ns }
    }

    /// `pid`'s mappings of it, `(start, end)` in bytes (empty when `pid` maps it not).
    pub fn ranges_of(&self, pid: u32) -> impl Iterator<Item = (u64, u64)> + '_ {
        let from = self.ranges.partition_point(|r| r.0 < pid);
        self.ranges[from..].iter().take_while(move |r| r.0 == pid).map(|r| (r.1, r.2))
    }
}

/// The identity of a memory object several processes map ([`SharedMemory::id`]): its device and
/// inode, and for a SysV segment, whose inode number is its shmid, the IPC namespace it lives in
/// (see [`crate::maps`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectId {
    /// Device, `major << 32 | minor`.
    pub dev: u64,
    /// Inode number.
    pub inode: u64,
    /// A SysV segment's IPC namespace (0 when not known); `None` for any other object.
    pub ipc_ns: Option<u64>,
}

/// Sampled memory accesses of one thread to one page, aggregated over the sampling window.
///
/// What a precise-sampling PMU reports per record (`perf script -F pid,tid,addr,phys_addr,...`),
/// summed per (thread, page). `count` is in samples, not accesses: multiply by the sampling period
/// for an estimate of accesses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AccessSample {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Virtual address of the sampled access, rounded down to its page.
    pub addr: u64,
    /// Physical address (or any machine-wide identity of the memory, e.g. a simulated region), when
    /// known: it identifies memory shared between processes mapped at different virtual addresses.
    pub phys: Option<u64>,
    /// Node the accessed memory was on.
    pub node: u32,
    /// Samples (not accesses) in the window.
    pub count: u32,
    /// Monotonic time of the last of these samples, ns.
    pub last_ns: u64,
}

impl AccessSample {
    /// Sums placed accesses into one sample per (pid, tid, page of `page_size` bytes), sorted by
    /// (pid, tid, addr). Each access is `(pid, tid, virtual address, physical address or 0 when
    /// unknown, time ns, node)`; an entry's node and `last_ns` are those of its latest access. The
    /// one aggregation behind the live PMU reader (`pmu::aggregate`) and `numapilot replay`.
    pub fn aggregate(page_size: u64, accesses: impl IntoIterator<Item = (u32, u32, u64, u64, u64, u32)>) -> Vec<Self> {
        let ps = page_size.max(1);
        let mut agg: std::collections::BTreeMap<(u32, u32, u64), AccessSample> = std::collections::BTreeMap::new();
        for (pid, tid, addr, phys, time_ns, node) in accesses {
            let page = addr / ps * ps;
            let e = agg.entry((pid, tid, page)).or_insert(AccessSample {
                pid,
                tid,
                addr: page,
                phys: (phys != 0).then_some(phys / ps * ps),
                node,
                count: 0,
                last_ns: 0,
            });
            e.count = e.count.saturating_add(1);
            if time_ns >= e.last_ns {
                e.last_ns = time_ns;
                e.node = node;
            }
        }
        agg.into_values().collect()
    }
}

/// How a [`CommSample`] was observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CommKind {
    /// The two ends of a connected socket (TCP 4-tuple or unix-socket peer), `events` = bytes or
    /// messages exchanged in the window when known, else 1 per observation.
    Socket,
    /// `waker` woke `wakee` (`sched_waking`), `events` = wake-ups in the window.
    Wakeup,
}

/// Communication between two threads (or processes: `tid` = `pid` when only the process is known).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CommSample {
    /// One end: (pid, tid).
    pub a: (u32, u32),
    /// The other end: (pid, tid).
    pub b: (u32, u32),
    /// How it was seen.
    pub kind: CommKind,
    /// Events in the window (see [`CommKind`]).
    pub events: u64,
}

/// One process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessSample {
    /// Process id.
    pub pid: u32,
    /// Start time after boot, clock ticks: with the pid, the identity of the process (pids are reused).
    pub starttime: u64,
    /// Command name (raw, from stat).
    pub comm: String,
    /// Whether this is a kernel thread (`PF_KTHREAD`).
    pub kernel_thread: bool,
    /// CLOCK_MONOTONIC when this process was read, ns (for rates between two samples).
    pub read_ns: u64,
    /// `/proc/PID/stat`: CPU times summed over all threads, live and exited.
    pub stat: TaskStat,
    /// `VmRSS` of the process, kB (`None` for kernel threads).
    pub rss_kb: Option<u64>,
    /// The VMAs; `None` for kernel threads, zombies and unreadable files (see `numa_maps_error`).
    pub numa_maps: Option<NumaMaps>,
    /// Why numa_maps could not be read, when it could not (e.g. "Permission denied").
    pub numa_maps_error: Option<String>,
    /// Resident kB per node and kind, from `numa_maps`.
    pub node_usage: Vec<NodeUsage>,
    /// Threads, sorted by tid; empty when thread reading was switched off.
    pub threads: Vec<ThreadSample>,
    /// The CPUs its cpuset allows (the cgroup's effective CPUs), when the host read them: the
    /// daemon reads them for a process with a thread narrower than the online CPUs, to tell a
    /// process an operator or container runtime confined (its threads as wide as their cpuset)
    /// from one that pinned itself. `None`: not read, the threads' nodes' CPUs stand for it (as
    /// before this field; recordings without it read as `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpuset_cpus: Option<Arc<CpuSet>>,
}

/// One thread (task) of a process.
///
/// Kept small (a full observation holds one per thread of the machine): the allowed sets are shared
/// between threads with equal sets, and the per-thread `status` lines that are process-wide (VmRSS,
/// Threads, Tgid) are not repeated here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadSample {
    /// Thread id.
    pub tid: u32,
    /// `task/TID/stat`: this thread's CPU time (`utime`, `stime`), last CPU (`processor`), state, name.
    pub stat: TaskStat,
    /// CPUs the thread may run on: `task/TID/status` `Cpus_allowed_list`, or the same mask from
    /// `sched_getaffinity(2)` (see [`crate::ReadOptions::thread_status`]).
    pub cpus_allowed: Arc<CpuSet>,
    /// `task/TID/status` `Mems_allowed_list`: nodes the thread may allocate from (its cpuset); the
    /// leader's for other threads unless every status is read.
    pub mems_allowed: Arc<NodeSet>,
    /// `task/TID/status` `voluntary_ctxt_switches`; `None` when the thread's status was not read
    /// ([`crate::ReadOptions::thread_status`]).
    pub voluntary_ctxt_switches: Option<u64>,
    /// `task/TID/status` `nonvoluntary_ctxt_switches`; `None` as above.
    pub nonvoluntary_ctxt_switches: Option<u64>,
    /// `task/TID/sched`: runtime, migrations, NUMA balancing. `None` without `CONFIG_SCHED_DEBUG`, or
    /// when not read (by default only while NUMA balancing is on: [`crate::SchedMode`]).
    pub sched: Option<Box<SchedInfo>>,
    /// `task/TID/schedstat`: run time and run delay; `None` without `CONFIG_SCHED_INFO`.
    pub schedstat: Option<SchedStat>,
}

impl ThreadSample {
    /// CPUs the thread may run on.
    pub fn cpus_allowed(&self) -> &CpuSet {
        &self.cpus_allowed
    }

    /// Nodes the thread may allocate from.
    pub fn mems_allowed(&self) -> &NodeSet {
        &self.mems_allowed
    }

    /// The CPU the thread last ran on (stat field 39).
    pub fn last_cpu(&self) -> u32 {
        self.stat.processor
    }
}

/// One NUMA node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSample {
    /// Kernel node id.
    pub node: u32,
    /// CPUs of the node (`nodeN/cpulist`; empty for memory-only nodes).
    pub cpus: CpuSet,
    /// `nodeN/meminfo`.
    pub meminfo: Meminfo,
    /// `nodeN/numastat`, pages.
    pub numastat: Counters,
    /// The NUMA-related counters of `nodeN/vmstat` (`numa_hit` ... `numa_other`, `pgpromote_*`,
    /// `pgdemote_*`; see [`crate::parse::vmstat::parse_node_vmstat`]), pages or events.
    pub vmstat: Counters,
    /// Memory-controller use of the node since the previous observation, when an uncore PMU (or the
    /// simulator) tells it; `None` otherwise (the usual case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_bw: Option<MemBandwidth>,
}

impl NodeSample {
    /// Node `n` as a topology describes it: its CPUs, `MemTotal` and `MemFree` (kB) from the
    /// topology, no counters, no controller figures. For a sample built from a recording or a
    /// synthetic load rather than read from a host.
    pub fn from_topology(n: &numapilot_topology::Node) -> Self {
        NodeSample {
            node: n.id,
            cpus: n.cpus.clone(),
            meminfo: Meminfo {
                entries: vec![
                    crate::MeminfoEntry { key: "MemTotal".into(), value: n.mem_total_kb, kb: true },
                    crate::MeminfoEntry { key: "MemFree".into(), value: n.mem_free_kb, kb: true },
                ],
            },
            numastat: Counters::default(),
            vmstat: Counters::default(),
            mem_bw: None,
        }
    }
}

/// Use of one node's memory controller over an observation window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemBandwidth {
    /// Bytes read and written through the controller in the window.
    pub bytes: u64,
    /// Length of the window, ns.
    pub window_ns: u64,
    /// Time within the window the controller was saturated (requests queued beyond its capacity),
    /// ns: the interference signal.
    pub saturated_ns: u64,
    /// The controller's capacity, bytes per second (for load = bytes / (capacity x window)).
    pub capacity_bytes_per_s: u64,
    /// Of `bytes`, the bytes of page-migration copies (read on the source node, written on the
    /// destination) in the window, when the source can tell them apart (the simulator; a live
    /// host knows its own moves); 0 otherwise. A copy is traffic of the mover, not demand of the
    /// workload: the model's bandwidth load leaves it out.
    #[serde(default)]
    pub migrate_bytes: u64,
}

impl NodeSample {
    /// MemFree of the node, kB.
    pub fn mem_free_kb(&self) -> Option<u64> {
        self.meminfo.mem_free_kb()
    }

    /// The node's free memory as numapilot counts it, kB: MemFree plus the page cache and slab
    /// the kernel reclaims before it runs out (Inactive(file), SReclaimable; each when the node's
    /// meminfo has it), at most MemTotal. The kernel's own MemAvailable estimate counts these
    /// (mm/show_mem.c `si_mem_available`), and numad 20150602 counts MemFree + Inactive(file)
    /// (numad.c `update_nodes`, `use_inactive_file_cache` on by default). One definition for the
    /// model's memory capacity, `status` and `numapilot advise`: a machine whose memory is page
    /// cache is not full. `None` without MemFree.
    pub fn mem_free_reclaimable_kb(&self) -> Option<u64> {
        let get = |k: &str| self.meminfo.get(k).unwrap_or(0);
        let free = self.mem_free_kb()?.saturating_add(get("Inactive(file)")).saturating_add(get("SReclaimable"));
        Some(self.meminfo.mem_total_kb().map_or(free, |t| free.min(t)))
    }
}

/// PSI for the three resources; each `None` when the kernel has no PSI or it is switched off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PsiSample {
    /// `/proc/pressure/cpu`.
    pub cpu: Option<Psi>,
    /// `/proc/pressure/memory`.
    pub memory: Option<Psi>,
    /// `/proc/pressure/io`.
    pub io: Option<Psi>,
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

fn is_zero_f64(v: &f64) -> bool {
    *v == 0.0
}

impl Sample {
    /// A sample taken at `monotonic_ns` (its boot time too) that holds nothing: no process, node,
    /// /proc/stat line, counter or signal; USER_HZ 100 and 4 KiB pages (x86-64's and arm64's).
    /// The base for samples built field by field (`Sample { processes, ..Sample::empty_at(t) }`):
    /// the simulator's host, `replay`, examples and tests. The live reader fills every field itself.
    pub fn empty_at(monotonic_ns: u64) -> Sample {
        Sample {
            monotonic_ns,
            boottime_ns: monotonic_ns,
            unix_ms: 0,
            duration_ns: 0,
            clock_ticks_per_sec: 100,
            page_size: 4096,
            processes: Vec::new(),
            nodes: Vec::new(),
            cpu: None,
            cpu_base: None,
            vmstat: Counters::default(),
            psi: PsiSample::default(),
            numa_balancing: None,
            accesses: Vec::new(),
            access_period_scale: 1,
            access_fill: 0.0,
            comm: Vec::new(),
            shared: Vec::new(),
            unmanaged_cpu: Vec::new(),
        }
    }

    /// How many base sampling periods one access sample stands for (`access_period_scale`, 0 read
    /// as 1).
    pub fn access_scale(&self) -> u32 {
        self.access_period_scale.max(1)
    }

    /// CPU time of a node: the sum of its CPUs' /proc/stat lines (offline CPUs have none). `None` when
    /// the node is unknown or /proc/stat was not read.
    pub fn node_cpu_times(&self, node: u32) -> Option<CpuTimes> {
        let n = self.nodes.iter().find(|n| n.node == node)?;
        self.cpu_times_within(&n.cpus)
    }

    /// CPU time of the CPUs `cpus` (those with a /proc/stat line), `None` when /proc/stat was not
    /// read. The model sums its own nodes' CPU lists with it, which leave out reserved CPUs
    /// (`Topology::reserve`), where the sample's node lists are sysfs's.
    pub fn cpu_times_within(&self, cpus: &CpuSet) -> Option<CpuTimes> {
        Some(times_within(cpus, self.cpu.as_ref()?))
    }

    /// [`Sample::cpu_times_within`] of `cpu_base` (the end of the observer's previous step).
    pub fn cpu_times_within_base(&self, cpus: &CpuSet) -> Option<CpuTimes> {
        Some(times_within(cpus, self.cpu_base.as_ref()?))
    }

    /// [`Sample::cpu_times_within`] of each of `sets` (a machine's nodes), in one pass over the
    /// /proc/stat lines: a pass per set cost the sets times the CPUs (1,024 nodes of a 65,536-CPU
    /// machine file walked 67 M lines a sample).
    pub fn cpu_times_within_each(&self, sets: &[&CpuSet]) -> Option<Vec<CpuTimes>> {
        Some(times_within_each(sets, self.cpu.as_ref()?))
    }

    /// [`Sample::cpu_times_within_each`] of `cpu_base`.
    pub fn cpu_times_within_each_base(&self, sets: &[&CpuSet]) -> Option<Vec<CpuTimes>> {
        Some(times_within_each(sets, self.cpu_base.as_ref()?))
    }

    /// The process with this pid.
    pub fn process(&self, pid: u32) -> Option<&ProcessSample> {
        self.processes.binary_search_by_key(&pid, |p| p.pid).ok().map(|i| &self.processes[i])
    }

    /// Number of threads in the sample.
    pub fn thread_count(&self) -> usize {
        self.processes.iter().map(|p| p.threads.len()).sum()
    }
}

/// Adds `c` to `t`, field by field.
fn add_times(t: &mut CpuTimes, c: &CpuTimes) {
    t.user += c.user;
    t.nice += c.nice;
    t.system += c.system;
    t.idle += c.idle;
    t.iowait += c.iowait;
    t.irq += c.irq;
    t.softirq += c.softirq;
    t.steal += c.steal;
    t.guest += c.guest;
    t.guest_nice += c.guest_nice;
}

#[cfg(test)]
thread_local! {
    /// /proc/stat lines looked at by `times_within_each` on this thread (for its test).
    static STAT_LINES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The sum of the /proc/stat lines of `cpus` in `stat`.
fn times_within(cpus: &CpuSet, stat: &ProcStat) -> CpuTimes {
    let mut t = CpuTimes::default();
    for line in stat.cpus.iter().filter(|c| cpus.contains(c.cpu)) {
        add_times(&mut t, &line.times);
    }
    t
}

/// [`times_within`] of each of `sets`: each line added to the sets its CPU is in (sums of
/// integers: the same whatever the order).
fn times_within_each(sets: &[&CpuSet], stat: &ProcStat) -> Vec<CpuTimes> {
    // The first set of each CPU, and the others for a CPU in several (nodes do not share CPUs).
    let top = sets.iter().filter_map(|s| s.last()).max().map_or(0, |m| m as usize + 1);
    let mut first = vec![usize::MAX; top];
    let mut more: std::collections::BTreeMap<u32, Vec<usize>> = std::collections::BTreeMap::new();
    for (i, set) in sets.iter().enumerate() {
        for cpu in set.iter() {
            match first[cpu as usize] {
                usize::MAX => first[cpu as usize] = i,
                _ => more.entry(cpu).or_default().push(i),
            }
        }
    }
    let mut out = vec![CpuTimes::default(); sets.len()];
    for line in &stat.cpus {
        #[cfg(test)]
        STAT_LINES.with(|n| n.set(n.get() + 1));
        match first.get(line.cpu as usize) {
            Some(&i) if i != usize::MAX => add_times(&mut out[i], &line.times),
            _ => continue,
        }
        if let Some(others) = more.get(&line.cpu) {
            for &j in others {
                add_times(&mut out[j], &line.times);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::proc_stat::CpuLine;

    #[test]
    fn each_node_s_cpu_time_in_one_pass_over_the_lines() {
        // 256 nodes of 16 CPUs (4,096 lines), CPU c busy c ticks; one CPU in two sets, one set
        // empty, a line of a CPU no set has. The sums are each set's own (cpu_times_within), and
        // the lines are looked at once, not once per set (256 x 4,096).
        let times = |c: u32| CpuTimes { user: u64::from(c), idle: 1, ..CpuTimes::default() };
        let mut stat = ProcStat {
            total: CpuTimes::default(),
            cpus: (0..4096).map(|c| CpuLine { cpu: c, times: times(c) }).collect(),
            ctxt: 0,
            btime: 0,
            processes: None,
            procs_running: None,
            procs_blocked: None,
        };
        stat.cpus.push(CpuLine { cpu: 9000, times: times(9000) });
        let mut nodes: Vec<CpuSet> = (0..256).map(|n| (n * 16..n * 16 + 16).collect()).collect();
        nodes.push([5u32].into_iter().collect());
        nodes.push(CpuSet::new());
        let sample = Sample { cpu: Some(stat), ..Sample::empty_at(0) };
        let sets: Vec<&CpuSet> = nodes.iter().collect();
        STAT_LINES.with(|n| n.set(0));
        let each = sample.cpu_times_within_each(&sets).unwrap();
        assert_eq!(STAT_LINES.with(|n| n.get()), 4097);
        for (set, t) in nodes.iter().zip(&each) {
            assert_eq!(Some(*t), sample.cpu_times_within(set), "{set}");
        }
        assert_eq!(each[256].user, 5);
        assert_eq!(sample.cpu_times_within_each_base(&sets), None);
    }
}
