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
    let (host, _) = LiveHost::open(topo, opts).unwrap();
    println!("pid {}", std::process::id());
    println!("refusal {}", host.refusal().unwrap_or("none"));
    match ProcEvents::open() {
        Ok(_) => println!("events open"),
        Err(e) => println!("events {e}"),
    }
}

fn report(under: &[&str]) -> (String, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut k =
        Kid::spawn_under(under, "report", &[("NP_STATE", dir.path().join("state.json").to_string_lossy().into())]);
    (k.line("pid"), k.line("refusal"), k.line("events"))
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
