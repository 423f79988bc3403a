//! Scenario tests of the simulated machine: allocation policies, scheduler, conservation across
//! migrations, determinism, and the bind-ratio calibration against the published runs.

use numapilot_sim::engine::{Baseline, Machine, Sim, SimOptions};
use numapilot_sim::kernel::{TaskState, NO_NODE};
use numapilot_sim::run::{run_one, BIND_TOLERANCE, CALIBRATION_SCALE, PUBLISHED_24G};
use numapilot_sim::workload::{
    autonuma_bench, Access, FirstTouch, MemPolicySpec, Pattern, ProcessSpec, RegionSpec, Slice, Spec, ThreadGroup, Work,
};
use numapilot_topology::{CpuSet, NodeSet};

const GIB: u64 = 1 << 30;

fn machine() -> Machine {
    Machine::preset("autonuma-2s12c-24g").unwrap()
}

/// One process, `threads` streaming threads over `bytes`, fixed work per thread.
fn one_process(threads: u32, bytes: u64, touch: FirstTouch, slice: Slice, cpus: Option<&str>) -> Spec {
    Spec {
        name: "t".into(),
        description: String::new(),
        duration_s: None,
        pacing: vec![],
        throughput_from: None,
        throughput_unit: None,
        processes: vec![ProcessSpec {
            cpuset: None,
            name: "p".into(),
            count: 1,
            start_s: 0.0,
            cpus: cpus.map(|c| CpuSet::parse_list(c).unwrap()),
            policy: MemPolicySpec::Local,
            regions: vec![RegionSpec { name: "mem".into(), bytes, touch, policy: None, grow: None }],
            threads: vec![ThreadGroup {
                name: "w".into(),
                count: threads,
                cpus: None,
                work: Work { total: Some(2e9), unit: "bytes".into(), bytes_per_unit: 1.0, compute_ns: 0.0, duty: 1.0 },
                accesses: vec![Access {
                    region: "mem".into(),
                    weight: 1.0,
                    slice,
                    pattern: Pattern::Stream,
                    write: true,
                }],
            }],
            phases: vec![],
            launch_advice: false,
        }],
    }
}

fn regions_per_node(sim: &Sim) -> Vec<u64> {
    sim.kernel.proc_node[0].clone()
}

#[test]
fn first_touch_by_threads_lands_on_their_node() {
    // Threads confined to node 1's CPUs touch their own slices: all memory on node 1.
    let spec = one_process(4, GIB, FirstTouch::Threads, Slice::PerThread, Some("6-11"));
    let mut sim = Sim::new(&machine(), &spec, Baseline::Default, 1, &SimOptions::default()).unwrap();
    sim.step();
    assert_eq!(regions_per_node(&sim), vec![0, 512]);
    sim.check_invariants().unwrap();
}

#[test]
fn first_touch_falls_back_to_the_other_node_when_full() {
    let spec = one_process(2, GIB, FirstTouch::Main, Slice::Whole, Some("0-5"));
    let mut sim = Sim::new(&machine(), &spec, Baseline::Default, 1, &SimOptions::default()).unwrap();
    sim.kernel.node_capacity[0] = 100; // node 0 holds only 100 regions (200 MiB)
    sim.step();
    assert_eq!(regions_per_node(&sim), vec![100, 412]);
    assert_eq!(sim.kernel.alloc_failures, 0);
    sim.check_invariants().unwrap();
}

/// A workload whose regions take more than the machine's memory is refused before it runs,
/// naming both sizes (it ran without that memory placed, and nothing said so; review helper-53).
#[test]
fn more_memory_than_the_machine_has_is_refused() {
    let m = machine();
    let total: u64 = m.topo.nodes.iter().map(|n| n.mem_total_kb * 1024).sum();
    let spec = one_process(2, total + GIB, FirstTouch::Main, Slice::Whole, None);
    let Err(e) = Sim::new(&m, &spec, Baseline::Default, 1, &SimOptions::default()) else { panic!("not refused") };
    let e = e.to_string();
    assert!(e.contains("process p: its regions take") && e.contains("more than the machine's"), "{e}");
    let spec = one_process(2, total, FirstTouch::Main, Slice::Whole, None);
    assert!(Sim::new(&m, &spec, Baseline::Default, 1, &SimOptions::default()).is_ok(), "all of it fits");
}

#[test]
fn interleave_splits_memory_evenly() {
    let spec = one_process(2, GIB, FirstTouch::Main, Slice::Whole, None);
    let mut sim = Sim::new(&machine(), &spec, Baseline::Interleave, 1, &SimOptions::default()).unwrap();
    sim.step();
    assert_eq!(regions_per_node(&sim), vec![256, 256]);
}

#[test]
fn bind_keeps_memory_and_threads_on_their_half() {
    // numa02 under hard bind: thread i's slice and CPU on the same node; inverse: other node.
    let m = machine();
    let spec = autonuma_bench::spec("numa02", &m.topo, 0.01).unwrap();
    for (policy, same) in [(Baseline::HardBind, true), (Baseline::InverseBind, false)] {
        let mut sim = Sim::new(&m, &spec, policy, 1, &SimOptions::default()).unwrap();
        for _ in 0..20 {
            sim.step();
        }
        assert_eq!(regions_per_node(&sim), vec![256, 256]);
        let k = &sim.kernel;
        for (i, t) in k.tasks.iter().enumerate() {
            let cpu_node = k.node_of_cpu(t.cpu);
            // Thread i of 24 owns regions [i*512/24, (i+1)*512/24).
            let g = i * 512 / 24;
            let mem_node = k.regions[g].node;
            assert_eq!(cpu_node == mem_node, same, "{policy:?} task {i}: cpu node {cpu_node}, memory {mem_node}");
            assert_eq!(cpu_node, if i < 12 { 0 } else { 1 });
        }
        sim.check_invariants().unwrap();
    }
}

#[test]
fn oversubscribed_threads_share_cpus_and_honour_affinity() {
    // 8 compute-only threads pinned to CPUs 0-3: each gets half a CPU.
    let mut spec = one_process(8, 64 << 20, FirstTouch::Main, Slice::Whole, Some("0-3"));
    spec.processes[0].threads[0].work =
        Work { total: None, unit: "ops".into(), bytes_per_unit: 0.0, compute_ns: 100.0, duty: 1.0 };
    spec.processes[0].threads[0].accesses.clear();
    spec.duration_s = Some(1.0);
    let mut sim =
        Sim::new(&machine(), &spec, Baseline::Default, 1, &SimOptions { noise: 0.0, ..Default::default() }).unwrap();
    while sim.step() {}
    for t in &sim.kernel.tasks {
        assert!(t.cpu < 4, "task {} on CPU {}", t.tid, t.cpu);
        let share = t.utime_ns as f64 / sim.now_ns() as f64;
        assert!((share - 0.5).abs() < 0.01, "task {} got {share} of a CPU", t.tid);
    }
    // The same 8 threads unpinned spread over 8 cores and each runs the whole time.
    spec.processes[0].cpus = None;
    let mut sim = Sim::new(&machine(), &spec, Baseline::Default, 1, &SimOptions::default()).unwrap();
    while sim.step() {}
    let cores: std::collections::BTreeSet<(u32, u32)> = sim
        .kernel
        .tasks
        .iter()
        .map(|t| {
            let c = sim.kernel.topo.cpu(t.cpu).unwrap();
            (c.package, c.core)
        })
        .collect();
    assert_eq!(cores.len(), 8, "one thread per core");
    assert!(sim.kernel.tasks.iter().all(|t| t.utime_ns as f64 > 0.99 * sim.now_ns() as f64));
}

#[test]
fn remote_memory_is_slower_than_local() {
    // One thread on node 0; memory on node 0 vs forced onto node 1.
    let run = |touch: FirstTouch| {
        let spec = one_process(1, GIB, touch, Slice::Whole, Some("0"));
        let mut sim = Sim::new(&machine(), &spec, Baseline::Default, 1, &SimOptions::default()).unwrap();
        while sim.step() {}
        sim.now_ns() as f64
    };
    let local = run(FirstTouch::Node { node: 0 });
    let remote = run(FirstTouch::Node { node: 1 });
    let ratio = remote / local;
    assert!(ratio > 1.3 && ratio < 1.7, "remote/local runtime {ratio}");
}

#[test]
fn nothing_is_lost_across_autonuma_migrations() {
    let m = machine();
    let spec = autonuma_bench::spec("numa01", &m.topo, 0.02).unwrap();
    let mut sim = Sim::new(&m, &spec, Baseline::AutoNuma, 3, &SimOptions::default()).unwrap();
    let mut epochs = 0;
    while sim.step() {
        epochs += 1;
        if epochs % 25 == 0 {
            sim.check_invariants().unwrap();
            let allocated = sim.kernel.regions.iter().filter(|r| r.node != NO_NODE).count() as u64;
            assert_eq!(sim.kernel.node_used.iter().sum::<u64>(), allocated);
            assert_eq!(allocated, 2 * 1536, "both 3 GiB buffers stay whole");
            assert_eq!(sim.kernel.tasks.len(), 24);
        }
    }
    sim.check_invariants().unwrap();
    assert!(sim.kernel.pages_migrated > 0, "AutoNUMA moved memory");
    assert_eq!(sim.kernel.pages_migrated % 512, 0);
    assert!(sim.kernel.tasks.iter().all(|t| t.state == TaskState::Exited));
    // Work is conserved: every thread did exactly its budget.
    let budget = spec.processes[0].threads[0].work.total.unwrap();
    assert!(sim.work_done().iter().all(|&d| (d - budget).abs() < 1e-3 * budget));
}

#[test]
fn same_seed_same_result_other_seed_other_result() {
    let m = machine();
    let spec = autonuma_bench::spec("numa02", &m.topo, 0.05).unwrap();
    let opts = SimOptions::default();
    let a = run_one(&m, &spec, "autonuma", 11, &opts, &mut |_| {}).unwrap();
    let b = run_one(&m, &spec, "autonuma", 11, &opts, &mut |_| {}).unwrap();
    assert_eq!(a, b);
    let c = run_one(&m, &spec, "autonuma", 12, &opts, &mut |_| {}).unwrap();
    assert_ne!(a.runtime_s, c.runtime_s);
}

#[test]
fn unknown_names_list_the_valid_ones() {
    let e = Baseline::parse("numad").unwrap_err().to_string();
    assert!(e.contains("default") && e.contains("inverse-bind") && e.contains("autonuma"), "{e}");
    let e = Machine::preset("vax").unwrap_err().to_string();
    assert!(e.contains("autonuma-2s12c-24g"), "{e}");
    let m = machine();
    let spec = autonuma_bench::spec("numa02", &m.topo, 0.01).unwrap();
    let e = numapilot_sim::simulate(&m, &spec, &["default", "bogus"], &[1], &SimOptions::default(), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("bogus") && e.contains("hard-bind"), "{e}");
}

#[test]
fn a_machine_argument_is_a_preset_name_or_a_machine_file() {
    let preset = Machine::preset_or_file("ring-8n64c").unwrap();
    assert_eq!(preset.topo.nodes.len(), 8);
    // The same machine from its file: the repository's copy of the preset.
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../machines/ring-8n64c.toml");
    let file = Machine::preset_or_file(path).unwrap();
    assert_eq!(file.topo.nodes.len(), 8);
    assert_eq!(file.topo.distances, preset.topo.distances);
    let e = Machine::preset_or_file("/nonexistent/box.toml").unwrap_err().to_string();
    assert!(e.contains("/nonexistent/box.toml"), "{e}");
}

#[test]
fn workload_naming_a_missing_node_is_refused() {
    let mut spec = one_process(1, GIB, FirstTouch::Main, Slice::Whole, None);
    spec.processes[0].regions[0].policy = Some(MemPolicySpec::Bind { nodes: NodeSet::parse_list("5").unwrap() });
    let e = Sim::new(&machine(), &spec, Baseline::Default, 1, &SimOptions::default()).unwrap_err().to_string();
    assert!(e.contains("node 5"), "{e}");
}

/// Simulated runtime ratio `policy`/default of `test` on the calibration box.
fn ratio(test: &str, policy: &str, scale: f64) -> f64 {
    let m = machine();
    let spec = autonuma_bench::spec(test, &m.topo, scale).unwrap();
    let opts = SimOptions::default();
    let d = run_one(&m, &spec, "default", 1, &opts, &mut |_| {}).unwrap().runtime_s;
    let p = run_one(&m, &spec, policy, 1, &opts, &mut |_| {}).unwrap().runtime_s;
    p / d
}

fn published(test: &str, policy: &str) -> f64 {
    let (_, def, hard, inv) = PUBLISHED_24G.iter().find(|r| r.0 == test).unwrap();
    match policy {
        "hard-bind" => hard / def,
        _ => inv.unwrap() / def,
    }
}

fn check(test: &str, policy: &str) {
    let sim = ratio(test, policy, CALIBRATION_SCALE);
    let publ = published(test, policy);
    let dev = (sim - publ).abs() / publ;
    assert!(dev <= BIND_TOLERANCE, "{test} {policy}/default: simulated {sim:.3}, published {publ:.3} ({dev:.3})");
}

#[test]
fn calibration_numa01_hard_bind() {
    check("numa01", "hard-bind");
}

#[test]
fn calibration_numa01_inverse_bind() {
    check("numa01", "inverse-bind");
}

#[test]
fn calibration_numa01_thread_alloc_hard_bind() {
    check("numa01_THREAD_ALLOC", "hard-bind");
}

#[test]
fn calibration_numa02_hard_bind() {
    check("numa02", "hard-bind");
}

#[test]
fn calibration_numa02_inverse_bind() {
    check("numa02", "inverse-bind");
}

#[test]
fn calibration_numa02_smt_hard_bind() {
    check("numa02_SMT", "hard-bind");
}

#[test]
fn bind_ratios_do_not_depend_on_the_work_scale() {
    let a = ratio("numa02", "hard-bind", 0.05);
    let b = ratio("numa02", "hard-bind", 0.2);
    assert!((a - b).abs() / b < 0.03, "scale 0.05: {a}, scale 0.2: {b}");
}

#[test]
fn calibrate_table_has_every_published_ratio() {
    let rows = numapilot_sim::run::calibrate_bind(&SimOptions::default(), &mut |_| {}).unwrap();
    assert_eq!(rows.len(), 6);
    assert!(rows.iter().all(|r| r.within()), "{rows:?}");
    assert!(rows.iter().any(|r| r.test == "numa02_SMT" && r.policy == "hard-bind"));
}

#[test]
fn hard_bind_sizes_node_shares_by_process_size() {
    // On 8 nodes, a 24-thread process and an 8-thread one: 6 nodes and 2 nodes.
    let m = Machine::preset("ring-8n64c").unwrap();
    let mut spec = one_process(24, GIB, FirstTouch::Main, Slice::PerThread, None);
    let mut small = spec.processes[0].clone();
    small.name = "small".into();
    small.threads[0].count = 8;
    small.regions[0].bytes = GIB / 4;
    spec.processes.push(small);
    let mut sim = Sim::new(&m, &spec, Baseline::HardBind, 1, &SimOptions::default()).unwrap();
    sim.step();
    let nodes_of = |p: usize| -> std::collections::BTreeSet<u32> {
        sim.kernel.procs[p]
            .tasks
            .iter()
            .flat_map(|&t| sim.kernel.tasks[t].allowed.iter())
            .map(|c| sim.kernel.node_of_cpu(c))
            .collect()
    };
    assert_eq!(nodes_of(0).len(), 6);
    assert_eq!(nodes_of(1).len(), 2);
    assert!(nodes_of(0).is_disjoint(&nodes_of(1)));
    // Memory bound to the same nodes.
    for p in 0..2 {
        let on: std::collections::BTreeSet<u32> = sim.kernel.proc_node[p]
            .iter()
            .enumerate()
            .filter(|(_, &r)| r > 0)
            .map(|(i, _)| sim.kernel.topo.nodes[i].id)
            .collect();
        assert!(on.is_subset(&nodes_of(p)), "process {p}: memory on {on:?}");
    }
}

#[test]
fn growing_memory_is_allocated_over_time() {
    let mut spec = one_process(1, GIB, FirstTouch::Main, Slice::Whole, Some("0"));
    spec.processes[0].regions[0].grow =
        Some(numapilot_sim::workload::Growth { initial_bytes: 128 << 20, bytes_per_s: (256 << 20) as f64 });
    spec.processes[0].threads[0].work.total = None;
    spec.duration_s = Some(2.0);
    let mut sim = Sim::new(&machine(), &spec, Baseline::Default, 1, &SimOptions::default()).unwrap();
    sim.step();
    assert_eq!(sim.kernel.proc_node[0].iter().sum::<u64>(), 64, "128 MiB at start");
    while sim.step() {}
    // 128 MiB + 2 s x 256 MiB/s = 640 MiB = 320 regions (the last epoch starts at 1.99 s).
    let regions = sim.kernel.proc_node[0].iter().sum::<u64>();
    assert!((318..=320).contains(&regions), "{regions}");
    sim.check_invariants().unwrap();
}

#[test]
fn paced_groups_progress_together_and_series_start_at_placement() {
    // A slow server (compute-heavy) and fast clients in a closed loop: the clients go at the
    // server's pace.
    let mut spec = one_process(1, 64 << 20, FirstTouch::Main, Slice::Whole, None);
    spec.duration_s = Some(1.0);
    let p = &mut spec.processes[0];
    p.name = "srv".into();
    p.threads[0].name = "server".into();
    p.threads[0].work =
        Work { total: None, unit: "requests".into(), bytes_per_unit: 400.0, compute_ns: 10_000.0, duty: 1.0 };
    let mut clients = p.threads[0].clone();
    clients.name = "clients".into();
    clients.count = 4;
    clients.work.compute_ns = 1_000.0;
    p.threads.push(clients);
    spec.pacing = vec![numapilot_sim::workload::Pace { a: "srv/server".into(), b: "srv/clients".into(), ratio: 1.0 }];
    spec.validate().unwrap();
    let mut sim = Sim::new(&machine(), &spec, Baseline::Default, 1, &SimOptions::default()).unwrap();
    while sim.step() {}
    let done = sim.work_done();
    let clients: f64 = done[1..].iter().sum();
    assert!((done[0] - clients).abs() / done[0] < 1e-6, "server {} vs clients {clients}", done[0]);
    // The server alone would do ~1e9 / 10 us = 100k requests in a second; the clients 4x 1M.
    assert!(done[0] > 80_000.0 && done[0] < 101_000.0, "{}", done[0]);
    let r = run_one(&machine(), &spec, "default", 1, &SimOptions::default(), &mut |_| {}).unwrap();
    let s = &r.processes[0].series;
    assert_eq!(s[0].t_s, 0.0);
    assert_eq!(s[0].mem_mib.iter().sum::<f64>(), 64.0);
    assert!(r.throughput.unwrap() > 0.0);
}

/// numa02 at a small scale (1 GiB first-touched on node 0, a thread per CPU on its slice): the
/// threads on node 1 want their slices moved, so migrations show whether balancing is on.
fn numa02_sim(policy: Baseline) -> Sim {
    let m = machine();
    let mut spec = autonuma_bench::spec("numa02", &m.topo, 1.0).unwrap();
    spec.duration_s = Some(60.0);
    Sim::new(&m, &spec, policy, 1, &SimOptions::default()).unwrap()
}

fn run_until(sim: &mut Sim, t_s: f64) {
    while sim.now_ns() < (t_s * 1e9) as u64 && sim.step() {}
}

#[test]
fn numa_balancing_switched_on_mid_run_starts_the_model() {
    let mut sim = numa02_sim(Baseline::Default);
    run_until(&mut sim, 1.0);
    assert_eq!(sim.kernel.pages_migrated, 0);
    assert!(sim.autonuma().is_none());
    sim.set_numa_balancing(1);
    run_until(&mut sim, 4.0);
    assert!(sim.autonuma().is_some_and(|a| a.enabled()));
    assert!(sim.kernel.pages_migrated > 0, "balancing switched on at 1 s migrated nothing by 4 s");
    sim.check_invariants().unwrap();
}

#[test]
fn numa_balancing_switched_off_mid_run_stops_the_model() {
    let mut sim = numa02_sim(Baseline::AutoNuma);
    sim.set_numa_balancing(0);
    run_until(&mut sim, 4.0);
    assert!(sim.autonuma().is_some_and(|a| !a.enabled()));
    assert_eq!(sim.kernel.pages_migrated, 0, "balancing off from the start moved memory");
    assert_eq!(sim.autonuma().unwrap().counters().numa_hint_faults, 0);
    // On again: the model scans after its delay and moves memory; off again: nothing more moves.
    sim.set_numa_balancing(1);
    run_until(&mut sim, 8.0);
    let moved = sim.kernel.pages_migrated;
    assert!(moved > 0 && sim.autonuma().unwrap().enabled());
    sim.set_numa_balancing(0);
    let faults = sim.autonuma().unwrap().counters().numa_hint_faults;
    run_until(&mut sim, 12.0);
    assert!(sim.now_ns() >= 12_000_000_000, "the work ran to the end of the check");
    assert!(sim.kernel.tasks.iter().any(|t| t.state != TaskState::Exited));
    assert_eq!(sim.kernel.pages_migrated, moved);
    assert_eq!(sim.autonuma().unwrap().counters().numa_hint_faults, faults);
}
