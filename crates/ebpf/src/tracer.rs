//! The libbpf side: open the compiled BPF object, size its map, load, attach, drain.
//!
//! The object is compiled by build.rs (clang, `-target bpf`) and embedded in the binary, so the daemon ships as
//! one file. libbpf's own messages (including the verifier's log when a load fails) are captured while opening and
//! attached to the error instead of going to stderr.

use std::ffi::CStr;
use std::path::PathBuf;
use std::sync::Mutex;

use libbpf_rs::{ErrorKind, Link, MapCore, MapFlags, Object, ObjectBuilder, PrintLevel};

use crate::{find_tracefs, Drained, EbpfError, TracerOptions, WakeupPair, TRACEFS_PATHS};

/// The BPF object built from src/bpf/wakeup.bpf.c.
static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/wakeup.bpf.o"));

const MAP_PAIRS: &str = "pairs";
const MAP_DROPPED: &str = "dropped";
const PROG: &str = "on_sched_waking";
/// Where tracefs is mounted when [`TracerOptions::mount_tracefs`] asks for it.
const TRACEFS_MOUNT: &CStr = c"/sys/kernel/tracing";

/// Key and value sizes of the pair map, bytes (struct pair_key / pair_value in the BPF program).
const KEY_LEN: usize = 8;
const VALUE_LEN: usize = 16;

/// Cap on the captured libbpf log, bytes: enough for a verifier log of this small program, bounded for a
/// pathological one.
const LOG_CAP: usize = 64 * 1024;

static LOG: Mutex<String> = Mutex::new(String::new());

fn capture(_level: PrintLevel, msg: String) {
    if let Ok(mut log) = LOG.lock() {
        if log.len() < LOG_CAP {
            log.push_str(&msg);
        }
    }
}

fn take_log() -> String {
    LOG.lock().map(|mut l| std::mem::take(&mut *l)).unwrap_or_default()
}

fn bpf_err(what: &'static str, e: libbpf_rs::Error) -> EbpfError {
    let log = take_log();
    let detail = if log.trim().is_empty() { e.to_string() } else { format!("{e}; libbpf: {}", log.trim_end()) };
    match e.kind() {
        ErrorKind::PermissionDenied => EbpfError::Permission { what, detail },
        ErrorKind::Unsupported => EbpfError::Unsupported { what, detail },
        _ => EbpfError::Bpf { what, detail },
    }
}

/// Makes sure a tracefs with the sched_waking event is mounted (mounting one if asked to).
fn ensure_tracefs(opts: &TracerOptions) -> Result<(), EbpfError> {
    if find_tracefs().is_some() {
        return Ok(());
    }
    // tracefs is root-only (mode 0700): an unprivileged caller sees no files rather than a refusal.
    for dir in TRACEFS_PATHS {
        if let Err(e) = std::fs::read_dir(dir) {
            if e.kind() == std::io::ErrorKind::PermissionDenied {
                return Err(EbpfError::Permission { what: "read tracefs", detail: format!("{dir}: {e}") });
            }
        }
    }
    // A mounted tracefs (it has `events/`) without the event: the kernel lacks the tracepoint.
    if let Some(dir) = TRACEFS_PATHS.iter().map(PathBuf::from).find(|p| p.join("events").is_dir()) {
        return Err(EbpfError::NoTracepoint { path: dir.join("events/sched/sched_waking/id") });
    }
    if !opts.mount_tracefs {
        return Err(EbpfError::TracefsMissing { tried: TRACEFS_PATHS.join(", ") });
    }
    let path = PathBuf::from(TRACEFS_MOUNT.to_str().unwrap_or("/sys/kernel/tracing"));
    // SAFETY: all pointers are valid NUL-terminated strings for the duration of the call; data may be null.
    let rc =
        unsafe { libc::mount(c"tracefs".as_ptr(), TRACEFS_MOUNT.as_ptr(), c"tracefs".as_ptr(), 0, std::ptr::null()) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EPERM) {
            return Err(EbpfError::Permission { what: "mount tracefs", detail: e.to_string() });
        }
        return Err(EbpfError::Mount { path, source: e });
    }
    if find_tracefs().is_none() {
        return Err(EbpfError::NoTracepoint { path: path.join("events/sched/sched_waking/id") });
    }
    Ok(())
}

/// The loaded object and its attachment.
pub(crate) struct Tracer {
    obj: Object,
    _link: Link,
    max_pairs: u32,
    /// The cumulative `dropped` counter at the previous drain.
    dropped_seen: u64,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer").field("max_pairs", &self.max_pairs).finish_non_exhaustive()
    }
}

impl Tracer {
    pub(crate) fn open(opts: &TracerOptions) -> Result<Tracer, EbpfError> {
        ensure_tracefs(opts)?;
        take_log();
        let prev = libbpf_rs::set_print(Some((PrintLevel::Warn, capture)));
        let r = Self::load_and_attach(opts);
        libbpf_rs::set_print(prev);
        take_log();
        r
    }

    fn load_and_attach(opts: &TracerOptions) -> Result<Tracer, EbpfError> {
        let mut open = ObjectBuilder::default().open_memory(OBJECT).map_err(|e| bpf_err("open the BPF object", e))?;
        let mut map = open
            .maps_mut()
            .find(|m| m.name() == MAP_PAIRS)
            .ok_or(EbpfError::MissingInObject { kind: "map", name: MAP_PAIRS })?;
        map.set_max_entries(opts.max_pairs).map_err(|e| bpf_err("size the pair map", e))?;
        let obj = open.load().map_err(|e| bpf_err("load the BPF program", e))?;
        let prog = obj
            .progs_mut()
            .find(|p| p.name() == PROG)
            .ok_or(EbpfError::MissingInObject { kind: "program", name: PROG })?;
        let link = prog.attach().map_err(|e| bpf_err("attach to sched:sched_waking", e))?;
        Ok(Tracer { obj, _link: link, max_pairs: opts.max_pairs, dropped_seen: 0 })
    }

    pub(crate) fn max_pairs(&self) -> u32 {
        self.max_pairs
    }

    pub(crate) fn drain(&mut self) -> Result<Drained, EbpfError> {
        let pairs_map = self
            .obj
            .maps()
            .find(|m| m.name() == MAP_PAIRS)
            .ok_or(EbpfError::MissingInObject { kind: "map", name: MAP_PAIRS })?;
        // Keys first: iterating a hash map while deleting from it may restart or skip.
        let keys: Vec<Vec<u8>> = pairs_map.keys().collect();
        let mut pairs = Vec::with_capacity(keys.len());
        for key in keys {
            // Atomic read-and-delete: a wake-up counted after it starts a new entry for the next drain.
            let value = match pairs_map.lookup_and_delete(&key) {
                Ok(Some(v)) => v,
                Ok(None) => continue,
                Err(e) => return Err(bpf_err("drain the pair map (BPF_MAP_LOOKUP_AND_DELETE_ELEM)", e)),
            };
            if key.len() != KEY_LEN || value.len() != VALUE_LEN {
                return Err(EbpfError::Bpf {
                    what: "drain the pair map",
                    detail: format!("entry of {} + {} bytes, expected {KEY_LEN} + {VALUE_LEN}", key.len(), value.len()),
                });
            }
            let u32_at = |b: &[u8], i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
            let mut count = [0u8; 8];
            count.copy_from_slice(&value[..8]);
            pairs.push(WakeupPair {
                waker_tid: u32_at(&key, 0),
                wakee_tid: u32_at(&key, 4),
                count: u64::from_le_bytes(count),
                waker_pid: u32_at(&value, 8),
            });
        }
        pairs.sort_by_key(|p| (p.waker_tid, p.wakee_tid));
        let dropped_map = self
            .obj
            .maps()
            .find(|m| m.name() == MAP_DROPPED)
            .ok_or(EbpfError::MissingInObject { kind: "map", name: MAP_DROPPED })?;
        let total = match dropped_map.lookup(&0u32.to_le_bytes(), MapFlags::ANY) {
            Ok(Some(v)) if v.len() == 8 => u64::from_le_bytes(v.try_into().unwrap_or([0; 8])),
            Ok(_) => 0,
            Err(e) => return Err(bpf_err("read the dropped counter", e)),
        };
        // The counter only grows in the kernel; the difference is this cycle's drops.
        let dropped = total.saturating_sub(self.dropped_seen);
        self.dropped_seen = total;
        Ok(Drained { pairs, dropped })
    }
}
