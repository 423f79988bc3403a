//! Typed errors of the rig. Each names the thing that went wrong (a package, a path, a QEMU option, a guest section)
//! and, when a guest was involved, carries the tail of its serial console so a failed boot explains itself.

use std::path::PathBuf;

/// Everything that can go wrong while preparing, booting or reading a guest.
#[derive(Debug, thiserror::Error)]
pub enum RigError {
    /// The guest description is invalid (checked before anything is started).
    #[error("guest spec {guest:?}: {field}: {reason}")]
    Spec {
        /// Name of the guest spec.
        guest: String,
        /// The offending field, e.g. `distances[2][0]`.
        field: String,
        /// Why it is rejected.
        reason: String,
    },
    /// A host command could not be started or failed.
    #[error("command `{command}` failed: {detail}")]
    Command {
        /// The command line, for the reader to re-run.
        command: String,
        /// Exit status and the tail of its stderr, or the spawn error.
        detail: String,
    },
    /// A required host program is missing and could not be installed.
    #[error("required program {program:?} not found ({hint})")]
    MissingProgram {
        /// Program name looked up in PATH.
        program: String,
        /// How to get it.
        hint: String,
    },
    /// No installable `linux-image-6.12.*-cloud-amd64-unsigned` package and no cached kernel.
    #[error("no guest kernel: {0}")]
    NoKernel(String),
    /// A file or directory on the host could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// `ldd` output we do not understand (a library that is "not found", or an unparsable line).
    #[error("ldd {binary}: {line:?}: {reason}")]
    Ldd {
        /// The binary whose dependencies were listed.
        binary: PathBuf,
        /// The offending line of ldd's output.
        line: String,
        /// Why it is rejected.
        reason: String,
    },
    /// The guest did not finish within its timeout; QEMU was killed.
    #[error("guest {guest:?} did not finish within {timeout_s} s (QEMU killed); console tail:\n{console_tail}")]
    Timeout {
        /// Name of the guest spec.
        guest: String,
        /// The timeout that expired, in seconds.
        timeout_s: u64,
        /// Last lines of the guest's serial console.
        console_tail: String,
    },
    /// QEMU exited before the guest reported that its scenario finished (boot failure, panic, bad QEMU option), or
    /// the results channel broke the protocol (the [`RigError::Protocol`] text as the reason).
    #[error("guest {guest:?} failed: {reason}; QEMU stderr:\n{qemu_stderr}\nconsole tail:\n{console_tail}")]
    GuestFailed {
        /// Name of the guest spec.
        guest: String,
        /// What was observed (exit status, missing DONE marker).
        reason: String,
        /// QEMU's own stderr (bad options show up here).
        qemu_stderr: String,
        /// Last lines of the guest's serial console.
        console_tail: String,
    },
    /// The results channel carried something that does not follow the protocol (from `parse_results`; a booted
    /// guest's run reports it as [`RigError::GuestFailed`], with the console's tail).
    #[error("guest {guest:?}: results channel line {line_no}: {reason}: {line:?}")]
    Protocol {
        /// Name of the guest spec.
        guest: String,
        /// 1-based line number in the results channel.
        line_no: usize,
        /// The offending line.
        line: String,
        /// Why it is rejected.
        reason: String,
    },
}

impl RigError {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        RigError::Io { path: path.into(), source }
    }
}

/// Result alias of the rig.
pub type Result<T, E = RigError> = std::result::Result<T, E>;
