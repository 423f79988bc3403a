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

/// Parses `/proc/vmstat`, keeping the NUMA-related counters in file order.
pub fn parse_vmstat(input: &str) -> Result<Counters, ParseError> {
    parse_counters(FileKind::Vmstat, input, is_numa_counter)
}

/// Parses `/sys/devices/system/node/nodeN/vmstat`, keeping the NUMA-related counters in file order.
///
/// The node file is written by `node_read_vmstat()` in `drivers/base/node.c`: the node's zone and node
/// counters, then (6.x) its share of the `numa_*` event counters (`numa_hit`, `numa_miss`, `numa_foreign`,
/// `numa_interleave`, `numa_local`, `numa_other`) and of `pgpromote_*`/`pgdemote_*`. The balancing counters
/// (`numa_pte_updates`, `numa_hint_faults`, `numa_pages_migrated`) are global only: a node file has none.
pub fn parse_node_vmstat(input: &str) -> Result<Counters, ParseError> {
    parse_counters(FileKind::NodeVmstat, input, is_numa_counter)
}

/// Parses a file of `name value` lines (vmstat, node vmstat, node numastat), keeping the counters whose
/// name passes `keep`, in file order. Every line must be well formed, kept or not: a malformed line
/// means the text is not what the kernel writes.
pub fn parse_counters(k: FileKind, input: &str, keep: impl Fn(&str) -> bool) -> Result<Counters, ParseError> {
    super::complete(k, input)?;
    let mut out = Counters::default();
    for (i, line) in input.lines().enumerate() {
        let n = i + 1;
        let (key, value) = line.split_once(' ').ok_or_else(|| ParseError::new(k, n, None, line, "no space in line"))?;
        if key.is_empty() {
            return Err(ParseError::new(k, n, None, line, "empty counter name"));
        }
        if keep(key) {
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
    fn node_vmstat_of_every_fixture_has_the_numa_event_counters() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
        let mut seen = 0;
        for fx in std::fs::read_dir(&dir).unwrap() {
            let nodes = fx.unwrap().path().join("sys/devices/system/node");
            let Ok(rd) = std::fs::read_dir(&nodes) else { continue };
            for node in rd {
                let f = node.unwrap().path().join("vmstat");
                let Ok(text) = std::fs::read_to_string(&f) else { continue };
                let c = parse_node_vmstat(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
                let want: Vec<&str> =
                    text.lines().map(|l| l.split(' ').next().unwrap()).filter(|k| is_numa_counter(k)).collect();
                assert_eq!(c.entries().iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), want);
                for k in ["numa_hit", "numa_miss", "numa_foreign", "numa_interleave", "numa_local", "numa_other"] {
                    assert!(c.get(k).is_some(), "{}: {k}", f.display());
                }
                // Conservation: every page allocated on the node counts once as hit or miss (was this the
                // intended node?) and once as local or other (was the allocating CPU on this node?); the
                // kernel sums each per-CPU counter as the file is written, so the file agrees with itself.
                let g = |k| c.get(k).unwrap();
                assert_eq!(g("numa_hit") + g("numa_miss"), g("numa_local") + g("numa_other"), "{}", f.display());
                assert!(c.get("nr_free_pages").is_none());
                seen += 1;
            }
        }
        assert!(seen >= 15, "node vmstat files in {}: {seen}", dir.display());
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
            let _ = parse_node_vmstat(&s);
        }
    }
}
