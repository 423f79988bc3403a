//! The command line as a user mistypes it: a bad value is refused naming the option it was given
//! to, whatever the subcommand.

mod cli_common;
use cli_common::{numapilot, stderr, stdout};

/// A negative number given to an option is that option's value, refused by the option's own check
/// or its type, naming the option; clap took it for an option of its own and said only
/// "unexpected argument '-1' found" (`advise --cpus -1`, `bench numa01 --seconds -1`, ...). None of
/// these runs anything: each is refused before its command starts.
#[test]
fn a_negative_number_given_to_an_option_is_refused_naming_the_option() {
    let sim = ["sim", "--machine", "autonuma-2s12c-24g", "--workload", "numa02"];
    let with = |base: &[&'static str], more: &[&'static str]| -> Vec<&'static str> { [base, more].concat() };
    // (command line, the option it must name, our own check's words when it is ours and not clap's)
    let cases: Vec<(Vec<&str>, &str, Option<&str>)> = vec![
        (vec!["advise", "--cpus", "-1"], "--cpus -1", Some("must be a finite number >= 0")),
        (vec!["advise", "--cpus", "1", "--window-ms", "-100"], "--window-ms", None),
        (vec!["advise", "--cpus", "1", "--pid", "-5"], "--pid", None),
        (with(&sim, &["--duration", "-1"]), "--duration", Some("not -1")),
        (with(&sim, &["--seeds", "-2"]), "--seeds", None),
        (vec!["bench", "numa01", "--seconds", "-1"], "--seconds", Some("got -1")),
        (vec!["bench", "numa01", "--interval", "-0.5"], "--interval", Some("got -0.5")),
        (vec!["bench", "numa01", "--mb", "-64"], "--mb", None),
        (vec!["bench", "numa01", "--force-node", "-1"], "--force-node", None),
        (vec!["stat", "--threads", "--interval", "-1"], "--interval", None),
        (vec!["replay", "--window-ms", "-1", "perf.txt"], "--window-ms", None),
        (vec!["daemon", "--check", "--interval-ms", "-1"], "--interval-ms", None),
        (vec!["daemon", "--check", "--exclude-pid", "-1"], "--exclude-pid", None),
    ];
    for (args, option, ours) in cases {
        let o = numapilot(&args);
        let err = stderr(&o);
        assert!(!o.status.success(), "{args:?} was taken:\n{err}");
        assert!(!err.contains("unexpected argument"), "{args:?}: {err}");
        assert!(err.contains(option), "{args:?}: the message does not name {option}: {err}");
        if let Some(words) = ours {
            assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
            assert!(err.starts_with("numapilot: ") && err.contains(words), "{args:?}: {err}");
        }
    }
    // A monitoring check says UNKNOWN on stdout, naming the option, with the plugin's status 3.
    let o = numapilot(&["status", "--check", "--timeout", "-1"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("UNKNOWN: --timeout -1:"), "{}", stdout(&o));
}

/// `explain`'s PID operand: a negative number, 0 or a word is said to be no process id, naming it
/// (clap said only "unexpected argument '-1' found" for `explain -1`); nothing is asked of a
/// daemon. `stat -1` stays an unknown option, as numastat has it.
#[test]
fn explain_says_a_negative_pid_is_no_process_id() {
    for (pid, why) in [
        ("-1", "expected a positive integer"),
        ("-42", "expected a positive integer"),
        ("0", "expected a positive integer"),
        ("x", "expected a positive integer"),
        ("4294967296", "beyond any process id"),
    ] {
        let o = numapilot(&["explain", pid, "--socket", "/nonexistent/numapilot.sock"]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "explain {pid}: {err}");
        assert!(!err.contains("unexpected argument"), "explain {pid}: {err}");
        assert!(
            err.contains(&format!("invalid value '{pid}' for '<PID>': not a process id: {why}")),
            "explain {pid}: {err}"
        );
        assert_eq!(err.matches(&format!("'{pid}'")).count(), 1, "explain {pid}: the value said twice: {err}");
        assert!(!err.contains("daemon"), "explain {pid}: asked a daemon: {err}");
    }
    let o = numapilot(&["stat", "-1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unexpected argument '-1'"), "{}", stderr(&o));
}
