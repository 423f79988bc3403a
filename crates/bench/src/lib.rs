//! autonuma-benchmark's tests as real programs (being written).

#![deny(missing_docs)]
