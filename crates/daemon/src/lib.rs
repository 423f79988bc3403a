//! The daemon: the placement engine run against the live kernel.
//!
//! ```text
//!   config (TOML, validated first) ──> run::Daemon ──loop──> Engine::step(&mut LiveHost)
//!                                          │                    │ sample(): observe::Reader + signals::Signals
//!                                          │                    │ apply():  actuate (affinity, cpusets, pages),
//!                                          │                    │           pid+starttime checked, originals saved
//!                                          ├─ journal (JSON lines: every plan's actions, reasons, outcomes)
//!                                          ├─ control (root-only unix socket: status, explain PID)
//!                                          └─ metrics (Prometheus text on 127.0.0.1)
//!   SIGTERM/SIGINT: restore every process's original affinity/cpuset (live::state), then exit.
//!   Next start after a crash: restore from the state file before anything else.
//! ```
//!
//! Modules: [`config`] the file and its validation; [`run`] the loop, signals, shutdown; [`journal`];
//! [`control`] the status socket (server and client); [`metrics`]; [`advise`] numad-style
//! pre-placement advice; [`live`] the live [`numapilot_policy::Host`] (observation, exclusions, actuation
//! with identity checks, the state file); [`signals`] the signals beyond /proc's per-task files
//! (socket pairs, shared mappings, precise access sampling).

#![deny(missing_docs)]

pub mod advise;
pub mod config;
pub mod control;
pub mod journal;
pub mod live;
pub mod metrics;
pub mod notify;
pub mod paths;
pub mod run;
pub mod signals;
