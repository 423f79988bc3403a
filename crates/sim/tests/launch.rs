//! The launch stage in the simulator (rule "launch-advice"): processes whose launcher asks
//! (`ProcessSpec::launch_advice`) are offered to the policy before their first epoch, and the
//! advice narrows their threads' CPUs and makes their memory prefer the advised nodes.

use numapilot_sim::engine::{Baseline, Machine, Sim, SimOptions};
use numapilot_sim::run::run_one;
use numapilot_sim::workload::{
    Access, FirstTouch, MemPolicySpec, Pattern, ProcessSpec, RegionSpec, Slice, Spec, ThreadGroup, Work,
};
use numapilot_topology::{CpuSet, NodeSet};

const GIB: u64 = 1 << 30;

fn process(name: &str, cpus: Option<&str>, launch_advice: bool) -> ProcessSpec {
    ProcessSpec {
        cpuset: None,
        name: name.into(),
        count: 1,
        start_s: 0.0,
        cpus: cpus.map(|c| CpuSet::parse_list(c).unwrap()),
        policy: MemPolicySpec::Local,
        regions: vec![RegionSpec { name: "mem".into(), bytes: GIB, touch: FirstTouch::Main, policy: None, grow: None }],
        threads: vec![ThreadGroup {
            name: "w".into(),
            count: 3,
            cpus: None,
            work: Work { total: None, unit: "bytes".into(), bytes_per_unit: 1.0, compute_ns: 0.0, duty: 1.0 },
            accesses: vec![Access {
                region: "mem".into(),
                weight: 1.0,
                slice: Slice::Whole,
                pattern: Pattern::Stream,
                write: false,
            }],
        }],
        phases: vec![],
        launch_advice,
    }
}

fn spec(processes: Vec<ProcessSpec>) -> Spec {
    Spec {
        name: "launch".into(),
        description: String::new(),
        duration_s: Some(1.0),
        pacing: vec![],
        throughput_from: None,
        throughput_unit: None,
        processes,
    }
}

/// ```text
///   autonuma-2s12c-24g: node 0 CPUs 0-5,12-17, node 1 CPUs 6-11,18-23 (2 x 6 cores x 2 threads)
///   a  asks, allowed everywhere     advised node 1 -> threads on node 1's CPUs, 1 GiB on node 1
///   b  asks, allowed CPUs 0-5 only  advised node 1 -> CPUs stay 0-5 (the advice cannot narrow
///                                   them to nothing), its memory prefers node 1 although its
///                                   main thread touches it from node 0
///   c  does not ask                 never offered
/// ```
#[test]
fn advice_narrows_cpus_and_prefers_memory_before_the_first_touch() {
    let machine = Machine::preset("autonuma-2s12c-24g").unwrap();
    let s = spec(vec![process("a", None, true), process("b", Some("0-5"), true), process("c", None, false)]);
    let mut sim = Sim::new(&machine, &s, Baseline::Default, 1, &SimOptions::default()).unwrap();
    let due = sim.launches_due();
    let mut names: Vec<&str> = due.iter().map(|(_, r)| r.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, vec!["a", "b"], "in arrival order (the seed's fork jitter), c not asked");
    for (_, r) in &due {
        assert_eq!(r.cpus, 3.0);
        assert_eq!(r.mem_bytes, GIB);
        assert_eq!(r.nodes_now.len(), 2);
        assert!(r.nodes_now.iter().all(|f| f.free_cpus == 12.0 && f.mem_free_bytes > 11 * GIB), "{:?}", r.nodes_now);
    }
    let node1: NodeSet = [1u32].into_iter().collect();
    for (p, _) in &due {
        sim.apply_launch(*p, Some(&node1));
    }
    assert!(sim.launches_due().is_empty(), "asked once");
    sim.step();
    sim.check_invariants().unwrap();
    let node1_cpus = machine.topo.cpus_of_nodes(&node1);
    let allowed = |p: usize| -> Vec<CpuSet> {
        sim.kernel.procs[p].tasks.iter().map(|&t| sim.kernel.tasks[t].allowed.clone()).collect()
    };
    assert!(allowed(0).iter().all(|a| *a == node1_cpus), "{:?}", allowed(0));
    assert!(allowed(1).iter().all(|a| *a == CpuSet::parse_list("0-5").unwrap()), "{:?}", allowed(1));
    assert_eq!(sim.kernel.proc_node[0], vec![0, 512], "a: its memory where it was advised");
    assert_eq!(sim.kernel.proc_node[1], vec![0, 512], "b: preferred node 1 from node 0's CPUs");
    assert_eq!(sim.kernel.proc_node[2][0], 512, "c: first touch on its main thread's node");
}

/// End to end: every VM of the VM mix is offered to the engine policies (numapilot and numad
/// answer; `launch-advice` counts the answers) and to no kernel baseline; numapilot's VMs start
/// on the nodes it advised, so their accesses are all local, where default's first touch is not.
#[test]
fn the_vm_mix_asks_the_engine_policies_and_starts_local_under_numapilot() {
    // The paper's machine, where first touch spills the huge VMs' memory (default is not local):
    // VMs arrive 0.5 s apart, the two huge, the two large and two medium ones by 2.6 s.
    let machine = Machine::preset("numaconnect-288c").unwrap();
    let mut s = numapilot_sim::workload::builtin("vm-mix", &machine.topo).unwrap();
    s.duration_s = Some(2.6);
    let vms = s.processes.iter().filter(|p| p.start_s < 2.6).count() as u64;
    assert_eq!(vms, 6);
    assert!(s.processes.iter().all(|p| p.launch_advice));
    let opts = SimOptions::default();
    for policy in ["numapilot", "numad"] {
        let r = run_one(&machine, &s, policy, 1, &opts, &mut |_| {}).unwrap();
        let advised = r.engine.as_ref().and_then(|e| e.actions_by_kind.get("launch-advice").copied()).unwrap_or(0);
        assert_eq!(advised, vms, "{policy}: every VM started so far advised");
        if policy == "numapilot" {
            assert!(r.local_access_pct > 99.0, "numapilot: {}% local", r.local_access_pct);
        }
    }
    let r = run_one(&machine, &s, "default", 1, &opts, &mut |_| {}).unwrap();
    assert!(r.engine.is_none());
    assert!(r.local_access_pct < 99.0, "default: {}% local", r.local_access_pct);
}
