//! The simulated NUMA machine (issue 3, under construction: see ARCHITECTURE.md). So far: the result
//! types every run produces.

#![deny(missing_docs)]

pub mod result;
