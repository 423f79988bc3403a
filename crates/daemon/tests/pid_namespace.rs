//! The daemon in a pid namespace of its own, on the running kernel (`unshare --pid --fork`, as a
//! container runtime starts one): with the host's /proc it would read one numbering of pids and
//! act on another, so it changes nothing; with a /proc of its own it acts. In both, the proc
//! connector (which serves only the initial pid namespace, silently) is reported unavailable
//! instead of being waited on. The child is this test binary run again with
//! `NP_PIDNS_CHILD=report` under `unshare`, printing what the live host and the connector said.

use numapilot_daemon::live::{LiveHost, LiveOptions};
use numapilot_observe::proc_events::ProcEvents;
use numapilot_topology::Topology;

mod kid;
use kid::Kid;

/// The variable that starts this binary as a child (`kid::Kid::spawn`).
const CHILD_VAR: &str = "NP_PIDNS_CHILD";

/// The children's work (not a test: ignored, and a no-op without the environment variable).
#[test]
#[ignore]
fn child_entry() {
    let Ok(mode) = std::env::var(CHILD_VAR) else { return };
    assert_eq!(mode, "report");
    let state = std::env::var("NP_STATE").unwrap();
    let topo = Topology::from_sysfs(std::path::Path::new("/")).unwrap();
    let opts = LiveOptions { state_path: state.into(), ..LiveOptions::default() };
    println!("pid {}", std::process::id());
    match LiveHost::open(topo, opts) {
        Ok((host, _)) => println!("refusal {}", host.refusal().unwrap_or("none")),
        Err(e) => println!("refusal (not opened) {e}"),
    }
    match ProcEvents::open() {
        Ok(_) => println!("events open"),
        Err(e) => println!("events {e}"),
    }
}

fn report(under: &[&str]) -> (String, String, String) {
    let dir = tempfile::tempdir().unwrap();
    report_with(under, &dir.path().join("state.json"))
}

fn report_with(under: &[&str], state: &std::path::Path) -> (String, String, String) {
    let mut k = Kid::spawn_under(under, "report", &[("NP_STATE", state.to_string_lossy().into())]);
    (k.line("pid"), k.line("refusal"), k.line("events"))
}

/// A state file left by a daemon of the initial namespace (a crash), naming a live process it
/// placed on its first CPU: a `sleep` of this test, on record with every online CPU as its
/// original. Returns the sleeper, the file and the file's bytes.
fn placed_on_record(dir: &std::path::Path) -> (std::process::Child, std::path::PathBuf, String) {
    use numapilot_daemon::live::state::{self, write_atomic, ProcessOriginal, StateFile, STATE_VERSION};
    let online = Topology::from_sysfs(std::path::Path::new("/")).unwrap().online_cpus();
    let first: numapilot_topology::CpuSet = std::iter::once(online.first().unwrap()).collect();
    let sleeper = std::process::Command::new("sleep").arg("600").spawn().unwrap();
    let pid = sleeper.id();
    numapilot_actuate::sched_setaffinity(pid as libc::pid_t, &first).unwrap();
    let rec = ProcessOriginal {
        pid,
        starttime: numapilot_daemon::live::select::read_starttime(pid).unwrap(),
        comm: "sleep".into(),
        default_cpus: online.to_list(),
        threads: Default::default(),
        cpuset: None,
        set_cpus: vec![first.to_list()],
        cpuset_cpus: None,
        cpuset_declined: false,
    };
    let path = dir.join("state.json");
    let file = StateFile {
        version: STATE_VERSION,
        boot_id: state::boot_id(),
        pid_ns: state::pid_namespace(),
        processes: vec![rec],
    };
    write_atomic(&path, &file).unwrap();
    let bytes = std::fs::read_to_string(&path).unwrap();
    (sleeper, path, bytes)
}

/// Crash recovery in a pid namespace of its own is not tried: with the host's /proc it would
/// read the host's start times and act on this namespace's pids; with a /proc of its own every
/// record reads as gone. Either way the file was emptied (the records lost for the host daemon's
/// next start) before the checks that make the daemon change nothing (review helper-37). Now the
/// file and the placed process are left as they are: with the host's /proc the daemon starts
/// changing nothing; with its own /proc it refuses to start on records of another namespace.
#[test]
fn crash_records_of_another_namespace_are_left_as_they_are() {
    let online = Topology::from_sysfs(std::path::Path::new("/")).unwrap().online_cpus();
    if online.len() < 2 {
        eprintln!("skipped: needs two CPUs");
        return;
    }
    for (under, expect) in [
        (&["unshare", "--pid", "--fork", "--kill-child"][..], "belongs to another pid namespace"),
        (&["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"][..], "written in another pid namespace"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (mut sleeper, path, bytes) = placed_on_record(dir.path());
        let mask_before = numapilot_actuate::sched_getaffinity(sleeper.id() as libc::pid_t).unwrap();
        let (_, refusal, _) = report_with(under, &path);
        let mask_after = numapilot_actuate::sched_getaffinity(sleeper.id() as libc::pid_t).unwrap();
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        assert!(refusal.contains(expect), "{under:?}: {refusal}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), bytes, "{under:?}: the state file was changed");
        assert_eq!(mask_after, mask_before, "{under:?}: the placed process was changed");
    }
}

#[test]
fn with_the_hosts_proc_nothing_is_changed_and_the_connector_is_not_waited_on() {
    let (pid, refusal, events) = report(&["unshare", "--pid", "--fork", "--kill-child"]);
    assert_eq!(pid, "1", "the child is its namespace's first process");
    assert!(
        refusal.contains("belongs to another pid namespace") && refusal.contains("changes no process"),
        "{refusal}"
    );
    assert!(events.contains("initial pid and user namespaces"), "{events}");
}

#[test]
fn with_a_proc_of_its_own_it_acts_but_the_connector_is_not_waited_on() {
    let (pid, refusal, events) = report(&["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]);
    assert_eq!(pid, "1");
    assert_eq!(refusal, "none");
    assert!(events.contains("initial pid and user namespaces"), "{events}");
}

/// In the initial namespace (this test process) the connector proves itself and opens.
#[test]
fn in_the_initial_namespace_the_connector_opens() {
    ProcEvents::open().expect("the proc connector as root in the initial namespaces");
}
