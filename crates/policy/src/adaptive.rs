//! The adaptive policy (NUMA-ICON). (Essay with the implementation.)

use numapilot_model::Model;

use crate::action::Plan;
use crate::engine::Policy;

/// The adaptive policy: fork spread, group placement on preferred nodes, weakest-first balancing,
/// memory follows CPU / CPU follows memory with hysteresis, per-class placement.
#[derive(Debug, Default)]
pub struct Adaptive {}

impl Policy for Adaptive {
    fn name(&self) -> &'static str {
        "numapilot"
    }

    fn next_interval_ns(&self, model: &Model) -> u64 {
        model.tunables.interval_ms * 1_000_000
    }

    fn decide(&mut self, model: &Model) -> Plan {
        let _ = model;
        todo!("Adaptive::decide")
    }
}
