//! Counts of the work the model's update does per thread (lookups of a thread's history), by
//! name, for the tests that keep that work to what changed: a count, not a clock (the same on a
//! busy machine), so a steady update that looks up every idle thread again shows in a test.
//!
//! Test builds of this crate only: elsewhere [`count`] does nothing and is inlined away.

#[cfg(test)]
use std::cell::RefCell;
#[cfg(test)]
use std::collections::BTreeMap;

#[cfg(test)]
thread_local! {
    static COUNTS: RefCell<BTreeMap<&'static str, u64>> = const { RefCell::new(BTreeMap::new()) };
}

/// Adds `n` to the count named `what` (this thread's, in test builds).
#[inline(always)]
pub(crate) fn count(what: &'static str, n: u64) {
    #[cfg(test)]
    COUNTS.with(|c| *c.borrow_mut().entry(what).or_insert(0) += n);
    #[cfg(not(test))]
    let _ = (what, n);
}

/// This thread's counts since the last call, and starts them again from zero.
#[cfg(test)]
pub(crate) fn take() -> BTreeMap<&'static str, u64> {
    COUNTS.with(|c| std::mem::take(&mut *c.borrow_mut()))
}
