//! `SimHost`: the simulated machine behind the policy crate's `Host` trait, so a policy written for
//! the live kernel runs unchanged against the simulator.
//!
//! # Approach
//!
//! ```text
//!   policy ── sample() ──> SimHost ── writes the kernel's files as text ──> observe's parsers ──> Sample
//!          <── Outcome ── apply() ── SetAffinity / MigratePages / MoveRanges on the kernel model,
//!                                    with the migration cost charged like the kernel's
//! ```
//!
//! `sample()` renders what the live system would show: `/proc/PID/stat` and `task/TID/stat` lines
//! (utime, stime in clock ticks of 100 Hz, processor, starttime, num_threads), `task/TID/schedstat`
//! (run time, run-queue wait, switch-ins), `numa_maps` (one VMA per region spec, its policy,
//! `anon=`/`N<node>=` pages), per-node `meminfo`, `/proc/stat` (per-CPU user/system/idle ticks from
//! the CPU time tasks got on each CPU), `/proc/vmstat` NUMA counters, `/proc/pressure/{cpu,memory}`,
//! and when the AutoNUMA model runs, each thread's `sched` file with its NUMA block. The text goes
//! through the observe crate's own parsers, so a simulated `Sample` has exactly the shape and
//! semantics of a live one (and a format drift breaks a test here, not a policy later).
//!
//! Beyond the files, the signals a PMU or a tracer would give (none of them text on a live system):
//!
//! ```text
//!   accesses   precise memory-access sampling (PEBS load latency / IBS op / SPE), emulated:
//!              bytes per (thread, range) since the last sample()   (engine: TaskRt::acc_win)
//!                -> samples = bytes / 64 / SAMPLE_PERIOD_LINES, stochastically rounded
//!                -> capped at MAX_SAMPLES_PER_CPU per CPU and window: the threads on one CPU
//!                   share its ring, each scaled to its share of their samples (evenly over
//!                   its ranges, each range it touched keeping at least one sample)
//!                -> each sample on a resident region of the range, uniformly (so in proportion
//!                   to the range's per-node counts), drawn with the host's seeded generator
//!                -> aggregated per (thread, region): addr = the region's address in its owner's
//!                   map, phys = global region index << 21, node = the region's node
//!   comm       the workload's Pace pairs: server thread <-> client threads that did work,
//!              events = units of side a exchanged with that b thread since the last sample()
//!   mem_bw     per node: bytes through its controller, the window, time saturated (contention
//!              slow-down > engine::SATURATED_SLOWDOWN), capacity from the machine model
//! ```
//!
//! Sampling uses a generator of its own (seeded from the run's seed), so observing a run changes
//! it only by the sampling's charged cost: every sample the work triggers (those the cap then
//! drops too, as a full ring drops records the PMU still interrupted for) costs its thread
//! [`PMU_SAMPLE_COST_NS`] of stall (system time), as the PMU interrupt and buffer drain would, so
//! numapilot pays for its signal as AutoNUMA pays for hinting faults. The cost is charged as the
//! work is done, epoch by epoch (the expected samples of the bytes accessed at the period in
//! force: `Sim::sample_stall_per_byte`), not when `sample()` drains them: a run that ends during a
//! long wait has paid for the samples of that wait, as a live one would. With the cost set to 0
//! (`set_sample_cost_ns`, used for numad, which reads /proc only) a run sampled every second and
//! one never sampled reach the same state.
//!
//! `apply()` acts like the syscalls: `SetAffinity` moves a thread off a CPU it may no longer use at
//! once (`sched_setaffinity`); `MigratePages` maps the i-th source node to the i-th destination
//! (cycling, like `migrate_pages(2)`'s relative mapping) up to `max_pages` (whole 2 MiB regions:
//! the budget is rounded down to regions); `MoveRanges` moves every region overlapping a range.
//! Each moved region costs its copy time, shared out as stalls over the process's live threads, and
//! its copy traffic, added to the next epoch's bandwidth use. A reference whose pid is unknown, whose
//! starttime differs (pid reused) or whose process has exited is `Vanished`.
//!
//! # Limits
//!
//! `numastat` per node is empty; one VMA per region spec. Memory another process maps (a client's
//! view of the server's buffer) is reported at its owner's address. Sampled accesses cover every
//! byte the model moves (its LLC hits included: a PEBS load-latency threshold would drop those);
//! within a region they are not resolved below 2 MiB, except for buffers smaller than one region
//! that are interleaved page by page (their samples name one 4 KiB page per node). PSI memory
//! comes only from the stalls the model has (page migrations, hinting faults): the model has no
//! reclaim, swap or refaults, which is what the kernel's memory PSI mostly counts.

use std::sync::Arc;

use std::collections::BTreeMap;

use numapilot_observe::parse::meminfo::parse_node_meminfo;
use numapilot_observe::parse::numa_maps::parse_numa_maps;
use numapilot_observe::parse::proc_stat::parse_proc_stat;
use numapilot_observe::parse::psi::parse_psi;
use numapilot_observe::parse::sched::parse_sched;
use numapilot_observe::parse::schedstat::parse_schedstat;
use numapilot_observe::parse::stat::parse_stat;
use numapilot_observe::parse::vmstat::parse_vmstat;
use numapilot_observe::{
    AccessSample, CommKind, CommSample, Counters, MemBandwidth, NodeSample, ProcessSample, PsiSample, Sample,
    ThreadSample,
};
use numapilot_policy::{Action, ActionKind, Host, HostError, Outcome};
use numapilot_topology::{NodeSet, Topology};

use crate::engine::{Sim, SplitMix64};
use crate::kernel::{TaskState, NO_NODE, PAGES_PER_REGION, REGION_BYTES};
use crate::workload::MemPolicySpec;

/// Clock ticks per second of the simulated `/proc` (USER_HZ).
pub const CLOCK_TICKS: u64 = 100;

/// Emulated precise-sampling period: one access sample per this many cache lines touched.
///
/// Default 10 000 lines (640 KB). `perf mem record` samples in frequency mode, 4000 samples/s per
/// CPU by default (`perf record -F`, capped by `kernel.perf_event_max_sample_rate`); a core
/// streaming 2 GB/s touches ~31 M lines/s, so 4 kHz is one sample per ~8 000 lines, and fixed
/// periods used with `perf mem`/`perf c2c -c` are of the same order. Prevents both a signal too
/// sparse to see a thread's pages (100 000) and a sample volume no PMU buffer carries (100).
pub const SAMPLE_PERIOD_LINES: f64 = 10_000.0;

/// Cap on the access samples of one CPU per sampling window: what one of the daemon's per-CPU
/// rings holds between two drains, 2,048 memory-access records (`numapilot_observe::pmu::RING_BYTES`
/// 128 kB, 64-byte records: `pmu::ring_records`). Threads on one CPU share its ring (the CPU a
/// thread is on at the window's end stands for the window's; until 2026-11-29 each thread had a
/// ring of its own, so oversubscribed runs got more samples than the daemon could). Derived, not
/// tuned here: the density the cadence keeps (`numapilot_policy::cadence`, fill in
/// `FILL_LOW..FILL_HIGH` of this) and so the samples per window and their cost follow the
/// daemon's buffer. Until 2026-11-28 it was 4096 (perf's own 512 kB ring) while the daemon's rings
/// held 1,024 records: the simulator sampled up to 4 x denser than the daemon could.
pub const MAX_SAMPLES_PER_CPU: u64 =
    numapilot_observe::pmu::ring_records(numapilot_observe::pmu::MEM_SAMPLE_TYPE) as u64;

/// Cost of one emulated precise access sample to the sampled thread, ns, charged as a stall
/// (system time) per sample taken (emitted or dropped by the cap). Default 2000 (2 µs). An
/// ESTIMATE, not a measurement: a PEBS / IBS / SPE record costs the hardware a few hundred ns to write, and the interrupt that drains
/// the buffer plus perf's handler, amortised over the records it drains, bring it to the order of
/// 1-3 µs per record; the kernel's own budget is of that order (`perf_event_max_sample_rate`
/// 100 000/s at `perf_cpu_time_max_percent` 25% is 2.5 µs per sample, beyond which it logs
/// "perf: interrupt took too long" and lowers the rate). At the cap (2,048 samples per thread per
/// 1 s window) that is 4.1 ms a second, 0.4% of a CPU. Prevents: numapilot getting its access
/// signal free while AutoNUMA pays for its hinting faults (unequal terms).
pub const PMU_SAMPLE_COST_NS: u64 = 2_000;

/// Time constants of PSI's running averages, s: the kernel's avg10/avg60/avg300 are exponential
/// averages over 10, 60 and 300 s windows (`kernel/sched/psi.c`, `calc_avgs`, updated every 2 s;
/// here at every `sample()`, with the decay for the window's length).
const PSI_WINDOWS_S: [f64; 3] = [10.0, 60.0, 300.0];

/// The simulated machine as a policy host.
#[derive(Debug)]
pub struct SimHost {
    sim: Sim,
    /// Generator of the access samples (seeded from the run's seed; the simulation's own
    /// generators are never drawn from here).
    srng: SplitMix64,
    /// Time of the previous `sample()`, ns.
    last_ns: u64,
    /// Units done by each task at the previous `sample()` (for `comm`).
    last_done: Vec<f64>,
    /// Controller bytes and saturated time at the previous `sample()`, per dense node index.
    last_ctrl_bytes: Vec<f64>,
    /// Controller migration-copy bytes at the previous `sample()`, per dense node index.
    last_ctrl_migrate: Vec<f64>,
    last_ctrl_sat: Vec<u64>,
    /// PSI averages (cpu some, memory some, memory full), percent, per window of [`PSI_WINDOWS_S`].
    psi_avg: [[f64; 3]; 3],
    /// PSI totals at the previous `sample()`, ns (cpu some, memory some, memory full).
    last_psi: [f64; 3],
    /// Stall charged to a thread per access sample taken for it, ns ([`PMU_SAMPLE_COST_NS`];
    /// 0 for a policy that reads no PMU samples, see [`SimHost::set_sample_cost_ns`]).
    sample_cost_ns: u64,
    /// The sampling period's multiple of [`SAMPLE_PERIOD_LINES`] for the current wait (the
    /// engine's sampling stretch, `numapilot_policy::cadence`; 1 when not backed off).
    stretch: u32,
    /// The fullest CPU's samples over the last window against [`MAX_SAMPLES_PER_CPU`]
    /// (the ring's fill, `Sample::access_fill`).
    fill: f64,
}

impl SimHost {
    /// Wraps a built simulation.
    pub fn new(sim: Sim) -> Self {
        let nn = sim.kernel.nr_nodes();
        let ntasks = sim.kernel.tasks.len();
        let mut h = Self {
            srng: SplitMix64(sim.seed ^ 0x7065_6273_616d_706c),
            last_ns: sim.now_ns(),
            last_done: vec![0.0; ntasks],
            last_ctrl_bytes: vec![0.0; nn],
            last_ctrl_migrate: vec![0.0; nn],
            last_ctrl_sat: vec![0; nn],
            psi_avg: [[0.0; 3]; 3],
            last_psi: [0.0; 3],
            sample_cost_ns: PMU_SAMPLE_COST_NS,
            stretch: 1,
            fill: 0.0,
            sim,
        };
        h.update_sample_charge();
        h
    }

    /// The stall per byte accessed the simulation charges while this host samples: the cost of
    /// one sample over the bytes it stands for (64-byte lines x the period x the stretch).
    fn update_sample_charge(&mut self) {
        let bytes_per_sample = 64.0 * SAMPLE_PERIOD_LINES * f64::from(self.stretch.max(1));
        self.sim.sample_stall_per_byte = self.sample_cost_ns as f64 / bytes_per_sample;
    }

    /// Sets the stall charged per emulated access sample, ns (default [`PMU_SAMPLE_COST_NS`]).
    /// 0 for a policy that would run no PMU sampling on a live machine (numad reads /proc only),
    /// and for tests that check observation alone changes nothing.
    pub fn set_sample_cost_ns(&mut self, ns: u64) {
        self.sample_cost_ns = ns;
        self.update_sample_charge();
    }

    /// The simulation.
    pub fn sim(&self) -> &Sim {
        &self.sim
    }

    /// The simulation, mutably.
    pub fn sim_mut(&mut self) -> &mut Sim {
        &mut self.sim
    }

    /// Runs epochs until `ns` more simulated time has passed or the run is over; returns false when
    /// it is over.
    pub fn advance(&mut self, ns: u64) -> bool {
        let until = self.sim.now_ns() + ns;
        while self.sim.now_ns() < until {
            if !self.sim.step() {
                return false;
            }
        }
        true
    }

    /// The process index of a live task reference, or `None` (vanished).
    fn resolve(&self, pid: u32, tid: Option<u32>, starttime: u64) -> Option<(usize, Option<usize>)> {
        let p = self.sim.proc_of_pid(pid)?;
        let pr = &self.sim.kernel.procs[p];
        if pr.starttime != starttime || !self.sim.prt[p].started || self.sim.prt[p].finish_ns.is_some() {
            return None;
        }
        match tid {
            None => Some((p, None)),
            Some(tid) => {
                let t = self.sim.task_of_tid(tid)?;
                let task = &self.sim.kernel.tasks[t];
                (task.proc as usize == p && task.state == TaskState::Running).then_some((p, Some(t)))
            }
        }
    }

    /// The resident regions of process `p` overlapping `ranges` (all of them when `ranges` is
    /// empty), in address order without repeats, and the base pages of the ranges no mapping covers.
    fn regions_in(&self, p: usize, ranges: &[(u64, u64)]) -> (Vec<usize>, u64) {
        let pr = &self.sim.kernel.procs[p];
        let mut regions = Vec::new();
        let mut unmapped_pages = 0u64;
        if ranges.is_empty() {
            for &(s, e) in &pr.regions {
                regions.extend((s..e).filter(|&g| self.sim.kernel.regions[g].node != NO_NODE));
            }
            return (regions, 0);
        }
        for &(addr, len) in ranges {
            let mut covered = 0u64;
            for (si, &(s, e)) in pr.regions.iter().enumerate() {
                let base = pr.addrs[si];
                let end = base.saturating_add((e - s) as u64 * REGION_BYTES);
                // Saturating: a range from a policy may reach the top of the address space.
                let (lo, hi) = (addr.max(base), addr.saturating_add(len).min(end));
                if lo >= hi {
                    continue;
                }
                covered += hi - lo;
                let r0 = s + ((lo - base) / REGION_BYTES) as usize;
                let r1 = s + (hi - base).div_ceil(REGION_BYTES) as usize;
                regions.extend((r0..r1.min(e)).filter(|&g| self.sim.kernel.regions[g].node != NO_NODE));
            }
            unmapped_pages += (len - covered.min(len)) / 4096;
        }
        regions.sort_unstable();
        regions.dedup();
        (regions, unmapped_pages)
    }

    /// Charges `stall_ns` in total, shared over the live threads of process `p`.
    fn charge_process(&mut self, p: usize, stall_ns: u64) {
        let live: Vec<usize> = self.sim.kernel.procs[p]
            .tasks
            .iter()
            .copied()
            .filter(|&t| self.sim.kernel.tasks[t].state == TaskState::Running)
            .collect();
        if live.is_empty() {
            return;
        }
        let each = stall_ns / live.len() as u64;
        for t in live {
            self.sim.kernel.tasks[t].stall_ns += each;
        }
    }

    /// Moves the given regions to `to` (kernel id) within a region budget; returns (moved, full).
    fn move_regions(&mut self, p: usize, regions: &[usize], to: u32, budget: &mut u64) -> (u64, u64) {
        let (mut moved, mut full, mut stall) = (0, 0, 0);
        for &g in regions {
            if *budget == 0 {
                break;
            }
            match self.sim.migrate_region(g, to) {
                Ok(Some(c)) => {
                    moved += 1;
                    stall += c.stall_ns;
                    *budget -= 1;
                }
                Ok(None) => {}
                Err(_) => full += 1,
            }
        }
        self.charge_process(p, stall);
        (moved, full)
    }

    /// `/proc/stat` as `show_stat()` writes it: the `cpu` total, one line per online CPU (user,
    /// nice, system, idle, iowait, irq, softirq, steal, guest, guest_nice in USER_HZ ticks), then the
    /// counters. User time is the CPU time tasks ran on the CPU, system time their stalls (page
    /// migrations, hinting faults), idle the rest of the time since the start.
    fn proc_stat(&self) -> String {
        let k = &self.sim.kernel;
        let now = self.sim.now_ns();
        let tick = 1_000_000_000 / CLOCK_TICKS;
        let mut lines = String::new();
        let (mut tu, mut ts, mut ti) = (0u64, 0u64, 0u64);
        for c in k.topo.cpus.iter().filter(|c| c.online) {
            let (u, s) = (self.sim.cpu_user_ns[c.id as usize], self.sim.cpu_sys_ns[c.id as usize]);
            let idle = now.saturating_sub(u + s);
            let (u, s, i) = (u / tick, s / tick, idle / tick);
            tu += u;
            ts += s;
            ti += i;
            lines.push_str(&format!("cpu{} {u} 0 {s} {i} 0 0 0 0 0 0\n", c.id));
        }
        // Forks since boot: every task started (threads are clones, counted like processes).
        let started = k.tasks.iter().filter(|t| t.state != TaskState::NotStarted).count();
        let running = k.tasks.iter().filter(|t| t.state == TaskState::Running).count();
        let ctxt: u64 = k.tasks.iter().map(|t| t.timeslices + t.cpu_migrations).sum();
        format!(
            "cpu  {tu} 0 {ts} {ti} 0 0 0 0 0 0\n{lines}ctxt {ctxt}\nbtime 0\nprocesses {started}\nprocs_running {running}\nprocs_blocked 0\n"
        )
    }

    /// `/proc/pressure/cpu` and `memory` from the engine's stall totals: `total` in µs, the
    /// averages as exponential averages over 10/60/300 s updated with each window's stall share.
    fn psi(&mut self) -> Result<PsiSample, HostError> {
        let window = self.sim.now_ns().saturating_sub(self.last_ns) as f64;
        let mut text = Vec::new();
        for (i, &total) in self.sim.psi_ns.iter().enumerate() {
            if window > 0.0 {
                let pct = (100.0 * (total - self.last_psi[i]) / window).clamp(0.0, 100.0);
                for (w, &span) in PSI_WINDOWS_S.iter().enumerate() {
                    let keep = (-(window / 1e9) / span).exp();
                    self.psi_avg[i][w] = self.psi_avg[i][w] * keep + pct * (1.0 - keep);
                }
            }
            self.last_psi[i] = total;
            let a = self.psi_avg[i];
            text.push(format!("avg10={:.2} avg60={:.2} avg300={:.2} total={}", a[0], a[1], a[2], (total / 1e3) as u64));
        }
        // The cpu file's full line is all zeros at system level (psi.rst).
        let cpu = format!("some {}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", text[0]);
        let memory = format!("some {}\nfull {}\n", text[1], text[2]);
        Ok(PsiSample {
            cpu: Some(parse_psi(&cpu).map_err(|e| unavailable("/proc/pressure/cpu", e))?),
            memory: Some(parse_psi(&memory).map_err(|e| unavailable("/proc/pressure/memory", e))?),
            io: None,
        })
    }

    /// The emulated precise access samples of the window since the previous `sample()` (see the
    /// module essay), sorted by (pid, tid, addr).
    fn access_samples(&mut self) -> Vec<AccessSample> {
        let window = self.sim.take_access_window();
        self.fill = 0.0;
        let sim = &self.sim;
        let k = &sim.kernel;
        let rng = &mut self.srng;
        let period = SAMPLE_PERIOD_LINES * f64::from(self.stretch.max(1));
        let live = |p: usize| sim.prt[p].started && sim.prt[p].finish_ns.is_none();
        // Samples per (task, range), stochastically rounded; then capped per CPU.
        let mut want: Vec<(usize, u32, u64, u64)> = Vec::new();
        // Per listed task: its entries in `want`, its total and its CPU.
        let mut spans: Vec<(std::ops::Range<usize>, u64, u32)> = Vec::new();
        let mut i = 0;
        while i < window.len() {
            let t = window[i].0;
            let j = i + window[i..].iter().take_while(|w| w.0 == t).count();
            // Threads the sample lists: live processes' running threads (one that exited in the
            // window has vanished, like its /proc entry).
            if live(k.tasks[t].proc as usize) && k.tasks[t].state == TaskState::Running {
                let first = want.len();
                for &(_, range, bytes, last) in &window[i..j] {
                    let x = bytes / 64.0 / period;
                    let n = x.floor() as u64 + u64::from(rng.unit() < x.fract());
                    if n > 0 {
                        want.push((t, range, n, last));
                    }
                }
                let total: u64 = want[first..].iter().map(|w| w.2).sum();
                spans.push((first..want.len(), total, k.tasks[t].cpu));
            }
            i = j;
        }
        // The ring is the CPU's: the threads on one CPU share its MAX_SAMPLES_PER_CPU records, each
        // keeping its share of what they sampled together (the CPU a thread is on now stands for
        // the window's).
        let mut per_cpu: BTreeMap<u32, u64> = BTreeMap::new();
        for &(_, total, cpu) in &spans {
            *per_cpu.entry(cpu).or_default() += total;
        }
        self.fill = per_cpu.values().map(|&n| n as f64 / MAX_SAMPLES_PER_CPU as f64).fold(0.0, f64::max);
        for (span, total, cpu) in spans {
            let on_cpu = per_cpu[&cpu];
            if on_cpu <= MAX_SAMPLES_PER_CPU {
                continue;
            }
            let cap = (MAX_SAMPLES_PER_CPU * total / on_cpu).max(1);
            // Scaled down evenly, but every range the thread touched keeps at least one sample (a
            // plain floor would drop a small shared buffer beside a big private one:
            // 2 x 2048 / 10 002 = 0); the excess that floor costs comes off the largest count, so
            // the cap still holds.
            let w = &mut want[span];
            for x in w.iter_mut() {
                x.2 = (x.2 * cap / total).max(1);
            }
            let sum: u64 = w.iter().map(|x| x.2).sum();
            if let Some(big) = w.iter_mut().max_by_key(|x| x.2) {
                big.2 = big.2.saturating_sub(sum.saturating_sub(cap)).max(1);
            }
        }
        // Resident regions of sparse ranges, listed once (rejection sampling would mostly miss).
        let mut sparse: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        let mut out: Vec<AccessSample> = Vec::new();
        // One thread at a time (`want` is in task order, which is (pid, tid) order): draw its
        // samples as (addr, phys, node, last), sort by address, merge equal addresses.
        let mut draws: Vec<(u64, u64, u32, u64)> = Vec::new();
        let mut i = 0;
        while i < want.len() {
            let t = want[i].0;
            let j = i + want[i..].iter().take_while(|w| w.0 == t).count();
            draws.clear();
            for &(_, range, n, last) in &want[i..j] {
                let r = &sim.ranges[range as usize];
                if r.allocated == 0 {
                    continue;
                }
                let len = r.end - r.start;
                let interleave = sim.page_interleave(r);
                let dense = r.allocated as usize * 8 >= len;
                if !dense && !sparse.contains_key(&range) {
                    let list = (r.start..r.end).filter(|&g| k.regions[g].node != NO_NODE).collect();
                    sparse.insert(range, list);
                }
                for _ in 0..n {
                    let g = if dense {
                        // Uniform over the range's slots until a resident one (>= 1/8 are resident).
                        let mut g = r.start + rng.below(len);
                        while k.regions[g].node == NO_NODE {
                            g = r.start + rng.below(len);
                        }
                        g
                    } else {
                        let list = &sparse[&range];
                        list[rng.below(list.len())]
                    };
                    let reg = &k.regions[g];
                    let owner = &k.procs[reg.proc as usize];
                    let si = owner.regions.partition_point(|&(_, e)| e <= g);
                    let mut addr = owner.addrs[si] + (g - owner.regions[si].0) as u64 * REGION_BYTES;
                    let mut phys = (g as u64) << 21;
                    let mut node = reg.node;
                    if let Some(w) = &interleave {
                        // A buffer smaller than a region interleaved page by page: the node by the
                        // interleave weights, one 4 KiB page per node standing for its pages there.
                        let x = rng.unit();
                        let mut acc = 0.0;
                        let ni = w.iter().position(|&s| {
                            acc += s;
                            x < acc
                        });
                        let ni = ni.unwrap_or_else(|| w.iter().rposition(|&s| s > 0.0).unwrap_or(0));
                        node = k.topo.nodes[ni].id;
                        addr += ni as u64 * 4096;
                        phys += ni as u64 * 4096;
                    }
                    draws.push((addr, phys, node, last));
                }
            }
            draws.sort_unstable();
            let task = &k.tasks[t];
            let pid = k.procs[task.proc as usize].pid;
            for &(addr, phys, node, last) in &draws {
                match out.last_mut() {
                    Some(a) if a.tid == task.tid && a.addr == addr => {
                        a.count += 1;
                        a.last_ns = a.last_ns.max(last);
                    }
                    _ => out.push(AccessSample {
                        pid,
                        tid: task.tid,
                        addr,
                        phys: Some(phys),
                        node,
                        count: 1,
                        last_ns: last,
                    }),
                }
            }
            i = j;
        }
        out
    }

    /// The workload's closed loops as socket peers: for every Pace pair, each thread of side a
    /// with each thread of side b that did work since the previous `sample()`; `events` = a's
    /// units in the window shared out over b's threads by their units (for a server and its
    /// clients at ratio 1: that client's requests).
    fn comm_samples(&mut self) -> Vec<CommSample> {
        let sim = &self.sim;
        let k = &sim.kernel;
        let mut out = Vec::new();
        let delta = |t: usize| (sim.trt[t].done - self.last_done[t]).max(0.0);
        for pc in &sim.spec.pacing {
            let (Some(a), Some(b)) = (sim.spec.find_group(&pc.a), sim.spec.find_group(&pc.b)) else {
                continue;
            };
            let side = |(sp, g): (usize, usize)| -> Vec<usize> {
                let Some(p) = sim.prt.iter().position(|r| r.spec == sp) else { return Vec::new() };
                if !sim.prt[p].started || sim.prt[p].finish_ns.is_some() {
                    return Vec::new();
                }
                k.procs[p].tasks.iter().copied().filter(|&t| k.tasks[t].group as usize == g && delta(t) > 0.0).collect()
            };
            let (ta, tb) = (side(a), side(b));
            let sum_b: f64 = tb.iter().map(|&t| delta(t)).sum();
            for &x in &ta {
                for &y in &tb {
                    let events = (delta(x) * delta(y) / sum_b).round() as u64;
                    if events == 0 {
                        continue;
                    }
                    let end = |t: usize| (k.procs[k.tasks[t].proc as usize].pid, k.tasks[t].tid);
                    out.push(CommSample { a: end(x), b: end(y), kind: CommKind::Socket, events });
                }
            }
        }
        for (t, tr) in self.sim.trt.iter().enumerate() {
            self.last_done[t] = tr.done;
        }
        out.sort();
        out
    }

    fn stat_line(&self, id: u32, comm: &str, t: TaskLike) -> String {
        // The 52 fields of proc_pid_stat (fs/proc/array.c, do_task_stat), in order.
        format!(
            "{id} ({comm}) {state} 1 {pgrp} {pgrp} 0 -1 4194304 0 0 0 0 {utime} {stime} 0 0 20 0 {threads} 0 {start} {vsize} \
             {rss} 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 {cpu} 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
            state = t.state,
            pgrp = t.pgrp,
            utime = t.utime_ns / (1_000_000_000 / CLOCK_TICKS),
            stime = t.stime_ns / (1_000_000_000 / CLOCK_TICKS),
            threads = t.threads,
            start = t.starttime,
            vsize = t.vsize,
            rss = t.rss_pages,
            cpu = t.cpu,
        )
    }
}

/// What a stat line needs of a task or process.
#[derive(Debug, Clone, Copy)]
struct TaskLike {
    state: char,
    pgrp: u32,
    utime_ns: u64,
    stime_ns: u64,
    threads: u32,
    starttime: u64,
    vsize: u64,
    rss_pages: u64,
    cpu: u32,
}

fn policy_string(p: &MemPolicySpec) -> String {
    match p {
        MemPolicySpec::Local => "default".into(),
        MemPolicySpec::Bind { nodes } => format!("bind:{nodes}"),
        MemPolicySpec::Preferred { node } => format!("prefer:{node}"),
        MemPolicySpec::PreferredMany { nodes } => format!("prefer (many):{nodes}"),
        MemPolicySpec::Interleave { nodes } => format!("interleave:{nodes}"),
        MemPolicySpec::WeightedInterleave { nodes, .. } => format!("weighted interleave:{nodes}"),
    }
}

fn unavailable(what: &str, e: impl std::fmt::Display) -> HostError {
    HostError::Unavailable(format!("simulated {what} did not parse: {e}"))
}

impl Host for SimHost {
    fn topology(&self) -> &Topology {
        &self.sim.kernel.topo
    }

    fn now_ns(&self) -> u64 {
        self.sim.now_ns()
    }

    fn set_sampling_stretch(&mut self, stretch: u32) {
        self.stretch = stretch.max(1);
        self.update_sample_charge();
    }

    fn sampling_stretch(&self) -> Option<u32> {
        Some(self.stretch)
    }

    fn sample(&mut self) -> Result<Sample, HostError> {
        let accesses = self.access_samples();
        let comm = self.comm_samples();
        let psi = self.psi()?;
        let k = &self.sim.kernel;
        let node_ids: Vec<u32> = k.topo.nodes.iter().map(|n| n.id).collect();
        let all_nodes: Arc<NodeSet> = Arc::new(k.topo.node_ids());
        let an = self.sim.autonuma();
        let mut processes = Vec::new();
        for (p, pr) in k.procs.iter().enumerate() {
            let rt = &self.sim.prt[p];
            if !rt.started || rt.finish_ns.is_some() {
                continue;
            }
            let live: Vec<usize> =
                pr.tasks.iter().copied().filter(|&t| k.tasks[t].state == TaskState::Running).collect();
            if live.is_empty() {
                continue;
            }
            // numa_maps: one VMA per region spec.
            let mut maps = String::new();
            let mut rss_pages = 0;
            for (si, &(s, e)) in pr.regions.iter().enumerate() {
                let mut per_node = vec![0u64; node_ids.len()];
                for r in &k.regions[s..e] {
                    if r.node != NO_NODE {
                        per_node[k.nidx(r.node)] += PAGES_PER_REGION;
                    }
                }
                let rs = &self.sim.rspecs[rt.rspecs[si]];
                let mut line = format!("{:x} {}", pr.addrs[si], policy_string(&rs.policy));
                let pages: u64 = per_node.iter().sum();
                rss_pages += pages;
                if pages > 0 {
                    line.push_str(&format!(" anon={pages} dirty={pages} active=0"));
                    for (i, &n) in per_node.iter().enumerate() {
                        if n > 0 {
                            line.push_str(&format!(" N{}={n}", node_ids[i]));
                        }
                    }
                    line.push_str(" kernelpagesize_kB=4");
                }
                maps.push_str(&line);
                maps.push('\n');
            }
            let numa_maps = parse_numa_maps(&maps).map_err(|e| unavailable("numa_maps", e))?;
            let vsize: u64 = pr.regions.iter().map(|&(s, e)| (e - s) as u64 * REGION_BYTES).sum();
            let main_cpu = k.tasks[live[0]].cpu;
            let (ut, st) =
                pr.tasks.iter().fold((0, 0), |(u, s), &t| (u + k.tasks[t].utime_ns, s + k.tasks[t].stime_ns));
            let proc_stat = self.stat_line(
                pr.pid,
                &pr.comm,
                TaskLike {
                    state: 'R',
                    pgrp: pr.pid,
                    utime_ns: ut,
                    stime_ns: st,
                    threads: live.len() as u32,
                    starttime: pr.starttime,
                    vsize,
                    rss_pages,
                    cpu: main_cpu,
                },
            );
            let stat = parse_stat(&proc_stat).map_err(|e| unavailable("stat", e))?;
            let mut threads = Vec::new();
            for &t in &live {
                let task = &k.tasks[t];
                let line = self.stat_line(
                    task.tid,
                    &pr.comm,
                    TaskLike {
                        state: 'R',
                        pgrp: pr.pid,
                        utime_ns: task.utime_ns,
                        stime_ns: task.stime_ns,
                        threads: live.len() as u32,
                        starttime: pr.starttime,
                        vsize,
                        rss_pages,
                        cpu: task.cpu,
                    },
                );
                let tstat = parse_stat(&line).map_err(|e| unavailable("task stat", e))?;
                let sched = match an {
                    Some(a) => {
                        let cur = k.node_of_cpu(task.cpu);
                        match a.sched_numa_block(task.tid, &node_ids, cur) {
                            Some(block) => {
                                let run = task.utime_ns + task.stime_ns;
                                let text = format!(
                                    "{} ({}, #threads: {})\n{}\n{:<45}:{:>14}.{:06}\n{:<45}:{:>21}\n{:<45}:{:>21}\n{block}",
                                    pr.comm,
                                    task.tid,
                                    live.len(),
                                    "-".repeat(67),
                                    "se.sum_exec_runtime",
                                    run / 1_000_000,
                                    run % 1_000_000,
                                    "se.nr_migrations",
                                    task.cpu_migrations,
                                    "clock-delta",
                                    0
                                );
                                Some(Box::new(parse_sched(&text).map_err(|e| unavailable("sched", e))?))
                            }
                            None => None,
                        }
                    }
                    None => None,
                };
                // schedstat: run time, run delay, switch-ins (proc_pid_schedstat in fs/proc/base.c).
                let line = format!(
                    "{} {} {}\n",
                    task.utime_ns + task.stime_ns,
                    task.wait_ns,
                    task.timeslices + task.cpu_migrations
                );
                let schedstat = parse_schedstat(&line).map_err(|e| unavailable("schedstat", e))?;
                threads.push(ThreadSample {
                    tid: task.tid,
                    stat: tstat,
                    cpus_allowed: Arc::new(task.allowed.clone()),
                    mems_allowed: all_nodes.clone(),
                    voluntary_ctxt_switches: None,
                    nonvoluntary_ctxt_switches: None,
                    sched,
                    schedstat: Some(schedstat),
                });
            }
            let node_usage = numa_maps.usage_by_node();
            processes.push(ProcessSample {
                pid: pr.pid,
                starttime: pr.starttime,
                comm: pr.comm.clone(),
                kernel_thread: false,
                read_ns: self.sim.now_ns(),
                stat,
                rss_kb: Some(rss_pages * 4),
                numa_maps: Some(numa_maps),
                numa_maps_error: None,
                node_usage,
                threads,
                cpuset_cpus: pr.cpuset.as_ref().map(|c| Arc::new(c.clone())),
            });
        }
        let now = self.sim.now_ns();
        let window_ns = now.saturating_sub(self.last_ns);
        let mut nodes = Vec::new();
        for (i, n) in k.topo.nodes.iter().enumerate() {
            let mem_bw = (k.node_capacity[i] > 0).then(|| MemBandwidth {
                bytes: (self.sim.ctrl_bytes[i] - self.last_ctrl_bytes[i]).max(0.0) as u64,
                window_ns,
                saturated_ns: self.sim.ctrl_saturated_ns[i] - self.last_ctrl_sat[i],
                capacity_bytes_per_s: (self.sim.model.capacity[i] * 1e9) as u64,
                migrate_bytes: (self.sim.ctrl_migrate_bytes[i] - self.last_ctrl_migrate[i]).max(0.0) as u64,
            });
            let total_kb = n.mem_total_kb;
            let used_kb = (k.node_used[i] * REGION_BYTES / 1024).min(total_kb);
            let text = format!(
                "Node {id} MemTotal: {total_kb:>15} kB\nNode {id} MemFree: {:>16} kB\nNode {id} MemUsed: {used_kb:>16} kB\n",
                total_kb - used_kb,
                id = n.id
            );
            let (_, meminfo) = parse_node_meminfo(&text).map_err(|e| unavailable("node meminfo", e))?;
            nodes.push(NodeSample {
                node: n.id,
                cpus: n.cpus.clone(),
                meminfo,
                numastat: Counters::default(),
                vmstat: Counters::default(),
                mem_bw,
            });
        }
        let cpu = Some(parse_proc_stat(&self.proc_stat()).map_err(|e| unavailable("/proc/stat", e))?);
        let vm = match an {
            Some(a) => {
                let c = a.counters();
                format!(
                    "numa_pte_updates {}\nnuma_huge_pte_updates 0\nnuma_hint_faults {}\nnuma_hint_faults_local {}\nnuma_pages_migrated {}\n",
                    c.numa_pte_updates, c.numa_hint_faults, c.numa_hint_faults_local, c.numa_pages_migrated
                )
            }
            None => String::new(),
        };
        let vmstat = parse_vmstat(&format!("{vm}pgmigrate_success {}\n", k.pages_migrated))
            .map_err(|e| unavailable("vmstat", e))?;
        self.last_ns = now;
        self.last_ctrl_bytes.clone_from(&self.sim.ctrl_bytes);
        self.last_ctrl_migrate.clone_from(&self.sim.ctrl_migrate_bytes);
        self.last_ctrl_sat.clone_from(&self.sim.ctrl_saturated_ns);
        Ok(Sample {
            clock_ticks_per_sec: CLOCK_TICKS,
            processes,
            nodes,
            cpu,
            vmstat,
            psi,
            numa_balancing: Some(self.sim.kernel.numa_balancing),
            accesses,
            // The window's samples were drawn at this stretch (set before the wait).
            access_period_scale: self.stretch.max(1),
            access_fill: self.fill,
            comm,
            ..Sample::empty_at(now)
        })
    }

    fn apply(&mut self, action: &Action) -> Outcome {
        let t = &action.target;
        let Some((p, task)) = self.resolve(t.pid, t.tid, t.starttime) else {
            return Outcome::Vanished;
        };
        let node_ids = self.sim.kernel.topo.node_ids();
        match &action.kind {
            ActionKind::SetAffinity { cpus } => {
                let online = self.sim.kernel.topo.online_cpus();
                let mut allowed = cpus.intersection(&online);
                // The kernel cuts a mask to the task's cpuset and refuses one with no CPU of it
                // (EINVAL, __sched_setaffinity).
                if let Some(cs) = &self.sim.kernel.procs[p].cpuset {
                    allowed = allowed.intersection(cs);
                }
                if allowed.is_empty() {
                    return Outcome::Refused {
                        message: format!("no online CPU of its cpuset in {cpus} (online: {online})"),
                    };
                }
                let targets: Vec<usize> = match task {
                    Some(t) => vec![t],
                    None => self.sim.kernel.procs[p].tasks.clone(),
                };
                // Each displaced thread goes to the least-loaded allowed CPU, counting the threads
                // placed before it (the kernel spreads a new mask's threads the same way,
                // cpumask_any_and_distribute), so a bound process does not pile onto one CPU.
                let mut load = crate::kernel::sched::Sched::loads(&self.sim.kernel);
                for t in targets {
                    let tk = &mut self.sim.kernel.tasks[t];
                    tk.allowed = allowed.clone();
                    if tk.state != TaskState::Exited && !allowed.contains(tk.cpu) {
                        let dst = allowed
                            .iter()
                            .min_by(|&a, &b| {
                                load[a as usize]
                                    .partial_cmp(&load[b as usize])
                                    .unwrap_or(std::cmp::Ordering::Equal)
                                    .then(a.cmp(&b))
                            })
                            .expect("non-empty");
                        // Not-started threads count too: they will run where they are put.
                        if tk.state == TaskState::Running {
                            load[tk.cpu as usize] -= tk.duty;
                        }
                        load[dst as usize] += tk.duty;
                        tk.cpu = dst;
                        tk.cpu_migrations += 1;
                    }
                }
                Outcome::Applied { pages_moved: 0 }
            }
            ActionKind::MigratePages { from, to, max_pages } => {
                if let Some(refused) = unknown_node(from.iter().chain(to.iter()), &node_ids) {
                    return refused;
                }
                if to.is_empty() || from.is_empty() {
                    return Outcome::Refused { message: "empty source or destination node set".into() };
                }
                let from_v: Vec<u32> = from.iter().collect();
                let to_v: Vec<u32> = to.iter().collect();
                let mut budget = max_pages.map_or(u64::MAX, |m| m / PAGES_PER_REGION);
                let (mut moved, mut full) = (0, 0);
                let (first, last) = {
                    let pr = &self.sim.kernel.procs[p];
                    (pr.first_region, pr.regions.last().map_or(pr.first_region, |r| r.1))
                };
                for (i, &src) in from_v.iter().enumerate() {
                    let dst = to_v[i % to_v.len()];
                    if src == dst {
                        continue;
                    }
                    let regions: Vec<usize> =
                        (first..last).filter(|&g| self.sim.kernel.regions[g].node == src).collect();
                    let (m, f) = self.move_regions(p, &regions, dst, &mut budget);
                    moved += m;
                    full += f;
                }
                page_outcome(moved, full, 0)
            }
            ActionKind::MoveRanges { ranges, to } => {
                if let Some(refused) = unknown_node(std::iter::once(*to), &node_ids) {
                    return refused;
                }
                let (regions, unmapped_pages) = self.regions_in(p, ranges);
                let mut budget = u64::MAX;
                let (moved, full) = self.move_regions(p, &regions, *to, &mut budget);
                page_outcome(moved, full, unmapped_pages)
            }
            ActionKind::Interleave { ranges, nodes, weights, max_pages } => {
                if let Some(refused) = unknown_node(nodes.iter(), &node_ids) {
                    return refused;
                }
                let dests: Vec<u32> = nodes.iter().collect();
                if dests.is_empty() || (!weights.is_empty() && weights.len() != dests.len()) {
                    return Outcome::Refused {
                        message: format!(
                            "interleave over {nodes}: {} weights for {} nodes",
                            weights.len(),
                            dests.len()
                        ),
                    };
                }
                let w: Vec<u64> = if weights.is_empty() {
                    vec![1; dests.len()]
                } else {
                    weights.iter().map(|&x| u64::from(x)).collect()
                };
                if w.iter().all(|&x| x == 0) {
                    return Outcome::Refused { message: "interleave weights are all 0".into() };
                }
                let (regions, unmapped_pages) = self.regions_in(p, ranges);
                // Weighted round-robin over the regions in address order: region i goes to the
                // destination whose cumulative weight interval holds i mod the total weight.
                let total: u64 = w.iter().sum();
                let mut per_dest: Vec<Vec<usize>> = vec![Vec::new(); dests.len()];
                for (i, &g) in regions.iter().enumerate() {
                    let mut slot = i as u64 % total;
                    let d = w
                        .iter()
                        .position(|&x| {
                            if slot < x {
                                true
                            } else {
                                slot -= x;
                                false
                            }
                        })
                        .unwrap_or(0);
                    if self.sim.kernel.regions[g].node != dests[d] {
                        per_dest[d].push(g);
                    }
                }
                let mut budget = max_pages.map_or(u64::MAX, |m| m / PAGES_PER_REGION);
                let (mut moved, mut full) = (0, 0);
                for (d, regs) in per_dest.iter().enumerate() {
                    let (m, f) = self.move_regions(p, regs, dests[d], &mut budget);
                    moved += m;
                    full += f;
                }
                page_outcome(moved, full, unmapped_pages)
            }
        }
    }
}

/// The refusal for the first node of `nodes` that is not a node of this machine, if any.
fn unknown_node(mut nodes: impl Iterator<Item = u32>, node_ids: &NodeSet) -> Option<Outcome> {
    nodes
        .find(|&n| !node_ids.contains(n))
        .map(|bad| Outcome::Refused { message: format!("node {bad} is not a node of this machine ({node_ids})") })
}

/// The outcome of a page action: `moved` regions moved, `full` regions refused for want of room on
/// the destination (`ENOMEM`), `unmapped_pages` base pages no mapping covered (`EFAULT`).
fn page_outcome(moved: u64, full: u64, unmapped_pages: u64) -> Outcome {
    let pages_moved = moved * PAGES_PER_REGION;
    let mut failed = Vec::new();
    if full > 0 {
        failed.push(("ENOMEM".to_string(), full * PAGES_PER_REGION));
    }
    if unmapped_pages > 0 {
        failed.push(("EFAULT".to_string(), unmapped_pages));
    }
    if failed.is_empty() {
        Outcome::Applied { pages_moved }
    } else {
        Outcome::Partial { pages_moved, failed }
    }
}
