//! Shared by the daemon-loop tests that run `run::serve` against a scripted or simulated host: a
//! config file in a temporary directory, and a loop served on its own thread until it has taken
//! a number of steps. Also the copy of a fixture tree the tests that change one work on.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use numapilot_daemon::config::{self, Overrides, Source};
use numapilot_daemon::control::{self, Request, Status};
use numapilot_daemon::run::{self, Command, Restore, Setup};
use numapilot_policy::Host;
use numapilot_topology::Topology;

/// Writes `DIR/c.toml` with the socket, journal and state under `dir` and `extra` lines added to
/// `[daemon]`; returns the loaded setup, the socket and the journal paths.
pub fn setup(dir: &Path, extra: &str) -> (Setup, PathBuf, PathBuf) {
    let socket = dir.join("s.sock");
    let journal = dir.join("journal.jsonl");
    let cfg = dir.join("c.toml");
    std::fs::write(
        &cfg,
        format!(
            "[daemon]\nsocket = \"{}\"\njournal = \"{}\"\nstate = \"{}\"\n{extra}",
            socket.display(),
            journal.display(),
            dir.join("state.json").display()
        ),
    )
    .unwrap();
    let source = Source::Explicit(cfg);
    let loaded = config::load(&source, &Overrides::default()).unwrap();
    (
        Setup { source, overrides: Overrides::default(), loaded, forced_observe: None, notify: Default::default() },
        socket,
        journal,
    )
}

/// Serves `host` with the config `extra` (see [`setup`]) until the loop has taken `steps` steps,
/// stops it, and returns its last status and its journal lines.
pub fn serve_steps<H: Host + Restore + Send + 'static>(
    host: H,
    topo: Topology,
    extra: &str,
    steps: u64,
) -> (Status, Vec<serde_json::Value>) {
    let dir = tempfile::tempdir().unwrap();
    let (setup, socket, journal) = setup(dir.path(), extra);
    let (handle, rx) = run::command_pipe().unwrap();
    let t = std::thread::spawn(move || run::serve(setup, topo, host, None, Some(rx), &mut |_| {}));
    let t0 = Instant::now();
    let status = loop {
        if let Ok(r) = control::request(&socket, &Request::Status) {
            let s = r.status.unwrap();
            if s.steps >= steps {
                break s;
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "the loop never reached {steps} steps");
        std::thread::sleep(Duration::from_millis(20));
    };
    handle.send(Command::Stop).unwrap();
    t.join().unwrap().unwrap();
    let lines = std::fs::read_to_string(&journal)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (status, lines)
}

/// A copy of the tree `from` (a fixture) at `to`: directories, files and symbolic links as links.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let ty = e.file_type().unwrap();
        let dest = to.join(e.file_name());
        if ty.is_dir() {
            copy_tree(&e.path(), &dest);
        } else if ty.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(e.path()).unwrap(), &dest).unwrap();
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}
