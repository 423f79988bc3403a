#!/usr/bin/env bash
# The main job (until the daemon exists): boots a real Linux kernel as a 4-node NUMA machine under QEMU (two
# sockets x two dies, distances 10/11/20), shows numapilot's topology, places one workload three ways with
# `numapilot run` and shows `numapilot stat -p` for each, and judges every placement from the kernel's own files.
# Installs what it needs (Debian, as root). Usage: scripts/demo.sh [2node|4node|8node]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
cargo build -q -p numapilot-rig --bin numapilot-rig
exec target/debug/numapilot-rig demo "${1:-4node}"
