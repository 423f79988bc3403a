//! A whole-process placement that the kernel refuses for one thread changes nothing: the threads
//! set before the refused one are put back. Here the refused thread is one of this process's
//! threads moved alone into a cgroup v1 cpuset of one CPU (v1 takes a thread id in `tasks`), and
//! the placement asks for another CPU: EINVAL for that thread. Its own test binary: the walk runs
//! over this test process's own threads.

use std::path::{Path, PathBuf};

use numapilot_actuate::{sched_getaffinity, set_process_affinity, CpusetHierarchy};
use numapilot_topology::CpuSet;

/// A cpuset cgroup of its own under the v1 root, removed (its tasks sent back to the root) when
/// dropped.
struct Cpuset {
    dir: PathBuf,
    root: PathBuf,
}

impl Drop for Cpuset {
    fn drop(&mut self) {
        let tasks = std::fs::read_to_string(self.dir.join("tasks")).unwrap_or_default();
        for t in tasks.split_whitespace() {
            let _ = std::fs::write(self.root.join("tasks"), t);
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[test]
fn a_refused_thread_leaves_the_process_as_it_was() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: a cpuset cgroup needs root");
        return;
    }
    let Some(h) = CpusetHierarchy::detect(Some(numapilot_actuate::CgroupVersion::V1)) else {
        eprintln!("skipped: no cgroup v1 cpuset hierarchy (a thread alone in a cpuset needs v1)");
        return;
    };
    let me = std::process::id();
    let mine = sched_getaffinity(0).unwrap();
    if mine.len() < 2 {
        eprintln!("skipped: needs two CPUs");
        return;
    }
    let (low, high) = (mine.first().unwrap(), mine.last().unwrap());
    let root = h.mount.clone();
    let cs = Cpuset { dir: root.join(format!("np-refused-{me}")), root: root.clone() };
    std::fs::create_dir(&cs.dir).unwrap();
    let mems = std::fs::read_to_string(root.join("cpuset.mems")).unwrap();
    std::fs::write(cs.dir.join("cpuset.mems"), mems.trim()).unwrap();
    std::fs::write(cs.dir.join("cpuset.cpus"), low.to_string()).unwrap();
    // The refused thread: started last, so listed after this test's own threads.
    let (tx, rx) = std::sync::mpsc::channel();
    let hold = std::sync::Arc::new(std::sync::Barrier::new(2));
    let h2 = hold.clone();
    let t = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        tx.send(unsafe { libc::gettid() } as u32).unwrap();
        h2.wait();
    });
    let tid = rx.recv().unwrap();
    std::fs::write(cs.dir.join("tasks"), tid.to_string()).unwrap();
    assert!(Path::new(&format!("/proc/{me}/task/{tid}")).exists());
    let before: Vec<(u32, CpuSet)> = numapilot_actuate::list_threads(me)
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|t| (t, sched_getaffinity(t as libc::pid_t).unwrap()))
        .collect();
    assert!(before.iter().any(|(t, _)| *t < tid), "a thread is listed before the refused one");
    let want: CpuSet = std::iter::once(high).collect();
    let r = set_process_affinity(me, &want, 8, |_, _| {});
    let after: Vec<(u32, CpuSet)> =
        before.iter().map(|(t, _)| (*t, sched_getaffinity(*t as libc::pid_t).unwrap())).collect();
    // Leave this process as the harness gave it, whatever the outcome.
    for (t, m) in &before {
        let _ = numapilot_actuate::sched_setaffinity(*t as libc::pid_t, m);
    }
    hold.wait();
    t.join().unwrap();
    drop(cs);
    let e = r.expect_err("the thread in a cpuset without the CPU asked for is refused");
    assert_eq!(e.errno(), Some(libc::EINVAL), "{e}");
    let m = e.to_string();
    assert!(m.contains(&format!("pid={tid}")) && m.contains(&format!("process {me}")), "names thread and process: {m}");
    assert!(m.contains(&format!("cpus={high}")), "names the mask: {m}");
    assert_eq!(after, before, "a refused placement left threads on the new mask");
}
