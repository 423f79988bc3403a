//! The AutoNUMA model on its own, driven by a minimal stand-in for the engine (regions move when
//! told, threads move or swap when told, every thread runs every epoch): the autonuma-benchmark
//! shapes must converge the way the kernel's algorithm makes them converge.

use std::collections::BTreeMap;

use numapilot_sim::kernel::autonuma::{AutoNuma, AutoNumaParams, AutoNumaView, Pid, RegionState, TaskRun, Tid};

const MS: u64 = 1_000_000;
const CPUS_PER_NODE: u32 = 6;

/// Threads, regions per process, and who touches which region.
#[derive(Debug)]
struct Machine {
    tasks: Vec<TaskRun>,
    regions: BTreeMap<Pid, Vec<Option<RegionState>>>,
    threads: BTreeMap<Pid, Vec<Tid>>,
    /// true: thread i touches only its slice (THREAD_ALLOC, numa02); false: all threads touch all.
    sliced: bool,
}

impl AutoNumaView for Machine {
    fn tasks(&self) -> &[TaskRun] {
        &self.tasks
    }
    fn region_count(&self, pid: Pid) -> usize {
        self.regions.get(&pid).map_or(0, Vec::len)
    }
    fn region(&self, pid: Pid, idx: usize) -> Option<RegionState> {
        self.regions.get(&pid).and_then(|r| r.get(idx).copied().flatten())
    }
    fn rss_bytes(&self, pid: Pid) -> u64 {
        self.regions.get(&pid).map_or(0, |r| r.iter().flatten().count() as u64 * (2 << 20))
    }
    fn accessors(&self, pid: Pid, idx: usize, out: &mut Vec<(Tid, u64)>) {
        let threads = &self.threads[&pid];
        if self.sliced {
            let per = self.regions[&pid].len() / threads.len();
            out.push((threads[(idx / per).min(threads.len() - 1)], 1));
        } else {
            out.extend(threads.iter().map(|&t| (t, 1)));
        }
    }
}

impl Machine {
    /// `procs` processes of `threads` threads and `regions` 2 MiB regions each, all memory on node
    /// 0 (autonuma-benchmark's start); thread t of process p on CPU 2t + p (two processes
    /// interleaved over both nodes, the worst start) or CPU t (one process).
    fn new(procs: u32, threads: u32, regions: usize, sliced: bool) -> Self {
        let mut m = Machine { tasks: Vec::new(), regions: BTreeMap::new(), threads: BTreeMap::new(), sliced };
        for p in 0..procs {
            let pid = 100 * (p + 1);
            m.regions.insert(pid, vec![Some(RegionState { node: 0, movable: true, shared: false }); regions]);
            for t in 0..threads {
                let cpu = if procs == 2 { 2 * t + p } else { t };
                let tid = pid + t;
                m.tasks.push(TaskRun {
                    tid,
                    pid,
                    cpu,
                    node: (cpu / CPUS_PER_NODE) as usize,
                    ran_ns: 10 * MS,
                    allowed_nodes: u64::MAX,
                });
                m.threads.entry(pid).or_default().push(tid);
            }
        }
        m
    }

    /// Runs `secs` of 10 ms epochs, applying every decision.
    fn run(&mut self, model: &mut AutoNuma, secs: u64) {
        for k in 1..=secs * 100 {
            let acts = model.step(k * 10 * MS, self);
            for mig in &acts.migrations {
                let r = self.regions.get_mut(&mig.pid).unwrap()[mig.region].as_mut().unwrap();
                assert_eq!(r.node, mig.from);
                r.node = mig.to;
            }
            for mv in &acts.task_moves {
                let i = self.tasks.iter().position(|t| t.tid == mv.tid).unwrap();
                assert_eq!(self.tasks[i].node, mv.from_node);
                match mv.swap_with {
                    Some(other) => {
                        let j = self.tasks.iter().position(|t| t.tid == other).unwrap();
                        let (ci, ni) = (self.tasks[i].cpu, self.tasks[i].node);
                        self.tasks[i].cpu = self.tasks[j].cpu;
                        self.tasks[i].node = self.tasks[j].node;
                        self.tasks[j].cpu = ci;
                        self.tasks[j].node = ni;
                    }
                    None => {
                        let used: Vec<u32> = self.tasks.iter().map(|t| t.cpu).collect();
                        let cpu = (0..2 * CPUS_PER_NODE)
                            .find(|c| (c / CPUS_PER_NODE) as usize == mv.to_node && !used.contains(c))
                            .expect("a move goes to an idle CPU");
                        self.tasks[i].cpu = cpu;
                        self.tasks[i].node = mv.to_node;
                    }
                }
            }
        }
    }

    /// Regions of `pid` on each of the two nodes.
    fn mem(&self, pid: Pid) -> [usize; 2] {
        let mut out = [0; 2];
        for r in self.regions[&pid].iter().flatten() {
            out[r.node] += 1;
        }
        out
    }

    /// Threads of `pid` on each node.
    fn threads_on(&self, pid: Pid) -> [usize; 2] {
        let mut out = [0; 2];
        for t in self.tasks.iter().filter(|t| t.pid == pid) {
            out[t.node] += 1;
        }
        out
    }
}

fn model() -> AutoNuma {
    AutoNuma::new(AutoNumaParams::default(), vec![CPUS_PER_NODE; 2])
}

/// numa01 shape: 2 processes x 6 threads, 3 GiB each, all threads touch all of their process's
/// memory, everything starts on node 0 and each process has 3 threads on each node. The kernel's
/// way out: threads of one process join one numa group (same mm); shared faults pass the
/// two-stage filter when two consecutive faults come from the same node, and the group's 3/4
/// hysteresis lets memory follow the CPU faults; once one group's memory leans to a node, swaps
/// (groupimp of both groups positive) gather each process on one node and its memory follows.
/// Expected end state: each process wholly on one node, the two on different nodes.
#[test]
fn numa01_shape_converges_to_one_node_per_process() {
    let mut m = Machine::new(2, 6, 1536, false);
    let mut an = model();
    m.run(&mut an, 30);
    let (a, b) = (m.threads_on(100), m.threads_on(200));
    assert!(a == [6, 0] || a == [0, 6], "process 100 threads per node {a:?}");
    assert_eq!(b, [a[1], a[0]], "the other process on the other node");
    let home_a = if a[0] == 6 { 0 } else { 1 };
    assert_eq!(m.mem(100)[home_a], 1536, "process 100 memory {:?}", m.mem(100));
    assert_eq!(m.mem(200)[1 - home_a], 1536, "process 200 memory {:?}", m.mem(200));
    let c = an.counters();
    assert!(c.numa_task_swapped > 0 && c.numa_pages_migrated >= 1536 * 512);
    let g = an.task_stats(100).unwrap().numa_group_id;
    assert!((100..106).all(|t| an.task_stats(t).unwrap().numa_group_id == g), "one group per process");
    assert!((200..206).all(|t| an.task_stats(t).unwrap().numa_group_id != g));
}

/// numa02 shape: 1 process x 12 threads, 1 GiB first-touched on node 0, thread i touches only its
/// slice. Each slice's first hinting fault is private with an unset cpupid in the task's early
/// life: it migrates at once. After one full scan pass (scan delay 1 s + 4 windows of 256 MiB
/// at 250 ms) the 6 node-1 threads' slices (6 x 42 regions + the 8-region tail of the last
/// thread) are on node 1 and nothing moves afterwards.
#[test]
fn numa02_shape_slices_follow_their_threads_within_one_pass() {
    let mut m = Machine::new(1, 12, 512, true);
    let mut an = model();
    m.run(&mut an, 3);
    assert_eq!(m.mem(100), [252, 260]);
    let migrated = an.counters().numa_pages_migrated;
    m.run(&mut an, 10);
    assert_eq!(an.counters().numa_pages_migrated, migrated, "converged: no further migration");
    assert_eq!(an.counters().numa_task_swapped + an.counters().numa_task_migrated, 0);
}

/// `Machine` whose node 1 has CPUs but no memory (a memory-less node).
struct NoMemoryOnNode1(Machine);

impl AutoNumaView for NoMemoryOnNode1 {
    fn tasks(&self) -> &[TaskRun] {
        self.0.tasks()
    }
    fn region_count(&self, pid: Pid) -> usize {
        self.0.region_count(pid)
    }
    fn region(&self, pid: Pid, idx: usize) -> Option<RegionState> {
        self.0.region(pid, idx)
    }
    fn rss_bytes(&self, pid: Pid) -> u64 {
        self.0.rss_bytes(pid)
    }
    fn accessors(&self, pid: Pid, idx: usize, out: &mut Vec<(Tid, u64)>) {
        self.0.accessors(pid, idx, out)
    }
    fn node_has_memory(&self, node: usize) -> bool {
        node != 1
    }
}

/// numa02 shape with node 1 memory-less: its 6 threads fault on their node-0 slices (remote) but
/// no page may move to node 1; with memory on both nodes the same run moves 260 regions there
/// (`numa02_shape_slices_follow_their_threads_within_one_pass`).
#[test]
fn a_memoryless_node_is_never_a_migration_target() {
    let mut m = NoMemoryOnNode1(Machine::new(1, 12, 512, true));
    let mut an = model();
    for k in 1..=500u64 {
        let acts = an.step(k * 10 * MS, &m);
        for mig in &acts.migrations {
            assert_ne!(mig.to, 1, "migration to the memory-less node: {mig:?}");
            m.0.regions.get_mut(&mig.pid).unwrap()[mig.region].as_mut().unwrap().node = mig.to;
        }
    }
    let c = an.counters();
    assert!(c.numa_hint_faults > c.numa_hint_faults_local, "remote faults happened: {c:?}");
    assert_eq!(c.numa_pages_migrated, 0, "{c:?}");
    assert_eq!(m.0.mem(100), [512, 0]);
}
