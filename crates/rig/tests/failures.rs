//! The rig's own failure paths, with real guests: a guest that dies and a guest that hangs must each give an error
//! that says so and shows the end of the guest's console, and must never be taken for a successful run, and so must
//! a results channel that breaks the protocol; and the channel must not lose a record's tail when the guest is busy.
//! Skipped (with a message) unless `NUMAPILOT_RIG=1`, like the guest tests.

use std::sync::OnceLock;
use std::time::Duration;

use numapilot_rig::{GuestSpec, Rig, RigError, RigOptions};

fn rig() -> Option<&'static Rig> {
    if std::env::var("NUMAPILOT_RIG").map_or(true, |v| v != "1") {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "rig failure tests SKIPPED: set NUMAPILOT_RIG=1 to boot QEMU guests");
        return None;
    }
    static RIG: OnceLock<Result<Rig, String>> = OnceLock::new();
    Some(
        RIG.get_or_init(|| Rig::prepare(&RigOptions::default()).map(|(r, _)| r).map_err(|e| e.to_string()))
            .as_ref()
            .unwrap_or_else(|e| panic!("rig could not be prepared: {e}")),
    )
}

/// The kernel panics mid-scenario (sysrq crash): QEMU exits (panic=-1 reboots, -no-reboot stops), no DONE marker.
#[test]
fn guest_that_panics_is_an_error_with_the_console_tail() {
    let Some(rig) = rig() else { return };
    let scenario = "rig_run before echo still-alive\necho c >/proc/sysrq-trigger\nrig_run after echo unreachable\n";
    let err = rig.boot(&GuestSpec::two_node(), "panic", scenario, &[]).unwrap_err();
    match &err {
        RigError::GuestFailed { reason, console_tail, .. } => {
            assert!(reason.contains("the scenario never finished"), "{reason}");
            assert!(console_tail.contains("sysrq") && console_tail.contains("Kernel panic"), "{console_tail}");
        }
        other => panic!("expected GuestFailed, got {other}"),
    }
}

/// A scenario that never ends: the guest is killed at its timeout and the error carries what the console showed.
#[test]
fn guest_that_hangs_is_killed_at_its_timeout() {
    let Some(rig) = rig() else { return };
    let mut spec = GuestSpec::two_node();
    spec.timeout = Duration::from_secs(25);
    let scenario = "echo hanging-on-purpose\nwhile :; do sleep 1; done\n";
    match rig.boot(&spec, "hang", scenario, &[]).unwrap_err() {
        RigError::Timeout { timeout_s, console_tail, .. } => {
            assert_eq!(timeout_s, 25);
            assert!(console_tail.contains("hanging-on-purpose"), "{console_tail}");
        }
        other => panic!("expected Timeout, got {other}"),
    }
}

/// A results channel that breaks the protocol (here a stray line between records) fails the run
/// with the line, its number and the console's tail, which shows what the scenario did around it.
#[test]
fn broken_results_are_an_error_with_the_console_tail() {
    let Some(rig) = rig() else { return };
    let scenario = "rig_run before echo ok\necho printed-before-the-stray-line\necho stray >\"$RIG_OUT\"\n\
                    rig_run after echo ok\n";
    match rig.boot(&GuestSpec::two_node(), "broken", scenario, &[]).unwrap_err() {
        RigError::GuestFailed { reason, console_tail, .. } => {
            assert!(reason.contains("results channel line") && reason.contains("\"stray\""), "{reason}");
            assert!(console_tail.contains("printed-before-the-stray-line"), "{console_tail}");
        }
        other => panic!("expected GuestFailed, got {other}"),
    }
}

/// An invalid spec is refused before QEMU starts, naming the field.
#[test]
fn invalid_spec_is_refused_before_boot() {
    let Some(rig) = rig() else { return };
    let mut spec = GuestSpec::two_node();
    spec.distances = Some(vec![vec![10, 21], vec![21, 12]]);
    let err = rig.boot(&spec, "bad", "", &[]).unwrap_err().to_string();
    assert!(err.contains("distances[1][1]"), "{err}");
}

/// Records sent while the scenario's shell is signalled without pause (as SIGCHLD from churning children signals it)
/// all arrive whole, because the guest's PID 1 holds the results channel open, so no writer's close is the serial
/// port's last and none drains (or, failing to drain in time, discards) what is queued. Before init held it, a CI run
/// lost the churn record's "NPRIG END" line (rig/guest/init); this scenario lost END lines (1 or 2 of its 200 records)
/// in two of four runs then, and none in eight runs since. The record count is a rate test, not a proof: the held
/// channel and the scenario's own fds are checked exactly.
#[test]
fn results_survive_a_signalled_scenario_shell() {
    let Some(rig) = rig() else { return };
    const RECORDS: usize = 200;
    let scenario = format!(
        "rig_run init-fds ls -l /proc/1/fd\n\
         rig_run own-fds ls -l /proc/$$/fd\n\
         head -c 2048 /dev/urandom >/tmp/.x\n\
         : >/tmp/.none\n\
         sh -c \"while kill -CHLD $$ 2>/dev/null; do :; done\" &\n\
         sig=$!\n\
         i=0\n\
         while [ $i -lt {RECORDS} ]; do rig_send \"r$i\" 0 /tmp/.x /tmp/.none; i=$((i + 1)); done\n\
         kill $sig\n\
         wait\n\
         rig_file payload /tmp/.x\n"
    );
    let run = rig.boot(&GuestSpec::two_node(), "channel", &scenario, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(run.scenario_rc, 0);
    let text = |name: &str| {
        let s = run.section(name).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.rc, 0, "{name}: {}", s.stderr());
        s.out.clone()
    };
    // `ls -l /proc/PID/fd` lines end "N -> TARGET"; ash keeps init's fd 3 on a saved, close-on-exec fd while the
    // scenario runs with `3>&-`, so the number is not checked, only that the port is held and not passed on.
    let holds = |name: &str| {
        let t = String::from_utf8_lossy(&text(name)).into_owned();
        (t.lines().any(|l| l.ends_with("-> /dev/ttyS1")), t)
    };
    let (held, fds) = holds("init-fds");
    assert!(held, "PID 1 does not hold the results channel: {fds}");
    let (inherited, fds) = holds("own-fds");
    assert!(!inherited, "the scenario's shell inherited the results channel: {fds}");
    let payload = text("payload");
    assert_eq!(payload.len(), 2048);
    for i in 0..RECORDS {
        assert_eq!(text(&format!("r{i}")), payload, "record r{i}");
    }
}
