#!/usr/bin/env bash
# All tests: format and lint checks, unit, fixture, CLI and doc tests, and the multi-node rig tests (QEMU guests with
# 2, 4 and 8 NUMA nodes; about 1-2 minutes on a 2-core machine). Installs what it needs (Debian, as root).
# Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
# The rig tests skip themselves without this; here they must run (and fail if QEMU or the kernel cannot be had).
export NUMAPILOT_RIG=1
# The byte-for-byte comparisons with Debian numactl/numastat must run, not skip (setup.sh installs them).
export NUMAPILOT_REQUIRE_NUMACTL=1
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace --all-targets
cargo test --workspace --doc
