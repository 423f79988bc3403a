//! The four process types of the NUMA article (shared/seeds/003), as workloads, and a mix of them.
//!
//! # Problem
//!
//! The article sorts processes by how they use memory, and gives each type its own placement
//! strategy:
//!
//! | type | character | the article's strategy |
//! |---|---|---|
//! | static large memory | allocates a big buffer once at start (a database buffer pool, a matrix), layout fixed, remote latency hurts | `numactl --membind` to one node (+ huge pages) |
//! | growing | memory grows while it runs (a JVM heap, a long-lived service), may spill to other nodes | `MPOL_PREFERRED` local, spilling to the nearest nodes |
//! | bandwidth-bound | streams through a large data set (AI training, fluid simulation), needs aggregate bandwidth | `--interleave=all`, or partition the data per node and bind each thread to its part |
//! | latency-sensitive | moderate memory, dependent accesses, needs deterministic response (trading, audio/video) | `--cpunodebind` + `--membind` to one node, memory pre-allocated |
//!
//! A placement policy should recognise each type from what it observes and do the right thing;
//! these workloads give the simulator one of each, and the mix puts them on one machine at once so
//! that one type's right placement competes with another's (the bandwidth hog beside the
//! latency-sensitive thread).
//!
//! # Approach
//!
//! ```text
//!   static-large   db ─ worker x node-cores ─ random ──▶ pool (60% of a node, touched by main at start)
//!   growing        jvm ─ mutator x node-cpus/2 ─ random 70% ──▶ young (256 MiB, hot)
//!                                             └ random 30% ──▶ heap (5% of a node, grows to 1.5 nodes)
//!   bandwidth      solver ─ worker x cpus ─ stream, per-thread slices ──▶ grid (25% of the machine,
//!                                                                          initialised by main)
//!   latency        trader ─ handler x 2 ─ random, duty 0.5 ──▶ book (256 MiB)
//!   process-mix    all four at once, each scaled down so they fit together (see `mix`)
//! ```
//!
//! Every type is open-ended (runs for `duration_s`), so a run reports throughput per process:
//! queries/s, allocations/s, bytes/s, events/s. The first-touch choices reproduce the situations
//! the article warns about: the buffer pool and the grid are initialised by one thread, so the
//! default policy piles them on one node; the heap grows past one node.
//!
//! # Constants and sources
//!
//! The article gives characters, not figures; the figures below are assumptions chosen to make each
//! type's character dominate its cost, documented here so they can be argued with:
//!
//! | type | per unit | why |
//! |---|---|---|
//! | static-large | 2 µs CPU + 8 random lines (B-tree descent) | a point query: a few µs of CPU, a handful of dependent misses |
//! | growing | 0.5 µs CPU + 4 random lines, 70% young / 30% old | generational heaps: most accesses hit recent allocations |
//! | bandwidth | 4 KiB streamed per unit, 20 ns CPU | a stencil/GEMM-like pass: bandwidth-bound by construction |
//! | latency | 1 µs CPU + 4 random lines, duty 0.5 | an event handler: mostly waiting, a few dependent misses per event |
//!
//! Heap growth: from 5% of a node to 150% of a node, reached at 80% of the run.
//!
//! # Units
//!
//! Bytes for sizes, ns of CPU per unit, s for times.
//!
//! # Limits
//!
//! Each type is one process with one thread group; real programs mix types inside one process.

use numapilot_topology::Topology;

use super::file::{Named, Shape};
use super::{
    Access, FirstTouch, Growth, MemPolicySpec, Pattern, ProcessSpec, RegionSpec, Slice, Spec, ThreadGroup, Work,
};

/// Simulated duration of every process-type workload, s.
pub const DURATION_S: f64 = 30.0;

/// Bytes of the latency-sensitive process's working set and of the growing process's young
/// generation (256 MiB: well beyond any LLC, so accesses reach memory).
const HOT_BYTES: u64 = 256 << 20;

fn access(region: &str, weight: f64, slice: Slice, pattern: Pattern, write: bool) -> Access {
    Access { region: region.into(), weight, slice, pattern, write }
}

fn region(name: &str, bytes: u64, touch: FirstTouch) -> RegionSpec {
    RegionSpec { name: name.into(), bytes: bytes.max(1), touch, policy: None, grow: None }
}

fn process(name: &str, regions: Vec<RegionSpec>, group: ThreadGroup) -> ProcessSpec {
    ProcessSpec {
        cpuset: None,
        name: name.into(),
        count: 1,
        start_s: 0.0,
        cpus: None,
        policy: MemPolicySpec::Local,
        regions,
        threads: vec![group],
        phases: vec![],
        launch_advice: false,
    }
}

fn work(unit: &str, lines: f64, compute_ns: f64, duty: f64) -> Work {
    Work { total: None, unit: unit.into(), bytes_per_unit: lines * 64.0, compute_ns, duty }
}

/// Static large memory: a database with a buffer pool of `pool_bytes` (allocated and touched by
/// the main thread at start) and `threads` workers doing point queries on it.
pub fn static_large_process(threads: u32, pool_bytes: u64) -> ProcessSpec {
    process(
        "db",
        vec![region("pool", pool_bytes, FirstTouch::Main)],
        ThreadGroup {
            name: "worker".into(),
            count: threads.max(1),
            cpus: None,
            work: work("queries", 8.0, 2000.0, 1.0),
            accesses: vec![access("pool", 1.0, Slice::Whole, Pattern::Random, false)],
        },
    )
}

/// Growing: a JVM-like process with `threads` mutators, a hot young generation and an old
/// generation growing from `initial_bytes` to `final_bytes` over `grow_s` seconds, allocated by the
/// threads that touch it.
pub fn growing_process(threads: u32, initial_bytes: u64, final_bytes: u64, grow_s: f64) -> ProcessSpec {
    let final_bytes = final_bytes.max(initial_bytes).max(1);
    let mut heap = region("heap", final_bytes, FirstTouch::Threads);
    heap.grow = Some(Growth {
        initial_bytes,
        bytes_per_s: ((final_bytes - initial_bytes) as f64 / grow_s.max(f64::MIN_POSITIVE)).round(),
    });
    process(
        "jvm",
        vec![region("young", HOT_BYTES, FirstTouch::Threads), heap],
        ThreadGroup {
            name: "mutator".into(),
            count: threads.max(1),
            cpus: None,
            work: work("allocations", 4.0, 500.0, 1.0),
            accesses: vec![
                access("young", 0.7, Slice::PerThread, Pattern::Random, true),
                access("heap", 0.3, Slice::Whole, Pattern::Random, false),
            ],
        },
    )
}

/// Bandwidth-bound: a solver whose `threads` workers stream through their slice of a grid of
/// `grid_bytes`, initialised by the main thread.
pub fn bandwidth_process(threads: u32, grid_bytes: u64) -> ProcessSpec {
    process(
        "solver",
        vec![region("grid", grid_bytes, FirstTouch::Main)],
        ThreadGroup {
            name: "worker".into(),
            count: threads.max(1),
            cpus: None,
            work: Work { total: None, unit: "bytes".into(), bytes_per_unit: 4096.0, compute_ns: 20.0, duty: 1.0 },
            accesses: vec![access("grid", 1.0, Slice::PerThread, Pattern::Stream, true)],
        },
    )
}

/// Latency-sensitive: `threads` event handlers, busy half the time, doing dependent lookups in a
/// 256 MiB order book.
pub fn latency_process(threads: u32) -> ProcessSpec {
    process(
        "trader",
        vec![region("book", HOT_BYTES, FirstTouch::Main)],
        ThreadGroup {
            name: "handler".into(),
            count: threads.max(1),
            cpus: None,
            work: work("events", 4.0, 1000.0, 0.5),
            accesses: vec![access("book", 1.0, Slice::Whole, Pattern::Random, false)],
        },
    )
}

fn spec(name: &str, description: String, processes: Vec<ProcessSpec>) -> Spec {
    Spec {
        name: name.into(),
        description,
        processes,
        duration_s: Some(DURATION_S),
        pacing: vec![],
        throughput_from: None,
        throughput_unit: None,
    }
}

/// Static large memory on `topo`: one worker per core of a node (so that binding it to one node
/// is possible without SMT siblings competing), a pool of 60% of a node.
pub fn static_large(topo: &Topology) -> Spec {
    let s = Shape::of(topo);
    spec(
        "static-large",
        format!("database: {} workers, buffer pool of 60% of a node touched at start; queries/s", s.node_cores),
        vec![static_large_process(s.node_cores, s.node_bytes / 10 * 6)],
    )
}

/// Growing on `topo`: half a node's CPUs, heap from 5% to 150% of a node by 80% of the run.
pub fn growing(topo: &Topology) -> Spec {
    let s = Shape::of(topo);
    let threads = (s.node_cpus / 2).max(1);
    spec(
        "growing",
        format!("JVM-like: {threads} mutators, heap growing from 5% to 150% of a node; allocations/s"),
        vec![growing_process(threads, s.node_bytes / 20, s.node_bytes / 2 * 3, DURATION_S * 0.8)],
    )
}

/// Bandwidth-bound on `topo`: one worker per CPU, a grid of 25% of the machine.
pub fn bandwidth(topo: &Topology) -> Spec {
    let s = Shape::of(topo);
    spec(
        "bandwidth",
        format!("solver: {} workers streaming through a grid of 25% of the machine; bytes/s", s.cpus),
        vec![bandwidth_process(s.cpus, s.mem_bytes / 4)],
    )
}

/// Latency-sensitive on `topo`: two handlers (one on a one-CPU node).
pub fn latency(topo: &Topology) -> Spec {
    let s = Shape::of(topo);
    let threads = s.node_cpus.min(2);
    spec(
        "latency",
        format!("event handler: {threads} threads at 50% duty, dependent lookups in 256 MiB; events/s"),
        vec![latency_process(threads)],
    )
}

/// All four types at once on `topo`, scaled so they fit together:
///
/// ```text
///   static-large  node-cpus/2 workers, pool 50% of a node
///   growing       node-cpus/4 mutators, heap 2% -> 50% of a node
///   bandwidth     cpus/4 workers, grid 25% of the machine
///   latency       2 handlers (1 on nodes of fewer than 4 CPUs)
/// ```
///
/// On the 2-node 24-CPU box: 6 + 3 + 6 + 2 = 17 threads; memory 6 + 6 + 6 GB + 256 MiB of 24 GB.
pub fn mix(topo: &Topology) -> Spec {
    let s = Shape::of(topo);
    let nb = s.node_bytes;
    spec(
        "process-mix",
        "the four process types of the NUMA article at once: database, growing heap, bandwidth solver, \
         latency-sensitive handler"
            .into(),
        vec![
            static_large_process((s.node_cpus / 2).max(1), nb / 2),
            growing_process((s.node_cpus / 4).max(1), nb / 50, nb / 2, DURATION_S * 0.8),
            bandwidth_process((s.cpus / 4).max(1), s.mem_bytes / 4),
            latency_process(if s.node_cpus < 4 { 1 } else { 2 }),
        ],
    )
}

/// The named workloads of this module: (name, one line, constructor).
pub fn catalog() -> Vec<Named> {
    vec![
        Named::new("static-large", "static large memory: buffer pool allocated at start, random queries", static_large),
        Named::new("growing", "growing memory: heap growing past one node, generational accesses", growing),
        Named::new(
            "bandwidth",
            "bandwidth-bound: all CPUs streaming through a grid initialised by one thread",
            bandwidth,
        ),
        Named::new("latency", "latency-sensitive: two handlers, dependent lookups, half duty", latency),
        Named::new("process-mix", "the four process types at once", mix),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_follow_the_machine() {
        let topo = Topology::preset("autonuma-2s12c-24g").unwrap();
        let s = Shape::of(&topo);
        assert_eq!((s.cpus, s.node_cpus, s.cpu_nodes.len()), (24, 12, 2));
        let db = static_large(&topo);
        assert_eq!(db.thread_count(), 6);
        assert_eq!(db.total_bytes(), s.node_bytes / 10 * 6);
        let jvm = growing(&topo);
        let g = jvm.processes[0].regions[1].grow.unwrap();
        assert_eq!(g.initial_bytes, s.node_bytes / 20);
        // Grows past one node: the point of the type.
        assert!(jvm.processes[0].regions[1].bytes > s.node_bytes);
        assert_eq!(bandwidth(&topo).thread_count(), 24);
        assert_eq!(latency(&topo).thread_count(), 2);
        let m = mix(&topo);
        assert_eq!(m.thread_count(), 6 + 3 + 6 + 2);
        assert!(m.total_bytes() < s.mem_bytes);
        for w in catalog() {
            (w.build)(&topo).validate().unwrap();
        }
    }
}
