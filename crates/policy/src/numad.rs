//! A numad-like baseline. (Essay with the implementation.)

use numapilot_model::Model;

use crate::action::Plan;
use crate::engine::Policy;

/// numad's heuristic as a policy.
#[derive(Debug, Default)]
pub struct Numad {}

impl Policy for Numad {
    fn name(&self) -> &'static str {
        "numad"
    }

    fn next_interval_ns(&self, model: &Model) -> u64 {
        model.tunables.numad_interval_max_s * 1_000_000_000
    }

    fn decide(&mut self, model: &Model) -> Plan {
        let _ = model;
        todo!("Numad::decide")
    }
}
