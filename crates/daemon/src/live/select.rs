//! Which processes the daemon may touch: identity (pid + start time), kernel threads, exclusions
//! (pid, comm, cgroup prefix), `[include]` lists and self-pinned processes.
//!
//! # Problem
//!
//! A plan is made from a sample taken milliseconds to seconds earlier. By the time an action runs
//! the process may have exited and its pid been given to another one; the daemon must never change
//! that other process. And some processes are not ours to move: kernel threads, whatever the
//! operator excluded, and processes that placed themselves (taskset, numactl, an application's own
//! binding), whose placement is a decision someone already made.
//!
//! # Approach
//!
//! ```text
//!   apply(action) ─> /proc/PID/stat now ─ gone, or starttime != action's ─> Vanished
//!                          │ unreadable (no descriptor or memory left) ──> Refused "unknown"
//!                          │ flags & PF_KTHREAD ──────────────────────────> Refused "kernel thread"
//!                          │ the daemon's own pid (always) ───────────────> Refused "numapilot itself"
//!                          │ pid / comm / cgroup prefix excluded ─────────> Refused "excluded ..."
//!                          │ an [include] list set, and none names it ───> Refused "not in [include]"
//!                          │ not include_pinned and (we have not touched it):
//!                          │   a thread's affinity narrower than its cpuset's CPUs
//!                          │   (reserved CPUs left out of both: `Topology::reserve`)
//!                          │   or numa_maps shows bind / prefer / interleave ───> Refused "pinned ..."
//!                          └─> act
//! ```
//!
//! What cannot be read for want of a descriptor or memory (EMFILE, ENFILE, ENOMEM:
//! [`short_of_resources`]) is unknown, never absent. For an action it is a refusal, tried again at
//! the next step: the process's stat ([`stat_now`]), its cgroups when a cgroup list is set
//! ([`exclusion`] refuses unknown membership), whether a child inherited a placed parent's mask
//! (`LiveHost::inherited`), its threads (`LiveHost::repinned`, [`pinned`]). For a decision that
//! can wait it is judged again at the next sample: whether a process on record left numapilot's
//! hands ([`exclusion_known`], `LiveHost::release_left`'s pending releases), the observer's class
//! of a process (kept until its cgroups read).
//!
//! A cgroup prefix matches whole path components: `/system.slice` matches `/system.slice` and
//! `/system.slice/ssh.service`, not `/system.slice2`. Every hierarchy line of /proc/PID/cgroup is
//! checked (v1 and v2), so an operator can name whichever they know.
//!
//! The "cpuset's CPUs" of a thread are its cpuset's effective CPUs read from the cgroup
//! (`cpuset.effective_cpus` v1, `cpuset.cpus.effective` v2) when a cpuset hierarchy is mounted,
//! else the online CPUs of the nodes in its `Mems_allowed` (the model's own rule). A process the
//! daemon already narrowed itself is not "pinned" by its affinity (it is ours), nor is a child that
//! inherited that mask at fork (every thread on a mask the daemon set on a thread of its parent,
//! which is on record: `LiveHost::inherited`); such a child is recorded with its parent's original,
//! and restore puts back even the children never touched (`state::restore_inherited`). Its memory
//! policy still counts, because the daemon never sets one.
//!
//! # Limits
//!
//! The check and the system call are not atomic. The identity is checked when an action starts and
//! again ([`same_process`]) right before each system call that changes the process (after the
//! numa_maps reads and state-file writes that come between, which take milliseconds and partly
//! depend on the target), and before each batch of a page move: what remains is the window between
//! that last read of /proc/PID/stat and the call, microseconds, in which the pid would have to exit
//! and be handed to another process (a pidfd would close even that; not done).

use numapilot_actuate::{sched_getaffinity, CpusetHierarchy};
use numapilot_observe::parse::stat::{parse_stat, TaskStat};
use numapilot_observe::Reader;
use numapilot_topology::{CpuSet, NodeSet, Topology};

use super::LiveOptions;

/// Why `advise --pid PID` cannot name `pid`, or `None`: no such process, a thread of another (its
/// id is no process's), init, a kernel thread, a zombie, or this daemon: none is ever placed, and
/// a promise for one held room for nothing (review helper-55). Also when its stat cannot be read
/// for want of a descriptor or memory: it is then not called absent.
pub fn launch_refusal(pid: u32) -> Option<String> {
    launch_refusal_under(std::path::Path::new("/"), pid)
}

/// [`launch_refusal`] of the process `pid` of the tree at `root` (its `ROOT/proc/PID/stat` and
/// `status`): `explain` of a pid the model does not hold says why from the tree it observes. On
/// another root (a fixture tree) the daemon's own pid names one of the tree's processes, not the
/// daemon.
pub fn launch_refusal_under(root: &std::path::Path, pid: u32) -> Option<String> {
    let stat = match stat_under(root, pid) {
        Ok(Some(s)) => s,
        Ok(None) => return Some("no such process".into()),
        // Refused, but not as absent: the process may well be there.
        Err(e) => return Some(format!("/proc/{pid}/stat could not be read ({e}): whether it runs is unknown")),
    };
    let status = std::fs::read_to_string(root.join(format!("proc/{pid}/status"))).unwrap_or_default();
    let tgid = status.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse::<u32>().ok());
    Some(match tgid {
        Some(t) if t != pid => format!("a thread of process {t}, not a process"),
        _ if pid == 1 => "init: never managed".into(),
        _ if stat.is_kernel_thread() => "a kernel thread: never managed".into(),
        // A zombie leader whose threads run on is a live process (its memory read through a
        // thread: zombie-leader-memory); one with no thread left has nothing to place.
        _ if stat.is_zombie() => "a zombie (exited, not yet reaped): nothing to place".into(),
        _ if pid == std::process::id() && root == std::path::Path::new("/") => "numapilot itself: never managed".into(),
        _ => return None,
    })
}

/// What became of `pid`, known by `starttime`, since the daemon's last look, when `explain` must
/// say it (`Restore::since_last_step`): gone, a zombie with no thread left, or the pid another
/// process's now. `None`: it runs on as seen (or the read failed for want of a resource).
pub fn since_last_step(pid: u32, starttime: u64) -> Option<String> {
    since_last_step_under(std::path::Path::new("/"), pid, starttime)
}

/// [`since_last_step`] of the process `pid` of the tree at `root` (`ROOT/proc/PID/stat`): on a
/// fixture tree, what became of the fixture's process, not of the live system's of that pid.
pub fn since_last_step_under(root: &std::path::Path, pid: u32, starttime: u64) -> Option<String> {
    match stat_under(root, pid) {
        Ok(None) => Some("it exited (this is the view of the last step)".into()),
        Ok(Some(s)) if s.starttime != starttime => {
            Some("its pid now names another process (this is the view of the one before, at the last step)".into())
        }
        Ok(Some(s)) if s.is_zombie() => {
            Some("it exited and is a zombie, not yet reaped (this is the view of the last step)".into())
        }
        _ => None,
    }
}

/// `/proc/PID/stat` now; `None` when the process is gone (or the file is unreadable).
pub fn read_stat(pid: u32) -> Option<TaskStat> {
    stat_now(pid).ok().flatten()
}

/// `/proc/PID/stat` now: `Ok(None)` when the process is gone (no such file, ESRCH, or content
/// that does not parse), `Err` when the machine could not say (`short_of_resources`: no file
/// descriptor or memory left). Whatever drops state for a process "gone" must use this, not
/// [`read_stat`]: with the descriptor table full, every process read as gone and its original
/// was dropped from the record of a live process (review helper-34).
pub fn stat_now(pid: u32) -> std::io::Result<Option<TaskStat>> {
    stat_under(std::path::Path::new("/"), pid)
}

/// [`stat_now`] read from `ROOT/proc/PID/stat`: the process of that pid in the tree the daemon
/// observes (on a fixture tree, the fixture's, not whatever process of the live system has its
/// pid).
pub fn stat_under(root: &std::path::Path, pid: u32) -> std::io::Result<Option<TaskStat>> {
    match std::fs::read(root.join(format!("proc/{pid}/stat"))) {
        Ok(text) => Ok(parse_stat(&String::from_utf8_lossy(&text)).ok()),
        Err(e) if short_of_resources(&e) => Err(e),
        Err(_) => Ok(None),
    }
}

/// Whether a failed read of a /proc file says the daemon (or the machine) is short of something
/// (EMFILE, ENFILE, ENOMEM, EAGAIN, EINTR) rather than anything about the process.
pub fn short_of_resources(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM | libc::EAGAIN | libc::EINTR))
}

/// What `/proc/PID/stat` says of a process known by `starttime`: `Some(true)` it is that process,
/// `Some(false)` it is gone, a zombie with no thread left (nothing of it to put back: its record
/// goes as an exited process's) or the pid names another, `None` the read failed for want of a
/// resource and nothing can be said.
pub fn still_there(pid: u32, starttime: u64) -> Option<bool> {
    match stat_now(pid) {
        Ok(st) => Some(st.is_some_and(|s| s.starttime == starttime && !s.is_zombie())),
        Err(_) => None,
    }
}

/// The start time of `pid` now, or `None` when it is gone.
pub fn read_starttime(pid: u32) -> Option<u64> {
    read_stat(pid).map(|s| s.starttime)
}

/// Whether a cgroup path is `prefix` or below it (whole components).
pub fn cgroup_matches(path: &str, prefix: &str) -> bool {
    let p = prefix.trim_end_matches('/');
    if p.is_empty() {
        return true;
    }
    path == p || path.strip_prefix(p).is_some_and(|rest| rest.starts_with('/'))
}

/// The cgroup paths of `pid` (one per hierarchy line of /proc/PID/cgroup); `None` when gone or
/// unreadable.
pub fn cgroup_paths(pid: u32) -> Option<Vec<String>> {
    cgroup_paths_now(pid, None).ok().flatten()
}

/// [`cgroup_paths_with`] that tells a process gone (`Ok(None)`) from a read that failed for want
/// of a descriptor or memory (`Err`, [`short_of_resources`]), as [`stat_now`] does. Reads the real
/// `/proc`: the checks before an action, a release and a restore act on the live system.
pub fn cgroup_paths_now(pid: u32, came_from: Option<&str>) -> std::io::Result<Option<Vec<String>>> {
    cgroup_paths_under(std::path::Path::new("/"), pid, came_from)
}

/// [`cgroup_paths_now`] read from `ROOT/proc/PID/cgroup`: the observer's classification, which
/// reads through its root as all observation does (on a fixture tree, the fixture's process, not
/// whatever process of the live system has its pid).
pub fn cgroup_paths_under(
    root: &std::path::Path,
    pid: u32,
    came_from: Option<&str>,
) -> std::io::Result<Option<Vec<String>>> {
    let text = match std::fs::read_to_string(root.join(format!("proc/{pid}/cgroup"))) {
        Ok(text) => text,
        Err(e) if short_of_resources(&e) => return Err(e),
        Err(_) => return Ok(None),
    };
    let mut v: Vec<String> = text.lines().filter_map(|l| l.splitn(3, ':').nth(2)).map(str::to_string).collect();
    if v.iter().any(|p| in_numapilot_cgroup(p)) {
        v.extend(came_from.map(str::to_string));
    }
    Ok(Some(v))
}

/// Whether cgroup path `path` is numapilot's own subtree (`/numapilot`) or below it.
pub fn in_numapilot_cgroup(path: &str) -> bool {
    cgroup_matches(path, &format!("/{}", numapilot_actuate::cgroup::SUBTREE))
}

/// [`cgroup_paths`] of `pid`, with `came_from` added while the process is still in a cgroup of
/// numapilot's (`/numapilot/...`): the cgroup a process the daemon moved into a cpuset of its own
/// came from, so exclusions and `[include]` by cgroup still see where it belongs (under v2 its
/// only path is then numapilot's). A process someone moved out of numapilot's cgroup since is
/// judged by where it is now (a review of 2026-11-29: one moved from numapilot's cgroup to a
/// cgroup outside `[include]` still counted as included by its old one). The observer and
/// `apply` both check this.
pub fn cgroup_paths_with(pid: u32, came_from: Option<&str>) -> Option<Vec<String>> {
    cgroup_paths_now(pid, came_from).ok().flatten()
}

/// The name the daemon's executable runs under as a tool (`/proc/PID/comm`).
const TOOL_COMM: &str = "numapilot";

/// Whether `pid` runs this process's executable: the same file (device and inode of
/// `/proc/PID/exe` and `/proc/self/exe`), or, when the daemon's own file was replaced since it
/// started (an upgrade: its link reads "/usr/local/bin/numapilot (deleted)"), the file now at that
/// path as this process sees it. The new tools, another inode, were taken for other programs and
/// placed (review helper-41). A path is not compared as text: a process in a mount namespace of
/// its own names its files from its own root (review helper-44). A process whose executable
/// cannot be read (gone, or a kernel thread) is not. On another observation root (a fixture tree)
/// none is: its processes are not the live system's, whose `/proc/PID/exe` names another process.
fn same_executable(root: &std::path::Path, pid: u32) -> bool {
    root == std::path::Path::new("/") && runs_same_program(std::path::Path::new("/proc/self/exe"), pid)
}

/// Whether process `pid` runs the program `own` (a `/proc/.../exe` link) runs: the same file, or,
/// `own`'s file deleted, the file at its old path now (resolved in this process's mount
/// namespace), compared by device and inode ([`file_identity`]: the file's server is not asked).
/// See [`same_executable`].
pub fn runs_same_program(own: &std::path::Path, pid: u32) -> bool {
    let id = |p: &std::path::Path| file_identity(p);
    let Some(theirs) = id(std::path::Path::new(&format!("/proc/{pid}/exe"))) else { return false };
    if id(own) == Some(theirs) {
        return true;
    }
    let Ok(link) = std::fs::read_link(own) else { return false };
    let bytes = link.as_os_str().as_encoded_bytes();
    let Some(path) = bytes.strip_suffix(b" (deleted)") else { return false };
    let path = std::path::Path::new(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(path));
    id(path) == Some(theirs)
}

/// The device and inode of the file at `path` (links followed) as the kernel holds them now:
/// `statx` with `AT_STATX_DONT_SYNC`, so a network or FUSE file system is not asked to refresh the
/// attributes (rule tool-check-asks-no-server). The executable of a process that names itself
/// `numapilot` is any file its owner chose, on a server of theirs (a FUSE file system mounted
/// with allow_other) that need never answer: a plain stat of it held the daemon's step for as long
/// as the server liked (review of 2026-12-01). Device and inode do not change on a refresh.
/// `None` when it cannot be read.
fn file_identity(path: &std::path::Path) -> Option<(u32, u32, u64)> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: a NUL-terminated path and a zeroed statx for the kernel to fill.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statx(libc::AT_FDCWD, c.as_ptr(), libc::AT_STATX_DONT_SYNC, libc::STATX_INO, &mut st) };
    (rc == 0 && st.stx_mask & libc::STATX_INO != 0).then_some((st.stx_dev_major, st.stx_dev_minor, st.stx_ino))
}

/// Why a process is excluded (this process itself and its tools, always; then the options' pid, comm, cgroup; then,
/// when `[include]` lists anything, a process none of its pids, names or cgroup prefixes names), or `None`.
/// Exclusions win over inclusions. `cgroups` is read at most once, and only when a cgroup list can decide.
pub fn exclusion(
    opts: &LiveOptions,
    pid: u32,
    comm: &str,
    cgroups: impl FnOnce() -> Option<Vec<String>>,
) -> Option<String> {
    // The daemon itself, whatever the options say: planning for its own threads and moving its own
    // pages (the 2-node rig saw it migrate itself every step, EACCES partial) only costs.
    if pid == std::process::id() {
        return Some(format!("pid {pid} is numapilot itself"));
    }
    // Init, whatever the options say: it starts every service with its own mask (systemd's
    // CPUAffinity=), which the reserved CPUs are read from at start; a placed init would have a
    // restarted daemon read numapilot's mask as the host's (review helper-44).
    if pid == 1 {
        return Some("pid 1 is init: never managed".into());
    }
    // Its own tools (`numapilot advise`, `status`, `explain`, `stat`: the daemon's executable under
    // its own name), whatever the options say: `advise` measures the CPUs its launcher may use
    // from its own affinity, and a tool the fork rule narrowed while it measured offered a job
    // part of the machine (the rig: a second 1-CPU job advised "0-1" with node 1 idle). Programs
    // started by `numapilot run` (an exec: another name) and bench workers (renamed) are managed.
    if comm == TOOL_COMM && same_executable(&opts.root, pid) {
        return Some(format!("pid {pid} is a numapilot tool (this daemon's executable, named '{TOOL_COMM}')"));
    }
    if opts.exclude_pids.contains(&pid) {
        return Some(format!("pid {pid} is excluded"));
    }
    if opts.exclude_comm.iter().any(|c| c == comm) {
        return Some(format!("process name '{}' is excluded", numapilot_model::tasks::printable(comm)));
    }
    let included_by_name = opts.include_pids.contains(&pid) || opts.include_comm.iter().any(|c| c == comm);
    let include_set =
        !(opts.include_pids.is_empty() && opts.include_comm.is_empty() && opts.include_cgroups.is_empty());
    let need_cgroups = !opts.exclude_cgroups.is_empty() || (!included_by_name && !opts.include_cgroups.is_empty());
    // Read at most once, and only when a cgroup list can decide.
    let paths = if need_cgroups { cgroups() } else { Some(Vec::new()) };
    if !opts.exclude_cgroups.is_empty() {
        // Unknown membership could be an excluded cgroup: such a process is left alone (this
        // time; the check runs again at every action).
        let Some(paths) = &paths else {
            return Some("its cgroups could not be read (cgroup exclusions are configured)".into());
        };
        for path in paths {
            if let Some(prefix) = opts.exclude_cgroups.iter().find(|p| cgroup_matches(path, p)) {
                return Some(format!("cgroup {path} is under excluded prefix {prefix}"));
            }
        }
    }
    if include_set && !included_by_name {
        let by_cgroup = paths
            .as_ref()
            .is_some_and(|v| v.iter().any(|path| opts.include_cgroups.iter().any(|p| cgroup_matches(path, p))));
        if !by_cgroup {
            return Some(if paths.is_none() && !opts.include_cgroups.is_empty() {
                "its cgroups could not be read, and only [include]d processes are managed".into()
            } else {
                format!(
                    "'{}' is not in [include]: only the processes listed there are managed",
                    numapilot_model::tasks::printable(comm)
                )
            });
        }
    }
    None
}

/// [`exclusion`] for a decision that can wait (whether a process on record leaves numapilot's
/// hands, whether the observer's class of a process changes): `Err` when the verdict rests on
/// cgroups that could not be read for want of a descriptor or memory (`cgroups` returned `Err`),
/// where [`exclusion`] calls such a process excluded. Right for an action (nothing is done to a
/// process that may be excluded), that verdict put back a process still managed, or took a
/// managed one out of the sample, for one failed read.
pub fn exclusion_known(
    opts: &LiveOptions,
    pid: u32,
    comm: &str,
    cgroups: impl FnOnce() -> std::io::Result<Option<Vec<String>>>,
) -> Result<Option<String>, String> {
    let mut short = None;
    let why = exclusion(opts, pid, comm, || match cgroups() {
        Ok(paths) => paths,
        Err(e) => {
            short = Some(e);
            None
        }
    });
    match (why, short) {
        // The cgroups were read (so no rule before them excluded it) and could not be: whatever
        // the verdict, it is the unknown membership's.
        (Some(_), Some(e)) => Err(format!("its cgroups could not be read (/proc/{pid}/cgroup: {e})")),
        (why, _) => Ok(why),
    }
}

/// The CPUs the cpuset of `pid` allows in hierarchy `h`: its cgroup's effective CPUs, or, in a v2
/// cgroup without the cpuset controller (no cpuset files), its nearest ancestor's, which it
/// inherits. `None` when the process is gone, its cgroup path is not plain (a `..` component, as
/// /proc/PID/cgroup shows a cgroup outside the reader's cgroup namespace), it is one numapilot
/// made (`/numapilot/...`: its CPUs are the daemon's placement, not a confinement; the daemon
/// moves no confined process there), the walk up passes [`MAX_CPUSET_WALK`] levels, or nothing
/// reads. Each file is read up to 64 kB (a CPU list of 8,192 CPUs in ranges is far less).
pub fn cpuset_effective_cpus(h: &CpusetHierarchy, pid: u32) -> Option<CpuSet> {
    effective_cpus_of(h, &h.cgroup_of(pid).ok()??)
}

/// [`cpuset_effective_cpus`] of cgroup path `cg` (as /proc/PID/cgroup names it).
pub fn effective_cpus_of(h: &CpusetHierarchy, cg: &str) -> Option<CpuSet> {
    use std::io::Read;
    if cg.split('/').any(|c| c == ".." || c == ".") {
        return None;
    }
    if in_numapilot_cgroup(cg) {
        return None;
    }
    let mut dir = h.dir(cg);
    for _ in 0..=MAX_CPUSET_WALK {
        for f in ["cpuset.cpus.effective", "cpuset.effective_cpus", "cpuset.cpus"] {
            let mut text = String::new();
            let read = std::fs::File::open(dir.join(f)).and_then(|file| file.take(64 << 10).read_to_string(&mut text));
            if read.is_ok() {
                if let Ok(s) = CpuSet::parse_list(text.trim()) {
                    if !s.is_empty() {
                        return Some(s);
                    }
                }
            }
        }
        if dir == h.mount || !dir.pop() || !dir.starts_with(&h.mount) {
            return None;
        }
    }
    None
}

/// Whether cgroup `cg` of the v2 hierarchy `h`, or an ancestor below the root, sets a resource
/// limit, weight or protection (memory max/high/swap/zswap/low/min/oom.group, pids.max, cpu.max,
/// cpu.weight, cpu.idle, io.max, misc.max, hugetlb.*.max: anything but the default) or is part of
/// a threaded subtree: its processes must not be moved into a cgroup of numapilot's, which sets
/// none, as that takes them and every child they fork out of those settings (a review of 2026-11-29: a user
/// process in a `user-1000.slice` with TasksMax and MemoryMax ran unlimited while placed). A path
/// that is not plain, or a walk past [`MAX_CPUSET_WALK`] levels, counts as limited.
pub fn v2_limited(h: &CpusetHierarchy, cg: &str) -> bool {
    use std::io::Read;
    if cg.split('/').any(|c| c == ".." || c == ".") {
        return true;
    }
    // What each file reads when it sets nothing (a file that is absent: the controller is not on
    // there, nothing set either).
    let unset = |f: &str, text: &str| -> bool {
        let t = text.trim();
        match f {
            // "max 100000": quota max, any period.
            "cpu.max" => t.split_whitespace().next().is_none_or(|q| q == "max"),
            // One line per device with a limit; none: empty.
            "io.max" | "misc.max" => t.lines().all(|l| l.split_whitespace().nth(1).is_none_or(|v| v == "max")),
            "cpu.weight" => t == "100",
            "cpu.idle" | "memory.oom.group" | "memory.low" | "memory.min" => t == "0",
            // A cgroup of a threaded subtree places threads apart: a move of the whole process
            // would take threads out of cgroups this walk does not see.
            "cgroup.type" => t == "domain",
            _ => t.is_empty() || t == "max",
        }
    };
    const FILES: [&str; 14] = [
        "cgroup.type",
        "memory.max",
        "memory.high",
        "memory.swap.max",
        "memory.zswap.max",
        "memory.low",
        "memory.min",
        "memory.oom.group",
        "pids.max",
        "cpu.max",
        "cpu.weight",
        "cpu.idle",
        "io.max",
        "misc.max",
    ];
    let mut dir = h.dir(cg);
    for _ in 0..=MAX_CPUSET_WALK {
        if dir == h.mount || !dir.starts_with(&h.mount) {
            return false;
        }
        let hugetlb = std::fs::read_dir(&dir).into_iter().flatten().flatten().filter_map(|e| {
            let n = e.file_name().into_string().ok()?;
            (n.starts_with("hugetlb.") && n.ends_with(".max")).then_some(n)
        });
        let files: Vec<String> = FILES.iter().map(|f| f.to_string()).chain(hugetlb).collect();
        for f in &files {
            let mut text = String::new();
            let read = std::fs::File::open(dir.join(f)).and_then(|file| file.take(64 << 10).read_to_string(&mut text));
            let kind = if f.starts_with("hugetlb.") { "hugetlb" } else { f.as_str() };
            if read.is_ok() && !unset(kind, &text) {
                return true;
            }
        }
        if !dir.pop() {
            return false;
        }
    }
    true
}

/// Levels a cpuset read walks up from a process's cgroup to find one with cpuset files, at most.
/// Default 16. Source: a choice; systemd and container runtimes nest 3-6 deep
/// (`/kubepods.slice/kubepods-burstable.slice/.../cri-containerd-ID.scope`). What it prevents: a
/// user nesting cgroups of their delegated subtree thousands deep (up to PATH_MAX) making each
/// read cost thousands of failed opens in the root daemon; past it the cpuset counts as unknown
/// (its process as pinned, as before cpusets were read).
pub const MAX_CPUSET_WALK: usize = 16;

/// Whether `pid` is still the process that started at `starttime` (the re-check right before a
/// system call; see the module's limits).
pub fn same_process(pid: u32, starttime: u64) -> bool {
    read_starttime(pid) == Some(starttime)
}

/// The memory nodes `pid` may use (`Mems_allowed_list` of /proc/PID/status: its cpuset's).
pub fn mems_allowed(pid: u32) -> Option<NodeSet> {
    let bytes = std::fs::read(format!("/proc/{pid}/status")).ok()?;
    let text = numapilot_observe::reader::text_of(&bytes);
    let line = text.lines().find_map(|l| l.strip_prefix("Mems_allowed_list:"))?;
    NodeSet::parse_list(line.trim()).ok()
}

/// The CPUs `pid`'s cpuset allows: its effective CPUs read from `hier`, else the online CPUs of
/// the nodes of its `Mems_allowed` (the model's own rule); `None` when neither can be read.
pub fn cpuset_cpus(topo: &Topology, hier: Option<&CpusetHierarchy>, pid: u32) -> Option<CpuSet> {
    hier.and_then(|h| cpuset_effective_cpus(h, pid)).or_else(|| {
        let mems = mems_allowed(pid)?;
        Some(topo.cpus_of_nodes(&mems).intersection(&topo.online_cpus()))
    })
}

/// Why `pid` counts as having placed itself, or `None`: an explicit memory policy in numa_maps
/// (bind, prefer, prefer many, interleave, weighted interleave on any VMA), or, unless
/// `affinity_is_ours`, a thread whose affinity is narrower than its cpuset's CPUs (not one whose
/// CPUs the kernel keeps: [`numapilot_actuate::kernel_owns_affinity`]). What cannot be
/// read counts as placed (left alone this time; the check runs at every action): a process bound
/// with `numactl --membind` whose numa_maps read failed once had its pages moved. A process
/// started on this daemon's launch advice for `advised` nodes (its launcher named it) placed
/// nothing itself: its CPUs narrowed to those nodes and a memory policy within them are the
/// advice's (a thread narrower than the advised nodes' CPUs is its own pin).
pub fn pinned(
    reader: &Reader,
    topo: &Topology,
    hier: Option<&CpusetHierarchy>,
    pid: u32,
    affinity_is_ours: bool,
    advised: Option<&NodeSet>,
) -> Option<String> {
    match reader.read_numa_maps(pid) {
        Ok(Some(maps)) => {
            let advice_s = |v: &numapilot_observe::parse::numa_maps::Vma| {
                advised.is_some_and(|n| !v.policy.nodes.is_empty() && v.policy.nodes.is_subset(n))
            };
            if let Some(v) = maps.vmas.iter().find(|v| v.policy.mode.is_explicit() && !advice_s(v)) {
                return Some(format!(
                    "it set its own memory policy ({} {} at {:#x} in numa_maps)",
                    v.policy.mode.name(),
                    v.policy.nodes.to_list(),
                    v.start
                ));
            }
        }
        Ok(None) => return Some("its numa_maps could not be read: its memory policy is unknown".into()),
        Err(e) => return Some(format!("its numa_maps could not be read ({e}): its memory policy is unknown")),
    }
    if affinity_is_ours {
        return None;
    }
    let Some(allowed) = cpuset_cpus(topo, hier, pid) else {
        return Some("its cpuset could not be read: whether it narrowed its CPUs is unknown".into());
    };
    // Reserved CPUs (`Topology::reserve`) are not the process's to narrow from: on a host with
    // isolated CPUs every process's default mask leaves them out.
    let cpuset = allowed;
    let mut allowed = cpuset.intersection(&topo.usable_cpus());
    // A job started on launch advice was narrowed by its launcher to the advised nodes: that is
    // no pin, but a thread narrower still is its own (OpenMP's OMP_PROC_BIND, a runtime pinning
    // its workers). Every thread of an adopted job passed before (review helper-37).
    if let Some(nodes) = advised {
        let within = allowed.intersection(&topo.cpus_of_nodes(nodes));
        if !within.is_empty() {
            allowed = within;
        }
    }
    if allowed.is_empty() {
        return Some(format!("its cpuset allows only CPUs placement does not use ({})", cpuset.to_list()));
    }
    let Some(tids) = numapilot_actuate::list_threads(pid).ok().flatten() else {
        return Some("its threads could not be listed: whether one narrowed its CPUs is unknown".into());
    };
    for tid in tids {
        let Ok(mask) = sched_getaffinity(tid as libc::pid_t) else { continue };
        let within = mask.intersection(&allowed);
        // A thread whose CPUs the kernel keeps (io-wq workers of 5.12-6.2, bound to one node) is
        // nobody's pin: read only for a narrow mask, the common case costs nothing.
        if !allowed.is_subset(&within) && !numapilot_actuate::kernel_owns_affinity(pid, tid) {
            return Some(format!(
                "thread {tid} pinned itself to CPUs {} (its cpuset allows {})",
                mask.to_list(),
                allowed.to_list()
            ));
        }
    }
    None
}

/// For tests: a task of this host whose CPUs the kernel keeps (flagged PF_NO_SETAFFINITY) on fewer CPUs than are
/// online, with its mask: a per-CPU kernel thread such as `ksoftirqd/0`; none on a one-CPU host.
#[cfg(test)]
pub(crate) fn task_the_kernel_keeps(topo: &Topology) -> Option<(u32, CpuSet)> {
    let online = topo.online_cpus();
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let mask = sched_getaffinity(pid as libc::pid_t).ok()?;
        (numapilot_actuate::kernel_owns_affinity(pid, pid) && !online.is_subset(&mask)).then_some((pid, mask))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A v2 cgroup with a limit of its own or on an ancestor below the root is limited; "max"
    /// (cpu.max "max PERIOD"), empty io.max and limits on the root only are not; a path outside
    /// the namespace counts as limited.
    #[test]
    fn v2_limits_on_a_cgroup_or_its_ancestors() {
        let d = tempfile::tempdir().unwrap();
        let h = CpusetHierarchy { version: numapilot_actuate::CgroupVersion::V2, mount: d.path().to_path_buf() };
        let slice = d.path().join("user.slice/user-1000.slice");
        std::fs::create_dir_all(slice.join("session-1.scope")).unwrap();
        // The root's files are not limits of anyone's (and the kernel has none there).
        std::fs::write(d.path().join("pids.max"), "10\n").unwrap();
        for (f, v) in [("memory.max", "max\n"), ("memory.high", "max\n"), ("cpu.max", "max 100000\n"), ("io.max", "")] {
            std::fs::write(slice.join(f), v).unwrap();
            std::fs::write(slice.join("session-1.scope").join(f), v).unwrap();
        }
        let leaf = "/user.slice/user-1000.slice/session-1.scope";
        assert!(!v2_limited(&h, leaf), "unlimited everywhere");
        std::fs::write(slice.join("pids.max"), "10813\n").unwrap();
        assert!(v2_limited(&h, leaf), "TasksMax on the slice");
        std::fs::write(slice.join("pids.max"), "max\n").unwrap();
        std::fs::write(slice.join("session-1.scope/cpu.max"), "50000 100000\n").unwrap();
        assert!(v2_limited(&h, leaf), "a CPU quota on the scope");
        std::fs::write(slice.join("session-1.scope/cpu.max"), "max 100000\n").unwrap();
        std::fs::write(slice.join("io.max"), "8:0 rbps=1048576 wbps=max riops=max wiops=max\n").unwrap();
        assert!(v2_limited(&h, leaf), "an IO limit");
        std::fs::write(slice.join("io.max"), "").unwrap();
        assert!(!v2_limited(&h, leaf));
        // Weights and protections lost in a move count too; their defaults do not.
        let scope = slice.join("session-1.scope");
        for (f, default, set) in [
            ("cpu.weight", "100\n", "50\n"),
            ("cpu.idle", "0\n", "1\n"),
            ("memory.low", "0\n", "1073741824\n"),
            ("memory.oom.group", "0\n", "1\n"),
            ("hugetlb.2MB.max", "max\n", "1024\n"),
            ("cgroup.type", "domain\n", "threaded\n"),
        ] {
            std::fs::write(scope.join(f), default).unwrap();
            assert!(!v2_limited(&h, leaf), "{f} at its default");
            std::fs::write(scope.join(f), set).unwrap();
            assert!(v2_limited(&h, leaf), "{f} set");
            std::fs::write(scope.join(f), default).unwrap();
        }
        assert!(!v2_limited(&h, "/"), "the root");
        assert!(v2_limited(&h, "/../x"));
    }

    /// A v2 cgroup without the cpuset controller (no cpuset files) has its nearest ancestor's
    /// CPUs; one with them, its own effective CPUs (not `cpuset.cpus`, which may be empty or
    /// wider); a path outside the reader's namespace (`..`) or past the mount reads as unknown.
    #[test]
    fn effective_cpus_walk_up_to_the_nearest_cpuset() {
        let d = tempfile::tempdir().unwrap();
        let h = CpusetHierarchy { version: numapilot_actuate::CgroupVersion::V2, mount: d.path().to_path_buf() };
        std::fs::create_dir_all(d.path().join("kubepods/pod1/ctr")).unwrap();
        std::fs::write(d.path().join("cpuset.cpus.effective"), "0-63\n").unwrap();
        std::fs::write(d.path().join("kubepods/pod1/cpuset.cpus"), "\n").unwrap();
        std::fs::write(d.path().join("kubepods/pod1/cpuset.cpus.effective"), "4-7,36-39\n").unwrap();
        let list = |cg: &str| effective_cpus_of(&h, cg).map(|c| c.to_list());
        assert_eq!(list("/kubepods/pod1/ctr").as_deref(), Some("4-7,36-39"));
        assert_eq!(list("/kubepods/pod1").as_deref(), Some("4-7,36-39"));
        assert_eq!(list("/kubepods").as_deref(), Some("0-63"));
        assert_eq!(list("/").as_deref(), Some("0-63"));
        assert_eq!(list("/../../kubepods/pod1"), None);
        // numapilot's own cgroups are its placement, not a confinement.
        std::fs::create_dir_all(d.path().join("numapilot/12-34")).unwrap();
        std::fs::write(d.path().join("numapilot/12-34/cpuset.cpus.effective"), "5\n").unwrap();
        assert_eq!(list("/numapilot/12-34"), None);
        assert_eq!(list("/numapilot"), None);
        assert_eq!(list("/numapilot2").as_deref(), Some("0-63"));
        // A walk past MAX_CPUSET_WALK levels gives up.
        let deep: String = (0..MAX_CPUSET_WALK + 1).map(|i| format!("/d{i}")).collect();
        std::fs::create_dir_all(d.path().join(deep.trim_start_matches('/'))).unwrap();
        assert_eq!(list(&deep), None, "{deep}");
        let shallow: String = (0..MAX_CPUSET_WALK).map(|i| format!("/d{i}")).collect();
        assert_eq!(list(&shallow).as_deref(), Some("0-63"), "{shallow}");
        std::fs::remove_file(d.path().join("cpuset.cpus.effective")).unwrap();
        assert_eq!(list("/kubepods"), None, "nothing above reads: unknown");
    }

    /// `[include]`: with nothing listed every process is managed; with a list only the processes it
    /// names by pid, name or cgroup prefix, exclusions winning; a process whose cgroups cannot be
    /// read is left out when only a cgroup could include it; cgroups are read only when a cgroup
    /// list can decide.
    #[test]
    fn only_included_processes_are_managed_when_a_list_is_set() {
        let (pid, db) = (4_000_000, "postgres");
        fn cg<'a>(
            read: &'a std::cell::Cell<u32>,
            paths: Option<&'a [&'a str]>,
        ) -> impl FnOnce() -> Option<Vec<String>> + 'a {
            move || {
                read.set(read.get() + 1);
                paths.map(|p| p.iter().map(|s| s.to_string()).collect())
            }
        }
        let read = std::cell::Cell::new(0);
        let svc = Some(&["/system.slice/postgresql.service"][..]);
        let all = LiveOptions::default();
        assert_eq!(exclusion(&all, pid, "bash", cg(&read, svc)), None, "no list: everything");
        assert_eq!(read.get(), 0, "no cgroup list: cgroups not read");
        let by_name = LiveOptions { include_comm: vec![db.into()], ..LiveOptions::default() };
        assert_eq!(exclusion(&by_name, pid, db, cg(&read, svc)), None);
        let why = exclusion(&by_name, pid, "bash", cg(&read, svc)).expect("not included");
        assert!(why.contains("'bash' is not in [include]"), "{why}");
        let by_pid = LiveOptions { include_pids: vec![pid], ..LiveOptions::default() };
        assert_eq!(exclusion(&by_pid, pid, "bash", cg(&read, svc)), None);
        assert!(exclusion(&by_pid, pid + 1, "bash", cg(&read, svc)).is_some());
        assert_eq!(read.get(), 0, "name and pid lists decide without the cgroups");
        let by_cg = LiveOptions { include_cgroups: vec!["/system.slice/postgresql.service".into()], ..all.clone() };
        assert_eq!(exclusion(&by_cg, pid, "postgres: walwriter", cg(&read, svc)), None, "a service's workers");
        assert!(exclusion(&by_cg, pid, "bash", cg(&read, Some(&["/user.slice/user-0.slice"]))).is_some());
        let why = exclusion(&by_cg, pid, "bash", cg(&read, None)).expect("unknown membership");
        assert!(why.contains("could not be read"), "{why}");
        // Exclusions win.
        let both = LiveOptions { exclude_comm: vec![db.into()], ..by_name.clone() };
        assert!(exclusion(&both, pid, db, cg(&read, svc)).unwrap().contains("is excluded"));
        let both = LiveOptions { exclude_cgroups: vec!["/system.slice".into()], ..by_cg.clone() };
        let before = read.get();
        assert!(exclusion(&both, pid, db, cg(&read, svc)).unwrap().contains("excluded prefix"));
        assert_eq!(read.get(), before + 1, "read once for both lists");
    }

    /// For a decision that can wait, cgroups unreadable for want of a descriptor are unknown
    /// under either list, never "excluded" nor "not in [include]"; a process gone (nothing to
    /// read) is excluded as for an action; a rule decided before the cgroups are read (a name)
    /// stands.
    #[test]
    fn unreadable_cgroups_are_unknown_to_a_decision_that_can_wait() {
        let emfile = || Err(std::io::Error::from_raw_os_error(libc::EMFILE));
        let svc = || Ok(Some(vec!["/system.slice/x.service".to_string()]));
        let pid = 4_000_000;
        let excl = LiveOptions { exclude_cgroups: vec!["/system.slice".into()], ..LiveOptions::default() };
        let why = exclusion_known(&excl, pid, "x", emfile).unwrap_err();
        assert!(why.contains("its cgroups could not be read") && why.contains("Too many open files"), "{why}");
        assert!(exclusion_known(&excl, pid, "x", || Ok(None)).unwrap().unwrap().contains("could not be read"));
        assert!(exclusion_known(&excl, pid, "x", svc).unwrap().unwrap().contains("excluded prefix"));
        let incl = LiveOptions { include_cgroups: vec!["/system.slice".into()], ..LiveOptions::default() };
        assert!(exclusion_known(&incl, pid, "x", emfile).is_err());
        assert_eq!(exclusion_known(&incl, pid, "x", svc), Ok(None));
        let by_name = LiveOptions { exclude_comm: vec!["x".into()], ..excl.clone() };
        assert!(exclusion_known(&by_name, pid, "x", emfile).unwrap().unwrap().contains("is excluded"));
        // For an action the same read is an exclusion: nothing is done to what may be excluded.
        assert!(exclusion(&excl, pid, "x", || None).is_some());
    }

    #[test]
    fn cgroup_prefix_matches_whole_components() {
        assert!(cgroup_matches("/system.slice", "/system.slice"));
        assert!(cgroup_matches("/system.slice/ssh.service", "/system.slice"));
        assert!(cgroup_matches("/system.slice/ssh.service", "/system.slice/"));
        assert!(!cgroup_matches("/system.slice2", "/system.slice"));
        assert!(!cgroup_matches("/user.slice", "/system.slice"));
        assert!(cgroup_matches("/anything", "/"));
    }

    #[test]
    fn same_process_is_pid_and_start_time() {
        let me = std::process::id();
        let st = read_starttime(me).unwrap();
        assert!(same_process(me, st));
        assert!(!same_process(me, st + 1), "a reused pid has another start time");
        assert!(!same_process(u32::MAX - 1, st), "no such pid");
    }

    #[test]
    fn what_cannot_be_read_is_left_alone() {
        // Cgroup exclusions configured and the process's cgroups unreadable: excluded this time.
        let opts = LiveOptions { exclude_cgroups: vec!["/system.slice".into()], ..LiveOptions::default() };
        let why = exclusion(&opts, 4_000_000, "x", || None).unwrap();
        assert!(why.contains("could not be read"), "{why}");
        assert_eq!(exclusion(&opts, 4_000_000, "x", || Some(vec!["/user.slice".into()])), None);
        // No numa_maps to read (no such process): its memory policy is unknown, so it counts as
        // placed by itself.
        let topo = Topology::from_sysfs(std::path::Path::new("/")).unwrap();
        let why = pinned(&Reader::new("/"), &topo, None, u32::MAX - 1, false, None).unwrap();
        assert!(why.contains("numa_maps could not be read"), "{why}");
        // This process: readable, no explicit policy, its own affinity.
        assert_eq!(pinned(&Reader::new("/"), &topo, None, std::process::id(), true, None), None);
    }

    /// A thread whose CPUs the kernel keeps is no pin: on kernels 5.12 to 6.2 every io_uring
    /// program has such threads bound to one node (io-wq workers), and read as pins they left the
    /// program unplaced. This host's kernel no longer flags io-wq workers; a per-CPU kernel
    /// thread (`ksoftirqd/0`: flagged, bound to one CPU, empty numa_maps) is the real task here.
    #[test]
    fn a_mask_the_kernel_keeps_is_no_pin() {
        let topo = Topology::from_sysfs(std::path::Path::new("/")).unwrap();
        let Some((pid, mask)) = task_the_kernel_keeps(&topo) else {
            eprintln!("skipped: no task flagged PF_NO_SETAFFINITY narrower than the online CPUs (one CPU?)");
            return;
        };
        assert_eq!(pinned(&Reader::new("/"), &topo, None, pid, false, None), None, "{pid} on CPUs {}", mask.to_list());
    }

    /// A process Debian's numactl started with `--cpunodebind=0 --preferred-many=0` placed itself,
    /// unless it was started on this daemon's advice for nodes holding its policy's nodes.
    #[test]
    fn a_process_started_on_advice_did_not_place_itself() {
        let child = std::process::Command::new("numactl")
            .args(["--cpunodebind=0", "--preferred-many=0", "sleep", "30"])
            .stdin(std::process::Stdio::null())
            .spawn();
        let Ok(mut child) = child else {
            if std::env::var_os("NUMAPILOT_REQUIRE_NUMACTL").is_some_and(|v| v == "1") {
                panic!("numactl is required (NUMAPILOT_REQUIRE_NUMACTL=1) but not installed");
            }
            eprintln!("numactl not installed: skipped");
            return;
        };
        let pid = child.id();
        // numactl has exec'd sleep once the comm says so (60 s: a bound for a loaded machine; it
        // went on after 10 s without it and failed on numactl's own state).
        let t0 = std::time::Instant::now();
        while std::fs::read_to_string(format!("/proc/{pid}/comm")).map(|c| c.trim() != "sleep").unwrap_or(true) {
            if t0.elapsed() >= std::time::Duration::from_secs(60) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("timed out after 60 s waiting for numactl to exec sleep");
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let topo = Topology::from_sysfs(std::path::Path::new("/")).unwrap();
        let node0: NodeSet = [0u32].into_iter().collect();
        let node1: NodeSet = [1u32].into_iter().collect();
        let alone = pinned(&Reader::new("/"), &topo, None, pid, false, None);
        let advised = pinned(&Reader::new("/"), &topo, None, pid, false, Some(&node0));
        let elsewhere = pinned(&Reader::new("/"), &topo, None, pid, false, Some(&node1));
        let _ = child.kill();
        let _ = child.wait();
        let alone = alone.expect("numactl's policy is its own");
        assert!(alone.contains("it set its own memory policy (prefer (many) 0"), "{alone}");
        assert_eq!(advised, None, "advised for node 0: the policy and the CPUs are the advice's");
        let elsewhere = elsewhere.expect("a policy outside the advised nodes is its own");
        assert!(elsewhere.contains("memory policy"), "{elsewhere}");
    }
}
