//! Pure parsers, one module per kernel file: `fn parse_x(&str) -> Result<X, ParseError>`.
//!
//! None of them touches the system; the [`crate::Reader`] reads the bytes and hands them over, and tests
//! hand them captured text. Every module's essay names the file, the kernel versions it was checked
//! against, the units, and the quirks with their source in the kernel tree.
//!
//! Shared rules:
//! - Unknown lines and keys are ignored (kernels add fields; a parser that failed on each new field would
//!   break on every upgrade), but a known field that is malformed is an error.
//! - Required fields that are missing mean the text was truncated: an error with line 0.
//! - Numbers are parsed strictly (no sign where the kernel prints none, no trailing junk).

use std::str::FromStr;

use crate::error::{FileKind, ParseError};

pub mod meminfo;
pub mod numa_maps;
pub mod proc_stat;
pub mod psi;
pub mod sched;
pub mod schedstat;
pub mod stat;
pub mod status;
pub mod vmstat;

/// Parses one token as a number, or explains which field of which line was bad.
pub(crate) fn num<T: FromStr>(
    kind: FileKind,
    line_no: usize,
    field: &'static str,
    line: &str,
    tok: &str,
) -> Result<T, ParseError> {
    // `u64::from_str` accepts a leading '+'; the kernel never prints one, so reject it as junk.
    if tok.starts_with('+') {
        return Err(ParseError::new(kind, line_no, Some(field), line, format!("bad number {tok:?}")));
    }
    tok.parse::<T>().map_err(|_| ParseError::new(kind, line_no, Some(field), line, format!("bad number {tok:?}")))
}

/// Every kernel text file ends each line with a newline; input that does not was cut short (a number
/// cut inside its digits would otherwise parse as a smaller number). Empty input is complete.
pub(crate) fn complete(kind: FileKind, input: &str) -> Result<(), ParseError> {
    if input.is_empty() || input.ends_with('\n') {
        Ok(())
    } else {
        let last = input.rsplit('\n').next().unwrap_or(input);
        Err(ParseError::new(kind, input.lines().count(), None, last, "last line has no newline (truncated?)"))
    }
}

/// Parses a whole file that is a single number (e.g. `/proc/sys/kernel/numa_balancing`).
pub fn parse_number(input: &str) -> Result<i64, ParseError> {
    complete(FileKind::Number, input)?;
    let t = input.trim();
    if t.is_empty() {
        return Err(ParseError::new(FileKind::Number, 0, None, input, "empty file"));
    }
    num(FileKind::Number, 1, "value", t, t)
}

/// Parses a node or CPU list file such as `/sys/devices/system/node/online` (`"0-3,8"`).
pub fn parse_list(input: &str) -> Result<numapilot_topology::IdSet, ParseError> {
    complete(FileKind::List, input)?;
    numapilot_topology::IdSet::parse_list(input.trim())
        .map_err(|e| ParseError::new(FileKind::List, 1, None, input.trim(), e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_file() {
        assert_eq!(parse_number("1\n").unwrap(), 1);
        assert_eq!(parse_number("-1\n").unwrap(), -1);
        assert!(parse_number("").is_err());
        assert!(parse_number("x\n").is_err());
        assert!(parse_number("+1").is_err());
    }

    #[test]
    fn list_file() {
        let s = parse_list("0-1,8\n").unwrap();
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 1, 8]);
        assert!(parse_list("0-\n").is_err());
        assert!(parse_list("0-1").is_err());
        assert!(parse_number("12").is_err());
    }
}
