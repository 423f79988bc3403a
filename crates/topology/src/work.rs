//! Work counters for tests: counts, by name, of the work a crate's inner loops do, for the tests
//! that keep that work in proportion to the load or the machine (a count, not a clock: the same on
//! a busy machine, and a loop that grows with the square of its input shows at a size that runs in
//! a second). The policy's planner, the model's update and the simulator's set-up loops keep them.
//!
//! The counters exist in a crate's own test builds only, and elsewhere cost nothing: a crate
//! expands [`work_counters!`](crate::work_counters) in a module of its own, and the `cfg(test)`
//! in the expansion is that crate's, not this one's (a function or type defined here would be
//! compiled by this crate's flags, so it would either be missing from the others' tests or present
//! in every build). Lives here, the one crate below both users.

/// Defines, in the module that expands it, `count(what: &'static str, n: u64)`, which adds `n`
/// to this thread's count named `what` in test builds of the expanding crate and does nothing
/// (inlined away) in any other build, and, in those test builds only, `take()`, which returns this
/// thread's counts since the last call (a `BTreeMap` by name) and starts them again from zero.
///
/// ```
/// mod work {
///     numapilot_topology::work_counters!();
/// }
/// work::count("loop.turns", 3); // outside a test build: does nothing
/// ```
///
/// `take` is not there outside the expanding crate's test builds:
///
/// ```compile_fail
/// mod work {
///     numapilot_topology::work_counters!();
/// }
/// let _ = work::take();
/// ```
#[macro_export]
macro_rules! work_counters {
    () => {
        #[cfg(test)]
        ::std::thread_local! {
            static COUNTS: ::std::cell::RefCell<::std::collections::BTreeMap<&'static str, u64>> =
                const { ::std::cell::RefCell::new(::std::collections::BTreeMap::new()) };
        }

        /// Adds `n` to the count named `what` (this thread's, in test builds).
        #[inline(always)]
        #[allow(dead_code)]
        pub(crate) fn count(what: &'static str, n: u64) {
            #[cfg(test)]
            COUNTS.with(|c| *c.borrow_mut().entry(what).or_insert(0) += n);
            #[cfg(not(test))]
            let _ = (what, n);
        }

        /// This thread's counts since the last call, and starts them again from zero.
        #[cfg(test)]
        #[allow(dead_code)]
        pub(crate) fn take() -> ::std::collections::BTreeMap<&'static str, u64> {
            COUNTS.with(|c| ::std::mem::take(&mut *c.borrow_mut()))
        }
    };
}

#[cfg(test)]
mod tests {
    mod work {
        crate::work_counters!();
    }

    /// In a test build the counts add up by name, per thread, and `take` starts them again.
    #[test]
    fn counts_add_up_per_name_and_thread_and_take_starts_again() {
        work::take();
        work::count("a", 2);
        work::count("a", 3);
        work::count("b", 1);
        std::thread::spawn(|| work::count("a", 100)).join().unwrap();
        let counts = work::take();
        assert_eq!(counts.get("a"), Some(&5));
        assert_eq!(counts.get("b"), Some(&1));
        assert_eq!(counts.len(), 2);
        assert!(work::take().is_empty());
    }
}
