//! Counts of the work the planner's inner loops do, by name, for the tests that keep that work
//! in proportion to the load (a count, not a clock: the same on a busy machine, and a loop that
//! grows with the square of the threads shows at a size that runs in a second).
//!
//! Test builds of this crate only: elsewhere `count` does nothing and is inlined away (the
//! counters are `numapilot_topology::work_counters!`, expanded here so that this crate's
//! `cfg(test)` is the one that gates them).

numapilot_topology::work_counters!();
