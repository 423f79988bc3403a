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

/// Waits until process `pid` runs under the name `comm` (its /proc/PID/comm), for the tests that
/// start a program and then read it, or have a command read it, as that program. `spawn` returns
/// once the child's exec has closed its close-on-exec descriptors (or, through vfork, once it has
/// left the parent's memory), and the kernel sets the new name after that (begin_new_exec in
/// fs/exec.c: do_close_on_exec, then __set_task_comm) and the ELF loader sets the command line and
/// maps the program later still (load_elf_binary): read at once, the name can still be the
/// spawning thread's (the CI of dcf7826 read "a_process_named"), the command line empty. The
/// 60 s deadline is a failure bound for a loaded machine, not a timing.
pub fn wait_for_comm(pid: u32, comm: &str) {
    let path = format!("/proc/{pid}/comm");
    let t0 = std::time::Instant::now();
    loop {
        let now = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        if now.strip_suffix('\n') == Some(comm) {
            return;
        }
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60),
            "pid {pid} never ran under the name {comm:?} (its comm is still {now:?} after 60 s)"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}
