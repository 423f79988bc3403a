//! numapilot-rig: boots a real Linux kernel under QEMU with any NUMA topology (work in progress).
#![deny(missing_docs)]
