//! Actuation: the only crate that changes the system (sched_setaffinity, set_mempolicy, mbind,
//! migrate_pages, move_pages, cpuset writes). Safe wrappers over the raw syscalls.

#![deny(missing_docs)]
