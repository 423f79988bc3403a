//! The metrics server, scraped over TCP like Prometheus does.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};

use numapilot_daemon::control::{NodeStatus, ResourceStatus, SamplerStatus, Shared, Status};
use numapilot_daemon::metrics;

fn get(addr: std::net::SocketAddr, path: &str) -> String {
    request(addr, "GET", path)
}

fn request(addr: std::net::SocketAddr, method: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "{method} {path} HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn status() -> Status {
    let res = |name: &str, load: f64, bottleneck: bool| ResourceStatus {
        resource: name.into(),
        known: true,
        load,
        interference: load / 4.0,
        bottleneck,
    };
    let mut s = Status {
        version: "test".into(),
        steps: 7,
        actions: 3,
        pages_moved: 1000,
        pages_failed: 12,
        local_access: Some(0.875),
        last_cycle_s: 0.004,
        phase_s_total: [1.5, 0.25, 0.125],
        interval_ms: 1000,
        next_interval_ms: 8000,
        sampling_stretch: 16,
        access_sampler: Some(SamplerStatus {
            event: "ibs_op/cnt_ctl=1/".into(),
            precise: true,
            samples: 5000,
            not_accesses: 3000,
            undecodable: 2,
            no_thread: 4,
            unplaced: 10,
            lost: 64,
            throttles: 1,
            truncations: 3,
            reopens: 0,
        }),
        signal_source_failures: 1,
        cycle_s_total: 12.238,
        last_step_unix_s: 1_764_500_000.5,
        nodes: vec![
            NodeStatus {
                node: 0,
                resources: vec![res("cpu", 0.95, true), res("mem-capacity", 0.5, false)],
                mem_free_bytes: 1 << 30,
                mem_total_bytes: 4 << 30,
                cpu_demand: 1.5,
            },
            NodeStatus {
                node: 1,
                resources: vec![res("cpu", 0.25, false), ResourceStatus { known: false, ..res("io", 0.0, false) }],
                mem_free_bytes: 3 << 30,
                mem_total_bytes: 4 << 30,
                cpu_demand: 0.5,
            },
        ],
        ..Status::default()
    };
    s.actions_by_kind.insert("set-affinity".into(), 2);
    s.actions_by_kind.insert("migrate-pages".into(), 1);
    s.failures_by_kind.insert("migrate-pages/partial".into(), 1);
    s.pages_failed_by_cause.insert("EBUSY".into(), 12);
    s.bookkeeping.insert("model.tasks".into(), 40);
    s.bookkeeping.insert("observer.pids".into(), 300);
    for secs in [0.004, 0.004, 0.03, 0.2, 12.0] {
        numapilot_daemon::control::count_step(&mut s.step_histogram, secs);
    }
    s
}

/// User plus system CPU time of this process so far, seconds (getrusage).
fn own_cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct we own.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) }, 0);
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(u.ru_utime) + secs(u.ru_stime)
}

/// The names of the samples of a family of `kind`: a histogram's are its buckets, sum and count.
fn in_family(sample: &str, family: &str, kind: &str) -> bool {
    sample == family
        || (kind == "histogram" && ["_bucket", "_sum", "_count"].iter().any(|x| sample == format!("{family}{x}")))
}

#[test]
fn scrape_over_tcp() {
    let shared = Arc::new(Shared { status: Mutex::new(status()), started_ns: 0 });
    let (addr, _t) = metrics::serve("127.0.0.1:0".parse().unwrap(), shared.clone()).unwrap();
    let cpu_before = own_cpu_seconds();
    let resp = get(addr, "/metrics");
    let (head, body) = resp.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    assert!(head.contains(&format!("Content-Length: {}", body.len())), "{head}");
    for line in [
        "numapilot_build_info{version=\"test\"} 1",
        "numapilot_dry_run 0",
        "numapilot_steps_total 7",
        "numapilot_pages_moved_total 1000",
        "numapilot_pages_failed_total{cause=\"EBUSY\"} 12",
        "numapilot_local_access_ratio 0.875",
        "numapilot_node_load_ratio{node=\"0\",resource=\"cpu\"} 0.95",
        "numapilot_node_interference_ratio{node=\"1\",resource=\"cpu\"} 0.0625",
        "numapilot_node_bottleneck{node=\"0\",resource=\"cpu\"} 1",
        "numapilot_node_bottleneck{node=\"0\",resource=\"mem-capacity\"} 0",
        "numapilot_actions_total{kind=\"set-affinity\"} 2",
        // Every kind and failure outcome from the start, at 0: a rate over them is 0, not absent.
        "numapilot_actions_total{kind=\"interleave\"} 0",
        "numapilot_action_failures_total{kind=\"migrate-pages\",outcome=\"partial\"} 1",
        "numapilot_action_failures_total{kind=\"set-affinity\",outcome=\"refused\"} 0",
        "numapilot_last_step_duration_seconds 0.004",
        "numapilot_last_step_timestamp_seconds 1764500000.5",
        "numapilot_state_unsaved 0",
        "numapilot_page_moves_stuck 0",
        // The step histogram: cumulative buckets (0.004 and 0.004 s, 0.03 s, 0.2 s, 12 s), +Inf
        // the count, the sum the steps' total.
        "numapilot_step_duration_seconds_bucket{le=\"0.005\"} 2",
        "numapilot_step_duration_seconds_bucket{le=\"0.025\"} 2",
        "numapilot_step_duration_seconds_bucket{le=\"0.05\"} 3",
        "numapilot_step_duration_seconds_bucket{le=\"0.25\"} 4",
        "numapilot_step_duration_seconds_bucket{le=\"10\"} 4",
        "numapilot_step_duration_seconds_bucket{le=\"+Inf\"} 5",
        "numapilot_step_duration_seconds_count 5",
        "numapilot_step_duration_seconds_sum 12.238",
        "numapilot_step_phase_seconds_total{phase=\"observe\"} 1.5",
        "numapilot_step_phase_seconds_total{phase=\"decide\"} 0.25",
        "numapilot_step_phase_seconds_total{phase=\"act\"} 0.125",
        "numapilot_next_interval_seconds 8",
        "numapilot_sampling_stretch 16",
        "numapilot_access_sampler_info{event=\"ibs_op/cnt_ctl=1/\",precise=\"true\"} 1",
        "numapilot_access_samples_total 5000",
        "numapilot_access_samples_discarded_total{reason=\"not-memory-access\"} 3000",
        "numapilot_access_samples_discarded_total{reason=\"undecodable\"} 2",
        "numapilot_access_samples_discarded_total{reason=\"no-node\"} 10",
        "numapilot_access_samples_discarded_total{reason=\"no-thread\"} 4",
        "numapilot_access_sampler_aux_truncations_total 3",
        "numapilot_access_samples_lost_total 64",
        "numapilot_access_sampler_throttles_total 1",
        "numapilot_signal_source_failures_total 1",
        "numapilot_bookkeeping_entries{table=\"model.tasks\"} 40",
        "numapilot_bookkeeping_entries{table=\"observer.pids\"} 300",
    ] {
        assert!(body.lines().any(|l| l == line), "missing {line:?} in\n{body}");
    }
    // An unknown resource (io of node 1) is not exported as a zero.
    assert!(!body.contains("resource=\"io\""), "{body}");
    // The daemon's own figures, as the process collector names them, read from this process.
    let figure = |name: &str| -> f64 {
        let line = body.lines().find(|l| l.split(' ').next() == Some(name)).unwrap_or_else(|| panic!("no {name}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let started = figure("process_start_time_seconds");
    assert!(started <= now + 1.0 && started > now - 86_400.0, "start {started}, now {now}");
    assert!(figure("process_resident_memory_bytes") > 1e6, "{body}");
    assert!(figure("process_virtual_memory_bytes") >= figure("process_resident_memory_bytes"));
    assert!(figure("process_threads") >= 2.0, "the test harness and the server thread at least");
    assert!(figure("process_open_fds") >= 3.0);
    // No process_max_fds under an unlimited RLIMIT_NOFILE (RLIM_INFINITY is no count).
    if body.contains("\nprocess_max_fds ") {
        assert!(figure("process_open_fds") <= figure("process_max_fds"));
    }
    // The CPU time is this process's, as getrusage counts it around the scrape (to two ticks: the
    // kernel's /proc/PID/stat gives utime and stime each cut to clock ticks, 10 ms at USER_HZ 100,
    // so their sum is up to 20 ms under rusage's microseconds; a one-tick bound failed about one
    // run in two here).
    let cpu = figure("process_cpu_seconds_total");
    assert!(cpu >= cpu_before - 0.021 && cpu <= own_cpu_seconds() + 0.021, "{cpu} against {cpu_before}");
    // Every sample's family has HELP and TYPE lines before it, names are numapilot_* (the
    // process collector's process_*), each sample of a family together.
    let mut typed: Vec<(String, String)> = Vec::new();
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(["gauge", "counter", "histogram"].contains(&kind), "{line}");
            assert!(body.contains(&format!("# HELP {name} ")), "{name} has no HELP");
            assert!(!typed.iter().any(|(n, _)| n == name), "{name} typed twice");
            typed.push((name.to_string(), kind.to_string()));
        } else if !line.starts_with('#') {
            let name = line.split(['{', ' ']).next().unwrap();
            assert!(name.starts_with("numapilot_") || name.starts_with("process_"), "{line}");
            let (family, kind) = typed.last().unwrap_or_else(|| panic!("{name} sampled before any TYPE"));
            assert!(in_family(name, family, kind), "{name} sampled under {family}'s TYPE");
            let value = line.rsplit(' ').next().unwrap();
            assert!(value.parse::<f64>().is_ok() || value == "+Inf", "{line}");
        }
    }
    // Counters end in _total, gauges do not, and no gauge is a counter's family name less its
    // _total (OpenMetrics names a counter family without it: numapilot_cycle_seconds and
    // numapilot_stalled_reads clashed with their _total counters, review helper-43).
    let kinds: Vec<(String, String)> = body
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|r| r.split_once(' ').map(|(n, k)| (n.to_string(), k.to_string())).unwrap())
        .collect();
    for (name, kind) in kinds.iter().filter(|(_, k)| k != "histogram") {
        assert_eq!(name.ends_with("_total"), kind == "counter", "{name} is a {kind}");
        if let Some(family) = name.strip_suffix("_total") {
            assert!(!kinds.iter().any(|(n, _)| n == family), "{family} and {name}: one OpenMetrics family");
        }
    }
    // The server serves the current snapshot.
    shared.status.lock().unwrap().steps = 8;
    assert!(get(addr, "/metrics").contains("\nnumapilot_steps_total 8\n"));
    assert!(get(addr, "/other").starts_with("HTTP/1.1 404"));
}

#[test]
fn label_values_are_escaped() {
    let mut s = status();
    s.pages_failed_by_cause.insert("we\"ird\\".into(), 1);
    let text = metrics::render(&s);
    assert!(text.contains("cause=\"we\\\"ird\\\\\"} 1"), "{text}");
}

/// A process whose memory map is locked (a read of it blocked in the kernel) is named in the
/// status text and counted by the metrics; none, no line.
#[test]
fn stalled_reads_are_named_and_counted() {
    let mut s = status();
    assert!(!s.render().contains("blocked in the kernel"));
    assert!(metrics::render(&s).lines().any(|l| l == "numapilot_stalled_processes 0"));
    s.stalled_reads =
        vec![numapilot_daemon::control::StalledRead { pid: 4242, file: "/proc/4242/numa_maps".into(), for_s: 65.2 }];
    s.stalled_reads_total = 3;
    let text = s.render();
    assert!(
        text.contains(
            "left out, a read of their memory map blocked in the kernel: pid 4242 (/proc/4242/numa_maps, 65 s) \
             (given up 3 times since start)"
        ),
        "{text}"
    );
    let m = metrics::render(&s);
    for line in ["numapilot_stalled_processes 1", "numapilot_stalled_reads_total 3"] {
        assert!(m.lines().any(|l| l == line), "missing {line:?} in\n{m}");
    }
}

#[test]
fn status_text_says_why_the_wait_differs_and_how_sparse_the_sampling_is() {
    let mut s = status();
    let text = s.render();
    assert!(
        text.contains(
            "interval 1000 ms (now 8000 ms: backed off, nothing changed), access sampling at 16 x its base period"
        ),
        "{text}"
    );
    s.next_interval_ms = 100;
    s.sampling_stretch = 1;
    let text = s.render();
    assert!(text.contains("interval 1000 ms (now 100 ms: young processes settling)\n"), "{text}");
}

/// The status text says which access sampler runs and what became of its samples, and that none
/// runs when none opened (the metrics then export its counters at 0 and no info series).
#[test]
fn status_and_metrics_say_what_became_of_the_access_samples() {
    let mut s = status();
    let text = s.render();
    assert!(
        text.contains(
            "access sampling: ibs_op/cnt_ctl=1/ (the PMU's memory-access samples): 5000 samples read, 1984 used \
             (3000 no memory access worth placing, 2 undecodable, 4 of no thread still running, 10 on no node); \
             64 samples lost by the kernel, throttled 1 time, its AUX area full 3 times\n"
        ),
        "{text}"
    );
    s.access_sampler = None;
    assert!(
        s.render()
            .contains("access sampling: off (no precise-sampling PMU, and `[signals] page_faults` off or refused"),
        "{}",
        s.render()
    );
    let body = metrics::render(&s);
    assert!(!body.lines().any(|l| l.starts_with("numapilot_access_sampler_info")), "{body}");
    assert!(body.lines().any(|l| l == "numapilot_access_samples_total 0"), "{body}");
    s.steps = 0;
    assert!(!s.render().contains("access sampling:"), "nothing to say before the first step: {}", s.render());
}

/// metrics-clients-apart: idle connections (any local user may open them) do not hold a scrape
/// behind them: the scrape is answered while they are all still open (served one at a time, each
/// was dropped at its 5 s request deadline before the scrape was read). Past 64 at once, the
/// oldest client still sending its request is closed for the new one. The bound is checked on a server of its own: on the first one the
/// idle clients' threads end only some time after the test closes them, and a CI run counted them
/// still, so that part of the 64 held were refused and the 65th was served.
///
/// Both parts hang on the server's times (the 5 s request deadline, the 1 s before an idle client
/// may be closed): each is judged on a try that came within them, on a fresh server, up to five
/// tries (a loaded machine can hold this thread past them, and then the server rightly closes).
#[test]
fn idle_clients_do_not_hold_a_scrape_and_are_bounded() {
    let shared = Arc::new(Shared { status: Mutex::new(status()), started_ns: 0 });
    let mut late = Vec::new();
    let timely = |took: std::time::Duration, within: std::time::Duration, late: &mut Vec<_>| {
        late.push(took);
        assert!(late.len() < 5 || took < within, "timed out: no try came within {within:?}: {late:?}");
        took < within
    };
    loop {
        let (addr, _t) = metrics::serve("127.0.0.1:0".parse().unwrap(), Arc::clone(&shared)).unwrap();
        let t0 = std::time::Instant::now();
        let idle: Vec<TcpStream> = (0..10).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let scrape = get(addr, "/metrics");
        let reads: Vec<_> = idle
            .into_iter()
            .map(|mut s| {
                s.set_nonblocking(true).unwrap();
                s.read(&mut [0u8; 16])
            })
            .collect();
        // Judged well within the idle clients' 5 s deadline, which would close them anyway.
        if !timely(t0.elapsed(), std::time::Duration::from_secs(4), &mut late) {
            continue;
        }
        assert!(scrape.starts_with("HTTP/1.1 200 OK"), "{scrape}");
        for (i, r) in reads.iter().enumerate() {
            let e = r.as_ref().expect_err("the server had already closed an idle client");
            assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "idle client {i}");
        }
        break;
    }
    // 64 idle connections (any local user may keep them open, each reopened as its deadline
    // ends) fill every slot: a scrape and a probe are still served, the oldest idle ones closed
    // for them (they were answered 503, and a probe read a healthy daemon as down; review
    // helper-51).
    late.clear();
    let (addr, mut held, _server) = loop {
        let (addr, t) = metrics::serve("127.0.0.1:0".parse().unwrap(), Arc::clone(&shared)).unwrap();
        // At once, and in order: the kernel's accept queue hands them to the server as they came,
        // so the first ones are the oldest.
        let t0 = std::time::Instant::now();
        let held: Vec<TcpStream> = (0..64).map(|_| TcpStream::connect(addr).unwrap()).collect();
        // Fresh ones are not closed for a newcomer (a flood of connections would close a scraper
        // whose request was not read yet): the 65th is told 503 until the oldest has waited 1 s.
        let refused = get(addr, "/metrics");
        let head = request(addr, "HEAD", "/metrics");
        // Judged when all came within that second (the server took each later than we sent it).
        if !timely(t0.elapsed(), std::time::Duration::from_millis(950), &mut late) {
            continue;
        }
        assert!(refused.starts_with("HTTP/1.1 503") && refused.ends_with("too many clients\n"), "{refused}");
        assert!(head.starts_with("HTTP/1.1 503") && head.ends_with("\r\n\r\n"), "a HEAD gets no body: {head}");
        break (addr, held, t);
    };
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let t0 = std::time::Instant::now();
    let scrape = get(addr, "/metrics");
    assert!(scrape.starts_with("HTTP/1.1 200 OK"), "{scrape}");
    let probe = request(addr, "HEAD", "/healthz");
    assert!(probe.starts_with("HTTP/1.1 200 OK") && probe.ends_with("\r\n\r\n"), "{probe}");
    // The oldest was closed for the scrape (the probe came when the scrape's slot was free
    // again); the next one is still open.
    held[0].set_read_timeout(Some(std::time::Duration::from_secs(2))).unwrap();
    let first = held[0].read(&mut [0u8; 256]);
    let timed_out =
        |e: &std::io::Error| matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut);
    assert!(
        first.is_ok() || first.as_ref().is_err_and(|e| !timed_out(e)),
        "the oldest idle client was not closed: {first:?}"
    );
    // (Told only well within the 5 s request deadline, which would close it anyway.)
    if t0.elapsed() < std::time::Duration::from_secs(3) {
        held[1].set_nonblocking(true).unwrap();
        let e = held[1].read(&mut [0u8; 16]).expect_err("the second idle client was closed too");
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
    }
    drop(held);
}

/// A request head over 8 KiB is answered 431 and closed; a HEAD one too, without the body (the
/// answer comes before the request is parsed, and it once wrote the body whatever the method).
#[test]
fn an_oversized_request_head_is_refused_and_a_head_request_gets_no_body() {
    let (addr, _shared, _t) = serving_a_fresh_step();
    for method in ["GET", "HEAD"] {
        let mut s = TcpStream::connect(addr).unwrap();
        // 8,193 bytes, the limit plus one, and no blank line: the server reads all of it before
        // it answers, so no unread byte turns its close into a reset.
        let start = format!("{method} /metrics HTTP/1.1\r\nX-Filler: ");
        let sent = format!("{start}{}", "a".repeat(8193 - start.len()));
        s.write_all(sent.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 431 Request Header Fields Too Large"), "{method}: {out}");
        let (_, body) = out.split_once("\r\n\r\n").unwrap();
        let expected = if method == "HEAD" { "" } else { "request head too large\n" };
        assert_eq!(body, expected, "{method}");
    }
}

/// Prometheus's own linter, `promtool check metrics` from Debian's prometheus package
/// (scripts/setup.sh unpacks it into rig/cache/prometheus without installing the server): the
/// path in NUMAPILOT_PROMTOOL, else that unpacked copy, else `promtool` on PATH. None when there is
/// none, which fails the test under NUMAPILOT_REQUIRE_PROMTOOL=1 (scripts/test.sh sets it).
fn promtool() -> Option<std::path::PathBuf> {
    let unpacked = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../rig/cache/prometheus/usr/bin/promtool");
    let found = std::env::var_os("NUMAPILOT_PROMTOOL")
        .map(std::path::PathBuf::from)
        .or_else(|| unpacked.is_file().then_some(unpacked))
        .or_else(|| std::process::Command::new("promtool").arg("--version").output().ok().map(|_| "promtool".into()));
    if found.is_none() {
        assert!(
            std::env::var_os("NUMAPILOT_REQUIRE_PROMTOOL").is_none_or(|v| v != "1"),
            "promtool is required (NUMAPILOT_REQUIRE_PROMTOOL=1) but not found: run scripts/setup.sh"
        );
        eprintln!("skipped: no promtool (scripts/setup.sh unpacks Debian's into rig/cache/prometheus)");
    }
    found
}

/// `promtool check metrics` on an exposition: its exit status and what it printed.
fn promtool_check(promtool: &std::path::Path, text: &str) -> (bool, String) {
    let mut child = std::process::Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// Every family the daemon exposes, with every series a busy daemon has (a stall, a refused
/// action, a page failure), passes Prometheus's linter with nothing to say: names, units, counter
/// suffixes, histogram layout, HELP text. A broken exposition fails the same check (the control:
/// a counter without its _total), so the check can fail.
#[test]
fn promtool_finds_nothing_to_lint() {
    let Some(promtool) = promtool() else { return };
    let mut s = status();
    s.stalled_reads = vec![numapilot_daemon::control::StalledRead { pid: 7, file: "/proc/7/maps".into(), for_s: 3.0 }];
    s.failures_by_kind.insert("set-affinity/refused".into(), 2);
    s.moves_stuck = vec![(7, 90.0)];
    s.pages_failed_by_cause.insert("stopped: move_pages EPERM".into(), 5);
    let mut text = metrics::render(&s);
    text.push_str(&metrics::render_process(&metrics::ProcessFigures::own()));
    let (ok, said) = promtool_check(&promtool, &text);
    assert!(ok && said.trim().is_empty(), "promtool check metrics: {said}\non\n{text}");
    let broken = "# HELP numapilot_steps Steps.\n# TYPE numapilot_steps counter\nnumapilot_steps 3\n";
    let (ok, said) = promtool_check(&promtool, broken);
    assert!(!ok && said.contains("_total"), "the control passed promtool: {said}");
}

/// A metrics server on a loopback port over the test status, its last step just now.
fn serving_a_fresh_step() -> (std::net::SocketAddr, Arc<Shared>, impl Drop) {
    let mut s = status();
    s.last_step_mono_ns = numapilot_observe::reader::monotonic_ns();
    let shared = Arc::new(Shared { status: Mutex::new(s), started_ns: 0 });
    let (addr, t) = metrics::serve("127.0.0.1:0".parse().unwrap(), Arc::clone(&shared)).unwrap();
    (addr, shared, t)
}

/// `GET /healthz`: 200 with `status --check`'s text while the daemon is OK or warns, 503 when
/// CRITICAL (a probe that reads HTTP codes restarts or routes around it), from the snapshot served.
#[test]
fn healthz_answers_the_health_verdict_as_an_http_code() {
    let (addr, shared, _t) = serving_a_fresh_step();
    let ok = get(addr, "/healthz");
    assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
    assert!(ok.contains("\r\n\r\nOK: numapilot test, "), "{ok}");
    shared.status.lock().unwrap().journal_failing = true;
    let warn = get(addr, "/healthz");
    assert!(warn.starts_with("HTTP/1.1 200 OK") && warn.contains("\r\n\r\nWARNING: the journal"), "{warn}");
    shared.status.lock().unwrap().last_error = Some("reading /proc: EMFILE".into());
    shared.status.lock().unwrap().consecutive_step_errors = 1;
    let one = get(addr, "/healthz");
    assert!(one.starts_with("HTTP/1.1 200 OK") && one.contains("WARNING: the last 1 step failed"), "{one}");
    shared.status.lock().unwrap().consecutive_step_errors = 3;
    let crit = get(addr, "/healthz");
    assert!(crit.starts_with("HTTP/1.1 503"), "{crit}");
    assert!(
        crit.contains("\r\n\r\nCRITICAL: the last 3 steps failed: reading /proc: EMFILE\nWARNING: the journal"),
        "{crit}"
    );
}

/// The alerting rules shipped for operators (`packaging/prometheus-rules.yml`) are valid for
/// Prometheus (`promtool check rules`), name only metrics the daemon exports (or `up`), and do
/// what their comments say on the series of `packaging/prometheus-rules.test.yml` (`promtool test
/// rules`: each alert fires after its `for` on the instance that should raise it, not before, and
/// never on the healthy one).
#[test]
fn the_shipped_alerting_rules_check_and_pass_their_unit_tests() {
    let Some(promtool) = promtool() else { return };
    let packaging = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(&promtool).args(args).current_dir(&packaging).output().unwrap();
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "promtool {args:?}: {said}");
        said
    };
    assert!(run(&["check", "rules", "prometheus-rules.yml"]).contains("SUCCESS: 10 rules found"));
    assert!(run(&["test", "rules", "prometheus-rules.test.yml"]).contains("SUCCESS"));
    // Every metric an expression names is one the daemon exports (a renamed family would leave an
    // alert that never fires).
    let rules = std::fs::read_to_string(packaging.join("prometheus-rules.yml")).unwrap();
    let mut exported = metrics::render(&status());
    exported.push_str(&metrics::render_process(&metrics::ProcessFigures::own()));
    let families: Vec<&str> = exported.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.split(' ').next()).collect();
    for line in rules.lines().map(str::trim).filter(|l| l.starts_with("expr:") || l.starts_with("histogram_quantile")) {
        for word in line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if word.starts_with("numapilot_") || word.starts_with("process_") {
                let family = word.strip_suffix("_bucket").unwrap_or(word);
                assert!(families.contains(&family), "{word} in the rules is not exported: {line}");
            }
        }
    }
}

/// Both servers stop and close their listening sockets when their handle goes (the daemon drops
/// them after its restore): the port can be bound again and the socket refuses connections, while
/// the process lives on (a page move asleep in the kernel keeps it: its descriptors were closed
/// only when every thread had ended, and the restarted daemon found the port and socket taken).
#[test]
fn stopped_servers_close_their_listening_sockets() {
    let shared = Arc::new(Shared { status: Mutex::new(status()), started_ns: 0 });
    let (addr, server) = metrics::serve("127.0.0.1:0".parse().unwrap(), Arc::clone(&shared)).unwrap();
    assert!(get(addr, "/metrics").starts_with("HTTP/1.1 200 OK"));
    assert!(server.stop_within(std::time::Duration::from_secs(30)), "the metrics thread did not end");
    // Tried for up to 60 s: the tests beside this one connect from ephemeral ports, and one of them
    // may hold the port just freed for a moment (1 run in 30 failed so with one try).
    let t0 = std::time::Instant::now();
    while let Err(e) = std::net::TcpListener::bind(addr) {
        assert!(t0.elapsed() < std::time::Duration::from_secs(60), "timed out: the port is not free again: {e}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ctl.sock");
    let (_loop_side, server, _made) = numapilot_daemon::control::serve(&path, shared).unwrap();
    assert!(std::os::unix::net::UnixStream::connect(&path).is_ok());
    assert!(server.stop_within(std::time::Duration::from_secs(30)), "the control thread did not end");
    let e = std::os::unix::net::UnixStream::connect(&path).expect_err("still listening");
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}");
}

/// `HEAD` answers as `GET` does, status and headers, the body's length in Content-Length, and no
/// body (a probe that sends HEAD got 405 and read a healthy daemon as down); another method gets
/// 405 naming the allowed ones in `Allow`, as RFC 9110 requires.
#[test]
fn head_answers_as_get_without_the_body_and_other_methods_are_told_what_is_allowed() {
    let (addr, shared, _t) = serving_a_fresh_step();
    // The index's body is fixed text: HEAD's Content-Length is exactly GET's body length.
    let get_resp = get(addr, "/");
    let (_, get_body) = get_resp.split_once("\r\n\r\n").unwrap();
    let head_resp = request(addr, "HEAD", "/");
    let (head_head, head_body) = head_resp.split_once("\r\n\r\n").unwrap();
    assert!(head_head.starts_with("HTTP/1.1 200 OK"), "{head_resp}");
    assert_eq!(head_body, "", "HEAD sent a body");
    assert!(!get_body.is_empty());
    assert!(head_head.contains(&format!("\r\nContent-Length: {}\r\n", get_body.len())), "{head_head}");
    let ok = request(addr, "HEAD", "/healthz");
    assert!(ok.starts_with("HTTP/1.1 200 OK") && ok.ends_with("\r\n\r\n"), "{ok}");
    assert!(!ok.contains("Content-Length: 0\r\n"), "{ok}");
    // The verdict's code too: CRITICAL is 503 for HEAD as for GET.
    shared.status.lock().unwrap().last_error = Some("reading /proc: EMFILE".into());
    shared.status.lock().unwrap().consecutive_step_errors = 3;
    let crit = request(addr, "HEAD", "/healthz");
    assert!(crit.starts_with("HTTP/1.1 503") && crit.ends_with("\r\n\r\n"), "{crit}");
    let metrics = request(addr, "HEAD", "/metrics");
    assert!(metrics.starts_with("HTTP/1.1 200 OK") && metrics.ends_with("\r\n\r\n"), "{metrics}");
    assert!(metrics.contains("text/plain; version=0.0.4"), "{metrics}");
    let missing = request(addr, "HEAD", "/nowhere");
    assert!(missing.starts_with("HTTP/1.1 404") && missing.ends_with("\r\n\r\n"), "{missing}");
    let post = request(addr, "POST", "/metrics");
    assert!(post.starts_with("HTTP/1.1 405 Method Not Allowed"), "{post}");
    assert!(post.contains("\r\nAllow: GET, HEAD\r\n"), "{post}");
}
