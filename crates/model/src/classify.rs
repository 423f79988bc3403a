//! Process classes (NUMA article seed): what kind of process, from how it behaves.
//!
//! # Problem
//!
//! The right placement depends on the process type (shared/seeds/003): a large fixed buffer pool
//! wants CPUs and memory bound to one node set that fits; a growing heap wants a preferred node it
//! can spill from; a streamer running on several nodes wants its memory interleaved over them; a
//! latency-sensitive service wants strict binding. The type is read from behaviour, with
//! configuration able to name a process's class outright.
//!
//! # Approach
//!
//! ```text
//!   comm in class_overrides ─────────────────────────────────────► that class (immediately)
//!   history < class_window_ms ───────────────────────────────────► keep (Unclassified at first)
//!   growth >= growing_mib_per_s ─────────────────────────────────► Growing
//!   threads running on >= bandwidth_bound_min_nodes nodes and
//!     traffic per running thread >= bandwidth_bound_mib_per_s_per_thread ► BandwidthBound
//!   rss >= large_rss_node_frac x smallest node, growth <= static ─► StaticLarge
//!   otherwise ───────────────────────────────────────────────────► Unclassified
//!
//!   stability:  Unclassified ──(first verdict with a full window)──► class
//!               class A ──(verdict B held for a whole class window)──► class B
//! ```
//!
//! Growth is the RSS slope over the class window (`ProcView::growth_bytes_per_s`); traffic is
//! access samples x `access_sample_bytes` per second per running thread, an exponential average
//! with the window as half-life
//! (`ProcView::traffic_bytes_per_s_per_thread`). LatencySensitive is only ever given by an
//! override: nothing in the counters tells a latency-bound service from an idle one.
//!
//! # Units
//!
//! MiB/s for the thresholds (tunables), bytes and bytes/s in the views.
//!
//! # Limits
//!
//! Overrides match the name the kernel shows (`comm`, at most 15 bytes): a configured name is cut
//! to 15 bytes before matching, so two names that share their first 15 bytes are one name.
//!
//! Without access samples there is no traffic figure and nothing is BandwidthBound (controller
//! bandwidth per node cannot be attributed to one process). A process shrinking fast is neither
//! growing nor static: Unclassified.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::tasks::{ProcView, TaskKey};
use crate::{Model, Tunables};

/// What kind of process, for placement (shared/seeds/003's four types).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProcessClass {
    /// Not enough evidence yet, or too small to matter: the generic group rules apply.
    Unclassified,
    /// Large, fixed memory (buffer pool, matrix): bind CPUs and memory to a node set that fits.
    StaticLarge,
    /// Memory grows while it runs (JVM heap, cache): preferred node, spilling to the nearest.
    Growing,
    /// Streams through memory from threads on several nodes: interleave over the nodes it runs on.
    BandwidthBound,
    /// Named in configuration: strict CPU and memory binding.
    LatencySensitive,
}

/// Bytes of a process name the kernel keeps: TASK_COMM_LEN (16) minus the terminating NUL.
const COMM_LEN: usize = 15;

/// Classifies every process from its view (growth, size, spread, bandwidth) unless an override
/// names it.
pub(crate) fn update(model: &mut Model) {
    let tun = &model.tunables;
    let now = model.now_ns;
    let window_ns = tun.class_window_ms.saturating_mul(1_000_000);
    // As last sampled (`Model::node_mem_total_bytes`): memory hot-added to a node counts.
    let smallest_node =
        (0..model.topo.nodes.len()).map(|i| model.node_mem_total_bytes(i)).filter(|&b| b > 0).min().unwrap_or(0);
    // The kernel keeps only the first TASK_COMM_LEN - 1 = 15 bytes of a name (include/linux/sched.h),
    // so a configured name is matched as the kernel would show it: "postgres-checkpointer" matches
    // the comm "postgres-checkp".
    let overrides: BTreeMap<&[u8], ProcessClass> =
        model.class_overrides.iter().map(|(k, &c)| (&k.as_bytes()[..k.len().min(COMM_LEN)], c)).collect();
    for (pid, p) in model.procs.iter_mut() {
        let Some(st) = model.state.procs.get_mut(pid).map(|h| &mut h.class) else { continue };
        if let Some(&c) = overrides.get(&p.comm.as_bytes()[..p.comm.len().min(COMM_LEN)]) {
            p.class = c;
            st.pending = None;
            continue;
        }
        if p.history_ns < window_ns {
            continue;
        }
        let mut nodes: Vec<u32> = p
            .tids
            .iter()
            .filter_map(|&tid| model.tasks.get(&TaskKey { pid: *pid, tid }))
            .filter(|t| t.cpu_rate > 0.0)
            .filter_map(|t| t.node)
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        let verdict = verdict(p, nodes.len(), smallest_node, tun);
        if verdict == p.class {
            st.pending = None;
        } else if p.class == ProcessClass::Unclassified {
            p.class = verdict;
            st.pending = None;
        } else {
            match st.pending {
                Some((c, since)) if c == verdict => {
                    if now.saturating_sub(since) >= window_ns {
                        p.class = verdict;
                        st.pending = None;
                    }
                }
                _ => st.pending = Some((verdict, now)),
            }
        }
    }
}

/// The class the process's current behaviour says (no stability rule).
fn verdict(p: &ProcView, running_nodes: usize, smallest_node_bytes: u64, tun: &Tunables) -> ProcessClass {
    const MIB: f64 = (1u64 << 20) as f64;
    let growth = p.growth_bytes_per_s / MIB;
    let traffic = p.traffic_bytes_per_s_per_thread / MIB;
    if growth >= tun.growing_mib_per_s {
        ProcessClass::Growing
    } else if running_nodes >= tun.bandwidth_bound_min_nodes as usize
        && traffic >= tun.bandwidth_bound_mib_per_s_per_thread
    {
        ProcessClass::BandwidthBound
    } else if smallest_node_bytes > 0
        && p.rss_bytes as f64 >= tun.large_rss_node_frac * smallest_node_bytes as f64
        && growth.abs() <= tun.static_mib_per_s
    {
        ProcessClass::StaticLarge
    } else {
        ProcessClass::Unclassified
    }
}

/// Classification state of one process (implementation's own): a verdict that differs from the
/// current class, and since when it has held.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ClassState {
    pending: Option<(ProcessClass, u64)>,
}
