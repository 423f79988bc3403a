//! Behaviour of the workloads beyond autonuma-benchmark on the simulated machine: the placements
//! the seeds recommend must win where the seeds say they win.

use numapilot_sim::engine::{Machine, SimOptions};
use numapilot_sim::result::RunResult;
use numapilot_sim::run::run_one;
use numapilot_sim::workload::{client_server, process_types, vm_mix, MemPolicySpec, ProcessSpec, Spec};
use numapilot_topology::NodeSet;

fn run(machine: &Machine, spec: &Spec, policy: &str) -> RunResult {
    run_one(machine, spec, policy, 1, &SimOptions::default(), &mut |_| {}).unwrap()
}

/// Binds a process, CPUs and memory, to one node (`numactl --cpunodebind=N --membind=N`).
fn bind(p: &mut ProcessSpec, machine: &Machine, node: u32) {
    let nodes: NodeSet = [node].into_iter().collect();
    p.cpus = Some(machine.topo.cpus_of_nodes(&nodes));
    p.policy = MemPolicySpec::Bind { nodes };
}

fn throughput(r: &RunResult, process: &str) -> f64 {
    r.processes.iter().find(|p| p.name == process).and_then(|p| p.throughput).unwrap()
}

/// NUMA-ICON (shared/seeds/000): redis-server + redis-benchmark, single pipeline, stock scheduler
/// vs everything on node 0: SET 78.6k vs 103.9k-104.8k, GET 79.7k vs 101.8k-101.9k req/s.
#[test]
fn client_server_on_one_node_beats_spread_as_numa_icon_measured() {
    let machine = Machine::preset("autonuma-2s12c-24g").unwrap();
    for (base, published_co, published_ratio) in [
        (client_server::redis_set(&machine.topo), 104_815.0, 78_600.2 / 104_815.0),
        (client_server::redis_get(&machine.topo), 101_847.0, 79_673.4 / 101_847.0),
    ] {
        let mut together = base.clone();
        bind(&mut together.processes[0], &machine, 0);
        bind(&mut together.processes[1], &machine, 0);
        let mut spread = base.clone();
        bind(&mut spread.processes[0], &machine, 0);
        bind(&mut spread.processes[1], &machine, 1);
        let co = throughput(&run(&machine, &together, "default"), "redis-server");
        let sp = throughput(&run(&machine, &spread, "default"), "redis-server");
        assert!(co > sp, "{}: together {co:.0} req/s, spread {sp:.0}", base.name);
        let ratio = sp / co;
        assert!(
            (ratio / published_ratio - 1.0).abs() < 0.15,
            "{}: spread/together {ratio:.3}, published {published_ratio:.3}",
            base.name
        );
        assert!(
            (co / published_co - 1.0).abs() < 0.15,
            "{}: together {co:.0} req/s, published {published_co:.0}",
            base.name
        );
    }
}

/// The clients go at the server's pace: one client request per server request.
#[test]
fn clients_are_paced_by_the_server() {
    let machine = Machine::preset("autonuma-2s12c-24g").unwrap();
    let r = run(&machine, &client_server::redis_get(&machine.topo), "default");
    let server = throughput(&r, "redis-server");
    let clients = throughput(&r, "redis-benchmark");
    assert!((clients / server - 1.0).abs() < 0.01, "server {server:.0}, clients {clients:.0}");
}

/// The article (shared/seeds/003): a bandwidth-bound process initialised by one thread should be
/// interleaved; a static large-memory process should be bound, CPUs and memory, to one node.
#[test]
fn process_types_reward_the_articles_strategies() {
    let machine = Machine::preset("autonuma-2s12c-24g").unwrap();
    let spec = process_types::bandwidth(&machine.topo);
    let default = throughput(&run(&machine, &spec, "default"), "solver");
    let interleaved = throughput(&run(&machine, &spec, "interleave"), "solver");
    assert!(interleaved > default * 1.05, "bandwidth: interleave {interleaved:.3e} vs default {default:.3e}");

    let spec = process_types::static_large(&machine.topo);
    let default = run(&machine, &spec, "default");
    let mut bound = spec.clone();
    bind(&mut bound.processes[0], &machine, 0);
    let bound = run(&machine, &bound, "default");
    assert!(bound.local_access_pct > 99.0, "bound database: {:.1}% local", bound.local_access_pct);
    assert!(default.local_access_pct < 75.0, "default database: {:.1}% local", default.local_access_pct);
    assert!(throughput(&bound, "db") > throughput(&default, "db"));

    // The growing heap outgrows its node: under the default policy it spills to the other one.
    let spec = process_types::growing(&machine.topo);
    let r = run(&machine, &spec, "default");
    let last = r.processes[0].series.last().unwrap();
    assert!(last.mem_mib.iter().all(|&m| m > 1024.0), "heap per node at the end: {:?} MiB", last.mem_mib);
}

/// The paper's mix runs on the 288-core system: all 20 VMs start, allocate their guest memory and
/// make progress.
#[test]
fn vm_mix_runs_on_the_288_core_preset() {
    let machine = Machine::preset("numaconnect-288c").unwrap();
    let mut spec = vm_mix::vm_mix(&machine.topo);
    // The last VM arrives at 9.5 s; run until every VM has had time to run.
    spec.duration_s = Some(12.0);
    let r = run(&machine, &spec, "default");
    assert_eq!(r.processes.len(), 20);
    for (p, s) in r.processes.iter().zip(&spec.processes) {
        assert!(p.throughput.unwrap() > 0.0, "{} made no progress", p.name);
        let guest_mib: f64 = s.regions.iter().map(|r| r.bytes as f64 / (1 << 20) as f64).sum();
        let resident: f64 = p.series.last().unwrap().mem_mib.iter().sum();
        assert!((resident - guest_mib).abs() < 1.0, "{}: {resident} MiB resident of {guest_mib}", p.name);
    }
}

/// The animal classes (shared/seeds/004): a rabbit whose node's memory controller also serves a big
/// VM's guest memory runs slower when that VM is a devil than when it is a sheep: the devil's
/// streams, from its vCPUs on both nodes, saturate the controller the rabbit's misses need. (With
/// the default machine parameters one node's own cores cannot saturate its controller, about 1.9
/// GB/s per streaming thread against 16 GB/s, so the devil needs vCPUs on both nodes to do harm.)
#[test]
fn a_devil_neighbour_slows_a_rabbit_more_than_a_sheep_does() {
    let machine = Machine::preset("autonuma-2s12c-24g").unwrap();
    let vm = |name: &str, class: vm_mix::Class, vcpus: u32| vm_mix::Vm {
        name: name.into(),
        size: "test",
        class,
        vcpus,
        bytes: 2 << 30,
        start_s: 0.0,
    };
    let node0: NodeSet = [0].into_iter().collect();
    let pair = |neighbour: vm_mix::Class| {
        let mut rabbit = vm_mix::vm_process(&vm("rabbit", vm_mix::Class::Rabbit, 2));
        bind(&mut rabbit, &machine, 0);
        // The neighbour's vCPUs run anywhere, its guest memory is on node 0 (first touched there).
        let mut other = vm_mix::vm_process(&vm("neighbour", neighbour, 22));
        other.policy = MemPolicySpec::Bind { nodes: node0.clone() };
        let spec = Spec {
            name: "pair".into(),
            description: String::new(),
            processes: vec![rabbit, other],
            duration_s: Some(5.0),
            pacing: vec![],
            throughput_from: None,
            throughput_unit: None,
        };
        throughput(&run(&machine, &spec, "default"), "rabbit")
    };
    let beside_sheep = pair(vm_mix::Class::Sheep);
    let beside_devil = pair(vm_mix::Class::Devil);
    assert!(
        beside_devil < beside_sheep * 0.95,
        "rabbit beside a devil {beside_devil:.3e} ops/s, beside a sheep {beside_sheep:.3e}"
    );
}
