//! A Redis-like server and its benchmark clients: a workload whose threads talk to each other.
//!
//! # Problem
//!
//! The NUMA-ICON slides (shared/seeds/000) measured `redis-server` + `redis-benchmark` on loopback:
//! with the stock scheduler, single pipeline, SET 78.6k req/s and GET 79.7k; with their adaptive
//! placement 104.8k and 101.8k (+33%, +28%); binding everything to node 0 gave the same as adaptive.
//! The gain comes from *communication*, not from a process's own memory: every request is written
//! by a client and read by the server, every reply the other way, and when the two sides run on
//! different nodes each side's reads miss on lines the other side dirtied in another node's cache
//! or memory. A placement policy that only looks at where each process's memory is cannot see it;
//! one that groups communicating threads can. This module builds that workload.
//!
//! # Approach
//!
//! ```text
//!   redis-benchmark (clients, N threads)           redis-server (1 thread)
//!   ┌───────────────┐  writes request   ┌────────┐  reads request (R lines)
//!   │ client 0..N-1 │ ───────────────▶  │  req   │ ◀──────────────────────┐
//!   └───────────────┘                   └────────┘                        │ ┌──────────┐
//!           │ reads reply (R lines)     ┌────────┐  writes reply (S lines)├─│  server  │
//!           └─────────────────────────▶ │ reply  │ ◀──────────────────────┘ └──────────┘
//!                                       └────────┘                            │ lookup (K lines)
//!   req: the clients' socket buffers, first touched by them                   ▼
//!   reply: the server's client buffers (query/reply, 16 KiB each), by it  ┌──────────┐
//!                                                                         │ keyspace │
//!   one request = one unit of work on both sides (Pace ratio 1)           └──────────┘
//! ```
//!
//! Each side *writes* into memory it allocated (S lines: request or reply data plus socket
//! metadata) and *reads* what the other side wrote (R lines: the data plus the sender's skb, socket
//! and wake-up state, which the receiver misses on). Co-located, all of it is local; spread, every
//! read of the other side's buffer is remote, on both sides. The server also looks the key up in the
//! keyspace (K dependent misses: bucket, dictEntry, key, robj, value). The server is single-threaded
//! and is the bottleneck; the clients go at its pace (`Pace`), so throughput = the server's
//! requests/s.
//!
//! # Constants and sources
//!
//! | constant | value | source |
//! |---|---|---|
//! | value size | 200 B | `redis-benchmark -d 200` (seed 002) |
//! | connections | 50 | `redis-benchmark -c` default |
//! | keys | 10 M | `-n 10000000 -r 100000000`: 10 M SETs over a 100 M keyspace, ~9.5 M distinct |
//! | bytes per key | 312 | value sds 224 (jemalloc class of 200+4), key sds 32, robj 16, dictEntry 32, bucket 8 |
//! | per-connection buffers | 2 x 16 KiB | Redis `PROTO_IOBUF_LEN`, `PROTO_REPLY_CHUNK_BYTES` |
//! | R, read lines per request | 64 | 4 data lines (244 B SET request, 208 B GET reply) + 60 of skb/socket/wake-up state; fitted so that co-located/spread ≈ 1 / 0.77 as NUMA-ICON measured (0.75 SET, 0.78 GET) with the default 1.5x remote latency |
//! | S, written lines per request | 15 | 4 data lines + 11 of the sender's own skb and socket |
//! | K, keyspace lines | 5 (GET), 9 (SET) | the 5 dependent misses of a lookup; SET also writes the 4-line value |
//! | CPU per request | 1.6 µs server, 1.6 µs client | so that a co-located request takes ~9.5 µs at 90 ns local latency, i.e. ~105k req/s, NUMA-ICON's bound figure |
//!
//! Thread counts come from the machine: `N = min(4, cores of a node - 1)` clients (at least 1), so
//! the server and all clients fit on the cores of one node and "all on one node" is a placement
//! that exists; more clients would not help a single-threaded server.
//!
//! # Measured (default machine parameters, `autonuma-2s12c-24g`, seed 1)
//!
//! | run | SET req/s | GET req/s | NUMA-ICON |
//! |---|---|---|---|
//! | server + clients bound to node 0 | 108.9k | 112.8k | 104.8k / 101.8k (adaptive), 103.9k / 101.9k (all on node 0) |
//! | server on node 0, clients on node 1 | 83.1k | 86.2k | 78.6k / 79.7k (stock Linux) |
//! | spread / together | 0.763 | 0.764 | 0.75 / 0.78 |
//!
//! Unbound (`default`), the load balancer spreads the two processes over both nodes and the run
//! lands on the spread figure; `crates/sim/tests/workloads_behaviour.rs` checks the ratio and the
//! co-located rate against the published ones (within 15%).
//!
//! # Units
//!
//! Work unit `requests`; throughput in requests per simulated second. Sizes in bytes.
//!
//! # Limits
//!
//! Coherence is modelled through placement: a read of the other side's buffer costs the latency of
//! the node the buffer lives on. Cache-to-cache transfers faster than DRAM, and the kernel's own
//! loopback path beyond these lines, are not modelled. Pipelining (`-P`) is modelled by dividing the
//! per-request metadata lines by the pipeline depth (a batch shares one wake-up and one skb).

use numapilot_topology::Topology;

use super::file::{Named, Shape};
use super::{
    Access, FirstTouch, MemPolicySpec, Pace, Pattern, ProcessSpec, RegionSpec, Slice, Spec, ThreadGroup, Work,
};

/// Cache line, bytes.
const LINE: f64 = 64.0;

/// Redis's per-connection query buffer and reply buffer, bytes each (`PROTO_IOBUF_LEN`,
/// `PROTO_REPLY_CHUNK_BYTES`).
pub const CONN_BUFFER_BYTES: u64 = 16 << 10;

/// Memory per key for 200-byte values, bytes (see the module table).
pub const BYTES_PER_KEY: u64 = 312;

/// The command the benchmark sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `SET key value`: the request carries the value, the reply is `+OK`; the keyspace grows.
    Set,
    /// `GET key`: the reply carries the value; the keyspace is loaded beforehand.
    Get,
}

/// Parameters of a client/server run.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientServer {
    /// The command.
    pub op: Op,
    /// Benchmark client threads.
    pub clients: u32,
    /// Connections (`-c`), spread over the client threads.
    pub connections: u32,
    /// Value size, bytes (`-d`).
    pub value_bytes: u32,
    /// Distinct keys the run ends with.
    pub keys: u64,
    /// Requests per round trip (`-P`).
    pub pipeline: u32,
    /// Simulated duration, s.
    pub duration_s: f64,
}

impl ClientServer {
    /// The seeds' run (`-c 50 -d 200 -n 10000000 -r 100000000`, single pipeline) sized for `topo`.
    pub fn for_machine(topo: &Topology, op: Op) -> ClientServer {
        let shape = Shape::of(topo);
        // The keyspace must fit beside everything else on one node: at most a quarter of it.
        let max_keys = (shape.node_bytes / 4 / BYTES_PER_KEY).max(1);
        ClientServer {
            op,
            clients: shape.node_cores.saturating_sub(1).clamp(1, 4),
            connections: 50,
            value_bytes: 200,
            keys: 10_000_000u64.min(max_keys),
            pipeline: 1,
            duration_s: 20.0,
        }
    }

    /// The workload.
    pub fn spec(&self) -> Spec {
        let value_lines = (self.value_bytes as f64 / LINE).ceil().max(1.0);
        let p = self.pipeline.max(1) as f64;
        // Lines read from the other side per request: the data plus the sender's metadata.
        let meta_read = 60.0 / p;
        let meta_write = 11.0 / p;
        let (req_data, reply_data) = match self.op {
            // "*3 $3 SET $16 key $200 value" ~ 244 B; "+OK" is part of a line.
            Op::Set => (value_lines, 1.0),
            // "*2 $3 GET $16 key" ~ 36 B; "$200 value" ~ 208 B.
            Op::Get => (1.0, value_lines),
        };
        let keyspace_lines = match self.op {
            Op::Set => 5.0 + value_lines,
            Op::Get => 5.0,
        };
        let server_reads = req_data + meta_read;
        let server_writes = reply_data + meta_write;
        let client_writes = req_data + meta_write;
        let client_reads = reply_data + meta_read;
        let keyspace = self.keys.max(1) * BYTES_PER_KEY;
        let buffers = self.connections.max(1) as u64 * 2 * CONN_BUFFER_BYTES;
        let keyspace_region = RegionSpec {
            name: "keyspace".into(),
            bytes: keyspace,
            touch: FirstTouch::Main,
            policy: None,
            // SET fills the keyspace as it runs (from a tenth, reaching all keys at the end of the
            // run at the co-located rate); GET reads a loaded one.
            grow: match self.op {
                Op::Set => Some(super::Growth {
                    initial_bytes: keyspace / 10,
                    bytes_per_s: ((keyspace - keyspace / 10) as f64 / self.duration_s).round(),
                }),
                Op::Get => None,
            },
        };
        let server = ProcessSpec {
            cpuset: None,
            name: "redis-server".into(),
            count: 1,
            start_s: 0.0,
            cpus: None,
            policy: MemPolicySpec::Local,
            regions: vec![
                keyspace_region,
                RegionSpec { name: "reply".into(), bytes: buffers, touch: FirstTouch::Main, policy: None, grow: None },
            ],
            threads: vec![ThreadGroup {
                name: "server".into(),
                count: 1,
                cpus: None,
                work: Work {
                    total: None,
                    unit: "requests".into(),
                    bytes_per_unit: (server_reads + server_writes + keyspace_lines) * LINE,
                    compute_ns: 1600.0,
                    duty: 1.0,
                },
                accesses: vec![
                    random("redis-benchmark/req", server_reads, false),
                    random("reply", server_writes, true),
                    random("keyspace", keyspace_lines, self.op == Op::Set),
                ],
            }],
            phases: vec![],
            launch_advice: false,
        };
        let clients = ProcessSpec {
            cpuset: None,
            name: "redis-benchmark".into(),
            count: 1,
            start_s: 0.0,
            cpus: None,
            policy: MemPolicySpec::Local,
            regions: vec![RegionSpec {
                name: "req".into(),
                bytes: buffers,
                touch: FirstTouch::Threads,
                policy: None,
                grow: None,
            }],
            threads: vec![ThreadGroup {
                name: "client".into(),
                count: self.clients.max(1),
                cpus: None,
                work: Work {
                    total: None,
                    unit: "requests".into(),
                    bytes_per_unit: (client_reads + client_writes) * LINE,
                    compute_ns: 1600.0,
                    duty: 1.0,
                },
                accesses: vec![
                    Access {
                        region: "req".into(),
                        weight: client_writes,
                        slice: Slice::PerThread,
                        pattern: Pattern::Random,
                        write: true,
                    },
                    random("redis-server/reply", client_reads, false),
                ],
            }],
            launch_advice: false,
            phases: vec![],
        };
        let op = match self.op {
            Op::Set => "SET",
            Op::Get => "GET",
        };
        Spec {
            name: format!("redis-{}", op.to_ascii_lowercase()),
            description: format!(
                "Redis-like server (1 thread) and redis-benchmark ({} threads, {} connections) on loopback: {op}, \
                 -d {} -P {}, {} keys; throughput in requests/s",
                self.clients.max(1),
                self.connections,
                self.value_bytes,
                self.pipeline.max(1),
                self.keys
            ),
            processes: vec![server, clients],
            duration_s: Some(self.duration_s),
            // One client request per server request: the server serves what the clients send, the
            // clients send what the server answers.
            pacing: vec![Pace { a: "redis-server/server".into(), b: "redis-benchmark/client".into(), ratio: 1.0 }],
            // Each request is counted by the server and by a client: the figure is the server's.
            throughput_from: Some(vec!["redis-server".into()]),
            throughput_unit: Some("requests/s".into()),
        }
    }
}

fn random(region: &str, lines: f64, write: bool) -> Access {
    Access { region: region.into(), weight: lines, slice: Slice::Whole, pattern: Pattern::Random, write }
}

/// `redis-benchmark -t set -d 200` against a Redis-like server, sized for `topo`.
pub fn redis_set(topo: &Topology) -> Spec {
    ClientServer::for_machine(topo, Op::Set).spec()
}

/// `redis-benchmark -t get -d 200` against a loaded Redis-like server, sized for `topo`.
pub fn redis_get(topo: &Topology) -> Spec {
    ClientServer::for_machine(topo, Op::Get).spec()
}

/// The named workloads of this module: (name, one line, constructor).
pub fn catalog() -> Vec<Named> {
    vec![
        Named::new(
            "redis-set",
            "Redis-like server + benchmark clients exchanging SET requests through shared buffers",
            redis_set,
        ),
        Named::new(
            "redis-get",
            "Redis-like server + benchmark clients exchanging GET requests through shared buffers",
            redis_get,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_on_the_two_node_box() {
        let topo = Topology::preset("autonuma-2s12c-24g").unwrap();
        let s = redis_set(&topo);
        s.validate().unwrap();
        // 6 cores per node: 4 client threads, 1 server thread.
        assert_eq!(s.thread_count(), 5);
        let server = &s.processes[0];
        assert_eq!(server.regions[0].bytes, 10_000_000 * BYTES_PER_KEY);
        assert_eq!(server.regions[1].bytes, 50 * 2 * CONN_BUFFER_BYTES);
        // The server's reads of the clients' buffer are the bulk of its traffic.
        let w: f64 = server.threads[0].accesses.iter().map(|a| a.weight).sum();
        assert!(server.threads[0].accesses[0].weight / w > 0.6);
        assert_eq!(s.pacing.len(), 1);
    }

    #[test]
    fn get_moves_the_value_in_the_reply() {
        let topo = Topology::preset("autonuma-2s12c-24g").unwrap();
        let set = redis_set(&topo);
        let get = redis_get(&topo);
        // SET: the client writes the 4-line value; GET: the server does.
        assert!(set.processes[1].threads[0].accesses[0].weight > get.processes[1].threads[0].accesses[0].weight);
        assert!(get.processes[0].threads[0].accesses[1].weight > set.processes[0].threads[0].accesses[1].weight);
        assert!(get.processes[0].regions[0].grow.is_none());
        assert!(set.processes[0].regions[0].grow.is_some());
    }

    #[test]
    fn keyspace_fits_a_quarter_of_a_small_node() {
        let topo = Topology::preset("ring-8n64c").unwrap();
        let shape = Shape::of(&topo);
        let s = ClientServer::for_machine(&topo, Op::Get).spec();
        assert!(s.processes[0].regions[0].bytes <= shape.node_bytes / 4);
        let p = ClientServer { pipeline: 16, ..ClientServer::for_machine(&topo, Op::Get) }.spec();
        assert!(p.processes[0].threads[0].work.bytes_per_unit < s.processes[0].threads[0].work.bytes_per_unit);
    }
}
