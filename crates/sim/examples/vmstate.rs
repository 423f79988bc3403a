//! Where each process's threads and memory are at given times of a numapilot run, for reading a
//! placement (the VM mix's: which vCPUs sit with their working-set slices, whose idle memory fills
//! which node): `cargo run --release -p numapilot-sim --example vmstate -- MACHINE WORKLOAD SECONDS SEED T1,T2,..` (MACHINE: a preset or the path of a machine file).
//!
//! Per process: its threads' nodes, and of its first region's per-thread slices (the VM mix's
//! working set) the share on the thread's node, on a node within distance 22 (one server of the
//! 288-core machine) and farther; its other regions (idle RAM) by node. Per node: threads, first
//! region and other regions, free memory (GiB); then each process's rate of work between consecutive
//! times (`VMSTATE_RATES=1`: the rates only). `PROBE_TUNABLES=file.toml` overrides tunables.

use numapilot_sim::kernel::REGION_BYTES;
use numapilot_sim::{run::run_engine, Machine, Sim, SimOptions};

const GIB: f64 = (1u64 << 30) as f64;

fn dump(sim: &Sim) {
    let k = &sim.kernel;
    let topo = &k.topo;
    let n = topo.nodes.len();
    let d = &topo.distances;
    let mut threads = vec![0usize; n];
    let mut first = vec![0u64; n];
    let mut rest = vec![0u64; n];
    println!("== t = {:.2} s", sim.now_ns() as f64 / 1e9);
    for p in &k.procs {
        let live: Vec<usize> =
            p.tasks.iter().copied().filter(|&t| k.tasks[t].state != numapilot_sim::kernel::TaskState::Exited).collect();
        if live.is_empty() || p.regions.is_empty() {
            continue;
        }
        let (s0, e0) = p.regions[0];
        let len = e0 - s0;
        let count = p.tasks.len();
        let (mut loc, mut near, mut far) = (0usize, 0usize, 0usize);
        let mut tnodes = Vec::new();
        let mut per_thread = Vec::new();
        for (ti, &t) in p.tasks.iter().enumerate() {
            let cn = k.node_of_cpu(k.tasks[t].cpu);
            let ci = k.nidx(cn);
            threads[ci] += 1;
            tnodes.push(cn);
            let a0 = s0 + len * ti / count;
            let a1 = (s0 + len * (ti + 1) / count).max(a0 + 1).min(e0);
            let (mut l, mut nr, mut f) = (0, 0, 0);
            for r in a0..a1 {
                let rn = k.regions[r].node;
                if rn == numapilot_sim::kernel::NO_NODE {
                    continue;
                }
                let ri = k.nidx(rn);
                if ri == ci {
                    l += 1;
                } else if d[ci][ri] <= 22 {
                    nr += 1;
                } else {
                    f += 1;
                }
            }
            loc += l;
            near += nr;
            far += f;
            if f > 0 {
                per_thread.push(format!("{}@{}:{}%far", ti, cn, 100 * f / (l + nr + f).max(1)));
            }
        }
        for r in s0..e0 {
            let rn = k.regions[r].node;
            if rn != numapilot_sim::kernel::NO_NODE {
                first[k.nidx(rn)] += REGION_BYTES;
            }
        }
        let mut other_by = vec![0u64; n];
        for &(s, e) in &p.regions[1..] {
            for r in s..e {
                let rn = k.regions[r].node;
                if rn != numapilot_sim::kernel::NO_NODE {
                    other_by[k.nidx(rn)] += REGION_BYTES;
                    rest[k.nidx(rn)] += REGION_BYTES;
                }
            }
        }
        let tot = (loc + near + far).max(1) as f64;
        let mut tn = tnodes.clone();
        tn.sort_unstable();
        tn.dedup();
        let other: Vec<String> = other_by
            .iter()
            .enumerate()
            .filter(|(_, &b)| b > 0)
            .map(|(i, &b)| format!("{}:{:.0}", topo.nodes[i].id, b as f64 / GIB))
            .collect();
        println!(
            "{:<20} thr-nodes {:?} ws local {:.0}% server {:.0}% far {:.0}%  far threads [{}]  other GiB [{}]",
            p.comm,
            tn,
            100.0 * loc as f64 / tot,
            100.0 * near as f64 / tot,
            100.0 * far as f64 / tot,
            per_thread.join(" "),
            other.join(" ")
        );
    }
    let cap: Vec<u64> = k.node_capacity.clone();
    for i in 0..n {
        println!(
            "  node {:>2}: cpus {:>2} threads {:>2}  first {:>5.1}  other {:>5.1}  free {:>5.1} GiB",
            topo.nodes[i].id,
            topo.nodes[i].cpus.len(),
            threads[i],
            first[i] as f64 / GIB,
            rest[i] as f64 / GIB,
            (cap[i].saturating_sub(k.node_used[i])) as f64 * REGION_BYTES as f64 / GIB
        );
    }
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let m = Machine::preset_or_file(&a[0]).expect("machine");
    let mut spec = numapilot_sim::workload::builtin(&a[1], &m.topo).expect("workload");
    let secs: f64 = a[2].parse().expect("seconds");
    spec.duration_s = Some(secs);
    let seed: u64 = a[3].parse().expect("seed");
    let mut times: Vec<f64> = a[4].split(',').map(|x| x.parse().expect("time")).collect();
    times.reverse();
    let mut opts = SimOptions::default();
    if let Some(path) = std::env::var_os("PROBE_TUNABLES") {
        opts.tunables = numapilot_sim::run::tunables_from_file(std::path::Path::new(&path)).expect("tunables");
    }
    let policy = std::env::var("VMSTATE_POLICY").unwrap_or_else(|_| "numapilot".into());
    let quiet = std::env::var_os("VMSTATE_RATES").is_some();
    // Work per process at each dump, for rates between dumps.
    let mut marks: Vec<(f64, Vec<f64>)> = Vec::new();
    let r = run_engine(&m, &spec, &policy, seed, &opts, &mut |_| {}, &mut |sim, _| {
        while times.last().is_some_and(|&t| sim.now_ns() as f64 / 1e9 >= t) {
            times.pop();
            if !quiet {
                dump(sim);
            }
            let done = sim.work_done();
            let per_proc: Vec<f64> =
                sim.kernel.procs.iter().map(|p| p.tasks.iter().map(|&t| done[t]).sum::<f64>()).collect();
            marks.push((sim.now_ns() as f64 / 1e9, per_proc));
        }
    })
    .expect("run");
    // Rates (work per s) of each process between consecutive dumps.
    for w in marks.windows(2) {
        let dt = w[1].0 - w[0].0;
        print!("rates {:.2}-{:.2}:", w[0].0, w[1].0);
        for (a, b) in w[0].1.iter().zip(&w[1].1) {
            print!(" {:.3e}", (b - a) / dt);
        }
        println!();
    }
    for p in &r.processes {
        println!("{:<22} {:.3e}", p.name, p.throughput.unwrap_or(0.0));
    }
    println!("runtime {:.3} local {:.1}% pages {}", r.runtime_s, r.local_access_pct, r.pages_migrated);
}
