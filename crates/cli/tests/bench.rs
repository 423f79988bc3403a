//! `numapilot bench` as a user runs it: real worker processes on this host, the recorder's
//! figures, the JSON, the charts, flag errors.
//!
//! This host has one NUMA node, so every page and thread is on node 0: the placement checks here
//! prove the recording (the right buffer, the right threads, counts that add up), the rig guests
//! prove placement across nodes.

mod cli_common;
use cli_common::{numapilot, stderr};

use std::path::Path;
use std::process::Output;

use numapilot_bench::{BenchResult, Work};

/// Memory a sample may miss, MiB: a page the kernel is migrating at that instant (compaction, here)
/// is a migration entry, not a present page, in the page tables numa_maps walks. Default 0.5 MiB
/// (128 base pages; THP is in madvise mode here and the buffer is not madvised): an exact 8.0 failed
/// once on a loaded host, while a wrongly attributed VMA or a missed slice is off by far more.
const IN_FLIGHT_MIB: f64 = 0.5;

fn json_of(o: &Output) -> BenchResult {
    assert!(o.status.success(), "numapilot failed: {}", stderr(o));
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not bench JSON: {e}\n{}", String::from_utf8_lossy(&o.stdout)))
}

/// Kernel node ids of this machine, from sysfs (independent of the topology crate).
fn sys_nodes() -> Vec<u32> {
    let mut v: Vec<u32> = std::fs::read_dir("/sys/devices/system/node")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_prefix("node")?.parse().ok())
        .collect();
    v.sort_unstable();
    v
}

fn png_size(path: &Path) -> (u32, u32) {
    let decoder = png::Decoder::new(std::fs::File::open(path).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let first = &buf[..3];
    assert!(buf.chunks(3).any(|px| px != first), "{} is a single colour", path.display());
    (info.width, info.height)
}

#[test]
fn numa01_runs_two_worker_processes_and_records_their_buffers_and_threads() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = numapilot(&[
        "bench",
        "numa01",
        "--mb",
        "8",
        "--threads",
        "2",
        "--loops",
        "40",
        "--interval",
        "0.05",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    let r = json_of(&o);
    assert_eq!(r.schema, "numapilot-bench/1");
    assert_eq!(r.name, "numa01");
    assert_eq!(r.nodes, sys_nodes());
    assert_eq!(r.config.work, Work::Loops(40));
    assert!(!r.timed_out);
    assert_eq!(r.processes.len(), 2);
    let me = std::process::id();
    assert!(r.processes[0].pid != r.processes[1].pid && r.processes.iter().all(|p| p.pid != me));
    let n0 = r.nodes.iter().position(|&n| n == 0).unwrap();
    for p in &r.processes {
        assert_eq!(p.exit_code, Some(0));
        assert_eq!((p.threads, p.mb), (2, 8));
        // numa01: each of the 2 threads writes the whole 8 MiB buffer 40 times.
        assert_eq!(p.passes, 40.0);
        assert_eq!(p.bytes_written, 2 * 40 * (8 << 20));
        assert!(p.runtime_s > 0.0 && p.runtime_s <= r.runtime_s);
        assert!(!p.series.is_empty(), "process {} was never sampled", p.index);
        for s in &p.series {
            // The whole buffer was touched before "go": 8 MiB resident throughout (less at most
            // the pages the kernel is migrating at that instant, e.g. compaction: numa_maps does not
            // count a page under migration), and the process holds more than its buffer.
            let total = s.buffer_mib.iter().sum::<f64>();
            assert!((8.0 - IN_FLIGHT_MIB..=8.0).contains(&total), "{s:?}");
            assert_eq!(s.buffer_mib.len(), r.nodes.len());
            assert!(s.mem_mib.iter().sum::<f64>() > 8.0, "{s:?}");
            assert!(s.thread_nodes.iter().sum::<u32>() <= 2, "{s:?}");
        }
        // The recorder saw both worker threads (named bench-t*) at some sample.
        assert!(p.series.iter().any(|s| s.thread_nodes.iter().sum::<u32>() == 2), "{:?}", p.series);
        if r.nodes.len() == 1 {
            assert_eq!(p.final_local_pct, Some(100.0));
            assert_eq!(p.final_thread_nodes, [0]);
            assert!(p.converge_s.is_some());
            let b = p.series[0].buffer_mib[n0];
            assert!((8.0 - IN_FLIGHT_MIB..=8.0).contains(&b), "{b} MiB on node 0");
        }
    }
    assert!(r.runtime_s >= r.processes.iter().map(|p| p.runtime_s).fold(0.0, f64::max));
    assert!(r.migrated.pgmigrate_success.is_some(), "vmstat has pgmigrate_success on every kernel since 2.6.18");
    assert!(!r.vmstat.is_empty());
    // "go" on the machine's monotonic clock (the uptime other records of a run use): after this
    // test started, before now; and the recorder's own CPU time, which a 50 ms cadence makes > 0.
    let up = |s: &str| s.split_whitespace().next().unwrap().parse::<f64>().unwrap();
    let now = up(&std::fs::read_to_string("/proc/uptime").unwrap());
    let go = r.go_monotonic_s.expect("go_monotonic_s");
    assert!(go > 0.0 && go <= now + 1.0 && go >= now - 600.0, "go at {go} s, uptime {now} s");
    let cpu = r.recorder_cpu_s.expect("recorder_cpu_s");
    assert!(cpu > 0.0 && cpu < 600.0, "recorder CPU {cpu} s");
    // Files: result.json equal to stdout, one SVG and one PNG per process.
    let written: BenchResult =
        serde_json::from_str(&std::fs::read_to_string(out.join("result.json")).unwrap()).unwrap();
    assert_eq!(written, r);
    for p in &r.processes {
        let stem = format!("numa01-p{}-pid{}", p.index, p.pid);
        let svg = std::fs::read_to_string(out.join(format!("{stem}.svg"))).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{svg}");
        let lines = svg.lines().filter(|l| l.contains("<polyline") && l.contains("stroke-width=\"2\"")).count();
        assert_eq!(lines, r.nodes.len(), "one line per node");
        assert_eq!(png_size(&out.join(format!("{stem}.png"))), (960, 600));
    }
    assert!(stderr(&o).contains("wrote 5 files"), "{}", stderr(&o));
}

/// The first sample of each process is the first that sees all its worker threads, taken as soon
/// as they run after "go" rather than at "go" itself, when most had not started yet: it read no
/// figure, and a process local from the start read converged only at the next sample, one interval
/// later (`converge_s 1.0` on this one-node host; review helper-103). On one node every page is
/// local: converged at the first sample.
#[test]
fn the_first_sample_sees_the_worker_threads_and_a_process_local_from_the_start_converges_there() {
    let o = numapilot(&["bench", "numa01", "--mb", "1", "--threads", "2", "--seconds", "1.5", "--json"]);
    let r = json_of(&o);
    for p in &r.processes {
        let first = p.series.first().unwrap_or_else(|| panic!("process {} was never sampled", p.index));
        assert_eq!(first.thread_nodes.iter().sum::<u32>(), 2, "{:?}", p.series);
        assert!(first.local_pct.is_some(), "{:?}", p.series);
        if r.nodes.len() == 1 {
            assert_eq!(p.converge_s, Some(first.t_s), "{:?}", p.series);
            assert_eq!(first.local_pct, Some(100.0));
        }
    }
}

#[test]
fn numa02_for_a_time_splits_the_buffer_between_its_threads() {
    let o = numapilot(&[
        "bench",
        "numa02",
        "--mb",
        "4",
        "--threads",
        "2",
        "--seconds",
        "0.5",
        "--interval",
        "0.1",
        "--json",
    ]);
    let r = json_of(&o);
    assert_eq!(r.processes.len(), 1);
    let p = &r.processes[0];
    assert_eq!(r.config.work, Work::Seconds(0.5));
    assert!(p.runtime_s >= 0.5, "ran {} s", p.runtime_s);
    assert!(p.passes > 1.0 && p.bytes_written > 0);
    // Each thread's pass is its 2 MiB slice: bytes = mean passes x 2 threads x 2 MiB.
    let expect = p.passes * 2.0 * (2 << 20) as f64;
    assert!((p.bytes_written as f64 - expect).abs() < 1.0, "{} vs {expect}", p.bytes_written);
    // Samples every 0.1 s over a 0.5 s run: at least 2 even when the recorder waits for a CPU behind
    // the two spinners (and the other bench test's) on a loaded 2-CPU machine.
    assert!(p.series.len() >= 2, "{:?}", p.series);
}

#[test]
fn forced_and_bound_memory_is_recorded_on_node_0() {
    // --force-node 0 binds the first touch; HARD_BIND binds each slice with mbind. On this host
    // node 0 is the only node, on the rig's guests the same command lands it on node 0 of two.
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["bench", "numa02", "--force-node", "0"][..],
        &["bench", "numa02_HARD_BIND"][..],
        &["bench", "numa01_INVERSE_BIND"][..],
    ] {
        let out = dir.path().join(args[1]);
        let mut a = args.to_vec();
        a.extend(["--mb", "4", "--threads", "2", "--seconds", "0.3", "--interval", "0.05", "--json"]);
        a.extend(["--out", out.to_str().unwrap()]);
        let r = json_of(&numapilot(&a));
        // The chart's title says what it ran under: the test, the kernel's balancing and the forced
        // node (where the charts' font is: without it they have no text).
        let p = &r.processes[0];
        let font = ["/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/dejavu/DejaVuSans.ttf"]
            .iter()
            .any(|f| Path::new(f).is_file());
        let svg = std::fs::read_to_string(out.join(format!("{}-p0-pid{}.svg", r.name, p.pid))).unwrap();
        let balancing = match r.host.numa_balancing {
            Some(b) => format!("numa_balancing {b}"),
            None => "no numa_balancing".to_string(),
        };
        for part in [r.name.as_str(), &format!("process 0 (pid {})", p.pid), balancing.as_str()] {
            assert!(!font || svg.contains(part), "{args:?}: {part} missing from the title: {svg}");
        }
        assert_eq!(svg.contains("first touch on node 0"), font && args.len() == 4, "{args:?}: {svg}");
        let n0 = r.nodes.iter().position(|&n| n == 0).expect("node 0");
        for p in &r.processes {
            assert!(!p.series.is_empty());
            for s in &p.series {
                if r.nodes.len() == 1 || args[1] != "numa01_INVERSE_BIND" {
                    let total = s.buffer_mib.iter().sum::<f64>();
                    assert_eq!(s.buffer_mib[n0], total, "{args:?}: all of it on node 0: {s:?}");
                    assert!((4.0 - IN_FLIGHT_MIB..=4.0).contains(&total), "{args:?}: {s:?}");
                }
            }
        }
    }
}

#[test]
fn a_timeout_kills_the_workers_and_says_so() {
    let o = numapilot(&[
        "bench",
        "numa01",
        "--mb",
        "4",
        "--threads",
        "1",
        "--loops",
        "100000000",
        "--timeout",
        "0.4",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let r: BenchResult = serde_json::from_slice(&o.stdout).unwrap();
    assert!(r.timed_out);
    for p in &r.processes {
        assert_eq!(p.exit_code, None, "killed by a signal");
        assert!(!Path::new(&format!("/proc/{}", p.pid)).exists(), "worker {} still there", p.pid);
    }
}

#[test]
fn bad_flags_are_named_and_nothing_runs() {
    let cases: [(&[&str], &str); 10] = [
        (&["bench", "numa01", "--mb", "0"], "--mb"),
        (&["bench", "numa01", "--mb", "lots"], "--mb"),
        (&["bench", "numa02", "--threads", "0"], "--threads"),
        (&["bench", "numa01", "--loops", "0"], "--loops"),
        (&["bench", "numa01", "--loops", "3", "--seconds", "1"], "--seconds"),
        (&["bench", "numa01", "--force-node", "999"], "--force-node"),
        (&["bench", "numa01_HARD_BIND", "--force-node", "0"], "--force-node"),
        (&["bench", "numa01", "--interval", "0"], "--interval"),
        (&["bench", "numa01", "--interval", "1e-9"], "--interval 1e-9: at least 0.01 s"),
        (&["bench", "numa01", "--timeout=-1"], "--timeout"),
    ];
    for (args, flag) in cases {
        let o = numapilot(args);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(stderr(&o).contains(flag), "{args:?}: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "{args:?} printed a result");
    }
    let o = numapilot(&["bench", "numa03"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("unknown test \"numa03\"") && stderr(&o).contains("numa02_SMT"), "{}", stderr(&o));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let o = numapilot(&["bench", "numa02", "--mb", "1", "--out", file.join("sub").to_str().unwrap()]);
    assert!(!o.status.success() && stderr(&o).contains("--out"), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
}

#[test]
fn a_run_that_fails_leaves_no_out_directory() {
    // The workers cannot map their buffer under an address-space limit of 512 MiB (the limit is
    // inherited from the numapilot process, which needs far less), so the run fails after --out
    // was checked. The directory it made for the run must not stay behind, empty.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("new");
    let run = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_numapilot"))
            .pre_exec_limit_as(512 << 20)
            .args(["bench", "numa02", "--mb", "1024", "--threads", "1", "--loops", "1"])
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap()
    };
    let o = run();
    assert!(!o.status.success(), "ran under the limit: {}", stderr(&o));
    assert!(stderr(&o).contains("worker"), "{}", stderr(&o));
    assert!(!out.exists(), "left {}", out.display());
    // An existing directory is left as it was.
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("keep"), "x").unwrap();
    assert!(!run().status.success());
    let names: Vec<_> = std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["keep"]);
}

/// RLIMIT_AS for the child (and so for the workers it starts).
trait LimitAs {
    fn pre_exec_limit_as(&mut self, bytes: u64) -> &mut Self;
}

impl LimitAs for std::process::Command {
    fn pre_exec_limit_as(&mut self, bytes: u64) -> &mut Self {
        use std::os::unix::process::CommandExt;
        let lim = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
        // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            self.pre_exec(move || {
                if libc::setrlimit(libc::RLIMIT_AS, &lim) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            })
        }
    }
}

fn bench_into(out: &Path, seconds: &str) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_numapilot"));
    c.args(["bench", "numa02", "--mb", "8", "--threads", "1", "--seconds", seconds, "--out"]).arg(out);
    c
}

/// Waits for a run's staging directory in `out`.
fn staging_in(out: &Path) -> bool {
    let t0 = std::time::Instant::now();
    while t0.elapsed() < std::time::Duration::from_secs(20) {
        let found = std::fs::read_dir(out)
            .map(|d| d.flatten().any(|e| e.file_name().to_string_lossy().starts_with(".numapilot-out.")))
            .unwrap_or(false);
        if found {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    false
}

/// The `--out` files are written before the report goes to stdout: a stdout that fails lost them
/// (review helper-58: `>/dev/full` and `| true` both left no directory, the second with exit 0).
#[test]
fn the_out_files_survive_a_failed_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o");
    let o = bench_into(&out, "0.3").stdout(std::fs::File::create("/dev/full").unwrap()).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("writing to stdout"), "{}", stderr(&o));
    assert!(out.join("result.json").is_file(), "the result was lost with stdout");
}

/// One `--out` directory, one run at a time (two runs into it both said "wrote 3 files" and one's
/// result.json replaced the other's); a run ended by a signal leaves neither its staging directory
/// nor the directories made for it, and ends by that signal; a killed run's staging directory is
/// removed by the next run (review helper-58).
#[test]
fn out_directories_are_locked_and_a_signal_leaves_nothing() {
    use std::os::unix::process::ExitStatusExt as _;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("a/b");
    let mut first = bench_into(&out, "30").stdout(std::process::Stdio::null()).spawn().unwrap();
    assert!(staging_in(&out), "the first run never staged");
    let second = bench_into(&out, "0.3").output().unwrap();
    assert_eq!(second.status.code(), Some(1), "{}", stderr(&second));
    assert!(stderr(&second).contains("another numapilot run is writing there"), "{}", stderr(&second));
    // SAFETY: kill with a child's pid.
    unsafe { libc::kill(first.id() as i32, libc::SIGTERM) };
    let status = first.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
    assert!(!dir.path().join("a").exists(), "left behind: {:?}", std::fs::read_dir(dir.path()).unwrap().count());
    // A staging directory of a run killed by SIGKILL (no handler runs) is removed by the next.
    std::fs::create_dir_all(out.join(".numapilot-out.4194304")).unwrap();
    let o = bench_into(&out, "0.3").output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let mut names: Vec<_> = std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    assert!(names.iter().all(|n| !n.to_string_lossy().starts_with(".numapilot-out.")), "{names:?}");
    assert!(names.iter().any(|n| n == "result.json"), "{names:?}");
}
