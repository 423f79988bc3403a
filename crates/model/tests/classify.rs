//! Process classes from behaviour, overrides, and the stability rule (class window 10 s).

mod common;

use common::*;
use numapilot_model::ProcessClass;

/// One process sampled every second for t = 0..=steps with RSS `rss(t)` on node 0.
fn run(rss: impl Fn(u64) -> u64, steps: u64, comm: &str) -> Vec<ProcessClass> {
    let topo = machine(2, 2, 16);
    let mut m = model(topo.clone());
    m.class_overrides.insert("redis-server".into(), ProcessClass::LatencySensitive);
    m.class_overrides.insert("postgres-checkpointer".into(), ProcessClass::LatencySensitive);
    (0..=steps)
        .map(|t| {
            m.update(
                &Sb::new(&topo, t * SEC).proc(10, 5, comm, &[rss(t), 0]).thread(10, 10, t * SEC / 2, 0, 0).build(),
            );
            m.procs[&10].class
        })
        .collect()
}

/// 16 MiB/s growth: Unclassified until the history spans the window (t = 10 s), then Growing.
#[test]
fn growing() {
    let c = run(|t| GIB + t * 16 * MIB, 12, "jvm");
    assert!(c[..10].iter().all(|&c| c == ProcessClass::Unclassified), "{c:?}");
    assert_eq!(c[10], ProcessClass::Growing);
    assert_eq!(c[12], ProcessClass::Growing);
}

/// 8 GiB on 16 GiB nodes (0.5 >= 0.25 of the smallest node), flat: StaticLarge at t = 10 s.
/// 1 GiB flat: too small, stays Unclassified.
#[test]
fn static_large_and_small() {
    let c = run(|_| 8 * GIB, 10, "postgres");
    assert_eq!(c[9], ProcessClass::Unclassified);
    assert_eq!(c[10], ProcessClass::StaticLarge);
    let c = run(|_| GIB, 12, "small");
    assert!(c.iter().all(|&c| c == ProcessClass::Unclassified));
}

/// "Large" is judged against the nodes' memory as sampled: 5 GiB flat is StaticLarge on 16 GiB
/// nodes (0.31 >= 0.25), and not once memory added to both nodes made them 32 GiB (0.16), though
/// the topology still says 16.
#[test]
fn large_follows_memory_added_to_the_nodes() {
    let topo = machine(2, 2, 16);
    let class = |total_gib: u64| {
        let mut m = model(topo.clone());
        for t in 0..=10 {
            let s = Sb::new(&topo, t * SEC)
                .mem_total(0, total_gib << 20)
                .mem_total(1, total_gib << 20)
                .proc(10, 5, "db", &[5 * GIB, 0])
                .thread(10, 10, t * SEC / 2, 0, 0)
                .build();
            m.update(&s);
        }
        m.procs[&10].class
    };
    assert_eq!(class(16), ProcessClass::StaticLarge);
    assert_eq!(class(32), ProcessClass::Unclassified);
}

/// Guards override matching on the kernel's 15-byte comm: "postgres-checkpointer" (21 bytes) is
/// configured, the kernel shows "postgres-checkp" (its first 15 bytes); it matches. A different
/// name with another 15-byte prefix does not.
#[test]
fn override_matches_the_kernels_truncated_comm() {
    let c = run(|_| GIB, 3, "postgres-checkp");
    assert!(c.iter().all(|&c| c == ProcessClass::LatencySensitive), "{c:?}");
    let c = run(|_| GIB, 3, "postgres-writer");
    assert!(c.iter().all(|&c| c == ProcessClass::Unclassified), "{c:?}");
}

/// Override by name: LatencySensitive from the first sample, whatever the behaviour.
#[test]
fn override_by_comm() {
    let c = run(|t| GIB + t * 64 * MIB, 12, "redis-server");
    assert!(c.iter().all(|&c| c == ProcessClass::LatencySensitive), "{c:?}");
}

/// Stability: flat 8 GiB -> StaticLarge at t = 10. From t = 11 it grows 64 MiB/s; the slope over
/// the window is 6.4 MiB/s at t = 11 (verdict Unclassified, pending), 12.8 at t = 12 (verdict
/// Growing, pending since 12). The class changes only when Growing has held a whole window:
/// t = 22.
#[test]
fn class_changes_only_after_a_whole_window() {
    let c = run(|t| 8 * GIB + t.saturating_sub(10) * 64 * MIB, 23, "cache");
    assert_eq!(c[10], ProcessClass::StaticLarge);
    assert!(c[10..=21].iter().all(|&c| c == ProcessClass::StaticLarge), "{c:?}");
    assert_eq!(c[22], ProcessClass::Growing);
    assert_eq!(c[23], ProcessClass::Growing);
}

/// Bandwidth-bound: two threads, one per node, each with 2048 access samples per second of
/// 640,000 B each: 4096 x 640,000 B/s / 2 running threads = 1250 MiB/s per thread >= 1000, on 2
/// nodes. The same traffic from threads on one node is not bandwidth-bound.
#[test]
fn bandwidth_bound() {
    let topo = machine(2, 2, 16);
    for (cpu_b, expect) in [(2, ProcessClass::BandwidthBound), (1, ProcessClass::Unclassified)] {
        let mut m = model(topo.clone());
        for t in 0..=10u64 {
            let s = Sb::new(&topo, t * SEC)
                .proc(10, 5, "stream", &[GIB, GIB])
                .thread(10, 10, t * SEC / 2, 0, 0)
                .thread(10, 11, t * SEC / 2, 0, cpu_b)
                .access(10, 10, 0x1000_0000, 0, 2048, t * SEC)
                .access(10, 11, 0x9000_0000, 1, 2048, t * SEC)
                .build();
            m.update(&s);
        }
        let p = &m.procs[&10];
        assert!(
            (p.traffic_bytes_per_s_per_thread - 1250.0 * MIB as f64).abs() < 1.0,
            "{}",
            p.traffic_bytes_per_s_per_thread
        );
        assert_eq!(p.class, expect);
    }
}

/// The same streamer sampled at a period stretched 8 times (the engine backing off,
/// `Sample::access_period_scale`): 256 samples per second per thread instead of 2048, each
/// standing for 8 base periods. Its traffic is still 1250 MiB/s per thread and it is still
/// bandwidth-bound; read at the base period it would be 156 MiB/s and a light process.
#[test]
fn a_stretched_sampling_period_is_the_same_traffic() {
    let topo = machine(2, 2, 16);
    for (scale, expect) in [(8, ProcessClass::BandwidthBound), (1, ProcessClass::Unclassified)] {
        let mut m = model(topo.clone());
        for t in 0..=10u64 {
            let mut s = Sb::new(&topo, t * SEC)
                .proc(10, 5, "stream", &[GIB, GIB])
                .thread(10, 10, t * SEC / 2, 0, 0)
                .thread(10, 11, t * SEC / 2, 0, 2)
                .access(10, 10, 0x1000_0000, 0, 256, t * SEC)
                .access(10, 11, 0x9000_0000, 1, 256, t * SEC)
                .build();
            s.access_period_scale = scale;
            m.update(&s);
        }
        let p = &m.procs[&10];
        let want = 1250.0 * MIB as f64 * f64::from(scale) / 8.0;
        assert!(
            (p.traffic_bytes_per_s_per_thread - want).abs() < 1.0,
            "{} != {want}",
            p.traffic_bytes_per_s_per_thread
        );
        assert_eq!(p.class, expect);
    }
}
