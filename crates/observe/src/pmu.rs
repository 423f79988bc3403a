//! Precise memory-access sampling with `perf_event_open(2)`: detection, per-CPU ring buffers, the
//! sample record parser, address-to-node mapping, and aggregation into [`AccessSample`]s.
//!
//! # Problem
//!
//! Which node's memory does each thread actually touch? Residency (numa_maps) says where pages are,
//! not who uses them; NUMA hinting faults (`task/TID/sched`) need kernel balancing on. A precise-
//! sampling PMU reports individual loads with their data address: Intel PEBS load latency
//! (`mem-loads`), AMD IBS op, ARM SPE. Many machines (VMs, these development hosts) have none.
//!
//! # Approach
//!
//! ```text
//!   detect()  /sys/bus/event_source/devices/
//!               cpu|cpu_core/events/mem-loads  ──► PEBS: type, config(+1) from format/*, precise_ip 2
//!               ibs_op/type                    ──► IBS op: that type, config 0
//!               arm_spe_*                      ──► found, but SPE writes an AUX trace: not decoded here
//!               none                           ──► one note; the other signals carry on
//!   Sampler::open_per_cpu   one perf fd per CPU (pid -1), each with a ring buffer:
//!      ┌──────────────┬──────────────────────────────── 2^n pages ───────────────┐
//!      │ mmap page    │ [hdr|sample][hdr|sample][hdr|lost] ... (wraps)           │
//!      │ data_head ◄──┼── kernel writes ahead      user reads from data_tail ──► │
//!      └──────────────┴────────────────────────────────────────────────────────┘
//!   drain()   read data_head (acquire), parse records up to it, store data_tail (release)
//!   PERF_RECORD_SAMPLE (sample_type IP|TID|TIME|ADDR|CPU|PERIOD|WEIGHT|DATA_SRC|PHYS_ADDR, in that
//!   order, each present only when asked) ──► RawSample
//!   node: phys_addr ─► memory block ─► node   (NodeMemory, /sys/devices/system/node/nodeN/memoryM)
//!         else move_pages(pid, pages, NULL) status query, batched per process
//!   aggregate per (pid, tid, page) ──► AccessSample { count, last_ns }
//! ```
//!
//! Formats: `include/uapi/linux/perf_event.h` (perf_event_attr up to `config3`, 136 bytes; the
//! sample record layout; `perf_event_mmap_page.data_head/data_tail` at bytes 1024/1032). Sample times
//! use `CLOCK_MONOTONIC` (`use_clockid`), so they compare with [`crate::Sample::monotonic_ns`].
//!
//! # The page-fault fallback
//!
//! [`EventSpec::page_faults`] samples the software event `PERF_COUNT_SW_PAGE_FAULTS` with the data
//! address. It exists on every kernel and is cheap (the kernel counts every fault anyway; only every
//! `period`-th one writes a record), and it exercises the same ring path on machines without a PMU.
//! Limits: it sees faults, not accesses: first touches, copy-on-write, swap-ins, and, with kernel NUMA
//! balancing on, the NUMA hinting faults (which *are* a sample of accesses, taken by the kernel's scanner).
//! A steady workload whose pages are all present produces none. `phys_addr` is 0 (the sample is taken
//! before the fault is resolved), so the node comes from a move_pages query afterwards.
//!
//! # Units
//!
//! Addresses in bytes, times in ns (CLOCK_MONOTONIC), weights as the PMU reports them (cycles of load
//! latency for PEBS), counts in samples.
//!
//! # Limits
//!
//! Opening per-CPU events for all processes needs root (or CAP_PERFMON, or perf_event_paranoid <= 0);
//! a ring that overflows loses records (counted from PERF_RECORD_LOST); ARM SPE is detected but not
//! decoded.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, Ordering};

use crate::sample::AccessSample;
use crate::signal_error::{hex, SignalError};

/// `PERF_TYPE_SOFTWARE`.
pub const PERF_TYPE_SOFTWARE: u32 = 1;
/// `PERF_TYPE_RAW`.
pub const PERF_TYPE_RAW: u32 = 4;
/// `PERF_COUNT_SW_PAGE_FAULTS`.
pub const PERF_COUNT_SW_PAGE_FAULTS: u64 = 2;

/// `PERF_SAMPLE_*` bits (`enum perf_event_sample_format`).
pub mod sample_bits {
    /// Instruction pointer.
    pub const IP: u64 = 1 << 0;
    /// pid and tid.
    pub const TID: u64 = 1 << 1;
    /// Time.
    pub const TIME: u64 = 1 << 2;
    /// Data address.
    pub const ADDR: u64 = 1 << 3;
    /// CPU.
    pub const CPU: u64 = 1 << 7;
    /// Period.
    pub const PERIOD: u64 = 1 << 8;
    /// Weight (load latency).
    pub const WEIGHT: u64 = 1 << 14;
    /// Data source (`union perf_mem_data_src`).
    pub const DATA_SRC: u64 = 1 << 15;
    /// Physical address of the data.
    pub const PHYS_ADDR: u64 = 1 << 19;
    /// Every bit [`super::parse_sample`] understands; others change the layout and are refused.
    pub const SUPPORTED: u64 = IP | TID | TIME | ADDR | CPU | PERIOD | WEIGHT | DATA_SRC | PHYS_ADDR;
}

/// The sample type of the precise memory-access events (Intel PEBS load latency, AMD IBS op):
/// who (pid/tid, CPU), when, which address (virtual and physical), how slow, served from where.
pub const MEM_SAMPLE_TYPE: u64 = sample_bits::TID
    | sample_bits::TIME
    | sample_bits::ADDR
    | sample_bits::CPU
    | sample_bits::WEIGHT
    | sample_bits::DATA_SRC
    | sample_bits::PHYS_ADDR;

/// Bytes one PERF_RECORD_SAMPLE of `sample_type` takes in a ring: the 8-byte header and 8 bytes
/// per field (every field [`sample_bits::SUPPORTED`] names is one u64 or two u32s; the layout
/// [`parse_sample`] reads).
pub const fn sample_record_bytes(sample_type: u64) -> usize {
    8 + 8 * (sample_type & sample_bits::SUPPORTED).count_ones() as usize
}

/// Records of `sample_type` one of the daemon's rings ([`RING_BYTES`]) holds between two
/// drains: 2,048 memory-access samples (with 4 kB or 64 kB pages alike).
pub const fn ring_records(sample_type: u64) -> usize {
    RING_BYTES / sample_record_bytes(sample_type)
}

/// `PERF_RECORD_LOST`.
pub const PERF_RECORD_LOST: u32 = 2;
/// `PERF_RECORD_SAMPLE`.
pub const PERF_RECORD_SAMPLE: u32 = 9;

/// `struct perf_event_attr` as of `PERF_ATTR_SIZE_VER8` (136 bytes; older kernels accept it when the
/// fields they do not know are zero).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct PerfEventAttr {
    /// Major type.
    pub type_: u32,
    /// Size of this struct.
    pub size: u32,
    /// Type-specific event.
    pub config: u64,
    /// Sample period (or frequency with the `freq` flag).
    pub sample_period: u64,
    /// `PERF_SAMPLE_*` bits.
    pub sample_type: u64,
    /// `PERF_FORMAT_*` bits.
    pub read_format: u64,
    /// The bit field: disabled (0), inherit (1), exclude_kernel (5), exclude_hv (6), precise_ip
    /// (15-16), sample_id_all (18), exclude_guest (20), use_clockid (25).
    pub flags: u64,
    /// Wake up after this many events (or bytes with watermark).
    pub wakeup_events: u32,
    /// Breakpoint type.
    pub bp_type: u32,
    /// `config1` (PEBS: the load-latency threshold).
    pub config1: u64,
    /// `config2`.
    pub config2: u64,
    /// Branch sample type.
    pub branch_sample_type: u64,
    /// User registers to sample.
    pub sample_regs_user: u64,
    /// User stack to sample.
    pub sample_stack_user: u32,
    /// Clock for time stamps when `use_clockid` is set.
    pub clockid: i32,
    /// Interrupt registers to sample.
    pub sample_regs_intr: u64,
    /// AUX watermark.
    pub aux_watermark: u32,
    /// Max callchain depth.
    pub sample_max_stack: u16,
    /// Reserved.
    pub reserved2: u16,
    /// AUX sample size.
    pub aux_sample_size: u32,
    /// Reserved.
    pub reserved3: u32,
    /// Signal data.
    pub sig_data: u64,
    /// `config3`.
    pub config3: u64,
}

const FLAG_DISABLED: u64 = 1 << 0;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const PRECISE_IP_SHIFT: u32 = 15;
const FLAG_SAMPLE_ID_ALL: u64 = 1 << 18;
const FLAG_USE_CLOCKID: u64 = 1 << 25;
/// `PERF_FLAG_FD_CLOEXEC` (`include/uapi/linux/perf_event.h`).
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
/// The kernel's ioctl number encoding (`include/uapi/asm-generic/ioctl.h`): direction, size, type,
/// number. PowerPC, MIPS and SPARC have their own direction values and a 13-bit size field
/// (`arch/*/include/uapi/asm/ioctl.h`).
mod ioc {
    /// Whether this architecture has the PowerPC/MIPS/SPARC encoding.
    const OWN: bool = cfg!(any(
        target_arch = "powerpc",
        target_arch = "powerpc64",
        target_arch = "mips",
        target_arch = "mips64",
        target_arch = "sparc",
        target_arch = "sparc64"
    ));
    pub const NONE: libc::c_ulong = if OWN { 1 } else { 0 };
    pub const WRITE: libc::c_ulong = if OWN { 4 } else { 1 };
    pub const DIR_SHIFT: u32 = if OWN { 29 } else { 30 };
}

/// `_IOC(dir, type, nr, size)`.
const fn ioc_number(dir: libc::c_ulong, ty: u8, nr: u8, size: usize) -> libc::c_ulong {
    (dir << ioc::DIR_SHIFT) | ((size as libc::c_ulong) << 16) | ((ty as libc::c_ulong) << 8) | nr as libc::c_ulong
}

/// `PERF_EVENT_IOC_ENABLE` = `_IO('$', 0)`.
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = ioc_number(ioc::NONE, b'$', 0, 0);
/// `PERF_EVENT_IOC_DISABLE` = `_IO('$', 1)`.
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = ioc_number(ioc::NONE, b'$', 1, 0);
/// `PERF_EVENT_IOC_PERIOD` = `_IOW('$', 4, __u64)`: a new sample period, given by pointer. It takes
/// effect at once since Linux 3.7 on ARM and 4.7 on the other architectures, before that at the
/// next overflow (perf_event_open(2)); s390's sampling facility honours it since 5.4.
const PERF_EVENT_IOC_PERIOD: libc::c_ulong = ioc_number(ioc::WRITE, b'$', 4, std::mem::size_of::<u64>());

/// Which source an [`EventSpec`] samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// Intel PEBS load latency (`mem-loads`).
    IntelPebs,
    /// AMD IBS op.
    AmdIbsOp,
    /// The software page-fault event (coarse fallback).
    PageFaults,
}

/// An event to open, with what to sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    /// What it is.
    pub kind: SourceKind,
    /// Human name for notes ("cpu/mem-loads", "ibs_op", "page-faults").
    pub name: String,
    /// `perf_event_attr.type`.
    pub type_: u32,
    /// `config`.
    pub config: u64,
    /// `config1`.
    pub config1: u64,
    /// `config2`.
    pub config2: u64,
    /// `precise_ip` (0..3).
    pub precise_ip: u8,
    /// `PERF_SAMPLE_*` bits (within [`sample_bits::SUPPORTED`]).
    pub sample_type: u64,
    /// One record every `period` events.
    pub period: u64,
}

/// Default sample period of PMU load sampling, loads per sample. Default 10,000. Source: the period
/// of the `perf mem`/PEBS examples in the kernel's perf documentation (`-c10000`). What it prevents:
/// a ring flooded by a load-heavy thread (a lower period) or too few samples for co-access within a
/// one-second window (a higher one).
pub const PMU_PERIOD: u64 = 10_000;

/// Default sample period of the page-fault fallback, faults per sample. Default 16. Source: a choice:
/// first touch of 1 GiB is 262,144 faults, 16,384 records of 40 bytes (640 kB), which one drain per
/// second of a 128 kB-per-CPU ring loses partly; 16 keeps a burst visible without flooding. What it
/// prevents: a page-faulting workload making the daemon its busiest consumer.
pub const PAGE_FAULT_PERIOD: u64 = 16;

impl EventSpec {
    /// The software page-fault event with data address, tid, time and CPU: the coarse fallback
    /// (module essay), and the real-kernel exercise of the ring path on machines without a PMU.
    pub fn page_faults(period: u64) -> Self {
        EventSpec {
            kind: SourceKind::PageFaults,
            name: "page-faults".into(),
            type_: PERF_TYPE_SOFTWARE,
            config: PERF_COUNT_SW_PAGE_FAULTS,
            config1: 0,
            config2: 0,
            precise_ip: 0,
            sample_type: sample_bits::TID | sample_bits::TIME | sample_bits::ADDR | sample_bits::CPU,
            period: period.max(1),
        }
    }

    /// The attr to pass to `perf_event_open`: disabled until [`Sampler::enable`], CLOCK_MONOTONIC
    /// time stamps, hypervisor excluded, a wake-up never requested (the daemon polls).
    pub fn attr(&self) -> PerfEventAttr {
        PerfEventAttr {
            type_: self.type_,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: self.config,
            sample_period: self.period,
            sample_type: self.sample_type,
            flags: FLAG_DISABLED
                | FLAG_EXCLUDE_HV
                | FLAG_SAMPLE_ID_ALL
                | FLAG_USE_CLOCKID
                | (u64::from(self.precise_ip.min(3)) << PRECISE_IP_SHIFT),
            clockid: libc::CLOCK_MONOTONIC,
            config1: self.config1,
            config2: self.config2,
            ..PerfEventAttr::default()
        }
    }
}

/// What [`detect`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detection {
    /// A PMU source this module can open.
    Found(EventSpec),
    /// No usable PMU; the line says what was looked for and what was found.
    Missing(String),
}

/// Looks for a precise-sampling PMU under `sys_root` (`/` live): Intel `mem-loads` on the `cpu` or
/// `cpu_core` PMU, AMD `ibs_op`, ARM `arm_spe_*` (found but not usable: AUX trace). Reads sysfs only;
/// whether the event really opens is only known when [`Sampler::open_per_cpu`] tries.
pub fn detect(sys_root: &Path) -> Detection {
    let devs = sys_root.join("sys/bus/event_source/devices");
    let names: Vec<String> = match std::fs::read_dir(&devs) {
        Ok(rd) => {
            let mut v: Vec<String> =
                rd.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into()).collect();
            v.sort();
            v
        }
        Err(e) => return Detection::Missing(format!("no PMU list ({}: {e}); access sampling off", devs.display())),
    };
    for pmu in ["cpu_core", "cpu"] {
        let dir = devs.join(pmu);
        let Ok(ev) = std::fs::read_to_string(dir.join("events/mem-loads")) else { continue };
        match event_config(&dir, ev.trim()) {
            Ok((config, config1, config2)) => {
                let Some(type_) = read_type(&dir) else { continue };
                return Detection::Found(EventSpec {
                    kind: SourceKind::IntelPebs,
                    name: format!("{pmu}/mem-loads"),
                    type_,
                    config,
                    config1,
                    config2,
                    precise_ip: 2,
                    sample_type: MEM_SAMPLE_TYPE,
                    period: PMU_PERIOD,
                });
            }
            Err(why) => {
                return Detection::Missing(format!("{pmu}/events/mem-loads unusable: {why}; access sampling off"))
            }
        }
    }
    if let Some(type_) = read_type(&devs.join("ibs_op")) {
        return Detection::Found(EventSpec {
            kind: SourceKind::AmdIbsOp,
            name: "ibs_op".into(),
            type_,
            config: 0,
            config1: 0,
            config2: 0,
            precise_ip: 0,
            sample_type: MEM_SAMPLE_TYPE,
            period: PMU_PERIOD,
        });
    }
    if let Some(spe) = names.iter().find(|n| n.starts_with("arm_spe")) {
        return Detection::Missing(format!(
            "ARM SPE found ({spe}) but it reports through an AUX trace this build does not decode; access sampling off"
        ));
    }
    Detection::Missing(format!(
        "no precise-sampling PMU (looked for cpu/events/mem-loads, cpu_core/events/mem-loads, ibs_op, arm_spe_* in {}; \
         found: {}); access sampling off, NUMA faults and residency stand in",
        devs.display(),
        if names.is_empty() { "nothing".to_string() } else { names.join(", ") }
    ))
}

fn read_type(dir: &Path) -> Option<u32> {
    std::fs::read_to_string(dir.join("type")).ok()?.trim().parse().ok()
}

/// Resolves a sysfs event description (`event=0xcd,umask=0x1,ldlat=3`) with the PMU's `format/*`
/// files (`config:0-7`, `config1:0-15`, `config:8-15,32-35`) into (config, config1, config2).
pub fn event_config(pmu_dir: &Path, desc: &str) -> Result<(u64, u64, u64), String> {
    let mut cfg = [0u64; 3];
    for term in desc.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (k, v) = term.split_once('=').unwrap_or((term, "1"));
        let v =
            v.strip_prefix("0x").map_or_else(|| v.parse::<u64>().ok(), hex).ok_or(format!("bad value in {term:?}"))?;
        let fmt = std::fs::read_to_string(pmu_dir.join("format").join(k)).map_err(|e| format!("format/{k}: {e}"))?;
        place_bits(fmt.trim(), v, &mut cfg).map_err(|e| format!("format/{k} {:?}: {e}", fmt.trim()))?;
    }
    Ok((cfg[0], cfg[1], cfg[2]))
}

/// Puts `value` into the bit ranges of a format spec (`config1:0-15`, `config:8-15,32-35`), low bits
/// of the value into the first range.
pub fn place_bits(spec: &str, mut value: u64, cfg: &mut [u64; 3]) -> Result<(), String> {
    let (word, ranges) = spec.split_once(':').ok_or("no ':'")?;
    let w = match word {
        "config" => 0,
        "config1" => 1,
        "config2" => 2,
        other => return Err(format!("unknown word {other:?}")),
    };
    for r in ranges.split(',') {
        let (lo, hi) = match r.split_once('-') {
            Some((l, h)) => (l.parse::<u32>().map_err(|_| "bad bit")?, h.parse::<u32>().map_err(|_| "bad bit")?),
            None => {
                let b = r.parse::<u32>().map_err(|_| "bad bit")?;
                (b, b)
            }
        };
        if hi < lo || hi > 63 {
            return Err(format!("bad range {r:?}"));
        }
        let width = hi - lo + 1;
        let mask = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
        cfg[w] |= (value & mask) << lo;
        value = if width == 64 { 0 } else { value >> width };
    }
    if value != 0 {
        return Err("value wider than its bits".into());
    }
    Ok(())
}

// ----- records ----------------------------------------------------------------------------------------

/// One PERF_RECORD_SAMPLE, the fields this module asks for (0 where not sampled).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawSample {
    /// Instruction pointer.
    pub ip: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Time, ns (CLOCK_MONOTONIC when opened by [`Sampler`]).
    pub time: u64,
    /// Data address.
    pub addr: u64,
    /// CPU.
    pub cpu: u32,
    /// Period.
    pub period: u64,
    /// Weight (PEBS: load latency, cycles).
    pub weight: u64,
    /// Data source bits (`union perf_mem_data_src`).
    pub data_src: u64,
    /// Physical address (0 when unknown).
    pub phys_addr: u64,
}

fn malformed(reason: String) -> SignalError {
    SignalError::Malformed { what: "perf sample record", reason }
}

/// Parses the body of a PERF_RECORD_SAMPLE (after the 8-byte header) for `sample_type`.
pub fn parse_sample(sample_type: u64, body: &[u8]) -> Result<RawSample, SignalError> {
    if sample_type & !sample_bits::SUPPORTED != 0 {
        return Err(malformed(format!("sample_type {sample_type:#x} has bits this parser does not lay out")));
    }
    let mut s = RawSample::default();
    let mut at = 0usize;
    let mut u64_next = |name: &str| -> Result<u64, SignalError> {
        let b = body.get(at..at + 8).ok_or_else(|| malformed(format!("{} bytes, ends before {name}", body.len())))?;
        at += 8;
        Ok(u64::from_ne_bytes(b.try_into().expect("8 bytes")))
    };
    use sample_bits as b;
    if sample_type & b::IP != 0 {
        s.ip = u64_next("ip")?;
    }
    if sample_type & b::TID != 0 {
        let v = u64_next("pid/tid")?.to_ne_bytes();
        s.pid = u32::from_ne_bytes(v[0..4].try_into().expect("4"));
        s.tid = u32::from_ne_bytes(v[4..8].try_into().expect("4"));
    }
    if sample_type & b::TIME != 0 {
        s.time = u64_next("time")?;
    }
    if sample_type & b::ADDR != 0 {
        s.addr = u64_next("addr")?;
    }
    if sample_type & b::CPU != 0 {
        let v = u64_next("cpu")?.to_ne_bytes();
        s.cpu = u32::from_ne_bytes(v[0..4].try_into().expect("4"));
    }
    if sample_type & b::PERIOD != 0 {
        s.period = u64_next("period")?;
    }
    if sample_type & b::WEIGHT != 0 {
        s.weight = u64_next("weight")?;
    }
    if sample_type & b::DATA_SRC != 0 {
        s.data_src = u64_next("data_src")?;
    }
    if sample_type & b::PHYS_ADDR != 0 {
        s.phys_addr = u64_next("phys_addr")?;
    }
    Ok(s)
}

/// Counts of one drain.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DrainStats {
    /// Sample records parsed.
    pub samples: u64,
    /// Records the kernel reported lost (ring full).
    pub lost: u64,
    /// Other records skipped.
    pub other: u64,
    /// How full the fullest ring was when drained, a fraction of its data area: about 1 when it
    /// overflowed, and above 1 (samples taken over samples kept) in the drain that reads the
    /// kernel's count of the lost records, which it writes once there is room again. 0 when
    /// nothing was drained. What the
    /// sampling density control keeps within bounds (`numapilot_policy::cadence`).
    pub max_fill: f64,
}

/// Parses a run of records (header + body each, as in the ring) into `out`.
pub fn parse_records(sample_type: u64, mut buf: &[u8], out: &mut Vec<RawSample>) -> Result<DrainStats, SignalError> {
    let mut st = DrainStats::default();
    while !buf.is_empty() {
        if buf.len() < 8 {
            return Err(malformed(format!("{} bytes left, a header is 8", buf.len())));
        }
        let ty = u32::from_ne_bytes(buf[0..4].try_into().expect("4"));
        let size = u16::from_ne_bytes(buf[6..8].try_into().expect("2")) as usize;
        if size < 8 || size > buf.len() {
            return Err(malformed(format!("record size {size} with {} bytes left", buf.len())));
        }
        let body = &buf[8..size];
        match ty {
            PERF_RECORD_SAMPLE => {
                out.push(parse_sample(sample_type, body)?);
                st.samples += 1;
            }
            PERF_RECORD_LOST => {
                // struct { u64 id; u64 lost; }
                st.lost += body.get(8..16).map_or(0, |b| u64::from_ne_bytes(b.try_into().expect("8")));
            }
            _ => st.other += 1,
        }
        buf = &buf[size..];
    }
    Ok(st)
}

// ----- the ring ---------------------------------------------------------------------------------------

/// Offset of `data_head` in `struct perf_event_mmap_page`.
const DATA_HEAD: usize = 1024;
/// Offset of `data_tail`.
const DATA_TAIL: usize = 1032;

/// One perf event fd with its mapped ring.
#[derive(Debug)]
struct Ring {
    fd: libc::c_int,
    base: *mut u8,
    map_len: usize,
    page: usize,
    data_size: usize,
}

// SAFETY: the ring is only touched through &mut self (drain) or read-only ioctls; the mapping is
// owned by this value.
unsafe impl Send for Ring {}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: base/map_len are the mapping we created; fd is ours.
        unsafe {
            libc::munmap(self.base.cast(), self.map_len);
            libc::close(self.fd);
        }
    }
}

impl Ring {
    fn open(spec: &EventSpec, pid: i32, cpu: i32) -> Result<Ring, SignalError> {
        let attr = spec.attr();
        // SAFETY: attr is a valid perf_event_attr of the size it declares.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                pid,
                cpu,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        } as libc::c_int;
        if fd < 0 {
            return Err(SignalError::Sys {
                what: format!("perf_event_open({}, pid {pid}, cpu {cpu})", spec.name),
                source: io::Error::last_os_error(),
            });
        }
        let page = crate::reader::page_size() as usize;
        let data_pages = ring_pages(page);
        let map_len = page * (1 + data_pages);
        // SAFETY: mapping a perf fd: 1 + 2^n pages, shared, read-write (so data_tail can be written).
        let base = unsafe {
            libc::mmap(std::ptr::null_mut(), map_len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
        };
        if base == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            // SAFETY: our fd.
            unsafe { libc::close(fd) };
            return Err(SignalError::Sys { what: format!("mmap perf ring ({}, cpu {cpu})", spec.name), source: e });
        }
        Ok(Ring { fd, base: base.cast(), map_len, page, data_size: page * data_pages })
    }

    fn set_period(&self, period: u64) -> io::Result<()> {
        // SAFETY: PERF_EVENT_IOC_PERIOD reads one u64 through the pointer, which lives across the call.
        if unsafe { libc::ioctl(self.fd, PERF_EVENT_IOC_PERIOD as _, &period as *const u64) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn ioctl(&self, req: libc::c_ulong) -> io::Result<()> {
        // SAFETY: a perf ioctl without argument on our fd.
        if unsafe { libc::ioctl(self.fd, req as _, 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Copies out every complete record between data_tail and data_head, then advances data_tail.
    fn drain_into(&mut self, scratch: &mut Vec<u8>) {
        // SAFETY: the first page is the kernel's perf_event_mmap_page; data_head/tail are u64 at
        // fixed offsets; volatile reads/writes with fences implement the documented protocol
        // (read head, rmb, read data, mb, write tail).
        let head = unsafe { std::ptr::read_volatile(self.base.add(DATA_HEAD).cast::<u64>()) };
        fence(Ordering::Acquire);
        let tail = unsafe { std::ptr::read_volatile(self.base.add(DATA_TAIL).cast::<u64>()) };
        let len = head.wrapping_sub(tail) as usize;
        scratch.clear();
        if len > 0 {
            let n = len.min(self.data_size);
            let start = (tail as usize) % self.data_size;
            // SAFETY: the data area is data_size bytes after the first page; we copy [start, start+n)
            // modulo the size, in at most two pieces.
            unsafe {
                let data = self.base.add(self.page);
                let first = n.min(self.data_size - start);
                scratch.extend_from_slice(std::slice::from_raw_parts(data.add(start), first));
                scratch.extend_from_slice(std::slice::from_raw_parts(data, n - first));
            }
        }
        fence(Ordering::Release);
        // SAFETY: as above; data_tail is ours to write.
        unsafe { std::ptr::write_volatile(self.base.add(DATA_TAIL).cast::<u64>(), head) };
    }
}

/// Open perf events (one per CPU, or one for a task) with their rings.
#[derive(Debug)]
pub struct Sampler {
    spec: EventSpec,
    rings: Vec<Ring>,
    scratch: Vec<u8>,
    /// The CPUs of a per-CPU sampler, one ring each (empty for a task's).
    cpus: Vec<u32>,
    /// The period every event samples at ([`Sampler::set_period`]).
    period: u64,
}

/// Data bytes of each ring. Default 128 kB (32 pages of 4 kB; with 64 kB pages, 2): 2,048
/// memory-access records of 64 bytes (3,276 page-fault records of 40) per CPU between two drains
/// ([`ring_records`]). Sized in bytes, not pages, so a 64 kB-page kernel (arm64, ppc64) does not
/// pin 16 times as much. Source: arithmetic and the simulator, which gives each thread this ring
/// (`numapilot_sim::host::MAX_SAMPLES_PER_CPU`): the cadence keeps the fullest ring between 1/8
/// and 1/2 full (`numapilot_policy::cadence`), so this size sets the samples the model gets per
/// window, 256 to 1,024 a CPU. Measured 2026-11-28 (`probe article-4n96|ring-8n64c process-mix 0 3
/// default,numapilot`, 3 seeds): 64 kB 1.222 / 1.176 x default, cv 0.88 / 1.84%; 128 kB 1.226 /
/// 1.185, 0.61 / 1.52%; 256 kB 1.227 / 1.185, 0.49 / 1.52%. The PMU interrupts for every record
/// whatever the ring holds, so a larger ring costs kernel memory, not sampling time. What it
/// prevents: a ring so small the model sees too few samples per window to place a mix (64 kB), and
/// pinning MBs of kernel memory per CPU (perf's own default is 512 kB + 1 page a CPU;
/// `perf_event_mlock_kb` is 516 kB per unprivileged user): 128 kB x 288 CPUs is 36 MB.
pub const RING_BYTES: usize = 128 << 10;

/// Data pages of a ring of [`RING_BYTES`] with pages of `page_size` bytes: at least one, a power
/// of two (perf's mmap takes 1 + 2^n pages).
pub const fn ring_pages(page_size: usize) -> usize {
    let p = RING_BYTES / page_size;
    if p == 0 {
        1
    } else {
        p.next_power_of_two()
    }
}

impl Sampler {
    /// Opens `spec` on every CPU in `cpus` for all processes (pid -1). Any failure closes what was
    /// opened and is returned.
    pub fn open_per_cpu(spec: &EventSpec, cpus: impl IntoIterator<Item = u32>) -> Result<Sampler, SignalError> {
        let mut rings = Vec::new();
        let mut on = Vec::new();
        for cpu in cpus {
            rings.push(Ring::open(spec, -1, cpu as i32)?);
            on.push(cpu);
        }
        Ok(Sampler { spec: spec.clone(), rings, scratch: Vec::new(), cpus: on, period: spec.period })
    }

    /// Opens `spec` for one task (`pid`, any CPU), with inherit off: for tests and for sampling one
    /// process.
    pub fn open_task(spec: &EventSpec, pid: u32) -> Result<Sampler, SignalError> {
        let ring = Ring::open(spec, pid as i32, -1)?;
        Ok(Sampler {
            spec: spec.clone(),
            rings: vec![ring],
            scratch: Vec::new(),
            cpus: Vec::new(),
            period: spec.period,
        })
    }

    /// The event.
    pub fn spec(&self) -> &EventSpec {
        &self.spec
    }

    /// The CPUs a per-CPU sampler has an event on, in the order opened (empty for a task's).
    pub fn cpus(&self) -> &[u32] {
        &self.cpus
    }

    /// Starts counting.
    pub fn enable(&self) -> Result<(), SignalError> {
        for r in &self.rings {
            r.ioctl(PERF_EVENT_IOC_ENABLE).map_err(|e| SignalError::Sys {
                what: format!("PERF_EVENT_IOC_ENABLE ({})", self.spec.name),
                source: e,
            })?;
        }
        Ok(())
    }

    /// Stops counting.
    pub fn disable(&self) -> Result<(), SignalError> {
        for r in &self.rings {
            r.ioctl(PERF_EVENT_IOC_DISABLE).map_err(|e| SignalError::Sys {
                what: format!("PERF_EVENT_IOC_DISABLE ({})", self.spec.name),
                source: e,
            })?;
        }
        Ok(())
    }

    /// Sets every event's sample period (one record every `period` events; at least 1), e.g. the
    /// base period times the engine's sampling stretch while its steps back off. The spec keeps
    /// the base period. All or nothing: when one event refuses, those already changed are set
    /// back to the period before (best effort), so the sampler keeps one period for all its
    /// events, and the failure names the ioctl.
    pub fn set_period(&mut self, period: u64) -> Result<(), SignalError> {
        let period = period.max(1);
        for (i, r) in self.rings.iter().enumerate() {
            if let Err(e) = r.set_period(period) {
                for done in &self.rings[..i] {
                    let _ = done.set_period(self.period);
                }
                return Err(SignalError::Sys {
                    what: format!("PERF_EVENT_IOC_PERIOD {period} ({})", self.spec.name),
                    source: e,
                });
            }
        }
        self.period = period;
        Ok(())
    }

    /// The period every event samples at now (the spec's until [`Sampler::set_period`]).
    pub fn period(&self) -> u64 {
        self.period
    }

    /// Reads every ring's new records into `out`.
    pub fn drain(&mut self, out: &mut Vec<RawSample>) -> Result<DrainStats, SignalError> {
        let mut total = DrainStats::default();
        for r in &mut self.rings {
            r.drain_into(&mut self.scratch);
            let st = parse_records(self.spec.sample_type, &self.scratch, out)?;
            total.samples += st.samples;
            total.lost += st.lost;
            total.other += st.other;
            let mut fill = self.scratch.len() as f64 / r.data_size.max(1) as f64;
            if st.lost > 0 {
                fill = fill.max(1.0) * (st.samples + st.lost) as f64 / st.samples.max(1) as f64;
            }
            total.max_fill = total.max_fill.max(fill);
        }
        Ok(total)
    }
}

// ----- address to node ------------------------------------------------------------------------------------

/// Which node each block of physical memory belongs to (`/sys/devices/system/node/nodeN/memoryM`
/// links, blocks of `/sys/devices/system/memory/block_size_bytes`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeMemory {
    /// Block size, bytes.
    pub block_size: u64,
    /// Block index -> node.
    pub blocks: HashMap<u64, u32>,
    /// Explicit ranges `(start, end, node)` (from a machine description), checked before blocks.
    pub ranges: Vec<(u64, u64, u32)>,
}

impl NodeMemory {
    /// Reads the memory blocks of every node under `root` (`/` live).
    pub fn read(root: &Path) -> Result<NodeMemory, SignalError> {
        let bs_path = root.join("sys/devices/system/memory/block_size_bytes");
        let bs = std::fs::read_to_string(&bs_path).map_err(|e| SignalError::Io { path: bs_path.clone(), source: e })?;
        let block_size = hex(bs.trim()).filter(|&b| b > 0).ok_or_else(|| SignalError::Parse {
            path: bs_path.clone(),
            source: crate::signal_error::LineError::new(
                crate::signal_error::SignalFile::MemoryBlocks,
                1,
                Some("block_size_bytes"),
                bs.trim(),
                "not a hex number",
            ),
        })?;
        let node_dir = root.join("sys/devices/system/node");
        let mut blocks = HashMap::new();
        let rd = std::fs::read_dir(&node_dir).map_err(|e| SignalError::Io { path: node_dir.clone(), source: e })?;
        for ent in rd.filter_map(|e| e.ok()) {
            let name = ent.file_name().to_string_lossy().into_owned();
            let Some(node) = name.strip_prefix("node").and_then(|n| n.parse::<u32>().ok()) else { continue };
            let dir: PathBuf = ent.path();
            let Ok(inner) = std::fs::read_dir(&dir) else { continue };
            for m in inner.filter_map(|e| e.ok()) {
                let mname = m.file_name().to_string_lossy().into_owned();
                if let Some(idx) = mname.strip_prefix("memory").and_then(|i| i.parse::<u64>().ok()) {
                    blocks.insert(idx, node);
                }
            }
        }
        Ok(NodeMemory { block_size, blocks, ranges: Vec::new() })
    }

    /// The node of a physical address, if known.
    pub fn node_of(&self, phys: u64) -> Option<u32> {
        if let Some(&(_, _, n)) = self.ranges.iter().find(|&&(s, e, _)| phys >= s && phys < e) {
            return Some(n);
        }
        if self.block_size == 0 {
            return None;
        }
        self.blocks.get(&(phys / self.block_size)).copied()
    }
}

/// Where pages of a process are now: `move_pages(pid, n, pages, NULL, status, 0)` (a query, nothing
/// moves). Each entry is the node, or `None` for a page that is not present or not accessible
/// (negative status). `Err` when the process is gone or cannot be queried.
pub fn query_nodes(pid: u32, addrs: &[u64]) -> io::Result<Vec<Option<u32>>> {
    const BATCH: usize = 1024;
    let mut out = Vec::with_capacity(addrs.len());
    for chunk in addrs.chunks(BATCH) {
        let pages: Vec<*mut libc::c_void> = chunk.iter().map(|&a| a as *mut libc::c_void).collect();
        let mut status = vec![0 as libc::c_int; chunk.len()];
        // SAFETY: pages and status hold `chunk.len()` entries; nodes NULL asks for a status query.
        let r = unsafe {
            libc::syscall(
                libc::SYS_move_pages,
                pid as libc::pid_t,
                chunk.len() as libc::c_ulong,
                pages.as_ptr(),
                std::ptr::null::<libc::c_int>(),
                status.as_mut_ptr(),
                0 as libc::c_int,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        out.extend(status.iter().map(|&s| u32::try_from(s).ok()));
    }
    Ok(out)
}

/// Counts of one aggregation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AggregateStats {
    /// Samples placed on a node.
    pub placed: u64,
    /// Samples whose node could not be told (page gone, process gone, no address).
    pub unplaced: u64,
}

/// Aggregates samples into one [`AccessSample`] per (pid, tid, page). The node of a sample comes from
/// its physical address through `mem` when it has one and `mem` knows it, else from a move_pages
/// query of its page in its process (batched per process) when `query` is set. Samples without a data
/// address, or whose node stays unknown, are counted as unplaced. Sorted by (pid, tid, addr).
pub fn aggregate(
    samples: &[RawSample],
    page_size: u64,
    mem: Option<&NodeMemory>,
    query: bool,
) -> (Vec<AccessSample>, AggregateStats) {
    let page_size = page_size.max(1);
    let mut st = AggregateStats::default();
    let mut node_of: Vec<Option<u32>> = vec![None; samples.len()];
    let mut by_pid: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (i, s) in samples.iter().enumerate() {
        if s.addr == 0 {
            continue;
        }
        node_of[i] = (s.phys_addr != 0).then(|| mem.and_then(|m| m.node_of(s.phys_addr))).flatten();
        if node_of[i].is_none() && query {
            by_pid.entry(s.pid).or_default().push(i);
        }
    }
    for (pid, idx) in by_pid {
        let mut pages: Vec<u64> = idx.iter().map(|&i| samples[i].addr / page_size * page_size).collect();
        pages.sort_unstable();
        pages.dedup();
        let Ok(nodes) = query_nodes(pid, &pages) else { continue };
        for &i in &idx {
            let p = samples[i].addr / page_size * page_size;
            if let Ok(k) = pages.binary_search(&p) {
                node_of[i] = nodes[k];
            }
        }
    }
    let placed = samples.iter().zip(node_of).filter_map(|(s, node)| match node {
        Some(n) => {
            st.placed += 1;
            Some((s.pid, s.tid, s.addr, s.phys_addr, s.time, n))
        }
        None => {
            st.unplaced += 1;
            None
        }
    });
    let acc = AccessSample::aggregate(page_size, placed);
    (acc, st)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers `<linux/perf_event.h>` gives on the generic encoding (x86-64, arm64, RISC-V),
    /// or on PowerPC/MIPS/SPARC's (`_IOC_NONE` 1, `_IOC_WRITE` 4, direction from bit 29).
    #[test]
    fn ioctl_numbers_are_the_kernels() {
        if ioc::DIR_SHIFT == 30 {
            assert_eq!(PERF_EVENT_IOC_ENABLE, 0x2400);
            assert_eq!(PERF_EVENT_IOC_DISABLE, 0x2401);
            assert_eq!(PERF_EVENT_IOC_PERIOD, 0x4008_2404);
        } else {
            assert_eq!(PERF_EVENT_IOC_ENABLE, 0x2000_2400);
            assert_eq!(PERF_EVENT_IOC_PERIOD, 0x8008_2404);
        }
    }

    #[test]
    fn attr_is_the_uapi_size() {
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 136);
        let a = EventSpec::page_faults(1).attr();
        assert_eq!(a.flags & FLAG_DISABLED, FLAG_DISABLED);
        assert_eq!((a.flags >> PRECISE_IP_SHIFT) & 3, 0);
    }

    #[test]
    fn format_bits() {
        let mut c = [0u64; 3];
        place_bits("config:0-7", 0xcd, &mut c).unwrap();
        place_bits("config:8-15", 0x1, &mut c).unwrap();
        place_bits("config1:0-15", 3, &mut c).unwrap();
        assert_eq!(c, [0x01cd, 3, 0]);
        let mut c = [0u64; 3];
        place_bits("config:8-15,32-35", 0x1ab, &mut c).unwrap();
        assert_eq!(c[0], 0xab << 8 | 0x1 << 32);
        assert!(place_bits("config:0-3", 0x10, &mut c).is_err());
        assert!(place_bits("config9:0-3", 1, &mut c).is_err());
        assert!(place_bits("config:7-3", 1, &mut c).is_err());
    }

    /// The record size the simulator's buffer model is derived from is the one the parser reads:
    /// a body one byte shorter is refused, and the full synthetic record's header says the same size.
    #[test]
    fn record_bytes_are_the_parsed_layout() {
        let body = sample_record_bytes(MEM_SAMPLE_TYPE) - 8;
        assert_eq!(body, 56);
        assert!(parse_sample(MEM_SAMPLE_TYPE, &vec![0u8; body]).is_ok());
        assert!(parse_sample(MEM_SAMPLE_TYPE, &vec![0u8; body - 1]).is_err());
        let rec = synthetic(sample_bits::SUPPORTED);
        assert_eq!(u16::from_ne_bytes([rec[6], rec[7]]) as usize, sample_record_bytes(sample_bits::SUPPORTED));
        assert_eq!(ring_records(MEM_SAMPLE_TYPE), 2048);
        assert_eq!(
            (ring_pages(4096), ring_pages(64 << 10), ring_pages(1 << 30)),
            (32, 2, 1),
            "128 kB whatever the page size"
        );
        assert_eq!(ring_records(EventSpec::page_faults(1).sample_type), 3276);
    }

    /// A synthetic ring piece: a PEBS-like sample with every field, a LOST record, an unknown record.
    fn synthetic(st: u64) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend(0x401000u64.to_ne_bytes()); // ip
        body.extend(7u32.to_ne_bytes());
        body.extend(9u32.to_ne_bytes()); // pid, tid
        body.extend(123_456u64.to_ne_bytes()); // time
        body.extend(0x7f00_0000_1234u64.to_ne_bytes()); // addr
        body.extend(3u32.to_ne_bytes());
        body.extend(0u32.to_ne_bytes()); // cpu, res
        body.extend(10_000u64.to_ne_bytes()); // period
        body.extend(250u64.to_ne_bytes()); // weight
        body.extend(0x1_0000_0142u64.to_ne_bytes()); // data_src
        body.extend(0x1_2345_6789u64.to_ne_bytes()); // phys
        assert_eq!(st, sample_bits::SUPPORTED);
        let mut rec = PERF_RECORD_SAMPLE.to_ne_bytes().to_vec();
        rec.extend(0u16.to_ne_bytes());
        rec.extend(((8 + body.len()) as u16).to_ne_bytes());
        rec.extend(body);
        rec.extend(PERF_RECORD_LOST.to_ne_bytes());
        rec.extend(0u16.to_ne_bytes());
        rec.extend(24u16.to_ne_bytes());
        rec.extend(1u64.to_ne_bytes());
        rec.extend(5u64.to_ne_bytes());
        rec.extend(3u32.to_ne_bytes()); // PERF_RECORD_COMM, skipped
        rec.extend(0u16.to_ne_bytes());
        rec.extend(16u16.to_ne_bytes());
        rec.extend([0u8; 8]);
        rec
    }

    #[test]
    fn parses_pmu_fields_from_synthetic_records() {
        let buf = synthetic(sample_bits::SUPPORTED);
        let mut out = Vec::new();
        let st = parse_records(sample_bits::SUPPORTED, &buf, &mut out).unwrap();
        assert_eq!(st, DrainStats { samples: 1, lost: 5, other: 1, max_fill: 0.0 });
        let s = out[0];
        assert_eq!((s.ip, s.pid, s.tid, s.time, s.cpu), (0x401000, 7, 9, 123_456, 3));
        assert_eq!(
            (s.addr, s.period, s.weight, s.data_src, s.phys_addr),
            (0x7f00_0000_1234, 10_000, 250, 0x1_0000_0142, 0x1_2345_6789)
        );
        // Cut inside the record: the header's size no longer fits.
        assert!(parse_records(sample_bits::SUPPORTED, &buf[..40], &mut out).is_err());
        // A sample_type with a variable-length field is refused, not misread.
        assert!(parse_sample(1 << 5, &[0u8; 64]).is_err());
        // A body shorter than the fields asked for.
        assert!(parse_sample(sample_bits::TID | sample_bits::ADDR, &[0u8; 12]).is_err());
    }

    #[test]
    fn aggregates_by_phys_ranges() {
        let mem = NodeMemory { block_size: 1 << 27, blocks: [(0, 0), (1, 1)].into_iter().collect(), ranges: vec![] };
        let s = |tid, addr, phys, time| RawSample { pid: 1, tid, addr, phys_addr: phys, time, ..RawSample::default() };
        let samples = [
            s(2, 0x1000, 0x10, 5),
            s(2, 0x1fff, 0x20, 9),
            s(3, 0x1000, (1 << 27) + 0x10, 7),
            s(3, 0x5000, 0, 8),       // no phys, no query: unplaced
            s(3, 0, 0x10, 8),         // no address
            s(3, 0x9000, 1 << 40, 8), // phys outside every block
        ];
        let (acc, st) = aggregate(&samples, 4096, Some(&mem), false);
        assert_eq!(st, AggregateStats { placed: 3, unplaced: 3 });
        assert_eq!(acc.len(), 2);
        assert_eq!((acc[0].tid, acc[0].addr, acc[0].node, acc[0].count, acc[0].last_ns), (2, 0x1000, 0, 2, 9));
        assert_eq!((acc[1].tid, acc[1].node, acc[1].phys), (3, 1, Some(1 << 27)));
    }

    #[test]
    fn move_pages_query_of_own_pages() {
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() } as u32;
        let v = vec![1u8; 3 * 4096];
        let a = v.as_ptr() as u64 / 4096 * 4096 + 4096;
        let nodes = query_nodes(me, &[a, 0]).unwrap();
        assert!(nodes[0].is_some(), "a touched page of ours is on some node");
        assert_eq!(nodes[1], None, "page 0 is not mapped");
    }
}
