//! CPU rate per thread from two samples: a pure function.
//!
//! ```text
//!   rate = (cpu_time(t1) - cpu_time(t0)) / (t1 - t0)        1.0 = one CPU busy all the time
//!
//!   cpu_time: schedstat run_ns when both samples have it (ns precision, CONFIG_SCHED_INFO),
//!             else (utime + stime) ticks / USER_HZ (10 ms resolution at HZ=100)
//!   run delay = schedstat wait_ns(t1) - wait_ns(t0)          time runnable but not running, ns
//!   t:        the monotonic time the thread's process was read (not the sample start: reading
//!             10,000 threads takes tens of ms, which would bias short intervals)
//! ```
//!
//! Threads are matched by (pid, process starttime, tid, thread starttime), so a reused pid or tid
//! never pairs two different tasks. Threads present in only one sample have no rate. A counter that
//! went backwards (impossible for a live task, possible for corrupt input) gives no rate either.

use serde::{Deserialize, Serialize};

use crate::sample::{ProcessSample, Sample, ThreadSample};

/// CPU rate of one thread between two samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ThreadRate {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// CPU used over the interval, in CPUs (1.0 = one CPU fully busy).
    pub cpus: f64,
    /// CPU the thread last ran on, in the later sample.
    pub last_cpu: u32,
    /// Length of the interval, ns.
    pub interval_ns: u64,
    /// Time spent runnable but waiting for a CPU during the interval (schedstat run delay), ns; `None`
    /// when either sample lacks schedstat or the counter went backwards.
    pub run_delay_ns: Option<u64>,
}

impl ThreadRate {
    /// Run delay per second of the interval, ms/s (1000 = waited the whole interval).
    pub fn run_delay_ms_per_s(&self) -> Option<f64> {
        let d = self.run_delay_ns?;
        (self.interval_ns > 0).then(|| d as f64 / self.interval_ns as f64 * 1000.0)
    }
}

/// Rate from two cumulative CPU times (ns) over an interval (ns); `None` for an empty interval or a
/// counter that went backwards.
pub fn cpu_rate(prev_cpu_ns: u64, cur_cpu_ns: u64, interval_ns: u64) -> Option<f64> {
    if interval_ns == 0 || cur_cpu_ns < prev_cpu_ns {
        return None;
    }
    Some((cur_cpu_ns - prev_cpu_ns) as f64 / interval_ns as f64)
}

fn ticks_to_ns(ticks: u64, hz: u64) -> u64 {
    if hz == 0 {
        return 0;
    }
    // ticks * 1e9 / hz without overflow for any realistic tick count (u128 intermediate).
    ((ticks as u128 * 1_000_000_000u128) / hz as u128) as u64
}

/// The CPU time of a thread in ns: schedstat when both `a` and `b` have it, else stat ticks.
fn cpu_ns_pair(a: &ThreadSample, b: &ThreadSample, hz_a: u64, hz_b: u64) -> (u64, u64) {
    match (a.schedstat, b.schedstat) {
        (Some(x), Some(y)) => (x.run_ns, y.run_ns),
        _ => (ticks_to_ns(a.stat.cpu_ticks(), hz_a), ticks_to_ns(b.stat.cpu_ticks(), hz_b)),
    }
}

/// Per-thread CPU rates between `prev` and `cur` (threads in both samples), in `cur`'s order.
pub fn thread_cpu_rates(prev: &Sample, cur: &Sample) -> Vec<ThreadRate> {
    let mut out = Vec::new();
    for p in &cur.processes {
        let Some(pp) = prev.process(p.pid).filter(|pp| pp.starttime == p.starttime) else { continue };
        let interval = interval_ns(prev, pp, cur, p);
        for t in &p.threads {
            let Ok(i) = pp.threads.binary_search_by_key(&t.tid, |x| x.tid) else { continue };
            let pt = &pp.threads[i];
            if pt.stat.starttime != t.stat.starttime {
                continue;
            }
            let (a, b) = cpu_ns_pair(pt, t, prev.clock_ticks_per_sec, cur.clock_ticks_per_sec);
            let run_delay_ns = match (pt.schedstat, t.schedstat) {
                (Some(x), Some(y)) => y.wait_ns.checked_sub(x.wait_ns),
                _ => None,
            };
            if let Some(cpus) = cpu_rate(a, b, interval) {
                out.push(ThreadRate {
                    pid: p.pid,
                    tid: t.tid,
                    cpus,
                    last_cpu: t.last_cpu(),
                    interval_ns: interval,
                    run_delay_ns,
                });
            }
        }
    }
    out
}

/// Interval between two reads of the same process: per-process read times when both are known,
/// else the sample start times.
fn interval_ns(prev: &Sample, pp: &ProcessSample, cur: &Sample, p: &ProcessSample) -> u64 {
    if pp.read_ns != 0 && p.read_ns != 0 {
        p.read_ns.saturating_sub(pp.read_ns)
    } else {
        cur.monotonic_ns.saturating_sub(prev.monotonic_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::schedstat::SchedStat;
    use crate::parse::stat::parse_stat;
    use crate::parse::status::parse_status;

    const STAT: &str = include_str!("../tests/data/host-6.18/stat-cat");
    const STATUS: &str = include_str!("../tests/data/host-6.18/status-cat");

    fn thread(tid: u32, starttime: u64, utime: u64, stime: u64, run_ns: Option<u64>) -> ThreadSample {
        let mut stat = parse_stat(STAT).unwrap();
        stat.pid = tid;
        stat.starttime = starttime;
        stat.utime = utime;
        stat.stime = stime;
        stat.processor = 1;
        let status = parse_status(STATUS).unwrap();
        ThreadSample {
            tid,
            stat,
            cpus_allowed: std::sync::Arc::new(status.cpus_allowed),
            mems_allowed: std::sync::Arc::new(status.mems_allowed),
            voluntary_ctxt_switches: None,
            nonvoluntary_ctxt_switches: None,
            sched: None,
            schedstat: run_ns.map(|r| SchedStat { run_ns: r, wait_ns: r / 10, timeslices: 1 }),
        }
    }

    fn sample(at_ns: u64, procs: Vec<(u32, u64, Vec<ThreadSample>)>) -> Sample {
        let stat = parse_stat(STAT).unwrap();
        Sample {
            processes: procs
                .into_iter()
                .map(|(pid, starttime, threads)| ProcessSample {
                    pid,
                    starttime,
                    comm: "x".into(),
                    kernel_thread: false,
                    read_ns: at_ns,
                    stat: stat.clone(),
                    rss_kb: None,
                    numa_maps: None,
                    numa_maps_error: None,
                    node_usage: vec![],
                    threads,
                    cpuset_cpus: None,
                })
                .collect(),
            ..Sample::empty_at(at_ns)
        }
    }

    #[test]
    fn rate_from_ticks_and_from_schedstat() {
        // 2 s apart. Thread 10: 150 ticks = 1.5 s of CPU -> 0.75 CPU. Thread 11: schedstat 0.5 s -> 0.25.
        let a = sample(
            1_000_000_000,
            vec![(10, 500, vec![thread(10, 500, 100, 0, None), thread(11, 600, 0, 0, Some(1_000))])],
        );
        let b = sample(
            3_000_000_000,
            vec![(10, 500, vec![thread(10, 500, 200, 50, None), thread(11, 600, 9, 9, Some(500_001_000))])],
        );
        let r = thread_cpu_rates(&a, &b);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].tid, 10);
        assert!((r[0].cpus - 0.75).abs() < 1e-12, "{r:?}");
        assert_eq!(r[0].interval_ns, 2_000_000_000);
        assert!((r[1].cpus - 0.25).abs() < 1e-12, "{r:?}");
        assert_eq!(r[1].last_cpu, 1);
        // Run delay (a tenth of run time in these samples): 50,000,000 ns over 2 s = 25 ms/s.
        assert_eq!(r[0].run_delay_ns, None);
        assert_eq!(r[1].run_delay_ns, Some(50_000_000));
        assert!((r[1].run_delay_ms_per_s().unwrap() - 25.0).abs() < 1e-9);
    }

    #[test]
    fn reused_ids_and_new_threads_have_no_rate() {
        let a =
            sample(0, vec![(10, 500, vec![thread(10, 500, 0, 0, None)]), (20, 700, vec![thread(20, 700, 0, 0, None)])]);
        let b = sample(
            1_000_000_000,
            vec![
                // same pid, different process (starttime changed): no rate
                (10, 999, vec![thread(10, 999, 50, 0, None)]),
                // same process; tid 21 is new; tid 20 fine
                (20, 700, vec![thread(20, 700, 10, 0, None), thread(21, 800, 10, 0, None)]),
            ],
        );
        let r = thread_cpu_rates(&a, &b);
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].pid, r[0].tid), (20, 20));
        assert!((r[0].cpus - 0.1).abs() < 1e-12);
    }

    #[test]
    fn backwards_or_empty_interval_gives_none() {
        assert_eq!(cpu_rate(10, 5, 100), None);
        assert_eq!(cpu_rate(10, 20, 0), None);
        assert_eq!(cpu_rate(0, 50, 100), Some(0.5));
    }
}
