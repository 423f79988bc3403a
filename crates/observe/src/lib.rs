//! Observation: pure parsers for /proc and /sys files, a `Reader` over an overridable root, and the
//! raw `Sample` type the model is derived from. Nothing here decides anything.

#![deny(missing_docs)]
