//! Observation: pure parsers for /proc and /sys files, a [`Reader`] over an overridable root, and the
//! raw [`Sample`] the model is derived from. Nothing here decides anything.
//!
//! ```text
//!   kernel text ──read──> Reader (root "/" or a fixture dir) ──&str──> parse::* (pure) ──> Sample
//!                              skips vanished pids/tids                 typed errors        raw, serde
//! ```
//!
//! - [`parse`]: one pure `parse_x(&str) -> Result<X, ParseError>` per kernel file; each module's essay
//!   names the kernel source that writes the file, the versions checked, the units and the quirks.
//! - [`Reader`]: reads one process, one thread, the nodes, the system counters, or everything at
//!   once ([`Reader::sample`], or [`Reader::sample_of`] for chosen processes). A process or thread that
//!   exits while being read is skipped.
//! - [`Sample`]: what one observation saw, stored raw (serializable, so a run can be recorded and
//!   replayed). [`rate`] derives per-thread CPU rates and run delays from two samples; `numapilot stat
//!   --threads` shows them with the rest of a sample.
//!
//! Units are kept as the kernel gives them and named in every field: ticks (USER_HZ), pages, kB, ns.

#![deny(missing_docs)]

pub mod counters;
pub mod error;
pub mod maps;
pub mod net;
pub mod parse;
pub mod pmu;
pub mod proc_events;
pub mod rate;
pub mod reader;
pub mod replay;
pub mod sample;
pub mod signal_error;
pub mod sockets;
pub mod stall;

pub use counters::Counters;
pub use error::{FileKind, ParseError, ReadError};
pub use maps::{group_shared, MapEntry};
pub use parse::meminfo::{Meminfo, MeminfoEntry};
pub use parse::numa_maps::{MemKind, MemPolicy, NodeUsage, NumaMaps, PolicyMode, PolicyUsage, Vma, VmaKind};
pub use parse::proc_stat::{CpuTimes, ProcStat};
pub use parse::psi::{Psi, PsiLine};
pub use parse::sched::{NodeFaults, SchedInfo, SchedNuma};
pub use parse::schedstat::SchedStat;
pub use parse::stat::TaskStat;
pub use parse::status::TaskStatus;
pub use rate::{thread_cpu_rates, ThreadRate};
pub use reader::{ReadOptions, Reader, SchedMode, Skipped};
pub use sample::{
    AccessSample, CommKind, CommSample, CpuUse, MemBandwidth, NodeSample, ObjectId, ProcessSample, PsiSample, Sample,
    SharedMemory, ThreadSample,
};
pub use signal_error::{LineError, SignalError, SignalFile};
pub use stall::{StallCounts, StallError, StallGuard, Stuck};
