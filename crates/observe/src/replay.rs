//! Importing `perf script` text: memory-access samples recorded elsewhere (`perf mem record` on a
//! machine with PEBS, IBS or SPE), turned into [`AccessSample`]s window by window.
//!
//! # Problem
//!
//! The development machines have no precise-sampling PMU, but a recording from one that has can be
//! printed as text (`perf script -F pid,tid,cpu,time,addr,data_src,weight,phys_addr`) and fed to the
//! same model the live daemon drives.
//!
//! # Approach
//!
//! ```text
//!    2307/2310  [001] 19021.199548:  7feea694f000  1e05080021 |OP N/A|LVL N/A|...|BLK  N/A  42  1f3e6000
//!    └pid/tid┘  └cpu┘ └─ s.us ──┘    └── addr ──┘  └data_src┘ └──── decoded, skipped ────┘ └w┘ └phys─┘
//!   parse_line ──► ScriptRecord { pid, tid, cpu, time_ns, addr, data_src, weight, phys }
//!   window_ranges(records, window) ──► [start, end) slices of time-sorted records
//!   aggregate_records(slice, node_of) ──► AccessSample per (pid, tid, page)
//! ```
//!
//! Format (tools/perf `builtin-script.c` `process_event`, checked against perf 6.1 on this host and
//! public `perf mem` output of perf 5.x-6.x): anything before the `pid/tid` token (a `comm` if asked
//! for) is ignored; the CPU is `[NNN]`; the time is `seconds.fraction:` (6 digits by default, 9 with
//! `--ns`); an event name token ending in `:` may follow; the data address and the raw data source
//! are hex without `0x`; the decoded data source (`|OP ..|LVL ..|SNP ..|TLB ..|LCK ..|BLK ..`, older
//! perfs end at LCK) holds blanks and is skipped (the raw bits are decoded here instead, see
//! [`Locality`]); then the weight (decimal) and the physical address (hex), when asked for. perf
//! refuses `-F weight` for events recorded without it (software events), so which trailing columns
//! exist is told by [`ScriptFields`].
//!
//! # Units
//!
//! Times in ns of the recording's clock (perf's, not this host's), addresses in bytes, counts in samples.
//!
//! # Limits
//!
//! Lines of other record types (`perf script` prints only samples with `-F` like this) that do not
//! have a `pid/tid` token are errors, not skipped: a replay that silently drops lines would learn from
//! less than it says.

use crate::sample::AccessSample;
use crate::signal_error::{dec, hex, LineError, SignalFile};

/// Which optional columns the text has (the `-F` list it was printed with). pid, tid, time and addr
/// are required.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScriptFields {
    /// `cpu`.
    pub cpu: bool,
    /// `data_src`.
    pub data_src: bool,
    /// `weight`.
    pub weight: bool,
    /// `phys_addr`.
    pub phys_addr: bool,
}

impl Default for ScriptFields {
    /// The documented list: `pid,tid,cpu,time,addr,data_src,weight,phys_addr`.
    fn default() -> Self {
        ScriptFields { cpu: true, data_src: true, weight: true, phys_addr: true }
    }
}

impl ScriptFields {
    /// Parses a `-F` list (`pid,tid,cpu,time,addr,data_src,phys_addr`); fields other than these are
    /// refused (their columns would be misread), and pid, tid, time, addr are required.
    pub fn parse(list: &str) -> Result<ScriptFields, String> {
        let mut f = ScriptFields { cpu: false, data_src: false, weight: false, phys_addr: false };
        let mut need = [false; 4];
        let mut seen = std::collections::BTreeSet::new();
        for name in list.split(',').map(str::trim) {
            // A repeat would be read as a column of its own, shifting every column after it, and
            // the error would then blame the text's first line instead of the list.
            if !seen.insert(name) {
                return Err(format!("field {name:?} given twice"));
            }
            match name {
                "pid" => need[0] = true,
                "tid" => need[1] = true,
                "time" => need[2] = true,
                "addr" => need[3] = true,
                "cpu" => f.cpu = true,
                "data_src" => f.data_src = true,
                "weight" => f.weight = true,
                "phys_addr" => f.phys_addr = true,
                "comm" | "event" => {}
                other => return Err(format!("field {other:?} is not one replay reads")),
            }
        }
        for (i, name) in ["pid", "tid", "time", "addr"].iter().enumerate() {
            if !need[i] {
                return Err(format!("field {name} is required"));
            }
        }
        Ok(f)
    }
}

/// One sample line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScriptRecord {
    /// 1-based line number in the text.
    pub line: usize,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// CPU, when printed.
    pub cpu: Option<u32>,
    /// Time, ns.
    pub time_ns: u64,
    /// Data address.
    pub addr: u64,
    /// Raw data source bits, when printed.
    pub data_src: Option<u64>,
    /// Weight, when printed.
    pub weight: Option<u64>,
    /// Physical address, when printed (0: perf did not know it).
    pub phys_addr: Option<u64>,
}

/// What the data source says about where the data came from (`union perf_mem_data_src`,
/// `include/uapi/linux/perf_event.h`: `mem_lvl` bits 5-18, `mem_lvl_num` bits 33-36, `mem_remote`
/// bit 37).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Locality {
    /// Local DRAM (`LVL_LOC_RAM`, or `LVLNUM_RAM` without the remote bit).
    LocalRam,
    /// Another node's DRAM or cache (`LVL_REM_RAM1/2`, `LVL_REM_CCE1/2`, or the remote bit).
    Remote,
    /// A hit in this CPU's caches (L1, LFB, L2, L3): the data's home node is not told.
    Cache,
    /// Not available (software events, `LVL_NA`).
    Unknown,
}

const LVL_L1: u64 = 0x08;
const LVL_LFB: u64 = 0x10;
const LVL_L2: u64 = 0x20;
const LVL_L3: u64 = 0x40;
const LVL_LOC_RAM: u64 = 0x80;
const LVL_REMOTE: u64 = 0x100 | 0x200 | 0x400 | 0x800;
const LVLNUM_RAM: u64 = 0x0d;

/// Decodes the locality of a raw data source.
pub fn locality(data_src: u64) -> Locality {
    let lvl = (data_src >> 5) & 0x3fff;
    let lvl_num = (data_src >> 33) & 0xf;
    let remote = (data_src >> 37) & 1 == 1;
    if lvl & LVL_REMOTE != 0 || remote {
        Locality::Remote
    } else if lvl & LVL_LOC_RAM != 0 || lvl_num == LVLNUM_RAM {
        Locality::LocalRam
    } else if lvl & (LVL_L1 | LVL_LFB | LVL_L2 | LVL_L3) != 0 || (1..=4).contains(&lvl_num) || lvl_num == 0xc {
        Locality::Cache
    } else {
        Locality::Unknown
    }
}

fn is_pid_tid(tok: &str) -> Option<(u32, u32)> {
    let (p, t) = tok.split_once('/')?;
    let p = dec(p).filter(|&v| v <= u64::from(u32::MAX))? as u32;
    let t = dec(t).filter(|&v| v <= u64::from(u32::MAX))? as u32;
    Some((p, t))
}

/// Parses `seconds.fraction` into ns.
fn time_ns(tok: &str) -> Option<u64> {
    let (s, f) = tok.split_once('.').unwrap_or((tok, ""));
    let secs = dec(s)?;
    let frac = if f.is_empty() {
        0
    } else {
        if f.len() > 9 {
            return None;
        }
        dec(f)? * 10u64.pow(9 - f.len() as u32)
    };
    secs.checked_mul(1_000_000_000)?.checked_add(frac)
}

/// The token at `*i`, advancing.
fn take<'a>(toks: &[&'a str], i: &mut usize) -> Option<&'a str> {
    let t = toks.get(*i).copied()?;
    *i += 1;
    Some(t)
}

/// Parses one line; `Ok(None)` for a blank line or a `#` comment.
pub fn parse_line(line: &str, n: usize, fields: ScriptFields) -> Result<Option<ScriptRecord>, LineError> {
    let t = line.trim();
    if t.is_empty() || t.starts_with('#') {
        return Ok(None);
    }
    let err = |field: &'static str, why: &str| LineError::new(SignalFile::PerfScript, n, Some(field), line, why);
    let toks: Vec<&str> = t.split_ascii_whitespace().collect();
    let start = toks.iter().position(|x| is_pid_tid(x).is_some()).ok_or_else(|| err("pid/tid", "no PID/TID token"))?;
    let (pid, tid) = is_pid_tid(toks[start]).expect("checked");
    let mut i = start + 1;
    let cpu = if fields.cpu {
        let c = take(&toks, &mut i).ok_or_else(|| err("cpu", "missing"))?;
        let inner = c.strip_prefix('[').and_then(|c| c.strip_suffix(']')).ok_or_else(|| err("cpu", "not [N]"))?;
        Some(dec(inner).filter(|&v| v <= u64::from(u32::MAX)).ok_or_else(|| err("cpu", "bad number"))? as u32)
    } else {
        None
    };
    let tm = take(&toks, &mut i).ok_or_else(|| err("time", "missing"))?;
    let tm = tm.strip_suffix(':').ok_or_else(|| err("time", "no ':' after the time"))?;
    let time_ns = time_ns(tm).ok_or_else(|| err("time", "bad seconds.fraction"))?;
    // An event name (`cpu/mem-loads,ldlat=30/P:`) may follow when it was asked for.
    let mut tok = take(&toks, &mut i).ok_or_else(|| err("addr", "missing"))?;
    while tok.ends_with(':') {
        tok = take(&toks, &mut i).ok_or_else(|| err("addr", "missing"))?;
    }
    let addr = hex(tok).ok_or_else(|| err("addr", "bad hex address"))?;
    let data_src = if fields.data_src {
        let d = hex(take(&toks, &mut i).ok_or_else(|| err("data_src", "missing"))?)
            .ok_or_else(|| err("data_src", "bad hex number"))?;
        // Skip the decoded text: from a token starting with '|' through the value of its last
        // segment (words that are not plain hex numbers: `N/A`, `No`, `Yes`, `Data`, `Addr`, `hit`).
        if toks.get(i).is_some_and(|x| x.starts_with('|')) {
            let rest = &toks[i..];
            let last_bar = rest.iter().rposition(|x| x.contains('|')).expect("the first one has '|'");
            i += last_bar + 1;
            // The last segment may be glued to its bar (`|BLK`) or not; its value words follow.
            while toks.get(i).is_some_and(|x| hex(x).is_none() && dec(x).is_none()) {
                i += 1;
            }
        }
        Some(d)
    } else {
        None
    };
    let weight = if fields.weight {
        Some(
            dec(take(&toks, &mut i).ok_or_else(|| err("weight", "missing"))?)
                .ok_or_else(|| err("weight", "bad decimal number"))?,
        )
    } else {
        None
    };
    let phys_addr = if fields.phys_addr {
        Some(
            hex(take(&toks, &mut i).ok_or_else(|| err("phys_addr", "missing"))?)
                .ok_or_else(|| err("phys_addr", "bad hex address"))?,
        )
    } else {
        None
    };
    if let Some(extra) = toks.get(i) {
        return Err(err("end", &format!("unexpected column {extra:?} (was the -F list different?)")));
    }
    Ok(Some(ScriptRecord { line: n, pid, tid, cpu, time_ns, addr, data_src, weight, phys_addr }))
}

/// Parses a whole text; the first bad line is the error.
pub fn parse_script(text: &str, fields: ScriptFields) -> Result<Vec<ScriptRecord>, LineError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(r) = parse_line(line, i + 1, fields)? {
            out.push(r);
        }
    }
    Ok(out)
}

/// Splits time-sorted records into consecutive windows of `window_ns` from the first record's time:
/// `(window end time, index range)`. Windows with no record are left out. `window_ns` 0 is taken as 1.
pub fn window_ranges(records: &[ScriptRecord], window_ns: u64) -> Vec<(u64, std::ops::Range<usize>)> {
    let w = window_ns.max(1);
    let Some(first) = records.first() else { return Vec::new() };
    let t0 = first.time_ns;
    let mut out: Vec<(u64, std::ops::Range<usize>)> = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let k = (r.time_ns.saturating_sub(t0)) / w;
        let end = t0.saturating_add((k + 1).saturating_mul(w));
        match out.last_mut() {
            Some((e, range)) if *e == end => range.end = i + 1,
            _ => out.push((end, i..i + 1)),
        }
    }
    out
}

/// Aggregates records into one [`AccessSample`] per (pid, tid, page), with each record's node from
/// `node_of` (records it cannot place are counted and left out). Sorted by (pid, tid, addr); the
/// node of an entry is that of its latest record. Returns the samples and the unplaced count.
pub fn aggregate_records(
    records: &[ScriptRecord],
    page_size: u64,
    mut node_of: impl FnMut(&ScriptRecord) -> Option<u32>,
) -> (Vec<AccessSample>, u64) {
    let mut unplaced = 0;
    let placed = records.iter().filter_map(|r| match node_of(r) {
        Some(n) => Some((r.pid, r.tid, r.addr, r.phys_addr.unwrap_or(0), r.time_ns, n)),
        None => {
            unplaced += 1;
            None
        }
    });
    let acc = AccessSample::aggregate(page_size, placed);
    (acc, unplaced)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_as_perf_prints_them() {
        // perf 6.1 on this host (page-faults, no weight).
        let f = ScriptFields { weight: false, ..ScriptFields::default() };
        let l = " 2307/2310  [000] 19021.199548:     7feea694f000      1e05080021 |OP N/A|LVL N/A or N/A|SNP N/A|TLB N/A|LCK N/A|BLK  N/A               0";
        let r = parse_line(l, 7, f).unwrap().unwrap();
        assert_eq!((r.line, r.pid, r.tid, r.cpu), (7, 2307, 2310, Some(0)));
        assert_eq!(r.time_ns, 19_021_199_548_000);
        assert_eq!((r.addr, r.data_src, r.weight, r.phys_addr), (0x7feea694f000, Some(0x1e05080021), None, Some(0)));
        assert_eq!(locality(0x1e05080021), Locality::Unknown);
        // PEBS load on a newer perf: comm, event name, weight, BLK with a value, 9-digit time.
        let l = "  taskset  182628/182630 [003] 247517.778385123:  cpu_core/mem-loads,ldlat=30/P: ffffb33a850078a0     40268100142 |OP LOAD|LVL L1 hit|SNP None|TLB L1 or L2 hit|LCK No|BLK  Addr       33   1f3e6000";
        let r = parse_line(l, 1, ScriptFields::default()).unwrap().unwrap();
        assert_eq!((r.pid, r.tid, r.cpu, r.time_ns), (182628, 182630, Some(3), 247_517_778_385_123));
        assert_eq!((r.addr, r.weight, r.phys_addr), (0xffffb33a850078a0, Some(33), Some(0x1f3e6000)));
        assert_eq!(locality(r.data_src.unwrap()), Locality::Cache);
        // An older perf without BLK.
        let l = "1/1 [0] 1.5: 1000 10268100142 |OP LOAD|LVL L1 hit|SNP None|TLB L1 or L2 hit|LCK No 5 2000";
        let r = parse_line(l, 1, ScriptFields::default()).unwrap().unwrap();
        assert_eq!((r.time_ns, r.weight, r.phys_addr), (1_500_000_000, Some(5), Some(0x2000)));
        assert_eq!(parse_line("   ", 1, ScriptFields::default()).unwrap(), None);
        assert_eq!(parse_line("# perf script header", 1, ScriptFields::default()).unwrap(), None);
    }

    #[test]
    fn data_source_locality() {
        // mem_op LOAD (2) | mem_lvl at bit 5.
        let lvl = |bits: u64| 2 | bits << 5;
        assert_eq!(locality(lvl(0x80 | 0x2)), Locality::LocalRam);
        assert_eq!(locality(lvl(0x100 | 0x2)), Locality::Remote);
        assert_eq!(locality(lvl(0x800)), Locality::Remote);
        assert_eq!(locality(lvl(0x40 | 0x2)), Locality::Cache);
        assert_eq!(locality(1 << 37 | 0xd << 33), Locality::Remote);
        assert_eq!(locality(0xd << 33), Locality::LocalRam);
        assert_eq!(locality(lvl(0x1)), Locality::Unknown);
    }

    #[test]
    fn bad_lines_name_line_and_field() {
        let f = ScriptFields::default();
        let e = parse_line("hello world", 3, f).unwrap_err();
        assert_eq!((e.line, e.field), (3, Some("pid/tid")));
        let e = parse_line("1/1 [x] 1.0: 10 0 5 0", 4, f).unwrap_err();
        assert_eq!(e.field, Some("cpu"));
        let e = parse_line("1/1 [0] 1.0 10 0 5 0", 4, f).unwrap_err();
        assert_eq!(e.field, Some("time"));
        let e = parse_line("1/1 [0] 1.0: 10zz 0 5 0", 4, f).unwrap_err();
        assert_eq!(e.field, Some("addr"));
        let e = parse_line("1/1 [0] 1.0: 10 0 5x 0", 4, f).unwrap_err();
        assert_eq!(e.field, Some("weight"));
        let e = parse_line("1/1 [0] 1.0: 10 0 5", 4, f).unwrap_err();
        assert_eq!(e.field, Some("phys_addr"));
        let e = parse_line("1/1 [0] 1.0: 10 0 5 0 7", 4, f).unwrap_err();
        assert_eq!(e.field, Some("end"));
        let e = parse_script("1/1 [0] 1.0: 10 0 5 0\n1/1 [0] 1.x: 10 0 5 0\n", f).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().contains("line 2") && e.to_string().contains("time"), "{e}");
    }

    #[test]
    fn fields_list() {
        assert_eq!(
            ScriptFields::parse("pid,tid,cpu,time,addr,data_src,weight,phys_addr").unwrap(),
            ScriptFields::default()
        );
        let f = ScriptFields::parse("pid,tid,time,addr").unwrap();
        assert!(!f.cpu && !f.data_src && !f.weight && !f.phys_addr);
        assert!(ScriptFields::parse("pid,tid,time").unwrap_err().contains("addr"));
        assert!(ScriptFields::parse("pid,tid,time,addr,ip").unwrap_err().contains("ip"));
        assert_eq!(ScriptFields::parse("pid,pid,tid,time,addr").unwrap_err(), "field \"pid\" given twice");
    }

    #[test]
    fn windows_and_aggregation() {
        let rec = |tid, t, addr| ScriptRecord {
            line: 0,
            pid: 1,
            tid,
            cpu: Some(0),
            time_ns: t,
            addr,
            data_src: None,
            weight: None,
            phys_addr: Some(0),
        };
        let rs = [rec(2, 100, 0x1000), rec(2, 150, 0x1008), rec(3, 1150, 0x1000), rec(3, 3100, 0x9000)];
        let w = window_ranges(&rs, 1000);
        assert_eq!(w, vec![(1100, 0..2), (2100, 2..3), (4100, 3..4)]);
        let (acc, unplaced) = aggregate_records(&rs, 4096, |r| (r.addr != 0x9000).then_some(0));
        assert_eq!(unplaced, 1);
        assert_eq!(acc.len(), 2);
        assert_eq!((acc[0].tid, acc[0].count, acc[0].last_ns, acc[0].phys), (2, 2, 150, None));
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse_script(&s, ScriptFields::default());
            let _ = parse_script(&s, ScriptFields { cpu: false, data_src: false, weight: false, phys_addr: true });
        }
    }
}
