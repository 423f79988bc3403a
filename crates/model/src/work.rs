//! Counts of the work the model's update does per thread (lookups of a thread's history), by
//! name, for the tests that keep that work to what changed: a count, not a clock (the same on a
//! busy machine), so a steady update that looks up every idle thread again shows in a test.
//!
//! Test builds of this crate only: elsewhere `count` does nothing and is inlined away (the
//! counters are `numapilot_topology::work_counters!`, expanded here so that this crate's
//! `cfg(test)` is the one that gates them).

numapilot_topology::work_counters!();
