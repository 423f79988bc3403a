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
//!               cpu|cpu_core/events/mem-loads  ──► PEBS: type, config(+1) from format/*, ldlat 30,
//!                                                  precise_ip 2, kernel excluded
//!                 .../events/mem-loads-aux     ──► a counting group leader per CPU (see below)
//!                 .../cpus (hybrid)            ──► the CPUs that PMU covers
//!               ibs_op/type (+format/cnt_ctl)  ──► IBS op: that type, cnt_ctl=1 (count ops),
//!                                                  period 100,000, no exclude_* bit at all,
//!                                                  RAW too: the op's registers (pmu::ibs)
//!               arm_spe_N (+format/*, cpumask) ──► SPE: that type, ts/pa_enable, load and store
//!                                                  filter, jitter (SPE_TERMS), period 102,400 ops,
//!                                                  kernel excluded, an AUX area per CPU
//!               none                           ──► one note; the other signals carry on
//!   Sampler::open_per_cpu   one perf fd per covered CPU (pid -1), each with a ring buffer
//!                           (behind its mem-loads-aux leader where listed):
//!      ┌──────────────┬──────────────────────────────── 2^n pages ───────────────┐
//!      │ mmap page    │ [hdr|sample][hdr|sample][hdr|lost] ... (wraps)           │
//!      │ data_head ◄──┼── kernel writes ahead      user reads from data_tail ──► │
//!      └──────────────┴────────────────────────────────────────────────────────┘
//!   drain()   read data_head (acquire), parse records up to it, store data_tail (release)
//!   PERF_RECORD_SAMPLE (sample_type IP|TID|TIME|ADDR|CPU|PERIOD|RAW|WEIGHT|DATA_SRC|PHYS_ADDR, in
//!   that order, each present only when asked) ──► RawSample; IBS op: the RAW registers fill the
//!   address, source, latency, physical address the kernel left empty (before 6.1) ──► kept when
//!   is_memory_access (a user data address; with DATA_SRC, a load or store not served by L1/L2;
//!   IBS op: a user-mode op by IbsOpRip), else counted as dropped (undecodable RAW: malformed too)
//!   PERF_RECORD_LOST, _LOST_SAMPLES ──► lost;  _THROTTLE ──► throttles (fill counted as full)
//!   SPE: PERF_RECORD_AUX (flags TRUNCATED/PARTIAL/COLLISION counted; TRUNCATED: enabled again)
//!        + the AUX bytes aux_tail..aux_head (wrapping) ──► pmu::spe records ──► RawSample,
//!        thread from the CONTEXT packet, process from /proc/TID/status ──► is_memory_access
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
//! # The mem-loads-aux leader
//!
//! On Sapphire and Emerald Rapids and the P-cores of hybrid parts (Alder Lake and later) the kernel
//! sets `PMU_FL_MEM_LOADS_AUX`, and `intel_pmu_hw_config` (`arch/x86/events/intel/core.c`, Linux
//! 5.12 for SPR, 5.13 for the hybrid big core through `require_mem_loads_aux_event`) refuses with
//! ENODATA a `mem-loads` event (`event=0xcd,umask=0x1`) that samples `DATA_SRC` unless
//! `mem-loads-aux` (`event=0x03,umask=0x82`) leads its group: the load-latency event "doesn't
//! function quite right" without it. perf opens `{cpu/mem-loads-aux/,cpu/mem-loads,ldlat=30/pp}:S`
//! (5.12 on; `{%s/mem-loads-aux/,%s/mem-loads,ldlat=%u/}:P` since the hybrid rework) whenever sysfs
//! lists the aux event (`tools/perf/arch/x86/util/mem-events.c`), and so does this
//! module: per CPU a counting leader (no sample period, no record written, the member's clock), then
//! `mem-loads` in its group. Only the member has a ring and takes `PERF_EVENT_IOC_PERIOD` (a
//! non-sampling event refuses it); ENABLE and DISABLE go to both, since a member counts only while
//! its leader does. Granite Rapids lists the aux event but does not require it; opening it there
//! is harmless, as with perf.
//!
//! # Units
//!
//! Addresses in bytes, times in ns (CLOCK_MONOTONIC), weights as the PMU reports them (cycles of load
//! latency for PEBS), counts in samples; periods in loads of [`PEBS_LDLAT`] cycles or more (PEBS),
//! dispatched ops (IBS op with `cnt_ctl`), faults.
//!
//! # Limits
//!
//! Opening per-CPU events for all processes needs root (or CAP_PERFMON, or perf_event_paranoid <= 0);
//! a ring that overflows loses records (counted from PERF_RECORD_LOST). ARM SPE: a record names
//! its thread through the CONTEXT packet, which the kernel writes only when built with
//! `CONFIG_PID_IN_CONTEXTIDR` and the opener may see kernel data; without it, through the CPU's
//! running thread at the record's time: a switch tracker beside each SPE event (a dummy event with
//! `context_switch`, its records sent into the SPE event's ring, [`EventSpec::track_attr`], as perf
//! arranges it) gives `PERF_RECORD_SWITCH_CPU_WIDE` ([`spe::Timeline`]) in perf's own clock, and
//! the record's TIMESTAMP (the generic timer's count) is converted to that clock with the mmap
//! page's `time_zero`/`time_mult`/`time_shift` ([`spe::TimeConv`]), as perf does. A record with
//! neither (no timestamp, no conversion offered, no switch seen yet on its CPU since the sampler
//! opened: a thread that has run since before then without a switch) is unattributed, dropped and
//! counted ([`DrainStats::unattributed`], [`Sampler::no_accesses`] says why). The switch records
//! share the [`RING_BYTES`] ring (40 bytes each: a CPU switching more than about 3,000 times a
//! second fills it within a one-second drain); when the ring loses records the CPU's timeline is
//! dropped, so no record is attributed to a thread that may not have run, until the next switch
//! (the loss counted in [`DrainStats::lost`]). The switch tracker is checked on this kernel (its
//! records reach the ring and name the running thread); the timestamp conversion only with built
//! numbers, since this development VM's kernel publishes no `time_zero` (a paravirtual sched_clock:
//! x86 `arch_perf_update_userpage` leaves `cap_user_time_zero` clear), and SPE itself with built
//! records only. SPE's cache level comes from the architected events, not the IMPDEF data source
//! ([`spe`] Limits); its records' timestamps are not converted to CLOCK_MONOTONIC: a sample carries
//! the time of the drain that read it, and every drain stops and restarts each SPE event so that
//! the kernel publishes all records written so far (at most one drain interval old; without the
//! restart only those up to the last [`SPE_AUX_WATERMARK`]). An AUX area that fills is truncated by
//! the kernel, which stops the event; the next drain enables it again, the loss counted
//! ([`DrainStats::aux_truncated`]) and the fill taken as full. The daemon's metrics count SPE
//! records as samples and the unattributed ones among the dropped, the AUX flags not apart. The
//! aggregation counts every kept sample as one access: `WEIGHT` and the `DATA_SRC`
//! locality are read but not weighed, which is why the cache levels that say nothing about a
//! thread's node are filtered out instead ([`PEBS_LDLAT`], [`is_memory_access`]). IBS op samples
//! every op, so most of its records are dropped (no load or store, or an L1/L2 hit) yet still fill
//! the ring and cost an interrupt. Before Linux 6.1 the kernel fills no data address or source for
//! IBS op at all, only `PERF_SAMPLE_RAW`, the op's registers: [`ibs`] decodes them, asked on every
//! kernel since backports make the version no guide ([`IBS_OP_SAMPLE_TYPE`]), at the price of
//! records twice as large (128 to 144 bytes), half as many a ring; a RAW payload that is not those
//! registers is counted ([`DrainStats::malformed`]) and [`Sampler::no_accesses`] says so.
//! `l3missonly` (Zen 4) would leave only L3 misses, but the hardware restarts the count when the
//! tagged op does not miss, skewing the period (perf warns so, `tools/perf/arch/x86/util/evsel.c`
//! `ibs_l3miss_warn`), which the sampling stretch and density control assume exact: not used. On a
//! hybrid part only the CPUs of the PMU found first (`cpu_core`) are sampled; the E-cores'
//! `cpu_atom` is not opened ([`Sampler::skipped`]).

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, Ordering};

use crate::sample::AccessSample;
use crate::signal_error::{hex, SignalError};

pub mod ibs;
pub mod spe;
pub use ibs::IbsOpRegs;

/// `PERF_TYPE_SOFTWARE`.
pub const PERF_TYPE_SOFTWARE: u32 = 1;
/// `PERF_TYPE_RAW`.
pub const PERF_TYPE_RAW: u32 = 4;
/// `PERF_COUNT_SW_PAGE_FAULTS`.
pub const PERF_COUNT_SW_PAGE_FAULTS: u64 = 2;
/// `PERF_COUNT_SW_DUMMY`: counts nothing; a carrier of side-band records.
pub const PERF_COUNT_SW_DUMMY: u64 = 9;

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
    /// The PMU driver's raw record, `{ u32 size; char data[size]; }`: for AMD IBS op the op's
    /// registers ([`super::ibs`]).
    pub const RAW: u64 = 1 << 10;
    /// Weight (load latency).
    pub const WEIGHT: u64 = 1 << 14;
    /// Data source (`union perf_mem_data_src`).
    pub const DATA_SRC: u64 = 1 << 15;
    /// Physical address of the data.
    pub const PHYS_ADDR: u64 = 1 << 19;
    /// Every bit [`super::parse_sample`] understands; others change the layout and are refused.
    pub const SUPPORTED: u64 = IP | TID | TIME | ADDR | CPU | PERIOD | RAW | WEIGHT | DATA_SRC | PHYS_ADDR;
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

/// The sample type of AMD IBS op: [`MEM_SAMPLE_TYPE`] and `PERF_SAMPLE_RAW`, the op's registers
/// ([`ibs`]). Always, not only where the kernel fills no address: Linux fills `ADDR` and
/// `DATA_SRC` for IBS op from 6.1 (`arch/x86/events/amd/ibs.c` `perf_ibs_parse_ld_st_data`), but a
/// distribution kernel may carry that back under an older version number (or not carry it under
/// a newer one), so no version check tells which; and asked on every kernel, the registers also
/// give what no kernel reports for IBS, whether the op ran in user mode (IbsOpRip). The decode
/// keeps the kernel's fields where it filled them and takes the registers' where it did not, so
/// one filter ([`is_memory_access`]) gives one answer on both. Cost: the RAW field is 64 bytes,
/// 72 or 80 with IbsBrTarget/IbsOpData4 (the capability words Zen parts log, `0x3ff` and `0xbff`,
/// have IbsBrTarget), so a record takes 128 to 144 bytes instead of 64 (136 on those parts) and a
/// ring holds 910 to 1,024 of them ([`ring_records`] counts the least).
pub const IBS_OP_SAMPLE_TYPE: u64 = MEM_SAMPLE_TYPE | sample_bits::RAW;

/// Bytes one PERF_RECORD_SAMPLE of `sample_type` takes in a ring: the 8-byte header, 8 bytes per
/// fixed field (every one [`sample_bits::SUPPORTED`] names is one u64 or two u32s) and, with
/// `RAW`, the IBS op registers' field ([`ibs::RAW_FIELD_BYTES`], the least IBS op writes; 8 or 16
/// more on CPUs with IbsBrTarget/IbsOpData4): the layout [`parse_sample`] reads.
pub const fn sample_record_bytes(sample_type: u64) -> usize {
    let st = sample_type & sample_bits::SUPPORTED;
    let raw = if st & sample_bits::RAW != 0 { ibs::RAW_FIELD_BYTES } else { 0 };
    8 + 8 * (st & !sample_bits::RAW).count_ones() as usize + raw
}

/// Records of `sample_type` one of the daemon's rings ([`RING_BYTES`]) holds between two
/// drains: 2,048 memory-access samples (with 4 kB or 64 kB pages alike).
pub const fn ring_records(sample_type: u64) -> usize {
    RING_BYTES / sample_record_bytes(sample_type)
}

/// `PERF_RECORD_LOST`: `{ u64 id; u64 lost; sample_id }`, records the ring had no room for.
pub const PERF_RECORD_LOST: u32 = 2;
/// `PERF_RECORD_THROTTLE`: `{ u64 time; u64 id; u64 stream_id; sample_id }`, the kernel stopped the
/// event until the next tick because it fired more often than `perf_event_max_sample_rate`
/// (`kernel/events/core.c` `__perf_event_account_interrupt`); the samples it would have taken are
/// neither written nor counted anywhere.
pub const PERF_RECORD_THROTTLE: u32 = 5;
/// `PERF_RECORD_UNTHROTTLE`: same body, the event runs again.
pub const PERF_RECORD_UNTHROTTLE: u32 = 6;
/// `PERF_RECORD_SAMPLE`.
pub const PERF_RECORD_SAMPLE: u32 = 9;
/// `PERF_RECORD_AUX`: `{ u64 aux_offset; u64 aux_size; u64 flags; sample_id }`, the kernel
/// moved `aux_head` over `aux_size` new bytes of the AUX area (`kernel/events/ring_buffer.c`
/// `perf_aux_output_end` -> `perf_event_aux_event`), with what went wrong in `flags`
/// ([`aux_flags`]).
pub const PERF_RECORD_AUX: u32 = 11;

/// `PERF_AUX_FLAG_*` of a [`PERF_RECORD_AUX`] (`include/uapi/linux/perf_event.h`).
pub mod aux_flags {
    /// The AUX area was full: data was lost, and the kernel disables the event
    /// (`perf_aux_output_end`: `perf_event_disable_inatomic` when TRUNCATED), so it must be
    /// enabled again once room is made.
    pub const TRUNCATED: u64 = 0x01;
    /// Written in overwrite (snapshot) mode; never for a writable mapping.
    pub const OVERWRITE: u64 = 0x02;
    /// The last record is incomplete (SPE: `PMBSR_EL1.DL`, data lost, `arm_spe_pmu.c`
    /// `arm_spe_pmu_buf_get_fault_act` sets it with TRUNCATED).
    pub const PARTIAL: u64 = 0x04;
    /// Samples collided (SPE: `PMBSR_EL1.COLL`, an operation sampled while the last was still
    /// in flight, so it was not recorded: the period is too short for this load).
    pub const COLLISION: u64 = 0x08;
}

/// `PERF_RECORD_LOST_SAMPLES`: `{ u64 lost; sample_id }`, samples the PMU driver dropped before
/// the ring (Linux 4.2+; Intel PEBS records whose counter could not be told apart,
/// `arch/x86/events/intel/ds.c` `intel_pmu_drain_pebs_nhm` -> `perf_log_lost_samples`).
pub const PERF_RECORD_LOST_SAMPLES: u32 = 13;

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
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const PRECISE_IP_SHIFT: u32 = 15;
const FLAG_SAMPLE_ID_ALL: u64 = 1 << 18;
const FLAG_USE_CLOCKID: u64 = 1 << 25;
/// `context_switch`: PERF_RECORD_SWITCH(_CPU_WIDE) records in the ring (Linux 4.3+).
const FLAG_CONTEXT_SWITCH: u64 = 1 << 26;
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
/// `PERF_EVENT_IOC_SET_OUTPUT` = `_IO('$', 5)`: the event's records go to the ring of the fd given.
const PERF_EVENT_IOC_SET_OUTPUT: libc::c_ulong = ioc_number(ioc::NONE, b'$', 5, 0);
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
    /// ARM SPE (`arm_spe_N`): records in an AUX area, decoded by [`spe`].
    ArmSpe,
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
    /// `config` of a counting event (same PMU type, no samples) to open on each CPU as the group
    /// leader of this one: Intel's `mem-loads-aux` (`event=0x03,umask=0x82`), which Sapphire and
    /// Emerald Rapids and the P-cores of the hybrid parts require before `mem-loads` may sample
    /// `DATA_SRC` (module essay, "The mem-loads-aux leader"). `None`: opened alone.
    pub aux_config: Option<u64>,
    /// The CPUs this PMU counts on, from its sysfs `cpus` file (a hybrid part's `cpu_core` or
    /// `cpu_atom`, Linux 5.13+); `None`: every CPU (`cpu`, `ibs_op`, software events).
    /// [`Sampler::open_per_cpu`] opens on the others' intersection with these and reports the rest
    /// ([`Sampler::skipped`]).
    pub cpus: Option<Vec<u32>>,
    /// Whether each ring also carries the CPU's context switches, from a switch tracker beside the
    /// event ([`EventSpec::track_attr`]), and the event keeps perf's own clock (no `use_clockid`)
    /// so its times and theirs compare: SPE's, which attributes records by time
    /// ([`spe::Timeline`]).
    pub track_switches: bool,
}

/// Default sample period of PMU load sampling (Intel PEBS `mem-loads`), loads per sample: loads
/// at or above [`PEBS_LDLAT`] cycles. Default 10,000. Source: the period of the `perf mem`/PEBS
/// examples in the kernel's perf documentation (`-c10000`). What it prevents: a ring flooded by a
/// load-heavy thread (a lower period) or too few samples for co-access within a one-second window
/// (a higher one).
pub const PMU_PERIOD: u64 = 10_000;

/// Load-latency threshold of Intel PEBS `mem-loads` (`ldlat`, `config1:0-15`), core cycles: only
/// loads that take at least this long are counted and sampled. Default 30. Source: perf's own
/// default for `perf mem`/`perf c2c` (`tools/perf/util/mem-events.c`
/// `perf_mem_events__loads_ldlat = 30`, perf 4.x to 6.x); the kernel's sysfs alias says `ldlat=3`
/// (`arch/x86/events/intel/core.c` `mem_ld_snb`/`mem_ld_hsw`), which counts nearly every load.
/// What it prevents: samples of loads the L1 (4-5 cycles) or L2 (about 14) served, which cost no
/// memory traffic and say nothing about which node serves the thread, crowding out the ones that
/// do (L3, other caches, local and remote DRAM): at 3 a thread's hot stack and locals, always in
/// L1, outweigh the array it streams from a remote node. The aggregation counts every sample as
/// one access and does not weigh by `DATA_SRC` or `WEIGHT`, so the threshold is the filter; AMD
/// IBS, which has none before Zen 5, drops the same cache levels by data source
/// ([`is_memory_access`]).
pub const PEBS_LDLAT: u64 = 30;

/// Default sample period of AMD IBS op sampling, dispatched micro-ops per sample (`cnt_ctl=1`).
/// Default 100,000. Source: the period of every `ibs_op` example in the kernel's
/// `tools/perf/Documentation/perf-amd-ibs.txt` (`perf record -e ibs_op/cnt_ctl=1/ -c 100000 -a`,
/// and `perf mem record -c 100000`); it fits the 16-bit `IbsOpMaxCnt` (x16: at most 1,048,560,
/// `arch/x86/events/amd/ibs.c` `perf_ibs_op.max_period`), so every IBS generation takes one
/// interrupt per sample at the base period. IBS samples every kind of op, and the ring's fill (what
/// the sampling density control reads) counts them all: in the kernel's example `perf mem` profile
/// (of `make`) 54K of 92K IBS samples were no load or store, 36K L1 and 1.5K L2 hits, so fewer than
/// one sample in 100 was an access [`is_memory_access`] keeps (a memory-bound thread has more).
/// What it prevents: the 10,000 of [`PMU_PERIOD`], which counts
/// only slow loads on Intel, would be about 200,000 samples a second on a core dispatching 2 x 10^9
/// ops a second, far
/// above what the kernel lets through before throttling (`perf_event_max_sample_rate`, 100,000 a
/// second by default, less once sampling takes more than `perf_cpu_time_max_percent` of a CPU).
pub const IBS_OP_PERIOD: u64 = 100_000;

/// Default sample period of the page-fault fallback, faults per sample. Default 16. Source: a choice:
/// first touch of 1 GiB is 262,144 faults, 16,384 records of 40 bytes (640 kB), which one drain per
/// second of a 128 kB-per-CPU ring loses partly; 16 keeps a burst visible without flooding. What it
/// prevents: a page-faulting workload making the daemon its busiest consumer.
pub const PAGE_FAULT_PERIOD: u64 = 16;

/// Default sample interval of ARM SPE, operations per sample (`PMSIRR_EL1.INTERVAL`). Default
/// 102,400. Source: [`IBS_OP_PERIOD`]'s reasoning (both count operations, not loads) rounded to a
/// multiple of 256, because the driver clears the low 8 bits of the period
/// (`arm_spe_pmu.c` `arm_spe_event_sanitise_period`: `period &= PMSIRR_EL1_INTERVAL_MASK`, bits
/// 8-31), so every stretch the daemon multiplies it by is taken exactly; perf's own default is
/// the PMU's `caps/min_interval` (256 to 4,096), a record every few thousand operations, sized
/// for a short `perf record` into a large buffer. SPE records only the sampled operations the
/// type filter passes (loads and stores, [`EventSpec::arm_spe`]), about a third, of 40 to 64
/// bytes each: at 2 x 10^9 operations a second about 6,500 records, 0.3-0.4 MB a second a CPU.
/// What it prevents: an AUX area ([`SPE_AUX_BYTES`]) that fills between two drains of a one-
/// second step (a full area is truncated and stops sampling until drained), and collisions
/// (an operation sampled while the last is still tracked is dropped, [`aux_flags::COLLISION`]).
pub const SPE_PERIOD: u64 = 102_400;

/// Bytes of each CPU's SPE AUX area. Default 512 kB (a power of two of pages, as the kernel's
/// AUX mmap requires; `arm_spe_pmu_setup_aux` wants at least 2 pages). Source: [`SPE_PERIOD`]'s
/// rate, about 1.3 s of records on a busy CPU; perf mmaps 4 MB a CPU for SPE as root
/// (`tools/perf/arch/arm64/util/arm-spe.c`). What it prevents: truncation between two drains of
/// the daemon's one-second step (a smaller area) and pinning tens of MB on many-core servers (80
/// CPUs: 40 MB).
pub const SPE_AUX_BYTES: usize = 512 << 10;

/// `aux_watermark` of the SPE event, bytes: the kernel moves `aux_head` (and the driver raises its
/// buffer interrupt) every this many bytes (`arm_spe_pmu.c` `__arm_spe_pmu_next_off`: the limit
/// is the page after the wakeup point). Default 64 kB, an eighth of [`SPE_AUX_BYTES`]. Source: the
/// kernel's default is half the area (`kernel/events/ring_buffer.c` `rb_alloc_aux`), which
/// would leave up to 256 kB of records unseen by a drain. What it prevents: a drain that sees
/// none of the last 0.6 s of records (the default) or an interrupt every few records (smaller).
pub const SPE_AUX_WATERMARK: u32 = (SPE_AUX_BYTES / 8) as u32;

/// The `format/` terms of the SPE event, each what it asks the driver for
/// (`drivers/perf/arm_spe_pmu.c`, `ATTR_CFG_FLD_*` and the `arm_spe_event_to_*` functions):
/// `ts_enable` (config:0, PMSCR_EL1.TS: a TIMESTAMP packet ends each record, for stage-3 thread
/// attribution by time), `pa_enable` (config:1, PMSCR_EL1.PA: the data's physical address, so the
/// node comes from the memory block without a move_pages query; needs perfmon capability, the
/// daemon runs as root), `load_filter` and `store_filter` (config:33, 34, PMSFCR_EL1.LD/ST with
/// FT: only loads and stores are recorded, the rest never reach the buffer), `jitter` (config:16,
/// PMSIRR_EL1.RND: a random perturbation of the interval, so a loop whose length divides the
/// period is not sampled at one instruction). Not asked: `pct_enable` (the physical counter; the
/// virtual one is what perf converts), `branch_filter`, `event_filter` (config1, events the
/// CPU may not implement: EOPNOTSUPP), `min_latency` (config2: PMSFCR_EL1.FL, refused with
/// EOPNOTSUPP where the CPU has no latency filter, which the sysfs files do not tell).
pub const SPE_TERMS: &str = "ts_enable=1,pa_enable=1,load_filter=1,store_filter=1,jitter=1";

impl EventSpec {
    /// The ARM SPE event of the PMU in `dir` (named `pmu`): its `type`, [`SPE_TERMS`] through its
    /// `format/` files, the CPUs of its `cpumask` file (`arm_spe_pmu.c` `cpumask_show`: one SPE
    /// PMU per CPU type, a list), [`SPE_PERIOD`]; the ring carries only `PERF_RECORD_AUX` and
    /// the like, with a TID/TIME/CPU `sample_id` trailer. `Err` names the file that is missing or
    /// unusable.
    pub fn arm_spe(dir: &Path, pmu: &str) -> Result<EventSpec, String> {
        let type_ = read_type(dir).ok_or_else(|| format!("{pmu}/type unreadable"))?;
        let (config, config1, config2) = event_config(dir, SPE_TERMS).map_err(|why| format!("{pmu}/{why}"))?;
        let cpus = match std::fs::read_to_string(dir.join("cpumask")) {
            Ok(list) => Some(
                crate::parse::parse_list(&list)
                    .map_err(|e| format!("{pmu}/cpumask unusable: {e}"))?
                    .iter()
                    .collect::<Vec<u32>>(),
            ),
            Err(_) => None,
        };
        Ok(EventSpec {
            kind: SourceKind::ArmSpe,
            name: format!("{pmu}/load_filter=1,store_filter=1/"),
            type_,
            config,
            config1,
            config2,
            precise_ip: 0,
            sample_type: sample_bits::TID | sample_bits::TIME | sample_bits::CPU,
            period: SPE_PERIOD,
            aux_config: None,
            cpus,
            track_switches: true,
        })
    }

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
            aux_config: None,
            cpus: None,
            track_switches: false,
        }
    }

    /// AMD's IBS op event of PMU type `type_`: `config` is `cnt_ctl=1` from the PMU's format when `ops` (count
    /// dispatched ops, not cycles), sampled every [`IBS_OP_PERIOD`] with the memory sample type and
    /// the op's registers ([`IBS_OP_SAMPLE_TYPE`]).
    pub fn ibs_op(type_: u32, config: u64, ops: bool) -> Self {
        EventSpec {
            kind: SourceKind::AmdIbsOp,
            name: if ops { "ibs_op/cnt_ctl=1/".into() } else { "ibs_op (cycles)".into() },
            type_,
            config,
            config1: 0,
            config2: 0,
            precise_ip: 0,
            sample_type: IBS_OP_SAMPLE_TYPE,
            period: IBS_OP_PERIOD,
            aux_config: None,
            cpus: None,
            track_switches: false,
        }
    }

    /// The exclusion bits of this kind of event. Intel PEBS: kernel and hypervisor excluded (the
    /// counter's own CPL filter: kernel-side loads are not accesses of the thread's pages, and
    /// [`is_memory_access`] would drop them anyway). AMD IBS op: none at all: IBS has no
    /// privilege filter, and `perf_event_open` refuses (EINVAL) an IBS event with any `exclude_*`
    /// bit: through `PERF_PMU_CAP_NO_EXCLUDE` (`kernel/events/core.c` `perf_try_init_event`:
    /// `event_has_any_exclude_flag`; ibs_fetch from Linux 5.1, ibs_op only from "perf/x86/amd/ibs:
    /// Extend PERF_PMU_CAP_NO_EXCLUDE to IBS Op", in the September 2021 stable updates of 5.4,
    /// 5.10 and 5.13: 5.10.13's `perf_ibs_op` has no capabilities and ignores the bits), from 6.14
    /// in `arch/x86/events/amd/ibs.c` `perf_ibs_init` unless `config2` asks for its software
    /// filter (`swfilt`); kernel-mode ops are dropped by their IbsOpRip instead ([`ibs`]). Page
    /// faults: hypervisor excluded, as before.
    fn exclude_flags(&self) -> u64 {
        match self.kind {
            SourceKind::IntelPebs => FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV,
            SourceKind::AmdIbsOp => 0,
            SourceKind::PageFaults => FLAG_EXCLUDE_HV,
            // The driver turns exclude_kernel into PMSCR_EL1.E1SPE clear (`arm_spe_pmu.c`
            // `arm_spe_event_to_pmscr`): EL1 operations are not sampled at all.
            SourceKind::ArmSpe => FLAG_EXCLUDE_KERNEL,
        }
    }

    /// CLOCK_MONOTONIC time stamps, except where the ring tracks switches
    /// ([`EventSpec::track_switches`], SPE): then perf's own clock, since SPE's timer counts
    /// convert to it (sched_clock on arm64, [`spe::TimeConv`]), not to CLOCK_MONOTONIC, and the
    /// switches' times must be in that clock to say which thread ran when ([`spe::Timeline`]);
    /// the tracker's output can only go to a ring of an event of the same clock
    /// (`kernel/events/core.c` `perf_event_set_output`: EINVAL when the clocks differ).
    fn clock_flags(&self) -> u64 {
        if self.track_switches {
            0
        } else {
            FLAG_USE_CLOCKID
        }
    }

    /// The switch tracker of a spec that tracks switches: a software dummy event
    /// (`PERF_COUNT_SW_DUMMY`, counting nothing) with `context_switch` and the `sample_id` of
    /// TID, TIME and CPU, perf's clock, enabled with the sampler, whose records go to the
    /// event's ring (`PERF_EVENT_IOC_SET_OUTPUT`). It is perf's own arrangement for SPE
    /// (`tools/perf/arch/arm64/util/arm-spe.c` `arm_spe_setup_tracking_event`: a `dummy:u`
    /// event with `context_switch` beside the AUX event). Switches go to a separate event, not
    /// to the SPE event itself, because each drain stops the SPE event
    /// ([`Sampler::drain`]) and a stopped event is sent no switch records: a switch in that
    /// window would go unseen and the next records be given to the thread before it.
    pub fn track_attr(&self) -> Option<PerfEventAttr> {
        self.track_switches.then(|| PerfEventAttr {
            type_: PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: PERF_COUNT_SW_DUMMY,
            sample_period: 1,
            sample_type: sample_bits::TID | sample_bits::TIME | sample_bits::CPU,
            flags: FLAG_DISABLED | FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV | FLAG_SAMPLE_ID_ALL | FLAG_CONTEXT_SWITCH,
            ..PerfEventAttr::default()
        })
    }

    /// The attr to pass to `perf_event_open`: disabled until [`Sampler::enable`], CLOCK_MONOTONIC
    /// time stamps, the exclusions the source allows (`exclude_flags`), a wake-up never requested
    /// (the daemon polls).
    pub fn attr(&self) -> PerfEventAttr {
        PerfEventAttr {
            type_: self.type_,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: self.config,
            sample_period: self.period,
            sample_type: self.sample_type,
            flags: FLAG_DISABLED
                | self.exclude_flags()
                | FLAG_SAMPLE_ID_ALL
                | self.clock_flags()
                | (u64::from(self.precise_ip.min(3)) << PRECISE_IP_SHIFT),
            clockid: if self.track_switches { 0 } else { libc::CLOCK_MONOTONIC },
            config1: self.config1,
            config2: self.config2,
            aux_watermark: if self.kind == SourceKind::ArmSpe { SPE_AUX_WATERMARK } else { 0 },
            ..PerfEventAttr::default()
        }
    }

    /// The attr of the group leader [`EventSpec::aux_config`] asks for, if any: the same PMU type
    /// and exclusions, counting only (`sample_period` 0, no `sample_type`: it writes no record,
    /// so none of its output can be taken for a load sample; perf does the same, making the
    /// event after `mem-loads-aux` the group's sampler, `tools/perf/util/record.c`
    /// `evsel__read_sampler`), disabled until [`Sampler::enable`], and on the member's clock
    /// (`use_clockid`, CLOCK_MONOTONIC): `perf_event_open` refuses a member whose clock differs
    /// from its leader's with EINVAL (`kernel/events/core.c`, "All events in a group should have
    /// the same clock", Linux 4.1+).
    pub fn aux_attr(&self) -> Option<PerfEventAttr> {
        let config = self.aux_config?;
        Some(PerfEventAttr {
            type_: self.type_,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config,
            flags: FLAG_DISABLED | self.exclude_flags() | FLAG_USE_CLOCKID,
            clockid: libc::CLOCK_MONOTONIC,
            ..PerfEventAttr::default()
        })
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
/// `cpu_core` PMU, AMD `ibs_op`, ARM `arm_spe_*` (the first, by name; on a big.LITTLE part the
/// others' CPUs are not sampled, as a hybrid Intel part's E-cores). Reads sysfs only;
/// whether the event really opens is only known when [`Sampler::open_per_cpu`] tries.
///
/// Intel: `events/mem-loads` resolved through the PMU's `format/*` files, with `ldlat` set to
/// [`PEBS_LDLAT`] instead of the alias's 3; `events/mem-loads-aux`, when listed, becomes the
/// group leader ([`EventSpec::aux_config`]) as `perf mem` does (`tools/perf/arch/x86/util/mem-events.c`:
/// the `{%s/mem-loads-aux/,%s/mem-loads,ldlat=%u/}:P` form whenever the PMU lists the event); the
/// PMU's `cpus` file, on a hybrid part, the CPUs it covers. AMD: `ibs_op` with `cnt_ctl=1` (count
/// dispatched ops, so the period is a number of ops, as PEBS's is a number of loads) when its
/// `format/cnt_ctl` exists (the kernel lists it only when the CPU has `IbsOpCntCtl`,
/// `arch/x86/events/amd/ibs.c` `cnt_ctl_is_visible`), else cycles; period [`IBS_OP_PERIOD`]. ARM:
/// [`EventSpec::arm_spe`] of the first `arm_spe_N`.
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
        match intel_mem_loads(&dir, pmu, ev.trim()) {
            Ok(Some(spec)) => return Detection::Found(spec),
            Ok(None) => continue,
            Err(why) => return Detection::Missing(format!("{pmu}/{why}; access sampling off")),
        }
    }
    let ibs = devs.join("ibs_op");
    if let Some(type_) = read_type(&ibs) {
        let ops = ibs.join("format/cnt_ctl").exists();
        let config = if ops {
            match event_config(&ibs, "cnt_ctl=1") {
                Ok((c, _, _)) => c,
                Err(why) => {
                    return Detection::Missing(format!("ibs_op/format/cnt_ctl unusable: {why}; access sampling off"))
                }
            }
        } else {
            0
        };
        return Detection::Found(EventSpec::ibs_op(type_, config, ops));
    }
    if let Some(spe) = names.iter().find(|n| n.starts_with("arm_spe")) {
        return match EventSpec::arm_spe(&devs.join(spe), spe) {
            Ok(spec) => Detection::Found(spec),
            Err(why) => Detection::Missing(format!("{why}; access sampling off")),
        };
    }
    Detection::Missing(format!(
        "no precise-sampling PMU (looked for cpu/events/mem-loads, cpu_core/events/mem-loads, ibs_op, arm_spe_* in {}; \
         found: {}); access sampling off, NUMA faults and residency stand in",
        devs.display(),
        if names.is_empty() { "nothing".to_string() } else { names.join(", ") }
    ))
}

/// The PEBS load-latency spec of the Intel PMU in `dir` whose `events/mem-loads` reads `desc`;
/// `Ok(None)` when the PMU has no readable `type`. `Err` names the file that is unusable.
fn intel_mem_loads(dir: &Path, pmu: &str, desc: &str) -> Result<Option<EventSpec>, String> {
    let has_ldlat = dir.join("format/ldlat").exists();
    let mut terms: Vec<String> = desc
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .filter(|t| !has_ldlat || t.split('=').next() != Some("ldlat"))
        .map(String::from)
        .collect();
    if has_ldlat {
        terms.push(format!("ldlat={PEBS_LDLAT}"));
    }
    let (config, config1, config2) =
        event_config(dir, &terms.join(",")).map_err(|why| format!("events/mem-loads unusable: {why}"))?;
    let aux_config = match std::fs::read_to_string(dir.join("events/mem-loads-aux")) {
        Ok(aux) => {
            Some(event_config(dir, aux.trim()).map_err(|why| format!("events/mem-loads-aux unusable: {why}"))?.0)
        }
        Err(_) => None,
    };
    let cpus = match std::fs::read_to_string(dir.join("cpus")) {
        Ok(list) => Some(
            crate::parse::parse_list(&list).map_err(|e| format!("cpus unusable: {e}"))?.iter().collect::<Vec<u32>>(),
        ),
        Err(_) => None,
    };
    let Some(type_) = read_type(dir) else { return Ok(None) };
    Ok(Some(EventSpec {
        kind: SourceKind::IntelPebs,
        name: format!("{pmu}/mem-loads,ldlat={PEBS_LDLAT}/"),
        type_,
        config,
        config1,
        config2,
        precise_ip: 2,
        sample_type: MEM_SAMPLE_TYPE,
        period: PMU_PERIOD,
        aux_config,
        cpus,
        track_switches: false,
    }))
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
    /// The `PERF_SAMPLE_RAW` field, when sampled.
    pub raw: RawPayload,
}

/// What the `PERF_SAMPLE_RAW` field of a sample held. numapilot asks for it on the AMD IBS op
/// event only ([`IBS_OP_SAMPLE_TYPE`]), so a payload is read as the IBS op registers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RawPayload {
    /// `RAW` not sampled.
    #[default]
    Absent,
    /// The IBS op registers.
    IbsOp(IbsOpRegs),
    /// A payload that is not the IBS op registers: `size` bytes (the field's u32) where `room`
    /// were left in the record after it: shorter than `caps` and the seven registers, without
    /// IbsOpVal, or running past the record (`size > room`: then nothing after it is read, the
    /// record's other later fields stay 0). Its sample is dropped and counted
    /// ([`DrainStats::malformed`]).
    Undecoded {
        /// The payload size the record states.
        size: u32,
        /// Bytes of the record after the size field.
        room: u32,
    },
}

fn malformed(reason: String) -> SignalError {
    SignalError::Malformed { what: "perf sample record", reason }
}

/// Parses the body of a PERF_RECORD_SAMPLE (after the 8-byte header) for `sample_type`, the fields
/// in the kernel's order (`include/uapi/linux/perf_event.h`, `kernel/events/core.c`
/// `perf_output_sample`): ip, pid/tid, time, addr, cpu, period, raw, weight, data_src, phys_addr.
/// A RAW payload is the IBS op registers ([`RawPayload`]); where the kernel left the address,
/// physical address, weight or data source empty (IBS op before Linux 6.1), they are taken from
/// those registers ([`ibs`]). `Err` when the body ends before a fixed field; a RAW payload that
/// does not fit is not an error but [`RawPayload::Undecoded`], and nothing past the body is read.
pub fn parse_sample(sample_type: u64, body: &[u8]) -> Result<RawSample, SignalError> {
    if sample_type & !sample_bits::SUPPORTED != 0 {
        return Err(malformed(format!("sample_type {sample_type:#x} has bits this parser does not lay out")));
    }
    let mut s = RawSample::default();
    let mut at = 0usize;
    let u64_next = |at: &mut usize, name: &str| -> Result<u64, SignalError> {
        let b = body.get(*at..*at + 8).ok_or_else(|| malformed(format!("{} bytes, ends before {name}", body.len())))?;
        *at += 8;
        Ok(u64::from_ne_bytes(b.try_into().expect("8 bytes")))
    };
    use sample_bits as b;
    if sample_type & b::IP != 0 {
        s.ip = u64_next(&mut at, "ip")?;
    }
    if sample_type & b::TID != 0 {
        let v = u64_next(&mut at, "pid/tid")?.to_ne_bytes();
        s.pid = u32::from_ne_bytes(v[0..4].try_into().expect("4"));
        s.tid = u32::from_ne_bytes(v[4..8].try_into().expect("4"));
    }
    if sample_type & b::TIME != 0 {
        s.time = u64_next(&mut at, "time")?;
    }
    if sample_type & b::ADDR != 0 {
        s.addr = u64_next(&mut at, "addr")?;
    }
    if sample_type & b::CPU != 0 {
        let v = u64_next(&mut at, "cpu")?.to_ne_bytes();
        s.cpu = u32::from_ne_bytes(v[0..4].try_into().expect("4"));
    }
    if sample_type & b::PERIOD != 0 {
        s.period = u64_next(&mut at, "period")?;
    }
    if sample_type & b::RAW != 0 {
        // { u32 size; char data[size]; }, the size padded by the kernel so 4 + size is a multiple
        // of 8 (perf_prepare_sample), or { 4, 0u32 } when the driver gave none.
        let size =
            body.get(at..at + 4).ok_or_else(|| malformed(format!("{} bytes, ends before the raw size", body.len())))?;
        let size = u32::from_ne_bytes(size.try_into().expect("4 bytes"));
        at += 4;
        let rest = &body[at..];
        let room = u32::try_from(rest.len()).unwrap_or(u32::MAX);
        let Some(payload) = rest.get(..size as usize) else {
            // The payload runs past the record: where the later fields are is unknown.
            s.raw = RawPayload::Undecoded { size, room };
            return Ok(s);
        };
        s.raw = match IbsOpRegs::from_payload(payload) {
            Some(r) => RawPayload::IbsOp(r),
            None => RawPayload::Undecoded { size, room },
        };
        at += payload.len();
    }
    if sample_type & b::WEIGHT != 0 {
        s.weight = u64_next(&mut at, "weight")?;
    }
    if sample_type & b::DATA_SRC != 0 {
        s.data_src = u64_next(&mut at, "data_src")?;
    }
    if sample_type & b::PHYS_ADDR != 0 {
        s.phys_addr = u64_next(&mut at, "phys_addr")?;
    }
    if let RawPayload::IbsOp(r) = s.raw {
        complete_from_ibs_op(&mut s, &r);
    }
    Ok(s)
}

/// Fills what the kernel left empty from the IBS op registers: before Linux 6.1 it writes `addr` 0,
/// `data_src` `PERF_MEM_NA`, `weight` 0 and `phys_addr` 0 (`perf_sample_data_init`,
/// `perf_virt_to_phys(0)`) for every IBS op sample; 6.1+ fills them from the same registers
/// (`perf_ibs_parse_ld_st_data`), and what it filled is kept. A data source without a load or
/// store is the kernel's "nothing" (6.1+ writes that too for other ops, and so does the
/// synthesis).
fn complete_from_ibs_op(s: &mut RawSample, r: &IbsOpRegs) {
    use data_src as d;
    if s.addr == 0 {
        s.addr = r.data_addr().unwrap_or(0);
    }
    if s.phys_addr == 0 {
        s.phys_addr = r.phys_addr().unwrap_or(0);
    }
    if s.weight == 0 {
        s.weight = r.weight().unwrap_or(0);
    }
    if s.data_src & (d::OP_LOAD | d::OP_STORE) == 0 {
        s.data_src = r.data_src();
    }
}

/// `union perf_mem_data_src` (`include/uapi/linux/perf_event.h`, the layout since Linux 3.10;
/// `mem_lvl_num` and `mem_remote` from 4.14, `mem_hops` from 5.16): the fields
/// [`is_memory_access`] reads and those [`ibs::IbsOpRegs::data_src`] writes.
pub mod data_src {
    /// `mem_op`, bits 0-4.
    pub const OP_MASK: u64 = 0x1f;
    /// `PERF_MEM_OP_NA`.
    pub const OP_NA: u64 = 0x01;
    /// `PERF_MEM_OP_LOAD`.
    pub const OP_LOAD: u64 = 0x02;
    /// `PERF_MEM_OP_STORE`.
    pub const OP_STORE: u64 = 0x04;
    /// `mem_lvl`, bits 5-18.
    pub const LVL_SHIFT: u32 = 5;
    /// `PERF_MEM_LVL_NA`.
    pub const LVL_NA: u64 = 0x01;
    /// `PERF_MEM_LVL_HIT`.
    pub const LVL_HIT: u64 = 0x02;
    /// `PERF_MEM_LVL_MISS`.
    pub const LVL_MISS: u64 = 0x04;
    /// `PERF_MEM_LVL_L1`.
    pub const LVL_L1: u64 = 0x08;
    /// `PERF_MEM_LVL_LFB`.
    pub const LVL_LFB: u64 = 0x10;
    /// `PERF_MEM_LVL_L2`.
    pub const LVL_L2: u64 = 0x20;
    /// `PERF_MEM_LVL_L3`.
    pub const LVL_L3: u64 = 0x40;
    /// `PERF_MEM_LVL_LOC_RAM`.
    pub const LVL_LOC_RAM: u64 = 0x80;
    /// `PERF_MEM_LVL_REM_RAM1`.
    pub const LVL_REM_RAM1: u64 = 0x100;
    /// `PERF_MEM_LVL_REM_CCE1`.
    pub const LVL_REM_CCE1: u64 = 0x400;
    /// `PERF_MEM_LVL_REM_CCE2`.
    pub const LVL_REM_CCE2: u64 = 0x800;
    /// `PERF_MEM_LVL_IO`.
    pub const LVL_IO: u64 = 0x1000;
    /// `PERF_MEM_LVL_UNC`.
    pub const LVL_UNC: u64 = 0x2000;
    /// `mem_snoop`, bits 19-23.
    pub const SNOOP_SHIFT: u32 = 19;
    /// `PERF_MEM_SNOOP_NA`.
    pub const SNOOP_NA: u64 = 0x01;
    /// `mem_lock`, bits 24-25.
    pub const LOCK_SHIFT: u32 = 24;
    /// `PERF_MEM_LOCK_NA`.
    pub const LOCK_NA: u64 = 0x01;
    /// `mem_dtlb`, bits 26-32.
    pub const TLB_SHIFT: u32 = 26;
    /// `PERF_MEM_TLB_NA`.
    pub const TLB_NA: u64 = 0x01;
    /// `mem_lvl_num`, bits 33-36.
    pub const LVLNUM_SHIFT: u32 = 33;
    /// `PERF_MEM_LVLNUM_L1`.
    pub const LVLNUM_L1: u64 = 0x01;
    /// `PERF_MEM_LVLNUM_L2`.
    pub const LVLNUM_L2: u64 = 0x02;
    /// `PERF_MEM_LVLNUM_L3`.
    pub const LVLNUM_L3: u64 = 0x03;
    /// `PERF_MEM_LVLNUM_CXL`.
    pub const LVLNUM_CXL: u64 = 0x09;
    /// `PERF_MEM_LVLNUM_IO`.
    pub const LVLNUM_IO: u64 = 0x0a;
    /// `PERF_MEM_LVLNUM_ANY_CACHE`.
    pub const LVLNUM_ANY_CACHE: u64 = 0x0b;
    /// `PERF_MEM_LVLNUM_LFB`.
    pub const LVLNUM_LFB: u64 = 0x0c;
    /// `PERF_MEM_LVLNUM_RAM`.
    pub const LVLNUM_RAM: u64 = 0x0d;
    /// `PERF_MEM_LVLNUM_PMEM`.
    pub const LVLNUM_PMEM: u64 = 0x0e;
    /// `PERF_MEM_LVLNUM_NA`.
    pub const LVLNUM_NA: u64 = 0x0f;
    /// `mem_remote`, bit 37.
    pub const REMOTE_SHIFT: u32 = 37;
    /// `PERF_MEM_REMOTE_REMOTE`.
    pub const REMOTE: u64 = 0x01;
    /// `mem_hops`, bits 43-45.
    pub const HOPS_SHIFT: u32 = 43;
    /// `PERF_MEM_HOPS_0`: another core of the same node.
    pub const HOPS_0: u64 = 0x01;
    /// `PERF_MEM_HOPS_1`: another node of the same socket (IBS says no more, so it writes this for
    /// every remote source).
    pub const HOPS_1: u64 = 0x02;
    /// `PERF_MEM_NA`: op, level, snoop, lock and TLB all not available; the kernel's default
    /// (`perf_sample_data_init`) and what 6.1+ IBS op writes for an op that is no load or store.
    pub const MEM_NA: u64 =
        OP_NA | LVL_NA << LVL_SHIFT | SNOOP_NA << SNOOP_SHIFT | LOCK_NA << LOCK_SHIFT | TLB_NA << TLB_SHIFT;
}

/// Whether a sample of an event with `sample_type` is a user-space memory access the aggregation
/// should count:
///
/// - with the IBS op registers (`RAW`): an op that ran in user mode by its IbsOpRip
///   ([`IbsOpRegs::user_mode`]): IBS has no privilege filter, and a kernel-mode op touching a user
///   address (`copy_to_user`) is the kernel's access, not the thread's; a RAW payload that is not
///   those registers ([`RawPayload::Undecoded`]) is refused;
/// - a data address, in the user half of the address space: not 0 (the kernel writes 0 when the
///   PMU gave none, `kernel/events/core.c` `perf_prepare_sample`; IBS op gives none for ops that
///   are no load or store or whose IbsDcLinAd is not valid, and before Linux 6.1 none at all,
///   when [`parse_sample`] takes it from the registers), and bit 63 clear (kernel addresses are
///   the upper half on x86-64 and arm64, `Documentation/arch/x86/x86_64/mm.rst`): kernel buffers
///   are not the thread's pages;
/// - when the event samples `DATA_SRC` or `RAW`: a load or a store by its `mem_op`: IBS op sets
///   `PERF_MEM_OP_NA` for every other op (`arch/x86/events/amd/ibs.c` `perf_ibs_get_mem_op`, 6.1+;
///   before, [`parse_sample`] synthesises the same from IbsOpData3), and the generic default is
///   `PERF_MEM_NA`;
/// - and not one the L1 or L2 served (`mem_lvl` L1 or L2 with HIT, or `mem_lvl_num` L1 or L2):
///   the loads [`PEBS_LDLAT`] keeps out of the Intel samples, dropped here for IBS op, which has no
///   such threshold before Zen 5 (`perf_ibs_get_mem_lvl`: `L(L1) | LN(L1)` when `dc_miss` is 0,
///   `L(L2) | LN(L2)` when `l2_miss` is 0).
pub fn is_memory_access(sample_type: u64, s: &RawSample) -> bool {
    use data_src as d;
    match s.raw {
        RawPayload::IbsOp(r) if !r.user_mode() => return false,
        RawPayload::Undecoded { .. } => return false,
        _ => {}
    }
    if s.addr == 0 || s.addr >> 63 != 0 {
        return false;
    }
    if sample_type & (sample_bits::DATA_SRC | sample_bits::RAW) == 0 {
        return true;
    }
    let ds = s.data_src;
    if ds & (d::OP_LOAD | d::OP_STORE) == 0 {
        return false;
    }
    let lvl = (ds >> d::LVL_SHIFT) & 0x3fff;
    let lvl_num = (ds >> d::LVLNUM_SHIFT) & 0xf;
    let hit_l1_l2 = lvl & d::LVL_HIT != 0 && lvl & (d::LVL_L1 | d::LVL_L2) != 0;
    !(hit_l1_l2 || lvl_num == d::LVLNUM_L1 || lvl_num == d::LVLNUM_L2)
}

/// Counts of one drain.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DrainStats {
    /// Sample records parsed (SPE: records decoded from the AUX area).
    pub samples: u64,
    /// Of those, samples [`is_memory_access`] refused (no user data address, no load or store, an
    /// L1 or L2 hit, a kernel-mode IBS op, an undecodable RAW payload): not passed on.
    pub dropped: u64,
    /// Of `dropped`, samples whose `RAW` payload was not the IBS op registers
    /// ([`RawPayload::Undecoded`]: too short, past its record, no valid op): a kernel writing
    /// another layout shows here instead of passing for a machine without memory traffic. SPE:
    /// records given up for bytes that begin no packet or a packet cut at the end, in a drain
    /// whose AUX area reported no lost data ([`aux_flags::PARTIAL`]).
    pub malformed: u64,
    /// Records the kernel reported lost (ring full: PERF_RECORD_LOST; dropped by the PMU driver:
    /// PERF_RECORD_LOST_SAMPLES).
    pub lost: u64,
    /// PERF_RECORD_THROTTLE records: times the kernel stopped the event for sampling too fast;
    /// what it missed meanwhile is counted nowhere.
    pub throttles: u64,
    /// Other records skipped (UNTHROTTLE, COMM, ITRACE_START, ...).
    pub other: u64,
    /// Context-switch records (`PERF_RECORD_SWITCH_CPU_WIDE`, from a switch tracker,
    /// [`EventSpec::track_switches`]).
    pub switches: u64,
    /// AUX bytes the kernel reported written ([`PERF_RECORD_AUX`] sizes; SPE).
    pub aux_bytes: u64,
    /// [`PERF_RECORD_AUX`] records with [`aux_flags::TRUNCATED`]: the AUX area was full and
    /// records were lost; the event is enabled again by [`Sampler::drain`].
    pub aux_truncated: u64,
    /// Of those, with [`aux_flags::PARTIAL`]: the last record before the loss is incomplete.
    pub aux_partial: u64,
    /// [`PERF_RECORD_AUX`] records with [`aux_flags::COLLISION`]: samples the hardware could not
    /// record, so fewer than the period says.
    pub aux_collisions: u64,
    /// SPE records that were a memory access beyond L2 but named no thread that still runs: no
    /// CONTEXT packet (the kernel writes none without `CONFIG_PID_IN_CONTEXTIDR`) and no context
    /// switch on their CPU before their timestamp, the idle task, or a thread that has exited:
    /// counted in `dropped` too.
    pub unattributed: u64,
    /// How full the fullest ring was when drained, a fraction of its data area: about 1 when it
    /// overflowed, and above 1 (samples taken over samples kept) in the drain that reads the
    /// kernel's count of the lost records, which it writes once there is room again. 0 when
    /// nothing was drained. What the
    /// sampling density control keeps within bounds (`numapilot_policy::cadence`).
    pub max_fill: f64,
}

impl DrainStats {
    /// Adds `st`'s counts to these (every field but `max_fill`, which the caller takes the larger of).
    fn add_counts(&mut self, st: &DrainStats) {
        self.samples += st.samples;
        self.dropped += st.dropped;
        self.malformed += st.malformed;
        self.lost += st.lost;
        self.throttles += st.throttles;
        self.other += st.other;
        self.switches += st.switches;
        self.aux_bytes += st.aux_bytes;
        self.aux_truncated += st.aux_truncated;
        self.aux_partial += st.aux_partial;
        self.aux_collisions += st.aux_collisions;
        self.unattributed += st.unattributed;
    }
}

/// Parses a run of records (header + body each, as in the ring) into `out`: the samples
/// [`is_memory_access`] keeps; the others are counted in [`DrainStats::dropped`], those with a RAW
/// payload that is not the IBS op registers in [`DrainStats::malformed`] too. Non-sample
/// records carry a `sample_id` trailer (`sample_id_all`) after the fields read here, which the
/// header's size covers.
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
                let s = parse_sample(sample_type, body)?;
                st.samples += 1;
                if matches!(s.raw, RawPayload::Undecoded { .. }) {
                    st.malformed += 1;
                }
                if is_memory_access(sample_type, &s) {
                    out.push(s);
                } else {
                    st.dropped += 1;
                }
            }
            PERF_RECORD_LOST => {
                // struct { u64 id; u64 lost; sample_id }
                st.lost += body.get(8..16).map_or(0, |b| u64::from_ne_bytes(b.try_into().expect("8")));
            }
            PERF_RECORD_LOST_SAMPLES => {
                // struct { u64 lost; sample_id }
                st.lost += body.get(0..8).map_or(0, |b| u64::from_ne_bytes(b.try_into().expect("8")));
            }
            PERF_RECORD_THROTTLE => st.throttles += 1,
            spe::PERF_RECORD_SWITCH_CPU_WIDE => st.switches += 1,
            PERF_RECORD_AUX => {
                // struct { u64 aux_offset; u64 aux_size; u64 flags; sample_id }
                let word = |at: usize| body.get(at..at + 8).map_or(0, |b| u64::from_ne_bytes(b.try_into().expect("8")));
                let flags = word(16);
                st.aux_bytes += word(8);
                if flags & aux_flags::TRUNCATED != 0 {
                    st.aux_truncated += 1;
                    if flags & aux_flags::PARTIAL != 0 {
                        st.aux_partial += 1;
                    }
                }
                if flags & aux_flags::COLLISION != 0 {
                    st.aux_collisions += 1;
                }
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
/// Offsets of `aux_head`, `aux_tail`, `aux_offset`, `aux_size` in `struct perf_event_mmap_page`
/// (`include/uapi/linux/perf_event.h`, after `data_offset` 1040 and `data_size` 1048; Linux 4.1+).
const AUX_HEAD: usize = 1056;
const AUX_TAIL: usize = 1064;
const AUX_OFFSET: usize = 1072;
const AUX_SIZE: usize = 1080;

/// Copies the bytes of an AUX area `area` (a power-of-two size, as the kernel maps it) between the
/// positions `tail` and `head` (free-running byte counts, as `aux_tail`/`aux_head`) into `out`,
/// in stream order across the wrap; returns the offset in the area of the first one (for the
/// decoder's alignment). More than the area's size between them (which a writable, non-overwrite
/// mapping never has) is cut to the newest area's worth.
pub fn aux_copy(area: &[u8], tail: u64, head: u64, out: &mut Vec<u8>) -> usize {
    out.clear();
    let size = area.len();
    if size == 0 {
        return 0;
    }
    let len = head.wrapping_sub(tail);
    let n = usize::try_from(len).unwrap_or(usize::MAX).min(size);
    let from = head.wrapping_sub(n as u64);
    let start = (from % size as u64) as usize;
    let first = n.min(size - start);
    out.extend_from_slice(&area[start..start + first]);
    out.extend_from_slice(&area[..n - first]);
    start
}

/// One perf event fd with its mapped ring (and, for `mem-loads` where the kernel requires it, the
/// fd of its counting group leader, which has no ring).
#[derive(Debug)]
struct Ring {
    fd: libc::c_int,
    aux_fd: Option<libc::c_int>,
    base: *mut u8,
    map_len: usize,
    page: usize,
    data_size: usize,
    /// The AUX area (SPE): its mapping and length.
    aux_area: Option<(*mut u8, usize)>,
    /// SPE: the CPU's running thread over time, from the ring's context-switch records.
    timeline: spe::Timeline,
    /// SPE: what this CPU's records have shown of the events it reports.
    spe_events: spe::CpuEvents,
    /// The switch tracker writing into this ring ([`EventSpec::track_attr`]).
    track_fd: Option<libc::c_int>,
}

// SAFETY: the ring is only touched through &mut self (drain) or read-only ioctls; the mapping is
// owned by this value.
unsafe impl Send for Ring {}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: base/map_len are the mapping we created; the fds are ours (the group member
        // closed before its leader).
        unsafe {
            if let Some((aux, len)) = self.aux_area {
                libc::munmap(aux.cast(), len);
            }
            libc::munmap(self.base.cast(), self.map_len);
            libc::close(self.fd);
            if let Some(aux) = self.aux_fd {
                libc::close(aux);
            }
            if let Some(track) = self.track_fd {
                libc::close(track);
            }
        }
    }
}

/// `perf_event_open(attr, pid, cpu, group_fd, PERF_FLAG_FD_CLOEXEC)`.
fn perf_event_open(attr: &PerfEventAttr, pid: i32, cpu: i32, group_fd: libc::c_int) -> io::Result<libc::c_int> {
    // SAFETY: attr is a valid perf_event_attr of the size it declares.
    let fd = unsafe {
        libc::syscall(libc::SYS_perf_event_open, attr as *const PerfEventAttr, pid, cpu, group_fd, PERF_FLAG_FD_CLOEXEC)
    } as libc::c_int;
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

impl Ring {
    /// Opens `spec` for (`pid`, `cpu`): first its counting group leader when it has one
    /// ([`EventSpec::aux_attr`]), then the sampling event in that group, whose ring is mapped.
    /// Anything opened is closed again on failure.
    fn open(spec: &EventSpec, pid: i32, cpu: i32) -> Result<Ring, SignalError> {
        let aux_fd = match spec.aux_attr() {
            Some(aux) => Some(perf_event_open(&aux, pid, cpu, -1).map_err(|e| SignalError::Sys {
                what: format!(
                    "perf_event_open(group leader config {:#x} of {}, pid {pid}, cpu {cpu})",
                    aux.config, spec.name
                ),
                source: e,
            })?),
            None => None,
        };
        let fd = match perf_event_open(&spec.attr(), pid, cpu, aux_fd.unwrap_or(-1)) {
            Ok(fd) => fd,
            Err(e) => {
                if let Some(aux) = aux_fd {
                    // SAFETY: our fd.
                    unsafe { libc::close(aux) };
                }
                return Err(SignalError::Sys {
                    what: format!("perf_event_open({}, pid {pid}, cpu {cpu})", spec.name),
                    source: e,
                });
            }
        };
        let page = crate::reader::page_size() as usize;
        let data_pages = ring_pages(page);
        let map_len = page * (1 + data_pages);
        // SAFETY: mapping a perf fd: 1 + 2^n pages, shared, read-write (so data_tail can be written).
        let base = unsafe {
            libc::mmap(std::ptr::null_mut(), map_len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
        };
        if base == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            // SAFETY: our fds.
            unsafe {
                libc::close(fd);
                if let Some(aux) = aux_fd {
                    libc::close(aux);
                }
            }
            return Err(SignalError::Sys { what: format!("mmap perf ring ({}, cpu {cpu})", spec.name), source: e });
        }
        let mut ring = Ring {
            fd,
            aux_fd,
            base: base.cast(),
            map_len,
            page,
            data_size: page * data_pages,
            aux_area: None,
            timeline: spe::Timeline::default(),
            spe_events: spe::CpuEvents::default(),
            track_fd: None,
        };
        if spec.kind == SourceKind::ArmSpe {
            // The AUX area: its offset (after the ring) and size in the mmap page, then mapped
            // writable, which makes it a non-overwriting buffer whose aux_tail we advance
            // (`kernel/events/core.c` `perf_mmap`: a mapping at aux_offset of aux_size bytes;
            // `rb_alloc_aux` with `overwrite = !(vma->vm_flags & VM_WRITE)`).
            let aux_len = SPE_AUX_BYTES.max(2 * page).next_power_of_two();
            // SAFETY: the first page is the kernel's perf_event_mmap_page, writable in our mapping.
            unsafe {
                std::ptr::write_volatile(ring.base.add(AUX_OFFSET).cast::<u64>(), map_len as u64);
                std::ptr::write_volatile(ring.base.add(AUX_SIZE).cast::<u64>(), aux_len as u64);
            }
            // SAFETY: mapping aux_len bytes of the perf fd at the offset just declared.
            let aux = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    aux_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd,
                    map_len as libc::off_t,
                )
            };
            if aux == libc::MAP_FAILED {
                let e = io::Error::last_os_error();
                // Dropping the ring unmaps it and closes the fds.
                return Err(SignalError::Sys {
                    what: format!("mmap perf AUX area of {aux_len} bytes ({}, cpu {cpu})", spec.name),
                    source: e,
                });
            }
            ring.aux_area = Some((aux.cast(), aux_len));
        }
        if let Some(track) = spec.track_attr() {
            let tfd = perf_event_open(&track, pid, cpu, -1).map_err(|e| SignalError::Sys {
                what: format!("perf_event_open(switch tracker of {}, pid {pid}, cpu {cpu})", spec.name),
                source: e,
            })?;
            ring.track_fd = Some(tfd);
            // SAFETY: a perf ioctl whose argument is our other perf fd.
            if unsafe { libc::ioctl(tfd, PERF_EVENT_IOC_SET_OUTPUT as _, ring.fd) } < 0 {
                return Err(SignalError::Sys {
                    what: format!("PERF_EVENT_IOC_SET_OUTPUT (switch tracker into the {} ring, cpu {cpu})", spec.name),
                    source: io::Error::last_os_error(),
                });
            }
        }
        Ok(ring)
    }

    /// Copies out the AUX bytes between aux_tail and aux_head ([`aux_copy`]) into `scratch` and
    /// advances aux_tail; returns the area offset of the first byte. Nothing without an AUX area.
    fn drain_aux(&mut self, scratch: &mut Vec<u8>) -> usize {
        scratch.clear();
        let Some((aux, len)) = self.aux_area else { return 0 };
        // SAFETY: the mmap page's aux_head/aux_tail are u64 at fixed offsets; the same protocol as
        // the data ring (read head, acquire, copy, release, write tail); the AUX mapping is `len`
        // bytes, ours until drop.
        let head = unsafe { std::ptr::read_volatile(self.base.add(AUX_HEAD).cast::<u64>()) };
        fence(Ordering::Acquire);
        let tail = unsafe { std::ptr::read_volatile(self.base.add(AUX_TAIL).cast::<u64>()) };
        let area = unsafe { std::slice::from_raw_parts(aux.cast_const(), len) };
        let start = aux_copy(area, tail, head, scratch);
        fence(Ordering::Release);
        // SAFETY: as above; aux_tail is ours to write.
        unsafe { std::ptr::write_volatile(self.base.add(AUX_TAIL).cast::<u64>(), head) };
        start
    }

    /// The timer-to-perf-clock conversion of the mmap page ([`spe::TimeConv::read`]: under its
    /// seqlock, `None` without `cap_user_time_zero`).
    fn time_conv(&self) -> Option<spe::TimeConv> {
        spe::TimeConv::read(|at, len| {
            // SAFETY: the first page is the kernel's perf_event_mmap_page; every field read is
            // inside it at its fixed offset and alignment (spe::mmap_page).
            unsafe {
                match len {
                    2 => u64::from(std::ptr::read_volatile(self.base.add(at).cast::<u16>())),
                    4 => u64::from(std::ptr::read_volatile(self.base.add(at).cast::<u32>())),
                    _ => std::ptr::read_volatile(self.base.add(at).cast::<u64>()),
                }
            }
        })
    }

    /// The AUX area's length (0 without one).
    fn aux_len(&self) -> usize {
        self.aux_area.map_or(0, |(_, len)| len)
    }

    /// A new period for the sampling event: never the group leader, which counts without
    /// sampling (`PERF_EVENT_IOC_PERIOD` refuses a non-sampling event with EINVAL,
    /// `kernel/events/core.c` `perf_event_period`).
    fn set_period(&self, period: u64) -> io::Result<()> {
        // SAFETY: PERF_EVENT_IOC_PERIOD reads one u64 through the pointer, which lives across the call.
        if unsafe { libc::ioctl(self.fd, PERF_EVENT_IOC_PERIOD as _, &period as *const u64) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// A perf ioctl without argument on both events: ENABLE or DISABLE. A group member counts only
    /// while its leader is enabled too, so both are switched (the sampler first on enable, last
    /// on disable, so the leader is never on without it).
    /// The switch tracker, if any, is switched with them.
    fn ioctl(&self, req: libc::c_ulong) -> io::Result<()> {
        let order: [Option<libc::c_int>; 3] = if req == PERF_EVENT_IOC_DISABLE {
            [self.aux_fd, Some(self.fd), self.track_fd]
        } else {
            [self.track_fd, Some(self.fd), self.aux_fd]
        };
        for fd in order.into_iter().flatten() {
            // SAFETY: a perf ioctl without argument on our fd.
            if unsafe { libc::ioctl(fd, req as _, 0) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }

    /// The sampling event alone: what a drain stops and restarts (the switch tracker runs on).
    fn ioctl_sampler(&self, req: libc::c_ulong) -> io::Result<()> {
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
    /// The CPUs it was asked to open on (a per-CPU sampler's; `cpus` plus [`Sampler::skipped`]).
    asked: Vec<u32>,
    /// The period every event samples at ([`Sampler::set_period`]).
    period: u64,
    /// Sample records drained since open, how many of them [`is_memory_access`] kept, and how many
    /// carried a RAW payload that was not the IBS op registers ([`DrainStats::malformed`]).
    drained: u64,
    kept: u64,
    malformed: u64,
    /// SPE: the AUX bytes of the ring being drained, and the memory-access records no running
    /// thread could be named for ([`DrainStats::unattributed`]).
    aux_scratch: Vec<u8>,
    unattributed: u64,
    /// Whether [`Sampler::enable`] was called last (not [`Sampler::disable`]): an SPE drain
    /// restarts only an enabled sampler's events.
    enabled: std::sync::atomic::AtomicBool,
}

/// Sample records after which a sampler none of whose samples was a memory access says so
/// ([`Sampler::no_accesses`]). Default 1,000. Source: a choice: with the ring's 2,048 records a
/// drain, a busy machine reaches it in the first window, and one access in 1,000 samples is below
/// what any load or store mix gives (IBS op: about 1 in 100 on a compile, [`IBS_OP_PERIOD`]). What
/// it prevents: a sampler whose records never pass, an IBS op one whose RAW payload this build
/// cannot decode ([`DrainStats::malformed`]) or one that only ever sees kernel-mode ops and cache
/// hits, looking like a quiet machine for ever.
pub const NO_ACCESS_SAMPLES: u64 = 1_000;

/// Data bytes of each ring. Default 128 kB (32 pages of 4 kB; with 64 kB pages, 2): 2,048
/// memory-access records of 64 bytes (about 1,000 IBS op records of 128 to 144, which carry the op's
/// registers, [`IBS_OP_SAMPLE_TYPE`]; 3,276 page-fault records of 40) per CPU between two drains
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
    /// Opens `spec` for all processes (pid -1) on every CPU in `cpus` that its PMU covers
    /// ([`EventSpec::cpus`]; the others are left out and listed by [`Sampler::skipped`]: on a
    /// hybrid part the kernel refuses a `cpu_core` event on an E-core with ENOENT,
    /// `arch/x86/events/core.c` `x86_pmu_event_init`, Linux 5.13+). Any failure closes what was
    /// opened and is returned; so is a PMU that covers none of `cpus`.
    pub fn open_per_cpu(spec: &EventSpec, cpus: impl IntoIterator<Item = u32>) -> Result<Sampler, SignalError> {
        let asked: Vec<u32> = cpus.into_iter().collect();
        let covered = |cpu: &u32| spec.cpus.as_ref().is_none_or(|c| c.contains(cpu));
        let on: Vec<u32> = asked.iter().copied().filter(covered).collect();
        if on.is_empty() && !asked.is_empty() {
            return Err(SignalError::Malformed {
                what: "perf per-CPU events",
                reason: format!(
                    "{} counts on CPUs {} only (its sysfs cpus file), none of the {} asked for",
                    spec.name,
                    cpu_ranges(spec.cpus.as_deref().unwrap_or(&[])),
                    cpu_ranges(&asked)
                ),
            });
        }
        let mut rings = Vec::new();
        for &cpu in &on {
            rings.push(Ring::open(spec, -1, cpu as i32)?);
        }
        Ok(Sampler {
            spec: spec.clone(),
            rings,
            scratch: Vec::new(),
            cpus: on,
            asked,
            period: spec.period,
            drained: 0,
            kept: 0,
            malformed: 0,
            aux_scratch: Vec::new(),
            unattributed: 0,
            enabled: std::sync::atomic::AtomicBool::new(false),
        })
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
            asked: Vec::new(),
            period: spec.period,
            drained: 0,
            kept: 0,
            malformed: 0,
            aux_scratch: Vec::new(),
            unattributed: 0,
            enabled: std::sync::atomic::AtomicBool::new(false),
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

    /// The CPUs [`Sampler::open_per_cpu`] was asked for: what to compare with the online CPUs
    /// (on a hybrid part it is more than [`Sampler::cpus`] for good).
    pub fn asked(&self) -> &[u32] {
        &self.asked
    }

    /// The CPUs asked for that the event's PMU does not cover, so nothing samples there.
    pub fn skipped(&self) -> Vec<u32> {
        self.asked.iter().copied().filter(|c| !self.cpus.contains(c)).collect()
    }

    /// One line when at least [`NO_ACCESS_SAMPLES`] samples were drained and not one was a
    /// memory access [`is_memory_access`] keeps: the source runs but gives the model nothing. For
    /// IBS op it tells a RAW layout this build does not decode (some samples malformed) from ops
    /// that were simply never user loads or stores beyond the L2.
    pub fn no_accesses(&self) -> Option<String> {
        if self.drained < NO_ACCESS_SAMPLES || self.kept > 0 {
            return None;
        }
        let why = match self.spec.kind {
            SourceKind::AmdIbsOp if self.malformed > 0 => format!(
                "{} of them carried a PERF_SAMPLE_RAW payload that is not the IBS op registers this build \
                 decodes (caps, then IbsOpCtl to IbsDcPhysAd with IbsOpVal set: arch/x86/events/amd/ibs.c \
                 perf_ibs_handle_irq), so this kernel writes another layout",
                self.malformed
            ),
            SourceKind::AmdIbsOp => "every op was kernel-mode (IbsOpRip), no load or store, served by the L1 or \
                 L2, or without a valid IbsDcLinAd"
                .to_string(),
            SourceKind::ArmSpe if self.unattributed > 0 => format!(
                "{} beyond L2 named no running thread: no CONTEXT packet (the kernel writes one only when built \
                 with CONFIG_PID_IN_CONTEXTIDR, drivers/perf/arm_spe_pmu.c set_spe_event_has_cx), and no \
                 context switch before the record's timestamp on its CPU, or no timestamp conversion in the \
                 perf mmap page (cap_user_time_zero)",
                numapilot_topology::plural(self.unattributed, "access")
            ),
            SourceKind::ArmSpe => "every record was no user load or store with a data address, or an L1 or L2 \
                 hit by its events"
                .to_string(),
            _ => "none had a user-space data address".to_string(),
        };
        Some(format!(
            "{}: {} samples, none a load or store with a user data address: {why}; access samples empty",
            self.spec.name, self.drained
        ))
    }

    /// Starts counting.
    pub fn enable(&self) -> Result<(), SignalError> {
        for r in &self.rings {
            r.ioctl(PERF_EVENT_IOC_ENABLE).map_err(|e| SignalError::Sys {
                what: format!("PERF_EVENT_IOC_ENABLE ({})", self.spec.name),
                source: e,
            })?;
        }
        self.enabled.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Stops counting.
    pub fn disable(&self) -> Result<(), SignalError> {
        self.enabled.store(false, Ordering::Relaxed);
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

    /// The last context switch seen on `cpu` by the switch tracker's records as of the last drain
    /// ([`EventSpec::track_switches`]): its perf-clock time and the (pid, tid) it went to (0, 0
    /// for the idle task); `None` without a tracker or before any switch.
    pub fn last_switch(&self, cpu: u32) -> Option<(u64, u32, u32)> {
        let i = self.cpus.iter().position(|&c| c == cpu)?;
        self.rings.get(i)?.timeline.last()
    }

    /// The period every event samples at now (the spec's until [`Sampler::set_period`]).
    pub fn period(&self) -> u64 {
        self.period
    }

    /// Reads every ring's new records into `out`.
    pub fn drain(&mut self, out: &mut Vec<RawSample>) -> Result<DrainStats, SignalError> {
        let mut total = DrainStats::default();
        let mut tgids = HashMap::new();
        let spe = self.spec.kind == SourceKind::ArmSpe;
        for (i, r) in self.rings.iter_mut().enumerate() {
            let cpu = self.cpus.get(i).copied().unwrap_or(0);
            let sys = |what: &str, e: io::Error| SignalError::Sys {
                what: format!("{what} ({}, cpu {cpu})", self.spec.name),
                source: e,
            };
            let enabled = self.enabled.load(Ordering::Relaxed);
            if spe && enabled {
                // Stopping the event ends its AUX session (`arm_spe_pmu_stop` ->
                // `arm_spe_perf_aux_output_end` -> `perf_aux_output_end`): aux_head then covers
                // every record written, not only those up to the last watermark.
                r.ioctl_sampler(PERF_EVENT_IOC_DISABLE)
                    .map_err(|e| sys("PERF_EVENT_IOC_DISABLE before reading the AUX area", e))?;
            }
            r.drain_into(&mut self.scratch);
            let mut st = parse_records(self.spec.sample_type, &self.scratch, out)?;
            if spe {
                let start = r.drain_aux(&mut self.aux_scratch);
                let first = out.len();
                let sp = spe::decode_samples(&self.aux_scratch, start, cpu, &mut r.spe_events, out);
                spe::follow_switches(&mut r.timeline, &self.scratch, st.lost);
                let conv = r.time_conv();
                let line = &r.timeline;
                let running = |cyc: u64| conv.and_then(|c| line.running_at(c.to_perf_ns(cyc)));
                let unattributed =
                    spe::attribute(&mut tgids, out, first, crate::reader::monotonic_ns(), tgid_of, running);
                // Every record up to now was read (the event was stopped): only the thread
                // running now matters from here on.
                r.timeline.keep_from(u64::MAX);
                count_spe(&mut st, &sp, unattributed);
                if enabled {
                    // Restarted, which also undoes the kernel's own disable when the area filled
                    // (aux_flags::TRUNCATED): the area is drained, so it samples again.
                    r.ioctl_sampler(PERF_EVENT_IOC_ENABLE)
                        .map_err(|e| sys("PERF_EVENT_IOC_ENABLE after reading the AUX area", e))?;
                }
                total.add_counts(&st);
                // The AUX area's fill: what the sampling period governs (the ring holds switch
                // records, whose number no period changes).
                let mut fill = self.aux_scratch.len() as f64 / r.aux_len().max(1) as f64;
                if st.aux_truncated > 0 {
                    // Records went unwritten, how many is not said: a full area's worth of
                    // pressure at least, as for a throttle.
                    fill = fill.max(1.0);
                }
                total.max_fill = total.max_fill.max(fill);
                continue;
            }
            total.add_counts(&st);
            if self.spec.track_switches {
                spe::follow_switches(&mut r.timeline, &self.scratch, st.lost);
                r.timeline.keep_from(u64::MAX);
            }
            let mut fill = self.scratch.len() as f64 / r.data_size.max(1) as f64;
            if st.lost > 0 {
                fill = fill.max(1.0) * (st.samples + st.lost) as f64 / st.samples.max(1) as f64;
            }
            if st.throttles > 0 {
                // Samples went untaken, how many is not said: at least a full ring's worth of
                // pressure, so the density control backs off as for an overflow.
                fill = fill.max(1.0);
            }
            total.max_fill = total.max_fill.max(fill);
        }
        self.drained += total.samples;
        self.kept += total.samples - total.dropped;
        self.malformed += total.malformed;
        self.unattributed += total.unattributed;
        Ok(total)
    }
}

/// Adds one SPE ring's decode (`sp`) and its `unattributed` accesses to `st`, which holds the
/// ring's own records (PERF_RECORD_AUX flags among them). Records given up (bytes that begin no
/// packet, a packet cut at the end) count as samples dropped, so `malformed` stays a part of
/// `dropped` and `samples - dropped` the samples passed on; they count as malformed only where
/// the kernel reported no lost data: after a PARTIAL area the last record is known to be cut,
/// which is loss (`aux_partial`), not a stream this decoder cannot read.
fn count_spe(st: &mut DrainStats, sp: &spe::SampleStats, unattributed: u64) {
    let broken = sp.decode.broken_records + sp.decode.truncated;
    st.samples += sp.decode.records + broken;
    st.dropped += sp.dropped + unattributed + broken;
    st.unattributed += unattributed;
    if st.aux_partial == 0 {
        st.malformed += broken;
    }
}

/// The thread group (process) of thread `tid`, from `/proc/TID/status`; `None` when it has exited
/// (or the file does not parse).
fn tgid_of(tid: u32) -> Option<u32> {
    let text = std::fs::read(format!("/proc/{tid}/status")).ok()?;
    crate::parse::status::parse_status(&crate::reader::text_of(&text)).ok().map(|s| s.tgid)
}

/// `0-3,8` for a sorted or unsorted CPU list.
pub fn cpu_ranges(cpus: &[u32]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if i == j { v[i].to_string() } else { format!("{}-{}", v[i], v[j]) });
        i = j + 1;
    }
    if out.is_empty() {
        "none".into()
    } else {
        out.join(",")
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
        // IBS op: the same fields and the 64-byte RAW field of a CPU without IbsBrTarget.
        let ibs = ibs_sample(1, [0; 4], &ibs_raw(&dram_load(DEFAULT_CAPS, USER_RIP)));
        assert_eq!((ibs.len(), sample_record_bytes(IBS_OP_SAMPLE_TYPE)), (128, 128));
        assert!(parse_sample(IBS_OP_SAMPLE_TYPE, &ibs[8..]).is_ok());
        assert!(parse_sample(IBS_OP_SAMPLE_TYPE, &ibs[8..127]).is_err(), "ends inside phys_addr");
        assert_eq!(ring_records(IBS_OP_SAMPLE_TYPE), 1024);
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
        let regs =
            IbsOpRegs { dc_lin_ad: 0x7f00_0000_1234, dc_phys_ad: 0x1_2345_6789, ..dram_load(DEFAULT_CAPS, USER_RIP) };
        body.extend(ibs_raw(&regs)); // raw
        body.extend(250u64.to_ne_bytes()); // weight
        body.extend(LOCAL_DRAM_LOAD.to_ne_bytes()); // data_src
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
        assert_eq!(
            st,
            DrainStats {
                samples: 1,
                dropped: 0,
                malformed: 0,
                lost: 5,
                throttles: 0,
                other: 1,
                max_fill: 0.0,
                ..Default::default()
            }
        );
        let s = out[0];
        assert_eq!((s.ip, s.pid, s.tid, s.time, s.cpu), (0x401000, 7, 9, 123_456, 3));
        assert_eq!(
            (s.addr, s.period, s.weight, s.data_src, s.phys_addr),
            (0x7f00_0000_1234, 10_000, 250, LOCAL_DRAM_LOAD, 0x1_2345_6789)
        );
        // Cut inside the record: the header's size no longer fits.
        assert!(parse_records(sample_bits::SUPPORTED, &buf[..40], &mut out).is_err());
        // A sample_type with a variable-length field is refused, not misread.
        assert!(parse_sample(1 << 5, &[0u8; 64]).is_err());
        // A body shorter than the fields asked for.
        assert!(parse_sample(sample_bits::TID | sample_bits::ADDR, &[0u8; 12]).is_err());
    }

    /// `PERF_MEM_S(OP, LOAD) | L(LOC_RAM) | LN(RAM)`: a load local DRAM served, as IBS op
    /// (`g_zen4_data_src[IBS_DATA_SRC_EXT_DRAM]`) and PEBS write it.
    const LOCAL_DRAM_LOAD: u64 = 0x02 | (0x80 | 0x02) << 5 | 0x0d << 33;
    /// `PERF_MEM_NA` (`include/uapi/linux/perf_event.h`): every field "not available"; what IBS op
    /// writes for an op that is no load or store, and the kernel's default.
    const MEM_NA: u64 = 0x01 | 0x01 << 5 | 0x01 << 19 | 0x01 << 24 | 0x01 << 26;

    /// One PERF_RECORD_SAMPLE of [`MEM_SAMPLE_TYPE`] as the kernel lays it out
    /// (`include/uapi/linux/perf_event.h`, `enum perf_event_type`): header, then `{ u32 pid, tid; }`,
    /// `u64 time`, `u64 addr`, `{ u32 cpu, res; }`, `u64 weight`, `u64 data_src`, `u64 phys_addr`.
    fn mem_sample(tid: u32, addr: u64, data_src: u64, phys: u64) -> Vec<u8> {
        // The IBS layout without its RAW field is this one.
        let r = ibs_sample(tid, [addr, 300, data_src, phys], &[]);
        assert_eq!(r.len(), sample_record_bytes(MEM_SAMPLE_TYPE));
        r
    }

    /// A non-sample record of type `ty` with `body` and the `sample_id` trailer `sample_id_all`
    /// adds for [`MEM_SAMPLE_TYPE`]: `{ u32 pid, tid; } u64 time; { u32 cpu, res; }`.
    fn other_record(ty: u32, body: &[u64]) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend(ty.to_ne_bytes());
        r.extend(0u16.to_ne_bytes());
        r.extend(((8 + 8 * body.len() + 24) as u16).to_ne_bytes());
        for v in body {
            r.extend(v.to_ne_bytes());
        }
        r.extend(100u32.to_ne_bytes());
        r.extend(101u32.to_ne_bytes());
        r.extend(5_000u64.to_ne_bytes());
        r.extend(1u64.to_ne_bytes());
        r
    }

    /// IBS op samples every op (`arch/x86/events/amd/ibs.c` `perf_ibs_parse_ld_st_data`, Linux
    /// 6.1+): for one that is no load or store it sets no address (the kernel writes 0) and
    /// `PERF_MEM_NA`; for a load the L1 served, `L(L1) | LN(L1)`; kernel-side loads come with
    /// kernel addresses, IBS having no privilege filter. Only user loads and stores beyond the L2
    /// reach the aggregation; the rest are counted as dropped. Throttle and lost-sample records
    /// (with their `sample_id` trailers) are counted, not taken for samples.
    #[test]
    fn ibs_op_samples_that_are_no_user_memory_access_are_dropped() {
        let l1_hit_load = 0x02 | (0x08 | 0x02) << 5 | 0x01 << 33;
        let l2_hit_load = 0x02 | (0x20 | 0x02) << 5 | 0x02 << 33;
        let remote_dram_load = 0x02 | (0x100 | 0x02) << 5 | 0x0d << 33 | 1 << 37 | 1 << 43;
        // A store that missed the L2: IBS leaves its level not available (`check_mab`).
        let store_past_l2 = 0x04 | 0x01 << 5 | 0x0f << 33;
        let mut buf = Vec::new();
        buf.extend(mem_sample(1, 0, MEM_NA, 0)); // a branch or ALU op
        buf.extend(mem_sample(2, 0x7f00_0000_1000, l1_hit_load, 0x1000));
        buf.extend(mem_sample(3, 0x7f00_0000_2000, l2_hit_load, 0x2000));
        buf.extend(mem_sample(4, 0xff11_0008_a539_8920, LOCAL_DRAM_LOAD, 0x8_a539_8920)); // kernel
        buf.extend(other_record(PERF_RECORD_THROTTLE, &[5_000, 7, 7]));
        buf.extend(mem_sample(5, 0x7f00_0000_3000, remote_dram_load, 0x4000_3000));
        buf.extend(other_record(PERF_RECORD_UNTHROTTLE, &[6_000, 7, 7]));
        buf.extend(mem_sample(6, 0x7f00_0000_4000, store_past_l2, 0x4000_4000));
        buf.extend(other_record(PERF_RECORD_LOST_SAMPLES, &[3]));
        let mut out = Vec::new();
        let st = parse_records(MEM_SAMPLE_TYPE, &buf, &mut out).unwrap();
        assert_eq!(
            st,
            DrainStats {
                samples: 6,
                dropped: 4,
                malformed: 0,
                lost: 3,
                throttles: 1,
                other: 1,
                max_fill: 0.0,
                ..Default::default()
            }
        );
        assert_eq!(
            out.iter().map(|s| (s.tid, s.addr)).collect::<Vec<_>>(),
            [(5, 0x7f00_0000_3000), (6, 0x7f00_0000_4000)]
        );
        // Without DATA_SRC (the page-fault event) only the address decides.
        let pf = RawSample { addr: 0x7f00_0000_1000, ..RawSample::default() };
        assert!(is_memory_access(EventSpec::page_faults(1).sample_type, &pf));
        assert!(!is_memory_access(EventSpec::page_faults(1).sample_type, &RawSample::default()));
    }

    /// IBS capability words (`ibs_caps`, CPUID Fn8000_001B_EAX with bit 0 set) as
    /// `perf_event_ibs_init` logs them ("perf: AMD IBS detected (0x...)"): `IBS_CAPS_DEFAULT`
    /// (available, fetch and op sampling: what the kernel assumes without the CPUID leaf; no
    /// IbsBrTarget, so the 64-byte RAW field), and `0x3ff` from a dmesg capture of a Zen part
    /// (bits 0-9: IbsBrTarget written, RipInvalidChk; no Zen 4 data source).
    const DEFAULT_CAPS: u32 = 0x7;
    const ZEN3_CAPS: u32 = 0x3ff;
    const USER_RIP: u64 = 0x5555_5555_6789;
    const KERNEL_RIP: u64 = 0xffff_ffff_8123_4567;
    /// IbsOpCtl of a valid sample counting ops every 100,000: OpMaxCnt 6,250 (bits 0-15, in 16s),
    /// OpEn (17), OpVal (18), CntCtl (19) (`union ibs_op_ctl`).
    const OP_CTL: u64 = 6_250 | 1 << 17 | 1 << 18 | 1 << 19;

    /// A user load the local DRAM served: IbsOpData3 LdOp, DcMiss, L2Miss, both addresses valid, a
    /// 300-cycle miss; IbsOpData2 data source 3, DRAM.
    fn dram_load(caps: u32, rip: u64) -> IbsOpRegs {
        use ibs::*;
        IbsOpRegs {
            caps,
            op_ctl: OP_CTL,
            op_rip: rip,
            op_data: 0,
            op_data2: 3,
            op_data3: LD_OP | DC_MISS | L2_MISS | DC_LIN_ADDR_VALID | DC_PHY_ADDR_VALID | 300 << 32,
            dc_lin_ad: 0x7f12_3456_7890,
            dc_phys_ad: 0x8_1234_5890,
        }
    }

    /// The RAW field of an IBS op sample as `perf_ibs_handle_irq` fills it and `perf_output_sample`
    /// writes it: the u32 size, the u32 caps, IbsOpCtl to IbsDcPhysAd, IbsBrTarget when the caps
    /// have `IBS_CAPS_BRNTRGT` (bit 5), zero padding to make 4 + size a multiple of 8.
    fn ibs_raw(r: &IbsOpRegs) -> Vec<u8> {
        let mut data = r.caps.to_ne_bytes().to_vec();
        for v in [r.op_ctl, r.op_rip, r.op_data, r.op_data2, r.op_data3, r.dc_lin_ad, r.dc_phys_ad] {
            data.extend(v.to_ne_bytes());
        }
        if r.caps & 1 << 5 != 0 {
            data.extend(0x5555_5555_0000u64.to_ne_bytes()); // IbsBrTarget
        }
        data.resize((data.len() + 4).next_multiple_of(8) - 4, 0);
        let mut field = (data.len() as u32).to_ne_bytes().to_vec();
        field.extend(data);
        field
    }

    /// One PERF_RECORD_SAMPLE of [`IBS_OP_SAMPLE_TYPE`]: header, `{ u32 pid, tid; }`, `u64 time`,
    /// `u64 addr`, `{ u32 cpu, res; }`, the RAW field, `u64 weight`, `u64 data_src`,
    /// `u64 phys_addr`; `kernel` is what the kernel wrote in addr, weight, data_src, phys_addr.
    /// With `raw` empty, no RAW field: a record of [`MEM_SAMPLE_TYPE`].
    fn ibs_sample(tid: u32, kernel: [u64; 4], raw: &[u8]) -> Vec<u8> {
        let [addr, weight, data_src, phys] = kernel;
        let mut r = Vec::new();
        r.extend(PERF_RECORD_SAMPLE.to_ne_bytes());
        r.extend(0u16.to_ne_bytes());
        r.extend(((8 + 32 + raw.len() + 24) as u16).to_ne_bytes());
        r.extend(100u32.to_ne_bytes());
        r.extend(tid.to_ne_bytes());
        r.extend(5_000u64.to_ne_bytes());
        r.extend(addr.to_ne_bytes());
        r.extend(1u32.to_ne_bytes());
        r.extend(0u32.to_ne_bytes());
        r.extend(raw);
        r.extend(weight.to_ne_bytes());
        r.extend(data_src.to_ne_bytes());
        r.extend(phys.to_ne_bytes());
        r
    }

    /// IBS op samples on a Zen part (`ZEN3_CAPS`): each op's registers, and what Linux 6.1+ writes
    /// for it in addr, weight, data_src, phys_addr (`perf_ibs_parse_ld_st_data`: the address when
    /// IbsDcLinAddrValid; the miss latency for a load that missed the L1; `mem_lvl` by
    /// `perf_ibs_get_mem_lvl`, `mem_dtlb` by `perf_ibs_get_tlb_lvl` (NA without a valid linear
    /// address), snoop and lock not available; the physical address when IbsDcPhyAddrValid,
    /// else `perf_virt_to_phys(addr)`, 0 here). Only tids 4 (local DRAM), 5 (remote DRAM) and 6 (a
    /// store past the L2) are user memory accesses.
    fn ibs_op_cases() -> Vec<(u32, IbsOpRegs, [u64; 4])> {
        use ibs::*;
        let l = |lvl: u64| (lvl | 0x02) << 5; // L(x): PERF_MEM_S(LVL, x) | PERF_MEM_S(LVL, HIT)
        let ln = |num: u64| num << 33;
        let na = 1 << 19 | 1 << 24; // snoop, lock not available
        let tlb_l1_hit = (0x08 | 0x02) << 26;
        let tlb_na = 1 << 26;
        let (load, store) = (0x02, 0x04);
        let dram = dram_load(ZEN3_CAPS, USER_RIP);
        let (lin, phys) = (|k: u64| 0x7f00_0000_0000 + k * 0x1_0000, |k: u64| 0x4_0000_0000 + k * 0x1_0000);
        let at = |k: u64, d3: u64, d2: u64| IbsOpRegs {
            op_data3: d3,
            op_data2: d2,
            dc_lin_ad: lin(k),
            dc_phys_ad: phys(k),
            ..dram
        };
        let both = DC_LIN_ADDR_VALID | DC_PHY_ADDR_VALID;
        let past_l2 = DC_MISS | L2_MISS;
        let local_ram = load | l(0x80) | ln(0x0d) | na | tlb_l1_hit;
        vec![
            // A branch: no load or store; stale address registers, not valid.
            (1, IbsOpRegs { op_data: 1 << 37, ..at(1, 0, 0) }, [0, 0, data_src::MEM_NA, 0]),
            (2, at(2, LD_OP | both, 0), [lin(2), 0, load | l(0x08) | ln(0x01) | na | tlb_l1_hit, phys(2)]),
            (
                3,
                at(3, LD_OP | DC_MISS | both | 40 << 32, 0),
                [lin(3), 40, load | l(0x20) | ln(0x02) | na | tlb_l1_hit, phys(3)],
            ),
            (
                4,
                at(4, LD_OP | past_l2 | both | 300 << 32 | 1 << 2, 3),
                [lin(4), 300, load | l(0x80) | ln(0x0d) | na | (0x10 | 0x02) << 26, phys(4)],
            ),
            (
                5,
                at(5, LD_OP | past_l2 | both | 600 << 32, 3 | RMT_NODE),
                [lin(5), 600, load | l(0x100) | ln(0x0d) | 1 << 37 | 0x02 << 43 | na | tlb_l1_hit, phys(5)],
            ),
            (6, at(6, ST_OP | past_l2 | both, 0), [lin(6), 0, store | 0x01 << 5 | ln(0x0f) | na | tlb_l1_hit, phys(6)]),
            (7, at(7, ST_OP | both, 0), [lin(7), 0, store | l(0x08) | ln(0x01) | na | tlb_l1_hit, phys(7)]),
            // The kernel copying from a user buffer (copy_from_user): a user address, a kernel RIP.
            (
                8,
                IbsOpRegs { op_rip: KERNEL_RIP, ..at(8, LD_OP | past_l2 | both | 300 << 32, 3) },
                [lin(8), 300, local_ram, phys(8)],
            ),
            // A RIP the hardware marks invalid (IbsOpData bit 38): user or kernel unknown.
            (
                9,
                IbsOpRegs { op_data: OP_RIP_INVALID, ..at(9, LD_OP | past_l2 | both | 300 << 32, 3) },
                [lin(9), 300, local_ram, phys(9)],
            ),
            // A DRAM load whose linear (and physical) address is not valid.
            (10, at(10, LD_OP | past_l2 | 300 << 32, 3), [0, 300, load | l(0x80) | ln(0x0d) | na | tlb_na, 0]),
            // A kernel-mode load of kernel memory.
            (
                11,
                IbsOpRegs { op_rip: KERNEL_RIP, dc_lin_ad: 0xffff_8880_1234_5678, ..at(11, LD_OP | past_l2 | both, 3) },
                [0xffff_8880_1234_5678, 0, local_ram, phys(11)],
            ),
        ]
    }

    /// Before Linux 6.1 an IBS op sample has addr 0, weight 0, data_src `PERF_MEM_NA` and
    /// phys_addr 0 (`perf_sample_data_init`, `perf_virt_to_phys(0)`): the registers in RAW give
    /// the address, physical address, latency and data source, and the filter keeps the user
    /// loads and stores past the L2 only. A 6.1+ kernel fills those fields itself: its values are
    /// kept and the same samples pass. Kernel-mode ops (by IbsOpRip) are dropped on both, even the
    /// one with a user data address 6.1+ writes out.
    #[test]
    fn ibs_op_samples_are_decoded_from_raw_before_6_1_and_agree_with_6_1() {
        let cases = ibs_op_cases();
        let (mut pre, mut post) = (Vec::new(), Vec::new());
        for (tid, regs, kernel) in &cases {
            let raw = ibs_raw(regs);
            assert_eq!(raw.len(), 72, "caps 0x3ff: IbsBrTarget written too");
            pre.extend(ibs_sample(*tid, [0, 0, data_src::MEM_NA, 0], &raw));
            post.extend(ibs_sample(*tid, *kernel, &raw));
        }
        let expected = [
            (4, 0x7f00_0004_0000, 0x4_0004_0000),
            (5, 0x7f00_0005_0000, 0x4_0005_0000),
            (6, 0x7f00_0006_0000, 0x4_0006_0000),
        ];
        let counts = DrainStats {
            samples: 11,
            dropped: 8,
            malformed: 0,
            lost: 0,
            throttles: 0,
            other: 0,
            max_fill: 0.0,
            ..Default::default()
        };
        let mut before = Vec::new();
        assert_eq!(parse_records(IBS_OP_SAMPLE_TYPE, &pre, &mut before).unwrap(), counts);
        assert_eq!(before.iter().map(|s| (s.tid, s.addr, s.phys_addr)).collect::<Vec<_>>(), expected);
        let mut after = Vec::new();
        assert_eq!(parse_records(IBS_OP_SAMPLE_TYPE, &post, &mut after).unwrap(), counts);
        assert_eq!(after.iter().map(|s| (s.tid, s.addr, s.phys_addr)).collect::<Vec<_>>(), expected);
        // Before 6.1 the source is synthesised (snoop, lock, TLB not available); after, the kernel's.
        let (na, tlb_na) = (1 << 19 | 1 << 24, 1 << 26);
        assert_eq!((before[0].data_src, before[0].weight), (LOCAL_DRAM_LOAD | na | tlb_na, 300));
        assert_eq!((after[0].data_src, after[0].weight), (cases[3].2[2], 300));
        assert_eq!(before[1].data_src, cases[4].2[2] & !((0x10 | 0x02) << 26 | (0x08 | 0x02) << 26) | tlb_na);
        // Without RAW the 6.1+ fields alone let the kernel's own access through (tid 8).
        let mut no_raw = Vec::new();
        for (tid, _, kernel) in &cases {
            no_raw.extend(mem_sample(*tid, kernel[0], kernel[2], kernel[3]));
        }
        let mut out = Vec::new();
        parse_records(MEM_SAMPLE_TYPE, &no_raw, &mut out).unwrap();
        assert_eq!(out.iter().map(|s| s.tid).collect::<Vec<_>>(), [4, 5, 6, 8, 9]);
    }

    /// A RAW payload that is not the IBS op registers is never read past: one shorter than them
    /// (its fields after it still read where its size puts them), one without IbsOpVal, the
    /// `{ 4, 0 }` the kernel writes when a driver gives no raw data, and one whose size runs past
    /// its record (nothing after it read). Each is counted as malformed and dropped, and the
    /// record after them still parses: the header's size frames every record.
    #[test]
    fn ibs_op_raw_payloads_that_are_not_the_registers_are_counted_not_read_past() {
        let good = dram_load(ZEN3_CAPS, USER_RIP);
        let mut short = ibs_raw(&good);
        short.truncate(4 + 20);
        short[0..4].copy_from_slice(&20u32.to_ne_bytes());
        let no_val = ibs_raw(&IbsOpRegs { op_ctl: OP_CTL & !ibs::OP_VAL, ..good });
        let none: Vec<u8> = [4u32, 0].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let mut buf = ibs_sample(21, [0, 77, data_src::MEM_NA, 0x55_5000], &short);
        let s = parse_sample(IBS_OP_SAMPLE_TYPE, &buf[8..]).unwrap();
        assert_eq!(s.raw, RawPayload::Undecoded { size: 20, room: 20 + 24 });
        assert_eq!((s.weight, s.data_src, s.phys_addr), (77, data_src::MEM_NA, 0x55_5000));
        buf.extend(ibs_sample(22, [0, 0, data_src::MEM_NA, 0], &no_val));
        buf.extend(ibs_sample(23, [0, 0, data_src::MEM_NA, 0], &none));
        // A record whose RAW size says 68 bytes (caps, seven registers, IbsBrTarget) where 20 are
        // left: tid, time, addr, cpu, the size, 20 bytes of the payload, and the record ends (its
        // header says 64 bytes).
        let full = ibs_sample(24, [0, 0, data_src::MEM_NA, 0], &ibs_raw(&good));
        let mut past = full[..8 + 32 + 4 + 20].to_vec();
        past[6..8].copy_from_slice(&64u16.to_ne_bytes());
        let s = parse_sample(IBS_OP_SAMPLE_TYPE, &past[8..]).unwrap();
        assert_eq!(s.raw, RawPayload::Undecoded { size: 68, room: 20 });
        assert_eq!((s.weight, s.data_src, s.phys_addr), (0, 0, 0), "nothing after the payload is read");
        buf.extend(past);
        buf.extend(ibs_sample(25, [0, 0, data_src::MEM_NA, 0], &ibs_raw(&good)));
        let mut out = Vec::new();
        let st = parse_records(IBS_OP_SAMPLE_TYPE, &buf, &mut out).unwrap();
        assert_eq!(
            st,
            DrainStats {
                samples: 5,
                dropped: 4,
                malformed: 4,
                lost: 0,
                throttles: 0,
                other: 0,
                max_fill: 0.0,
                ..Default::default()
            }
        );
        assert_eq!(out.iter().map(|s| (s.tid, s.addr)).collect::<Vec<_>>(), [(25, 0x7f12_3456_7890)]);
    }

    /// An SPE sampler whose accesses named no thread (no CONTEXT packet: a kernel without
    /// CONFIG_PID_IN_CONTEXTIDR) says so, naming the option.
    #[test]
    fn an_spe_sampler_without_context_packets_names_the_kernel_option() {
        let spec = EventSpec {
            kind: SourceKind::ArmSpe,
            name: "arm_spe_0/load_filter=1,store_filter=1/".into(),
            ..EventSpec::page_faults(1)
        };
        let mut s = unopened_sampler(spec, SPE_PERIOD, NO_ACCESS_SAMPLES);
        let line = s.no_accesses().expect("1,000 records, no access");
        assert!(line.contains("arm_spe_0") && line.contains("L1 or L2"), "{line}");
        s.unattributed = 40;
        let line = s.no_accesses().expect("1,000 records, no access");
        assert!(line.contains("40 accesses beyond L2") && line.contains("CONFIG_PID_IN_CONTEXTIDR"), "{line}");
        s.unattributed = 1;
        assert!(s.no_accesses().unwrap().contains("1 access beyond L2"));
    }

    /// The AUX bytes between aux_tail and aux_head, across the area's end: in stream order,
    /// with the offset of the first; an empty range copies nothing; more than the area (which the
    /// kernel never writes into a non-overwrite area) keeps the newest area's worth.
    #[test]
    fn aux_bytes_are_read_across_the_wrap_in_stream_order() {
        let area: Vec<u8> = (0u8..16).collect();
        let mut out = Vec::new();
        // tail 12, head 20 (free-running: the second lap's bytes 0-3).
        assert_eq!(aux_copy(&area, 12, 20, &mut out), 12);
        assert_eq!(out, [12, 13, 14, 15, 0, 1, 2, 3]);
        assert_eq!(aux_copy(&area, 3 * 16 + 5, 3 * 16 + 7, &mut out), 5);
        assert_eq!(out, [5, 6]);
        aux_copy(&area, 7, 7, &mut out);
        assert!(out.is_empty());
        assert_eq!(aux_copy(&area, 0, 40, &mut out), 8, "24 too many: the last 16 from 24");
        assert_eq!(out, (8u8..16).chain(0..8).collect::<Vec<u8>>());
        // An SPE record split by the wrap decodes whole from the copy.
        let rec = [0x49u8, 0x00, 0xb2, 0x90, 0x78, 0x56, 0x34, 0x12, 0x7f, 0x00, 0x00, 0x01];
        let mut area = vec![0u8; 16];
        for (k, b) in rec.iter().enumerate() {
            area[(10 + k) % 16] = *b;
        }
        let start = aux_copy(&area, 10, 22, &mut out);
        let mut recs = Vec::new();
        let st = spe::decode(&out, start, &mut recs);
        assert_eq!((st.records, recs[0].data_va), (1, Some(0x7f12_3456_7890)));
    }

    /// An SPE ring's counts: 10 records (3 kept, 4 no access beyond L2, 3 with no thread) and 2
    /// given up: 12 samples, 9 dropped, 2 malformed; the same after a PARTIAL area: loss, not a
    /// layout, so none malformed. Either way what was passed on is samples - dropped.
    #[test]
    fn spe_counts_keep_malformed_within_dropped() {
        let sp = spe::SampleStats {
            decode: spe::DecodeStats { records: 10, broken_records: 1, truncated: 1, ..Default::default() },
            dropped: 4,
        };
        let mut st = DrainStats::default();
        count_spe(&mut st, &sp, 3);
        assert_eq!((st.samples, st.dropped, st.malformed, st.unattributed), (12, 9, 2, 3));
        assert_eq!(st.samples - st.dropped, 3);
        let mut st = DrainStats { aux_truncated: 1, aux_partial: 1, ..Default::default() };
        count_spe(&mut st, &sp, 3);
        assert_eq!((st.samples, st.dropped, st.malformed), (12, 9, 0));
    }

    /// PERF_RECORD_AUX: bytes written counted, TRUNCATED (with PARTIAL) and COLLISION counted,
    /// and the record after it read.
    #[test]
    fn perf_record_aux_flags_are_counted() {
        let aux = |size: u64, flags: u64| {
            let mut r = Vec::new();
            r.extend_from_slice(&PERF_RECORD_AUX.to_ne_bytes());
            r.extend_from_slice(&0u16.to_ne_bytes());
            r.extend_from_slice(&40u16.to_ne_bytes()); // header + 3 words + an 8-byte sample_id (TID)
            r.extend_from_slice(&4096u64.to_ne_bytes()); // aux_offset
            r.extend_from_slice(&size.to_ne_bytes());
            r.extend_from_slice(&flags.to_ne_bytes());
            r.extend_from_slice(&[7, 0, 0, 0, 8, 0, 0, 0]); // sample_id: pid 7, tid 8
            r
        };
        let mut buf = aux(1024, 0);
        buf.extend(aux(512, aux_flags::TRUNCATED | aux_flags::PARTIAL));
        buf.extend(aux(0, aux_flags::COLLISION));
        buf.extend(aux(64, aux_flags::TRUNCATED));
        let mut out = Vec::new();
        let st = parse_records(sample_bits::TID, &buf, &mut out).unwrap();
        assert_eq!((st.aux_bytes, st.aux_truncated, st.aux_partial, st.aux_collisions), (1600, 2, 1, 1));
        assert_eq!((st.samples, st.other, out.len()), (0, 0, 0));
    }

    /// Samples are attributed to their thread's process, each thread looked up once; one
    /// without a thread but with a timestamp gets the thread running at that time; those with no
    /// thread either way (no CONTEXT packet and no timestamp, or a time before any switch) or a
    /// thread that has gone are removed and counted, and samples before `first` (another ring's)
    /// are left alone.
    #[test]
    fn spe_samples_get_their_process_from_their_thread() {
        let s =
            |tid: u32, time: u64| RawSample { tid, time, addr: 0x1000 * u64::from(tid + 1), ..RawSample::default() };
        let mut out =
            vec![RawSample { pid: 1, ..s(0, 0) }, s(10, 0), s(0, 0), s(11, 0), s(99, 0), s(10, 0), s(0, 500), s(0, 5)];
        let mut asked = Vec::new();
        let mut cache = HashMap::new();
        let gone = spe::attribute(
            &mut cache,
            &mut out,
            1,
            77,
            |tid| {
                asked.push(tid);
                match tid {
                    10 | 11 => Some(5),
                    _ => None,
                }
            },
            |cyc| (cyc >= 100).then_some((8, 80)),
        );
        assert_eq!(gone, 3, "tid 0 without a time, the vanished 99, the one before any switch");
        assert_eq!(asked, [10, 11, 99], "no lookup for tid 0, one per thread");
        assert_eq!(
            out.iter().map(|s| (s.pid, s.tid, s.time)).collect::<Vec<_>>(),
            [(1, 0, 0), (5, 10, 77), (5, 11, 77), (5, 10, 77), (8, 80, 77)],
            "the drain's time on the attributed ones only"
        );
        // Live: this test's own thread is found as this process.
        let me = std::process::id();
        let tid = unsafe { libc::gettid() } as u32;
        assert_eq!(tgid_of(tid), Some(me));
        assert_eq!(tgid_of(u32::MAX), None);
    }

    /// A sampler of `spec` with no event opened, as if `drained` samples had been read and none
    /// kept: for the tests of what it says about its samples.
    fn unopened_sampler(spec: EventSpec, period: u64, drained: u64) -> Sampler {
        Sampler {
            spec,
            rings: Vec::new(),
            scratch: Vec::new(),
            cpus: Vec::new(),
            asked: Vec::new(),
            period,
            drained,
            kept: 0,
            malformed: 0,
            aux_scratch: Vec::new(),
            unattributed: 0,
            enabled: std::sync::atomic::AtomicBool::new(false),
        }
    }

    #[test]
    fn a_sampler_whose_samples_are_never_accesses_says_so() {
        let spec = EventSpec::ibs_op(11, 1 << 19, true);
        let mut s = unopened_sampler(spec, IBS_OP_PERIOD, NO_ACCESS_SAMPLES - 1);
        assert_eq!(s.no_accesses(), None, "too few samples to tell");
        s.drained = NO_ACCESS_SAMPLES;
        let line = s.no_accesses().expect("1,000 samples, no access");
        assert!(line.contains("ibs_op") && line.contains("kernel-mode") && !line.contains("RAW"), "{line}");
        s.malformed = 12;
        let line = s.no_accesses().expect("1,000 samples, no access");
        assert!(line.contains("12 of them") && line.contains("PERF_SAMPLE_RAW"), "{line}");
        s.kept = 1;
        assert_eq!(s.no_accesses(), None);
    }

    #[test]
    fn cpu_lists_print_as_ranges() {
        assert_eq!(cpu_ranges(&[16, 17, 18, 3, 0, 1, 2, 20]), "0-3,16-18,20");
        assert_eq!(cpu_ranges(&[]), "none");
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

    mod prop {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            /// Whatever bytes a ring holds (a kernel writing another layout, a torn read), the
            /// record parser answers with records or an error naming the fault, never a panic or
            /// a read past its buffer: for IBS op (RAW decoded), PEBS and page-fault sample types.
            #[test]
            fn any_bytes_parse_or_fail_cleanly(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
                for ty in [IBS_OP_SAMPLE_TYPE, MEM_SAMPLE_TYPE, EventSpec::page_faults(1).sample_type] {
                    let mut out = Vec::new();
                    let _ = parse_records(ty, &bytes, &mut out);
                    let _ = parse_sample(ty, &bytes);
                }
            }

            /// A well-formed IBS op sample record whose RAW payload is any bytes of any declared
            /// size: parsed as one sample (kept, dropped or counted malformed), the next record
            /// (a THROTTLE) still read.
            #[test]
            fn any_raw_payload_is_one_sample_and_the_next_record_is_read(
                payload in proptest::collection::vec(any::<u8>(), 0..96),
                declared in 0u32..128,
                consistent in any::<bool>(),
            ) {
                // The fields of IBS_OP_SAMPLE_TYPE in perf_output_sample's order: TID, TIME, ADDR,
                // CPU, RAW (u32 size, the bytes), WEIGHT, DATA_SRC, PHYS_ADDR.
                let declared = if consistent { payload.len() as u32 } else { declared };
                let mut raw = declared.to_ne_bytes().to_vec();
                raw.extend_from_slice(&payload);
                let mut rec = super::ibs_sample(8, [0; 4], &raw);
                let mut throttle = Vec::new();
                throttle.extend_from_slice(&PERF_RECORD_THROTTLE.to_ne_bytes());
                throttle.extend_from_slice(&0u16.to_ne_bytes());
                throttle.extend_from_slice(&8u16.to_ne_bytes());
                rec.extend_from_slice(&throttle);
                let mut out = Vec::new();
                match parse_records(IBS_OP_SAMPLE_TYPE, &rec, &mut out) {
                    Ok(st) => {
                        prop_assert_eq!(st.samples, 1);
                        prop_assert_eq!(st.throttles, 1, "the record after the sample was read");
                        prop_assert_eq!(out.len() as u64 + st.dropped, 1);
                    }
                    // Only a RAW size that is not the payload's can make the record malformed.
                    Err(e) => prop_assert!(!consistent, "{e}"),
                }
            }
        }
    }
}
