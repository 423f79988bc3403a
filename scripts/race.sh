#!/usr/bin/env bash
# Issue 5's race on real kernels: in the rig's 2-node and 4-node guests (Debian's 6.12 kernel under QEMU),
# numa01-like (two processes) and numa02-like (one process) `numapilot bench` runs with all memory first-touched on
# node 0, under (a) no balancing, (b) the kernel's NUMA balancing, (c) Debian's numad, (d) the numapilot daemon.
# Prints the table (time to 90% local per process, pages migrated, final local %) and a verdict per goal, judged
# from the guest's own numa_maps/task stat/vmstat reads, and rewrites README.md's race section.
# Usage: scripts/race.sh [--reps N] [--guests 2node,4node] [--no-readme] [--strict] [--json FILE]
#        scripts/race.sh --guests 4node --tests numa01 --balancers kernel,numapilot   (a subset; README untouched)
#        scripts/race.sh --short      (the CI version: 2-node guest, daemon only; README untouched)
#        scripts/race.sh --sample-ms 1000 --recorder-ms 1000 ...   (the judge's sampler's cadence, default 100 ms,
#                                     and the bench recorder's, default 1000 ms; README untouched with others)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
cargo build -q -p numapilot-rig --bin numapilot-rig
exec target/debug/numapilot-rig race "$@"
