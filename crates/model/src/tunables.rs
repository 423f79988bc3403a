//! Every heuristic constant of the model, the adaptive policy and the numad-like baseline, in one
//! place.
//!
//! Each field says its default, its unit (last in the name), where the value comes from
//! (arithmetic, a measurement, a paper, the kernel) and what it prevents. The policy crate re-exports
//! this struct as `numapilot_policy::Tunables`; it lives here because the model needs its half of
//! the numbers (decay, tiers, caps, hysteresis marks) and the policy depends on the model, not the
//! other way round.
//!
//! `Tunables::default()` is the shipped configuration; `validate()` rejects values that would make
//! the model meaningless (a zero half-life, tiers out of order, a low mark above its high mark),
//! naming the field, before anything runs.

use serde::{Deserialize, Serialize};

/// A tunable with a value outside its valid range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("tunable {field} = {value}: {reason}")]
pub struct TunableError {
    /// Field name, as in the config file.
    pub field: &'static str,
    /// The rejected value, as text.
    pub value: String,
    /// Why it is rejected.
    pub reason: String,
    /// The other fields the broken rule compares it with (a low mark's high mark, the tiers
    /// around a tier), so that a configuration that set one of those, and not `field`, can be told
    /// which of its own lines broke the rule. Empty for a rule on `field` alone.
    pub partners: &'static [&'static str],
}

/// All tunables. See the module essay; every field documents default, unit, source and what it
/// prevents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Tunables {
    // ---------------------------------------------------------------- cadence
    /// Period between two decisions of the adaptive policy (one observation, one model update, one
    /// plan), ms. Default 1000. Source: the kernel's `numa_balancing_scan_period_min_ms` (1000): no
    /// placement signal the kernel offers changes faster. Prevents: deciding on noise (shorter) and
    /// leaving a fresh mis-placement for many seconds (longer, as numad's 5-15 s does).
    pub interval_ms: u64,

    // ---------------------------------------------------------------- affinity (model::affinity)
    /// Half-life of an affinity edge, ms: `s = s / 2^(elapsed / half_life)` (NUMA-ICON slides).
    /// Default 10000. Source: the slides give the form, not the constant; 10 s is ten decision
    /// periods, long enough that one quiet period does not break a group, short enough that a
    /// relation that ended is gone within a minute. Prevents: groups held together by stale history
    /// (longer) and groups that flicker with every sampling gap (shorter).
    pub affinity_half_life_ms: u64,
    /// Half-life of the *rise* of an affinity edge towards a higher observed frequency, ms: when a
    /// period observes `f` above the (decayed) strength `s`, `s += (f - s) x (1 - 2^(-dt / rise))`;
    /// otherwise the edge only decays with `affinity_half_life_ms`. Default 1000 (one decision
    /// period). Source: judgement, in the form of an attack/release envelope follower (fast
    /// attack, slow release); the client/server evidence needs a pair grouped within the
    /// first seconds of a run, and with one rate for both a full-rate pair needed 3.2 s to reach
    /// `tier_medium` (0.32 x the 10 s half-life). With 1000: f = 1 reaches 0.5 in one 1 s period,
    /// f = 0.4 reaches `tier_medium` in one period, and 100 ms settle periods reach it in 0.33 s.
    /// Steady f still gives s -> f. Measured in the simulator (`numapilot sim --machine
    /// autonuma-2s12c-24g --workload redis-set --duration 3 --seeds 2`): 98.3k requests/s, 90%
    /// local (1.18 x default) at 1000, 79.3k, 25% local (0.95 x default) at 10000. Prevents: a real, intense relation waiting many periods to
    /// group (longer) and one period's burst jumping straight to full strength (0 would be a peak
    /// hold).
    pub affinity_rise_half_life_ms: u64,
    /// Two accesses to the same memory bucket by different threads within this window count as a
    /// co-access ("record the threads that recently touched the same page", NUMA-ICON), ms.
    /// Default 1000 (one decision period). Source: a choice, one period of the daemon's default
    /// interval, so co-access is judged over the same span as every other figure of a decision.
    /// Prevents: pairing threads that touched a buffer minutes apart (one after the other, not
    /// together).
    pub coaccess_window_ms: u64,
    /// Size of the memory bucket co-access is judged on, as a shift: 21 = 2 MiB. Default 21.
    /// Source: transparent huge page size; sampled addresses are sparse (one in thousands of
    /// accesses), so 4 KiB buckets would almost never see two threads. Prevents: missing real
    /// sharing for lack of samples; larger buckets would pair threads working on neighbouring
    /// slices (false sharing of the bucket).
    pub coaccess_bucket_shift: u32,
    /// Communication rate that counts as a full-strength relation (normalised frequency 1), events
    /// per second (wake-ups, or messages for socket pairs). Default 1000. Source: a request/reply
    /// loop at 1k req/s already spends most of its time in cross-thread cache misses when split
    /// across nodes (NUMA-ICON Redis: 78k req/s, +30% together). Prevents: a chatty pair never
    /// reaching a tier (higher) and an occasional ping grouping threads (lower).
    pub comm_full_events_per_s: f64,
    /// Normalised frequency a connected socket pair (`CommKind::Socket`) is observed at in every
    /// period the connection exists, whatever its `events`: the live source reports 1 per connected
    /// pair per cycle (the kernel keeps no message counts for unix sockets, `sock_diag` has none),
    /// which on the events-per-second scale (`comm_full_events_per_s`) is 0.001 and never reaches
    /// even the weak tier. A socket whose `events` are real message counts above this (the
    /// simulator's) keeps the rate scale. Default 0.4. Source: arithmetic on the rise rule: 0.4
    /// reaches `tier_medium` (0.2) in one 1 s period and settles at 0.94 x 0.4 = 0.376, inside the
    /// medium tier and below `tier_strong` (a connection says two processes talk, not how much).
    /// When the connection closes the edge decays with `affinity_half_life_ms` as any other.
    /// Prevents: client and server of a live connection never grouping (lower than about 0.22 at
    /// 1 s periods never reaches the join tier) and an idle connection counting as a strong tie
    /// (at or above `tier_strong`).
    pub comm_socket_strength: f64,
    /// Shared memory objects (`Sample.shared`: a file, SysV segment or memfd mapped by several
    /// processes) with more users than this are ignored for affinity. Default 8. Source:
    /// judgement: a working set shared by a pipeline or a server and its workers has a handful of
    /// users; objects mapped by dozens of processes are system-wide files (libc, locale archives,
    /// fonts, the dynamic loader's cache) that say nothing about who works with whom. Prevents:
    /// every process on the host joining one group through a shared library, and O(users^2) pairs
    /// per object.
    pub shared_max_users: u32,
    /// Strength of the weak prior between threads of one address space (normalised frequency).
    /// Default 0.1 (the weak tier). Source: sharing an address space is evidence of sharing data,
    /// but weak: numa02's threads share one but touch disjoint slices. Prevents: splitting a
    /// process with no finer signal into unrelated single threads.
    pub address_space_prior: f64,
    /// Lower bound of the weak tier (normalised frequency). Default 0.05. Source: arithmetic, one
    /// co-access in twenty samples. Prevents: noise counting as a relation.
    pub tier_weak: f64,
    /// Lower bound of the medium tier. Default 0.2 (one in five samples shared). Edges at medium or
    /// above join groups (`group_join_tier`). Source: the seed's weak / medium / strong tiers
    /// (NUMA-ICON, shared/seeds/000) give no numbers; 0.2 is our choice. Prevents: weak,
    /// incidental sharing merging groups.
    pub tier_medium: f64,
    /// Lower bound of the strong tier. Default 0.5 (half the samples shared). Source: arithmetic,
    /// a majority of the samples shared. Strongly tied tasks are moved last by the balancer.
    /// Prevents: the balancer separating tasks that mostly work on the same data.
    pub tier_strong: f64,
    /// An edge whose strength has decayed below this is "zero". Default 0.01 (must be > 0).
    /// Source: arithmetic, a fifth of the weak tier (~2.3 half-lives below it). Prevents: keeping
    /// an unbounded number of dead edges (memory grows with every pair ever seen).
    pub edge_zero: f64,
    /// An edge at "zero" is dropped after this grace period (NUMA-ICON: "delay XX before removing"),
    /// ms; also how long an internal edge of a group may stay below `group_keep_strength` before
    /// the group splits along it. Default 30000. Source: the slides' delay before removal; 30 s is
    /// three affinity half-lives. Prevents: a group splitting during a pause of a few seconds (a
    /// GC, a barrier) and re-forming right after, with moves both ways.
    pub edge_grace_ms: u64,
    /// Most recent accessors remembered per memory bucket for co-access. Default 16. Source: the
    /// co-access check pairs every accessor of a bucket with every other (quadratic in this number),
    /// and more than a handful of threads hammering one 2 MiB bucket within a window is already a
    /// shared hot spot that any pairing reveals. Prevents: one hot bucket (a global lock, a shared
    /// counter) costing O(threads^2) per period.
    pub coaccess_max_accessors: u32,
    /// Half-life of the smoothing of a thread's sampled access shares per node, ms. Default 2000
    /// (two decision periods). Source: access samples are sparse (a few per thread per period), so
    /// one period's shares are noisy; the kernel's NUMA fault statistics are decayed by half per scan
    /// period for the same reason (kernel/sched/fair.c `task_numa_placement`). Prevents: reacting to
    /// one period's sampling noise (shorter) and trailing a real migration for many periods
    /// (longer). Fault and residency shares are already slow and are used as they are.
    pub access_half_life_ms: u64,
    /// Sampled access shares of a thread stay valid this long after its last sample, ms. Default
    /// 30000. Source: the edge grace period (`edge_grace_ms`), so a thread's shares and its edges
    /// expire together. Prevents: a thread that paused (a barrier, a GC) falling back
    /// to the coarser residency estimate and back again, flipping its preferred node.
    pub access_stale_ms: u64,
    /// Bytes of memory traffic one access sample stands for (the PMU's sampling period x a cache
    /// line), for the bandwidth-bound classification. Default 640000 (one sample per 10 000 lines
    /// of 64 B). Source: `perf mem record` samples at 4000 Hz per CPU by default; a core streaming
    /// 2 GB/s touches ~31 M lines/s, so one sample per ~8 000 lines, and fixed periods used with
    /// `perf mem`/`perf c2c -c` are of the same order; the simulator emulates exactly 10 000
    /// (`sim::host::SAMPLE_PERIOD_LINES`). A sample source with another period sets this. It is
    /// the base period's: samples taken while the engine stretches the period
    /// (`Sample::access_period_scale`) count that many times more.
    /// Prevents: mistaking a sparsely sampled streaming process for a light one (too small) or
    /// a light one for a streamer (too large).
    pub access_sample_bytes: u64,

    // ---------------------------------------------------------------- groups (model::groups)
    /// Most tasks in one affinity group. Default 256. Source: the CPUs of the largest node among the
    /// presets (one socket of the 2 x 128-core EPYC with SMT); a group is meant to fit a node, and more
    /// tasks than a node has CPUs cannot all run there. Prevents: giant groups (NUMA-ICON: "avoid
    /// super-large affinity groups") and the quadratic cost of scoring them.
    pub group_max_tasks: u32,
    /// Lower (leave) mark of the join/split hysteresis of groups, normalised frequency. Edges join
    /// groups at `tier_medium` (the upper mark); an edge inside a group keeps it together while its
    /// strength is at or above this mark, and for `edge_grace_ms` after it fell below. Default 0.05
    /// (= `tier_weak`). Source: the same two-mark hysteresis the issue prescribes for bottleneck
    /// flags, with the weak tier as the low mark (a relation still "weak" is still a relation).
    /// Prevents: a pair whose strength hovers around `tier_medium` joining and splitting every
    /// period, each split handing out a new group id.
    pub group_keep_strength: f64,
    /// Most CPU demand of one group, as a fraction of a node's CPUs: a group must fit one node on
    /// CPU and memory at once (see `group_max_mem_frac`). Default 1.0. Source: a group that needs
    /// more CPUs than a node has cannot be local. Prevents: merging into a group no node can run.
    pub group_max_cpu_frac: f64,
    /// Most memory of one group, as a fraction of a node's memory (the same node whose CPUs hold
    /// it). Default 0.9. Source: the kernel keeps watermarks and page cache; 10% headroom.
    /// Prevents: merging into a group no node can hold.
    pub group_max_mem_frac: f64,
    /// Upper (leave) mark of the group size cap, as a fraction above it: a group that already
    /// exists is cut only when its CPU or memory exceeds the cap (`group_max_cpu_frac`,
    /// `group_max_mem_frac` of some node) by more than this share; a merge still needs the plain
    /// cap. Default 0.1 (10%), unit: fraction of the cap. Source: the same two-mark hysteresis the
    /// issue prescribes for bottleneck flags. Measured in the 4-node rig guest (race journal,
    /// numa02 with two spinning workers and a mostly idle main thread on a 2-CPU node): the
    /// process read just over 2 CPUs (2.01 at the end of the run), was cut into two runs by the
    /// cap, one worker was sent to another node and half the memory interleaved after it, and
    /// the next period the process was one group again. Prevents: a group whose demand hovers at a node's size being cut and
    /// re-merged period after period, each cut moving threads away from their memory.
    pub group_split_margin: f64,
    /// A process counts as placed by itself ("pinned") when VMAs with an explicit memory policy
    /// (bind, interleave, weighted interleave, preferred) hold at least this share of its resident
    /// memory. Default 0.5 (most of it). Source: `numactl --membind/--interleave` set the task policy,
    /// which numa_maps shows on every VMA without its own policy, so a process started that way
    /// reads ~1.0; a library `mbind`ing one buffer reads far less. Prevents: the daemon undoing a
    /// placement an administrator or the program chose.
    pub pinned_policy_share: f64,

    // ---------------------------------------------------------------- load and interference (model::load)
    /// CPU bottleneck: enter at this load (busy time / period, 0..1). Default 0.90. Source: numad's
    /// default target utilisation is 85% (`-u 85`); above 90% a node has no room for a group.
    /// Prevents: placing more work on a node that is already full.
    pub cpu_load_high: f64,
    /// CPU bottleneck: leave below this load. Default 0.75. Source: judgement, 15 points under the
    /// high mark (numad's 85% target sits between the two). Prevents: flapping around one mark.
    pub cpu_load_low: f64,
    /// CPU bottleneck: enter at this interference (run-queue wait time / period per CPU). Default
    /// 0.25 (a quarter of the time runnable but waiting). Source: judgement, not a measurement: a
    /// task waiting a quarter of its time runs at most 3/4 of its speed; PSI's "some" at 25% is
    /// already felt. Prevents: sending more work to a node whose runnable tasks already queue.
    pub cpu_interference_high: f64,
    /// CPU bottleneck: leave below this interference. Default 0.10. Source: judgement, well under
    /// the high mark so the wait must clearly drain. Prevents: flapping around one mark.
    pub cpu_interference_low: f64,
    /// Memory-capacity bottleneck: enter at this use (1 - (MemFree + reclaimable cache) /
    /// MemTotal). Default 0.95.
    /// Source: the kernel's low watermark sits a few percent from full; beyond it allocations fall
    /// back to other nodes (first touch is lost). Prevents: steering memory into a full node.
    pub mem_capacity_high: f64,
    /// Memory-capacity bottleneck: leave below this use; also the use from which system-wide PSI
    /// memory counts for a node. Default 0.85. Source: judgement, 10 points of headroom under the
    /// high mark (a node must free a tenth of itself to count as roomy). Prevents: flapping around
    /// one mark, and an empty node inheriting another node's memory pressure.
    pub mem_capacity_low: f64,
    /// Memory-capacity bottleneck: enter at this PSI memory `some` share (avg10 / 100: time some
    /// task stalled on reclaim, refaults or compaction). Default 0.20. Source: the kernel's PSI
    /// documentation treats double-digit `some` as a workload that is visibly slowed; PSI is
    /// system-wide, so it counts only on nodes at or above `mem_capacity_low`. Prevents: steering memory into a node set
    /// whose tasks already stall for memory while MemFree still looks fine (page cache).
    pub mem_pressure_high: f64,
    /// Memory-capacity bottleneck: leave below this PSI memory share. Default 0.05. Source:
    /// judgement, single-digit `some` (occasional reclaim) is normal. Prevents: flapping.
    pub mem_pressure_low: f64,
    /// Memory-bandwidth bottleneck: enter at this controller load (bytes / capacity). Default 0.85.
    /// Source: loaded-latency curves rise steeply beyond ~80-85% of peak bandwidth (Intel MLC).
    /// Prevents: sending more streams to a controller already near saturation, where each one adds
    /// latency to every access through it.
    pub mem_bw_load_high: f64,
    /// Memory-bandwidth bottleneck: leave below this load. Default 0.70. Source: the flat part of
    /// the same loaded-latency curves. Prevents: flapping around one mark.
    pub mem_bw_load_low: f64,
    /// Memory-bandwidth bottleneck: enter at this interference (saturated time / period). Default
    /// 0.20. Source: judgement, as `mem_pressure_high`: a fifth of the time at the controller's
    /// limit is visibly slow. Prevents: steering memory onto a saturated controller.
    pub mem_bw_interference_high: f64,
    /// Memory-bandwidth bottleneck: leave below this interference. Default 0.05. Source:
    /// judgement. Prevents: flapping around one mark.
    pub mem_bw_interference_low: f64,
    /// IO bottleneck: enter at this PSI io `some` share (avg10 / 100). Default 0.20. Source: as
    /// `mem_pressure_high` (PSI documentation: double-digit `some` visibly slows a workload).
    /// Prevents: placing IO-heavy work next to devices whose users already stall.
    pub io_pressure_high: f64,
    /// IO bottleneck: leave below this share. Default 0.05. Source: judgement. Prevents: flapping.
    pub io_pressure_low: f64,

    // ---------------------------------------------------------------- classes (model::classify)
    /// A process is "large" from this RSS, as a fraction of the smallest node's memory. Default
    /// 0.25. Source: the NUMA article's static large-memory type (a buffer pool, a matrix) is sized
    /// in node fractions. Prevents: binding small processes whose placement hardly matters.
    pub large_rss_node_frac: f64,
    /// A process is "growing" above this RSS growth, MiB per s, sustained over `class_window_ms`.
    /// Default 8. Source: a JVM heap or cache filling a 64 GiB node in ~2 h; steady services grow
    /// less. Prevents: binding a process that will outgrow its node.
    pub growing_mib_per_s: f64,
    /// A process is "static" below this growth, MiB per s. Default 1. Source: judgement, an eighth
    /// of `growing_mib_per_s` (a 64 GiB node would take 18 h to fill). Prevents: binding a process
    /// to a node set it is still growing out of.
    pub static_mib_per_s: f64,
    /// Window over which growth and bandwidth are judged for classification, ms (and the half-life
    /// of the traffic average). Default 10000. Source: ten decision periods, as the affinity
    /// half-life. Prevents: reclassifying on one period's allocation burst.
    pub class_window_ms: u64,
    /// A process is bandwidth-bound when its threads run on at least this many nodes and its
    /// accesses per second per thread (estimated from samples or controller load) exceed
    /// `bandwidth_bound_mib_per_s_per_thread`. Default 2 nodes. Source: arithmetic, interleaving
    /// needs at least two nodes to spread over. Prevents: interleaving a process confined to one
    /// node.
    pub bandwidth_bound_min_nodes: u32,
    /// See `bandwidth_bound_min_nodes`, MiB/s of memory traffic per thread. Default 1000. Source:
    /// one core streaming reaches 5-15 GB/s; latency-bound code stays far below 1 GB/s. Prevents:
    /// interleaving a latency-bound process (which loses its local accesses for no bandwidth gain).
    pub bandwidth_bound_mib_per_s_per_thread: f64,

    // ---------------------------------------------------------------- decisions (policy::adaptive)
    /// Nodes are out of balance when the busiest node's CPU load exceeds the idlest's by this much
    /// (absolute, 0..1). Default 0.25. Source: the kernel's `imbalance_pct` of 125 between domains
    /// (a 25% difference). Prevents: moving tasks for small differences the scheduler evens out.
    /// The same share of a node's capacity, in CPUs, is the least change of a balanced task's load
    /// that lifts its hold (hold-change-floor): less, and a light thread that waits no more where
    /// it went came back at once.
    pub imbalance: f64,
    /// Work a thread loses per unit of its access share that is remote, as a fraction of its CPU:
    /// the price the balancer puts on moving a task away from the node holding its accesses. A
    /// task is moved off its preferred node (an overloaded CPU bottleneck) only when the overload
    /// the move relieves, CPUs, is at least its CPU x its access share there x this; and a unit is
    /// placed on a node it overloads by at most its CPU x its access share there x this
    /// (locality-pays-for-overload, so placement and balancing agree; a part the group cap cut
    /// off a process known by residency alone counts the CPU of its process's threads kept on its
    /// memory's node too, split-weighs-follow-on). Default 0.3.
    /// Source: the NUMA-ICON slides (shared/seeds/000: a cross-node access costs 30% or more over a
    /// local one). Prevents: trading a worker's locality for a sliver of CPU (the rig's 4-node race
    /// moved a 0.99-CPU numa01 worker off its memory to relieve a 2-CPU node loaded 2.1, and its
    /// group followed it to another node and its 37 MiB were copied twice; a numa02 of 2.2 CPUs
    /// kept off the 2-CPU node holding its memory, and its 69 MiB copied to it instead; a worker
    /// cut off its numa01 process on its memory's node sent away for 0.38 CPUs over, its
    /// process and 32 MiB following it).
    pub remote_access_cost: f64,
    /// A group is worth managing from this CPU demand (CPUs). Default 0.1. Source: a choice, a tenth
    /// of a CPU, below which remote accesses cost too little time to repay a move. Prevents: moving
    /// idle daemons for nothing.
    pub min_group_cpu: f64,
    /// Below this RSS, MiB, a process's memory follows it wholesale: its remote share counts its
    /// resident memory off its nodes, not only its own sampled accesses (and without samples it
    /// is neither interleaved nor split). Default 64. Source: a few huge pages; moving them costs
    /// milliseconds, and a small process's memory is often someone else's hot data (a client's
    /// socket buffers read by a server: in the simulator's redis-get the clients' own samples are
    /// 95% local while the server's are 83% remote on their 2 MiB). Prevents: leaving small
    /// shared buffers behind, and interleaving memory too small to matter.
    pub min_process_rss_mib: u64,
    /// Memory follows CPU when at least this share of a group's accessed memory is remote. Default
    /// 0.25. Source: a choice; at the seed's 30% remote penalty (shared/seeds/000) a quarter of the
    /// accesses remote costs ~7.5% of the group's memory time, worth a move. Prevents: migrating
    /// for a few remote pages (cost > gain). The same mark makes a node holding all but this share
    /// of a unit's accesses its home, which needs no free memory for it (placement rule
    /// home-needs-no-room): it prevents a unit being refused the node its working set is on for
    /// memory it would not bring.
    pub remote_share_min: f64,
    /// A process whose threads run on several node sets is treated as sharing one buffer when at
    /// least this share of its threads' hot-range samples fall in ranges sampled from two or more
    /// of those node sets (0..1); its memory is then interleaved over exactly those nodes, weighted
    /// by its CPU there, once (then held), instead of range by range. Default 0.5. Source: numa01
    /// (every thread of a process spanning 2+ nodes touches the whole 3 GiB buffer) against
    /// numa01_THREAD_ALLOC and numa02 (each thread its own slice: ranges sampled from one set).
    /// Prevents: chasing a shared buffer's ranges towards whichever node sampled them last
    /// (churn: more pages migrated than AutoNUMA, slower than it on 4 and 8 nodes).
    pub shared_range_share_min: f64,
    /// A held shared-buffer spread (see `shared_range_share_min`) counts as done once the process's
    /// memory is within this share of the spread's weights (total-variation distance, 0..1); until
    /// then each decision continues it (same nodes and weights, under the migration budget).
    /// Default 0.05. Source: the budget moves 400 MiB per 100 ms decision, so numa01's 3 GiB
    /// needs several; 5% is a few 2 MiB regions per GiB of rounding. Prevents: a spread left a
    /// quarter done when its first budget-limited step brought it under `remote_share_min`, and
    /// (the floor) an endless trickle of moves for rounding.
    pub spread_done_share: f64,
    /// Page-migration budget, MiB per second of wall time, over all nodes. Default 4096. Source: a
    /// node's worth of a process's working set (numa01's 3 GiB) must follow its threads within about
    /// one decision period, as a hard binding would have placed it from the start; a socket copies
    /// 10+ GB/s, so 4 GiB/s of migration stays well under half of it. The kernel's NUMA balancing
    /// limit (`ratelimit_pages`, 128 MiB per 100 ms = 1280 MiB/s, mm/migrate.c 3.8-5.x) converges
    /// numa01 in ~2.5 s instead (measured in the simulator: numa01 quick 4.17 s at 1280, 3.84 s at
    /// 4096, no gain beyond). Prevents: migration storms that steal the bandwidth they are meant to
    /// save (the cap), and a remote working set lingering for seconds (the size).
    pub migrate_budget_mib_per_s: u64,
    /// Page-migration allowance of each process younger than `new_process_age_ms`, for its OWN
    /// memory, on top of the shared `migrate_budget_mib_per_s`, MiB per second of wall time (0:
    /// off). Default 32768. Source: a young process's memory was just first-touched, mostly by one
    /// thread (numa02's main thread writes the whole 1 GiB on one node), and every period it
    /// stays there costs its threads remote accesses; its working set has no history of moving, so
    /// the ping-pong the steady budget guards against cannot have started. A thread with even one
    /// remote region runs at the remote speed (numa02 streams its slice: 1 of 4 regions on a far
    /// node makes a pass ~8x slower), so the job ends when its LAST slice arrives: 1 GiB must move
    /// within the first ~30 ms decision that knows its ranges. Measured in the simulator,
    /// numaconnect-288c numa02 / numa02_SMT (hard-bind 1.99 / 2.33 s) with
    /// `first_touch_interval_ms` 30: 2.07 / 2.46 s at 16384, 2.07 / 2.45 s at 32768. The
    /// allowance is per process, never machine-wide: a machine-wide startup rate (the previous
    /// form of this field) also sped up older processes' moves while anything was young (more
    /// pages than AutoNUMA on numa01_THREAD_ALLOC on 4, 8 and 36 nodes, the VM mix 0.98 -> 0.89 x
    /// default). The simulator charges the copy to the process's own threads (as the kernel's
    /// per-thread NUMA-balancing migrations are); a live daemon copying 32 GiB/s through
    /// `move_pages(2)` would need one copying context per ~2 GB/s. Only a process whose threads
    /// work on slices of their own gets it (rule "young-allowance-slices": a thread's sampled
    /// ranges within twice the memory per thread): a shared buffer's first samples cannot yet tell
    /// sharing from private use (numa01 on 36 nodes moved 2.11 M pages with the allowance, 1.81 M
    /// for AutoNUMA). Prevents: the first second of a short parallel job running remote while its
    /// memory trickles over at the steady rate.
    pub young_migrate_budget_mib_per_s: u64,
    /// Share of a process's resident memory that must be cold for the cold-memory rule to apply
    /// (0..=1; 1 turns the rule off): cold = 1 - accessed / RSS, the accessed memory estimated
    /// from its sampled hot buckets by Chao's estimator (policy `adaptive/cold.rs`), once it has
    /// been watched for one `access_half_life_ms`. Then its units are sized by the memory its
    /// threads access, its cold memory stays where it lies (only hot ranges move), and the
    /// static-large and bandwidth-bound classes, read from the whole RSS, do not apply. Default
    /// 0.3. Source: measured in the simulator (seed 1, 3-20 s): the VM mix's VMs (shared/seeds/004:
    /// guest RAM first-touched by QEMU at arrival, working sets 10-50%) read 43-88% cold, the
    /// process mix's database, heap, solver and trader 0%; 0.3 keeps a margin below the least cold
    /// VM (a rabbit at 50% working set, estimated 43% cold at 3 s). Prevents: vCPUs moved off the
    /// node of their working set for want of room for idle memory, idle memory pulling threads
    /// towards it (CPU follows memory) and whole-RSS bindings that copy hundreds of GiB of idle
    /// memory into full nodes.
    pub cold_memory_share_min: f64,
    /// CPU follows memory when a group has at least this much memory, MiB ... Default 1024. Source:
    /// AutoNUMA's CPU-follows-memory (shared/seeds/001) for large working sets; 1 GiB copies in
    /// ~0.5 s at the 2 µs per page of `migrate_cost_ns_per_page`, far more than moving threads.
    /// Prevents: moving small groups' threads away from their CPU-side placement for memory that
    /// is cheap to move instead.
    pub cpu_follows_memory_min_mib: u64,
    /// ... and at least this share of it on one node. Default 0.8. Source: a choice, "mostly on one
    /// node" of the issue in numbers. Prevents: moving gigabytes to
    /// follow a task when moving the task is cheaper.
    pub cpu_follows_memory_share: f64,
    /// A standing order for a young process's new threads (rule new-threads-follow-memory) names
    /// the node holding more than this share of its resident memory, fraction. Default 0.5 (a
    /// majority). Source: the rig's 4-node numa02 (`scripts/race.sh --guests 4node --tests numa02
    /// --balancers numapilot`, 2026-11-29), seen mid-touch with 16 of its 21 MiB on node 0 (76%):
    /// the rest is its binary's and libraries' pages, resident at full size before its data is;
    /// at `cpu_follows_memory_share`'s 0.8 that repetition got no order and its workers started
    /// on nodes 1 and 3. The order only says where threads start until the next decision, which
    /// moves them on evidence. Prevents: an order towards a node holding no more of its memory than
    /// the other nodes together.
    pub new_threads_memory_share: f64,
    /// Benefit horizon of the cost/benefit check, s: a move must pay for itself (remote accesses
    /// avoided x remote penalty, over this horizon) more than its copy costs. Default 10. Source:
    /// numad's longest interval (15 s, numad(8)) rounded down: a placement is expected to last at
    /// least that long. Prevents:
    /// migrating memory a process is about to free or stop touching.
    pub benefit_horizon_s: f64,
    /// After a group or page set moves, it does not move back within this many periods unless its
    /// load changed by more than `hold_load_change`. Default 10 (decisions, not seconds: 10 s at
    /// the default interval, 1 s while the settle cadence runs). Source: a choice, the benefit
    /// horizon's length at the default interval. Prevents: ping-pong.
    pub hold_periods: u32,
    /// Most decisions a process whose actions the host keeps refusing waits before it is planned
    /// again (rule refusal-backs-off: after n refusals in a row it waits min(2^(n-1), this)
    /// decisions; one applied action ends it). Default 32. Source: a choice: a first refusal
    /// (a read that failed once) is tried again at the next decision as before, a lasting one (a
    /// security module denying the move, a process that can never be moved) about twice a minute
    /// at the default interval instead of every second. Prevents: a refusal that never passes
    /// planned and journaled every decision (86,000 journal lines a day for one such process,
    /// pushing the real history out of the journal) and keeping the loop from backing off.
    pub refused_backoff_max_decisions: u32,
    /// A page move of a process that moved less than this share of the pages it asked for counts
    /// as futile (rule futile-move-backs-off): the same move of the process (same kind, to the
    /// same nodes) is not asked again until its own memory by node changes by more than
    /// `futile_move_memory_change`, its threads are placed elsewhere (a move to other nodes), or a
    /// back-off ends (after n futile moves in a row, min(2^n - 1,
    /// `futile_backoff_max_decisions`) decisions). Fraction, 0..=1 (0: off). Default 0.1. Source:
    /// a choice. The case it was made for moves nothing at all: a child forked without exec that
    /// never wrote the heap it inherited counts that heap as its own (numa_maps shows it
    /// anonymous), and the kernel moves no page another process maps too without
    /// `MPOL_MF_MOVE_ALL`; pages pinned or locked, or a full destination, give the same. A move
    /// cut by the host's own budget moves most of what the host let it (the host's allowance
    /// counts as the ask when it says it: `Outcome::Started`). Prevents: the same move asked,
    /// applied and journaled at every decision while the memory stays where it is.
    pub futile_move_share: f64,
    /// A futile move (see `futile_move_share`) is asked again at once when the process's own
    /// memory by node has changed by more than this share of it since the first decision after
    /// the move (the larger of the bytes that came and the bytes that went, over all nodes).
    /// Fraction, 0..=1. Default 0.05. Source: a choice, above the few pages an idle process's
    /// numa_maps differ by from one read to the next, below a tenth of its memory. Prevents: a
    /// process whose memory became movable (new memory of its own away from its threads) waiting
    /// out the whole back-off, and a process that allocates a little each decision asking again
    /// each time.
    pub futile_move_memory_change: f64,
    /// Most decisions a futile move waits before it is asked again (rule futile-move-backs-off:
    /// after n futile moves in a row, min(2^n - 1, this); one move that moves enough ends it).
    /// Decisions, >= 1. Default 32. Source: as `refused_backoff_max_decisions`, a move that never
    /// moves anything is asked about twice a minute at the default interval. Prevents: the
    /// futile move journaled every decision for as long as the process lives.
    pub futile_backoff_max_decisions: u32,
    /// Relative change of a group's load that lifts the hold early (when the change is also more
    /// than `min_group_cpu` in CPUs, a light thread's swing being its wake-ups, and, for a task
    /// the balancer moved, more than `imbalance` x the capacity of the node it went to, the
    /// balancer's own tolerance: rule hold-change-floor). Default 0.5 (50%). Source: a choice, a phase change rather than noise
    /// (per-period CPU rates wander by 10-20% on a busy host). Prevents: a group that changed its
    /// nature staying held where the old load put it.
    pub hold_load_change: f64,
    /// A process first seen younger than this is placed by the fork rule (spread over nodes,
    /// least loaded first), ms. Default 2000. Source: two periods of the default interval, so a
    /// process is new for the decision after the one that first saw it. Prevents: a long-running
    /// process seen for the first time (daemon start) being re-placed as if it had just forked.
    pub new_process_age_ms: u64,
    /// A new process counts as one (for the fork rule, and for holding the decisions at
    /// `settle_interval_ms`) only when it has several threads, holds at least this much resident
    /// memory, or runs busy (CPU demand >= `min_group_cpu`), MiB. Default 16. Source: the daemon's cycle measured on a
    /// build machine (crates/daemon/examples/cycle_cost.rs --daemon-seconds 60): short-lived
    /// `bash`, `grep` and `cargo` processes, each a few MiB, kept the loop at the 100 ms settle
    /// cadence for 39 of 52 steps (4.5% of a core instead of the back-off's ~1%), and every one of
    /// them would be placed (a state-file write per process); numad ignores processes under 300 MB
    /// altogether. A single-threaded small process still qualifies once it runs busy.
    /// Prevents: process churn (shells, cron, monitoring probes) holding the daemon at 10 steps a
    /// second and filling the state file with processes gone a moment later.
    pub new_process_min_rss_mib: u64,
    /// Decision period of the adaptive policy while any process is younger than
    /// `new_process_age_ms`, ms (`interval_ms` otherwise). Default 100. Source: a new process
    /// places its memory by first touch within its first few hundred ms (numa02's main thread
    /// touches its 1 GiB in ~0.2 s) and short runs are over in seconds, so a 1 s cadence reacts
    /// only after the damage; 100 ms still spans 10 clock ticks (USER_HZ 100), enough for a rate.
    /// Prevents: a second of wrong placement for every new process (longer) and rates too coarse
    /// to plan with (shorter).
    pub settle_interval_ms: u64,
    /// Decision period right after a plan that saw a new process or moved the memory of a young one
    /// (younger than `new_process_age_ms`, first seen within `first_touch_window_ms`, threads on
    /// slices of their own), ms: its first-touched memory is following its threads (rule
    /// "first-touch-cadence"). Default 30. Source: numa02's threads start all on remote
    /// memory and run ~28x slower there, so they emit few access samples (one per 10,000 lines)
    /// and each decision finds only part of their ranges; the job ends when the last thread's
    /// last range arrives. Measured in the simulator, numaconnect-288c numa02 / numa02_SMT (hard
    /// bind 1.99 / 2.33 s): 2.07 / 2.45 s at 30 ms, 2.09 / 2.47 s at 50 (numa02 2.14 s at 100)
    /// (with the young allowance). 30 ms is 3 clock ticks, coarse for a /proc/stat rate, so it
    /// is only used while such memory moves: the next plan that moves none returns to
    /// `settle_interval_ms`. Must be in 1..=`settle_interval_ms`. Prevents: a young process's
    /// last slices waiting a whole settle period (100 ms, 5% of a 2 s job) for the next look.
    pub first_touch_interval_ms: u64,
    /// The first-touch cadence (`first_touch_interval_ms`) follows a process's memory moves only
    /// while it was first seen less than this long ago, ms. Default 100. Source: numa02's slices
    /// are all found within ~100 ms of its first sight (three 30 ms looks: 0.04, 0.07, 0.10 s on
    /// 36 nodes), while a buffer shared by all threads (numa01) needs ~150-200 ms of samples
    /// before the sharing shows; until then each look moves its ranges to whichever node sampled
    /// them. Measured in the simulator, article-4n96 numa01 (3 seeds, before the shared spread
    /// started at `spread_done_share`): 26.6 s at 90 ms, 32.6 s at 150, 30.3 +- 6.3 s at 60;
    /// with that fix 26.6-26.7 s at any window, 1.63 M pages at 100 ms, 1.70 M unbounded.
    /// Must be > 0. Prevents: a shared buffer split by sampling accident over many fast looks,
    /// and pages moved for it.
    pub first_touch_window_ms: u64,
    /// Share of a node's CPUs the adaptive plan fills with the groups it places: a node's capacity
    /// is `CPUs x node_cpu_target` CPUs of demand (0 < target <= 2). Default 1.0. Source: a group
    /// of as many busy threads as the node has CPUs (numa01's nr_cpus/2 threads on a 2-node
    /// machine) must count as fitting the node, or it would be spread and lose locality; numad's
    /// 85% (`-u 85`) keeps headroom for unmanaged work, which the plan already subtracts as fixed
    /// demand. Prevents: over-committing a node (above 1) beyond what its CPUs can run.
    pub node_cpu_target: f64,
    /// Count a node's capacity in cores (one per physical core) while the machine's whole CPU
    /// demand fits in its cores; beyond that, its cores times the machine's demand per core, at
    /// most its CPUs (every SMT sibling), so every node takes the same share of the SMT sharing
    /// (rule "smt-shared-evenly"). Default true. Source: SMT siblings share a core's pipelines and
    /// caches; in the simulator numa02_SMT's 12 threads packed on one node's 6 cores x 2 took
    /// 1.76 x hard-bind's time (which spreads them one per core). Counting every CPU as soon as
    /// the demand passed the cores (the previous form) let the process mix on
    /// autonuma-2s12c-24g (17 busy threads, 12 cores) put 11 threads on one node's 6 cores beside
    /// 6 on the other's in some seeds and 7 beside 10 in others, and its latency-bound trader ran
    /// 1.22-1.53 x default by seed (stddev/mean across seeds 7.45%); at 8.5 per node 1.04-1.06 x
    /// (4.64% with shared-pool-waits, 3 seeds). Prevents: packing a process onto half the
    /// machine's cores while the other half idles, and one node's siblings all shared while the
    /// other node has a core per thread; false (capacity always in CPUs) suits machines without
    /// SMT or pinned-SMT setups.
    pub smt_cores_first: bool,
    /// Access-share margin within which the node a group already runs on counts "as good" as the
    /// best node, so the group stays and its memory follows (0..1). Default 0.1. Source: the
    /// access shares are smoothed estimates from sparse samples; differences of a few percent are
    /// noise. Prevents: moving threads between two nodes that hold near-equal shares of the
    /// group's memory, back and forth with the estimate.
    pub stay_margin: f64,
    /// CPU cost of migrating one base page (4 KiB), ns, for the cost/benefit check. Default 2000.
    /// Source: `migrate_pages(2)` copies roughly 1.5-2.5 GB/s per thread on current x86 servers
    /// (page copy plus unmap/remap and TLB shootdown), about 2 us per 4 KiB page. Prevents:
    /// copying memory whose remote accesses cost less than the copy over the benefit horizon.
    pub migrate_cost_ns_per_page: u64,
    /// Cost of moving one thread to another node, ns: its caches refill from the new node (a few
    /// MiB of L2/L3 working set at ~10-20 GB/s is 0.1-0.5 ms; 0.5 ms is the upper end). Default
    /// 500,000. Source: that estimate; compared with the copy cost of a group's remote pages
    /// (`migrate_cost_ns_per_page` each): 3 threads cost 1.5 ms, 76 MiB of pages ~39 ms. Prevents:
    /// migrating a process's memory to where the scheduler happened to run its threads when the
    /// node holding the memory has room for them (the rig's numa02: 16k pages copied instead of 2
    /// threads moved).
    pub cpu_move_cost_ns_per_task: u64,
    /// CPU demand assumed per thread of a new process, whose rate the first sample cannot tell
    /// (rates need two samples), CPUs. Default 1.0. Source: the worst case (every thread busy);
    /// fork-time placement must not put a 12-thread process on a node that can only run 4 of them.
    /// Prevents: packing several new multi-threaded processes onto one node.
    pub new_thread_cpu: f64,
    /// Past actions kept per process for `explain`, count. Default 16. Source: a choice (a screen of
    /// history). Prevents: the history of a
    /// long-lived process growing without bound.
    pub explain_actions_kept: u32,

    // ---------------------------------------------------------------- numad-like baseline (policy::numad)
    /// numad: shortest interval between passes, s. Default 5 (source: numad `-i 5:15`'s minimum).
    /// Prevents: passes closer than numad's own, which would make the baseline faster than numad.
    pub numad_interval_min_s: u64,
    /// numad: longest interval, used while nothing needs moving, s. Default 15 (source: numad's
    /// default maximum). Prevents: a quiet machine being scanned at the busy rate.
    pub numad_interval_max_s: u64,
    /// numad: processes below this RSS are ignored, MiB. Default 300 (source: numad's
    /// MEMORY_THRESHOLD). Prevents: binding small processes whose placement hardly matters.
    pub numad_min_rss_mib: u64,
    /// numad: processes below this CPU use are ignored, % of one CPU. Default 50 (source: numad's
    /// CPU_THRESHOLD). Prevents: binding idle processes.
    pub numad_min_cpu_pct: u32,
    /// numad: target utilisation of a node's CPUs and memory, %. Default 85 (source: numad
    /// `-u 85`). Prevents: filling a node to the last CPU and page, leaving no headroom.
    pub numad_target_utilization_pct: u32,
    /// numad: a process already bound to the nodes numad would pick is left alone while at least
    /// this share of its memory is on them, %. Default 90 (numad's DEFAULT_MEMLOCALITY_PERCENT,
    /// `-m 90`). Prevents: re-binding (and re-migrating) a process that is already in place.
    pub numad_memlocality_pct: u32,
    /// numad: a process bound less than this long ago is not evaluated again, s. Default 300
    /// (numad's MIN_DELAY_FOR_REEVALUATION, five minutes). Prevents: moving the same process back
    /// and forth between passes.
    pub numad_reevaluate_s: u64,
    /// numad: share of a CPU an SMT sibling beyond a core's first thread counts for in a node's
    /// CPU capacity, %. Default 20 (numad `-t`, DEFAULT_HTT_PERCENT 20 in numad.c / numad(8)):
    /// a node of 6 cores x SMT2 counts 6 x 100% + 6 x 20% = 7.2 CPUs, and its free CPU is reduced
    /// by the siblings' discounted 80%. Prevents: counting hyperthreads as full cores, which makes
    /// a node look big enough for a process that really needs two (numad packs it onto one).
    pub numad_htt_pct: u32,
}

/// Longest numad interval accepted by `validate`, s (one day). Prevents: an interval whose ns
/// figure overflows u64 arithmetic; numad itself takes `-i` as an int of seconds.
const NUMAD_INTERVAL_MAX_S: u64 = 86_400;

/// Largest value of any `_ms` duration tunable, ms: one day (as `numad_interval_max_s`).
/// Prevents: a duration whose ns product overflows (worked in ns throughout).
const MAX_DURATION_MS: u64 = 86_400_000;

impl Default for Tunables {
    fn default() -> Self {
        Self {
            interval_ms: 1000,
            affinity_half_life_ms: 10_000,
            coaccess_window_ms: 1000,
            coaccess_bucket_shift: 21,
            comm_full_events_per_s: 1000.0,
            comm_socket_strength: 0.4,
            shared_max_users: 8,
            address_space_prior: 0.1,
            tier_weak: 0.05,
            tier_medium: 0.2,
            tier_strong: 0.5,
            edge_zero: 0.01,
            edge_grace_ms: 30_000,
            affinity_rise_half_life_ms: 1_000,
            group_keep_strength: 0.05,
            coaccess_max_accessors: 16,
            access_half_life_ms: 2000,
            access_stale_ms: 30_000,
            access_sample_bytes: 640_000,
            group_max_tasks: 256,
            group_max_cpu_frac: 1.0,
            group_max_mem_frac: 0.9,
            group_split_margin: 0.1,
            pinned_policy_share: 0.5,
            cpu_load_high: 0.90,
            cpu_load_low: 0.75,
            cpu_interference_high: 0.25,
            cpu_interference_low: 0.10,
            mem_capacity_high: 0.95,
            mem_capacity_low: 0.85,
            mem_pressure_high: 0.20,
            mem_pressure_low: 0.05,
            mem_bw_load_high: 0.85,
            mem_bw_load_low: 0.70,
            mem_bw_interference_high: 0.20,
            mem_bw_interference_low: 0.05,
            io_pressure_high: 0.20,
            io_pressure_low: 0.05,
            large_rss_node_frac: 0.25,
            growing_mib_per_s: 8.0,
            static_mib_per_s: 1.0,
            class_window_ms: 10_000,
            bandwidth_bound_min_nodes: 2,
            bandwidth_bound_mib_per_s_per_thread: 1000.0,
            imbalance: 0.25,
            remote_access_cost: 0.3,
            min_group_cpu: 0.1,
            min_process_rss_mib: 64,
            remote_share_min: 0.25,
            shared_range_share_min: 0.5,
            spread_done_share: 0.05,
            migrate_budget_mib_per_s: 4096,
            young_migrate_budget_mib_per_s: 32768,
            cold_memory_share_min: 0.3,
            cpu_follows_memory_min_mib: 1024,
            cpu_follows_memory_share: 0.8,
            new_threads_memory_share: 0.5,
            benefit_horizon_s: 10.0,
            hold_periods: 10,
            refused_backoff_max_decisions: 32,
            futile_move_share: 0.1,
            futile_move_memory_change: 0.05,
            futile_backoff_max_decisions: 32,
            hold_load_change: 0.5,
            new_process_age_ms: 2000,
            new_process_min_rss_mib: 16,
            settle_interval_ms: 100,
            first_touch_interval_ms: 30,
            first_touch_window_ms: 100,
            node_cpu_target: 1.0,
            smt_cores_first: true,
            stay_margin: 0.1,
            migrate_cost_ns_per_page: 2000,
            cpu_move_cost_ns_per_task: 500_000,
            new_thread_cpu: 1.0,
            explain_actions_kept: 16,
            numad_interval_min_s: 5,
            numad_interval_max_s: 15,
            numad_min_rss_mib: 300,
            numad_min_cpu_pct: 50,
            numad_target_utilization_pct: 85,
            numad_memlocality_pct: 90,
            numad_reevaluate_s: 300,
            numad_htt_pct: 20,
        }
    }
}

impl Tunables {
    /// Checks every field's range and the order of paired marks; the first bad field is the error.
    pub fn validate(&self) -> Result<(), TunableError> {
        // Debug, not Display: a float shows as it was written ("1e300"), not as 301 digits.
        fn err(field: &'static str, value: impl std::fmt::Debug, reason: &str) -> Result<(), TunableError> {
            Err(TunableError { field, value: format!("{value:?}"), reason: reason.to_string(), partners: &[] })
        }
        // A rule between `field` and `partners`.
        fn err_with(
            field: &'static str,
            partners: &'static [&'static str],
            value: impl std::fmt::Debug,
            reason: &str,
        ) -> Result<(), TunableError> {
            Err(TunableError { field, value: format!("{value:?}"), reason: reason.to_string(), partners })
        }
        // Durations: (field, value, whether 0 is refused). They are worked in ns (x 1e6): past a day
        // none is a placement setting any more, and far past it the product overflows (a daemon
        // given interval_ms 1e14 panicked on it). The others' lower bounds are checked below.
        let durations_ms = [
            ("interval_ms", self.interval_ms, true),
            ("affinity_half_life_ms", self.affinity_half_life_ms, true),
            ("affinity_rise_half_life_ms", self.affinity_rise_half_life_ms, true),
            ("coaccess_window_ms", self.coaccess_window_ms, true),
            ("class_window_ms", self.class_window_ms, true),
            ("access_half_life_ms", self.access_half_life_ms, true),
            ("access_stale_ms", self.access_stale_ms, true),
            ("edge_grace_ms", self.edge_grace_ms, false),
            ("new_process_age_ms", self.new_process_age_ms, false),
            ("settle_interval_ms", self.settle_interval_ms, false),
            ("first_touch_interval_ms", self.first_touch_interval_ms, false),
            ("first_touch_window_ms", self.first_touch_window_ms, false),
        ];
        for (f, v, positive) in durations_ms {
            if positive && v == 0 {
                return err(f, v, "must be > 0");
            }
            if v > MAX_DURATION_MS {
                return err(f, v, "must be <= 86400000 ms (one day)");
            }
        }
        if self.access_sample_bytes == 0 {
            return err("access_sample_bytes", 0, "must be > 0");
        }
        if !(12..=30).contains(&self.coaccess_bucket_shift) {
            return err("coaccess_bucket_shift", self.coaccess_bucket_shift, "must be 12 (4 KiB) ..= 30 (1 GiB)");
        }
        let fracs = [
            ("address_space_prior", self.address_space_prior),
            ("tier_weak", self.tier_weak),
            ("tier_medium", self.tier_medium),
            ("tier_strong", self.tier_strong),
            ("edge_zero", self.edge_zero),
            ("group_keep_strength", self.group_keep_strength),
            ("group_max_mem_frac", self.group_max_mem_frac),
            ("group_split_margin", self.group_split_margin),
            ("pinned_policy_share", self.pinned_policy_share),
            ("cpu_load_high", self.cpu_load_high),
            ("cpu_load_low", self.cpu_load_low),
            ("cpu_interference_high", self.cpu_interference_high),
            ("cpu_interference_low", self.cpu_interference_low),
            ("mem_capacity_high", self.mem_capacity_high),
            ("mem_capacity_low", self.mem_capacity_low),
            ("mem_pressure_high", self.mem_pressure_high),
            ("mem_pressure_low", self.mem_pressure_low),
            ("mem_bw_load_high", self.mem_bw_load_high),
            ("mem_bw_load_low", self.mem_bw_load_low),
            ("mem_bw_interference_high", self.mem_bw_interference_high),
            ("mem_bw_interference_low", self.mem_bw_interference_low),
            ("io_pressure_high", self.io_pressure_high),
            ("io_pressure_low", self.io_pressure_low),
            ("large_rss_node_frac", self.large_rss_node_frac),
            ("imbalance", self.imbalance),
            ("remote_access_cost", self.remote_access_cost),
            ("comm_socket_strength", self.comm_socket_strength),
            ("remote_share_min", self.remote_share_min),
            ("shared_range_share_min", self.shared_range_share_min),
            ("spread_done_share", self.spread_done_share),
            ("cpu_follows_memory_share", self.cpu_follows_memory_share),
            ("new_threads_memory_share", self.new_threads_memory_share),
            ("cold_memory_share_min", self.cold_memory_share_min),
            ("futile_move_share", self.futile_move_share),
            ("futile_move_memory_change", self.futile_move_memory_change),
        ];
        for (f, v) in fracs {
            if !(0.0..=1.0).contains(&v) {
                return err(f, v, "must be a fraction in 0..=1");
            }
        }
        if !(self.tier_weak < self.tier_medium && self.tier_medium < self.tier_strong) {
            return err_with(
                "tier_medium",
                &["tier_weak", "tier_strong"],
                self.tier_medium,
                "tiers must rise: tier_weak < tier_medium < tier_strong",
            );
        }
        if self.group_keep_strength >= self.tier_medium {
            return err_with(
                "group_keep_strength",
                &["tier_medium"],
                self.group_keep_strength,
                "must be below tier_medium (the keep mark is the low mark of the join hysteresis)",
            );
        }
        if self.edge_zero <= 0.0 {
            return err(
                "edge_zero",
                self.edge_zero,
                "must be > 0 (at 0 no edge is ever dropped: the graph grows forever)",
            );
        }
        if self.edge_zero >= self.tier_weak {
            return err_with("edge_zero", &["tier_weak"], self.edge_zero, "must be below tier_weak");
        }
        let pairs: [(&'static str, &'static [&'static str], f64, f64); 7] = [
            ("cpu_load_low", &["cpu_load_high"], self.cpu_load_low, self.cpu_load_high),
            ("cpu_interference_low", &["cpu_interference_high"], self.cpu_interference_low, self.cpu_interference_high),
            ("mem_capacity_low", &["mem_capacity_high"], self.mem_capacity_low, self.mem_capacity_high),
            ("mem_pressure_low", &["mem_pressure_high"], self.mem_pressure_low, self.mem_pressure_high),
            ("mem_bw_load_low", &["mem_bw_load_high"], self.mem_bw_load_low, self.mem_bw_load_high),
            (
                "mem_bw_interference_low",
                &["mem_bw_interference_high"],
                self.mem_bw_interference_low,
                self.mem_bw_interference_high,
            ),
            ("io_pressure_low", &["io_pressure_high"], self.io_pressure_low, self.io_pressure_high),
        ];
        for (f, high, low, high_value) in pairs {
            if low > high_value {
                return err_with(f, high, low, "a low (leave) mark must not exceed its high (enter) mark");
            }
        }
        let positive = [
            ("comm_full_events_per_s", self.comm_full_events_per_s),
            ("group_max_cpu_frac", self.group_max_cpu_frac),
            ("growing_mib_per_s", self.growing_mib_per_s),
            ("bandwidth_bound_mib_per_s_per_thread", self.bandwidth_bound_mib_per_s_per_thread),
            ("benefit_horizon_s", self.benefit_horizon_s),
            ("hold_load_change", self.hold_load_change),
        ];
        for (f, v) in positive {
            if !(v.is_finite() && v > 0.0) {
                return err(f, v, "must be a finite number > 0");
            }
        }
        if !(self.static_mib_per_s >= 0.0 && self.static_mib_per_s <= self.growing_mib_per_s) {
            return err_with(
                "static_mib_per_s",
                &["growing_mib_per_s"],
                self.static_mib_per_s,
                "must be in 0..=growing_mib_per_s",
            );
        }
        if !(self.min_group_cpu >= 0.0 && self.min_group_cpu.is_finite()) {
            return err("min_group_cpu", self.min_group_cpu, "must be a finite number >= 0");
        }
        if self.shared_max_users < 2 {
            return err("shared_max_users", self.shared_max_users, "must be >= 2 (sharing needs two users)");
        }
        if self.coaccess_max_accessors < 2 {
            return err("coaccess_max_accessors", self.coaccess_max_accessors, "must be >= 2 (co-access needs a pair)");
        }
        if self.group_max_tasks < 2 {
            return err("group_max_tasks", self.group_max_tasks, "must be >= 2 (a group of one cannot merge)");
        }
        if self.bandwidth_bound_min_nodes < 2 {
            return err("bandwidth_bound_min_nodes", self.bandwidth_bound_min_nodes, "must be >= 2");
        }
        if self.migrate_budget_mib_per_s == 0 {
            return err("migrate_budget_mib_per_s", 0, "must be > 0 (to stop migrating, use a dry run)");
        }
        // decisions (policy::adaptive)
        if self.settle_interval_ms == 0 || self.settle_interval_ms > self.interval_ms {
            return err_with(
                "settle_interval_ms",
                &["interval_ms"],
                self.settle_interval_ms,
                "must be in 1..=interval_ms",
            );
        }
        if self.first_touch_interval_ms == 0 || self.first_touch_interval_ms > self.settle_interval_ms {
            return err_with(
                "first_touch_interval_ms",
                &["settle_interval_ms"],
                self.first_touch_interval_ms,
                "must be in 1..=settle_interval_ms",
            );
        }
        if self.first_touch_window_ms == 0 {
            return err("first_touch_window_ms", 0, "must be > 0");
        }
        if !(self.node_cpu_target.is_finite() && self.node_cpu_target > 0.0 && self.node_cpu_target <= 2.0) {
            return err("node_cpu_target", self.node_cpu_target, "must be in (0, 2]");
        }
        if !(0.0..=1.0).contains(&self.stay_margin) {
            return err("stay_margin", self.stay_margin, "must be a fraction in 0..=1");
        }
        if !(self.new_thread_cpu.is_finite() && self.new_thread_cpu > 0.0) {
            return err("new_thread_cpu", self.new_thread_cpu, "must be a finite number > 0");
        }
        if self.imbalance.is_nan() || self.imbalance <= 0.0 {
            return err("imbalance", self.imbalance, "must be > 0 (0 would move tasks for any difference)");
        }
        if self.refused_backoff_max_decisions == 0 {
            return err(
                "refused_backoff_max_decisions",
                0,
                "must be >= 1 (a refused process is planned again at the next decision at the least)",
            );
        }
        if self.futile_backoff_max_decisions == 0 {
            return err(
                "futile_backoff_max_decisions",
                0,
                "must be >= 1 (a futile move waits for the next decision at the least)",
            );
        }
        if self.hold_periods == 0 {
            return err("hold_periods", 0, "must be >= 1 (0 would allow a move back in the next period: ping-pong)");
        }
        if self.new_process_age_ms == 0 {
            return err("new_process_age_ms", 0, "must be > 0");
        }
        if self.numad_interval_max_s > NUMAD_INTERVAL_MAX_S {
            return err("numad_interval_max_s", self.numad_interval_max_s, "must be <= 86400 (one day)");
        }
        if self.numad_htt_pct > 100 {
            return err("numad_htt_pct", self.numad_htt_pct, "must be 0..=100");
        }
        if self.numad_interval_min_s == 0 || self.numad_interval_min_s > self.numad_interval_max_s {
            return err_with(
                "numad_interval_min_s",
                &["numad_interval_max_s"],
                self.numad_interval_min_s,
                "must be in 1..=numad_interval_max_s",
            );
        }
        if !(1..=100).contains(&self.numad_target_utilization_pct) {
            return err("numad_target_utilization_pct", self.numad_target_utilization_pct, "must be 1..=100");
        }
        if !(1..=100).contains(&self.numad_memlocality_pct) {
            return err("numad_memlocality_pct", self.numad_memlocality_pct, "must be 1..=100");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        Tunables::default().validate().unwrap();
    }

    #[test]
    fn each_rejection_names_its_field() {
        type Case = (fn(&mut Tunables), &'static str);
        let cases: Vec<Case> = vec![
            (|t| t.affinity_half_life_ms = 0, "affinity_half_life_ms"),
            (|t| t.tier_medium = 0.01, "tier_medium"),
            (|t| t.cpu_load_low = 0.95, "cpu_load_low"),
            (|t| t.mem_capacity_high = 1.5, "mem_capacity_high"),
            (|t| t.group_max_tasks = 1, "group_max_tasks"),
            (|t| t.migrate_budget_mib_per_s = 0, "migrate_budget_mib_per_s"),
            (|t| t.first_touch_interval_ms = 0, "first_touch_interval_ms"),
            (|t| t.first_touch_interval_ms = 200, "first_touch_interval_ms"),
            (|t| t.first_touch_window_ms = 0, "first_touch_window_ms"),
            (|t| t.numad_interval_min_s = 20, "numad_interval_min_s"),
            (|t| t.coaccess_bucket_shift = 40, "coaccess_bucket_shift"),
            (|t| t.comm_full_events_per_s = f64::NAN, "comm_full_events_per_s"),
            (|t| t.settle_interval_ms = 0, "settle_interval_ms"),
            (|t| t.settle_interval_ms = 5000, "settle_interval_ms"),
            (|t| t.node_cpu_target = 0.0, "node_cpu_target"),
            (|t| t.node_cpu_target = 3.0, "node_cpu_target"),
            (|t| t.stay_margin = -0.1, "stay_margin"),
            (|t| t.new_thread_cpu = f64::INFINITY, "new_thread_cpu"),
            (|t| t.imbalance = 0.0, "imbalance"),
            (|t| t.remote_access_cost = f64::NAN, "remote_access_cost"),
            (|t| t.hold_periods = 0, "hold_periods"),
            (|t| t.refused_backoff_max_decisions = 0, "refused_backoff_max_decisions"),
            (|t| t.futile_backoff_max_decisions = 0, "futile_backoff_max_decisions"),
            (|t| t.futile_move_share = 1.5, "futile_move_share"),
            (|t| t.futile_move_memory_change = -0.1, "futile_move_memory_change"),
            (|t| t.new_process_age_ms = 0, "new_process_age_ms"),
            (|t| t.remote_share_min = 1.5, "remote_share_min"),
            (|t| t.coaccess_max_accessors = 1, "coaccess_max_accessors"),
            (|t| t.access_half_life_ms = 0, "access_half_life_ms"),
            (|t| t.access_stale_ms = 0, "access_stale_ms"),
            (|t| t.access_sample_bytes = 0, "access_sample_bytes"),
            (|t| t.pinned_policy_share = 1.5, "pinned_policy_share"),
            (|t| t.mem_pressure_low = 0.5, "mem_pressure_low"),
            (|t| t.group_keep_strength = 0.3, "group_keep_strength"),
            (|t| t.edge_zero = 0.0, "edge_zero"),
            (|t| t.comm_socket_strength = 1.5, "comm_socket_strength"),
            (|t| t.shared_max_users = 1, "shared_max_users"),
            (|t| t.interval_ms = 100_000_000_000_000, "interval_ms"),
            (|t| t.edge_grace_ms = u64::MAX, "edge_grace_ms"),
            (|t| t.class_window_ms = 86_400_001, "class_window_ms"),
        ];
        for (mutate, field) in cases {
            let mut t = Tunables::default();
            mutate(&mut t);
            let e = t.validate().unwrap_err();
            assert_eq!(e.field, field, "{e}");
        }
    }

    #[test]
    fn a_huge_value_is_echoed_as_written() {
        // Display would print 1e300 as 301 digits; the message must stay one readable line.
        let t = Tunables { tier_weak: 1e300, ..Tunables::default() };
        let e = t.validate().unwrap_err();
        assert_eq!(e.value, "1e300");
        let t = Tunables { tier_weak: 1.5, ..Tunables::default() };
        assert_eq!(t.validate().unwrap_err().value, "1.5");
        let t = Tunables { interval_ms: 0, ..Tunables::default() };
        assert_eq!(t.validate().unwrap_err().value, "0");
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let e = toml::from_str::<Tunables>("interval_ms = 500\nbogus = 1\n").unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
        let t: Tunables = toml::from_str("interval_ms = 500\n").unwrap();
        assert_eq!(t.interval_ms, 500);
        assert_eq!(t.tier_strong, Tunables::default().tier_strong);
    }
}
