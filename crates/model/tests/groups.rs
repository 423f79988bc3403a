//! Affinity groups: join, merge direction, size cap, split, signal-less processes, conservation.
//!
//! Defaults: h = 10 s, period 1 s; a pair observed with f = 1 every period has strength
//! 1 - 2^(-0.1 n) after n periods: 0.0670, 0.1294, 0.1877, 0.2421 (n = 4: medium, joins).

mod common;

use common::*;
use numapilot_model::{Model, Tunables};
use numapilot_observe::Sample;
use numapilot_topology::Topology;

/// Process 10 with threads 11, 12, 13 at step `i` (t = i s): thread k ran `cpu[k]` CPUs per
/// period; the threads in `sharing` sample BUF 10 times each.
fn app(topo: &Topology, i: u64, cpu: [f64; 3], sharing: &[u32], rss: u64) -> Sample {
    let mut b = Sb::new(topo, i * SEC).proc(10, 5, "app", &[rss, 0]);
    for (k, tid) in [11u32, 12, 13].into_iter().enumerate() {
        let run = (cpu[k] * (i * SEC) as f64) as u64;
        b = b.thread(10, tid, run, 0, tid - 11);
    }
    for &tid in sharing {
        b = b.access(10, tid, BUF, 0, 10, i * SEC);
    }
    b.build()
}

fn group_sets(m: &Model) -> Vec<Vec<u32>> {
    m.groups.groups.values().map(|g| g.tasks.iter().map(|k| k.tid).collect()).collect()
}

/// `Model::group_figures` of each group's tasks is the group as the update made it (but for
/// `since_ns`, the model's time there): the policy's tests set groups by hand through it.
fn figures_are_the_updates(m: &Model) {
    for g in m.groups.groups.values() {
        let f = m.group_figures(g.id, &g.tasks);
        assert_eq!(f.since_ns, m.now_ns);
        assert_eq!(f, numapilot_model::Group { since_ns: m.now_ns, ..g.clone() });
    }
}

/// Trace: step 1 (first sample, no period) three singletons 0 {11}, 1 {12}, 2 {13} (the process
/// has per-thread samples, so no process group); step 2 (first observation, f = 1: s = 0.5 >=
/// medium) 11 and 12 join. Equal load (no CPU; 512 MiB each: RSS 1 GiB shared by 10 + 10 samples, 13 has none) ->
/// the smaller id, 0, keeps its id.
#[test]
fn co_accessing_threads_become_one_group() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    m.update(&app(&topo, 1, [0.0; 3], &[11, 12], GIB));
    assert_eq!(group_sets(&m), vec![vec![11], vec![12], vec![13]]);
    m.update(&app(&topo, 2, [0.0; 3], &[11, 12], GIB));
    assert_eq!(group_sets(&m), vec![vec![11, 12], vec![13]]);
    let g = m.group_of(&key(10, 12)).unwrap();
    assert_eq!(g.id, 0);
    assert_eq!(g.since_ns, 2 * SEC);
    assert_eq!(g.mem_bytes, GIB);
    assert_eq!(g.pids, vec![10]);
    assert_eq!(m.group_of(&key(10, 13)).unwrap().mem_bytes, 0);
    // Stable membership keeps since_ns.
    m.update(&app(&topo, 3, [0.0; 3], &[11, 12], GIB));
    assert_eq!(m.group_of(&key(10, 12)).unwrap().since_ns, 2 * SEC);
}

/// Merge direction: thread 12 uses 0.8 CPU, thread 11 0.2 (4 CPUs per node here, 16 GiB):
/// load(12) = 0.8/4 + 0.5 GiB/16 GiB = 0.23125 > load(11) = 0.05 + 0.03125: group 0 {11} joins
/// group 1 {12}, which keeps id 1. Access shares are CPU-weighted; running_on sums CPU per node.
#[test]
fn smaller_load_joins_the_larger() {
    let topo = machine(2, 4, 16);
    let mut m = model(topo.clone());
    for i in 1..=5 {
        m.update(&app(&topo, i, [0.2, 0.8, 0.0], &[11, 12], GIB));
    }
    let g = m.group_of(&key(10, 11)).unwrap();
    assert_eq!(g.id, 1);
    assert_eq!(g.tasks, vec![key(10, 11), key(10, 12)]);
    assert!((g.cpu - 1.0).abs() < 1e-9);
    assert!((g.load - (1.0 / 4.0 + 1.0 / 16.0)).abs() < 1e-9, "{}", g.load);
    // Thread 11 last ran on CPU 0, thread 12 on CPU 1: both node 0.
    assert_eq!(g.running_on.len(), 1);
    assert!((g.running_on[0].1 - 1.0).abs() < 1e-9);
    assert_eq!(g.access, vec![1.0, 0.0]);
    assert!(!m.groups.groups.contains_key(&0));
}

/// Size cap: 2 CPUs per node, group_max_cpu_frac 1.0 -> at most 2.0 CPUs. Three threads of 0.9
/// CPU all co-access one bucket (every pair f = 1, equal strengths, taken in key order):
/// (11,12) merge -> 1.8 CPUs; (11,13) would be 2.7 -> refused; (12,13) is the same pair of
/// groups: one refused merge.
#[test]
fn size_cap_refuses_a_merge() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    for i in 1..=5 {
        m.update(&app(&topo, i, [0.9; 3], &[11, 12, 13], GIB));
    }
    assert_eq!(group_sets(&m), vec![vec![11, 12], vec![13]]);
    assert_eq!(m.groups.refused_merges, 1);
    for g in m.groups.groups.values() {
        assert!(g.cpu <= 2.0 + 1e-9);
    }
    // With the task cap at 2 instead (CPU cap lifted), the same thing happens for the count.
    let t = Tunables { group_max_cpu_frac: 10.0, group_max_tasks: 2, ..Tunables::default() };
    let mut m = Model::new(topo.clone(), t);
    for i in 1..=5 {
        m.update(&app(&topo, i, [0.9; 3], &[11, 12, 13], GIB));
    }
    assert_eq!(group_sets(&m), vec![vec![11, 12], vec![13]]);
    assert_eq!(m.groups.refused_merges, 1);
}

/// Split: two single-thread processes talk 1000 times/s (f = 1) for 6 periods: strength 0.927574,
/// one group. Then silence: s = 0.927574 x 2^(-t/10) falls below tier_medium (0.2) at t = 23 s,
/// which no longer splits (hysteresis); it falls below group_keep_strength (0.05) first at
/// t = 43 s (0.047089; at 42 s 0.050469), i.e. at step 49, and the group splits
/// edge_grace_ms = 30 s later, at step 79. The tie in size goes to the smallest member (10,10),
/// which keeps the id.
#[test]
fn group_splits_when_internal_edges_decay() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = |i: u64, talk: bool| {
        let b = Sb::new(&topo, i * SEC)
            .proc(10, 5, "server", &[GIB, 0])
            .thread(10, 10, 0, 0, 0)
            .proc(20, 5, "client", &[0, GIB])
            .thread(20, 20, 0, 0, 2);
        if talk {
            b.comm((10, 10), (20, 20), 1000).build()
        } else {
            b.build()
        }
    };
    for i in 0..=6 {
        m.update(&s(i, true));
    }
    assert_eq!(m.groups.groups.len(), 1);
    let id = m.group_of(&key(10, 10)).unwrap().id;
    let g = m.group_of(&key(20, 20)).unwrap();
    assert_eq!(g.mem_by_node, vec![GIB, GIB]);
    assert_eq!(g.access, vec![0.5, 0.5], "each thread's residency, equal weight without CPU");
    for i in 7..=78 {
        m.update(&s(i, false));
        assert_eq!(m.groups.groups.len(), 1, "step {i}");
    }
    let e = &m.graph.edges[&(key(10, 10), key(20, 20))];
    assert!(e.strength < 0.05 && e.tier.is_none(), "{e:?}");
    m.update(&s(79, false));
    assert_eq!(m.groups.groups.len(), 2);
    assert_eq!(m.group_of(&key(10, 10)).unwrap().id, id);
    assert_ne!(m.group_of(&key(20, 20)).unwrap().id, id);
    assert_eq!(m.group_of(&key(20, 20)).unwrap().since_ns, 79 * SEC);
}

/// Guards the join/split hysteresis: 300 events/s (f = 0.3) every 4th period, silence between,
/// settles the edge into the cycle 0.2415, 0.2253, 0.2103, 0.1962 (hand-iterated s = s d, plus
/// half the gap on the talking period): across tier_medium (0.2) every cycle, never near the keep
/// mark (0.05). Without hysteresis the pair joined and split every cycle (a new id each time);
/// with it the pair joins once and stays one group with one id.
#[test]
fn a_pair_hovering_at_the_join_tier_does_not_flicker() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let mut ids = std::collections::BTreeSet::new();
    let (mut lo, mut hi) = (1.0f64, 0.0f64);
    for i in 1..=200u64 {
        let mut b = Sb::new(&topo, i * SEC)
            .proc(10, 5, "a", &[GIB, 0])
            .thread(10, 10, 0, 0, 0)
            .proc(20, 5, "b", &[GIB, 0])
            .thread(20, 20, 0, 0, 0);
        if i % 4 == 0 {
            b = b.comm((10, 10), (20, 20), 300);
        }
        let s = b.build();
        m.update(&s);
        if i > 100 {
            assert_eq!(m.groups.groups.len(), 1, "period {i}");
            ids.insert(m.group_of(&key(20, 20)).unwrap().id);
            let s = m.graph.edges[&(key(10, 10), key(20, 20))].strength;
            lo = lo.min(s);
            hi = hi.max(s);
        }
    }
    assert_eq!(ids.len(), 1);
    assert!((lo - 0.1962).abs() < 1e-4 && (hi - 0.2415).abs() < 1e-4, "{lo} {hi}");
}

/// A process whose threads have nothing but residency (no samples, no faults, no edges) is one
/// group; a thread that appears later joins it; a vanished thread leaves it.
#[test]
fn signal_less_process_is_one_group() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = |t, tids: &[u32]| {
        let mut b = Sb::new(&topo, t).proc(30, 5, "legacy", &[GIB, GIB]);
        for &tid in tids {
            b = b.thread(30, tid, 0, 0, 0);
        }
        b.build()
    };
    m.update(&s(SEC, &[30, 31, 32]));
    assert_eq!(group_sets(&m), vec![vec![30, 31, 32]]);
    m.update(&s(2 * SEC, &[30, 31, 32, 33]));
    assert_eq!(group_sets(&m), vec![vec![30, 31, 32, 33]]);
    m.update(&s(3 * SEC, &[30, 33]));
    assert_eq!(group_sets(&m), vec![vec![30, 33]]);
    assert_eq!(m.groups.of_task.len(), 2);
    let g = m.group_of(&key(30, 30)).unwrap();
    assert_eq!(g.mem_bytes, 2 * GIB);
    assert_eq!(g.mem_by_node, vec![GIB, GIB]);
}

/// Conservation over a mixed machine: every live task in exactly one group, counts add up,
/// group memory adds up to the processes' RSS (per node too), across merges, splits and exits.
#[test]
fn conservation() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    for i in 1..=30u64 {
        let mut b = Sb::new(&topo, i * SEC);
        for p in 0..6u32 {
            let pid = 100 + p * 10;
            if p == 5 && i > 20 {
                continue; // exits
            }
            b = b.proc(pid, 5, "w", &[(p as u64 + 1) * 100 * MIB + 7, (i % 3) * MIB + 3]);
            for t in 0..(p + 1).min(4) {
                if p == 3 && t == 2 && i % 7 == 0 {
                    continue; // a thread that comes and goes
                }
                b = b.thread(pid, pid + t, i * SEC / (t as u64 + 2), 0, (p + t) % 4);
            }
            if p % 2 == 0 && i < 15 {
                b = b.access(pid, pid, BUF, 0, 5, i * SEC).access(pid, pid + 1, BUF, 1, 3 + p, i * SEC);
            }
        }
        if i < 12 {
            b = b.comm((110, 110), (130, 130), 2000);
        }
        let s = b.build();
        m.update(&s);
        let mut seen = std::collections::BTreeSet::new();
        let mut count = 0;
        let (mut mem, mut node0, mut node1) = (0u64, 0u64, 0u64);
        let mut cpu = 0.0f64;
        for g in m.groups.groups.values() {
            cpu += g.cpu;
            assert!(!g.tasks.is_empty());
            count += g.tasks.len();
            for k in &g.tasks {
                assert!(seen.insert(*k), "{k:?} twice");
                assert_eq!(m.groups.of_task[k], g.id);
            }
            mem += g.mem_bytes;
            node0 += g.mem_by_node[0];
            node1 += g.mem_by_node[1];
        }
        assert_eq!(count, m.tasks.len(), "step {i}");
        assert_eq!(seen.len(), m.tasks.len());
        assert_eq!(m.groups.of_task.len(), m.tasks.len());
        assert_eq!(mem, m.procs.values().map(|p| p.rss_bytes).sum::<u64>(), "step {i}");
        assert_eq!(node0, m.procs.values().map(|p| p.mem_by_node[0]).sum::<u64>());
        assert_eq!(node1, m.procs.values().map(|p| p.mem_by_node[1]).sum::<u64>());
        // CPU: every task's rate in exactly one group, and on exactly one node's demand.
        let task_cpu: f64 = m.tasks.values().map(|t| t.cpu_rate).sum();
        assert!(task_cpu > 0.0 || i == 1);
        assert!((cpu - task_cpu).abs() < 1e-9, "step {i}: groups {cpu} tasks {task_cpu}");
        let on_nodes: f64 = m.tasks.values().filter(|t| t.node.is_some()).map(|t| t.cpu_rate).sum();
        let demand: f64 = m.nodes.iter().map(|n| n.cpu_demand).sum();
        assert!((demand - on_nodes).abs() < 1e-9, "step {i}");
    }
}

/// Merge direction decided by memory: process 10's thread uses no CPU but holds 12 GiB
/// (load 0 / 2 + 12 / 16 = 0.75); process 20's uses 1 CPU and 100 MiB (0.5 + 0.0061 = 0.5061).
/// They talk at full rate: the 1-CPU group joins the memory-heavy one, which keeps its id (the
/// smaller id is 20's, so the id shows the direction, not a tie-break).
#[test]
fn memory_decides_the_merge_direction() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = |i: u64| {
        Sb::new(&topo, i * SEC)
            .proc(20, 5, "small", &[100 * MIB, 0])
            .thread(20, 20, i * SEC, 0, 0)
            .proc(30, 5, "big", &[12 * GIB, 0])
            .thread(30, 30, 0, 0, 1)
            .comm((20, 20), (30, 30), 1000)
            .build()
    };
    m.update(&s(1));
    let big = m.group_of(&key(30, 30)).unwrap().id;
    let small = m.group_of(&key(20, 20)).unwrap().id;
    assert!(small < big);
    m.update(&s(2));
    let g = m.group_of(&key(20, 20)).unwrap();
    assert_eq!(g.id, big);
    assert_eq!(g.tasks, vec![key(20, 20), key(30, 30)]);
    assert!((g.load - (1.0 / 2.0 + (12 * GIB + 100 * MIB) as f64 / (16 * GIB) as f64)).abs() < 1e-9);
}

/// Processes 10 (8 GiB), 20 (5 GiB) and 30 (2 GiB) at step `i` (t = i s), single-threaded, no CPU,
/// pairs (10,20) and (20,30) talking at f = 1 and (10,30) at f = 0.6; every node's MemTotal as
/// sampled `node_gib` GiB.
fn three_procs(topo: &Topology, i: u64, node_gib: u64) -> Sample {
    let mut b = Sb::new(topo, i * SEC);
    for n in &topo.nodes {
        b = b.mem_total(n.id, node_gib << 20);
    }
    b.proc(10, 5, "a", &[8 * GIB, 0])
        .thread(10, 10, 0, 0, 0)
        .proc(20, 5, "b", &[5 * GIB, 0])
        .thread(20, 20, 0, 0, 0)
        .proc(30, 5, "c", &[2 * GIB, 0])
        .thread(30, 30, 0, 0, 0)
        .comm((10, 10), (20, 20), 1000)
        .comm((20, 20), (30, 30), 1000)
        .comm((10, 10), (30, 30), 600)
        .build()
}

/// Memory cap refusal, by hand: 16 GiB nodes, group_max_mem_frac 0.9 -> at most 14.4 GiB per
/// group. Processes 10 (8 GiB), 20 (5 GiB) and 30 (2 GiB), single-threaded, no CPU. Edges at
/// f = 1: (10,20) and (20,30) -> s = 0.5 after one period; (10,30) at f = 0.6 -> 0.3. Strongest
/// first, ties in key order: (10,20) -> 13 GiB, fits; (20,30) -> 15 GiB > 14.4, refused;
/// (10,30) is the same pair of groups, refused again (counted once). Result {10, 20}, {30}.
#[test]
fn memory_cap_refuses_a_merge() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    m.update(&three_procs(&topo, 1, 16));
    m.update(&three_procs(&topo, 2, 16));
    assert!((m.graph.edges[&(key(10, 10), key(30, 30))].strength - 0.3).abs() < 1e-12);
    let sets: Vec<Vec<u32>> = m.groups.groups.values().map(|g| g.tasks.iter().map(|k| k.pid).collect()).collect();
    assert_eq!(sets, vec![vec![10, 20], vec![30]]);
    assert_eq!(m.groups.refused_merges, 1);
    assert_eq!(m.group_of(&key(10, 10)).unwrap().mem_bytes, 13 * GIB);
}

/// The memory cap follows each node's MemTotal as sampled, not the topology's: the same three
/// processes on nodes that grew from 16 to 32 GiB (memory hot-added; the topology is not read
/// again for that) -> cap 28.8 GiB, and (20,30) makes one group of all three (15 GiB). With the
/// topology's 16 GiB it was refused as above.
#[test]
fn the_memory_cap_follows_memory_added_to_a_node() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    m.update(&three_procs(&topo, 1, 32));
    m.update(&three_procs(&topo, 2, 32));
    assert_eq!(m.node_mem_total_bytes(0), 32 * GIB);
    let sets: Vec<Vec<u32>> = m.groups.groups.values().map(|g| g.tasks.iter().map(|k| k.pid).collect()).collect();
    assert_eq!(sets, vec![vec![10, 20, 30]]);
    assert_eq!(m.groups.refused_merges, 0);
}

/// A reused pid is a new process: its threads leave the old process's group and start a new one
/// (a fresh id), even though the keys are the same.
#[test]
fn pid_reuse_starts_new_groups() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = |t, start| {
        Sb::new(&topo, t).proc(30, start, "x", &[GIB, 0]).thread(30, 30, 0, 0, 0).thread(30, 31, 0, 0, 0).build()
    };
    m.update(&s(SEC, 5));
    m.update(&s(2 * SEC, 5));
    let old = m.group_of(&key(30, 30)).unwrap().id;
    assert_eq!(m.group_of(&key(30, 30)).unwrap().since_ns, SEC);
    m.update(&s(3 * SEC, 250));
    let g = m.group_of(&key(30, 30)).unwrap();
    assert_ne!(g.id, old);
    assert_eq!(g.tasks, vec![key(30, 30), key(30, 31)]);
    assert_eq!(g.since_ns, 3 * SEC);
    assert_eq!(m.groups.groups.len(), 1);
}

/// A signal-less process stays one group when one of its threads talks to another process: the
/// edge says nothing about its own threads. With a 250 events/s edge (f = 0.25): s = 0.125, 0.1833,
/// 0.2105 (medium at the 3rd period) the client joins the server's process group: load(server, 3 threads, 2 GiB) >
/// load(client, 1 GiB), so the server's group keeps its id.
#[test]
fn an_edge_to_another_process_does_not_split_a_process_group() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = |i: u64| {
        Sb::new(&topo, i * SEC)
            .proc(10, 5, "server", &[2 * GIB, 0])
            .thread(10, 10, 0, 0, 0)
            .thread(10, 11, 0, 0, 0)
            .thread(10, 12, 0, 0, 0)
            .proc(20, 5, "client", &[GIB, 0])
            .thread(20, 20, 0, 0, 0)
            .comm((10, 11), (20, 20), 250)
            .build()
    };
    m.update(&s(0));
    let server = m.group_of(&key(10, 10)).unwrap().id;
    for i in 1..=2 {
        m.update(&s(i));
        assert_eq!(group_sets(&m), vec![vec![10, 11, 12], vec![20]], "step {i}");
    }
    m.update(&s(3));
    assert_eq!(m.groups.groups.len(), 1);
    let g = m.group_of(&key(20, 20)).unwrap();
    assert_eq!(g.id, server);
    assert_eq!(g.pids, vec![10, 20]);
    assert_eq!(g.mem_bytes, 3 * GIB);
}

/// Asymmetric machine: node 0 has CPUs 0-3 and 4 GiB, node 1 has CPU 4 and 32 GiB.
fn asymmetric() -> Topology {
    let mut topo = machine(2, 4, 4);
    topo.nodes[1].cpus = [4u32].into_iter().collect();
    topo.cpus.retain(|c| c.node == 0 || c.id == 4);
    topo.nodes[1].mem_total_kb = 32 << 20;
    topo.nodes[1].mem_free_kb = 32 << 20;
    topo
}

/// Guards the cap against ONE node: two 1-CPU, 6 GiB processes talk at full rate. Together 2 CPUs
/// and 12 GiB: node 0 has the CPUs (4 x 1.0) but 4 GiB (x 0.9 = 3.6 GiB), node 1 the memory
/// (28.8 GiB) but 1 CPU. No node holds the union: the merge is refused, every period.
#[test]
fn the_cap_checks_cpu_and_memory_against_the_same_node() {
    let topo = asymmetric();
    let mut m = model(topo.clone());
    for i in 1..=8u64 {
        let s = Sb::new(&topo, i * SEC)
            .proc(10, 5, "a", &[0, 6 * GIB])
            .thread(10, 10, i * SEC, 0, 0)
            .proc(20, 5, "b", &[0, 6 * GIB])
            .thread(20, 20, i * SEC, 0, 1)
            .comm((10, 10), (20, 20), 2000)
            .build();
        m.update(&s);
    }
    assert!(m.graph.edges[&(key(10, 10), key(20, 20))].tier >= Some(numapilot_model::Tier::Medium));
    assert_eq!(m.groups.groups.len(), 2);
    assert_eq!(m.groups.refused_merges, 1);
}

/// Guards the re-check of a grown group: three co-accessing threads at 0.4 CPU each merge
/// (1.2 CPUs <= 2 CPUs x 1.0). From step 7 each uses 1 CPU: 3 CPUs > 2, so the group is rebuilt
/// from its edges strongest first under the cap: all three edges are equal (f = 1 each period),
/// so ties go by task order: (11,12) joins (2 CPUs, fits), (11,13) and (12,13) would make 3:
/// thread 13 is split off with a new id; {11, 12} keep the old id.
#[test]
fn a_group_that_grew_past_the_cap_is_split() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let mut run = [0u64; 3];
    let mut id = None;
    for i in 1..=8u64 {
        let rate = if i <= 6 { 0.4 } else { 1.0 };
        let mut b = Sb::new(&topo, i * SEC).proc(10, 5, "a", &[GIB, 0]);
        for (k, r) in run.iter_mut().enumerate() {
            *r += (rate * SEC as f64) as u64;
            let tid = 11 + k as u32;
            b = b.thread(10, tid, *r, 0, 0).access(10, tid, BUF, 0, 10, i * SEC);
        }
        m.update(&b.build());
        if i == 6 {
            assert_eq!(group_sets(&m), vec![vec![11, 12, 13]]);
            id = Some(m.group_of(&key(10, 11)).unwrap().id);
        }
    }
    assert_eq!(group_sets(&m), vec![vec![11, 12], vec![13]]);
    assert_eq!(m.group_of(&key(10, 11)).unwrap().id, id.unwrap());
    assert!(m.groups.groups.values().all(|g| g.cpu <= 2.0 + 1e-9));
}

/// Guards the cap on signal-less processes: 10 residency-only threads, group_max_tasks = 4: cut
/// in tid order into {100..103}, {104..107}, {108, 109}; the first part keeps the process group's
/// id and the parts stay stable over periods.
#[test]
fn a_signal_less_process_larger_than_the_cap_is_cut_in_tid_order() {
    let topo = machine(2, 2, 16);
    let tun = numapilot_model::Tunables { group_max_tasks: 4, ..numapilot_model::Tunables::default() };
    let mut m = numapilot_model::Model::new(topo.clone(), tun);
    let mut first = None;
    for i in 1..=3u64 {
        let mut b = Sb::new(&topo, i * SEC).proc(10, 5, "legacy", &[GIB, 0]);
        for tid in 100..110 {
            b = b.thread(10, tid, 0, 0, 0);
        }
        m.update(&b.build());
        assert_eq!(
            group_sets(&m),
            vec![vec![100, 101, 102, 103], vec![104, 105, 106, 107], vec![108, 109]],
            "step {i}"
        );
        let ids: Vec<u64> = m.groups.groups.keys().copied().collect();
        assert_eq!(*first.get_or_insert(ids.clone()), ids);
    }
}

/// Guards smoothed memory attribution: threads 11 and 12 (in different 2 MiB buckets, so not
/// related) both draw 10 samples at t = 1 s; at t = 2 s only 11 does. Decayed with the 2 s access
/// half-life (d = 2^-0.5 = 0.707107): 11 has 10 d + 10 = 17.0711, 12 has 7.0711, so 12 keeps
/// 7.0711 / 24.1421 = 0.292893 of the 1 GiB RSS (with last period's counts it dropped to 0 bytes
/// in the period it drew no sample); 13 never drew one: 0.
#[test]
fn group_memory_follows_smoothed_evidence() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let s = |i: u64, who: &[u32]| {
        let mut b = Sb::new(&topo, i * SEC).proc(10, 5, "app", &[GIB, 0]);
        for tid in [11u32, 12, 13] {
            b = b.thread(10, tid, 0, 0, 0);
        }
        for &tid in who {
            b = b.access(10, tid, BUF + u64::from(tid) * (64 << 20), 0, 10, i * SEC);
        }
        b.build()
    };
    m.update(&s(1, &[11, 12]));
    m.update(&s(2, &[11]));
    assert_eq!(group_sets(&m), vec![vec![11], vec![12], vec![13]]);
    let share = m.group_of(&key(10, 12)).unwrap().mem_bytes as f64 / GIB as f64;
    assert!((share - 0.292893).abs() < 1e-4, "{share}");
    assert_eq!(m.group_of(&key(10, 13)).unwrap().mem_bytes, 0);
    figures_are_the_updates(&m);
}

/// The address-space prior merges a signal-less process that is split over groups: threads 11
/// and 12 draw samples in different buckets at t = 1 s (per-thread signal, unrelated: singletons
/// 0 and 1), then none. Their sampled shares stay valid for access_stale_ms = 30 s; at t = 31 s
/// both fall back to residency, the process has no per-thread signal, and the prior (step 4)
/// merges its two groups: equal load (no CPU, the 1 GiB shared equally), so the smaller id, 0,
/// keeps its id.
#[test]
fn the_prior_merges_a_signal_less_process_split_over_groups() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    for t in 1..=31u64 {
        let mut b = Sb::new(&topo, t * SEC).proc(10, 5, "app", &[GIB, 0]);
        for tid in [11u32, 12] {
            b = b.thread(10, tid, 0, 0, 0);
        }
        if t == 1 {
            b = b.access(10, 11, BUF, 0, 10, SEC).access(10, 12, BUF + (64 << 20), 0, 10, SEC);
        }
        m.update(&b.build());
        if t == 30 {
            assert_eq!(group_sets(&m), vec![vec![11], vec![12]], "still sampled shares at t = 30 s");
        }
    }
    assert_eq!(group_sets(&m), vec![vec![11, 12]]);
    assert_eq!(m.group_of(&key(10, 12)).unwrap().id, 0);
    assert_eq!(m.group_of(&key(10, 12)).unwrap().since_ns, 31 * SEC);
}

/// Guards the cap's hysteresis (`group_split_margin`, 0.1) and the per-task rate slack (0.02),
/// the rig's numa02 case: a signal-less process of three threads on a 2-CPU node, two workers
/// busy (1.0 CPU each) and the main thread mostly idle. Per step, the main thread's CPU and the
/// group's total against the marks (merge: 2.0 + 3 x 0.02 = 2.06; keep: 2.2 + 0.06 = 2.26):
///
/// ```text
///   step 1 (first sample, no rates)  0.0         one group (as the process)
///   step 2  main 0.00  total 2.00    <= 2.06     one group
///   step 3  main 0.15  total 2.15    <= 2.26     kept whole (without the margin: cut)
///   step 4  main 0.40  total 2.40    >  2.26     cut in tid order: {30, 31}, {32}
///   step 5  main 0.00  total 2.00    <= 2.06     the prior merges the parts again (plain cap)
/// ```
/// Step 4: the tid chain unions (30,31) = 1.4 CPUs, then (31,32) would be 2.4 > 2.26: thread 32
/// is cut off. Step 5: one group again (the address-space prior re-merges under the plain cap).
#[test]
fn a_group_at_a_nodes_size_is_not_cut_by_noise() {
    let topo = machine(2, 2, 16);
    let mains = [0.0, 0.0, 0.15, 0.40, 0.0];
    // Steps 1..=mains.len(): the main thread at mains[i], the two workers busy; groups after each.
    let steps = |tun: Tunables, n: usize| -> Vec<Vec<Vec<u32>>> {
        let mut m = Model::new(topo.clone(), tun);
        let mut run = [0u64; 3];
        let mut out = Vec::new();
        for (i, main) in mains[..n].iter().enumerate() {
            let mut b = Sb::new(&topo, (i as u64 + 1) * SEC).proc(30, 5, "numa02", &[GIB, 0]);
            for (k, r) in run.iter_mut().enumerate() {
                if i > 0 {
                    *r += ((if k == 0 { *main } else { 1.0 }) * SEC as f64) as u64;
                }
                b = b.thread(30, 30 + k as u32, *r, 0, 0);
            }
            m.update(&b.build());
            out.push(group_sets(&m));
        }
        out
    };
    for (i, got) in steps(Tunables::default(), 5).into_iter().enumerate() {
        let want = if i == 3 { vec![vec![30, 31], vec![32]] } else { vec![vec![30, 31, 32]] };
        assert_eq!(got, want, "step {}", i + 1);
    }
    // Without the margin, step 3's 2.15 CPUs already cut the process.
    let off = steps(Tunables { group_split_margin: 0.0, ..Tunables::default() }, 3);
    assert_eq!(off[2], vec![vec![30, 31], vec![32]]);
}

/// Residency-by-bytes: a server (one thread, 0.1 CPU, 64 MiB on node 0) and a busier client (one
/// thread, 0.3 CPU, 12 MiB on node 1) joined by a connected socket, with no sampled access and no
/// NUMA fault (the rig's guests: no PMU, NUMA balancing off). Each thread's `access` is its own
/// process's residency; the group's is where the group's bytes are, 64 / 76 = 0.842 on node 0.
/// Weighting each member's residency by its CPU (until 2026-12-01) said 0.75 on node 1, the
/// client's: the rig's pairs scenario then brought the server to its client and copied its 64 MiB
/// buffer after it. A member with samples keeps its CPU-weighted shares (the third case).
#[test]
fn a_group_known_by_residency_alone_leans_to_its_bytes() {
    let topo = machine(2, 2, 16);
    let s = |i: u64, sampled: bool| {
        let b = Sb::new(&topo, i * SEC)
            .proc(10, 5, "server", &[64 * MIB, 0])
            .thread(10, 10, i * SEC / 10, 0, 0)
            .proc(20, 5, "client", &[0, 12 * MIB])
            .thread(20, 20, 3 * i * SEC / 10, 0, 2)
            .socket((10, 10), (20, 20));
        if sampled {
            b.access(20, 20, BUF, 1, 10, i * SEC).build()
        } else {
            b.build()
        }
    };
    let mut m = model(topo.clone());
    for i in 0..=4 {
        m.update(&s(i, false));
    }
    let g = m.group_of(&key(20, 20)).unwrap();
    assert_eq!(g.tasks, vec![key(10, 10), key(20, 20)], "one group through the socket");
    assert_eq!(g.mem_by_node, vec![64 * MIB, 12 * MIB]);
    let want = [64.0 / 76.0, 12.0 / 76.0];
    assert!(g.access.iter().zip(want).all(|(a, w)| (a - w).abs() < 1e-6), "{:?}, want {want:?}", g.access);
    figures_are_the_updates(&m);

    // The client's own samples (all on node 1) weigh by its CPU, the server's bytes by its own.
    let mut m = model(topo.clone());
    for i in 0..=4 {
        m.update(&s(i, true));
    }
    let g = m.group_of(&key(20, 20)).unwrap();
    assert_eq!(g.tasks.len(), 2);
    assert!((g.access[1] - 0.75).abs() < 0.01, "{:?}", g.access);
    figures_are_the_updates(&m);
}

/// Rule shared-counts-once: a group counts the memory its processes share once. Producer (10) and
/// consumer (20) map one 24 MiB memfd (numa_maps: 6144 pages on node 0, `mapmax=2`, as the rig's
/// pairs scenario found them); the producer holds 8 MiB of its own on node 0, the consumer 4 MiB
/// on node 1. They share a group (the shared-memory channel), whose memory is
///
/// ```text
///   node 0: 8 + 24 (producer) + 24 (consumer) - 24 counted twice = 32 MiB
///   node 1: 4 MiB;  in all 36 MiB   (before: 56 + 4 = 60 MiB: the 24 MiB twice)
/// ```
///
/// Alone, each process keeps the memfd in its own figures (nothing of it is counted twice).
#[test]
fn memory_two_members_share_counts_once() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    let memfd = "7f3c8a000000 default file=/memfd:pair\\040(deleted) dirty=6144 mapmax=2 active=0 N0=6144 kernelpagesize_kB=4\n";
    let s = |t: u64| {
        Sb::new(&topo, t)
            .proc(10, 5, "producer", &[])
            .thread(10, 10, t / 2, 0, 0)
            .numa_maps(
                10,
                &format!("{memfd}55d0c1a00000 default anon=2048 dirty=2048 active=0 N0=2048 kernelpagesize_kB=4\n"),
            )
            .proc(20, 5, "consumer", &[])
            .thread(20, 20, t / 4, 0, 2)
            .numa_maps(
                20,
                &format!("{memfd}55d0c1a00000 default anon=1024 dirty=1024 active=0 N1=1024 kernelpagesize_kB=4\n"),
            )
            .shared(7, "/memfd:pair (deleted)", &[(10, 24 * MIB), (20, 24 * MIB)])
            .build()
    };
    for i in 1..=4 {
        m.update(&s(i * SEC));
    }
    assert_eq!(m.procs[&10].mem_by_node, vec![32 * MIB, 0]);
    assert_eq!(m.procs[&20].mem_by_node, vec![24 * MIB, 4 * MIB]);
    let g = m.group_of(&key(10, 10)).expect("grouped");
    assert_eq!(g.pids, vec![10, 20], "{g:?}");
    assert_eq!(g.mem_by_node, vec![32 * MIB, 4 * MIB], "{g:?}");
    assert_eq!(g.mem_bytes, 36 * MIB, "{g:?}");
    assert_eq!(m.shared_twice(&[(10, 1.0)]), vec![0, 0]);
    assert_eq!(m.shared_twice(&[(10, 1.0), (20, 0.5)]), vec![12 * MIB, 0]);
    figures_are_the_updates(&m);
}

/// A pair of processes 10 and 20 that map one memfd of `shared_gib` GiB (numa_maps: all of it on
/// node 0, `mapmax=2`) and hold `own_gib` GiB of their own each (node 0 for 10, node 1 for 20),
/// single-threaded, no CPU, talking (f = 1), at step `i` (t = i s); the nodes' MemTotal 16 GiB.
fn sharing_pair(topo: &Topology, i: u64, shared_gib: u64, own_gib: u64) -> Sample {
    let pages = |gib: u64| gib * GIB / 4096;
    let memfd = format!(
        "7f3c8a000000 default file=/memfd:buffer\\040(deleted) dirty={0} mapmax=2 active=0 N0={0} kernelpagesize_kB=4\n",
        pages(shared_gib)
    );
    let own = |node: u32| {
        format!("55d0c1a00000 default anon={0} dirty={0} active=0 N{node}={0} kernelpagesize_kB=4\n", pages(own_gib))
    };
    let mut b = Sb::new(topo, i * SEC);
    for n in &topo.nodes {
        b = b.mem_total(n.id, 16 << 20);
    }
    b.proc(10, 5, "producer", &[])
        .thread(10, 10, 0, 0, 0)
        .numa_maps(10, &format!("{memfd}{}", own(0)))
        .proc(20, 5, "consumer", &[])
        .thread(20, 20, 0, 0, 2)
        .numa_maps(20, &format!("{memfd}{}", own(1)))
        .shared(7, "/memfd:buffer (deleted)", &[(10, shared_gib * GIB), (20, shared_gib * GIB)])
        .comm((10, 10), (20, 20), 1000)
        .build()
}

/// Rule shared-counts-once holds in the size cap too (steps 3 and 4): 16 GiB nodes, cap 14.4 GiB.
/// A 10 GiB memfd two processes map, 1 GiB of their own each: 11 GiB per process, 22 GiB summed,
/// but 12 GiB of pages, so the pair merges (before: refused every period, as 22 > 14.4, though
/// its group would have held 12 GiB). A 4 GiB memfd with 6 GiB of their own each is 16 GiB of
/// pages even counted once (20 GiB twice): no node holds it, and the merge is still refused (the
/// cap's purpose: no group larger than a node). The split step (3) counts it once as well: the
/// merged pair's memfd grows to 13 GiB, 15 GiB of pages, above the cap but within its 10% upper
/// mark (15.84 GiB), and the pair stays one group (summed, 28 GiB, it was cut, and the merge that
/// followed refused: 15 > 14.4).
#[test]
fn the_cap_counts_memory_two_processes_share_once() {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    for i in 1..=8 {
        let shared = if i <= 4 { 10 } else { 13 };
        m.update(&sharing_pair(&topo, i, shared, 1));
        if i > 1 {
            let g = m.group_of(&key(10, 10)).unwrap();
            assert_eq!(g.pids, vec![10, 20], "one group at step {i}: {:?}", group_sets(&m));
            assert_eq!(g.mem_bytes, (shared + 2) * GIB);
            assert_eq!(m.groups.refused_merges, 0);
            figures_are_the_updates(&m);
        }
    }

    let mut m = model(topo.clone());
    for i in 1..=8 {
        m.update(&sharing_pair(&topo, i, 4, 6));
    }
    assert_eq!(m.procs[&10].rss_bytes, 10 * GIB);
    assert_eq!(group_sets(&m), vec![vec![10], vec![20]]);
    assert_eq!(m.groups.refused_merges, 1);
}
