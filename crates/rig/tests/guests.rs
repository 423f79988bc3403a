//! Rig tests: numapilot against Debian's numactl/numastat and the kernel's own files, in real multi-node guests.
//!
//! Each guest (2 nodes; 4 nodes with the article's 10/11/20 distances, an NVMe controller on node 1 and a network
//! card on node 2; 8 nodes with a memory-only node; and the 2-node one again on Debian 12's own 6.1 kernel) boots
//! once, on first use, and runs `rig/scenarios/checks.sh`;
//! every test below then judges one claim from that guest's evidence with the pure functions of
//! `numapilot_rig::checks`. Skipped (with a message) unless `NUMAPILOT_RIG=1`; scripts/test.sh always sets it.
//! With the variable set, a missing QEMU, kernel or package that cannot be installed is a failure, not a skip.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use numapilot_rig::checks::{
    check_placement, compare_exact, compare_hardware, compare_sandwiched, parse_hardware, parse_list, parse_numa_maps,
    ThreadFiles,
};
use numapilot_rig::{GuestRun, GuestSpec, KernelSeries, PciKind, Rig, RigOptions};

const CHECKS: &str = include_str!("../../../rig/scenarios/checks.sh");

/// Free memory may move between the reference read and ours, MiB. Default 8: the two commands run back to back
/// in an idle guest; kernel allocations in between (page tables, slab for the new process) are well under that,
/// and a wrong size or CPU list is never that close by accident since those lines must match exactly.
const FREE_DRIFT_MB: i64 = 8;

/// How far a figure of ours may lie outside the range of the two numastat reads around it, in pages (the
/// compatibility table's unit; 4 KiB each). Default 256 pages (1 MiB), from measurements: what moves between the
/// three commands without moving monotonically is each command's own memory while it reads the files (anonymous
/// pages, relocated data of the binary, page tables, stack); ours put `Active(anon)` 0.55 MB above both numastat
/// reads in the 2-node guest (release build) and AnonPages 0.39 MB on the host (debug build). Rows that count file
/// pages ([`BINARY_ROWS`]) may also hold our whole binary (mapped while ours reads, its touched pages activated;
/// measured in the 4- and 8-node guests: `Active` 0.53 MB above both reads): its size is added there. Anything
/// wrong in our arithmetic or row placement (a kB line read as pages, a missed huge page multiplier, another
/// node's column) is off by far more. Every row but the free ones also gets our binary's relocated data
/// ([`relocated_pages`]), which grows with the program.
const SANDWICH_TOL_PAGES: f64 = 256.0;

/// numastat -m rows that count the reading process's own binary pages.
const BINARY_ROWS: [&str; 5] = ["Mapped", "Active", "Inactive", "Active(file)", "Inactive(file)"];

/// numastat -m rows of a node's free memory, which every allocation on the node moves (the reading process's
/// own heap, stack, page tables and faulted-in pages among them): judged with the free-memory drift the
/// hardware table allows ([`FREE_DRIFT_MB`]), not [`SANDWICH_TOL_PAGES`]. Measured: a fresh-clone `.ci/run` at
/// 0f2eba4 read node 3's `MemFree` 3.9 MB below the numastat read before ours and 1.9 MB below the one after, in
/// the 8-node guest (one failure in seven CI runs that day); a wrong unit or column is off by far more, and the
/// other rows keep the tight bound.
const FREE_ROWS: [&str; 2] = ["MemFree", "MemUsed"];

/// Memory the bound toucher touches (the scenario's `--mb 16`), bytes.
const BOUND_TOUCH_BYTES: u64 = 16 << 20;

fn enabled() -> bool {
    static ONCE: std::sync::Once = std::sync::Once::new();
    match std::env::var("NUMAPILOT_RIG") {
        Ok(v) if v == "1" => true,
        _ => {
            // Written to the stderr handle, not with eprintln!, so the test harness does not swallow it.
            ONCE.call_once(|| {
                use std::io::Write;
                let _ = writeln!(
                    std::io::stderr(),
                    "rig tests SKIPPED: set NUMAPILOT_RIG=1 to boot the QEMU guests (scripts/test.sh always does)"
                );
            });
            false
        }
    }
}

fn rig(series: KernelSeries) -> &'static Rig {
    static RIGS: [OnceLock<Result<Rig, String>>; 2] = [OnceLock::new(), OnceLock::new()];
    let slot = match series {
        KernelSeries::Lts612 => &RIGS[0],
        KernelSeries::Debian12 => &RIGS[1],
    };
    slot.get_or_init(|| match Rig::prepare(&RigOptions { kernel: series, ..RigOptions::default() }) {
        Ok((rig, t)) => {
            eprintln!("rig prepared: {t:?}, kernel {}", rig.kernel().origin);
            Ok(rig)
        }
        Err(e) => Err(e.to_string()),
    })
    .as_ref()
    .unwrap_or_else(|e| panic!("rig ({series:?}) could not be prepared: {e}"))
}

/// The 2-node guest again, on Debian 12's own kernel (6.1 LTS): the kernel most Debian servers run, from before
/// 6.2 changed what `sched_setaffinity` keeps. Every claim the preset guests check is checked on it too.
fn two_node_debian12() -> GuestSpec {
    let mut spec = GuestSpec::two_node();
    spec.name = "2node-debian12".into();
    spec
}

/// The kernel series a guest of this name boots.
fn series_of(name: &str) -> KernelSeries {
    if name == two_node_debian12().name {
        KernelSeries::Debian12
    } else {
        KernelSeries::Lts612
    }
}

fn boot_one(spec: &GuestSpec) -> Result<GuestRun, String> {
    let run = rig(series_of(&spec.name)).boot(spec, "", CHECKS, &[]).map_err(|e| e.to_string())?;
    eprintln!(
        "guest {}: userspace after {:.2} s, wall {} ms, {} sections",
        run.guest,
        run.boot_s.unwrap_or(f64::NAN),
        run.wall_ms,
        run.sections.len()
    );
    if run.scenario_rc != 0 {
        return Err(format!("scenario exit {}; console tail:\n{}", run.scenario_rc, run.console_tail()));
    }
    Ok(run)
}

/// All preset guests and the 2-node one on Debian 12's kernel, booted at once on first use. Each QEMU runs its
/// vCPUs on one host thread (single-threaded TCG), so three guests keep a 2-core host busy; booting them one by one
/// (as tests would, each waiting on its own guest) took about 65 s where this takes about half.
fn guests() -> &'static BTreeMap<String, Result<GuestRun, String>> {
    static ALL: OnceLock<BTreeMap<String, Result<GuestRun, String>>> = OnceLock::new();
    ALL.get_or_init(|| {
        // Prepared once each, before the threads start.
        rig(KernelSeries::Lts612);
        rig(KernelSeries::Debian12);
        std::thread::scope(|s| {
            let handles: Vec<_> = GuestSpec::presets()
                .into_iter()
                .chain([two_node_debian12()])
                .map(|spec| (spec.name.clone(), s.spawn(move || boot_one(&spec))))
                .collect();
            handles
                .into_iter()
                .map(|(name, h)| (name, h.join().unwrap_or_else(|_| Err("boot thread panicked".into()))))
                .collect()
        })
    })
}

fn boot(name: &str) -> &'static GuestRun {
    guests()
        .get(name)
        .unwrap_or_else(|| panic!("no preset guest {name}"))
        .as_ref()
        .unwrap_or_else(|e| panic!("guest {name} could not be run: {e}"))
}

/// Text of a section whose command must have succeeded.
fn ok_text(run: &GuestRun, name: &str) -> String {
    let s = run.section(name).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.rc, 0, "guest {}: section {name} exit {}; stderr: {}", run.guest, s.rc, s.stderr());
    s.stdout()
}

fn threads(run: &GuestRun, prefix: &str) -> Vec<ThreadFiles> {
    ok_text(run, &format!("{prefix}-tids"))
        .split_whitespace()
        .map(|tid| ThreadFiles {
            tid: tid.parse().expect("tid"),
            stat: ok_text(run, &format!("{prefix}-task-{tid}-stat")),
            status: ok_text(run, &format!("{prefix}-task-{tid}-status")),
        })
        .collect()
}

/// The process behind `NAME-start` became ready (else: why not, with its own output).
fn started(run: &GuestRun, name: &str) {
    let s = run.section(&format!("{name}-start")).unwrap_or_else(|e| panic!("{e}"));
    let why = match s.rc {
        0 => return,
        1 => "the command exited before touching its memory",
        _ => "timed out",
    };
    panic!("guest {}: {name}: {why}; its output:\n{}", run.guest, s.stderr());
}

// --- the claims, each a function of one guest's evidence -----------------------------------------------------

/// The guest kernel sees the topology we asked QEMU for (checked through Debian's numactl): the rig itself works.
fn guest_is_the_spec(run: &GuestRun, spec: &GuestSpec) {
    let hw = parse_hardware(&ok_text(run, "hw")).unwrap();
    let want: BTreeMap<u32, Vec<u32>> =
        (0..spec.nodes.len()).map(|n| (n as u32, spec.node_cpus(n).collect())).collect();
    assert_eq!(hw.cpus, want, "guest {}: CPUs per node", run.guest);
    let d: Vec<Vec<u32>> =
        (0..spec.nodes.len()).map(|a| (0..spec.nodes.len()).map(|b| spec.distance(a, b)).collect()).collect();
    assert_eq!(hw.distances, d, "guest {}: distance matrix", run.guest);
    let series = series_of(&spec.name);
    let release = ok_text(run, "uname");
    assert!(release.starts_with(series.release_prefix()), "guest {}: kernel {release} is not {series:?}", run.guest);
    assert!(ok_text(run, "numad-version").contains("numad"), "numad runs in the guest");
}

/// Each requested PCI device is in the guest on its node, with its driver bound (net/ or nvme/ child).
fn pci_devices_on_their_nodes(run: &GuestRun, spec: &GuestSpec) {
    let pci = ok_text(run, "pci");
    for p in &spec.pci {
        let (class_prefix, child) = match p.kind {
            PciKind::Nvme => ("0x0108", "nvme:nvme"),
            PciKind::Vmxnet3 => ("0x0200", "net:"),
        };
        let found = pci.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() >= 6
                && f[1].starts_with(class_prefix)
                && f[4] == p.node.to_string()
                && f[5..].iter().any(|c| c.starts_with(child))
        });
        assert!(found, "guest {}: no {:?} device on node {} with a bound driver in:\n{pci}", run.guest, p.kind, p.node);
    }
}

/// `numapilot topo --json` lists every PCI device of the guest with the kernel's `numa_node` (null for -1) and
/// the interface/controller names found under it (from the `pci` section, i.e. sysfs, not from our output).
fn topo_json_devices_match_sysfs(run: &GuestRun) {
    let topo = run.section("topo-json").unwrap();
    assert_eq!(topo.rc, 0, "guest {}: numapilot topo --json exit {}: {}", run.guest, topo.rc, topo.stderr());
    let json: serde_json::Value = serde_json::from_str(&topo.stdout())
        .unwrap_or_else(|e| panic!("guest {}: topo --json is not JSON: {e}\n{}", run.guest, topo.stdout()));
    let devices = json["devices"].as_array().unwrap_or_else(|| panic!("no \"devices\" array in {json}"));
    for line in ok_text(run, "pci").lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (addr, node) = (f[0], f[4].parse::<i64>().expect("numa_node"));
        let mut names: Vec<&str> = f[5..].iter().filter_map(|k| k.split_once(':').map(|(_, n)| n)).collect();
        names.sort();
        let Some(d) = devices.iter().find(|d| d["address"] == addr) else {
            // The topology keeps devices work can be placed near (crates/topology/src/sysfs.rs): mass storage 0x01,
            // network 0x02, display 0x03, accelerators 0x12, InfiniBand 0x0c06; bridges, SMBus and the like not.
            let kept = ["0x01", "0x02", "0x03", "0x12", "0x0c06"].iter().any(|p| f[1].starts_with(p));
            assert!(!kept, "guest {}: device {addr} (class {}) missing from topo --json", run.guest, f[1]);
            continue;
        };
        let want = if node < 0 { serde_json::Value::Null } else { serde_json::Value::from(node) };
        assert_eq!(d["node"], want, "guest {}: device {addr} node", run.guest);
        let mut got: Vec<&str> =
            d["names"].as_array().map(|a| a.iter().filter_map(|v| v.as_str()).collect()).unwrap_or_default();
        got.sort();
        assert_eq!(got, names, "guest {}: device {addr} names", run.guest);
    }
}

/// Ours against `numactl --hardware` read before it (section `hw`) or, failing that, after it (`hw-after`): every
/// line identical but the free memory, which may differ by [`FREE_DRIFT_MB`] from either read. Memory freed or
/// taken for good between the reads (a guest's kernel finishing its own start-up work) then matches the read on its
/// side of the change; a wrong line, unit or column matches neither. The error is the comparison with `hw`.
fn matches_numactl_hardware(run: &GuestRun, ours: &str) -> Result<(), String> {
    let before = compare_hardware(&ok_text(run, "hw"), ours, FREE_DRIFT_MB);
    if before.is_ok() {
        return before;
    }
    match run.section("hw-after") {
        Ok(after) if after.rc == 0 && compare_hardware(&after.stdout(), ours, FREE_DRIFT_MB).is_ok() => Ok(()),
        _ => before,
    }
}

fn topo_equals_numactl_hardware(run: &GuestRun) {
    let topo = run.section("topo").unwrap();
    assert_eq!(topo.rc, 0, "guest {}: numapilot topo exit {}: {}", run.guest, topo.rc, topo.stderr());
    if let Err(e) = matches_numactl_hardware(run, &topo.stdout()) {
        panic!("guest {}: numapilot topo vs numactl --hardware {e}", run.guest);
    }
}

fn numactl_symlink_hardware_equals_numactl(run: &GuestRun) {
    let compat = run.section("compat-hw").unwrap();
    assert_eq!(compat.rc, 0, "guest {}: numactl symlink --hardware exit {}: {}", run.guest, compat.rc, compat.stderr());
    if let Err(e) = matches_numactl_hardware(run, &compat.stdout()) {
        panic!("guest {}: numactl symlink --hardware vs numactl --hardware {e}", run.guest);
    }
}

fn stat_p_equals_numastat_p(run: &GuestRun, spec: &GuestSpec) {
    started(run, "spread");
    // The process really has memory on every node (else the comparison proves little).
    let maps = parse_numa_maps(&ok_text(run, "spread-numa-maps")).unwrap();
    let by_node = numapilot_rig::checks::bytes_by_node(&maps, |v| !v.file);
    for n in 0..spec.nodes.len() as u32 {
        assert!(by_node.get(&n).copied().unwrap_or(0) > 0, "guest {}: no interleaved pages on node {n}", run.guest);
    }
    let reference = ok_text(run, "spread-numastat");
    assert_eq!(reference, ok_text(run, "spread-numastat-again"), "the toucher's memory must be still for this check");
    for (ours, theirs) in [("spread-stat", "spread-numastat"), ("odd-stat", "odd-numastat")] {
        let s = run.section(ours).unwrap();
        assert_eq!(s.rc, 0, "guest {}: {ours}: numapilot stat -p exit {}: {}", run.guest, s.rc, s.stderr());
        if let Err(e) = compare_exact("numastat -p", &ok_text(run, theirs), "numapilot stat -p", &s.stdout()) {
            panic!("guest {}: {ours} differs:\n{e}", run.guest);
        }
    }
    assert_eq!(ok_text(run, "odd-comm"), "a (b) c\n");
}

/// How many times the scenario reads each system table between two numastat reads (rig/scenarios/checks.sh).
const SANDWICHES: u32 = 3;

/// `numastat`, `-n` and `-m` through our numastat symlink, each read between two reads of Debian's numastat. The
/// scenario takes [`SANDWICHES`] such reads per table and one must hold: another process's memory moving during a
/// read spoils that read only (measured: the project CI run of 7266600 put the 8-node guest's node-5
/// `AnonPages` 1.02 MB above both reads around ours, once in the project's runs), while an error in our arithmetic
/// or row placement spoils all of them. Every read of ours must still exit 0.
fn system_tables_lie_between_two_numastat_reads(run: &GuestRun) {
    let binary_pages: f64 = ok_text(run, "numapilot-size").trim().parse::<f64>().expect("binary size") / 4096.0;
    let relocated = relocated_pages();
    for (t, unit_pages) in [("compat", 1.0), ("n", 256.0), ("m", 256.0)] {
        let tol = |row: &str| {
            let extra = if BINARY_ROWS.contains(&row) { binary_pages } else { 0.0 };
            let base =
                if FREE_ROWS.contains(&row) { (FREE_DRIFT_MB * 256) as f64 } else { SANDWICH_TOL_PAGES + relocated };
            (base + extra) / unit_pages
        };
        let mut errors = Vec::new();
        for a in 1..=SANDWICHES {
            let ours = run.section(&format!("sys-{t}-ours-{a}")).unwrap();
            assert_eq!(ours.rc, 0, "guest {}: numastat symlink {t} (read {a}): {}", run.guest, ours.stderr());
            let before = ok_text(run, &format!("sys-{t}-before-{a}"));
            let after = ok_text(run, &format!("sys-{t}-after-{a}"));
            if let Err(e) = compare_sandwiched(t, &before, &ours.stdout(), &after, &tol) {
                errors.push(format!("read {a}: {e}"));
            }
        }
        if errors.len() == SANDWICHES as usize {
            panic!("guest {}: every read of {t} lies outside its sandwich:\n{}", run.guest, errors.join("\n"));
        }
    }
}

/// Pages of our binary's writable segments (its relocated data and bss), as the guest's copy has them: the
/// dynamic loader writes every relocation at start, so while ours reads, these pages are anonymous memory of
/// its own that neither numastat read around it sees. They grow with the program (0.88 MB in the dev build
/// of 2026-11-30, where the reads of 7266600 and a73cfbd's successor put node `AnonPages` 1.02 MB above both
/// reads around ours); counted from the ELF program headers of the binary cargo builds for the guest.
fn relocated_pages() -> f64 {
    let bins = numapilot_rig::provision::build_binaries(RigOptions::default().release).expect("our binaries");
    let elf = std::fs::read(&bins.numapilot).expect("our binary");
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(elf[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap());
    assert_eq!((&elf[..4], elf[4], elf[5]), (&b"\x7fELF"[..], 2, 1), "a 64-bit little-endian ELF");
    let (phoff, phentsize, phnum) = (u64_at(0x20) as usize, u16_at(0x36), u16_at(0x38));
    let (pt_load, pf_w) = (1, 2);
    let bytes: u64 = (0..phnum)
        .map(|i| phoff + i * phentsize)
        .filter(|&h| u32_at(h) == pt_load && u32_at(h + 4) & pf_w != 0)
        .map(|h| u64_at(h + 0x28))
        .sum();
    bytes.div_ceil(4096) as f64
}

/// `numapilot stat --threads` on the interleaved toucher: its anonymous memory per node equals what numa_maps (read
/// just before, the memory holding still) says, under the interleave policy, and its three threads have rates.
fn stat_threads_sees_the_interleaved_toucher(run: &GuestRun, spec: &GuestSpec) {
    started(run, "spread");
    let j: serde_json::Value = serde_json::from_str(&ok_text(run, "spread-threads")).expect("stat --threads --json");
    assert_eq!(j["samples"].as_array().map(Vec::len), Some(2), "guest {}: two samples", run.guest);
    let p = &j["derived"]["processes"][0];
    assert_eq!(p["comm"], "rig-toucher");
    let maps = parse_numa_maps(&ok_text(run, "spread-numa-maps")).unwrap();
    let want = numapilot_rig::checks::bytes_by_node(&maps, |v| !v.file);
    let mut got = BTreeMap::new();
    for u in p["memory"].as_array().unwrap() {
        let kb: u64 = ["anon_kb", "heap_kb", "stack_kb"].iter().map(|k| u[*k].as_u64().unwrap()).sum();
        if kb > 0 {
            got.insert(u["node"].as_u64().unwrap() as u32, kb * 1024);
        }
    }
    assert_eq!(got, want, "guest {}: anonymous memory per node, ours vs numa_maps", run.guest);
    assert_eq!(got.len(), spec.nodes.len(), "guest {}: interleaved over every node", run.guest);
    let all = format!("interleave:0-{}", spec.nodes.len() - 1);
    assert!(p["policies"].as_array().unwrap().iter().any(|u| u["policy"] == all.as_str()), "guest {}: {p}", run.guest);
    let threads = p["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 3, "guest {}", run.guest);
    for t in threads {
        assert!(t["cpu_percent"].as_f64().is_some_and(|c| c >= 0.0), "guest {}: {t}", run.guest);
        assert!(t["last_node"].as_u64().is_some(), "guest {}: {t}", run.guest);
    }
    let nodes = j["derived"]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), spec.nodes.len());
    for n in nodes {
        assert!(n["vmstat"]["numa_interleave"].as_u64().is_some(), "guest {}: {n}", run.guest);
        // Busy % over the interval for nodes with CPUs; none for a memory-only node.
        assert_eq!(n["busy_percent"].is_number(), n["cpus"] != "", "guest {}: {n}", run.guest);
    }
}

fn node1(run: &GuestRun) -> (BTreeSet<u32>, BTreeSet<u32>) {
    let cpus = parse_list(&ok_text(run, "node1-cpulist")).expect("node1 cpulist");
    assert!(!cpus.is_empty(), "guest {}: node 1 must have CPUs for the placement checks", run.guest);
    (BTreeSet::from([1]), cpus)
}

/// The VMA policies of a process, as the kernel reports them (e.g. {"bind:1"}).
fn policies(run: &GuestRun, name: &str) -> BTreeSet<String> {
    parse_numa_maps(&ok_text(run, name)).unwrap().into_iter().map(|v| v.policy).collect()
}

fn placement(run: &GuestRun, how: &str, what: &str) {
    started(run, how);
    let (nodes, cpus) = node1(run);
    let maps = ok_text(run, &format!("{how}-numa-maps"));
    if let Err(e) = check_placement(&maps, &threads(run, how), &nodes, &cpus, BOUND_TOUCH_BYTES) {
        panic!("guest {}: {what} --membind=1 --cpunodebind=1: {e}\nnuma_maps:\n{maps}", run.guest);
    }
    // Same memory policy as Debian's numactl gives (bind, not preferred), per the kernel's numa_maps.
    assert_eq!(
        policies(run, &format!("{how}-numa-maps")),
        policies(run, "ref-numa-maps"),
        "guest {}: {what}: VMA policies differ from numactl's",
        run.guest
    );
}

/// The judgement is sound: numactl's own placement passes it, and an interleaved process fails it.
fn placement_check_controls(run: &GuestRun) {
    started(run, "ref");
    let (nodes, cpus) = node1(run);
    check_placement(&ok_text(run, "ref-numa-maps"), &threads(run, "ref"), &nodes, &cpus, BOUND_TOUCH_BYTES)
        .unwrap_or_else(|e| panic!("guest {}: Debian numactl's placement fails the check: {e}", run.guest));
    started(run, "spread");
    assert!(
        check_placement(&ok_text(run, "spread-numa-maps"), &threads(run, "spread"), &nodes, &cpus, 0).is_err(),
        "guest {}: an interleaved, unbound process passes the node-1 check",
        run.guest
    );
}

fn bad_node_specs_exit_1_and_run_nothing(run: &GuestRun) {
    for (spec, token) in [("membind_9", "9"), ("cpunodebind_9", "9"), ("membind_1_0", "1-0"), ("interleave_x", "x")] {
        let name = format!("bad__{spec}");
        let s = run.section(&name).unwrap();
        assert_eq!(s.rc, 1, "guest {}: {name}: exit {} (want 1); stderr: {}", run.guest, s.rc, s.stderr());
        assert!(
            s.stderr().contains(token),
            "guest {}: {name}: error does not name {token:?}: {}",
            run.guest,
            s.stderr()
        );
        let ran = run.section(&format!("{name}-ran")).unwrap();
        assert_ne!(ran.rc, 0, "guest {}: {name}: the command ran although the spec was rejected", run.guest);
    }
    // The reference rejects the out-of-range nodes and the garbage too. (Debian's numactl 2.0.16 accepts the
    // reversed range 1-0 and runs the command, as the 2-node guest shows; we reject it on purpose: issue 2 asks for
    // an error on a bad range.)
    for spec in ["membind_9", "cpunodebind_9", "interleave_x"] {
        let s = run.section(&format!("ref-bad__{spec}")).unwrap();
        assert_ne!(s.rc, 0, "guest {}: numactl accepted {spec}?", run.guest);
        assert_ne!(run.section(&format!("ref-bad__{spec}-ran")).unwrap().rc, 0);
    }
}

fn capture_script_runs_in_guest(run: &GuestRun, spec: &GuestSpec) {
    let out = ok_text(run, "capture");
    assert!(out.contains("wrote /tmp/fx"), "{out}");
    let files = ok_text(run, "capture-files");
    let has = |suffix: &str| files.lines().any(|l| l.ends_with(suffix));
    for f in ["expected/numactl-hardware.txt", "expected/numastat.txt", "expected/numastat-m.txt", "proc/vmstat"] {
        assert!(has(f), "guest {}: capture lacks {f}", run.guest);
    }
    for n in 0..spec.nodes.len() {
        assert!(has(&format!("sys/devices/system/node/node{n}/distance")), "guest {}: node{n}", run.guest);
    }
    let per_pid = files.lines().filter(|l| l.contains("/expected/numastat-p-")).count();
    assert_eq!(per_pid, 2, "guest {}: the toucher and the odd comm", run.guest);
    assert!(files.lines().any(|l| l.contains("/task/") && l.ends_with("/sched")));
}

macro_rules! guest_tests {
    ($module:ident, $spec:path) => {
        mod $module {
            use super::*;
            fn run() -> Option<&'static GuestRun> {
                enabled().then(|| boot(&$spec().name))
            }

            #[test]
            fn guest_is_the_spec() {
                if let Some(r) = run() {
                    super::guest_is_the_spec(r, &$spec());
                    super::pci_devices_on_their_nodes(r, &$spec());
                }
            }
            #[test]
            fn topo_equals_numactl_hardware() {
                if let Some(r) = run() {
                    super::topo_equals_numactl_hardware(r);
                }
            }
            #[test]
            fn topo_json_devices_match_sysfs() {
                if let Some(r) = run() {
                    super::topo_json_devices_match_sysfs(r);
                }
            }
            #[test]
            fn numactl_symlink_hardware_equals_numactl() {
                if let Some(r) = run() {
                    super::numactl_symlink_hardware_equals_numactl(r);
                }
            }
            #[test]
            fn stat_p_equals_numastat_p() {
                if let Some(r) = run() {
                    super::stat_p_equals_numastat_p(r, &$spec());
                }
            }
            #[test]
            fn system_tables_lie_between_two_numastat_reads() {
                if let Some(r) = run() {
                    super::system_tables_lie_between_two_numastat_reads(r);
                }
            }
            #[test]
            fn stat_threads_sees_the_interleaved_toucher() {
                if let Some(r) = run() {
                    super::stat_threads_sees_the_interleaved_toucher(r, &$spec());
                }
            }
            #[test]
            fn run_membind_cpunodebind_keeps_pages_and_threads_on_node_1() {
                if let Some(r) = run() {
                    super::placement(r, "bound", "numapilot run");
                }
            }
            #[test]
            fn numactl_symlink_membind_cpunodebind_keeps_pages_and_threads_on_node_1() {
                if let Some(r) = run() {
                    super::placement(r, "compat", "numactl -> numapilot symlink");
                }
            }
            #[test]
            fn placement_check_passes_numactl_and_fails_interleave() {
                if let Some(r) = run() {
                    super::placement_check_controls(r);
                }
            }
            #[test]
            fn bad_node_specs_exit_1_and_run_nothing() {
                if let Some(r) = run() {
                    super::bad_node_specs_exit_1_and_run_nothing(r);
                }
            }
            #[test]
            fn capture_script_runs_in_guest() {
                if let Some(r) = run() {
                    super::capture_script_runs_in_guest(r, &$spec());
                }
            }
        }
    };
}

guest_tests!(two_node, GuestSpec::two_node);
guest_tests!(four_node_article, GuestSpec::four_node_article);
guest_tests!(eight_node_cpuless, GuestSpec::eight_node);
guest_tests!(two_node_debian12_kernel, two_node_debian12);
