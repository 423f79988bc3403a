//! Errors of the actuation calls: which system call, with which arguments, and the errno.

/// Result of an actuation call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why an actuation call failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kernel refused the call.
    #[error("{syscall}({args}) failed: {}: {}{}", errno_name(*errno), std::io::Error::from_raw_os_error(*errno), hint_suffix(syscall, *errno))]
    Syscall {
        /// The system call, e.g. `"set_mempolicy"`.
        syscall: &'static str,
        /// The arguments as passed, rendered for people (`mode=bind, nodes=0-1, maxnode=65`).
        args: String,
        /// The errno the kernel returned.
        errno: i32,
    },
    /// The running kernel does not know a policy mode or mode flag (EINVAL from a mode check).
    #[error(
        "the running kernel does not support {what} ({syscall} returned EINVAL; {what} needs Linux {since} or later)"
    )]
    Unsupported {
        /// What is missing, e.g. `"preferred-many"` or `"bind with MPOL_F_NUMA_BALANCING"`.
        what: String,
        /// The kernel version that introduced it, e.g. `"5.15"`.
        since: &'static str,
        /// The system call that was refused.
        syscall: &'static str,
    },
    /// An argument we refuse before calling, because the kernel would refuse it or, worse, silently
    /// misread it (e.g. an empty node set for `bind`, a node id beyond the largest kernel mask).
    #[error("{syscall}: bad {arg}: {reason}")]
    InvalidArgument {
        /// The system call that was not made.
        syscall: &'static str,
        /// Which argument, e.g. `"nodes"`.
        arg: &'static str,
        /// Why it was refused.
        reason: String,
    },
}

impl Error {
    /// The errno, when the kernel returned one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Syscall { errno, .. } => Some(*errno),
            Error::Unsupported { .. } => Some(libc::EINVAL),
            Error::InvalidArgument { .. } => None,
        }
    }

    pub(crate) fn last_os(syscall: &'static str, args: String) -> Self {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
        Error::Syscall { syscall, args, errno }
    }
}

/// The symbolic name of an errno value (`EINVAL`), or `errno N` for ones we do not name.
pub fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::E2BIG => "E2BIG",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::EXDEV => "EXDEV",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ENOSPC => "ENOSPC",
        libc::ENOSYS => "ENOSYS",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        _ => return format!("errno {errno}"),
    };
    name.to_string()
}

/// What an errno most likely means for a given call (from the man pages and mm/mempolicy.c).
fn hint(syscall: &str, errno: i32) -> Option<&'static str> {
    Some(match (syscall, errno) {
        ("set_mempolicy" | "mbind", libc::EINVAL) => {
            "no node of the mask has memory and is allowed by the cpuset, or the mode/flags combination is invalid"
        }
        ("mbind", libc::EFAULT) => "the range is not fully mapped",
        ("mbind", libc::EIO) => "MPOL_MF_STRICT: some pages are on nodes outside the policy and could not be moved",
        ("sched_setaffinity", libc::EINVAL) => "the mask contains no CPU that is online and allowed by the cpuset",
        ("sched_setaffinity" | "migrate_pages" | "move_pages", libc::EPERM) => {
            "not permitted (another user's process, or nodes outside its cpuset without CAP_SYS_NICE)"
        }
        (_, libc::ESRCH) => "no such process or thread",
        ("move_pages", libc::ENODEV) => "a target node is not online",
        ("move_pages" | "migrate_pages", libc::EINVAL) => "a node is outside the kernel's node range",
        _ => return None,
    })
}

fn hint_suffix(syscall: &str, errno: i32) -> String {
    hint(syscall, errno).map(|h| format!(" ({h})")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_names_call_arguments_and_errno() {
        let e = Error::Syscall { syscall: "set_mempolicy", args: "mode=bind, nodes=7, maxnode=65".into(), errno: 22 };
        let m = e.to_string();
        assert!(m.starts_with("set_mempolicy(mode=bind, nodes=7, maxnode=65) failed: EINVAL: Invalid argument"), "{m}");
        assert!(m.contains("cpuset"), "{m}");
        assert_eq!(e.errno(), Some(22));
        assert_eq!(errno_name(9999), "errno 9999");
    }

    #[test]
    fn unsupported_names_the_policy() {
        let e = Error::Unsupported { what: "weighted-interleave".into(), since: "6.9", syscall: "set_mempolicy" };
        assert!(e.to_string().starts_with("the running kernel does not support weighted-interleave"), "{e}");
    }
}
