//! The simulated NUMA machine (issue 3, under construction: see ARCHITECTURE.md): result types,
//! workload specifications and the kernel model's state.

#![deny(missing_docs)]

pub mod kernel;
pub mod result;
pub mod workload;
