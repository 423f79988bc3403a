#!/usr/bin/env bash
# Installs the toolchain and Debian packages numapilot's build, tests and rig need. Idempotent.
set -euo pipefail
need=()
for p in build-essential pkg-config; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ "${#need[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q "${need[@]}"
fi
if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    echo "setup: cargo not found; install Rust (rustup) first" >&2
    exit 1
  fi
fi
