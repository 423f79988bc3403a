//! Cpuset cgroups: placing a whole process in a numapilot-made cpuset, and putting it back.
//!
//! # Problem
//!
//! `sched_setaffinity` is per thread and the process may undo it. A cpuset cgroup is per process
//! (every thread, present and future) and enforced by the kernel, but it exists in two
//! incompatible shapes, and a host may have either, both (hybrid: v1 controllers plus an empty v2
//! tree at `/sys/fs/cgroup/unified`) or none:
//!
//! ```text
//!   v2 (unified):  <mount>/cgroup.controllers lists "cpuset"
//!                  <mount>/numapilot/            +cpuset in <mount>/cgroup.subtree_control
//!                  <mount>/numapilot/P-START/    +cpuset in numapilot/cgroup.subtree_control
//!                       cpuset.cpus, cpuset.mems, cgroup.procs
//!   v1 (cpuset):   mount of type "cgroup" with the "cpuset" super option
//!                  <mount>/numapilot/P-START/    cpuset.cpus and cpuset.mems must be written
//!                       cpuset.cpus, cpuset.mems, (both non-empty) before any task joins
//!                       cgroup.procs
//! ```
//!
//! # Approach
//!
//! [`CpusetHierarchy::detect`] reads `/proc/self/mountinfo` (fields per proc(5): the mount point is
//! field 5, the filesystem type follows the ` - ` separator, then the source and the super
//! options) and prefers a v2 tree that offers the cpuset controller, else a v1 cpuset mount.
//! [`CpusetHierarchy::place`] makes `numapilot/<name>` with the CPUs and nodes and writes the pid
//! to its `cgroup.procs` (which moves every thread of the process in both versions).
//! [`CpusetHierarchy::move_to`] writes the pid back into the cgroup it came from
//! ([`CpusetHierarchy::cgroup_of`], as `/proc/PID/cgroup` names it), and
//! [`CpusetHierarchy::remove`] deletes the numapilot cgroup once empty.
//!
//! # Limits
//!
//! v2's "no internal processes" rule is why the cgroup is made under numapilot's own subtree and not
//! under the process's current cgroup: moving a service's process out of its systemd unit changes
//! that unit's accounting until it is moved back.
//!
//! Memory: in v1 it does not follow a cpuset change unless `cpuset.memory_migrate` is set (we leave
//! it unset). v2 migrates always (since 5.15, "cgroup/cpuset: Enable memory migration for cpuset
//! v2"; cgroup-v2.rst, cpuset.mems): a process joining a cpuset whose mems differ from its old
//! ones has all its memory moved there at once, shared page cache included (`MPOL_MF_MOVE_ALL`,
//! `cpuset_attach`), inside the write to `cgroup.procs`. So in v2 numapilot's cgroups leave
//! `cpuset.mems` empty (the parent's, every node): the write moves no page, and page moves stay the
//! daemon's, under its budget and its own-pages rule (review finding: a 20 GiB process placed on
//! another node's CPUs had all 20 GiB copied inside the daemon's write). Measured on the rig's 6.12
//! guest (`numapilot-rig boot 2node rig/scenarios/cpuset-v2-migrate.sh`, 2026-11-29): a process
//! with 65.9 MB on node 0 joining a v2 cpuset of mems 1 had all 65.9 MB on node 1 a second later;
//! one joining a cpuset with mems left empty kept 64.1-64.3 MB on node 0 (1.6-1.9 MB on node 1;
//! two runs).
//!
//! v1 needs `cpuset.mems` written before a task may join, and a task's allocations never leave its
//! cpuset's mems (the page allocator's cpuset check; when they are full the OOM killer picks in the
//! cpuset, `CONSTRAINT_CPUSET` in mm/oom_kill.c). numapilot's v1 cgroups wrote the placement's nodes
//! there: a process placed on one node could no longer spill to another and was OOM-killed when
//! that node filled, where the same placement under v2 or by thread affinity alone spills (the
//! kernel's local-first allocation already puts new pages on the node the threads run on). So in
//! v1 too they take the parent's mems (numapilot's subtree, the root's: every memory node): the
//! cgroup places CPUs, page placement stays the daemon's (review helper-110).

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use numapilot_topology::CpuSet;

use crate::error::{Error, Result};

/// Which cgroup version a cpuset hierarchy is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// cgroup v1 cpuset controller.
    V1,
    /// cgroup v2 unified hierarchy.
    V2,
}

/// A mounted hierarchy that has the cpuset controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpusetHierarchy {
    /// v1 or v2.
    pub version: CgroupVersion,
    /// Where it is mounted.
    pub mount: PathBuf,
}

/// The name of numapilot's own subtree in the hierarchy.
pub const SUBTREE: &str = "numapilot";

fn io_error(syscall: &'static str, path: &Path, e: io::Error) -> Error {
    Error::Syscall { syscall, args: path.display().to_string(), errno: e.raw_os_error().unwrap_or(libc::EIO) }
}

/// Writes `value` to a cgroup control file (one `write`, as the kernel expects).
fn write_file(path: &Path, value: &str) -> Result<()> {
    let mut f = OpenOptions::new().write(true).open(path).map_err(|e| io_error("open", path, e))?;
    f.write_all(value.as_bytes()).map_err(|e| io_error("write", path, e))
}

fn read_file(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| io_error("read", path, e))
}

/// The cpuset hierarchies in a mountinfo text: `(version, mount point)` for every v2 mount whose
/// root `cgroup.controllers` (read from `root`) lists cpuset, and every v1 mount with the cpuset
/// option, in mountinfo order.
pub fn cpuset_mounts(mountinfo: &str, root: &Path) -> Vec<CpusetHierarchy> {
    let mut out = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let mut f = left.split(' ');
        let (Some(fs_root), Some(mount)) = (f.nth(3), f.next()) else { continue };
        // A mount of part of a hierarchy (a bind mount, or a container's view: its root is not
        // "/") shows paths relative to that part, and /proc/PID/cgroup names them from the
        // hierarchy's root: joining one under the other would land in the wrong directory.
        if fs_root != "/" {
            continue;
        }
        // Octal escapes of the mount point (a space is "\040", as fstab writes it).
        let mount = numapilot_topology::sysfs::unescape_octal(mount);
        let mount = mount.as_str();
        let mut r = right.split(' ');
        let (Some(fstype), _source, Some(opts)) = (r.next(), r.next(), r.next()) else { continue };
        let mount_path = root.join(mount.trim_start_matches('/'));
        match fstype {
            "cgroup2" => {
                let ctl = std::fs::read_to_string(mount_path.join("cgroup.controllers")).unwrap_or_default();
                if ctl.split_whitespace().any(|c| c == "cpuset") {
                    out.push(CpusetHierarchy { version: CgroupVersion::V2, mount: mount_path });
                }
            }
            "cgroup" if opts.split(',').any(|o| o == "cpuset") => {
                out.push(CpusetHierarchy { version: CgroupVersion::V1, mount: mount_path })
            }
            _ => {}
        }
    }
    out
}

impl CpusetHierarchy {
    /// The hierarchy to use on this system: `want` `None` prefers v2 with cpuset, then v1; `Some(v)`
    /// only that version. `None` when no such hierarchy is mounted.
    pub fn detect(want: Option<CgroupVersion>) -> Option<CpusetHierarchy> {
        let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let all = cpuset_mounts(&text, Path::new("/"));
        let pick = |v| all.iter().find(|h| h.version == v).cloned();
        match want {
            Some(v) => pick(v),
            None => pick(CgroupVersion::V2).or_else(|| pick(CgroupVersion::V1)),
        }
    }

    /// The cgroup of `pid` in this hierarchy, as `/proc/PID/cgroup` names it (`/` for the root);
    /// `Ok(None)` when the process is gone.
    pub fn cgroup_of(&self, pid: u32) -> io::Result<Option<String>> {
        let text = match std::fs::read_to_string(format!("/proc/{pid}/cgroup")) {
            Ok(t) => t,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ESRCH)) => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(cgroup_line(&text, self.version).map(str::to_string))
    }

    /// The directory of a cgroup path of this hierarchy.
    pub fn dir(&self, cgroup: &str) -> PathBuf {
        self.mount.join(cgroup.trim_start_matches('/'))
    }

    /// Makes numapilot's subtree if missing (v2: enables the cpuset controller down to it; v1:
    /// gives it every CPU and node of the root, as v1 requires before children can be used).
    fn ensure_subtree(&self) -> Result<PathBuf> {
        let sub = self.mount.join(SUBTREE);
        if !sub.is_dir() {
            if self.version == CgroupVersion::V2 {
                enable_cpuset(&self.mount)?;
            }
            match std::fs::create_dir(&sub) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io_error("mkdir", &sub, e)),
            }
        }
        match self.version {
            CgroupVersion::V2 => enable_cpuset(&sub)?,
            // v1 takes an offline CPU out of every cpuset and gives it back, once online, to the
            // root alone: the subtree gets the root's CPUs and nodes again whenever they differ
            // (children may not ask for CPUs their parent lacks: after a hotplug cycle every
            // placement on those CPUs failed).
            CgroupVersion::V1 => {
                for f in ["cpuset.cpus", "cpuset.mems"] {
                    let all = read_file(&self.mount.join(f))?;
                    if read_file(&sub.join(f))?.trim() != all.trim() {
                        write_file(&sub.join(f), all.trim())?;
                    }
                }
            }
        }
        Ok(sub)
    }

    /// Places process `pid` in `numapilot/<name>` with `cpus` (made if missing) and returns the
    /// cgroup path (`/numapilot/<name>`). Its memory nodes are the parent's, never narrowed: in v2
    /// `cpuset.mems` is left empty, in v1 (where it must be written) it is a copy of numapilot's
    /// subtree's, every memory node (see the module's Limits). `still()` is asked right before the
    /// process is written into the cgroup (after the directory and its files, which can wait on
    /// the kernel's cpuset locks): false (the pid no longer names the process meant) stops with
    /// ESRCH and moves nothing.
    pub fn place(&self, pid: u32, name: &str, cpus: &CpuSet, still: impl FnOnce() -> bool) -> Result<String> {
        if cpus.is_empty() || check_cgroup_name(name).is_err() {
            return Err(Error::InvalidArgument {
                syscall: "cgroup",
                arg: "cpuset",
                reason: format!("cpus '{cpus}' and name '{name}' must be non-empty (no '/')"),
            });
        }
        let sub = self.ensure_subtree()?;
        let dir = sub.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_error("mkdir", &dir, e)),
        }
        // Order matters in v1: mems then cpus both set before a task may join; the mems are the
        // subtree's (`ensure_subtree` just gave it the root's). v2: empty mems (a reused cgroup's
        // old value cleared), so that joining moves no memory.
        match self.version {
            CgroupVersion::V1 => {
                let mems = read_file(&sub.join("cpuset.mems"))?;
                write_file(&dir.join("cpuset.mems"), mems.trim())?
            }
            CgroupVersion::V2 => write_file(&dir.join("cpuset.mems"), "\n")?,
        }
        write_file(&dir.join("cpuset.cpus"), &cpus.to_list())?;
        if !still() {
            return Err(Error::Syscall { syscall: "cgroup", args: format!("pid {pid}"), errno: libc::ESRCH });
        }
        write_file(&dir.join("cgroup.procs"), &pid.to_string())?;
        Ok(format!("/{SUBTREE}/{name}"))
    }

    /// Moves process `pid` (all its threads) into the cgroup `cgroup` of this hierarchy.
    pub fn move_to(&self, pid: u32, cgroup: &str) -> Result<()> {
        check_cgroup_path(cgroup).map_err(|reason| Error::InvalidArgument {
            syscall: "cgroup",
            arg: "cgroup",
            reason,
        })?;
        write_file(&self.dir(cgroup).join("cgroup.procs"), &pid.to_string())
    }

    /// Removes `numapilot/<name>` (only empty cgroups can go; a busy or missing one is left).
    pub fn remove(&self, name: &str) -> Result<()> {
        check_cgroup_name(name).map_err(|reason| Error::InvalidArgument { syscall: "rmdir", arg: "name", reason })?;
        let dir = self.mount.join(SUBTREE).join(name);
        match std::fs::remove_dir(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_error("rmdir", &dir, e)),
        }
    }
}

/// Whether `cgroup` is a cgroup path as /proc/PID/cgroup writes one: absolute, no `.` or `..`
/// component (joined under a mount point, those would leave the hierarchy).
pub fn check_cgroup_path(cgroup: &str) -> std::result::Result<(), String> {
    if !cgroup.starts_with('/') {
        return Err("a cgroup path starts with '/'".into());
    }
    if cgroup.split('/').any(|c| c == "." || c == "..") {
        return Err("a cgroup path has no '.' or '..' component".into());
    }
    Ok(())
}

/// Whether `name` is one plain name for a cgroup of numapilot's subtree: not empty, no '/', not
/// `.` or `..`.
pub fn check_cgroup_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err("a cgroup name is one non-empty path component (no '/', not '.' or '..')".into());
    }
    Ok(())
}

/// Whether `dir` lies on a mounted cgroup (v1) or cgroup2 file system (statfs f_type).
pub fn is_cgroup_mount(dir: &Path) -> bool {
    // Magic numbers of include/uapi/linux/magic.h.
    const CGROUP_SUPER_MAGIC: i64 = 0x27e0eb;
    const CGROUP2_SUPER_MAGIC: i64 = 0x63677270;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else { return false };
    // SAFETY: statfs writes into a zeroed struct of its own type; the path is NUL-terminated.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return false;
    }
    #[allow(clippy::unnecessary_cast)]
    let t = st.f_type as i64;
    t == CGROUP_SUPER_MAGIC || t == CGROUP2_SUPER_MAGIC
}

/// Writes `+cpuset` to `dir/cgroup.subtree_control` unless it is already there (v2).
fn enable_cpuset(dir: &Path) -> Result<()> {
    let ctl = dir.join("cgroup.subtree_control");
    if read_file(&ctl)?.split_whitespace().any(|c| c == "cpuset") {
        return Ok(());
    }
    write_file(&ctl, "+cpuset")
}

/// The cgroup path of one hierarchy in a `/proc/PID/cgroup` text: v2 is the `0::PATH` line, v1 the
/// line whose controller list holds `cpuset` (format per cgroups(7): `ID:CONTROLLERS:PATH`).
pub fn cgroup_line(text: &str, version: CgroupVersion) -> Option<&str> {
    text.lines().find_map(|l| {
        let mut it = l.splitn(3, ':');
        let (id, ctl, path) = (it.next()?, it.next()?, it.next()?);
        let hit = match version {
            CgroupVersion::V2 => id == "0" && ctl.is_empty(),
            CgroupVersion::V1 => ctl.split(',').any(|c| c == "cpuset"),
        };
        hit.then_some(path)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_finds_v1_cpuset_and_skips_v2_without_it() {
        // Lines as this development host prints them (hybrid: v1 controllers, empty v2 tree).
        let text = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
                    34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n\
                    41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        let dir = std::env::temp_dir().join(format!("np-cg-{}", std::process::id()));
        let h = cpuset_mounts(text, &dir);
        assert_eq!(h, vec![CpusetHierarchy { version: CgroupVersion::V1, mount: dir.join("sys/fs/cgroup/cpuset") }]);
        // A v2 tree that offers cpuset is found.
        std::fs::create_dir_all(dir.join("sys/fs/cgroup/unified")).unwrap();
        std::fs::write(dir.join("sys/fs/cgroup/unified/cgroup.controllers"), "cpuset cpu io memory pids\n").unwrap();
        let h = cpuset_mounts(text, &dir);
        assert_eq!(h.len(), 2);
        assert_eq!(h[1].version, CgroupVersion::V2);
        std::fs::remove_dir_all(&dir).unwrap();
        // A bind mount of part of a hierarchy (root field not "/") is not one; an escaped mount
        // point is decoded.
        let text = "35 31 0:31 /kubepods /mnt/part rw - cgroup cgroup rw,cpuset\n\
                    36 31 0:31 / /mnt/a\\040b rw - cgroup cgroup rw,cpuset\n";
        let h = cpuset_mounts(text, &dir);
        assert_eq!(h, vec![CpusetHierarchy { version: CgroupVersion::V1, mount: dir.join("mnt/a b") }]);
    }

    /// A cgroup tree in a plain directory, as the kernel shows it (the files exist).
    fn fake_tree(version: CgroupVersion) -> (PathBuf, CpusetHierarchy) {
        // One tree per call: tests run on parallel threads of one process.
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let root = std::env::temp_dir().join(format!("np-cg-{:?}-{}-{n}", version, std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let leaf = root.join(SUBTREE).join("p-1");
        std::fs::create_dir_all(&leaf).unwrap();
        for d in [root.clone(), root.join(SUBTREE), leaf.clone()] {
            for f in ["cgroup.subtree_control", "cpuset.cpus", "cpuset.mems", "cgroup.procs"] {
                std::fs::write(d.join(f), "").unwrap();
            }
        }
        std::fs::write(root.join("cpuset.cpus"), "0-3\n").unwrap();
        std::fs::write(root.join("cpuset.mems"), "0-1\n").unwrap();
        (root.clone(), CpusetHierarchy { version, mount: root })
    }

    /// v2 migrates a joining process's memory to its cpuset's mems at once: numapilot's cgroup
    /// leaves them empty (the parent's) and writes the CPUs; v1, which needs mems written, takes
    /// the subtree's (every memory node), not the placement's node: a v1 cpuset's mems bound the
    /// process's allocations (it wrote "1" here: a process placed on node 1 could allocate
    /// nowhere else, and was the OOM killer's once node 1 filled).
    #[test]
    fn a_placement_leaves_mems_to_the_parent_so_joining_moves_and_confines_no_memory() {
        let cpus: CpuSet = CpuSet::parse_list("2-3").unwrap();
        let (root, h) = fake_tree(CgroupVersion::V2);
        assert_eq!(h.place(42, "p-1", &cpus, || true).unwrap(), "/numapilot/p-1");
        let leaf = root.join(SUBTREE).join("p-1");
        let read = |f: &str| std::fs::read_to_string(leaf.join(f)).unwrap();
        assert_eq!(
            (read("cpuset.mems").trim(), read("cpuset.cpus").as_str(), read("cgroup.procs").as_str()),
            ("", "2-3", "42")
        );
        let _ = std::fs::remove_dir_all(&root);
        let (root, h) = fake_tree(CgroupVersion::V1);
        h.place(42, "p-1", &cpus, || true).unwrap();
        assert_eq!(std::fs::read_to_string(root.join(SUBTREE).join("p-1/cpuset.mems")).unwrap(), "0-1");
        assert_eq!(std::fs::read_to_string(root.join(SUBTREE).join("p-1/cpuset.cpus")).unwrap(), "2-3");
        let _ = std::fs::remove_dir_all(&root);
    }

    /// The identity check asked right before the process is written in: false (its pid now names
    /// another process) writes no pid and says ESRCH.
    #[test]
    fn a_placement_whose_process_changed_writes_no_pid() {
        let (root, h) = fake_tree(CgroupVersion::V2);
        let cpus: CpuSet = CpuSet::parse_list("2-3").unwrap();
        let e = h.place(42, "p-1", &cpus, || false).unwrap_err();
        assert_eq!(e.errno(), Some(libc::ESRCH), "{e}");
        assert_eq!(std::fs::read_to_string(root.join(SUBTREE).join("p-1/cgroup.procs")).unwrap(), "");
        let _ = std::fs::remove_dir_all(&root);
    }

    /// v1 gives a CPU back to the root alone when it comes online again: numapilot's subtree gets
    /// the root's CPUs and nodes again whenever they differ, not only when empty.
    #[test]
    fn a_v1_subtree_follows_the_roots_cpus_after_a_hotplug() {
        let (root, h) = fake_tree(CgroupVersion::V1);
        let sub = root.join(SUBTREE);
        std::fs::write(sub.join("cpuset.cpus"), "0-1\n").unwrap();
        std::fs::write(sub.join("cpuset.mems"), "0\n").unwrap();
        h.ensure_subtree().unwrap();
        // (A plain file keeps the old value's tail past a shorter write; cgroupfs takes the write.)
        let read = |f: &str| std::fs::read_to_string(sub.join(f)).unwrap().trim().to_string();
        assert_eq!((read("cpuset.cpus"), read("cpuset.mems")), ("0-3".to_string(), "0-1".to_string()));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn proc_cgroup_lines() {
        let text = "9:name=systemd:/\n4:memory:/x/y\n3:cpuset:/numapilot/12-34\n0::/user.slice\n";
        assert_eq!(cgroup_line(text, CgroupVersion::V1), Some("/numapilot/12-34"));
        assert_eq!(cgroup_line(text, CgroupVersion::V2), Some("/user.slice"));
        assert_eq!(cgroup_line("1:cpu:/\n", CgroupVersion::V1), None);
    }
}
