#!/usr/bin/env bash
# The main job:
#  1. boots a real Linux kernel as a 4-node NUMA machine under QEMU (two sockets x two dies, distances 10/11/20),
#     shows numapilot's topology, places one workload three ways with `numapilot run`, shows `numapilot stat -p`
#     for each, and judges every placement from the kernel's own files;
#  2. the race on a real kernel: a 2-node guest runs autonuma-benchmark's numa01 and numa02 as real programs
#     (`numapilot bench`, all memory first-touched on node 0) under no balancing, the kernel's NUMA balancing,
#     Debian's numad and the numapilot daemon, and prints time to 90% local, pages migrated and final local % per
#     case, judged from the guest's own numa_maps (scripts/race.sh runs the full 2- and 4-node comparison);
#  3. races the placement policies in the simulator on the 2-socket box of the autonuma-benchmark runs: numa01
#     (two processes whose memory starts on one node) and a Redis server with its clients, under no balancing,
#     HARD_BIND, the kernel's NUMA balancing (AutoNUMA model), numad and numapilot's adaptive placement, and writes
#     the convergence charts (memory per node over time) under demo-out/.
# Installs what it needs (Debian, as root). Usage: scripts/demo.sh [2node|4node|8node]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
cargo build -q -p numapilot-rig --bin numapilot-rig
target/debug/numapilot-rig demo "${1:-4node}"

echo
echo "== the race on a real kernel: numapilot's daemon against the kernel's NUMA balancing and numad (2-node guest)"
# --no-readme: the demonstration prints its table and leaves README.md alone (scripts/race.sh rewrites it).
target/debug/numapilot-rig race --guests 2node --no-readme

echo
echo "== simulated race: numapilot against the kernel's policies and numad (same machine, workload and seeds)"
cargo build -q --release --bin numapilot
sim=target/release/numapilot
mkdir -p demo-out
race() {
    echo "-- $1 on autonuma-2s12c-24g (2 sockets x 12 cores, 24 GB)"
    "$sim" sim --machine autonuma-2s12c-24g --workload "$1" "${@:2}" \
        --policy default,hard-bind,autonuma,numad,numapilot --seeds 2 --out "demo-out/$1"
}
race numa01
race redis-set --duration 20
echo "charts: demo-out/*/charts/ (SVG and PNG); full tables: demo-out/*/table.txt"
