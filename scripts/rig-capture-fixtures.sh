#!/usr/bin/env bash
# Regenerates the guest fixtures fixtures/rig-<kernel major.minor>-{2node,4node,8node}: boots each rig guest (see
# crates/rig) with rig/scenarios/capture.sh, which runs scripts/capture-fixtures.sh inside it, and unpacks the result
# over the old directory. With --with-host, also refreshes this machine's fixture fixtures/host-<major.minor> (its
# pids change, so only when the host fixture should change).
# Usage: scripts/rig-capture-fixtures.sh [--with-host] [PRESET...]     (as root on Debian; installs what it needs)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
host=0
if [ "${1:-}" = "--with-host" ]; then
  host=1
  shift
fi
cargo build -q -p numapilot-rig --bins
target=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
"$target/debug/numapilot-rig" capture-fixtures --out fixtures "$@"
if [ "$host" = 1 ]; then
  release=$(uname -r | cut -d. -f1,2)
  dest="fixtures/host-$release"
  tmp="fixtures/.host-$release.new"
  rm -rf "$tmp"
  scripts/capture-fixtures.sh -s -t "$target/debug/rig-toucher" "$tmp"
  rm -rf "$dest"
  mv "$tmp" "$dest"
  echo "host: $dest"
fi
