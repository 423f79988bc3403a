//! Memory files: `/sys/devices/system/node/nodeN/meminfo`, `/sys/devices/system/node/nodeN/numastat`
//! and `/proc/meminfo`.
//!
//! Node meminfo is written by `node_read_meminfo()` in `drivers/base/node.c`, /proc/meminfo by
//! `meminfo_proc_show()` in `fs/proc/meminfo.c`, node numastat by `node_read_numastat()` in
//! `drivers/base/node.c`. Checked against 6.18 and 6.12.
//!
//! ```text
//!   Node 0 MemTotal:        6251076 kB        node meminfo: "Node N " prefix, values in kB...
//!   Node 0 HugePages_Total:     0             ...except HugePages_* which count huge pages
//!   MemTotal:       24682416 kB               /proc/meminfo: same without the prefix
//!   Hugepagesize:       2048 kB               default huge page size (hugetlbfs)
//!   numa_hit 4543867                          node numastat: pages, since boot
//! ```
//!
//! The set of meminfo lines changes between kernels (e.g. `SecPageTables` 6.1+, `Unaccepted` 6.5+),
//! so all lines are kept with their unit and looked up by name. Node numastat has had the same six
//! counters since 2.6 (`numa_hit`, `numa_miss`, `numa_foreign`, `interleave_hit`, `local_node`,
//! `other_node`, all in pages; see `Documentation/admin-guide/numastat.rst`): all six are required, so
//! a truncated file is caught.

use serde::{Deserialize, Serialize};

use super::num;
use crate::counters::Counters;
use crate::error::{FileKind, ParseError};

/// One meminfo line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeminfoEntry {
    /// Name, e.g. `MemFree` or `Active(anon)`.
    pub key: String,
    /// Value in the line's unit.
    pub value: u64,
    /// Whether the unit is kB (`false`: a count, e.g. `HugePages_Total` in huge pages).
    pub kb: bool,
}

/// A meminfo file (node or system), lines in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meminfo {
    /// The lines.
    pub entries: Vec<MeminfoEntry>,
}

impl Meminfo {
    /// The value of `key` in its unit.
    pub fn get(&self, key: &str) -> Option<u64> {
        self.entries.iter().find(|e| e.key == key).map(|e| e.value)
    }

    /// `MemTotal`, kB.
    pub fn mem_total_kb(&self) -> Option<u64> {
        self.get("MemTotal")
    }

    /// `MemFree`, kB.
    pub fn mem_free_kb(&self) -> Option<u64> {
        self.get("MemFree")
    }
}

/// Parses `/sys/devices/system/node/nodeN/meminfo`; returns the node id from the line prefix and the
/// lines. Every line must carry the same node id.
pub fn parse_node_meminfo(input: &str) -> Result<(u32, Meminfo), ParseError> {
    let k = FileKind::NodeMeminfo;
    super::complete(k, input)?;
    let mut node = None;
    let mut out = Meminfo::default();
    for (i, line) in input.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let rest = line.strip_prefix("Node ").ok_or_else(|| ParseError::new(k, n, None, line, "no 'Node ' prefix"))?;
        let (id, rest) = rest.split_once(' ').ok_or_else(|| ParseError::new(k, n, None, line, "no node id"))?;
        let id: u32 = num(k, n, "node", line, id)?;
        match node {
            None => node = Some(id),
            Some(prev) if prev != id => {
                return Err(ParseError::new(k, n, Some("node"), line, format!("node {id} in node {prev}'s file")));
            }
            _ => {}
        }
        out.entries.push(entry(k, n, line, rest)?);
    }
    let node = node.ok_or_else(|| ParseError::new(k, 0, None, input, "empty file"))?;
    require(k, &out, &["MemTotal", "MemFree"])?;
    Ok((node, out))
}

/// Parses `/proc/meminfo`.
pub fn parse_meminfo(input: &str) -> Result<Meminfo, ParseError> {
    let k = FileKind::Meminfo;
    super::complete(k, input)?;
    let mut out = Meminfo::default();
    for (i, line) in input.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        out.entries.push(entry(k, i + 1, line, line)?);
    }
    require(k, &out, &["MemTotal", "MemFree"])?;
    Ok(out)
}

fn require(k: FileKind, m: &Meminfo, keys: &[&'static str]) -> Result<(), ParseError> {
    for key in keys {
        if m.get(key).is_none() {
            return Err(ParseError::new(k, 0, Some(key), "", format!("no {key} line (truncated?)")));
        }
    }
    Ok(())
}

/// "Key:   value[ kB]"
fn entry(k: FileKind, n: usize, line: &str, text: &str) -> Result<MeminfoEntry, ParseError> {
    let (key, value) = text.split_once(':').ok_or_else(|| ParseError::new(k, n, None, line, "no ':' in line"))?;
    let key = key.trim();
    if key.is_empty() || key.contains(' ') {
        return Err(ParseError::new(k, n, None, line, "bad name"));
    }
    let value = value.trim();
    let (digits, kb) = match value.strip_suffix(" kB") {
        Some(d) => (d.trim_end(), true),
        None => (value, false),
    };
    Ok(MeminfoEntry { key: key.to_string(), value: num(k, n, "value", line, digits)?, kb })
}

/// The six counters of a node's numastat file, all required.
pub const NUMASTAT_COUNTERS: [&str; 6] =
    ["numa_hit", "numa_miss", "numa_foreign", "interleave_hit", "local_node", "other_node"];

/// Parses `/sys/devices/system/node/nodeN/numastat` (pages), keeping every counter in file order.
pub fn parse_node_numastat(input: &str) -> Result<Counters, ParseError> {
    let k = FileKind::NodeNumastat;
    let out = super::vmstat::parse_counters(k, input, |_| true)?;
    for key in NUMASTAT_COUNTERS {
        if out.get(key).is_none() {
            return Err(ParseError::new(k, 0, Some(key), "", format!("no {key} line (truncated?)")));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NODE_MEMINFO: &str = include_str!("../../tests/data/host-6.18/node0-meminfo");
    const NODE_NUMASTAT: &str = include_str!("../../tests/data/host-6.18/node0-numastat");
    const MEMINFO: &str = include_str!("../../tests/data/host-6.18/meminfo");

    #[test]
    fn node_meminfo() {
        let (node, m) = parse_node_meminfo(NODE_MEMINFO).unwrap();
        assert_eq!(node, 0);
        assert_eq!(m.entries.len(), NODE_MEMINFO.lines().count());
        let total = m.mem_total_kb().unwrap();
        let free = m.mem_free_kb().unwrap();
        // The kernel computes MemUsed as MemTotal - MemFree.
        assert_eq!(m.get("MemUsed"), Some(total - free));
        assert!(m.entries.iter().find(|e| e.key == "HugePages_Total").is_some_and(|e| !e.kb));
        assert!(m.entries.iter().find(|e| e.key == "Active(anon)").is_some_and(|e| e.kb));
    }

    #[test]
    fn node_meminfo_other_node_and_errors() {
        let text = NODE_MEMINFO.replace("Node 0 ", "Node 8 ");
        assert_eq!(parse_node_meminfo(&text).unwrap().0, 8);
        let mixed = NODE_MEMINFO.replacen("Node 0 MemFree", "Node 1 MemFree", 1);
        assert_eq!(parse_node_meminfo(&mixed).unwrap_err().field, Some("node"));
        assert!(parse_node_meminfo("").is_err());
        assert!(parse_node_meminfo("Node 0 MemTotal:  12 kB\n").is_err());
        assert!(parse_node_meminfo("Node 0 MemTotal:  12 kB\nNode 0 MemFree:  x kB\n").is_err());
        assert!(parse_node_meminfo("Node x MemTotal:  12 kB\n").is_err());
        assert!(parse_node_meminfo("MemTotal:  12 kB\n").is_err());
        assert!(parse_node_meminfo(&NODE_MEMINFO[..NODE_MEMINFO.len() - 5]).is_err());
    }

    #[test]
    fn proc_meminfo() {
        let m = parse_meminfo(MEMINFO).unwrap();
        assert_eq!(m.get("Hugepagesize"), Some(2048));
        assert!(m.mem_total_kb().unwrap() > 0);
        assert!(parse_meminfo("MemTotal: 1 kB\n").is_err());
    }

    #[test]
    fn node_numastat() {
        let c = parse_node_numastat(NODE_NUMASTAT).unwrap();
        assert_eq!(c.entries().len(), 6);
        assert_eq!(c.entries()[0].0, "numa_hit");
        // On a one-node machine nothing is remote.
        assert_eq!(c.get("numa_miss"), Some(0));
        assert_eq!(c.get("local_node"), c.get("numa_hit"));
        for cut in 0..NODE_NUMASTAT.len() {
            assert!(parse_node_numastat(&NODE_NUMASTAT[..cut]).is_err(), "cut {cut}");
        }
        assert!(parse_node_numastat(&NODE_NUMASTAT.replace("numa_miss 0", "numa_miss -1")).is_err());
    }

    proptest! {
        #[test]
        fn arbitrary_input_never_panics(s in "\\PC*") {
            let _ = parse_node_meminfo(&s);
            let _ = parse_meminfo(&s);
            let _ = parse_node_numastat(&s);
        }
    }
}
