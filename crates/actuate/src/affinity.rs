//! CPU affinity: `sched_setaffinity` and `sched_getaffinity` with masks of any width.
//!
//! # Problem
//!
//! glibc's `cpu_set_t` is a fixed 1024-bit mask, but the kernel's `nr_cpu_ids` can be larger (x86-64
//! `CONFIG_MAXSMP` allows 8192 CPUs). The raw system calls take a byte length instead, and the two
//! directions treat it differently:
//!
//! ```text
//!   sched_setaffinity(pid, len, mask)   reads min(len, cpumask_size()) bytes, zero-fills the rest;
//!                                       EINVAL if nothing left after & cpu_active & cpuset
//!   sched_getaffinity(pid, len, mask)   EINVAL if len * 8 < nr_cpu_ids or len % sizeof(long) != 0;
//!                                       returns the number of bytes written
//! ```
//!
//! # Approach
//!
//! Setting: the buffer is exactly as wide as the highest CPU in the set (whole words), built by
//! [`KernelBitmap`]; a set naming CPU 4095 is a 512-byte buffer.
//! Getting: start at 1024 bits and double on EINVAL until the kernel accepts the size (glibc's
//! `sched_getaffinity` and numactl's `show_physcpubind` do the same), up to [`MAX_CPU_BITS`].
//!
//! Both calls act on one *thread*: `pid` is a thread id, and 0 means the calling thread.

use std::os::raw::{c_long, c_ulong};

use numapilot_topology::CpuSet;

use crate::bitmap::KernelBitmap;
use crate::error::{Error, Result};

/// A thread or process id as the kernel takes it; 0 means the calling thread.
pub type Pid = libc::pid_t;

/// First CPU-mask width tried by [`sched_getaffinity`]: glibc's `cpu_set_t` (1024 bits).
const GET_START_BITS: u32 = 1024;

/// Widest CPU mask [`sched_getaffinity`] will try: 2^20 bits (numactl's limit in
/// `show_physcpubind`), far above any kernel's `NR_CPUS`; stops the doubling if EINVAL has another
/// cause.
pub const MAX_CPU_BITS: u32 = 1 << 20;

/// Restricts thread `pid` (0 = the calling thread) to `cpus` (`sched_setaffinity(2)`).
///
/// The kernel intersects the set with the online CPUs and the thread's cpuset; EINVAL when nothing
/// remains. CPUs at or above the kernel's `nr_cpu_ids` are ignored by the kernel, so callers should
/// validate against the online CPUs first.
pub fn sched_setaffinity(pid: Pid, cpus: &CpuSet) -> Result<()> {
    if cpus.is_empty() {
        return Err(Error::InvalidArgument {
            syscall: "sched_setaffinity",
            arg: "mask",
            reason: "the CPU set is empty".into(),
        });
    }
    let mask = KernelBitmap::from_set(cpus, 0);
    // SAFETY: `mask` is `byte_len()` bytes long and alive for the call; the kernel only reads it.
    let rc =
        unsafe { libc::syscall(libc::SYS_sched_setaffinity, pid as c_long, mask.byte_len() as c_ulong, mask.as_ptr()) };
    if rc != 0 {
        return Err(Error::last_os(
            "sched_setaffinity",
            format!("pid={pid}, len={}, cpus={}", mask.byte_len(), cpus.to_list()),
        ));
    }
    Ok(())
}

/// The CPUs thread `pid` (0 = the calling thread) may run on (`sched_getaffinity(2)`), for any
/// number of CPUs.
pub fn sched_getaffinity(pid: Pid) -> Result<CpuSet> {
    let mut bits = GET_START_BITS;
    loop {
        let mut mask = KernelBitmap::zeroed(bits);
        // SAFETY: `mask` is `byte_len()` bytes, writable, alive for the call; the kernel writes at
        // most that many bytes.
        let rc = unsafe {
            libc::syscall(libc::SYS_sched_getaffinity, pid as c_long, mask.byte_len() as c_ulong, mask.as_mut_ptr())
        };
        if rc >= 0 {
            return Ok(mask.to_set());
        }
        let err = Error::last_os("sched_getaffinity", format!("pid={pid}, len={}", mask.byte_len()));
        if err.errno() == Some(libc::EINVAL) && bits < MAX_CPU_BITS {
            bits *= 2;
            continue;
        }
        return Err(err);
    }
}
