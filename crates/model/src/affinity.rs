//! The affinity graph between tasks: who works with whom, and how strongly.
//!
//! # Problem
//!
//! Threads that share data run faster on one node (the data stays in one LLC and one memory
//! controller); threads that do not share gain nothing from being together. NUMA-ICON learns the
//! relation from behaviour: "record the threads that recently touched the same page", plus
//! communication (socket pairs, wake-ups), normalised to a frequency, decayed, and mapped to
//! weak / medium / strong tiers.
//!
//! # Approach
//!
//! ```text
//!   access samples ─► bucket (phys >> shift, else (pid, addr >> shift))
//!                     recent accessors per bucket: [(task, last_ns, samples)]  <= coaccess_max_accessors
//!                     a, b in one bucket with |t_a - t_b| <= coaccess_window  ─► co_ab += min(n_a, n_b)
//!                     (once per pair per bucket per period)
//!
//!   f_coaccess(a,b) = co_ab / min(S_a, S_b)          S = samples of the task in the buckets counted
//!   f_comm(a,b)     = events / period_s / comm_full_events_per_s          (all clamped to 0..1)
//!                     a socket pair: max(that, comm_socket_strength) while connected
//!                     a process-level end (tid = pid) is the process's busiest thread
//!   f_shared(p,q)   = Σ_objects min(bytes_p, bytes_q) / min(RSS_p, RSS_q)  objects of Sample.shared
//!                     with <= shared_max_users users; ends: each process's busiest thread
//!
//!   per channel, every period (dt = period, h = affinity_half_life, r = affinity_rise_half_life):
//!       d = 2^(-dt/h)          s = s * d                                 (decay, always)
//!       if f > s:              s = s + (f - s) * (1 - 2^(-dt/r))         (rise, r << h)
//!   no observation: s halves every half-life exactly; steady f: s -> f g / (1 - d (1 - g)),
//!   g = 1 - 2^(-dt/r) (0.94 f at 1 s periods, 0.99 f at 100 ms: about f)
//!
//!        1 ┤   ╭──────╮  rise: half the gap per r (1 s)
//!     s    │  ╱        ╲___  decay: half per h (10 s)
//!        0 ┼─╯   talk       ╲______ silence
//!
//!   Separate rates (an attack/release envelope follower): the issue prescribes the decay
//!   s = s / 2^(t/h) of a normalised frequency, not that new evidence must enter as slowly; with
//!   one rate a pair talking at full rate needed 3.2 s to reach tier_medium, so short runs never
//!   grouped a client with its server. With r = 1 s a pair at f = 1 is Strong after one 1 s
//!   period, f = 0.4 reaches tier_medium in one period.
//!
//!   strength = max(coaccess, comm, shared) tier: >= tier_strong Strong, >= tier_medium Medium,
//!                                                   >= tier_weak Weak, else none
//!   strength < edge_zero  ──► zero_since = now ──(edge_grace_ms)──► edge dropped
//! ```
//!
//! Without access samples, the kernel's NUMA groups stand in for co-access: threads with the
//! same `numa_group_id` (formed by the kernel from faults on shared pages) are chained in task
//! order with f = the smaller shared-fault fraction of the two (see `numa_groups`).
//!
//! Socket pairs and wake-ups arrive on different scales. The eBPF tracer counts wake-ups, so a
//! `Wakeup` pair's events per second mean something; the live socket source can only say "these
//! two processes hold the two ends of a connection" (events = 1 per cycle: unix sockets keep no
//! message counts), which on the rate scale is 0.001 of a full relation. A `Socket` pair is
//! therefore observed at `comm_socket_strength` (the medium tier) in every period the connection
//! is seen, or at its rate if real counts put it higher; when the connection goes, the edge decays.
//!
//! Shared memory is a third channel (NUMA-ICON's shared-memory signal): two processes mapping the
//! same file, SysV segment or memfd share the data in it. The fraction of the smaller process's
//! resident memory that is shared is the frequency; the ends are the processes' busiest threads
//! (as for process-level communication), which the grouping then joins with their process's other
//! threads through the address-space prior. Objects with more than `shared_max_users` users are
//! system-wide files (libraries, locale archives) and are ignored. The channel's values live in
//! [`AffinityGraph::shared`] beside the edges (same keys).
//!
//! The address-space prior (threads of one process) is never stored: [`AffinityGraph::strength`]
//! returns `max(edge, prior)` for two threads of one process, and the grouping uses it only where
//! a process has no finer signal (see `groups`).
//!
//! # Units
//!
//! Strengths and frequencies are dimensionless, 0..1. Times in ns; the half-life and windows are
//! tunables in ms.
//!
//! # Limits
//!
//! Co-access is only as good as the samples: two threads sharing a buffer but sampled in different
//! windows look unrelated. Only the `coaccess_max_accessors` most recent accessors of a bucket are
//! paired, so a bucket hammered by hundreds of threads relates only the most recent ones per
//! period (over periods, different ones). Cost per period: O(samples log samples + edges +
//! buckets in the window x accessors^2), with accessors <= coaccess_max_accessors: this period's
//! accessors of a bucket are cut to the most recent ones (a linear selection) before any pairing
//! or merging, so one bucket hit by 10,000 threads costs O(10,000 + 16^2), not O(10,000^2).

use std::collections::{BTreeMap, HashMap, HashSet};

use numapilot_observe::parse::numa_maps::FxBuild;

use numapilot_observe::{CommKind, Sample};
use serde::{Deserialize, Serialize};

use crate::tasks::TaskKey;
use crate::{Model, Tunables};

/// Strength tier of an edge (NUMA-ICON: weak / medium / strong; the load balancer only needs the
/// tier).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tier {
    /// At or above `tier_weak`.
    Weak,
    /// At or above `tier_medium`: joins groups.
    Medium,
    /// At or above `tier_strong`.
    Strong,
}

/// One edge between two tasks (`a < b`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Edge {
    /// Normalised, decayed strength, 0..1: the maximum over the channels below.
    pub strength: f64,
    /// Co-access channel, 0..1.
    pub coaccess: f64,
    /// Communication channel, 0..1.
    pub comm: f64,
    /// Tier of `strength`; `None` below `tier_weak`.
    pub tier: Option<Tier>,
    /// Host time of the last observation that raised the edge, ns.
    pub last_seen_ns: u64,
    /// Host time the strength fell below `edge_zero`, ns (the grace period runs from there).
    pub zero_since_ns: Option<u64>,
}

/// All edges, keyed by ordered task pair (`a < b`). The address-space prior is implicit (never
/// stored): see [`AffinityGraph::strength`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AffinityGraph {
    /// The edges.
    pub edges: BTreeMap<(TaskKey, TaskKey), Edge>,
    /// Shared-memory channel of an edge, 0..1, by the edge's key (only keys of `edges`; absent =
    /// 0). Kept beside [`Edge`] rather than in it so hand-built edges stay complete; `Edge::strength`
    /// includes it.
    pub shared: BTreeMap<(TaskKey, TaskKey), f64>,
}

impl AffinityGraph {
    /// Strength of the relation between two tasks: the stored edge's, or the address-space prior
    /// for two threads of one process, whichever is larger.
    pub fn strength(&self, a: TaskKey, b: TaskKey, prior: f64) -> f64 {
        let key = if a < b { (a, b) } else { (b, a) };
        let edge = self.edges.get(&key).map_or(0.0, |e| e.strength);
        let prior = if a.pid == b.pid && a != b { prior } else { 0.0 };
        edge.max(prior)
    }
}

/// Decay factor over `dt_ns` for a half-life of `half_life_ms`: `2^(-dt / h)`, in (0, 1]; 1 for
/// `dt = 0`.
pub fn decay_factor(dt_ns: u64, half_life_ms: u64) -> f64 {
    if dt_ns == 0 {
        return 1.0;
    }
    if half_life_ms == 0 {
        return 0.0;
    }
    (-(dt_ns as f64) / (half_life_ms as f64 * 1e6)).exp2()
}

/// Identity of a memory bucket for co-access: machine-wide when the physical address (or another
/// machine-wide identity) is known, else per address space:
/// `(0, phys >> shift)` for machine-wide memory, `(pid + 1, addr >> shift)` per address space:
/// two integers, so sorting 50,000 samples per period compares cheaply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct BucketKey(u64, u64);

/// One recent accessor of a bucket.
#[derive(Debug, Clone, Copy)]
struct Accessor {
    task: TaskKey,
    last_ns: u64,
    samples: u64,
}

/// Recent accessors per memory bucket (implementation state), bounded: at most
/// `coaccess_max_accessors` per bucket, nothing older than the co-access window.
#[derive(Debug, Clone, Default)]
pub(crate) struct CoaccessWindow {
    // Hash map: looked up once per sampled bucket per period, never iterated into a result (only
    // pruned), so its order cannot leak.
    buckets: HashMap<BucketKey, Vec<Accessor>, FxBuild>,
}

impl CoaccessWindow {
    /// Buckets currently remembered (`Model::bookkeeping`, tests of boundedness).
    pub(crate) fn buckets(&self) -> usize {
        self.buckets.len()
    }

    /// Accessors remembered over all buckets (`Model::bookkeeping`).
    pub(crate) fn accessors(&self) -> usize {
        self.buckets.values().map(Vec::len).sum()
    }
}

/// Tier of a strength.
pub fn tier_of(strength: f64, tun: &Tunables) -> Option<Tier> {
    if strength >= tun.tier_strong {
        Some(Tier::Strong)
    } else if strength >= tun.tier_medium {
        Some(Tier::Medium)
    } else if strength >= tun.tier_weak {
        Some(Tier::Weak)
    } else {
        None
    }
}

fn ordered(a: TaskKey, b: TaskKey) -> (TaskKey, TaskKey) {
    if a < b {
        (a, b)
    } else {
        (b, a)
    }
}

/// This period's co-access frequency per pair, from the samples and the window (which it updates).
fn coaccess(model: &mut Model, sample: &Sample) -> BTreeMap<(TaskKey, TaskKey), f64> {
    let tun = &model.tunables;
    let shift = tun.coaccess_bucket_shift;
    let window_ns = tun.coaccess_window_ms.saturating_mul(1_000_000);
    let max_acc = tun.coaccess_max_accessors as usize;
    let now = model.now_ns;
    let tasks = &model.tasks;
    let reborn = &model.state.reborn;
    let win = &mut model.state.coaccess;
    let live: HashSet<u64, FxBuild> = tasks.keys().filter(|k| !reborn.contains(k)).map(|k| k.packed()).collect();
    let alive = |t: &TaskKey| live.contains(&t.packed());

    // This period's samples per (bucket, task), merged.
    let mut rows: Vec<(BucketKey, TaskKey, u64, u64)> = sample
        .accesses
        .iter()
        .filter(|a| a.count > 0)
        .map(|a| {
            let b = match a.phys {
                Some(p) => BucketKey(0, p >> shift),
                None => BucketKey(u64::from(a.pid) + 1, a.addr >> shift),
            };
            (b, TaskKey { pid: a.pid, tid: a.tid }, u64::from(a.count), a.last_ns)
        })
        .filter(|r| alive(&r.1))
        .collect();
    rows.sort_unstable_by_key(|x| (x.0, x.1.packed()));
    let mut merged: Vec<(BucketKey, Accessor)> = Vec::with_capacity(rows.len());
    for (b, t, n, last) in rows {
        match merged.last_mut() {
            Some((pb, pa)) if *pb == b && pa.task == t => {
                pa.samples = pa.samples.saturating_add(n);
                pa.last_ns = pa.last_ns.max(last);
            }
            _ => merged.push((b, Accessor { task: t, last_ns: last, samples: n })),
        }
    }

    // Pairs within each bucket.
    // Hashed while counting (integer sums: order cannot matter), sorted at the end.
    let mut co: HashMap<(TaskKey, TaskKey), u64, FxBuild> = HashMap::default();
    let mut total: HashMap<TaskKey, u64, FxBuild> = HashMap::default();
    let mut parts: Vec<(Accessor, bool)> = Vec::new();
    let mut counted: Vec<bool> = Vec::new();
    let mut i = 0;
    while i < merged.len() {
        let b = merged[i].0;
        let mut j = i;
        parts.clear();
        while j < merged.len() && merged[j].0 == b {
            parts.push((merged[j].1, true));
            j += 1;
        }
        let cur = &merged[i..j];
        i = j;
        for a in cur {
            let t = total.entry(a.1.task).or_default();
            *t = t.saturating_add(a.1.samples);
        }
        let entry = win.buckets.entry(b).or_default();
        // Only the most recent `max_acc` of this period's accessors can be among the paired
        // participants: select them first (O(|cur|)), so everything below is bounded by
        // `max_acc`, however many threads hit the bucket.
        let recent =
            |x: &(Accessor, bool), y: &(Accessor, bool)| y.0.last_ns.cmp(&x.0.last_ns).then(x.0.task.cmp(&y.0.task));
        if parts.len() > max_acc {
            parts.select_nth_unstable_by(max_acc - 1, recent);
            parts.truncate(max_acc);
        }
        // Carried accessors from earlier periods, still alive, not sampled again in this bucket
        // (`cur` is sorted by task: a binary search each).
        entry.retain(|e| alive(&e.task));
        for e in entry.iter() {
            if cur.binary_search_by(|c| c.1.task.cmp(&e.task)).is_err() {
                parts.push((*e, false));
            }
        }
        // Pair only the most recent `max_acc` participants (bounded cost per bucket).
        parts.sort_unstable_by(recent);
        parts.truncate(max_acc);
        counted.clear();
        counted.resize(parts.len(), false);
        for x in 0..parts.len() {
            for y in x + 1..parts.len() {
                let ((p, pc), (q, qc)) = (parts[x], parts[y]);
                if !(pc || qc) || p.last_ns.abs_diff(q.last_ns) > window_ns {
                    continue;
                }
                let c = co.entry(ordered(p.task, q.task)).or_default();
                *c = c.saturating_add(p.samples.min(q.samples));
                for (k, is_cur) in [(x, pc), (y, qc)] {
                    if !is_cur && !counted[k] {
                        counted[k] = true;
                        let t = total.entry(parts[k].0.task).or_default();
                        *t = t.saturating_add(parts[k].0.samples);
                    }
                }
            }
        }
        // Remember the most recent accessors, this period's replacing their older entries: the
        // union of the carried entries (<= max_acc) and this period's most recent (<= max_acc),
        // so the merge is O(max_acc^2) at worst, never O(|cur|^2).
        entry.retain(|e| cur.binary_search_by(|c| c.1.task.cmp(&e.task)).is_err());
        // (`parts` is the most recent max_acc of carried and current together: a current
        // accessor not in it is not among the most recent max_acc either.)
        entry.extend(parts.iter().filter(|p| p.1).map(|p| p.0));
        entry.sort_unstable_by(|x, y| y.last_ns.cmp(&x.last_ns).then(x.task.cmp(&y.task)));
        entry.truncate(max_acc);
    }
    // Forget what can no longer pair with a future sample (all future samples are after `now`).
    // (Accessors that died are dropped when their bucket is next touched, above: checking every
    // entry here would cost a lookup per entry per period.)
    win.buckets.retain(|_, v| {
        v.retain(|e| e.last_ns.saturating_add(window_ns) >= now);
        !v.is_empty()
    });

    co.into_iter()
        .filter_map(|((a, b), n)| {
            let denom = total.get(&a).copied().unwrap_or(0).min(total.get(&b).copied().unwrap_or(0));
            (denom > 0).then(|| ((a, b), (n as f64 / denom as f64).clamp(0.0, 1.0)))
        })
        .collect()
}

/// This period's communication frequency per pair.
fn communication(model: &Model, sample: &Sample) -> BTreeMap<(TaskKey, TaskKey), f64> {
    // Per pair: events on the rate scale, and whether a socket connects the two.
    let mut events: BTreeMap<(TaskKey, TaskKey), (u64, bool)> = BTreeMap::new();
    let period_s = model.period_ns as f64 / 1e9;
    if period_s <= 0.0 {
        return BTreeMap::new();
    }
    // Process-level ends (tid = pid, the CommSample convention when only the process is known,
    // e.g. socket pairs from /proc/net) stand for the process's busiest thread: the one that does
    // the work the communication feeds, not an idle main thread sitting in accept(). (For a
    // process whose main thread is the busiest, or the only one, this is the main thread.)
    let mut busiest = Busiest::default();
    for c in &sample.comm {
        let a = busiest.resolve(model, c.a);
        let b = busiest.resolve(model, c.b);
        if a == b || !model.tasks.contains_key(&a) || !model.tasks.contains_key(&b) {
            continue;
        }
        let e = events.entry(ordered(a, b)).or_default();
        e.0 = e.0.saturating_add(c.events);
        e.1 |= c.kind == CommKind::Socket;
    }
    let full = model.tunables.comm_full_events_per_s;
    let socket = model.tunables.comm_socket_strength;
    events
        .into_iter()
        .map(|(k, (e, is_socket))| {
            let rate = (e as f64 / period_s / full).clamp(0.0, 1.0);
            (k, if is_socket { rate.max(socket) } else { rate })
        })
        .collect()
}

/// Process-level ends (tid = pid) resolved to the process's busiest thread, memoised per update.
#[derive(Default)]
struct Busiest(BTreeMap<u32, TaskKey>);

impl Busiest {
    /// The task standing for end `(pid, tid)`: itself for a thread, else the busiest thread of the
    /// process (ties to the lowest tid; the end itself when the process has no live thread).
    fn resolve(&mut self, model: &Model, (pid, tid): (u32, u32)) -> TaskKey {
        let key = TaskKey { pid, tid };
        if pid != tid {
            return key;
        }
        *self.0.entry(pid).or_insert_with(|| {
            let lo = TaskKey { pid, tid: 0 };
            let hi = TaskKey { pid, tid: u32::MAX };
            model
                .tasks
                .range(lo..=hi)
                .max_by(|x, y| x.1.cpu_rate.total_cmp(&y.1.cpu_rate).then(y.0.cmp(x.0)))
                .map_or(key, |(k, _)| *k)
        })
    }
}

/// This period's shared-memory frequency per pair of processes (their busiest threads): for each
/// object of `Sample.shared` with at most `shared_max_users` users, every pair of its users
/// (p, q) adds min(bytes_p, bytes_q); the sum over objects is divided by min(RSS_p, RSS_q) and
/// clamped to 0..1. A process without resident memory or without a live thread adds nothing.
fn shared_memory(model: &Model, sample: &Sample) -> BTreeMap<(TaskKey, TaskKey), f64> {
    let max_users = model.tunables.shared_max_users as usize;
    let mut bytes: BTreeMap<(u32, u32), u64> = BTreeMap::new();
    for o in &sample.shared {
        if o.users.len() < 2 || o.users.len() > max_users {
            continue;
        }
        for (i, &(p, bp)) in o.users.iter().enumerate() {
            for &(q, bq) in &o.users[i + 1..] {
                if p == q {
                    continue;
                }
                let e = bytes.entry((p.min(q), p.max(q))).or_default();
                *e = e.saturating_add(bp.min(bq));
            }
        }
    }
    let mut busiest = Busiest::default();
    let mut out: BTreeMap<(TaskKey, TaskKey), f64> = BTreeMap::new();
    for ((p, q), b) in bytes {
        let (Some(pp), Some(pq)) = (model.procs.get(&p), model.procs.get(&q)) else { continue };
        let rss = pp.rss_bytes.min(pq.rss_bytes);
        if rss == 0 || b == 0 {
            continue;
        }
        let (a, z) = (busiest.resolve(model, (p, p)), busiest.resolve(model, (q, q)));
        if a == z || !model.tasks.contains_key(&a) || !model.tasks.contains_key(&z) {
            continue;
        }
        let f = (b as f64 / rss as f64).clamp(0.0, 1.0);
        let e = out.entry(ordered(a, z)).or_insert(0.0);
        *e = e.max(f);
    }
    out
}

/// This period's co-access frequency from the kernel's NUMA groups: threads with the same
/// `numa_group_id` (`/proc/PID/task/TID/sched`). The kernel puts two tasks in one numa_group when
/// a hinting fault of one lands on a page last accessed by the other (kernel/sched/fair.c
/// `task_numa_fault` -> `task_numa_group`), so a shared group id is the kernel's own co-access
/// verdict, from fault statistics rather than samples. Strength: the smaller of the two threads'
/// shared-fault fractions (Σ task_shared / Σ (task_private + task_shared), the kernel's decayed
/// averages): threads that mostly fault on private pages are only weakly related. Members are
/// chained in task order (a, b), (b, c), ... rather than paired all-to-all: the chain connects
/// the group with n - 1 edges (a 1,000-thread group costs 999 edges, not 500,000).
fn numa_groups(model: &Model, sample: &Sample) -> BTreeMap<(TaskKey, TaskKey), f64> {
    let mut members: Vec<(u32, TaskKey, f64)> = Vec::new();
    for p in &sample.processes {
        for t in &p.threads {
            let Some(numa) = t.sched.as_ref().and_then(|s| s.numa.as_ref()) else { continue };
            let Some(gid) = numa.group_id else { continue };
            let key = TaskKey { pid: p.pid, tid: t.tid };
            if !model.tasks.contains_key(&key) || model.state.reborn.contains(&key) {
                continue;
            }
            let (mut shared, mut all) = (0u64, 0u64);
            for f in &numa.faults {
                shared = shared.saturating_add(f.task_shared);
                all = all.saturating_add(f.task_private.saturating_add(f.task_shared));
            }
            if all > 0 {
                members.push((gid, key, shared as f64 / all as f64));
            }
        }
    }
    members.sort_by_key(|m| (m.0, m.1));
    members
        .windows(2)
        .filter(|w| w[0].0 == w[1].0)
        .map(|w| (ordered(w[0].1, w[1].1), w[0].2.min(w[1].2)))
        .filter(|(_, f)| *f > 0.0)
        .collect()
}

/// Decays every edge to the sample's time, adds this period's co-access and communication, maps
/// tiers, drops edges past their grace period and edges of tasks that are gone.
pub(crate) fn update(model: &mut Model, sample: &Sample) {
    let mut co = coaccess(model, sample);
    for (k, f) in numa_groups(model, sample) {
        let c = co.entry(k).or_insert(0.0);
        *c = c.max(f);
    }
    let comm = communication(model, sample);
    let shared = shared_memory(model, sample);
    let tun = &model.tunables;
    let now = model.now_ns;
    let d = decay_factor(model.period_ns, tun.affinity_half_life_ms);
    let gain = 1.0 - decay_factor(model.period_ns, tun.affinity_rise_half_life_ms);
    let grace_ns = tun.edge_grace_ms.saturating_mul(1_000_000);
    let tasks = &model.tasks;
    let reborn = &model.state.reborn;
    let edges = &mut model.graph.edges;
    let shared_ch = &mut model.graph.shared;
    edges.retain(|(a, b), _| {
        tasks.contains_key(a) && tasks.contains_key(b) && !reborn.contains(a) && !reborn.contains(b)
    });
    for e in edges.values_mut() {
        e.coaccess *= d;
        e.comm *= d;
    }
    shared_ch.retain(|k, s| {
        *s *= d;
        edges.contains_key(k)
    });
    if gain > 0.0 {
        let mut observe = |k: (TaskKey, TaskKey), f: f64, ch: Channel| {
            if f <= 0.0 {
                return;
            }
            let e = edges.entry(k).or_insert(Edge {
                strength: 0.0,
                coaccess: 0.0,
                comm: 0.0,
                tier: None,
                last_seen_ns: now,
                zero_since_ns: None,
            });
            let s = match ch {
                Channel::Coaccess => &mut e.coaccess,
                Channel::Comm => &mut e.comm,
                Channel::Shared => shared_ch.entry(k).or_insert(0.0),
            };
            if f > *s {
                *s += (f - *s) * gain;
                e.last_seen_ns = now;
            }
        };
        for (k, f) in co {
            observe(k, f, Channel::Coaccess);
        }
        for (k, f) in comm {
            observe(k, f, Channel::Comm);
        }
        for (k, f) in shared {
            observe(k, f, Channel::Shared);
        }
    }
    let keep_mark = tun.group_keep_strength;
    let old_weak = std::mem::take(&mut model.state.weak_since);
    let weak = &mut model.state.weak_since;
    edges.retain(|k, e| {
        e.coaccess = e.coaccess.clamp(0.0, 1.0);
        e.comm = e.comm.clamp(0.0, 1.0);
        let sh = shared_ch.get_mut(k).map_or(0.0, |s| {
            *s = s.clamp(0.0, 1.0);
            *s
        });
        e.strength = e.coaccess.max(e.comm).max(sh);
        e.tier = tier_of(e.strength, tun);
        if e.strength < keep_mark {
            weak.insert(*k, old_weak.get(k).copied().unwrap_or(now));
        }
        if e.strength < tun.edge_zero {
            let since = *e.zero_since_ns.get_or_insert(now);
            now.saturating_sub(since) < grace_ns
        } else {
            e.zero_since_ns = None;
            true
        }
    });
    shared_ch.retain(|k, _| edges.contains_key(k));
}

/// The channel an observation feeds.
#[derive(Clone, Copy)]
enum Channel {
    Coaccess,
    Comm,
    Shared,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decay_factor_basics() {
        assert_eq!(decay_factor(0, 10_000), 1.0);
        assert!((decay_factor(10_000_000_000, 10_000) - 0.5).abs() < 1e-15);
        assert!((decay_factor(20_000_000_000, 10_000) - 0.25).abs() < 1e-15);
        assert_eq!(decay_factor(1, 0), 0.0);
    }

    /// The co-access window stays bounded: at most `coaccess_max_accessors` per bucket, and
    /// nothing once the window has passed without samples.
    #[test]
    fn coaccess_window_is_bounded() {
        use numapilot_observe::{AccessSample, Sample};
        use numapilot_topology::{Cpu, Node, Topology};
        let topo = Topology {
            nodes: vec![Node {
                id: 0,
                cpus: [0].into_iter().collect(),
                mem_total_kb: 1 << 20,
                mem_free_kb: 1 << 20,
                mem_total_unknown: false,
                mem_free_unknown: false,
            }],
            possible: [0].into_iter().collect(),
            distances: vec![vec![10]],
            cpus: vec![Cpu {
                id: 0,
                node: 0,
                package: 0,
                die: 0,
                core: 0,
                siblings: [0].into_iter().collect(),
                llc: None,
                online: true,
            }],
            devices: vec![],
        };
        let mut m = Model::new(topo, Tunables::default());
        let sample = |t: u64, accesses: Vec<AccessSample>| Sample { accesses, ..Sample::empty_at(t) };
        // No live tasks: samples of unknown threads are ignored entirely.
        let acc = |tid, t| AccessSample { pid: 1, tid, addr: 0, phys: None, node: 0, count: 1, last_ns: t };
        m.update(&sample(1_000_000_000, (0..50).map(|i| acc(i, 1_000_000_000)).collect()));
        assert_eq!(m.state.coaccess.buckets(), 0);
        // Live tasks: 50 accessors of one bucket keep at most 16; a later period forgets them.
        m.tasks = (0..50u32)
            .map(|tid| {
                let key = TaskKey { pid: 1, tid };
                let view = crate::TaskView {
                    key,
                    comm: String::new(),
                    cpu: 0,
                    node: Some(0),
                    cpu_rate: 0.0,
                    run_delay: None,
                    cpus_allowed: Default::default(),
                    access: vec![0.0],
                    access_source: crate::AccessSource::Samples,
                    access_samples: 0,
                    first_seen_ns: 0,
                    hot: vec![],
                };
                (key, view)
            })
            .collect();
        m.now_ns = 2_000_000_000;
        m.period_ns = 1_000_000_000;
        update(&mut m, &sample(2_000_000_000, (0..50).map(|i| acc(i, 2_000_000_000 - u64::from(i))).collect()));
        assert_eq!(m.state.coaccess.buckets(), 1);
        assert!(m.state.coaccess.buckets.values().all(|v| v.len() == 16));
        assert!(!m.graph.edges.is_empty());
        m.now_ns = 4_000_000_000;
        update(&mut m, &sample(4_000_000_000, vec![]));
        assert_eq!(m.state.coaccess.buckets(), 0);
    }
}
