//! Every process and thread file of every captured fixture (`fixtures/`: this host's 6.18 and the rig
//! guests' 6.12 with 2, 4 and 8 nodes) parses, through the same `Reader` that reads the live system,
//! and what it says agrees with how the fixture was made (see `fixtures/README.md`).

use std::path::{Path, PathBuf};

use numapilot_observe::parse::numa_maps::parse_numa_maps;
use numapilot_observe::parse::sched::parse_sched;
use numapilot_observe::parse::schedstat::parse_schedstat;
use numapilot_observe::parse::stat::parse_stat;
use numapilot_observe::parse::status::parse_status;
use numapilot_observe::{MemKind, PolicyMode, ReadOptions, Reader, SchedMode, VmaKind};
use numapilot_topology::NodeSet;

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.join("proc").is_dir())
        .collect();
    v.sort();
    assert!(v.len() >= 4, "expected host-6.18 and three rig fixtures in {}", dir.display());
    v
}

/// The pids listed in expected/cmd.txt (`pids: 175 186 194`).
fn captured_pids(fixture: &Path) -> Vec<u32> {
    let cmd = std::fs::read_to_string(fixture.join("expected/cmd.txt")).unwrap();
    let line = cmd.lines().find_map(|l| l.strip_prefix("pids: ")).expect("pids line in cmd.txt");
    line.split_whitespace().map(|p| p.parse().unwrap()).collect()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn every_process_and_thread_file_parses() {
    let mut files = 0;
    for fx in fixtures() {
        for pid in captured_pids(&fx) {
            let pdir = fx.join(format!("proc/{pid}"));
            let stat = parse_stat(&read(&pdir.join("stat"))).unwrap_or_else(|e| panic!("{}: {e}", pdir.display()));
            assert_eq!(stat.pid, pid);
            parse_status(&read(&pdir.join("status"))).unwrap();
            parse_numa_maps(&read(&pdir.join("numa_maps"))).unwrap();
            parse_sched(&read(&pdir.join("sched"))).unwrap();
            parse_schedstat(&read(&pdir.join("schedstat"))).unwrap();
            files += 5;
            for t in std::fs::read_dir(pdir.join("task")).unwrap() {
                let tdir = t.unwrap().path();
                let tid: u32 = tdir.file_name().unwrap().to_str().unwrap().parse().unwrap();
                let s = parse_stat(&read(&tdir.join("stat"))).unwrap();
                assert_eq!(s.pid, tid);
                let st = parse_status(&read(&tdir.join("status"))).unwrap();
                assert_eq!((st.pid, st.tgid), (tid, pid));
                let sched = parse_sched(&read(&tdir.join("sched"))).unwrap();
                parse_schedstat(&read(&tdir.join("schedstat"))).unwrap();
                files += 4;
                // Kernels with CONFIG_NUMA_BALANCING (all of these) print one fault line per online node.
                let nodes = std::fs::read_dir(fx.join("sys/devices/system/node"))
                    .unwrap()
                    .filter(|e| {
                        let n = e.as_ref().unwrap().file_name();
                        let n = n.to_str().unwrap();
                        n.starts_with("node") && n[4..].bytes().all(|b| b.is_ascii_digit())
                    })
                    .count();
                assert_eq!(sched.numa.unwrap().faults.len(), nodes, "{}", tdir.display());
            }
        }
    }
    assert!(files > 60, "only {files} files");
}

#[test]
fn a_whole_fixture_reads_as_a_sample() {
    for fx in fixtures() {
        let reader = Reader::with_options(&fx, ReadOptions { sched: SchedMode::Always, ..ReadOptions::default() });
        let s = reader.sample().unwrap_or_else(|e| panic!("{}: {e}", fx.display()));
        let pids = captured_pids(&fx);
        assert_eq!(s.processes.iter().map(|p| p.pid).collect::<Vec<_>>(), pids, "{}", fx.display());
        let node_dirs = reader.node_ids().unwrap();
        assert_eq!(s.nodes.iter().map(|n| n.node).collect::<Vec<_>>(), node_dirs.iter().collect::<Vec<_>>());
        for n in &s.nodes {
            let free = n.mem_free_kb().unwrap();
            assert!(free <= n.meminfo.mem_total_kb().unwrap());
            assert!(n.numastat.get("numa_hit").is_some());
            // nodeN/vmstat's NUMA counters: every allocation on the node is hit or miss and local or other.
            let v = |k| n.vmstat.get(k).unwrap_or_else(|| panic!("{} node {}: no {k}", fx.display(), n.node));
            assert_eq!(v("numa_hit") + v("numa_miss"), v("numa_local") + v("numa_other"), "{}", fx.display());
            assert!(n.vmstat.entries().iter().all(|(k, _)| k.starts_with("numa_") || k.starts_with("pg")));
        }
        let cpu = s.cpu.as_ref().unwrap();
        // Conservation: node CPU times add up to the per-CPU lines (every online CPU is on one node).
        let by_nodes: u64 = s.nodes.iter().map(|n| s.node_cpu_times(n.node).unwrap().total()).sum();
        let by_cpus: u64 = cpu.cpus.iter().map(|c| c.times.total()).sum();
        assert_eq!(by_nodes, by_cpus, "{}", fx.display());
        assert!(s.psi.memory.is_some(), "{}: PSI is captured in every fixture", fx.display());
        assert!(s.vmstat.get("numa_hit").is_some());
        for p in &s.processes {
            assert!(!p.threads.is_empty());
            assert_eq!(p.threads.len() as u32, p.stat.num_threads, "{}", p.pid);
            assert!(p.rss_kb.is_some());
            for t in &p.threads {
                assert!(t.sched.is_some() && t.schedstat.is_some());
                assert!(!t.mems_allowed().is_empty());
                assert!(t.cpus_allowed().contains(t.last_cpu()) || t.stat.state != 'R');
            }
            // Conservation: per-node usage sums to the pages of the VMAs.
            let maps = p.numa_maps.as_ref().unwrap();
            let by_vma: u64 = maps.vmas.iter().flat_map(|v| v.node_kb()).map(|(_, kb)| kb).sum();
            let by_node: u64 = p.node_usage.iter().map(|u| u.total_kb()).sum();
            assert_eq!(by_vma, by_node);
        }
        // The weird comm "a (b) c" survives the stat line's parentheses.
        assert!(s.processes.iter().any(|p| p.comm == "a (b) c"), "{}", fx.display());
    }
}

#[test]
fn interleaved_toucher_has_pages_on_every_node_and_bound_one_only_on_node_1() {
    for fx in fixtures().into_iter().filter(|f| f.file_name().unwrap().to_str().unwrap().starts_with("rig-")) {
        let reader = Reader::new(&fx);
        let nodes: Vec<u32> = reader.node_ids().unwrap().iter().collect();
        let mem_nodes: Vec<u32> = nodes
            .iter()
            .copied()
            .filter(|&n| reader.read_node(n).unwrap().meminfo.mem_total_kb().unwrap() > 0)
            .collect();
        let pids = captured_pids(&fx);
        // First: rig-toucher under numactl --membind=1 --cpunodebind=1.
        let bound = reader.read_process(pids[0]).unwrap().unwrap();
        assert_eq!(bound.comm, "rig-toucher");
        let anon: Vec<_> = bound
            .numa_maps
            .as_ref()
            .unwrap()
            .vmas
            .iter()
            .filter(|v| v.mem_kind() == MemKind::AnonPrivate && v.resident.is_some())
            .collect();
        assert!(!anon.is_empty());
        for v in &anon {
            assert_eq!(v.policy.mode, PolicyMode::Bind, "{}", fx.display());
            assert_eq!(v.policy.nodes.to_list(), "1");
            assert!(v.node_pages().iter().all(|&(n, _)| n == 1), "{}: {:?}", fx.display(), v.node_pages());
        }
        // numactl --membind sets a policy, not a cpuset: the cpuset still allows every node with memory.
        let with_memory: NodeSet = mem_nodes.iter().copied().collect();
        for t in &bound.threads {
            assert_eq!(t.mems_allowed(), &with_memory, "{}", fx.display());
        }
        // Then (after the toucher NUMA balancing worked on) rig-toucher under --interleave=all: its 8 MiB of
        // anonymous memory is on every node with memory.
        let balanced = balanced_pid(&fx);
        let inter = pids[1..]
            .iter()
            .filter(|&&p| Some(p) != balanced)
            .map(|&p| reader.read_process(p).unwrap().unwrap())
            .find(|p| p.comm == "rig-toucher")
            .expect("the interleaved toucher");
        let maps = inter.numa_maps.as_ref().unwrap();
        let big = maps
            .vmas
            .iter()
            .filter(|v| v.kind == VmaKind::Anon && v.policy.mode == PolicyMode::Interleave)
            .max_by_key(|v| v.resident.as_ref().map_or(0, |r| r.pages))
            .unwrap();
        let on: Vec<u32> = big.node_pages().iter().map(|&(n, _)| n).collect();
        assert_eq!(on, mem_nodes, "{}", fx.display());
    }
}

/// The pid rig/scenarios/capture.sh let the kernel's NUMA balancing work on (`balancing: pid N ...` in cmd.txt).
fn balanced_pid(fixture: &Path) -> Option<u32> {
    let cmd = std::fs::read_to_string(fixture.join("expected/cmd.txt")).unwrap();
    cmd.lines().find_map(|l| l.strip_prefix("balancing: pid ")).map(|r| r.split(' ').next().unwrap().parse().unwrap())
}

#[test]
fn numa_balancing_moved_the_pages_after_the_threads() {
    let mut seen = 0;
    for fx in fixtures().into_iter().filter(|f| f.file_name().unwrap().to_str().unwrap().starts_with("rig-")) {
        let pid = balanced_pid(&fx).unwrap_or_else(|| panic!("{}: no balancing pid in cmd.txt", fx.display()));
        let reader = Reader::with_options(&fx, ReadOptions { sched: SchedMode::IfBalancing, ..ReadOptions::default() });
        let s = reader.sample_of(Some(&[pid])).unwrap();
        assert_eq!(s.numa_balancing, Some(1), "{}", fx.display());
        let p = s.process(pid).unwrap();
        assert_eq!(p.comm, "rig-toucher");
        let numa: Vec<_> = p.threads.iter().map(|t| t.sched.as_ref().unwrap().numa.clone().unwrap()).collect();
        assert_eq!(numa.len(), 2);
        // Balancing migrated pages, recorded hinting faults and chose a preferred node for some thread: node 1,
        // where its CPUs are (the threads were moved to node 1's CPUs with their pages on node 0).
        assert!(numa.iter().all(|n| n.pages_migrated > 0), "{}: {numa:?}", fx.display());
        assert!(numa.iter().any(|n| n.total_faults > 0), "{}: {numa:?}", fx.display());
        assert!(numa.iter().any(|n| n.preferred_nid == Some(1)), "{}: {numa:?}", fx.display());
        assert!(numa.iter().all(|n| n.current_node == 1), "{}: {numa:?}", fx.display());
        // Every page was touched before the move, on node 0's CPUs under the default (local) policy: anonymous
        // memory on node 1 got there by migration.
        let usage = &p.node_usage;
        let on1 = usage.iter().find(|u| u.node == 1).map_or(0, |u| u.anon_kb);
        assert!(on1 > 0, "{}: {usage:?}", fx.display());
        seen += 1;
    }
    // The three 6.12 guests and the 2-node one on Debian 12's 6.1.
    assert_eq!(seen, 4);
}
