//! The journal: one JSON object per line with the documented fields, rotation to `.1` at the bound.

use numapilot_daemon::journal::{Journal, Record};
use numapilot_daemon::live::RestoreReport;
use numapilot_policy::{Action, ActionKind, Outcome, Reason, TaskRef};
use numapilot_topology::CpuSet;

fn action(pid: u32) -> Action {
    Action {
        target: TaskRef { pid, tid: None, starttime: 4242 },
        kind: ActionKind::SetAffinity { cpus: CpuSet::first_n(4) },
        reason: Reason::new("memory-follows-cpu", "82% of the group's pages on node 1"),
    }
}

#[test]
fn lines_carry_the_action_and_its_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/journal.jsonl");
    let mut j = Journal::open(&path, 1 << 20).unwrap();
    let partial = Outcome::Partial { pages_moved: 10, failed: vec![("EBUSY".into(), 2)] };
    j.write(&Record::action(3, 99, &action(812), "redis-server", Some(&partial), false)).unwrap();
    j.write(&Record::action(4, 100, &action(813), "pg", None, true)).unwrap();
    let refused = Outcome::Refused { message: "excluded by name".into() };
    j.write(&Record::action(4, 100, &action(814), "sshd", Some(&refused), false)).unwrap();
    let report = RestoreReport { restored: 2, gone: 1, inherited: 0, failed: vec!["77: EPERM".into()] };
    j.write(&Record::restore("shutdown (SIGTERM)", &report, false)).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 4);
    let a = &lines[0];
    assert_eq!(a["pid"], 812);
    assert_eq!(a["starttime"], 4242);
    assert_eq!(a["comm"], "redis-server");
    assert_eq!(a["kind"], "set-affinity");
    assert_eq!(a["rule"], "memory-follows-cpu");
    assert_eq!(a["detail"], "82% of the group's pages on node 1");
    assert_eq!(a["outcome"], "partial");
    assert_eq!(a["pages_moved"], 10);
    assert_eq!(a["pages_failed"][0][0], "EBUSY");
    assert_eq!(a["dry_run"], false);
    assert_eq!(a["step"], 3);
    assert_eq!(a["action"]["cpus"], "0-3");
    assert!(a["time"].as_str().unwrap().ends_with('Z'));
    assert_eq!(lines[1]["outcome"], "planned");
    assert_eq!(lines[1]["dry_run"], true);
    assert_eq!(lines[2]["outcome"], "refused");
    assert_eq!(lines[2]["message"], "excluded by name");
    assert_eq!(lines[3]["event"], "restore");
    assert_eq!(lines[3]["outcome"], "partial");
    assert_eq!(lines[3]["message"], "77: EPERM");
    // The journal names processes: private.
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
}

#[test]
fn rotates_at_the_bound_and_keeps_one_old_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.jsonl");
    let max = 4096;
    let mut j = Journal::open(&path, max).unwrap();
    let mut written = 0;
    for i in 0..100 {
        j.write(&Record::action(i, i, &action(1000 + i as u32), "worker", None, true)).unwrap();
        written += 1;
        assert!(std::fs::metadata(&path).unwrap().len() <= max);
    }
    let rotated = j.rotated_path();
    assert_eq!(rotated, dir.path().join("j.jsonl.1"));
    let old = std::fs::read_to_string(&rotated).unwrap();
    let new = std::fs::read_to_string(&path).unwrap();
    assert!(old.len() as u64 <= max);
    // Nothing is lost across the last rotation, lines are whole, and the newest line is last.
    let pids: Vec<u64> = old
        .lines()
        .chain(new.lines())
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(*pids.last().unwrap(), 1000 + written - 1);
    assert!(pids.windows(2).all(|w| w[1] == w[0] + 1), "{pids:?}");
    // Reopening appends to the current file.
    drop(j);
    let before = std::fs::metadata(&path).unwrap().len();
    let mut j = Journal::open(&path, max).unwrap();
    j.write(&Record::action(0, 0, &action(1), "x", None, true)).unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() > before || std::fs::read_to_string(&rotated).unwrap() == new);
}

#[test]
fn a_full_disk_is_an_error_naming_the_file_and_never_fatal() {
    // /dev/full: every write fails with ENOSPC, like a full /var/log.
    let mut j = Journal::open(std::path::Path::new("/dev/full"), 1 << 20).unwrap();
    let e = j.write(&Record::action(1, 1, &action(1), "x", None, true)).unwrap_err();
    assert!(e.to_string().starts_with("journal /dev/full: "), "{e}");
    assert_eq!(e.cause.raw_os_error(), Some(libc_enospc()));
    // The daemon's path logs and carries on.
    for _ in 0..3 {
        j.write_logged(&Record::action(1, 1, &action(1), "x", None, true));
    }
    // Each line lost is counted (status journal_lines_dropped), not only the first logged.
    assert_eq!(j.dropped(), 3);
}

fn libc_enospc() -> i32 {
    28 // ENOSPC on Linux (asm-generic/errno-base.h)
}

/// A rotation whose new file could not be opened left nothing at the path; the next line opens a
/// new file there (renaming the missing file failed every later line for good; review helper-34).
#[test]
fn a_rotation_that_could_not_reopen_is_finished_by_the_next_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let mut j = Journal::open(&path, 400).unwrap();
    for step in 0..3 {
        j.write(&Record::action(step, 1, &action(900), "app", None, true)).unwrap();
    }
    // What the failed rotation left: the file renamed, nothing at the path.
    std::fs::rename(&path, j.rotated_path()).unwrap();
    j.write(&Record::action(9, 1, &action(901), "app", None, true)).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"pid\":901"), "{text}");
}

/// A disk that fills in the middle of a line: the fragment is cut back off, so once there is room
/// again every line of the journal parses (the next line was glued to the fragment).
#[test]
fn a_line_cut_by_a_full_disk_leaves_no_fragment() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let src = std::ffi::CString::new("tmpfs").unwrap();
    let target = std::ffi::CString::new(mnt.to_str().unwrap()).unwrap();
    let opts = std::ffi::CString::new("size=64k,mode=0700").unwrap();
    // SAFETY: mount(2) with valid NUL-terminated strings; undone below.
    let r = unsafe { libc::mount(src.as_ptr(), target.as_ptr(), src.as_ptr(), 0, opts.as_ptr() as *const _) };
    if r != 0 {
        eprintln!("skipped: cannot mount a tmpfs: {}", std::io::Error::last_os_error());
        return;
    }
    struct Unmount(std::ffi::CString);
    impl Drop for Unmount {
        fn drop(&mut self) {
            // SAFETY: umount2 of the mount made above.
            unsafe { libc::umount2(self.0.as_ptr(), libc::MNT_DETACH) };
        }
    }
    let _unmount = Unmount(target);
    // Most of the room taken, then lines until the disk is full.
    let filler = mnt.join("filler");
    std::fs::write(&filler, vec![0u8; 48 << 10]).unwrap();
    let path = mnt.join("journal.jsonl");
    let mut j = Journal::open(&path, 1 << 30).unwrap();
    let long = "x".repeat(300);
    let record = |step| {
        let mut a = action(902);
        a.reason = Reason::new("memory-follows-cpu", long.clone());
        Record::action(step, 1, &a, "app", None, true)
    };
    let mut n = 0;
    while j.write(&record(n)).is_ok() {
        n += 1;
        assert!(n < 10_000, "a 64 KiB file system never filled");
    }
    assert!(n > 0);
    // Room again, and a line after it.
    std::fs::remove_file(&filler).unwrap();
    j.write(&record(n + 1)).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    for (i, line) in text.lines().enumerate() {
        assert!(serde_json::from_str::<serde_json::Value>(line).is_ok(), "line {i} does not parse: {line:.80}");
    }
    assert!(text.lines().count() as u64 > n, "{} lines for {n} written", text.lines().count());
}
