//! Conservation and determinism over many random models: a plan never sets CPUs outside the
//! machine (or an empty set), never names a pid absent from the model or with another start time,
//! never touches a pinned process, never plans more pages than the budget, bounds every
//! migration; the same model always gives the same plan; and a second plan after the first was
//! applied keeps the same invariants.

mod adaptive_common;

use adaptive_common::*;
use numapilot_model::{ProcessClass, TaskKey, Tunables};
use numapilot_policy::{Adaptive, Policy};

/// SplitMix64: a small deterministic generator for the cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn random_model(seed: u64) -> B {
    let mut r = Rng(seed);
    let preset = ["autonuma-2s12c-24g", "article-4n96", "ring-8n64c"][r.below(3) as usize];
    let t = Tunables { migrate_budget_mib_per_s: 1 + r.below(2000), ..Tunables::default() };
    let mut b = B::with(preset, t);
    let ids: Vec<u32> = b.m.topo.nodes.iter().map(|n| n.id).collect();
    let n = ids.len();
    let classes = [
        ProcessClass::Unclassified,
        ProcessClass::Unclassified,
        ProcessClass::StaticLarge,
        ProcessClass::Growing,
        ProcessClass::BandwidthBound,
        ProcessClass::LatencySensitive,
    ];
    let nprocs = 1 + r.below(8) as u32;
    let mut group = 1u64;
    for i in 0..nprocs {
        let pid = 10 + i;
        let threads: Vec<(u32, f64)> =
            (0..1 + r.below(20)).map(|_| (ids[r.below(n as u64) as usize], r.unit() * 1.1)).collect();
        let mem: Vec<u64> = (0..n).map(|_| if r.below(2) == 0 { r.below(1500) } else { 0 }).collect();
        if r.below(4) == 0 {
            b.new_proc(pid, &format!("p{}", r.below(3)), &threads, &mem);
        } else {
            b.proc(pid, &format!("p{}", r.below(3)), &threads, &mem);
        }
        b.class(pid, classes[r.below(classes.len() as u64) as usize]);
        if r.below(6) == 0 {
            b.pinned(pid);
        }
        for ti in 0..threads.len() as u32 {
            if r.below(2) == 0 {
                let mut a: Vec<f64> = (0..n).map(|_| r.unit()).collect();
                let s: f64 = a.iter().sum();
                a.iter_mut().for_each(|x| *x /= s);
                b.access(pid, ti, &a);
            }
            if r.below(3) == 0 {
                let node = ids[r.below(n as u64) as usize];
                b.hot(pid, ti, (1 + r.below(1000)) << 21, (1 + r.below(8)) << 21, node, r.below(100));
            }
        }
        // Groups: whole process, per thread, or none.
        match r.below(3) {
            0 => {
                b.group_proc(group, pid);
                group += 1;
            }
            1 => {
                for ti in 0..threads.len() as u32 {
                    b.group(group, &[tk(pid, ti)]);
                    group += 1;
                }
            }
            _ => {}
        }
        if r.below(3) == 0 && i > 0 {
            // An edge across processes.
            b.edge(tk(pid, 0), tk(pid - 1, 0), r.unit());
        }
    }
    for idx in 0..n {
        if r.below(5) == 0 {
            b.bottleneck(idx, 0.95);
        }
    }
    b
}

#[test]
fn random_plans_keep_every_invariant_and_are_deterministic() {
    let mut actions = 0;
    let mut pages = 0;
    for seed in 0..150 {
        let b = random_model(seed);
        let mut p = Adaptive::new();
        let plan = p.decide(&b.m);
        check_conservation(&b.m, &plan);
        assert_eq!(plan, Adaptive::new().decide(&b.m.clone()), "seed {seed}: not deterministic");
        actions += plan.actions.len();
        pages += plan.actions.iter().map(pages_of).sum::<u64>();
        // Apply, let the threads land where they were sent, decide again.
        applied(&mut p, &b.m, &plan);
        let mut b2 = random_model(seed);
        for a in &plan.actions {
            if let numapilot_policy::ActionKind::SetAffinity { cpus } = &a.kind {
                let tids: Vec<u32> = match a.target.tid {
                    Some(t) => vec![t],
                    None => b2.m.procs[&a.target.pid].tids.clone(),
                };
                for tid in tids {
                    let t = b2.m.tasks.get_mut(&TaskKey { pid: a.target.pid, tid }).unwrap();
                    t.cpus_allowed = std::sync::Arc::new(cpus.clone());
                }
            }
        }
        let plan2 = p.decide(&b2.m);
        check_conservation(&b2.m, &plan2);
        for pid in b2.m.procs.keys() {
            assert!(p.explain(&b2.m, *pid).is_some());
        }
    }
    // The cases exercise the policy: plenty of actions and pages over all seeds.
    assert!(actions > 300, "{actions}");
    assert!(pages > 0);
}
