//! `numapilot run` and the `numactl` personality: run a command under a NUMA policy.
//!
//! ```text
//!   argv ──getopt──> Request ──(machine: SystemView)──> ThreadPlacement ──rehearse──> apply ──> exec
//!        numactl.rs           nodespec.rs, resolve()     (all checks; nothing   (scratch    (this thread:
//!                                                         changed yet)           thread)     policy, CPUs)
//! ```
//!
//! 1. The command line is read completely (numactl's options and order rules, `numactl.rs`).
//! 2. Every node and CPU list is resolved against the machine and this process's cpuset; every
//!    bad token is reported by name (`nodespec.rs`). `--preferred` must name one node; memory
//!    policies need a node with memory; `--cpunodebind` needs nodes with CPUs. A CPU binding a
//!    later one replaces is checked too, and rehearsed, as numactl applies it when it reads it.
//! 3. The exact system calls are rehearsed on a scratch thread (numapilot_actuate's
//!    `ThreadPlacement::rehearse`), so a kernel without the policy (preferred-many before 5.15,
//!    weighted-interleave before 6.9) or a cpuset that refuses the CPUs is reported before anything
//!    changes: "the running kernel does not support weighted-interleave".
//! 4. Only then is the policy set on this thread (set_mempolicy, then sched_setaffinity) and the
//!    command `exec`ed with a PATH search (execvp); both settings are inherited across exec.
//!
//! Any failure exits 1 without running the command (numactl's exit status for every failure).
//! Usage errors (an unknown option, a missing value or command) print the usage text to stderr,
//! as numactl does; a bad list with a command is one line naming it, where numactl adds the usage
//! (docs/tools.md, deliberate differences from numactl and numastat).
//!
//! Started as `numactl` (a symlink to the binary; `main.rs` dispatches on argv\[0\]) the same code
//! runs with `numactl` as the program name, so scripts written for numactl drive it unchanged.

/// What shells complete after `numapilot run` (`docs::completions`).
pub(crate) mod completion;
pub(crate) mod getopt;
mod nodespec;
mod numactl;
/// numactl's shared-memory mode (`--shm`, `--file`).
mod segment;
mod show;
mod system;

use std::ffi::OsString;
use std::fmt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::ExitCode;

use numapilot_actuate::{MemPolicy, ModeFlags, ThreadPlacement};
use numapilot_topology::{CpuSet, NodeSet, Topology};

use self::nodespec::{DeviceNodes, Domain, Kind, SpecError};
#[cfg(test)]
pub(crate) use self::numactl::OPTIONS;
/// numapilot-run(1)'s options, from the parser's own table (`cmd/docs.rs`).
pub(crate) use self::numactl::{documented, Group};
use self::numactl::{Action, CpuBind, PolicyKind, PolicyOpt, Request, Spec};
use self::system::SystemView;

/// Arguments of `numapilot run`: numactl's options, then the command and its arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// numactl options (--membind, --cpunodebind, --physcpubind, --interleave, --preferred, ...,
    /// --show, --hardware), then the command to run and its arguments. `numapilot run --help` lists
    /// them.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        num_args = 0..,
        value_name = "OPTIONS] [--] [COMMAND",
        value_hint = clap::ValueHint::CommandWithArguments
    )]
    pub args: Vec<OsString>,
}

/// Runs `numapilot run`.
///
/// The options are read from the raw command line after `run`, not from clap's `args`: clap drops a
/// `--` that directly follows `run`, which would turn `numapilot run -- -x` into the option `-x`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let raw: Vec<OsString> = std::env::args_os().collect();
    let tail = match raw.get(1) {
        Some(sub) if sub == "run" => &raw[2..],
        _ => args.args.as_slice(),
    };
    Ok(launch("numapilot run", "numapilot", tail))
}

/// Entry point when started as `numactl`.
pub fn numactl_main(args: &[OsString]) -> anyhow::Result<ExitCode> {
    Ok(launch("numactl", "numactl", args))
}

/// The whole launcher; `usage_name` heads the usage text, `prefix` starts error lines.
fn launch(usage_name: &str, prefix: &str, args: &[OsString]) -> ExitCode {
    let req = match numactl::parse(args) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{prefix}: {e}");
            eprint!("{}", numactl::usage(usage_name));
            return ExitCode::from(1);
        }
    };
    if req.action == Action::NoCommand {
        // numactl checks each list as it reads it: `--membind ./prog`, its list forgotten, is
        // told that `./prog` is no node list, not that no command was given (review helper-48).
        let said = match check_lists(&req) {
            Err(e) => crate::error_text(&e),
            Ok(()) => numactl::UsageError::NoCommand.to_string(),
        };
        eprintln!("{prefix}: {said}");
        eprint!("{}", numactl::usage(usage_name));
        return ExitCode::from(1);
    }
    match execute(&req, usage_name, prefix) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{prefix}: {}", crate::error_text(&e));
            ExitCode::from(1)
        }
    }
}

/// The node and CPU lists of `req`, read against this machine (nothing is changed).
fn check_lists(req: &Request) -> anyhow::Result<()> {
    if req.policy.is_some() || req.cpubind.is_some() {
        let sys = SystemView::live()?;
        resolve(req, &sys, &sys)?;
    }
    Ok(())
}

fn execute(req: &Request, usage_name: &str, prefix: &str) -> anyhow::Result<ExitCode> {
    let command = match &req.action {
        Action::Help => return print_out(&numactl::usage(usage_name)),
        Action::Version => {
            return print_out(&format!("numapilot {} (numactl-compatible launcher)\n", env!("CARGO_PKG_VERSION")))
        }
        Action::Hardware => {
            // The node and CPU lists given before -H are checked, as numactl checks each when it
            // reads it: `-m 5 -H` on a machine without node 5 is an error there (an invalid list
            // was ignored here, and the hardware printed; review helper-36). A valid one before
            // -H stays no error (numactl refuses any policy there, with a message about --shm).
            check_lists(req)?;
            let topo = match Topology::from_sysfs(Path::new("/")) {
                Ok(t) => t,
                // No node directory (a container without /sys, a kernel without NUMA): numactl
                // prints an empty machine and exits 0; scripts that ask in such a container get
                // the same (it exited 1 here; review helper-36). Launching assumes one node
                // (`SystemView::read`), as libnuma does.
                Err(numapilot_topology::TopologyError::NoNuma { .. }) => {
                    return print_out("available: 0 nodes ()\nNo distance information available.\n")
                }
                Err(e) => return Err(e.into()),
            };
            return print_out(&numapilot_topology::render::numactl_hardware(&topo));
        }
        Action::Show => None,
        Action::NoCommand => anyhow::bail!("{}", numactl::UsageError::NoCommand),
        Action::Run(cmd) => Some(cmd),
        Action::Segment(steps) => {
            let sys = SystemView::live()?;
            if let Some(why) = &sys.assumed_one_node {
                eprintln!("{prefix}: warning: {why}; assuming one node, node 0, with every online CPU");
            }
            return segment::execute(steps, |p| Ok(resolve_policy(p, req.all, &sys, &sys)?), prefix);
        }
    };
    let sys = SystemView::live()?;
    if let Some(why) = &sys.assumed_one_node {
        eprintln!("{prefix}: warning: {why}; assuming one node, node 0, with every online CPU");
    }
    let placement = resolve(req, &sys, &sys)?;
    // numactl sets each CPU binding as it reads it: one a later binding replaces must be one the
    // kernel takes too (`-N 3 -N 1` in a cpuset without node 3's CPUs fails there).
    for (label, cpus) in superseded_cpus(req, &sys, &sys)? {
        ThreadPlacement { policy: None, cpus: Some(cpus) }
            .rehearse()
            .map_err(|e| anyhow::Error::new(e).context(label))?;
    }
    placement.rehearse().map_err(|e| label_kernel_error(req, e))?;
    if req.strict && command.is_some() {
        // numactl's own warning, word for word.
        eprintln!("{prefix}: warning. Strict flag for process ignored.");
    }
    placement.apply()?;
    match command {
        None => print_out(&show::render(&show::ShowState::gather(&sys)?, &sys.topo)),
        Some(cmd) => {
            let mut c = std::process::Command::new(&cmd[0]);
            c.args(&cmd[1..]);
            // numactl execs with what it inherited. Rust's runtime ignores SIGPIPE in this process
            // (and `Command` resets it to the default for the program) and opens /dev/null on a
            // closed descriptor 0-2. A program started ignoring SIGPIPE (systemd's
            // IgnoreSIGPIPE=yes for services, `trap '' PIPE`) would otherwise die of a write to a
            // closed socket or pipe instead of seeing EPIPE, and one started with a descriptor
            // closed would find /dev/null there (a review of 2026-11-29).
            let ignore_pipe = inherited::sigpipe_ignored();
            let closed = inherited::closed_std_fds();
            if ignore_pipe || !closed.is_empty() {
                // SAFETY: the hook runs in this process just before its exec (after std's own
                // signal reset) and calls only signal(2) and close(2).
                unsafe {
                    c.pre_exec(move || {
                        if ignore_pipe {
                            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
                        }
                        for &fd in &closed {
                            libc::close(fd);
                        }
                        Ok(())
                    });
                }
            }
            let err = c.exec();
            anyhow::bail!("execution of `{}': {}", cmd[0].to_string_lossy(), strip_os_error(&err))
        }
    }
}

/// Writes `text` to stdout through one lock; a reader that went away (`| head`, EPIPE) is not an
/// error but a quiet exit 0, as for any Unix filter. Shared by `run` and `topo`.
pub(crate) fn print_out(text: &str) -> anyhow::Result<ExitCode> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(anyhow::Error::new(e).context("writing to stdout")),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// Prefixes a refusal by the kernel with the option it concerns: `--preferred-many=0: the running
/// kernel does not support preferred-many (...)`.
fn label_kernel_error(req: &Request, e: numapilot_actuate::Error) -> anyhow::Error {
    let syscall = match &e {
        numapilot_actuate::Error::Syscall { syscall, .. }
        | numapilot_actuate::Error::Unsupported { syscall, .. }
        | numapilot_actuate::Error::InvalidArgument { syscall, .. } => *syscall,
    };
    let label = match syscall {
        "set_mempolicy" => req.policy.as_ref().map(|p| match &p.spec {
            Some(s) if req.balancing && p.kind == PolicyKind::Bind => format!("--balancing {}", s.label()),
            Some(s) => s.label(),
            None => "--localalloc".to_string(),
        }),
        "sched_setaffinity" => req.cpubind.as_ref().map(|c| match c {
            CpuBind::Nodes(s) | CpuBind::Cpus(s) => s.label(),
        }),
        _ => None,
    };
    match label {
        Some(l) => anyhow::Error::new(e).context(l),
        None => anyhow::Error::new(e),
    }
}

/// "No such file or directory", without std's " (os error 2)", as numactl prints strerror.
fn strip_os_error(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.rfind(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Why a request cannot be placed on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolveError {
    /// A node or CPU list is wrong.
    Spec(String, Box<SpecError>),
    /// `--preferred` with other than one node.
    PreferredNotOne(String, NodeSet),
    /// A memory policy on nodes without memory.
    NoMemory(String, NodeSet),
    /// `--cpunodebind` on nodes without CPUs.
    NoCpus(String, NodeSet),
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = |s: &NodeSet| if s.len() == 1 { format!("node {s} has") } else { format!("nodes {s} have") };
        match self {
            ResolveError::Spec(label, e) => write!(f, "{label}: {e}"),
            ResolveError::PreferredNotOne(label, s) => write!(
                f,
                "{label}: --preferred takes exactly one node, this selects {} ({s}); use --preferred-many for several",
                s.len()
            ),
            ResolveError::NoMemory(label, s) => write!(f, "{label}: {} no memory", plural(s)),
            ResolveError::NoCpus(label, s) => write!(f, "{label}: {} no CPUs", plural(s)),
        }
    }
}

impl std::error::Error for ResolveError {}

/// A memory policy option resolved against the machine: its node list read within this process's
/// memory nodes (all online nodes with `--all`), `--preferred` one node, every policy on a node with
/// memory. Shared by the launcher and the shared-memory mode (`segment.rs`).
fn resolve_policy(
    p: &PolicyOpt,
    all: bool,
    sys: &SystemView,
    devices: &dyn DeviceNodes,
) -> Result<MemPolicy, ResolveError> {
    let topo = &sys.topo;
    let online_nodes = &topo.node_ids();
    let memory_nodes = topo.memory_nodes();
    let mem_domain = sys.mem_domain(all);
    let (kind, spec) = match (&p.kind, &p.spec) {
        (PolicyKind::Local, _) | (_, None) => return Ok(MemPolicy::Local),
        (kind, Some(spec)) => (kind, spec),
    };
    let set = nodespec::parse(
        &spec.text,
        Kind::Node,
        Domain { allowed: &mem_domain, existing: online_nodes, cpuset: None },
        Some(devices),
    )
    .map_err(|e| match e.problem {
        // Outside Mems_allowed because it has no memory: say that.
        nodespec::Problem::NotAllowed(id) if !memory_nodes.contains(id) => {
            ResolveError::NoMemory(spec.label(), std::iter::once(id).collect())
        }
        _ => ResolveError::Spec(spec.label(), e),
    })?;
    if *kind == PolicyKind::Preferred && set.len() != 1 {
        return Err(ResolveError::PreferredNotOne(spec.label(), set));
    }
    if set.intersection(&memory_nodes).is_empty() {
        return Err(ResolveError::NoMemory(spec.label(), set));
    }
    Ok(match kind {
        PolicyKind::Bind => MemPolicy::Bind(set),
        PolicyKind::Preferred => MemPolicy::Preferred(set.iter().next().unwrap_or(0)),
        PolicyKind::PreferredMany => MemPolicy::PreferredMany(set),
        PolicyKind::Interleave => MemPolicy::Interleave(set),
        PolicyKind::WeightedInterleave => MemPolicy::WeightedInterleave(set),
        PolicyKind::Local => MemPolicy::Local,
    })
}

/// Resolves a request against the machine into what to apply. Pure: reads only `sys` (and the
/// device resolver for `netdev:` and friends).
pub fn resolve(req: &Request, sys: &SystemView, devices: &dyn DeviceNodes) -> Result<ThreadPlacement, ResolveError> {
    let policy = match &req.policy {
        None => None,
        Some(p) => {
            let policy = resolve_policy(p, req.all, sys, devices)?;
            // numactl: --balancing only modifies --membind ("otherwise ignored", numactl(8)).
            let flags = if req.balancing && matches!(policy, MemPolicy::Bind(_)) {
                ModeFlags::NUMA_BALANCING
            } else {
                ModeFlags::NONE
            };
            Some((policy, flags))
        }
    };

    superseded_cpus(req, sys, devices)?;
    let cpus = req.cpubind.as_ref().map(|c| resolve_cpubind(c, req.all, sys, devices)).transpose()?;
    Ok(ThreadPlacement { policy, cpus })
}

/// The CPU bindings a later one replaces (`-N 5` in `-N 5 -C 1`), each resolved, with its label:
/// numactl applies each when it reads it, so each must be valid (`resolve` checks them) and taken
/// by the kernel (`execute` rehearses them).
fn superseded_cpus(
    req: &Request,
    sys: &SystemView,
    devices: &dyn DeviceNodes,
) -> Result<Vec<(String, CpuSet)>, ResolveError> {
    req.cpubind_before
        .iter()
        .map(|c| {
            let (CpuBind::Nodes(s) | CpuBind::Cpus(s)) = c;
            Ok((s.label(), resolve_cpubind(c, req.all, sys, devices)?))
        })
        .collect()
}

/// The CPUs of one `--cpunodebind` or `--physcpubind`, read against this process's nodes and
/// CPUs (everything online with `--all`).
fn resolve_cpubind(
    bind: &CpuBind,
    all: bool,
    sys: &SystemView,
    devices: &dyn DeviceNodes,
) -> Result<CpuSet, ResolveError> {
    let topo = &sys.topo;
    let online_nodes = &topo.node_ids();
    let online_cpus = &topo.online_cpus();
    let mem_domain = sys.mem_domain(all);
    let cpu_domain = sys.cpu_domain(all);
    // Nodes whose CPUs this process may use count for --cpunodebind even without memory (a CPU-only
    // node is not in Mems_allowed); numactl reads --cpunodebind against Mems_allowed alone. Only
    // when named by number: `+N`, `!` and `all` mean what numactl makes them mean, members of
    // Mems_allowed, so `-N +1 -m same` puts threads and memory on the same node (a review of
    // 2026-11-30: counted over CPU-only nodes too, `+1` named the CPU-only node for -N and the
    // next memory node for -m).
    let cpu_node_domain = mem_domain.union(&topo.nodes_of_cpus(&cpu_domain));
    let by_number_only =
        |text: &str| !text.starts_with('!') && !text.contains('+') && !text.split(',').any(|i| i == "all");
    let nodes = |spec: &Spec, domain: &NodeSet| -> Result<NodeSet, ResolveError> {
        nodespec::parse(
            &spec.text,
            Kind::Node,
            Domain { allowed: domain, existing: online_nodes, cpuset: None },
            Some(devices),
        )
        .map_err(|e| ResolveError::Spec(spec.label(), e))
    };
    match bind {
        CpuBind::Nodes(spec) => {
            let set = match nodes(spec, &mem_domain) {
                Err(_) if by_number_only(&spec.text) => nodes(spec, &cpu_node_domain)?,
                other => other?,
            };
            let cpus: CpuSet = topo.cpus_of_nodes(&set).intersection(online_cpus);
            if cpus.is_empty() {
                return Err(ResolveError::NoCpus(spec.label(), set));
            }
            Ok(cpus)
        }
        CpuBind::Cpus(spec) => nodespec::parse(
            &spec.text,
            Kind::Cpu,
            Domain { allowed: &cpu_domain, existing: online_cpus, cpuset: sys.cpuset_cpus.as_ref() },
            None,
        )
        .map_err(|e| ResolveError::Spec(spec.label(), e)),
    }
}

#[cfg(test)]
mod tests {
    use super::numactl::parse;
    use super::system::tests::{topo, view};
    use super::*;

    struct NoDevices;
    impl DeviceNodes for NoDevices {
        fn device_node(&self, _: nodespec::Device, name: &str) -> Result<u32, String> {
            Err(format!("no device {name}"))
        }
    }

    /// Two nodes, 0 (CPUs 0-3) and 1 (CPUs 4-7), everything allowed.
    fn two_nodes() -> SystemView {
        view(Path::new("/"), topo(&[(0, "0-3", 1 << 20), (1, "4-7", 1 << 20)]), "0-7", "0-1")
    }

    /// Sparse: nodes 0 (CPUs 0-1) and 8 (CPUs 1500, 4095), node 4 memory-only, node 5 CPU-only;
    /// a cpuset allowing nodes 0,4,8 and all CPUs.
    fn sparse() -> SystemView {
        let t = topo(&[(0, "0-1", 1 << 20), (4, "", 1 << 20), (5, "2", 0), (8, "1500,4095", 1 << 20)]);
        view(Path::new("/"), t, "0-2,1500,4095", "0,4,8")
    }

    fn place(sys: &SystemView, args: &[&str]) -> Result<ThreadPlacement, ResolveError> {
        let a: Vec<OsString> = args.iter().map(OsString::from).chain(std::iter::once("true".into())).collect();
        resolve(&parse(&a).unwrap(), sys, &NoDevices)
    }

    fn set(s: &str) -> NodeSet {
        NodeSet::parse_list(s).unwrap()
    }

    #[test]
    fn membind_and_cpunodebind_on_node_1() {
        let p = place(&two_nodes(), &["--membind=1", "--cpunodebind=1"]).unwrap();
        assert_eq!(p.policy, Some((MemPolicy::Bind(set("1")), ModeFlags::NONE)));
        assert_eq!(p.cpus, Some(set("4-7")));
    }

    #[test]
    fn each_policy_maps_to_its_mode() {
        let s = two_nodes();
        let pol = |a: &[&str]| place(&s, a).unwrap().policy.unwrap();
        assert_eq!(pol(&["-i", "all"]), (MemPolicy::Interleave(set("0-1")), ModeFlags::NONE));
        assert_eq!(pol(&["-w", "0,1"]), (MemPolicy::WeightedInterleave(set("0-1")), ModeFlags::NONE));
        assert_eq!(pol(&["-p", "1"]), (MemPolicy::Preferred(1), ModeFlags::NONE));
        assert_eq!(pol(&["-P", "!0"]), (MemPolicy::PreferredMany(set("1")), ModeFlags::NONE));
        assert_eq!(pol(&["-l"]), (MemPolicy::Local, ModeFlags::NONE));
        assert_eq!(pol(&["-b", "-m", "+1"]), (MemPolicy::Bind(set("1")), ModeFlags::NUMA_BALANCING));
        // --balancing without --membind is ignored, as in numactl.
        assert_eq!(pol(&["-b", "-i", "0"]), (MemPolicy::Interleave(set("0")), ModeFlags::NONE));
    }

    #[test]
    fn physcpubind_sets_exactly_those_cpus() {
        let p = place(&two_nodes(), &["--physcpubind=1,5-6"]).unwrap();
        assert_eq!(p.cpus, Some(set("1,5-6")));
        assert_eq!(p.policy, None);
        let p = place(&two_nodes(), &["-C", "!+0-3"]).unwrap();
        assert_eq!(p.cpus, Some(set("4-7")));
    }

    /// A node whose memory is not known (its meminfo missing, as in gVisor's sysfs) is a memory
    /// node, as numactl binds to it by Mems_allowed (it was refused as a node without memory;
    /// review helper-62).
    #[test]
    fn a_node_of_unknown_memory_takes_a_memory_policy() {
        let mut t = topo(&[(0, "0-3", 0), (1, "4-7", 0)]);
        for n in &mut t.nodes {
            n.mem_total_unknown = true;
            n.mem_free_unknown = true;
        }
        let s = view(Path::new("/"), t, "0-7", "0-1");
        let p = place(&s, &["--membind=0"]).unwrap();
        assert_eq!(p.policy, Some((MemPolicy::Bind(set("0")), ModeFlags::NONE)));
        assert_eq!(place(&s, &["--preferred=1"]).unwrap().policy.unwrap().0, MemPolicy::Preferred(1));
    }

    #[test]
    fn sparse_nodes_and_cpus_beyond_1024() {
        let s = sparse();
        let p = place(&s, &["--membind=8", "--cpunodebind=8"]).unwrap();
        assert_eq!(p.policy, Some((MemPolicy::Bind(set("8")), ModeFlags::NONE)));
        assert_eq!(p.cpus, Some(set("1500,4095")));
        // Relative: the third allowed memory node is 8.
        assert_eq!(place(&s, &["-m", "+2"]).unwrap().policy.unwrap().0, MemPolicy::Bind(set("8")));
        // Inversion within the allowed nodes {0,4,8}.
        assert_eq!(place(&s, &["-i", "!0"]).unwrap().policy.unwrap().0, MemPolicy::Interleave(set("4,8")));
        // A CPU-only node (5, not in Mems_allowed) can be named for CPUs but not for memory.
        assert_eq!(place(&s, &["-N", "5"]).unwrap().cpus, Some(set("2")));
        assert_eq!(place(&s, &["-m", "5"]).unwrap_err().to_string(), "-m 5: node 5 has no memory");
        // Named by number only: `+N`, `!` and `all` count the allowed memory nodes {0,4,8}, as
        // numactl's do, so `-N +2 -m same` is node 8 for both (counted over {0,4,5,8}, `+2` was
        // node 5 for -N and node 8 for -m).
        let both = place(&s, &["-N", "+2", "-m", "same"]).unwrap();
        assert_eq!((both.cpus, both.policy.unwrap().0), (Some(set("1500,4095")), MemPolicy::Bind(set("8"))));
        assert_eq!(place(&s, &["-N", "all"]).unwrap().cpus, Some(set("0-1,1500,4095")));
        assert_eq!(place(&s, &["-N", "!0"]).unwrap().cpus, Some(set("1500,4095")));
        assert_eq!(place(&s, &["-N", "0,5"]).unwrap().cpus, Some(set("0-2")));
        // Node 4 has memory but no CPUs; node 1 does not exist.
        let e = place(&s, &["-m", "1"]).unwrap_err().to_string();
        assert_eq!(e, "-m 1: node 1 does not exist (online nodes: 0,4-5,8)");
        assert_eq!(place(&s, &["-C", "4095"]).unwrap().cpus, Some(set("4095")));
        assert_eq!(place(&s, &["-C", "+3-4"]).unwrap().cpus, Some(set("1500,4095")));
    }

    #[test]
    fn errors_name_option_and_token() {
        let s = two_nodes();
        let err = |a: &[&str]| place(&s, a).unwrap_err().to_string();
        assert_eq!(err(&["--membind=7"]), "--membind=7: node 7 does not exist (online nodes: 0-1)");
        assert_eq!(err(&["-m", "0,7"]), "-m 0,7: \"7\": node 7 does not exist (online nodes: 0-1)");
        assert_eq!(err(&["--membind=1-0"]), "--membind=1-0: range 1-0 runs backwards");
        assert_eq!(err(&["--interleave=!all"]), "--interleave=!all: selects no node (allowed nodes: 0-1)");
        assert_eq!(err(&["--membind="]), "--membind=: empty node list");
        assert_eq!(err(&["--physcpubind=9"]), "--physcpubind=9: CPU 9 does not exist (online CPUs: 0-7)");
        assert_eq!(err(&["--cpunodebind=x"]), "--cpunodebind=x: \"x\" is not a node number, an A-B range or a keyword");
        assert_eq!(
            err(&["--preferred=0-1"]),
            "--preferred=0-1: --preferred takes exactly one node, this selects 2 (0-1); use --preferred-many for several"
        );
        assert_eq!(err(&["--membind=netdev:eth0"]), "--membind=netdev:eth0: no device eth0");
        let s = sparse();
        assert_eq!(place(&s, &["-N", "4"]).unwrap_err().to_string(), "-N 4: node 4 has no CPUs");
        // Node 5 is online with CPUs but no memory: named with --all, refused for memory.
        assert_eq!(place(&s, &["--all", "-m", "5"]).unwrap_err().to_string(), "-m 5: node 5 has no memory");
    }

    /// numactl applies each CPU binding as it reads it, so one a later binding replaces must be
    /// valid too: `-N 5 -C 1` is refused for node 5, not run on CPU 1 (the 4-node rig's matrix,
    /// crates/rig/tests/launcher.rs, found ours running it).
    #[test]
    fn a_replaced_cpu_binding_is_checked_too() {
        let s = two_nodes();
        let err = |a: &[&str]| place(&s, a).unwrap_err().to_string();
        assert_eq!(err(&["-N", "5", "-C", "1"]), "-N 5: node 5 does not exist (online nodes: 0-1)");
        assert_eq!(err(&["-C", "8", "-N", "1"]), "-C 8: CPU 8 does not exist (online CPUs: 0-7)");
        assert_eq!(
            err(&["-C", "1", "--cpunodebind=x", "-C", "2"]),
            place(&s, &["--cpunodebind=x"]).unwrap_err().to_string()
        );
        // Valid ones: the last holds.
        assert_eq!(place(&s, &["-N", "1", "-C", "2"]).unwrap().cpus, Some(set("2")));
        assert_eq!(place(&s, &["-C", "2", "-N", "1"]).unwrap().cpus, Some(set("4-7")));
        // A node without CPUs, replaced by a valid binding: refused as numactl's empty affinity is.
        assert_eq!(place(&sparse(), &["-N", "4", "-C", "0"]).unwrap_err().to_string(), "-N 4: node 4 has no CPUs");
    }

    #[test]
    fn cpuset_restrictions_and_all() {
        // A process confined to node 0 and CPUs 0-1 on the two-node machine.
        let t = topo(&[(0, "0-3", 1 << 20), (1, "4-7", 1 << 20)]);
        let s = view(Path::new("/"), t, "0-1", "0");
        let e = place(&s, &["-m", "1"]).unwrap_err().to_string();
        assert!(e.starts_with("-m 1: node 1 is outside this process's cpuset (nodes 0;"), "{e}");
        let e = place(&s, &["-C", "4"]).unwrap_err().to_string();
        assert!(e.starts_with("-C 4: CPU 4 is outside the CPUs this process may use (0-1: its CPU affinity"), "{e}");
        assert_eq!(place(&s, &["-C", "all"]).unwrap().cpus, Some(set("0-1")));
        assert_eq!(place(&s, &["-m", "all"]).unwrap().policy.unwrap().0, MemPolicy::Bind(set("0")));
        // --all reads lists against everything online (the kernel then has the last word).
        assert_eq!(place(&s, &["--all", "-m", "1"]).unwrap().policy.unwrap().0, MemPolicy::Bind(set("1")));
        assert_eq!(place(&s, &["-a", "-C", "all"]).unwrap().cpus, Some(set("0-7")));
        // --cpunodebind gives the node's online CPUs; the kernel intersects them with the cpuset.
        assert_eq!(place(&s, &["-N", "0"]).unwrap().cpus, Some(set("0-3")));
    }

    #[test]
    fn kernel_refusals_are_labelled_with_their_option() {
        let a: Vec<OsString> = ["--preferred-many=0", "-C", "1", "true"].iter().map(OsString::from).collect();
        let req = parse(&a).unwrap();
        let e = numapilot_actuate::Error::Unsupported {
            what: "preferred-many".into(),
            since: "5.15",
            syscall: "set_mempolicy",
        };
        let m = format!("{:#}", label_kernel_error(&req, e));
        assert!(m.starts_with("--preferred-many=0: the running kernel does not support preferred-many"), "{m}");
        let e = numapilot_actuate::Error::Syscall { syscall: "sched_setaffinity", args: "pid=0".into(), errno: 22 };
        let m = format!("{:#}", label_kernel_error(&req, e));
        assert!(m.starts_with("-C 1: sched_setaffinity(pid=0) failed: EINVAL"), "{m}");
    }

    #[test]
    fn nothing_to_do_is_an_empty_placement() {
        assert!(place(&two_nodes(), &[]).unwrap().is_empty());
    }
}

/// What this process inherited that Rust's runtime changes before `main`: whether SIGPIPE was
/// ignored (the runtime ignores it) and which of descriptors 0-2 were closed (the runtime opens
/// /dev/null on them). Recorded by a constructor that runs first.
mod inherited {
    use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

    static SIGPIPE_IGNORED: AtomicBool = AtomicBool::new(false);
    /// Bit n: descriptor n (0-2) was closed.
    static CLOSED: AtomicU8 = AtomicU8::new(0);

    /// Runs from `.init_array`, before the Rust runtime's start-up.
    extern "C" fn record() {
        // SAFETY: sigaction with a null new action only reads the current one into `old`; fcntl
        // F_GETFD only asks whether a descriptor is open.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGPIPE, std::ptr::null(), &mut old) == 0 {
                SIGPIPE_IGNORED.store(old.sa_sigaction == libc::SIG_IGN, Ordering::Relaxed);
            }
            let mut closed = 0u8;
            for fd in 0..3 {
                if libc::fcntl(fd, libc::F_GETFD) == -1 {
                    closed |= 1 << fd;
                }
            }
            CLOSED.store(closed, Ordering::Relaxed);
        }
    }

    #[used]
    #[link_section = ".init_array"]
    static RECORD: extern "C" fn() = record;

    /// Whether SIGPIPE was ignored when this process started.
    pub fn sigpipe_ignored() -> bool {
        SIGPIPE_IGNORED.load(Ordering::Relaxed)
    }

    /// Descriptors among 0-2 that were closed when this process started.
    pub fn closed_std_fds() -> Vec<i32> {
        let c = CLOSED.load(Ordering::Relaxed);
        (0..3).filter(|fd| c & (1 << fd) != 0).collect()
    }
}
