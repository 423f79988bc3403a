//! The short version of `numapilot-rig cost` (numad's cost beside the daemon's, issue 5's performance section): in
//! the 4-node guest, 40 sleeping processes of 4 threads, then Debian's numad and the numapilot daemon (1 s, no
//! back-off; then its defaults), each measured for 5 s. Checks the load came up, every daemon was read twice
//! (so numad really ran: the scenario reads numad's pid file and its /proc entry), and the daemon exited 0 on
//! SIGTERM both times. The figures themselves are a benchmark (README), not asserted. Skipped unless
//! `NUMAPILOT_RIG=1`.

use std::io::Write;

use numapilot_rig::cost::{self, CostConfig, RUNS};
use numapilot_rig::Rig;

#[test]
fn numad_and_the_daemon_are_measured_on_one_load() {
    if std::env::var("NUMAPILOT_RIG").map_or(true, |v| v != "1") {
        let _ = writeln!(std::io::stderr(), "rig cost test SKIPPED: set NUMAPILOT_RIG=1 to boot QEMU guests");
        return;
    }
    let cfg = CostConfig { procs: 40, threads: 4, seconds: 5, warmup: 2 };
    let (rig, _) = Rig::prepare(&numapilot_rig::race::rig_options()).expect("rig");
    let (run, res) = cost::run(&rig, &cfg, 512).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{}", res.render_markdown());
    assert_eq!(res.procs, 40, "load: {} of 40 processes ready", res.procs);
    assert!(res.threads >= 160, "{} tasks in the guest, fewer than the load's 160 threads", res.threads);
    assert_eq!(res.readings.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), RUNS);
    for r in &res.readings {
        assert!(r.up1 - r.up0 >= 4.5, "{}: readings {:.1} s apart, 5 s asked", r.name, r.up1 - r.up0);
        assert!(r.rss_kb > 0, "{}: no VmRSS", r.name);
    }
    for name in ["cost-numapilot-1s-log", "cost-numapilot-default-log"] {
        let log = run.section(name).unwrap();
        assert_eq!(log.rc, 0, "{name}: daemon exit {}: {}", log.rc, log.stdout());
    }
}
