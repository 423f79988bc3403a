//! `/proc/PID/schedstat` and `/proc/PID/task/TID/schedstat`: three numbers on one line.
//!
//! Written by `proc_pid_schedstat()` in `fs/proc/base.c` (`CONFIG_SCHED_INFO`), documented in
//! `Documentation/scheduler/sched-stats.rst`. Same format from 2.6.x to 6.18:
//!
//! ```text
//!   925682 0 1
//!   ^ time spent on the CPU, ns
//!          ^ time spent waiting on a runqueue (run delay), ns
//!            ^ number of timeslices run on this CPU
//! ```
//!
//! When schedstats are not collected the kernel prints `0 0 0`; that is data, not an error.

use serde::{Deserialize, Serialize};

use super::num;
use crate::error::{FileKind, ParseError};

/// One schedstat line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SchedStat {
    /// Time on a CPU, ns.
    pub run_ns: u64,
    /// Time runnable but waiting for a CPU (run delay), ns.
    pub wait_ns: u64,
    /// Timeslices run.
    pub timeslices: u64,
}

/// Parses a schedstat line.
pub fn parse_schedstat(input: &str) -> Result<SchedStat, ParseError> {
    let k = FileKind::Schedstat;
    super::complete(k, input)?;
    let line = input.strip_suffix('\n').unwrap_or(input);
    let mut it = line.split(' ');
    let mut next = |field: &'static str| -> Result<u64, ParseError> {
        let tok = it.next().ok_or_else(|| ParseError::new(k, 1, Some(field), line, "missing (truncated?)"))?;
        num(k, 1, field, line, tok)
    };
    let s = SchedStat { run_ns: next("run_ns")?, wait_ns: next("wait_ns")?, timeslices: next("timeslices")? };
    if it.next().is_some() {
        return Err(ParseError::new(k, 1, None, line, "more than three numbers"));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CAT: &str = include_str!("../../tests/data/host-6.18/schedstat-cat");

    #[test]
    fn parses_real_line() {
        let s = parse_schedstat(CAT).unwrap();
        let want: Vec<u64> = CAT.split_whitespace().map(|t| t.parse().unwrap()).collect();
        assert_eq!(vec![s.run_ns, s.wait_ns, s.timeslices], want);
        assert_eq!(parse_schedstat("123 456 7\n").unwrap(), SchedStat { run_ns: 123, wait_ns: 456, timeslices: 7 });
    }

    #[test]
    fn truncated_and_malformed_are_errors() {
        for bad in ["", "\n", "1\n", "1 2\n", "1 2 \n", "1 2 x\n", "1 2 3 4\n", "-1 2 3\n", "1  2 3\n", "1 2 3"] {
            assert!(parse_schedstat(bad).is_err(), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn arbitrary_input_never_panics(s in "\\PC*") {
            let _ = parse_schedstat(&s);
        }
    }
}
