//! `numapilot run` and the numactl symlink against Debian's numactl on a real 4-node kernel, option set by option
//! set (rig/scenarios/launcher.sh, one boot of the 4-node guest: nodes 0-3 with CPUs 0-1, 2-3, 4-5, 6-7).
//!
//! Each row of [`ROWS`] is one option set, run by the three launchers (Debian's `numactl`, `numapilot run`, the
//! `numactl` symlink to numapilot), each starting the same probe: Debian's `numactl --show` of what the command
//! inherited and the kernel's own view (the toucher's Cpus_allowed_list, Mems_allowed_list, SigIgn, and the numa_maps
//! policy and pages of 4 MiB it touched). The rows run in four settings of the guest: the whole machine; under
//! `taskset -c 2-5` (an affinity narrower than the cpuset); in a cgroup v2 cpuset of CPUs 2-5 and nodes 1-3; and with
//! CPUs 6-7 offline, node 3 then a memory-only node. A row is judged by [`Judge`]:
//!
//! - [`Judge::Same`]: where numactl ran the probe, ours (both ways of starting it) must have run it with the same
//!   inherited state (`numapilot_rig::launcher::compare`: the same `--show` with the interleave cursor masked, the
//!   same status lines and numa_maps policy, the pages where the policy puts them, interleaved counts node by node);
//!   where numactl refused the options, ours must exit 1 and run nothing (empty stdout). A row whose options end in
//!   `-s` compares the launchers' own `--show`.
//! - [`Judge::Deliberate`]: a difference docs/tools.md lists, with its reason; the row asserts what each launcher
//!   does.
//!
//! Each comparison was seen to fail (2026-12-02, this guest):
//! - Before `cpubind_before` (crates/cli/src/cmd/run/numactl.rs) ours ignored a CPU binding a later one replaced:
//!   rows bad-n-then-c (`-N 5 -C 1`) and bad-c-then-n (`-C 8 -N 1`) ran, on CPU 1 and on node 1, where numactl
//!   refuses node 5 and CPU 8; cs-n3-n1 (`-N 3 -N 1` in the cpuset, node 3's CPUs outside it) ran on node 1 where
//!   numactl's first sched_setaffinity fails; mo-n3-c0 (`-N 3 -C 0`, node 3 without CPUs) ran on CPU 0.
//! - With relative lists counted one too far (nodespec.rs, `nth(n + 1)`, a deliberate break) the rows mrel, prel,
//!   nrel, crel, ts-crel, cs-mrel and cs-crel failed; with `--interleave` set as MPOL_BIND, iall, i13, show-il,
//!   cs-iall and mo-iall failed (`--show`'s policy line, the numa_maps policy).
//!
//! Skipped unless `NUMAPILOT_RIG=1`. Guest time: `-- --nocapture` prints it (41-43 s of QEMU wall on the 2-core host
//! with release builds, 57-67 s with dev builds; most of it three launches of about 0.15-0.25 s each per row).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::OnceLock;
use std::time::Duration;

use numapilot_rig::launcher::{self, Probe};
use numapilot_rig::{GuestRun, GuestSpec, Rig, Section};

const SCENARIO: &str = include_str!("../../../rig/scenarios/launcher.sh");

/// How a row is judged.
#[derive(Clone, Copy)]
enum Judge {
    /// Ours as numactl: the same inherited state where numactl ran the probe; exit 1 and nothing run where it
    /// refused the options.
    Same,
    /// A difference docs/tools.md lists as deliberate (the text says which and why); the function asserts what each
    /// launcher does.
    Deliberate(&'static str, fn(&Matrix, &Row) -> Result<(), String>),
}

/// One option set.
struct Row {
    /// whole, taskset, cpuset or memonly (the scenario's phases).
    phase: &'static str,
    /// Section name stem.
    name: &'static str,
    /// The launcher's options, blank-separated.
    opts: &'static str,
    judge: Judge,
}

const fn same(phase: &'static str, name: &'static str, opts: &'static str) -> Row {
    Row { phase, name, opts, judge: Judge::Same }
}

/// The matrix. Phases: `whole` (the machine as booted), `taskset` (affinity 2-5), `cpuset` (CPUs 2-5, nodes 1-3),
/// `memonly` (CPUs 6-7 offline: node 3 has memory and no CPU).
const ROWS: &[Row] = &[
    // --- memory policies over node subsets, relative and inverted lists, all
    same("whole", "none", ""),
    same("whole", "m1", "--membind=1"),
    same("whole", "mall", "-m all"),
    same("whole", "mrel", "-m +1-2"),
    same("whole", "minv", "-m !1-2"),
    same("whole", "iall", "--interleave=all"),
    same("whole", "i13", "-i 1,3"),
    Row {
        phase: "whole",
        name: "inone",
        opts: "-i !all",
        judge: Judge::Deliberate(
            "a list selecting no node is an error; numactl runs under the default policy",
            selects_nothing,
        ),
    },
    same("whole", "p2", "--preferred=2"),
    same("whole", "prel", "-p +3"),
    same("whole", "p12", "-p 1-2"),
    same("whole", "pminv", "-P !0"),
    Row {
        phase: "whole",
        name: "w13",
        opts: "-w 1,3",
        judge: Judge::Deliberate("--weighted-interleave, which numactl 2.0.16 does not know (2.0.18 does)", weighted),
    },
    same("whole", "local", "--localalloc -N 2"),
    // --- CPU bindings: nodes, CPUs, relative, inverted, the deprecated -c, order, combinations
    same("whole", "n1", "--cpunodebind=1"),
    same("whole", "c03", "-c 0,3"),
    same("whole", "nrel", "-N +2"),
    same("whole", "ninv", "-N !1"),
    same("whole", "c146", "--physcpubind=1,4-6"),
    same("whole", "crel", "-C +2-3"),
    same("whole", "cinv", "-C !0-5"),
    same("whole", "n-then-c", "-N 1 -C 6"),
    same("whole", "c-then-n", "-C 6 -N 1"),
    same("whole", "bad-n-then-c", "-N 5 -C 1"),
    same("whole", "bad-c-then-n", "-C 8 -N 1"),
    same("whole", "same", "-N 2 -m same"),
    same("whole", "apart", "-m 3 -N 0"),
    same("whole", "bal", "-b -m 1"),
    Row {
        phase: "whole",
        name: "bal-after",
        opts: "-m 1 -b",
        judge: Judge::Deliberate("--balancing after the policy, which numactl 2.0.16 refuses", balancing_after),
    },
    same("whole", "all-first", "-a -m 2 -N 3"),
    same("whole", "all-after", "-m 1 -a"),
    same("whole", "show-bind", "-m 1 -N 2 -s"),
    same("whole", "show-il", "-i 0,2 -C 5 -s"),
    same("whole", "conflict", "-m 1 -i 2"),
    same("whole", "c8", "-C 8"),
    same("whole", "mrel4", "-m +4"),
    // --- an affinity narrower than the cpuset (taskset -c 2-5)
    same("taskset", "ts-n0", "-N 0"),
    same("taskset", "ts-c0", "-C 0"),
    same("taskset", "ts-a-c0", "-a -C 0"),
    same("taskset", "ts-crel", "-C +1"),
    same("taskset", "ts-call", "-C all"),
    Row {
        phase: "taskset",
        name: "ts-cinv",
        opts: "-C !2",
        judge: Judge::Deliberate("`!` inverts within the CPUs this process may use", cpus_inverted_within_affinity),
    },
    // --- a cpuset of CPUs 2-5 and nodes 1-3
    same("cpuset", "cs-m0", "-m 0"),
    same("cpuset", "cs-a-m0", "-a -m 0"),
    same("cpuset", "cs-a-m01", "-a -m 0-1"),
    same("cpuset", "cs-mrel", "-m +0"),
    same("cpuset", "cs-iall", "-i all"),
    same("cpuset", "cs-n3", "-N 3"),
    same("cpuset", "cs-n3-n1", "-N 3 -N 1"),
    same("cpuset", "cs-nall", "-N all"),
    same("cpuset", "cs-crel", "-C +0"),
    same("cpuset", "cs-c1", "-C 1"),
    same("cpuset", "cs-show", "-m !1 -s"),
    // --- node 3 memory-only (its CPUs 6-7 offline)
    same("memonly", "mo-n3", "-N 3"),
    same("memonly", "mo-m3", "-m 3"),
    same("memonly", "mo-nall", "-N all"),
    same("memonly", "mo-n3-c0", "-N 3 -C 0"),
    same("memonly", "mo-crel6", "-C +6"),
    same("memonly", "mo-iall", "-i all"),
    same("memonly", "mo-show", "-s"),
    Row {
        phase: "memonly",
        name: "mo-cinv",
        opts: "-C !0",
        judge: Judge::Deliberate("CPU lists are read against the online CPUs", cpus_online_only_inverted),
    },
    Row {
        phase: "memonly",
        name: "mo-call",
        opts: "-C all",
        judge: Judge::Deliberate("CPU lists are read against the online CPUs", cpus_online_only_all),
    },
];

/// Ours, started both ways.
const OURS: [&str; 2] = ["run", "compat"];

fn enabled(what: &str) -> bool {
    if std::env::var("NUMAPILOT_RIG").is_ok_and(|v| v == "1") {
        return true;
    }
    let _ = writeln!(std::io::stderr(), "rig launcher test {what} SKIPPED: set NUMAPILOT_RIG=1 to boot QEMU guests");
    false
}

/// The scenario's run.
struct Matrix {
    run: GuestRun,
    node_cpus: BTreeMap<u32, BTreeSet<u32>>,
}

fn matrix() -> &'static Matrix {
    static RUN: OnceLock<Result<Matrix, String>> = OnceLock::new();
    RUN.get_or_init(|| {
        // Release builds, as the launcher ships (and as the race's guests already have them built): the dev build
        // of numapilot took 0.35 s a launch under emulation, numactl 0.14 s, and the matrix runs 122 launches of
        // ours.
        let (rig, _) = Rig::prepare(&numapilot_rig::race::rig_options()).map_err(|e| e.to_string())?;
        let mut spec = GuestSpec::preset("4node").ok_or("no 4node preset")?;
        spec.timeout = Duration::from_secs(300);
        let rows: String = ROWS.iter().map(|r| format!("{} {} {}\n", r.phase, r.name, r.opts)).collect();
        let files = [("rig/launcher.rows".to_string(), rows.into_bytes())];
        let run = rig.boot(&spec, "launcher", SCENARIO, &files).map_err(|e| e.to_string())?;
        let phase = |p: &str| run.section(&format!("phase-{p}")).map(|s| s.stdout().trim().to_string());
        eprintln!(
            "guest 4node launcher: userspace after {:.2} s, QEMU wall {} ms, {} rows; phases began at {:?} s (whole, \
             taskset, cpuset, memonly)",
            run.boot_s.unwrap_or(f64::NAN),
            run.wall_ms,
            ROWS.len(),
            ["whole", "taskset", "cpuset", "memonly"].map(|p| phase(p).unwrap_or_default())
        );
        if run.scenario_rc != 0 {
            return Err(format!("launcher.sh exit {}; console:\n{}", run.scenario_rc, run.console_tail()));
        }
        let hw = run.section("hw")?;
        let node_cpus = launcher::node_cpus(&hw.stdout())?;
        Ok(Matrix { run, node_cpus })
    })
    .as_ref()
    .unwrap_or_else(|e| panic!("{e}"))
}

impl Matrix {
    fn cell(&self, row: &Row, how: &str) -> Result<&Section, String> {
        self.run.section(&format!("{}.{how}", row.name))
    }

    fn row(&self, name: &str) -> &'static Row {
        ROWS.iter().find(|r| r.name == name).unwrap_or_else(|| panic!("no row {name}"))
    }

    /// The probe a launcher ran, or why there is none.
    fn probe(&self, row: &Row, how: &str) -> Result<Probe, String> {
        let s = self.cell(row, how)?;
        if s.rc != 0 {
            return Err(format!("{how} exit {}: {}", s.rc, s.stderr().trim()));
        }
        launcher::parse_probe(&s.stdout())
    }

    /// Judges a [`Judge::Same`] row.
    fn same(&self, row: &Row) -> Result<(), String> {
        let reference = self.cell(row, "ref")?;
        let show_row = row.opts.split_whitespace().any(|o| o == "-s" || o == "--show");
        let mut problems = Vec::new();
        for how in OURS {
            let ours = self.cell(row, how)?;
            let verdict = if reference.rc != 0 {
                refused_too(reference, ours)
            } else if ours.rc != 0 {
                Err(format!("numactl ran it, ours exit {}: {}", ours.rc, ours.stderr().trim()))
            } else if show_row {
                let (r, o) = (launcher::canonical_show(&reference.stdout()), launcher::canonical_show(&ours.stdout()));
                numapilot_rig::checks::compare_exact("numactl -s", &r, "ours -s", &o)
            } else {
                launcher::parse_probe(&reference.stdout())
                    .map_err(|e| format!("numactl's probe: {e}"))
                    .and_then(|r| launcher::compare(&r, &launcher::parse_probe(&ours.stdout())?, &self.node_cpus))
            };
            if let Err(e) = verdict {
                problems.push(format!("{how}: {e}"));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("\n"))
        }
    }
}

/// numactl refused the options (exit non-zero, no probe output): ours must exit 1, run nothing (its stdout empty:
/// the probe prints first thing) and say why.
fn refused_too(reference: &Section, ours: &Section) -> Result<(), String> {
    if reference.stdout().contains("\n--\n") {
        return Err(format!("numactl exit {} after running the probe: {}", reference.rc, reference.stdout()));
    }
    if ours.rc != 1 || !ours.out.is_empty() || ours.err.is_empty() {
        return Err(format!(
            "numactl refused it (exit {}: {}); ours exit {}, stdout {:?}, stderr {:?}",
            reference.rc,
            reference.stderr().lines().next().unwrap_or(""),
            ours.rc,
            ours.stdout(),
            ours.stderr()
        ));
    }
    Ok(())
}

/// `-i !all`: numactl passes the empty mask to libnuma, which takes it for "no interleave" and runs the command
/// under the default policy; ours refuses a list that selects nothing (docs/tools.md), exit 1, nothing run.
fn selects_nothing(m: &Matrix, row: &Row) -> Result<(), String> {
    let r = m.probe(row, "ref")?;
    if r.policy != "default" {
        return Err(format!("numactl ran it under {:?}, not the default policy", r.policy));
    }
    for how in OURS {
        let s = m.cell(row, how)?;
        if s.rc != 1 || !s.out.is_empty() || !s.stderr().contains("selects no node") {
            return Err(format!("{how}: exit {}, stdout {:?}, stderr {:?}", s.rc, s.stdout(), s.stderr()));
        }
    }
    Ok(())
}

/// `-w 1,3`: numactl 2.0.16 has no --weighted-interleave ("invalid option"); ours sets MPOL_WEIGHTED_INTERLEAVE and
/// the kernel interleaves the pages over nodes 1 and 3.
fn weighted(m: &Matrix, row: &Row) -> Result<(), String> {
    let r = m.cell(row, "ref")?;
    if r.rc != 1 || !r.stderr().contains("invalid option") {
        return Err(format!(
            "numactl: exit {}, stderr {:?} (a numactl that knows -w: compare the row)",
            r.rc,
            r.stderr()
        ));
    }
    for how in OURS {
        let p = m.probe(row, how)?;
        if p.policy != "weighted interleave:1,3" {
            return Err(format!("{how}: numa_maps policy {:?}", p.policy));
        }
        launcher::pages_where_the_policy_says(&p, &m.node_cpus).map_err(|e| format!("{how}: {e}"))?;
    }
    Ok(())
}

/// `-m 1 -b`: numactl 2.0.16 refuses --balancing after the policy ("specify policy after --shm/--file"); ours
/// takes it as `-b -m 1`, so its probe must equal numactl's of the `bal` row.
fn balancing_after(m: &Matrix, row: &Row) -> Result<(), String> {
    let r = m.cell(row, "ref")?;
    if r.rc != 1 || !r.stderr().contains("specify policy after") {
        return Err(format!("numactl: exit {}, stderr {:?}", r.rc, r.stderr()));
    }
    let reference = m.probe(m.row("bal"), "ref").map_err(|e| format!("numactl -b -m 1: {e}"))?;
    for how in OURS {
        launcher::compare(&reference, &m.probe(row, how)?, &m.node_cpus)
            .map_err(|e| format!("{how} against numactl -b -m 1: {e}"))?;
    }
    Ok(())
}

/// A CPU list where numactl and ours give different CPUs by design: numactl's Cpus_allowed_list `theirs`, ours
/// `mine`, everything the kernel shows otherwise the same (policy, Mems_allowed_list, pages where the policy says).
fn cpus_differ(m: &Matrix, row: &Row, theirs: &str, mine: &str) -> Result<(), String> {
    let r = m.probe(row, "ref")?;
    if r.cpus_allowed != theirs {
        return Err(format!("numactl's Cpus_allowed_list {:?}, expected {theirs:?}", r.cpus_allowed));
    }
    for how in OURS {
        let o = m.probe(row, how)?;
        if o.cpus_allowed != mine || o.policy != r.policy || o.mems_allowed != r.mems_allowed {
            return Err(format!(
                "{how}: Cpus_allowed_list {:?} (expected {mine:?}), policy {:?}, Mems_allowed_list {:?}",
                o.cpus_allowed, o.policy, o.mems_allowed
            ));
        }
        launcher::pages_where_the_policy_says(&o, &m.node_cpus).map_err(|e| format!("{how}: {e}"))?;
    }
    Ok(())
}

/// `-C !2` under taskset 2-5: libnuma inverts over every configured CPU, so numactl's command gets CPUs the
/// affinity had kept out (0-1, 6-7); ours inverts within the CPUs this process may use.
fn cpus_inverted_within_affinity(m: &Matrix, row: &Row) -> Result<(), String> {
    cpus_differ(m, row, "0-1,3-7", "3-5")
}

/// `-C !0` with CPUs 6-7 offline: numactl's mask keeps the offline CPUs (the kernel stores them; the command runs on
/// 1-5 now and could use 6-7 once they are back), ours names online CPUs only.
fn cpus_online_only_inverted(m: &Matrix, row: &Row) -> Result<(), String> {
    cpus_differ(m, row, "1-7", "1-5")
}

/// `-C all` with CPUs 6-7 offline: numactl passes Cpus_allowed as the kernel reports it (0-7, offline CPUs
/// included), ours the online ones.
fn cpus_online_only_all(m: &Matrix, row: &Row) -> Result<(), String> {
    cpus_differ(m, row, "0-7", "0-5")
}

/// Judges every [`Judge::Same`] row of `phase`; the failures are listed together.
fn phase_matches_numactl(phase: &str) {
    let m = matrix();
    let rows: Vec<&Row> = ROWS.iter().filter(|r| r.phase == phase && matches!(r.judge, Judge::Same)).collect();
    assert!(!rows.is_empty(), "no rows in phase {phase}");
    let failures: Vec<String> =
        rows.iter().filter_map(|r| m.same(r).err().map(|e| format!("--- {} ({}):\n{e}", r.name, r.opts))).collect();
    assert!(
        failures.is_empty(),
        "{} of {} rows of phase {phase} differ from numactl:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
    eprintln!("phase {phase}: {} rows as under numactl", rows.len());
}

#[test]
fn the_whole_machine_rows_run_as_under_numactl() {
    if enabled("whole") {
        phase_matches_numactl("whole");
    }
}

#[test]
fn under_a_narrower_cpu_affinity_the_rows_run_as_under_numactl() {
    if enabled("taskset") {
        phase_matches_numactl("taskset");
    }
}

#[test]
fn in_a_cpuset_without_node_0_the_rows_run_as_under_numactl() {
    if enabled("cpuset") {
        phase_matches_numactl("cpuset");
    }
}

#[test]
fn with_a_memory_only_node_the_rows_run_as_under_numactl() {
    if enabled("memonly") {
        phase_matches_numactl("memonly");
    }
}

/// Each deliberate difference is what docs/tools.md says, on both sides.
#[test]
fn the_deliberate_differences_are_as_documented() {
    if !enabled("deliberate") {
        return;
    }
    let m = matrix();
    let failures: Vec<String> = ROWS
        .iter()
        .filter_map(|r| match r.judge {
            Judge::Deliberate(what, check) => {
                check(m, r).err().map(|e| format!("--- {} ({}), deliberate: {what}:\n{e}", r.name, r.opts))
            }
            Judge::Same => None,
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The settings are what the rows assume: four nodes of two CPUs; THP off; the taskset phase's affinity 2-5; the
/// cpuset's CPUs 2-5 and nodes 1-3, and the shell inside it; node 3 without CPUs in the last phase.
#[test]
fn the_phases_are_set_up_as_described() {
    if !enabled("setup") {
        return;
    }
    let m = matrix();
    let expected: BTreeMap<u32, BTreeSet<u32>> = (0..4).map(|n| (n, BTreeSet::from([2 * n, 2 * n + 1]))).collect();
    assert_eq!(m.node_cpus, expected, "numactl --hardware");
    let text = |name: &str| {
        let s = m.run.section(name).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.rc, 0, "section {name}: exit {}: {}", s.rc, s.stderr());
        s.stdout()
    };
    assert!(text("thp").contains("[never]"), "THP: {}", text("thp"));
    assert_eq!(text("taskset").trim(), "Cpus_allowed_list:\t2-5");
    assert_eq!(text("cpuset"), "2-5\n1-3\nCpus_allowed_list:\t2-5\nMems_allowed_list:\t1-3\n");
    let memonly = text("memonly");
    for line in ["node/node3/cpulist: \n", "node/has_cpu: 0-2\n", "node/has_memory: 0-3\n", "cpu/online: 0-5\n"] {
        assert!(memonly.contains(line), "memonly lacks {line:?}:\n{memonly}");
    }
    // Every row ran under every launcher.
    for r in ROWS {
        for how in ["ref", "run", "compat"] {
            m.cell(r, how).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}
