//! numad's cost beside the numapilot daemon's, on one load in a multi-node guest (issue 5: "Same run: numad's cost
//! on the same load, as a ratio").
//!
//! # Why a guest
//!
//! On a one-node host numad scans no process (it has nothing to balance), so its CPU there is zero and says nothing
//! (`cycle_cost --numad-seconds` measured 0 ticks in 20 s on this machine). In the rig's multi-node guest it does
//! its real work. The scenario (`rig/scenarios/cost.sh`) starts one load of sleeping multi-threaded processes
//! (`rig-toucher --mb 1 --threads T`), then runs each daemon alone on it and reads the daemon's own utime + stime
//! from `/proc/PID/stat` twice, `seconds` apart after a warm-up:
//!
//! ```text
//!   numad -i 1:1                      one evaluation a second (as in the race)
//!   numapilot daemon, 1 s, no back-off one step a second: the per-evaluation comparison
//!   numapilot daemon, defaults        1 s interval, idle back-off up to 15 s: what a deployment costs
//!
//!   CPU share of one core = (ticks1 - ticks0) / USER_HZ / (uptime1 - uptime0)        USER_HZ = 100 (x86-64)
//!   ratio = numapilot share / numad share (same guest, same load, minutes apart)
//! ```
//!
//! # Limits
//!
//! The guest runs under QEMU TCG (emulated CPUs), so absolute shares are the guest's, not a real machine's; both
//! daemons pay the same emulation, so the ratio is what carries over. Clock ticks are 10 ms: over 30 s a daemon
//! using under 0.03% of a core reads 0 and its ratio is reported as not measurable rather than infinite.

use std::time::Duration;

use crate::guest::{GuestRun, Rig};
use crate::spec::GuestSpec;

/// The scenario, `rig/scenarios/cost.sh`.
pub const SCENARIO: &str = include_str!("../../../rig/scenarios/cost.sh");

/// Clock ticks per second of `/proc/PID/stat` times on x86-64 (`USER_HZ`, fixed by the kernel's ABI).
pub const USER_HZ: f64 = 100.0;

/// What to run in the guest.
#[derive(Debug, Clone, PartialEq)]
pub struct CostConfig {
    /// Processes in the load.
    pub procs: u32,
    /// Threads per process (the main one included).
    pub threads: u32,
    /// Measured seconds per daemon.
    pub seconds: u32,
    /// Seconds a daemon runs before the first reading.
    pub warmup: u32,
}

impl Default for CostConfig {
    /// Issue 5's cycle load, 1,000 processes x 10 threads; 30 s measured after a 10 s warm-up (the defaults'
    /// back-off reaches 15 s after 4 quiet steps, 1 + 2 + 4 + 8 s).
    fn default() -> Self {
        Self { procs: 1000, threads: 10, seconds: 30, warmup: 10 }
    }
}

impl CostConfig {
    /// The scenario's `/rig/cost.conf`.
    pub fn to_conf(&self) -> String {
        format!(
            "COST_PROCS={}\nCOST_THREADS={}\nCOST_SECONDS={}\nCOST_WARMUP={}\n",
            self.procs, self.threads, self.seconds, self.warmup
        )
    }
}

/// One daemon's two readings.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// Which run (`numad`, `numapilot-1s`, `numapilot-default`).
    pub name: String,
    /// Its pid in the guest.
    pub pid: u32,
    /// utime + stime at the first reading, clock ticks.
    pub ticks0: u64,
    /// /proc/uptime at the first reading, s.
    pub up0: f64,
    /// utime + stime at the second reading.
    pub ticks1: u64,
    /// /proc/uptime at the second reading.
    pub up1: f64,
    /// VmRSS at the second reading, kB.
    pub rss_kb: u64,
}

impl Reading {
    /// Parses the scenario's line `pid ticks0 up0 ticks1 up1 vmrss_kb`.
    pub fn parse(name: &str, line: &str) -> Result<Reading, String> {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 6 {
            return Err(format!("{name}: expected 6 fields (pid ticks0 up0 ticks1 up1 vmrss_kb), got {line:?}"));
        }
        let int = |i: usize, what: &str| {
            f[i].parse::<u64>().map_err(|_| format!("{name}: {what} {:?} is not an integer", f[i]))
        };
        let float = |i: usize, what: &str| {
            f[i].parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| format!("{name}: {what} {:?} is not a number", f[i]))
        };
        let r = Reading {
            name: name.to_string(),
            pid: int(0, "pid")? as u32,
            ticks0: int(1, "ticks0")?,
            up0: float(2, "uptime0")?,
            ticks1: int(3, "ticks1")?,
            up1: float(4, "uptime1")?,
            rss_kb: int(5, "vmrss_kb")?,
        };
        if r.ticks1 < r.ticks0 || r.up1 <= r.up0 {
            return Err(format!("{name}: the second reading is not after the first: {line:?}"));
        }
        Ok(r)
    }

    /// CPU used between the readings, as a share of one core.
    pub fn core_share(&self) -> f64 {
        (self.ticks1 - self.ticks0) as f64 / USER_HZ / (self.up1 - self.up0)
    }
}

/// The whole run's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct CostResult {
    /// Processes and threads ready in the guest (threads: every task in the guest, kernel threads included).
    pub procs: u32,
    /// Threads in the guest once the load was ready.
    pub threads: u32,
    /// One reading per daemon run, in the scenario's order.
    pub readings: Vec<Reading>,
}

/// The scenario's runs, in order.
pub const RUNS: [&str; 3] = ["numad", "numapilot-1s", "numapilot-default"];

/// The guest the comparison runs in: the 4-node preset (2 CPUs a node) with `mem_mb` MiB a node (1,000 processes
/// of 10 threads ran in 1,024 MiB a node; the suite's 40 x 4 in 512), and a time limit for spawning the load and the
/// three daemon runs.
pub fn guest(cfg: &CostConfig, mem_mb: u64) -> GuestSpec {
    let mut spec = GuestSpec::preset("4node").expect("the 4node preset exists");
    for n in &mut spec.nodes {
        n.mem_mb = mem_mb;
    }
    // Measured: the 1,000 x 10 run took 294 s of wall in all (boot, spawning the load, three 40 s daemon runs);
    // the limit leaves room for a slower host: 300 s, plus 0.2 s per process, plus each daemon run with 10 s spare.
    spec.timeout = Duration::from_secs(300 + u64::from(cfg.procs) / 5 + 3 * u64::from(cfg.seconds + cfg.warmup + 10));
    spec
}

/// Boots the guest with the scenario and reads the figures; the run is kept for its sections (daemon logs).
pub fn run(rig: &Rig, cfg: &CostConfig, mem_mb: u64) -> Result<(GuestRun, CostResult), String> {
    let conf = vec![("rig/cost.conf".to_string(), cfg.to_conf().into_bytes())];
    let run = rig.boot(&guest(cfg, mem_mb), "cost", SCENARIO, &conf).map_err(|e| e.to_string())?;
    if run.scenario_rc != 0 {
        return Err(format!("cost.sh failed (rc {}); console tail:\n{}", run.scenario_rc, run.console_tail()));
    }
    let res = read_run(&run)?;
    Ok((run, res))
}

/// Reads the sections of a finished run.
pub fn read_run(run: &GuestRun) -> Result<CostResult, String> {
    let ready = run.section("cost-ready")?.stdout();
    let f: Vec<u32> = ready.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    let [procs, threads] = f[..] else { return Err(format!("cost-ready: expected \"procs threads\", got {ready:?}")) };
    let mut readings = Vec::new();
    for name in RUNS {
        let s = run.section(&format!("cost-{name}"))?;
        readings.push(Reading::parse(name, s.stdout().trim())?);
    }
    Ok(CostResult { procs, threads, readings })
}

impl CostResult {
    /// The reading of one run.
    pub fn get(&self, name: &str) -> Option<&Reading> {
        self.readings.iter().find(|r| r.name == name)
    }

    /// numapilot's share over numad's for the run `ours`; `None` when numad read no tick (not measurable).
    pub fn ratio(&self, ours: &str) -> Option<f64> {
        let numad = self.get("numad")?.core_share();
        let us = self.get(ours)?.core_share();
        (numad > 0.0).then(|| us / numad)
    }

    /// A markdown table of the run.
    pub fn render_markdown(&self) -> String {
        let mut s = String::from(
            "| daemon | CPU ticks | seconds | share of one core | VmRSS | vs numad |\n|---|---|---|---|---|---|\n",
        );
        for r in &self.readings {
            let ratio = if r.name == "numad" {
                "1".to_string()
            } else {
                self.ratio(&r.name).map_or("not measurable (numad 0 ticks)".to_string(), |x| format!("{x:.2} x"))
            };
            s += &format!(
                "| {} | {} | {:.1} | {:.3}% | {:.1} MB | {} |\n",
                r.name,
                r.ticks1 - r.ticks0,
                r.up1 - r.up0,
                100.0 * r.core_share(),
                r.rss_kb as f64 / 1000.0,
                ratio
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_parses_and_gives_the_share() {
        // 45 ticks in 30 s: 0.45 s of CPU / 30 s = 1.5% of a core.
        let r = Reading::parse("numad", "123 100 50.00 145 80.00 2048").unwrap();
        assert_eq!(r.pid, 123);
        assert!((r.core_share() - 0.015).abs() < 1e-12);
        assert_eq!(r.rss_kb, 2048);
    }

    #[test]
    fn bad_readings_name_the_field() {
        let e = Reading::parse("numad", "123 100 50.00 145 80.00").unwrap_err();
        assert!(e.contains("expected 6 fields"), "{e}");
        let e = Reading::parse("numad", "123 x 50.00 145 80.00 1").unwrap_err();
        assert!(e.contains("ticks0 \"x\""), "{e}");
        let e = Reading::parse("numad", "123 100 80.00 145 50.00 1").unwrap_err();
        assert!(e.contains("not after the first"), "{e}");
    }

    #[test]
    fn the_ratio_is_ours_over_numads_and_absent_when_numad_read_nothing() {
        let r = |name: &str, ticks: u64| Reading {
            name: name.into(),
            pid: 1,
            ticks0: 0,
            up0: 0.0,
            ticks1: ticks,
            up1: 30.0,
            rss_kb: 1000,
        };
        let res = CostResult { procs: 10, threads: 100, readings: vec![r("numad", 60), r("numapilot-1s", 30)] };
        assert!((res.ratio("numapilot-1s").unwrap() - 0.5).abs() < 1e-12);
        let md = res.render_markdown();
        assert!(md.contains("| numapilot-1s | 30 | 30.0 | 1.000% | 1.0 MB | 0.50 x |"), "{md}");
        let res = CostResult { procs: 10, threads: 100, readings: vec![r("numad", 0), r("numapilot-1s", 30)] };
        assert_eq!(res.ratio("numapilot-1s"), None);
        assert!(res.render_markdown().contains("not measurable"));
    }

    #[test]
    fn the_conf_names_every_parameter() {
        let c = CostConfig { procs: 7, threads: 3, seconds: 5, warmup: 2 }.to_conf();
        assert_eq!(c, "COST_PROCS=7\nCOST_THREADS=3\nCOST_SECONDS=5\nCOST_WARMUP=2\n");
    }
}
