//! Whether a directory the daemon keeps its files in may be trusted: its socket, state file and
//! journal steer or record what a root daemon does to other processes.
//!
//! # Problem
//!
//! A user who owns a directory, or may write in it without the sticky bit, can rename the
//! daemon's files away and put their own in place: a socket of theirs that root's `numapilot
//! status` then talks to, an older state file (a replay of records the next start restores from),
//! or a symlink where the state file's temporary copy, its lock or the journal is created, so that
//! root writes a file of the user's choosing. The same holds for every directory above: one whose
//! parent another user may write in can be renamed aside and replaced by a directory of theirs.
//!
//! # Approach
//!
//! ```text
//!   the directory and every one above it (canonical path, up to /):
//!     owned by root or by the daemon's own uid, and
//!     not writable by group or others unless sticky (/tmp: others cannot rename our files)
//! ```
//!
//! Checked before the daemon creates or believes a file there (the control socket before it binds,
//! the state file before its lock is taken and when it is read, the journal before it is opened).
//! The shipped paths (/run/numapilot, /var/log/numapilot, made 0700) pass; a configured path under
//! a user's home or a world-writable directory without the sticky bit is refused with the
//! directory and why.

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

/// `Ok` when `dir` and every directory above it may be trusted (see the module essay); the reason
/// otherwise, naming the directory (`its directory` when it is `dir` itself).
pub fn trusted_dir(dir: &Path) -> Result<(), String> {
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let abs = std::fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for d in abs.ancestors() {
        let m = std::fs::metadata(d).map_err(|e| format!("{}: {e}", d.display()))?;
        let which = if d == abs { "its directory" } else { "a directory above it," };
        if m.uid() != 0 && m.uid() != me {
            return Err(format!("{which} {} belongs to uid {}, not root or the daemon's", d.display(), m.uid()));
        }
        if m.mode() & 0o022 != 0 && m.mode() & 0o1000 == 0 {
            return Err(format!(
                "{which} {} may be written by other users (mode {:o}, not sticky)",
                d.display(),
                m.mode() & 0o7777
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn a_directory_others_may_write_is_not_trusted_nor_anything_below_it() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(trusted_dir(d.path()), Ok(()));
        let open = d.path().join("open");
        let below = open.join("below");
        std::fs::create_dir_all(&below).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = trusted_dir(&open).unwrap_err();
        assert!(e.contains("its directory") && e.contains("may be written by other users"), "{e}");
        let e = trusted_dir(&below).unwrap_err();
        assert!(e.contains("a directory above it") && e.contains("open"), "{e}");
        // Sticky (as /tmp): others cannot rename what is not theirs.
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert_eq!(trusted_dir(&below), Ok(()));
    }
}
