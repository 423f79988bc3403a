//! Errors of the wake-up tracer, each naming what failed and, where there is one, what to do about it.

use std::path::PathBuf;

/// Why the tracer could not be opened or drained.
#[derive(Debug, thiserror::Error)]
pub enum EbpfError {
    /// This binary was built without the `ebpf` cargo feature.
    #[error("wake-up tracer unavailable: numapilot was built without the ebpf feature (rebuild with the cargo feature `ebpf`)")]
    NotBuilt,
    /// An option is out of range.
    #[error("wake-up tracer option {option}: {reason}")]
    BadOption {
        /// The option.
        option: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The kernel refused for lack of privilege.
    #[error("wake-up tracer: no permission to {what} (needs root, or CAP_BPF and CAP_PERFMON): {detail}")]
    Permission {
        /// The step that was refused.
        what: &'static str,
        /// The kernel's or libbpf's message.
        detail: String,
    },
    /// No mounted tracefs holds the sched_waking event (its id is needed to attach).
    #[error(
        "wake-up tracer: tracefs is not mounted (looked for events/sched/sched_waking/id under {tried}); mount it with \
         `mount -t tracefs tracefs /sys/kernel/tracing` or set mount_tracefs"
    )]
    TracefsMissing {
        /// The directories looked at.
        tried: String,
    },
    /// tracefs is mounted but the kernel has no sched_waking event.
    #[error("wake-up tracer: the kernel has no sched:sched_waking tracepoint ({path} missing)")]
    NoTracepoint {
        /// The missing file.
        path: PathBuf,
    },
    /// Mounting tracefs failed.
    #[error("wake-up tracer: mounting tracefs on {path} failed: {source}")]
    Mount {
        /// The mount point.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The kernel lacks something the program needs (BPF syscall, tracepoint programs, LOOKUP_AND_DELETE).
    #[error("wake-up tracer: the kernel does not support {what}: {detail}")]
    Unsupported {
        /// The feature.
        what: &'static str,
        /// The kernel's or libbpf's message.
        detail: String,
    },
    /// Another step of loading, attaching or reading failed (libbpf's message and log attached).
    #[error("wake-up tracer: {what} failed: {detail}")]
    Bpf {
        /// The step.
        what: &'static str,
        /// The kernel's or libbpf's message (and, for a load, libbpf's log including the verifier's).
        detail: String,
    },
    /// The pair map was full during a cycle: some wake-ups were not counted (a warning for the log and the
    /// metrics; the drained pairs are still valid).
    #[error("wake-up tracer: the pair map was full ({max_pairs} pairs), {dropped} wake-up(s) not counted this cycle")]
    MapFull {
        /// The map's bound, pairs.
        max_pairs: u32,
        /// Wake-ups not counted.
        dropped: u64,
    },
    /// The BPF object lacks a map or program this crate expects (a build mismatch).
    #[error("wake-up tracer: the BPF object has no {kind} named {name:?}")]
    MissingInObject {
        /// "map" or "program".
        kind: &'static str,
        /// The name looked for.
        name: &'static str,
    },
}
