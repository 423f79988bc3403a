#!/usr/bin/env bash
# All tests: format and lint checks, unit, fixture, CLI and doc tests, and the multi-node rig tests (QEMU guests with
# 2, 4 and 8 NUMA nodes; about 1-2 minutes on a 2-core machine). Installs what it needs (Debian, as root).
# Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
# A one-off build gains nothing from incremental caches, which were a third of the target directory's size when
# CI ran out of disk; say how much room there is, so a full disk is seen as that.
export CARGO_INCREMENTAL=0
df -h . | sed 's/^/test.sh: disk: /'
# The rig tests skip themselves without this; here they must run (and fail if QEMU or the kernel cannot be had).
export NUMAPILOT_RIG=1
# The byte-for-byte comparisons with Debian numactl/numastat must run, not skip (setup.sh installs them).
export NUMAPILOT_REQUIRE_NUMACTL=1
# The metrics are checked by Prometheus's promtool (setup.sh unpacks Debian's): that test must run too.
export NUMAPILOT_REQUIRE_PROMTOOL=1
# The cpuset tests of the daemon use the host's cpuset hierarchy (CI's host mounts one): they must run, not skip.
export NUMAPILOT_REQUIRE_CPUSET=1
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# The eBPF wake-up tracer is behind a cargo feature (it needs clang and libbpf-dev, which setup.sh installs):
# lint and test the code behind it too (the daemon's use of it included; the rig tests build it for the guests).
cargo clippy -p numapilot-ebpf -p numapilot-daemon --all-targets --features numapilot-daemon/ebpf -- -D warnings
cargo test -p numapilot-ebpf -p numapilot-daemon --features numapilot-daemon/ebpf --lib --tests
cargo test --workspace --all-targets
cargo test --workspace --doc
