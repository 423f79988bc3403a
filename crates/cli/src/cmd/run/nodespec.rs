//! numactl node and CPU specifications: `0-3,8`, `all`, `!1`, `+0-1`, `same`, `netdev:eth0`.
//!
//! # Problem
//!
//! Scripts written for numactl pass node and CPU lists in numactl's own little language. To drive
//! `numapilot run` (and the `numactl` symlink) they must mean the same thing here. The language is
//! defined by what libnuma's `numa_parse_nodestring` / `numa_parse_cpustring` accept (numactl
//! 2.0.16, libnuma.c `__numa_parse_nodestring`, `__numa_parse_cpustring`; numactl.c
//! `numactl_parse_nodestring`; affinity.c `resolve_affinity`) and by the numactl(8) man page.
//!
//! # Grammar (numactl's, restated)
//!
//! ```text
//!   spec     := "same"                      the previous node spec on the command line (nodes only)
//!             | ["!"] ["+"] body            "!" inverts, "+" makes numbers relative; in this order
//!   body     := (item ",")* (item | device)   a device (nodes only) may start any item and
//!                                            takes the whole rest of the spec
//!   item     := number | number "-" number | "all"      ("all" may only be the last item)
//!   number   := decimal | "0x" hex | "0" octal          (C strtoul base 0: "010" is 8, "08" is bad)
//!   device   := "netdev:" IFNAME | "pci:" [seg ":"] bus ":" dev ["." fn] | "block:" NAME
//!             | "file:" PATH | "ip:" HOST
//! ```
//!
//! # Meaning
//!
//! Every spec is read against a *domain*: the ids this process may use (for memory nodes, the
//! cpuset's `Mems_allowed_list`; for CPUs, `Cpus_allowed_list`, its CPU affinity, which the kernel
//! keeps within the cpuset; both limited to what is online; with `--all`, everything online). Then:
//!
//! ```text
//!   domain = {0, 2, 4, 6}          (a cpuset with four nodes)
//!   "2,4"    -> {2, 4}             each number must be in the domain
//!   "2-6"    -> {2, 4, 6}          both ends must be in the domain; members between are taken
//!   "+1-2"   -> {2, 4}             relative: the 2nd..3rd members (0-based) of the domain
//!   "all"    -> {0, 2, 4, 6}
//!   "!2"     -> {0, 4, 6}          complement within the domain
//!   "!+0"    -> {2, 4, 6}
//! ```
//!
//! # Where we differ from numactl, on purpose
//!
//! * A backwards range (`3-1`) is an error naming it; numactl silently takes just `3`.
//! * `!` complements within the domain; numactl complements over `0 .. number of memory nodes`,
//!   which on a sparse machine (nodes 0 and 8) turns `!0` into the non-existent node 1, and CPU
//!   lists over every configured CPU, so under `taskset -c 2-5` its `-C !2` hands on CPUs 0-1 and
//!   6-7, which the affinity kept out (the 4-node rig, crates/rig/tests/launcher.rs, row ts-cinv).
//! * A spec that selects nothing (`!all`, an empty string) is an error here; numactl passes the
//!   empty mask to the kernel and reports its EINVAL for `-m`, `-N`, `-C` and `-P`, and for
//!   `--interleave` runs the command under the default policy (libnuma's
//!   `numa_set_interleave_mask` takes an empty mask for "no interleave").
//! * The domain leaves out offline CPUs: `+N` counts the allowed CPUs that are online, where
//!   libnuma counts `Cpus_allowed` as the kernel reports it (which may still name an offline CPU),
//!   so `-C +1` can name a later CPU than numactl's, one the kernel will run the thread on; and
//!   `all` and `!` hand on online CPUs only, where numactl's mask keeps the offline ones (with
//!   CPUs 6-7 offline, `-C all` is 0-5 here, 0-7 there: rows mo-call and mo-cinv of the rig).
//! * Device forms must resolve to a node in the domain. `ip:` needs a routing-table lookup and is
//!   refused with a clear message.
//! * Every error names the offending token and why, instead of libnuma's one-line warning followed
//!   by the usage text. A CPU outside the domain is said to be outside the CPU affinity (set by
//!   taskset or sched_setaffinity, which `--all` replaces) when this process's cpuset has it, and
//!   outside the cpuset when not (`--all` skips the check, but the kernel keeps the command within
//!   its cpuset: EINVAL, or the CPUs cut to the cpuset's). numactl says "cpu argument N is out of
//!   range" for both.
//!
//! # Limits
//!
//! Ids above [`IdSet::MAX_ID`] are refused as too large. Whitespace before a number is skipped, as
//! `strtoul` skips it (`-m "0, 1"`, a list typed or generated with a blank after each comma, runs
//! under numactl; it was refused here until review helper-36); signs, which `strtoul` also
//! accepts (`+1`, `-0`), and whitespace after a number (numactl refuses that too) are refused.

use std::fmt;

use numapilot_topology::IdSet;

/// What a spec lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// NUMA nodes.
    Node,
    /// CPUs.
    Cpu,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Node => "node",
            Kind::Cpu => "CPU",
        }
    }
}

/// A device named in a node spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    /// `netdev:IFNAME`: a network interface.
    Netdev,
    /// `pci:[seg:]bus:dev[.fn]`: a PCI function.
    Pci,
    /// `block:NAME`: a block device by kernel name.
    Block,
    /// `file:PATH`: the block device holding a file (or the device node itself).
    File,
    /// `ip:HOST`: the interface a host is routed through.
    Ip,
}

impl Device {
    const PREFIXES: [(&'static str, Device); 5] = [
        ("netdev:", Device::Netdev),
        ("pci:", Device::Pci),
        ("block:", Device::Block),
        ("file:", Device::File),
        ("ip:", Device::Ip),
    ];

    /// What follows the prefix, for a form that has nothing after it.
    fn what(self) -> &'static str {
        match self {
            Device::Netdev => "interface name",
            Device::Pci => "PCI address",
            Device::Block => "device name",
            Device::File => "path",
            Device::Ip => "host",
        }
    }

    fn prefix(self) -> &'static str {
        Self::PREFIXES.iter().find(|(_, d)| *d == self).map_or("", |(p, _)| p)
    }
}

/// Finds the node of a device; implemented over sysfs by the caller, by a table in tests.
pub trait DeviceNodes {
    /// The node the device is attached to, or why it cannot be told.
    fn device_node(&self, device: Device, name: &str) -> Result<u32, String>;
}

/// The ids a spec is read against.
#[derive(Debug, Clone, Copy)]
pub struct Domain<'a> {
    /// What `all`, `+N` and `!` refer to, and what every listed id must belong to.
    pub allowed: &'a IdSet,
    /// Ids that exist at all (online), to tell "does not exist" from "not allowed".
    pub existing: &'a IdSet,
    /// For CPU specs, the CPUs of this process's cpuset when they could be read: a CPU in it but
    /// not in `allowed` is kept out by the CPU affinity, not the cpuset. `None` for node specs
    /// (their domain is the cpuset's own) or when unknown.
    pub cpuset: Option<&'a IdSet>,
}

/// Why a spec was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The spec is the empty string.
    Empty,
    /// A token that is neither a number, a range nor a keyword.
    Unparseable,
    /// `all` followed by more items.
    AllNotLast,
    /// An empty item between commas or after the last one (`1,,2`, `1,`).
    EmptyItem,
    /// A number beyond [`IdSet::MAX_ID`].
    TooLarge,
    /// A range whose end is before its start.
    Backwards {
        /// Start.
        lo: u32,
        /// End.
        hi: u32,
    },
    /// An id that does not exist (not online).
    Missing(u32),
    /// An id that exists but is outside the domain.
    NotAllowed(u32),
    /// A relative index past the end of the domain.
    RelativeOutOfRange {
        /// The index given.
        index: u32,
    },
    /// The spec selects no id.
    SelectsNothing,
    /// A device form that could not be resolved.
    Device(String),
}

/// A refused spec: the spec, the token at fault, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// Nodes or CPUs.
    pub kind: Kind,
    /// The whole spec as given.
    pub spec: String,
    /// The offending token (the whole spec when no smaller part is at fault).
    pub token: String,
    /// Why.
    pub problem: Problem,
    /// The domain, for the message.
    pub allowed: IdSet,
    /// The existing ids, for the message.
    pub existing: IdSet,
    /// The cpuset's CPUs when known ([`Domain::cpuset`]), for the message.
    pub cpuset: Option<IdSet>,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = self.kind.word();
        let ws = format!("{w}s");
        if self.token != self.spec {
            write!(f, "{:?}: ", self.token)?;
        }
        match &self.problem {
            Problem::Empty => write!(f, "empty {w} list"),
            Problem::Unparseable => {
                write!(f, "{:?} is not a {w} number, an A-B range or a keyword", self.token)
            }
            Problem::AllNotLast => write!(f, "\"all\" must be the last item of a {w} list"),
            Problem::EmptyItem => write!(f, "empty item in {w} list {:?}", self.spec),
            Problem::TooLarge => write!(f, "{w} number too large (largest accepted: {})", IdSet::MAX_ID),
            Problem::Backwards { lo, hi } => write!(f, "range {lo}-{hi} runs backwards"),
            Problem::Missing(id) => {
                write!(f, "{w} {id} does not exist (online {ws}: {})", self.existing.to_list_or_none())
            }
            Problem::NotAllowed(id) => {
                let allowed = self.allowed.to_list_or_none();
                match (self.kind, &self.cpuset) {
                    // The cpuset has it: the affinity (taskset) keeps it out, which --all replaces.
                    (Kind::Cpu, Some(c)) if c.contains(*id) => write!(
                        f,
                        "CPU {id} is outside this process's CPU affinity ({allowed}, as taskset or \
                         sched_setaffinity set it; --all lifts it)"
                    ),
                    (Kind::Cpu, Some(c)) => write!(
                        f,
                        "CPU {id} is outside this process's cpuset (CPUs {}; --all skips this check, the kernel \
                         keeps to the cpuset)",
                        c.to_list_or_none()
                    ),
                    (Kind::Cpu, None) => write!(
                        f,
                        "CPU {id} is outside the CPUs this process may use ({allowed}: its CPU affinity, within \
                         its cpuset; --all lifts the affinity, the kernel keeps to the cpuset)"
                    ),
                    (Kind::Node, _) => write!(
                        f,
                        "node {id} is outside this process's cpuset (nodes {allowed}; --all skips this check, \
                         the kernel keeps to the cpuset)"
                    ),
                }
            }
            Problem::RelativeOutOfRange { index } => write!(
                f,
                "relative {w} +{index} is out of range: {} allowed {ws} ({}), counted from +0",
                self.allowed.len(),
                self.allowed.to_list_or_none()
            ),
            Problem::SelectsNothing => write!(f, "selects no {w} (allowed {ws}: {})", self.allowed.to_list_or_none()),
            Problem::Device(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for SpecError {}

/// Parses `spec` against `domain`. `devices` resolves device forms (node specs only; `None` for
/// CPU specs, where letters other than `all` are simply unparseable).
pub fn parse(
    spec: &str,
    kind: Kind,
    domain: Domain<'_>,
    devices: Option<&dyn DeviceNodes>,
) -> Result<IdSet, Box<SpecError>> {
    let err = |token: &str, problem: Problem| {
        Box::new(SpecError {
            kind,
            spec: spec.to_string(),
            token: token.to_string(),
            problem,
            allowed: domain.allowed.clone(),
            existing: domain.existing.clone(),
            cpuset: domain.cpuset.cloned(),
        })
    };
    if spec.is_empty() {
        return Err(err(spec, Problem::Empty));
    }
    let (invert, rest) = match spec.strip_prefix('!') {
        Some(r) => (true, r),
        None => (false, spec),
    };
    let (relative, body) = match rest.strip_prefix('+') {
        Some(r) => (true, r),
        None => (false, rest),
    };
    if body.is_empty() {
        return Err(err(spec, Problem::Unparseable));
    }

    let mut set = IdSet::new();
    // A device form may stand wherever an item starts, and takes the whole rest of the spec (its
    // name may hold commas): `0,netdev:eth0` is node 0 and the NIC's node, as libnuma's item loop
    // hands the rest to `resolve_affinity` when an item starts with a letter (a review of
    // 2026-11-30 found only a spec starting with one accepted).
    let mut rest = Some(body);
    while let Some(at) = rest {
        if let Some((resolver, dev, name)) = device_at(devices, kind, at) {
            if name.is_empty() {
                // Said as such (`file:` read "cannot stat : No such file or directory", an empty
                // path; review helper-103).
                return Err(err(at, Problem::Device(format!("no {} after {}", dev.what(), dev.prefix()))));
            }
            let node = resolver.device_node(dev, name).map_err(|why| err(at, Problem::Device(why)))?;
            check_member(node, &domain).map_err(|p| err(at, p))?;
            set.insert(node);
            break;
        }
        let (item, tail) = match at.split_once(',') {
            Some((item, tail)) => (item, Some(tail)),
            None => (at, None),
        };
        rest = tail;
        if item.is_empty() {
            return Err(err(spec, Problem::EmptyItem));
        }
        if item == "all" {
            if rest.is_some() {
                return Err(err(item, Problem::AllNotLast));
            }
            set = set.union(domain.allowed);
            continue;
        }
        let (a, b) = match item.split_once('-') {
            Some((a, b)) => (a, Some(b)),
            None => (item, None),
        };
        let lo = resolve_number(a, relative, &domain).map_err(|p| err(item, p))?;
        check_member(lo, &domain).map_err(|p| err(item, p))?;
        let hi = match b {
            Some(b) => {
                let hi = resolve_number(b, relative, &domain).map_err(|p| err(item, p))?;
                check_member(hi, &domain).map_err(|p| err(item, p))?;
                hi
            }
            None => lo,
        };
        if hi < lo {
            return Err(err(item, Problem::Backwards { lo, hi }));
        }
        // Only allowed ids between the two ends (numactl does the same).
        set = set.union(&domain.allowed.iter().filter(|id| (lo..=hi).contains(id)).collect());
    }
    if invert {
        set = domain.allowed.difference(&set);
    }
    if set.is_empty() {
        return Err(err(spec, Problem::SelectsNothing));
    }
    Ok(set)
}

/// The device form `at` starts with, if any, with its resolver and name (node specs only).
fn device_at<'s, 'd>(
    devices: Option<&'d dyn DeviceNodes>,
    kind: Kind,
    at: &'s str,
) -> Option<(&'d dyn DeviceNodes, Device, &'s str)> {
    let d = devices.filter(|_| kind == Kind::Node)?;
    Device::PREFIXES.iter().find_map(|(p, dev)| at.strip_prefix(p).map(|name| (d, *dev, name)))
}

/// A number as C `strtoul(s, &end, 0)` reads it, requiring the whole string to be consumed:
/// leading whitespace (C's `isspace`) skipped, no sign. (Also the shared-memory mode's sizes and
/// ids, `segment.rs`.)
pub(super) fn parse_number(s: &str) -> Result<u64, Problem> {
    let s = s.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (digits, radix) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (h, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(Problem::Unparseable);
    }
    u64::from_str_radix(digits, radix).map_err(|_| Problem::TooLarge)
}

fn resolve_number(s: &str, relative: bool, domain: &Domain<'_>) -> Result<u32, Problem> {
    let n = parse_number(s)?;
    if n > u64::from(IdSet::MAX_ID) {
        return Err(Problem::TooLarge);
    }
    let n = n as u32;
    if relative {
        // The n-th (0-based) member of the domain.
        domain.allowed.iter().nth(n as usize).ok_or(Problem::RelativeOutOfRange { index: n })
    } else {
        Ok(n)
    }
}

fn check_member(id: u32, domain: &Domain<'_>) -> Result<(), Problem> {
    if domain.allowed.contains(id) {
        Ok(())
    } else if domain.existing.contains(id) {
        Err(Problem::NotAllowed(id))
    } else {
        Err(Problem::Missing(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(s: &str) -> IdSet {
        IdSet::parse_list(s).unwrap()
    }

    fn nodes(spec: &str, allowed: &str, existing: &str) -> Result<IdSet, Box<SpecError>> {
        let (a, e) = (set(allowed), set(existing));
        parse(spec, Kind::Node, Domain { allowed: &a, existing: &e, cpuset: None }, None)
    }

    fn ok(spec: &str, allowed: &str) -> String {
        nodes(spec, allowed, allowed).unwrap_or_else(|e| panic!("{spec}: {e}")).to_list()
    }

    fn problem(spec: &str, allowed: &str, existing: &str) -> (String, Problem) {
        let e = nodes(spec, allowed, existing).unwrap_err();
        (e.token, e.problem)
    }

    #[test]
    fn lists_ranges_and_all() {
        assert_eq!(ok("0", "0-3"), "0");
        assert_eq!(ok("1,3", "0-3"), "1,3");
        assert_eq!(ok("0-2", "0-3"), "0-2");
        assert_eq!(ok("0-1,3", "0-3"), "0-1,3");
        assert_eq!(ok("all", "0-3"), "0-3");
        assert_eq!(ok("1,all", "0-3"), "0-3");
        assert_eq!(ok("2,2", "0-3"), "2");
    }

    #[test]
    fn sparse_domain_ranges_take_only_members() {
        // Nodes 0, 2, 4, 6 (e.g. a cpuset): a range takes the members between its ends.
        assert_eq!(ok("2-6", "0,2,4,6"), "2,4,6");
        assert_eq!(ok("0,8", "0,8"), "0,8");
        assert_eq!(ok("0-8", "0,8"), "0,8");
    }

    #[test]
    fn numbers_as_strtoul_base_zero() {
        assert_eq!(ok("0x3", "0-15"), "3");
        assert_eq!(ok("010", "0-15"), "8");
        assert_eq!(ok("0", "0-15"), "0");
        assert_eq!(problem("08", "0-15", "0-15").1, Problem::Unparseable);
        assert_eq!(problem("0x", "0-15", "0-15").1, Problem::Unparseable);
        // Leading blanks are strtoul's to skip, trailing ones end the number early: refused.
        assert_eq!(ok(" 1", "0-15"), "1");
        assert_eq!(ok("0, 1", "0-15"), "0-1");
        assert_eq!(ok("0,\t2- 3", "0-15"), "0,2-3");
        assert_eq!(ok("! 0", "0-3"), "1-3");
        assert_eq!(problem("1 ", "0-15", "0-15").1, Problem::Unparseable);
        assert_eq!(problem(" ", "0-15", "0-15").1, Problem::Unparseable);
        assert_eq!(problem("-1", "0-15", "0-15").1, Problem::Unparseable);
        assert_eq!(problem("99999999999999999999999", "0", "0").1, Problem::TooLarge);
        assert_eq!(problem("70000", "0", "0").1, Problem::TooLarge);
    }

    #[test]
    fn inversion_is_within_the_domain() {
        assert_eq!(ok("!1", "0-3"), "0,2-3");
        assert_eq!(ok("!1-2", "0-3"), "0,3");
        // Sparse nodes 0 and 8: numactl would produce node 1 here; we produce 8.
        assert_eq!(ok("!0", "0,8"), "8");
        assert_eq!(problem("!all", "0-1", "0-1").1, Problem::SelectsNothing);
        assert_eq!(problem("!0", "0", "0").1, Problem::SelectsNothing);
    }

    #[test]
    fn relative_counts_within_the_domain() {
        assert_eq!(ok("+0", "2,4,6"), "2");
        assert_eq!(ok("+1-2", "2,4,6"), "4,6");
        assert_eq!(ok("+0,2", "2,4,6"), "2,6");
        assert_eq!(ok("!+0", "2,4,6"), "4,6");
        assert_eq!(ok("+all", "2,4,6"), "2,4,6");
        let (tok, p) = problem("+3", "2,4,6", "0-7");
        assert_eq!((tok.as_str(), p), ("3", Problem::RelativeOutOfRange { index: 3 }));
        // "+!" is not the order numactl accepts.
        assert_eq!(problem("+!0", "0-3", "0-3").1, Problem::Unparseable);
    }

    #[test]
    fn errors_name_the_token() {
        let (tok, p) = problem("0,7", "0-1", "0-1");
        assert_eq!((tok.as_str(), p), ("7", Problem::Missing(7)));
        let (tok, p) = problem("0-7", "0-1", "0-1");
        assert_eq!((tok.as_str(), p), ("0-7", Problem::Missing(7)));
        let (tok, p) = problem("1", "0", "0-1");
        assert_eq!((tok.as_str(), p), ("1", Problem::NotAllowed(1)));
        let (tok, p) = problem("0,x", "0-1", "0-1");
        assert_eq!((tok.as_str(), p), ("x", Problem::Unparseable));
        let (tok, p) = problem("1-0", "0-1", "0-1");
        assert_eq!((tok.as_str(), p), ("1-0", Problem::Backwards { lo: 1, hi: 0 }));
        let (tok, p) = problem("all,1", "0-1", "0-1");
        assert_eq!((tok.as_str(), p), ("all", Problem::AllNotLast));
        assert_eq!(problem("", "0", "0").1, Problem::Empty);
        assert_eq!(problem("1,", "0-1", "0-1"), ("1,".into(), Problem::EmptyItem));
        assert_eq!(problem("1,,0", "0-1", "0-1"), ("1,,0".into(), Problem::EmptyItem));
        assert_eq!(problem("0-", "0-1", "0-1"), ("0-".into(), Problem::Unparseable));
        assert_eq!(problem("!", "0-1", "0-1"), ("!".into(), Problem::Unparseable));
        assert_eq!(problem("same", "0-1", "0-1").1, Problem::Unparseable);
    }

    #[test]
    fn messages_read_well() {
        let m = nodes("0,7", "0-1", "0-1").unwrap_err().to_string();
        assert_eq!(m, "\"7\": node 7 does not exist (online nodes: 0-1)");
        let m = nodes("7", "0", "0").unwrap_err().to_string();
        assert_eq!(m, "node 7 does not exist (online nodes: 0)");
        let m = nodes("1", "0", "0-1").unwrap_err().to_string();
        assert!(m.starts_with("node 1 is outside this process's cpuset (nodes 0;"), "{m}");
        let m = nodes("3-1", "0-3", "0-3").unwrap_err().to_string();
        assert_eq!(m, "range 3-1 runs backwards");
        let m = nodes("!0", "0", "0").unwrap_err().to_string();
        assert_eq!(m, "selects no node (allowed nodes: 0)");
        let (a, e) = (set("0-1"), set("0-3"));
        let m =
            parse("5", Kind::Cpu, Domain { allowed: &a, existing: &e, cpuset: None }, None).unwrap_err().to_string();
        assert_eq!(m, "CPU 5 does not exist (online CPUs: 0-3)");
    }

    /// A CPU kept out by the affinity (taskset) is said to be, not the cpuset, which --all does not
    /// lift (a user trial: "--all lifts the cpuset restriction" under taskset, where --all does lift
    /// the limit and no cpuset was involved).
    #[test]
    fn a_cpu_outside_the_domain_is_named_with_what_keeps_it_out() {
        let (a, e, cpuset) = (set("1"), set("0-3"), set("0-1"));
        let m = |spec: &str, c: Option<&IdSet>| {
            parse(spec, Kind::Cpu, Domain { allowed: &a, existing: &e, cpuset: c }, None).unwrap_err().to_string()
        };
        assert_eq!(
            m("0", Some(&cpuset)),
            "CPU 0 is outside this process's CPU affinity (1, as taskset or sched_setaffinity set it; --all lifts it)"
        );
        assert_eq!(
            m("3", Some(&cpuset)),
            "CPU 3 is outside this process's cpuset (CPUs 0-1; --all skips this check, the kernel keeps to the cpuset)"
        );
        assert!(m("0", None).starts_with("CPU 0 is outside the CPUs this process may use (1: its CPU affinity"));
    }

    #[test]
    fn cpus_above_1024() {
        let (a, e) = (set("0-4095"), set("0-4095"));
        let d = Domain { allowed: &a, existing: &e, cpuset: None };
        assert_eq!(parse("1500,4095", Kind::Cpu, d, None).unwrap().to_list(), "1500,4095");
        assert_eq!(parse("!0-4094", Kind::Cpu, d, None).unwrap().to_list(), "4095");
        assert_eq!(parse("+1500", Kind::Cpu, d, None).unwrap().to_list(), "1500");
    }

    struct Table;
    impl DeviceNodes for Table {
        fn device_node(&self, device: Device, name: &str) -> Result<u32, String> {
            match (device, name) {
                (Device::Netdev, "eth0") => Ok(1),
                (Device::Pci, "0000:3b:00.0") => Ok(8),
                (Device::Ip, _) => Err("ip: is not supported".into()),
                _ => Err(format!("no {device:?} {name}")),
            }
        }
    }

    #[test]
    fn device_forms_resolve_through_the_resolver() {
        let (a, e) = (set("0-1,8"), set("0-1,8"));
        let d = Domain { allowed: &a, existing: &e, cpuset: None };
        assert_eq!(parse("netdev:eth0", Kind::Node, d, Some(&Table)).unwrap().to_list(), "1");
        assert_eq!(parse("pci:0000:3b:00.0", Kind::Node, d, Some(&Table)).unwrap().to_list(), "8");
        assert_eq!(parse("!netdev:eth0", Kind::Node, d, Some(&Table)).unwrap().to_list(), "0,8");
        let e1 = parse("netdev:eth9", Kind::Node, d, Some(&Table)).unwrap_err();
        assert_eq!((e1.token.as_str(), e1.problem), ("netdev:eth9", Problem::Device("no Netdev eth9".into())));
        // A device on a node outside the domain is refused like a number would be.
        let (a0, e0) = (set("0"), set("0-1"));
        let e2 = parse("netdev:eth0", Kind::Node, Domain { allowed: &a0, existing: &e0, cpuset: None }, Some(&Table))
            .unwrap_err();
        assert_eq!(e2.problem, Problem::NotAllowed(1));
        // CPU specs have no device forms.
        assert_eq!(parse("netdev:eth0", Kind::Cpu, d, Some(&Table)).unwrap_err().problem, Problem::Unparseable);
        // A device may start any item and takes the rest, as in libnuma's item loop.
        assert_eq!(parse("0,netdev:eth0", Kind::Node, d, Some(&Table)).unwrap().to_list(), "0-1");
        assert_eq!(parse("8,0,pci:0000:3b:00.0", Kind::Node, d, Some(&Table)).unwrap().to_list(), "0,8");
        assert_eq!(parse("!0,netdev:eth0", Kind::Node, d, Some(&Table)).unwrap().to_list(), "8");
        let e3 = parse("0,netdev:eth9", Kind::Node, d, Some(&Table)).unwrap_err();
        assert_eq!(e3.token, "netdev:eth9");
        assert_eq!(parse("0,", Kind::Node, d, Some(&Table)).unwrap_err().problem, Problem::EmptyItem);
        assert_eq!(parse("all,netdev:eth0", Kind::Node, d, Some(&Table)).unwrap_err().problem, Problem::AllNotLast);
    }
}
