//! Originals: what every touched process looked like before numapilot changed it, kept in memory and
//! in the state file, and put back on shutdown or at the next start after a crash.
//!
//! # Problem
//!
//! The daemon narrows thread affinities and moves processes between cpusets. If it stops (SIGTERM)
//! those changes must be undone; if it dies (kill -9, OOM, power loss of the daemon alone) the next
//! start must undo them, although the process that knew the originals is gone.
//!
//! # Approach
//!
//! ```text
//!   first change to (pid, starttime)   record originals (every thread's mask, the cpuset cgroup)
//!                                      write the state file  ──>  then make the syscall
//!   a later change to the process       threads born since with a mask of their own (not one
//!                                        numapilot set, nor one cut to the CPUs online and the
//!                                        cpuset: `carries_ours`) recorded first, file written
//!                                        again
//!   restore (SIGTERM, or open())       first, descendants not on record that inherited what we
//!                                        set at fork (every thread on the mask we set, or in the
//!                                        cgroup we made): the ancestor's original mask / cgroup
//!                                      per process: same starttime? (else gone, nothing to do)
//!                                      cpuset: whatever is still in the cgroup we made goes back
//!                                        to the original cgroup (one moved elsewhere since stays
//!                                        there), ours is removed
//!                                      every current thread, while it carries a mask numapilot
//!                                        set (or that mask cut to the CPUs online and its
//!                                        cpuset): its recorded mask, else (born since, it
//!                                        inherited ours) the leader's original; any other mask
//!                                        is the program's own and left alone; a mask that was
//!                                        exactly its cpuset's CPUs when recorded goes back as
//!                                        every possible CPU (restore-follows-cpuset); one the
//!                                        kernel refuses (EINVAL: no CPU of it left) gets its
//!                                        cpuset's CPUs, logged; every thread is tried whatever
//!                                        the ones before it met
//!                                      then the state file is emptied of every process put back;
//!                                        one whose restore failed stays on record for the next
//!                                        pass, up to RESTORE_TRIES failed passes (crash recovery
//!                                        is the last try); so does one a descendant of which was
//!                                        not found, judged or put back
//!   what cannot be read                a read that fails for another reason than the process or
//!                                        thread being gone (no descriptor or memory left:
//!                                        EMFILE, ENOMEM) is unknown, never "gone", "not ours" or
//!                                        "not inherited": /proc's listing, a descendant's stat,
//!                                        threads, masks or cgroup (`inherited_mask`'s Err), a
//!                                        thread's mask, or the CPUs online beside a mask
//!                                        narrower than ours (`carries_ours_known`); the pass
//!                                        fails naming it, and the record is kept
//!   release (a process excluded, or     the same for that process alone, and its descendants
//!    out of [include], while placed)      without records of their own; its record dropped
//!                                        (kept, as above, when its restore failed)
//! ```
//!
//! One daemon owns the file: a start that acts takes an exclusive lock (flock) on `.NAME.lock`
//! beside it before it reads the file, and holds it until it exits (the kernel drops it however the
//! process ends, so a kill -9 leaves no stale lock). A second daemon started on the same file while
//! the first runs is refused there, before its crash recovery could put back the running daemon's
//! processes and empty its file, with the holder's pid from /proc/locks (`paths::take_lock`). Dry runs neither restore nor write the file and take no lock.
//! A start refused after the lock was taken (another daemon on the socket, a journal that cannot
//! be opened, a state file of another pid namespace ...) removes the lock file and the directories
//! it made for it (the state file's directory, default /run/numapilot, stayed behind with the lock
//! in it); a lock file or directory that was there before stays.
//!
//! The file (default `/run/numapilot/state.json`, JSON, one record per process) is written
//! atomically: a temporary file in the same directory, mode 0600, fsync, rename over the old one. A
//! reader therefore sees the old or the new state, never half of one. The directory is made with
//! mode 0700 when missing. The temporary file is created anew each time (O_EXCL, O_NOFOLLOW, a
//! leftover under its name removed first), so a link planted there is never written through.
//!
//! The file steers a root daemon's writes (affinity masks, `cgroup.procs`, rmdir of a cgroup), and
//! a start time is no secret (/proc/PID/stat is world-readable), so what it says is checked before
//! anything is restored, and a file that fails stops the start with the reason: it must be a
//! regular file owned by the daemon's user and writable by no one else, in a directory others
//! cannot replace it in nor take its names in (writable by no one else, sticky or not; above it,
//! sticky will do: `paths::trusted_dir`); each cpuset record must name a mounted
//! cgroup file system, an original cgroup path without `.` or `..`, and one plain name for ours.
//! Records carry the kernel's boot id: a file from before the last boot (a `state` path on
//! persistent storage) names pids of processes long gone, and its records are not restored (a
//! note says so).
//!
//! # Limits
//!
//! Memory placement is not restored: pages moved stay where they are (moving them back would cost
//! as much as moving them, and the kernel's own balancing or the next placement decides from
//! there). A process whose pid was reused (start time differs) is reported gone and not touched.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use numapilot_actuate::cgroup::SUBTREE;
use numapilot_actuate::process::set_threads_affinity_each_while;
use numapilot_actuate::{sched_getaffinity, CgroupVersion, CpusetHierarchy};
use numapilot_model::tasks::printable;
use numapilot_topology::CpuSet;
use serde::{Deserialize, Serialize};

use super::select::{same_process, stat_now, still_there};
use super::RestoreReport;

/// Listings of a process's threads when restoring (see `numapilot_actuate::set_threads_affinity`).
/// Default 16. Source: a choice, twice the change's bound: restoring is done once, at exit.
/// What it prevents: looping forever on a process that creates threads without end.
const RESTORE_ROUNDS: u32 = 16;

/// Failed restore passes after which a record is given up, per daemon run: 3. A pass is a release
/// (the process taken out of numapilot's hands) or the shutdown restore; a record whose pass failed
/// stays in memory and in the state file for the next one, the shutdown's written for the next
/// start, whose crash recovery is its last try (the count is not in the file, so recovery keeps
/// nothing: the bound holds across restarts too). Source: a choice (review of 2026-11-30): a
/// failure worth a retry passes (a thread the kernel refused while a cpuset was being rewritten);
/// one that lasts (EPERM from a security module, a SCHED_DEADLINE thread's EBUSY) does not pass by
/// trying. What it prevents: a record dropped at its first failure, its threads left on the
/// daemon's mask with nothing left to retry (the review's recovery rewrote the file with no
/// process), and one retried at every pass for as long as the process lives.
pub const RESTORE_TRIES: u32 = 3;

/// Version of the state file format.
pub const STATE_VERSION: u32 = 1;

/// The cpuset a process was in before numapilot moved it, and the one numapilot made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpusetOriginal {
    /// `v1` or `v2`.
    pub version: String,
    /// Mount point of the hierarchy.
    pub mount: PathBuf,
    /// The original cgroup path (as /proc/PID/cgroup names it).
    pub original: String,
    /// The name of numapilot's cgroup under `numapilot/`.
    pub made: String,
}

impl CpusetOriginal {
    /// The path of the cgroup numapilot made, as /proc/PID/cgroup names it (`/numapilot/<made>`).
    pub fn made_path(&self) -> String {
        format!("/{SUBTREE}/{}", self.made)
    }

    /// Whether the record names a real cgroup hierarchy and paths within it: the mount a cgroup
    /// or cgroup2 file system, the original cgroup an absolute path with no `.` or `..`, ours one
    /// plain name. A record that does not is refused as a whole (a state file is a root daemon's
    /// input: a crafted one must not steer its writes and removals elsewhere).
    pub fn check(&self) -> Result<(), String> {
        if !(self.version == "v1" || self.version == "v2") {
            return Err(format!("cpuset version {:?} is neither v1 nor v2", self.version));
        }
        if !numapilot_actuate::cgroup::is_cgroup_mount(&self.mount) {
            return Err(format!("cpuset mount {} is not a mounted cgroup file system", self.mount.display()));
        }
        numapilot_actuate::cgroup::check_cgroup_path(&self.original)
            .map_err(|e| format!("cpuset original {:?}: {e}", self.original))?;
        numapilot_actuate::cgroup::check_cgroup_name(&self.made)
            .map_err(|e| format!("cpuset made {:?}: {e}", self.made))?;
        Ok(())
    }

    fn hierarchy(&self) -> CpusetHierarchy {
        let version = if self.version == "v1" { CgroupVersion::V1 } else { CgroupVersion::V2 };
        CpusetHierarchy { version, mount: self.mount.clone() }
    }
}

/// The originals of one process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessOriginal {
    /// Process id.
    pub pid: u32,
    /// Its start time, clock ticks after boot (identity with the pid).
    pub starttime: u64,
    /// Its name when first touched (for people reading the file).
    pub comm: String,
    /// The leader's original CPU list: the mask for threads not recorded one by one that carry a
    /// mask numapilot set (`set_cpus`).
    pub default_cpus: String,
    /// Each recorded thread's original CPU list.
    pub threads: BTreeMap<u32, String>,
    /// The cpuset membership, when numapilot moved the process to a cpuset of its own.
    pub cpuset: Option<CpusetOriginal>,
    /// The CPU lists numapilot set on the process's threads (or, for a process that inherited a
    /// placement at fork, the one it inherited), recorded before each change: a thread off the
    /// record that carries one of them inherited it from its creator and is numapilot's to put
    /// back; any other mask is the program's own. Absent in files written before 2026-11-29.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set_cpus: Vec<String>,
    /// The CPUs its cpuset allowed when it was first recorded (the hierarchy the daemon reads
    /// cpusets from). A thread whose original mask is exactly these never asked for a mask of its
    /// own: it is put back with every possible CPU, which the kernel cuts to its cpuset, so the
    /// mask follows the cpuset again when it changes later (rule restore-follows-cpuset). Since
    /// Linux 6.2 the kernel keeps the last mask a task was given by sched_setaffinity and cuts
    /// every later cpuset change to it: measured on this host (6.18, cgroup v1), a process in a
    /// cpuset of CPU 0 given the mask "0", its cpuset then widened to 0-1, stayed on "0", and one
    /// given every possible CPU widened with it; restored with its exact list, a container's
    /// process would stay on its old CPUs after `docker update --cpuset-cpus` widened them. `None`:
    /// not read (no cpuset hierarchy, or a file written before 2026-11-29): masks are restored as
    /// recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpuset_cpus: Option<String>,
    /// Someone else moved it out of the cpuset cgroup numapilot made for it: that cgroup is gone
    /// and the process gets thread affinity only from then on, never moved into a cgroup of
    /// numapilot's again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cpuset_declined: bool,
}

impl ProcessOriginal {
    /// Notes `cpus` as a mask numapilot sets on this process; whether it was new.
    pub fn note_set(&mut self, cpus: &CpuSet) -> bool {
        let l = cpus.to_list();
        let new = !self.set_cpus.contains(&l);
        if new {
            self.set_cpus.push(l);
        }
        new
    }
}

/// The whole state file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateFile {
    /// Format version.
    pub version: u32,
    /// The kernel's boot id when written (/proc/sys/kernel/random/boot_id): pids and start times
    /// of another boot name other processes, so such records are not restored. Absent in files
    /// written before it was kept (they are trusted as before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// The inode of the writer's pid namespace (`/proc/self/ns/pid`): pids of another namespace
    /// are another numbering, so such records are neither restored nor overwritten. Absent in
    /// files written before it was kept (trusted as before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid_ns: Option<u64>,
    /// Touched processes.
    pub processes: Vec<ProcessOriginal>,
}

/// Originals in memory, mirrored to the file.
#[derive(Debug)]
pub struct Originals {
    path: PathBuf,
    /// By pid (one live process per pid; a record whose starttime no longer matches is stale).
    pub procs: BTreeMap<u32, ProcessOriginal>,
    /// The lock on `path` ([`Originals::claim`]), held while this set lives.
    claim: Option<Claim>,
    /// Failed restore passes of the records kept for another one: pid -> (start time, passes)
    /// ([`RESTORE_TRIES`]).
    tries: BTreeMap<u32, (u64, u32)>,
    /// Cpuset cgroups made for processes that exited whose removal failed (a process left in
    /// one that could not be moved back, a child cgroup made inside it, a fork between the
    /// listing and the removal): tried again at every [`Originals::prune_gone`] and at
    /// [`Originals::restore_all`], at most [`UNRELEASED_KEPT`] of them. Without it such a cgroup
    /// stayed for good, and a process left in it kept numapilot's CPUs with no record to put it
    /// back (review helper-33).
    unreleased: Vec<CpusetOriginal>,
    /// The last [`Originals::save`] failed: what is in memory is not on disk
    /// ([`Originals::unsaved`]).
    unsaved: std::cell::Cell<bool>,
}

/// The state file's lock, held while this lives ([`Originals::claim`]), and what the claim made
/// for it until [`Originals::keep_claim`]: the lock file, when the claim created it, and the
/// directories made above it. Those go again when this is dropped first: a start refused after
/// the claim left the state directory (default /run/numapilot) behind with the lock in it.
#[derive(Debug)]
struct Claim {
    file: std::fs::File,
    made: Option<(Option<PathBuf>, crate::paths::MadeDirs)>,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let Some((lock, dirs)) = self.made.take() else { return };
        // Removed while still locked (`self.file` closes after this), and only while the path is
        // still the file locked: what another daemon made there is its own.
        if let Some(p) = lock.filter(|p| crate::paths::same_file(&self.file, p)) {
            let _ = std::fs::remove_file(p);
        }
        // Then the directories, deepest first and only while empty.
        drop(dirs);
    }
}

/// Cgroups kept for another removal ([`Originals::unreleased`]) at most. Default 1,024. Source: a
/// choice, far more than removals that fail at once on a host. Prevents: a host where every
/// removal fails (a cgroup manager that re-creates child cgroups) growing the list without bound;
/// past it the oldest is given up, with a warning naming it.
pub const UNRELEASED_KEPT: usize = 1024;

impl Originals {
    /// An empty set for `path` (nothing read).
    pub fn new(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            procs: BTreeMap::new(),
            claim: None,
            tries: BTreeMap::new(),
            unreleased: Vec::new(),
            unsaved: std::cell::Cell::new(false),
        }
    }

    /// An empty set for `path` that owns it: an exclusive lock (flock) on `.NAME.lock` beside the
    /// state file, held until the set is dropped (the process exits, however it exits). Only the
    /// owner restores what the file records or writes it: a second daemon started on the same
    /// file while the first runs is refused here, before its crash recovery could put back the
    /// running daemon's processes and empty its file. The lock file is created mode 0600 (never
    /// through a link) and must be this user's. The lock file and directories made here are
    /// removed again when the set is dropped before [`Originals::keep_claim`] (a refused start).
    pub fn claim(path: &Path) -> Result<Self, String> {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        // Made here, they go again unless the start goes through ([`Originals::keep_claim`]).
        let made = if dir.is_dir() {
            crate::paths::MadeDirs::default()
        } else {
            crate::paths::make_dirs(dir, 0o700)
                .map_err(|e| format!("state directory {}: cannot create: {e}", dir.display()))?
        };
        // Before anything is created there (the lock, the temporary copy): a directory another
        // user may write in lets them plant a link where root creates a file (review helper-37;
        // the directory was checked only when a state file was read).
        crate::paths::trusted_dir(dir).map_err(|why| format!("state file {}: {why}: not trusted", path.display()))?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "state.json".into());
        let lock_path = dir.join(format!(".{name}.lock"));
        let shown = lock_path.display();
        let (file, created) = crate::paths::take_lock(&lock_path).map_err(|e| match e {
            crate::paths::LockError::Held(who) => format!(
                "state file {}: in use by another numapilot daemon, {who}, which holds {shown}; it owns the \
                 processes recorded there: stop it first, or give this one its own --state",
                path.display()
            ),
            crate::paths::LockError::Other(why) => format!("state {why}"),
        })?;
        let lock = created.then(|| lock_path.clone());
        Ok(Self {
            path: path.to_path_buf(),
            procs: BTreeMap::new(),
            claim: Some(Claim { file, made: Some((lock, made)) }),
            tries: BTreeMap::new(),
            unreleased: Vec::new(),
            unsaved: std::cell::Cell::new(false),
        })
    }

    /// The start went through: the lock file and the directories [`Originals::claim`] made stay
    /// (as before, for the daemon's life and after it). Until then a start refused after the claim
    /// removes them when this set is dropped.
    pub fn keep_claim(&mut self) {
        if let Some((_, dirs)) = self.claim.as_mut().and_then(|c| c.made.take()) {
            dirs.keep();
        }
    }

    /// Reads the state file: `Ok(None)` when it does not exist; an error naming the path for any
    /// other fault (unreadable, not JSON, wrong version).
    ///
    /// The file is judged on the descriptor that is read (state-checked-before-read): opened
    /// without following a link and without waiting (a FIFO planted at the path kept the daemon's
    /// start waiting for a writer, deaf to SIGTERM), checked for type, owner and mode, and read only
    /// up to [`MAX_STATE_BYTES`] (a sparse 3 GB file planted by a user was read whole, 26 s and
    /// 3.2 GB, before it was refused: review of 2026-11-29).
    pub fn load(path: &Path) -> Result<Option<StateFile>, String> {
        use std::io::Read as _;
        let shown = path.display();
        // The directory before the file is opened in it (it was checked after: a link on the way
        // pointed elsewhere between the two went unseen; review helper-51).
        if path.parent().is_some_and(|d| d.exists()) {
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            crate::paths::trusted_dir(dir).map_err(|why| format!("state file {shown}: {why}: not trusted"))?;
        }
        let f =
            match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                    return Err(format!("state file {shown}: not a regular file (a link?): not trusted; remove it"))
                }
                Err(e) => return Err(format!("state file {shown}: cannot read: {e}")),
            };
        let m = f.metadata().map_err(|e| format!("state file {shown}: cannot read: {e}"))?;
        trusted(path, &m)?;
        if m.len() > MAX_STATE_BYTES {
            return Err(format!(
                "state file {shown}: {} bytes, more than a state file holds ({} MiB): not trusted; remove it",
                m.len(),
                MAX_STATE_BYTES >> 20
            ));
        }
        let mut text = String::new();
        f.take(MAX_STATE_BYTES)
            .read_to_string(&mut text)
            .map_err(|e| format!("state file {shown}: cannot read: {e}"))?;
        if text.trim().is_empty() {
            return Ok(Some(StateFile { version: STATE_VERSION, boot_id: None, pid_ns: None, processes: Vec::new() }));
        }
        let file: StateFile = serde_json::from_str(&text)
            .map_err(|e| format!("state file {}: not a numapilot state file: {e}", path.display()))?;
        if file.version != STATE_VERSION {
            return Err(format!(
                "state file {}: version {} (this numapilot reads version {STATE_VERSION})",
                path.display(),
                file.version
            ));
        }
        for rec in &file.processes {
            if let Some(cs) = &rec.cpuset {
                cs.check().map_err(|e| format!("state file {}: pid {}: {e}", path.display(), rec.pid))?;
            }
        }
        Ok(Some(file))
    }

    /// Whether (pid, starttime) has a record.
    pub fn has(&self, pid: u32, starttime: u64) -> bool {
        self.procs.get(&pid).is_some_and(|p| p.starttime == starttime)
    }

    /// The record of (pid, starttime), made (with the leader's mask as default) when missing; a
    /// stale record of an older process with the same pid is replaced.
    pub fn entry(&mut self, pid: u32, starttime: u64, comm: &str, default_cpus: &CpuSet) -> &mut ProcessOriginal {
        let stale = self.procs.get(&pid).is_some_and(|p| p.starttime != starttime);
        if stale {
            // The earlier process of this pid exited since the last prune: the cgroup made for it
            // goes as `prune_gone` would have taken it (it was left for good, with anything still
            // in it; review helper-37).
            if let Some(cs) = self.procs.remove(&pid).and_then(|r| r.cpuset) {
                let errors = release_cgroup(&cs);
                if !errors.is_empty() {
                    tracing::warn!("cgroup of an exited process: {}", errors.join("; "));
                    if let Some(note) = self.keep_unreleased(cs) {
                        tracing::warn!("{note}");
                    }
                }
            }
        }
        self.procs.entry(pid).or_insert_with(|| ProcessOriginal {
            pid,
            starttime,
            // Escaped (as the model keeps names): restore failures name it on stderr.
            comm: printable(comm),
            default_cpus: default_cpus.to_list(),
            threads: BTreeMap::new(),
            cpuset: None,
            set_cpus: Vec::new(),
            cpuset_cpus: None,
            cpuset_declined: false,
        })
    }

    /// Drops the records of processes that exited (or whose pid now names another process), after
    /// emptying and removing the cpuset cgroup made for each, and rewrites the state file when any
    /// was dropped. Without it every process the daemon ever placed stays on record (and in the
    /// file, rewritten whole at each new record) and its cgroup stays behind until the daemon
    /// stops: the 2-node rig's cpuset v2 run left one cgroup per short-lived command placed.
    /// Returns how many were dropped and the errors met (each naming its cgroup).
    ///
    /// A cgroup whose removal failed is kept and tried again at each call ([`UNRELEASED_KEPT`]);
    /// its errors are returned the first time only, and a line saying it is gone once it is.
    pub fn prune_gone(&mut self) -> (usize, Vec<String>) {
        // Gone only when /proc says so: a read that failed for want of a descriptor or memory says
        // nothing (such a failure dropped the record of a live process, review helper-34).
        let gone: Vec<u32> =
            self.procs.values().filter(|r| still_there(r.pid, r.starttime) == Some(false)).map(|r| r.pid).collect();
        let mut errors = self.retry_unreleased();
        for pid in &gone {
            if let Some(rec) = self.procs.remove(pid) {
                if let Some(cs) = rec.cpuset {
                    let e = release_cgroup(&cs);
                    if !e.is_empty() {
                        errors.extend(e);
                        errors.extend(self.keep_unreleased(cs));
                    }
                }
            }
        }
        // Failed restore passes are counted for records still kept only.
        let procs = &self.procs;
        self.tries.retain(|pid, (st, _)| procs.get(pid).is_some_and(|r| r.starttime == *st));
        if !gone.is_empty() {
            if let Err(e) = self.save() {
                errors.push(e);
            }
        }
        (gone.len(), errors)
    }

    /// The originals' tables, by name: processes on record, their recorded threads and masks,
    /// failed restore counts, cgroups waiting for removal.
    pub fn bookkeeping(&self, out: &mut Vec<(&'static str, usize)>) {
        out.push(("state.processes", self.procs.len()));
        out.push(("state.threads", self.procs.values().map(|r| r.threads.len()).sum()));
        out.push(("state.masks", self.procs.values().map(|r| r.set_cpus.len()).sum()));
        out.push(("state.restore_tries", self.tries.len()));
        out.push(("state.unreleased_cgroups", self.unreleased.len()));
    }

    /// Cgroups kept for another removal now ([`Originals::unreleased`]).
    pub fn unreleased(&self) -> usize {
        self.unreleased.len()
    }

    /// Keeps `cs` for another removal; the note of the one given up for it, if the list was full.
    fn keep_unreleased(&mut self, cs: CpusetOriginal) -> Option<String> {
        if !cs.hierarchy().dir(&cs.made_path()).exists() {
            return None;
        }
        self.unreleased.push(cs);
        (self.unreleased.len() > UNRELEASED_KEPT).then(|| {
            let old = self.unreleased.remove(0);
            format!("cgroup {} given up: more than {UNRELEASED_KEPT} cgroups wait for removal", old.made_path())
        })
    }

    /// Tries again to remove the cgroups kept for it: one removed is dropped with a line saying
    /// so; one still there stays, quietly (its errors were reported when it first failed).
    fn retry_unreleased(&mut self) -> Vec<String> {
        let mut notes = Vec::new();
        self.unreleased.retain(|cs| {
            let dir = cs.hierarchy().dir(&cs.made_path());
            if !dir.exists() {
                return false;
            }
            if release_cgroup(cs).is_empty() || !dir.exists() {
                notes.push(format!("cgroup {} removed at last", cs.made_path()));
                return false;
            }
            true
        });
        notes
    }

    /// Puts back the recorded processes among `pids` (and the descendants that inherited what
    /// numapilot set on them), forgets them and rewrites the file: the processes an operator took
    /// out of numapilot's hands while it ran (`[exclude]`, `[include]`). Pids without a record are
    /// ignored. A process whose restore failed keeps its record for the next pass (the next
    /// release of it, or the shutdown), up to [`RESTORE_TRIES`] failed passes.
    pub fn release(&mut self, pids: &[u32]) -> RestoreReport {
        let mut report = RestoreReport::default();
        let taken: BTreeMap<u32, ProcessOriginal> =
            pids.iter().filter_map(|pid| self.procs.remove(pid).map(|r| (*pid, r))).collect();
        if taken.is_empty() {
            return report;
        }
        // Descendants with records of their own stay as numapilot placed them: only those
        // carrying what was set on a released process, with no record, are put back with it.
        let tries = &mut self.tries;
        let again = restore_pass(&taken, &self.procs, &mut report, |rec| retry(tries, rec));
        self.keep_for_retry(again, taken.keys());
        if let Err(e) = self.save() {
            report.failed.push(e);
        }
        report
    }

    /// Takes back `again` (records whose restore pass failed and that are tried again) and forgets
    /// the failed passes of the other records of that pass (`passed`): restored or given up.
    fn keep_for_retry<'a>(&mut self, again: BTreeMap<u32, ProcessOriginal>, passed: impl Iterator<Item = &'a u32>) {
        for pid in passed {
            if !again.contains_key(pid) {
                self.tries.remove(pid);
            }
        }
        self.procs.extend(again);
    }

    /// Writes the state file atomically (temp + fsync + rename, mode 0600). A failure is
    /// remembered until a save succeeds ([`Originals::unsaved`]).
    pub fn save(&self) -> Result<(), String> {
        let file = StateFile {
            version: STATE_VERSION,
            boot_id: boot_id(),
            pid_ns: pid_namespace(),
            processes: self.procs.values().cloned().collect(),
        };
        let r = write_atomic(&self.path, &file);
        self.unsaved.set(r.is_err());
        r
    }

    /// Whether the last save failed, so the file lacks what is in memory: the live host changes
    /// nothing until a save succeeds (rule originals-on-disk-first). A failed save refused only
    /// the action that made the record: the record stayed in memory, and the next action on the
    /// process found it "on record" and acted with no original on disk (on a full /run, every
    /// process placed from then on was beyond crash recovery; review helper-34).
    pub fn unsaved(&self) -> bool {
        self.unsaved.get()
    }

    /// Puts every recorded process back, forgets them and empties the file. Descendants that
    /// inherited a recorded process's changed mask or cpuset at fork, and still carry it, are put
    /// back first, to their ancestor's originals (while the ancestor still shows what we set). A
    /// process whose restore failed stays on record, and in the file, for the next pass (at
    /// shutdown: the next start's recovery), up to [`RESTORE_TRIES`] failed passes (review of
    /// 2026-11-30: it was forgotten, its threads left on numapilot's mask for good).
    pub fn restore_all(&mut self) -> RestoreReport {
        let mut report = RestoreReport::default();
        let taken = std::mem::take(&mut self.procs);
        let tries = &mut self.tries;
        let again = restore_pass(&taken, &BTreeMap::new(), &mut report, |rec| retry(tries, rec));
        self.keep_for_retry(again, taken.keys());
        self.retry_unreleased();
        for cs in &self.unreleased {
            report.failed.push(format!("cgroup {} of an exited process could not be removed", cs.made_path()));
        }
        if let Err(e) = self.save() {
            report.failed.push(e);
        }
        report
    }
}

/// The inode of this process's pid namespace (`/proc/self/ns/pid`), `None` where it cannot be
/// read.
pub fn pid_namespace() -> Option<u64> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self/ns/pid").ok().map(|m| m.ino())
}

/// Why the records of a state file are left as they are at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeftAlone {
    /// This start acts on nothing (a dry run, a user without the rights, an untrusted /proc):
    /// restoring is acting, so the next start that acts restores them.
    NoActing,
    /// Written in the pid namespace `theirs`; this daemon runs in `ours` (`None`: unreadable).
    OtherNamespace {
        /// The file's namespace inode.
        theirs: u64,
        /// This daemon's, `None` when unreadable.
        ours: Option<u64>,
    },
    /// Written before the last boot.
    OtherBoot,
}

/// What the daemon says of the `n` records of the state file at `path` that it leaves as they are,
/// and why: the count and the words that agree with it ("1 record ... left as it is", "3 records
/// ... left as they are").
pub fn left_alone_message(path: &Path, n: usize, why: &LeftAlone) -> String {
    let records = numapilot_topology::plural(n, "record");
    let one = n == 1;
    let (it_is, it, was, are) = if one { ("it is", "it", "was", "is") } else { ("they are", "them", "were", "are") };
    let (their_pids, pids_are) = if one { ("its pid", "is") } else { ("their pids", "are") };
    let path = path.display();
    match why {
        LeftAlone::NoActing => format!(
            "state file {path}: {records} of an earlier run left as {it_is} (this start changes no process: a start \
             that acts restores {it})"
        ),
        LeftAlone::OtherNamespace { theirs, ours } => format!(
            "state file {path}: its {records} {was} written in another pid namespace (pid:[{theirs}], this daemon \
             runs in {}): {their_pids} {pids_are} not this namespace's; left as {it_is}. Give this daemon a state \
             file of its own ([daemon] state), or remove that one once its daemon is gone",
            ours.map_or("an unreadable one".to_string(), |n| format!("pid:[{n}]"))
        ),
        LeftAlone::OtherBoot => {
            format!("state file {path}: written before the last boot: its {records} {are} not restored")
        }
    }
}

/// The kernel's boot id, `None` where it cannot be read.
pub fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Whether the state file at `path` may be believed: a regular file (not a link), owned by the
/// user this daemon runs as and writable by no one else, in a directory no one else may replace it
/// in (writable by no one else; above it, sticky will do). What it holds steers a root daemon's affinity and
/// cgroup writes, so a file another user could have written is refused, as sshd refuses a
/// key file others can write.
/// Largest state file [`Originals::load`] reads, bytes: 64 MiB. A record is a few hundred bytes
/// (a pid, start time, masks, a cpuset); 100,000 processes placed at once stay under it.
/// Prevents: a planted file, sparse and huge, read whole before it is refused.
pub const MAX_STATE_BYTES: u64 = 64 << 20;

/// Whether the state file at `path`, whose open descriptor's metadata is `m`, may be trusted.
fn trusted(path: &Path, m: &std::fs::Metadata) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt as _;
    let shown = path.display();
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !m.file_type().is_file() {
        return Err(format!("state file {shown}: not a regular file (a link?): not trusted; remove it"));
    }
    if m.uid() != me || m.mode() & 0o022 != 0 {
        return Err(format!(
            "state file {shown}: owned by uid {} with mode {:o}: not trusted (it must be this daemon's, uid {me}, \
             writable by no one else); remove it or fix its owner and mode",
            m.uid(),
            m.mode() & 0o7777
        ));
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    // Whoever may rename files in the directory may put an older copy of the file back (a
    // replay of records): it and every directory above it must be this daemon's or root's, and
    // writable by no one else (above it, unless sticky; `paths::trusted_dir`; a review of
    // 2026-11-29 found a group-writable directory, or one another user owns, accepted).
    crate::paths::trusted_dir(dir).map_err(|why| format!("state file {shown}: {why}: not trusted"))?;
    Ok(())
}

/// Puts back every process of `procs` (a state file's records, by pid): first the descendants
/// that inherited what numapilot set on one of them and still carry it, then each recorded
/// process. Crash recovery's restore (the live host's open), the same pass as the shutdown's
/// ([`Originals::restore_all`]): until 2026-11-29 recovery restored the records alone, and
/// children that had inherited a placed parent's mask kept it after a kill -9. Recovery is a
/// record's last try ([`RESTORE_TRIES`]): one whose restore fails is reported and not kept.
pub fn restore_records(procs: &BTreeMap<u32, ProcessOriginal>, report: &mut RestoreReport) {
    restore_pass(procs, &BTreeMap::new(), report, |_| {
        Retry::GiveUp("restoring at start is its last try: its record is dropped".into())
    });
}

/// What becomes of a record whose restore pass failed, with the note its failure gets.
enum Retry {
    /// Kept for the next pass.
    Again(String),
    /// Forgotten.
    GiveUp(String),
}

/// [`Retry`] for `rec` under the failed passes counted in `tries` ([`RESTORE_TRIES`]).
fn retry(tries: &mut BTreeMap<u32, (u64, u32)>, rec: &ProcessOriginal) -> Retry {
    let n = match tries.get(&rec.pid) {
        Some(&(st, n)) if st == rec.starttime => n + 1,
        _ => 1,
    };
    if n >= RESTORE_TRIES {
        tries.remove(&rec.pid);
        Retry::GiveUp(format!("given up after {n} failed restores: its record is dropped"))
    } else {
        tries.insert(rec.pid, (rec.starttime, n));
        Retry::Again(format!("kept on record for another try ({n} of {RESTORE_TRIES} failed)"))
    }
}

/// One restore pass over `procs`: the descendants that inherited what numapilot set on one of
/// them (none recorded in `kept`, records that stay), then each process. A process whose restore
/// failed (alive, and some thread or its cgroup not put back), or one a descendant of which could
/// not be found, judged or put back, is reported with `retry`'s note; those `retry` keeps are
/// returned (the next pass walks their descendants again).
fn restore_pass(
    procs: &BTreeMap<u32, ProcessOriginal>,
    kept: &BTreeMap<u32, ProcessOriginal>,
    report: &mut RestoreReport,
    mut retry: impl FnMut(&ProcessOriginal) -> Retry,
) -> BTreeMap<u32, ProcessOriginal> {
    let mut descendants = restore_inherited(procs, kept, report);
    let mut again = BTreeMap::new();
    for rec in procs.values() {
        let below = descendants.remove(&rec.pid).map(|d| d.join("; "));
        let failed = match (restore_process(rec, report), below) {
            (Ok(()), None) => None,
            (Ok(()), Some(below)) => Some(format!("{}: {below}", rec.pid)),
            (Err(message), None) => Some(message),
            (Err(message), Some(below)) => Some(format!("{message}; {below}")),
        };
        if let Some(message) = failed {
            match retry(rec) {
                Retry::Again(note) => {
                    report.failed.push(format!("{message}; {note}"));
                    again.insert(rec.pid, rec.clone());
                }
                Retry::GiveUp(note) => report.failed.push(format!("{message}; {note}")),
            }
        }
    }
    again
}

/// The masks numapilot set on `rec`'s process ([`ProcessOriginal::set_cpus`]).
pub fn masks_we_set(rec: &ProcessOriginal) -> Vec<CpuSet> {
    rec.set_cpus.iter().filter_map(|c| CpuSet::parse_list(c).ok()).collect()
}

/// Whether a thread's mask as the kernel reports it now (`now`) is one numapilot set (`ours`,
/// [`masks_we_set`]), for a thread that may run on `allowed` now ([`allowed_cpus`]).
///
/// Equal to one of them, or that one cut to `allowed`: the kernel keeps the mask a task was given
/// and reports it cut to the CPUs online and to its cpuset, cut again at every hotplug and cpuset
/// change (since Linux 6.2; measured on this host, 6.18: a task given 0-1, its cpuset narrowed to
/// CPU 0, reads 0, and 0-1 again once the cpuset widens). After a CPU went offline, or a
/// container's cpuset narrowed, a thread on numapilot's mask read back smaller and was taken for
/// the program's own: recorded as its original, or left on the daemon's mask at restore (review
/// of 2026-11-30). Only the cut counts, not any subset: a program that pinned itself within
/// numapilot's mask (to CPU 1 of 0-1, both online and in its cpuset) reads a mask smaller than the
/// cut and stays its own. The two look alike only when every CPU of numapilot's mask the program
/// left out is offline or outside its cpuset now, where they run on the same CPUs. `allowed`
/// `None` (not read): equality only.
pub fn carries_ours(now: &CpuSet, ours: &[CpuSet], allowed: Option<&CpuSet>) -> bool {
    ours.iter().any(|s| now == s || (now.is_subset(s) && allowed.is_some_and(|a| *now == s.intersection(a))))
}

/// [`carries_ours`] where what the thread may run on now could not be read (`allowed` `None`):
/// `None` (unknown) for a mask narrower than one numapilot set, which may be that mask as the
/// kernel cut it or the program's own pin within it; `Some` otherwise.
pub fn carries_ours_known(now: &CpuSet, ours: &[CpuSet], allowed: Option<&CpuSet>) -> Option<bool> {
    if carries_ours(now, ours, allowed) {
        return Some(true);
    }
    (allowed.is_some() || !ours.iter().any(|s| now.is_subset(s))).then_some(false)
}

/// The mask `pid` inherited from the process of record `parent`, when it did: every thread of
/// `pid` carries one mask numapilot set on `parent` ([`carries_ours`], cut to what `pid` may run
/// on now), the same one; `Ok(None)` when it did not (a thread that set a mask of its own since,
/// the process gone, a record from before the masks were kept). Any mask numapilot set counts, not
/// only the parent's current one: a child forked before the parent was placed again, or by a
/// thread that had a placement of its own, carries an earlier one (review helper-37).
///
/// `Err`, with what could not be read: whether it inherited cannot be told (its threads not
/// listed, or a thread's mask not read, for another reason than the process or thread being gone:
/// no descriptor or memory left; or a mask narrower than numapilot's with the CPUs online not
/// read, [`carries_ours_known`]). Such a child was taken for one that had not inherited: at a
/// restore it kept numapilot's mask without a word.
pub fn inherited_mask(
    pid: u32,
    parent: &ProcessOriginal,
    hier: Option<&CpusetHierarchy>,
) -> Result<Option<CpuSet>, String> {
    let set = masks_we_set(parent);
    if set.is_empty() {
        return Ok(None);
    }
    let tids = match numapilot_actuate::list_threads(pid) {
        Ok(Some(tids)) => tids,
        Ok(None) => return Ok(None),
        Err(e) => return Err(format!("its threads could not be listed (/proc/{pid}/task: {e})")),
    };
    let allowed = allowed_cpus(pid, hier);
    let mut first: Option<CpuSet> = None;
    for t in tids {
        let m = match sched_getaffinity(t as libc::pid_t) {
            Ok(m) => m,
            Err(e) if e.errno() == Some(libc::ESRCH) => continue,
            Err(e) => return Err(format!("the mask of its thread {t} could not be read ({e})")),
        };
        if first.as_ref().is_some_and(|f| *f != m) {
            return Ok(None);
        }
        match carries_ours_known(&m, &set, allowed.as_ref()) {
            Some(true) => {}
            Some(false) => return Ok(None),
            None => return Err(format!("its {}", cut_unknown(t, &m))),
        }
        first.get_or_insert(m);
    }
    Ok(first)
}

/// Why thread `tid`'s mask `m` cannot be told numapilot's or the program's own
/// ([`carries_ours_known`] `None`).
fn cut_unknown(tid: u32, m: &CpuSet) -> String {
    format!(
        "thread {tid} runs on CPUs {}, within a mask numapilot set, and the CPUs online could not be read \
         (numapilot's mask cut to them, or the program's own?)",
        m.to_list()
    )
}

/// The CPUs a thread of `pid` may run on now: online (`/sys/devices/system/cpu/online`) and in
/// the cpuset of `pid` in hierarchy `h` when one is given and it reads (one numapilot made does
/// not: its CPUs are the daemon's placement, and every mask within them reads as cut to them).
/// `None` when the online CPUs cannot be read. A cpuset that is not read counts as every online
/// CPU: a cut to it is then not recognised ([`carries_ours`] errs toward the program's own).
pub fn allowed_cpus(pid: u32, h: Option<&CpusetHierarchy>) -> Option<CpuSet> {
    let online = numapilot_topology::sysfs::cpu_list(Path::new("/"), "online").ok()??;
    let online = Some(online).filter(|c| !c.is_empty())?;
    Some(match h.and_then(|h| super::select::cpuset_effective_cpus(h, pid)) {
        Some(c) => online.intersection(&c),
        None => online,
    })
}

/// The substitute for a mask the kernel refused while restoring (`set_threads_affinity_each_while`'s
/// `instead`): after EINVAL, every possible CPU, which the kernel cuts to the thread's cpuset and
/// the CPUs online. The kernel cuts any mask it is given to those itself, so EINVAL means none of
/// the original's CPUs is left there (a CPU taken offline, a container's cpuset narrowed: review of
/// 2026-11-30, a recovery stopped at a leader recorded on CPU 5); the closest thing still valid is
/// then the cpuset's CPUs, where the kernel itself puts a task whose CPUs all went offline. Given as
/// every possible CPU, the mask follows the cpuset again (rule restore-follows-cpuset). Any other
/// refusal (EPERM, EBUSY) has no substitute: the thread is reported and its record kept.
fn substitute(possible: Option<&CpuSet>, e: &numapilot_actuate::Error) -> Option<CpuSet> {
    possible.filter(|_| e.errno() == Some(libc::EINVAL)).cloned()
}

/// Logs the threads given [`substitute`]'s mask, naming the original the kernel refused.
fn note_substituted(pid: u32, substituted: &[(u32, CpuSet, CpuSet)]) {
    for (tid, refused, set) in substituted {
        tracing::warn!(
            "pid {pid} thread {tid}: its original mask {} is no longer valid (no CPU of it online in its cpuset); \
             given its cpuset's CPUs instead (every possible CPU, {}, cut by the kernel)",
            refused.to_list(),
            set.to_list()
        );
    }
}

/// The directory of the state file at `path`, made (mode 0700) when missing.
fn state_dir(path: &Path) -> Result<&Path, String> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("state directory {}: cannot create: {e}", dir.display()))?;
    }
    Ok(dir)
}

/// Writes `file` to `path` atomically.
pub fn write_atomic(path: &Path, file: &StateFile) -> Result<(), String> {
    let dir = state_dir(path)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "state.json".into());
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let text = serde_json::to_string_pretty(file).map_err(|e| format!("state file: cannot encode: {e}"))?;
    let write = || -> std::io::Result<()> {
        // A leftover (or a link someone planted) under the temporary name goes first, and the
        // file is then created anew (O_EXCL: never opened through a link, never someone else's).
        match std::fs::remove_file(&tmp) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("state file {}: cannot write: {e}", path.display())
    })
}

/// What a recorded process's descendants inherit from it at fork: the mask numapilot set (its
/// leader's current one, when that differs from the original) and the cgroup numapilot made.
struct Inheritance<'a> {
    rec: &'a ProcessOriginal,
    ours: Option<CpuSet>,
    original: Option<CpuSet>,
    made_cgroup: Option<String>,
}

/// Reads of /proc that failed: how many, and the first error.
type Unread = (usize, String);

/// Every process's children, from /proc/PID/stat (processes that vanish while listed are
/// skipped), with what could not be read: /proc itself, or a stat that failed for want of a
/// descriptor or memory (`stat_now`), as `(how many, the first error)`. A child such a read
/// missed cannot be put back, so the caller reports it.
fn parents() -> (BTreeMap<u32, Vec<u32>>, Option<Unread>) {
    let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    let dir = match std::fs::read_dir("/proc") {
        Ok(dir) => dir,
        Err(e) => return (children, Some((1, format!("/proc: {e}")))),
    };
    let mut unread: Option<Unread> = None;
    let mut miss = |what: String| unread.get_or_insert((0, what)).0 += 1;
    for e in dir {
        let e = match e {
            Ok(e) => e,
            Err(e) => {
                miss(format!("/proc: {e}"));
                continue;
            }
        };
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        match stat_now(pid) {
            Ok(Some(st)) => children.entry(st.ppid).or_default().push(pid),
            Ok(None) => {}
            Err(e) => miss(format!("/proc/{pid}/stat: {e}")),
        }
    }
    (children, unread)
}

/// Puts back descendants (children, their children, ...) of recorded processes that are not
/// recorded themselves and still carry what numapilot set on their ancestor: every thread's mask
/// equal to it (a program that set its own mask since is left as it is), or membership of the
/// cgroup numapilot made for the ancestor. They get the ancestor's original mask and cgroup.
/// A descendant recorded in `procs` or `kept` (records that stay: a partial release) is not one
/// of them.
///
/// Returns, by recorded process, what went wrong below it: descendants not found (a /proc read
/// that failed for want of a descriptor or memory), not judged (their threads, masks, cgroup or
/// stat unreadable so: [`inherited_mask`]'s `Err`) or not put back. The caller keeps that record
/// for another pass ([`restore_pass`]): until then a child whose masks could not be read was taken
/// for one that had not inherited, and kept numapilot's mask with nothing said, and one missed by
/// the listing was said but never looked for again.
fn restore_inherited(
    procs: &BTreeMap<u32, ProcessOriginal>,
    kept: &BTreeMap<u32, ProcessOriginal>,
    report: &mut RestoreReport,
) -> BTreeMap<u32, Vec<String>> {
    let mut failed: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    let mut roots = Vec::new();
    let hierarchy = CpusetHierarchy::detect(None);
    let possible = possible_cpus();
    for rec in procs.values() {
        if !same_process(rec.pid, rec.starttime) {
            continue;
        }
        let original = CpuSet::parse_list(&rec.default_cpus).ok().filter(|c| !c.is_empty());
        // The parent's mask now, when it is one numapilot set (a program that pinned itself since
        // and then forked keeps its children on its own choice: a review of 2026-11-29). A record
        // from before the masks were kept (no `set_cpus`) takes any mask but the original.
        let set = masks_we_set(rec);
        // One of them as the kernel cuts it, not only equal: the kernel reports a mask cut to the
        // CPUs online and to the cpuset, so after a CPU went offline (or the cpuset narrowed) the
        // mask numapilot set reads smaller (a review of 2026-11-29); only the cut, not any subset,
        // so a parent's own pin within it stays its own (`carries_ours`, review of 2026-11-30).
        let allowed = allowed_cpus(rec.pid, hierarchy.as_ref());
        let ours = sched_getaffinity(rec.pid as libc::pid_t).ok().filter(|now| {
            Some(now) != original.as_ref() && (set.is_empty() || carries_ours(now, &set, allowed.as_ref()))
        });
        let made_cgroup = rec.cpuset.as_ref().map(CpusetOriginal::made_path);
        if ours.is_some() || made_cgroup.is_some() || !set.is_empty() {
            roots.push((rec.pid, Inheritance { rec, ours, original, made_cgroup }));
        }
    }
    if roots.is_empty() {
        return failed;
    }
    let (children, unread) = parents();
    // A child the listing missed is not put back: said for each parent, whose record is kept for
    // another pass (it was skipped without a word while its parent was restored, and kept
    // numapilot's mask).
    if let Some((n, first)) = unread {
        for (pid, _) in &roots {
            failed.entry(*pid).or_default().push(format!(
                "its children could not all be found ({} could not be read, first {first}); a child that inherited \
                 numapilot's mask from it may keep it",
                numapilot_topology::plural(n, "process"),
            ));
        }
    }
    // Breadth first from each root; a recorded process is restored by its own record.
    let mut queue: Vec<(u32, usize)> = Vec::new();
    for (i, (pid, _)) in roots.iter().enumerate() {
        queue.extend(children.get(pid).into_iter().flatten().map(|&c| (c, i)));
    }
    let mut seen = std::collections::BTreeSet::new();
    while let Some((pid, root)) = queue.pop() {
        if procs.contains_key(&pid) || kept.contains_key(&pid) || !seen.insert(pid) {
            continue;
        }
        let inh = &roots[root].1;
        match restore_child(pid, inh, hierarchy.as_ref(), possible.as_ref()) {
            Child::Gone => continue,
            // Neither our mask nor our cgroup: its own placement; its children are its business.
            Child::Own => continue,
            Child::Restored => report.inherited += 1,
            Child::Failed(errors) => failed.entry(inh.rec.pid).or_default().push(format!(
                "{pid} (child of {}): {}",
                inh.rec.pid,
                errors.join("; ")
            )),
        }
        queue.extend(children.get(&pid).into_iter().flatten().map(|&c| (c, root)));
    }
    failed
}

/// What became of one descendant at [`restore_inherited`].
enum Child {
    /// It exited (or its pid names another process now).
    Gone,
    /// It carries neither numapilot's mask nor its cgroup: its own placement.
    Own,
    /// Put back.
    Restored,
    /// Not put back, or not judged: why.
    Failed(Vec<String>),
}

/// Puts back descendant `pid` of `inh`'s process when it carries what numapilot set there: its
/// cgroup numapilot made (back to the original), every thread on one mask numapilot set (the
/// original mask). A read that fails for want of a descriptor or memory is a failure, never "not
/// inherited" nor "gone".
fn restore_child(
    pid: u32,
    inh: &Inheritance<'_>,
    hierarchy: Option<&CpusetHierarchy>,
    possible: Option<&CpuSet>,
) -> Child {
    let mut fixed = false;
    let mut errors = Vec::new();
    if let (Some(made), Some(cs)) = (&inh.made_cgroup, &inh.rec.cpuset) {
        let h = cs.hierarchy();
        match h.cgroup_of(pid) {
            Ok(Some(cg)) if cg == *made => match move_back(&h, pid, &cs.original) {
                Ok(()) => fixed = true,
                Err(e) if e.errno() == Some(libc::ESRCH) => return Child::Gone,
                Err(e) => errors.push(format!("cpuset back to {}: {e}", cs.original)),
            },
            Ok(_) => {}
            Err(e) => errors.push(format!("its cgroup could not be read (/proc/{pid}/cgroup: {e})")),
        }
    }
    if let Some(original) = &inh.original {
        // Every thread on one mask numapilot set on the ancestor (any of them: the ancestor
        // may have been placed again since the fork); a record from before the masks were
        // kept: the ancestor's mask now, when it is ours.
        let all_ours = if inh.rec.set_cpus.is_empty() {
            match numapilot_actuate::list_threads(pid) {
                Ok(tids) => Ok(inh.ours.as_ref().is_some_and(|ours| {
                    let tids = tids.unwrap_or_default();
                    !tids.is_empty()
                        && tids.iter().all(|&t| sched_getaffinity(t as libc::pid_t).ok().as_ref() == Some(ours))
                })),
                Err(e) => Err(format!("its threads could not be listed (/proc/{pid}/task: {e})")),
            }
        } else {
            inherited_mask(pid, inh.rec, hierarchy).map(|m| m.is_some())
        };
        match all_ours {
            Ok(false) => {}
            Err(why) => errors.push(format!("whether it carries numapilot's mask is unknown: {why}")),
            Ok(true) => {
                let back = Follow::of(inh.rec).mask(original.clone());
                let st = match stat_now(pid) {
                    Ok(Some(st)) => st.starttime,
                    Ok(None) => return Child::Gone,
                    Err(e) => {
                        errors.push(format!("its stat could not be read (/proc/{pid}/stat: {e})"));
                        return Child::Failed(errors);
                    }
                };
                // Only a confirmed change is "gone" (as in `restore_process`).
                let unsure = std::cell::Cell::new(false);
                let set = set_threads_affinity_each_while(
                    pid,
                    RESTORE_ROUNDS,
                    |_| Some(back.clone()),
                    |_, _, e| substitute(possible, e),
                    || match still_there(pid, st) {
                        Some(same) => same,
                        None => {
                            unsure.set(true);
                            false
                        }
                    },
                );
                match set {
                    Ok(Some(done)) => {
                        note_substituted(pid, &done.substituted);
                        errors.extend(done.refused.iter().map(|r| format!("thread {}: {}", r.tid, r.error)));
                        fixed = done.refused.is_empty();
                    }
                    Ok(None) if unsure.get() => errors
                        .push(format!("its stat could not be read (/proc/{pid}/stat, short of descriptors or memory)")),
                    Ok(None) => return Child::Gone,
                    Err(e) => errors.push(e.to_string()),
                }
            }
        }
    }
    if !errors.is_empty() {
        Child::Failed(errors)
    } else if fixed {
        Child::Restored
    } else {
        Child::Own
    }
}

/// Moves `pid` into `original`, or, when that cgroup is gone (ENOENT) or takes no process any more
/// (EBUSY: under v2 it enabled controllers for children since), into its nearest ancestor that
/// takes it. Without it a process whose original cgroup was removed while it was placed (its
/// owner may remove an empty cgroup of theirs) stayed in numapilot's cgroup, which then could not
/// be removed either (a review of 2026-11-29). Err: the error of the original's move when no
/// ancestor took it, or any other error.
fn move_back(h: &numapilot_actuate::CpusetHierarchy, pid: u32, original: &str) -> numapilot_actuate::Result<()> {
    // The move would rebind its memory policy under its memory-map lock held for writing
    // (`cpuset_attach`), and wait as long as that lock is held elsewhere, with the cgroup
    // mutex held (no process on the machine could fork meanwhile): left for the next try.
    if numapilot_observe::stall::known_stuck(pid) {
        return Err(numapilot_actuate::Error::InvalidArgument {
            syscall: "cgroup.procs write",
            arg: "pid",
            reason: format!(
                "{pid}'s memory map is locked (a read of it is blocked in the kernel): moving it would wait with it; \
                 left in numapilot's cgroup for the next try"
            ),
        });
    }
    let first = match h.move_to(pid, original) {
        Ok(()) => return Ok(()),
        Err(e) if matches!(e.errno(), Some(libc::ENOENT) | Some(libc::EBUSY)) => e,
        Err(e) => return Err(e),
    };
    // Under v2 the root is no ancestor to fall back to: a process there belongs to no unit (no
    // accounting; `systemctl stop` and a logout no longer reach it), for good. It stays where it
    // is and the failure is reported (a review of 2026-11-29). Under v1 the cpuset root is every
    // CPU and memory node, nothing more.
    let root_ok = h.version == numapilot_actuate::CgroupVersion::V1;
    let mut path = original.trim_end_matches('/').to_string();
    while let Some(cut) = path.rfind('/') {
        path.truncate(cut);
        let up = if path.is_empty() { "/" } else { path.as_str() };
        if up == "/" && !root_ok {
            break;
        }
        match h.move_to(pid, up) {
            Ok(()) => {
                tracing::warn!("pid {pid}: its cgroup {original} takes no process any more; put back in {up} instead");
                return Ok(());
            }
            Err(e) if matches!(e.errno(), Some(libc::ENOENT) | Some(libc::EBUSY)) => {}
            Err(e) => return Err(e),
        }
        if up == "/" {
            break;
        }
    }
    Err(first)
}

/// Empties and removes the cpuset cgroup numapilot made for a process: every process still in it
/// (the process itself, or children that inherited it at fork, whatever became of their parent)
/// goes back to the original cgroup, then the directory is removed. Errors, each naming its
/// cgroup; a process that exits meanwhile is not one.
pub(crate) fn release_cgroup(cs: &CpusetOriginal) -> Vec<String> {
    let h = cs.hierarchy();
    let mut errors = Vec::new();
    let made = cs.made_path();
    let procs = std::fs::read_to_string(h.dir(&made).join("cgroup.procs")).unwrap_or_default();
    for pid in procs.split_whitespace().filter_map(|p| p.parse::<u32>().ok()) {
        // Still in our cgroup right before the write: a pid that exited since the listing and was
        // reused by another process (in a cgroup of its own) is not moved into the original.
        if h.cgroup_of(pid).ok().flatten().as_deref() != Some(made.as_str()) {
            continue;
        }
        if let Err(e) = move_back(&h, pid, &cs.original) {
            if e.errno() != Some(libc::ESRCH) {
                errors.push(format!("pid {pid} back to cpuset {}: {e}", cs.original));
            }
        }
    }
    if let Err(e) = h.remove(&cs.made) {
        errors.push(format!("removing cgroup {made}: {e}"));
    }
    errors
}

/// Rule restore-follows-cpuset (see [`ProcessOriginal::cpuset_cpus`]): a mask that was exactly
/// the process's cpuset when recorded is put back as every possible CPU.
struct Follow {
    cpuset: Option<CpuSet>,
    possible: Option<CpuSet>,
}

impl Follow {
    fn of(rec: &ProcessOriginal) -> Follow {
        let cpuset = rec.cpuset_cpus.as_deref().and_then(|c| CpuSet::parse_list(c).ok()).filter(|c| !c.is_empty());
        // Not on a host with CPUs isolated at boot when the list leaves them out: a task in the
        // top cpuset given every possible CPU gets "possible minus partitions", which would name
        // the isolated CPUs its default mask never had (kernels whose top cpuset lists them, as
        // 6.12's does, never record such a list: the default mask differs from it).
        let isolated = numapilot_topology::sysfs::isolated_cpus(Path::new("/")).unwrap_or_default();
        let cpuset = cpuset.filter(|c| isolated.is_subset(c));
        let possible = cpuset.as_ref().and_then(|_| possible_cpus());
        Follow { cpuset, possible }
    }

    /// The mask to put back for an original `m`.
    fn mask(&self, m: CpuSet) -> CpuSet {
        match (&self.cpuset, &self.possible) {
            (Some(c), Some(p)) if *c == m && m.is_subset(p) => p.clone(),
            _ => m,
        }
    }
}

/// The CPUs the kernel could ever bring online (`/sys/devices/system/cpu/possible`), `None` when
/// it cannot be read.
pub(crate) fn possible_cpus() -> Option<CpuSet> {
    numapilot_topology::sysfs::cpu_list(Path::new("/"), "possible").ok().flatten().filter(|c| !c.is_empty())
}

/// Puts one process back (see the module essay). A process that is gone has nothing to put back,
/// but the cpuset cgroup made for it is still emptied and removed. `Err`: the process lives and
/// something of it could not be put back (a thread, its cgroup), the message naming it (its one
/// caller, `restore_pass`, under [`Originals::restore_all`], [`Originals::release`] and
/// [`restore_records`], keeps its record to retry); counted in `report` otherwise.
fn restore_process(rec: &ProcessOriginal, report: &mut RestoreReport) -> Result<(), String> {
    let mut errors = Vec::new();
    // The process goes back to its original cgroup only while it is still in the one numapilot
    // made (release_cgroup moves every process found there): one that an operator or a service
    // manager moved elsewhere since stays where they put it (before 2026-11-29 it was moved back,
    // undoing their move).
    if let Some(cs) = &rec.cpuset {
        errors.extend(release_cgroup(cs));
    }
    // "Gone" only when /proc says so: a stat read that failed for want of a descriptor or memory
    // (a SIGTERM under memory pressure) says nothing about the process, and a record dropped as
    // gone then is lost for good with the process left on numapilot's mask (review helper-37;
    // `prune_gone` had this fixed, the restore had not).
    match still_there(rec.pid, rec.starttime) {
        Some(true) => {}
        Some(false) => {
            if errors.is_empty() {
                report.gone += 1;
            } else {
                report.failed.push(format!("{} ({}, gone): {}", rec.pid, printable(&rec.comm), errors.join("; ")));
            }
            return Ok(());
        }
        None => {
            errors.push("its /proc/PID/stat could not be read (short of descriptors or memory)".into());
            return Err(format!("{} ({}): {}", rec.pid, printable(&rec.comm), errors.join("; ")));
        }
    }
    let default = CpuSet::parse_list(&rec.default_cpus).ok().filter(|c| !c.is_empty());
    // A thread is put back only while it carries a mask numapilot set (`carries_ours`): one on
    // record gets its recorded mask, one that is not (born after the last change, it inherited
    // numapilot's mask from its creator) the leader's original. A thread that set its own mask
    // since is left as it is, on record or not: until 2026-11-29 every thread off the record was
    // reset to the leader's original, and until 2026-11-30 every thread on it to its recorded one
    // (a thread numapilot placed that then pinned itself, `taskset -p` or
    // pthread_setaffinity_np, lost its own choice at shutdown, release and recovery). Re-listed
    // until no new thread appears, like the change itself: a thread born meanwhile from a not yet
    // restored creator carries numapilot's mask and is caught too.
    // A record from a file written before the masks were kept (no `set_cpus`) restores every
    // thread, as then.
    let ours = masks_we_set(rec);
    let follow = Follow::of(rec);
    let allowed = if ours.is_empty() { None } else { allowed_cpus(rec.pid, CpusetHierarchy::detect(None).as_ref()) };
    let possible = possible_cpus();
    // A thread whose mask cannot be judged (not read for another reason than its exit: ENOMEM; or
    // narrower than numapilot's with the CPUs online not read) is a failure, never "its own": it
    // was skipped, and the process counted restored with the thread on numapilot's mask.
    let mut unjudged: Vec<String> = Vec::new();
    let mask_for = |tid: u32| {
        if !ours.is_empty() {
            let now = match sched_getaffinity(tid as libc::pid_t) {
                Ok(m) => m,
                Err(e) if e.errno() == Some(libc::ESRCH) => return None,
                Err(e) => {
                    unjudged.push(format!("thread {tid}: its mask could not be read ({e})"));
                    return None;
                }
            };
            match carries_ours_known(&now, &ours, allowed.as_ref()) {
                Some(true) => {}
                Some(false) => return None,
                None => {
                    unjudged.push(cut_unknown(tid, &now));
                    return None;
                }
            }
        }
        let m = match rec.threads.get(&tid) {
            Some(c) => CpuSet::parse_list(c).ok(),
            None => default.clone(),
        };
        m.map(|m| follow.mask(m))
    };
    // Every thread, whatever a thread before it in the listing met (review of 2026-11-30: the walk
    // stopped at the first refusal and the threads after it kept numapilot's mask).
    // The walk stops when the process cannot be confirmed; only a confirmed change is "gone".
    let unsure = std::cell::Cell::new(false);
    match set_threads_affinity_each_while(
        rec.pid,
        RESTORE_ROUNDS,
        mask_for,
        |_, _, e| substitute(possible.as_ref(), e),
        || match still_there(rec.pid, rec.starttime) {
            Some(same) => same,
            None => {
                unsure.set(true);
                false
            }
        },
    ) {
        Ok(Some(done)) => {
            note_substituted(rec.pid, &done.substituted);
            errors.extend(done.refused.iter().map(|r| format!("thread {}: {}", r.tid, r.error)));
        }
        Ok(None) if unsure.get() => {
            errors.push("its /proc/PID/stat could not be read (short of descriptors or memory)".into())
        }
        Ok(None) => {
            report.gone += 1;
            return Ok(());
        }
        Err(e) => errors.push(e.to_string()),
    }
    errors.extend(unjudged);
    if errors.is_empty() {
        report.restored += 1;
        Ok(())
    } else {
        Err(format!("{} ({}): {}", rec.pid, printable(&rec.comm), errors.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sentences about records left alone agree with their count (they said "record(s)" and
    /// "they are" for one).
    #[test]
    fn left_alone_records_are_counted_in_words_that_agree() {
        let p = Path::new("/run/numapilot/state.json");
        assert_eq!(
            left_alone_message(p, 1, &LeftAlone::NoActing),
            "state file /run/numapilot/state.json: 1 record of an earlier run left as it is (this start changes \
             no process: a start that acts restores it)"
        );
        assert_eq!(
            left_alone_message(p, 2, &LeftAlone::NoActing),
            "state file /run/numapilot/state.json: 2 records of an earlier run left as they are (this start \
             changes no process: a start that acts restores them)"
        );
        let ns = LeftAlone::OtherNamespace { theirs: 4026531836, ours: Some(4026532200) };
        let one = left_alone_message(p, 1, &ns);
        assert!(one.starts_with("state file /run/numapilot/state.json: its 1 record was written in another pid namespace (pid:[4026531836], this daemon runs in pid:[4026532200]): its pid is not this namespace's; left as it is. Give"), "{one}");
        let two = left_alone_message(p, 2, &LeftAlone::OtherNamespace { theirs: 7, ours: None });
        assert!(two.starts_with("state file /run/numapilot/state.json: its 2 records were written in another pid namespace (pid:[7], this daemon runs in an unreadable one): their pids are not this namespace's; left as they are. Give"), "{two}");
        assert_eq!(
            left_alone_message(p, 1, &LeftAlone::OtherBoot),
            "state file /run/numapilot/state.json: written before the last boot: its 1 record is not restored"
        );
        assert_eq!(
            left_alone_message(p, 2, &LeftAlone::OtherBoot),
            "state file /run/numapilot/state.json: written before the last boot: its 2 records are not restored"
        );
    }

    /// What a claim made (the lock file, the directories above it) goes when its set is dropped
    /// before `keep_claim`, and stays after it; a claim refused by another's live lock removes
    /// nothing, and what was there before stays.
    #[test]
    fn a_claim_not_kept_leaves_nothing_it_made() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join("a/b/state.json");
        let lock = d.path().join("a/b/.state.json.lock");
        let first = Originals::claim(&state).unwrap();
        assert!(lock.is_file());
        let e = Originals::claim(&state).unwrap_err();
        assert!(e.contains("in use by another numapilot daemon"), "{e}");
        assert!(lock.is_file(), "a refused claim removed the live lock");
        drop(first);
        assert!(!d.path().join("a").exists(), "the claim's lock or directories were left");
        let mut kept = Originals::claim(&state).unwrap();
        kept.keep_claim();
        drop(kept);
        assert!(lock.is_file(), "a kept claim's lock file went");
        // Both there before this claim: they stay.
        drop(Originals::claim(&state).unwrap());
        assert!(lock.is_file());
        std::fs::remove_file(&lock).unwrap();
        drop(Originals::claim(&state).unwrap());
        assert!(!lock.exists() && d.path().join("a/b").is_dir());
    }

    /// Failed restore passes are counted for records still kept only: a process whose restore
    /// failed and that then exited leaves no count behind (review helper-33).
    #[test]
    fn a_failed_restores_count_goes_with_its_record() {
        let d = tempfile::tempdir().unwrap();
        let mut o = Originals::new(&d.path().join("state.json"));
        let me = std::process::id();
        let st = super::super::select::read_starttime(me).unwrap();
        o.procs.insert(
            me,
            ProcessOriginal {
                pid: me,
                starttime: st,
                comm: "test".into(),
                default_cpus: "0".into(),
                threads: BTreeMap::new(),
                cpuset: None,
                set_cpus: Vec::new(),
                cpuset_cpus: None,
                cpuset_declined: false,
            },
        );
        o.tries.insert(me, (st, 1));
        o.tries.insert(u32::MAX - 3, (5, 2));
        o.tries.insert(1, (0, 1));
        let _ = o.prune_gone();
        assert_eq!(o.tries.into_keys().collect::<Vec<_>>(), [me]);
    }
}
