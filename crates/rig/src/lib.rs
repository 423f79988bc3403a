//! numapilot-rig: real NUMA machines without NUMA hardware.
//!
//! # Problem
//!
//! numapilot must be right on machines with 2, 4, 8 NUMA nodes, non-uniform distances, memory-only nodes and
//! devices attached to one node; the development and CI machines have one node. Unit tests over captured files
//! check parsers, but not that `set_mempolicy` + `sched_setaffinity` + `exec` really put pages and threads where
//! they belong, nor that our output equals Debian's numactl and numastat on the same kernel at the same moment.
//!
//! # Approach
//!
//! Boot a real Linux kernel (Debian's 6.12 cloud kernel) under QEMU with the NUMA topology we want, run a
//! scenario inside it next to the real Debian tools, and bring the results back to a Rust test on the host.
//!
//! ```text
//!  GuestSpec (nodes, CPUs, MiB, SLIT, PCI)     Rig::prepare: apt packages, kernel .deb -> dpkg -x, cargo build,
//!        |                                                   initramfs (busybox + numactl/numastat/numad + ours)
//!        v                                                          |
//!  qemu-system-x86_64 -M q35 -accel tcg -numa node,... -numa dist,...  -kernel vmlinuz -initrd base++scenario
//!        |  ttyS0: console (kept for error reports)                 |
//!        |  ttyS1: results (NPRIG BEGIN name / base64 / END name rc) v
//!  GuestRun { sections: name -> (rc, stdout, stderr) }  ---> tests compare numapilot vs numactl/numastat,
//!                                                              check numa_maps and /proc stat for placement
//! ```
//!
//! # Why TCG (software emulation) and not KVM
//!
//! The machines have no usable KVM, and TCG needs none: it runs anywhere QEMU installs, so CI and a laptop behave
//! the same. QEMU describes the topology through ACPI (SRAT for node CPUs and memory, SLIT for distances, `_PXM` on
//! PCI expander bridges), the very tables firmware gives the kernel on a real server, so the guest kernel builds
//! its NUMA model by its normal path. A 2-node guest reaches userspace in about 3 s, a 8-vCPU guest in about 6 s.
//! TCG runs single-threaded (see [`spec`] for the code-patching race that rules out multi-threaded TCG).
//!
//! # What it proves, and what it cannot
//!
//! It proves mechanism: our topology reading matches the kernel's view and numactl's rendering of it; per-node
//! page counts match numastat's; policies and affinity set by `numapilot run` are honoured by a real kernel's
//! allocator and scheduler (read back from `/proc/PID/numa_maps` and `/proc/PID/task/*/stat`, not from our own
//! output); NUMA balancing, page migration and numad run for real. It cannot prove speed: under emulation every
//! node's memory is the same host memory, so a remote access costs what a local one does. Latency and bandwidth
//! effects belong to the simulator (crate `sim`), calibrated against published measurements.
//!
//! # Limits
//!
//! Dense node ids only (QEMU refuses gaps); x86-64 only; boot time grows with vCPUs (measured on a 2-core host, one
//! guest at a time: 3.0-3.7 s to userspace with 4 vCPUs, 5.5-7 s with 8), so guests stay small (at most 8 vCPUs and
//! 2 GiB). Results come back after power-off, not while running.

#![deny(missing_docs)]

pub mod checks;
pub mod cost;
pub mod cpio;
pub mod error;
pub mod guest;
pub mod image;
pub mod launcher;
pub mod pairs;
pub mod provision;
pub mod race;
pub mod spec;

pub use error::{Result, RigError};
pub use guest::{GuestRun, Rig, RigOptions, Section};
pub use provision::KernelSeries;
pub use spec::{GuestSpec, NodeSpec, PciDeviceSpec, PciKind, SmpLayout};
