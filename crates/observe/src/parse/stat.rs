//! `/proc/PID/stat` and `/proc/PID/task/TID/stat`: one line of space-separated fields.
//!
//! Written by `do_task_stat()` in the kernel's `fs/proc/array.c`; the field list is documented in
//! `proc(5)` and `Documentation/filesystems/proc.rst` (table 1-4). Checked against 6.18 (this host)
//! and 6.12 (the rig guests); the layout has only grown at the end since 2.6 (52 fields since 3.5).
//!
//! ```text
//!   9913 (a (b) c) S 9893 9913 4280 34816 9913 4194304 97 0 0 0 0 0 ... 0 1 0 364627 ...
//!   ^pid ^comm----^ ^3 ^4                     ^9 flags      ^14 utime ^15 stime  ^22 starttime
//!                                                                     field 39: processor (last CPU)
//! ```
//!
//! Quirk: the command name (`comm`, field 2) is printed raw between parentheses and may itself contain
//! spaces, `(`, `)` and even a newline (`prctl(PR_SET_NAME)` accepts any byte but NUL). The only safe
//! split is at the LAST `)` of the text: everything after it is numbers.
//!
//! Units: `utime`, `stime`, `starttime` are in clock ticks (`sysconf(_SC_CLK_TCK)`, USER_HZ, 100 on
//! every mainstream architecture); `starttime` counts from boot; `rss` is in pages; `vsize` in bytes.
//! `flags` carries `PF_KTHREAD` (0x00200000, `include/linux/sched.h`) for kernel threads.
//!
//! For a process (`/proc/PID/stat`) the CPU times are summed over all its threads, live and exited;
//! for a thread (`task/TID/stat`) they are that thread's own. `processor` is where the task last ran.

use serde::{Deserialize, Serialize};

use super::num;
use crate::error::{FileKind, ParseError};

/// `PF_KTHREAD` in the per-task flags (`include/linux/sched.h`): the task is a kernel thread.
pub const PF_KTHREAD: u32 = 0x0020_0000;

/// `PF_NO_SETAFFINITY` in the per-task flags (`include/linux/sched.h`): userland may not change
/// the task's CPUs (`sched_setaffinity` answers EINVAL). Per-CPU kernel threads, and io_uring's
/// io-wq workers of kernels 5.12 to 6.2, bound to their node's CPUs (commit 01e68ce08a30 dropped
/// the flag in 6.3).
pub const PF_NO_SETAFFINITY: u32 = 0x0400_0000;

/// The fields of a stat line numapilot uses. `Default` is all zeros (state `'\0'`, no optional
/// field): a base for hand-built samples in tests and examples, never a parse result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskStat {
    /// Field 1: process or thread id.
    pub pid: u32,
    /// Field 2: command name, raw (may hold spaces and parentheses).
    pub comm: String,
    /// Field 3: state letter (`R`, `S`, `D`, `Z`, `T`, `t`, `X`, `I`, ...).
    pub state: char,
    /// Field 4: parent pid.
    pub ppid: u32,
    /// Field 9: per-task flags (`PF_*`).
    pub flags: u32,
    /// Field 10: minor faults.
    pub minflt: u64,
    /// Field 12: major faults.
    pub majflt: u64,
    /// Field 14: user CPU time, clock ticks.
    pub utime: u64,
    /// Field 15: system CPU time, clock ticks.
    pub stime: u64,
    /// Field 18: kernel priority (negative for real-time tasks).
    pub priority: i64,
    /// Field 19: nice value.
    pub nice: i64,
    /// Field 20: number of threads in the process.
    pub num_threads: u32,
    /// Field 22: start time after boot, clock ticks. With the pid, identifies a process across pid reuse.
    pub starttime: u64,
    /// Field 23: virtual size, bytes.
    pub vsize: u64,
    /// Field 24: resident set size, pages.
    pub rss_pages: u64,
    /// Field 39: CPU the task last ran on.
    pub processor: u32,
    /// Field 40: real-time priority (since 2.5.19).
    pub rt_priority: Option<u32>,
    /// Field 41: scheduling policy (`SCHED_*`, since 2.5.19).
    pub policy: Option<u32>,
    /// Field 42: aggregated block I/O delay, clock ticks (since 2.6.18).
    pub delayacct_blkio_ticks: Option<u64>,
}

impl TaskStat {
    /// Whether the task is a kernel thread (`PF_KTHREAD`).
    pub fn is_kernel_thread(&self) -> bool {
        self.flags & PF_KTHREAD != 0
    }

    /// Whether the kernel keeps the task's CPUs to itself (`PF_NO_SETAFFINITY`): its mask is no
    /// placement of the program's, and no placement can change it.
    pub fn kernel_owns_affinity(&self) -> bool {
        self.flags & PF_NO_SETAFFINITY != 0
    }

    /// Whether the process is a zombie with no thread left (state `Z`, exited and not yet reaped):
    /// nothing to place, its memory gone. A leader that exited while other threads run on
    /// (`pthread_exit` in main) is a zombie too, but `num_threads` counts those threads: not this.
    pub fn is_zombie(&self) -> bool {
        self.state == 'Z' && self.num_threads <= 1
    }

    /// User plus system CPU time, clock ticks.
    pub fn cpu_ticks(&self) -> u64 {
        self.utime.saturating_add(self.stime)
    }
}

/// Number of fields we need at least: up to and including field 39 (`processor`).
const MIN_FIELDS: usize = 39;
/// Fields we look at, at most (52 since Linux 3.5; later ones are ignored).
const MAX_FIELDS: usize = 52;

/// Parses one stat line.
pub fn parse_stat(input: &str) -> Result<TaskStat, ParseError> {
    let k = FileKind::Stat;
    super::complete(k, input)?;
    let line = input.strip_suffix('\n').unwrap_or(input);
    if line.is_empty() {
        return Err(ParseError::new(k, 0, None, input, "empty file"));
    }
    let open = line.find('(').ok_or_else(|| ParseError::new(k, 1, Some("comm"), line, "no '(' before comm"))?;
    let close = line.rfind(')').ok_or_else(|| ParseError::new(k, 1, Some("comm"), line, "no ')' after comm"))?;
    if close < open {
        return Err(ParseError::new(k, 1, Some("comm"), line, "')' before '('"));
    }
    let pid: u32 = num(k, 1, "pid", line, line[..open].trim_end())?;
    let comm = &line[open + 1..close];
    let rest = &line[close + 1..];
    if !rest.starts_with(' ') {
        return Err(ParseError::new(k, 1, Some("state"), line, "no space after comm"));
    }
    // f[i] is field i+3 (field 1 is pid, 2 is comm).
    let mut f: [&str; MAX_FIELDS - 2] = [""; MAX_FIELDS - 2];
    let mut n = 0;
    for tok in rest.split_ascii_whitespace() {
        if n == f.len() {
            break;
        }
        f[n] = tok;
        n += 1;
    }
    let have = n + 2;
    if have < MIN_FIELDS {
        return Err(ParseError::new(
            k,
            1,
            None,
            line,
            format!("truncated: {have} fields, at least {MIN_FIELDS} expected"),
        ));
    }
    let field = |i: usize| f[i - 3];
    let mut state_chars = field(3).chars();
    let state = match (state_chars.next(), state_chars.next()) {
        (Some(c), None) => c,
        _ => return Err(ParseError::new(k, 1, Some("state"), line, "state is not one letter")),
    };
    let opt = |i: usize, name: &'static str| -> Result<Option<u64>, ParseError> {
        if i <= have {
            num(k, 1, name, line, field(i)).map(Some)
        } else {
            Ok(None)
        }
    };
    // priority and nice are `long` and may be negative (real-time priorities go down to -100).
    Ok(TaskStat {
        pid,
        comm: comm.to_string(),
        state,
        ppid: num(k, 1, "ppid", line, field(4))?,
        flags: num(k, 1, "flags", line, field(9))?,
        minflt: num(k, 1, "minflt", line, field(10))?,
        majflt: num(k, 1, "majflt", line, field(12))?,
        utime: num(k, 1, "utime", line, field(14))?,
        stime: num(k, 1, "stime", line, field(15))?,
        priority: num(k, 1, "priority", line, field(18))?,
        nice: num(k, 1, "nice", line, field(19))?,
        num_threads: num(k, 1, "num_threads", line, field(20))?,
        starttime: num(k, 1, "starttime", line, field(22))?,
        vsize: num(k, 1, "vsize", line, field(23))?,
        rss_pages: num(k, 1, "rss", line, field(24))?,
        processor: num(k, 1, "processor", line, field(39))?,
        rt_priority: opt(40, "rt_priority")?.map(|v| v as u32),
        policy: opt(41, "policy")?.map(|v| v as u32),
        delayacct_blkio_ticks: opt(42, "delayacct_blkio_ticks")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // Captured on this host (6.18): `cat /proc/self/stat` and kthreadd.
    const CAT: &str = "9913 (cat) R 9893 9913 4280 34816 9913 4194304 97 0 0 0 0 0 0 0 20 0 1 0 36462 3133440 433 18446744073709551615 94580452241408 94580452258945 140727253600880 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 94580452272368 94580452273680 94580477423616 140727253606665 140727253606685 140727253606685 140727253610475 0\n";
    const KTHREADD: &str = "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 10 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";

    #[test]
    fn parses_a_user_process() {
        let s = parse_stat(CAT).unwrap();
        assert_eq!(s.pid, 9913);
        assert_eq!(s.comm, "cat");
        assert_eq!(s.state, 'R');
        assert_eq!(s.ppid, 9893);
        assert_eq!(s.flags, 4194304);
        assert_eq!(s.minflt, 97);
        assert_eq!(s.num_threads, 1);
        assert_eq!(s.starttime, 36462);
        assert_eq!(s.vsize, 3133440);
        assert_eq!(s.rss_pages, 433);
        assert_eq!(s.processor, 1);
        assert_eq!(s.rt_priority, Some(0));
        assert_eq!(s.policy, Some(0));
        assert_eq!(s.delayacct_blkio_ticks, Some(0));
        assert!(!s.is_kernel_thread());
    }

    #[test]
    fn kernel_thread_flag() {
        let s = parse_stat(KTHREADD).unwrap();
        assert_eq!(s.comm, "kthreadd");
        assert!(s.is_kernel_thread());
        assert_eq!(s.rss_pages, 0);
        // Field 39 counted the plain way (comm has no blanks here).
        let f: Vec<&str> = KTHREADD.split_whitespace().collect();
        assert_eq!(s.processor.to_string(), f[38]);
        assert_eq!(s.starttime.to_string(), f[21]);
    }

    #[test]
    fn comm_with_spaces_and_parentheses_splits_at_last_paren() {
        let line = CAT.replacen("(cat)", "(a (b) c))", 1);
        let s = parse_stat(&line).unwrap();
        assert_eq!(s.comm, "a (b) c)");
        assert_eq!(s.state, 'R');
        assert_eq!(s.utime, 0);
        assert_eq!(s.processor, 1);
        let line = CAT.replacen("(cat)", "(x\ny) 1 2)", 1);
        assert_eq!(parse_stat(&line).unwrap().comm, "x\ny) 1 2");
        let line = CAT.replacen("(cat)", "()", 1);
        assert_eq!(parse_stat(&line).unwrap().comm, "");
    }

    #[test]
    fn cpu_times_and_negative_priority() {
        // A SCHED_FIFO thread at rt priority 50: priority -51.
        let mut f: Vec<String> = CAT.trim_end().split(' ').map(String::from).collect();
        f[13] = "1234".into(); // utime (field 14)
        f[14] = "56".into(); // stime
        f[17] = "-51".into(); // priority
        f[39] = "50".into(); // rt_priority
        f[40] = "1".into(); // policy
        let s = parse_stat(&format!("{}\n", f.join(" "))).unwrap();
        assert_eq!((s.utime, s.stime, s.cpu_ticks()), (1234, 56, 1290));
        assert_eq!(s.priority, -51);
        assert_eq!((s.rt_priority, s.policy), (Some(50), Some(1)));
    }

    #[test]
    fn older_kernel_with_39_fields_has_no_optional_tail() {
        let f: Vec<&str> = CAT.trim_end().split(' ').take(39).collect();
        let s = parse_stat(&format!("{}\n", f.join(" "))).unwrap();
        assert_eq!(s.processor, 1);
        assert_eq!(s.rt_priority, None);
        assert_eq!(s.delayacct_blkio_ticks, None);
    }

    #[test]
    fn truncated_and_malformed_are_errors() {
        for cut in [0, 3, 10, 40, 70, 100, CAT.len() - 1] {
            let e = parse_stat(&CAT[..cut]).unwrap_err();
            assert_eq!(e.kind, FileKind::Stat);
        }
        let e = parse_stat(&CAT.replacen(" 36462 ", " 36x62 ", 1)).unwrap_err();
        assert_eq!(e.field, Some("starttime"));
        let e = parse_stat(&CAT.replacen(" R ", " RR ", 1)).unwrap_err();
        assert_eq!(e.field, Some("state"));
        assert!(parse_stat("x (cat) R 1\n").is_err());
        assert!(parse_stat("12 cat) R\n").is_err());
        assert!(parse_stat("12 (cat R 1 2 3\n").is_err());
        assert!(parse_stat("\n").is_err());
        assert!(parse_stat(&CAT.replacen("(cat) ", "(cat)", 1)).is_err());
        let msg = parse_stat(&CAT.replacen(" 36462 ", " 36x62 ", 1)).unwrap_err().to_string();
        assert!(msg.contains("starttime") && msg.contains("36x62"), "{msg}");
    }

    proptest! {
        #[test]
        fn arbitrary_input_never_panics(s in "\\PC*") {
            let _ = parse_stat(&s);
        }

        #[test]
        fn any_comm_round_trips(comm in "[^\\x00]{0,64}") {
            let line = CAT.replacen("(cat)", &format!("({comm})"), 1);
            let s = parse_stat(&line).unwrap();
            prop_assert_eq!(s.comm, comm);
            prop_assert_eq!(s.processor, 1);
        }

        #[test]
        fn any_prefix_of_a_real_line_is_rejected_or_exact(cut in 0usize..300) {
            let cut = cut.min(CAT.len());
            // Only the whole line, newline included, is complete.
            prop_assert_eq!(parse_stat(&CAT[..cut]).is_ok(), cut == CAT.len());
        }
    }
}
