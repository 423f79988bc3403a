//! `/proc/PID/sched` and `/proc/PID/task/TID/sched`: the scheduler's debug view of one task, including
//! the kernel's automatic NUMA balancing (AutoNUMA) statistics.
//!
//! Written by `proc_sched_show_task()` and `sched_show_numa()` / `print_numa_stats()` in
//! `kernel/sched/debug.c`. Checked against 6.18 (this host) and 6.12 (rig guests); the NUMA block has
//! had this shape since 4.x:
//!
//! ```text
//!   cat (8564, #threads: 1)
//!   -------------------------------------------------------------------
//!   se.sum_exec_runtime                          :             1.234567     <- "%14Ld.%06ld": ms.ns
//!   se.nr_migrations                             :                    0     <- "%21Ld"
//!   ...
//!   clock-delta                                  :                   77
//!   mm->numa_scan_seq                            :                    0     <- only for tasks with an mm
//!   numa_pages_migrated                          :                    0
//!   numa_preferred_nid                           :                   -1     <- -1: none
//!   total_numa_faults                            :                    0
//!   current_node=0, numa_group_id=0                                         <- group 0: no group
//!   numa_faults node=0 task_private=0 task_shared=0 group_private=0 group_shared=0   <- one per online node
//! ```
//!
//! The NUMA block exists when the kernel is built with `CONFIG_NUMA_BALANCING`, whether or not balancing
//! is switched on (`/proc/sys/kernel/numa_balancing`); without it the block is absent and
//! [`SchedInfo::numa`] is `None`. Fault counts are the kernel's decayed averages (halved at each scan
//! period, `task_numa_placement()` in `kernel/sched/fair.c`), not lifetime totals; `numa_pages_migrated`
//! is a lifetime count of pages. Units: runtime in ns (printed as ms with 6 decimals), others counts.

use serde::{Deserialize, Serialize};

use super::num;
use crate::error::{FileKind, ParseError};

/// NUMA fault averages of one task on one node (`numa_faults node=...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeFaults {
    /// Kernel node id.
    pub node: u32,
    /// Faults on private pages (last accessed by this task), task-level.
    pub task_private: u64,
    /// Faults on shared pages, task-level.
    pub task_shared: u64,
    /// Private faults of the task's NUMA group (0 without a group).
    pub group_private: u64,
    /// Shared faults of the task's NUMA group.
    pub group_shared: u64,
}

/// The NUMA-balancing block of a sched file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedNuma {
    /// `mm->numa_scan_seq`: scan passes over the address space; `None` for kernel threads (no mm).
    pub scan_seq: Option<u64>,
    /// `numa_pages_migrated`: pages migrated by balancing for this task, lifetime.
    pub pages_migrated: u64,
    /// `numa_preferred_nid`: the node balancing wants the task on; `None` when -1.
    pub preferred_nid: Option<u32>,
    /// `total_numa_faults`.
    pub total_faults: u64,
    /// `current_node`: node of the CPU the task is on.
    pub current_node: u32,
    /// `numa_group_id`: id of the task's NUMA group (tasks sharing memory); `None` when 0 (no group).
    pub group_id: Option<u32>,
    /// Per-node fault averages, one entry per online node.
    pub faults: Vec<NodeFaults>,
}

/// The parts of a sched file numapilot uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedInfo {
    /// `se.sum_exec_runtime`: CPU time consumed, ns.
    pub sum_exec_runtime_ns: u64,
    /// `se.nr_migrations`: times the task moved between CPUs.
    pub nr_migrations: u64,
    /// The NUMA-balancing block, `None` when the kernel has no `CONFIG_NUMA_BALANCING`.
    pub numa: Option<SchedNuma>,
}

/// Bytes of a task's comm at most (`TASK_COMM_LEN` 16 with its NUL, include/linux/sched.h).
const COMM_MAX_BYTES: usize = 15;

/// Parses a sched file.
pub fn parse_sched(input: &str) -> Result<SchedInfo, ParseError> {
    let k = FileKind::Sched;
    super::complete(k, input)?;
    let mut runtime = None;
    let mut migrations = None;
    let mut clock_delta = false;
    let mut scan_seq = None;
    let mut pages_migrated = None;
    let mut preferred = None;
    let mut total_faults = None;
    let mut current = None;
    let mut faults = Vec::new();
    // The header, "comm (pid, #threads: N)" and a rule of 67 dashes under it: comm is free text of
    // up to 15 bytes (TASK_COMM_LEN - 1) that any process may set (prctl(PR_SET_NAME)), newlines
    // included, so it may span lines and read like the fields below ("x\ncurrent_node=").
    // Everything up to the first line of more dashes than a comm can hold is header; without such
    // a rule, line 1.
    let body =
        input.lines().position(|l| l.len() > COMM_MAX_BYTES && l.bytes().all(|b| b == b'-')).map_or(1, |i| i + 1);
    for (i, line) in input.lines().enumerate().skip(body) {
        let n = i + 1;
        if let Some(rest) = line.strip_prefix("numa_faults ") {
            faults.push(parse_faults(rest, n, line)?);
            continue;
        }
        if let Some(rest) = line.strip_prefix("current_node=") {
            let (node, group) = rest
                .split_once(", numa_group_id=")
                .ok_or_else(|| ParseError::new(k, n, Some("numa_group_id"), line, "no numa_group_id"))?;
            let node: u32 = num(k, n, "current_node", line, node)?;
            let group: u32 = num(k, n, "numa_group_id", line, group)?;
            current = Some((node, group));
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue; // the dashed rule under the header
        };
        let v = value.trim();
        match key.trim_end() {
            "se.sum_exec_runtime" => runtime = Some(ms_ns(n, line, v)?),
            "se.nr_migrations" => migrations = Some(num(k, n, "se.nr_migrations", line, v)?),
            "clock-delta" => clock_delta = true,
            "mm->numa_scan_seq" => scan_seq = Some(num(k, n, "mm->numa_scan_seq", line, v)?),
            "numa_pages_migrated" => pages_migrated = Some(num(k, n, "numa_pages_migrated", line, v)?),
            "numa_preferred_nid" => preferred = Some(num::<i64>(k, n, "numa_preferred_nid", line, v)?),
            "total_numa_faults" => total_faults = Some(num(k, n, "total_numa_faults", line, v)?),
            _ => {}
        }
    }
    let missing = |field: &'static str| ParseError::new(k, 0, Some(field), "", format!("no {field} line (truncated?)"));
    let sum_exec_runtime_ns = runtime.ok_or_else(|| missing("se.sum_exec_runtime"))?;
    let nr_migrations = migrations.ok_or_else(|| missing("se.nr_migrations"))?;
    if !clock_delta {
        return Err(missing("clock-delta"));
    }
    let any_numa = scan_seq.is_some()
        || pages_migrated.is_some()
        || preferred.is_some()
        || total_faults.is_some()
        || current.is_some()
        || !faults.is_empty();
    let numa = if any_numa {
        let (current_node, group) = current.ok_or_else(|| missing("current_node"))?;
        if faults.is_empty() {
            return Err(missing("numa_faults"));
        }
        let preferred = preferred.ok_or_else(|| missing("numa_preferred_nid"))?;
        Some(SchedNuma {
            scan_seq,
            pages_migrated: pages_migrated.ok_or_else(|| missing("numa_pages_migrated"))?,
            preferred_nid: u32::try_from(preferred).ok(),
            total_faults: total_faults.ok_or_else(|| missing("total_numa_faults"))?,
            current_node,
            group_id: (group != 0).then_some(group),
            faults,
        })
    } else {
        None
    };
    Ok(SchedInfo { sum_exec_runtime_ns, nr_migrations, numa })
}

/// "1234.567890" (ms with 6 decimals, `SPLIT_NS`) to ns.
fn ms_ns(n: usize, line: &str, v: &str) -> Result<u64, ParseError> {
    let k = FileKind::Sched;
    let (ms, frac) =
        v.split_once('.').ok_or_else(|| ParseError::new(k, n, Some("se.sum_exec_runtime"), line, "no '.'"))?;
    if frac.len() != 6 {
        return Err(ParseError::new(k, n, Some("se.sum_exec_runtime"), line, "fraction is not 6 digits"));
    }
    let ms: u64 = num(k, n, "se.sum_exec_runtime", line, ms)?;
    let ns: u64 = num(k, n, "se.sum_exec_runtime", line, frac)?;
    Ok(ms.saturating_mul(1_000_000).saturating_add(ns))
}

fn parse_faults(rest: &str, n: usize, line: &str) -> Result<NodeFaults, ParseError> {
    let k = FileKind::Sched;
    let mut vals: [Option<u64>; 5] = [None; 5];
    const KEYS: [&str; 5] = ["node", "task_private", "task_shared", "group_private", "group_shared"];
    for tok in rest.split_ascii_whitespace() {
        let (key, value) =
            tok.split_once('=').ok_or_else(|| ParseError::new(k, n, Some("numa_faults"), line, "word without '='"))?;
        if let Some(i) = KEYS.iter().position(|k| *k == key) {
            vals[i] = Some(num(k, n, KEYS[i], line, value)?);
        }
    }
    let get = |i: usize| vals[i].ok_or_else(|| ParseError::new(k, n, Some(KEYS[i]), line, "missing"));
    Ok(NodeFaults {
        node: u32::try_from(get(0)?).map_err(|_| ParseError::new(k, n, Some("node"), line, "node id too large"))?,
        task_private: get(1)?,
        task_shared: get(2)?,
        group_private: get(3)?,
        group_shared: get(4)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CAT: &str = include_str!("../../tests/data/host-6.18/sched-cat");
    const KTHREADD: &str = include_str!("../../tests/data/host-6.18/sched-kthreadd");

    #[test]
    fn parses_a_user_task() {
        let s = parse_sched(CAT).unwrap();
        let numa = s.numa.unwrap();
        assert_eq!(numa.scan_seq, Some(0));
        assert_eq!(numa.preferred_nid, None);
        assert_eq!(numa.group_id, None);
        assert_eq!(numa.current_node, 0);
        assert_eq!(numa.faults.len(), 1);
        assert_eq!(numa.faults[0].node, 0);
    }

    #[test]
    fn a_name_with_newlines_stays_in_the_header() {
        // Any process may name itself "x\ncurrent_node=" (15 bytes, prctl(PR_SET_NAME)): the kernel
        // prints the raw comm, so the header spans two lines and the second reads like a field.
        let want = parse_sched(CAT).unwrap();
        let (_, body) = CAT.split_once('\n').unwrap();
        for comm in ["x\ncurrent_node=", "x\nnuma_faults a", "\n-------\nse.nr", "a:\nb:1\nc"] {
            assert!(comm.len() <= COMM_MAX_BYTES, "{comm:?}");
            let text = format!("{comm} (4242, #threads: 1)\n{body}");
            assert_eq!(parse_sched(&text).unwrap(), want, "{comm:?}");
        }
    }

    #[test]
    fn kernel_thread_has_no_scan_seq() {
        let s = parse_sched(KTHREADD).unwrap();
        let numa = s.numa.unwrap();
        assert_eq!(numa.scan_seq, None);
        assert!(s.sum_exec_runtime_ns > 0);
    }

    /// A thread the kernel's NUMA balancing worked on, in the 2-node rig guest (6.12): it first-touched its pages
    /// on node 0, was moved to node 1's CPUs and kept writing them (rig/scenarios/capture.sh). Copied unchanged
    /// from fixtures/rig-6.12-2node/proc/187/task/193/sched of that capture.
    const BALANCED: &str = include_str!("../../tests/data/rig-6.12-2node/sched-balanced");

    #[test]
    fn numa_balancing_values_of_a_real_balanced_thread() {
        let s = parse_sched(BALANCED).unwrap();
        let numa = s.numa.clone().unwrap();
        assert_eq!(numa.preferred_nid, Some(1));
        assert_eq!(numa.current_node, 1);
        assert!(numa.pages_migrated > 0, "{numa:?}");
        assert!(numa.total_faults > 0, "{numa:?}");
        assert_eq!(numa.scan_seq, Some(2));
        // The thread joined a NUMA group (the kernel names it after the task that created it: this thread).
        assert_eq!(numa.group_id, Some(193));
        assert_eq!(numa.faults.iter().map(|f| f.node).collect::<Vec<_>>(), [0, 1]);
        // The faults that made node 1 preferred were recorded on node 1, where the pages went.
        let f1 = numa.faults[1];
        assert!(f1.task_private > 0 && f1.group_private > 0, "{numa:?}");
        assert_eq!(
            numa.faults[0],
            NodeFaults { node: 0, task_private: 0, task_shared: 0, group_private: 0, group_shared: 0 }
        );
        assert_eq!(f1.task_private + f1.task_shared, numa.total_faults);
        assert!(s.nr_migrations > 0, "moved to node 1's CPUs: {s:?}");
    }

    #[test]
    fn runtime_is_in_ns() {
        let text = CAT.replace(
            "se.sum_exec_runtime                          :             0.000000",
            "se.sum_exec_runtime                          :          1234.567891",
        );
        assert_eq!(parse_sched(&text).unwrap().sum_exec_runtime_ns, 1_234_567_891);
    }

    #[test]
    fn without_numa_balancing_numa_is_none() {
        let text: String =
            CAT.lines().take_while(|l| !l.starts_with("mm->numa_scan_seq")).map(|l| format!("{l}\n")).collect();
        assert_eq!(parse_sched(&text).unwrap().numa, None);
        assert!(parse_sched(CAT.trim_end()).is_err());
    }

    #[test]
    fn truncated_and_malformed_are_errors() {
        let lines: Vec<&str> = CAT.lines().collect();
        let numa_start = lines.iter().position(|l| l.starts_with("mm->numa_scan_seq")).unwrap();
        for cut in 0..lines.len() {
            let r = parse_sched(&lines[..cut].iter().map(|l| format!("{l}\n")).collect::<String>());
            // Cutting exactly before the NUMA block looks like a kernel without it: not detectable.
            if cut == numa_start {
                assert!(r.unwrap().numa.is_none());
            } else {
                assert!(r.is_err(), "cut after {cut} lines parsed");
            }
        }
        assert!(parse_sched(&CAT.replace("task_shared=0", "task_shared=x")).is_err());
        assert!(parse_sched(&CAT.replace("numa_group_id=0", "numa_group_id=")).is_err());
        assert!(parse_sched(&CAT.replace("task_private=0", "task_private0")).is_err());
    }

    proptest! {
        #[test]
        fn arbitrary_input_never_panics(s in "\\PC*") {
            let _ = parse_sched(&s);
        }

        #[test]
        fn arbitrary_prefix_never_panics(cut in 0usize..4000) {
            let cut = cut.min(CAT.len());
            if CAT.is_char_boundary(cut) {
                let _ = parse_sched(&CAT[..cut]);
            }
        }
    }
}
