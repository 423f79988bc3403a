#!/usr/bin/env bash
# Benchmark of one full observation (every process and thread, numa_maps included) with 1,000 processes
# x 10 threads, against Debian's `numastat -p PATTERN` over the same processes. Prints median wall time,
# CPU time and peak RSS of a fresh process doing one observation, and the ratio to numastat.
#
# usage: scripts/bench-observe.sh [--procs N] [--threads N] [--runs N] [--workers N] [--no-numastat]
# Needs: cargo, and numastat (Debian package numactl; scripts/setup.sh installs it) unless --no-numastat.
# Wall-clock numbers depend on the machine and on what else runs; the load average is printed with them.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p numapilot-observe --example observe_bench
exec target/release/examples/observe_bench "$@"
