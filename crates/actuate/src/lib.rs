//! Actuation: the **only** crate of numapilot that changes the system.
//!
//! Everything else observes, models, decides or prints. When numapilot moves a thread, sets a
//! memory policy or migrates a page, the call goes through here, so the whole set of side effects
//! can be read in one place and replaced by a recorder in dry runs and in the simulator.
//!
//! ```text
//!   module        system calls                               used by
//!   ------------  -----------------------------------------  -----------------------------------
//!   mempolicy     set_mempolicy, get_mempolicy, mbind         `numapilot run`, the daemon
//!   affinity      sched_setaffinity, sched_getaffinity        `numapilot run`, the daemon
//!   migrate       migrate_pages, move_pages                   the daemon (page migration)
//!   placement     the two above, rehearsed on a scratch       `numapilot run` (all or nothing
//!                 thread, then applied with restore           before exec)
//!   process       sched_setaffinity on every thread of a      the daemon
//!                 process (re-listed until none escaped);
//!                 resident pages from /proc/PID/pagemap
//!   cgroup        cpuset cgroups v1/v2: mkdir, cpuset.cpus,   the daemon (cpuset mode)
//!                 cpuset.mems, cgroup.procs, rmdir
//!   bitmap        (no calls) kernel mask layout, maxnode      all of the above
//! ```
//!
//! The system calls are made through `libc::syscall` with our own safe wrappers: libc has no
//! wrappers for the NUMA calls, and glibc's `sched_*affinity` wrappers hide the byte count the
//! kernel returns. Node and CPU sets are [`numapilot_topology::IdSet`]s of any width (more than 1024
//! CPUs work). The `maxnode` argument follows libnuma's convention of *bits + 1*; see [`bitmap`]
//! for why.
//!
//! Errors ([`Error`]) name the system call, its arguments and the errno; a mode the running kernel
//! does not have (preferred-many before 5.15, weighted-interleave before 6.9) is reported as
//! [`Error::Unsupported`] ("the running kernel does not support ...").

#![deny(missing_docs)]

pub mod affinity;
pub mod bitmap;
pub mod cgroup;
pub mod error;
pub mod mempolicy;
pub mod migrate;
pub mod placement;
pub mod process;

pub use affinity::{sched_getaffinity, sched_setaffinity, Pid};
pub use cgroup::{CgroupVersion, CpusetHierarchy};
pub use error::{errno_name, Error, Result};
pub use mempolicy::{
    get_mempolicy, get_mempolicy_at, interleave_next_node, kernel_supports, mbind, mems_allowed, node_of_address,
    restore_mempolicy, set_mempolicy, CurrentPolicy, MbindFlags, MemPolicy, Mode, ModeFlags,
};
pub use migrate::{
    has_effective_cap, migrate_pages, migrate_pages_flags, move_pages, without_cap_sys_nice, MoveFlags,
    MovePagesOutcome, PageStatus, CAP_SYS_NICE,
};
pub use placement::{Original, ThreadPlacement};
pub use process::{
    exclusive_pages, kernel_owns_affinity, list_threads, resident_pages, set_process_affinity,
    set_process_affinity_while, set_threads_affinity, set_threads_affinity_while, ProcessAffinity, PF_NO_SETAFFINITY,
};
