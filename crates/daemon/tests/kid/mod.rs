//! Children for the tests that act on real processes (`live.rs`, `restore_affinity.rs`): the test
//! binary run again with the environment variable `crate::CHILD_VAR` set to a mode, which the
//! binary's ignored `child_entry` test reads and carries out (sleep, pin itself, spawn threads on
//! cue, ...), so each child does exactly what its test needs. A child is killed and reaped when
//! its `Kid` is dropped, so a failing test leaves none behind. Also the cpuset cgroups those tests
//! confine their children in (`TestCpuset`).

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};

use numapilot_actuate::{sched_getaffinity, CpusetHierarchy};
use numapilot_daemon::live::select::read_starttime;
use numapilot_policy::TaskRef;
use numapilot_topology::CpuSet;

/// A child process of the test binary, and its standard output.
pub struct Kid {
    pub child: Child,
    out: BufReader<ChildStdout>,
}

impl Kid {
    /// Starts the binary's `child_entry` in `mode`, with `env` added to its environment.
    pub fn spawn(mode: &str, env: &[(&str, String)]) -> Kid {
        Self::spawn_under(&[], mode, env)
    }

    /// [`Kid::spawn`] run by the command `under` (e.g. `unshare --pid --fork`), which runs the
    /// binary with its arguments.
    pub fn spawn_under(under: &[&str], mode: &str, env: &[(&str, String)]) -> Kid {
        let exe = std::env::current_exe().unwrap();
        let mut cmd = match under.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        cmd.args(["--exact", "child_entry", "--ignored", "--nocapture", "--test-threads=1", "-q"])
            .env(crate::CHILD_VAR, mode)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        Kid { child, out }
    }

    /// The next line the child prints that starts with `tag`, without the tag.
    pub fn line(&mut self, tag: &str) -> String {
        loop {
            let mut l = String::new();
            assert!(self.out.read_line(&mut l).unwrap() > 0, "child exited before printing {tag}");
            if let Some(rest) = l.trim_end().strip_prefix(tag) {
                return rest.trim().to_string();
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The whole process, identified by its start time now.
    pub fn target(&self) -> TaskRef {
        TaskRef { pid: self.pid(), tid: None, starttime: read_starttime(self.pid()).unwrap() }
    }

    pub fn kill(self) {
        drop(self);
    }
}

/// A failing test leaves no child behind (some spin: left running they load the shared machine).
/// `Child::kill` after `wait` signals nothing, so a reused pid is never hit.
impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sleeps until killed (a child's last act).
pub fn sleep_forever() -> ! {
    loop {
        std::thread::sleep(std::time::Duration::from_secs(600));
    }
}

/// Waits until the file `{base}{n}` exists (a child's cue from its test).
pub fn wait_flag(base: &str, n: u32) {
    let flag = PathBuf::from(format!("{base}{n}"));
    while !flag.exists() {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// The host's cpuset hierarchy for the cpuset tests; `None` (said) on a host without one. With
/// `NUMAPILOT_REQUIRE_CPUSET=1` (set by scripts/test.sh: CI's host mounts one) a host without one
/// fails the test instead: a `detect` that regressed to `None` passed every cpuset test silently
/// (review helper-63).
pub fn cpusets(test: &str) -> Option<CpusetHierarchy> {
    let h = CpusetHierarchy::detect(None);
    if h.is_none() {
        if std::env::var_os("NUMAPILOT_REQUIRE_CPUSET").is_some_and(|v| v == "1") {
            panic!("{test}: no cpuset hierarchy found, and NUMAPILOT_REQUIRE_CPUSET=1");
        }
        eprintln!("{test}: skipped, no cpuset hierarchy on this host");
    }
    h
}

/// A cgroup of the host's cpuset hierarchy made for one test, removed (after its processes are
/// gone) when dropped.
pub struct TestCpuset(pub PathBuf);

impl TestCpuset {
    /// A cgroup of CPUs `cpus` and the root's memory nodes under `h`'s mount.
    pub fn make(h: &CpusetHierarchy, name: &str, cpus: &CpuSet) -> TestCpuset {
        let dir = h.mount.join(format!("{name}-{}", std::process::id()));
        if h.version == numapilot_actuate::CgroupVersion::V2 {
            let _ = std::fs::write(h.mount.join("cgroup.subtree_control"), "+cpuset");
        }
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).unwrap();
        let me = TestCpuset(dir);
        let mems = ["cpuset.mems.effective", "cpuset.effective_mems", "cpuset.mems"]
            .iter()
            .find_map(|f| std::fs::read_to_string(h.mount.join(f)).ok().filter(|t| !t.trim().is_empty()))
            .expect("the root cpuset's memory nodes");
        std::fs::write(me.0.join("cpuset.mems"), mems.trim()).unwrap();
        me.cpus(cpus);
        me
    }

    /// Sets its CPUs.
    pub fn cpus(&self, cpus: &CpuSet) {
        std::fs::write(self.0.join("cpuset.cpus"), cpus.to_list()).unwrap();
    }

    /// Moves process `pid` into it.
    pub fn enter(&self, pid: u32) {
        std::fs::write(self.0.join("cgroup.procs"), pid.to_string()).unwrap();
    }
}

impl Drop for TestCpuset {
    fn drop(&mut self) {
        for _ in 0..100 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// Every thread of `pid` with its CPU mask now.
pub fn masks(pid: u32) -> Vec<(u32, CpuSet)> {
    numapilot_actuate::list_threads(pid)
        .unwrap()
        .unwrap()
        .into_iter()
        .filter_map(|t| sched_getaffinity(t as i32).ok().map(|m| (t, m)))
        .collect()
}

/// Polls `f` every 5 ms until it holds; fails after 60 s, saying it timed out waiting for `what`
/// (a bound for a loaded machine, where a child can wait seconds for a CPU; never the property
/// under test).
pub fn until(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = std::time::Instant::now();
    while !f() {
        assert!(t0.elapsed() < std::time::Duration::from_secs(60), "timed out after 60 s waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}
