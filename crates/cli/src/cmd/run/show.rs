//! `--show`: the calling process's NUMA policy, in numactl's words.
//!
//! The text is numactl 2.0.16's `show()` (numactl.c) byte for byte, checked against the real
//! numactl in `tests/run.rs`:
//!
//! ```text
//!   policy: bind                   policy_name(): default preferred bind interleave local
//!                                  preferred-many, else "[N]" (e.g. [8194] = bind|NUMA_BALANCING)
//!   preferred node: 0              by mode: preferred -> first node (0 if none); default ->
//!                                  "current"; interleave -> "N (interleave next)"; bind -> first
//!                                  membind node; preferred-many -> "N (preferred-many)", N being
//!                                  get_mempolicy(MPOL_F_NODE) or 0 when that fails.
//!                                  Any other mode prints nothing, not even the newline, so the next
//!                                  line follows on the same line ("preferred node: physcpubind:");
//!                                  kept, since that is what numactl prints for local.
//!   interleavemask: 0 1            interleave only, then "interleavenode: N"
//!   physcpubind: 0 1               sched_getaffinity
//!   cpubind: 0                     nodes of Mems_allowed whose CPUs meet the affinity
//!   nodebind: 0                    the same again (numactl keeps both names)
//!   membind: 0                     the bind nodes when the mode is exactly bind, else Mems_allowed
//!   preferred: 0                   the node mask get_mempolicy returned, whatever the mode
//! ```
//!
//! Every list is ids followed by a space each (`"0 1 "`), then a newline.
//!
//! numactl 2.0.16 does not know weighted-interleave (it would print `policy: [6]`); we print
//! `policy: weighted-interleave` and `preferred node: N (weighted interleave next)`.

use std::fmt::Write;

use anyhow::{Context, Result};
use numapilot_actuate::{CurrentPolicy, Mode};
use numapilot_topology::{CpuSet, IdSet, NodeSet, Topology};

use super::system::SystemView;

/// Everything `--show` prints that comes from the kernel and this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShowState {
    /// `get_mempolicy(&mode, mask, ...)`.
    pub policy: CurrentPolicy,
    /// `get_mempolicy(&node, NULL, 0, 0, MPOL_F_NODE)`, 0 when refused (numactl's
    /// `numa_get_interleave_node`).
    pub interleave_next: u32,
    /// `sched_getaffinity(0)`.
    pub affinity: CpuSet,
    /// libnuma's `numa_all_nodes_ptr`: Mems_allowed, or every node when that is empty.
    pub all_nodes: NodeSet,
}

impl ShowState {
    /// Reads the calling thread's state (read-only calls).
    pub fn gather(sys: &SystemView) -> Result<ShowState> {
        let policy = numapilot_actuate::get_mempolicy().context("reading the memory policy")?;
        let affinity = numapilot_actuate::sched_getaffinity(0).context("reading the CPU affinity")?;
        let interleave_next = numapilot_actuate::interleave_next_node().unwrap_or(0);
        Ok(ShowState { policy, interleave_next, affinity, all_nodes: sys.all_nodes() })
    }
}

fn mask(name: &str, set: &IdSet) -> String {
    let mut s = format!("{name}: ");
    for id in set.iter() {
        let _ = write!(s, "{id} ");
    }
    s.push('\n');
    s
}

/// numactl's `find_first`: the lowest id, or -1.
fn first(set: &IdSet) -> i64 {
    IdSet::first(set).map_or(-1, i64::from)
}

/// The `--show` text; `topo` gives the CPUs of each node.
pub fn render(st: &ShowState, topo: &Topology) -> String {
    let raw = st.policy.raw_mode;
    // The mode of the raw value, flags included, as numactl switches on it: bind | NUMA_BALANCING
    // (8194) is no mode at all here and prints as `[8194]`.
    let mode = Mode::from_raw(raw);
    let nodes = &st.policy.nodes;
    let membind = if mode == Some(Mode::Bind) { nodes.clone() } else { st.all_nodes.clone() };
    let cur = st.interleave_next;
    let name = mode.map_or_else(|| format!("[{raw}]"), |m| m.name().to_string());
    let mut out = format!("policy: {name}\n");
    out.push_str("preferred node: ");
    match mode {
        Some(Mode::Preferred) => {
            let _ = writeln!(out, "{}", if nodes.is_empty() { 0 } else { first(nodes) });
        }
        Some(Mode::Default) => out.push_str("current\n"),
        Some(Mode::Interleave) => {
            let _ = writeln!(out, "{cur} (interleave next)");
        }
        Some(Mode::Bind) => {
            let _ = writeln!(out, "{}", first(&membind));
        }
        Some(Mode::PreferredMany) => {
            let _ = writeln!(out, "{cur} (preferred-many)");
        }
        Some(Mode::WeightedInterleave) => {
            let _ = writeln!(out, "{cur} (weighted interleave next)");
        }
        Some(Mode::Local) | None => {}
    }
    if mode == Some(Mode::Interleave) {
        out.push_str(&mask("interleavemask", nodes));
        let _ = writeln!(out, "interleavenode: {cur}");
    }
    out.push_str(&mask("physcpubind", &st.affinity));
    let cpubind = topo.nodes_of_cpus(&st.affinity).intersection(&st.all_nodes);
    out.push_str(&mask("cpubind", &cpubind));
    out.push_str(&mask("nodebind", &cpubind));
    out.push_str(&mask("membind", &membind));
    out.push_str(&mask("preferred", nodes));
    out
}

#[cfg(test)]
mod tests {
    use super::super::system::tests::topo;
    use super::*;
    use numapilot_actuate::ModeFlags;

    fn set(s: &str) -> IdSet {
        IdSet::parse_list(s).unwrap()
    }

    fn state(raw: i32, nodes: &str, affinity: &str) -> ShowState {
        let mode = Mode::from_raw(raw & 0xff);
        ShowState {
            policy: CurrentPolicy {
                raw_mode: raw,
                mode,
                flags: ModeFlags::from_bits_truncate(raw as u32),
                nodes: set(nodes),
            },
            interleave_next: 1,
            affinity: set(affinity),
            all_nodes: set("0-1"),
        }
    }

    /// `--show` on two nodes, 0 (CPUs 0-3) and 1 (CPUs 4-7).
    fn render(st: &ShowState) -> String {
        super::render(st, &topo(&[(0, "0-3", 1 << 20), (1, "4-7", 1 << 20)]))
    }

    #[test]
    fn default_policy_two_nodes() {
        assert_eq!(
            render(&state(0, "", "0-7")),
            "policy: default\npreferred node: current\nphyscpubind: 0 1 2 3 4 5 6 7 \ncpubind: 0 1 \n\
             nodebind: 0 1 \nmembind: 0 1 \npreferred: \n"
        );
    }

    #[test]
    fn bind_on_node_1_with_its_cpus() {
        assert_eq!(
            render(&state(2, "1", "4-7")),
            "policy: bind\npreferred node: 1\nphyscpubind: 4 5 6 7 \ncpubind: 1 \nnodebind: 1 \nmembind: 1 \n\
             preferred: 1 \n"
        );
    }

    #[test]
    fn interleave_prints_mask_and_next_node() {
        assert_eq!(
            render(&state(3, "0-1", "0")),
            "policy: interleave\npreferred node: 1 (interleave next)\ninterleavemask: 0 1 \ninterleavenode: 1\n\
             physcpubind: 0 \ncpubind: 0 \nnodebind: 0 \nmembind: 0 1 \npreferred: 0 1 \n"
        );
    }

    #[test]
    fn local_and_flagged_modes_keep_numactls_missing_newline() {
        let out = render(&state(4, "", "0"));
        assert!(out.starts_with("policy: local\npreferred node: physcpubind: 0 \n"), "{out}");
        // bind | MPOL_F_NUMA_BALANCING: numactl prints the raw number, and membind falls back to
        // Mems_allowed because the mode is not exactly bind.
        let out = render(&state(8194, "1", "0"));
        assert!(out.starts_with("policy: [8194]\npreferred node: physcpubind: 0 \n"), "{out}");
        assert!(out.contains("\nmembind: 0 1 \npreferred: 1 \n"), "{out}");
    }

    #[test]
    fn preferred_and_preferred_many() {
        assert!(render(&state(1, "1", "0")).starts_with("policy: preferred\npreferred node: 1\n"));
        let out = render(&state(5, "0-1", "0"));
        assert!(out.starts_with("policy: preferred-many\npreferred node: 1 (preferred-many)\n"), "{out}");
        assert!(out.ends_with("preferred: 0 1 \n"));
    }
}
