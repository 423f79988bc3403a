//! AutoNUMA calibration (issue 3, section 6): on `autonuma-2s12c-16g`, the 2012 2-socket x 6-core
//! box of A. Arcangeli's AutoNUMA post (LKML 20120321124937.GX24602, in
//! shared/reference/published-results.md), the simulated autonuma/default runtime ratio of each
//! autonuma-benchmark test must lie within 20% of the published one:
//!
//! ```text
//!   test                 no balancing  AutoNUMA  ratio
//!   numa01                    305        207     0.68
//!   numa01_THREAD_ALLOC       491        328     0.67
//!   numa02                     64         45     0.70
//! ```
//!
//! The runs are at full work scale: the time AutoNUMA needs to converge is fixed by the memory size
//! and the scan tunables (not by the number of passes), so a shortened run would overweight it.
//! Measured (seed 1, with seeded scheduler tie-breaks since issue 4): numa01 0.649,
//! numa01_THREAD_ALLOC 0.645, numa02 0.655. Before the tie-breaks were seeded numa01 measured 0.735: it
//! sat longest in the kernel's pseudo-interleaved state (each group's memory split about 4:3 by the
//! 3/4 hysteresis) before swaps gathered each process on one node; a seeded tie now breaks the
//! symmetry within 8-17 s.

use numapilot_sim::workload::autonuma_bench;
use numapilot_sim::{simulate, Machine, SimOptions};

/// Published (no balancing, AutoNUMA) runtimes, wall s.
const PUBLISHED: [(&str, f64, f64); 3] =
    [("numa01", 305.0, 207.0), ("numa01_THREAD_ALLOC", 491.0, 328.0), ("numa02", 64.0, 45.0)];

/// Allowed relative deviation of the ratio (issue 3, section 6).
const TOLERANCE: f64 = 0.20;

fn check(test: &str) {
    let (_, def, an) = PUBLISHED.iter().find(|p| p.0 == test).copied().unwrap();
    let published = an / def;
    let machine = Machine::preset("autonuma-2s12c-16g").unwrap();
    let spec = autonuma_bench::spec(test, &machine.topo, 1.0).unwrap();
    let cmp = simulate(&machine, &spec, &["default", "autonuma"], &[1], &SimOptions::default(), &mut |_| {}).unwrap();
    let (d, a) = (cmp.policies[0].runtime_s.mean, cmp.policies[1].runtime_s.mean);
    let simulated = a / d;
    let dev = (simulated - published).abs() / published;
    assert!(
        dev <= TOLERANCE,
        "{test}: autonuma/default simulated {simulated:.3} ({a:.1} s / {d:.1} s) vs published {published:.3}: {:.1}% off",
        100.0 * dev
    );
    // AutoNUMA moves memory: the run must have migrated pages and ended mostly local.
    let run = &cmp.policies[1].runs[0];
    assert!(run.pages_migrated > 0, "{test}: autonuma migrated nothing");
    assert!(run.local_access_pct > cmp.policies[0].runs[0].local_access_pct, "{test}: no locality gained");
}

#[test]
fn numa01_autonuma_ratio_within_20pct_of_published() {
    check("numa01");
}

#[test]
fn numa01_thread_alloc_autonuma_ratio_within_20pct_of_published() {
    check("numa01_THREAD_ALLOC");
}

#[test]
fn numa02_autonuma_ratio_within_20pct_of_published() {
    check("numa02");
}
