//! Node load, interference and the bottleneck hysteresis.

mod common;

use common::*;

/// CPU load from /proc/stat deltas: node 0 (CPUs 0, 1) goes from (busy, idle) = (0, 0) to
/// (90, 10) on each CPU: 180 busy of 200 ticks = 0.9 -> at cpu_load_high (0.90): bottleneck.
/// Node 1: 20 of 200 = 0.1. Run delay: one task on node 0 waited 0.3 s of 1 s -> 0.3 / 2 CPUs =
/// 0.15 interference.
#[test]
fn cpu_load_and_interference() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s0 = Sb::new(&topo, SEC).cpu_ticks(&[(0, 0); 4]).proc(10, 5, "a", &[GIB, 0]).thread(10, 10, 0, 0, 0).build();
    m.update(&s0);
    assert!(!m.nodes[0].cpu.known, "no CPU load from one sample");
    let s1 = Sb::new(&topo, 2 * SEC)
        .cpu_ticks(&[(90, 10), (90, 10), (10, 90), (10, 90)])
        .proc(10, 5, "a", &[GIB, 0])
        .thread(10, 10, 800_000_000, 300_000_000, 1)
        .build();
    m.update(&s1);
    let n0 = &m.nodes[0];
    assert!(n0.cpu.known);
    assert!((n0.cpu.load - 0.9).abs() < 1e-12, "{n0:?}");
    assert!((n0.cpu.interference - 0.15).abs() < 1e-12);
    assert!(n0.cpu.bottleneck);
    assert!((n0.cpu_demand - 0.8).abs() < 1e-12);
    let n1 = &m.nodes[1];
    assert!((n1.cpu.load - 0.1).abs() < 1e-12);
    assert!(!n1.cpu.bottleneck);
    assert_eq!(n1.cpu_demand, 0.0);
    assert!(!n0.mem_bw.known && !n0.io.known, "no uncore PMU, no devices");
}

/// Without /proc/stat the CPU load falls back to the tasks' rates: 1.5 CPUs on a 2-CPU node = 0.75.
#[test]
fn cpu_load_falls_back_to_task_rates() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s =
        |t, a, b| Sb::new(&topo, t).proc(10, 5, "a", &[GIB, 0]).thread(10, 10, a, 0, 0).thread(10, 11, b, 0, 1).build();
    m.update(&s(SEC, 0, 0));
    m.update(&s(2 * SEC, SEC, SEC / 2));
    assert!((m.nodes[0].cpu.load - 0.75).abs() < 1e-12);
    assert!(m.nodes[0].cpu.known);
    assert_eq!(m.nodes[0].cpu.interference, 0.0, "schedstat present, no delay");
}

/// Memory-capacity hysteresis (high 0.95, low 0.85), node of 16 GiB. Used fraction sequence:
///   0.90 -> off (below high)         0.96 -> ON (>= high)
///   0.90 -> on  (between the marks)  0.94 -> on   0.86 -> on   (oscillating between the marks)
///   0.84 -> OFF (< low)              0.90 -> off  (between the marks, was off)
#[test]
fn memory_capacity_hysteresis_does_not_flap() {
    let topo = machine(1, 2, 16);
    let mut m = model(topo.clone());
    let total_kb = 16 * 1024 * 1024u64;
    let used = [0.90, 0.96, 0.90, 0.94, 0.86, 0.84, 0.90];
    let expect = [false, true, true, true, true, false, false];
    for (i, (&u, &e)) in used.iter().zip(&expect).enumerate() {
        let free = ((1.0 - u) * total_kb as f64).round() as u64;
        m.update(&Sb::new(&topo, (i as u64 + 1) * SEC).mem_free(0, free).build());
        let r = &m.nodes[0].mem_capacity;
        assert!(r.known);
        assert!((r.load - u).abs() < 1e-6, "{r:?}");
        assert_eq!(r.bottleneck, e, "step {i}: used {u}");
        assert_eq!(m.nodes[0].mem_free_bytes, free * 1024);
        assert_eq!(m.nodes[0].mem_total_bytes, total_kb * 1024);
    }
}

/// Memory bandwidth from the uncore figure: 8.5 GB in 1 s of a 10 GB/s controller = 0.85 load
/// (enter); 0.75 stays on; saturated 10% of the time keeps it on even at 0.5 load (interference
/// 0.10 is not below the low mark 0.05); 0.5 load and 1% saturation leaves.
#[test]
fn memory_bandwidth_from_uncore() {
    use numapilot_observe::MemBandwidth;
    let topo = machine(1, 2, 16);
    let mut m = model(topo.clone());
    let steps = [(8_500, 0, true), (7_500, 0, true), (5_000, 100, true), (5_000, 10, false)];
    for (i, &(mb, sat_ms, e)) in steps.iter().enumerate() {
        let mut s = Sb::new(&topo, (i as u64 + 1) * SEC).build();
        s.nodes[0].mem_bw = Some(MemBandwidth {
            bytes: mb * 1_000_000,
            window_ns: SEC,
            saturated_ns: sat_ms * 1_000_000,
            capacity_bytes_per_s: 10_000_000_000,
            migrate_bytes: 0,
        });
        m.update(&s);
        let r = &m.nodes[0].mem_bw;
        assert!(r.known);
        assert!((r.load - mb as f64 / 10_000.0).abs() < 1e-12);
        assert_eq!(r.bottleneck, e, "step {i}");
    }
}

/// Migration copies are not the workload's demand (rule "copies-are-not-demand"): a 10 GB/s
/// controller that carried 40 GB in 1 s, 36 GB of them page-migration copies, and was saturated
/// 80% of the time has load (40 - 36) / 10 = 0.4 and interference 0.8 x 4 / 40 = 0.08: below
/// both high marks (0.85, 0.20), no bottleneck. Counting the copies (load 4.0) flagged it.
#[test]
fn migration_copies_are_not_bandwidth_demand() {
    use numapilot_observe::MemBandwidth;
    let topo = machine(1, 2, 16);
    let bw = |migrate_bytes: u64| MemBandwidth {
        bytes: 40_000_000_000,
        window_ns: SEC,
        saturated_ns: 800_000_000,
        capacity_bytes_per_s: 10_000_000_000,
        migrate_bytes,
    };
    let mut m = model(topo.clone());
    let mut s = Sb::new(&topo, SEC).build();
    s.nodes[0].mem_bw = Some(bw(36_000_000_000));
    m.update(&s);
    let r = &m.nodes[0].mem_bw;
    assert!((r.load - 0.4).abs() < 1e-12, "{r:?}");
    assert!((r.interference - 0.08).abs() < 1e-12, "{r:?}");
    assert!(!r.bottleneck, "{r:?}");
    // The same traffic, none of it copies: a bottleneck.
    let mut m = model(topo.clone());
    let mut s = Sb::new(&topo, SEC).build();
    s.nodes[0].mem_bw = Some(bw(0));
    m.update(&s);
    assert!((m.nodes[0].mem_bw.load - 4.0).abs() < 1e-12);
    assert!(m.nodes[0].mem_bw.bottleneck);
}

/// A CPU-less node has no CPU resource; CPU sequence oscillating between the marks (0.75, 0.90)
/// never enters.
#[test]
fn cpuless_node_and_cpu_oscillation_below_high() {
    let mut topo = machine(2, 2, 16);
    topo.nodes[1].cpus = Default::default();
    for c in topo.cpus.iter_mut().filter(|c| c.node == 1) {
        c.node = 0;
    }
    topo.nodes[0].cpus = (0..4).collect();
    let mut m = model(topo.clone());
    // Cumulative busy per CPU goes up by 80, 89, 76, 88 of 100 ticks per period.
    let busy = [0u64, 80, 169, 245, 333];
    for (i, &b) in busy.iter().enumerate() {
        let i = i as u64;
        m.update(&Sb::new(&topo, (i + 1) * SEC).cpu_ticks(&[(b, i * 100 - b); 4]).build());
        assert!(!m.nodes[1].cpu.known);
        assert!(!m.nodes[0].cpu.bottleneck, "step {i}: {:?}", m.nodes[0].cpu);
    }
    assert!((m.nodes[0].cpu.load - 0.88).abs() < 1e-12);
}

/// IO is known only on nodes with PCI devices, from PSI io `some` avg10: 25% enters (>= 0.20),
/// 10% stays (between the marks), 4% leaves (< 0.05). Memory pressure (PSI memory some 30%) is
/// system-wide: it marks only nodes that are themselves at or above mem_capacity_low (0.85 use).
/// Node 0 is 90% used (1.6 GiB free of 16): use 0.9 -> interference 0.3 -> bottleneck; node 1 is
/// empty: interference 0, no bottleneck.
#[test]
fn io_on_device_nodes_and_memory_pressure() {
    use numapilot_observe::parse::psi::parse_psi;
    use numapilot_topology::{DeviceClass, PciDevice};
    let mut topo = machine(2, 2, 16);
    topo.devices.push(PciDevice {
        address: "0000:3b:00.0".into(),
        class: DeviceClass::Nvme,
        class_code: 0x010802,
        node: Some(1),
        names: vec!["nvme0".into()],
    });
    let mut m = model(topo.clone());
    for (i, (io, e)) in [(25.0, true), (10.0, true), (4.0, false)].into_iter().enumerate() {
        let mut s = Sb::new(&topo, (i as u64 + 1) * SEC).mem_free(0, (16 << 20) / 10).build();
        let line = |v: f64| {
            format!(
                "some avg10={v:.2} avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
            )
        };
        s.psi.io = Some(parse_psi(&line(io)).unwrap());
        s.psi.memory = Some(parse_psi(&line(30.0)).unwrap());
        m.update(&s);
        assert!(!m.nodes[0].io.known);
        assert!(m.nodes[1].io.known);
        assert!((m.nodes[1].io.load - io / 100.0).abs() < 1e-9);
        assert_eq!(m.nodes[1].io.bottleneck, e, "step {i}");
        assert!(m.nodes[0].mem_capacity.bottleneck && !m.nodes[1].mem_capacity.bottleneck);
        assert!((m.nodes[0].mem_capacity.interference - 0.3).abs() < 1e-9);
        assert_eq!(m.nodes[1].mem_capacity.interference, 0.0);
    }
}

fn psi(v: f64) -> numapilot_observe::Psi {
    numapilot_observe::parse::psi::parse_psi(&format!(
        "some avg10={v:.2} avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    ))
    .unwrap()
}

/// Guards against an idle node inheriting system-wide PSI while other nodes measure run delay.
/// Node 0 (CPUs 0, 1): 4 threads, each waiting 0.5 s per s -> 2.0 s / 2 CPUs = 1.0 interference
/// (bottleneck). Node 1: no task; PSI cpu some 60% (caused by node 0) must not reach it: 0.0.
#[test]
fn idle_node_gets_no_psi_when_run_delay_is_known_elsewhere() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    for i in 1..=2u64 {
        let mut b = Sb::new(&topo, i * SEC).cpu_ticks(&[(i * 100, 0), (i * 100, 0), (0, i * 100), (0, i * 100)]).proc(
            10,
            5,
            "a",
            &[GIB, 0],
        );
        for t in 0..4 {
            b = b.thread(10, 10 + t, i * SEC / 2, i * SEC / 2, t % 2);
        }
        let mut s = b.build();
        s.psi.cpu = Some(psi(60.0));
        m.update(&s);
    }
    assert!((m.nodes[0].cpu.interference - 1.0).abs() < 1e-12, "{:?}", m.nodes[0].cpu);
    assert!(m.nodes[0].cpu.bottleneck);
    assert_eq!(m.nodes[1].cpu.interference, 0.0, "{:?}", m.nodes[1].cpu);
    assert!(!m.nodes[1].cpu.bottleneck);
}

/// Without any schedstat, PSI is the fallback on every node with CPUs: 0.3 -> interference 0.3,
/// above cpu_interference_high (0.25): both nodes enter; at 0.2 (between the marks 0.10 and 0.25)
/// both stay; at 0.05 both leave.
#[test]
fn psi_cpu_is_the_fallback_only_without_run_delay() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let mut states = Vec::new();
    for (i, v) in [(1u64, 30.0), (2, 30.0), (3, 20.0), (4, 5.0)] {
        let mut s = Sb::new(&topo, i * SEC).proc(10, 5, "a", &[GIB, 0]).thread(10, 10, 0, 0, 0).build();
        for p in &mut s.processes {
            for t in &mut p.threads {
                t.schedstat = None;
            }
        }
        s.psi.cpu = Some(psi(v));
        m.update(&s);
        states.push((m.nodes[0].cpu.bottleneck, m.nodes[1].cpu.bottleneck));
    }
    assert!((m.nodes[1].cpu.interference - 0.05).abs() < 1e-12);
    // The first sample has no CPU figures (no deltas).
    assert_eq!(states, vec![(false, false), (true, true), (true, true), (false, false)]);
}

/// Guards that reclaimable page cache counts as free: node 0 (16 GiB) has MemFree 0.5 GiB but
/// Inactive(file) 6 GiB and SReclaimable 0.5 GiB: free = 7 GiB, use = 1 - 7/16 = 0.5625 (not
/// 0.969, which would make every box that has read files a capacity bottleneck).
#[test]
fn reclaimable_page_cache_counts_as_free() {
    use numapilot_observe::parse::meminfo::MeminfoEntry;
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let mut s = Sb::new(&topo, SEC).mem_free(0, 512 << 10).build();
    let n0 = s.nodes.iter_mut().find(|n| n.node == 0).unwrap();
    n0.meminfo.entries.push(MeminfoEntry { key: "Inactive(file)".into(), value: 6 << 20, kb: true });
    n0.meminfo.entries.push(MeminfoEntry { key: "SReclaimable".into(), value: 512 << 10, kb: true });
    m.update(&s);
    let n = &m.nodes[0];
    assert_eq!(n.mem_free_bytes, 7 * GIB);
    assert!((n.mem_capacity.load - 0.5625).abs() < 1e-12, "{n:?}");
    assert!(!n.mem_capacity.bottleneck);
}

/// CPU interference from run delay through the hysteresis: one thread on node 0 (2 CPUs) waits
/// 0.6 s, then 0.3 s, then 0.1 s per 1 s period: interference 0.3 (>= 0.25: enter), 0.15 (between
/// the marks 0.10 and 0.25: stays on), 0.05 (< 0.10, and load < 0.75: leaves).
#[test]
fn cpu_interference_from_run_delay_has_hysteresis() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let mut wait = 0u64;
    let mut got = Vec::new();
    for (i, w) in [(1u64, 0u64), (2, 600), (3, 300), (4, 100)] {
        wait += w * 1_000_000;
        m.update(&Sb::new(&topo, i * SEC).proc(10, 5, "a", &[GIB, 0]).thread(10, 10, 0, wait, 0).build());
        got.push((m.nodes[0].cpu.interference, m.nodes[0].cpu.bottleneck));
    }
    let want = [(0.0, false), (0.3, true), (0.15, true), (0.05, false)];
    for (g, w) in got.iter().zip(want) {
        assert!((g.0 - w.0).abs() < 1e-12 && g.1 == w.1, "{got:?}");
    }
}

/// observer-not-load: with `cpu_base` (/proc/stat when the observer's previous step ended) the CPU
/// load is measured from there, leaving the observer's own step out; a window under
/// CPU_BASE_MIN_TICKS_PER_CPU (5) ticks per CPU falls back to the whole period.
///
/// ```text
///   node 0 (CPUs 0, 1), ticks (busy, idle) per CPU:
///     sample 0                 (0, 0)
///     step end (cpu_base)      (8, 2)      the observer's step: 16 of 20 ticks busy
///     sample 1                 (12, 18)    since the step: 8 busy of 40 -> 0.2 (not 0.4, not a bottleneck)
///   with a base only 2 ticks per CPU before sample 2: the whole period, sample 1 -> 2
/// ```
#[test]
fn the_observers_own_step_is_not_node_load() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    m.update(&Sb::new(&topo, SEC).cpu_ticks(&[(0, 0); 4]).build());
    let base = Sb::new(&topo, SEC).cpu_ticks(&[(8, 2), (8, 2), (0, 10), (0, 10)]).build().cpu;
    let mut s1 = Sb::new(&topo, 2 * SEC).cpu_ticks(&[(12, 18), (12, 18), (0, 30), (0, 30)]).build();
    s1.cpu_base = base;
    m.update(&s1);
    assert!((m.nodes[0].cpu.load - 0.2).abs() < 1e-12, "{:?}", m.nodes[0].cpu);
    assert!(!m.nodes[0].cpu.bottleneck);
    // The same sample without the base: 24 busy of 60 = 0.4 over the whole period.
    let mut m2 = model(topo.clone());
    m2.update(&Sb::new(&topo, SEC).cpu_ticks(&[(0, 0); 4]).build());
    m2.update(&Sb::new(&topo, 2 * SEC).cpu_ticks(&[(12, 18), (12, 18), (0, 30), (0, 30)]).build());
    assert!((m2.nodes[0].cpu.load - 0.4).abs() < 1e-12, "{:?}", m2.nodes[0].cpu);
    // A base 2 ticks per CPU before the sample (under 5): measured from sample 1 instead.
    let base = Sb::new(&topo, 3 * SEC).cpu_ticks(&[(30, 28), (30, 28), (0, 58), (0, 58)]).build().cpu;
    let mut s2 = Sb::new(&topo, 3 * SEC).cpu_ticks(&[(32, 28), (32, 28), (0, 60), (0, 60)]).build();
    s2.cpu_base = base;
    m.update(&s2);
    // Sample 1 -> 2: busy 12 -> 32, total 30 -> 60 per CPU: 40 of 60 = 0.667 (the base would say 1.0).
    assert!((m.nodes[0].cpu.load - 40.0 / 60.0).abs() < 1e-12, "{:?}", m.nodes[0].cpu);
}

/// A reserved CPU (`Topology::reserve`: isolated by the kernel, or the operator's) is outside the
/// node the model sees: 2 nodes of 2 CPUs, CPU 3 reserved. A thread pinned there running flat out
/// (an RT task on an isolated CPU) is no node's CPU demand, and node 1's load is CPU 2's ticks
/// alone: idle beside a busy CPU 3, so its one CPU is free room. Without the reservation the same
/// samples read node 1 at 0.5 load with 1 CPU of demand. A process whose threads have the
/// default mask of such a machine (every CPU but the reserved one) did not pin itself.
#[test]
fn a_reserved_cpu_is_no_nodes_load() {
    // Cumulative (busy, idle) ticks per CPU at 1 s and 2 s: CPU 3 busy for the whole second. The
    // sample's node lists are sysfs's, which name CPU 3.
    let sysfs = machine(2, 2, 16);
    let sample = |t: u64, ticks: &[(u64, u64)]| {
        Sb::new(&sysfs, t)
            .cpu_ticks(ticks)
            .proc(10, 5, "rt", &[0, GIB])
            .thread(10, 10, (t / SEC - 1) * SEC, 0, 3)
            .allowed(10, 10, &[3])
            .proc(20, 5, "app", &[GIB, 0])
            .thread(20, 20, (t / SEC - 1) * SEC / 2, 0, 0)
            .allowed(20, 20, &[0, 1, 2])
            .build()
    };
    let mut reserved = machine(2, 2, 16);
    reserved.reserve(&[3].into_iter().collect());
    for (topo, want_load, want_demand) in [(reserved, 0.0, 0.0), (machine(2, 2, 16), 0.5, 1.0)] {
        let mut m = model(topo);
        m.update(&sample(SEC, &[(0, 100); 4]));
        m.update(&sample(2 * SEC, &[(50, 150), (50, 150), (0, 200), (100, 100)]));
        let n1 = &m.nodes[1];
        assert!((n1.cpu.load - want_load).abs() < 1e-9, "{n1:?}");
        assert!((n1.cpu_demand - want_demand).abs() < 1e-9, "{n1:?}");
        assert_eq!(m.tasks[&key(10, 10)].node, (want_demand > 0.0).then_some(1));
        assert_eq!(m.procs[&20].pinned, want_demand > 0.0, "the mask 0-2 is a pin only when CPU 3 is placeable");
    }
}

/// Processes the host leaves unmanaged (excluded, or outside `[include]`) have no task in the
/// model but take CPU: 0.8 CPUs on CPU 2 count in node 1's demand (the planner leaves room for
/// them), 0.5 on CPU 1 in node 0's, and 1.0 on a reserved CPU 3 in no node's.
#[test]
fn unmanaged_processes_cpu_is_their_nodes_demand() {
    let mut topo = machine(2, 2, 16);
    topo.reserve(&[3].into_iter().collect());
    let mut m = model(topo.clone());
    let mut s = Sb::new(&topo, SEC).proc(10, 5, "a", &[GIB, 0]).thread(10, 10, 0, 0, 0).build();
    s.unmanaged_cpu = vec![
        numapilot_observe::CpuUse { cpu: 1, cpus: 0.5 },
        numapilot_observe::CpuUse { cpu: 2, cpus: 0.8 },
        numapilot_observe::CpuUse { cpu: 3, cpus: 1.0 },
    ];
    m.update(&s);
    assert!((m.nodes[0].cpu_demand - 0.5).abs() < 1e-12, "{:?}", m.nodes[0]);
    assert!((m.nodes[1].cpu_demand - 0.8).abs() < 1e-12, "{:?}", m.nodes[1]);
}
