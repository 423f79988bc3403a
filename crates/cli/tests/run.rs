//! `numapilot run` and the `numactl` personality, driven through the built binary on this host.
//!
//! What the kernel did is read back from the child itself (/proc/self/status, /proc/self/numa_maps,
//! rendered by the kernel), never from our own output. `--show` and `--hardware` are compared with
//! Debian's numactl run the same way (`apt-get install -y numactl`). Expectations about nodes and
//! CPUs are computed from this host's sysfs, so the tests hold on any machine; the multi-node
//! behaviour (`--membind=1` on a 2-node machine) is checked by the rig in QEMU guests.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_numapilot");

fn numapilot_run<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(args: I) -> Output {
    Command::new(BIN).arg("run").args(args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok(o: Output) -> String {
    assert!(o.status.success(), "exit {:?}\nstdout:\n{}\nstderr:\n{}", o.status.code(), stdout(&o), stderr(&o));
    stdout(&o)
}

fn field<'a>(status: &'a str, name: &str) -> &'a str {
    status.lines().find_map(|l| l.strip_prefix(name)).map(str::trim).unwrap_or_else(|| panic!("no {name} in\n{status}"))
}

fn sysfs_list(path: &str) -> String {
    std::fs::read_to_string(path).unwrap().trim().to_string()
}

fn our_status() -> String {
    std::fs::read_to_string("/proc/self/status").unwrap()
}

/// The lowest node this process may allocate from (node 0 on the development host).
fn first_node() -> u32 {
    let allowed = our_status();
    let list = field(&allowed, "Mems_allowed_list:");
    list.split([',', '-']).next().unwrap().parse().unwrap()
}

/// CPUs this process may use, as a list of ids.
fn allowed_cpus() -> Vec<u32> {
    let s = our_status();
    let mut v = Vec::new();
    for part in field(&s, "Cpus_allowed_list:").split(',') {
        match part.split_once('-') {
            Some((a, b)) => v.extend(a.parse::<u32>().unwrap()..=b.parse().unwrap()),
            None => v.push(part.parse().unwrap()),
        }
    }
    v
}

fn numactl() -> &'static str {
    assert!(
        Path::new("/usr/bin/numactl").exists(),
        "Debian's numactl is needed to compare against: apt-get install -y numactl"
    );
    "/usr/bin/numactl"
}

#[test]
fn membind_and_cpunodebind_take_effect_in_the_child() {
    let n = first_node();
    let node_cpus = sysfs_list(&format!("/sys/devices/system/node/node{n}/cpulist"));
    let status = ok(numapilot_run([
        format!("--membind={n}"),
        format!("--cpunodebind={n}"),
        "--".into(),
        "cat".into(),
        "/proc/self/status".into(),
    ]));
    assert_eq!(field(&status, "Mems_allowed_list:"), n.to_string());
    assert_eq!(field(&status, "Cpus_allowed_list:"), node_cpus);

    // The policy itself: the kernel renders the task policy on every VMA without its own.
    let maps = ok(numapilot_run([format!("--membind={n}"), "--".into(), "cat".into(), "/proc/self/numa_maps".into()]));
    assert!(maps.lines().count() > 3, "{maps}");
    for line in maps.lines() {
        assert_eq!(line.split_whitespace().nth(1), Some(format!("bind:{n}").as_str()), "not bound: {line}");
    }
    // Without options the child keeps the default policy: the check above can fail.
    let maps = ok(numapilot_run(["cat", "/proc/self/numa_maps"]));
    assert!(maps.lines().all(|l| l.split_whitespace().nth(1) == Some("default")), "{maps}");
}

#[test]
fn every_policy_as_the_kernel_reports_it() {
    let n = first_node();
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut v = release.trim().split(|c: char| !c.is_ascii_digit()).map(|x| x.parse::<u32>().unwrap_or(0));
    let kernel = (v.next().unwrap(), v.next().unwrap());
    let mut cases = vec![
        (vec![format!("--interleave={n}")], format!("interleave:{n}")),
        (vec!["-i".into(), "all".into()], format!("interleave:{n}")),
        (vec![format!("--preferred={n}")], format!("prefer:{n}")),
        (vec![format!("-p{n}")], format!("prefer:{n}")),
        (vec!["--localalloc".into()], "local".to_string()),
        (vec![format!("-m{n}"), "-b".into()], format!("bind=balancing:{n}")),
    ];
    if kernel >= (5, 15) {
        cases.push((vec![format!("--preferred-many={n}")], format!("prefer (many):{n}")));
    }
    if kernel >= (6, 9) {
        cases.push((vec![format!("--weighted-interleave={n}")], format!("weighted interleave:{n}")));
        cases.push((vec!["-w".into(), format!("{n}")], format!("weighted interleave:{n}")));
    }
    for (opts, expect) in cases {
        let mut args = opts.clone();
        args.extend(["head".into(), "-1".into(), "/proc/self/numa_maps".into()]);
        let line = ok(numapilot_run(&args));
        assert!(line.contains(&format!(" {expect} ")), "{opts:?}: {line}");
    }
}

#[test]
fn physcpubind_restricts_to_those_cpus() {
    let cpus = allowed_cpus();
    let last = *cpus.last().unwrap();
    let status = ok(numapilot_run([format!("--physcpubind={last}"), "cat".into(), "/proc/self/status".into()]));
    assert_eq!(field(&status, "Cpus_allowed_list:"), last.to_string());
    if cpus.len() > 1 {
        // "!first" and "+1" both name the second allowed CPU on a two-CPU host.
        let first = cpus[0];
        let status = ok(numapilot_run([format!("-C!{first}"), "cat".into(), "/proc/self/status".into()]));
        let rest: Vec<String> = cpus[1..].iter().map(u32::to_string).collect();
        assert!(field(&status, "Cpus_allowed_list:").starts_with(&rest[0]), "{}", field(&status, "Cpus_allowed_list:"));
        let status = ok(numapilot_run(["-C", "+1", "cat", "/proc/self/status"]));
        assert_eq!(field(&status, "Cpus_allowed_list:"), cpus[1].to_string());
    }
}

#[test]
fn every_option_form_reaches_the_child() {
    let n = first_node();
    for form in [
        vec![format!("--membind={n}")],
        vec!["--membind".into(), n.to_string()],
        vec![format!("-m{n}")],
        vec!["-m".into(), n.to_string()],
        vec![format!("--mem={n}")],
        vec!["--cpunodebind".into(), n.to_string(), "--membind=same".into()],
        vec!["--all".into(), format!("--membind={n}")],
        vec!["--membind=+0".into()],
    ] {
        let mut args = form.clone();
        args.extend(["--".into(), "head".into(), "-1".into(), "/proc/self/numa_maps".into()]);
        let line = ok(numapilot_run(&args));
        assert!(line.contains(&format!(" bind:{n} ")), "{form:?}: {line}");
    }
}

#[test]
fn command_gets_its_arguments_and_path_search() {
    let out = ok(numapilot_run(["-l", "sh", "-c", "echo \"$0|$1|$2\"", "a", "-m", "--x"]));
    assert_eq!(out, "a|-m|--x\n");
    // `--` lets the command start with a dash; without it that would be an option.
    let o = numapilot_run(["--", "-no-such-command"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o), "numapilot: execution of `-no-such-command': No such file or directory\n");
    let o = numapilot_run(["-l", "no-such-command-xyz"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("execution of `no-such-command-xyz': No such file or directory"), "{}", stderr(&o));
}

/// Runs `args` then a command that would create `marker`, and checks it exited 1 with `token` in
/// the message and never ran the command.
fn refused(args: &[&str], token: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let mut full: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    full.extend(["--".into(), "touch".into(), marker.to_string_lossy().into_owned()]);
    let o = numapilot_run(&full);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{args:?} should fail:\n{err}");
    assert!(err.contains(token), "{args:?}: message lacks {token:?}:\n{err}");
    assert!(!marker.exists(), "{args:?}: the command ran");
    assert!(stdout(&o).is_empty(), "{args:?}: {}", stdout(&o));
    err
}

#[test]
fn bad_input_exits_1_names_the_token_and_runs_nothing() {
    let missing = (0..1024).find(|i| !Path::new(&format!("/sys/devices/system/node/node{i}")).exists()).unwrap();
    let err = refused(&[&format!("--membind={missing}")], &format!("node {missing} does not exist"));
    assert!(err.starts_with(&format!("numapilot: --membind={missing}: ")), "{err}");
    refused(&["--membind=0,x"], "\"x\"");
    refused(&["--interleave=!all"], "selects no node");
    refused(&["--membind="], "empty node list");
    refused(&["--physcpubind=65000"], "CPU 65000 does not exist");
    refused(&["--physcpubind=70000"], "too large");
    refused(&["--preferred=+9"], "relative node +9 is out of range");
    refused(&["--membind=all,0"], "\"all\" must be the last item");
    refused(&["--membind=0", "--physcpubind=0-"], "\"0-\"");
    // A CPU binding a later one replaces is checked too: numactl applies each as it reads it.
    refused(&[&format!("--cpunodebind={missing}"), "--physcpubind=0"], &format!("node {missing} does not exist"));
    refused(&["-C", "65000", "-N", "0"], "CPU 65000 does not exist");
    refused(&["--membind=netdev:no-such-nic"], "no network device no-such-nic");
    refused(&["--membind=ip:localhost"], "not supported");
    // A device form with nothing after it is said as such (file: read "cannot stat : No such file").
    assert_eq!(refused(&["-m", "file:"], "file:"), "numapilot: -m file:: no path after file:\n");
    assert_eq!(
        refused(&["-m", "0,netdev:"], "netdev:"),
        "numapilot: -m 0,netdev:: \"netdev:\": no interface name after netdev:\n"
    );
    // A CPU that exists but is outside our affinity, when there is one: confine ourselves first.
    let cpus = allowed_cpus();
    if cpus.len() > 1 {
        refused(
            &[&format!("--physcpubind={}-{}", cpus[1], cpus[0])],
            &format!("range {}-{} runs backwards", cpus[1], cpus[0]),
        );
        let o = Command::new("taskset")
            .args(["-c", &cpus[0].to_string(), BIN, "run", &format!("--physcpubind={}", cpus[1]), "true"])
            .output();
        if let Ok(o) = o {
            assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
            assert!(stderr(&o).contains(&format!("CPU {} is outside this process", cpus[1])), "{}", stderr(&o));
        }
    }
}

/// `numapilot run ARGS` with this test's first allowed CPU taken out of its CPU affinity by
/// sched_setaffinity (what `taskset -c` does) just before the exec; `None` on a one-CPU host.
fn run_narrowed(args: &[&str]) -> Option<(Output, u32, u32)> {
    let cpus = allowed_cpus();
    let (&out, &keep) = (cpus.first()?, cpus.get(1)?);
    let mut c = Command::new(BIN);
    c.arg("run").args(args.iter().map(|a| a.replace("OUT", &out.to_string())));
    // SAFETY: between fork and exec the hook only fills a mask on its stack and calls
    // sched_setaffinity(2).
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut c, move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(keep as usize, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Some((c.output().unwrap(), out, keep))
}

/// A CPU the affinity keeps out (taskset, sched_setaffinity), in a cpuset that has it, is named as
/// outside the affinity, and --all lifts that (the command runs on it, as under numactl --all). It
/// was "outside the CPUs this process may use (1; --all lifts the cpuset restriction)", though no
/// cpuset was involved (a user trial).
#[test]
fn a_cpu_outside_the_affinity_is_named_so_and_all_lifts_it() {
    let Some((o, out, keep)) = run_narrowed(&["-C", "OUT", "true"]) else {
        eprintln!("skipped: one CPU");
        return;
    };
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let cpuset_known = numapilot_actuate::CpusetHierarchy::detect(None).is_some();
    let said = if cpuset_known {
        format!(
            "numapilot: -C {out}: CPU {out} is outside this process's CPU affinity ({keep}, as taskset or \
             sched_setaffinity set it; --all lifts it)\n"
        )
    } else {
        format!("numapilot: -C {out}: CPU {out} is outside the CPUs this process may use ({keep}: its CPU affinity")
    };
    assert!(stderr(&o).starts_with(&said), "{}", stderr(&o));
    assert!(!stderr(&o).contains("usage:"), "{}", stderr(&o));
    let (o, ..) = run_narrowed(&["--all", "-C", "OUT", "grep", "Cpus_allowed_list", "/proc/self/status"]).unwrap();
    assert_eq!(ok(o), format!("Cpus_allowed_list:\t{out}\n"));
}

/// A cgroup cpuset with one CPU, made for a test and removed when dropped (root, a v1 cpuset
/// hierarchy or a v2 one whose root hands cpuset down); `None` where it cannot be made.
struct OneCpuCpuset(PathBuf);

impl OneCpuCpuset {
    fn make(cpu: u32) -> Option<OneCpuCpuset> {
        let h = numapilot_actuate::CpusetHierarchy::detect(None)?;
        let v2 = h.version == numapilot_actuate::CgroupVersion::V2;
        if v2 && !std::fs::read_to_string(h.mount.join("cgroup.subtree_control")).ok()?.contains("cpuset") {
            return None;
        }
        let dir = h.mount.join(format!("numapilot-cli-test-{}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let made = OneCpuCpuset(dir);
        let mems =
            std::fs::read_to_string(h.mount.join(if v2 { "cpuset.mems.effective" } else { "cpuset.mems" })).ok()?;
        std::fs::write(made.0.join("cpuset.mems"), mems.trim()).ok()?;
        std::fs::write(made.0.join("cpuset.cpus"), cpu.to_string()).ok()?;
        Some(made)
    }

    /// `numapilot run ARGS` started inside the cpuset.
    fn run(&self, args: &[&str]) -> Output {
        let procs = self.0.join("cgroup.procs");
        Command::new("sh")
            .arg("-c")
            .arg(format!("echo $$ > {} && exec \"$0\" run \"$@\"", procs.display()))
            .arg(BIN)
            .args(args)
            .output()
            .unwrap()
    }
}

impl Drop for OneCpuCpuset {
    fn drop(&mut self) {
        for _ in 0..100 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// A CPU the cpuset keeps out is named as outside the cpuset, with its CPUs; --all skips the check
/// and the kernel refuses the CPU, as it does numactl --all's.
#[test]
fn a_cpu_outside_the_cpuset_is_named_so() {
    let cpus = allowed_cpus();
    let (Some(&out), Some(&keep)) = (cpus.first(), cpus.get(1)) else {
        eprintln!("skipped: one CPU");
        return;
    };
    let Some(cpuset) = OneCpuCpuset::make(keep) else {
        eprintln!("skipped: no cpuset cgroup could be made here (root and a cpuset hierarchy needed)");
        return;
    };
    let o = cpuset.run(&["-C", &out.to_string(), "true"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        format!(
            "numapilot: -C {out}: CPU {out} is outside this process's cpuset (CPUs {keep}; --all skips this check, \
             the kernel keeps to the cpuset)\n"
        )
    );
    let o = cpuset.run(&["--all", "-C", &out.to_string(), "true"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("sched_setaffinity") && stderr(&o).contains("EINVAL"), "{}", stderr(&o));
}

/// A bad node or CPU list is one line naming it, where Debian's numactl prints libnuma's warning
/// and then its whole usage text; the exit status is numactl's, 1 (docs/tools.md, deliberate
/// differences). Without a command both print the usage, as for any command line of the wrong
/// shape.
#[test]
fn a_bad_list_is_one_line_with_numactls_exit_status() {
    let node = (0..1024).find(|i| !Path::new(&format!("/sys/devices/system/node/node{i}")).exists()).unwrap();
    let cpu = (0..65536).find(|i| !Path::new(&format!("/sys/devices/system/cpu/cpu{i}")).exists()).unwrap();
    let cases = [
        (vec!["-m".to_string(), node.to_string()], format!("-m {node}: node {node} does not exist")),
        (vec!["-ms".into()], "-m s: \"s\" is not a node number".into()),
        (vec!["-C".into(), cpu.to_string()], format!("-C {cpu}: CPU {cpu} does not exist")),
    ];
    for (list, said) in cases {
        let with_command: Vec<String> = list.iter().cloned().chain(["true".into()]).collect();
        let ours = numapilot_run(&with_command);
        let theirs = Command::new(numactl()).args(&with_command).output().unwrap();
        assert_eq!((ours.status.code(), theirs.status.code()), (Some(1), Some(1)), "{with_command:?}");
        let err = stderr(&ours);
        assert_eq!(err.lines().count(), 1, "{with_command:?}: {err}");
        assert!(err.starts_with(&format!("numapilot: {said}")), "{err}");
        assert!(stderr(&theirs).contains("usage:"), "numactl {with_command:?}: {}", stderr(&theirs));
        let ours = numapilot_run(&list);
        let theirs = Command::new(numactl()).args(&list).output().unwrap();
        assert_eq!((ours.status.code(), theirs.status.code()), (Some(1), Some(1)), "{list:?}");
        assert!(stderr(&ours).lines().nth(1).is_some_and(|l| l.starts_with("usage:")), "{}", stderr(&ours));
    }
}

#[test]
fn usage_errors_print_usage_and_exit_1() {
    for (args, first_line) in [
        (&[][..], "numapilot: no command given"),
        (&["-m0"], "numapilot: no command given"),
        (&["--bogus", "true"], "numapilot: unrecognized option '--bogus'"),
        (&["-Z", "true"], "numapilot: invalid option -- 'Z'"),
        (&["-m"], "numapilot: option requires an argument -- 'm'"),
        (&["--membind"], "numapilot: option '--membind' requires an argument"),
        (&["--show=1"], "numapilot: option '--show' doesn't allow an argument"),
        (
            &["--p=0", "true"],
            "numapilot: option '--p=0' is ambiguous; possibilities: '--preferred' '--preferred-many' '--physcpubind'\n",
        ),
        (&["-m0", "-i0", "true"], "numapilot: Conflicting policies: -m and -i"),
        (&["-p0", "-p0", "true"], "numapilot: Conflicting policies: -p given twice"),
        (&["-m0", "--all", "true"], "numapilot: --all/-a option must be before all cpu/node specifications"),
        (&["--membind=same", "true"], "numapilot: --membind: same needs previous node specification"),
        (&["-L", "1m", "true"], "numapilot: -L describes a shared-memory segment, and no --shm or --file follows it"),
        (&["-u", "true"], "numapilot: -u describes a shared-memory segment, and no --shm or --file follows it"),
        (
            &["--file=/nonexistent/x", "true"],
            "numapilot: --file sets policies on a shared-memory segment and takes no command (true follows it",
        ),
        // The list forgotten: what was meant as the command is read as the list and named, as
        // numactl does ("<./prog> is invalid"), before there is no command to speak of.
        (&["--membind", "./prog"], "numapilot: --membind=./prog: \"./prog\" is not a node number"),
        // --version is ours: an abbreviation that fits numactl's --verify means --verify, as there.
        (&["--ver"], "numapilot: --verify must be after shared memory specification"),
    ] {
        let o = numapilot_run(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = stderr(&o);
        assert!(err.starts_with(first_line), "{args:?}:\n{err}");
        assert!(err.contains("\nusage: numapilot run [--all | -a]"), "{args:?}:\n{err}");
        assert!(o.stdout.is_empty());
    }
    let help = numapilot_run(["--help"]);
    assert!(help.status.success());
    assert!(stdout(&help).starts_with("usage: numapilot run"));
}

/// A node or CPU list before `--hardware` is checked as numactl checks it: an invalid one is an
/// error (it was ignored and the hardware printed); a valid one is not (numactl refuses that too,
/// with a message about --shm: ours prints the hardware).
#[test]
fn an_invalid_list_before_hardware_is_an_error() {
    for args in [&["-m", "4095", "-H"][..], &["-C", "1000000", "-H"], &["-m", "abc", "--hardware"]] {
        let o = numapilot_run(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "{args:?}");
        assert!(stderr(&o).contains(args[1]), "{args:?}: {}", stderr(&o));
    }
    let o = numapilot_run(["-m", &first_node().to_string(), "-H"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("available: "));
}

#[test]
fn strict_is_warned_about_and_ignored() {
    let o = numapilot_run(["--strict", "-l", "true"]);
    assert!(o.status.success());
    assert_eq!(stderr(&o), "numapilot: warning. Strict flag for process ignored.\n");
}

/// The option sets compared with numactl, for this host.
fn show_cases() -> Vec<Vec<String>> {
    let n = first_node();
    let cpus = allowed_cpus();
    let last = cpus.last().unwrap();
    let mut cases: Vec<Vec<String>> = vec![
        vec![],
        vec![format!("--membind={n}")],
        vec![format!("-p{n}")],
        vec![format!("--interleave={n}")],
        vec!["-i".into(), "all".into()],
        vec!["--localalloc".into()],
        vec![format!("--physcpubind={last}")],
        vec![format!("--cpunodebind={n}")],
        vec![format!("-m{n}"), format!("-C{}", cpus[0])],
        vec!["-b".into(), format!("-m{n}")],
        // Blanks before a number, as strtoul skips them (a list with a blank after its commas).
        vec![format!("--membind={n}, {n}")],
        vec!["-C".into(), format!(" {last}")],
    ];
    let rel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut v = rel.trim().split(|c: char| !c.is_ascii_digit()).map(|x| x.parse::<u32>().unwrap_or(0));
    if (v.next().unwrap(), v.next().unwrap()) >= (5, 15) {
        cases.push(vec![format!("--preferred-many={n}")]);
    }
    cases
}

fn run_cmd(prog: &str, pre: &[&str], opts: &[String], post: &[&str]) -> String {
    ok(Command::new(prog).args(pre).args(opts).args(post).output().unwrap())
}

#[test]
fn show_matches_numactl() {
    let real = numactl();
    for opts in show_cases() {
        let theirs = run_cmd(real, &[], &opts, &["--show"]);
        // Our --show of our own placement.
        assert_eq!(run_cmd(BIN, &["run"], &opts, &["--show"]), theirs, "numapilot run {opts:?} --show");
        // numactl's --show of our placement (what we set, seen by the real tool).
        assert_eq!(
            run_cmd(BIN, &["run"], &opts, &["--", real, "--show"]),
            theirs,
            "numapilot run {opts:?} numactl --show"
        );
        // Our --show of numactl's placement.
        assert_eq!(run_cmd(real, &[], &opts, &[BIN, "run", "--show"]), theirs, "numactl {opts:?} numapilot run --show");
    }
}

/// A directory holding a `numactl` symlink to our binary.
fn numactl_link() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("numactl");
    std::os::unix::fs::symlink(BIN, &link).unwrap();
    (dir, link)
}

#[test]
fn symlink_named_numactl_behaves_as_numactl() {
    let real = numactl();
    let (dir, link) = numactl_link();
    let link = link.to_str().unwrap();
    let n = first_node();

    let status = ok(Command::new(link)
        .args([format!("--membind={n}"), "cat".into(), "/proc/self/status".into()])
        .output()
        .unwrap());
    assert_eq!(field(&status, "Mems_allowed_list:"), n.to_string());
    for opts in show_cases() {
        assert_eq!(run_cmd(link, &[], &opts, &["--show"]), run_cmd(real, &[], &opts, &["--show"]), "{opts:?}");
    }

    // --hardware: the same text, except the free-memory lines, which change between the two runs.
    let ours = run_cmd(link, &[], &[], &["--hardware"]);
    let theirs = run_cmd(real, &[], &[], &["--hardware"]);
    let stable = |s: &str| s.lines().filter(|l| !l.contains(" free: ")).map(String::from).collect::<Vec<_>>();
    assert_eq!(stable(&ours), stable(&theirs));
    assert_eq!(ours.lines().count(), theirs.lines().count());

    // Errors and usage carry numactl's name.
    let o = Command::new(link).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).starts_with("numactl: no command given\nusage: numactl [--all | -a]"), "{}", stderr(&o));
    let o = Command::new(link).args(["--membind=0,77", "true"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).starts_with("numactl: --membind=0,77: \"77\": node 77 does not exist"), "{}", stderr(&o));

    // A script that says `numactl` gets ours when it comes first in PATH.
    let path = format!("{}:{}", dir.path().display(), std::env::var("PATH").unwrap_or_default());
    let o = Command::new("sh")
        .args([
            "-c",
            &format!("numactl --version && numactl --membind={n} -- grep Mems_allowed_list /proc/self/status"),
        ])
        .env("PATH", path)
        .output()
        .unwrap();
    let out = ok(o);
    assert!(out.starts_with("numapilot "), "{out}");
    assert!(out.ends_with(&format!("Mems_allowed_list:\t{n}\n")), "{out}");
}

/// A command started ignoring SIGPIPE (systemd's IgnoreSIGPIPE=yes for services, `trap '' PIPE`)
/// still ignores it after the launcher, as under Debian's numactl: Rust's runtime ignores SIGPIPE
/// itself and `Command` resets it to the default for the program, which then died of a write to a
/// closed pipe instead of seeing EPIPE (a review of 2026-11-29). One started with the default keeps
/// the default.
#[test]
fn an_ignored_sigpipe_stays_ignored_in_the_command() {
    let sigign = |launcher: &str, trap: bool| -> u64 {
        let script =
            format!("{} exec {launcher} grep SigIgn /proc/self/status", if trap { "trap '' PIPE;" } else { "" });
        let out = ok(Command::new("sh").arg("-c").arg(script).output().unwrap());
        u64::from_str_radix(field(&out, "SigIgn:"), 16).unwrap()
    };
    const PIPE: u64 = 1 << (libc::SIGPIPE - 1);
    let ours = format!("{BIN} run");
    assert_ne!(sigign(&ours, true) & PIPE, 0, "ignored SIGPIPE lost");
    assert_eq!(sigign(&ours, false) & PIPE, 0, "the default kept");
    assert_eq!(sigign(&ours, true) & PIPE, sigign(numactl(), true) & PIPE, "as numactl does");
}

/// With no task to spare (RLIMIT_NPROC of 1 for an unprivileged user, as a full pids.max or
/// TasksMax would leave), the launcher still places and execs, as numactl does: it needs no task
/// beyond itself. Before, its rehearsal thread failed with EAGAIN and nothing ran.
#[test]
fn a_launch_with_no_task_to_spare_still_runs() {
    if Command::new("setpriv").arg("--version").output().is_err() {
        panic!("setpriv (util-linux) is needed: apt-get install -y util-linux");
    }
    // The built binary must be reachable by the unprivileged user (a CI clone under /tmp is).
    let reachable = Path::new(BIN).ancestors().skip(1).all(|d| {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::metadata(d).map(|m| m.permissions().mode() & 0o001 != 0).unwrap_or(false)
    });
    if !reachable {
        eprintln!("SKIP: {BIN} is not reachable by uid 65534");
        return;
    }
    // bash: dash's ulimit has no -u.
    let script = format!("ulimit -u 1 || exit 9; exec {BIN} run -C0 -m{} echo ran", first_node());
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "bash", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(ok(o).trim(), "ran");
}

/// A descriptor 0-2 the launcher was started without is closed in the command too, as under
/// numactl (Rust's runtime opens /dev/null on it; the command then found one there).
#[test]
fn a_closed_stdin_stays_closed_in_the_command() {
    // readlink opens nothing, so it shows what the command was given as descriptor 0.
    let fd0 = |launcher: &str, close: bool| -> Output {
        let script = format!("{} exec {launcher} readlink /proc/self/fd/0", if close { "exec 0<&-;" } else { "" });
        Command::new("sh").arg("-c").arg(script).output().unwrap()
    };
    let ours = fd0(&format!("{BIN} run"), true);
    assert!(!ours.status.success() && stdout(&ours).is_empty(), "fd 0 open in the command: {}", stdout(&ours));
    let theirs = fd0(numactl(), true);
    assert!(!theirs.status.success(), "numactl: {}", stdout(&theirs));
    // One it had open stays open.
    assert!(fd0(&format!("{BIN} run"), false).status.success());
}

/// Without sysfs's node directory (a container or chroot without /sys, a kernel without NUMA) the
/// launcher takes the machine for one node, node 0, with a warning, and launches, as numactl does
/// (libnuma assumes one node): a plain command, `-C`, `-m 0` and `--show` run; another node is
/// refused as out of range. Before, every launch failed reading the topology. The directory is
/// hidden under an empty tmpfs in a private mount namespace (`unshare -m`, root), so nothing
/// outside the test sees it.
#[test]
fn without_a_node_directory_it_launches_on_one_node() {
    if Command::new("unshare").arg("--version").output().is_err() {
        panic!("unshare (util-linux) is needed: apt-get install -y util-linux");
    }
    let hidden = |args: &str| {
        let script = format!("mount -t tmpfs none /sys/devices/system/node || exit 9; exec {BIN} run {args}");
        Command::new("unshare").args(["-m", "--propagation", "private", "sh", "-c", &script]).output().unwrap()
    };
    let probe = hidden("true");
    if probe.status.code() == Some(9) {
        eprintln!("SKIP: cannot mount in a private namespace here: {}", stderr(&probe));
        return;
    }
    let cpu = allowed_cpus()[0];
    let o = hidden(&format!("-C {cpu} -m 0 -- grep -E '^(Cpus|Mems)_allowed_list' /proc/self/status"));
    let err = stderr(&o);
    let out = ok(o);
    assert_eq!(field(&out, "Cpus_allowed_list:"), cpu.to_string(), "{out}");
    assert!(
        err.contains("warning: /sys/devices/system/node: no NUMA nodes found") && err.contains("assuming one node"),
        "{err}"
    );
    assert_eq!(ok(hidden("-- echo ran")).trim(), "ran");
    let show = ok(hidden("--show"));
    assert!(show.contains("nodebind: 0") && show.contains("membind: 0"), "{show}");
    let o = hidden("-m 1 true");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains('1'), "{}", stderr(&o));
    // --hardware says what sysfs says, as numactl does (exit 0): no node (it failed with exit 1,
    // review helper-36). Compared with numactl itself under the same mount.
    let real = Command::new("unshare")
        .args([
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            &format!("mount -t tmpfs none /sys/devices/system/node || exit 9; exec {} -H", numactl()),
        ])
        .output()
        .unwrap();
    assert_eq!(ok(hidden("--hardware")), ok(real));
    // The node directory is still there outside the namespace.
    assert!(Path::new("/sys/devices/system/node/node0").exists());
}

/// numactl's shared-memory mode against Debian's numactl on this host: for each command line,
/// run by both on files of their own in a tmpfs directory, the same exit status, the same
/// standard output when it succeeds (the `--dump` and `--dump-nodes` lines) and the same file left
/// behind (size
/// and mode); then each tool reads the policy the other set (the kernel keeps it with the file).
/// `--preferred` and `--preferred-many` on a segment fail in numactl 2.0.16 (EINVAL); ours sets
/// them, checked by numactl's own `--dump`.
#[test]
fn shared_memory_policies_match_numactl() {
    let real = numactl();
    let (_links, link) = numactl_link();
    let Ok(dir) = tempfile::tempdir_in("/dev/shm") else {
        eprintln!("SKIP: no /dev/shm");
        return;
    };
    let n = first_node();
    let cases = [
        "-L 1m -f @F -m @N --dump",
        "-L 1m -f @F -i @N --touch --dump-nodes",
        "-L 64k -f @F -l --dump",
        "-L 64k -o 16k -f @F -m @N --dump",
        "-L 64k -f @F -m @N --verify",
        "-L 1m -M 0644 -f @F",
        "-L 1m -f @F --strict -m @N --dump",
        "--length=2m --file=@F --interleave=@N --dump --dump-nodes",
        // Refused by both, nothing left behind.
        "-f @F --dump",
        "-L 1m -f @F -m @N true",
        "-m @N -f @F",
        "-L 1m true",
        "-L 1m -f @F -C 0",
        "--dump",
        "--touch",
        "-L 1m -f @F --verify",
        "-N @N -L 1m -f @F",
    ];
    let file = |tool: &str, i: usize| dir.path().join(format!("{tool}{i}"));
    let args = |case: &str, f: &Path| -> Vec<String> {
        case.split(' ').map(|a| a.replace("@F", &f.display().to_string()).replace("@N", &n.to_string())).collect()
    };
    let left = |f: &Path| {
        std::fs::metadata(f).ok().map(|m| (m.len(), std::os::unix::fs::PermissionsExt::mode(&m.permissions())))
    };
    for (i, case) in cases.iter().enumerate() {
        let (a, b) = (file("real", i), file("ours", i));
        let theirs = Command::new(real).args(args(case, &a)).output().unwrap();
        let ours = Command::new(&link).args(args(case, &b)).output().unwrap();
        assert_eq!(ours.status.code(), theirs.status.code(), "{case}: {}", stderr(&ours));
        // (On a refusal numactl prints a stray empty line on stdout; ours prints nothing there.)
        // A refused line leaves nothing behind here (numactl creates the file before it sees the
        // command it refuses).
        if theirs.status.success() {
            assert_eq!(stdout(&ours), stdout(&theirs), "{case}");
            assert_eq!(left(&b), left(&a), "{case}: the file left behind");
        } else {
            assert_eq!(stdout(&ours), "", "{case}");
            assert_eq!(left(&b), None, "{case}: a refused line created the file");
        }
    }
    // Each reads what the other set.
    let f = dir.path().join("cross");
    let set = |tool: &Path, policy: &str| {
        let o =
            Command::new(tool).args(["-L", "1m", "-f", f.to_str().unwrap(), policy, &n.to_string()]).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    };
    let dump = |tool: &Path| {
        stdout(&Command::new(tool).args(["-L", "1m", "-f", f.to_str().unwrap(), "--dump"]).output().unwrap())
    };
    let (real, link) = (Path::new(real), link.as_path());
    // A path need not be UTF-8 (Linux paths are bytes): both take it (it was refused here).
    let odd = dir.path().join(<OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"odd\xff"));
    for tool in [real, link] {
        let o = Command::new(tool).args(["-L", "1m", "-f"]).arg(&odd).args(["-m", &n.to_string(), "--dump"]).output();
        let o = o.unwrap();
        assert!(o.status.success(), "{tool:?}: {}", stderr(&o));
        assert_eq!(stdout(&o), format!("0000000000000000-0000000000100000: bind : {n} \n"), "{tool:?}");
    }
    set(link, "-i");
    assert_eq!(dump(real), format!("0000000000000000-0000000000100000: interleave : {n} \n"));
    set(real, "-m");
    assert_eq!(dump(link), format!("0000000000000000-0000000000100000: bind : {n} \n"));
    for (policy, name) in [("-p", "preferred"), ("-P", "preferred-many")] {
        set(link, policy);
        assert_eq!(dump(real), format!("0000000000000000-0000000000100000: {name} : {n} \n"), "{policy}");
    }
}

/// The System V form (`--shm KEYFILE`): the key file and the segment are created when missing, with
/// numactl's two notes; the policy set by one tool is read back by the other. The segments are
/// removed at the end.
#[test]
fn system_v_segments_match_numactl() {
    let real = numactl();
    let (_links, link) = numactl_link();
    let dir = tempfile::tempdir().unwrap();
    let n = first_node();
    let keys = [dir.path().join("real"), dir.path().join("ours")];
    let mut outs = Vec::new();
    for (tool, key) in [(Path::new(real), &keys[0]), (link.as_path(), &keys[1])] {
        let o = Command::new(tool)
            .args(["-L", "1m", "-S", key.to_str().unwrap(), "-m", &n.to_string(), "--dump"])
            .output()
            .unwrap();
        outs.push(o);
    }
    // Each dumps the other's segment.
    let dump = |tool: &Path, key: &Path| {
        stdout(&Command::new(tool).args(["-S", key.to_str().unwrap(), "--dump"]).output().unwrap())
    };
    let cross = (dump(link.as_path(), &keys[0]), dump(Path::new(real), &keys[1]));
    for key in &keys {
        let c = std::ffi::CString::new(key.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string; removing the segment this test made (if it was made).
        unsafe {
            let k = libc::ftok(c.as_ptr(), 0);
            let id = libc::shmget(k, 0, 0);
            if id >= 0 {
                libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut());
            }
        }
    }
    let line = format!("0000000000000000-0000000000100000: bind : {n} \n");
    for o in &outs {
        assert!(o.status.success(), "{}", stderr(o));
        assert_eq!(stdout(o), line);
    }
    let notes = |o: &std::process::Output, key: &Path| stderr(o).replace(key.to_str().unwrap(), "KEY");
    assert_eq!(notes(&outs[1], &keys[1]), notes(&outs[0], &keys[0]));
    assert_eq!(cross, (line.clone(), line));
}

/// A System V line refused before its segment exists leaves no key file behind: with no key file
/// and no `--length` there is nothing to attach and nothing to create, and a segment the kernel
/// refuses (a length over `kernel.shmmax`) takes the key file made for it away again. numactl
/// exits 1 on both as well, and leaves the empty key file.
#[test]
fn a_refused_system_v_line_leaves_no_key_file() {
    let real = numactl();
    let (_links, link) = numactl_link();
    let dir = tempfile::tempdir().unwrap();
    let n = first_node().to_string();
    let shmmax: u64 = std::fs::read_to_string("/proc/sys/kernel/shmmax").unwrap().trim().parse().unwrap();
    // The largest page-aligned length, over shmmax unless shmmax is at its top.
    let top: u64 = !4095;
    let over = top.to_string();
    let mut cases: Vec<Vec<&str>> = vec![vec!["-S", "@K", "-m", &n], vec!["-S", "@K", "--dump"]];
    if shmmax < top {
        cases.push(vec!["-L", &over, "-S", "@K", "-m", &n]);
    }
    for (i, case) in cases.iter().enumerate() {
        let key = |tool: &str| dir.path().join(format!("{tool}{i}"));
        let args = |k: &Path| -> Vec<String> {
            case.iter().map(|a| if *a == "@K" { k.display().to_string() } else { a.to_string() }).collect()
        };
        let theirs = Command::new(real).args(args(&key("real"))).output().unwrap();
        let ours = Command::new(&link).args(args(&key("ours"))).output().unwrap();
        assert_eq!(theirs.status.code(), Some(1), "{case:?}: numactl: {}", stderr(&theirs));
        assert_eq!(ours.status.code(), Some(1), "{case:?}: {}", stderr(&ours));
        assert!(!key("ours").exists(), "{case:?}: a refused line left its key file\n{}", stderr(&ours));
    }
}
