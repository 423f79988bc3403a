//! Errors: a [`ParseError`] says which kind of file, which line and which field a pure parser rejected;
//! a [`ReadError`] adds the path when the [`crate::Reader`] read the file from disk.
//!
//! Parsers never panic on bad input (a proptest in each parser module feeds them arbitrary text), and
//! never guess: a truncated or malformed line is an error naming the line, not a zero.

use std::fmt;
use std::path::PathBuf;

/// Which kernel file a parser was reading, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// `/proc/PID/stat` or `/proc/PID/task/TID/stat`.
    Stat,
    /// `/proc/PID/status` or `/proc/PID/task/TID/status`.
    Status,
    /// `/proc/PID/numa_maps`.
    NumaMaps,
    /// `/proc/PID/sched` or `/proc/PID/task/TID/sched`.
    Sched,
    /// `/proc/PID/schedstat` or `/proc/PID/task/TID/schedstat`.
    Schedstat,
    /// `/proc/stat`.
    ProcStat,
    /// `/sys/devices/system/node/nodeN/meminfo`.
    NodeMeminfo,
    /// `/sys/devices/system/node/nodeN/numastat`.
    NodeNumastat,
    /// `/proc/meminfo`.
    Meminfo,
    /// `/proc/vmstat`.
    Vmstat,
    /// `/sys/devices/system/node/nodeN/vmstat`.
    NodeVmstat,
    /// `/proc/pressure/{cpu,memory,io}`.
    Pressure,
    /// A one-number sysfs/procfs file (e.g. `/proc/sys/kernel/numa_balancing`).
    Number,
    /// A node or CPU list file (e.g. `/sys/devices/system/node/online`).
    List,
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileKind::Stat => "stat",
            FileKind::Status => "status",
            FileKind::NumaMaps => "numa_maps",
            FileKind::Sched => "sched",
            FileKind::Schedstat => "schedstat",
            FileKind::ProcStat => "/proc/stat",
            FileKind::NodeMeminfo => "node meminfo",
            FileKind::NodeNumastat => "node numastat",
            FileKind::Meminfo => "meminfo",
            FileKind::Vmstat => "vmstat",
            FileKind::NodeVmstat => "node vmstat",
            FileKind::Pressure => "pressure",
            FileKind::Number => "number file",
            FileKind::List => "list file",
        })
    }
}

/// A pure parser rejected its input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind}: line {line}{}: {reason}: {text:?}", field.map(|f| format!(", field {f}")).unwrap_or_default())]
pub struct ParseError {
    /// Which kind of file.
    pub kind: FileKind,
    /// 1-based line number of the offending line; 0 when the problem is the file as a whole (e.g. empty,
    /// or a required line missing).
    pub line: usize,
    /// The field (key or column name) that was bad, when one can be named.
    pub field: Option<&'static str>,
    /// The offending line (or token), cut to 160 bytes (on a character boundary).
    pub text: String,
    /// What was wrong.
    pub reason: String,
}

impl ParseError {
    /// Builds an error; `text` is cut to 160 bytes (on a character boundary) so a huge line does
    /// not flood a log.
    pub fn new(
        kind: FileKind,
        line: usize,
        field: Option<&'static str>,
        text: &str,
        reason: impl Into<String>,
    ) -> Self {
        ParseError { kind, line, field, text: char_prefix(text, 160).to_string(), reason: reason.into() }
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary (what a
/// line or name is cut to for an error or a table column).
pub fn char_prefix(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Reading a file through the [`crate::Reader`] failed for a reason other than the process being gone.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The system error.
        #[source]
        source: std::io::Error,
    },
    /// The file was read but its content was rejected.
    #[error("{path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        #[source]
        source: ParseError,
    },
    /// A read waited in the kernel past its guard's deadline (the process's memory-map lock is
    /// held: see [`crate::stall`]); the read goes on in the background.
    #[error("{reason}")]
    Stalled {
        /// The file.
        path: PathBuf,
        /// What the guard said (the file, how long, why).
        reason: String,
        /// True when a read of this process is stuck; false when it was refused only because
        /// too many reads of other processes are (`stall::MAX_STUCK`).
        own: bool,
    },
    /// A file parsed but contradicts where it was read from (e.g. `node1/meminfo` whose lines say
    /// `Node 0`): a mixed-up fixture or a bind mount, never a race.
    #[error("{path}: {reason}")]
    Inconsistent {
        /// The file.
        path: PathBuf,
        /// What contradicts what.
        reason: String,
    },
}

impl ReadError {
    /// The underlying I/O error, if this is one.
    pub fn io_error(&self) -> Option<&std::io::Error> {
        match self {
            ReadError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn char_prefix_cuts_on_a_character_boundary() {
        assert_eq!(char_prefix("abc", 160), "abc");
        assert_eq!(char_prefix("abc", 2), "ab");
        // "é" is two bytes: a cut inside it falls back to before it.
        assert_eq!(char_prefix("aé", 2), "a");
        assert_eq!(char_prefix("aé", 3), "aé");
        assert_eq!(char_prefix("", 0), "");
        let long = "é".repeat(100);
        let e = ParseError::new(FileKind::Stat, 1, None, &long, "bad");
        assert_eq!(e.text.len(), 160);
        assert!(e.text.chars().all(|c| c == 'é'));
    }
}
