#!/usr/bin/env bash
# Simulator performance targets (issue 3): the VM mix on the 288-core NumaConnect preset for 60 simulated seconds
# under 4 policies (target: under 60 s wall, under 2 GB), and the 2-node autonuma-benchmark suite under all baselines
# (target: under 10 s wall); then the calibration table. Prints wall time and peak RSS (GNU time) for each.
# Usage: scripts/bench-sim.sh   (needs cargo; /usr/bin/time from Debian's `time` package for peak memory)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p numapilot-sim --example bench --example calibrate
for what in vm suite; do
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f "bench $what: %e s wall, %M kB peak RSS" target/release/examples/bench "$what"
  else
    target/release/examples/bench "$what"
  fi
done
target/release/examples/calibrate
