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
//!   every directory the path passes through, walked as the kernel resolves it (links followed
//!   by hand, a link in a link's target too, up to /):
//!     owned by root or by the daemon's own uid, and
//!     not writable by others unless sticky (/tmp: others cannot rename our files), nor by its
//!     group unless sticky or, above the daemon's own directory, a system group (Ubuntu's
//!     /var/log is 0775 root:syslog);
//!     the directory holding the daemon's files writable by no one else, sticky or not (others
//!     could take the names first: a directory where the journal rotates to, a file at the
//!     state file's lock)
//!   every symbolic link the walk follows: root's or the daemon's (the path is used as given)
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

/// Directories the daemon made for its files (`make_dirs`), removed again, deepest first and only
/// while empty, when dropped, unless [`MadeDirs::keep`] was called: a start or a reload that fails
/// after making them leaves nothing behind (a failed start left an empty /run/numapilot).
#[derive(Debug, Default)]
pub struct MadeDirs(Vec<std::path::PathBuf>);

impl MadeDirs {
    /// Keeps them for good.
    pub fn keep(mut self) {
        self.0.clear();
    }

    /// The directories made, outermost first.
    pub fn paths(&self) -> &[std::path::PathBuf] {
        &self.0
    }
}

impl Drop for MadeDirs {
    fn drop(&mut self) {
        for d in self.0.iter().rev() {
            // remove_dir refuses a directory with anything in it, which then stays.
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// Makes `dir` and the directories above it that are missing, each mode `mode` (less the umask),
/// and returns those it made. A component that exists and is no directory is the error of
/// `create_dir` (EEXIST), or of the walk below it (ENOTDIR).
pub fn make_dirs(dir: &Path, mode: u32) -> std::io::Result<MadeDirs> {
    use std::os::unix::fs::DirBuilderExt as _;
    let mut missing = Vec::new();
    let mut d = Some(dir);
    while let Some(p) = d.filter(|p| !p.as_os_str().is_empty()) {
        match std::fs::symlink_metadata(p) {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => missing.push(p.to_path_buf()),
            Err(e) => return Err(e),
        }
        d = p.parent();
    }
    let mut made = MadeDirs::default();
    for p in missing.into_iter().rev() {
        match std::fs::DirBuilder::new().mode(mode).create(&p) {
            Ok(()) => made.0.push(p),
            // Made meanwhile by someone else: not ours to remove.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && p.is_dir() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(made)
}

/// `Ok` when `path` may be believed as the daemon's configuration: a file owned by root or the
/// daemon's uid that no one else may write, in a directory as [`trusted_dir`] wants it except
/// that sticky will do. A configuration is the daemon's most powerful input (what it may touch,
/// where it writes) and was read whoever owned it (review helper-51).
pub fn trusted_config(path: &Path, meta: &std::fs::Metadata) -> Result<(), String> {
    let me = euid();
    if meta.uid() != 0 && meta.uid() != me {
        return Err(format!("it belongs to uid {}, not {}", meta.uid(), trusted_owners(me)));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!("other users may write it (mode {:o})", meta.mode() & 0o7777));
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    check_dir(dir, Own::Reads)
}

/// What a file system entry of type `t` is, in words (for errors that say what is in the way).
pub(crate) fn kind_name(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_file() {
        "a regular file"
    } else {
        "a device"
    }
}

/// Whose files and directories are trusted, in words: root's, and the daemon's own uid when it is
/// not root (a root client of the daemon checks as root).
fn trusted_owners(me: u32) -> &'static str {
    if me == 0 {
        "root's"
    } else {
        "root's or the daemon's"
    }
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// Most symbolic links followed on one path, as the kernel's own limit (`MAXSYMLINKS`, 40,
/// include/linux/namei.h): past it the path is refused as a loop.
const MAX_LINKS: usize = 40;

/// Largest id of a system account or group (login.defs' `SYS_UID_MAX`/`SYS_GID_MAX` default,
/// 999). A directory above the daemon's own that a system group may write is trusted when no
/// ordinary account (uid above this) is in the group: Ubuntu ships /var/log as 0775 root:syslog,
/// above the default journal's directory, and only the syslog service is in that group.
/// Prevents: the shipped journal path refused on Ubuntu (review helper-52), without trusting a
/// group such as `users` (gid 100) or `adm` that people are in (review helper-54). The daemon's
/// own directory gets no such allowance.
const SYS_ID_MAX: u32 = 999;

/// Whether group `gid` is a system group no ordinary account is in (see [`SYS_ID_MAX`]), by the
/// local files /etc/group (listed members) and /etc/passwd (primary groups). Unreadable files, or a
/// member not found there, count as an ordinary account: not trusted.
fn system_group(gid: u32) -> bool {
    match (std::fs::read_to_string("/etc/group"), std::fs::read_to_string("/etc/passwd")) {
        (Ok(groups), Ok(passwd)) => system_group_in(gid, &groups, &passwd),
        _ => false,
    }
}

/// [`system_group`] on the texts of /etc/group and /etc/passwd.
fn system_group_in(gid: u32, groups: &str, passwd: &str) -> bool {
    if gid > SYS_ID_MAX {
        return false;
    }
    // name:password:uid:gid:...
    let accounts: Vec<(&str, u32, u32)> = passwd
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            Some((*f.first()?, f.get(2)?.parse().ok()?, f.get(3)?.parse().ok()?))
        })
        .collect();
    let ordinary = |uid: u32| uid > SYS_ID_MAX && uid != 65534;
    if accounts.iter().any(|&(_, uid, g)| g == gid && ordinary(uid)) {
        return false;
    }
    // name:password:gid:member,member
    let members = groups.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.get(2)?.parse::<u32>().ok()? == gid).then(|| f.get(3).copied().unwrap_or(""))
    });
    let Some(members) = members else { return false };
    members
        .split(',')
        .filter(|m| !m.is_empty())
        .all(|m| accounts.iter().find(|(name, _, _)| *name == m).is_some_and(|&(_, uid, _)| !ordinary(uid)))
}

/// Walks `dir` one component at a time as the kernel resolves it, following each symbolic link by
/// hand, and checks everything the walk passes: each directory (owner root or the daemon's; not
/// writable by others unless sticky, by its group unless a system group; the last, where the
/// files are, not writable by anyone else at all when the daemon makes files there) and each link
/// (root's or the daemon's: whoever owns a link, or may write the directory holding it, may point
/// it elsewhere between this check and the daemon's later use of the path). A link inside a link's
/// target is walked the same way (review helper-52: only the given path's and the final path's
/// directories were checked).
fn check_dir(dir: &Path, own: Own) -> Result<(), String> {
    use std::path::Component;
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let me = euid();
    let start = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        std::env::current_dir().map_err(|e| format!("{}: {e}", dir.display()))?.join(dir)
    };
    // Components still to walk, last first; `at` the directory reached so far (checked).
    let mut todo: Vec<std::ffi::OsString> =
        start.components().rev().filter(|c| *c != Component::RootDir).map(|c| c.as_os_str().to_owned()).collect();
    let mut at = std::path::PathBuf::from("/");
    check_one_dir(&at, &std::fs::metadata(&at).map_err(|e| format!("/: {e}"))?, false, own, me)?;
    let mut links = 0;
    while let Some(name) = todo.pop() {
        if name == "." {
            continue;
        }
        if name == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&name);
        let m = std::fs::symlink_metadata(&next).map_err(|e| format!("{}: {e}", next.display()))?;
        if m.file_type().is_symlink() {
            if m.uid() != 0 && m.uid() != me {
                return Err(format!(
                    "{} on the way is a symbolic link of uid {}, not {}",
                    next.display(),
                    m.uid(),
                    trusted_owners(me)
                ));
            }
            links += 1;
            if links > MAX_LINKS {
                return Err(format!("{}: more than {MAX_LINKS} symbolic links (a loop?)", start.display()));
            }
            let target = std::fs::read_link(&next).map_err(|e| format!("{}: {e}", next.display()))?;
            if target.is_absolute() {
                at = std::path::PathBuf::from("/");
            }
            todo.extend(
                target.components().rev().filter(|c| *c != Component::RootDir).map(|c| c.as_os_str().to_owned()),
            );
            continue;
        }
        if !m.is_dir() {
            return Err(format!("{}: not a directory", next.display()));
        }
        at = next;
        // The last is checked below, as the directory that holds the files.
        if !todo.is_empty() {
            check_one_dir(&at, &m, false, own, me)?;
        }
    }
    // The directory the walk ends in holds the files: checked as such whatever the last component
    // was (a path ending in `..`, or a link to `.`, ended the walk by going up, and the directory
    // it reached had only been checked as one above; review helper-54).
    let m = std::fs::metadata(&at).map_err(|e| format!("{}: {e}", at.display()))?;
    check_one_dir(&at, &m, true, own, me)
}

/// One directory of [`check_dir`]'s walk; `last` when it holds the files.
fn check_one_dir(d: &Path, m: &std::fs::Metadata, last: bool, own: Own, me: u32) -> Result<(), String> {
    let which = if last { "its directory" } else { "a directory above it," };
    if m.uid() != 0 && m.uid() != me {
        return Err(format!("{which} {} belongs to uid {}, not {}", d.display(), m.uid(), trusted_owners(me)));
    }
    let strict = last && own == Own::Makes;
    let others = m.mode() & 0o002 != 0;
    let group = m.mode() & 0o020 != 0 && (last || !system_group(m.gid()));
    let sticky = m.mode() & 0o1000 != 0;
    if (others || group) && (strict || !sticky) {
        let why = if strict { "; the daemon's files need a directory of their own" } else { ", not sticky" };
        return Err(format!(
            "{which} {} may be written by other users (mode {:o}{why})",
            d.display(),
            m.mode() & 0o7777
        ));
    }
    Ok(())
}

/// Opens of a lock file in one [`take_lock`] at most. Default 3. Source: a choice; each further
/// try needs the file at the path removed or replaced between this one's open and its lock (a
/// refused start or a stopping daemon removing the lock file it made), or the holder gone between
/// a refused lock and the look at who holds it. Prevents: a lock that is tried for ever.
const LOCK_TRIES: u32 = 3;

/// Why [`take_lock`] did not take the lock.
#[derive(Debug)]
pub enum LockError {
    /// Another process holds it: in words, its pid and name as /proc/locks and /proc/PID/comm
    /// give them (`pid 1234 (numapilot)`).
    Held(String),
    /// Anything else, said with the lock file's path.
    Other(String),
}

/// Takes an exclusive lock (flock, not waiting) on the lock file at `p`, made mode 0600 when
/// missing and never opened through a link; it must be a regular file of this uid. The lock is
/// held while the returned file is open (the kernel drops it however the process ends, so a
/// kill -9 leaves no stale lock). Also returns whether this call made the file.
///
/// The lock counts only on the file still at `p`: whoever removes a lock file it holds (a refused
/// start that made it, a daemon that stops) leaves a starter that opened it just before holding a
/// lock on a file no one else can open; such a lock is let go and the path opened again.
pub fn take_lock(p: &Path) -> Result<(std::fs::File, bool), LockError> {
    use std::os::unix::io::AsRawFd as _;
    let shown = p.display();
    let me = euid();
    let mut tries = 0;
    loop {
        tries += 1;
        let last = tries >= LOCK_TRIES;
        let (f, created) = match open_lock(p) {
            // Removed between the two opens: again.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !last => continue,
            r => r.map_err(|e| LockError::Other(format!("lock {shown}: cannot open: {e}")))?,
        };
        let m = f.metadata().map_err(|e| LockError::Other(format!("lock {shown}: {e}")))?;
        if !m.file_type().is_file() || m.uid() != me {
            return Err(LockError::Other(format!(
                "lock {shown}: not a regular file of uid {me}: not trusted; remove it"
            )));
        }
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(LockError::Other(format!("lock {shown}: cannot lock: {e}")));
            }
            match lock_holder(&m) {
                Some(pid) => return Err(LockError::Held(process_words(pid))),
                // Let go between the lock and the look: again.
                None if !last => continue,
                None => return Err(LockError::Held("a process /proc/locks does not name".into())),
            }
        }
        if same_file(&f, p) {
            return Ok((f, created));
        }
        if last {
            return Err(LockError::Other(format!(
                "lock {shown}: replaced while it was being locked, {LOCK_TRIES} times"
            )));
        }
    }
}

/// Opens the lock file at `p` (mode 0600, never through a link), made when missing; whether this
/// call made it.
fn open_lock(p: &Path) -> std::io::Result<(std::fs::File, bool)> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let open = |create: bool| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(create)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(p)
    };
    match open(true) {
        Ok(f) => Ok((f, true)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => open(false).map(|f| (f, false)),
        Err(e) => Err(e),
    }
}

/// Whether the entry at `p` (not followed if a link) is the file `f` is open on.
pub fn same_file(f: &std::fs::File, p: &Path) -> bool {
    match (f.metadata(), std::fs::symlink_metadata(p)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// The pid holding a write flock on the file `m` describes, from /proc/locks; `None` when no line
/// names it (let go since) or the holder is outside this pid namespace (the kernel shows 0).
fn lock_holder(m: &std::fs::Metadata) -> Option<u32> {
    let text = std::fs::read_to_string("/proc/locks").ok()?;
    flock_holder_in(&text, libc::major(m.dev()), libc::minor(m.dev()), m.ino())
}

/// [`lock_holder`] on the text of /proc/locks: the pid of the first granted FLOCK WRITE line on
/// device `major:minor`, inode `ino`. A line reads `1: FLOCK  ADVISORY  WRITE 1234 fe:00:5678 0
/// EOF` (device numbers in hex, as fs/locks.c prints them); a waiter's has `->` after the number.
fn flock_holder_in(text: &str, major: u32, minor: u32, ino: u64) -> Option<u32> {
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.get(1..4)? != ["FLOCK", "ADVISORY", "WRITE"] {
            return None;
        }
        let mut at = f.get(5)?.split(':');
        let (ma, mi, i) = (at.next()?, at.next()?, at.next()?);
        let same = u32::from_str_radix(ma, 16).ok()? == major
            && u32::from_str_radix(mi, 16).ok()? == minor
            && i.parse::<u64>().ok()? == ino;
        f[4].parse::<u32>().ok().filter(|&pid| same && pid > 0)
    })
}

/// `pid N (COMM)`, or `pid N` when its name cannot be read (it has gone).
pub fn process_words(pid: u32) -> String {
    match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
        Ok(c) => format!("pid {pid} ({})", numapilot_model::tasks::printable(c.strip_suffix('\n').unwrap_or(&c))),
        Err(_) => format!("pid {pid}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_dirs_go_again_unless_kept() {
        let d = tempfile::tempdir().unwrap();
        let deep = d.path().join("a/b/c");
        let made = make_dirs(&deep, 0o700).unwrap();
        assert_eq!(made.paths(), [d.path().join("a"), d.path().join("a/b"), deep.clone()]);
        assert_eq!(std::fs::metadata(&deep).unwrap().mode() & 0o777, 0o700);
        drop(made);
        assert!(!d.path().join("a").exists(), "made directories left behind");
        // Only those it made, and only while empty.
        std::fs::create_dir(d.path().join("a")).unwrap();
        let made = make_dirs(&deep, 0o700).unwrap();
        assert_eq!(made.paths().len(), 2);
        std::fs::write(deep.join("f"), "").unwrap();
        drop(made);
        assert!(deep.join("f").exists());
        std::fs::remove_file(deep.join("f")).unwrap();
        make_dirs(&deep.join("d"), 0o700).unwrap().keep();
        assert!(deep.join("d").is_dir());
        // A file in the way is an error and nothing is made.
        std::fs::write(d.path().join("file"), "").unwrap();
        assert!(make_dirs(&d.path().join("file/x"), 0o700).is_err());
    }

    /// A lock another holder has is refused naming that holder's pid (here this process: flock
    /// locks belong to the open file, so a second open of the same file conflicts), read from
    /// /proc/locks by device and inode; once let go it is taken.
    #[test]
    fn a_held_lock_names_its_holder() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(".x.lock");
        let (held, made) = take_lock(&p).unwrap();
        assert!(made);
        let me = std::process::id();
        match take_lock(&p) {
            Err(LockError::Held(who)) => assert!(who.starts_with(&format!("pid {me} (")), "{who}"),
            other => panic!("{other:?}"),
        }
        drop(held);
        let (_again, made) = take_lock(&p).unwrap();
        assert!(!made, "the file was there");
    }

    #[test]
    fn proc_locks_lines_name_the_holder_of_that_file_only() {
        let text = "1: POSIX  ADVISORY  WRITE 10 fe:00:77 0 EOF\n\
                    2: FLOCK  ADVISORY  READ 11 fe:00:77 0 EOF\n\
                    3: FLOCK  ADVISORY  WRITE 12 fe:01:77 0 EOF\n\
                    4: FLOCK  ADVISORY  WRITE 13 fe:00:78 0 EOF\n\
                    5: FLOCK  ADVISORY  WRITE 14 fe:00:77 0 EOF\n\
                    5: -> FLOCK  ADVISORY  WRITE 15 fe:00:77 0 EOF\n";
        assert_eq!(flock_holder_in(text, 0xfe, 0, 77), Some(14));
        assert_eq!(flock_holder_in(text, 0xfe, 0, 79), None);
        // A holder in another pid namespace shows as 0: not named.
        assert_eq!(flock_holder_in("1: FLOCK  ADVISORY  WRITE 0 00:1a:5 0 EOF\n", 0, 0x1a, 5), None);
    }
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
    /// Which groups count as system groups no person is in: by id, listed members and primary
    /// groups.
    #[test]
    fn a_system_group_is_one_no_ordinary_account_is_in() {
        let passwd = "root:x:0:0::/root:/bin/sh\nsyslog:x:104:110::/home/syslog:/usr/sbin/nologin\n\
                      ann:x:1000:1000::/home/ann:/bin/bash\nbob:x:1001:100::/home/bob:/bin/bash\n";
        let groups = "root:x:0:\nadm:x:4:syslog,ann\nusers:x:100:\nsyslog:x:110:\nsys2:x:111:syslog\nann:x:1000:\n";
        assert!(system_group_in(110, groups, passwd), "syslog's group: only the syslog service");
        assert!(system_group_in(111, groups, passwd), "a system member only");
        assert!(!system_group_in(4, groups, passwd), "adm has a person in it");
        assert!(!system_group_in(100, groups, passwd), "users is bob's primary group");
        assert!(!system_group_in(1000, groups, passwd), "not a system group id");
        assert!(!system_group_in(120, groups, passwd), "no such group");
    }

    /// A directory above the daemon's own that a system group may write (Ubuntu's /var/log, 0775
    /// root:syslog) is trusted; one a person's group may write is not, nor the daemon's own
    /// directory writable by any group. (Group 1, `daemon`, has no person in it on Debian.)
    #[test]
    fn a_system_groups_directory_above_is_trusted() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("log");
        let own = log.join("numapilot");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o775)).unwrap();
        std::os::unix::fs::chown(&log, Some(0), Some(1)).unwrap();
        assert!(system_group(1), "group 1 has a person in it on this host: the test needs one that does not");
        assert_eq!(trusted_dir(&own), Ok(()));
        std::os::unix::fs::chown(&log, Some(0), Some(1000)).unwrap();
        assert!(trusted_dir(&own).unwrap_err().contains("may be written by other users (mode 775, not sticky)"));
        std::os::unix::fs::chown(&log, Some(0), Some(0)).unwrap();
        std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o770)).unwrap();
        std::os::unix::fs::chown(&own, Some(0), Some(1)).unwrap();
        assert!(trusted_dir(&own).unwrap_err().contains("its directory"));
    }

    /// A path that ends by going up (`sub/..`) is checked as the directory that holds the files
    /// (it ended the walk checked only as one above: sticky passed; review helper-54).
    #[test]
    fn a_path_ending_in_dot_dot_is_checked_where_it_ends() {
        let d = tempfile::tempdir().unwrap();
        let open = d.path().join("open");
        let sub = open.join("sub");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(trusted_dir(&open).is_err());
        let e = trusted_dir(&sub.join("..")).unwrap_err();
        assert!(e.contains("its directory") && e.contains("need a directory of their own"), "{e}");
        std::os::unix::fs::symlink(".", sub.join("here")).unwrap();
        assert_eq!(trusted_dir(&sub.join("here")), Ok(()), "a link to . ends in sub itself");
    }

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
        assert!(e.contains("link on the way is a symbolic link of uid 65534"), "{e}");
        // A link inside a link's target is walked too: root's link to a directory holding
        // another user's link (review helper-52: only the given path's and the final path's
        // directories were checked).
        std::os::unix::fs::lchown(&link, Some(0), Some(0)).unwrap();
        let mid = d.path().join("mid");
        std::fs::create_dir(&mid).unwrap();
        let inner = mid.join("inner");
        std::os::unix::fs::symlink(&target, &inner).unwrap();
        std::os::unix::fs::lchown(&inner, Some(65534), Some(65534)).unwrap();
        let outer = d.path().join("outer");
        std::os::unix::fs::symlink(&mid, &outer).unwrap();
        let e = trusted_dir(&outer.join("inner")).unwrap_err();
        assert!(e.contains("mid/inner on the way is a symbolic link of uid 65534"), "{e}");
        std::os::unix::fs::lchown(&inner, Some(0), Some(0)).unwrap();
        assert_eq!(trusted_dir(&outer.join("inner")), Ok(()));
        // A loop of links is refused, not followed for ever.
        std::os::unix::fs::symlink(d.path().join("loop2"), d.path().join("loop1")).unwrap();
        std::os::unix::fs::symlink(d.path().join("loop1"), d.path().join("loop2")).unwrap();
        assert!(trusted_dir(&d.path().join("loop1")).unwrap_err().contains("more than 40 symbolic links"));
        // Root's link in a directory another user owns: they may replace the link.
        std::os::unix::fs::lchown(&link, Some(0), Some(0)).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let e = trusted_dir(&link).unwrap_err();
        assert!(e.contains("theirs") && e.contains("belongs to uid 65534"), "{e}");
    }
}
