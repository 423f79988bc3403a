//! numapilot stepped at the daemon's cadence in the simulator (`numapilot_policy::cadence`): the
//! wait between steps backs off while nothing changes, the access sampling is stretched alike, and
//! a process that starts while the loop is backed off ends the wait at the next interval.

use numapilot_policy::cadence::{FILL_HIGH, FILL_LOW};
use numapilot_sim::engine::{Machine, SimOptions};
use numapilot_sim::host::{MAX_SAMPLES_PER_CPU, PMU_SAMPLE_COST_NS};
use numapilot_sim::run::run_engine;
use numapilot_sim::workload::{
    Access, FirstTouch, MemPolicySpec, Pattern, ProcessSpec, RegionSpec, Slice, Spec, ThreadGroup, Work,
};

const MIB: u64 = 1 << 20;
const S: u64 = 1_000_000_000;

/// Two threads streaming their own slices of 256 MiB, each first-touched where its thread runs:
/// local from the start, nothing to do.
fn process(name: &str, start_s: f64) -> ProcessSpec {
    ProcessSpec {
        cpuset: None,
        name: name.into(),
        count: 1,
        start_s,
        cpus: None,
        policy: MemPolicySpec::Local,
        regions: vec![RegionSpec {
            name: "mem".into(),
            bytes: 256 * MIB,
            touch: FirstTouch::Threads,
            policy: None,
            grow: None,
        }],
        threads: vec![ThreadGroup {
            name: "w".into(),
            count: 2,
            cpus: None,
            work: Work { total: None, unit: "bytes".into(), bytes_per_unit: 1.0, compute_ns: 0.0, duty: 1.0 },
            accesses: vec![Access {
                region: "mem".into(),
                weight: 1.0,
                slice: Slice::PerThread,
                pattern: Pattern::Stream,
                write: false,
            }],
        }],
        phases: vec![],
        launch_advice: false,
    }
}

/// Step times (s), the kernel time of the first process's threads at the last step (ns: the
/// sampling stall, as nothing is moved) and its throughput, of one numapilot run: `a` from 0 s,
/// `b` from 40.3 s, 60 s in all.
fn run(idle_max_interval_ms: u64) -> (Vec<f64>, u64, f64) {
    let machine = Machine::preset("autonuma-2s12c-24g").unwrap();
    let spec = Spec {
        name: "cadence".into(),
        description: String::new(),
        duration_s: Some(60.0),
        pacing: vec![],
        throughput_from: None,
        throughput_unit: None,
        processes: vec![process("a", 0.0), process("b", 40.3)],
    };
    let opts = SimOptions { idle_max_interval_ms, ..SimOptions::default() };
    let mut steps = Vec::new();
    let mut stall = 0;
    let mut moved = 0;
    let r = run_engine(&machine, &spec, "numapilot", 1, &opts, &mut |_| {}, &mut |sim, report| {
        moved += report.pages_moved;
        steps.push(sim.now_ns() as f64 / S as f64);
        let k = &sim.kernel;
        stall = k.procs[0].tasks.iter().map(|&t| k.tasks[t].stime_ns).sum::<u64>();
    })
    .unwrap();
    assert_eq!(moved, 0, "local from the first touch: no page moves in the kernel time");
    (steps, stall, r.processes[0].throughput.unwrap())
}

#[test]
fn a_quiet_machine_is_stepped_and_sampled_less_and_a_new_process_ends_the_wait() {
    let (steps, _, tp) = run(15_000);
    let (fixed, _, tp_fixed) = run(0);
    let gaps = |v: &[f64], from: f64, to: f64| -> Vec<f64> {
        v.windows(2).filter(|w| w[0] >= from && w[1] <= to).map(|w| w[1] - w[0]).collect()
    };
    // Without a cap the policy's 1 s interval throughout (the settle cadence while `a` is young).
    assert!(gaps(&fixed, 0.0, 60.0).iter().all(|&g| g <= 1.0 + 1e-6), "{fixed:?}");
    // With the daemon's cap: doubling to 15 s while only `a` runs, local and settled.
    let before = gaps(&steps, 0.0, 40.3);
    assert!(before.iter().any(|&g| (g - 15.0).abs() < 0.02), "backed off to the 15 s cap: {steps:?}");
    assert!(before.windows(2).all(|w| w[1] >= w[0] - 1e-6 || w[1] <= 1.0 + 1e-6), "only grows: {before:?}");
    assert!(steps.len() * 2 < fixed.len(), "{} steps against {}: {steps:?}", steps.len(), fixed.len());
    // `b` starts at 40.3 s in the middle of a long wait: the next step comes at the next interval
    // mark after it (the daemon's once-per-interval last-pid check), not at the end of the wait.
    let waiting_from = steps.iter().copied().filter(|&t| t < 40.3).fold(0.0, f64::max);
    let next = steps.iter().copied().find(|&t| t > 40.3).expect("a step after b starts");
    assert!(
        next - 40.3 <= 1.0 + 0.011,
        "stepped {:.2} s after b started (waiting since {waiting_from:.2} s)",
        next - 40.3
    );
    assert!(next - waiting_from < 15.0 - 1e-6, "the wait was cut short: {steps:?}");
    // Sampled less: the same placement, its threads stalled less, so more work done. At the 1 s
    // cadence the density keeps a streamer's window at FILL_LOW of its buffer or more: at least
    // FILL_LOW x MAX_SAMPLES_PER_CPU samples a second at PMU_SAMPLE_COST_NS each (0.05% of its
    // time with a 2,048-sample buffer); backed off to 15 s from 8 s on, well over half of that goes.
    let floor = FILL_LOW * MAX_SAMPLES_PER_CPU as f64 * PMU_SAMPLE_COST_NS as f64 / S as f64;
    assert!(
        tp > tp_fixed * (1.0 + floor / 2.0),
        "throughput {tp} against {tp_fixed} ({:.5}; floor {floor:.5})",
        tp / tp_fixed
    );
}

#[test]
fn while_backed_off_the_sampling_stall_falls_with_the_wait() {
    // Per simulated second up to each run's last step (the two runs' last steps differ). The
    // simulator charges every sample taken, those the per-thread cap drops included, so without
    // the stretch a 15 s wait would cost what 15 steps at 1 s do.
    let (steps, stall, _) = run(15_000);
    let (fixed, stall_fixed, _) = run(0);
    assert!(stall_fixed > 0, "numapilot pays for its samples");
    let per_s = stall as f64 / steps.last().unwrap();
    let per_s_fixed = stall_fixed as f64 / fixed.last().unwrap();
    assert!(
        per_s < 0.5 * per_s_fixed,
        "stretched sampling while backed off: {per_s:.0} ns/s against {per_s_fixed:.0} ns/s at the base period"
    );
}

#[test]
fn a_streamer_that_fills_the_buffers_is_sampled_less_densely_until_they_fit() {
    // One thread alone on the machine streaming its 256 MiB: at the base period its samples over
    // a 1 s window would fill more than half the per-thread buffer (the simulator's cap,
    // MAX_SAMPLES_PER_CPU), so the cadence's density keeps every window under FILL_HIGH.
    let machine = Machine::preset("autonuma-2s12c-24g").unwrap();
    let mut p = process("s", 0.0);
    p.threads[0].count = 1;
    let spec = Spec {
        name: "streamer".into(),
        description: String::new(),
        duration_s: Some(30.0),
        pacing: vec![],
        throughput_from: None,
        throughput_unit: None,
        processes: vec![p],
    };
    let opts = SimOptions { idle_max_interval_ms: 0, ..SimOptions::default() };
    let mut fills = Vec::new();
    run_engine(&machine, &spec, "numapilot", 1, &opts, &mut |_| {}, &mut |sim, report| {
        fills.push((sim.now_ns() as f64 / S as f64, report.access_fill));
    })
    .unwrap();
    // Young, the process is stepped every 100 ms; settled, every second. Its first windows, at
    // the base period, say that ten of them would overfill a 1 s one (the premise), yet no window
    // overfills. Once two steps planned nothing the density holds the rate per second within the
    // bound (ten 100 ms windows under FILL_HIGH: the cost of a young process's sampling is the
    // settled one's), so the first 1 s window is already sampled at the density it needs.
    let first = fills.iter().filter(|f| f.0 < 0.2).map(|f| f.1).fold(0.0, f64::max);
    assert!(first * 10.0 > FILL_HIGH, "the premise: a 1 s window at the base period would overfill: {fills:?}");
    let young = fills.iter().filter(|f| f.0 > 0.5 && f.0 < 2.0).map(|f| f.1).fold(0.0, f64::max);
    assert!(young * 10.0 <= FILL_HIGH, "young and quiet, bounded per second: {fills:?}");
    assert!(fills.iter().all(|f| f.1 <= FILL_HIGH), "never over half full: {fills:?}");
    let late = fills.iter().filter(|f| f.0 > 20.0).map(|f| f.1).fold(0.0, f64::max);
    let low = fills.iter().filter(|f| f.0 > 20.0).map(|f| f.1).fold(f64::MAX, f64::min);
    assert!(late <= FILL_HIGH && low >= FILL_LOW, "settled inside the band: {low}..{late} ({fills:?})");
}

#[test]
fn a_finished_task_has_paid_for_every_sample_its_work_took() {
    // One thread alone, 2 GiB of work streamed through its own 256 MiB: the sampling's cost
    // (one sample per SAMPLE_PERIOD_LINES lines, PMU_SAMPLE_COST_NS each) adds exactly that much
    // to its runtime, the last epoch's samples included (a task that finishes pays before it
    // exits). Stepped at a fixed cadence without the stretch, so every sample is at the base
    // period.
    use numapilot_sim::host::SAMPLE_PERIOD_LINES;
    let machine = Machine::preset("autonuma-2s12c-24g").unwrap();
    let mut p = process("w", 0.0);
    p.threads[0].count = 1;
    let total = 2.0 * 1024.0 * MIB as f64;
    p.threads[0].work.total = Some(total);
    let spec = Spec {
        name: "finish".into(),
        description: String::new(),
        duration_s: None,
        pacing: vec![],
        throughput_from: None,
        throughput_unit: None,
        processes: vec![p],
    };
    let runtime = |cost: u64| {
        let opts = SimOptions {
            noise: 0.0,
            idle_max_interval_ms: 0,
            stretch_sampling: false,
            pmu_sample_cost_ns: cost,
            ..SimOptions::default()
        };
        run_engine(&machine, &spec, "numapilot", 1, &opts, &mut |_| {}, &mut |_, _| {}).unwrap().runtime_s
    };
    let (free, paid) = (runtime(0), runtime(PMU_SAMPLE_COST_NS));
    let expected = total / 64.0 / SAMPLE_PERIOD_LINES * PMU_SAMPLE_COST_NS as f64 / 1e9;
    let extra = paid - free;
    assert!((extra / expected - 1.0).abs() < 0.002, "paid {extra:.6} s for the samples, expected {expected:.6} s");
}
