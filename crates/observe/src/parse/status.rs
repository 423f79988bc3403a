//! `/proc/PID/status` and `/proc/PID/task/TID/status`: `Key:<TAB>value` lines.
//!
//! Written by `proc_pid_status()` in `fs/proc/array.c` (`task_name`, `task_state`, `task_mem` in
//! `fs/proc/task_mmu.c`, `task_cpus_allowed`, `cpuset_task_status_allowed` in `kernel/cgroup/cpuset.c`,
//! `task_context_switch_counts`). Checked against 6.18 and 6.12; the lines used here exist since 2.6.26.
//!
//! ```text
//!   Name:   cat                   escaped comm ('\n' -> "\n", '\\' -> "\\\\")
//!   Tgid:   9895                  process id (thread group)
//!   Pid:    9895                  this task's id
//!   VmRSS:      1732 kB           only for tasks with an mm (absent for kernel threads)
//!   Threads:    1
//!   Cpus_allowed:       3         mask, 32-bit hex words, most significant first
//!   Cpus_allowed_list:  0-1
//!   Mems_allowed:       00000000,...,00000001   (MAX_NUMNODES bits)
//!   Mems_allowed_list:  0
//!   voluntary_ctxt_switches:    0
//!   nonvoluntary_ctxt_switches: 0    <- last line since 2.6.23: its absence means truncation
//! ```
//!
//! The affinity lines are per task: each thread can have its own CPU mask (`sched_setaffinity` on a
//! TID) and its own `Mems_allowed` (cpuset of the thread). `Cpus_allowed_list` is preferred over the
//! mask form when both are present; either alone is accepted.

use numapilot_topology::{CpuSet, IdSet, NodeSet};
use serde::{Deserialize, Serialize};

use super::num;
use crate::error::{FileKind, ParseError};

/// The fields of a status file numapilot uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskStatus {
    /// `Name:` the command name as the kernel escapes it for this file.
    pub name: String,
    /// `Tgid:` the process id.
    pub tgid: u32,
    /// `Pid:` this task's id.
    pub pid: u32,
    /// `PPid:` parent process id.
    pub ppid: u32,
    /// `Threads:` threads in the process.
    pub threads: u32,
    /// `VmRSS:` resident set, kB; `None` for kernel threads (no mm).
    pub vm_rss_kb: Option<u64>,
    /// `VmHWM:` peak resident set, kB; `None` for kernel threads.
    pub vm_hwm_kb: Option<u64>,
    /// `Kthread:` 1 for kernel threads (since 6.8); `None` on older kernels.
    pub kthread: Option<bool>,
    /// `Cpus_allowed_list` (or the mask form): CPUs the task may run on.
    pub cpus_allowed: CpuSet,
    /// `Mems_allowed_list` (or the mask form): nodes the task may allocate from (its cpuset).
    pub mems_allowed: NodeSet,
    /// `voluntary_ctxt_switches:`
    pub voluntary_ctxt_switches: u64,
    /// `nonvoluntary_ctxt_switches:`
    pub nonvoluntary_ctxt_switches: u64,
}

/// Parses a status file.
pub fn parse_status(input: &str) -> Result<TaskStatus, ParseError> {
    let k = FileKind::Status;
    super::complete(k, input)?;
    let mut name = None;
    let mut tgid = None;
    let mut pid = None;
    let mut ppid = None;
    let mut threads = None;
    let mut vm_rss_kb = None;
    let mut vm_hwm_kb = None;
    let mut kthread = None;
    let mut cpus_list = None;
    let mut cpus_mask = None;
    let mut mems_list = None;
    let mut mems_mask = None;
    let mut vol = None;
    let mut nonvol = None;
    // Most of the ~57 lines are not wanted: a first-letter test skips them before any string compare.
    let wanted = |b: u8| matches!(b, b'N' | b'T' | b'P' | b'V' | b'K' | b'C' | b'M' | b'v' | b'n');
    for (n, line, colon) in super::key_lines(input, wanted) {
        let Some(colon) = colon else {
            if line.as_bytes().first().is_some_and(|&b| wanted(b)) || line.is_empty() {
                return Err(ParseError::new(k, n, None, line, "no ':' in line"));
            }
            continue;
        };
        let (key, value) = (&line[..colon], &line[colon + 1..]);
        let v = value.trim_ascii();
        match key.as_bytes() {
            b"Name" => {
                // Only the single separating tab is stripped: a name may end in spaces.
                name = Some(value.strip_prefix('\t').unwrap_or(value).to_string());
            }
            b"Tgid" => tgid = Some(num(k, n, "Tgid", line, v)?),
            b"Pid" => pid = Some(num(k, n, "Pid", line, v)?),
            b"PPid" => ppid = Some(num(k, n, "PPid", line, v)?),
            b"Threads" => threads = Some(num(k, n, "Threads", line, v)?),
            b"VmRSS" => vm_rss_kb = Some(kb(n, "VmRSS", line, v)?),
            b"VmHWM" => vm_hwm_kb = Some(kb(n, "VmHWM", line, v)?),
            b"Kthread" => kthread = Some(num::<u8>(k, n, "Kthread", line, v)? != 0),
            b"Cpus_allowed_list" => cpus_list = Some(set(n, "Cpus_allowed_list", line, v, false)?),
            b"Cpus_allowed" => cpus_mask = Some((n, line, v)),
            b"Mems_allowed_list" => mems_list = Some(set(n, "Mems_allowed_list", line, v, false)?),
            b"Mems_allowed" => mems_mask = Some((n, line, v)),
            b"voluntary_ctxt_switches" => vol = Some(super::num_u64(k, n, "voluntary_ctxt_switches", line, v)?),
            b"nonvoluntary_ctxt_switches" => {
                nonvol = Some(super::num_u64(k, n, "nonvoluntary_ctxt_switches", line, v)?)
            }
            _ => {}
        }
    }
    let missing = |field: &'static str| ParseError::new(k, 0, Some(field), "", format!("no {field} line (truncated?)"));
    // The mask forms say the same as the list forms and are only looked at when those are missing:
    // decoding (or even checking) the 1024-bit Mems_allowed mask of every thread was a measurable part
    // of a full observation.
    let from_mask =
        |m: Option<(usize, &str, &str)>, field| m.map(|(n, line, v)| set(n, field, line, v, true)).transpose();
    if cpus_list.is_none() {
        cpus_list = from_mask(cpus_mask, "Cpus_allowed")?;
    }
    if mems_list.is_none() {
        mems_list = from_mask(mems_mask, "Mems_allowed")?;
    }
    Ok(TaskStatus {
        name: name.ok_or_else(|| missing("Name"))?,
        tgid: tgid.ok_or_else(|| missing("Tgid"))?,
        pid: pid.ok_or_else(|| missing("Pid"))?,
        ppid: ppid.ok_or_else(|| missing("PPid"))?,
        threads: threads.ok_or_else(|| missing("Threads"))?,
        vm_rss_kb,
        vm_hwm_kb,
        kthread,
        cpus_allowed: cpus_list.ok_or_else(|| missing("Cpus_allowed_list"))?,
        mems_allowed: mems_list.ok_or_else(|| missing("Mems_allowed_list"))?,
        voluntary_ctxt_switches: vol.ok_or_else(|| missing("voluntary_ctxt_switches"))?,
        nonvoluntary_ctxt_switches: nonvol.ok_or_else(|| missing("nonvoluntary_ctxt_switches"))?,
    })
}

fn kb(n: usize, field: &'static str, line: &str, v: &str) -> Result<u64, ParseError> {
    let digits = v
        .strip_suffix("kB")
        .ok_or_else(|| ParseError::new(FileKind::Status, n, Some(field), line, "value does not end in kB"))?;
    num(FileKind::Status, n, field, line, digits.trim_end())
}

fn set(n: usize, field: &'static str, line: &str, v: &str, mask: bool) -> Result<IdSet, ParseError> {
    let r = if mask { IdSet::parse_mask(v) } else { IdSet::parse_list(v) };
    r.map_err(|e| ParseError::new(FileKind::Status, n, Some(field), line, e.to_string()))
}

/// Escapes a raw command name (from `stat`) the way the kernel writes it in `status` (`Name:`):
/// `proc_task_name(..., escape=true)` calls `seq_escape_str(m, name, ESCAPE_SPACE | ESCAPE_SPECIAL,
/// "\n\\")`, so only newline and backslash are escaped (`fs/proc/array.c`, `lib/string_helpers.c`).
pub fn escape_comm(comm: &str) -> String {
    let mut out = String::with_capacity(comm.len());
    for c in comm.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SELF: &str = include_str!("../../tests/data/host-6.18/status-cat");
    const KTHREAD: &str = include_str!("../../tests/data/host-6.18/status-kthreadd");

    #[test]
    fn parses_a_user_process() {
        let s = parse_status(SELF).unwrap();
        assert_eq!(s.name, "cat");
        assert_eq!((s.tgid, s.pid, s.ppid, s.threads), (10126, 10126, 10123, 1));
        assert_eq!(s.vm_rss_kb, Some(1708));
        assert_eq!(s.vm_hwm_kb, Some(1708));
        assert_eq!(s.kthread, Some(false));
        assert_eq!(s.cpus_allowed.to_list(), "0-1");
        assert_eq!(s.mems_allowed.to_list(), "0");
        assert_eq!((s.voluntary_ctxt_switches, s.nonvoluntary_ctxt_switches), (0, 0));
    }

    #[test]
    fn kernel_thread_has_no_rss() {
        let s = parse_status(KTHREAD).unwrap();
        assert_eq!(s.name, "kthreadd");
        assert_eq!(s.vm_rss_kb, None);
        assert_eq!(s.kthread, Some(true));
    }

    #[test]
    fn mask_form_alone_is_enough() {
        let t: String = SELF
            .lines()
            .filter(|l| !l.starts_with("Cpus_allowed_list") && !l.starts_with("Mems_allowed_list"))
            .map(|l| format!("{l}\n"))
            .collect();
        let s = parse_status(&t).unwrap();
        assert_eq!(s.cpus_allowed.to_list(), "0-1");
        assert_eq!(s.mems_allowed.to_list(), "0");
    }

    #[test]
    fn truncation_is_detected() {
        // Cut after every line in turn: all but the full file miss a required line.
        let lines: Vec<&str> = SELF.lines().collect();
        for cut in 0..lines.len() {
            let t: String = lines[..cut].iter().map(|l| format!("{l}\n")).collect();
            assert!(parse_status(&t).is_err(), "cut after {cut} lines parsed");
        }
        // Cut inside the last value: "nonvoluntary_ctxt_switches:\t" has no number.
        let t = format!("{}\n", SELF.trim_end().trim_end_matches(|c: char| c.is_ascii_digit()));
        let e = parse_status(&t).unwrap_err();
        assert_eq!(e.field, Some("nonvoluntary_ctxt_switches"));
    }

    #[test]
    fn malformed_values_name_the_field() {
        let e = parse_status(&SELF.replace("Cpus_allowed_list:\t0-1", "Cpus_allowed_list:\t0-")).unwrap_err();
        assert_eq!(e.field, Some("Cpus_allowed_list"));
        let e = parse_status(&SELF.replace("VmRSS:\t    1708 kB", "VmRSS:\t    1708")).unwrap_err();
        assert_eq!(e.field, Some("VmRSS"));
        // A bad mask is only noticed when the mask is what is used (the list form is missing).
        let no_list: String =
            SELF.lines().filter(|l| !l.starts_with("Cpus_allowed_list")).map(|l| format!("{l}\n")).collect();
        let e = parse_status(&no_list.replace("Cpus_allowed:\t3", "Cpus_allowed:\t3g")).unwrap_err();
        assert_eq!(e.field, Some("Cpus_allowed"));
        let e = parse_status(&SELF.replace("Threads:\t1", "Threads:\tone")).unwrap_err();
        assert_eq!(e.field, Some("Threads"));
        assert!(parse_status(&SELF.replace("Tgid:", "Tgid")).is_err());
    }

    #[test]
    fn escaping_matches_the_kernel() {
        assert_eq!(escape_comm("a (b) c"), "a (b) c");
        assert_eq!(escape_comm("x\ny\\z"), "x\\ny\\\\z");
    }

    proptest! {
        #[test]
        fn arbitrary_input_never_panics(s in "\\PC*") {
            let _ = parse_status(&s);
        }

        #[test]
        fn arbitrary_lines_never_panic(lines in proptest::collection::vec("[A-Za-z_]{1,20}:\t[ -~]{0,40}", 0..30)) {
            let _ = parse_status(&(lines.join("\n") + "\n"));
        }
    }
}
