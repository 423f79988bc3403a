//! `Reader::read_processes_since`: a thread whose schedstat has not moved since the previous read
//! keeps its previous stat (the file is not read), a thread that ran is read again, the leader is
//! always read, and a previous read of another process (or one without schedstat information) is
//! ignored. On a copy of the host fixture's process 9311 (threads 9311, 9313, 9314), whose files
//! the test then edits: an edited stat shows up only where the file was read.
//!
//! Expected, worked out by hand (utime is stat field 14; the fixture's is 0 for every thread):
//!
//! ```text
//!   read 1 (full)            9311 utime 0, 9313 utime 0, 9314 utime 0
//!   edit every stat to utime 777, leave schedstat
//!   read 2 since read 1      9311 777 (leader: read), 9313 0 (kept), 9314 0 (kept)
//!   edit 9313's schedstat (run time + 1 ns)
//!   read 3 since read 2      9311 777, 9313 777 (ran: read), 9314 0 (kept)
//!   read 4 since read 3, but read 3 relabelled with another start time: all 777 (full read)
//!   read 5 full              all 777
//! ```

use std::path::{Path, PathBuf};

use numapilot_observe::{ProcessSample, ReadOptions, Reader};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// Sets stat field `n` (1-based, as proc(5) numbers them; n >= 3) of the file at `path`.
fn set_stat_field(path: &Path, n: usize, value: u64) {
    let text = std::fs::read_to_string(path).unwrap();
    let close = text.rfind(')').unwrap();
    let (head, rest) = text.split_at(close + 2);
    let mut f: Vec<String> = rest.trim_end().split(' ').map(String::from).collect();
    f[n - 3] = value.to_string();
    std::fs::write(path, format!("{head}{}\n", f.join(" "))).unwrap();
}

fn utimes(p: &ProcessSample) -> Vec<(u32, u64)> {
    p.threads.iter().map(|t| (t.tid, t.stat.utime)).collect()
}

struct Root(PathBuf);

impl Drop for Root {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn idle_threads_keep_their_stat_and_threads_that_ran_are_read() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/host-6.18");
    let root = Root(std::env::temp_dir().join(format!("numapilot-since-{}", std::process::id())));
    copy_dir(&fixture.join("proc/9311"), &root.0.join("proc/9311"));
    let pdir = root.0.join("proc/9311");
    let reader = Reader::with_options(&root.0, ReadOptions { numa_maps: false, ..ReadOptions::default() });

    let r1 = reader.read_processes(&[9311]).unwrap().remove(0);
    assert_eq!(utimes(&r1), vec![(9311, 0), (9313, 0), (9314, 0)]);

    for tid in [9311, 9313, 9314] {
        set_stat_field(&pdir.join(format!("task/{tid}/stat")), 14, 777);
    }
    let r2 = reader.read_processes_since(&[9311], &[Some(&r1)]).unwrap().remove(0);
    assert_eq!(utimes(&r2), vec![(9311, 777), (9313, 0), (9314, 0)], "idle threads' stat kept, the leader read");
    assert_eq!(r2.threads[1].schedstat, r1.threads[1].schedstat);

    let ss = pdir.join("task/9313/schedstat");
    let text = std::fs::read_to_string(&ss).unwrap();
    let mut f: Vec<u64> = text.split_whitespace().map(|v| v.parse().unwrap()).collect();
    f[0] += 1;
    std::fs::write(&ss, format!("{} {} {}\n", f[0], f[1], f[2])).unwrap();
    let r3 = reader.read_processes_since(&[9311], &[Some(&r2)]).unwrap().remove(0);
    assert_eq!(utimes(&r3), vec![(9311, 777), (9313, 777), (9314, 0)], "the thread that ran is read");
    assert_eq!(r3.threads[1].schedstat.unwrap().run_ns, f[0]);

    let mut other = r3.clone();
    other.starttime += 1;
    let r4 = reader.read_processes_since(&[9311], &[Some(&other)]).unwrap().remove(0);
    assert_eq!(utimes(&r4), vec![(9311, 777), (9313, 777), (9314, 777)], "another process's read is ignored");

    let r5 = reader.read_processes(&[9311]).unwrap().remove(0);
    assert_eq!(utimes(&r5), utimes(&r4));
}

/// A previous schedstat of `0 0 0` (a kernel that collects no schedstats prints it forever)
/// tells nothing: the thread is read in full.
#[test]
fn a_zero_schedstat_never_keeps_a_stat() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/host-6.18");
    let root = Root(std::env::temp_dir().join(format!("numapilot-since-zero-{}", std::process::id())));
    copy_dir(&fixture.join("proc/9311"), &root.0.join("proc/9311"));
    let pdir = root.0.join("proc/9311");
    for tid in [9311, 9313, 9314] {
        std::fs::write(pdir.join(format!("task/{tid}/schedstat")), "0 0 0\n").unwrap();
    }
    let reader = Reader::with_options(&root.0, ReadOptions { numa_maps: false, ..ReadOptions::default() });
    let r1 = reader.read_processes(&[9311]).unwrap().remove(0);
    for tid in [9311, 9313, 9314] {
        set_stat_field(&pdir.join(format!("task/{tid}/stat")), 14, 5);
    }
    let r2 = reader.read_processes_since(&[9311], &[Some(&r1)]).unwrap().remove(0);
    assert_eq!(utimes(&r2), vec![(9311, 5), (9313, 5), (9314, 5)]);
}

/// `read_processes_skipping`: a process whose file does not parse is left out with its error while
/// the others are read; the strict reads fail on it, as the tools want (a format they do not know
/// is an error, not a missing row). Two processes of the host fixture, 9311's stat truncated.
#[test]
fn a_process_whose_file_does_not_parse_is_skipped_not_the_read() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/host-6.18");
    let root = Root(std::env::temp_dir().join(format!("numapilot-since-skip-{}", std::process::id())));
    for pid in ["9311", "9319"] {
        copy_dir(&fixture.join("proc").join(pid), &root.0.join("proc").join(pid));
    }
    std::fs::write(root.0.join("proc/9311/task/9313/stat"), "9313 (a) R 1\n").unwrap();
    let reader = Reader::with_options(&root.0, ReadOptions { numa_maps: false, ..ReadOptions::default() });
    let err = reader.read_processes(&[9311, 9319]).unwrap_err().to_string();
    assert!(err.contains("9313/stat"), "{err}");
    let (read, skipped) = reader.read_processes_skipping(&[9311, 9319], &[]).unwrap();
    assert_eq!(read.iter().map(|p| p.pid).collect::<Vec<_>>(), [9319]);
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].pid, 9311);
    assert!(skipped[0].error.to_string().contains("9313/stat"), "{}", skipped[0].error);
    // An I/O error is about the system, not one process: still the answer.
    let gone = root.0.join("proc/9319/task");
    std::fs::remove_dir_all(&gone).unwrap();
    std::fs::write(&gone, "").unwrap();
    assert!(reader.read_processes_skipping(&[9311, 9319], &[]).is_err());
}
