//! The perf_event_open path on the real kernel: detection says something clear, and the ring buffer
//! and record parser work end to end with the software page-fault event on a child that touches known
//! pages (this host has no PMU, so the PMU-only fields are covered by the unit tests' synthetic rings).

use std::path::Path;

use numapilot_observe::pmu::{
    aggregate, detect, Detection, EventSpec, RawSample, Sampler, SourceKind, PERF_COUNT_SW_DUMMY,
};
use numapilot_observe::reader::monotonic_ns;

/// Held by the test that forks and the one that counts this process's page faults: a fork
/// write-protects our pages, so a store racing it faults twice.
static FORK_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn detection_says_what_it_found() {
    match detect(Path::new("/")) {
        Detection::Found(spec) => {
            assert!(matches!(spec.kind, SourceKind::IntelPebs | SourceKind::AmdIbsOp | SourceKind::ArmSpe));
            assert!(spec.type_ != 0 || spec.kind == SourceKind::IntelPebs);
        }
        Detection::Missing(line) => {
            eprintln!("detect: {line}");
            assert!(line.contains("access sampling off"), "{line}");
            assert!(!line.contains('\n'), "one line: {line}");
        }
    }
    // A root without sysfs: missing, naming the directory.
    let empty = std::env::temp_dir();
    match detect(&empty) {
        Detection::Missing(line) => assert!(line.contains("event_source/devices"), "{line}"),
        Detection::Found(s) => panic!("found {s:?} in an empty root"),
    }
}

const PAGES: usize = 64;

#[test]
fn page_fault_samples_through_the_ring_on_this_kernel() {
    let _fork = FORK_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let len = PAGES * 4096;
    // SAFETY: a fresh private anonymous mapping, left untouched here so the child's writes fault.
    let region = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(region, libc::MAP_FAILED);
    // One fault per page: no transparent huge page for this region.
    // SAFETY: advice on our own mapping.
    unsafe { libc::madvise(region, len, libc::MADV_NOHUGEPAGE) };
    let base = region as u64;
    let mut go = [0 as libc::c_int; 2];
    // SAFETY: room for two fds.
    assert_eq!(unsafe { libc::pipe(go.as_mut_ptr()) }, 0);
    // SAFETY: the child calls only async-signal-safe functions and writes to its own memory.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let mut b = [0u8; 1];
        unsafe {
            libc::close(go[1]);
            libc::read(go[0], b.as_mut_ptr().cast(), 1);
            for i in 0..PAGES {
                std::ptr::write_volatile((region as *mut u8).add(i * 4096 + 123), i as u8);
            }
            libc::_exit(0);
        }
    }
    // SAFETY: our pipe end.
    unsafe { libc::close(go[0]) };
    let spec = EventSpec::page_faults(1);
    let mut sampler = match Sampler::open_task(&spec, pid as u32) {
        Ok(s) => s,
        Err(e) => {
            // SAFETY: release and reap the child before failing.
            unsafe {
                libc::close(go[1]);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
            panic!("perf_event_open of a software event failed on this kernel: {e}");
        }
    };
    sampler.enable().unwrap();
    let t0 = monotonic_ns();
    // SAFETY: start the child and reap it.
    unsafe {
        libc::write(go[1], [1u8].as_ptr().cast(), 1);
        libc::close(go[1]);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    let t1 = monotonic_ns();
    let mut raw: Vec<RawSample> = Vec::new();
    let st = sampler.drain(&mut raw).unwrap();
    assert_eq!(st.lost, 0);
    let mine: Vec<&RawSample> = raw.iter().filter(|s| s.addr >= base && s.addr < base + len as u64).collect();
    let mut pages: Vec<u64> = mine.iter().map(|s| (s.addr - base) / 4096).collect();
    pages.sort_unstable();
    pages.dedup();
    assert_eq!(pages, (0..PAGES as u64).collect::<Vec<_>>(), "every touched page faulted once");
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    for s in &mine {
        assert_eq!((s.pid, s.tid), (pid as u32, pid as u32));
        assert_eq!(s.addr % 4096, 123, "the data address is exact, not the page");
        assert!(s.time >= t0 && s.time <= t1, "CLOCK_MONOTONIC time {} outside [{t0}, {t1}]", s.time);
        assert!(s.cpu < ncpu);
    }
    // A second drain finds nothing new (data_tail was advanced).
    let mut again = Vec::new();
    assert_eq!(sampler.drain(&mut again).unwrap().samples, 0);

    // Aggregation without phys addresses and with the child gone: nothing can be placed.
    let (acc, ast) = aggregate(&raw, 4096, None, true);
    assert!(acc.is_empty());
    assert_eq!((ast.placed, ast.unplaced as usize), (0, raw.len()));
    // SAFETY: our mapping.
    unsafe { libc::munmap(region, len) };
}

#[test]
fn page_faults_of_this_process_are_placed_by_move_pages() {
    let _fork = FORK_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let len = 8 * 4096;
    // SAFETY: a fresh private mapping of ours.
    let region = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(region, libc::MAP_FAILED);
    unsafe { libc::madvise(region, len, libc::MADV_NOHUGEPAGE) };
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as u32;
    let mut sampler = Sampler::open_task(&EventSpec::page_faults(1), tid).unwrap();
    sampler.enable().unwrap();
    for i in 0..8 {
        // SAFETY: inside our mapping.
        unsafe { std::ptr::write_volatile((region as *mut u8).add(i * 4096), 1) };
    }
    sampler.disable().unwrap();
    let mut raw = Vec::new();
    sampler.drain(&mut raw).unwrap();
    let base = region as u64;
    raw.retain(|s| s.addr >= base && s.addr < base + len as u64);
    assert_eq!(raw.len(), 8);
    let (acc, st) = aggregate(&raw, 4096, None, true);
    assert_eq!(st.placed, 8);
    let me = std::process::id();
    assert_eq!(acc.len(), 8);
    let nodes = numapilot_observe::Reader::new("/").node_ids().unwrap();
    for (i, a) in acc.iter().enumerate() {
        assert_eq!((a.pid, a.tid, a.addr, a.count), (me, tid, base + i as u64 * 4096, 1));
        assert!(nodes.contains(a.node), "node {} is not online ({nodes:?})", a.node);
    }
    // SAFETY: our mapping.
    unsafe { libc::munmap(region, len) };
}

#[test]
fn physical_addresses_map_to_the_node_move_pages_reports() {
    use numapilot_observe::pmu::{query_nodes, NodeMemory};
    use std::io::{Read, Seek, SeekFrom};
    let mem = NodeMemory::read(Path::new("/")).expect("memory blocks of this machine");
    assert!(mem.block_size > 0 && !mem.blocks.is_empty());
    let page = vec![7u8; 2 * 4096];
    let addr = (page.as_ptr() as u64 / 4096 + 1) * 4096;
    // /proc/self/pagemap: one u64 per page, PFN in bits 0-54, bit 63 = present
    // (Documentation/admin-guide/mm/pagemap.rst); the PFN reads as 0 without CAP_SYS_ADMIN.
    let mut f = std::fs::File::open("/proc/self/pagemap").unwrap();
    f.seek(SeekFrom::Start(addr / 4096 * 8)).unwrap();
    let mut e = [0u8; 8];
    f.read_exact(&mut e).unwrap();
    let e = u64::from_ne_bytes(e);
    assert!(e >> 63 == 1, "the page is present");
    let pfn = e & ((1 << 55) - 1);
    if pfn == 0 {
        eprintln!("PFN hidden (not CAP_SYS_ADMIN): physical path not checked");
        return;
    }
    let phys = pfn * 4096;
    let by_phys = mem.node_of(phys).expect("a present page lies in some node's memory block");
    let by_query = query_nodes(std::process::id(), &[addr]).unwrap()[0].unwrap();
    assert_eq!(by_phys, by_query);
    drop(page);
}

/// Touches `pages` fresh pages of a new private mapping with `sampler` enabled; returns the
/// samples that fell in the mapping.
fn faults_sampled(sampler: &mut Sampler, pages: usize) -> usize {
    let len = pages * 4096;
    // SAFETY: a fresh private mapping of ours.
    let region = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(region, libc::MAP_FAILED);
    unsafe { libc::madvise(region, len, libc::MADV_NOHUGEPAGE) };
    sampler.enable().unwrap();
    for i in 0..pages {
        // SAFETY: inside our mapping.
        unsafe { std::ptr::write_volatile((region as *mut u8).add(i * 4096), 1) };
    }
    sampler.disable().unwrap();
    let mut raw = Vec::new();
    sampler.drain(&mut raw).unwrap();
    let base = region as u64;
    // SAFETY: our mapping.
    unsafe { libc::munmap(region, len) };
    raw.iter().filter(|s| s.addr >= base && s.addr < base + len as u64).count()
}

#[test]
fn a_stretched_period_takes_fewer_samples_of_the_same_faults() {
    // The engine's sampling stretch on a real kernel: PERF_EVENT_IOC_PERIOD on an open event.
    let _fork = FORK_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as u32;
    let mut sampler = Sampler::open_task(&EventSpec::page_faults(1), tid).unwrap();
    assert_eq!(faults_sampled(&mut sampler, 64), 64, "period 1: every fault");
    sampler.set_period(8).unwrap();
    let stretched = faults_sampled(&mut sampler, 64);
    assert!((7..=9).contains(&stretched), "period 8: one fault in 8 of 64, got {stretched}");
    sampler.set_period(1).unwrap();
    assert_eq!(faults_sampled(&mut sampler, 64), 64, "back to period 1");
    assert_eq!(sampler.spec().period, 1, "the spec keeps the base period");
}

/// The PMU trees written from the kernel source (`tests/data/pmu/README.md` names the lines).
fn pmu_root(machine: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pmu").join(machine)
}

fn found(machine: &str) -> EventSpec {
    match detect(&pmu_root(machine)) {
        Detection::Found(spec) => spec,
        Detection::Missing(line) => panic!("{machine}: {line}"),
    }
}

/// `perf_event_attr.flags` bits (`include/uapi/linux/perf_event.h`).
const EXCLUDE_USER: u64 = 1 << 4;
const EXCLUDE_KERNEL: u64 = 1 << 5;
const EXCLUDE_HV: u64 = 1 << 6;
const EXCLUDE_IDLE: u64 = 1 << 7;
const EXCLUDE_HOST: u64 = 1 << 19;
const EXCLUDE_GUEST: u64 = 1 << 20;
const ANY_EXCLUDE: u64 = EXCLUDE_USER | EXCLUDE_KERNEL | EXCLUDE_HV | EXCLUDE_IDLE | EXCLUDE_HOST | EXCLUDE_GUEST;
/// `PERF_SAMPLE_RAW` (`enum perf_event_sample_format`, bit 10).
const SAMPLE_RAW: u64 = 1 << 10;

/// Sapphire Rapids: `intel_pmu_hw_config` refuses (ENODATA) a `mem-loads` event sampling
/// DATA_SRC without `mem-loads-aux` ahead of it in its group, so the spec carries that leader,
/// whose attr counts without sampling; the load event samples loads of 30 cycles or more.
#[test]
fn sapphire_rapids_mem_loads_gets_its_mem_loads_aux_leader() {
    let spec = found("sapphire-rapids");
    assert_eq!(spec.kind, SourceKind::IntelPebs);
    assert_eq!((spec.type_, spec.config, spec.config1, spec.config2), (4, 0x01cd, 30, 0));
    assert_eq!(spec.name, "cpu/mem-loads,ldlat=30/");
    assert_eq!(spec.aux_config, Some(0x8203), "event=0x03,umask=0x82");
    assert_eq!(spec.cpus, None);
    let a = spec.attr();
    assert_eq!((a.type_, a.config, a.config1, a.sample_period), (4, 0x01cd, 30, 10_000));
    assert_eq!((a.flags >> 15) & 3, 2, "precise_ip 2");
    assert_eq!(a.flags & ANY_EXCLUDE, EXCLUDE_KERNEL | EXCLUDE_HV);
    assert_eq!(a.sample_type & SAMPLE_RAW, 0, "PEBS gives its fields itself, no raw record");
    let aux = spec.aux_attr().expect("a leader");
    assert_eq!((aux.type_, aux.config, aux.config1), (4, 0x8203, 0));
    assert_eq!((aux.sample_period, aux.sample_type), (0, 0), "the leader counts, it writes no sample");
    assert_eq!((aux.flags >> 15) & 3, 0, "not precise");
    assert_eq!(aux.flags & 1, 1, "disabled until enabled with its member");
    assert_eq!(aux.flags & ANY_EXCLUDE, a.flags & ANY_EXCLUDE);
    const USE_CLOCKID: u64 = 1 << 25;
    assert_eq!((aux.flags & USE_CLOCKID, aux.clockid), (a.flags & USE_CLOCKID, a.clockid), "one clock per group");
}

/// Genoa: IBS op counting dispatched ops (`cnt_ctl`, `config:19`), with no exclusion bit at all
/// (any makes `perf_event_open` fail with EINVAL: `PERF_PMU_CAP_NO_EXCLUDE` until 6.13;
/// `perf_ibs_init` without `swfilt`, 6.14+), a period `perf_ibs_init` accepts (low 4 bits clear,
/// else EINVAL) at every stretch the daemon applies, no group, and the op's registers
/// (`PERF_SAMPLE_RAW`) beside the generic fields, which kernels before 6.1 leave empty.
#[test]
fn genoa_ibs_op_counts_ops_with_no_exclusion_bit() {
    let spec = found("genoa");
    assert_eq!(spec.kind, SourceKind::AmdIbsOp);
    assert_eq!((spec.type_, spec.config, spec.config1, spec.config2), (11, 1 << 19, 0, 0));
    assert_eq!(spec.name, "ibs_op/cnt_ctl=1/");
    assert_eq!((spec.aux_config, spec.cpus.as_ref()), (None, None));
    let a = spec.attr();
    assert_eq!(a.flags & ANY_EXCLUDE, 0, "flags {:#x}", a.flags);
    assert_eq!(a.sample_type, numapilot_observe::pmu::MEM_SAMPLE_TYPE | SAMPLE_RAW);
    assert_eq!((a.flags >> 15) & 3, 0, "precise_ip 0");
    assert_eq!(a.sample_period, 100_000);
    assert!(a.sample_period <= 0xffff << 4, "one interrupt per sample on every IBS generation");
    for stretch in 1..=4096u64 {
        assert_eq!((a.sample_period * stretch) & 0xf, 0, "stretch {stretch}");
    }
    assert!(spec.aux_attr().is_none());
}

/// Alder Lake: the P-cores' `cpu_core` PMU is chosen, with the CPUs its `cpus` file lists (a
/// `cpu_core` event on an E-core fails with ENOENT) and its own `mem-loads-aux` leader.
#[test]
fn alder_lake_cpu_core_covers_the_p_cores_only() {
    let spec = found("alder-lake");
    assert_eq!(spec.name, "cpu_core/mem-loads,ldlat=30/");
    assert_eq!((spec.type_, spec.config, spec.config1, spec.aux_config), (4, 0x01cd, 30, Some(0x8203)));
    assert_eq!(spec.cpus, Some((0..16).collect::<Vec<u32>>()));
    // None of the E-cores: a clear refusal naming both lists, nothing opened.
    let e = Sampler::open_per_cpu(&spec, 16..24).unwrap_err().to_string();
    assert!(e.contains("cpu_core/mem-loads") && e.contains("0-15") && e.contains("16-23"), "{e}");
}

/// Neoverse N1 (Ampere Altra): the SPE PMU `arm_spe_0` is found, with its type, the config its
/// format files give for timestamps, physical addresses, the load and store type filter and
/// jitter (bits 0, 1, 33, 34, 16), the CPUs of its `cpumask`, a period the driver keeps whole at
/// every stretch (it clears the low 8 bits), kernel operations excluded (PMSCR_EL1.E1SPE off),
/// no frequency mode and no exclude_idle (the driver refuses both), an AUX watermark, and no
/// samples in the ring (SPE writes records to the AUX area only).
#[test]
fn neoverse_n1_spe_asks_for_loads_and_stores_with_addresses_and_timestamps() {
    let spec = found("neoverse-n1");
    assert_eq!(spec.kind, SourceKind::ArmSpe);
    assert_eq!(spec.name, "arm_spe_0/load_filter=1,store_filter=1/");
    assert_eq!(spec.type_, 8);
    assert_eq!(spec.config, 1 | 1 << 1 | 1 << 16 | 1 << 33 | 1 << 34, "{:#x}", spec.config);
    assert_eq!((spec.config1, spec.config2, spec.aux_config), (0, 0, None), "no event filter, no latency filter");
    assert_eq!(spec.cpus, Some((0..80).collect::<Vec<u32>>()));
    let a = spec.attr();
    assert_eq!((a.type_, a.config), (8, spec.config));
    assert_eq!(a.flags & ANY_EXCLUDE, EXCLUDE_KERNEL);
    const FREQ: u64 = 1 << 10;
    assert_eq!(a.flags & FREQ, 0, "arm_spe_pmu_event_init refuses freq with EINVAL");
    assert_eq!(a.sample_period, 102_400);
    for stretch in 1..=4096u64 {
        assert_eq!((a.sample_period * stretch) & 0xff, 0, "stretch {stretch}");
    }
    const SAMPLE_TID: u64 = 1 << 1;
    const SAMPLE_TIME: u64 = 1 << 2;
    const SAMPLE_ADDR: u64 = 1 << 3;
    const SAMPLE_CPU: u64 = 1 << 7;
    assert_eq!(a.sample_type, SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU, "the sample_id trailer of AUX records");
    assert_eq!(a.sample_type & (SAMPLE_ADDR | SAMPLE_RAW), 0);
    assert_eq!(a.aux_watermark, 64 << 10);
    const USE_CLOCKID: u64 = 1 << 25;
    const CONTEXT_SWITCH: u64 = 1 << 26;
    assert_eq!(a.flags & USE_CLOCKID, 0, "perf's clock, which the timer counts convert to");
    assert!(spec.track_switches);
    let t = spec.track_attr().expect("a switch tracker");
    assert_eq!((t.type_, t.config), (1, PERF_COUNT_SW_DUMMY), "a software dummy event");
    assert_ne!(t.flags & CONTEXT_SWITCH, 0, "switch records say which thread ran when");
    assert_eq!(t.flags & USE_CLOCKID, 0, "the same clock as the SPE event, or SET_OUTPUT refuses it");
    assert_eq!(t.sample_type, SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU);
    assert_eq!(a.flags & CONTEXT_SWITCH, 0, "the SPE event is stopped at each drain; the tracker is not");
    assert!(spec.aux_attr().is_none());
}

/// An SPE PMU without one of the format files asked for is named, not opened with a wrong config.
#[test]
fn an_spe_pmu_without_a_format_file_is_named() {
    let dir = tempdir("pmu-spe-no-filter");
    copy_tree(&pmu_root("neoverse-n1"), &dir);
    std::fs::remove_file(dir.join("sys/bus/event_source/devices/arm_spe_0/format/store_filter")).unwrap();
    match detect(&dir) {
        Detection::Missing(line) => {
            assert!(line.contains("arm_spe_0/format/store_filter") && line.contains("access sampling off"), "{line}")
        }
        Detection::Found(s) => panic!("found {s:?} without store_filter"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The AUX path on this kernel: an SPE-kind event whose PMU has no AUX support (the software
/// page-fault event stands in; this host has no SPE) opens and maps its ring, then the AUX mmap
/// at `aux_offset` is refused by the kernel (`rb_alloc_aux` without `setup_aux`), and the
/// failure names the AUX area and the CPU; nothing is left open.
#[test]
fn an_aux_area_the_pmu_cannot_give_is_a_named_error() {
    let mut spec = EventSpec::page_faults(1);
    spec.kind = SourceKind::ArmSpe;
    let e = Sampler::open_per_cpu(&spec, [0]).unwrap_err().to_string();
    assert!(e.contains("AUX area") && e.contains("cpu 0"), "{e}");
}

/// A bad file is named, not skipped: a `cpus` file that is no CPU list.
#[test]
fn an_unreadable_pmu_file_is_named() {
    let dir = tempdir("pmu-bad-cpus");
    let src = pmu_root("alder-lake");
    copy_tree(&src, &dir);
    std::fs::write(dir.join("sys/bus/event_source/devices/cpu_core/cpus"), "0-x\n").unwrap();
    match detect(&dir) {
        Detection::Missing(line) => {
            assert!(line.contains("cpu_core/cpus unusable") && line.contains("access sampling off"), "{line}")
        }
        Detection::Found(s) => panic!("found {s:?} with a bad cpus file"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("numapilot-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn copy_tree(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// The group path on this kernel, with software events standing in for `mem-loads-aux` and
/// `mem-loads` (no PMU here): a counting leader opened first, the sampling event in its group.
/// The member counts only while the leader is enabled, so samples arrive only because
/// `enable` switches both; `set_period` goes to the sampling member (the counting leader would
/// refuse it with EINVAL); the leader writes no record into the ring.
#[test]
fn a_sampling_event_behind_a_counting_leader_samples_and_takes_the_period() {
    let _fork = FORK_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as u32;
    let mut spec = EventSpec::page_faults(1);
    spec.aux_config = Some(PERF_COUNT_SW_DUMMY);
    let mut sampler = Sampler::open_task(&spec, tid).unwrap();
    assert_eq!(faults_sampled(&mut sampler, 32), 32, "every fault, through the group");
    sampler.set_period(8).unwrap();
    let stretched = faults_sampled(&mut sampler, 64);
    assert!((7..=9).contains(&stretched), "period 8: one fault in 8 of 64, got {stretched}");
}

/// The switch tracker on this kernel: a dummy event with `context_switch` opened beside a
/// per-CPU event (the page-fault one, in perf's clock as SPE's is) and redirected into its ring
/// with PERF_EVENT_IOC_SET_OUTPUT; this thread, pinned to CPU 0, sleeps (switching out and back
/// in) and drains while it runs there: the ring holds the switch records and the last one on
/// CPU 0 names this process and thread, as `read_switches` reads the kernel's layout.
#[test]
fn the_switch_tracker_names_the_thread_running_on_a_cpu() {
    let mut spec = EventSpec::page_faults(1);
    spec.track_switches = true;
    let mut sampler = Sampler::open_per_cpu(&spec, [0]).unwrap();
    sampler.enable().unwrap();
    // SAFETY: cpu_set_t is plain data; sched_{get,set}affinity on this thread with its size.
    let mut old: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut old);
        let mut zero: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut zero);
        assert_eq!(libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &zero), 0);
    }
    for _ in 0..5 {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let mut raw = Vec::new();
    let st = sampler.drain(&mut raw).unwrap();
    let running = sampler.last_switch(0);
    // SAFETY: as above.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &old) };
    let me = std::process::id();
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as u32;
    assert!(st.switches >= 2, "{st:?}");
    assert_eq!(running.map(|(_, p, t)| (p, t)), Some((me, tid)), "{st:?}");
    assert_eq!(sampler.last_switch(1), None, "no event there");
}

/// CPUs the PMU does not cover are left out and reported; the others open (per CPU, all
/// processes, on this kernel).
#[test]
fn cpus_outside_the_pmu_are_skipped_and_listed() {
    let mut spec = EventSpec::page_faults(1);
    spec.cpus = Some(vec![0]);
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let asked: Vec<u32> = (0..ncpu.max(2)).collect();
    let online: Vec<u32> = asked.iter().copied().filter(|&c| c < ncpu).collect();
    let s = Sampler::open_per_cpu(&spec, online.iter().copied()).unwrap();
    assert_eq!(s.cpus(), &[0]);
    assert_eq!(s.asked(), &online[..]);
    assert_eq!(s.skipped(), online[1..].to_vec());
}
