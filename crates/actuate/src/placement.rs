//! Placing the calling thread: a memory policy and a CPU set, rehearsed first, applied all or
//! nothing.
//!
//! # Problem
//!
//! `numapilot run --membind=1 --cpunodebind=1 cmd` must either place itself completely and `exec`
//! the command, or change nothing and run nothing. Two system calls are involved, and either can be
//! refused by the kernel for reasons we cannot fully predict from sysfs (a cpuset that changed, a
//! node whose memory is all ZONE_MOVABLE, a seccomp filter, a kernel without the mode).
//!
//! # Approach
//!
//! ```text
//!   rehearse():  scratch thread ── set_mempolicy ── sched_setaffinity(0) ── exit
//!                   (same process, same cpuset, same kernel: the same answers; the caller's
//!                    thread is untouched because both settings are per thread)
//!   apply():     remember original policy + CPUs ── set_mempolicy ── sched_setaffinity(0)
//!                                                          └── on failure: restore the policy
//! ```
//!
//! [`ThreadPlacement::rehearse`] runs the exact calls on a short-lived thread: the memory policy and
//! the affinity of a thread are the thread's own, so the rehearsal tells us what the kernel will say
//! without changing the caller. [`ThreadPlacement::apply`] then does it for real on the calling
//! thread, and if the second call fails after the first succeeded it puts the original policy back.
//!
//! # Limits
//!
//! Between rehearsal and application the world can change (a cpuset is rewritten); `apply` still
//! restores on failure, so the only consequence is an error instead of a run.

use numapilot_topology::CpuSet;

use crate::affinity::{sched_getaffinity, sched_setaffinity};
use crate::error::Result;
use crate::mempolicy::{get_mempolicy, restore_mempolicy, set_mempolicy, CurrentPolicy, MemPolicy, ModeFlags};

/// A memory policy and/or a CPU set for one thread.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadPlacement {
    /// The memory policy to set, with its mode flags; `None` leaves the policy alone.
    pub policy: Option<(MemPolicy, ModeFlags)>,
    /// The CPUs to allow; `None` leaves the affinity alone.
    pub cpus: Option<CpuSet>,
}

/// What [`ThreadPlacement::apply`] replaced, to put it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Original {
    /// The thread's policy before, when a policy was set.
    pub policy: Option<CurrentPolicy>,
    /// The thread's CPUs before, when an affinity was set.
    pub cpus: Option<CpuSet>,
}

impl Original {
    /// Restores the calling thread's original policy and CPUs.
    pub fn restore(&self) -> Result<()> {
        if let Some(p) = &self.policy {
            restore_mempolicy(p)?;
        }
        if let Some(c) = &self.cpus {
            sched_setaffinity(0, c)?;
        }
        Ok(())
    }
}

impl ThreadPlacement {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.policy.is_none() && self.cpus.is_none()
    }

    /// Runs the system calls on a scratch thread and reports the first refusal, leaving the calling
    /// thread unchanged.
    pub fn rehearse(&self) -> Result<()> {
        if self.is_empty() {
            return Ok(());
        }
        let plan = self.clone();
        // No thread to spare (RLIMIT_NPROC, a full pids.max or TasksMax): no rehearsal. numactl
        // needs no task beyond itself and runs there; `apply` undoes its own half-done change, so
        // the rehearsal only makes the error come earlier.
        let Ok(handle) =
            std::thread::Builder::new().name("numapilot-rehearse".into()).spawn(move || plan.set_calling_thread())
        else {
            return Ok(());
        };
        match handle.join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }

    /// Applies the placement to the calling thread: the memory policy first, then the CPUs. If the
    /// CPUs are refused after the policy was set, the original policy is restored before the error
    /// is returned. On success, returns what was replaced.
    pub fn apply(&self) -> Result<Original> {
        let original = Original {
            policy: if self.policy.is_some() { Some(get_mempolicy()?) } else { None },
            cpus: if self.cpus.is_some() { Some(sched_getaffinity(0)?) } else { None },
        };
        if let Err(e) = self.set_calling_thread() {
            if let Some(orig) = &original.policy {
                // Best effort: the error that matters is the one returned. When it was the policy
                // itself that was refused, nothing changed and this sets the same policy again.
                let _ = restore_mempolicy(orig);
            }
            return Err(e);
        }
        Ok(original)
    }

    /// The two calls on the calling thread, policy first; stops at the first refusal.
    fn set_calling_thread(&self) -> Result<()> {
        if let Some((p, f)) = &self.policy {
            set_mempolicy(p, *f)?;
        }
        if let Some(c) = &self.cpus {
            sched_setaffinity(0, c)?;
        }
        Ok(())
    }
}
