//! `/proc/pressure/{cpu,memory,io}`: pressure stall information (PSI).
//!
//! Written by `psi_show()` in `kernel/sched/psi.c` (`CONFIG_PSI`, since 4.20), documented in
//! `Documentation/accounting/psi.rst`:
//!
//! ```text
//!   some avg10=1.83 avg60=1.49 avg300=1.22 total=7538300
//!   full avg10=0.00 avg60=0.00 avg300=0.00 total=0
//! ```
//!
//! `some`: share of wall time in which at least one task stalled on the resource; `full`: all non-idle
//! tasks stalled at once. avg* are percentages over 10/60/300 s windows, `total` is cumulative stall time
//! in microseconds. The `full` line of `cpu` exists since 5.13 (always zero at system level).
//!
//! When the kernel was booted with `psi=0` the files exist but reading fails with EOPNOTSUPP; on
//! kernels without PSI they are absent. Both are "no PSI" (`None`) for the Reader, not errors.

use serde::{Deserialize, Serialize};

use super::num;
use crate::error::{FileKind, ParseError};

/// One PSI line.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct PsiLine {
    /// Stall share over the last 10 s, percent.
    pub avg10: f64,
    /// Over 60 s, percent.
    pub avg60: f64,
    /// Over 300 s, percent.
    pub avg300: f64,
    /// Total stall time, microseconds.
    pub total_us: u64,
}

/// One PSI file.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Psi {
    /// The `some` line.
    pub some: PsiLine,
    /// The `full` line, when present.
    pub full: Option<PsiLine>,
}

/// Parses a PSI file.
pub fn parse_psi(input: &str) -> Result<Psi, ParseError> {
    let k = FileKind::Pressure;
    super::complete(k, input)?;
    let mut some = None;
    let mut full = None;
    for (i, line) in input.lines().enumerate() {
        let n = i + 1;
        let (which, rest) =
            line.split_once(' ').ok_or_else(|| ParseError::new(k, n, None, line, "no space after some/full"))?;
        let parsed = parse_line(rest, n, line)?;
        match which {
            "some" => some = Some(parsed),
            "full" => full = Some(parsed),
            _ => return Err(ParseError::new(k, n, None, line, "line is neither some nor full")),
        }
    }
    Ok(Psi { some: some.ok_or_else(|| ParseError::new(k, 0, Some("some"), input, "no some line"))?, full })
}

fn parse_line(rest: &str, n: usize, line: &str) -> Result<PsiLine, ParseError> {
    let k = FileKind::Pressure;
    const KEYS: [&str; 4] = ["avg10", "avg60", "avg300", "total"];
    let mut toks = rest.split(' ');
    let mut vals = [""; 4];
    for (i, key) in KEYS.iter().enumerate() {
        let tok = toks.next().ok_or_else(|| ParseError::new(k, n, Some(KEYS[i]), line, "missing (truncated?)"))?;
        let v = tok
            .strip_prefix(key)
            .and_then(|t| t.strip_prefix('='))
            .ok_or_else(|| ParseError::new(k, n, Some(KEYS[i]), line, format!("expected {key}=")))?;
        vals[i] = v;
    }
    let pct = |i: usize| -> Result<f64, ParseError> {
        // "%lu.%02lu": digits, a dot, two digits.
        let v = vals[i];
        let ok = v.split_once('.').is_some_and(|(a, b)| {
            !a.is_empty() && b.len() == 2 && a.bytes().chain(b.bytes()).all(|c| c.is_ascii_digit())
        });
        if !ok {
            return Err(ParseError::new(k, n, Some(KEYS[i]), line, format!("bad percentage {v:?}")));
        }
        num(k, n, KEYS[i], line, v)
    };
    Ok(PsiLine { avg10: pct(0)?, avg60: pct(1)?, avg300: pct(2)?, total_us: num(k, n, "total", line, vals[3])? })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CPU: &str = include_str!("../../tests/data/host-6.18/pressure-cpu");
    const MEM: &str = include_str!("../../tests/data/host-6.18/pressure-memory");

    #[test]
    fn parses_real_files() {
        let p = parse_psi(CPU).unwrap();
        assert!(p.full.is_some());
        assert!(p.some.total_us > 0);
        let p = parse_psi(MEM).unwrap();
        assert!(p.some.avg300 >= 0.0);
        let p = parse_psi("some avg10=1.83 avg60=1.49 avg300=1.22 total=7538300\n").unwrap();
        assert_eq!(p.some, PsiLine { avg10: 1.83, avg60: 1.49, avg300: 1.22, total_us: 7538300 });
        assert_eq!(p.full, None);
    }

    #[test]
    fn truncated_and_malformed_are_errors() {
        let line = "some avg10=1.83 avg60=1.49 avg300=1.22 total=7538300\n";
        for cut in 0..line.len() {
            assert!(parse_psi(&line[..cut]).is_err(), "cut {cut}");
        }
        assert!(parse_psi("full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n").is_err());
        assert!(parse_psi("some avg10=1.8 avg60=1.49 avg300=1.22 total=1\n").is_err());
        assert!(parse_psi("some avg60=1.83 avg10=1.49 avg300=1.22 total=1\n").is_err());
        assert!(parse_psi("half avg10=1.83 avg60=1.49 avg300=1.22 total=1\n").is_err());
    }

    proptest! {
        #[test]
        fn arbitrary_input_never_panics(s in "\\PC*") {
            let _ = parse_psi(&s);
        }
    }
}
