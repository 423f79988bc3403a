//! Decisions and the interface they travel through.
//!
//! The engine observes a [`Host`], decides a [`Plan`] of [`Action`]s, and hands them back to the same
//! host. Two hosts implement the trait: the live kernel (observation by `numapilot-observe`, actions
//! by `numapilot-actuate`) and the simulated machine (`numapilot-sim`). Because both speak this one
//! interface, a policy proven in the simulator runs unchanged on a real kernel.
//!
//! ```text
//!            sample()                 decide (pure)                apply(&Action)
//!   Host ---------------> Sample ------------------> Plan ------------------------> Host
//!   (live | sim)          (observe's raw type)       [Action + Reason]     Outcome per action
//! ```
//!
//! This crate does no I/O. Every action names the process it is for by pid *and* start time, so a
//! host refuses an action whose pid now belongs to another process, and every action carries the
//! [`Reason`] it was taken for, so `explain` can show why.

#![deny(missing_docs)]

pub mod action;
pub mod adaptive;
pub mod advise;
pub mod cadence;
pub mod engine;
pub mod host;
pub mod numad;
mod work;

pub use action::{Action, ActionKind, Outcome, Plan, Reason, TaskRef};
pub use adaptive::{free_from_model, Adaptive, LAUNCH_PROMISE_NS, LAUNCH_WAIT_DECISIONS};
pub use engine::{Engine, LaunchAdvice, LaunchRequest, NoLaunchAdvice, Policy, StepReport, Totals};
pub use host::{FinishedMove, Host, HostError};
pub use numad::Numad;
/// The one tunables struct (defined in the model crate, which needs half of it).
pub use numapilot_model::{TunableError, Tunables};
