//! Printing a topology: `numactl --hardware` text, a tree, and JSON.
//!
//! # numactl --hardware
//!
//! Byte-identical to Debian's numactl 2.0.16 for the same sysfs, so scripts that parse numactl's
//! output can parse ours. The format, as numactl.c `hardware()` and libnuma produce it (facts, not
//! code, carried over):
//!
//! ```text
//!   available: 2 nodes (0,8)        count and list of the nodeN directories; ranges as "0-3"
//!   node 0 cpus: 0 1 2 3            " %d" per CPU of nodeN/cpumap; a CPU-less node prints "node 8 cpus:"
//!   node 0 size: 7954 MB            MemTotal kB << 10, then >> 20: kB / 1024 rounded down
//!   node 0 free: 6862 MB            MemFree, same rounding
//!   ...                             one block per node, ascending id
//!   node distances:
//!   node   0   8                    "node " then "% 3d " per node id (trailing space kept)
//!     0:  10  20                    "% 3d: " then "% 3d " per distance
//!     8:  20  10
//! ```
//!
//! `% 3d` is printf's space flag with width 3: a leading space for the sign, padded to 3, so 5 is
//! `"  5"`, 10 is `" 10"` and 160 is `" 160"`. Without a distance matrix numactl prints
//! `No distance information available.` instead of the last block.
//!
//! # Tree
//!
//! node > package/die > last-level cache > core > CPUs, with offline CPUs and devices under their
//! node, and the tiers each node sees at the end. Groups are ordered by their lowest CPU.
//!
//! # JSON
//!
//! The [`Topology`] as serde writes it, plus `tiers`: the [`crate::tiers::TierMatrix`] rows, indexed
//! like `distances`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::{plural, CpuSet, IdSet, Tier, Topology};

/// printf's `% 3d` for a non-negative number.
fn pct3(v: u32) -> String {
    format!(" {v:>2}")
}

/// Text identical to `numactl --hardware` (numactl 2.0.16) for this topology.
pub fn numactl_hardware(topo: &Topology) -> String {
    let mut out = String::new();
    let ids = topo.node_ids();
    let _ = writeln!(out, "available: {} nodes ({})", topo.nodes.len(), ids.to_list());
    for node in &topo.nodes {
        let _ = write!(out, "node {} cpus:", node.id);
        for cpu in node.cpus.iter() {
            let _ = write!(out, " {cpu}");
        }
        out.push('\n');
        // numactl's fmt_mem for a size libnuma could not read (-1): `<not available>`.
        let mb =
            |unknown: bool, kb: u64| if unknown { "<not available>".to_string() } else { format!("{} MB", kb >> 10) };
        let _ = writeln!(out, "node {} size: {}", node.id, mb(node.mem_total_unknown, node.mem_total_kb));
        let _ = writeln!(out, "node {} free: {}", node.id, mb(node.mem_free_unknown, node.mem_free_kb));
    }
    if topo.distances.is_empty() {
        out.push_str("No distance information available.\n");
        return out;
    }
    out.push_str("node distances:\nnode ");
    for node in &topo.nodes {
        let _ = write!(out, "{} ", pct3(node.id));
    }
    out.push('\n');
    for (node, row) in topo.nodes.iter().zip(&topo.distances) {
        let _ = write!(out, "{}: ", pct3(node.id));
        for d in row {
            let _ = write!(out, "{} ", pct3(*d));
        }
        out.push('\n');
    }
    out
}

/// A labelled tree, printed with box-drawing connectors.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Tree {
    label: String,
    children: Vec<Tree>,
}

impl Tree {
    fn leaf(label: impl Into<String>) -> Tree {
        Tree { label: label.into(), children: Vec::new() }
    }

    fn render(&self, out: &mut String) {
        out.push_str(&self.label);
        out.push('\n');
        Self::render_children(&self.children, "", out);
    }

    fn render_children(children: &[Tree], prefix: &str, out: &mut String) {
        for (i, child) in children.iter().enumerate() {
            let last = i + 1 == children.len();
            let _ = writeln!(out, "{prefix}{}{}", if last { "└── " } else { "├── " }, child.label);
            let next = format!("{prefix}{}", if last { "    " } else { "│   " });
            Self::render_children(&child.children, &next, out);
        }
    }
}

fn device_label(d: &crate::PciDevice) -> String {
    let mut s = format!("{} {}", d.address, d.class.name());
    if !d.names.is_empty() {
        let _ = write!(s, " ({})", d.names.join(", "));
    }
    s
}

/// Tree view: node > package/die > LLC > core > CPUs, offline CPUs and devices under their node,
/// then the tiers from each node.
pub fn tree(topo: &Topology) -> String {
    let online: Vec<&crate::Cpu> = topo.cpus.iter().filter(|c| c.online).collect();
    let packages: IdSet = online.iter().map(|c| c.package).collect();
    let cores: std::collections::BTreeSet<(u32, u32, u32)> =
        online.iter().map(|c| (c.package, c.die, c.core)).collect();
    let total_mb: u64 = topo.nodes.iter().map(|n| n.mem_total_kb >> 10).sum();
    // Nodes whose memory is not known leave the total a lower bound: said so.
    let unknown = topo.nodes.iter().filter(|n| n.mem_total_unknown).count();
    let total = if unknown == 0 {
        format!("{total_mb} MB")
    } else {
        format!("{total_mb} MB known ({} not)", plural(unknown, "node"))
    };
    let mut root = Tree::leaf(format!(
        "machine: {} ({}), {}, {}, {} of {} CPUs online, {}",
        plural(topo.nodes.len(), "node"),
        topo.node_ids(),
        plural(packages.len(), "package"),
        plural(cores.len(), "core"),
        online.len(),
        topo.cpus.len(),
        total
    ));

    for node in &topo.nodes {
        let mem = match (node.mem_total_unknown, node.mem_free_unknown) {
            (false, false) => format!("{} MB ({} MB free)", node.mem_total_kb >> 10, node.mem_free_kb >> 10),
            (false, true) => format!("{} MB (free not available)", node.mem_total_kb >> 10),
            (true, _) => "memory not available (no meminfo)".to_string(),
        };
        let label = if node.cpus.is_empty() {
            format!("node {}: no CPUs, {mem}", node.id)
        } else {
            format!("node {}: {}, {mem}", node.id, plural(node.cpus.len(), "CPU"))
        };
        let mut node_tree = Tree::leaf(label);
        // (package, die) -> llc key -> (package, die, core) -> cpus
        type Cores = BTreeMap<(u32, u32, u32), CpuSet>;
        let mut groups: BTreeMap<(u32, u32), BTreeMap<Option<CpuSet>, Cores>> = BTreeMap::new();
        // Offline CPUs go under "offline CPUs" only: one still named in its node's cpulist (a read
        // racing a hotplug) read as a core 0 of package 0 here (review helper-56).
        for cpu in node.cpus.iter().filter_map(|c| topo.cpu(c)).filter(|c| c.online) {
            groups
                .entry((cpu.package, cpu.die))
                .or_default()
                .entry(cpu.llc.clone())
                .or_default()
                .entry((cpu.package, cpu.die, cpu.core))
                .or_default()
                .insert(cpu.id);
        }
        let mut pkg_list: Vec<_> = groups.into_iter().collect();
        let min_cpu = |llcs: &BTreeMap<Option<CpuSet>, Cores>| {
            llcs.values().flat_map(|c| c.values()).filter_map(IdSet::first).min().unwrap_or(u32::MAX)
        };
        pkg_list.sort_by_key(|(_, llcs)| min_cpu(llcs));
        for ((package, die), llcs) in pkg_list {
            let mut pkg_tree = Tree::leaf(format!("package {package} die {die}"));
            let mut llc_list: Vec<_> = llcs.into_iter().collect();
            llc_list.sort_by_key(|(_, cores)| cores.values().filter_map(IdSet::first).min().unwrap_or(u32::MAX));
            for (llc, cores) in llc_list {
                let label = match &llc {
                    Some(set) => format!("LLC {set} ({})", plural(cores.len(), "core")),
                    None => format!("no cache information ({})", plural(cores.len(), "core")),
                };
                let mut llc_tree = Tree::leaf(label);
                let mut core_list: Vec<_> = cores.into_iter().collect();
                core_list.sort_by_key(|(_, cpus)| cpus.first().unwrap_or(u32::MAX));
                for ((_, _, core), cpus) in core_list {
                    let what = if cpus.len() == 1 { "CPU" } else { "CPUs" };
                    llc_tree.children.push(Tree::leaf(format!("core {core}: {what} {cpus}")));
                }
                pkg_tree.children.push(llc_tree);
            }
            node_tree.children.push(pkg_tree);
        }
        let offline: CpuSet = topo.cpus.iter().filter(|c| c.node == node.id && !c.online).map(|c| c.id).collect();
        if !offline.is_empty() {
            node_tree.children.push(Tree::leaf(format!("offline CPUs: {offline}")));
        }
        let devices: Vec<Tree> =
            topo.devices.iter().filter(|d| d.node == Some(node.id)).map(|d| Tree::leaf(device_label(d))).collect();
        if !devices.is_empty() {
            node_tree.children.push(Tree { label: "devices".into(), children: devices });
        }
        root.children.push(node_tree);
    }

    let unplaced: Vec<Tree> = topo
        .devices
        .iter()
        .filter(|d| d.node.is_none_or(|n| topo.node(n).is_none()))
        .map(|d| Tree::leaf(device_label(d)))
        .collect();
    if !unplaced.is_empty() {
        root.children.push(Tree { label: "devices without a node".into(), children: unplaced });
    }

    let tiers = topo.tiers();
    let mut tier_tree = Tree::leaf("tiers (from node: nodes at each distance tier)");
    for (i, node) in topo.nodes.iter().enumerate() {
        let parts: Vec<String> = Tier::ALL
            .iter()
            .map(|t| {
                let set: IdSet =
                    topo.nodes.iter().zip(&tiers.tiers[i]).filter(|(_, x)| *x == t).map(|(n, _)| n.id).collect();
                let list = if set.is_empty() { "-".to_string() } else { set.to_list() };
                format!("{t} {list}")
            })
            .collect();
        tier_tree.children.push(Tree::leaf(format!("node {}: {}", node.id, parts.join(" | "))));
    }
    root.children.push(tier_tree);

    let mut out = String::new();
    root.render(&mut out);
    out
}

/// What `--json` prints: the topology plus its derived tiers.
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    /// The machine.
    #[serde(flatten)]
    pub topology: &'a Topology,
    /// `tiers[i][j]`: tier from `nodes[i]` to `nodes[j]`, indexed like `distances`.
    pub tiers: Vec<Vec<Tier>>,
}

/// JSON text (pretty) of the topology and its tiers.
pub fn json(topo: &Topology) -> String {
    let report = Report { topology: topo, tiers: topo.tiers().tiers };
    serde_json::to_string_pretty(&report).expect("a topology always serializes to JSON")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::{parse_topology, Format};

    /// Two sockets with SMT2, a CXL-style memory node near socket 0, an offline CPU, a device on
    /// node 0 and one without a node.
    const MACHINE: &str = r#"
        smt = 2
        distances = [[10, 21, 14], [21, 10, 26], [14, 26, 10]]
        [[nodes]]
        id = 0
        cpus = "0-1,4-5"
        mem_gb = 4
        free = "1G"
        package = 0
        [[nodes]]
        id = 1
        cpus = "2-3,6-7"
        mem_gb = 4
        package = 1
        [[nodes]]
        id = 2
        memory = "16G"
        [[cpu]]
        id = 7
        online = false
        [[devices]]
        address = "0000:41:00.0"
        class = "network"
        node = 0
        names = ["eth0"]
        [[devices]]
        address = "0000:00:02.0"
        class = "storage"
    "#;

    fn machine() -> Topology {
        parse_topology(MACHINE, Format::Toml, "<test>").unwrap()
    }

    #[test]
    fn tree_shows_every_level_worked_out_by_hand() {
        // Node 1: CPUs 2,3,6,7 with smt 2 -> cores {2,6} and {3,7}; 7 is offline, so core 1 shows
        // CPU 3 alone and the LLC loses 7. Tiers: 14 < 20 puts node 2 in package 0; cross
        // distances 21 and 26, m = 21, 26 < 26.25 -> one hop.
        let expected = "\
machine: 3 nodes (0-2), 2 packages, 4 cores, 7 of 8 CPUs online, 24576 MB
├── node 0: 4 CPUs, 4096 MB (1024 MB free)
│   ├── package 0 die 0
│   │   └── LLC 0-1,4-5 (2 cores)
│   │       ├── core 0: CPUs 0,4
│   │       └── core 1: CPUs 1,5
│   └── devices
│       └── 0000:41:00.0 network (eth0)
├── node 1: 3 CPUs, 4096 MB (4096 MB free)
│   ├── package 1 die 0
│   │   └── LLC 2-3,6 (2 cores)
│   │       ├── core 0: CPUs 2,6
│   │       └── core 1: CPU 3
│   └── offline CPUs: 7
├── node 2: no CPUs, 16384 MB (16384 MB free)
├── devices without a node
│   └── 0000:00:02.0 storage
└── tiers (from node: nodes at each distance tier)
    ├── node 0: local 0 | same-socket 2 | one-hop 1 | far -
    ├── node 1: local 1 | same-socket - | one-hop 0,2 | far -
    └── node 2: local 2 | same-socket 0 | one-hop 1 | far -
";
        assert_eq!(tree(&machine()), expected);
    }

    /// An offline CPU its node's cpulist still names (a read racing a hotplug; arm64 kernels
    /// before the fix) is listed as offline only, not as a core of package 0; memory a node's
    /// meminfo did not give is said to be unknown, not 0 MB (review helper-56).
    #[test]
    fn tree_lists_an_offline_cpu_once_and_unknown_memory_as_such() {
        let mut t = machine();
        t.nodes[1].cpus.insert(7);
        (t.nodes[2].mem_total_kb, t.nodes[2].mem_free_kb) = (0, 0);
        t.nodes[2].mem_total_unknown = true;
        t.nodes[2].mem_free_unknown = true;
        let text = tree(&t);
        assert!(text.contains("node 1: 4 CPUs, 4096 MB (4096 MB free)\n│   ├── package 1 die 0\n"), "{text}");
        assert!(!text.contains("package 0 die 0\n│   │   └── no cache information"), "{text}");
        assert_eq!(text.matches("CPU 7").count() + text.matches(",7").count(), 0, "{text}");
        assert!(text.contains("offline CPUs: 7"), "{text}");
        assert!(text.contains("node 2: no CPUs, memory not available (no meminfo)"), "{text}");
        assert!(
            text.starts_with(
                "machine: 3 nodes (0-2), 2 packages, 4 cores, 7 of 8 CPUs online, 8192 MB known (1 node not)\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn tree_without_cache_information() {
        let t = parse_topology(
            "[[nodes]]\nid = 0\ncpus = \"0\"\nmem_gb = 1\n[[cpu]]\nid = 0\nllc = \"\"\n",
            Format::Toml,
            "<test>",
        )
        .unwrap();
        assert!(tree(&t).contains("└── no cache information (1 core)\n"), "{}", tree(&t));
    }

    #[test]
    fn json_is_the_topology_plus_tiers() {
        let t = machine();
        let text = json(&t);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["tiers"][0], serde_json::json!(["local", "one-hop", "same-socket"]));
        assert_eq!(v["tiers"][1], serde_json::json!(["one-hop", "local", "one-hop"]));
        assert_eq!(v["nodes"][1]["cpus"], "2-3,6");
        assert_eq!(v["cpus"][7]["online"], false);
        assert_eq!(v["devices"][1]["class"], "network");
        assert_eq!(v["devices"][0]["node"], serde_json::Value::Null);
        // The tiers are extra: the same text reads back as the topology.
        assert_eq!(serde_json::from_str::<Topology>(&text).unwrap(), t);
    }

    #[test]
    fn numactl_text_without_distances() {
        let mut t = machine();
        t.distances.clear();
        assert!(numactl_hardware(&t).ends_with("node 2 free: 16384 MB\nNo distance information available.\n"));
    }

    #[test]
    fn printf_space_flag_width_three() {
        assert_eq!(pct3(0), "  0");
        assert_eq!(pct3(5), "  5");
        assert_eq!(pct3(10), " 10");
        assert_eq!(pct3(160), " 160");
        assert_eq!(pct3(1023), " 1023");
    }
}
