//! Counts of the work the simulator's set-up loops do, by name, for the tests that keep that
//! work in proportion to the machine (a count, not a clock: the same on a busy machine, and a
//! loop that grows with the cube of the nodes shows at a size that builds in a second).
//!
//! Test builds of this crate only: elsewhere `count` does nothing and is inlined away (the
//! counters are `numapilot_topology::work_counters!`, expanded here so that this crate's
//! `cfg(test)` is the one that gates them).

numapilot_topology::work_counters!();
