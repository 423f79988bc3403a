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
//!   the directory and every one above it, on the path as given and where it leads (up to /):
//!     owned by root or by the daemon's own uid, and
//!     not writable by group or others unless sticky (/tmp: others cannot rename our files);
//!     the directory holding the daemon's files not even sticky (others could take the names
//!     first: a directory where the journal rotates to, a file at the state file's lock)
//!   every symbolic link on the given path: root's or the daemon's (the path is used as given)
//!   the configuration file: root's or the daemon's, writable by no one else, its directory as
//!   above but sticky will do (the file's own owner is checked)
//! ```
//!
//! Checked before the daemon creates or believes a file there (the control socket before it binds,
//! the state file before its lock is taken and when it is read, the journal before it is opened).
//! The shipped paths (/run/numapilot, /var/log/numapilot, made 0700) pass; a configured path under
//! a user's home or a world-writable directory without the sticky bit is refused with the
//! directory and why.

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

/// Whether the directory itself may be sticky and writable by others.
#[derive(Clone, Copy, PartialEq)]
enum Own {
    /// The daemon makes its files there: writable by no one else at all. In a sticky directory
    /// (/tmp) another user can make the file's name first (a directory where the journal rotates
    /// to, a file at the state file's lock or temporary name) and stop the daemon, or its saves,
    /// for good (review helper-51).
    Makes,
    /// The daemon reads an existing file there whose own owner and mode are checked: sticky is
    /// enough, as no one else can rename that file.
    Reads,
}

/// `Ok` when `dir`, the daemon's files' directory, and every directory above it may be trusted (see
/// the module essay); the reason otherwise, naming the directory (`its directory` when it is
/// `dir` itself).
pub fn trusted_dir(dir: &Path) -> Result<(), String> {
    check_dir(dir, Own::Makes)
}

/// `Ok` when `path` may be believed as the daemon's configuration: a file owned by root or the
/// daemon's uid that no one else may write, in a directory as [`trusted_dir`] wants it except
/// that sticky will do. A configuration is the daemon's most powerful input (what it may touch,
/// where it writes) and was read whoever owned it (review helper-51).
pub fn trusted_config(path: &Path, meta: &std::fs::Metadata) -> Result<(), String> {
    let me = euid();
    if meta.uid() != 0 && meta.uid() != me {
        return Err(format!("it belongs to uid {}, not root or the daemon's", meta.uid()));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!("other users may write it (mode {:o})", meta.mode() & 0o7777));
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    check_dir(dir, Own::Reads)
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

fn check_dir(dir: &Path, own: Own) -> Result<(), String> {
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let me = euid();
    // The path as given, not only where it leads: the daemon opens, binds and renames by this
    // path, so a link on the way that another user owns, or may replace, would send a later
    // open elsewhere (a link in a user's directory to /root passed, then was pointed at the
    // user's own socket; review helper-51). Every component must be root's or the daemon's.
    let given = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        std::env::current_dir().map_err(|e| format!("{}: {e}", dir.display()))?.join(dir)
    };
    for d in given.ancestors().skip(1) {
        let m = std::fs::symlink_metadata(d).map_err(|e| format!("{}: {e}", d.display()))?;
        if m.file_type().is_symlink() && m.uid() != 0 && m.uid() != me {
            return Err(format!(
                "{} on the way to it is a symbolic link of uid {}, not root or the daemon's",
                d.display(),
                m.uid()
            ));
        }
    }
    let link = std::fs::symlink_metadata(&given).map_err(|e| format!("{}: {e}", given.display()))?;
    if link.file_type().is_symlink() && link.uid() != 0 && link.uid() != me {
        return Err(format!("{} is a symbolic link of uid {}, not root or the daemon's", given.display(), link.uid()));
    }
    let abs = std::fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // Every directory the given path passes through, and every one the canonical path has: the
    // link's own directory is in the first, its target's in the second.
    let mut dirs: Vec<&Path> = abs.ancestors().collect();
    dirs.extend(given.ancestors().skip(1));
    for d in dirs {
        let Ok(m) = std::fs::metadata(d) else { continue };
        if !m.is_dir() {
            continue;
        }
        let which = if d == abs { "its directory" } else { "a directory above it," };
        if m.uid() != 0 && m.uid() != me {
            return Err(format!("{which} {} belongs to uid {}, not root or the daemon's", d.display(), m.uid()));
        }
        let sticky_will_do = !(d == abs && own == Own::Makes);
        if m.mode() & 0o022 != 0 && !(sticky_will_do && m.mode() & 0o1000 != 0) {
            let why =
                if sticky_will_do { ", not sticky" } else { "; the daemon's files need a directory of their own" };
            return Err(format!(
                "{which} {} may be written by other users (mode {:o}{why})",
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
        // Sticky (as /tmp): others cannot rename what is not theirs, so a directory below it will
        // do; the sticky directory itself will not hold the daemon's files (others can take their
        // names first), but it may hold a file the daemon reads whose own owner is checked.
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert_eq!(trusted_dir(&below), Ok(()));
        let e = trusted_dir(&open).unwrap_err();
        assert!(e.contains("its directory") && e.contains("need a directory of their own"), "{e}");
        let conf = open.join("np.toml");
        std::fs::write(&conf, "").unwrap();
        std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(trusted_config(&conf, &std::fs::metadata(&conf).unwrap()), Ok(()));
        std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = trusted_config(&conf, &std::fs::metadata(&conf).unwrap()).unwrap_err();
        assert!(e.contains("other users may write it (mode 666)"), "{e}");
    }

    /// A symbolic link on the way that another user owns is refused, though where it leads is
    /// root's: the daemon uses the path as given, and the link can be pointed elsewhere later.
    #[test]
    fn a_link_of_another_user_on_the_way_is_not_trusted() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("target");
        std::fs::create_dir(&target).unwrap();
        let theirs = d.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        let link = theirs.join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(trusted_dir(&link), Ok(()), "root's link in root's directory");
        std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
        let e = trusted_dir(&link).unwrap_err();
        assert!(e.contains("symbolic link of uid 65534"), "{e}");
        let e = trusted_dir(&link.join("below")).unwrap_err();
        assert!(e.contains("on the way to it is a symbolic link of uid 65534"), "{e}");
        // Root's link in a directory another user owns: they may replace the link.
        std::os::unix::fs::lchown(&link, Some(0), Some(0)).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let e = trusted_dir(&link).unwrap_err();
        assert!(e.contains("theirs") && e.contains("belongs to uid 65534"), "{e}");
    }
}
