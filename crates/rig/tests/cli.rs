//! `numapilot-rig race`'s arguments: a bad case filter names the bad word, exits non-zero and boots nothing.

use std::process::Command;

fn race(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_numapilot-rig")).arg("race").args(args).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn unknown_tests_and_balancers_are_refused_by_name() {
    let (rc, err) = race(&["--tests", "numa01,numa03"]);
    assert_ne!(rc, 0);
    assert!(err.contains("--tests: unknown test \"numa03\""), "{err}");
    let (rc, err) = race(&["--balancers", "kernel,autonuma"]);
    assert_ne!(rc, 0);
    assert!(err.contains("--balancers: unknown balancer \"autonuma\""), "{err}");
    assert!(!err.contains("rig: kernel"), "nothing was prepared: {err}");
    let (rc, err) = race(&["--tests"]);
    assert_ne!(rc, 0);
    assert!(err.contains("--tests needs a list"), "{err}");
}
