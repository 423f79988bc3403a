//! The daemon co-places processes that talk to each other or share memory, on a real 4-node kernel
//! (rig/scenarios/pairs.sh, one boot of the 4-node guest, 2 CPUs a node, kernel NUMA balancing off).
//!
//! Three pairs of unrelated `rig-pair` processes, each member started on its own node (its memory first-touched
//! there) and then widened to every CPU, so the daemon may place them: a loopback TCP server and client, a unix-socket
//! server and client, and a memfd owner and a user that got the descriptor over a unix socket it then closed; the
//! servers hold 64 MiB, their clients 12 MiB of their own; the memfd is 24 MiB and its user has 28 MiB of its own, so
//! alone it would stay with its own memory and only the shared memory can bring it to the owner's node. Two
//! `rig-alone` touchers neither talk nor share.
//! Each pair must end with every thread that runs on one node, the node that held the served (or shared) memory
//! before the daemon started, its buffer still there, the clients' own memory moved after them, both processes'
//! CPUs narrowed to that node, and the daemon's journal naming both processes and the signal that tied them
//! (`tied by communication`, `tied by shared memory`) on the moves it applied; the loners must not end on one
//! node. Judged from the scenario's own reads (`numapilot_rig::pairs`: numa_maps and field 39 of every thread's
//! stat every 0.5 s, Cpus_allowed_list at the end), the journal only naming what the daemon claims. Skipped unless
//! `NUMAPILOT_RIG=1`.
//!
//! Each assertion was seen to fail (2026-12-01, on this guest):
//! - `NUMAPILOT_RIG_PAIRS_SIGNALS=off` (this test's own switch: the daemon with `[signals] sockets = false` and
//!   `shared = false`) fails the three pair tests at `together_since`: each member is placed by its own memory (the
//!   TCP and unix clients narrowed to their own nodes 2 and 3, the memfd user to node 0), the journal names no tie
//!   and never claims the work done; the loners' test and the daemon's pass.
//! - Without the model's residency-by-bytes (`numapilot_model::groups`) the TCP pair ended on the client's node 2
//!   and the unix pair on node 1, their servers' 64 MiB copied away (65,767 pages journaled, against 13,405):
//!   "ended on node 2, not on node 1 with the memory".
//! - Without the socket-diagnostics modules in the guest (`crates/rig/src/image.rs`, BOOT_MODULES) the daemon saw
//!   no unix peer (sock_diag's unix family missing): the unix pair ended apart, server on node 2, client on node 3.
//! - Without the group label's tie (`numapilot_policy`'s `group_label`), no journal line said why two processes
//!   were placed together: "no applied set-affinity ... whose reason says".
//!
//! The scenario records until the journal claims the work done (every pair placed by an applied set-affinity of one
//! of its members naming its tie, every client's page move ended) and 3 s more (at most 40 s), so the judgement waits for the daemon's
//! claim, not for a time, and then checks it. The figures (time from the daemon's start to each pair on one node,
//! pages moved) are printed: `-- --nocapture`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::OnceLock;
use std::time::Duration;

use numapilot_rig::checks::parse_list;
use numapilot_rig::pairs::{self, Pass};
use numapilot_rig::{GuestRun, GuestSpec, Rig, RigOptions};
use serde_json::Value;

const SCENARIO: &str = include_str!("../../../rig/scenarios/pairs.sh");

/// Share of a buffer on one node for it to count as on that node.
const ON_NODE: f64 = 0.9;

fn enabled(what: &str) -> bool {
    if std::env::var("NUMAPILOT_RIG").is_ok_and(|v| v == "1") {
        return true;
    }
    let _ = writeln!(std::io::stderr(), "rig pairs test {what} SKIPPED: set NUMAPILOT_RIG=1 to boot QEMU guests");
    false
}

/// The scenario's run, judged once.
struct Judged {
    run: GuestRun,
    pids: BTreeMap<String, u32>,
    passes: Vec<Pass>,
    node_of: BTreeMap<u32, u32>,
    daemon_start: f64,
    journal: Vec<Value>,
}

fn judged() -> &'static Judged {
    static RUN: OnceLock<Result<Judged, String>> = OnceLock::new();
    RUN.get_or_init(|| {
        let (rig, _) = Rig::prepare(&RigOptions::default()).map_err(|e| e.to_string())?;
        let mut spec = GuestSpec::preset("4node").ok_or("no 4node preset")?;
        spec.timeout = Duration::from_secs(300);
        // NUMAPILOT_RIG_PAIRS_SIGNALS=off: the check that the signals bring the pairs together (see the header).
        let off = std::env::var("NUMAPILOT_RIG_PAIRS_SIGNALS").is_ok_and(|v| v == "off");
        let files = if off { vec![("rig/pairs.conf".to_string(), b"PAIRS_SIGNALS=off\n".to_vec())] } else { vec![] };
        let tag = if off { "pairs-signals-off" } else { "pairs" };
        let run = rig.boot(&spec, tag, SCENARIO, &files).map_err(|e| e.to_string())?;
        eprintln!(
            "guest 4node {tag}: userspace after {:.2} s, QEMU wall {} ms",
            run.boot_s.unwrap_or(f64::NAN),
            run.wall_ms
        );
        if run.scenario_rc != 0 {
            return Err(format!("pairs.sh exit {}; console:\n{}", run.scenario_rc, run.console_tail()));
        }
        let out = |name: &str| -> Result<String, String> {
            let s = run.section(name)?;
            if s.rc != 0 {
                return Err(format!("section {name}: exit {}: {}", s.rc, s.stderr()));
            }
            Ok(s.stdout())
        };
        let pids = pairs::parse_pids(&out("pids")?)?;
        let passes = pairs::parse_samples(&out("samples")?)?;
        let node_of = pairs::parse_node_cpus(&out("node-cpus")?)?;
        let daemon_start = out("daemon-start")?.trim().parse().map_err(|_| "daemon-start: not a number".to_string())?;
        let journal = out("journal")?
            .lines()
            .map(|l| serde_json::from_str(l).map_err(|e| format!("journal: not JSON ({e}): {l}")))
            .collect::<Result<_, _>>()?;
        Ok(Judged { run, pids, passes, node_of, daemon_start, journal })
    })
    .as_ref()
    .unwrap_or_else(|e| panic!("{e}"))
}

impl Judged {
    fn pid(&self, name: &str) -> u32 {
        *self.pids.get(name).unwrap_or_else(|| panic!("no pid for {name} in {:?}", self.pids))
    }

    fn section(&self, name: &str) -> String {
        let s = self.run.section(name).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.rc, 0, "section {name}: exit {}: {}", s.rc, s.stderr());
        s.stdout()
    }

    /// The nodes of the CPUs in `NAME`'s Cpus_allowed_list at the end.
    fn allowed_nodes(&self, name: &str) -> BTreeSet<u32> {
        let t = self.section(&format!("allowed-{name}"));
        let list = t.trim().strip_prefix("Cpus_allowed_list:").unwrap_or_else(|| panic!("{name}: {t:?}")).trim();
        let cpus = parse_list(list).unwrap_or_else(|| panic!("{name}: CPU list {list:?}"));
        cpus.iter().map(|c| self.node_of[c]).collect()
    }

    /// The journal's applied actions on `pid`.
    fn applied(&self, pid: u32) -> Vec<&Value> {
        self.journal
            .iter()
            .filter(|r| r["pid"].as_u64() == Some(u64::from(pid)))
            .filter(|r| r["event"] == "action" && r["outcome"] == "applied")
            .collect()
    }

    /// Base pages the daemon moved of `pid` (its journal's lines: applied and background moves).
    fn pages_moved(&self, pid: u32) -> u64 {
        self.journal
            .iter()
            .filter(|r| r["pid"].as_u64() == Some(u64::from(pid)))
            .filter_map(|r| r["pages_moved"].as_u64())
            .sum()
    }

    /// Where the threads of `pids` ran between the last pass before the daemon started and the one before it.
    fn before(&self, pids: &[u32]) -> BTreeSet<u32> {
        let i = self.passes.iter().rposition(|p| p.up_s < self.daemon_start).expect("a pass before the daemon");
        pairs::ran_on(&self.passes, i, pids, &self.node_of).unwrap_or_else(|e| panic!("{e}"))
    }

    fn journal_text(&self) -> String {
        self.journal.iter().map(|r| r.to_string()).collect::<Vec<_>>().join("\n")
    }
}

/// One pair: `server` holds the served or shared memory, `client` talks to it or maps it too, `tie` is the signal
/// the journal must name. The client's own memory must end on the pair's node too (it is over `remote_share_min` of
/// its resident memory, so the daemon moves it after its threads).
fn check_pair(server: &str, client: &str, tie: &str) {
    let j = judged();
    let (a, b) = (j.pid(server), j.pid(client));
    let first = |pid| pairs::first_of(&j.passes, pid).unwrap_or_else(|| panic!("{pid} never sampled"));
    let last = |pid| pairs::last_of(&j.passes, pid).expect("sampled");
    let (home, share) = pairs::main_node(&first(a).largest).unwrap_or_else(|| panic!("{server}: no memory"));
    assert!(share >= ON_NODE, "{server}: only {:.0}% of its buffer on node {home} at the start", share * 100.0);
    let (own, _) = pairs::main_node(&first(b).largest_anon).unwrap_or_else(|| panic!("{client}: no memory"));
    assert_ne!(own, home, "{client}'s own memory began on the server's node: the pair did not begin apart");
    let together =
        pairs::together_since(&j.passes, &[a, b], &j.node_of, j.daemon_start).unwrap_or_else(|e| panic!("{e}"));
    let (since, node) = together.unwrap_or_else(|| {
        panic!(
            "{server} {a} and {client} {b} did not end on one node (their threads ran on {:?} at the last pass)\n{}",
            pairs::ran_on(&j.passes, j.passes.len() - 1, &[a, b], &j.node_of),
            j.journal_text()
        )
    });
    assert_eq!(node, home, "{server} {a} and {client} {b} ended on node {node}, not on node {home} with the memory");
    let (end, end_share) = pairs::main_node(&last(a).largest).expect("memory");
    assert!(end == home && end_share >= ON_NODE, "{server}'s buffer moved: {:?} at the end", last(a).largest);
    let (cn, cs) = pairs::main_node(&last(b).largest_anon).expect("memory");
    assert!(cn == home && cs >= ON_NODE, "{client}'s memory did not follow: {:?} at the end", last(b).largest_anon);
    for name in [server, client] {
        assert_eq!(j.allowed_nodes(name), BTreeSet::from([home]), "{name}'s CPUs at the end");
    }
    // The placement that brought them together names the tie. A member the daemon had already narrowed to the
    // pair's node before the tie formed (placed alone, where its own memory is) needs no second action, so one
    // member's applied set-affinity naming it is enough (CI at 052d21f: the unix server, narrowed to node 2 at
    // step 2 for its own memory, then its client moved to it at step 4 "tied by communication").
    let said = format!("of processes {}, {}; tied by {tie}", a.min(b), a.max(b));
    let named = |pid| {
        j.applied(pid)
            .iter()
            .any(|r| r["kind"] == "set-affinity" && r["detail"].as_str().is_some_and(|d| d.contains(&said)))
    };
    assert!(
        named(a) || named(b),
        "no applied set-affinity of {a} or {b} whose reason says {said:?}\n{}",
        j.journal_text()
    );
    // The daemon's own view names the group too (its plan now, or the reasons of its past actions: a member whose CPU
    // dipped under min_group_cpu at that moment is "not managed" now, its past moves still listed).
    let explain = j.section(&format!("explain-{server}"));
    let (lo, hi) = (a.min(b), a.max(b));
    assert!(
        explain.contains(&format!("of [{lo}, {hi}]")) || explain.contains(&format!("of processes {lo}, {hi};")),
        "explain {a}:\n{explain}"
    );
    // The daemon's step that narrowed the pair (its sample's CLOCK_MONOTONIC time; the guest never suspends, so it
    // reads as /proc/uptime does).
    let acted = j
        .applied(b)
        .iter()
        .filter(|r| r["kind"] == "set-affinity")
        .filter_map(|r| r["at_ns"].as_u64())
        .min()
        .map_or(f64::NAN, |ns| ns as f64 / 1e9 - j.daemon_start);
    eprintln!(
        "{server} {a} + {client} {b}: threads before the daemon on nodes {:?}; memory on node {home} (client's on {own}); \
         on node {node} from {:.2} s after the daemon's start (its set-affinity step sampled at {acted:.2} s); pages \
         moved by the daemon: {} of {client}, {} of {server}; {client}'s memory at the end {:?}",
        j.before(&[a, b]),
        since - j.daemon_start,
        j.pages_moved(b),
        j.pages_moved(a),
        last(b).largest_anon
    );
}

/// Until follows-placed-threads (`numapilot_policy`'s memory pass) this failed now and then (CI at 052d21f, an idle
/// host; the sequence rebuilt from its figures in numapilot-policy's adaptive_rules): the server, under `min_group_cpu`
/// and so placed by nothing, ran on its client's node where the kernel had put it, the group their tie formed was held
/// there by the client's earlier move, and the server's 64 MiB were copied
/// after threads no action had narrowed (16,418 pages instead of 3,104; the pair ended on the client's node). With the
/// tie made later on purpose (`tier_medium = 0.3` and `min_group_cpu = 0.12` in a `[tunables]` section of the
/// scenario's configuration), one of three runs without the rule copied the unix server's 64 MiB to its client's node
/// (16,416 pages journaled) and the pair was then narrowed there; with the rule, two runs of all five tests moved none
/// of the servers' pages and passed.
#[test]
fn a_tcp_client_and_its_server_end_on_the_servers_memory() {
    if enabled("tcp") {
        check_pair("tcp-server", "tcp-client", "communication");
    }
}

#[test]
fn a_unix_socket_client_and_its_server_end_on_the_servers_memory() {
    if enabled("unix") {
        check_pair("unix-server", "unix-client", "communication");
    }
}

#[test]
fn two_processes_mapping_one_memfd_end_on_its_memory() {
    if enabled("memfd") {
        check_pair("memfd-owner", "memfd-user", "shared memory");
    }
}

/// The loners began on nodes 0 and 1 and neither talk nor share: they end apart (each runs on its own memory's node
/// here, and they are not both bound to one node) unless the journal shows one crowded off its node for CPU (rule
/// next-best-node), no reason groups them, and the daemon's model keeps them in groups of their own.
#[test]
fn processes_that_neither_talk_nor_share_are_not_put_together() {
    if !enabled("alone") {
        return;
    }
    let j = judged();
    let (a, b) = (j.pid("alone-a"), j.pid("alone-b"));
    let node =
        |pid| pairs::main_node(&pairs::first_of(&j.passes, pid).expect("sampled").largest_anon).expect("memory").0;
    assert_ne!(node(a), node(b), "the loners' memory began on one node");
    // Where each ran over the last passes.
    let recent = |pid| -> BTreeSet<u32> {
        (j.passes.len().saturating_sub(pairs::MIN_PASSES)..j.passes.len())
            .flat_map(|i| pairs::ran_on(&j.passes, i, &[pid], &j.node_of).unwrap_or_else(|e| panic!("{e}")))
            .collect()
    };
    let (ra, rb) = (recent(a), recent(b));
    let (aa, ab) = (j.allowed_nodes("alone-a"), j.allowed_nodes("alone-b"));
    // What the daemon did with them, for a failure's message: a run where they end on one node has so far been
    // a loaded host's (CI beside a build and another guest, 2026-12-01), passing 4 of 4 alone.
    let acted: Vec<String> = j
        .journal
        .iter()
        .filter(|r| r["pid"].as_u64().is_some_and(|p| p == u64::from(a) || p == u64::from(b)))
        .map(|r| {
            let d = r["detail"].as_str().unwrap_or("");
            format!(
                "{} {} {} {}: {}",
                r["pid"],
                r["kind"],
                r["rule"],
                r["outcome"],
                d.chars().take(160).collect::<String>()
            )
        })
        .collect();
    // Together at the end only as the balancer's answer to a full node, said in the journal (rule next-best-node:
    // the loner's own node had no CPU left for it once the plan's other units were placed, as in a fresh-clone
    // CI of 43c7f42: "node 1 has 0.3 of 2.0 CPUs left for 0.5"), never for a reason that relates them.
    let crowded_out = j.journal.iter().any(|r| {
        r["pid"].as_u64().is_some_and(|p| p == u64::from(a) || p == u64::from(b))
            && r["rule"] == "next-best-node"
            && r["detail"].as_str().is_some_and(|d| d.contains("CPUs left for"))
    });
    assert!(
        ra.is_disjoint(&rb) || crowded_out,
        "the loners ran on one node at the end: {a} on {ra:?}, {b} on {rb:?}; allowed nodes at the end {aa:?} and \
         {ab:?}; the daemon's actions on them ({}):\n{}",
        acted.len(),
        acted.join("\n")
    );
    // Both narrowed to one node is the same answer to a full node (the crowded-out loner is bound where it went,
    // beside the other on its own memory's node: fresh-clone CI of b52e066's successor, 2026-12-02, both {0}).
    assert!(
        aa.len() > 1 || ab.len() > 1 || aa != ab || crowded_out,
        "both narrowed to one node: {aa:?}; the daemon's actions on them ({}):\n{}",
        acted.len(),
        acted.join("\n")
    );
    let (lo, hi) = (a.min(b), a.max(b));
    for r in &j.journal {
        let d = r["detail"].as_str().unwrap_or("");
        assert!(!d.contains(&format!("of processes {lo}, {hi}")), "a reason groups the loners: {r}");
    }
    for name in ["alone-a", "alone-b"] {
        let e = j.section(&format!("explain-{name}"));
        assert!(
            !e.contains(&format!("of [{lo}, {hi}]")) && !e.contains(&format!("of processes {lo}, {hi}")),
            "explain of {name} puts the loners in one group:\n{e}"
        );
    }
    eprintln!(
        "alone {a} on {ra:?}, alone {b} on {rb:?} at the end (memory on nodes {} and {}); the daemon's actions on \
         them:\n{}",
        node(a),
        node(b),
        acted.join("\n")
    );
}

/// The daemon ran the window through and exited 0 on SIGTERM, having restored every process it touched; the kernel's
/// page-migration counter over its run is printed beside the journal's (moves by the daemon alone: NUMA balancing
/// is off).
#[test]
fn the_daemon_exits_cleanly() {
    if !enabled("daemon") {
        return;
    }
    let j = judged();
    let s = j.run.section("daemon-exit").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.stdout().trim(), "0", "daemon exit; log:\n{}", s.stderr());
    let restore = j.journal.iter().find(|r| r["event"] == "restore").expect("a restore line");
    assert!(restore["detail"].as_str().unwrap_or("").contains("failed 0"), "{restore}");
    let vm =
        numapilot_rig::race::migrated(&j.section("vmstat0"), &j.section("vmstat1")).unwrap_or_else(|e| panic!("{e}"));
    let journaled: u64 = j.pids.values().map(|&p| j.pages_moved(p)).sum();
    let settled = j.run.section("settled").unwrap_or_else(|e| panic!("{e}"));
    let claimed = match settled.stdout().trim().parse::<f64>() {
        Ok(up) if settled.rc == 0 => format!("{:.2} s after its start", up - j.daemon_start),
        _ => "never".into(),
    };
    eprintln!(
        "the journal claimed every pair placed and every client's pages moved: {claimed}; pages migrated over the \
         daemon's window: pgmigrate_success {}, numa_pages_migrated {}; the journal's {journaled}",
        vm.pgmigrate_success, vm.numa_pages_migrated
    );
    assert_eq!(vm.numa_pages_migrated, 0, "NUMA balancing migrated pages: it was to be off");
}
