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

/// Position of the first `needle` in `b` at or after `from`, or `b.len()`. Eight bytes per step
/// (the classic "has zero byte" word trick), which beats both a byte loop and the general memchr on
/// the 20 to 300 byte lines of /proc files.
#[inline]
pub(crate) fn find_byte(b: &[u8], from: usize, needle: u8) -> usize {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let pattern = LO.wrapping_mul(u64::from(needle));
    let mut i = from;
    while i + 8 <= b.len() {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[i..i + 8]);
        let x = u64::from_le_bytes(w) ^ pattern;
        // The lowest set bit marks the first zero byte of x exactly (borrows only run upwards).
        let t = x.wrapping_sub(LO) & !x & HI;
        if t != 0 {
            return i + (t.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < b.len() {
        if b[i] == needle {
            return i;
        }
        i += 1;
    }
    b.len()
}

/// A decimal number of ASCII digits only (no sign, no blanks), without overflow.
#[inline]
pub(crate) fn dec(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &c in s {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    Some(v)
}

/// [`dec`] with the error naming the field; the fast path for the per-thread files.
#[inline]
pub(crate) fn num_u64(
    kind: FileKind,
    line_no: usize,
    field: &'static str,
    line: &str,
    tok: &str,
) -> Result<u64, ParseError> {
    dec(tok.as_bytes()).ok_or_else(|| ParseError::new(kind, line_no, Some(field), line, format!("bad number {tok:?}")))
}

/// Lines of `input` (without their `\n`), each with its 1-based number; `wanted(first byte)` decides
/// whether the offset of the line's first `':'` is looked for (`None` for unwanted lines and lines
/// without a colon). Status-like files are parsed for every thread of a full observation, so this is
/// one word-at-a-time scan per line plus a short scan of wanted keys.
pub(crate) fn key_lines(
    input: &str,
    wanted: impl Fn(u8) -> bool,
) -> impl Iterator<Item = (usize, &str, Option<usize>)> {
    let b = input.as_bytes();
    let mut pos = 0;
    let mut n = 0;
    std::iter::from_fn(move || {
        if pos >= b.len() {
            return None;
        }
        let start = pos;
        let end = find_byte(b, pos, b'\n');
        let colon = if wanted(b[start]) {
            let c = find_byte(&b[..end], start, b':');
            (c < end).then_some(c - start)
        } else {
            None
        };
        let line = &input[start..end];
        pos = end + 1;
        n += 1;
        Some((n, line, colon))
    })
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
    fn byte_search_and_decimal() {
        let text = b"abc:defghijklmnop\nqrstuvwxyz0123456789:\n";
        for from in 0..text.len() {
            for needle in [b'\n', b':', b'a', b'9', b'#'] {
                let want = text[from..].iter().position(|&c| c == needle).map_or(text.len(), |p| p + from);
                assert_eq!(find_byte(text, from, needle), want, "from {from} needle {needle}");
            }
        }
        assert_eq!(dec(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(dec(b"18446744073709551616"), None);
        assert_eq!(dec(b""), None);
        assert_eq!(dec(b"+1"), None);
        assert_eq!(dec(b"1 "), None);
        assert_eq!(dec(b"007"), Some(7));
    }

    proptest::proptest! {
        #[test]
        fn find_byte_equals_position(hay in proptest::collection::vec(proptest::num::u8::ANY, 0..100), needle: u8, from in 0usize..100) {
            let from = from.min(hay.len());
            let want = hay[from..].iter().position(|&c| c == needle).map_or(hay.len(), |p| p + from);
            proptest::prop_assert_eq!(find_byte(&hay, from, needle), want);
        }

        #[test]
        fn number_and_list_files_never_panic(s in "\\PC*") {
            let _ = parse_number(&s);
            let _ = parse_list(&s);
        }

        #[test]
        fn dec_equals_std(s in "[0-9]{1,22}") {
            proptest::prop_assert_eq!(dec(s.as_bytes()), s.parse::<u64>().ok());
        }
    }

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
