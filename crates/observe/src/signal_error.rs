//! Errors of the live-signal sources ([`crate::maps`], [`crate::net`], [`crate::sockets`], [`crate::pmu`],
//! [`crate::replay`]): a [`LineError`] names the file kind, line and field a pure parser rejected; a
//! [`SignalError`] adds the path, or says which system call of which source failed.
//!
//! Kept apart from [`crate::ParseError`] (whose [`crate::FileKind`] lists the per-task files) so the
//! signal sources can grow without touching the per-task reader.

use std::fmt;
use std::path::PathBuf;

/// Which text a signal parser was reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SignalFile {
    /// `/proc/PID/maps`.
    Maps,
    /// `/proc/net/tcp`.
    Tcp,
    /// `/proc/net/tcp6`.
    Tcp6,
    /// `/proc/net/unix`.
    Unix,
    /// `perf script -F pid,tid,cpu,time,addr,data_src,weight,phys_addr` output.
    PerfScript,
    /// `/sys/devices/system/node/nodeN/memoryM` block ranges or `memory_block_size_bytes`.
    MemoryBlocks,
}

impl fmt::Display for SignalFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SignalFile::Maps => "maps",
            SignalFile::Tcp => "/proc/net/tcp",
            SignalFile::Tcp6 => "/proc/net/tcp6",
            SignalFile::Unix => "/proc/net/unix",
            SignalFile::PerfScript => "perf script",
            SignalFile::MemoryBlocks => "memory blocks",
        })
    }
}

/// A pure parser rejected a line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: line {line}{}: {reason}: {text:?}", field.map(|f| format!(", field {f}")).unwrap_or_default())]
pub struct LineError {
    /// Which kind of text.
    pub file: SignalFile,
    /// 1-based line number; 0 for the text as a whole.
    pub line: usize,
    /// The field (column) that was bad, when one can be named.
    pub field: Option<&'static str>,
    /// The offending line, cut to 160 bytes.
    pub text: String,
    /// What was wrong.
    pub reason: String,
}

impl LineError {
    /// Builds an error; `text` is cut to 160 bytes (on a character boundary).
    pub fn new(
        file: SignalFile,
        line: usize,
        field: Option<&'static str>,
        text: &str,
        reason: impl Into<String>,
    ) -> Self {
        LineError { file, line, field, text: crate::error::char_prefix(text, 160).to_string(), reason: reason.into() }
    }
}

/// A signal source failed.
#[derive(Debug, thiserror::Error)]
pub enum SignalError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The system error.
        #[source]
        source: std::io::Error,
    },
    /// A file was read but a line was rejected.
    #[error("{path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        #[source]
        source: LineError,
    },
    /// A system call of a source failed (`what` names the call and its object).
    #[error("{what}: {source}")]
    Sys {
        /// The call, e.g. "perf_event_open(cpu 1, mem-loads)".
        what: String,
        /// The system error.
        #[source]
        source: std::io::Error,
    },
    /// A kernel reply did not have the layout its uapi header gives (a truncated netlink message, a
    /// perf record shorter than its header says).
    #[error("{what}: {reason}")]
    Malformed {
        /// The reply, e.g. "sock_diag reply".
        what: &'static str,
        /// What did not fit.
        reason: String,
    },
}

impl SignalError {
    /// The system error behind this one, if any.
    pub fn io_error(&self) -> Option<&std::io::Error> {
        match self {
            SignalError::Io { source, .. } | SignalError::Sys { source, .. } => Some(source),
            _ => None,
        }
    }

    /// Whether this error means "the process is gone" (ENOENT, ESRCH), to be skipped.
    pub fn is_gone(&self) -> bool {
        self.io_error().is_some_and(|e| matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ESRCH)))
    }
}

/// Parses a hexadecimal token strictly (ASCII hex digits only, no prefix, no sign).
pub(crate) fn hex(tok: &str) -> Option<u64> {
    if tok.is_empty() || tok.len() > 16 || !tok.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(tok, 16).ok()
}

/// Parses a decimal token strictly (ASCII digits only).
pub(crate) fn dec(tok: &str) -> Option<u64> {
    if tok.is_empty() || !tok.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    tok.parse().ok()
}
