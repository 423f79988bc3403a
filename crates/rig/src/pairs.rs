//! The judge of the pairs scenario (rig/scenarios/pairs.sh, crates/rig/tests/pairs.rs): where processes that talk
//! to each other or share memory run, and where their memory is, over time, from the kernel's own files as the
//! scenario's `rig-sampler` copied them, never from the daemon's account.
//!
//! # Problem
//!
//! The daemon claims (its journal) that it put two processes on one node because they talk or share memory. The
//! claim must be checked against what the kernel says: the CPU each thread last ran on (field 39 of its stat line)
//! and the pages of each mapping per node (numa_maps), sampled while the daemon runs.
//!
//! # Approach
//!
//! ```text
//!   samples (rig-sampler)    S <uptime>  P <pid>  <numa_maps lines>  T <task stat line>...  E      -> [Pass]
//!   node-cpus                "N LIST" a line (sysfs node/nodeN/cpulist)                          -> CPU -> node
//!   a thread ran between two passes when its utime + stime (fields 14, 15) grew (or it is new):
//!     its field 39 is where it ran; a thread that slept through the interval says nothing (its field 39 is
//!     where it last ran, possibly before the daemon narrowed its CPUs)
//!   together_since(pids, from): the first pass at or after `from` from which, in every later pass, every thread
//!     of `pids` that ran did so on one node, the same node all along (at least MIN_PASSES passes with a thread
//!     that ran)
//!   buffer: a process's largest mapping (all pages, any node) and its largest anonymous one, bytes per node
//! ```
//!
//! # Limits
//!
//! Field 39 is the CPU of the thread's last run, not every CPU it ran on between two passes: a thread that ran on
//! two nodes within one interval counts on the second only. The sampler's passes are 0.5 s apart (the scenario's
//! PAIRS_SAMPLE_MS), so a time is known to a pass.

use std::collections::{BTreeMap, BTreeSet};

use crate::checks::{parse_list, parse_numa_maps, stat_processor, NumaMapsVma};

/// Passes with a thread that ran, at least, after the start of a run on one node for it to count as staying there.
pub const MIN_PASSES: usize = 3;

/// One thread in one pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadPass {
    /// Thread id.
    pub tid: u32,
    /// Field 39: the CPU it last ran on.
    pub cpu: u32,
    /// utime + stime (fields 14 and 15), clock ticks.
    pub ticks: u64,
}

/// One process in one pass.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcPass {
    /// Its largest mapping (by resident pages), bytes per node.
    pub largest: BTreeMap<u32, u64>,
    /// Its largest anonymous mapping, bytes per node.
    pub largest_anon: BTreeMap<u32, u64>,
    /// Its threads, in tid order.
    pub threads: Vec<ThreadPass>,
}

/// One pass of the sampler.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pass {
    /// Guest uptime at the pass, s.
    pub up_s: f64,
    /// Processes by pid.
    pub procs: BTreeMap<u32, ProcPass>,
}

fn vma_bytes(v: &NumaMapsVma) -> u64 {
    v.pages.values().sum::<u64>() * v.page_kb * 1024
}

fn per_node(v: Option<&NumaMapsVma>) -> BTreeMap<u32, u64> {
    v.map(|v| v.pages.iter().map(|(&n, &p)| (n, p * v.page_kb * 1024)).collect()).unwrap_or_default()
}

/// utime + stime of a stat line.
fn stat_ticks(stat: &str) -> Option<u64> {
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Field 3 (state) is f[0]; fields 14 and 15 are f[11] and f[12].
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// Parses rig-sampler's record; a malformed line is an error naming its number.
pub fn parse_samples(text: &str) -> Result<Vec<Pass>, String> {
    let mut out: Vec<Pass> = Vec::new();
    // The process being read: pid, numa_maps lines, threads.
    let mut cur: Option<(u32, String, Vec<ThreadPass>)> = None;
    for (i, line) in text.lines().enumerate() {
        let err =
            |why: &str| format!("samples line {}: {why}: {:?}", i + 1, line.chars().take(120).collect::<String>());
        if let Some(rest) = line.strip_prefix("S ") {
            if cur.is_some() {
                return Err(err("a pass starts inside a process record"));
            }
            let up_s = rest.trim().parse().map_err(|_| err("uptime is not a number"))?;
            out.push(Pass { up_s, procs: BTreeMap::new() });
        } else if let Some(rest) = line.strip_prefix("P ") {
            if out.is_empty() || cur.is_some() {
                return Err(err("a process record outside a pass or inside another"));
            }
            cur = Some((rest.trim().parse().map_err(|_| err("pid is not a number"))?, String::new(), Vec::new()));
        } else if let Some(stat) = line.strip_prefix("T ") {
            let (_, _, threads) = cur.as_mut().ok_or_else(|| err("a thread line outside a process record"))?;
            let tid = stat.split_whitespace().next().and_then(|t| t.parse().ok()).ok_or_else(|| err("no tid"))?;
            let cpu = stat_processor(stat).ok_or_else(|| err("no CPU (field 39)"))?;
            let ticks = stat_ticks(stat).ok_or_else(|| err("no utime and stime (fields 14, 15)"))?;
            threads.push(ThreadPass { tid, cpu, ticks });
        } else if line == "E" {
            let (pid, maps, threads) = cur.take().ok_or_else(|| err("E without a process record"))?;
            let vmas = parse_numa_maps(&maps).map_err(|e| err(&format!("pid {pid}: {e}")))?;
            let largest = per_node(vmas.iter().max_by_key(|v| vma_bytes(v)));
            let largest_anon = per_node(vmas.iter().filter(|v| !v.file).max_by_key(|v| vma_bytes(v)));
            out.last_mut().expect("checked at P").procs.insert(pid, ProcPass { largest, largest_anon, threads });
        } else if let Some((_, maps, _)) = cur.as_mut() {
            maps.push_str(line);
            maps.push('\n');
        } else if line.starts_with("C ") || line.trim().is_empty() {
            // The sampler's own cost line, and blank lines.
        } else {
            return Err(err("expected S, P, T, E or C"));
        }
    }
    if cur.is_some() {
        return Err("samples end inside a process record".into());
    }
    Ok(out)
}

/// The CPU -> node map of the scenario's `node-cpus` section ("NODE CPULIST" a line).
pub fn parse_node_cpus(text: &str) -> Result<BTreeMap<u32, u32>, String> {
    let mut m = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let bad = || format!("node-cpus: {line:?}: expected NODE CPULIST");
        let (node, list) = line.trim().split_once(' ').ok_or_else(bad)?;
        let node: u32 = node.parse().map_err(|_| bad())?;
        for cpu in parse_list(list.trim()).ok_or_else(bad)? {
            m.insert(cpu, node);
        }
    }
    if m.is_empty() {
        return Err("node-cpus: no node".into());
    }
    Ok(m)
}

/// The `NAME=PID` words of the scenario's `pids` section.
pub fn parse_pids(text: &str) -> Result<BTreeMap<String, u32>, String> {
    text.split_whitespace()
        .map(|kv| {
            let (k, v) = kv.split_once('=').ok_or_else(|| format!("pids: {kv:?} is not NAME=PID"))?;
            Ok((k.to_string(), v.parse().map_err(|_| format!("pids: {kv:?}: not a pid"))?))
        })
        .collect()
}

/// The nodes the threads of `pids` ran on between pass `i - 1` and pass `i` (a thread absent from pass `i - 1`, or
/// pass 0 itself, counts as having run). A CPU no node lists is an error.
pub fn ran_on(passes: &[Pass], i: usize, pids: &[u32], node_of: &BTreeMap<u32, u32>) -> Result<BTreeSet<u32>, String> {
    let mut nodes = BTreeSet::new();
    for pid in pids {
        let Some(p) = passes[i].procs.get(pid) else { continue };
        let before = i.checked_sub(1).and_then(|j| passes[j].procs.get(pid));
        for t in &p.threads {
            let was = before.and_then(|b| b.threads.iter().find(|x| x.tid == t.tid));
            if was.is_some_and(|w| w.ticks == t.ticks) {
                continue;
            }
            let node =
                node_of.get(&t.cpu).ok_or_else(|| format!("thread {} of {pid}: CPU {} is on no node", t.tid, t.cpu))?;
            nodes.insert(*node);
        }
    }
    Ok(nodes)
}

/// From when the threads of `pids` ran on one node only, the same node to the last pass: the uptime of the first
/// such pass at or after `from_s` and the node, or `None` (they never settled on one node after `from_s`, or did so
/// for fewer than [`MIN_PASSES`] passes in which one of them ran).
pub fn together_since(
    passes: &[Pass],
    pids: &[u32],
    node_of: &BTreeMap<u32, u32>,
    from_s: f64,
) -> Result<Option<(f64, u32)>, String> {
    let mut run: Option<(usize, u32, usize)> = None;
    for i in 0..passes.len() {
        if passes[i].up_s < from_s {
            continue;
        }
        let nodes = ran_on(passes, i, pids, node_of)?;
        match (nodes.len(), run) {
            (0, _) => {}
            (1, Some((start, n, k))) if nodes.contains(&n) => run = Some((start, n, k + 1)),
            (1, _) => run = Some((i, *nodes.first().expect("one"), 1)),
            _ => run = None,
        }
    }
    Ok(run.filter(|&(_, _, k)| k >= MIN_PASSES).map(|(i, n, _)| (passes[i].up_s, n)))
}

/// The node holding the largest part of `bytes` and that part's share (`None` when empty).
pub fn main_node(bytes: &BTreeMap<u32, u64>) -> Option<(u32, f64)> {
    let total: u64 = bytes.values().sum();
    let (&n, &b) = bytes.iter().max_by_key(|(n, b)| (**b, std::cmp::Reverse(**n)))?;
    (total > 0).then(|| (n, b as f64 / total as f64))
}

/// The last pass that has `pid`.
pub fn last_of(passes: &[Pass], pid: u32) -> Option<&ProcPass> {
    passes.iter().rev().find_map(|p| p.procs.get(&pid))
}

/// The first pass that has `pid`.
pub fn first_of(passes: &[Pass], pid: u32) -> Option<&ProcPass> {
    passes.iter().find_map(|p| p.procs.get(&pid))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task stat line of `tid` with `ticks` of utime and `cpu` in field 39.
    fn stat(tid: u32, ticks: u64, cpu: u32) -> String {
        // Fields 3..=13, then 14 utime, 15 stime, 16..=38, 39 processor.
        let mut f: Vec<String> = vec!["S".into()];
        f.extend((4..=13).map(|_| "0".to_string()));
        f.push(ticks.to_string());
        f.push("0".into());
        f.extend((16..=38).map(|_| "0".to_string()));
        f.push(cpu.to_string());
        format!("{tid} (rig pair) {}", f.join(" "))
    }

    /// A process in a test pass: pid, numa_maps text, threads as (tid, ticks, CPU).
    type Proc<'a> = (u32, &'a str, &'a [(u32, u64, u32)]);

    fn pass(up: f64, procs: &[Proc<'_>]) -> String {
        let mut s = format!("S {up}\n");
        for (pid, maps, threads) in procs {
            s.push_str(&format!("P {pid}\n{maps}"));
            for &(tid, ticks, cpu) in *threads {
                s.push_str(&format!("T {}\n", stat(tid, ticks, cpu)));
            }
            s.push_str("E\n");
        }
        s
    }

    const SERVER_MAPS: &str =
        "5600 default file=/usr/local/bin/rig-pair mapped=100 mapmax=3 N0=100 kernelpagesize_kB=4\n\
                               7f00 default anon=16384 dirty=16384 N1=16000 N2=384 kernelpagesize_kB=4\n";
    const CLIENT_MAPS: &str = "7f10 default anon=3072 dirty=3072 N2=3072 kernelpagesize_kB=4\n";

    fn nodes() -> BTreeMap<u32, u32> {
        parse_node_cpus("0 0-1\n1 2-3\n2 4-5\n").unwrap()
    }

    #[test]
    fn samples_parse_into_buffers_and_threads() {
        let text = pass(1.5, &[(10, SERVER_MAPS, &[(10, 5, 2), (11, 7, 3)]), (20, CLIENT_MAPS, &[(20, 9, 4)])]);
        let p = parse_samples(&(text + "C 1 (rig-sampler) S 0\n")).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].up_s, 1.5);
        let s = &p[0].procs[&10];
        assert_eq!(s.largest, BTreeMap::from([(1, 16000 * 4096), (2, 384 * 4096)]));
        assert_eq!(s.largest_anon, s.largest);
        assert_eq!(s.threads, vec![ThreadPass { tid: 10, cpu: 2, ticks: 5 }, ThreadPass { tid: 11, cpu: 3, ticks: 7 }]);
        assert_eq!(main_node(&s.largest).map(|(n, _)| n), Some(1));
        assert!((main_node(&s.largest).unwrap().1 - 16000.0 / 16384.0).abs() < 1e-9);
        assert_eq!(main_node(&BTreeMap::new()), None);
    }

    #[test]
    fn bad_samples_name_the_line() {
        for (text, says) in [
            ("S x\n", "line 1: uptime is not a number"),
            ("P 1\n", "line 1: a process record outside a pass"),
            ("S 1\nP 1\nT 5 (x) S 0\nE\n", "line 3: no CPU (field 39)"),
            ("S 1\nP 1\nS 2\n", "line 3: a pass starts inside a process record"),
            ("S 1\nhello\n", "line 2: expected S, P, T, E or C"),
            ("S 1\nP 1\n", "samples end inside a process record"),
        ] {
            let e = parse_samples(text).unwrap_err();
            assert!(e.contains(says), "{text:?}: {e}");
        }
        assert!(parse_node_cpus("zero 0-1\n").unwrap_err().contains("expected NODE CPULIST"));
        assert!(parse_pids("a=1 b").unwrap_err().contains("\"b\" is not NAME=PID"));
        assert_eq!(parse_pids("a=1 b=22").unwrap()["b"], 22);
    }

    /// Apart (nodes 1 and 2) until 2.0 s, one pass on node 1 only, a pass where only a sleeping thread's stale
    /// CPU differs, then node 1 for good: together from 2.0 s on node 1. The sleeping thread (11, ticks unchanged,
    /// field 39 on node 2) says nothing; a thread that ran on node 2 again ends the run.
    #[test]
    fn together_since_is_the_start_of_the_last_run_on_one_node() {
        let n = nodes();
        let mut text = String::new();
        text += &pass(1.0, &[(10, "", &[(10, 1, 2), (11, 0, 4)]), (20, "", &[(20, 1, 4)])]);
        text += &pass(1.5, &[(10, "", &[(10, 2, 2), (11, 0, 4)]), (20, "", &[(20, 2, 5)])]);
        for (k, up) in [2.0, 2.5, 3.0, 3.5].into_iter().enumerate() {
            let t = 3 + k as u64;
            text += &pass(up, &[(10, "", &[(10, t, 3), (11, 0, 4)]), (20, "", &[(20, t, 2)])]);
        }
        let p = parse_samples(&text).unwrap();
        assert_eq!(ran_on(&p, 1, &[10, 20], &n).unwrap(), BTreeSet::from([1, 2]));
        assert_eq!(ran_on(&p, 2, &[10, 20], &n).unwrap(), BTreeSet::from([1]));
        assert_eq!(together_since(&p, &[10, 20], &n, 0.0).unwrap(), Some((2.0, 1)));
        // From 2.6 s on there are only two passes: too few to call it staying.
        assert_eq!(together_since(&p, &[10, 20], &n, 2.6).unwrap(), None);
        // The client runs on node 2 again at the last pass: no run on one node reaches the end.
        text += &pass(4.0, &[(10, "", &[(10, 9, 3)]), (20, "", &[(20, 9, 4)])]);
        let p = parse_samples(&text).unwrap();
        assert_eq!(together_since(&p, &[10, 20], &n, 0.0).unwrap(), None);
        // A CPU no node lists is an error, not a node.
        let p = parse_samples(&pass(1.0, &[(10, "", &[(10, 1, 9)])])).unwrap();
        assert!(ran_on(&p, 0, &[10], &n).unwrap_err().contains("CPU 9 is on no node"));
    }
}
