//! [`BenchError`]: what can go wrong planning, running or recording a benchmark.

use std::path::PathBuf;

/// A benchmark error. Flag errors name the command-line flag they come from.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A bad value of a command-line option (`flag` is its name, e.g. `--mb`).
    #[error("{flag}: {reason}")]
    Flag {
        /// The flag, as written on the command line.
        flag: &'static str,
        /// What is wrong with its value.
        reason: String,
    },
    /// A test name that is none of the known ones.
    #[error("unknown test {name:?}; valid: {valid}")]
    UnknownTest {
        /// The name given.
        name: String,
        /// The valid names, comma-separated.
        valid: String,
    },
    /// Reading the machine's topology failed.
    #[error("reading the NUMA topology: {0}")]
    Topology(#[from] numapilot_topology::TopologyError),
    /// Reading a /proc file failed (other than the process having gone).
    #[error(transparent)]
    Read(#[from] numapilot_observe::ReadError),
    /// A system call of the actuate crate failed in a worker.
    #[error("{what}: {source}")]
    Actuate {
        /// What the worker was doing.
        what: String,
        /// The failed call.
        source: numapilot_actuate::Error,
    },
    /// An I/O error on a file or pipe.
    #[error("{what} ({path}): {source}", path = path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file, pipe or program.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A worker process misbehaved (died before it was ready, wrote something unexpected).
    #[error("worker {index}: {reason}")]
    Worker {
        /// Index of the worker process (0, 1).
        index: usize,
        /// What happened.
        reason: String,
    },
    /// A worker's configuration is not valid JSON of [`crate::WorkerConfig`].
    #[error("worker configuration: {0}")]
    Config(String),
}
