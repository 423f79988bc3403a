//! What numastat shows, computed from the kernel's files through `numapilot_observe`, and printed as
//! Debian's numastat (numactl 2.0.16) prints it.
//!
//! ```text
//!   numastat                 "compatibility" table: node numastat counters in pages, old perl layout
//!   numastat -n              the same counters in MB (pages x page size), with a Total column
//!   numastat -m              node meminfo in MB (kB lines x 1024, HugePages_* x huge page size)
//!   numastat -p PID|PATTERN  per-node MB of a process from numa_maps: Huge / Heap / Stack / Private
//!                            (one table per process when one process or -v; else one row each)
//! ```
//!
//! Semantics kept from numastat (source: numactl's numastat.c and its output on this host):
//! - Process memory: each VMA of numa_maps is Huge if hugetlb, else Heap, else Stack, else Private
//!   (file-backed memory counts as Private). Per-node page counts are converted with the VMA's own
//!   `kernelpagesize_kB`; numastat uses the base page size, or the default huge page size for hugetlb
//!   VMAs, which gives the same numbers except for hugetlb VMAs of a non-default size (1 GiB pages on a
//!   2 MiB-default system), where numastat is wrong and we are not.
//! - PATTERN matches (substring) the process name followed by its command line with NULs as blanks;
//!   numastat's own process is never matched (ours neither). PIDs are sorted and de-duplicated.
//! - Meminfo and numastat lines are placed by name in numastat's fixed row order; names it does not
//!   know are reported as "Token X not in hash table." (only when started as `numastat`: on 6.x kernels
//!   every `-m` prints several, which tells a user nothing).
//! - Unreadable numa_maps: "Can't read /proc/PID/numa_maps: REASON" on stderr; the process shows zeros.
//!   Deliberate difference: numastat skips the whole multi-process table when the LAST process is the
//!   unreadable one (its `continue` jumps over the display); we still show the table. And when no
//!   process named could be read, numastat exits 0; `numapilot stat` prints the same and exits 1
//!   (started as `numastat`, 0).
//! - Deliberate difference: a process name holding control characters (a process names itself,
//!   prctl or /proc/self/comm) is printed with them escaped (`\u{1b}`); numastat prints the bytes,
//!   and an escape sequence reached the terminal of whoever read the table. An empty `-p` operand
//!   is numastat's PID 0 (its atoi), as `-p "$(pidof x)"` gives with no x running.
//! - Deliberate differences found by review helper-49: a number beyond a C int (numastat's atoi
//!   turns it into `PID -1`, or 2^32 + N into PID N, another process) is named as typed in a
//!   "Found no process with PID" note; a `numa_maps` line over 2047 bytes (a file mapped from a long
//!   path), which numastat reads in two pieces and can miscount (`N0=1024` cut into `N0=1`), is
//!   read whole; a name cut to 16 bytes in `-c` is cut at a character boundary, not inside one;
//!   messages say `numastat`, not argv[0], and `-V` gives numapilot's version; all of stderr comes
//!   before the tables (numastat interleaves them on a terminal; through a pipe both put stderr
//!   first).

use std::io;

use numapilot_observe::parse::meminfo::NUMASTAT_COUNTERS;
use numapilot_observe::{NodeSample, NumaMaps, ReadError, Reader};
use serde_json::{json, Map, Value};

use super::table::{Cell, Justify, Table};

/// What to show, after argument parsing (both entry points end here).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// `-c`: fit columns to their contents, no decimals.
    pub compress: bool,
    /// `-m`: the meminfo table.
    pub meminfo: bool,
    /// `-n`: the numastat counters table.
    pub numastat: bool,
    /// `-p` values and bare arguments: PIDs or patterns, in order, as given (bytes).
    pub specs: Vec<std::ffi::OsString>,
    /// `-s[NODE]`: sort; `Some(None)` by the Total column.
    pub sort: Option<Option<String>>,
    /// `-v`: one table per process even for several processes.
    pub verbose: bool,
    /// `-z`: leave out rows and columns that are all zero.
    pub skip_zero: bool,
    /// No option at all: numastat's compatibility table.
    pub compat: bool,
    /// Print "Token X not in hash table." as numastat does (only under the name `numastat`).
    pub token_warnings: bool,
    /// Output width (numastat: `NUMASTAT_WIDTH`, 80 on a terminal, else unlimited).
    pub screen_width: usize,
    /// `-sN` names node N by its id, and a node the machine lacks is an error (`numapilot stat`).
    /// Otherwise numastat's rule: the N-th node's id plus one as a column, which on a machine whose
    /// node ids have gaps (0 and 2) sorts by the total or by the wrong node, and an unknown N sorts
    /// by the total, silently.
    pub sort_by_node_id: bool,
}

/// numastat's screen width rule: `NUMASTAT_WIDTH` read as C's `atoi` reads it, used when 1 to 10
/// million, else 80; unset, 80 on a terminal (numastat asks `resize`, but reads its answer into an
/// 8-byte buffer and so always ends with 80), else no limit; never below 32.
pub fn screen_width() -> usize {
    use std::io::IsTerminal;
    let mut w = match std::env::var_os("NUMASTAT_WIDTH") {
        Some(v) => match c_atoi(v.as_encoded_bytes()) {
            n @ 1..=10_000_000 => n as usize,
            _ => 80,
        },
        None if io::stdout().is_terminal() => 80,
        None => 10_000_000,
    };
    if w < 32 {
        w = 32;
    }
    w
}

/// C's `atoi` as glibc has it, `(int) strtol(s, NULL, 10)`: leading white space skipped, a sign,
/// the digits up to the first other byte (`45abc` is 45, none is 0), saturated to a 64-bit long and
/// then cut to 32 bits (`4294967341` is 45, a number beyond a long -1). numastat reads
/// `NUMASTAT_WIDTH` so (numastat.c `get_screen_width`); it was read strictly here, and `45abc`
/// gave 80 (review helper-49).
fn c_atoi(s: &[u8]) -> i32 {
    let s = &s[s.iter().take_while(|b| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')).count()..];
    let (negative, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut v: i64 = 0;
    for &d in digits.iter().take_while(|b| b.is_ascii_digit()) {
        let d = i64::from(d - b'0');
        v = if negative { v.saturating_mul(10).saturating_sub(d) } else { v.saturating_mul(10).saturating_add(d) };
    }
    v as i32
}

const MIB: f64 = 1024.0 * 1024.0;

/// numastat's row label for each node numastat counter (numastat.c `numastat_meminfo`), in the order of
/// [`NUMASTAT_COUNTERS`] (the kernel's file order, which numastat's table follows).
const NUMASTAT_LABELS: [&str; 6] =
    ["Numa_Hit", "Numa_Miss", "Numa_Foreign", "Interleave_Hit", "Local_Node", "Other_Node"];

const MEMINFO_ROWS: [&str; 36] = [
    "MemTotal",
    "MemFree",
    "MemUsed",
    "HighTotal",
    "HighFree",
    "LowTotal",
    "LowFree",
    "Active",
    "Inactive",
    "Active(anon)",
    "Inactive(anon)",
    "Active(file)",
    "Inactive(file)",
    "Unevictable",
    "Mlocked",
    "Dirty",
    "Writeback",
    "FilePages",
    "Mapped",
    "AnonPages",
    "Shmem",
    "KernelStack",
    "PageTables",
    "NFS_Unstable",
    "Bounce",
    "WritebackTmp",
    "Slab",
    "SReclaimable",
    "SUnreclaim",
    "AnonHugePages",
    "ShmemHugePages",
    "ShmemPmdMapped",
    "HugePages_Total",
    "HugePages_Free",
    "HugePages_Surp",
    "KReclaimable",
];

const PROCESS_ROWS: [&str; 4] = ["Huge", "Heap", "Stack", "Private"];

/// Page sizes numastat converts with.
#[derive(Debug, Clone, Copy)]
struct PageSizes {
    base: f64,
    huge: f64,
}

/// Everything a run produces: text for stdout, messages for stderr, JSON when asked.
#[derive(Debug, Default)]
pub struct Output {
    /// What numastat prints on stdout.
    pub stdout: String,
    /// What numastat prints on stderr.
    pub stderr: String,
    /// The same data as JSON.
    pub json: Map<String, Value>,
    /// Processes were asked for (`-p`, operands) and none could be read: no PID or pattern named a
    /// process, or every named one's numa_maps was unreadable. numastat prints its tables and
    /// exits 0 all the same; `numapilot stat` exits 1 (a script learns that the PID was wrong).
    pub no_process_read: bool,
    /// Why each process named could not be read, one phrase each naming its PID and the file
    /// ("PID 1: cannot read /proc/1/numa_maps: Permission denied", "PID 9: no such process"):
    /// what `numapilot stat` says when none could be.
    pub unread: Vec<String>,
}

/// One process's memory per category and node, MB.
#[derive(Debug, Clone)]
struct ProcessMem {
    pid: u32,
    name: Option<String>,
    /// `mb[category][node index]`; `None` when numa_maps could not be read.
    mb: Option<[Vec<f64>; 4]>,
}

/// Runs numastat's logic against `reader`.
pub fn run(reader: &Reader, cfg: &Config) -> anyhow::Result<Output> {
    let mut out = Output::default();
    let pids = resolve_specs(reader, &cfg.specs, &mut out.stdout)?;
    let node_ids: Vec<u32> = reader.node_ids()?.iter().collect();
    if node_ids.is_empty() {
        let what = if cfg.compat { "sysfs not mounted or system not NUMA aware" } else { "Couldn't open" };
        anyhow::bail!("{what}: no node directories in {}", reader.root().join("sys/devices/system/node").display());
    }
    out.json.insert("nodes".into(), json!(node_ids));
    let nodes: Vec<NodeSample> = node_ids.iter().map(|&n| reader.read_node(n)).collect::<Result<_, _>>()?;
    if cfg.compat {
        system_table(&nodes, cfg, None, SystemFile::Numastat, &mut out);
        return Ok(out);
    }
    let sizes = page_sizes(reader)?;
    let no_process = pids.is_empty();
    out.no_process_read = no_process && !cfg.specs.is_empty();
    if !no_process {
        let procs: Vec<ProcessMem> = pids
            .into_iter()
            .map(|(p, name)| process_mem(reader, p, name, &node_ids, &mut out.stderr, &mut out.unread))
            .collect();
        out.no_process_read = procs.iter().all(|p| p.mb.is_none());
        process_tables(&procs, &node_ids, cfg, &mut out);
    }
    if cfg.meminfo {
        out.stdout.push_str("\nPer-node system memory usage (in MBs):\n");
        system_table(&nodes, cfg, Some(sizes), SystemFile::Meminfo, &mut out);
    }
    if cfg.numastat || (no_process && !cfg.meminfo) {
        out.stdout.push_str("\nPer-node numastat info (in MBs):\n");
        system_table(&nodes, cfg, Some(sizes), SystemFile::Numastat, &mut out);
    }
    Ok(out)
}

fn page_sizes(reader: &Reader) -> anyhow::Result<PageSizes> {
    let base = numapilot_observe::reader::page_size() as f64;
    let huge_kb = reader.read_meminfo()?.and_then(|m| m.get("Hugepagesize")).unwrap_or(0);
    Ok(PageSizes { base, huge: huge_kb as f64 * 1024.0 })
}

/// The largest number numastat's `atoi` keeps as typed (a C int); above it the number turns into
/// another (and is past any PID: Linux's `PID_MAX_LIMIT` is 4 Mi, include/linux/threads.h).
const PID_MAX: u32 = i32::MAX as u32;

/// PIDs from the specs: all digits is a PID, anything else a pattern. Sorted, de-duplicated; each with the
/// name the pattern search already read (`None` for a PID given as a number).
pub(super) fn resolve_specs(
    reader: &Reader,
    specs: &[std::ffi::OsString],
    stdout: &mut String,
) -> anyhow::Result<Vec<(u32, Option<String>)>> {
    use std::os::unix::ffi::OsStrExt as _;
    let mut pids: Vec<(u32, Option<String>)> = Vec::new();
    let mut candidates: Option<Vec<Candidate>> = None;
    for raw in specs {
        let bytes = raw.as_bytes();
        let spec = raw.to_string_lossy();
        if bytes.iter().all(u8::is_ascii_digit) {
            // The empty string is all digits to numastat too, atoi's 0: PID 0, which no /proc
            // entry has. As a pattern it would match every process, and `numastat -p "$(pidof x)"`
            // with no x running would total the whole machine's memory as x's (a review of
            // 2026-11-30).
            let pid = if spec.is_empty() { Some(0) } else { spec.parse::<u32>().ok().filter(|&p| p <= PID_MAX) };
            let Some(pid) = pid else {
                // Deliberate difference: numastat's atoi turns a number beyond any PID into
                // another one (`PID -1`, or 2^32 + N into PID N, another process than the one
                // named); here it is said as what was typed, in the words of a pattern that
                // matched nothing (review helper-49).
                stdout.push_str(&format!("Found no process with PID: \"{spec}\" (beyond any PID)\n"));
                continue;
            };
            pids.push((pid, None));
            continue;
        }
        let cands = match &mut candidates {
            Some(c) => c,
            None => candidates.insert(pattern_candidates(reader)?),
        };
        let before = pids.len();
        for c in cands.iter() {
            if contains(&c.text, bytes) {
                pids.push((c.pid, c.name.clone()));
            }
        }
        if pids.len() == before {
            stdout.push_str(&format!("Found no processes containing pattern: \"{spec}\"\n"));
        }
    }
    // By pid; of equal pids the one with a name first, so dedup keeps it.
    pids.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.is_some().cmp(&a.1.is_some())));
    pids.dedup_by_key(|p| p.0);
    Ok(pids)
}

/// A process the pattern search looks at.
#[derive(Debug)]
struct Candidate {
    pid: u32,
    /// The status `Name:`; `None` when it could not be read (gone).
    name: Option<String>,
    /// Name, a blank, the command line with NULs as blanks.
    text: Vec<u8>,
}

/// For every process: its name, a blank, its command line with NULs as blanks (numastat's search
/// text, at most 2047 bytes). Our own process is left out, as numastat leaves out itself.
fn pattern_candidates(reader: &Reader) -> anyhow::Result<Vec<Candidate>> {
    let me = std::process::id();
    let mut out = Vec::new();
    for pid in reader.pids()? {
        if reader.is_live() && pid == me {
            continue;
        }
        // The name as the kernel wrote it, bytes: a pattern is matched byte for byte; shown as text.
        // (One read of the status file: the name was read parsed and raw, twice a process.)
        let raw = raw_status_name(reader, pid);
        let name = raw.as_deref().map(|r| String::from_utf8_lossy(r).trim_start().to_string());
        let mut text: Vec<u8> = raw.unwrap_or_default();
        if let Ok(Some(cmdline)) = reader.read_cmdline(pid) {
            text.push(b' ');
            text.extend(cmdline.iter().map(|&b| if b == 0 { b' ' } else { b }));
        }
        text.truncate(2047);
        // Byte for byte, as numastat compares: the pattern arrives as the bytes given (a pattern
        // with a byte that is not UTF-8 matched every name with any such byte while both were
        // taken as text, review helper-61; raw against text it never matched, helper-36).
        out.push(Candidate { pid, name, text });
    }
    Ok(out)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// The `Name:` of a process's status, as numastat shows it.
/// The `Name:` of /proc/PID/status as its bytes (the kernel escapes only blanks, `\n` and `\\`
/// there; other bytes are as the process named itself), leading blanks skipped.
fn raw_status_name(reader: &Reader, pid: u32) -> Option<Vec<u8>> {
    let status = std::fs::read(reader.root().join(format!("proc/{pid}/status"))).ok()?;
    let line = status.split(|&b| b == b'\n').find_map(|l| l.strip_prefix(b"Name:"))?;
    let start = line.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(line.len());
    Some(line[start..].to_vec())
}

fn command_name(reader: &Reader, pid: u32) -> Option<String> {
    reader.read_status(pid).ok().flatten().map(|s| s.name.trim_start().to_string())
}

/// One process's numa_maps as per-category, per-node MB (through the same reader and parser as every
/// observation); reports failures as numastat does. A process that is gone (ENOENT, or ESRCH/EINVAL while
/// it exits) is reported as "No such file or directory", numastat's words for the usual case. Why
/// it could not be read goes to `unread` too, in plain words naming the PID and the file.
fn process_mem(
    reader: &Reader,
    pid: u32,
    name: Option<String>,
    node_ids: &[u32],
    stderr: &mut String,
    unread: &mut Vec<String>,
) -> ProcessMem {
    let name = name.or_else(|| command_name(reader, pid));
    let (theirs, ours) = match reader.read_numa_maps(pid) {
        Ok(Some(maps)) => return process_mem_of(&maps, pid, name, node_ids),
        Ok(None) => ("No such file or directory".to_string(), "no such process".to_string()),
        Err(ReadError::Io { source, .. }) => {
            let why = strerror(&source);
            (why.clone(), format!("cannot read /proc/{pid}/numa_maps: {why}"))
        }
        Err(e) => (e.to_string(), format!("/proc/{pid}/numa_maps: {e}")),
    };
    stderr.push_str(&format!("Can't read /proc/{pid}/numa_maps: {theirs}\n"));
    unread.push(format!("PID {pid}: {ours}"));
    ProcessMem { pid, name, mb: None }
}

/// [`process_mem`] of a numa_maps read.
fn process_mem_of(maps: &NumaMaps, pid: u32, name: Option<String>, node_ids: &[u32]) -> ProcessMem {
    let mut mb: [Vec<f64>; 4] = std::array::from_fn(|_| vec![0.0; node_ids.len()]);
    for u in maps.usage_by_node() {
        if let Ok(i) = node_ids.binary_search(&u.node) {
            // numastat's categories: file-backed memory counts as Private. kB / 1024 is exact in f64.
            let kb = [u.huge_kb, u.heap_kb, u.stack_kb, u.anon_kb + u.file_kb];
            for (cat, kb) in kb.into_iter().enumerate() {
                mb[cat][i] = kb as f64 / 1024.0;
            }
        }
    }
    ProcessMem { pid, name, mb: Some(mb) }
}

/// An I/O error as `strerror` words it ("Permission denied"), without Rust's "(os error 13)".
fn strerror(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

fn decimals(cfg: &Config) -> usize {
    if cfg.compress {
        0
    } else {
        2
    }
}

/// Why `-s=NODE` names no node of `node_ids` (`numapilot stat`, where that is an error), if it
/// does not: all digits, and one of the ids. `typed`: the argument as the user typed it (`-s1`).
pub fn sort_node_error(typed: &str, node: &str, node_ids: &[u32]) -> Option<String> {
    let known = node.bytes().all(|b| b.is_ascii_digit()) && node.parse::<u32>().is_ok_and(|n| node_ids.contains(&n));
    (!known).then(|| {
        let ids: Vec<String> = node_ids.iter().map(u32::to_string).collect();
        format!("{typed}: no node {node} to sort by (nodes {}); -s alone sorts by the total", ids.join(","))
    })
}

/// The column to sort by: numastat's rule, `1 + node id of the N-th node` for `-sN` when N is below
/// the node count, else Total.
fn sort_col(cfg: &Config, node_ids: &[u32], total_col: usize) -> Option<usize> {
    let arg = cfg.sort.as_ref()?;
    if cfg.sort_by_node_id {
        // Checked before (`sort_node_error`): a node id this machine has, or the total.
        return Some(
            arg.as_deref()
                .and_then(|a| a.parse::<u32>().ok())
                .and_then(|n| node_ids.iter().position(|&id| id == n))
                .map_or(total_col, |i| 1 + i),
        );
    }
    let n = arg
        .as_deref()
        .filter(|a| !a.is_empty() && a.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|a| a.parse::<usize>().ok());
    Some(match n {
        Some(i) if i < node_ids.len() => {
            let c = 1 + node_ids[i] as usize;
            if c < total_col {
                c
            } else {
                total_col
            }
        }
        _ => total_col,
    })
}

/// Node column headers: "Node N" (or "nodeN" in compatibility mode) and "Total".
fn node_headers(node_ids: &[u32], compat: bool) -> Vec<String> {
    node_ids.iter().map(|n| if compat { format!("node{n}") } else { format!("Node {n}") }).collect()
}

fn process_tables(procs: &[ProcessMem], node_ids: &[u32], cfg: &Config, out: &mut Output) {
    let sub = cfg.verbose || procs.len() == 1;
    let n_nodes = node_ids.len();
    let data_rows = if sub { PROCESS_ROWS.len() } else { procs.len() };
    let mut t = Table::new(2, data_rows + 2, n_nodes + 1);
    let total_col = 1 + n_nodes;
    let total_row = 2 + data_rows + 1;
    t.set(total_row, 0, Cell::Text("Total".into()));
    if sub {
        for (i, label) in PROCESS_ROWS.iter().enumerate() {
            t.set(2 + i, 0, Cell::Text((*label).into()));
        }
    } else {
        t.set(0, 0, Cell::Text("PID".into()));
        t.set(1, 0, Cell::Rule('-'));
        out.stdout.push_str("\nPer-node process memory usage (in MBs)\n");
    }
    t.set_col(0, 16, 0, Justify::Left);
    let mut headers = node_headers(node_ids, false);
    headers.push("Total".to_string());
    for (c, label) in headers.into_iter().enumerate() {
        t.set(0, 1 + c, Cell::Text(label));
        t.set(1, 1 + c, Cell::Rule('-'));
        t.set_col(1 + c, 16, decimals(cfg), Justify::Right);
    }
    t.zero_data();
    let mut json_procs = Vec::new();
    for (pi, p) in procs.iter().enumerate() {
        // Control characters escaped (`\x1b` as `\u{1b}`): a process names itself (prctl), and
        // raw, an escape sequence in its name reached the terminal of root reading this table
        // (numastat prints it raw; a review of 2026-11-30). JSON keeps the name as read.
        let name = p.name.as_deref().map_or_else(|| "(null)".into(), numapilot_model::tasks::printable);
        if sub {
            out.stdout.push_str(&format!("\nPer-node process memory usage (in MBs) for PID {} ({name})\n", p.pid));
            if pi > 0 {
                t.zero_data();
            }
        } else {
            let mut label = format!("{} ({name})", p.pid);
            // numastat formats the label into a 64-byte buffer.
            truncate_bytes(&mut label, 63);
            t.set(2 + pi, 0, Cell::Text(label));
        }
        json_procs.push(process_json(p, node_ids));
        let Some(mb) = &p.mb else {
            // numastat: the header (in per-process mode) but no table for a process it cannot read.
            if sub {
                continue;
            }
            if pi + 1 < procs.len() {
                continue;
            }
            finish_process_table(&mut t, cfg, node_ids, data_rows, total_row, total_col, out);
            continue;
        };
        for (cat, per_node) in mb.iter().enumerate() {
            let row = if sub { 2 + cat } else { 2 + pi };
            for (ni, &v) in per_node.iter().enumerate() {
                if v == 0.0 {
                    continue;
                }
                t.add(row, 1 + ni, v);
                t.add(row, total_col, v);
                t.add(total_row, 1 + ni, v);
                t.add(total_row, total_col, v);
            }
        }
        if sub || pi + 1 == procs.len() {
            finish_process_table(&mut t, cfg, node_ids, data_rows, total_row, total_col, out);
        }
    }
    out.json.insert("processes".into(), Value::Array(json_procs));
}

fn finish_process_table(
    t: &mut Table,
    cfg: &Config,
    node_ids: &[u32],
    data_rows: usize,
    total_row: usize,
    total_col: usize,
    out: &mut Output,
) {
    if cfg.compress {
        for c in 0..=total_col {
            t.fit_col(c, 4, 16);
        }
    } else {
        // numastat lets the label column grow to 24 so process names are not cut.
        t.fit_col(0, 16, 24);
    }
    t.always_show_row(total_row - 1);
    for c in 0..=total_col {
        t.set(total_row - 1, c, Cell::Rule('-'));
    }
    if let Some(col) = sort_col(cfg, node_ids, total_col) {
        t.sort_desc(2, 2 + data_rows - 1, col);
    }
    out.stdout.push_str(&t.render(cfg.screen_width, !cfg.skip_zero));
}

fn process_json(p: &ProcessMem, node_ids: &[u32]) -> Value {
    let mut nodes = Map::new();
    let mut total = 0.0;
    if let Some(mb) = &p.mb {
        for (ni, n) in node_ids.iter().enumerate() {
            let vals: Vec<f64> = (0..4).map(|c| mb[c][ni]).collect();
            let sum: f64 = vals.iter().sum();
            total += sum;
            nodes.insert(
                n.to_string(),
                json!({"huge_mb": vals[0], "heap_mb": vals[1], "stack_mb": vals[2], "private_mb": vals[3], "total_mb": sum}),
            );
        }
    }
    json!({"pid": p.pid, "name": p.name, "readable": p.mb.is_some(), "nodes": nodes, "total_mb": total})
}

fn truncate_bytes(s: &mut String, max: usize) {
    let end = numapilot_observe::error::char_prefix(s, max).len();
    s.truncate(end);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SystemFile {
    Numastat,
    Meminfo,
}

/// numastat's `show_info_from_system_file`: one row per known name, one column per node plus Total.
/// `sizes` is `None` in compatibility mode (raw page counts, old layout).
fn system_table(nodes: &[NodeSample], cfg: &Config, sizes: Option<PageSizes>, file: SystemFile, out: &mut Output) {
    let compat = sizes.is_none();
    let header_rows = if compat { 1 } else { 2 };
    let labels: Vec<(&str, &str)> = match file {
        SystemFile::Numastat => NUMASTAT_COUNTERS.iter().copied().zip(NUMASTAT_LABELS).collect(),
        SystemFile::Meminfo => MEMINFO_ROWS.iter().map(|k| (*k, *k)).collect(),
    };
    let n_nodes = nodes.len();
    let total_col = 1 + n_nodes;
    let mut t = Table::new(header_rows, labels.len(), n_nodes + 1);
    for (i, (token, label)) in labels.iter().enumerate() {
        t.set(header_rows + i, 0, Cell::Text(if compat { (*token).into() } else { (*label).into() }));
    }
    t.set_col(0, 16, 0, Justify::Left);
    let node_ids: Vec<u32> = nodes.iter().map(|n| n.node).collect();
    let headers = node_headers(&node_ids, compat);
    let key = match file {
        SystemFile::Numastat => "numastat",
        SystemFile::Meminfo => "meminfo",
    };
    let mut json_nodes = Map::new();
    // In compatibility mode numastat never sets up the Total column: it stays 0 wide (invisible).
    let cols = if compat { n_nodes } else { n_nodes + 1 };
    for ci in 0..cols {
        let col = 1 + ci;
        let label = if ci == n_nodes { "Total".to_string() } else { headers[ci].clone() };
        t.set(0, col, Cell::Text(label));
        let mut dec = 0;
        if !compat {
            t.set(1, col, Cell::Rule('-'));
            dec = decimals(cfg);
        }
        t.set_col(col, 16, dec, Justify::Right);
        if ci == n_nodes {
            break;
        }
        let node = &nodes[ci];
        let mut jn = Map::new();
        let entries: Vec<(String, u64, f64)> = match file {
            SystemFile::Numastat => {
                node.numastat.entries().iter().map(|(k, v)| (k.clone(), *v, sizes.map_or(1.0, |s| s.base))).collect()
            }
            SystemFile::Meminfo => node
                .meminfo
                .entries
                .iter()
                .map(|e| {
                    let mult = match sizes {
                        None => 1.0,
                        Some(s) if e.key.starts_with("HugePages") => s.huge,
                        Some(_) if e.kb => 1024.0,
                        Some(_) => 1.0,
                    };
                    (e.key.clone(), e.value, mult)
                })
                .collect(),
        };
        for (k, raw, mult) in entries {
            match labels.iter().position(|(token, _)| *token == k) {
                None => {
                    if cfg.token_warnings {
                        out.stdout.push_str(&format!("Token {k} not in hash table.\n"));
                    }
                }
                Some(i) => {
                    let v = if compat { raw as f64 } else { raw as f64 * mult / MIB };
                    t.set(header_rows + i, col, Cell::Num(v));
                    t.add(header_rows + i, total_col, v);
                    jn.insert(k, json!(v));
                }
            }
        }
        json_nodes.insert(node.node.to_string(), Value::Object(jn));
    }
    if cfg.compress {
        for c in 0..=total_col {
            t.fit_col(c, 4, 16);
        }
    }
    if !compat {
        if let Some(col) = sort_col(cfg, &node_ids, total_col) {
            t.sort_desc(header_rows, header_rows + labels.len() - 1, col);
        }
    }
    out.stdout.push_str(&t.render(cfg.screen_width, !cfg.skip_zero));
    let unit = if compat { "pages" } else { "MB" };
    out.json.insert(key.into(), json!({"unit": unit, "nodes": json_nodes}));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strerror_drops_the_os_error_suffix() {
        let e = io::Error::from_raw_os_error(libc::EACCES);
        assert_eq!(strerror(&e), "Permission denied");
    }

    #[test]
    fn pattern_search_is_a_substring_match() {
        assert!(contains(b"bash -c sleep 10", b"sleep"));
        assert!(!contains(b"bash", b"sleep"));
        assert!(contains(b"x", b""));
    }

    #[test]
    fn widths_read_as_c_atoi_reads_them() {
        for (text, want) in [
            ("45", 45),
            ("45abc", 45),
            (" \t+45 ", 45),
            ("-3", -3),
            ("abc", 0),
            ("", 0),
            ("- 4", 0),
            // Beyond 32 bits: strtol's long, cut to int.
            ("4294967341", 45),
            ("99999999999999999999", -1),
            ("-99999999999999999999", 0),
        ] {
            assert_eq!(c_atoi(text.as_bytes()), want, "{text:?}");
        }
    }

    #[test]
    fn sort_column_follows_numastat() {
        let mut cfg = Config { sort: Some(None), ..Config::default() };
        assert_eq!(sort_col(&cfg, &[0, 1], 3), Some(3));
        cfg.sort = Some(Some("1".into()));
        assert_eq!(sort_col(&cfg, &[0, 1], 3), Some(2));
        cfg.sort = Some(Some("7".into()));
        assert_eq!(sort_col(&cfg, &[0, 1], 3), Some(3));
        cfg.sort = None;
        assert_eq!(sort_col(&cfg, &[0, 1], 3), None);
        // numastat's rule on node ids with a gap: -s1 is the total (1 + id 2 = column 3), not node 2.
        cfg.sort = Some(Some("1".into()));
        assert_eq!(sort_col(&cfg, &[0, 2], 3), Some(3));
        // By node id (`numapilot stat`): node 2 is column 2; node 1 is no node there.
        cfg.sort_by_node_id = true;
        cfg.sort = Some(Some("2".into()));
        assert_eq!(sort_col(&cfg, &[0, 2], 3), Some(2));
        assert_eq!(sort_node_error("-s2", "2", &[0, 2]), None);
        assert_eq!(
            sort_node_error("-s1", "1", &[0, 2]).as_deref(),
            Some("-s1: no node 1 to sort by (nodes 0,2); -s alone sorts by the total")
        );
        assert!(sort_node_error("-sx", "x", &[0]).is_some() && sort_node_error("-s-1", "-1", &[0]).is_some());
    }
}
