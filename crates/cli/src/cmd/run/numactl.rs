//! numactl's command line: the option table, the order rules between options, and the usage text.
//!
//! # Problem
//!
//! `numapilot run` and the `numactl` symlink accept numactl's options with numactl's meaning
//! (numactl 2.0.16, numactl.c `main`, and numactl(8)). numactl applies each option the moment it
//! reads it; we first read the whole command line into a [`Request`], validate it against the
//! machine, and only then change anything (see `run.rs`). The order rules numactl enforces while
//! reading are kept here:
//!
//! ```text
//!   --all / -a               must come before any node or CPU list (numactl's own rule)
//!   one memory policy        --membind, --preferred, --preferred-many, --interleave,
//!                            --weighted-interleave, --localalloc: a second one is "Conflicting policies"
//!   --show / -s              stops reading: what was read before it is applied, then shown
//!   --hardware / -H          shows the machine and exits, whatever follows
//!   same                     a node list equal to the previous node list on the command line
//!   --cpunodebind/--physcpubind   both set the CPU affinity; the later one wins, as in numactl, and
//!                            each earlier one must still be valid (numactl applies it when it
//!                            reads it: `-N 9 -C 0` is an error there, not a run on CPU 0)
//!   --strict / -t            only means something for shared memory: warned about and ignored
//!                            for a command
//!   --shm, --file            a shared-memory segment (`segment.rs`): --length, --offset,
//!                            --shmmode, --huge before it; memory policies, --strict, --touch,
//!                            --dump, --dump-nodes, --verify after it, in the order given; no
//!                            command, no CPU binding
//! ```
//!
//! Differences from numactl, on purpose: `--balancing` may come before or after `--membind`
//! (numactl rejects it after a policy with a misleading "specify policy after --shm/--file");
//! `--hardware` after a policy is not an error; `--help` prints the usage to stdout and exits 0.
//! `--weighted-interleave/-w` is accepted as in numactl 2.0.18 and later. `--version` and `--help`
//! are ours ([`OptSpec::extra`]): an abbreviation that fits one of numactl's own options means
//! that one (`--ver` is `--verify`, as in numactl). Without a command, the lists given are checked
//! first (`run.rs`), as numactl checks each when it reads it.

use std::ffi::OsString;

use super::getopt::{Found, Getopt, GetoptError, HasArg, OptSpec};

/// Every option we know, by what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptId {
    /// `--all/-a`.
    All,
    /// `--balancing/-b`.
    Balancing,
    /// `--interleave/-i`.
    Interleave,
    /// `--weighted-interleave/-w`.
    WeightedInterleave,
    /// `--preferred/-p`.
    Preferred,
    /// `--preferred-many/-P`.
    PreferredMany,
    /// `--cpunodebind/-N` and the deprecated `--cpubind/-c`.
    CpuNodeBind,
    /// `--physcpubind/-C`.
    PhysCpuBind,
    /// `--membind/-m`.
    MemBind,
    /// `--localalloc/-l`.
    LocalAlloc,
    /// `--show/-s`.
    Show,
    /// `--hardware/-H`.
    Hardware,
    /// `--strict/-t`.
    Strict,
    /// `--version`.
    Version,
    /// `--help/-h`.
    Help,
    /// `--shm/-S KEYFILE`: a System V segment.
    Shm,
    /// `--file/-f FILE`: a file on tmpfs or hugetlbfs.
    File,
    /// `--offset/-o SIZE`.
    Offset,
    /// `--length/-L SIZE`.
    Length,
    /// `--shmmode/-M OCTAL`.
    ShmMode,
    /// `--dump/-d`.
    Dump,
    /// `--dump-nodes/-D`.
    DumpNodes,
    /// `--shmid/-I ID`.
    ShmId,
    /// `--huge/-u`.
    Huge,
    /// `--touch/-T`.
    Touch,
    /// `--verify/-V`.
    Verify,
}

const fn opt(long: &'static str, short: Option<char>, arg: HasArg, id: OptId) -> OptSpec<OptId> {
    OptSpec { long, short, arg, id, extra: false }
}

/// An option numactl does not have (abbreviations prefer numactl's own).
const fn ours(long: &'static str, short: Option<char>, arg: HasArg, id: OptId) -> OptSpec<OptId> {
    OptSpec { long, short, arg, id, extra: true }
}

/// numactl's option table (numactl.c `opts[]`), in its order, which is also the order glibc lists
/// ambiguous candidates in.
pub const OPTIONS: &[OptSpec<OptId>] = &[
    opt("all", Some('a'), HasArg::No, OptId::All),
    opt("interleave", Some('i'), HasArg::Required, OptId::Interleave),
    opt("weighted-interleave", Some('w'), HasArg::Required, OptId::WeightedInterleave),
    opt("preferred", Some('p'), HasArg::Required, OptId::Preferred),
    opt("preferred-many", Some('P'), HasArg::Required, OptId::PreferredMany),
    opt("cpubind", Some('c'), HasArg::Required, OptId::CpuNodeBind),
    opt("cpunodebind", Some('N'), HasArg::Required, OptId::CpuNodeBind),
    opt("physcpubind", Some('C'), HasArg::Required, OptId::PhysCpuBind),
    opt("membind", Some('m'), HasArg::Required, OptId::MemBind),
    opt("show", Some('s'), HasArg::No, OptId::Show),
    opt("localalloc", Some('l'), HasArg::No, OptId::LocalAlloc),
    opt("balancing", Some('b'), HasArg::No, OptId::Balancing),
    opt("hardware", Some('H'), HasArg::No, OptId::Hardware),
    opt("shm", Some('S'), HasArg::Required, OptId::Shm),
    opt("file", Some('f'), HasArg::Required, OptId::File),
    opt("offset", Some('o'), HasArg::Required, OptId::Offset),
    opt("length", Some('L'), HasArg::Required, OptId::Length),
    opt("strict", Some('t'), HasArg::No, OptId::Strict),
    opt("shmmode", Some('M'), HasArg::Required, OptId::ShmMode),
    opt("dump", Some('d'), HasArg::No, OptId::Dump),
    opt("dump-nodes", Some('D'), HasArg::No, OptId::DumpNodes),
    opt("shmid", Some('I'), HasArg::Required, OptId::ShmId),
    opt("huge", Some('u'), HasArg::No, OptId::Huge),
    opt("touch", Some('T'), HasArg::No, OptId::Touch),
    opt("verify", Some('V'), HasArg::No, OptId::Verify),
    ours("version", None, HasArg::No, OptId::Version),
    ours("help", Some('h'), HasArg::No, OptId::Help),
];

/// Where numapilot-run(1) lists an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// A memory policy (one per command line).
    Policy,
    /// The CPUs the command runs on.
    Cpu,
    /// numactl's shared-memory mode (`segment.rs`).
    Shm,
    /// The rest.
    Other,
}

/// An option of [`OPTIONS`] as numapilot-run(1) lists it.
#[derive(Debug, Clone, Copy)]
pub struct OptionDoc {
    /// Long name, without `--`.
    pub long: &'static str,
    /// Short letter, if any.
    pub short: Option<char>,
    /// The value it takes (`NODES`); `None` for a flag.
    pub value: Option<&'static str>,
    /// Its section.
    pub group: Group,
    /// What it does, one paragraph.
    pub help: &'static str,
}

/// Every option of [`OPTIONS`], in its order, with what numapilot-run(1) says of it: the page is
/// written from the parser's own table, so an option cannot be accepted and missing from it (the
/// match on its id is exhaustive).
pub fn documented() -> Vec<OptionDoc> {
    OPTIONS
        .iter()
        .map(|o| {
            let (group, value, help) = match o.id {
                OptId::MemBind => (
                    Group::Policy,
                    Some("NODES"),
                    "Allocate memory on NODES only (MPOL_BIND): an allocation that does not fit there fails.",
                ),
                OptId::Preferred => (
                    Group::Policy,
                    Some("NODE"),
                    "Allocate memory on NODE first, on other nodes when it is full (MPOL_PREFERRED). NODE \
                     is one node.",
                ),
                OptId::PreferredMany => (
                    Group::Policy,
                    Some("NODES"),
                    "Allocate memory on NODES first, on other nodes when they are full \
                     (MPOL_PREFERRED_MANY, Linux 5.15 and later).",
                ),
                OptId::Interleave => {
                    (Group::Policy, Some("NODES"), "Interleave memory page by page over NODES (MPOL_INTERLEAVE).")
                }
                OptId::WeightedInterleave => (
                    Group::Policy,
                    Some("NODES"),
                    "Interleave memory over NODES by the weights the kernel keeps per node \
                     (/sys/kernel/mm/mempolicy/weighted_interleave; MPOL_WEIGHTED_INTERLEAVE, Linux 6.9 and \
                     later).",
                ),
                OptId::LocalAlloc => {
                    (Group::Policy, None, "Allocate memory on the node of the CPU that allocates (MPOL_LOCAL).")
                }
                OptId::CpuNodeBind if o.long == "cpubind" => {
                    (Group::Cpu, Some("NODES"), "A deprecated name of --cpunodebind.")
                }
                OptId::CpuNodeBind => {
                    (Group::Cpu, Some("NODES"), "Run the command on the CPUs of NODES only (its CPU affinity).")
                }
                OptId::PhysCpuBind => (
                    Group::Cpu,
                    Some("CPUS"),
                    "Run the command on CPUS only. With --cpunodebind, the later of the two holds.",
                ),
                OptId::All => (
                    Group::Other,
                    None,
                    "Read node and CPU lists against every online node and CPU, not only those of this \
                     process's cpuset and CPU affinity: a CPU affinity set by taskset is lifted, while the \
                     kernel still keeps the command to its cpuset. Must come before the first list.",
                ),
                OptId::Balancing => (
                    Group::Other,
                    None,
                    "With --membind: let the kernel's NUMA balancing move pages among the bound nodes \
                     (MPOL_F_NUMA_BALANCING). Ignored with another policy.",
                ),
                OptId::Show => (
                    Group::Other,
                    None,
                    "Apply the options before it, print the memory policy and CPUs of this process as \
                     numactl --show does, and exit. What follows is not read.",
                ),
                OptId::Hardware => (
                    Group::Other,
                    None,
                    "Print the nodes with their CPUs, memory and distances, as numactl --hardware does, and \
                     exit, whatever follows.",
                ),
                OptId::Strict => (
                    Group::Shm,
                    None,
                    "After --shm or --file, before the policy: set it with MPOL_MF_STRICT, which fails \
                     when a page of the segment is already on a node outside it. For a command it means \
                     nothing: warned about and ignored.",
                ),
                OptId::Shm => (
                    Group::Shm,
                    Some("KEYFILE"),
                    "The System V shared-memory segment of key ftok(KEYFILE, --shmid), created (with \
                     --length) when missing, as is KEYFILE. The policy options after it apply to it; no \
                     command follows.",
                ),
                OptId::File => (
                    Group::Shm,
                    Some("FILE"),
                    "A file on tmpfs or hugetlbfs, created (with --length and --shmmode) when missing. The \
                     policy options after it apply to it; no command follows.",
                ),
                OptId::Offset => (
                    Group::Shm,
                    Some("SIZE"),
                    "Start the policy SIZE bytes into the segment (default 0). Before --shm or --file.",
                ),
                OptId::Length => (
                    Group::Shm,
                    Some("SIZE"),
                    "The length of the segment, or of the part the policy covers. Before --shm or --file.",
                ),
                OptId::ShmMode => (
                    Group::Shm,
                    Some("MODE"),
                    "The permissions (octal) of a segment or file created (default 0600). Before --shm or \
                     --file.",
                ),
                OptId::ShmId => (
                    Group::Shm,
                    Some("ID"),
                    "The project id ftok mixes into the key of --shm (default 0). Before --shm.",
                ),
                OptId::Huge => {
                    (Group::Shm, None, "Create the --shm segment of huge pages (SHM_HUGETLB). Before --shm.")
                }
                OptId::Touch => {
                    (Group::Shm, None, "Touch every page of the segment, so it is allocated under the policy now.")
                }
                OptId::Dump => (
                    Group::Shm,
                    None,
                    "Print the policy of each run of pages of the segment: START-END: POLICY : NODES.",
                ),
                OptId::DumpNodes => (
                    Group::Shm,
                    None,
                    "Print the node of each run of pages of the segment (faulting them in): START-END: \
                     NODE.",
                ),
                OptId::Verify => (
                    Group::Shm,
                    None,
                    "Touch the segment, then check that every page has the policy given and lies on its \
                     nodes.",
                ),
                OptId::Version => (Group::Other, None, "Print the version and exit."),
                OptId::Help => (Group::Other, None, "Print the usage and exit 0."),
            };
            OptionDoc { long: o.long, short: o.short, value, group, help }
        })
        .collect()
}

/// The memory policy asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyKind {
    /// `--membind`.
    Bind,
    /// `--preferred`.
    Preferred,
    /// `--preferred-many`.
    PreferredMany,
    /// `--interleave`.
    Interleave,
    /// `--weighted-interleave`.
    WeightedInterleave,
    /// `--localalloc`.
    Local,
}

/// A node or CPU list as given, with the option that carried it (for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// The option as written (`--membind`, `-m`, `--mem`).
    pub option: String,
    /// The list, after `same` was replaced by the previous node list.
    pub text: String,
}

impl Spec {
    /// `--membind=0-1` style, for messages.
    pub fn label(&self) -> String {
        if self.option.starts_with("--") {
            format!("{}={}", self.option, self.text)
        } else {
            format!("{} {}", self.option, self.text)
        }
    }
}

/// The memory policy option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyOpt {
    /// Which policy.
    pub kind: PolicyKind,
    /// Its node list (`None` for `--localalloc`).
    pub spec: Option<Spec>,
}

/// The CPU affinity option that takes effect (the last one given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuBind {
    /// `--cpunodebind`: the CPUs of these nodes.
    Nodes(Spec),
    /// `--physcpubind`: these CPUs.
    Cpus(Spec),
}

/// What to do after the options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Run this command (`argv[0]` first).
    Run(Vec<OsString>),
    /// `--show`: print the policy of this process (after applying what came before).
    Show,
    /// `--hardware`.
    Hardware,
    /// `--version`.
    Version,
    /// `--help`.
    Help,
    /// Nothing to run: an error ([`UsageError::NoCommand`]) once the lists given are checked
    /// (numactl checks each as it reads it, so `--membind ./prog`, the list forgotten, is told
    /// that `./prog` is no node list before it is told there is no command).
    NoCommand,
    /// `--shm`/`--file`: set policies on shared memory segments, in order (no command).
    Segment(Vec<super::segment::Step>),
}

/// A numactl command line, read but not yet checked against the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `--all`: lists are read against everything online, not this process's cpuset and affinity.
    pub all: bool,
    /// `--balancing`.
    pub balancing: bool,
    /// `--strict` was given (ignored for processes, with a warning, as numactl does).
    pub strict: bool,
    /// The memory policy.
    pub policy: Option<PolicyOpt>,
    /// The CPU affinity.
    pub cpubind: Option<CpuBind>,
    /// The CPU bindings given before [`Request::cpubind`], in order. numactl sets each as it
    /// reads it, so a bad one (a node that does not exist, one whose CPUs the kernel refuses)
    /// fails the command line though a later binding replaces it; `run.rs` checks each as it
    /// checks the one that holds (found by the multi-node rig, crates/rig/tests/launcher.rs:
    /// `-N 5 -C 1` ran on CPU 1 here, where numactl refused node 5).
    pub cpubind_before: Vec<CpuBind>,
    /// What to do.
    pub action: Action,
}

/// Why a command line was refused before looking at the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UsageError {
    /// getopt refused it.
    Getopt(GetoptError),
    /// Two memory policies.
    ConflictingPolicies(String, String),
    /// `--all` after a node or CPU list.
    AllAfterSpec(String),
    /// `same` with no node list before it.
    SameWithoutPrevious(String),
    /// A memory policy before `--shm`/`--file` (policies after it apply to the segment).
    PolicyBeforeShm(String),
    /// A CPU binding together with a segment (`--cpubind` before it, or after a segment option).
    CpuBindOnShm(String),
    /// A segment option (`--length`, `--offset`, `--shmmode`, `--huge`) after the segment it
    /// should describe.
    ShmOptionAfter(String),
    /// `--touch`, `--verify`, `--dump`, `--dump-nodes` with no segment before them.
    NeedsShm(String),
    /// `--verify` with no memory policy on the segment before it.
    VerifyWithoutPolicy,
    /// A segment (`--shm`/`--file`, as written) with a command to run after it: segments take
    /// none.
    ShmWithCommand(String, String),
    /// A segment option (`--length`, `--offset`, `--shmmode`, `--huge`) with no segment after it
    /// (numactl: "shm related option --length for process").
    ShmOptionWithoutSegment(String),
    /// A size, mode or id that does not read: the option and the value.
    BadValue(String, String, &'static str),
    /// No command to run.
    NoCommand,
}

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UsageError::Getopt(e) => e.fmt(f),
            UsageError::ConflictingPolicies(a, b) if a == b => write!(f, "Conflicting policies: {a} given twice"),
            UsageError::ConflictingPolicies(a, b) => write!(f, "Conflicting policies: {a} and {b}"),
            UsageError::AllAfterSpec(o) => {
                write!(f, "--all/-a option must be before all cpu/node specifications (it comes after {o})")
            }
            UsageError::SameWithoutPrevious(o) => write!(f, "{o}: same needs previous node specification"),
            UsageError::PolicyBeforeShm(o) => {
                write!(f, "specify policy after --shm/--file ({o} comes before the segment it would apply to)")
            }
            UsageError::CpuBindOnShm(o) => write!(f, "cannot do {o} on shared memory"),
            UsageError::ShmOptionAfter(o) => write!(f, "{o} must be before shared memory specification"),
            UsageError::NeedsShm(o) => write!(f, "{o} must be after shared memory specification"),
            UsageError::VerifyWithoutPolicy => write!(f, "--verify: need a policy first to verify"),
            UsageError::ShmWithCommand(o, c) => write!(
                f,
                "{o} sets policies on a shared-memory segment and takes no command ({c} follows it; run the \
                 command separately)"
            ),
            UsageError::ShmOptionWithoutSegment(o) => write!(
                f,
                "{o} describes a shared-memory segment, and no --shm or --file follows it (it does not apply \
                 to a process)"
            ),
            UsageError::BadValue(o, v, what) => write!(f, "{o} {v}: not {what}"),
            UsageError::NoCommand => write!(f, "no command given"),
        }
    }
}

impl std::error::Error for UsageError {}

fn bad(option: &str, value: &str, what: &'static str) -> UsageError {
    UsageError::BadValue(option.to_string(), value.to_string(), what)
}

/// Reads a numactl command line (without the program name).
pub fn parse(args: &[OsString]) -> Result<Request, UsageError> {
    let mut req = Request {
        all: false,
        balancing: false,
        strict: false,
        policy: None,
        cpubind: None,
        cpubind_before: Vec::new(),
        action: Action::Help,
    };
    let mut last_nodes: Option<String> = None;
    let mut first_spec: Option<String> = None;
    // Shared memory (`segment.rs`): the segment's description so far, the steps in order, the
    // first segment option given (numactl's `shmoption`), the policy set on a segment (one per
    // command line, as for a process), whether a CPU binding was asked for.
    let mut seg = super::segment::Describe::default();
    let mut steps: Vec<super::segment::Step> = Vec::new();
    // The option that attached the segment, as written.
    let mut attached: Option<String> = None;
    let mut shm_option: Option<String> = None;
    let mut seg_policy: Option<PolicyOpt> = None;
    let mut cpubind_opt: Option<String> = None;
    let mut getopt = Getopt::new(OPTIONS, args);
    for found in getopt.by_ref() {
        let Found { id, written, value } = found.map_err(UsageError::Getopt)?;
        // Values are text, but for the paths of --shm and --file, which may be any bytes.
        let raw = value.unwrap_or_default();
        let value = match id {
            OptId::Shm | OptId::File => String::new(),
            _ => raw.to_str().ok_or_else(|| bad(&written, &raw.to_string_lossy(), "valid UTF-8"))?.to_string(),
        };
        let mut node_spec = |written: &str, value: String| -> Result<Spec, UsageError> {
            let text = if value == "same" {
                last_nodes.clone().ok_or_else(|| UsageError::SameWithoutPrevious(written.to_string()))?
            } else {
                value
            };
            last_nodes = Some(text.clone());
            Ok(Spec { option: written.to_string(), text })
        };
        if matches!(
            id,
            OptId::Interleave
                | OptId::WeightedInterleave
                | OptId::Preferred
                | OptId::PreferredMany
                | OptId::MemBind
                | OptId::CpuNodeBind
                | OptId::PhysCpuBind
        ) && first_spec.is_none()
        {
            first_spec = Some(written.clone());
        }
        let kind = match id {
            OptId::All => {
                if let Some(o) = &first_spec {
                    return Err(UsageError::AllAfterSpec(o.clone()));
                }
                req.all = true;
                continue;
            }
            OptId::Balancing => {
                req.balancing = true;
                continue;
            }
            OptId::Strict => {
                req.strict = true;
                if attached.is_some() {
                    steps.push(super::segment::Step::Strict);
                }
                continue;
            }
            OptId::Hardware => {
                // numactl prints the hardware and exits as soon as it reads -H, whatever follows
                // (`-H -s`, `-H --bogus`: the hardware, exit 0).
                req.action = Action::Hardware;
                return Ok(req);
            }
            OptId::Show => {
                req.action = Action::Show;
                return Ok(req);
            }
            OptId::Version => {
                req.action = Action::Version;
                return Ok(req);
            }
            OptId::Help => {
                req.action = Action::Help;
                return Ok(req);
            }
            OptId::Length | OptId::Offset | OptId::ShmMode | OptId::Huge => {
                if attached.is_some() {
                    return Err(UsageError::ShmOptionAfter(written));
                }
                shm_option.get_or_insert_with(|| written.clone());
                match id {
                    OptId::Length => {
                        seg.length = Some(super::segment::size(&value).map_err(|w| bad(&written, &value, w))?)
                    }
                    OptId::Offset => seg.offset = super::segment::size(&value).map_err(|w| bad(&written, &value, w))?,
                    OptId::ShmMode => seg.mode = super::segment::mode(&value).map_err(|w| bad(&written, &value, w))?,
                    _ => seg.huge = true,
                }
                continue;
            }
            OptId::ShmId => {
                seg.id = super::segment::shm_id(&value).map_err(|w| bad(&written, &value, w))?;
                continue;
            }
            OptId::Shm | OptId::File => {
                if let Some(o) = &cpubind_opt {
                    return Err(UsageError::CpuBindOnShm(o.clone()));
                }
                if let Some(p) = &req.policy {
                    return Err(UsageError::PolicyBeforeShm(
                        p.spec.as_ref().map_or("--localalloc".into(), |s| s.option.clone()),
                    ));
                }
                let kind = if id == OptId::Shm { super::segment::Kind::SysV } else { super::segment::Kind::File };
                steps.push(super::segment::Step::Attach(
                    kind,
                    std::path::PathBuf::from(raw),
                    seg.clone(),
                    written.clone(),
                ));
                attached = Some(written);
                continue;
            }
            OptId::Touch | OptId::Verify | OptId::Dump | OptId::DumpNodes => {
                if attached.is_none() {
                    return Err(UsageError::NeedsShm(written));
                }
                steps.push(match id {
                    OptId::Touch => super::segment::Step::Touch(written),
                    OptId::Dump => super::segment::Step::Dump,
                    OptId::DumpNodes => super::segment::Step::DumpNodes,
                    _ => super::segment::Step::Verify(seg_policy.clone().ok_or(UsageError::VerifyWithoutPolicy)?),
                });
                continue;
            }
            OptId::CpuNodeBind | OptId::PhysCpuBind => {
                if let Some(o) = &shm_option {
                    return Err(UsageError::CpuBindOnShm(format!("{written} after {o}")));
                }
                if attached.is_some() {
                    return Err(UsageError::CpuBindOnShm(written));
                }
                cpubind_opt = Some(written.clone());
                let bind = if id == OptId::CpuNodeBind {
                    CpuBind::Nodes(node_spec(&written, value)?)
                } else {
                    CpuBind::Cpus(Spec { option: written, text: value })
                };
                req.cpubind_before.extend(req.cpubind.replace(bind));
                continue;
            }
            OptId::MemBind => PolicyKind::Bind,
            OptId::Preferred => PolicyKind::Preferred,
            OptId::PreferredMany => PolicyKind::PreferredMany,
            OptId::Interleave => PolicyKind::Interleave,
            OptId::WeightedInterleave => PolicyKind::WeightedInterleave,
            OptId::LocalAlloc => PolicyKind::Local,
        };
        if let Some(prev) = req.policy.as_ref().or(seg_policy.as_ref()) {
            let prev_opt = prev.spec.as_ref().map_or("--localalloc".to_string(), |s| s.option.clone());
            return Err(UsageError::ConflictingPolicies(prev_opt, written));
        }
        let spec = if kind == PolicyKind::Local { None } else { Some(node_spec(&written, value)?) };
        let policy = PolicyOpt { kind, spec };
        if attached.is_some() {
            // Strict before the segment counts for it too (numactl sets it for what follows).
            if req.strict && !steps.contains(&super::segment::Step::Strict) {
                steps.push(super::segment::Step::Strict);
            }
            steps.push(super::segment::Step::Policy(policy.clone()));
            seg_policy = Some(policy);
        } else {
            req.policy = Some(policy);
        }
    }
    let command = getopt.operands();
    if let Some(o) = attached {
        if let Some(c) = command.first() {
            return Err(UsageError::ShmWithCommand(o, c.to_string_lossy().into_owned()));
        }
        req.action = Action::Segment(steps);
        return Ok(req);
    }
    if let Some(o) = shm_option {
        return Err(UsageError::ShmOptionWithoutSegment(o));
    }
    req.action = if command.is_empty() { Action::NoCommand } else { Action::Run(command) };
    Ok(req)
}

/// The usage text, for `prog` (`numactl` or `numapilot run`).
pub fn usage(prog: &str) -> String {
    let pad = " ".repeat(prog.len() + 7);
    format!(
        "usage: {prog} [--all | -a] [--balancing | -b]\n\
         {pad} [--interleave= | -i <nodes>] [--weighted-interleave= | -w <nodes>]\n\
         {pad} [--preferred= | -p <node>] [--preferred-many= | -P <nodes>]\n\
         {pad} [--physcpubind= | -C <cpus>] [--cpunodebind= | -N <nodes>]\n\
         {pad} [--membind= | -m <nodes>] [--localalloc | -l] [--] command args ...\n\
         \x20      {prog} [--show | -s]\n\
         \x20      {prog} [--hardware | -H]\n\
         \x20      {prog} [--version]\n\
         \n\
         memory policy is --membind | -m, --preferred | -p, --preferred-many | -P,\n\
         \x20                --interleave | -i, --weighted-interleave | -w, --localalloc | -l\n\
         <nodes> is a comma-separated list of node numbers or A-B ranges, or all.\n\
         Instead of a number a node can also be:\n\
         \x20 netdev:DEV  the node of network device DEV\n\
         \x20 block:DEV   the node of block device DEV\n\
         \x20 file:PATH   the node of the block device holding PATH\n\
         \x20 pci:[seg:]bus:dev[.func]  the node of a PCI device\n\
         same is the previous <nodes> given on the command line.\n\
         <cpus> is a comma-separated list of CPU numbers or A-B ranges, or all.\n\
         Lists are read within the nodes/CPUs this process may use (its cpuset, and\n\
         its CPU affinity for CPUs); --all reads them against every online one: that\n\
         lifts a taskset affinity, the kernel still keeps the command to its cpuset.\n\
         All lists can be inverted with ! and made cpuset-relative with + (!+0-1).\n\
         --balancing enables kernel NUMA balancing among the --membind nodes.\n\
         --cpubind is a deprecated name of --cpunodebind.\n\
         \n\
         Shared memory: {prog} [--huge] [--offset <size>] [--shmmode <octal>] [--length <size>]\n\
         \x20  [--strict] [--shmid <id>] --shm <keyfile> | --file <tmpfs or hugetlbfs file>\n\
         \x20  [memory policy] [--touch] [--dump] [--dump-nodes] [--verify]\n\
         sets a policy on a System V segment or a file that persists without the command;\n\
         <size> can have k, m or g suffixes.\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn p(v: &[&str]) -> Result<Request, UsageError> {
        parse(&args(v))
    }

    fn spec(option: &str, text: &str) -> Spec {
        Spec { option: option.into(), text: text.into() }
    }

    /// numapilot-run(1) names a value for every option that takes one, and none for a flag.
    #[test]
    fn every_documented_option_names_its_value_exactly_when_it_takes_one() {
        let docs = documented();
        assert_eq!(docs.len(), OPTIONS.len());
        for (d, o) in docs.iter().zip(OPTIONS) {
            assert_eq!((d.long, d.short), (o.long, o.short));
            assert_eq!(d.value.is_some(), o.arg == HasArg::Required, "--{}", o.long);
            assert!(d.help.ends_with('.') && !d.help.contains("  "), "--{}: {}", o.long, d.help);
        }
    }

    #[test]
    fn every_policy_option_long_and_short() {
        let cases: &[(&[&str], PolicyKind, Option<&str>)] = &[
            (&["--membind=0", "x"], PolicyKind::Bind, Some("0")),
            (&["-m", "0", "x"], PolicyKind::Bind, Some("0")),
            (&["--preferred", "1", "x"], PolicyKind::Preferred, Some("1")),
            (&["-p1", "x"], PolicyKind::Preferred, Some("1")),
            (&["--preferred-many=0-1", "x"], PolicyKind::PreferredMany, Some("0-1")),
            (&["-P0-1", "x"], PolicyKind::PreferredMany, Some("0-1")),
            (&["--interleave=all", "x"], PolicyKind::Interleave, Some("all")),
            (&["-i", "all", "x"], PolicyKind::Interleave, Some("all")),
            (&["--weighted-interleave=0,1", "x"], PolicyKind::WeightedInterleave, Some("0,1")),
            (&["-w0,1", "x"], PolicyKind::WeightedInterleave, Some("0,1")),
            (&["--localalloc", "x"], PolicyKind::Local, None),
            (&["-l", "x"], PolicyKind::Local, None),
        ];
        for (a, kind, text) in cases {
            let r = p(a).unwrap_or_else(|e| panic!("{a:?}: {e}"));
            let pol = r.policy.unwrap();
            assert_eq!(pol.kind, *kind, "{a:?}");
            assert_eq!(pol.spec.map(|s| s.text), text.map(String::from), "{a:?}");
            assert_eq!(r.action, Action::Run(args(&["x"])));
        }
    }

    #[test]
    fn cpu_options_last_one_wins() {
        let r = p(&["--cpunodebind=0", "x"]).unwrap();
        assert_eq!(r.cpubind, Some(CpuBind::Nodes(spec("--cpunodebind", "0"))));
        let r = p(&["-N0", "x"]).unwrap();
        assert_eq!(r.cpubind, Some(CpuBind::Nodes(spec("-N", "0"))));
        let r = p(&["--cpubind=0", "x"]).unwrap();
        assert_eq!(r.cpubind, Some(CpuBind::Nodes(spec("--cpubind", "0"))));
        let r = p(&["-C", "1", "x"]).unwrap();
        assert_eq!(r.cpubind, Some(CpuBind::Cpus(spec("-C", "1"))));
        let r = p(&["-N0", "--physcpubind=1", "x"]).unwrap();
        assert_eq!(r.cpubind, Some(CpuBind::Cpus(spec("--physcpubind", "1"))));
        // The earlier ones are kept, in order, to be checked (numactl applies each).
        assert_eq!(r.cpubind_before, vec![CpuBind::Nodes(spec("-N", "0"))]);
        let r = p(&["-C", "3", "-N", "1", "-C", "2", "x"]).unwrap();
        assert_eq!(r.cpubind_before, vec![CpuBind::Cpus(spec("-C", "3")), CpuBind::Nodes(spec("-N", "1"))]);
        assert!(p(&["-C", "1", "x"]).unwrap().cpubind_before.is_empty());
    }

    #[test]
    fn flags() {
        let r = p(&["-a", "-b", "-t", "-m0", "x"]).unwrap();
        assert!(r.all && r.balancing && r.strict);
        // --balancing after the policy is accepted here (numactl refuses it).
        assert!(p(&["-m0", "--balancing", "x"]).unwrap().balancing);
    }

    #[test]
    fn show_stops_reading_and_keeps_what_came_before() {
        let r = p(&["-m0", "--show", "--bogus"]).unwrap();
        assert_eq!(r.action, Action::Show);
        assert_eq!(r.policy.unwrap().kind, PolicyKind::Bind);
        assert_eq!(p(&["-s"]).unwrap().action, Action::Show);
    }

    #[test]
    fn hardware_wins_over_a_command() {
        assert_eq!(p(&["-H"]).unwrap().action, Action::Hardware);
        assert_eq!(p(&["--hardware", "-m0", "true"]).unwrap().action, Action::Hardware);
        // Debian's numactl prints the hardware as soon as it reads -H, whatever follows.
        for args in [&["-H", "-s"][..], &["-Hs"], &["-H", "--bogus"], &["-H", "-m"], &["-H", "-m0", "-m0"]] {
            assert_eq!(p(args).map(|r| r.action), Ok(Action::Hardware), "{args:?}");
        }
        // What comes before it still counts.
        assert!(p(&["--bogus", "-H"]).is_err());
    }

    #[test]
    fn same_repeats_the_previous_node_list() {
        let r = p(&["--cpunodebind=1", "--membind=same", "x"]).unwrap();
        assert_eq!(r.policy.unwrap().spec, Some(spec("--membind", "1")));
        let r = p(&["-i", "+0-1", "-N", "same", "x"]).unwrap();
        assert_eq!(r.cpubind, Some(CpuBind::Nodes(spec("-N", "+0-1"))));
        assert_eq!(p(&["--membind=same", "x"]).unwrap_err(), UsageError::SameWithoutPrevious("--membind".into()));
        // CPU lists are not node lists: they do not feed `same`.
        assert!(p(&["-C0", "-m", "same", "x"]).is_err());
    }

    #[test]
    fn usage_errors() {
        assert_eq!(p(&["-m0", "-i0", "x"]).unwrap_err(), UsageError::ConflictingPolicies("-m".into(), "-i".into()));
        assert_eq!(
            p(&["-l", "-l", "x"]).unwrap_err(),
            UsageError::ConflictingPolicies("--localalloc".into(), "-l".into())
        );
        assert_eq!(p(&["-m0", "-a", "x"]).unwrap_err(), UsageError::AllAfterSpec("-m".into()));
        assert_eq!(p(&["-C0", "--all", "x"]).unwrap_err(), UsageError::AllAfterSpec("-C".into()));
        // No command: the lists are checked first (run.rs), so the request comes back.
        let r = p(&["-m", "./prog"]).unwrap();
        assert_eq!((r.action, r.policy.unwrap().spec.unwrap().text), (Action::NoCommand, "./prog".to_string()));
        assert_eq!(p(&[]).unwrap().action, Action::NoCommand);
        assert!(matches!(p(&["--bogus", "x"]), Err(UsageError::Getopt(GetoptError::UnrecognizedLong(_)))));
    }

    #[test]
    fn shared_memory_lines_and_their_order_rules() {
        use super::super::segment::{Describe, Kind, Step};
        let r = p(&["-L", "1m", "-o", "4k", "-M", "0644", "-f", "/dev/shm/x", "-m0", "--touch", "--dump"]).unwrap();
        let d = Describe { length: Some(1 << 20), offset: 4096, mode: 0o644, ..Describe::default() };
        let policy = PolicyOpt { kind: PolicyKind::Bind, spec: Some(spec("-m", "0")) };
        assert_eq!(
            r.action,
            Action::Segment(vec![
                Step::Attach(Kind::File, "/dev/shm/x".into(), d, "-f".into()),
                Step::Policy(policy.clone()),
                Step::Touch("--touch".into()),
                Step::Dump,
            ])
        );
        assert_eq!(r.policy, None, "the policy is the segment's, not the process's");
        // --strict before the segment holds for its policy; --verify checks the policy given.
        let r = p(&["-t", "-L1m", "-S", "/k", "-m0", "-V"]).unwrap();
        let Action::Segment(steps) = r.action else { panic!() };
        assert_eq!(steps[1..], [Step::Strict, Step::Policy(policy.clone()), Step::Verify(policy)]);
        assert!(matches!(steps[0], Step::Attach(Kind::SysV, _, _, _)));
        for (args, want) in [
            (&["-m0", "-f", "/x"][..], UsageError::PolicyBeforeShm("-m".into())),
            (&["-N0", "-L1m", "-f", "/x"], UsageError::CpuBindOnShm("-N".into())),
            (&["-L1m", "-C0", "-f", "/x"], UsageError::CpuBindOnShm("-C after -L".into())),
            (&["-L1m", "-f", "/x", "-N0"], UsageError::CpuBindOnShm("-N after -L".into())),
            (&["-L1m", "-f", "/x", "-L2m"], UsageError::ShmOptionAfter("-L".into())),
            (&["--touch"], UsageError::NeedsShm("--touch".into())),
            (&["-d", "-L1m", "-f", "/x"], UsageError::NeedsShm("-d".into())),
            (&["-L1m", "-f", "/x", "-V"], UsageError::VerifyWithoutPolicy),
            (&["-L1m", "-f", "/x", "-m0", "true"], UsageError::ShmWithCommand("-f".into(), "true".into())),
            (&["--file=/x", "./prog"], UsageError::ShmWithCommand("--file".into(), "./prog".into())),
            (&["-L1m", "true"], UsageError::ShmOptionWithoutSegment("-L".into())),
            (&["-L1m"], UsageError::ShmOptionWithoutSegment("-L".into())),
            (&["-u", "./prog"], UsageError::ShmOptionWithoutSegment("-u".into())),
            (&["-L1x", "-f", "/x"], UsageError::BadValue("-L".into(), "1x".into(), "")),
            (&["-L1m", "-f", "/x", "-m0", "-i0"], UsageError::ConflictingPolicies("-m".into(), "-i".into())),
        ] {
            let got = p(args).unwrap_err();
            match (&got, &want) {
                (UsageError::BadValue(o, v, _), UsageError::BadValue(wo, wv, _)) => assert_eq!((o, v), (wo, wv)),
                _ => assert_eq!(got, want, "{args:?}"),
            }
        }
    }

    #[test]
    fn command_keeps_its_own_options() {
        let r = p(&["-m0", "--", "ls", "-l", "--membind=1"]).unwrap();
        assert_eq!(r.action, Action::Run(args(&["ls", "-l", "--membind=1"])));
        let r = p(&["-m0", "ls", "-l"]).unwrap();
        assert_eq!(r.action, Action::Run(args(&["ls", "-l"])));
    }

    #[test]
    fn usage_mentions_every_policy_option() {
        let u = usage("numactl");
        for o in OPTIONS.iter().filter(|o| o.id != OptId::Help) {
            assert!(u.contains(&format!("--{}", o.long)), "usage lacks --{}", o.long);
        }
        assert!(u.starts_with("usage: numactl [--all | -a]"));
        assert!(usage("numapilot run").contains("\n                     [--interleave="));
    }
}
