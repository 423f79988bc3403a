//! What the CLI tests share: running the built `numapilot` binary and reading its output.
//! (Each test file uses some of it.)
#![allow(dead_code)]

use std::process::{Command, Output};

/// Runs the built binary with `args` and waits for it.
pub fn numapilot(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_numapilot")).args(args).output().expect("run numapilot")
}

/// Its standard output, which must be UTF-8 text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("stdout is UTF-8")
}

/// Its standard error, which must be UTF-8 text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).expect("stderr is UTF-8")
}
