//! Putting original CPU masks back (shutdown, release, crash recovery) on real processes, for the
//! three findings of the review of 2026-11-30: the walk stopped at the first thread the kernel
//! refused and the record was forgotten; a thread on record that pinned itself since lost its own
//! mask; a mask of numapilot's cut by the kernel to the CPUs online and the cpuset was taken for
//! the program's own.
//!
//! Children are this test binary run again with `NP_RESTORE_CHILD=<mode>` (the ignored
//! `child_entry` test does the mode's work), as in `live.rs`. CPU hotplug cannot be done on the
//! test host: a CPU that went offline is stood for by one past the last online CPU (the kernel
//! refuses it and cuts it out of a mask alike), a narrowed container by a cpuset cgroup of the
//! host's hierarchy. Expectations come from the host (online CPUs, masks read back), never
//! hard-coded; a host with one CPU skips.

use std::path::{Path, PathBuf};
use std::process::Command;

use numapilot_actuate::{sched_getaffinity, sched_setaffinity};
use numapilot_daemon::live::select::read_starttime;
use numapilot_daemon::live::state::{write_atomic, Originals, ProcessOriginal, StateFile, STATE_VERSION};
use numapilot_daemon::live::{LiveHost, LiveOptions};
use numapilot_policy::{Action, ActionKind, Host, Outcome, Reason, TaskRef};
use numapilot_topology::{CpuSet, Topology};

// ----- children ----------------------------------------------------------------------------------

mod kid;
use kid::{masks, sleep_forever, wait_flag, Kid, TestCpuset};

/// The variable that starts this binary as a child (`kid::Kid::spawn`).
const CHILD_VAR: &str = "NP_RESTORE_CHILD";

/// The children's work (not a test: ignored, and a no-op without the environment variable).
#[test]
#[ignore]
fn child_entry() {
    let Ok(mode) = std::env::var(CHILD_VAR) else { return };
    match mode.as_str() {
        "threads" => {
            // Three threads besides the one running this, then "ready"; each time the file
            // NP_FLAG<n> appears (n = 1, 2, ...), one more thread, printed as "born TID".
            for _ in 0..3 {
                std::thread::spawn(|| sleep_forever());
            }
            println!("ready");
            let Ok(base) = std::env::var("NP_FLAG") else { sleep_forever() };
            for n in 1.. {
                wait_flag(&base, n);
                let (tx, rx) = std::sync::mpsc::channel();
                std::thread::spawn(move || {
                    // SAFETY: gettid has no preconditions.
                    tx.send(unsafe { libc::gettid() }).unwrap();
                    sleep_forever()
                });
                println!("born {}", rx.recv().unwrap());
            }
            unreachable!()
        }
        other => panic!("unknown child mode {other}"),
    }
}

// ----- helpers -----------------------------------------------------------------------------------

fn topo() -> Topology {
    Topology::from_sysfs(Path::new("/")).unwrap()
}

/// The online CPUs, and one past the last (no such CPU online: what the kernel refuses, as a CPU
/// taken offline since); `None` on a one-CPU host (nothing to narrow to).
fn cpus() -> Option<(CpuSet, CpuSet)> {
    let online = topo().online_cpus();
    let away = std::iter::once(online.last()? + 1).collect();
    (online.len() > 1).then_some((online, away))
}

fn one(cpu: u32) -> CpuSet {
    std::iter::once(cpu).collect()
}

fn tmp_state(name: &str) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join(name).join("state.json");
    (d, p)
}

fn host_on(state: &Path) -> (LiveHost, numapilot_daemon::live::RestoreReport) {
    let (h, r) =
        LiveHost::open(topo(), LiveOptions { state_path: state.to_path_buf(), ..LiveOptions::default() }).unwrap();
    assert!(h.refusal().is_none(), "these tests run as root: {:?}", h.refusal());
    (h, r)
}

fn action(target: TaskRef, kind: ActionKind) -> Action {
    Action { target, kind, reason: Reason::new("test", "restore test") }
}

fn set_all(pid: u32, cpus: &CpuSet) {
    for (tid, _) in masks(pid) {
        sched_setaffinity(tid as i32, cpus).unwrap();
    }
}

/// A record of `pid` as the daemon writes one: the leader's original `default`, the threads'
/// originals, the masks numapilot set.
fn record(pid: u32, default: &CpuSet, threads: &[(u32, &CpuSet)], set: &[&CpuSet]) -> ProcessOriginal {
    ProcessOriginal {
        pid,
        starttime: read_starttime(pid).unwrap(),
        comm: "restore-test".into(),
        default_cpus: default.to_list(),
        threads: threads.iter().map(|(t, m)| (*t, m.to_list())).collect(),
        cpuset: None,
        set_cpus: set.iter().map(|s| s.to_list()).collect(),
        cpuset_cpus: None,
        cpuset_declined: false,
    }
}

fn write_state(state: &Path, recs: Vec<ProcessOriginal>) {
    let file = StateFile {
        version: STATE_VERSION,
        boot_id: numapilot_daemon::live::state::boot_id(),
        pid_ns: None,
        processes: recs,
    };
    write_atomic(state, &file).unwrap();
}

fn records_in(state: &Path) -> Vec<ProcessOriginal> {
    Originals::load(state).unwrap().map(|f| f.processes).unwrap_or_default()
}

// ----- finding 2: every thread, the closest valid mask, a record kept for the next pass ---------

/// The review's reproduction, at crash recovery: the leader's original names a CPU that is gone
/// (the kernel refuses it: EINVAL), the second thread's is every online CPU, and every thread is on
/// the CPU numapilot set. The walk stopped at the leader: the second thread kept numapilot's
/// mask, the other threads too, and the record was dropped. Now every thread is put back, and the
/// leader (with the threads off the record, whose original is the leader's) gets its cpuset's CPUs,
/// the closest mask still valid: every online CPU here.
#[test]
fn recovery_goes_on_past_a_thread_whose_original_cpu_is_gone() {
    let Some((online, away)) = cpus() else { return };
    let mut kid = Kid::spawn("threads", &[]);
    kid.line("ready");
    let pid = kid.pid();
    let before = sched_getaffinity(pid as i32).unwrap();
    let ours = one(online.first().unwrap());
    set_all(pid, &ours);
    let second = masks(pid)[1].0;
    let (_d, state) = tmp_state("gone-cpu");
    write_state(&state, vec![record(pid, &away, &[(pid, &away), (second, &before)], &[&ours])]);
    let (_host, report) = host_on(&state);
    assert_eq!((report.restored, report.failed.len()), (1, 0), "{report:?}");
    for (tid, m) in masks(pid) {
        assert_eq!(m, before, "thread {tid}: put back (its original, or its cpuset's CPUs for the leader's gone CPU)");
    }
    assert!(records_in(&state).is_empty());
}

/// A restore that fails (here EPERM: the child runs as another user and the restoring thread has
/// no CAP_SYS_NICE, as under a security module that denies it) keeps the record, in memory and in
/// the file, for the next pass: the next start's recovery puts the process back. One that keeps
/// failing is given up after `RESTORE_TRIES` failed passes (a release, then the shutdown's), so
/// nothing is retried for ever.
#[test]
fn a_failed_restore_keeps_its_record_for_the_next_pass_and_is_given_up_after_three() {
    use std::os::unix::process::CommandExt as _;
    let Some((online, _)) = cpus() else { return };
    let ours = one(online.last().unwrap());
    let mut sleeper = Command::new("sleep").arg("600").uid(65534).gid(65534).spawn().unwrap();
    let pid = sleeper.id();
    while read_starttime(pid).is_none() {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let original = sched_getaffinity(pid as i32).unwrap();
    assert_ne!(original, ours);
    let (_d, state) = tmp_state("retry");
    let fresh = || {
        set_all(pid, &ours);
        let mut o = Originals::new(&state);
        o.procs.insert(pid, record(pid, &original, &[(pid, &original)], &[&ours]));
        o.save().unwrap();
        o
    };
    let without_nice = |f: &mut (dyn FnMut() -> numapilot_daemon::live::RestoreReport + Send)| {
        numapilot_actuate::without_cap_sys_nice("restore", || Ok(f())).unwrap()
    };

    // Shutdown fails: the record stays in the file; the next start puts the process back.
    let mut o = fresh();
    let r = without_nice(&mut || o.restore_all());
    assert_eq!((r.restored, r.failed.len()), (0, 1), "{r:?}");
    assert!(r.failed[0].contains("EPERM") && r.failed[0].contains("kept on record"), "{r:?}");
    assert!(o.procs.contains_key(&pid), "kept in memory");
    assert_eq!(records_in(&state).len(), 1, "kept in the file");
    assert_eq!(sched_getaffinity(pid as i32).unwrap(), ours);
    drop(o);
    let (_host, report) = host_on(&state);
    assert_eq!((report.restored, report.failed.len()), (1, 0), "{report:?}");
    assert_eq!(sched_getaffinity(pid as i32).unwrap(), original, "the next start put it back");
    assert!(records_in(&state).is_empty());
    drop(_host);

    // A release fails, then the shutdown twice: given up at the third failed pass.
    let mut o = fresh();
    let r = without_nice(&mut || o.release(&[pid]));
    assert!(r.failed.len() == 1 && r.failed[0].contains("1 of 3"), "{r:?}");
    assert!(o.procs.contains_key(&pid));
    let r = without_nice(&mut || o.restore_all());
    assert!(r.failed.len() == 1 && r.failed[0].contains("2 of 3"), "{r:?}");
    assert_eq!(records_in(&state).len(), 1);
    let r = without_nice(&mut || o.restore_all());
    assert!(r.failed.len() == 1 && r.failed[0].contains("given up after 3"), "{r:?}");
    assert!(o.procs.is_empty() && records_in(&state).is_empty(), "dropped");
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}

// ----- finding 3: a thread on record that pinned itself since keeps its own ----------------------

/// numapilot places a process (every thread recorded with its original), then one of its threads
/// pins itself elsewhere (`taskset -p`, pthread_setaffinity_np): at shutdown that thread keeps its
/// own mask, the others get their originals. It was reset to its recorded original.
#[test]
fn a_recorded_thread_that_pinned_itself_since_keeps_its_own_mask() {
    let Some((online, _)) = cpus() else { return };
    let ours = one(online.last().unwrap());
    let own = one(online.first().unwrap());
    let mut kid = Kid::spawn("threads", &[]);
    kid.line("ready");
    let pid = kid.pid();
    let before = sched_getaffinity(pid as i32).unwrap();
    let (_d, state) = tmp_state("own-pin");
    let (mut host, _) = host_on(&state);
    let o = host.apply(&action(kid.target(), ActionKind::SetAffinity { cpus: ours.clone() }));
    assert_eq!(o, Outcome::Applied { pages_moved: 0 });
    let rec = &records_in(&state)[0];
    let pinner = masks(pid)[2].0;
    assert!(rec.threads.contains_key(&pinner), "on record: {rec:?}");
    sched_setaffinity(pinner as i32, &own).unwrap();
    let r = host.restore_all();
    assert_eq!((r.restored, r.failed.len()), (1, 0), "{r:?}");
    for (tid, m) in masks(pid) {
        let want = if tid == pinner { &own } else { &before };
        assert_eq!(&m, want, "thread {tid} (the one that pinned itself: {pinner})");
    }
}

// ----- finding 4: numapilot's mask cut by the kernel is still numapilot's ------------------------

/// numapilot set a mask naming a CPU that has gone offline since (stood for by one past the last
/// online CPU): the kernel reports its threads on the rest, every online CPU. They carry
/// numapilot's mask and get their originals back (the leader its recorded one, the threads off
/// the record the leader's); they were taken for the program's own and left. A thread that pinned
/// itself within numapilot's mask, to fewer CPUs than the cut, stays its own.
#[test]
fn a_restore_knows_numapilots_mask_cut_to_the_cpus_online() {
    let Some((online, away)) = cpus() else { return };
    let first = one(online.first().unwrap());
    let last = one(online.last().unwrap());
    let set = online.union(&away);
    let mut kid = Kid::spawn("threads", &[]);
    kid.line("ready");
    let pid = kid.pid();
    set_all(pid, &online);
    let pinner = masks(pid)[3].0;
    sched_setaffinity(pinner as i32, &last).unwrap();
    let (_d, state) = tmp_state("cut-online");
    let mut o = Originals::new(&state);
    o.procs.insert(pid, record(pid, &first, &[(pid, &first)], &[&set]));
    let r = o.restore_all();
    assert_eq!((r.restored, r.failed.len()), (1, 0), "{r:?}");
    for (tid, m) in masks(pid) {
        let want = if tid == pinner { &last } else { &first };
        assert_eq!(&m, want, "thread {tid} (the one that pinned itself within ours: {pinner})");
    }
}

/// The cpuset tests of this file use the host's hierarchy one at a time.
static CPUSET_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A container's cpuset narrows after numapilot placed its process on every CPU: a thread born
/// then inherits numapilot's mask, which the kernel reports cut to the cpuset. At the next
/// placement it is not recorded as the program's own (it was: its "original" was the cut mask),
/// so at shutdown it gets the leader's original, every possible CPU here, and follows the cpuset
/// when it widens again; recorded, it was put back on the narrow mask and stayed there.
#[test]
fn a_thread_born_on_numapilots_mask_cut_to_a_narrowed_cpuset_is_not_recorded_as_its_own() {
    let _one = CPUSET_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    let Some((online, _)) = cpus() else { return };
    let Some(h) = kid::cpusets("a_thread_born_on_numapilots_mask_cut_to_a_narrowed_cpuset_is_not_recorded_as_its_own")
    else {
        return;
    };
    let narrow = one(online.first().unwrap());
    let cg = TestCpuset::make(&h, "numapilot-restore-cut-test", &online);
    let (d, state) = tmp_state("cut-cpuset");
    let flag = d.path().join("flag");
    let mut kid = Kid::spawn("threads", &[("NP_FLAG", flag.display().to_string())]);
    kid.line("ready");
    let pid = kid.pid();
    cg.enter(pid);
    let (mut host, _) = host_on(&state);
    let o = host.apply(&action(kid.target(), ActionKind::SetAffinity { cpus: online.clone() }));
    assert_eq!(o, Outcome::Applied { pages_moved: 0 });
    cg.cpus(&narrow);
    std::fs::write(format!("{}1", flag.display()), b"").unwrap();
    let born: u32 = kid.line("born").parse().unwrap();
    assert_eq!(sched_getaffinity(born as i32).unwrap(), narrow, "cut to the cpuset");
    let o = host.apply(&action(kid.target(), ActionKind::SetAffinity { cpus: narrow.clone() }));
    assert_eq!(o, Outcome::Applied { pages_moved: 0 });
    let rec = &records_in(&state)[0];
    assert!(!rec.threads.contains_key(&born), "the cut mask recorded as the thread's own: {rec:?}");
    let r = host.restore_all();
    assert_eq!((r.restored, r.failed.len()), (1, 0), "{r:?}");
    cg.cpus(&online);
    for (tid, m) in masks(pid) {
        assert_eq!(m, online, "thread {tid} (born on the cut mask: {born}) follows the widened cpuset");
    }
    drop(kid);
    drop(cg);
}
