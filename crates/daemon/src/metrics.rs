//! Prometheus metrics: the text exposition format over a minimal HTTP/1.1 server.
//!
//! Problem: operators watch placement over weeks (does local access improve? is a node a
//! bottleneck every night?), which wants a time-series scraper, not `numapilot status` by hand.
//!
//! Approach: one thread with a `std::net::TcpListener` (default `127.0.0.1:9469`, loopback only:
//! the figures describe the machine's processes). Each connection: read the request head (at most
//! 8 KiB, 5 s), answer `GET /metrics` with the text exposition format 0.0.4 rendered from the
//! status snapshot the engine loop publishes after each step, anything else with 404, then close
//! (`Connection: close`; no keep-alive, no chunking). `GET /healthz` answers the health verdict of
//! `numapilot status --check` for probes that read HTTP codes: 200 (OK or WARNING), 503 (CRITICAL).
//! `HEAD` answers as `GET` without the body (probes and `curl -I` send it); any other method gets
//! 405 with `Allow: GET, HEAD`.
//!
//! ```text
//!   GET /metrics HTTP/1.1  ──>  200 text/plain; version=0.0.4
//!                               # HELP numapilot_node_load_ratio Load of a node's resource ...
//!                               # TYPE numapilot_node_load_ratio gauge
//!                               numapilot_node_load_ratio{node="0",resource="cpu"} 0.42
//! ```
//!
//! Names follow Prometheus's conventions (checked by its own linter, `promtool check metrics`, in
//! the tests): base units (seconds, bytes) in the name, ratios 0..1 as `_ratio`, counters
//! `_total`, one family per quantity with its breakdown as labels (`numapilot_actions_total{kind}`;
//! the known kinds and failure outcomes exported at 0 from the start, so a rate over them is 0,
//! not absent), `numapilot_build_info{version}` at 1, step durations as a histogram whose bounds
//! include the 50 ms cycle budget, and the daemon's own CPU, memory and descriptors as the process
//! collector of Prometheus's client libraries names them (`process_cpu_seconds_total` ...), read
//! from /proc/self at each scrape. Limits: a scrape is a few kB, served from the snapshot the loop
//! published last (a step's figures, not a live count).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use crate::control::{HealthLevel, Listening, Shared, Status, STEP_BUCKETS_S};

/// Longest request head read, bytes.
const MAX_HEAD: usize = 8192;

/// Most metrics clients served at once, each on a thread of its own (256 kB of stack); one more
/// closes the oldest still sending its request, or is answered 503 when every one is past its
/// request. Default 64. Source: judgement: a scraper or two and a person with curl, with room to
/// spare. Prevents: idle connections of a local user stalling or refusing every scrape behind
/// them (each may hold a slot for the 5 s request deadline), and unbounded threads.
const MAX_CLIENTS: usize = 64;

/// The metrics server could not start.
#[derive(Debug, thiserror::Error)]
#[error("metrics on {addr}: {cause}")]
pub struct MetricsError {
    /// The address.
    pub addr: SocketAddr,
    /// The cause (in the message; not repeated as a source).
    pub cause: std::io::Error,
}

/// What the daemon says of serving metrics on `addr` (at start, in `status`'s notes, the journal's
/// start line and `daemon --check`): nothing on a loopback address (the default, 127.0.0.1:9469);
/// on any other, that every host that can reach it reads them, unauthenticated. They tell what
/// this machine runs and how it is placed (process, thread and group counts, each node's load,
/// pages moved, `/healthz`'s reasons with the pids of stalled processes and stuck moves), and the
/// server is one any host can keep busy. The daemon served them so without a word (review of
/// 2026-12-01). An IPv4 loopback written as IPv6 (`::ffff:127.0.0.1`) is loopback.
pub fn exposure_warning(addr: SocketAddr) -> Option<String> {
    let loopback = match addr.ip() {
        std::net::IpAddr::V4(v4) => v4.is_loopback(),
        std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(v6.is_loopback(), |v4| v4.is_loopback()),
    };
    if loopback {
        return None;
    }
    let which =
        if addr.ip().is_unspecified() { "every address of this host" } else { "an address other hosts may reach" };
    Some(format!(
        "metrics on {addr} ({which}) are served to every host that can reach this one, without authentication:          they tell what this machine runs and how it is placed; keep [daemon] metrics on 127.0.0.1 (the default)          and scrape through a proxy or tunnel, or keep the port behind a firewall"
    ))
}

/// Binds `addr` and serves in a thread. Returns the bound address (port 0 picks a free port).
pub fn serve(addr: SocketAddr, shared: Arc<Shared>) -> Result<(SocketAddr, Listening), MetricsError> {
    let listener = TcpListener::bind(addr).map_err(|cause| MetricsError { addr, cause })?;
    let local = listener.local_addr().map_err(|cause| MetricsError { addr, cause })?;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = Arc::clone(&stop);
    let handle = std::thread::Builder::new()
        .name("numapilot-metrics".into())
        .spawn(move || {
            // metrics-clients-apart: each client on a thread of its own, at most MAX_CLIENTS at
            // once. One at a time, twelve idle connections of any local user delayed a scrape by
            // 60 s, and three kept open failed every scrape (review of 2026-11-29). When all are
            // taken, the oldest client still sending its request after IDLE_CLOSABLE is closed
            // for the new one: 64 idle connections any local user kept open (reopened as each
            // one's 5 s deadline ended) had every scrape and every /healthz probe answered 503
            // (review helper-51). A scraper sends its request within a moment of connecting, so
            // it is not closed by a flood of newer connections (review helper-52: without the
            // age, 64 connections opened while its handler had not yet read its request closed
            // it). When no client is that old and still sending, the new one is told 503.
            let clients = Arc::new(std::sync::Mutex::new(std::collections::HashMap::<u64, Client>::new()));
            let mut next_id = 0u64;
            for conn in listener.incoming() {
                if stopped.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let Ok(mut stream) = conn else {
                    std::thread::sleep(crate::control::ACCEPT_RETRY);
                    continue;
                };
                let mut held = clients.lock().unwrap_or_else(|p| p.into_inner());
                if held.len() >= MAX_CLIENTS {
                    let oldest = held
                        .iter()
                        .filter(|(_, c)| {
                            c.sending.load(std::sync::atomic::Ordering::Acquire) && c.since.elapsed() >= IDLE_CLOSABLE
                        })
                        .min_by_key(|(&id, c)| (c.since, id))
                        .map(|(&id, _)| id);
                    if let Some(c) = oldest.and_then(|id| held.remove(&id)) {
                        let _ = c.stream.shutdown(std::net::Shutdown::Both);
                    }
                }
                let sending = Arc::new(std::sync::atomic::AtomicBool::new(true));
                let id = next_id;
                next_id += 1;
                // A client that cannot be held (no descriptor for its copy) is not served: every
                // one served is counted.
                let mut full = held.len() >= MAX_CLIENTS;
                if !full {
                    match stream.try_clone() {
                        Ok(copy) => {
                            let since = std::time::Instant::now();
                            held.insert(id, Client { since, stream: copy, sending: Arc::clone(&sending) });
                        }
                        Err(_) => full = true,
                    }
                }
                drop(held);
                if full {
                    // Read what the client sent first: its method says whether the answer has a
                    // body, and a request left unread turns the close into a reset, which can
                    // destroy the answer before the client reads it.
                    // Read for at most 50 ms: this is the accepting thread.
                    let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
                    let (sent, _) = read_head(&stream, Duration::from_millis(50));
                    let _ = respond_with(
                        &mut stream,
                        "503 Service Unavailable",
                        "text/plain",
                        &[],
                        "too many clients\n",
                        is_head(&sent),
                    );
                    let _ = stream.shutdown(std::net::Shutdown::Write);
                    continue;
                }
                let (shared, clients2) = (Arc::clone(&shared), Arc::clone(&clients));
                let spawned = std::thread::Builder::new()
                    .name("numapilot-metrics-client".into())
                    .stack_size(256 << 10)
                    .spawn(move || {
                        // Its slot is given back however the handler ends (a panic too: the slot,
                        // and the copy of its socket that kept the connection open, leaked).
                        let _slot = Release(clients2, id);
                        if let Err(e) = handle(stream, &shared, &sending) {
                            tracing::debug!("metrics client: {e}");
                        }
                    });
                if spawned.is_err() {
                    clients.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
                }
            }
        })
        .map_err(|cause| MetricsError { addr, cause })?;
    // The poke connects where the listener is: its own address, loopback for a wildcard one.
    let mut at = local;
    if at.ip().is_unspecified() {
        at.set_ip(if at.is_ipv4() {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        });
    }
    let poke = Box::new(move || drop(TcpStream::connect_timeout(&at, Duration::from_secs(1))));
    Ok((local, Listening::new(stop, poke, handle)))
}

/// Gives a client's slot back when dropped.
struct Release(Arc<std::sync::Mutex<std::collections::HashMap<u64, Client>>>, u64);

impl Drop for Release {
    fn drop(&mut self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.1);
    }
}

/// How long a client may be sending its request before a newer one may close it when every slot
/// is taken, 1 s. Source: a scraper sends its request within a millisecond of connecting on
/// loopback; a second leaves room for a loaded host. Prevents: a flood of new connections closing
/// a scraper whose handler had not yet read its request.
const IDLE_CLOSABLE: Duration = Duration::from_secs(1);

/// A metrics client being served: when it came, a handle to close it by, and whether it is still
/// sending its request (only such a client is closed for a newer one).
struct Client {
    since: std::time::Instant,
    stream: TcpStream,
    sending: Arc<std::sync::atomic::AtomicBool>,
}

fn handle(mut stream: TcpStream, shared: &Shared, sending: &std::sync::atomic::AtomicBool) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let (head, read) = read_head(&stream, Duration::from_secs(5));
    sending.store(false, std::sync::atomic::Ordering::Release);
    if head.len() > MAX_HEAD {
        return respond_with(
            &mut stream,
            "431 Request Header Fields Too Large",
            "text/plain",
            &[],
            "request head too large\n",
            is_head(&head),
        );
    }
    read?;
    let first = first_line(&head);
    let mut parts = first.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    // HEAD answers as GET without the body (RFC 9110 9.3.2): probes and `curl -I` use it.
    let head_only = is_head(&head);
    if method != "GET" && !head_only {
        return respond_with(
            &mut stream,
            "405 Method Not Allowed",
            "text/plain",
            &["Allow: GET, HEAD"],
            "only GET and HEAD\n",
            false,
        );
    }
    let (status, ctype, body) = match path {
        "/metrics" => {
            let mut body = render(&shared.snapshot());
            body.push_str(&render_process(&ProcessFigures::own()));
            ("200 OK", "text/plain; version=0.0.4; charset=utf-8", body)
        }
        "/healthz" => {
            // For a probe that reads HTTP status codes (a load balancer's, Kubernetes'): 200 while
            // the daemon does its job (OK, or a WARNING worth a look), 503 when CRITICAL; the body
            // is `status --check`'s text.
            let s = shared.snapshot();
            let h = s.health();
            let mut body = if h.reasons.is_empty() { format!("OK: {}\n", s.summary()) } else { String::new() };
            for (level, reason) in &h.reasons {
                body.push_str(&format!("{}: {reason}\n", level.name()));
            }
            let code = if h.level == HealthLevel::Critical { "503 Service Unavailable" } else { "200 OK" };
            (code, "text/plain; charset=utf-8", body)
        }
        "/" => ("200 OK", "text/plain", "numapilot: metrics at /metrics, health at /healthz\n".to_string()),
        _ => ("404 Not Found", "text/plain", "not found; metrics are at /metrics\n".to_string()),
    };
    respond_with(&mut stream, status, ctype, &[], &body, head_only)
}

/// Reads a request head: until its blank line, the end of the stream, more than [`MAX_HEAD`]
/// bytes, or `within` since the start (one deadline for the whole head: a byte every 4 s under a
/// per-read timeout held the one-at-a-time server, and every scrape behind it, for hours). Returns
/// what came, and the read's error if one ended it.
fn read_head(stream: &TcpStream, within: Duration) -> (Vec<u8>, std::io::Result<()>) {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    let mut request = crate::control::Deadline::new(stream, within);
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        match request.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) => return (head, Err(e)),
        }
        if head.len() > MAX_HEAD {
            break;
        }
    }
    (head, Ok(()))
}

/// Whether a request (its head, or as much of it as came) is a `HEAD`, whose answer has no body:
/// also on the answers given before the request is parsed (too large a head, too many clients).
fn is_head(request: &[u8]) -> bool {
    first_line(request).split_whitespace().next() == Some("HEAD")
}

/// The request line: the first line of what came, lossily as text.
fn first_line(request: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(request.split(|&b| b == b'\n').next().unwrap_or_default())
}

/// Writes a response: status line, headers (`extra` ones too), and the body unless `head_only`
/// (a HEAD request: the same headers, its Content-Length the body's, no body).
fn respond_with(
    stream: &mut TcpStream,
    status: &str,
    ctype: &str,
    extra: &[&str],
    body: &str,
    head_only: bool,
) -> std::io::Result<()> {
    let mut extra_lines = String::new();
    for h in extra {
        extra_lines.push_str(h);
        extra_lines.push_str("\r\n");
    }
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n{extra_lines}Connection: close\r\n\r\n{}",
        body.len(),
        if head_only { "" } else { body }
    )?;
    stream.flush()
}

/// Escapes a label value (backslash, double quote, newline), as the exposition format requires.
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

struct Out(String);

impl Out {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        self.0.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
    }
    fn sample(&mut self, name: &str, labels: &[(&str, &str)], v: f64) {
        self.0.push_str(name);
        if !labels.is_empty() {
            let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", esc(v))).collect();
            self.0.push('{');
            self.0.push_str(&l.join(","));
            self.0.push('}');
        }
        self.0.push_str(&format!(" {}\n", fmt_value(v)));
    }
    fn one(&mut self, name: &str, kind: &str, help: &str, v: f64) {
        self.family(name, kind, help);
        self.sample(name, &[], v);
    }
}

fn fmt_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

/// Action kinds, as the journal names them (`journal::kind_name`): each counter family by kind
/// has a series for every one from the start, at 0, so a rate over it is 0, not absent.
const KINDS: [&str; 4] = ["set-affinity", "migrate-pages", "move-ranges", "interleave"];

/// Outcomes counted as failures (`journal::outcome_name` of an action not done in full).
const FAILED_OUTCOMES: [&str; 3] = ["partial", "refused", "vanished"];

/// The exposition text for a status snapshot (the daemon's own families; the process
/// collector's are [`render_process`]).
pub fn render(s: &Status) -> String {
    let mut o = Out(String::with_capacity(4096));
    o.family("numapilot_build_info", "gauge", "The daemon's version (value 1).");
    o.sample("numapilot_build_info", &[("version", &s.version)], 1.0);
    o.one(
        "numapilot_dry_run",
        "gauge",
        "1 while the daemon only observes and plans (a dry run, or not root).",
        if s.dry_run || s.observe_only_reason.is_some() { 1.0 } else { 0.0 },
    );
    o.one("numapilot_interval_seconds", "gauge", "Engine step interval.", s.interval_ms as f64 / 1e3);
    o.one(
        "numapilot_next_interval_seconds",
        "gauge",
        "Wait before the next step (shorter while young processes settle, longer while the loop backs off).",
        s.next_interval_ms as f64 / 1e3,
    );
    o.one(
        "numapilot_sampling_stretch",
        "gauge",
        "Access sampler's period for the coming wait, as a multiple of its base period.",
        f64::from(s.sampling_stretch),
    );
    o.family(
        "numapilot_placeable_nodes",
        "gauge",
        "Nodes the daemon can place among (the machine's nodes with a usable CPU or memory); 1: nothing to place.",
    );
    if let Ok(nodes) = numapilot_topology::NodeSet::parse_list(&s.placeable_nodes) {
        if !s.placeable_nodes.is_empty() {
            o.sample("numapilot_placeable_nodes", &[], nodes.len() as f64);
        }
    }
    o.one("numapilot_steps_total", "counter", "Engine steps completed.", s.steps as f64);
    o.one(
        "numapilot_step_errors_total",
        "counter",
        "Engine steps that failed (retried next interval).",
        s.step_errors as f64,
    );
    o.one(
        "numapilot_last_step_duration_seconds",
        "gauge",
        "Duration of the last step (observe, model, plan, act).",
        s.last_cycle_s,
    );
    o.one(
        "numapilot_last_step_timestamp_seconds",
        "gauge",
        "Unix time the last step ended (0 before the first): time() minus it is how long the loop has not stepped.",
        s.last_step_unix_s,
    );
    o.family(
        "numapilot_step_duration_seconds",
        "histogram",
        "Duration of each step, failed ones too (observe, model, plan, act).",
    );
    let mut cumulative = 0;
    for (i, le) in STEP_BUCKETS_S.iter().map(|b| fmt_value(*b)).chain(["+Inf".to_string()]).enumerate() {
        cumulative += s.step_histogram.get(i).copied().unwrap_or(0);
        o.sample("numapilot_step_duration_seconds_bucket", &[("le", &le)], cumulative as f64);
    }
    o.sample("numapilot_step_duration_seconds_sum", &[], s.cycle_s_total);
    o.sample("numapilot_step_duration_seconds_count", &[], cumulative as f64);
    o.family(
        "numapilot_step_phase_seconds_total",
        "counter",
        "Of the step durations, the time spent observing (with the model's update), deciding and acting.",
    );
    for (phase, v) in ["observe", "decide", "act"].iter().zip(s.phase_s_total) {
        o.sample("numapilot_step_phase_seconds_total", &[("phase", phase)], v);
    }
    o.one("numapilot_processes", "gauge", "Processes in the model.", s.processes as f64);
    o.one("numapilot_threads", "gauge", "Threads in the model.", s.threads as f64);
    o.one("numapilot_groups", "gauge", "Affinity groups.", s.groups as f64);
    o.family(
        "numapilot_local_access_ratio",
        "gauge",
        "Estimated share of memory accesses that are node-local (CPU-weighted over threads), 0..1.",
    );
    if let Some(l) = s.local_access {
        o.sample("numapilot_local_access_ratio", &[], l);
    }
    o.family("numapilot_actions_total", "counter", "Actions planned, by kind (carried out unless a dry run).");
    for k in KINDS.iter().copied().chain(s.actions_by_kind.keys().map(String::as_str).filter(|k| !KINDS.contains(k))) {
        o.sample("numapilot_actions_total", &[("kind", k)], s.actions_by_kind.get(k).copied().unwrap_or(0) as f64);
    }
    o.family("numapilot_action_failures_total", "counter", "Actions not done in full, by kind and outcome.");
    let mut failures: std::collections::BTreeMap<(&str, &str), u64> = std::collections::BTreeMap::new();
    for kind in KINDS {
        for outcome in FAILED_OUTCOMES {
            failures.insert((kind, outcome), 0);
        }
    }
    for (k, v) in &s.failures_by_kind {
        *failures.entry(k.split_once('/').unwrap_or((k, ""))).or_default() += v;
    }
    for ((kind, outcome), v) in failures {
        o.sample("numapilot_action_failures_total", &[("kind", kind), ("outcome", outcome)], v as f64);
    }
    o.one("numapilot_pages_moved_total", "counter", "Base pages moved.", s.pages_moved as f64);
    o.one(
        "numapilot_page_moves_stuck",
        "gauge",
        "Page moves given up as stuck in the kernel (no call returned and no CPU time spent for 60 s) and still there.",
        s.moves_stuck.len() as f64,
    );
    o.one(
        "numapilot_page_moves_started_total",
        "counter",
        "Page actions handed to the page mover (run in the background).",
        s.moves_started as f64,
    );
    o.one(
        "numapilot_page_move_running",
        "gauge",
        "1 while the page mover is moving a process's pages.",
        if s.move_running.is_some() { 1.0 } else { 0.0 },
    );
    o.family(
        "numapilot_pages_failed_total",
        "counter",
        "Base pages that could not be moved, by cause (an errno name, or why a move stopped).",
    );
    for (k, v) in &s.pages_failed_by_cause {
        o.sample("numapilot_pages_failed_total", &[("cause", k)], *v as f64);
    }
    o.family(
        "numapilot_bookkeeping_entries",
        "gauge",
        "Entries in each table the daemon keeps between steps (model, policy, observer, signal sources, state).",
    );
    for (k, v) in &s.bookkeeping {
        o.sample("numapilot_bookkeeping_entries", &[("table", k)], *v as f64);
    }
    o.one(
        "numapilot_stalled_processes",
        "gauge",
        "Processes left out because a read of their memory map (numa_maps, maps) is blocked in the kernel.",
        s.stalled_reads.len() as f64,
    );
    o.one(
        "numapilot_stalled_reads_total",
        "counter",
        "Reads of a process's memory map given up as blocked in the kernel.",
        s.stalled_reads_total as f64,
    );
    o.one(
        "numapilot_vanished_total",
        "counter",
        "Actions whose target process had exited or was another process.",
        s.vanished as f64,
    );
    o.one("numapilot_refused_total", "counter", "Actions the host refused.", s.refused as f64);
    o.one("numapilot_config_reloads_total", "counter", "Configuration reloads accepted (SIGHUP).", s.reloads as f64);
    o.one(
        "numapilot_config_reloads_rejected_total",
        "counter",
        "Configuration reloads rejected (old kept).",
        s.reloads_rejected as f64,
    );
    o.one(
        "numapilot_journal_lines_dropped_total",
        "counter",
        "Journal lines not written (a full disk, a directory gone).",
        s.journal_lines_dropped as f64,
    );
    o.one(
        "numapilot_state_unsaved",
        "gauge",
        "1 while the state file cannot be saved: nothing is changed until it can.",
        if s.state_unsaved { 1.0 } else { 0.0 },
    );
    o.one(
        "numapilot_released_total",
        "counter",
        "Processes put back as before numapilot touched them because they were excluded (or left [include]) while placed.",
        s.released as f64,
    );
    o.family(
        "numapilot_access_sampler_info",
        "gauge",
        "The access sampler open (value 1): its event, and precise=true for a PMU's memory-access samples, false for page faults.",
    );
    if let Some(a) = &s.access_sampler {
        o.sample(
            "numapilot_access_sampler_info",
            &[("event", &a.event), ("precise", if a.precise { "true" } else { "false" })],
            1.0,
        );
    }
    let a = s.access_sampler.clone().unwrap_or_default();
    o.one(
        "numapilot_access_samples_total",
        "counter",
        "Access samples read from the sampler's rings, kept or not.",
        a.samples as f64,
    );
    o.family(
        "numapilot_access_samples_discarded_total",
        "counter",
        "Of the access samples read, those not passed to the model, by reason (disjoint).",
    );
    for (reason, v) in [
        ("not-memory-access", a.not_accesses),
        ("undecodable", a.undecodable),
        ("no-thread", a.no_thread),
        ("no-node", a.unplaced),
    ] {
        o.sample("numapilot_access_samples_discarded_total", &[("reason", reason)], v as f64);
    }
    o.one(
        "numapilot_access_samples_lost_total",
        "counter",
        "Access samples the kernel lost (a ring full, or dropped by the PMU driver).",
        a.lost as f64,
    );
    o.one(
        "numapilot_access_sampler_aux_truncations_total",
        "counter",
        "Times the access sampler's AUX area (ARM SPE) was full and records were lost.",
        a.truncations as f64,
    );
    o.one(
        "numapilot_access_sampler_throttles_total",
        "counter",
        "Times the kernel throttled the access sampler for sampling too fast.",
        a.throttles as f64,
    );
    o.one(
        "numapilot_signal_source_failures_total",
        "counter",
        "Times a signal source (access sampler, socket tables, wake-up tracer) went from working to failing.",
        s.signal_source_failures as f64,
    );
    o.family("numapilot_node_load_ratio", "gauge", "Load of a node's resource (busy time or use / capacity, 0..1).");
    for n in &s.nodes {
        let node = n.node.to_string();
        for r in n.resources.iter().filter(|r| r.known) {
            o.sample("numapilot_node_load_ratio", &[("node", &node), ("resource", &r.resource)], r.load);
        }
    }
    o.family(
        "numapilot_node_interference_ratio",
        "gauge",
        "Interference on a node's resource (waiting time / period).",
    );
    for n in &s.nodes {
        let node = n.node.to_string();
        for r in n.resources.iter().filter(|r| r.known) {
            o.sample(
                "numapilot_node_interference_ratio",
                &[("node", &node), ("resource", &r.resource)],
                r.interference,
            );
        }
    }
    o.family("numapilot_node_bottleneck", "gauge", "1 when a node's resource is flagged as a bottleneck.");
    for n in &s.nodes {
        let node = n.node.to_string();
        for r in n.resources.iter().filter(|r| r.known) {
            o.sample(
                "numapilot_node_bottleneck",
                &[("node", &node), ("resource", &r.resource)],
                if r.bottleneck { 1.0 } else { 0.0 },
            );
        }
    }
    o.family("numapilot_node_memory_free_bytes", "gauge", "Free memory of a node (MemFree plus reclaimable).");
    for n in &s.nodes {
        o.sample("numapilot_node_memory_free_bytes", &[("node", &n.node.to_string())], n.mem_free_bytes as f64);
    }
    o.family("numapilot_node_memory_total_bytes", "gauge", "Total memory of a node.");
    for n in &s.nodes {
        o.sample("numapilot_node_memory_total_bytes", &[("node", &n.node.to_string())], n.mem_total_bytes as f64);
    }
    o.family("numapilot_node_cpu_demand", "gauge", "CPU demand of the tasks that ran on a node, CPUs.");
    for n in &s.nodes {
        o.sample("numapilot_node_cpu_demand", &[("node", &n.node.to_string())], n.cpu_demand);
    }
    o.0
}

/// The daemon process's own figures, as Prometheus's process collector names them: what an
/// operator checks issue 5's budget against in production (CPU under 1% of a core:
/// `rate(process_cpu_seconds_total[5m])`; memory under 50 MB: `process_resident_memory_bytes`)
/// and the descriptors it holds. `None`: not readable (never in the daemon's own /proc).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessFigures {
    /// User plus system CPU time of every thread, seconds.
    pub cpu_seconds: Option<f64>,
    /// Resident set size, bytes.
    pub resident_bytes: Option<u64>,
    /// Virtual memory size, bytes.
    pub virtual_bytes: Option<u64>,
    /// Start time, Unix seconds.
    pub start_time_seconds: Option<f64>,
    /// Descriptors open.
    pub open_fds: Option<u64>,
    /// The soft limit on descriptors (RLIMIT_NOFILE).
    pub max_fds: Option<u64>,
    /// Threads.
    pub threads: Option<u64>,
}

impl ProcessFigures {
    /// This process's, from /proc/self (stat, the boot time in /proc/stat, fd) and getrlimit.
    pub fn own() -> Self {
        let reader = numapilot_observe::Reader::new("/");
        let pid = std::process::id();
        let stat = reader.read_stat(pid).ok().flatten();
        let btime = reader.read_proc_stat().ok().flatten().map(|p| p.btime);
        let hz = numapilot_observe::reader::clock_ticks_per_sec().max(1) as f64;
        let page = numapilot_observe::reader::page_size();
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit writes one rlimit into the struct we own.
        let max_fds = (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0
            && limit.rlim_cur != libc::RLIM_INFINITY)
            .then_some(limit.rlim_cur);
        Self {
            cpu_seconds: stat.as_ref().map(|s| (s.utime + s.stime) as f64 / hz),
            resident_bytes: stat.as_ref().map(|s| s.rss_pages * page),
            virtual_bytes: stat.as_ref().map(|s| s.vsize),
            start_time_seconds: stat.as_ref().zip(btime).map(|(s, b)| b as f64 + s.starttime as f64 / hz),
            open_fds: std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count() as u64),
            max_fds,
            threads: stat.as_ref().map(|s| u64::from(s.num_threads)),
        }
    }
}

/// The process collector's families for `p` (those known).
pub fn render_process(p: &ProcessFigures) -> String {
    let mut o = Out(String::with_capacity(1024));
    let rows: [(&str, &str, &str, Option<f64>); 7] = [
        ("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", p.cpu_seconds),
        (
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            p.resident_bytes.map(|v| v as f64),
        ),
        ("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", p.virtual_bytes.map(|v| v as f64)),
        (
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            p.start_time_seconds,
        ),
        ("process_open_fds", "gauge", "Number of open file descriptors.", p.open_fds.map(|v| v as f64)),
        ("process_max_fds", "gauge", "Maximum number of open file descriptors.", p.max_fds.map(|v| v as f64)),
        ("process_threads", "gauge", "Number of OS threads in the process.", p.threads.map(|v| v as f64)),
    ];
    for (name, kind, help, v) in rows {
        if let Some(v) = v {
            o.one(name, kind, help, v);
        }
    }
    o.0
}
