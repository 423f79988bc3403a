//! `/proc/vmstat` (and `/sys/devices/system/node/nodeN/vmstat`): `name value` lines.
//!
//! Written by `vmstat_show()` in `mm/vmstat.c`, names from `vmstat_text[]`. The set of names changes
//! with almost every kernel release, so only the NUMA-related ones are kept, by prefix:
//!
//! ```text
//!   numa_hit numa_miss numa_foreign numa_interleave numa_local numa_other     (allocations, pages)
//!   numa_pte_updates numa_huge_pte_updates numa_hint_faults numa_hint_faults_local
//!   numa_pages_migrated                                                      (NUMA balancing, pages)
//!   pgmigrate_success pgmigrate_fail  thp_migration_*                        (page migration)
//!   pgpromote_* pgdemote_*                                                   (memory tiering, 5.18+/6.1+)
//! ```
//!
//! The balancing counters exist only with `CONFIG_NUMA_BALANCING`; a kernel without them simply has no
//! such lines. All values are counts of events or pages since boot.

use super::num;
use crate::counters::Counters;
use crate::error::{FileKind, ParseError};

/// Name prefixes of the vmstat counters kept (see the module essay).
pub const NUMA_PREFIXES: [&str; 5] = ["numa_", "pgmigrate_", "thp_migration_", "pgpromote_", "pgdemote_"];

/// Whether a vmstat counter is one of the NUMA-related ones kept.
pub fn is_numa_counter(name: &str) -> bool {
    NUMA_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Parses a vmstat file, keeping the NUMA-related counters in file order.
pub fn parse_vmstat(input: &str) -> Result<Counters, ParseError> {
    let k = FileKind::Vmstat;
    super::complete(k, input)?;
    let mut out = Counters::default();
    for (i, line) in input.lines().enumerate() {
        let n = i + 1;
        let (key, value) = line.split_once(' ').ok_or_else(|| ParseError::new(k, n, None, line, "no space in line"))?;
        if key.is_empty() {
            return Err(ParseError::new(k, n, None, line, "empty counter name"));
        }
        if is_numa_counter(key) {
            // Some node vmstat values are signed in theory (per-cpu drift); the kernel prints them as
            // unsigned after folding, so anything else is corruption.
            out.push(key, num(k, n, "value", line, value)?);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HOST: &str = include_str!("../../tests/data/host-6.18/vmstat");

    #[test]
    fn keeps_numa_counters_in_order() {
        let c = parse_vmstat(HOST).unwrap();
        assert_eq!(c.entries()[0].0, "numa_hit");
        assert!(c.get("numa_hit").unwrap() > 0);
        assert_eq!(c.get("numa_miss"), Some(0));
        assert!(c.get("pgmigrate_success").is_some());
        assert!(c.get("numa_hint_faults").is_some());
        assert!(c.get("nr_free_pages").is_none());
        let want = HOST.lines().filter(|l| is_numa_counter(l.split(' ').next().unwrap())).count();
        assert_eq!(c.entries().len(), want);
    }

    #[test]
    fn truncated_and_malformed_are_errors() {
        assert!(parse_vmstat("numa_hit 12").is_err());
        assert!(parse_vmstat("numa_hit\n").is_err());
        assert!(parse_vmstat("numa_hit x\n").is_err());
        assert!(parse_vmstat(" 1\n").is_err());
        assert!(parse_vmstat("").unwrap().entries().is_empty());
    }

    proptest! {
        #[test]
        fn arbitrary_input_never_panics(s in "\\PC*") {
            let _ = parse_vmstat(&s);
        }
    }
}
