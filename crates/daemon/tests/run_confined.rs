//! A daemon an operator confined to one node (its own cpuset: CPU 0, memory node 0) on a machine
//! of two still has every node to place on: the kernel holds a placed thread to its own
//! process's cpuset, not the daemon's. This test process is the daemon: it moves itself into a
//! cgroup v1 cpuset of CPU 0 and node 0 (so this file holds one test), runs the loop with the
//! live host on a two-node view of this machine's CPUs, as a dry run, and reads the start's
//! verdict. Skipped without root, a v1 cpuset mount or two CPUs.

use std::path::{Path, PathBuf};

use numapilot_daemon::live::{LiveHost, LiveOptions};
use numapilot_daemon::run::{self, Command};
use numapilot_topology::Topology;

mod common;

const CPUSET: &str = "/sys/fs/cgroup/cpuset";

/// This process in a cpuset cgroup of its own while it lives; put back in the root and the
/// cgroup removed when dropped.
struct Confined(PathBuf);

impl Confined {
    fn to_cpu_0() -> Option<Confined> {
        let root = Path::new(CPUSET);
        if !root.join("cpuset.cpus").exists() || unsafe { libc::geteuid() } != 0 {
            return None;
        }
        let dir = root.join(format!("numapilot-confined-{}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let c = Confined(dir);
        std::fs::write(c.0.join("cpuset.cpus"), "0").ok()?;
        std::fs::write(c.0.join("cpuset.mems"), "0").ok()?;
        std::fs::write(c.0.join("cgroup.procs"), std::process::id().to_string()).ok()?;
        Some(c)
    }
}

impl Drop for Confined {
    fn drop(&mut self) {
        let _ = std::fs::write(Path::new(CPUSET).join("cgroup.procs"), std::process::id().to_string());
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Confined to CPU 0 and node 0 of a two-node view: the start says nothing of nothing to place,
/// and the status lists both nodes. With the reach cut to the daemon's own cpuset the start
/// said "the daemon's cpuset allows it one node (node 0 of nodes 0-1): nothing to place".
/// Pages are another matter: the kernel moves them only to the caller's allowed memory nodes, so
/// the start warns, naming node 1 as one no page can be moved to, and status says the same.
#[test]
fn a_daemon_confined_to_one_node_still_places_on_both() {
    let n = Topology::from_sysfs(Path::new("/")).unwrap().online_cpus().len() as u32;
    if n < 2 || n % 2 != 0 {
        eprintln!("skipped: {n} CPUs do not split into two nodes");
        return;
    }
    let Some(_confined) = Confined::to_cpu_0() else {
        eprintln!("skipped: not root, or no cgroup v1 cpuset to confine this process in");
        return;
    };
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    assert!(status.contains("Cpus_allowed_list:\t0\n"), "not confined: {status}");
    let two = Topology::uniform(2, n / 2, 4 << 20, 20);
    let dir = tempfile::tempdir().unwrap();
    let (setup, socket, _) = common::setup(dir.path(), "interval_ms = 200\nmetrics = \"off\"\ndry_run = true\n");
    let opts = LiveOptions { state_path: dir.path().join("live-state.json"), ..LiveOptions::default() };
    let (host, _) = LiveHost::open(two.clone(), opts).unwrap();
    let (handle, rx) = run::command_pipe().unwrap();
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let said = lines.clone();
    let t = std::thread::spawn(move || {
        run::serve(setup, two, host, None, Some(rx), &mut |l| said.lock().unwrap().push(l.to_string()))
    });
    let t0 = std::time::Instant::now();
    let first = loop {
        if let Ok(r) = numapilot_daemon::control::request(&socket, &numapilot_daemon::control::Request::Status) {
            let s = r.status.unwrap();
            if !s.placeable_nodes.is_empty() {
                break s;
            }
        }
        assert!(t0.elapsed() < std::time::Duration::from_secs(60), "the loop never answered");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    handle.send(Command::Stop).unwrap();
    t.join().unwrap().unwrap();
    let lines = lines.lock().unwrap().clone();
    assert!(!lines.iter().any(|l| l.contains("nothing to place")), "{lines:#?}");
    assert!(lines.iter().any(|l| l.starts_with("numapilot: started")), "{lines:#?}");
    let warned = lines.iter().filter(|l| l.contains("pages cannot be moved to memory nodes 1:")).collect::<Vec<_>>();
    assert_eq!(warned.len(), 1, "{lines:#?}");
    assert!(warned[0].contains("allows it memory nodes 0 of the machine's 0-1"), "{}", warned[0]);
    assert!(warned[0].contains("Allow the daemon every memory node"), "{}", warned[0]);
    assert_eq!(first.own_memory_nodes, "0", "{}", first.render());
    assert_eq!(first.pages_unmovable_to, "1", "{}", first.render());
    assert!(first.render().contains("pages cannot be moved to memory nodes 1: "), "{}", first.render());
    let json = serde_json::to_value(&first).unwrap();
    assert_eq!(json["pages_unmovable_to"], "1", "{json}");
    // The start's status, when read before a step could read the machine again (a view of two
    // nodes on a one-node machine is one node to the live host's hotplug watch).
    if first.steps == 0 {
        assert_eq!(first.placeable_nodes, "0-1", "{}", first.render());
        assert_eq!(first.nothing_to_place, None, "{}", first.render());
    }
}
