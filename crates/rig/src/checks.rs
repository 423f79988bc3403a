//! The judgements the rig tests make, as pure functions over text captured in a guest.
//!
//! They read the kernel's own files (`numa_maps`, `/proc/PID/task/TID/stat`, `status`, node `cpulist`) and the
//! reference tools' output; never numapilot's own view of the result. Kept here, not in the tests, so each can be
//! unit-tested against real captured files and shown to fail on wrong input.
//!
//! * [`compare_hardware`]: `numapilot topo` vs `numactl --hardware`, exact except the `node N free:` lines, which
//!   two reads a moment apart may differ in by a few MiB (the tolerance is the caller's, in MiB).
//! * [`compare_exact`]: any two texts, with a line diff in the message.
//! * [`check_placement`]: a process's anonymous pages all on the wanted nodes (from `N<k>=` counts of the
//!   VMAs that have no `file=`), and each thread's last CPU (stat field 39) and `Cpus_allowed_list` inside the
//!   wanted CPUs.
//!
//! ```text
//!   numa_maps  7f..000 bind:1 anon=2048 dirty=2048 N1=2048 kernelpagesize_kB=4    -> node 1: 8 MiB
//!   task stat  812 (rig-toucher) S 1 ... <field 39 = last CPU> ...                 -> CPU 3 in node 1 {2,3}
//!   status     Cpus_allowed_list:   2-3                                            -> == node 1 {2,3}
//! ```
//!
//! File-backed VMAs are left out of the page check: their page-cache pages were placed when the file was first
//! read (for the initramfs, while the kernel unpacked it), whatever the policy of the process mapping them now.

use std::collections::{BTreeMap, BTreeSet};

/// Parses a kernel CPU or node list (`0-3,8,10-11`; empty = empty set).
pub fn parse_list(s: &str) -> Option<BTreeSet<u32>> {
    let mut set = BTreeSet::new();
    let s = s.trim();
    if s.is_empty() {
        return Some(set);
    }
    for part in s.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                if a > b {
                    return None;
                }
                set.extend(a..=b);
            }
            None => {
                set.insert(part.parse().ok()?);
            }
        }
    }
    Some(set)
}

/// A line diff of two texts for failure messages: every differing line with its number, then both texts.
pub fn diff(label_a: &str, a: &str, label_b: &str, b: &str) -> String {
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let mut s = String::new();
    for i in 0..la.len().max(lb.len()) {
        let (x, y) = (la.get(i).copied(), lb.get(i).copied());
        if x != y {
            s += &format!("line {}:\n  {label_a}: {:?}\n  {label_b}: {:?}\n", i + 1, x, y);
        }
    }
    format!("{s}--- {label_a} ---\n{a}--- {label_b} ---\n{b}")
}

/// `Ok` when the texts are identical, else the diff.
pub fn compare_exact(label_a: &str, a: &str, label_b: &str, b: &str) -> Result<(), String> {
    if a == b {
        Ok(())
    } else {
        Err(diff(label_a, a, label_b, b))
    }
}

/// `ours` read between two reads of the reference (`before`, `after`): the same lines with the same words where
/// they are not numbers, and every number of `ours` inside the range the reference's two reads span, widened by
/// `tol(row label)` (in the table's unit) for what moves between the processes without moving monotonically (each
/// command's own page tables, stack and mapped binary).
///
/// A table whose last column is `Total` (numastat -n, -m) sums its node columns, each read at its own moment: when
/// memory moves from one node to another between the reads, ours can read one node before the move and the other
/// after it, so its total may lie outside the two reference totals (4-node guest: MemFree 1336.29 against 1337.71 and
/// 1339.88, every node inside its own range). The total is checked against the sum of the node columns' ranges,
/// widened by the tolerance once per column.
pub fn compare_sandwiched(
    label: &str,
    before: &str,
    ours: &str,
    after: &str,
    tol: &dyn Fn(&str) -> f64,
) -> Result<(), String> {
    let (b, o, a): (Vec<&str>, Vec<&str>, Vec<&str>) =
        (before.lines().collect(), ours.lines().collect(), after.lines().collect());
    if o.len() != b.len() || o.len() != a.len() {
        return Err(format!(
            "{label}: {} lines vs {} and {}\n{}",
            o.len(),
            b.len(),
            a.len(),
            diff("reference", before, "ours", ours)
        ));
    }
    let has_total = b.iter().any(|l| l.split_whitespace().last() == Some("Total"));
    let num = |w: &str| w.bytes().all(|c| c.is_ascii_digit() || c == b'.').then(|| w.parse::<f64>().ok()).flatten();
    for (i, ((lb, lo), la)) in b.iter().zip(&o).zip(&a).enumerate() {
        let (wb, wo, wa): (Vec<&str>, Vec<&str>, Vec<&str>) =
            (lb.split_whitespace().collect(), lo.split_whitespace().collect(), la.split_whitespace().collect());
        if wo.len() != wb.len() || wo.len() != wa.len() || lo.len() != lb.len() {
            return Err(format!("{label}: line {} differs in shape:\n  reference {lb:?}\n  ours      {lo:?}", i + 1));
        }
        let tol = tol(wo.first().copied().unwrap_or(""));
        // The node columns' ranges summed, for a Total column (the last number of a row with several).
        let numeric: Vec<(f64, f64)> = wb.iter().zip(&wa).filter_map(|(xb, xa)| Some((num(xb)?, num(xa)?))).collect();
        let total_at = (has_total && numeric.len() >= 2).then(|| wo.len() - 1);
        let nodes = &numeric[..numeric.len().saturating_sub(1)];
        let node_sum = (
            nodes.iter().map(|(x, y)| x.min(*y)).sum::<f64>() - tol * nodes.len() as f64,
            nodes.iter().map(|(x, y)| x.max(*y)).sum::<f64>() + tol * nodes.len() as f64,
        );
        for (j, ((xb, xo), xa)) in wb.iter().zip(&wo).zip(&wa).enumerate() {
            match (num(xb), num(xo), num(xa)) {
                (Some(vb), Some(vo), Some(va)) => {
                    let (lo_, hi) = if total_at == Some(j) {
                        (node_sum.0.min(vb.min(va) - tol), node_sum.1.max(vb.max(va) + tol))
                    } else {
                        (vb.min(va) - tol, vb.max(va) + tol)
                    };
                    if vo < lo_ || vo > hi {
                        return Err(format!(
                            "{label}: line {}: {xo} outside [{xb}, {xa}] +- {tol}:\n  before {lb:?}\n  ours   {lo:?}\n  after  {la:?}",
                            i + 1
                        ));
                    }
                }
                _ if xo == xb => {}
                _ => return Err(format!("{label}: line {}: {xo:?} vs {xb:?}:\n  {lb:?}\n  {lo:?}", i + 1)),
            }
        }
    }
    Ok(())
}

/// `node N free: X MB` -> (N, X).
fn free_line(l: &str) -> Option<(&str, i64)> {
    let rest = l.strip_prefix("node ")?;
    let (n, rest) = rest.split_once(' ')?;
    let mb = rest.strip_prefix("free: ")?.strip_suffix(" MB")?;
    Some((n, mb.parse().ok()?))
}

/// `numactl --hardware` vs ours: every line identical except `node N free: X MB`, where X may differ by at most
/// `free_tolerance_mb`.
pub fn compare_hardware(reference: &str, ours: &str, free_tolerance_mb: i64) -> Result<(), String> {
    let (a, b): (Vec<&str>, Vec<&str>) = (reference.lines().collect(), ours.lines().collect());
    let same = a.len() == b.len()
        && reference.ends_with('\n') == ours.ends_with('\n')
        && a.iter().zip(&b).all(|(x, y)| {
            x == y
                || matches!((free_line(x), free_line(y)),
                    (Some((n1, f1)), Some((n2, f2))) if n1 == n2 && (f1 - f2).abs() <= free_tolerance_mb)
        });
    if same {
        Ok(())
    } else {
        Err(format!(
            "differs beyond free-memory drift of {free_tolerance_mb} MB:\n{}",
            diff("numactl --hardware", reference, "numapilot topo", ours)
        ))
    }
}

/// One VMA of `/proc/PID/numa_maps`, as far as the checks need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaMapsVma {
    /// Start address (hex text).
    pub addr: String,
    /// Memory policy text (`default`, `bind:1`, `interleave:0-3`, ...).
    pub policy: String,
    /// Backed by a file.
    pub file: bool,
    /// Pages per node (`N<k>=<pages>`).
    pub pages: BTreeMap<u32, u64>,
    /// Page size, KiB (`kernelpagesize_kB`, 4 when absent).
    pub page_kb: u64,
    /// Most processes mapping one of its pages (`mapmax`, printed only above 1; 1 when absent).
    pub mapmax: u64,
}

/// Parses numa_maps; malformed lines are reported with their number.
pub fn parse_numa_maps(text: &str) -> Result<Vec<NumaMapsVma>, String> {
    let mut v = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut it = line.split_whitespace();
        let (Some(addr), Some(policy)) = (it.next(), it.next()) else {
            return Err(format!("numa_maps line {}: {line:?}: needs an address and a policy", i + 1));
        };
        let mut vma = NumaMapsVma {
            addr: addr.into(),
            policy: policy.into(),
            file: false,
            pages: BTreeMap::new(),
            page_kb: 4,
            mapmax: 1,
        };
        for tok in it {
            if tok.starts_with("file=") {
                vma.file = true;
            } else if let Some(v) = tok.strip_prefix("mapmax=") {
                vma.mapmax = v.parse().map_err(|_| format!("numa_maps line {}: bad {tok:?}", i + 1))?;
            } else if let Some(v) = tok.strip_prefix("kernelpagesize_kB=") {
                vma.page_kb = v.parse().map_err(|_| format!("numa_maps line {}: bad {tok:?}", i + 1))?;
            } else if let Some(rest) = tok.strip_prefix('N') {
                if let Some((n, p)) = rest.split_once('=') {
                    let (Ok(n), Ok(p)) = (n.parse::<u32>(), p.parse::<u64>()) else {
                        return Err(format!("numa_maps line {}: bad {tok:?}", i + 1));
                    };
                    vma.pages.insert(n, p);
                }
            }
        }
        v.push(vma);
    }
    Ok(v)
}

/// Bytes per node over the VMAs selected by `keep`.
pub fn bytes_by_node(vmas: &[NumaMapsVma], keep: impl Fn(&NumaMapsVma) -> bool) -> BTreeMap<u32, u64> {
    let mut m = BTreeMap::new();
    for v in vmas.iter().filter(|v| keep(v)) {
        for (&n, &p) in &v.pages {
            *m.entry(n).or_insert(0) += p * v.page_kb * 1024;
        }
    }
    m
}

/// Field 39 (`processor`, the CPU the task last ran on) of a `/proc/.../stat` line. The command name may hold
/// spaces and parentheses, so fields are counted after the last `)`.
pub fn stat_processor(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // Field 3 (state) is the first after ')'; field 39 is 36 further.
    rest.split_whitespace().nth(36)?.parse().ok()
}

/// The value of `Key:` in a `/proc/.../status` text, trimmed.
pub fn status_field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(':').map(str::trim))
}

/// What [`check_placement`] saw (for reports).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Anonymous bytes per node.
    pub anon_bytes: BTreeMap<u32, u64>,
    /// (tid, last CPU, Cpus_allowed_list) per thread.
    pub threads: Vec<(u32, u32, String)>,
}

/// One thread's files.
#[derive(Debug, Clone)]
pub struct ThreadFiles {
    /// Thread id.
    pub tid: u32,
    /// `/proc/PID/task/TID/stat`.
    pub stat: String,
    /// `/proc/PID/task/TID/status`.
    pub status: String,
}

/// Checks that the anonymous memory (at least `min_bytes`) is only on `nodes` and every thread's last CPU and
/// allowed CPUs are inside `cpus`. Every violation is listed in the error.
pub fn check_placement(
    numa_maps: &str,
    threads: &[ThreadFiles],
    nodes: &BTreeSet<u32>,
    cpus: &BTreeSet<u32>,
    min_bytes: u64,
) -> Result<Placement, String> {
    let vmas = parse_numa_maps(numa_maps)?;
    let anon = bytes_by_node(&vmas, |v| !v.file);
    let mut problems = Vec::new();
    for (n, b) in &anon {
        if !nodes.contains(n) && *b > 0 {
            problems.push(format!("{b} bytes of anonymous memory on node {n}"));
        }
    }
    let on_nodes: u64 = anon.iter().filter(|(n, _)| nodes.contains(n)).map(|(_, b)| b).sum();
    if on_nodes < min_bytes {
        problems.push(format!("only {on_nodes} anonymous bytes on nodes {nodes:?}, expected at least {min_bytes}"));
    }
    if threads.is_empty() {
        problems.push("no threads".into());
    }
    let mut seen = Vec::new();
    for t in threads {
        let cpu = stat_processor(&t.stat);
        let allowed = status_field(&t.status, "Cpus_allowed_list").unwrap_or("").to_string();
        match cpu {
            Some(c) if cpus.contains(&c) => {}
            Some(c) => problems.push(format!("thread {} last ran on CPU {c}, outside {cpus:?}", t.tid)),
            None => problems.push(format!("thread {}: no field 39 in stat {:?}", t.tid, t.stat)),
        }
        match parse_list(&allowed) {
            Some(set) if &set == cpus => {}
            _ => problems.push(format!("thread {} Cpus_allowed_list {allowed:?}, expected {cpus:?}", t.tid)),
        }
        seen.push((t.tid, cpu.unwrap_or(u32::MAX), allowed));
    }
    if problems.is_empty() {
        Ok(Placement { anon_bytes: anon, threads: seen })
    } else {
        Err(format!("{}\nanonymous bytes per node: {anon:?}", problems.join("\n")))
    }
}

/// What `numactl --hardware` says about the machine (sizes and free memory left out).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Hardware {
    /// Node ids in order, with their CPUs.
    pub cpus: BTreeMap<u32, Vec<u32>>,
    /// Distance matrix rows in node order.
    pub distances: Vec<Vec<u32>>,
}

/// Parses `numactl --hardware` output (numactl 2.0.16's format: `node N cpus: ...` lines, then the
/// `node distances:` table); `Err` names the line it does not understand.
pub fn parse_hardware(text: &str) -> Result<Hardware, String> {
    let mut hw = Hardware::default();
    let mut in_table = false;
    for line in text.lines() {
        if line == "node distances:" {
            in_table = true;
        } else if in_table {
            if line.starts_with("node ") {
                continue; // header row
            }
            let (_, row) = line.split_once(':').ok_or_else(|| format!("distance row {line:?}"))?;
            let row: Result<Vec<u32>, _> = row.split_whitespace().map(str::parse).collect();
            hw.distances.push(row.map_err(|_| format!("distance row {line:?}"))?);
        } else if let Some(rest) = line.strip_prefix("node ") {
            if let Some((n, cpus)) = rest.split_once(" cpus:") {
                let n = n.parse().map_err(|_| format!("node line {line:?}"))?;
                let cpus: Result<Vec<u32>, _> = cpus.split_whitespace().map(str::parse).collect();
                hw.cpus.insert(n, cpus.map_err(|_| format!("cpus line {line:?}"))?);
            }
        }
    }
    Ok(hw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn fixture(rel: &str) -> String {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures").join(rel);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    /// The host fixture's processes, by comm.
    fn host_pid(comm: &str) -> String {
        let cmd = fixture("host-6.18/expected/cmd.txt");
        let line = cmd.lines().find(|l| l.ends_with(&format!("(comm: {comm})"))).unwrap();
        line.split_whitespace().nth(3).unwrap().to_string()
    }

    #[test]
    fn hardware_of_the_host_fixture() {
        let hw = parse_hardware(&fixture("host-6.18/expected/numactl-hardware.txt")).unwrap();
        assert_eq!(hw.cpus, BTreeMap::from([(0, vec![0, 1])]));
        assert_eq!(hw.distances, vec![vec![10]]);
        let cpuless = "available: 2 nodes (0-1)\nnode 0 cpus: 0\nnode 0 size: 1 MB\nnode 0 free: 1 MB\n\
                       node 1 cpus:\nnode 1 size: 1 MB\nnode 1 free: 1 MB\nnode distances:\nnode   0   1 \n\
                         0:  10  20 \n  1:  20  10 \n";
        let hw = parse_hardware(cpuless).unwrap();
        assert_eq!(hw.cpus, BTreeMap::from([(0, vec![0]), (1, vec![])]));
        assert_eq!(hw.distances, vec![vec![10, 20], vec![20, 10]]);
        assert!(parse_hardware("node 0 cpus: a\n").is_err());
    }

    #[test]
    fn sandwiched_numbers_must_lie_between_the_two_reads() {
        let t =
            |x: &str| format!("                 Node 0 Total\n---------------- ------ -----\nNuma_Hit         {x}\n");
        let (b, a) = (t("100.00 100.00"), t("102.00 102.00"));
        let flat = |x: f64| move |_: &str| x;
        assert!(compare_sandwiched("n", &b, &t("101.00 101.00"), &a, &flat(0.0)).is_ok());
        assert!(compare_sandwiched("n", &b, &t("100.00 102.00"), &a, &flat(0.0)).is_ok());
        let e = compare_sandwiched("n", &b, &t("102.50 102.00"), &a, &flat(0.25)).unwrap_err();
        assert!(e.contains("102.50 outside [100.00, 102.00]"), "{e}");
        assert!(compare_sandwiched("n", &b, &t("102.50 102.00"), &a, &flat(0.5)).is_ok());
        assert!(compare_sandwiched("n", &b, &t(" 99.00 101.00"), &a, &flat(0.5)).is_err());
        // The tolerance is per row.
        let per_row = |l: &str| if l == "Numa_Hit" { 1.0 } else { 0.0 };
        assert!(compare_sandwiched("n", &b, &t("102.50 102.00"), &a, &per_row).is_ok());
        // Words and shape must agree exactly.
        let other = b.replace("Numa_Hit", "Numa_Hot");
        assert!(compare_sandwiched("n", &b, &other, &a, &flat(1e9)).unwrap_err().contains("Numa_Hot"));
        assert!(compare_sandwiched("n", &b, &t("101.0 101.00"), &a, &flat(1e9)).unwrap_err().contains("shape"));
        assert!(compare_sandwiched("n", &b, &format!("{b}x\n"), &a, &flat(1e9)).unwrap_err().contains("lines"));
    }

    /// The 4-node guest's MemFree row as read (the suite failed on it): node 0 rose and node 3 fell between the
    /// reads, ours read node 0 early and node 3 late, so its total is below both reference totals while every node
    /// is inside its range. The total is bounded by the nodes' summed ranges: 1335.96 - 4 .. 1341.64 + 4.
    #[test]
    fn a_total_column_is_bounded_by_its_nodes_ranges() {
        let t = |x: &str| {
            format!("                 Node 0 Node 1 Node 2 Node 3 Total\n---------------- ------ ------ ------ ------ -----\nMemFree {x}\n")
        };
        let b = t("354.97 314.02 311.98 356.75 1337.71");
        let a = t("358.71 314.07 312.11 354.99 1339.88");
        let ours = t("355.12 314.07 312.11 354.99 1336.29");
        let flat = |x: f64| move |_: &str| x;
        assert!(compare_sandwiched("m", &b, &ours, &a, &flat(1.0)).is_ok());
        // A total beyond the nodes' summed ranges still fails, and a node outside its own range too.
        let e = compare_sandwiched("m", &b, &t("355.12 314.07 312.11 354.99 1330.00"), &a, &flat(1.0)).unwrap_err();
        assert!(e.contains("1330.00 outside"), "{e}");
        assert!(compare_sandwiched("m", &b, &t("352.00 314.07 312.11 354.99 1336.29"), &a, &flat(1.0)).is_err());
    }

    #[test]
    fn lists() {
        assert_eq!(parse_list("0-2,5").unwrap(), BTreeSet::from([0, 1, 2, 5]));
        assert_eq!(parse_list("\n").unwrap(), BTreeSet::new());
        assert!(parse_list("3-1").is_none());
        assert!(parse_list("a").is_none());
    }

    #[test]
    fn hardware_tolerates_only_free_drift() {
        let a = "available: 2 nodes (0-1)\nnode 0 cpus: 0 1\nnode 0 size: 481 MB\nnode 0 free: 400 MB\n";
        let b = "available: 2 nodes (0-1)\nnode 0 cpus: 0 1\nnode 0 size: 481 MB\nnode 0 free: 403 MB\n";
        assert!(compare_hardware(a, b, 4).is_ok());
        assert!(compare_hardware(a, b, 2).is_err());
        let c = b.replace("size: 481", "size: 482");
        let e = compare_hardware(a, &c, 4).unwrap_err();
        assert!(e.contains("line 3"), "{e}");
        assert!(compare_hardware(a, a.trim_end(), 4).is_err(), "missing final newline counts");
        assert!(compare_hardware(a, &format!("{a}\n"), 4).is_err(), "extra line counts");
    }

    #[test]
    fn host_fixture_numa_maps_and_stat() {
        let pid = host_pid("rig-toucher");
        let maps = fixture(&format!("host-6.18/proc/{pid}/numa_maps"));
        let vmas = parse_numa_maps(&maps).unwrap();
        let anon = bytes_by_node(&vmas, |v| !v.file);
        // 8 MiB touched under interleave on a one-node host: all of it on node 0.
        assert!(anon[&0] >= 8 << 20, "{anon:?}");
        assert_eq!(anon.keys().copied().collect::<Vec<_>>(), [0]);
        let stat = fixture(&format!("host-6.18/proc/{pid}/stat"));
        assert!(stat_processor(&stat).unwrap() <= 1);
    }

    #[test]
    fn stat_field_39_with_parentheses_in_comm() {
        let pid = host_pid("a (b) c");
        let stat = fixture(&format!("host-6.18/proc/{pid}/stat"));
        assert!(stat.contains("(a (b) c)"));
        let cpu = stat_processor(&stat).unwrap();
        assert!(cpu <= 1);
        let status = fixture(&format!("host-6.18/proc/{pid}/status"));
        assert_eq!(status_field(&status, "Cpus_allowed_list"), Some("0-1"));
        assert_eq!(status_field(&status, "Name"), Some("a (b) c"));
    }

    fn thread(tid: u32, cpu: u32, allowed: &str) -> ThreadFiles {
        let mut f: Vec<String> = (3..=52).map(|i| i.to_string()).collect();
        f[0] = "S".into();
        f[36] = cpu.to_string();
        ThreadFiles {
            tid,
            stat: format!("{tid} (x (y) z) {}\n", f.join(" ")),
            status: format!("Name:\tx\nCpus_allowed_list:\t{allowed}\n"),
        }
    }

    #[test]
    fn placement_passes_and_fails_for_the_right_reasons() {
        let maps = "55d0 default file=/usr/local/bin/rig-toucher mapped=10 N0=10 kernelpagesize_kB=4\n\
                    7f00 bind:1 anon=4096 dirty=4096 N1=4096 kernelpagesize_kB=4\n\
                    7ffc bind:1 stack anon=3 dirty=3 N1=3 kernelpagesize_kB=4\n";
        let nodes = BTreeSet::from([1]);
        let cpus = BTreeSet::from([2, 3]);
        let ok = [thread(10, 2, "2-3"), thread(11, 3, "2-3")];
        let p = check_placement(maps, &ok, &nodes, &cpus, 16 << 20).unwrap();
        assert_eq!(p.anon_bytes[&1], (4096 + 3) * 4096);
        assert!(!p.anon_bytes.contains_key(&0), "file pages on node 0 are not counted");

        let wrong_cpu = [thread(10, 2, "2-3"), thread(11, 0, "2-3")];
        let e = check_placement(maps, &wrong_cpu, &nodes, &cpus, 0).unwrap_err();
        assert!(e.contains("thread 11 last ran on CPU 0"), "{e}");

        let wrong_mask = [thread(10, 2, "0-3")];
        let e = check_placement(maps, &wrong_mask, &nodes, &cpus, 0).unwrap_err();
        assert!(e.contains("Cpus_allowed_list \"0-3\""), "{e}");

        let spread = "7f00 interleave:0-1 anon=4096 dirty=4096 N0=2048 N1=2048 kernelpagesize_kB=4\n";
        let e = check_placement(spread, &ok, &nodes, &cpus, 0).unwrap_err();
        assert!(e.contains("8388608 bytes of anonymous memory on node 0"), "{e}");

        let e = check_placement(maps, &ok, &nodes, &cpus, 64 << 20).unwrap_err();
        assert!(e.contains("expected at least"), "{e}");

        assert!(check_placement("7f00 bind:1 N1=x\n", &ok, &nodes, &cpus, 0).is_err());
        assert!(check_placement(maps, &[], &nodes, &cpus, 0).unwrap_err().contains("no threads"));
    }
}
