//! ARM Statistical Profiling Extension (SPE) records decoded from the packet stream the PMU writes.
//!
//! # Problem
//!
//! SPE samples one operation in every N the CPU executes and writes a *record* of it, a run of
//! packets (which instruction, what it was, the data address virtual and physical, the events it
//! caused, where its data came from, how long it took, when), into a buffer the kernel hands to
//! perf as an AUX trace (`drivers/perf/arm_spe_pmu.c`). There is no `PERF_RECORD_SAMPLE` with
//! `ADDR` and `DATA_SRC`: the stream has to be decoded here, and a record turned into the
//! [`RawSample`] the rest of [`super`] filters and aggregates, as PEBS and IBS samples are.
//!
//! # Approach
//!
//! ```text
//!   packet = header byte [extension byte] payload (1 << header bits 5:4 bytes, little endian)
//!   header   mask  value  packet           payload
//!   0x00     ff    00     padding          none (the driver pads with it: ARM_SPE_BUF_PAD_BYTE)
//!   0x01     ff    01     end              none: the record ends
//!   0x71     ff    71     timestamp        8 bytes, the generic timer: the record ends
//!   0x42     cf    42     events           1, 2, 4 or 8 bytes of event bits (EV_*)
//!   0x43     cf    43     data source      IMPDEF, kept as read
//!   0x64     fc    64     context          4 bytes, CONTEXTIDR_EL1 (index 0) or _EL2 (index 1)
//!   0x48     fc    48     operation type   1 byte; the header's bits 1:0 are the class
//!   0xb0     f8    b0     address          8 bytes; bits 2:0 the index (PC, branch target,
//!                                           data VA, data PA, previous branch target)
//!   0x98     f8    98     counter          2 bytes; bits 2:0 the index (total, issue,
//!                                           translation latency)
//!   0x20     fc    20     extended header: a second byte, ADDRESS or COUNTER as above with
//!                          index ((byte0 & 3) << 3) | (byte1 & 7); byte1 0: alignment padding
//!                          up to 1 << ((byte0 & 0xf) + 1) bytes of the stream
//!   anything else: not a packet; one byte skipped and the record in progress given up
//! ```
//!
//! [`decode`] walks a byte run packet by packet into [`Record`]s; [`Record::sample`] turns a
//! load or store with a data virtual address into a [`RawSample`]: the data address (its
//! top-byte tag dropped), the physical address, the total latency as weight, the thread from the
//! CONTEXT packet, and a `DATA_SRC` synthesised from the EVENTS packet
//! ([`Record::data_src`]), which [`super::is_memory_access`] reads as it reads PEBS's and IBS's:
//! a load or store not served by L1 or L2 is kept. [`decode_samples`] does both and counts what
//! it dropped.
//!
//! Facts and sources: packet headers, masks, payload sizes and indices from
//! `tools/perf/util/arm-spe-decoder/arm-spe-pkt-decoder.[ch]` (`arm_spe_do_get_packet`,
//! `arm_spe_payload_len`, `SPE_HEADER0_*`, `SPE_HDR_EXTENDED_INDEX`, `SPE_ADDR_PKT_*`,
//! `SPE_OP_PKT_*`, `SPE_CNT_PKT_HDR_INDEX_*`); event bits from the same header's
//! `enum arm_spe_events` (`EV_*`); address payloads (a tag in bits 63:56 of a data virtual
//! address, NS/EL in bits 63:61 of a PC) from `arm-spe-decoder.c` `arm_spe_calc_ip`, which cites
//! the Arm ARM (DDI 0487F.c) D10.2.1 "Address packet"; a record ending at END or TIMESTAMP from
//! `arm-spe-decoder.c` `arm_spe_read_record`; the data source synthesis follows
//! `tools/perf/util/arm-spe.c` `arm_spe__synth_memory_level` (the CPU-independent fallback perf
//! uses where it does not know the CPU's data source encoding), with the level-2 events of
//! FEAT_SPEv1p4 read as its newest version reads them (`arm_spe__synth_ld_memory_level`:
//! `EV_L2D_ACCESS` without `EV_L2D_MISS` an L2 hit), except for an L1 refill that did not reach
//! the last-level cache (below).
//!
//! # Limits
//!
//! The DATA SOURCE packet is implementation defined (perf decodes it only for the Neoverse and
//! Cortex cores listed in `arm-spe.c` `common_ds_encoding_cpus`, and for AmpereOne): it is kept in
//! [`Record::data_source`] but not used; the cache level comes from the architected events
//! alone. Which events a CPU writes depends on its SPE version, as the driver's event filter
//! shows (`arm_spe_pmsevfr_res0`, the `PMSEVFR_EL1_RES0_*` masks of
//! `arch/arm64/include/asm/sysreg.h`): FEAT_SPEv1p1 adds the misaligned and SVE predicate events
//! (bits 11, 17, 18), FEAT_SPEv1p2 the not-taken one (bit 6) and the optional previous-branch-target address
//! (index 4, skipped here; perf's "SPEv1.2 previous branch address"), FEAT_SPEv1p4 the level-2 events
//! (bits 19, 20) and only from it may the filter name the L1D access, TLB access and LLC
//! events (bits 2, 4, 8-10, `PMSEVFR_EL1_RES0_V1P4_EXCL`); nothing in the kernel or perf
//! sources read for this says every earlier CPU writes the LLC bits. So an L1D refill is taken
//! for an L2 hit (and dropped, as PEBS's latency threshold and IBS's L2 filter drop L2 hits)
//! only on evidence: the v1p4 `L2D_ACCESS` without `L2D_MISS`, or no LLC bit in an events
//! packet of at least two bytes (so that bits 8 and 9 were written at all) on a CPU one of
//! whose records has shown an LLC bit ([`CpuEvents`], kept per CPU across drains). Without that
//! evidence it stays `L1 | MISS`, as perf writes it, and is kept: a sample that may be an L2
//! hit, rather than every load of a CPU that writes no LLC events dropped as one. Unknown address and counter indices (later
//! versions' additions) are skipped and counted ([`DecodeStats::unknown_packets`]); unknown
//! event bits are ignored. A record's `timestamp` is the generic timer's count, not nanoseconds,
//! and its thread is the CONTEXT packet's CONTEXTIDR, which the kernel writes only when built
//! with `CONFIG_PID_IN_CONTEXTIDR` and the event's opener may see kernel data
//! (`arm_spe_pmu.c` `set_spe_event_has_cx`); CONTEXTIDR then holds `task_pid_nr`, the thread id
//! in the initial pid namespace (`arch/arm64/include/asm/mmu_context.h`
//! `contextidr_thread_switch`), so [`Record::sample`] fills `tid` and leaves `pid` 0 for the
//! caller to find ([`attribute`]). Records without a CONTEXT packet give `tid` 0, and
//! [`attribute`] names the thread the CPU ran at the record's TIMESTAMP instead: the timer count
//! converted to perf's clock ([`TimeConv`]) against the context switches the event reported
//! ([`Timeline`]); a record before the first switch seen on its CPU stays unattributed. The
//! conversion is the `perf_event_mmap_page` comment's (`include/uapi/linux/perf_event.h`): with
//! `cap_user_time_short` the count is first corrected to `time_cycles + ((cyc - time_cycles) &
//! time_mask)`, then `time_zero + (cyc >> time_shift) * time_mult + (((cyc & (2^time_shift - 1)) *
//! time_mult) >> time_shift)`; the page is read under its seqlock each drain and never while the
//! kernel is writing it ([`TimeConv::read`]). The correction takes every count for one at or after
//! `time_cycles` (arm64 writes sched_clock's last epoch there, `arch_perf_update_userpage`), as
//! perf does: a record counted before it, which only a page rewritten between the record and
//! the drain could give, would convert one counter wrap later and be given the CPU's last
//! thread. The SPE driver itself never rewrites the page (`arm_spe_pmu.c` calls no
//! `perf_event_update_userpage`); whether a generic path does between two drains was not
//! established, so this is a known, unguarded limit. A sample's
//! time is that of the drain that read it ([`attribute`]): the sampler stops and restarts each
//! SPE event around every drain, which makes the kernel publish every record written so far, so
//! a record is at most one drain interval older than its time.

use super::{data_src as d, RawSample};

/// Header byte of a padding packet (`SPE_HEADER0_PAD`).
pub const HDR_PAD: u8 = 0x00;
/// Header byte of an end packet (`SPE_HEADER0_END`).
pub const HDR_END: u8 = 0x01;
/// Header byte of a timestamp packet (`SPE_HEADER0_TIMESTAMP`).
pub const HDR_TIMESTAMP: u8 = 0x71;
/// Events packet: `header & 0xcf == 0x42` (`SPE_HEADER0_MASK1`, `SPE_HEADER0_EVENTS`).
pub const HDR_EVENTS: u8 = 0x42;
/// Data source packet: `header & 0xcf == 0x43` (`SPE_HEADER0_SOURCE`).
pub const HDR_SOURCE: u8 = 0x43;
const MASK1: u8 = 0xcf;
/// Context packet: `header & 0xfc == 0x64` (`SPE_HEADER0_MASK2`, `SPE_HEADER0_CONTEXT`).
pub const HDR_CONTEXT: u8 = 0x64;
/// Operation type packet: `header & 0xfc == 0x48` (`SPE_HEADER0_OP_TYPE`).
pub const HDR_OP_TYPE: u8 = 0x48;
/// Extended header: `header & 0xfc == 0x20` (`SPE_HEADER0_EXTENDED`).
pub const HDR_EXTENDED: u8 = 0x20;
const MASK2: u8 = 0xfc;
/// Address packet: `header & 0xf8 == 0xb0` (`SPE_HEADER0_MASK3`, `SPE_HEADER0_ADDRESS`).
pub const HDR_ADDRESS: u8 = 0xb0;
/// Counter packet: `header & 0xf8 == 0x98` (`SPE_HEADER0_COUNTER`).
pub const HDR_COUNTER: u8 = 0x98;
const MASK3: u8 = 0xf8;

/// Address packet indices (`SPE_ADDR_PKT_HDR_INDEX_*`).
pub mod addr_index {
    /// Instruction virtual address (PC).
    pub const PC: u8 = 0;
    /// Branch target.
    pub const BRANCH: u8 = 1;
    /// Data access virtual address.
    pub const DATA_VIRT: u8 = 2;
    /// Data access physical address.
    pub const DATA_PHYS: u8 = 3;
    /// Previous branch target (SPEv1.2, `SPE_ADDR_PKT_HDR_INDEX_PREV_BRANCH`).
    pub const PREV_BRANCH: u8 = 4;
}

/// Counter packet indices (`SPE_CNT_PKT_HDR_INDEX_*`).
pub mod counter_index {
    /// Total latency, issue to completion, cycles.
    pub const TOTAL: u8 = 0;
    /// Issue latency, dispatch to issue, cycles.
    pub const ISSUE: u8 = 1;
    /// Translation latency, cycles.
    pub const TRANSLATION: u8 = 2;
}

/// Event bits of the events packet (`enum arm_spe_events`, `arm-spe-pkt-decoder.h`).
pub mod ev {
    /// Generated an exception.
    pub const EXCEPTION_GEN: u64 = 1 << 0;
    /// Retired (architecturally executed).
    pub const RETIRED: u64 = 1 << 1;
    /// Accessed the L1 data cache.
    pub const L1D_ACCESS: u64 = 1 << 2;
    /// Refilled the L1 data cache (an L1 miss).
    pub const L1D_REFILL: u64 = 1 << 3;
    /// Accessed the TLB.
    pub const TLB_ACCESS: u64 = 1 << 4;
    /// Walked the translation tables (a TLB miss, `EV_TLB_WALK`).
    pub const TLB_WALK: u64 = 1 << 5;
    /// A conditional branch not taken.
    pub const NOT_TAKEN: u64 = 1 << 6;
    /// A mispredicted branch.
    pub const MISPRED: u64 = 1 << 7;
    /// Accessed the last-level cache.
    pub const LLC_ACCESS: u64 = 1 << 8;
    /// Missed the last-level cache (`EV_LLC_MISS`, "LLC-REFILL").
    pub const LLC_MISS: u64 = 1 << 9;
    /// Served by another socket or chip.
    pub const REMOTE_ACCESS: u64 = 1 << 10;
    /// Accessed the level 2 data cache (`EV_L2D_ACCESS`, FEAT_SPEv1p4; bit 19, so only in a
    /// 4- or 8-byte events packet).
    pub const L2D_ACCESS: u64 = 1 << 19;
    /// Missed the level 2 data cache (`EV_L2D_MISS`, FEAT_SPEv1p4; bit 20).
    pub const L2D_MISS: u64 = 1 << 20;
}

/// What one CPU's SPE records have shown of the events it reports, kept from drain to drain
/// (one per ring): before FEAT_SPEv1p4 the last-level-cache events (bits 8 and 9) are not
/// architected for every implementation (the driver treats PMSEVFR_EL1 bits 10:8 as RES0 below
/// v1p4, `arm_spe_pmsevfr_res0`, `PMSEVFR_EL1_RES0_V1P4_EXCL`), so a record without them says the
/// LLC was not reached only on a CPU known to report them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuEvents {
    /// A record with `LLC_ACCESS` or `LLC_MISS` was seen on this CPU.
    pub llc: bool,
}

impl CpuEvents {
    /// Notes what `r`'s events packet shows.
    pub fn note(&mut self, r: &Record) {
        if r.events & (ev::LLC_ACCESS | ev::LLC_MISS) != 0 {
            self.llc = true;
        }
    }
}

/// What an operation type packet said the operation was.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Op {
    /// No operation type packet in the record.
    #[default]
    Unknown,
    /// Class 0 (`SPE_OP_PKT_HDR_CLASS_OTHER`): neither memory nor branch.
    Other,
    /// Class 1 (`SPE_OP_PKT_HDR_CLASS_LD_ST_ATOMIC`), bit 0 clear: a load (or an atomic's load).
    Load {
        /// The payload's bits 7:1 (`SPE_OP_PKT_LDST_SUBCLASS_GET`): 0 general-purpose register,
        /// 0x4 SIMD/FP, 0x10 unspecified, 0x30 a nested-virtualisation system register, ...
        subclass: u8,
    },
    /// Class 1, bit 0 set (`SPE_OP_PKT_ST`): a store.
    Store {
        /// As for [`Op::Load`].
        subclass: u8,
    },
    /// Class 2 (`SPE_OP_PKT_HDR_CLASS_BR_ERET`): a branch or exception return.
    Branch,
    /// Class 3: not defined.
    Reserved,
}

/// `SPE_OP_PKT_LDST_SUBCLASS_NV_SYSREG`: a load or store of a nested-virtualisation system
/// register made to memory by the hypervisor, not a thread's data access.
pub const SUBCLASS_NV_SYSREG: u8 = 0x30;

/// One SPE record: what its packets said (`None` / 0 where no packet said it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Record {
    /// The instruction's virtual address (address index 0), bits 55:0.
    pub pc: Option<u64>,
    /// The exception level it ran at (the PC packet's bits 62:61): 0 user.
    pub pc_el: u8,
    /// Branch target (index 1).
    pub branch_target: Option<u64>,
    /// Data virtual address (index 2), the top-byte tag dropped: bits 55:0, the top byte set to
    /// 0xff when bits 55:52 are all ones (a kernel address), as `arm_spe_calc_ip` does.
    pub data_va: Option<u64>,
    /// Data physical address (index 3), bits 55:0.
    pub data_pa: Option<u64>,
    /// CONTEXTIDR (the kernel's `task_pid_nr`, a thread id), from a context packet.
    pub context: Option<u32>,
    /// The operation type.
    pub op: Op,
    /// The events packet's bits ([`ev`]).
    pub events: u64,
    /// The events packet's payload size in bytes (0: no events packet): a one-byte packet cannot
    /// carry the LLC and remote bits.
    pub events_bytes: u8,
    /// The data source packet's payload (implementation defined).
    pub data_source: Option<u64>,
    /// Total latency, cycles.
    pub total_latency: Option<u16>,
    /// Issue latency, cycles.
    pub issue_latency: Option<u16>,
    /// Translation latency, cycles.
    pub translation_latency: Option<u16>,
    /// The timestamp packet's value (the generic timer's count, as `CNTVCT_EL0`).
    pub timestamp: Option<u64>,
}

/// What [`decode`] met besides records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecodeStats {
    /// Records completed (by an END or TIMESTAMP packet).
    pub records: u64,
    /// Bytes that began no known packet (an unknown header, or an extended header whose second
    /// byte is none of address, counter, alignment): each skipped, and the record they fell in
    /// given up up to its end.
    pub bad_bytes: u64,
    /// Records given up because of a bad byte within them.
    pub broken_records: u64,
    /// Address or counter packets of an index this decoder does not use (their payload skipped).
    pub unknown_packets: u64,
    /// 1 when the last packet ran past the end of the bytes (its header read, its payload not
    /// whole): decoding stopped there.
    pub truncated: u64,
    /// Packets after the last record's end that no END or TIMESTAMP closed: not a record.
    pub unfinished: u64,
    /// Bytes up to the end of the last complete record: where the next decode of the same
    /// stream should start.
    pub consumed: usize,
}

fn payload_len(hdr: u8) -> usize {
    1 << ((hdr >> 4) & 0x3)
}

fn le(bytes: &[u8]) -> u64 {
    bytes.iter().rev().fold(0u64, |v, &b| v << 8 | u64::from(b))
}

/// One packet, as far as [`decode`] needs it.
enum Packet {
    Pad,
    End,
    Timestamp(u64),
    Events { bytes: u8, bits: u64 },
    Source(u64),
    Context(u32),
    OpType { class: u8, payload: u8 },
    Address { index: u8, payload: u64 },
    Counter { index: u8, value: u16 },
}

enum Step {
    /// A packet of this many bytes.
    Packet(Packet, usize),
    /// Not a packet: skip one byte.
    Bad,
    /// The packet runs past the end.
    Short,
}

/// Reads the packet at `buf[at..]`; `base + at` is its offset in the stream (alignment padding
/// counts from the stream's start).
fn packet(buf: &[u8], at: usize, base: usize) -> Step {
    let rest = &buf[at..];
    let Some(&h0) = rest.first() else { return Step::Short };
    let with_payload = |hdr_len: usize, hdr: u8, make: &dyn Fn(u64, usize) -> Packet| -> Step {
        let n = payload_len(hdr);
        match rest.get(hdr_len..hdr_len + n) {
            Some(p) => Step::Packet(make(le(p), n), hdr_len + n),
            None => Step::Short,
        }
    };
    match h0 {
        HDR_PAD => return Step::Packet(Packet::Pad, 1),
        HDR_END => return Step::Packet(Packet::End, 1),
        HDR_TIMESTAMP => return with_payload(1, h0, &|v, _| Packet::Timestamp(v)),
        _ => {}
    }
    if h0 & MASK1 == HDR_EVENTS {
        return with_payload(1, h0, &|v, n| Packet::Events { bytes: n as u8, bits: v });
    }
    if h0 & MASK1 == HDR_SOURCE {
        return with_payload(1, h0, &|v, _| Packet::Source(v));
    }
    if h0 & MASK2 == HDR_CONTEXT {
        return with_payload(1, h0, &|v, _| Packet::Context(v as u32));
    }
    if h0 & MASK2 == HDR_OP_TYPE {
        return with_payload(1, h0, &|v, _| Packet::OpType { class: h0 & 0x3, payload: v as u8 });
    }
    let (hdr, hdr_len, index) = if h0 & MASK2 == HDR_EXTENDED {
        let Some(&h1) = rest.get(1) else { return Step::Short };
        if h1 == 0 {
            // Alignment padding (SPE_HEADER1_ALIGNMENT): up to the next multiple of
            // 1 << ((h0 & 0xf) + 1) bytes of the stream.
            let align = 1usize << ((h0 & 0xf) + 1);
            let len = align - (base + at) % align;
            return if rest.len() < len { Step::Short } else { Step::Packet(Packet::Pad, len) };
        }
        (h1, 2, ((h0 & 0x3) << 3) | (h1 & 0x7))
    } else {
        (h0, 1, h0 & 0x7)
    };
    if hdr & MASK3 == HDR_ADDRESS {
        return with_payload(hdr_len, hdr, &|v, _| Packet::Address { index, payload: v });
    }
    if hdr & MASK3 == HDR_COUNTER {
        return with_payload(hdr_len, hdr, &|v, _| Packet::Counter { index, value: v as u16 });
    }
    Step::Bad
}

/// Bits 55:0 of an address payload (`SPE_ADDR_PKT_ADDR_GET_BYTES_0_6`).
const ADDR_MASK: u64 = (1 << 56) - 1;

/// Decodes the SPE packet stream in `buf` into `out`, one [`Record`] per END- or
/// TIMESTAMP-terminated run of packets. `base` is `buf`'s offset in the stream (the AUX
/// buffer's, page aligned), for alignment padding. Never reads past `buf`: a packet cut off at
/// the end stops the decode ([`DecodeStats::truncated`]); bytes that begin no packet are
/// skipped one by one and the record they fall in is dropped ([`DecodeStats::bad_bytes`]).
pub fn decode(buf: &[u8], base: usize, out: &mut Vec<Record>) -> DecodeStats {
    let mut st = DecodeStats::default();
    let mut rec = Record::default();
    let mut packets = 0u64;
    let mut broken = false;
    let mut at = 0usize;
    while at < buf.len() {
        let (p, len) = match packet(buf, at, base) {
            Step::Packet(p, len) => (p, len),
            Step::Bad => {
                st.bad_bytes += 1;
                if !broken {
                    st.broken_records += 1;
                    broken = true;
                }
                at += 1;
                continue;
            }
            Step::Short => {
                st.truncated = 1;
                break;
            }
        };
        at += len;
        let ends = matches!(p, Packet::End | Packet::Timestamp(_));
        match p {
            Packet::Pad => continue,
            Packet::End => {}
            Packet::Timestamp(t) => rec.timestamp = Some(t),
            Packet::Events { bytes, bits } => {
                rec.events = bits;
                rec.events_bytes = bytes;
            }
            Packet::Source(v) => rec.data_source = Some(v),
            Packet::Context(c) => rec.context = Some(c),
            Packet::OpType { class, payload } => {
                let subclass = payload & 0xfe;
                rec.op = match class {
                    0 => Op::Other,
                    1 if payload & 1 != 0 => Op::Store { subclass },
                    1 => Op::Load { subclass },
                    2 => Op::Branch,
                    _ => Op::Reserved,
                };
            }
            Packet::Address { index, payload } => match index {
                addr_index::PC => {
                    rec.pc = Some(payload & ADDR_MASK);
                    rec.pc_el = ((payload >> 61) & 0x3) as u8;
                }
                addr_index::BRANCH => rec.branch_target = Some(payload & ADDR_MASK),
                addr_index::DATA_VIRT => {
                    let mut va = payload & ADDR_MASK;
                    if (va >> 52) & 0xf == 0xf {
                        va |= 0xff << 56;
                    }
                    rec.data_va = Some(va);
                }
                addr_index::DATA_PHYS => rec.data_pa = Some(payload & ADDR_MASK),
                addr_index::PREV_BRANCH => {}
                _ => st.unknown_packets += 1,
            },
            Packet::Counter { index, value } => match index {
                counter_index::TOTAL => rec.total_latency = Some(value),
                counter_index::ISSUE => rec.issue_latency = Some(value),
                counter_index::TRANSLATION => rec.translation_latency = Some(value),
                _ => st.unknown_packets += 1,
            },
        }
        packets += 1;
        if ends {
            if !broken {
                out.push(rec);
                st.records += 1;
            }
            rec = Record::default();
            packets = 0;
            broken = false;
            st.consumed = at;
        }
    }
    st.unfinished = packets;
    st
}

impl Record {
    /// The `union perf_mem_data_src` of this record on a CPU that has shown `seen`, from its
    /// operation type and events (`tools/perf/util/arm-spe.c` `arm_spe__synth_data_source` /
    /// `arm_spe__synth_memory_level`): `mem_op` load or store (0 for anything else, as perf
    /// writes); `mem_lvl` L3 with MISS or HIT when the LLC was accessed or missed; else, when the
    /// L1D was accessed or refilled, L1 with HIT (and `mem_lvl_num` L1) without a refill; for a
    /// refill, what the level-2 events say where the CPU writes them (FEAT_SPEv1p4, perf's
    /// `arm_spe__synth_ld_memory_level`): L2 MISS on `L2D_MISS`, L2 HIT (`mem_lvl_num` L2) on
    /// `L2D_ACCESS` alone; without them, L2 HIT when the events packet is long enough to hold the
    /// LLC bits and this CPU is known to report them ([`CpuEvents::llc`]), so their absence means
    /// the LLC was not reached (perf: L1 MISS; module Limits), else L1 MISS. A miss is never
    /// given `mem_lvl_num` L1 or L2 (which [`super::is_memory_access`] reads as a hit there);
    /// REMOTE_ACCESS adds `REM_CCE1` and `mem_remote`. No events: level not available.
    pub fn data_src(&self, seen: CpuEvents) -> u64 {
        let op = match self.op {
            Op::Load { .. } => d::OP_LOAD,
            Op::Store { .. } => d::OP_STORE,
            _ => return 0,
        };
        let e = self.events;
        let (mut lvl, lvl_num) = if e & (ev::LLC_ACCESS | ev::LLC_MISS) != 0 {
            if e & ev::LLC_MISS != 0 {
                (d::LVL_L3 | d::LVL_MISS, d::LVLNUM_NA)
            } else {
                (d::LVL_L3 | d::LVL_HIT, d::LVLNUM_L3)
            }
        } else if e & (ev::L1D_ACCESS | ev::L1D_REFILL) != 0 {
            if e & ev::L1D_REFILL == 0 {
                (d::LVL_L1 | d::LVL_HIT, d::LVLNUM_L1)
            } else if e & ev::L2D_MISS != 0 {
                (d::LVL_L2 | d::LVL_MISS, d::LVLNUM_NA)
            } else if e & ev::L2D_ACCESS != 0 || (self.events_bytes >= 2 && seen.llc) {
                (d::LVL_L2 | d::LVL_HIT, d::LVLNUM_L2)
            } else {
                (d::LVL_L1 | d::LVL_MISS, d::LVLNUM_NA)
            }
        } else {
            (d::LVL_NA, d::LVLNUM_NA)
        };
        let mut remote = 0;
        if e & ev::REMOTE_ACCESS != 0 {
            lvl |= d::LVL_REM_CCE1;
            remote = d::REMOTE;
        }
        op | lvl << d::LVL_SHIFT
            | d::SNOOP_NA << d::SNOOP_SHIFT
            | d::LOCK_NA << d::LOCK_SHIFT
            | d::TLB_NA << d::TLB_SHIFT
            | lvl_num << d::LVLNUM_SHIFT
            | remote << d::REMOTE_SHIFT
    }

    /// The record as a sample of a thread's data access on `cpu`, or `None` when it is none: no
    /// load or store (a branch, other operations, no operation type packet), a nested-
    /// virtualisation system-register access, no data virtual address, or a PC at an exception
    /// level other than EL0 (the kernel's own access; the driver excludes EL1 when asked, this
    /// holds on any kernel). `tid` is the CONTEXT packet's (0 without one), `pid` is 0 (module
    /// Limits), `time` the TIMESTAMP packet's raw timer count (0 without one) until [`attribute`]
    /// replaces it; `weight` is the
    /// total latency. Whether the access is kept is [`super::is_memory_access`]'s call with
    /// [`SAMPLE_TYPE`] (L1 and L2 hits dropped; the data source as [`Record::data_src`] gives it
    /// on a CPU that has shown `seen`).
    pub fn sample(&self, cpu: u32, seen: CpuEvents) -> Option<RawSample> {
        match self.op {
            Op::Load { subclass } | Op::Store { subclass } if subclass != SUBCLASS_NV_SYSREG => {}
            _ => return None,
        }
        if self.pc.is_some() && self.pc_el != 0 {
            return None;
        }
        let addr = self.data_va?;
        Some(RawSample {
            ip: self.pc.unwrap_or(0),
            pid: 0,
            tid: self.context.unwrap_or(0),
            time: self.timestamp.unwrap_or(0),
            addr,
            cpu,
            period: 0,
            weight: self.total_latency.map_or(0, u64::from),
            data_src: self.data_src(seen),
            phys_addr: self.data_pa.unwrap_or(0),
            raw: super::RawPayload::Absent,
        })
    }
}

/// The sample type SPE samples are judged as by [`super::is_memory_access`]: the fields
/// [`Record::sample`] fills, `DATA_SRC` among them.
pub const SAMPLE_TYPE: u64 = super::MEM_SAMPLE_TYPE;

/// Counts of one [`decode_samples`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SampleStats {
    /// The packet decode's counts.
    pub decode: DecodeStats,
    /// Records that were no user data access ([`Record::sample`] `None`) or that
    /// [`super::is_memory_access`] refused (L1/L2 hits, kernel addresses).
    pub dropped: u64,
}

/// Decodes `buf` (at stream offset `base`, written on `cpu`, whose records so far showed `seen`,
/// updated with these) and pushes the records that are a thread's memory access beyond L2 onto
/// `out`.
pub fn decode_samples(
    buf: &[u8],
    base: usize,
    cpu: u32,
    seen: &mut CpuEvents,
    out: &mut Vec<RawSample>,
) -> SampleStats {
    let mut recs = Vec::new();
    let decode = decode(buf, base, &mut recs);
    let mut st = SampleStats { decode, dropped: 0 };
    for r in &recs {
        seen.note(r);
    }
    for r in &recs {
        match r.sample(cpu, *seen) {
            Some(s) if super::is_memory_access(SAMPLE_TYPE, &s) => out.push(s),
            _ => st.dropped += 1,
        }
    }
    st
}

/// The conversion of the generic timer's count (what a TIMESTAMP packet holds with
/// `pct_enable` off: the virtual counter) to perf's clock, from the event's mmap page: `time_zero`,
/// `time_mult`, `time_shift` and, with `cap_user_time_short`, `time_cycles`/`time_mask`
/// (`include/uapi/linux/perf_event.h` `struct perf_event_mmap_page`, the formula in its
/// comment; `tools/perf/util/tsc.c` `tsc_to_perf_time`, which perf's SPE decoding uses). On arm64
/// the kernel fills them from sched_clock (`drivers/perf/arm_pmuv3.c`
/// `arch_perf_update_userpage`: "always computed with the sched_clock"), perf's clock of an
/// event without `use_clockid`, so the result compares with the times of that event's
/// `sample_id`s.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeConv {
    /// `time_zero`.
    pub time_zero: u64,
    /// `time_mult`.
    pub time_mult: u32,
    /// `time_shift`.
    pub time_shift: u16,
    /// `time_cycles` (with `cap_user_time_short`).
    pub time_cycles: u64,
    /// `time_mask` (with `cap_user_time_short`; 0: the counter is 64 bits wide).
    pub time_mask: u64,
}

/// Byte offsets in `struct perf_event_mmap_page` (`include/uapi/linux/perf_event.h`) of the fields
/// [`TimeConv::read`] reads, and the capability bits it tests: `lock` (u32) at 8 after `version`
/// and `compat_version`; `capabilities` (u64) at 40 after `index`, `offset`, `time_enabled`,
/// `time_running`; `pmc_width` (u16) at 48, `time_shift` (u16) 50, `time_mult` (u32) 52,
/// `time_offset` 56, `time_zero` 64, `size` and `__reserved_1` (u32) 72 and 76, `time_cycles` 80,
/// `time_mask` 88.
pub mod mmap_page {
    /// `lock`, u32: the seqlock `perf_event_update_userpage` (`kernel/events/core.c`) increments
    /// before and after it writes the page, so it is odd while a write is under way.
    pub const LOCK: usize = 8;
    /// `capabilities`, u64.
    pub const CAPABILITIES: usize = 40;
    /// `time_shift`, u16.
    pub const TIME_SHIFT: usize = 50;
    /// `time_mult`, u32.
    pub const TIME_MULT: usize = 52;
    /// `time_zero`, u64.
    pub const TIME_ZERO: usize = 64;
    /// `time_cycles`, u64 (with `cap_user_time_short`).
    pub const TIME_CYCLES: usize = 80;
    /// `time_mask`, u64 (with `cap_user_time_short`).
    pub const TIME_MASK: usize = 88;
    /// `cap_user_time_zero`, capabilities bit 4 (bit 0 `cap_bit0`, 1 `cap_bit0_is_deprecated`,
    /// 2 `cap_user_rdpmc`, 3 `cap_user_time`): `time_zero` is valid.
    pub const CAP_USER_TIME_ZERO: u64 = 1 << 4;
    /// `cap_user_time_short`, capabilities bit 5: `time_cycles` and `time_mask` are valid.
    pub const CAP_USER_TIME_SHORT: u64 = 1 << 5;
}

/// Reads of the mmap page [`TimeConv::read`] makes before giving up on a page whose seqlock
/// never settles. Default 10,000. Source: perf's own bound (`tools/perf/util/tsc.c`
/// `perf_read_tsc_conversion`, "failed to get perf_event_mmap_page lock"). What it prevents: a
/// drain spinning for ever on a page the kernel keeps rewriting; the kernel holds the lock odd
/// only for the few stores of one update with preemption off, so a settled page is met at once.
pub const TIME_CONV_TRIES: u32 = 10_000;

impl TimeConv {
    /// The conversion of an event's mmap page, read through `read(offset, bytes)` (2, 4 or 8
    /// bytes at a [`mmap_page`] offset) under its seqlock: `lock` read, the fields, `lock` read
    /// again; kept only when both reads agree and are even (`perf_event_update_userpage`
    /// increments `lock` before and after writing, so an odd value means a write is under way
    /// and the fields may be torn; perf's `perf_read_tsc_conversion` tests the same
    /// `pc->lock == seq && !(seq & 1)`), else read again, at most [`TIME_CONV_TRIES`] times.
    /// `None` when `cap_user_time_zero` is clear (the kernel offers no conversion: arm64 only
    /// when sched_clock runs on the architected timer, `arch_perf_update_userpage`) or the lock
    /// never settled. `time_cycles` and `time_mask` only with `cap_user_time_short`, else 0.
    pub fn read(read: impl Fn(usize, usize) -> u64) -> Option<TimeConv> {
        use mmap_page as m;
        use std::sync::atomic::{fence, Ordering};
        for _ in 0..TIME_CONV_TRIES {
            let seq = read(m::LOCK, 4);
            fence(Ordering::Acquire);
            let caps = read(m::CAPABILITIES, 8);
            let short = caps & m::CAP_USER_TIME_SHORT != 0;
            let conv = TimeConv {
                time_zero: read(m::TIME_ZERO, 8),
                time_mult: read(m::TIME_MULT, 4) as u32,
                time_shift: read(m::TIME_SHIFT, 2) as u16,
                time_cycles: if short { read(m::TIME_CYCLES, 8) } else { 0 },
                time_mask: if short { read(m::TIME_MASK, 8) } else { 0 },
            };
            fence(Ordering::Acquire);
            if seq & 1 == 0 && read(m::LOCK, 4) == seq {
                return (caps & m::CAP_USER_TIME_ZERO != 0).then_some(conv);
            }
            std::hint::spin_loop();
        }
        None
    }

    /// Perf-clock nanoseconds of counter value `cyc`.
    pub fn to_perf_ns(&self, cyc: u64) -> u64 {
        let mut cyc = cyc;
        if self.time_mask != 0 {
            cyc = self.time_cycles.wrapping_add(cyc.wrapping_sub(self.time_cycles) & self.time_mask);
        }
        let shift = u32::from(self.time_shift.min(63));
        let mult = u64::from(self.time_mult);
        let quot = cyc >> shift;
        let rem = cyc & ((1u64 << shift) - 1);
        self.time_zero.wrapping_add(quot.wrapping_mul(mult)).wrapping_add(rem.wrapping_mul(mult) >> shift)
    }
}

/// One CPU's running thread over time, from `PERF_RECORD_SWITCH_CPU_WIDE` records (attr
/// `context_switch`, `kernel/events/core.c` `perf_event_switch`): perf time (ns) -> (pid, tid) of
/// the thread that ran from then on. The last one is carried from drain to drain, since a thread
/// may run for many drains without a switch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Timeline {
    /// Switches in time order: (perf time, pid, tid).
    switches: Vec<(u64, u32, u32)>,
}

impl Timeline {
    /// Adds a switch at perf time `time` to thread `tid` of process `pid`.
    pub fn push(&mut self, time: u64, pid: u32, tid: u32) {
        let at = self.switches.partition_point(|&(t, _, _)| t <= time);
        self.switches.insert(at, (time, pid, tid));
    }

    /// The (pid, tid) running at perf time `time`: the last switch at or before it; `None`
    /// before the first one known, or for the idle task (tid 0).
    pub fn running_at(&self, time: u64) -> Option<(u32, u32)> {
        let at = self.switches.partition_point(|&(t, _, _)| t <= time);
        let &(_, pid, tid) = self.switches.get(at.checked_sub(1)?)?;
        (tid != 0).then_some((pid, tid))
    }

    /// The latest switch: (perf time, pid, tid).
    pub fn last(&self) -> Option<(u64, u32, u32)> {
        self.switches.last().copied()
    }

    /// Forgets every switch but the last one at or before `time` (what runs from then on).
    pub fn keep_from(&mut self, time: u64) {
        let at = self.switches.partition_point(|&(t, _, _)| t <= time);
        if at > 1 {
            self.switches.drain(..at - 1);
        }
    }
}

/// `PERF_RECORD_SWITCH_CPU_WIDE`: `{ u32 next_prev_pid; u32 next_prev_tid; sample_id }`.
pub const PERF_RECORD_SWITCH_CPU_WIDE: u32 = 15;
/// `PERF_RECORD_MISC_SWITCH_OUT` (header `misc` bit 13): the record is written as the task in
/// `sample_id` leaves the CPU and `next_prev` is the next one; without it, as the `sample_id` task
/// arrives and `next_prev` is the one before.
pub const PERF_RECORD_MISC_SWITCH_OUT: u16 = 1 << 13;

/// Adds to `line` the switches among the ring records in `buf`, for an event whose `sample_id`
/// is TID and TIME first (SPE's [`super::EventSpec::arm_spe`] sample type: TID, TIME, CPU): each
/// gives the thread that runs from its time on (`next_prev` of a switch-out, the `sample_id`'s of
/// a switch-in). Records too short for those fields, and a header that runs past the buffer,
/// end the walk: nothing past `buf` is read. Returns the number of switches added.
pub fn read_switches(buf: &[u8], line: &mut Timeline) -> usize {
    let mut n = 0;
    let mut rest = buf;
    while rest.len() >= 8 {
        let ty = u32::from_ne_bytes(rest[0..4].try_into().expect("4"));
        let misc = u16::from_ne_bytes(rest[4..6].try_into().expect("2"));
        let size = usize::from(u16::from_ne_bytes(rest[6..8].try_into().expect("2")));
        if size < 8 || size > rest.len() {
            break;
        }
        let body = &rest[8..size];
        if ty == PERF_RECORD_SWITCH_CPU_WIDE && body.len() >= 24 {
            let u32_at = |at: usize| u32::from_ne_bytes(body[at..at + 4].try_into().expect("4"));
            let time = u64::from_ne_bytes(body[16..24].try_into().expect("8"));
            let (pid, tid) =
                if misc & PERF_RECORD_MISC_SWITCH_OUT != 0 { (u32_at(0), u32_at(4)) } else { (u32_at(8), u32_at(12)) };
            line.push(time, pid, tid);
            n += 1;
        }
        rest = &rest[size..];
    }
    n
}

/// One drain's update of a CPU's timeline from its ring's records `ring`, of which the kernel
/// reported `lost` lost: with none, the switches are added ([`read_switches`]); with any, the
/// timeline has a hole of unknown switches and is emptied (this drain's switches dropped too,
/// since where the hole falls among them is not said), so no record is attributed by time until
/// the next drain's switches: never to a thread that may not have been running.
pub fn follow_switches(line: &mut Timeline, ring: &[u8], lost: u64) {
    if lost > 0 {
        *line = Timeline::default();
    } else {
        read_switches(ring, line);
    }
}

/// Names the thread and process of each sample in `out[first..]` ([`Record::sample`]'s): a
/// sample with a thread (`tid`, the CONTEXT packet's) gets its process through `tgid_of`
/// (`/proc/TID/status`'s Tgid live), each thread looked up once per `cache`; one without (no
/// CONTEXT packet) but with a timestamp (`time`, the raw timer count) gets the (pid, tid)
/// `running` names for that count (the CPU's [`Timeline`] at its [`TimeConv`] time). Each kept
/// sample then gets the time `now` (the drain's CLOCK_MONOTONIC: the sched_clock time of the
/// record is not the model's clock, module Limits). Removes the samples no thread was found for
/// (no CONTEXT packet and no switch before them, the idle task, a thread that has gone) and
/// returns how many. The kernel's CONTEXTIDR holds the thread id of the initial pid namespace,
/// so `tgid_of` must read that namespace's /proc.
pub fn attribute(
    cache: &mut std::collections::HashMap<u32, Option<u32>>,
    out: &mut Vec<RawSample>,
    first: usize,
    now: u64,
    mut tgid_of: impl FnMut(u32) -> Option<u32>,
    running: impl Fn(u64) -> Option<(u32, u32)>,
) -> u64 {
    let before = out.len();
    let mut keep = first;
    for i in first..out.len() {
        let tid = out[i].tid;
        let pid = if tid != 0 {
            *cache.entry(tid).or_insert_with(|| tgid_of(tid))
        } else if out[i].time != 0 {
            running(out[i].time).map(|(pid, tid)| {
                out[i].tid = tid;
                pid
            })
        } else {
            None
        };
        if let Some(pid) = pid {
            out[i].pid = pid;
            out[i].time = now;
            out.swap(keep, i);
            keep += 1;
        }
    }
    out.truncate(keep);
    (before - keep) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds packet streams byte by byte; each helper names its header byte and payload.
    mod pkt {
        /// A short-header packet: `hdr` then the payload's `n` low bytes, little endian.
        fn short(hdr: u8, n: usize, v: u64) -> Vec<u8> {
            let mut b = vec![hdr];
            b.extend_from_slice(&v.to_le_bytes()[..n]);
            b
        }
        /// PC address packet: header 0xb0 | index 0, 8-byte payload, EL in bits 62:61.
        pub fn pc(addr: u64, el: u64) -> Vec<u8> {
            short(0xb0, 8, addr | el << 61)
        }
        /// Data virtual address: header 0xb2 (0xb0 | index 2), 8 bytes.
        pub fn va(addr: u64) -> Vec<u8> {
            short(0xb2, 8, addr)
        }
        /// Data physical address: header 0xb3, 8 bytes (NS bit 63 set, as the hardware may).
        pub fn pa(addr: u64) -> Vec<u8> {
            short(0xb3, 8, addr | 1 << 63)
        }
        /// Context: header 0x65 (0x64 | index 1, CONTEXTIDR_EL2 under VHE), 4 bytes.
        pub fn context(id: u32) -> Vec<u8> {
            short(0x65, 4, u64::from(id))
        }
        /// Operation type, load/store class: header 0x49 (0x48 | class 1), 1 byte: bit 0 store.
        pub fn ldst(store: bool) -> Vec<u8> {
            short(0x49, 1, u64::from(store))
        }
        /// Operation type, branch class: header 0x4a (0x48 | class 2), payload 1 (conditional).
        pub fn branch() -> Vec<u8> {
            short(0x4a, 1, 1)
        }
        /// Events: header 0x52 (0x42 | size 01 in bits 5:4: 2 bytes).
        pub fn events(bits: u64) -> Vec<u8> {
            short(0x52, 2, bits)
        }
        /// Data source: header 0x53 (0x43, 2 bytes), an IMPDEF value.
        pub fn source(v: u64) -> Vec<u8> {
            short(0x53, 2, v)
        }
        /// Total latency counter: header 0x98 (index 0), 2 bytes.
        pub fn total_latency(c: u16) -> Vec<u8> {
            short(0x98, 2, u64::from(c))
        }
        /// Timestamp: header 0x71, 8 bytes; ends the record.
        pub fn timestamp(t: u64) -> Vec<u8> {
            short(0x71, 8, t)
        }
        /// End: header 0x01, no payload.
        pub fn end() -> Vec<u8> {
            vec![0x01]
        }
    }

    const VA: u64 = 0x0000_7f12_3456_7890;

    fn record(parts: &[Vec<u8>]) -> Vec<u8> {
        parts.concat()
    }

    fn dram_load() -> Vec<u8> {
        record(&[
            pkt::pc(0x0000_0000_0040_1000, 0),
            pkt::ldst(false),
            pkt::events(ev::RETIRED | ev::L1D_ACCESS | ev::L1D_REFILL | ev::LLC_ACCESS | ev::LLC_MISS),
            pkt::source(0xe),
            pkt::total_latency(312),
            pkt::context(4242),
            pkt::va(VA),
            pkt::pa(0x8_8000_1890),
            pkt::timestamp(123_456),
        ])
    }

    #[test]
    fn a_dram_served_load_is_a_sample_of_its_thread_at_its_address() {
        let mut out = Vec::new();
        let st = decode_samples(&dram_load(), 0, 3, &mut CpuEvents::default(), &mut out);
        assert_eq!(st.decode.records, 1);
        assert_eq!(st.dropped, 0);
        assert_eq!(out.len(), 1);
        let s = out[0];
        assert_eq!(s.addr, VA);
        assert_eq!(s.phys_addr, 0x8_8000_1890, "the NS bit is not part of the address");
        assert_eq!(s.tid, 4242);
        assert_eq!(s.cpu, 3);
        assert_eq!(s.weight, 312);
        assert_eq!(s.ip, 0x40_1000);
        assert_eq!(s.data_src & d::OP_MASK, d::OP_LOAD);
        assert_eq!((s.data_src >> d::LVL_SHIFT) & 0x3fff, d::LVL_L3 | d::LVL_MISS);
        let mut recs = Vec::new();
        decode(&dram_load(), 0, &mut recs);
        assert_eq!(recs[0].timestamp, Some(123_456));
        assert_eq!(recs[0].data_source, Some(0xe));
    }

    #[test]
    fn a_store_that_missed_l1_and_l2_is_kept_as_a_store() {
        let buf = record(&[
            pkt::ldst(true),
            pkt::events(ev::L1D_ACCESS | ev::L1D_REFILL | ev::LLC_ACCESS),
            pkt::va(VA + 8),
            pkt::end(),
        ]);
        let mut out = Vec::new();
        decode_samples(&buf, 0, 0, &mut CpuEvents::default(), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].data_src & d::OP_MASK, d::OP_STORE);
        assert_eq!(out[0].addr, VA + 8);
        assert_eq!(out[0].tid, 0, "no context packet: no thread");
    }

    #[test]
    fn l1_and_l2_hits_are_dropped() {
        let l1 = record(&[pkt::ldst(false), pkt::events(ev::L1D_ACCESS), pkt::va(VA), pkt::end()]);
        let l2 = record(&[pkt::ldst(false), pkt::events(ev::L1D_ACCESS | ev::L1D_REFILL), pkt::va(VA), pkt::end()]);
        let llc_seen = CpuEvents { llc: true };
        for buf in [l1, l2] {
            let mut out = Vec::new();
            let st = decode_samples(&buf, 0, 0, &mut llc_seen.clone(), &mut out);
            assert_eq!((st.decode.records, st.dropped, out.len()), (1, 1, 0));
        }
        // A one-byte events packet (header 0x42, size 00) cannot say the LLC was not reached:
        // the refill is kept as an L1 miss.
        let short_events = record(&[pkt::ldst(false), vec![0x42, 0x0c], pkt::va(VA), pkt::end()]);
        let mut out = Vec::new();
        decode_samples(&short_events, 0, 0, &mut llc_seen.clone(), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].data_src >> d::LVL_SHIFT) & 0x3fff, d::LVL_L1 | d::LVL_MISS);
    }

    /// Bits from `enum arm_spe_events` (`tools/perf/util/arm-spe-decoder/arm-spe-pkt-decoder.h`):
    /// EV_L1D_ACCESS 2, EV_L1D_REFILL 3, EV_LLC_ACCESS 8, EV_LLC_MISS 9, EV_L2D_ACCESS 19,
    /// EV_L2D_MISS 20; events headers 0x52 (0x42 with size 01: 2 bytes) and 0x62 (size 10: 4
    /// bytes, `arm_spe_payload_len`). Below FEAT_SPEv1p4 the LLC events are not architected for
    /// every CPU (the driver's PMSEVFR_EL1 RES0 mask keeps bits 10:8 out of the filter below
    /// v1p4, `PMSEVFR_EL1_RES0_V1P4_EXCL`), and perf, even its newest synthesis, takes an L2 hit
    /// only from EV_L2D_ACCESS without EV_L2D_MISS: an L1 refill without LLC bits is an L2 hit
    /// only on a CPU that has shown it writes them, or where the L2D events say so.
    #[test]
    fn an_l1_refill_is_an_l2_hit_only_where_the_cpu_is_known_to_report_the_llc() {
        let load = |events: Vec<u8>| record(&[pkt::ldst(false), events, pkt::va(VA), pkt::end()]);
        let ev2 = |bits: u64| [vec![0x52], bits.to_le_bytes()[..2].to_vec()].concat();
        let ev4 = |bits: u64| [vec![0x62], bits.to_le_bytes()[..4].to_vec()].concat();
        let refill = load(ev2(1 << 2 | 1 << 3));
        let lvl = |s: &RawSample| ((s.data_src >> d::LVL_SHIFT) & 0x3fff, (s.data_src >> d::LVLNUM_SHIFT) & 0xf);
        // A CPU none of whose records carried an LLC bit: the refill may have gone anywhere, so
        // it is kept, as perf writes it (L1 MISS), not dropped for an L2 hit.
        let mut seen = CpuEvents::default();
        let mut out = Vec::new();
        decode_samples(&refill, 0, 0, &mut seen, &mut out);
        assert_eq!(out.len(), 1, "an L1 refill on a CPU not known to report LLC events is kept");
        assert_eq!(lvl(&out[0]), (d::LVL_L1 | d::LVL_MISS, d::LVLNUM_NA));
        assert!(!seen.llc);
        // Once a record of that CPU shows an LLC bit (here a DRAM load in the same drain), the
        // refill without one is an L2 hit and dropped, in that drain and the next ones.
        let mut buf = load(ev2(1 << 2 | 1 << 3 | 1 << 8 | 1 << 9));
        buf.extend(&refill);
        let mut out = Vec::new();
        let st = decode_samples(&buf, 0, 0, &mut seen, &mut out);
        assert!(seen.llc);
        assert_eq!((st.decode.records, st.dropped, out.len()), (2, 1, 1));
        assert_eq!(lvl(&out[0]).0, d::LVL_L3 | d::LVL_MISS);
        let st = decode_samples(&refill, 0, 0, &mut seen, &mut Vec::new());
        assert_eq!(st.dropped, 1, "the CPU's LLC reporting is remembered");
        // FEAT_SPEv1p4: EV_L2D_ACCESS without EV_L2D_MISS is an L2 hit on any CPU; with
        // EV_L2D_MISS the access went beyond L2 and is kept, never with mem_lvl_num L2.
        let l2_hit = load(ev4(1 << 2 | 1 << 3 | 1 << 19));
        let st = decode_samples(&l2_hit, 0, 0, &mut CpuEvents::default(), &mut Vec::new());
        assert_eq!(st.dropped, 1);
        let l2_miss = load(ev4(1 << 2 | 1 << 3 | 1 << 19 | 1 << 20));
        for mut seen in [CpuEvents::default(), CpuEvents { llc: true }] {
            let mut out = Vec::new();
            decode_samples(&l2_miss, 0, 0, &mut seen, &mut out);
            assert_eq!(out.len(), 1);
            assert_eq!(lvl(&out[0]), (d::LVL_L2 | d::LVL_MISS, d::LVLNUM_NA));
        }
    }

    #[test]
    fn branches_kernel_ops_and_records_without_address_are_dropped() {
        let branch = record(&[pkt::pc(0x40_1000, 0), pkt::branch(), pkt::events(ev::RETIRED), pkt::end()]);
        let kernel = record(&[
            pkt::pc(0xffff_8000_1000, 1),
            pkt::ldst(false),
            pkt::events(ev::LLC_MISS),
            pkt::va(VA),
            pkt::end(),
        ]);
        let no_va = record(&[pkt::ldst(false), pkt::events(ev::LLC_MISS), pkt::end()]);
        let kernel_va =
            record(&[pkt::ldst(false), pkt::events(ev::LLC_MISS), pkt::va(0x00ff_8000_0000_1000), pkt::end()]);
        for buf in [branch, kernel, no_va, kernel_va] {
            let mut out = Vec::new();
            let st = decode_samples(&buf, 0, 0, &mut CpuEvents::default(), &mut out);
            assert_eq!((st.decode.records, st.dropped, out.len()), (1, 1, 0), "{buf:02x?}");
        }
        let mut recs = Vec::new();
        decode(&record(&[pkt::ldst(false), pkt::va(0x00f0_0000_0000_1000), pkt::end()]), 0, &mut recs);
        assert_eq!(recs[0].data_va, Some(0xfff0_0000_0000_1000), "bits 55:52 all ones: a kernel address");
        recs.clear();
        decode(&record(&[pkt::ldst(false), pkt::va(0x5a00_7f00_0000_1000), pkt::end()]), 0, &mut recs);
        assert_eq!(recs[0].data_va, Some(0x7f00_0000_1000), "the top-byte tag is dropped");
    }

    #[test]
    fn padding_and_unknown_bytes_are_skipped_and_the_next_record_read() {
        // Padding (0x00) before and inside a record, alignment padding (0x20 0x00: to 4 bytes of
        // the stream), then an unknown header byte (0xf0 matches no mask) inside a record, which
        // gives that record up; the DRAM load after it is read whole.
        let mut buf = vec![0x00, 0x00];
        buf.extend(record(&[pkt::ldst(false), vec![0x00], pkt::events(ev::LLC_MISS), pkt::va(VA), pkt::end()]));
        buf.extend([0x20, 0x00]);
        buf.extend(record(&[pkt::ldst(false), vec![0xf0], pkt::va(VA), pkt::end()]));
        buf.extend(dram_load());
        let mut recs = Vec::new();
        let st = decode(&buf, 0, &mut recs);
        assert_eq!(st.records, 2);
        assert_eq!(st.bad_bytes, 1);
        assert_eq!(st.broken_records, 1);
        assert_eq!(st.truncated, 0);
        assert_eq!(st.consumed, buf.len());
        assert_eq!(recs[0].data_va, Some(VA));
        assert_eq!(recs[1].context, Some(4242));
        // The alignment packet counts from the stream, not the slice: 0x23 asks for 16-byte
        // alignment, so at stream offset 14 it is 2 bytes long and the END after it is read.
        let mut recs = Vec::new();
        let st = decode(&[0x23, 0x00, 0x01], 14, &mut recs);
        assert_eq!((st.records, st.bad_bytes, st.truncated), (1, 0, 0));
        // At offset 0 it would be 16 bytes long: past these 3, a truncated packet.
        let st = decode(&[0x23, 0x00, 0x01], 0, &mut recs);
        assert_eq!((st.records, st.truncated), (0, 1));
        // An END alone is an empty record: no op, no sample.
        assert_eq!(decode_samples(&[0x01], 0, 0, &mut CpuEvents::default(), &mut Vec::new()).dropped, 1);
    }

    #[test]
    fn a_packet_cut_off_at_the_end_is_counted_and_not_read_past() {
        let full = dram_load();
        for cut in 1..full.len() {
            let mut recs = Vec::new();
            let st = decode(&full[..cut], 0, &mut recs);
            assert!(recs.is_empty(), "cut at {cut}");
            assert_eq!(st.consumed, 0);
            // A cut between packets leaves an unfinished record; inside one, a truncated packet.
            assert!(st.truncated == 1 || st.unfinished > 0, "cut at {cut}: {st:?}");
        }
        let mut recs = Vec::new();
        let mut two = dram_load();
        two.extend(&dram_load()[..5]);
        let st = decode(&two, 0, &mut recs);
        assert_eq!((st.records, st.truncated, st.consumed), (1, 1, dram_load().len()));
    }

    /// perf's conversion (`tsc_to_perf_time`) with a 25 MHz generic timer (40 ns a tick, as on
    /// Ampere Altra): mult 40 << 24, shift 24, checked against 40 ns a tick past the shift's
    /// range; with `cap_user_time_short` a count that wrapped the counter's width converts as
    /// the count past the wrap.
    #[test]
    fn timer_counts_convert_to_perf_time() {
        let c = TimeConv { time_zero: 1_000, time_mult: 40 << 24, time_shift: 24, ..TimeConv::default() };
        assert_eq!(c.to_perf_ns(0), 1_000);
        assert_eq!(c.to_perf_ns(1_000_000), 1_000 + 40_000_000);
        let big = 3 * (1 << 24) + 5;
        assert_eq!(c.to_perf_ns(big), 1_000 + 40 * big);
        let width = (1u64 << 56) - 1;
        let short = TimeConv { time_cycles: (1 << 56) - 10, time_mask: width, ..c };
        assert_eq!(short.to_perf_ns(5), c.to_perf_ns((1 << 56) + 5), "5 ticks after the wrap");
        assert_eq!(short.to_perf_ns((1 << 56) - 3), c.to_perf_ns((1 << 56) - 3));
    }

    /// A `struct perf_event_mmap_page` laid out from `include/uapi/linux/perf_event.h`, not from
    /// [`mmap_page`]: u32 version, compat_version, lock (8), index; s64 offset (16); u64
    /// time_enabled, time_running; u64 capabilities (40); u16 pmc_width (48), time_shift (50);
    /// u32 time_mult (52); u64 time_offset (56), time_zero (64); u32 size, __reserved_1 (72);
    /// u64 time_cycles (80), time_mask (88). Capabilities: bit 4 cap_user_time_zero, bit 5
    /// cap_user_time_short.
    fn user_page(lock: u32, caps: u64, mult: u32) -> Vec<u8> {
        let mut p = vec![0u8; 1024];
        let mut put = |at: usize, bytes: &[u8]| p[at..at + bytes.len()].copy_from_slice(bytes);
        put(8, &lock.to_ne_bytes());
        put(40, &caps.to_ne_bytes());
        put(50, &24u16.to_ne_bytes());
        put(52, &mult.to_ne_bytes());
        put(64, &1_000u64.to_ne_bytes());
        put(80, &77u64.to_ne_bytes());
        put(88, &((1u64 << 56) - 1).to_ne_bytes());
        p
    }

    fn field(p: &[u8], at: usize, len: usize) -> u64 {
        let mut b = [0u8; 8];
        b[..len].copy_from_slice(&p[at..at + len]);
        u64::from_ne_bytes(b)
    }

    /// The page is taken only between two writes: `perf_event_update_userpage` increments `lock`
    /// before and after writing it, so an odd lock is a write under way whose fields may be torn
    /// (perf reads them only when `pc->lock == seq && !(seq & 1)`, `tools/perf/util/tsc.c`
    /// `perf_read_tsc_conversion`); a lock that changes between the two reads means read again.
    #[test]
    fn the_mmap_page_is_read_only_between_two_kernel_writes() {
        let settled = user_page(4, 1 << 4 | 1 << 5, 40 << 24);
        let c = TimeConv::read(|at, len| field(&settled, at, len)).expect("a settled page with time_zero");
        assert_eq!(
            c,
            TimeConv {
                time_zero: 1_000,
                time_mult: 40 << 24,
                time_shift: 24,
                time_cycles: 77,
                time_mask: (1 << 56) - 1
            }
        );
        let no_short = user_page(4, 1 << 4, 40 << 24);
        let c = TimeConv::read(|at, len| field(&no_short, at, len)).unwrap();
        assert_eq!((c.time_cycles, c.time_mask), (0, 0), "time_cycles/time_mask only with cap_user_time_short");
        let no_zero = user_page(4, 1 << 3, 40 << 24);
        assert_eq!(TimeConv::read(|at, len| field(&no_zero, at, len)), None, "no cap_user_time_zero");
        // A write under way, frozen: the lock reads odd both times.
        let writing = user_page(5, 1 << 4, 40 << 24);
        assert_eq!(TimeConv::read(|at, len| field(&writing, at, len)), None, "an odd lock is a page being written");
        // A write that ends between the two reads of the lock: the first pass reads the old
        // time_mult under lock 2, the lock then reads 4; the second pass reads the new one.
        let before = user_page(2, 1 << 4, 11);
        let after = user_page(4, 1 << 4, 22);
        let lock_reads = std::cell::Cell::new(0);
        let c = TimeConv::read(|at, len| {
            let n = lock_reads.get();
            if at == 8 {
                lock_reads.set(n + 1);
            }
            field(if n == 0 { &before } else { &after }, at, len)
        })
        .unwrap();
        assert_eq!(c.time_mult, 22);
        assert_eq!(lock_reads.get(), 4, "two passes of two lock reads each");
    }

    /// Builds a PERF_RECORD_SWITCH_CPU_WIDE (type 15): header (type u32, misc u16, size u16 40),
    /// next_prev pid/tid, then the sample_id of TID|TIME|CPU: pid/tid, time, cpu/res.
    fn switch(out: bool, next_prev: (u32, u32), me: (u32, u32), time: u64) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&PERF_RECORD_SWITCH_CPU_WIDE.to_ne_bytes());
        r.extend_from_slice(&(if out { PERF_RECORD_MISC_SWITCH_OUT } else { 0 }).to_ne_bytes());
        r.extend_from_slice(&40u16.to_ne_bytes());
        for v in [next_prev.0, next_prev.1, me.0, me.1] {
            r.extend_from_slice(&v.to_ne_bytes());
        }
        r.extend_from_slice(&time.to_ne_bytes());
        r.extend_from_slice(&[0; 8]);
        r
    }

    /// The running thread follows the switch records: a switch-out names the next thread, a
    /// switch-in the arriving one (its sample_id); other records are skipped, a record cut off at
    /// the end stops the walk; before the first switch, and while idle, nothing runs; after a
    /// drain only the current thread is kept.
    #[test]
    fn context_switches_say_which_thread_ran_when() {
        let mut buf = switch(true, (7, 70), (5, 50), 100);
        buf.extend([11, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0]); // a 16-byte PERF_RECORD_AUX
        buf.extend(switch(false, (7, 70), (9, 90), 200));
        buf.extend(switch(true, (0, 0), (9, 90), 300));
        buf.extend(switch(false, (0, 0), (3, 30), 400));
        buf.extend(&switch(true, (1, 1), (3, 30), 500)[..30]);
        let mut line = Timeline::default();
        assert_eq!(read_switches(&buf, &mut line), 4);
        assert_eq!(line.running_at(50), None, "before the first switch");
        assert_eq!(line.running_at(100), Some((7, 70)));
        assert_eq!(line.running_at(199), Some((7, 70)));
        assert_eq!(line.running_at(250), Some((9, 90)));
        assert_eq!(line.running_at(350), None, "idle");
        assert_eq!(line.running_at(10_000), Some((3, 30)));
        line.keep_from(u64::MAX);
        assert_eq!((line.running_at(399), line.running_at(401)), (None, Some((3, 30))));
        // A drain whose ring lost records forgets the timeline, its own switches too.
        follow_switches(&mut line, &switch(true, (4, 40), (3, 30), 600), 2);
        assert_eq!(line.running_at(10_000), None);
        follow_switches(&mut line, &switch(true, (4, 40), (3, 30), 600), 0);
        assert_eq!(line.running_at(10_000), Some((4, 40)));
        // Out of order pushes are kept in time order.
        let mut line = Timeline::default();
        line.push(20, 2, 20);
        line.push(10, 1, 10);
        assert_eq!((line.running_at(15), line.running_at(25)), (Some((1, 10)), Some((2, 20))));
    }

    mod prop {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            /// Any bytes decode into records or stop cleanly: no panic, no read past the buffer,
            /// the consumed length within it, every record counted.
            #[test]
            fn any_bytes_decode_or_stop_cleanly(bytes in proptest::collection::vec(any::<u8>(), 0..400), base in 0usize..64) {
                let mut recs = Vec::new();
                let st = decode(&bytes, base, &mut recs);
                prop_assert!(st.consumed <= bytes.len());
                prop_assert_eq!(st.records as usize, recs.len());
                let mut out = Vec::new();
                let s = decode_samples(&bytes, base, 0, &mut CpuEvents::default(), &mut out);
                prop_assert_eq!(out.len() as u64 + s.dropped, s.decode.records);
            }
        }
    }
}
