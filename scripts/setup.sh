#!/usr/bin/env bash
# Installs what numapilot's build, tests and multi-node rig need, on Debian (12 or later) as root. Idempotent: on a
# prepared machine it only checks. Usage: scripts/setup.sh   (scripts/test.sh runs it first)
#
#   build:  build-essential pkg-config, Rust >= 1.85 via rustup into ~/.cargo when cargo is missing
#   charts: fonts-dejavu-core (DejaVu Sans, loaded at run time by the simulator's PNG charts)
#   bench:  time (GNU time: peak memory in scripts/bench-sim.sh)
#   docs:   groff-base (the manual page tests format every page `numapilot man` writes, as man does), mandoc (its
#           -Tlint checks them too; 1.4 MB), bash-completion zsh fish (the completion tests run each shell's
#           completion of `numapilot run` for real; without them those tests skip, saying so)
#   rig:    qemu-system-x86 (TCG emulation), busybox-static (guest userland), cpio, numactl + numad (reference tools,
#           also copied into the guests), xz-utils (kernel modules), binutils (objcopy strips our binaries), apt's
#           own `apt-get download` fetches the guest kernel (done by the rig itself, on first use, into rig/cache)
#   lint:   Debian's prometheus package, downloaded and unpacked into rig/cache/prometheus, never installed (its
#           promtool checks the daemon's metrics; installing would start a Prometheus server)
#   ebpf:   clang (compiles the wake-up tracer's BPF program), libbpf-dev libelf-dev zlib1g-dev (the system libbpf
#           and the libraries it links; crates/ebpf's `ebpf` feature, built by the rig tests)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential pkg-config ca-certificates curl
  qemu-system-x86 busybox-static cpio numactl numad xz-utils binutils fonts-dejavu-core time groff-base
  mandoc bash-completion zsh fish clang libbpf-dev libelf-dev zlib1g-dev)
need=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: missing Debian packages: ${need[*]}; run as root" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  echo "setup: installing ${need[*]}"
  # The lists may be missing or stale on a fresh machine: refresh them when an install fails.
  apt-get install -y -q --no-install-recommends "${need[@]}" ||
    { apt-get update -q && apt-get install -y -q --no-install-recommends "${need[@]}"; }
fi

if ! command -v cargo >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
  echo "setup: installing Rust with rustup (stable, minimal profile, rustfmt + clippy)"
  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs |
    sh -s -- -y --profile minimal --component rustfmt,clippy
fi
# promtool (`promtool check metrics`, Prometheus's own linter of the exposition format) for the metrics tests.
# Unpacked into a temporary directory and moved into place whole, so an interrupted run leaves nothing half there;
# what is there is judged by whether it runs. Root is needed only to refresh apt's package lists.
promtool_dir=rig/cache/prometheus
if ! "$promtool_dir/usr/bin/promtool" --version >/dev/null 2>&1; then
  echo "setup: fetching Debian's prometheus package for its promtool (unpacked into $promtool_dir, not installed)"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # apt fetches as its unprivileged _apt user when it may write the directory (no "unsandboxed" warning).
  chmod 1777 "$tmp"
  if ! (cd "$tmp" && apt-get download -q prometheus); then
    if [ "$(id -u)" != 0 ]; then
      echo "setup: apt-get download prometheus failed and refreshing the package lists needs root" >&2
      exit 1
    fi
    apt-get update -q
    (cd "$tmp" && apt-get download -q prometheus)
  fi
  dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/unpacked"
  mkdir -p "$tmp/promtool/usr/bin"
  mv "$tmp/unpacked/usr/bin/promtool" "$tmp/promtool/usr/bin/promtool"
  mkdir -p "$(dirname "$promtool_dir")"
  rm -rf "$promtool_dir"
  mv "$tmp/promtool" "$promtool_dir"
  rm -rf "$tmp"
  trap - EXIT
fi
"$promtool_dir/usr/bin/promtool" --version >/dev/null

export PATH="$HOME/.cargo/bin:$PATH"
for c in cargo rustfmt cargo-clippy; do
  command -v "$c" >/dev/null 2>&1 || {
    echo "setup: $c not found after setup (rustup component add rustfmt clippy?)" >&2
    exit 1
  }
done
echo "setup: ok ($(cargo --version))"
