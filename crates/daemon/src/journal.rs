//! The decision journal: one JSON line per action, size-bounded.
//!
//! Problem: an operator must be able to answer "why did numapilot move my database at 03:12?" after
//! the fact, and a dry run must show every action it would have taken, without the file growing
//! without bound on a busy machine.
//!
//! Approach: append one self-contained JSON object per action (and one per restore), flushed per
//! line so a crash loses at most the line being written. Before a write that would take the file
//! past `max_bytes`, the file is renamed to `PATH.1` (replacing an older `.1`) and a new one is
//! started: at most `2 x max_bytes` on disk.
//!
//! ```text
//!   journal.jsonl   {"time":"2026-11-22T04:01:02.345Z","pid":812,"starttime":5123,"comm":"redis",
//!                    "kind":"set-affinity","rule":"memory-follows-cpu","detail":"...",
//!                    "outcome":"applied","dry_run":false, ...}
//!   journal.jsonl.1 the previous max_bytes of lines
//! ```
//!
//! Limits: one writer (the daemon's loop); times are UTC wall clock at the time of writing (the
//! step's own time is in `at_ns`, monotonic).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use numapilot_policy::{Action, Outcome};
use serde::{Deserialize, Serialize};

/// A journal that could not be opened or written.
#[derive(Debug, thiserror::Error)]
#[error("journal {path}: {cause}")]
pub struct JournalError {
    /// The file.
    pub path: PathBuf,
    /// The cause (in the message; not repeated as a source).
    pub cause: std::io::Error,
}

/// One line of the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// UTC wall-clock time, RFC 3339 with milliseconds.
    pub time: String,
    /// `action` for a planned or applied action, `move-done` for the end of a page move that ran
    /// in the background (outcome `started` in its `action` line), `restore` for putting
    /// processes back, `topology` for the machine changing under the daemon (CPU hotplug: the
    /// topology read again, pid 0, rule `cpu-hotplug`, the CPUs in `detail` and `action.online`),
    /// `start` and `reload` for the daemon's own life ([`Record::daemon`]).
    pub event: String,
    /// Engine step number (1-based) the action belongs to; 0 for the lines of no step: a restore,
    /// the daemon's `start` and `reload`, a `topology` change (their `at_ns` orders them).
    pub step: u64,
    /// Monotonic time of the step's sample, ns.
    pub at_ns: u64,
    /// Process id (0 for a restore).
    pub pid: u32,
    /// Thread id when the action is for one thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tid: Option<u32>,
    /// Start time of the process, clock ticks after boot (pid-reuse guard).
    pub starttime: u64,
    /// Process name, when the model knows it.
    pub comm: String,
    /// Action kind (`set-affinity`, `migrate-pages`, `move-ranges`, `interleave`) or `restore`.
    pub kind: String,
    /// The rule that fired (the first unit's, for an action covering several units).
    pub rule: String,
    /// The rule's figures; for an action covering several units, then each other unit's distinct
    /// reason as `; and [rule] figures`.
    pub detail: String,
    /// For an action covering several units, their other rules, each once (`Reason::also`): a
    /// journal filtered by rule (`jq 'select(.rule == R or ((.also_rules // []) | index(R)))'`)
    /// finds the action under each. Absent otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_rules: Vec<String>,
    /// `applied`, `partial`, `started` (a page move handed to the mover; its `move-done` line
    /// follows), `vanished`, `refused`, or `planned` when not carried out: in a dry run, or with
    /// one node in the daemon's reach (nothing to place; `message` says so).
    pub outcome: String,
    /// Base pages moved (page actions).
    pub pages_moved: u64,
    /// Base pages not moved, by cause.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pages_failed: Vec<(String, u64)>,
    /// The refusal message, when refused; why a planned action was not carried out when there
    /// was nothing to place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Whether this is a dry run (nothing was applied).
    pub dry_run: bool,
    /// The action's parameters (CPUs, nodes, ranges), as the engine planned them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<serde_json::Value>,
}

/// The action kind as the journal and the metrics name it.
pub fn kind_name(action: &Action) -> &'static str {
    use numapilot_policy::ActionKind as K;
    match action.kind {
        K::SetAffinity { .. } => "set-affinity",
        K::MigratePages { .. } => "migrate-pages",
        K::MoveRanges { .. } => "move-ranges",
        K::Interleave { .. } => "interleave",
    }
}

/// The outcome as the journal and the metrics name it (`planned` for `None`, a dry run).
pub fn outcome_name(outcome: Option<&Outcome>) -> &'static str {
    match outcome {
        None => "planned",
        Some(Outcome::Applied { .. }) => "applied",
        Some(Outcome::Partial { .. }) => "partial",
        Some(Outcome::Started { .. }) => "started",
        Some(Outcome::Vanished) => "vanished",
        Some(Outcome::Refused { .. }) => "refused",
    }
}

impl Record {
    /// The line for the end of a background page move started at step `step`'s sample time
    /// `at_ns` (its `action` line says `started`): the move's own outcome and pages.
    pub fn move_done(step: u64, at_ns: u64, f: &numapilot_policy::FinishedMove, comm: &str) -> Self {
        let mut r = Record::action(step, at_ns, &f.action, comm, Some(&f.outcome), false);
        r.event = "move-done".into();
        let mut on = f.ran_on.as_ref().map(|c| format!(" on CPUs {}", c.to_list())).unwrap_or_default();
        if f.threads > 1 {
            on.push_str(&format!(" by {} threads", f.threads));
        }
        r.detail = format!(
            "{} ms in the background{on} (started at {} ns); {}",
            f.ended_ns.saturating_sub(f.started_ns) / 1_000_000,
            f.started_ns,
            f.action.reason.detail
        );
        r
    }

    /// The line for one action of step `step`.
    pub fn action(
        step: u64,
        at_ns: u64,
        action: &Action,
        comm: &str,
        outcome: Option<&Outcome>,
        dry_run: bool,
    ) -> Self {
        let (pages_moved, pages_failed, message) = match outcome {
            Some(Outcome::Applied { pages_moved }) => (*pages_moved, Vec::new(), None),
            Some(Outcome::Partial { pages_moved, failed }) => (*pages_moved, failed.clone(), None),
            Some(Outcome::Refused { message }) => (0, Vec::new(), Some(message.clone())),
            _ => (0, Vec::new(), None),
        };
        Record {
            time: rfc3339_now(),
            event: "action".into(),
            step,
            at_ns,
            pid: action.target.pid,
            tid: action.target.tid,
            starttime: action.target.starttime,
            comm: comm.to_string(),
            kind: kind_name(action).into(),
            rule: action.reason.rule.clone(),
            detail: action.reason.detail.clone(),
            also_rules: action.reason.also.clone(),
            outcome: outcome_name(outcome).into(),
            pages_moved,
            pages_failed,
            message,
            dry_run,
            action: serde_json::to_value(&action.kind).ok(),
        }
    }

    /// A line about no process (pid 0): the machine, the daemon itself, a restore.
    fn system(event: &str, kind: &str, rule: &str, detail: String) -> Self {
        Record {
            time: rfc3339_now(),
            event: event.into(),
            step: 0,
            at_ns: numapilot_observe::reader::monotonic_ns(),
            pid: 0,
            tid: None,
            starttime: 0,
            comm: String::new(),
            kind: kind.into(),
            rule: rule.into(),
            detail,
            also_rules: Vec::new(),
            outcome: "applied".into(),
            pages_moved: 0,
            pages_failed: Vec::new(),
            message: None,
            dry_run: false,
            action: None,
        }
    }

    /// The machine changed under the daemon before step `step` (CPU hotplug): `what` as the
    /// engine describes it, `online` the CPUs online now that their nodes list
    /// (`Topology::usable_cpus`: the CPUs the daemon places on).
    pub fn topology(step: u64, at_ns: u64, what: &str, online: &str) -> Self {
        Record {
            step,
            at_ns,
            action: Some(serde_json::json!({ "online": online })),
            ..Record::system("topology", "topology", "cpu-hotplug", what.to_string())
        }
    }

    /// A line of the daemon's own life: `event` `start` (its configuration file in `detail`, the
    /// start's notes in `message`: reserved CPUs, other placers, missing signal sources) or
    /// `reload` (rule `accepted` or `rejected`, the reason in `message`), or `own-memory-nodes` (rule
    /// `changed`: the daemon's own memory nodes and those they leave out in `detail`, the warning
    /// in `message` when some are). Pid 0, kind `daemon`.
    pub fn daemon(event: &str, rule: &str, detail: String, message: Option<String>, dry_run: bool) -> Self {
        Record { message, dry_run, ..Record::system(event, "daemon", rule, detail) }
    }

    /// The line for a restore (on shutdown, or at start after a crash).
    pub fn restore(why: &str, report: &crate::live::RestoreReport, dry_run: bool) -> Self {
        let detail = format!(
            "restored {}, inherited {}, gone {}, failed {}",
            report.restored,
            report.inherited,
            report.gone,
            report.failed.len()
        );
        Record {
            outcome: if report.failed.is_empty() { "applied".into() } else { "partial".into() },
            message: (!report.failed.is_empty()).then(|| report.failed.join("; ")),
            dry_run,
            ..Record::system("restore", "restore", why, detail)
        }
    }
}

/// The journal file.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    max_bytes: u64,
    file: File,
    size: u64,
    failing: bool,
    /// Lines not written (a full disk, a vanished directory), counted (status
    /// `journal_lines_dropped`, metric `numapilot_journal_lines_dropped_total`).
    dropped: u64,
}

impl Journal {
    /// Opens (creating the directory and the file, mode 0600: it names processes) for appending.
    pub fn open(path: &Path, max_bytes: u64) -> Result<Self, JournalError> {
        let err = |cause| JournalError { path: path.to_path_buf(), cause };
        // Directories made here are removed again if the open fails after them.
        let mut made = crate::paths::MadeDirs::default();
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() && !dir.is_dir() {
                // A file where its directory should be: ENOTDIR, as opening through it would say
                // (making the directory said "File exists").
                if dir.exists() {
                    return Err(err(std::io::Error::from_raw_os_error(libc::ENOTDIR)));
                }
                made = crate::paths::make_dirs(dir, 0o700).map_err(err)?;
            }
            // Before the file is opened: another user who may write in the directory (or one
            // above it) could put a link of theirs where root's journal is appended (review
            // helper-37; the file itself is opened without following links, its directories were
            // not checked).
            crate::paths::trusted_dir(dir).map_err(|why| err(std::io::Error::other(why)))?;
        }
        let file = open_append(path).map_err(err)?;
        let size = file.metadata().map_err(err)?.len();
        made.keep();
        Ok(Self { path: path.to_path_buf(), max_bytes, file, size, failing: false, dropped: 0 })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The rotated file (`PATH.1`).
    pub fn rotated_path(&self) -> PathBuf {
        let mut p = self.path.clone().into_os_string();
        p.push(".1");
        PathBuf::from(p)
    }

    /// Appends one line, rotating first if it would pass the bound.
    pub fn write(&mut self, record: &Record) -> Result<(), JournalError> {
        let mut line = serde_json::to_vec(record).expect("a journal record serialises");
        line.push(b'\n');
        let err = |cause| JournalError { path: self.path.clone(), cause };
        if self.size > 0 && self.size + line.len() as u64 > self.max_bytes {
            // Nothing at the path: a rotation whose new file could not be opened (no descriptor,
            // a full disk) renamed it already, and renaming nothing failed every later line for
            // the daemon's lifetime (review helper-34); a new file is opened instead.
            match std::fs::rename(&self.path, self.rotated_path()) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(err(e)),
                _ => {}
            }
            self.file = open_append(&self.path).map_err(err)?;
            self.size = 0;
        }
        if let Err(e) = self.file.write_all(&line) {
            // A line the disk took part of (ENOSPC in the middle) is cut back off, so the next
            // line starts on a line of its own instead of being glued to a fragment.
            let _ = self.file.set_len(self.size);
            return Err(err(e));
        }
        self.size += line.len() as u64;
        Ok(())
    }
}

impl Journal {
    /// [`Journal::write`], logging a failure once (a full disk fails every line) and the recovery;
    /// the daemon carries on either way.
    pub fn write_logged(&mut self, record: &Record) {
        match self.write(record) {
            Ok(()) if self.failing => {
                self.failing = false;
                tracing::info!("journal {}: writing again", self.path.display());
            }
            Ok(()) => {}
            Err(e) if !self.failing => {
                self.failing = true;
                self.dropped += 1;
                tracing::error!("{e} (lines are dropped until writing works again)");
            }
            Err(_) => self.dropped += 1,
        }
    }

    /// Whether the last write failed (lines are being dropped until one succeeds).
    pub fn failing(&self) -> bool {
        self.failing
    }

    /// Lines [`Journal::write_logged`] could not write since the journal opened.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

fn open_append(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    // Never through a link: the daemon writes as root, and a link planted at the journal's path
    // would have it append to a file of someone's choosing. Never waiting (O_NONBLOCK): a FIFO
    // planted there kept the start waiting for a reader, deaf to SIGTERM. And only to a regular
    // file of this daemon's that no one else may write, or a root-owned device (journal-is-ours): a user's empty 0666
    // file at the path took the daemon's records, readable and forgeable by all (review of
    // 2026-11-29).
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let m = f.metadata()?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    // A root-owned character device (/dev/null, /dev/full) is the administrator's choice: no user
    // can make one.
    use std::os::unix::fs::FileTypeExt;
    if m.file_type().is_char_device() && m.uid() == 0 {
        return Ok(f);
    }
    if !m.file_type().is_file() {
        return Err(std::io::Error::other("not a regular file: not trusted; remove it"));
    }
    if m.uid() != me || m.mode() & 0o022 != 0 {
        return Err(std::io::Error::other(format!(
            "owned by uid {} with mode {:o}: not trusted (it must be this daemon's, uid {me}, writable by no one \
             else); remove it or fix its owner and mode",
            m.uid(),
            m.mode() & 0o7777
        )));
    }
    // A second name for the file is a hard link planted at the path (where the kernel lets users
    // link files they do not own, fs.protected_hardlinks = 0): the daemon's lines would go into a
    // root file of someone's choosing (a review of 2026-11-30).
    if m.nlink() != 1 {
        return Err(std::io::Error::other(format!("has {} names (a hard link): not trusted; remove it", m.nlink())));
    }
    Ok(f)
}

/// Now, UTC, as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn rfc3339_now() -> String {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    rfc3339(d.as_millis() as u64)
}

/// Milliseconds since the epoch as RFC 3339 UTC. Days to civil date: the proleptic Gregorian
/// algorithm (era of 400 years = 146097 days), as published by Howard Hinnant ("chrono-compatible
/// low-level date algorithms"); written here from the description.
pub fn rfc3339(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let days = (secs / 86400) as i64;
    let sod = secs % 86400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z", sod / 3600, sod / 60 % 60, sod % 60, unix_ms % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A journal under a directory other users may write in (here 0777, not sticky) is refused
    /// before the file is opened: they could put a link of theirs where root appends (review
    /// helper-37). The same directory made 0700 is taken.
    #[test]
    fn a_journal_directory_others_may_write_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("log");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let path = dir.join("journal.jsonl");
        let Err(e) = Journal::open(&path, 1 << 20) else { panic!("opened under a world-writable directory") };
        assert!(e.to_string().contains("may be written by other users"), "{e}");
        assert!(!path.exists(), "the file was created");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(Journal::open(&path, 1 << 20).is_ok());
    }

    /// An action covering several units carries its other rules as `also_rules`, so a journal
    /// filtered by rule finds it under each; a line of one rule has no such field.
    #[test]
    fn an_action_of_several_rules_lists_the_others() {
        use numapilot_policy::{ActionKind, Reason, TaskRef};
        let mut reason = Reason::new("cpu-follows-memory", "group 1: x; and [stay-current-node] group 2: y");
        reason.also = vec!["stay-current-node".into()];
        let cpus = numapilot_topology::CpuSet::parse_list("0").unwrap();
        let mut action = Action {
            target: TaskRef { pid: 10, tid: None, starttime: 7 },
            kind: ActionKind::SetAffinity { cpus },
            reason,
        };
        let line = |a: &Action| {
            serde_json::to_value(Record::action(3, 1, a, "app", Some(&Outcome::Applied { pages_moved: 0 }), false))
                .unwrap()
        };
        let v = line(&action);
        assert_eq!(v["rule"], "cpu-follows-memory");
        assert_eq!(v["also_rules"], serde_json::json!(["stay-current-node"]));
        action.reason.also.clear();
        assert!(line(&action).get("also_rules").is_none(), "{}", line(&action));
    }

    #[test]
    fn dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        // `date -u -d @951782400` = Tue Feb 29 00:00:00 UTC 2000 (a leap day of a century year).
        assert_eq!(rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
        // `date -u -d @1795316522` = Sun Nov 22 03:02:02 UTC 2026.
        assert_eq!(rfc3339(1_795_316_522_000), "2026-11-22T03:02:02.000Z");
    }

    #[test]
    fn a_journal_path_that_is_a_link_is_refused_and_its_target_untouched() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let path = d.path().join("journal.jsonl");
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        let Err(e) = Journal::open(&path, 1 << 20) else { panic!("opened through a link") };
        assert_eq!(e.cause.raw_os_error(), Some(libc::ELOOP), "{e}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        // A new directory for it is made private.
        use std::os::unix::fs::PermissionsExt as _;
        let fresh = d.path().join("logs/journal.jsonl");
        Journal::open(&fresh, 1 << 20).unwrap();
        assert_eq!(std::fs::metadata(d.path().join("logs")).unwrap().permissions().mode() & 0o777, 0o700);
    }

    /// journal-is-ours: a FIFO planted at the path is refused at once (the start waited for a
    /// reader, deaf to SIGTERM), and so is a file another user owns or may write.
    #[test]
    fn a_journal_path_that_is_a_fifo_or_someone_elses_file_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo.jsonl");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string and mode.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0);
        assert!(Journal::open(&fifo, 1 << 20).is_err(), "a FIFO opened as the journal");
        let theirs = d.path().join("theirs.jsonl");
        std::fs::write(&theirs, "").unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let Err(e) = Journal::open(&theirs, 1 << 20) else { panic!("opened another user's file") };
        assert!(e.to_string().contains("owned by uid 65534"), "{e}");
        let open = d.path().join("open.jsonl");
        std::fs::write(&open, "").unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o666)).unwrap();
        let Err(e) = Journal::open(&open, 1 << 20) else { panic!("opened a world-writable file") };
        assert!(e.to_string().contains("mode 666: not trusted"), "{e}");
        assert_eq!(std::fs::read_to_string(&open).unwrap(), "");
        // A hard link to a root file of someone's choosing: refused, the file untouched.
        let victim = d.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
        let linked = d.path().join("linked.jsonl");
        std::fs::hard_link(&victim, &linked).unwrap();
        let Err(e) = Journal::open(&linked, 1 << 20) else { panic!("opened a hard link") };
        assert!(e.to_string().contains("has 2 names (a hard link): not trusted"), "{e}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    }

    #[test]
    fn a_file_where_the_journals_directory_goes_is_named_as_not_a_directory() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("afile"), "").unwrap();
        let Err(e) = Journal::open(&d.path().join("afile/journal.jsonl"), 1 << 20) else { panic!("opened") };
        assert_eq!(e.cause.raw_os_error(), Some(libc::ENOTDIR), "{e}");
        assert!(e.to_string().contains("afile/journal.jsonl") && e.to_string().contains("Not a directory"), "{e}");
    }
}
