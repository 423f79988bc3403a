//! Rule futile-move-backs-off: a page move that moved (almost) nothing is not asked for again until
//! something it depends on changes.
//!
//! # Problem
//!
//! The memory rules plan from the model: memory of a process outside the nodes its threads are
//! placed on is remote, and a move of it is asked for. When the host moves none of it, the next
//! model shows the same memory in the same place, and the next decision asks for the same move,
//! and so on for as long as the process lives: one journal line and one numa_maps walk per
//! decision, for nothing. The known case is a child forked without exec that never wrote the heap
//! it inherited: numa_maps shows that heap anonymous, so it counts as the child's own memory (a
//! forked worker that did write its heap keeps a few pages shared with its parent and the rest of
//! it moves, so anonymous memory with `mapmax` > 1 is rightly counted own), but the kernel moves no
//! page another process maps too without `MPOL_MF_MOVE_ALL`, which the daemon never uses. Pages
//! pinned or locked, or a destination node that is full, give the same loop.
//!
//! # Approach
//!
//! ```text
//!   a page action's outcome: Applied / Partial in its own step (Policy::observe_outcomes), or, when
//!   the host moved it in the background (Started), when the move ends (Policy::observe_finished;
//!   a background move that ends Refused counts as 0 moved: the refusal back-off never sees it)
//!     asked = its pages (max_pages, or the ranges' length), at most what the host let it move
//!             (Started's pages: a move the host's own budget cut is judged on the cut)
//!     moved < futile_move_share x asked -> futile: n = futile moves of this kind in a row;
//!                                          it starts no memory hold (nothing moved: nothing
//!                                          can bounce back)
//!     otherwise                         -> the record of this kind ends
//!   the first decision after: the process's own memory by node is noted
//!   a page job of the process of the same kind (MigratePages, MoveRanges, Interleave) to nodes
//!   that include the futile move's destination
//!     waits while  decision < the futile one + min(2^n - 1, futile_backoff_max_decisions) + 1
//!            and   its own memory by node changed by at most futile_move_memory_change of it
//!     otherwise    is asked, its reason saying why it is asked again and the last figures
//!   a move to other nodes (its threads placed elsewhere) is another move: it never waits
//! ```
//!
//! `explain` shows a move that waits with its figures (kind, nodes, asked, moved, until when).
//!
//! # Limits
//!
//! What changed cannot always be seen: the parent of a forked child exiting makes the child's
//! heap movable without changing its memory by node; the back-off brings that move back. A host
//! that moves synchronously and cuts a move to its own budget without saying so (the live daemon
//! with `background_moves` off, whose budget is the policy's own by default) has that cut judged
//! against the full ask.

use std::collections::BTreeMap;

use numapilot_model::Model;
use numapilot_topology::NodeSet;

use super::{Adaptive, BASE_PAGE_BYTES};
use crate::action::{nearest_memory_node, Action, ActionKind, Outcome};

/// Rule name, as reasons and `explain` show it.
pub(crate) const FUTILE_RULE: &str = "futile-move-backs-off";

const MIB: f64 = 1048576.0;

/// The kinds of page action a futile move holds back (each on its own: a futile MigratePages does
/// not hold back the MoveRanges of hot ranges elsewhere in the memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum MoveKind {
    Migrate,
    Ranges,
    Interleave,
}

impl MoveKind {
    /// The kind of a page action; `None` for a SetAffinity.
    pub(crate) fn of(kind: &ActionKind) -> Option<Self> {
        match kind {
            ActionKind::SetAffinity { .. } => None,
            ActionKind::MigratePages { .. } => Some(Self::Migrate),
            ActionKind::MoveRanges { .. } => Some(Self::Ranges),
            ActionKind::Interleave { .. } => Some(Self::Interleave),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Migrate => "MigratePages",
            Self::Ranges => "MoveRanges",
            Self::Interleave => "Interleave",
        }
    }
}

/// A futile move of one process, of one kind.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Futile {
    /// Start time of the process (identity with the pid).
    pub(crate) starttime: u64,
    /// Futile moves of this kind in a row.
    pub(crate) n: u32,
    /// Decision at which the last one was judged (its outcome heard).
    pub(crate) period: u64,
    /// First decision at which the same move may be asked again whatever else holds.
    pub(crate) until: u64,
    /// Kernel ids of the nodes it was to move memory to.
    pub(crate) to: NodeSet,
    /// Base pages it asked for (at most the host's allowance).
    pub(crate) asked: u64,
    /// Base pages it moved.
    pub(crate) moved: u64,
    /// The rule that asked for it.
    pub(crate) rule: String,
    /// The process's own memory by node (dense index, bytes) at the first decision after it was
    /// judged, when the move's result is in the model; `None` until then.
    pub(crate) mem: Option<Vec<u64>>,
}

/// The futile moves by process and kind.
pub(crate) type Futiles = BTreeMap<(u32, MoveKind), Futile>;

/// What a page job meets ([`Adaptive::futile_check`]).
pub(crate) enum Check {
    /// No futile move of its kind to its nodes: planned as usual.
    Free,
    /// A futile move of its kind to its nodes, nothing changed since: not planned.
    Waits,
    /// A futile move of its kind to its nodes, but something changed or the back-off is over:
    /// planned, with this note for its reason.
    Again(String),
}

/// Base pages a page action asks for: its `max_pages`, or its ranges' length; `None` when it sets
/// no bound (nothing to judge against) or is no page action.
pub(crate) fn asked(kind: &ActionKind) -> Option<u64> {
    match kind {
        ActionKind::SetAffinity { .. } => None,
        ActionKind::MigratePages { max_pages, .. } | ActionKind::Interleave { max_pages, .. } => *max_pages,
        ActionKind::MoveRanges { ranges, .. } => Some(ranges.iter().map(|r| r.1 / BASE_PAGE_BYTES).sum()),
    }
}

/// The nodes a page action moves memory to.
fn destination(kind: &ActionKind) -> NodeSet {
    match kind {
        ActionKind::SetAffinity { .. } => NodeSet::new(),
        ActionKind::MigratePages { to, .. } => to.clone(),
        ActionKind::MoveRanges { to, .. } => std::iter::once(*to).collect(),
        ActionKind::Interleave { nodes, .. } => nodes.clone(),
    }
}

/// The change between two readings of memory by node, bytes: the larger of what came and what
/// went, over all nodes (a move of X bytes between nodes is X, so is growth by X).
fn mem_change(then: &[u64], now: &[u64]) -> u64 {
    let (mut came, mut went) = (0u64, 0u64);
    for i in 0..then.len().max(now.len()) {
        let (a, b) = (then.get(i).copied().unwrap_or(0), now.get(i).copied().unwrap_or(0));
        if b > a {
            came += b - a;
        } else {
            went += a - b;
        }
    }
    came.max(went)
}

impl Futile {
    /// The record as one line: what was asked, what moved, when it may be asked again.
    pub(crate) fn describe(&self, kind: MoveKind, model: &Model) -> String {
        let t = &model.tunables;
        format!(
            "[{FUTILE_RULE}] its last {} to nodes {} (rule {}, decision {}) asked {} pages and moved {} (under {:.0}%), {} in a row: not asked again before decision {} unless its own memory by node changes by more than {:.0}% or its threads are placed elsewhere",
            kind.name(),
            self.to,
            self.rule,
            self.period,
            self.asked,
            self.moved,
            t.futile_move_share * 100.0,
            self.n,
            self.until,
            t.futile_move_memory_change * 100.0
        )
    }
}

impl Adaptive {
    /// Judges the outcome of page action `action` (rule futile-move-backs-off, see the module
    /// essay): `allowance` is what the host let it move when it said so (a background move's
    /// `Started` pages); `finished`: the outcome of a background move that ended, where a
    /// refusal counts as nothing moved.
    pub(crate) fn judge_move(
        &mut self,
        model: &Model,
        action: &Action,
        outcome: &Outcome,
        allowance: Option<u64>,
        finished: bool,
    ) {
        let Some(kind) = MoveKind::of(&action.kind) else { return };
        let (pid, starttime) = (action.target.pid, action.target.starttime);
        let moved = match outcome {
            Outcome::Applied { pages_moved } | Outcome::Partial { pages_moved, .. } => *pages_moved,
            Outcome::Refused { .. } if finished => 0,
            _ => return,
        };
        let Some(asked) = asked(&action.kind).map(|a| allowance.map_or(a, |l| a.min(l))) else { return };
        let share = model.tunables.futile_move_share;
        if asked == 0 || share <= 0.0 {
            return;
        }
        if moved as f64 >= share * asked as f64 {
            self.futile.remove(&(pid, kind));
            return;
        }
        let n = match self.futile.get(&(pid, kind)) {
            Some(f) if f.starttime == starttime => f.n.saturating_add(1),
            _ => 1,
        };
        let max = u64::from(model.tunables.futile_backoff_max_decisions.max(1));
        let wait = ((1u64 << n.min(62)) - 1).min(max);
        let to = destination(&action.kind);
        // Nothing moved, so nothing can bounce back: the memory hold this move started (its own,
        // not one to other nodes) goes with it, and a move towards the threads' next nodes is not
        // held back by it.
        if let Some(st) = self.procs.get_mut(&pid).filter(|s| s.starttime == starttime) {
            if st.mem_move.as_ref().is_some_and(|mv| mv.nodes.is_subset(&to)) {
                st.mem_move = None;
            }
        }
        let period = self.period;
        self.futile.insert(
            (pid, kind),
            Futile {
                starttime,
                n,
                period,
                until: period.saturating_add(wait).saturating_add(1),
                to,
                asked,
                moved,
                rule: action.reason.rule.clone(),
                mem: None,
            },
        );
    }

    /// Notes each futile move's process's own memory by node at the first decision after the
    /// move was judged (the model then shows what the move left), and drops the records of
    /// processes gone or replaced (another start time).
    pub(crate) fn note_futile_memory(&mut self, model: &Model) {
        self.futile.retain(|(pid, _), f| model.procs.get(pid).is_some_and(|p| p.starttime == f.starttime));
        self.started.retain(|(pid, _), (st, _)| model.procs.get(pid).is_some_and(|p| p.starttime == *st));
        for ((pid, _), f) in self.futile.iter_mut() {
            if f.mem.is_none() {
                f.mem = model.procs.get(pid).map(|p| p.own_mem_by_node());
            }
        }
    }

    /// Whether a page job of `pid` of `kind` to the nodes `dest` may be planned (see [`Check`]).
    pub(crate) fn futile_check(&self, model: &Model, pid: u32, kind: MoveKind, dest: &NodeSet) -> Check {
        let Some(p) = model.procs.get(&pid) else { return Check::Free };
        let Some(f) = self.futile.get(&(pid, kind)).filter(|f| f.starttime == p.starttime) else {
            return Check::Free;
        };
        // The same move: to nodes that include the futile one's, as the plan names them once a
        // node without memory is taken as the nearest with memory (rule memory-onto-memory-nodes).
        let same = f.to.is_subset(dest) || {
            let memory = model.topo.memory_nodes();
            f.to.is_subset(&dest.iter().map(|n| nearest_memory_node(&model.topo, &memory, n)).collect())
        };
        if !same {
            return Check::Free;
        }
        let t = &model.tunables;
        let last = format!(
            "its last {} to nodes {} (decision {}) asked {} pages and moved {}, {} in a row",
            kind.name(),
            f.to,
            f.period,
            f.asked,
            f.moved,
            f.n
        );
        let own = p.own_mem_by_node();
        if let Some(then) = &f.mem {
            let change = mem_change(then, &own);
            let of: u64 = then.iter().sum::<u64>().max(own.iter().sum());
            if change as f64 > t.futile_move_memory_change * of as f64 {
                return Check::Again(format!(
                    "[{FUTILE_RULE}] asked again: its own memory by node changed by {:.1} MiB (> {:.0}% of {:.1} MiB) since {last}",
                    change as f64 / MIB,
                    t.futile_move_memory_change * 100.0,
                    of as f64 / MIB
                ));
            }
        }
        if self.period >= f.until {
            return Check::Again(format!(
                "[{FUTILE_RULE}] asked again: the back-off is over (decision {}); {last}",
                f.until
            ));
        }
        Check::Waits
    }

    /// The futile moves of `pid` that hold its page moves back now, one line each, for `explain`.
    pub(crate) fn futile_waits(&self, model: &Model, pid: u32) -> Vec<String> {
        let Some(p) = model.procs.get(&pid) else { return Vec::new() };
        self.futile
            .range((pid, MoveKind::Migrate)..=(pid, MoveKind::Interleave))
            .filter(|(_, f)| f.starttime == p.starttime)
            .filter(|((_, kind), f)| matches!(self.futile_check(model, pid, *kind, &f.to), Check::Waits))
            .map(|((_, kind), f)| f.describe(*kind, model))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_of_memory_by_node_is_the_larger_of_what_came_and_what_went() {
        assert_eq!(mem_change(&[10, 0], &[10, 0]), 0);
        assert_eq!(mem_change(&[10, 0], &[4, 6]), 6, "6 moved between nodes");
        assert_eq!(mem_change(&[10, 0], &[10, 3]), 3, "3 more");
        assert_eq!(mem_change(&[10], &[2, 1]), 8, "a node more in the reading now");
    }

    #[test]
    fn the_pages_asked_are_the_bound_or_the_ranges() {
        let to: NodeSet = std::iter::once(1).collect();
        let mig = ActionKind::MigratePages { from: NodeSet::new(), to: to.clone(), max_pages: Some(7) };
        assert_eq!(asked(&mig), Some(7));
        let unbounded = ActionKind::MigratePages { from: NodeSet::new(), to, max_pages: None };
        assert_eq!(asked(&unbounded), None);
        let ranges = ActionKind::MoveRanges { ranges: vec![(0, 8192), (1 << 20, 4096)], to: 1 };
        assert_eq!(asked(&ranges), Some(3));
    }
}
