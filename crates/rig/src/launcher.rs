//! The judgements of the launcher matrix: `numapilot run` and the numactl symlink against Debian's numactl, each
//! starting a probe that reports what it inherited (rig/scenarios/launcher.sh, crates/rig/tests/launcher.rs).
//!
//! # Problem
//!
//! A numactl-compatible launcher goes wrong where a one-node host cannot look: node subsets, relative (`+N`) and
//! inverted (`!N`) lists, `all`, a cpuset without some nodes, a CPU affinity narrower than the cpuset, a node with
//! memory and no CPU. What counts is what the launched command gets, and the kernel is the judge of that, not
//! either launcher's own account.
//!
//! # Approach
//!
//! Each launcher runs the same probe, `sh -c '/usr/bin/numactl --show; echo --; exec rig-toucher --mb 4 --report'`:
//! Debian's `numactl --show` of the inherited policy and CPUs, then the kernel's own view from a process that touched
//! 4 MiB (its `Cpus_allowed_list`, `Mems_allowed_list` and `SigIgn`, and the numa_maps line of that memory: the
//! policy the kernel holds and the pages per node). [`parse_probe`] reads that text, [`compare`] sets ours beside
//! numactl's:
//!
//! ```text
//!   numactl --show     equal, once the interleave cursor is masked (`N (interleave next)`, `interleavenode: N`:
//!                      where the next interleaved page goes depends on how many pages the process allocated so
//!                      far, not on the launcher; [`canonical_show`])
//!   status lines       equal (Cpus_allowed_list, Mems_allowed_list, SigIgn)
//!   numa_maps policy   equal (`bind:1`, `interleave:0-3`, `prefer (many):1-2`, `bind=balancing:1`, ...)
//!   pages              each where the policy puts them ([`pages_where_the_policy_says`]); interleaved counts
//!                      equal node by node within [`INTERLEAVE_SLACK`] pages
//! ```
//!
//! Pages are compared node for node only where the policy decides the node: one bound or preferred node, an
//! interleave, the default or local policy on CPUs of one node. Where it leaves a choice (the default policy on CPUs
//! of several nodes, a bind or preferred-many over several) the node is wherever the scheduler ran the toucher, which
//! differs between two runs of the same launcher; each run's pages must then lie within the choice.
//!
//! # Limits
//!
//! The guest runs with transparent huge pages off (the scenario's doing): one 2 MiB page of the 4 MiB buffer goes to
//! one node whole, so an interleave's counts would depend on where the buffer happens to be aligned.

use std::collections::{BTreeMap, BTreeSet};

use crate::checks::parse_list;

/// Most pages an interleaved count of ours may differ from numactl's, per node. The interleave index of an anonymous
/// page is its page number within the mapping (mm/mempolicy.c), so 1,024 touched pages over k nodes give each node
/// 1024/k, give or take the one page where the touched range starts or ends off a round index; 2 leaves room for
/// both ends. A policy over the wrong nodes moves hundreds.
pub const INTERLEAVE_SLACK: u64 = 2;

/// Pages the probe touches: `rig-toucher --mb 4` (4 KiB pages).
pub const PROBE_PAGES: u64 = 1024;

/// What a probe reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// Debian's `numactl --show`, as printed.
    pub show: String,
    /// `Cpus_allowed_list` of the toucher.
    pub cpus_allowed: String,
    /// `Mems_allowed_list` of the toucher.
    pub mems_allowed: String,
    /// `SigIgn` of the toucher (hex mask).
    pub sig_ign: String,
    /// The policy field of the buffer's numa_maps line (`bind:1`, `prefer (many):1-2`, `weighted interleave:0-3`).
    pub policy: String,
    /// Pages of the buffer per node (`N<k>=`).
    pub pages: BTreeMap<u32, u64>,
}

/// Reads a probe's stdout: the `--show` text, a line `--`, then rig-toucher's report.
pub fn parse_probe(stdout: &str) -> Result<Probe, String> {
    let (show, report) =
        stdout.split_once("\n--\n").ok_or_else(|| format!("no `--` line in the probe's output: {stdout:?}"))?;
    let field = |key: &str| -> Result<String, String> {
        report
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':').map(|v| v.trim().to_string()))
            .ok_or_else(|| format!("no {key} in the probe's report: {report:?}"))
    };
    let buffer = field("buffer")?;
    let mut tokens = buffer.split_whitespace();
    let _addr = tokens.next().ok_or("empty buffer line")?;
    let first = tokens.next().ok_or_else(|| format!("no policy in {buffer:?}"))?;
    let rest: Vec<&str> = tokens.collect();
    // Two policies print as two words: `prefer (many):NODES` and `weighted interleave:NODES` (mpol_to_str).
    let (policy, fields) = match rest.first() {
        Some(second) if first == "weighted" || second.starts_with("(many)") => {
            (format!("{first} {second}"), &rest[1..])
        }
        _ => (first.to_string(), &rest[..]),
    };
    let mut pages = BTreeMap::new();
    for tok in fields {
        if let Some((n, p)) = tok.strip_prefix('N').and_then(|t| t.split_once('=')) {
            let (Ok(n), Ok(p)) = (n.parse::<u32>(), p.parse::<u64>()) else {
                return Err(format!("bad {tok:?} in {buffer:?}"));
            };
            pages.insert(n, p);
        }
    }
    Ok(Probe {
        show: show.to_string() + "\n",
        cpus_allowed: field("Cpus_allowed_list")?,
        mems_allowed: field("Mems_allowed_list")?,
        sig_ign: field("SigIgn")?,
        policy,
        pages,
    })
}

/// `numactl --show` with the interleave cursor masked: `preferred node: 2 (interleave next)` and `interleavenode: 2`
/// read `N`. The cursor is the node after the last one an interleaved page went to, which moves with every page the
/// process allocates; the mask and every other line stay as printed.
pub fn canonical_show(show: &str) -> String {
    show.lines()
        .map(|l| {
            if let Some(rest) = l.strip_prefix("preferred node: ") {
                if let Some((_, tail)) =
                    rest.split_once(' ').filter(|(n, t)| n.parse::<u32>().is_ok() && t.contains("interleave next"))
                {
                    return format!("preferred node: N {tail}\n");
                }
            }
            if l.starts_with("interleavenode: ") {
                return "interleavenode: N\n".to_string();
            }
            format!("{l}\n")
        })
        .collect()
}

/// The node list after the `:` of a numa_maps policy (`bind:0,2` -> {0, 2}); `None` for `default` and `local`.
pub fn policy_nodes(policy: &str) -> Option<BTreeSet<u32>> {
    parse_list(policy.rsplit_once(':')?.1)
}

/// Whether a numa_maps policy interleaves (`interleave:`, `weighted interleave:`).
fn interleaves(policy: &str) -> bool {
    policy.starts_with("interleave") || policy.starts_with("weighted interleave")
}

/// The nodes of `cpus` by `node_cpus` (node -> its CPUs).
pub fn nodes_of(cpus: &BTreeSet<u32>, node_cpus: &BTreeMap<u32, BTreeSet<u32>>) -> BTreeSet<u32> {
    node_cpus.iter().filter(|(_, c)| !c.is_disjoint(cpus)).map(|(&n, _)| n).collect()
}

/// Checks that a probe's pages are all there and where its policy puts them: an interleave on every node of its
/// list, within [`INTERLEAVE_SLACK`] of an even share each; a bind, preferred or preferred-many policy on its nodes;
/// the default or local policy on the nodes of the CPUs it may run on.
pub fn pages_where_the_policy_says(p: &Probe, node_cpus: &BTreeMap<u32, BTreeSet<u32>>) -> Result<(), String> {
    let total: u64 = p.pages.values().sum();
    if total < PROBE_PAGES {
        return Err(format!(
            "{total} pages of the buffer resident, fewer than the {PROBE_PAGES} touched: {:?}",
            p.pages
        ));
    }
    let on: BTreeSet<u32> = p.pages.iter().filter(|(_, &c)| c > 0).map(|(&n, _)| n).collect();
    let allowed = match policy_nodes(&p.policy) {
        Some(nodes) => nodes,
        None => {
            let cpus = parse_list(&p.cpus_allowed).ok_or_else(|| format!("Cpus_allowed_list {:?}", p.cpus_allowed))?;
            nodes_of(&cpus, node_cpus)
        }
    };
    if !on.is_subset(&allowed) {
        return Err(format!("policy {:?}: pages on nodes {on:?}, outside {allowed:?}: {:?}", p.policy, p.pages));
    }
    if interleaves(&p.policy) {
        if on != allowed {
            return Err(format!("policy {:?}: pages on nodes {on:?} only, not on each of {allowed:?}", p.policy));
        }
        let share = total / allowed.len() as u64;
        if let Some((n, c)) = p.pages.iter().find(|(_, &c)| c.abs_diff(share) > INTERLEAVE_SLACK) {
            return Err(format!("policy {:?}: node {n} holds {c} pages, not about {share}: {:?}", p.policy, p.pages));
        }
    }
    Ok(())
}

/// Sets a probe of ours beside numactl's (see the module text): the same `--show` (cursor masked), the same status
/// lines, the same numa_maps policy, each's pages where its policy puts them, and interleaved counts equal node by
/// node within [`INTERLEAVE_SLACK`]. Every difference is listed.
pub fn compare(reference: &Probe, ours: &Probe, node_cpus: &BTreeMap<u32, BTreeSet<u32>>) -> Result<(), String> {
    let mut problems = Vec::new();
    let (rs, os) = (canonical_show(&reference.show), canonical_show(&ours.show));
    if rs != os {
        problems.push(format!("numactl --show differs:\n{}", crate::checks::diff("numactl", &rs, "ours", &os)));
    }
    for (what, r, o) in [
        ("Cpus_allowed_list", &reference.cpus_allowed, &ours.cpus_allowed),
        ("Mems_allowed_list", &reference.mems_allowed, &ours.mems_allowed),
        ("SigIgn", &reference.sig_ign, &ours.sig_ign),
        ("numa_maps policy", &reference.policy, &ours.policy),
    ] {
        if r != o {
            problems.push(format!("{what}: numactl's {r:?}, ours {o:?}"));
        }
    }
    for (who, p) in [("numactl's", reference), ("ours", ours)] {
        if let Err(e) = pages_where_the_policy_says(p, node_cpus) {
            problems.push(format!("{who}: {e}"));
        }
    }
    if interleaves(&reference.policy) && reference.policy == ours.policy {
        let nodes: BTreeSet<u32> = reference.pages.keys().chain(ours.pages.keys()).copied().collect();
        for n in nodes {
            let (r, o) = (reference.pages.get(&n).copied().unwrap_or(0), ours.pages.get(&n).copied().unwrap_or(0));
            if r.abs_diff(o) > INTERLEAVE_SLACK {
                problems.push(format!("node {n}: numactl's {r} interleaved pages, ours {o}"));
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// Parses `numactl --hardware`'s `node N cpus: ...` lines into node -> CPUs.
pub fn node_cpus(hardware: &str) -> Result<BTreeMap<u32, BTreeSet<u32>>, String> {
    let hw = crate::checks::parse_hardware(hardware)?;
    Ok(hw.cpus.into_iter().map(|(n, c)| (n, c.into_iter().collect())).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A probe's output as the 4-node guest printed it (`-i 1,3`, numactl, 2026-12-02), with THP on: one 2 MiB page
    /// went to node 1 whole.
    const INTERLEAVE_THP: &str = "policy: interleave\npreferred node: 1 (interleave next)\ninterleavemask: 1 3 \n\
        interleavenode: 1\nphyscpubind: 0 1 2 3 4 5 6 7 \ncpubind: 0 1 2 3 \nnodebind: 0 1 2 3 \nmembind: 0 1 2 3 \n\
        preferred: 1 3 \n--\nCpus_allowed_list:\t0-7\nMems_allowed_list:\t0-3\nSigIgn:\t0000000000001000\n\
        buffer: 7f638cd99000 interleave:1,3 anon=1024 dirty=1024 active=6 N1=768 N3=256 kernelpagesize_kB=4\n";

    fn machine() -> BTreeMap<u32, BTreeSet<u32>> {
        (0..4).map(|n| (n, BTreeSet::from([2 * n, 2 * n + 1]))).collect()
    }

    fn probe(policy: &str, pages: &str, cpus: &str) -> Probe {
        let text = format!(
            "policy: x\n--\nCpus_allowed_list:\t{cpus}\nMems_allowed_list:\t0-3\nSigIgn:\t0\nbuffer: 7f00 {policy} \
             anon=1024 dirty=1024 {pages} kernelpagesize_kB=4\n"
        );
        parse_probe(&text).unwrap()
    }

    #[test]
    fn reads_a_probe() {
        let p = parse_probe(INTERLEAVE_THP).unwrap();
        assert_eq!(p.policy, "interleave:1,3");
        assert_eq!(p.pages, BTreeMap::from([(1, 768), (3, 256)]));
        assert_eq!((p.cpus_allowed.as_str(), p.mems_allowed.as_str()), ("0-7", "0-3"));
        assert_eq!(p.sig_ign, "0000000000001000");
        assert!(p.show.starts_with("policy: interleave\n") && p.show.ends_with("preferred: 1 3 \n"), "{:?}", p.show);
        assert_eq!(probe("prefer (many):1-2", "N1=1024", "0-7").policy, "prefer (many):1-2");
        assert_eq!(probe("weighted interleave:0-3", "N0=256", "0-7").policy, "weighted interleave:0-3");
        assert_eq!(probe("bind=balancing:1", "N1=1024", "0-7").policy, "bind=balancing:1");
        assert!(parse_probe("").is_err());
        assert!(parse_probe("policy: x\n--\nCpus_allowed_list:\t0\n").is_err());
    }

    #[test]
    fn the_interleave_cursor_is_masked_and_nothing_else() {
        let show = INTERLEAVE_THP.split("\n--\n").next().unwrap();
        let moved = show
            .replace("1 (interleave next)", "3 (interleave next)")
            .replace("interleavenode: 1", "interleavenode: 3");
        assert_ne!(show, moved);
        let a = canonical_show(show);
        assert_eq!(a, canonical_show(&moved));
        assert!(a.contains("preferred node: N (interleave next)\n") && a.contains("interleavenode: N\n"), "{a}");
        assert_ne!(canonical_show("interleavemask: 1 3 \n"), canonical_show("interleavemask: 1 2 \n"));
        assert_eq!(canonical_show("preferred node: 2\n"), "preferred node: 2\n");
    }

    #[test]
    fn pages_follow_the_policy() {
        let m = machine();
        assert!(pages_where_the_policy_says(&probe("bind:1", "N1=1024", "0-7"), &m).is_ok());
        assert!(pages_where_the_policy_says(&probe("bind:1", "N0=1024", "0-7"), &m).is_err());
        assert!(pages_where_the_policy_says(&probe("bind:1", "N1=100", "0-7"), &m).is_err());
        assert!(pages_where_the_policy_says(&probe("prefer (many):1-2", "N2=1024", "0-7"), &m).is_ok());
        assert!(pages_where_the_policy_says(&probe("default", "N1=1024", "2-3"), &m).is_ok());
        assert!(pages_where_the_policy_says(&probe("default", "N0=1024", "2-3"), &m).is_err());
        assert!(pages_where_the_policy_says(&probe("local", "N3=1024", "1,6"), &m).is_ok());
        let even = "N0=256 N1=256 N2=256 N3=256";
        assert!(pages_where_the_policy_says(&probe("interleave:0-3", even, "0-7"), &m).is_ok());
        assert!(pages_where_the_policy_says(&probe("weighted interleave:0-3", even, "0-7"), &m).is_ok());
        // The THP-on count: one node holds a whole 2 MiB page.
        assert!(pages_where_the_policy_says(&parse_probe(INTERLEAVE_THP).unwrap(), &m).is_err());
        assert!(pages_where_the_policy_says(&probe("interleave:0-3", "N0=512 N1=512", "0-7"), &m).is_err());
    }

    #[test]
    fn compare_lists_every_difference() {
        let m = machine();
        let a = probe("interleave:0-3", "N0=256 N1=256 N2=256 N3=256", "0-7");
        let b = probe("interleave:0-3", "N0=257 N1=255 N2=256 N3=256", "0-7");
        assert!(compare(&a, &b, &m).is_ok());
        let c = probe("interleave:0-2", "N0=342 N1=341 N2=341", "0-3");
        let e = compare(&a, &c, &m).unwrap_err();
        assert!(e.contains("Cpus_allowed_list") && e.contains("numa_maps policy"), "{e}");
        let mut d = a.clone();
        d.show = "policy: bind\n".into();
        assert!(compare(&a, &d, &m).unwrap_err().contains("--show differs"));
        // The default policy on CPUs of two nodes: the node is the scheduler's choice, each within it.
        let x = probe("default", "N0=1024", "0-1,6-7");
        let y = probe("default", "N3=1024", "0-1,6-7");
        assert!(compare(&x, &y, &m).is_ok());
    }

    #[test]
    fn node_cpus_from_the_hardware_table() {
        let hw = "available: 2 nodes (0-1)\nnode 0 cpus: 0 1\nnode 0 size: 383 MB\nnode 0 free: 300 MB\n\
                  node 1 cpus:\nnode 1 size: 384 MB\nnode 1 free: 380 MB\nnode distances:\nnode   0   1 \n  \
                  0:  10  20 \n  1:  20  10 \n";
        let m = node_cpus(hw).unwrap();
        assert_eq!(m[&0], BTreeSet::from([0, 1]));
        assert!(m[&1].is_empty());
        assert_eq!(nodes_of(&BTreeSet::from([1]), &m), BTreeSet::from([0]));
    }
}
