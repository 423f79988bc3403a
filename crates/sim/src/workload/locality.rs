//! The best share of local accesses any placement can give a workload on a machine.
//!
//! # Problem
//!
//! "Reaches 90% local accesses" is a fair convergence mark only when 90% local is reachable. It is
//! not for numa01 on a machine whose nodes are smaller than half of it: each process has
//! nr_cpus/2 threads that all write one shared buffer, so its threads need k > 1 nodes of CPUs to
//! run at once, and a page is local to the threads of one node only. Whatever a policy does, at
//! most 1/k of such a process's accesses are local while all its threads run. Judging convergence
//! against 90% there fails every policy, the perfect one included.
//!
//! # Approach
//!
//! An upper bound from the workload spec and the machine, per process, then the lowest over the
//! processes (convergence is the time the last process got there):
//!
//! ```text
//!   C          = online CPUs;  T = threads of the whole workload
//!   per node   at most cap = max_n CPUs(n) x max(1, T / C) threads run at once (all threads run:
//!              "at full CPU use"; with more threads than CPUs every node carries T / C per CPU)
//!   access a of thread group g (count c_g, weight w_a) to region r:
//!     per-thread slice     each page has one accessor: it can always be local      share 1
//!     whole region         N_r threads of the process touch every page alike; a page is
//!                          local to the accessors on its node, at most cap of them:
//!                                                                       share min(1, cap / N_r)
//!   process bound = sum(c_g x w_a x share) / sum(c_g x w_a)
//!   workload bound = min over processes
//!
//!   numa01, 2 processes x C/2 threads, one shared buffer each:
//!     autonuma-2s12c-24g  12 threads, 12 per node   -> 100%
//!     article-4n96        48 threads, 24 per node   ->  50%
//!     ring-8n64c          32 threads,  8 per node   ->  25%
//!     numaconnect-288c   144 threads,  8 per node   ->   5.6%
//! ```
//!
//! # Units
//!
//! A fraction in (0, 1].
//!
//! # Limits
//!
//! An upper bound, not a promise: processes competing for the same nodes, memory capacity and
//! pinned threads (`cpus`) can only lower what is reachable, and are ignored. Accesses are
//! weighted by thread count and access weight, not by each group's access rate; phases (accesses
//! that change over time) are ignored, the steady accesses count.

use std::collections::BTreeMap;

use numapilot_topology::Topology;

use super::{Slice, Spec};

/// The best share of local accesses, in (0, 1], any placement of `spec` on `topo` can give while
/// all its threads run (the lowest over its processes; see the module text).
pub fn local_share_bound(spec: &Spec, topo: &Topology) -> f64 {
    let cpus_total = topo.online_cpus().len().max(1) as f64;
    let threads_total = spec.thread_count() as f64;
    let per_cpu = (threads_total / cpus_total).max(1.0);
    let cap = topo.nodes.iter().map(|n| n.cpus.len()).max().unwrap_or(1).max(1) as f64 * per_cpu;
    let mut bound: f64 = 1.0;
    for p in &spec.processes {
        // Threads of the process touching each region whole (every page alike).
        let mut whole: BTreeMap<&str, f64> = BTreeMap::new();
        for g in &p.threads {
            for a in g.accesses.iter().filter(|a| a.slice == Slice::Whole) {
                *whole.entry(a.region.as_str()).or_default() += g.count as f64;
            }
        }
        let (mut local, mut all) = (0.0, 0.0);
        for g in &p.threads {
            for a in &g.accesses {
                let w = g.count as f64 * a.weight;
                let share = match a.slice {
                    Slice::PerThread => 1.0,
                    Slice::Whole => (cap / whole.get(a.region.as_str()).copied().unwrap_or(1.0).max(1.0)).min(1.0),
                };
                local += w * share;
                all += w;
            }
        }
        if all > 0.0 {
            bound = bound.min(local / all);
        }
    }
    bound.clamp(f64::MIN_POSITIVE, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::autonuma_bench;

    fn bound(machine: &str, test: &str) -> f64 {
        let t = Topology::preset(machine).unwrap();
        local_share_bound(&autonuma_bench::spec(test, &t, 1.0).unwrap(), &t)
    }

    #[test]
    fn numa01_is_bounded_by_the_nodes_its_threads_need() {
        assert_eq!(bound("autonuma-2s12c-24g", "numa01"), 1.0);
        assert_eq!(bound("article-4n96", "numa01"), 0.5);
        assert_eq!(bound("ring-8n64c", "numa01"), 0.25);
        assert!((bound("numaconnect-288c", "numa01") - 8.0 / 144.0).abs() < 1e-12);
    }

    #[test]
    fn per_thread_slices_can_always_be_local() {
        for m in ["autonuma-2s12c-24g", "article-4n96", "ring-8n64c", "numaconnect-288c"] {
            for test in ["numa01_THREAD_ALLOC", "numa02", "numa02_SMT"] {
                assert_eq!(bound(m, test), 1.0, "{m} {test}");
            }
        }
    }
}
