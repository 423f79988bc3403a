#!/usr/bin/env bash
# All tests: unit, fixture, CLI and multi-node rig tests. Installs what it needs (Debian, as root).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo fmt --all -- --check
cargo clippy --all-targets -- -D warnings
cargo test --workspace --all-targets
