//! AMD IBS op samples decoded from their `PERF_SAMPLE_RAW` registers.
//!
//! # Problem
//!
//! An IBS op sample is the hardware's record of one tagged micro-op: seven MSRs from
//! `MSR_AMD64_IBSOPCTL` (0xc0011033) on, among them the op's instruction address (IbsOpRip), what
//! it was (IbsOpData3: load, store, data-cache miss, L2 miss, which addresses are valid), where its
//! data came from (IbsOpData2) and the data's linear and physical address (IbsDcLinAd,
//! IbsDcPhysAd). Linux turns those into the generic `ADDR`, `DATA_SRC`, `WEIGHT` and `PHYS_ADDR`
//! fields only from 6.1 (`arch/x86/events/amd/ibs.c` `perf_ibs_parse_ld_st_data`); before, an IBS
//! op sample carries the registers in `PERF_SAMPLE_RAW` alone and writes `addr` 0 and `data_src`
//! `PERF_MEM_NA` (`include/linux/perf_event.h` `perf_sample_data_init`, 5.10). Debian 11 (5.10),
//! Ubuntu 22.04 (5.15) and RHEL 9 (5.14) are such kernels, and a distribution may carry the 6.1
//! decoding back into an older version number, so the version says nothing reliable.
//!
//! # Approach
//!
//! The IBS op event always asks for `PERF_SAMPLE_RAW` too ([`super::IBS_OP_SAMPLE_TYPE`]), and
//! [`super::parse_sample`] completes each sample from its registers where the kernel left a field
//! empty: the data address from IbsDcLinAd when the op is a load or store and IbsDcLinAddrValid is
//! set, the physical one likewise, the data source synthesised from IbsOpData3/IbsOpData2 the way
//! the 6.1 kernel does ([`IbsOpRegs::data_src`]). A kernel that filled the fields keeps its values:
//! one decision rule, [`super::is_memory_access`], serves both. The registers also say whether the
//! op ran in the kernel (IbsOpRip in the upper half), which no kernel reports otherwise for IBS (it
//! has no privilege filter before the 6.14 software one): such samples are dropped on every kernel.
//!
//! ```text
//!   PERF_SAMPLE_RAW field in the record (after PERIOD, before WEIGHT):
//!   u32 size | u32 caps | IbsOpCtl | IbsOpRip | IbsOpData | IbsOpData2 | IbsOpData3 |
//!              IbsDcLinAd | IbsDcPhysAd | [IbsBrTarget] | [IbsOpData4] | pad to 8 bytes
//!   size counts from caps on; 4 + size is a multiple of 8 (kernel/events/core.c
//!   perf_prepare_sample: round_up(sum + sizeof(u32), sizeof(u64))).
//! ```
//!
//! Facts and sources: `arch/x86/events/amd/ibs.c` `perf_ibs_handle_irq` (5.10 and current): the
//! payload is `ibs_data.data`, the u32 `caps` (`ibs_caps`, CPUID Fn8000_001B_EAX) then the u64 MSRs
//! read from `MSR_AMD64_IBSOPCTL` on; with `PERF_SAMPLE_RAW` it reads `offset_max` =
//! `MSR_AMD64_IBSOP_REG_COUNT` = 7 of them (`arch/x86/include/asm/msr-index.h`: 0xc0011033 to
//! 0xc0011039), then IbsBrTarget when `caps` has `IBS_CAPS_BRNTRGT` and IbsOpData4 with
//! `IBS_CAPS_OPDATA4`; a kernel with the 6.1 decoding still fills RAW when it is asked beside ADDR
//! and DATA_SRC (current source: `perf_sample_save_raw_data`, then `perf_ibs_parse_ld_st_data` on
//! the same registers). Neither refuses a `sample_type` bit numapilot asks for on IBS op: 5.10's
//! `perf_ibs_init` checks none, the current one refuses only a branch stack. The register bits are
//! `arch/x86/include/asm/amd-ibs.h` (unions `ibs_op_data`, `ibs_op_data2`, `ibs_op_data3`; the
//! IBS_DATA_SRC_* values), the capability bits `arch/x86/include/asm/perf_event.h` (`IBS_CAPS_*`),
//! user or kernel `arch/x86/events/perf_event.h` `kernel_ip` (on x86-64 an address with bit 63
//! set), which `set_linear_ip` applies to IbsOpRip to decide the sample's mode (and, from 6.14, the
//! `swfilt` filter through `perf_exclude_event`).
//!
//! # Limits
//!
//! The RAW layout is not an ABI (`include/uapi/linux/perf_event.h`: "PERF_SAMPLE_RAW contents are
//! not an ABI"); for IBS op it is the same in the 5.10 and the current source. A payload shorter
//! than the seven registers, or without IbsOpVal in IbsOpCtl (the kernel writes only valid
//! samples), is not decoded and its sample is counted as malformed
//! ([`super::DrainStats::malformed`]). The CPU family is not in the payload, so the Zen 3 erratum
//! #1293 correction the 6.1 kernel applies (family 19h models 0-0Fh: IbsOpData3 L2Miss and
//! IbsOpData2 invalid when SwPf or DcMissNoMabAlloc is set) is not: such an op that reports no L2
//! miss is taken for an L2 hit and dropped, losing a sample, never adding one. An op whose RIP the
//! hardware marks invalid (IbsOpData bit 38, with `IBS_CAPS_RIPINVALIDCHK`) cannot be told user from
//! kernel and is dropped.

/// `IBS_CAPS_RIPINVALIDCHK` (`arch/x86/include/asm/perf_event.h`, CPUID Fn8000_001B_EAX bit 7):
/// IbsOpData's RipInvalid bit is implemented.
pub const CAPS_RIPINVALIDCHK: u32 = 1 << 7;
/// `IBS_CAPS_ZEN4` (same file, bit 11): IbsOpData2 has the 5-bit extended data source.
pub const CAPS_ZEN4: u32 = 1 << 11;

/// IbsOpCtl (MSR 0xc0011033) bit 18, `op_val` (`union ibs_op_ctl`; `IBS_OP_VAL`): the sample is
/// valid. `perf_ibs_handle_irq` writes no sample without it.
pub const OP_VAL: u64 = 1 << 18;
/// IbsOpData (MSR 0xc0011035) bit 38, `op_rip_invalid` (`union ibs_op_data`; `IBS_RIP_INVALID`).
pub const OP_RIP_INVALID: u64 = 1 << 38;

/// IbsOpData2 (MSR 0xc0011036) bits 0-2, `data_src_lo` (`data_src` in older headers).
pub const DATA_SRC_LO_MASK: u64 = 0x7;
/// IbsOpData2 bit 4, `rmt_node`: the data came from another node.
pub const RMT_NODE: u64 = 1 << 4;
/// IbsOpData2 bits 6-7, `data_src_hi` (Zen 4, `IBS_CAPS_ZEN4`).
pub const DATA_SRC_HI_SHIFT: u32 = 6;

/// IbsOpData3 (MSR 0xc0011037) bit 0, `ld_op`.
pub const LD_OP: u64 = 1 << 0;
/// IbsOpData3 bit 1, `st_op`.
pub const ST_OP: u64 = 1 << 1;
/// IbsOpData3 bit 7, `dc_miss`: the L1 data cache missed.
pub const DC_MISS: u64 = 1 << 7;
/// IbsOpData3 bit 14, `dc_uc_mem_acc`: uncacheable memory.
pub const DC_UC_MEM_ACC: u64 = 1 << 14;
/// IbsOpData3 bit 16, `dc_miss_no_mab_alloc`: a miss that found its line already in flight.
pub const DC_MISS_NO_MAB_ALLOC: u64 = 1 << 16;
/// IbsOpData3 bit 17, `dc_lin_addr_valid`: IbsDcLinAd holds the data's linear address.
pub const DC_LIN_ADDR_VALID: u64 = 1 << 17;
/// IbsOpData3 bit 18, `dc_phy_addr_valid`: IbsDcPhysAd holds its physical address.
pub const DC_PHY_ADDR_VALID: u64 = 1 << 18;
/// IbsOpData3 bit 20, `l2_miss`: the L2 missed too.
pub const L2_MISS: u64 = 1 << 20;
/// IbsOpData3 bits 32-47, `dc_miss_lat`: cycles the data-cache miss took.
pub const DC_MISS_LAT_SHIFT: u32 = 32;

/// IbsOpData2 data sources before Zen 4 (`amd-ibs.h` `IBS_DATA_SRC_*`).
const SRC_LOC_CACHE: u64 = 2;
const SRC_DRAM: u64 = 3;
const SRC_REM_CACHE: u64 = 4;
const SRC_IO: u64 = 7;
/// The Zen 4 extended ones (`IBS_DATA_SRC_EXT_*`).
const EXT_LOC_CACHE: u64 = 1;
const EXT_NEAR_CCX_CACHE: u64 = 2;
const EXT_DRAM: u64 = 3;
const EXT_FAR_CCX_CACHE: u64 = 5;
const EXT_PMEM: u64 = 6;
const EXT_IO: u64 = 7;
const EXT_EXT_MEM: u64 = 8;

/// The IBS op MSRs `perf_ibs_handle_irq` reads for `PERF_SAMPLE_RAW`: IbsOpCtl to IbsDcPhysAd.
pub const REGS: usize = 7;
/// Bytes of the RAW field with those registers: the u32 `size`, the u32 `caps`, seven u64; what
/// every kernel writes for IBS op, 8 or 16 more with IbsBrTarget/IbsOpData4 (caps-dependent).
pub const RAW_FIELD_BYTES: usize = 4 + 4 + 8 * REGS;

/// One IBS op sample's registers, as the RAW payload carries them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IbsOpRegs {
    /// `ibs_caps`: CPUID Fn8000_001B_EAX, bit 0 set when IBS is there.
    pub caps: u32,
    /// IbsOpCtl (0xc0011033).
    pub op_ctl: u64,
    /// IbsOpRip (0xc0011034): the op's linear instruction address.
    pub op_rip: u64,
    /// IbsOpData (0xc0011035).
    pub op_data: u64,
    /// IbsOpData2 (0xc0011036): the data source of a load that missed the L2.
    pub op_data2: u64,
    /// IbsOpData3 (0xc0011037): the op's kind and its data cache outcome.
    pub op_data3: u64,
    /// IbsDcLinAd (0xc0011038).
    pub dc_lin_ad: u64,
    /// IbsDcPhysAd (0xc0011039).
    pub dc_phys_ad: u64,
}

impl IbsOpRegs {
    /// The registers of a RAW payload (`data[size]`, after the u32 size): `None` when it is shorter
    /// than `caps` and the seven registers, or its IbsOpCtl has no IbsOpVal (not an IBS op sample
    /// as the kernel writes them). Bytes past the seven registers (IbsBrTarget, IbsOpData4,
    /// padding) are not read.
    pub fn from_payload(p: &[u8]) -> Option<IbsOpRegs> {
        if p.len() < RAW_FIELD_BYTES - 4 {
            return None;
        }
        let reg = |i: usize| u64::from_ne_bytes(p[4 + 8 * i..12 + 8 * i].try_into().expect("8 bytes"));
        let r = IbsOpRegs {
            caps: u32::from_ne_bytes(p[0..4].try_into().expect("4 bytes")),
            op_ctl: reg(0),
            op_rip: reg(1),
            op_data: reg(2),
            op_data2: reg(3),
            op_data3: reg(4),
            dc_lin_ad: reg(5),
            dc_phys_ad: reg(6),
        };
        (r.op_ctl & OP_VAL != 0).then_some(r)
    }

    /// `PERF_MEM_OP_LOAD`, `PERF_MEM_OP_STORE`, or `PERF_MEM_OP_NA` for every other op (a load
    /// first when both bits are set, as `perf_ibs_get_mem_op`).
    pub fn mem_op(&self) -> u64 {
        use super::data_src as d;
        if self.op_data3 & LD_OP != 0 {
            d::OP_LOAD
        } else if self.op_data3 & ST_OP != 0 {
            d::OP_STORE
        } else {
            d::OP_NA
        }
    }

    fn is_load_or_store(&self) -> bool {
        self.op_data3 & (LD_OP | ST_OP) != 0
    }

    /// Whether the op ran in user mode: its RIP is valid and in the lower half of the address
    /// space (`kernel_ip`: bit 63 set is kernel on x86-64). An op whose RIP the hardware marks
    /// invalid is not called user.
    pub fn user_mode(&self) -> bool {
        let rip_invalid = self.caps & CAPS_RIPINVALIDCHK != 0 && self.op_data & OP_RIP_INVALID != 0;
        !rip_invalid && self.op_rip >> 63 == 0
    }

    /// The data's linear address: IbsDcLinAd, for a load or store with IbsDcLinAddrValid (what
    /// 6.1+ puts in `PERF_SAMPLE_ADDR`).
    pub fn data_addr(&self) -> Option<u64> {
        (self.is_load_or_store() && self.op_data3 & DC_LIN_ADDR_VALID != 0).then_some(self.dc_lin_ad)
    }

    /// The data's physical address: IbsDcPhysAd, for a load or store with IbsDcPhyAddrValid.
    pub fn phys_addr(&self) -> Option<u64> {
        (self.is_load_or_store() && self.op_data3 & DC_PHY_ADDR_VALID != 0).then_some(self.dc_phys_ad)
    }

    /// The data-cache miss latency of a load that missed the L1, cycles (what 6.1+ puts in
    /// `PERF_SAMPLE_WEIGHT`).
    pub fn weight(&self) -> Option<u64> {
        (self.op_data3 & LD_OP != 0 && self.op_data3 & DC_MISS != 0)
            .then_some((self.op_data3 >> DC_MISS_LAT_SHIFT) & 0xffff)
    }

    /// The IbsOpData2 data source: 5 bits on Zen 4 (`data_src_hi << 3 | data_src_lo`), else 3
    /// (`perf_ibs_data_src`).
    fn source(&self) -> u64 {
        let lo = self.op_data2 & DATA_SRC_LO_MASK;
        if self.caps & CAPS_ZEN4 != 0 {
            ((self.op_data2 >> DATA_SRC_HI_SHIFT) & 0x3) << 3 | lo
        } else {
            lo
        }
    }

    /// `union perf_mem_data_src` for this op, as `perf_ibs_parse_ld_st_data` (6.1+) builds it:
    /// `PERF_MEM_NA` for an op that is no load or store; else the op, and the level
    /// (`perf_ibs_get_mem_lvl`): uncached memory; the L1 when the data cache did not miss; the L2
    /// when it did not either; for a load beyond them the IbsOpData2 source (L3 or another CCX's
    /// cache, local or remote DRAM, PMEM, CXL, I/O; `g_data_src`/`g_zen4_data_src`, remote and one
    /// hop with RmtNode); else a fill buffer hit (DcMissNoMabAlloc) or not available. Snoop,
    /// lock and TLB are left not available: nothing here reads them. Without the Zen 3 erratum
    /// #1293 correction (module essay).
    pub fn data_src(&self) -> u64 {
        use super::data_src as d;
        let op = self.mem_op();
        if op == d::OP_NA {
            return d::MEM_NA;
        }
        let rest = d::SNOOP_NA << d::SNOOP_SHIFT | d::LOCK_NA << d::LOCK_SHIFT | d::TLB_NA << d::TLB_SHIFT;
        op | rest | self.level(op)
    }

    /// The `mem_lvl`, `mem_lvl_num`, `mem_remote` and `mem_hops` bits of [`IbsOpRegs::data_src`].
    fn level(&self, op: u64) -> u64 {
        use super::data_src as d;
        let l = |lvl: u64| (lvl | d::LVL_HIT) << d::LVL_SHIFT;
        let ln = |num: u64| num << d::LVLNUM_SHIFT;
        let rem = d::REMOTE << d::REMOTE_SHIFT;
        let hops = |h: u64| h << d::HOPS_SHIFT;
        let d3 = self.op_data3;
        let src = self.source();
        let zen4 = self.caps & CAPS_ZEN4 != 0;
        if d3 & DC_UC_MEM_ACC != 0 && src != EXT_IO {
            // Current kernels write LN(UNC), a `mem_lvl_num` newer than the uapi header this
            // module follows; the level bit says uncached all the same.
            return l(d::LVL_UNC) | ln(d::LVLNUM_NA);
        }
        if d3 & DC_MISS == 0 {
            return l(d::LVL_L1) | ln(d::LVLNUM_L1);
        }
        if d3 & L2_MISS == 0 {
            return l(d::LVL_L2) | ln(d::LVLNUM_L2);
        }
        if op == d::OP_LOAD {
            let remote = self.op_data2 & RMT_NODE != 0;
            let remote_ram = l(d::LVL_REM_RAM1) | ln(d::LVLNUM_RAM) | rem | hops(d::HOPS_1);
            let found = if zen4 {
                match src {
                    EXT_LOC_CACHE => l(d::LVL_L3) | ln(d::LVLNUM_L3),
                    EXT_NEAR_CCX_CACHE => l(d::LVL_REM_CCE1) | ln(d::LVLNUM_ANY_CACHE) | rem | hops(d::HOPS_0),
                    EXT_DRAM if remote => remote_ram,
                    EXT_DRAM => l(d::LVL_LOC_RAM) | ln(d::LVLNUM_RAM),
                    EXT_FAR_CCX_CACHE => l(d::LVL_REM_CCE2) | ln(d::LVLNUM_ANY_CACHE) | rem | hops(d::HOPS_1),
                    EXT_PMEM => ln(d::LVLNUM_PMEM) | if remote { rem | hops(d::HOPS_1) } else { 0 },
                    EXT_IO => l(d::LVL_IO) | ln(d::LVLNUM_IO),
                    EXT_EXT_MEM => ln(d::LVLNUM_CXL) | if remote { rem | hops(d::HOPS_1) } else { 0 },
                    _ => 0,
                }
            } else {
                match src {
                    SRC_LOC_CACHE => l(d::LVL_L3) | l(d::LVL_REM_CCE1) | ln(d::LVLNUM_ANY_CACHE) | hops(d::HOPS_0),
                    SRC_DRAM if remote => remote_ram,
                    SRC_DRAM => l(d::LVL_LOC_RAM) | ln(d::LVLNUM_RAM),
                    SRC_REM_CACHE => l(d::LVL_REM_CCE2) | ln(d::LVLNUM_ANY_CACHE) | rem | hops(d::HOPS_1),
                    SRC_IO => l(d::LVL_IO) | ln(d::LVLNUM_IO),
                    _ => 0,
                }
            };
            if found != 0 {
                return found;
            }
        }
        if d3 & DC_MISS_NO_MAB_ALLOC != 0 {
            return l(d::LVL_LFB) | ln(d::LVLNUM_LFB);
        }
        d::LVL_NA << d::LVL_SHIFT | ln(d::LVLNUM_NA)
    }
}

#[cfg(test)]
mod tests {
    use super::super::data_src as d;
    use super::*;

    /// A Zen 4 capability word as a dmesg capture logs it ("perf: AMD IBS detected (0x00000bff)"):
    /// bits 0-9 (IBS there, fetch and op sampling, RdWrOpCnt, OpCnt, BrnTrgt, OpCntExt,
    /// RipInvalidChk, OpBrnFuse, FetchCtlExtd) and 11, Zen4; the decode reads bits 7 and 11.
    const GENOA_CAPS: u32 = 0x3ff | CAPS_ZEN4;

    fn load(d3: u64, d2: u64) -> IbsOpRegs {
        IbsOpRegs {
            caps: GENOA_CAPS,
            op_ctl: OP_VAL | 1 << 17 | 1 << 19,
            op_rip: 0x5555_5555_1234,
            op_data: 0,
            op_data2: d2,
            op_data3: d3,
            dc_lin_ad: 0x7f00_0000_3000,
            dc_phys_ad: 0x4_0000_3000,
        }
    }

    /// What 6.1+ writes for a load local DRAM served on Zen 4: `L(LOC_RAM) | LN(RAM)` with the op,
    /// snoop, lock and TLB not available; remote: `L(REM_RAM1) | LN(RAM) | REM | HOPS(1)`.
    #[test]
    fn data_sources_are_the_kernels_encodings() {
        let miss = LD_OP | DC_MISS | L2_MISS | DC_LIN_ADDR_VALID;
        let na_rest = 0x01 << 19 | 0x01 << 24 | 0x01 << 26;
        assert_eq!(load(miss, EXT_DRAM).data_src(), 0x02 | (0x80 | 0x02) << 5 | 0x0d << 33 | na_rest);
        assert_eq!(
            load(miss, EXT_DRAM | RMT_NODE).data_src(),
            0x02 | (0x100 | 0x02) << 5 | 0x0d << 33 | 1 << 37 | 0x02 << 43 | na_rest
        );
        assert_eq!((load(miss, EXT_FAR_CCX_CACHE).data_src() >> 5) & 0x3fff, 0x800 | 0x02, "far CCX cache");
        // Source 8 (extension memory, CXL) needs the high bits, which only Zen 4 has: before,
        // the same IbsOpData2 reads as source 0, no valid status, so the level is not available.
        assert_eq!(load(miss, 1 << 6).data_src() >> 33 & 0xf, d::LVLNUM_CXL);
        let old = IbsOpRegs { caps: 0x3ff, ..load(miss, 1 << 6) };
        assert_eq!((old.data_src() >> 5) & 0x3fff, d::LVL_NA);
        assert_eq!(old.data_src() >> 33 & 0xf, d::LVLNUM_NA);
        assert_eq!(load(LD_OP, 0).data_src() >> 33 & 0xf, d::LVLNUM_L1);
        assert_eq!(load(LD_OP | DC_MISS, EXT_DRAM).data_src() >> 33 & 0xf, d::LVLNUM_L2);
        assert_eq!(load(0, 0).data_src(), d::MEM_NA);
        let store = load(ST_OP | DC_MISS | L2_MISS, 0);
        assert_eq!(store.data_src() & 0x1f, d::OP_STORE);
        assert_eq!(store.data_src() >> 33 & 0xf, d::LVLNUM_NA, "a store's source is not given");
    }

    #[test]
    fn addresses_only_when_valid_and_user_mode_by_rip() {
        let r = load(LD_OP | DC_MISS | L2_MISS | DC_LIN_ADDR_VALID, EXT_DRAM);
        assert_eq!((r.data_addr(), r.phys_addr()), (Some(0x7f00_0000_3000), None));
        assert_eq!(load(LD_OP | DC_PHY_ADDR_VALID, 0).phys_addr(), Some(0x4_0000_3000));
        assert_eq!(load(DC_LIN_ADDR_VALID, 0).data_addr(), None, "no load or store");
        assert!(r.user_mode());
        assert!(!IbsOpRegs { op_rip: 0xffff_ffff_8100_0000, ..r }.user_mode());
        assert!(!IbsOpRegs { op_data: OP_RIP_INVALID, ..r }.user_mode());
        assert!(IbsOpRegs { op_data: OP_RIP_INVALID, caps: 0x7f, ..r }.user_mode(), "bit 38 unimplemented");
        assert_eq!(IbsOpRegs { op_data3: r.op_data3 | 250 << 32, ..r }.weight(), Some(250));
    }
}
