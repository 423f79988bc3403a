//! Readiness for the service manager: systemd's notify protocol, sd_notify(3), without libsystemd.
//!
//! # Problem
//!
//! With `Type=simple` systemd takes the daemon as started the moment it is forked: `systemctl
//! start numapilot` returned before the control socket existed, so `numapilot status` right after
//! it said "not running", and units ordered `After=numapilot.service` started before placement
//! could answer `advise` (review helper-43). A reload (SIGHUP) likewise ended for systemd before
//! the file was read.
//!
//! # Approach
//!
//! `Type=notify`: systemd passes a unix datagram socket in `NOTIFY_SOCKET` (a path, or an abstract
//! name written `@name`) and waits for `READY=1`. The daemon sends
//!
//! ```text
//!   start:    READY=1, STATUS=...       once the socket, the metrics port and the journal are open
//!   SIGHUP:   RELOADING=1, MONOTONIC_USEC=N   before the file is read, READY=1 after (accepted or not)
//!   stop:     STOPPING=1                before the restore
//! ```
//!
//! The variable is read once and removed from the environment, as sd_notify's `unset_environment`
//! does, so nothing the daemon might start later talks to the service manager in its name.
//! Without the variable (not under systemd, or `Type=simple`) every call does nothing. A send that
//! fails is logged once and never stops the daemon: readiness is a courtesy to the service manager,
//! not a condition of placement.

use std::os::unix::net::UnixDatagram;

/// The service manager's notification socket, or none.
#[derive(Debug, Default)]
pub struct Notifier {
    target: Option<String>,
    failed: bool,
}

impl Notifier {
    /// From `NOTIFY_SOCKET`, which is then removed from this process's environment.
    pub fn from_env() -> Notifier {
        let target = std::env::var("NOTIFY_SOCKET").ok().filter(|t| !t.is_empty());
        if target.is_some() {
            // SAFETY (of the environment): called at start, before the daemon starts any thread
            // that could read the environment concurrently.
            std::env::remove_var("NOTIFY_SOCKET");
        }
        Notifier { target, failed: false }
    }

    /// Whether there is a service manager to tell.
    pub fn active(&self) -> bool {
        self.target.is_some()
    }

    /// Sends `state` (newline-separated `KEY=VALUE` lines) to the service manager; nothing without
    /// one. A failure is logged the first time and otherwise ignored.
    pub fn send(&mut self, state: &str) {
        let Some(target) = &self.target else { return };
        let sent = UnixDatagram::unbound().and_then(|s| match target.strip_prefix('@') {
            Some(name) => {
                use std::os::linux::net::SocketAddrExt as _;
                let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
                s.send_to_addr(state.as_bytes(), &addr)
            }
            None => s.send_to(state.as_bytes(), target),
        });
        if let Err(e) = sent {
            if !self.failed {
                self.failed = true;
                tracing::warn!("NOTIFY_SOCKET {target}: {e} (the service manager is not told of this daemon's state)");
            }
        }
    }

    /// `READY=1` with a status line.
    pub fn ready(&mut self, status: &str) {
        self.send(&format!("READY=1\nSTATUS={status}\nMAINPID={}", std::process::id()));
    }

    /// `RELOADING=1` with the monotonic time systemd wants beside it (CLOCK_MONOTONIC, us).
    pub fn reloading(&mut self) {
        let us = numapilot_observe::reader::monotonic_ns() / 1000;
        self.send(&format!("RELOADING=1\nMONOTONIC_USEC={us}"));
    }

    /// `STOPPING=1`.
    pub fn stopping(&mut self) {
        self.send("STOPPING=1");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages reach a path socket and an abstract one, as systemd binds either.
    #[test]
    fn messages_reach_the_socket_the_variable_names() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let server = UnixDatagram::bind(&path).unwrap();
        let mut n = Notifier { target: Some(path.display().to_string()), failed: false };
        n.ready("ok");
        let mut buf = [0u8; 256];
        let len = server.recv(&mut buf).unwrap();
        let got = String::from_utf8_lossy(&buf[..len]).into_owned();
        assert!(got.starts_with("READY=1\nSTATUS=ok\nMAINPID="), "{got}");
        n.reloading();
        let len = server.recv(&mut buf).unwrap();
        assert!(String::from_utf8_lossy(&buf[..len]).starts_with("RELOADING=1\nMONOTONIC_USEC="));

        use std::os::linux::net::SocketAddrExt as _;
        let name = format!("numapilot-notify-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let abstract_server = UnixDatagram::bind_addr(&addr).unwrap();
        let mut n = Notifier { target: Some(format!("@{name}")), failed: false };
        n.stopping();
        let len = abstract_server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"STOPPING=1");

        // No manager: nothing, and no error. A socket gone: logged once, never fatal.
        Notifier::default().ready("x");
        let mut gone = Notifier { target: Some(dir.path().join("none").display().to_string()), failed: false };
        gone.ready("x");
        gone.ready("x");
        assert!(gone.failed);
    }
}
