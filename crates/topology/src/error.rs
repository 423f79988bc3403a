//! Errors of the topology readers.
//!
//! Two families, because the two kinds of input fail differently:
//!
//! - [`TopologyError`]: reading a live system or a fixture tree through `sysfs`. The kernel wrote the
//!   files, so a failure is a missing required file, an unreadable one, or a line that does not parse;
//!   each variant carries the path, and the line (1-based) and its text where there is one.
//! - [`MachineError`]: a machine file a person wrote. The error names the file, the field in the
//!   file's own terms (`distances[2][1]`, `nodes[1].cpus`) and the reason, so it can be fixed without
//!   reading our code.

use std::path::PathBuf;

/// Reading a topology from sysfs (or picking a preset) failed.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// A file or directory could not be read (other than "does not exist" for optional files).
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A file the kernel always writes is absent.
    #[error("{path}: required file is missing")]
    Missing {
        /// The path that should exist.
        path: PathBuf,
    },
    /// A line of a kernel file did not parse. The line is quoted after the reason unless the
    /// reason quotes it already (a list parser's "bad id or range "0-zz" in "0-zz"").
    #[error("{}:{line}: {reason}{}", path.display(), unless_quoted(reason, text))]
    Malformed {
        /// The file.
        path: PathBuf,
        /// Line number, 1-based.
        line: usize,
        /// The offending line as read (without the newline).
        text: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Files that parse on their own contradict each other (e.g. a node lists a CPU that has no
    /// `cpuN` directory, or a distance row is shorter than the node count).
    #[error("{path}: {reason}")]
    Inconsistent {
        /// The file where the contradiction shows.
        path: PathBuf,
        /// What contradicts what.
        reason: String,
    },
    /// The kernel exposes no NUMA information at all (built without CONFIG_NUMA, or no sysfs).
    #[error("{path}: no NUMA nodes found (kernel without NUMA support, or sysfs not mounted?)")]
    NoNuma {
        /// The node directory that was looked at.
        path: PathBuf,
    },
    /// `Topology::preset` was given a name it does not know.
    #[error("unknown preset {name:?}; valid presets: {valid}")]
    UnknownPreset {
        /// The name asked for.
        name: String,
        /// The valid names, comma separated.
        valid: String,
    },
    /// A machine file (or a preset, which is a machine file) was rejected.
    #[error(transparent)]
    Machine(#[from] MachineError),
}

/// Finding the NUMA node of a named device ([`crate::sysfs::device_node`]) failed.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// An interface or block device name that cannot name a sysfs entry (empty, `.`, `..`, a `/`).
    #[error("bad {kind} name {name:?}")]
    BadName {
        /// What was named: `network device`, `block device`.
        kind: &'static str,
        /// The name as given.
        name: String,
    },
    /// A PCI address that does not parse.
    #[error("bad PCI address {address:?} (expected [segment:]bus:device[.function], hexadecimal)")]
    BadPciAddress {
        /// The address as given.
        address: String,
    },
    /// The device has no sysfs entry.
    #[error("no {device} ({path} does not exist)")]
    NotFound {
        /// The device, e.g. `network device eth9`.
        device: String,
        /// The entry that was looked for.
        path: PathBuf,
    },
    /// The kernel reports no node for the device (`numa_node` is -1: no affinity, or a machine
    /// without NUMA information for its bus).
    #[error("{device} has no NUMA node (the kernel reports {value} in {path})")]
    NoAffinity {
        /// The device.
        device: String,
        /// The value of the file.
        value: i64,
        /// The `numa_node` file.
        path: PathBuf,
    },
    /// Neither the device nor any parent below `sys/devices` has a `numa_node` file (a virtual device).
    #[error("{device} has no NUMA node (no numa_node above {path})")]
    NoNumaNodeFile {
        /// The device.
        device: String,
        /// The device's directory, symlinks resolved.
        path: PathBuf,
    },
    /// A `numa_node` file could not be read or does not hold an integer.
    #[error(transparent)]
    Sysfs(#[from] TopologyError),
}

/// A machine file was rejected.
#[derive(Debug, thiserror::Error)]
pub enum MachineError {
    /// The file could not be read.
    #[error("cannot read machine file {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The text is not valid TOML/JSON, or does not match the schema (unknown key, wrong type).
    /// The message from the parser names the line and column.
    #[error("{file}: {message}")]
    Syntax {
        /// File name (or `<preset NAME>`, `<input>`).
        file: String,
        /// The parser's message, with its position.
        message: String,
    },
    /// The file parses but describes an impossible machine.
    #[error("{file}: {field}: {reason}")]
    Invalid {
        /// File name (or `<preset NAME>`, `<input>`).
        file: String,
        /// The field, in the file's terms: `distances[2][1]`, `nodes[1].cpus`, `devices[0].node`.
        field: String,
        /// Why it is rejected.
        reason: String,
    },
}

/// A field of a machine file and why it is invalid; becomes [`MachineError::Invalid`] once the file
/// name is known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct FieldError {
    /// The field, e.g. `nodes[1].cpus`.
    pub field: String,
    /// Why it is rejected.
    pub reason: String,
}

impl FieldError {
    /// A new field error.
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self { field: field.into(), reason: reason.into() }
    }

    /// Attaches the file name.
    pub fn in_file(self, file: &str) -> MachineError {
        MachineError::Invalid { file: file.to_string(), field: self.field, reason: self.reason }
    }
}

/// `": \"text\""` for a Malformed line, or nothing when `reason` quotes the line already.
fn unless_quoted(reason: &str, text: &str) -> String {
    let quoted = format!("{text:?}");
    if reason.contains(&quoted) {
        String::new()
    } else {
        format!(": {quoted}")
    }
}
