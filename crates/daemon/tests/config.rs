//! The configuration file: every error names the file and the line, flags override the file, the
//! result maps onto the live host's options.

use std::path::PathBuf;

use numapilot_daemon::config::{self, Config, Overrides, Source};
use numapilot_daemon::live::CpusetMode;
use numapilot_topology::CpuSet;

fn parse(text: &str) -> Result<Config, config::ConfigError> {
    config::parse_with_overrides(text, "/etc/numapilot.toml", &Overrides::default())
}

#[test]
fn empty_file_is_the_defaults() {
    let c = parse("").unwrap();
    assert_eq!(c, Config::default());
    assert_eq!(c.interval_ms(), 1000);
    assert_eq!(c.metrics().unwrap().to_string(), config::DEFAULT_METRICS_ADDR);
    assert!(c.metrics().unwrap().ip().is_loopback());
}

#[test]
fn unknown_key_is_rejected_with_its_line() {
    let text = "[daemon]\ndry_run = true\n\n[exclude]\ncomms = [\"sshd\"]\n";
    let e = parse(text).unwrap_err();
    assert_eq!(e.line, Some(5), "{e}");
    let msg = e.to_string();
    assert!(msg.starts_with("/etc/numapilot.toml:5: "), "{msg}");
    assert!(msg.contains("comms"), "{msg}");
}

#[test]
fn unknown_section_is_rejected() {
    let e = parse("[daemon]\n[actuaton]\ncpuset = \"v2\"\n").unwrap_err();
    assert_eq!(e.line, Some(2), "{e}");
    assert!(e.reason.contains("actuaton"), "{e}");
}

#[test]
fn bad_type_and_bad_enum_have_lines() {
    let e = parse("[daemon]\n\ninterval_ms = \"fast\"\n").unwrap_err();
    assert_eq!(e.line, Some(3), "{e}");
    let e = parse("[actuation]\ncpuset = \"v3\"\n").unwrap_err();
    assert_eq!(e.line, Some(2), "{e}");
    assert!(e.reason.contains("v3"), "{e}");
}

/// A value of the wrong type and an unknown key or table are said with the full dotted key, the
/// value as written and the reason in plain words (serde's named neither the key nor the table:
/// `invalid type: string "high", expected i32`, "unknown field `bogus`"; review helper-103).
#[test]
fn type_errors_and_unknown_keys_name_the_dotted_key_in_plain_words() {
    let cases = [
        ("[daemon]\nnice = \"high\"\n", 2, "daemon.nice = \"high\": expected an integer"),
        ("[exclude]\ncomm = \"sshd\"\n", 2, "exclude.comm = \"sshd\": expected a list of strings"),
        ("[daemon]\ninterval_ms = -5\n", 2, "daemon.interval_ms = -5: expected an integer >= 0"),
        ("[daemon]\n\nnice = 99999999999\n", 3, "daemon.nice = 99999999999: expected an integer in -2147483648..=2147483647"),
        ("[daemon]\ndry_run = \"yes\"\n", 2, "daemon.dry_run = \"yes\": expected true or false"),
        ("[tunables]\ntier_medium = \"x\"\n", 2, "tunables.tier_medium = \"x\": expected a number"),
        ("daemon.nice = \"x\"\n", 1, "daemon.nice = \"x\": expected an integer"),
        ("daemon = 5\n", 1, "daemon = 5: expected a table ([daemon])"),
        ("[[daemon]]\nnice = 1\n", 1, "[[daemon]]: expected one table [daemon], not an array of tables"),
        ("[actuation]\ncpuset = 5\n", 2, "actuation.cpuset = 5: expected a string"),
        ("[actuation]\ncpuset = \"v3\"\n", 2, "actuation.cpuset = \"v3\": expected one of \"off\", \"auto\", \"v1\", \"v2\""),
        (
            "[exclude]\npids = [\n  1,\n  -2,\n]\n",
            4,
            "exclude.pids item 2 = -2: expected an integer >= 0 (exclude.pids is a list of integers)",
        ),
        ("[include]\ncomm = [1]\n", 2, "include.comm item 1 = 1: expected a string (include.comm is a list of strings)"),
        (
            "[nosection]\n",
            1,
            "unknown table [nosection]; known tables: [daemon], [exclude], [include], [actuation], [signals], [tunables]",
        ),
        ("nosection = 1\n", 1, "unknown key nosection; known tables: [daemon], [exclude]"),
        ("\n[deamon]\nnice = 1\n", 2, "unknown table [deamon] (did you mean [daemon]?); known tables: [daemon],"),
        (
            "[daemon]\nbogus = 1\n",
            2,
            "unknown key daemon.bogus; known keys of [daemon]: interval_ms, dry_run, journal, journal_max_bytes, \
             state, socket, metrics, idle_max_interval_ms, new_thread_wake_ms, nice",
        ),
        ("[daemon.sub]\n", 1, "unknown table [daemon.sub]; known keys of [daemon]: interval_ms,"),
        ("[exclude]\ncomms = []\n", 2, "unknown key exclude.comms (did you mean comm?); known keys of [exclude]: comm,"),
        (
            "[tunables]\ntier_meduim = 0.3\n",
            2,
            "unknown key tunables.tier_meduim (did you mean tier_medium?); [tunables] has 84 keys, each described \
             in the full example, /usr/share/doc/numapilot/examples/numapilot.toml",
        ),
    ];
    let tunables = serde_json::to_value(numapilot_model::Tunables::default()).unwrap().as_object().unwrap().len();
    let cases = cases.map(|(text, line, said)| (text, line, said.replace("84 keys", &format!("{tunables} keys"))));
    for (text, line, said) in cases {
        let e = config::parse_with_overrides(text, "badtype.toml", &Overrides::default()).unwrap_err();
        assert_eq!(e.line, Some(line), "{text:?}: {e}");
        assert!(e.to_string().starts_with(&format!("badtype.toml:{line}: {said}")), "{text:?}: {e}");
    }
}

#[test]
fn tunable_out_of_range_points_at_its_line() {
    let text = "[daemon]\ndry_run = false\n\n[tunables]\ninterval_ms = 1000\ntier_medium = 0.01\n";
    let e = parse(text).unwrap_err();
    assert_eq!(e.line, Some(6), "{e}");
    assert!(e.reason.contains("tier_medium"), "{e}");
    // An unknown tunable is caught by deny_unknown_fields, on its line.
    let e = parse("[tunables]\n\ntier_meduim = 0.3\n").unwrap_err();
    assert_eq!(e.line, Some(3), "{e}");
}

#[test]
fn daemon_interval_that_breaks_the_settle_interval_is_reported_on_the_interval_line() {
    // settle_interval_ms defaults to 100: an interval of 50 makes it invalid.
    let e = parse("[daemon]\ninterval_ms = 50\n").unwrap_err();
    // Said as the interval's fault: the file sets no settle interval (it read "[tunables] tunable
    // settle_interval_ms = 100: must be in 1..=interval_ms").
    assert_eq!(
        e.reason,
        "daemon.interval_ms = 50: must be at least tunables.settle_interval_ms (100 ms; set that lower too to go below it)"
    );
    assert_eq!(e.line, Some(2), "{e}");
    // With a [tunables] table that does not set it, still the interval's line, not the table's.
    let e = parse("[tunables]\ntier_weak = 0.1\n\n[daemon]\ninterval_ms = 50\n").unwrap_err();
    assert_eq!(e.line, Some(5), "{e}");
    let e = parse("[tunables]\ntier_weak = 0.1\ninterval_ms = 50\n").unwrap_err();
    assert_eq!(e.line, Some(3), "{e}");
    assert!(e.reason.starts_with("tunables.interval_ms = 50: must be at least"), "{e}");
    // A settle interval the file sets itself is reported on its own line.
    let e = parse("[tunables]\ninterval_ms = 50\nsettle_interval_ms = 60\n").unwrap_err();
    assert_eq!(e.line, Some(3), "{e}");
    assert!(e.reason.contains("settle_interval_ms = 60"), "{e}");
    let c = parse("[daemon]\ninterval_ms = 50\n[tunables]\nsettle_interval_ms = 50\n").unwrap();
    assert_eq!(c.interval_ms(), 50);
}

#[test]
fn our_own_values_are_checked_with_lines() {
    let cases = [
        ("[daemon]\nmetrics = \"everywhere\"\n", 2, "metrics"),
        ("[daemon]\nmetrics = \"127.0.0.1:99999\"\n", 2, "port 99999 is out of range"),
        ("[daemon]\n\nsocket = \"relative.sock\"\n", 3, "socket"),
        ("[exclude]\ncomm = [\"a-name-longer-than-15\"]\n", 2, "comm"),
        ("[exclude]\ncgroups = [\"system.slice\"]\n", 2, "cgroups"),
        ("[exclude]\npids = [0]\n", 2, "pids"),
        ("[include]\ncomm = [\"a-name-longer-than-15\"]\n", 2, "include.comm"),
        ("[include]\n\ncgroups = [\"system.slice\"]\n", 3, "include.cgroups"),
        ("[include]\npids = [0]\n", 2, "include.pids: 0 is not a process id"),
        ("[actuation]\nmigrate_mb_per_s = 0\n", 2, "migrate_mb_per_s"),
        ("[actuation]\nmover_threads = 0\n", 2, "actuation.mover_threads = 0"),
        ("[actuation]\n\nmover_threads = 257\n", 3, "actuation.mover_threads = 257"),
        ("[actuation]\nreserved_cpus = \"3-1\"\n", 2, "actuation.reserved_cpus: range \"3-1\" runs backwards"),
        ("[actuation]\nreserved_cpus = \"two\"\n", 2, "actuation.reserved_cpus: bad id or range \"two\""),
        ("[daemon]\njournal_max_bytes = 10\n", 2, "journal_max_bytes"),
        ("[daemon]\ninterval_ms = 0\n", 2, "interval_ms"),
        // Past a day: its ns figure overflowed in the policy (a daemon panicked at 1e14 ms).
        ("[daemon]\n\ninterval_ms = 100000000000000\n", 3, "interval_ms"),
        ("[tunables]\naccess_stale_ms = 86400001\n", 2, "access_stale_ms"),
        ("[daemon]\nidle_max_interval_ms = 86400001\n", 2, "idle_max_interval_ms"),
        ("[daemon]\nnice = -21\n", 2, "daemon.nice = -21"),
        ("[daemon]\nnice = 20\n", 2, "daemon.nice = 20"),
        ("[exclude]\npids = [-1]\n", 2, "-1"),
        ("[exclude]\ninclude_kernel = true\n", 2, "include_kernel"),
        ("[signals]\nperf = true\nmaps_every = 0\n", 3, "maps_every"),
        ("[signals]\nsockets_every = 0\n", 2, "sockets_every"),
    ];
    for (text, line, word) in cases {
        let e = parse(text).unwrap_err();
        assert_eq!(e.line, Some(line), "{text:?}: {e}");
        assert!(e.to_string().contains(word), "{text:?}: {e}");
    }
}

#[test]
fn flags_override_the_file() {
    let text = "[daemon]\ninterval_ms = 2000\nmetrics = \"127.0.0.1:9000\"\n[exclude]\ncomm = [\"sshd\"]\n";
    let o = Overrides {
        dry_run: true,
        interval_ms: Some(500),
        socket: Some(PathBuf::from("/tmp/x.sock")),
        metrics: Some("off".into()),
        exclude_comm: vec!["postgres".into()],
        exclude_pids: vec![42],
        ..Overrides::default()
    };
    let c = config::parse_with_overrides(text, "f.toml", &o).unwrap();
    assert!(c.daemon.dry_run);
    assert_eq!(c.interval_ms(), 500);
    assert_eq!(c.tunables.interval_ms, 500);
    assert_eq!(c.metrics(), None);
    assert_eq!(c.daemon.socket, PathBuf::from("/tmp/x.sock"));
    assert_eq!(c.exclude.comm, vec!["sshd".to_string(), "postgres".to_string()]);
    let live = c.live_options(true);
    assert_eq!(live.exclude_comm, c.exclude.comm);
    assert_eq!(live.exclude_pids, vec![42]);
    assert!(live.observe_only);
    // Without flags the file's values stand.
    let c = config::parse_with_overrides(text, "f.toml", &Overrides::default()).unwrap();
    assert_eq!(c.interval_ms(), 2000);
    assert_eq!(c.metrics().unwrap().port(), 9000);
}

#[test]
fn a_bad_flag_is_named() {
    let o = Overrides { metrics: Some("localhost".into()), ..Overrides::default() };
    let e = config::parse_with_overrides("", "f.toml", &o).unwrap_err();
    assert_eq!(e.file, "command line");
    assert!(e.reason.contains("metrics"), "{e}");
    let o = Overrides { interval_ms: Some(0), ..Overrides::default() };
    let e = config::parse_with_overrides("", "f.toml", &o).unwrap_err();
    // Named as the user typed it, the flag, not the file's key.
    assert_eq!(e.reason, "--interval-ms 0: must be > 0 ms", "{e}");
    let o = Overrides { interval_ms: Some(50), ..Overrides::default() };
    let e = config::parse_with_overrides("", "f.toml", &o).unwrap_err();
    assert_eq!(
        e.reason,
        "--interval-ms 50: must be at least tunables.settle_interval_ms (100 ms; set that lower too to go below it)"
    );
    let o = Overrides { socket: Some("relative.sock".into()), ..Overrides::default() };
    let e = config::parse_with_overrides("", "f.toml", &o).unwrap_err();
    assert!(e.reason.starts_with("--socket \"relative.sock\""), "{e}");
    let o = Overrides { exclude_pids: vec![0], ..Overrides::default() };
    let e = config::parse_with_overrides("", "f.toml", &o).unwrap_err();
    assert!(e.reason.starts_with("--exclude-pid 0"), "{e}");
    let o = Overrides { include_pids: vec![0], ..Overrides::default() };
    let e = config::parse_with_overrides("", "f.toml", &o).unwrap_err();
    assert!(e.reason.starts_with("--include-pid 0"), "{e}");
    let o = Overrides { include_comm: vec!["postgres".into()], ..Overrides::default() };
    let c = config::parse_with_overrides("[include]\ncomm = [\"redis-server\"]\n", "f.toml", &o).unwrap();
    assert_eq!(c.include.comm, vec!["redis-server".to_string(), "postgres".to_string()], "flags add to the file");
    let o = Overrides { interval_ms: Some(u64::MAX), ..Overrides::default() };
    let e = config::parse_with_overrides("", "f.toml", &o).unwrap_err();
    assert!(e.reason.starts_with("--interval-ms 18446744073709551615: ") && e.reason.contains("one day"), "{e}");
}

#[test]
fn live_options_carry_every_section() {
    let text = "[exclude]\ncgroups = [\"/system.slice\"]\ninclude_pinned = true\nmin_rss_mib = 300\n\
                [include]\ncomm = [\"postgres\"]\npids = [7]\ncgroups = [\"/db.slice\"]\n\
                [actuation]\nmigrate_mb_per_s = 200\ncpuset = \"auto\"\nmover_threads = 2\n\
                reserved_cpus = \"0,6-7\"\nreserve_isolated = false\n\
                [daemon]\nstate = \"/var/tmp/s.json\"\n";
    let c = parse(text).unwrap();
    let l = c.live_options(false);
    assert_eq!(l.exclude_cgroups, vec!["/system.slice".to_string()]);
    assert!(l.include_pinned);
    assert_eq!((l.include_comm, l.include_pids), (vec!["postgres".to_string()], vec![7]));
    assert_eq!(l.include_cgroups, vec!["/db.slice".to_string()]);
    assert_eq!(l.min_rss_kb, 300 * 1024);
    assert_eq!(l.migrate_mb_per_s, 200);
    assert_eq!(l.cpuset, CpusetMode::Auto);
    assert_eq!(l.mover_threads, 2);
    assert_eq!(l.reserved_cpus, CpuSet::parse_list("0,6-7").unwrap());
    assert!(!l.reserve_isolated);
    assert_eq!(l.state_path, PathBuf::from("/var/tmp/s.json"));
    assert!(!l.observe_only);
    // Without a budget in [actuation], the engine's tunable is the budget.
    assert_eq!(parse("").unwrap().live_options(false).migrate_mb_per_s, 4096);
    assert_eq!(parse("").unwrap().live_options(false).mover_threads, 4);
    assert!(parse("").unwrap().live_options(false).reserved_cpus.is_empty());
    assert!(parse("").unwrap().live_options(false).reserve_isolated, "isolated CPUs are reserved by default");
}

/// The [signals] section's tuning reaches the signal sources the live host opens: named keys in,
/// `signal_tuning()` out, defaults equal to the sources' own.
#[test]
fn signals_section_carries_the_tuning() {
    let c =
        parse("[signals]\nmaps_every = 3\nsockets_every = 7\npage_faults = true\nwakeups = false\nshared = false\n")
            .unwrap();
    let t = c.signal_tuning();
    assert_eq!((t.maps_every, t.sockets_every, t.page_faults, t.wakeups, t.shared), (3, 7, true, false, false));
    assert_eq!(parse("").unwrap().signal_tuning(), numapilot_daemon::signals::SignalTuning::default());
}

#[test]
fn missing_explicit_file_is_an_error_and_real_files_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.toml");
    let e = config::load(&Source::Explicit(missing.clone()), &Overrides::default()).unwrap_err();
    assert!(e.to_string().contains("nope.toml"), "{e}");
    let file = dir.path().join("n.toml");
    std::fs::write(&file, "[daemon]\ndry_run = true\nbogus = 1\n").unwrap();
    let e = config::load(&Source::Explicit(file.clone()), &Overrides::default()).unwrap_err();
    assert_eq!(e.to_string(), format!("{}:3: {}", file.display(), e.reason));
    std::fs::write(&file, "[daemon]\ndry_run = true\n").unwrap();
    let l = config::load(&Source::Explicit(file.clone()), &Overrides::default()).unwrap();
    assert!(l.config.daemon.dry_run);
    assert_eq!(l.file, Some(file));
}

#[test]
fn the_packaged_example_is_valid_and_documents_every_key() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../packaging/numapilot.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let c = config::parse_with_overrides(&text, path, &Overrides::default()).unwrap();
    // The example states the defaults, and contradicts nothing.
    assert_eq!(c, Config::default());
    assert_eq!(config::warnings(&text, path, &c), Vec::<String>::new());
    // Every key of every section appears in it (commented or not).
    let full = toml::to_string(&Config::default()).unwrap();
    let mut section = String::new();
    for line in full.lines() {
        if line.starts_with('[') {
            section = line.to_string();
            assert!(text.contains(&section), "{section} missing from the example");
        } else if let Some((key, _)) = line.split_once(" = ") {
            assert!(
                text.contains(&format!("{key} =")),
                "{section} {key} missing from the example: run python3 packaging/tunables-section.py"
            );
        }
    }
    assert!(text.contains("interval_ms ="));
}

/// The Debian package's /etc/numapilot.toml is a few lines that set no key (the 33 KB example was
/// the conffile, and each change to it made every upgrade ask the admin; packaging review): the
/// daemon reads it as the full example, every default.
#[test]
fn the_packaged_conffile_is_the_full_example_in_a_few_lines() {
    let read = |name: &str| {
        let path = format!("{}/../../packaging/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        (config::parse_with_overrides(&text, &path, &Overrides::default()).unwrap(), text)
    };
    let (short, text) = read("numapilot-etc.toml");
    let (full, _) = read("numapilot.toml");
    assert_eq!(short, full);
    assert_eq!(short, Config::default());
    assert!(text.lines().count() <= 12, "a few lines: {text}");
    assert!(text.contains("/usr/share/doc/numapilot/examples/numapilot.toml"), "{text}");
    assert!(text.contains("numapilot daemon --check"), "{text}");
}

/// Only a regular file of UTF-8 text is a configuration: a FIFO is refused at once (it held the
/// start, and a reload with it the whole loop, until something wrote to it; review helper-50), and
/// so are a directory and a device; text that is not UTF-8 is named by its line.
#[test]
fn only_a_regular_file_of_text_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.toml");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid path in our own temporary directory.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let load = |p: &std::path::Path| config::load(&Source::Explicit(p.to_path_buf()), &Overrides::default());
    // Run where a hang would show: the test fails by timeout rather than hanging the suite.
    let (tx, rx) = std::sync::mpsc::channel();
    let f = fifo.clone();
    std::thread::spawn(move || tx.send(load(&f).map(|_| ()).unwrap_err().to_string()));
    let e = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("reading a FIFO hung");
    assert_eq!(e, format!("{}: a FIFO: a configuration is a regular file", fifo.display()));
    let e = load(dir.path()).unwrap_err();
    assert!(e.reason.starts_with("a directory"), "{e}");
    let e = load(std::path::Path::new("/dev/zero")).unwrap_err();
    assert!(e.reason.starts_with("a device"), "{e}");
    // `--config /dev/null` stays "no file: the defaults".
    assert_eq!(load(std::path::Path::new("/dev/null")).unwrap().config, Config::default());
    let bad = dir.path().join("latin1.toml");
    std::fs::write(&bad, b"[daemon]\ndry_run = true\n# caf\xe9\n").unwrap();
    let e = load(&bad).unwrap_err();
    assert_eq!((e.line, e.reason.as_str()), (Some(3), "not UTF-8 text: byte 6 of this line"), "{e}");
}

/// The daemon's files must be usable as what they are, said at the key's line by `--check` (a
/// start failed on them with exit 75, a temporary failure the unit restarts; review helper-50).
#[test]
fn the_daemons_files_are_checked_for_what_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    std::fs::create_dir(dir.path().join("adir")).unwrap();
    std::fs::write(dir.path().join("afile"), "").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join("alink")).unwrap();
    let cases = [
        (format!("[daemon]\njournal = \"{d}/j\\u0000x\"\n"), 2, "contains a NUL byte".to_string()),
        (format!("[daemon]\n\nstate = \"{d}/adir/\"\n"), 3, "ends in /: names a directory".into()),
        (format!("[daemon]\njournal = \"{d}/adir\"\n"), 2, "exists and is a directory".into()),
        (format!("[daemon]\nsocket = \"{d}/afile\"\n"), 2, "exists and is a regular file, not a socket".into()),
        (format!("[daemon]\nstate = \"{d}/alink\"\n"), 2, "exists and is a symbolic link".into()),
        (
            format!("[daemon]\njournal = \"{d}/same\"\nstate = \"{d}/./same\"\n"),
            3,
            format!("daemon.state = \"{d}/./same\": the same file as daemon.journal"),
        ),
        (
            format!("[daemon]\nstate = \"{d}/afile\"\nsocket = \"{d}/x.sock\"\njournal = \"{d}//afile\"\n"),
            2,
            "the same file as daemon.journal".into(),
        ),
    ];
    for (text, line, word) in &cases {
        let e = parse(text).unwrap_err();
        assert_eq!(e.line, Some(*line), "{text:?}: {e}");
        assert!(e.reason.contains(word.as_str()), "{text:?}: {e}");
    }
    // What they may be: missing, or a regular file (journal, state) and a socket left by a start.
    let sock = dir.path().join("left.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let ok = format!("[daemon]\njournal = \"{d}/afile\"\nstate = \"{d}/new.json\"\nsocket = \"{}\"\n", sock.display());
    parse(&ok).unwrap();
    // A client reads such a file for its socket: the daemon's files are the daemon's business.
    let f = dir.path().join("client.toml");
    std::fs::write(&f, format!("[daemon]\njournal = \"{d}/adir\"\nsocket = \"{d}/x.sock\"\n")).unwrap();
    let l = config::load_for_client(&Source::Explicit(f.clone())).unwrap();
    assert_eq!(l.config.daemon.socket, dir.path().join("x.sock"));
    assert!(config::load(&Source::Explicit(f), &Overrides::default()).is_err());
    // A flag is checked the same way, named as typed.
    let o = Overrides { state: Some(dir.path().join("adir")), ..Overrides::default() };
    let e = config::parse_with_overrides("", "/etc/numapilot.toml", &o).unwrap_err();
    assert!(e.to_string().starts_with("command line: --state "), "{e}");
}

/// A rule between two tunables broken by the one the file sets is said at that line, naming it
/// (it named the other, unset, key at the [tunables] header's line; review helper-50); a key
/// given twice is named; the daemon's interval and its flag are named as written.
#[test]
fn errors_name_what_the_file_or_flag_wrote() {
    let cases = [
        ("[tunables]\n\n\ncpu_load_high = 0.5\n", 4, "tunable cpu_load_high = 0.5: against cpu_load_low = 0.75"),
        ("[tunables]\ntier_weak = 0.005\n", 2, "tunable tier_weak = 0.005: against edge_zero"),
        ("[tunables]\n\ntier_strong = 0.1\n", 3, "tunable tier_strong = 0.1: against tier_medium"),
        ("[tunables]\ngrowing_mib_per_s = 0.5\n", 2, "tunable growing_mib_per_s = 0.5: against static_mib_per_s"),
        ("[tunables]\nnumad_interval_max_s = 0\n", 2, "numad_interval_max_s = 0: against numad_interval_min_s"),
        ("[tunables]\nsettle_interval_ms = 20\n", 2, "settle_interval_ms = 20: against first_touch_interval_ms"),
        // Two partners set: both named (the weak tier is fine, the strong one breaks the rule).
        (
            "[tunables]\ntier_weak = 0.1\ntier_strong = 0.15\n",
            2,
            "tunable tier_weak = 0.1, tier_strong = 0.15: against tier_medium",
        ),
        // Both set: the rule's own field, at its line, as before.
        ("[tunables]\ncpu_load_high = 0.5\ncpu_load_low = 0.6\n", 3, "tunable cpu_load_low = 0.6"),
        ("[daemon]\nnice = 0\nnice = 1\n", 3, "duplicate key: `nice`"),
        (
            "[daemon]\n\ninterval_ms = 18446744073709551615\n",
            3,
            "daemon.interval_ms = 18446744073709551615: must be <=",
        ),
    ];
    for (text, line, word) in cases {
        let e = parse(text).unwrap_err();
        assert_eq!(e.line, Some(line), "{text:?}: {e}");
        assert!(e.reason.contains(word), "{text:?}: {e}");
    }
    let o = Overrides { interval_ms: Some(99_999_999_999), ..Overrides::default() };
    let e = config::parse_with_overrides("", "/etc/numapilot.toml", &o).unwrap_err();
    assert_eq!(e.to_string(), "command line: --interval-ms 99999999999: must be <= 86400000 ms (one day)");
}

/// What is valid but probably not meant is warned about, never refused: a process both included
/// and excluded, both interval keys set apart.
#[test]
fn contradictions_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("w.toml");
    let text = "[exclude]\ncomm = [\"sshd\"]\npids = [7]\n\n[include]\ncomm = [\"redis\", \"sshd\"]\npids = [7]\n\n[daemon]\ninterval_ms = 500\n\n[tunables]\ninterval_ms = 2000\n";
    std::fs::write(&file, text).unwrap();
    let l = config::load(&Source::Explicit(file.clone()), &Overrides::default()).unwrap();
    let f = file.display();
    assert_eq!(
        l.warnings,
        [
            format!("{f}:6: include.comm and exclude.comm both name \"sshd\": exclusions win, so it is never managed"),
            format!("{f}:7: include.pids and exclude.pids both name \"7\": exclusions win, so it is never managed"),
            format!("{f}:13: tunables.interval_ms = 2000 is replaced by daemon.interval_ms = 500"),
        ]
    );
    assert_eq!(l.config.interval_ms(), 500);
    // A flag is no contradiction of the file: --interval-ms over a file's tunables interval, an
    // --exclude of a name the file includes.
    std::fs::write(&file, "[include]\ncomm = [\"redis\"]\n[tunables]\ninterval_ms = 2000\n").unwrap();
    let o = Overrides { interval_ms: Some(500), exclude_comm: vec!["redis".into()], ..Overrides::default() };
    let l = config::load(&Source::Explicit(file.clone()), &o).unwrap();
    assert!(l.warnings.is_empty(), "{:?}", l.warnings);
    assert_eq!(l.config.interval_ms(), 500);
    std::fs::write(
        &file,
        "[include]\ncomm = [\"redis\"]\n[daemon]\ninterval_ms = 500\n[tunables]\ninterval_ms = 500\n",
    )
    .unwrap();
    assert!(config::load(&Source::Explicit(file.clone()), &Overrides::default()).unwrap().warnings.is_empty());
    // Each said once: an inclusion the file lists twice, repeated by a flag (it was said once per
    // entry), and the file's warnings kept under flags.
    std::fs::write(&file, "[exclude]\ncomm = [\"sshd\"]\n\n[include]\ncomm = [\"sshd\", \"sshd\"]\n").unwrap();
    let o = Overrides { include_comm: vec!["sshd".into()], dry_run: true, ..Overrides::default() };
    let l = config::load(&Source::Explicit(file.clone()), &o).unwrap();
    assert_eq!(
        l.warnings,
        [format!("{f}:5: include.comm and exclude.comm both name \"sshd\": exclusions win, so it is never managed")]
    );
}

/// A configuration another user owns or may write is not believed (it steers a root daemon: what
/// it may touch, where it writes; it was read whoever owned it; review helper-51), nor one reached
/// through a directory another user owns.
#[test]
fn a_configuration_others_could_write_is_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("np.toml");
    std::fs::write(&file, "[daemon]\ndry_run = true\n").unwrap();
    let load = || config::load(&Source::Explicit(file.clone()), &Overrides::default());
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(load().unwrap().config.daemon.dry_run);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    let e = load().unwrap_err();
    assert!(e.reason.starts_with("not trusted: other users may write it (mode 666)"), "{e}");
    // Nor does root's client of the daemon (status, explain, advise): it would ask the socket the
    // file names, one another user could choose (it was read whoever could write it).
    let e = config::load_for_client(&Source::Explicit(file.clone())).unwrap_err();
    assert!(e.reason.starts_with("not trusted: other users may write it (mode 666)"), "{e}");
    assert!(e.reason.contains("root's client asks the socket it names"), "{e}");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::os::unix::fs::chown(&file, Some(65534), Some(65534)).unwrap();
    let e = load().unwrap_err();
    assert!(e.reason.starts_with("not trusted: it belongs to uid 65534, not root's"), "{e}");
    assert!(config::load_for_client(&Source::Explicit(file.clone())).is_err());
    std::os::unix::fs::chown(&file, Some(0), Some(0)).unwrap();
    std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534)).unwrap();
    let e = load().unwrap_err();
    assert!(e.reason.contains("its directory") && e.reason.contains("belongs to uid 65534"), "{e}");
    assert!(config::load_for_client(&Source::Explicit(file.clone())).is_err());
    std::os::unix::fs::chown(dir.path(), Some(0), Some(0)).unwrap();
    assert!(load().is_ok());
    assert!(config::load_for_client(&Source::Explicit(file.clone())).is_ok());
}
