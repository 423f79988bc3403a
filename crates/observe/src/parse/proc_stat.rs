//! `/proc/stat`: CPU time per CPU since boot, plus a few system counters.
//!
//! Written by `show_stat()` in `fs/proc/stat.c`; documented in `proc(5)` and
//! `Documentation/filesystems/proc.rst` (1.8). Checked against 6.18 and 6.12:
//!
//! ```text
//!   cpu  14827 0 2692 71406 337 0 93 27 0 0     <- all CPUs (two spaces after "cpu")
//!   cpu0 7666 0 1363 35473 158 0 26 12 0 0      <- per online CPU (offline CPUs are left out)
//!        user nice system idle iowait irq softirq steal guest guest_nice
//!   intr 264602 0 0 ...                          <- skipped
//!   ctxt 412089
//!   btime 1795300807                             <- boot time, seconds since the epoch
//!   processes 9903
//!   procs_running 2
//!   procs_blocked 0
//!   softirq 152374 0 14880 ...                   <- skipped
//! ```
//!
//! Units: clock ticks (USER_HZ, 100). `steal` exists since 2.6.11, `guest` since 2.6.24, `guest_nice`
//! since 2.6.33; missing ones read as 0. `guest` and `guest_nice` are already included in `user` and
//! `nice` (`account_guest_time()` in `kernel/sched/cputime.c`), so busy time leaves them out to avoid
//! counting them twice.

use serde::{Deserialize, Serialize};

use super::num;
use crate::error::{FileKind, ParseError};

/// CPU time of one CPU (or of all CPUs), clock ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTimes {
    /// Normal user time.
    pub user: u64,
    /// Niced user time.
    pub nice: u64,
    /// Kernel time.
    pub system: u64,
    /// Idle.
    pub idle: u64,
    /// Idle waiting for I/O.
    pub iowait: u64,
    /// Hard interrupts.
    pub irq: u64,
    /// Soft interrupts.
    pub softirq: u64,
    /// Stolen by the hypervisor.
    pub steal: u64,
    /// Running a guest (included in `user`).
    pub guest: u64,
    /// Running a niced guest (included in `nice`).
    pub guest_nice: u64,
}

impl CpuTimes {
    /// Time doing work: user + nice + system + irq + softirq + steal, ticks.
    pub fn busy(&self) -> u64 {
        self.user + self.nice + self.system + self.irq + self.softirq + self.steal
    }

    /// Time idle: idle + iowait, ticks.
    pub fn idle_total(&self) -> u64 {
        self.idle + self.iowait
    }

    /// busy + idle, ticks.
    pub fn total(&self) -> u64 {
        self.busy() + self.idle_total()
    }
}

/// One CPU's line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuLine {
    /// Kernel CPU id.
    pub cpu: u32,
    /// Its times.
    pub times: CpuTimes,
}

/// The parts of /proc/stat numapilot uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcStat {
    /// All CPUs together (the `cpu` line).
    pub total: CpuTimes,
    /// Per online CPU, in file order (ascending id).
    pub cpus: Vec<CpuLine>,
    /// Context switches since boot.
    pub ctxt: u64,
    /// Boot time, seconds since the epoch.
    pub btime: u64,
    /// Forks since boot.
    pub processes: Option<u64>,
    /// Tasks runnable now.
    pub procs_running: Option<u64>,
    /// Tasks blocked on I/O now.
    pub procs_blocked: Option<u64>,
}

/// Parses /proc/stat.
pub fn parse_proc_stat(input: &str) -> Result<ProcStat, ParseError> {
    let k = FileKind::ProcStat;
    super::complete(k, input)?;
    let mut total = None;
    let mut cpus = Vec::new();
    let mut ctxt = None;
    let mut btime = None;
    let mut processes = None;
    let mut procs_running = None;
    let mut procs_blocked = None;
    for (i, line) in input.lines().enumerate() {
        let n = i + 1;
        let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
        if let Some(id) = key.strip_prefix("cpu") {
            let times = cpu_times(rest, n, line)?;
            if id.is_empty() {
                total = Some(times);
            } else {
                cpus.push(CpuLine { cpu: num(k, n, "cpu id", line, id)?, times });
            }
            continue;
        }
        let v = rest.trim();
        match key {
            "ctxt" => ctxt = Some(num(k, n, "ctxt", line, v)?),
            "btime" => btime = Some(num(k, n, "btime", line, v)?),
            "processes" => processes = Some(num(k, n, "processes", line, v)?),
            "procs_running" => procs_running = Some(num(k, n, "procs_running", line, v)?),
            "procs_blocked" => procs_blocked = Some(num(k, n, "procs_blocked", line, v)?),
            _ => {}
        }
    }
    let missing = |f: &'static str| ParseError::new(k, 0, Some(f), "", format!("no {f} line (truncated?)"));
    Ok(ProcStat {
        total: total.ok_or_else(|| missing("cpu"))?,
        cpus,
        ctxt: ctxt.ok_or_else(|| missing("ctxt"))?,
        btime: btime.ok_or_else(|| missing("btime"))?,
        processes,
        procs_running,
        procs_blocked,
    })
}

fn cpu_times(rest: &str, n: usize, line: &str) -> Result<CpuTimes, ParseError> {
    let k = FileKind::ProcStat;
    const NAMES: [&str; 10] =
        ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice"];
    let mut v = [0u64; 10];
    let mut count = 0;
    for tok in rest.split_ascii_whitespace() {
        if count == v.len() {
            break;
        }
        v[count] = num(k, n, NAMES[count], line, tok)?;
        count += 1;
    }
    if count < 7 {
        return Err(ParseError::new(k, n, Some(NAMES[count]), line, "fewer than 7 times (truncated?)"));
    }
    Ok(CpuTimes {
        user: v[0],
        nice: v[1],
        system: v[2],
        idle: v[3],
        iowait: v[4],
        irq: v[5],
        softirq: v[6],
        steal: v[7],
        guest: v[8],
        guest_nice: v[9],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HOST: &str = include_str!("../../tests/data/host-6.18/proc-stat");

    #[test]
    fn parses_the_real_file() {
        let s = parse_proc_stat(HOST).unwrap();
        assert_eq!(s.cpus.len(), 2);
        assert_eq!(s.cpus[1].cpu, 1);
        assert!(s.btime > 1_600_000_000);
        // The aggregate line sums the same per-CPU counters, read in a separate pass over the CPUs
        // (show_stat() in fs/proc/stat.c), so it may differ from the CPU lines by the ticks in between.
        let sum_busy: u64 = s.cpus.iter().map(|c| c.times.busy()).sum();
        assert!(s.total.busy().abs_diff(sum_busy) < 10, "{} vs {sum_busy}", s.total.busy());
        let first: Vec<u64> =
            HOST.lines().nth(1).unwrap().split_whitespace().skip(1).map(|t| t.parse().unwrap()).collect();
        let c = s.cpus[0].times;
        assert_eq!(
            vec![c.user, c.nice, c.system, c.idle, c.iowait, c.irq, c.softirq, c.steal, c.guest, c.guest_nice],
            first
        );
    }

    #[test]
    fn busy_and_idle() {
        let s = parse_proc_stat("cpu  10 1 5 100 4 2 3 1 7 0\ncpu0 10 1 5 100 4 2 3 1 7 0\nctxt 1\nbtime 2\n").unwrap();
        assert_eq!(s.total.busy(), 10 + 1 + 5 + 2 + 3 + 1);
        assert_eq!(s.total.idle_total(), 104);
        // An old kernel without steal/guest columns.
        let s = parse_proc_stat("cpu  10 1 5 100 4 2 3\nctxt 1\nbtime 2\n").unwrap();
        assert_eq!(s.total.steal, 0);
    }

    #[test]
    fn truncated_and_malformed_are_errors() {
        assert!(parse_proc_stat("").is_err());
        assert!(parse_proc_stat("cpu  10 1 5\nctxt 1\nbtime 2\n").is_err());
        assert!(parse_proc_stat("cpu  10 1 5 100 4 2 3\nctxt 1\n").is_err());
        assert!(parse_proc_stat("cpu  10 1 5 100 4 2 x\nctxt 1\nbtime 2\n").is_err());
        assert!(parse_proc_stat("cpu  10 1 5 100 4 2 3\ncpuX 1 2 3 4 5 6 7\nctxt 1\nbtime 2\n").is_err());
        let cut = HOST.find("btime").unwrap() + 8;
        assert!(parse_proc_stat(&HOST[..cut]).is_err());
    }

    proptest! {
        #[test]
        fn arbitrary_input_never_panics(s in "\\PC*") {
            let _ = parse_proc_stat(&s);
        }
    }
}
