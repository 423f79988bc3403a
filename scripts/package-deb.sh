#!/usr/bin/env bash
# Builds a Debian package of numapilot: target/debian/numapilot_VERSION-1_ARCH.deb (dpkg-deb; no debhelper).
#
#   /usr/bin/numapilot                      the binary (release build unless --binary)
#   /lib/systemd/system/numapilot.service   packaging/numapilot.service, its paths /usr/bin
#   /etc/numapilot.toml                     packaging/numapilot-etc.toml, a conffile: a few lines that set no
#                                           key (the defaults) and name the full example; short and
#                                           stable, so an upgrade asks the admin nothing about it
#   /usr/share/man/man{1,5}/*.gz            every page `numapilot man --out` writes
#   /usr/share/{bash-completion,zsh,fish}   shell completions
#   /usr/share/doc/numapilot/               copyright (GPL-2.0-or-later, and every statically linked crate with its
#                                           licence; their licence files under third-party/), README.md,
#                                           docs/*.md (the operating guide, tools, simulator, tests and
#                                           history README.md links to; gzipped, as README.md),
#                                           examples/numapilot.toml (packaging/numapilot.toml, every key
#                                           at its default with what it does; uncompressed, as Debian
#                                           ships examples), examples/prometheus-rules.yml
#
# Installing does not enable or start the daemon (it changes where other processes run: an operator
# turns it on, `systemctl enable --now numapilot`); an upgrade restarts it if it was running (the stop
# restores every process it placed, the start places them again); removing stops it first (the same
# restore), and a removal dpkg undoes (abort-remove) starts it again if enabled; purging removes its journal directory and its runtime directory (the state file) too. The maintainer scripts honour DPKG_ROOT
# (an install into another root touches no service of this machine).
#
# Usage: scripts/package-deb.sh [--binary PATH] [--out DIR] [--compress xz|gzip|none]
#   --binary PATH     package this numapilot binary instead of building the release one
#   --out DIR         write the .deb there (default target/debian)
#   --compress TYPE   dpkg-deb's compression (default xz; the tests package a 60 MB debug build with none)
set -euo pipefail
cd "$(dirname "$0")/.."

binary=""
out="target/debian"
compress=xz
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="${2:?--binary needs a path}"; shift 2 ;;
    --out) out="${2:?--out needs a directory}"; shift 2 ;;
    --compress) compress="${2:?--compress needs xz, gzip or none}"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "package-deb: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
for tool in dpkg-deb dpkg objdump strip gzip; do
  command -v "$tool" >/dev/null || { echo "package-deb: $tool not found (dpkg, binutils, gzip)" >&2; exit 1; }
done
export PATH="$HOME/.cargo/bin:$PATH"
command -v cargo >/dev/null || { echo "package-deb: cargo not found (the crates' licences are read with cargo tree)" >&2; exit 1; }
# Reproducible: file times are the commit's (dpkg-deb clamps to SOURCE_DATE_EPOCH).
SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"
export SOURCE_DATE_EPOCH
if [ -z "$binary" ]; then
  # The registry's paths in panic messages are the build machine's home: mapped to a fixed one.
  registry="${CARGO_HOME:-$HOME/.cargo}/registry/src"
  RUSTFLAGS="${RUSTFLAGS:-} --remap-path-prefix=$registry=/usr/src/rust-registry" cargo build --release -q -p numapilot
  binary="${CARGO_TARGET_DIR:-target}/release/numapilot"
fi
[ -x "$binary" ] || { echo "package-deb: $binary is not an executable" >&2; exit 1; }

# The version the binary reports ("numapilot 0.1.0"), the architecture dpkg builds for.
version=$("$binary" --version | awk '{print $2}')
[ -n "$version" ] || { echo "package-deb: $binary --version gave no version" >&2; exit 1; }
arch=$(dpkg --print-architecture)
# The newest glibc symbol version the binary needs: the libc6 it depends on.
glibc=$(objdump -T "$binary" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
[ -n "$glibc" ] || { echo "package-deb: no glibc symbol versions in $binary (not a glibc binary?)" >&2; exit 1; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root="$stage/numapilot"
install -d -m 0755 "$root/DEBIAN" "$root/usr/bin" "$root/lib/systemd/system" "$root/etc" \
  "$root/usr/share/doc/numapilot" "$root/usr/share/bash-completion/completions" \
  "$root/usr/share/zsh/vendor-completions" "$root/usr/share/fish/vendor_completions.d"
install -m 0755 "$binary" "$root/usr/bin/numapilot"
# Stripped, as Debian ships binaries (the symbols of a release build are its panics' backtraces only).
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/numapilot"
# The unit as shipped names /usr/local/bin (a `cargo install` or a copy by hand); the package's is /usr/bin.
sed -e 's|/usr/local/bin/numapilot|/usr/bin/numapilot|g' \
  -e 's|^# Install: .*|# Installed by the numapilot package; turn it on with: systemctl enable --now numapilot|' \
  -e '/^#          \&\& systemctl enable --now numapilot$/d' \
  packaging/numapilot.service > "$root/lib/systemd/system/numapilot.service"
chmod 0644 "$root/lib/systemd/system/numapilot.service"
install -m 0644 packaging/numapilot-etc.toml "$root/etc/numapilot.toml"
"$binary" man --out "$stage/man" > /dev/null
for section in 1 5; do
  install -d -m 0755 "$root/usr/share/man/man$section"
  for page in "$stage/man/man$section"/*."$section"; do
    gzip -9n < "$page" > "$root/usr/share/man/man$section/$(basename "$page").gz"
  done
done
"$binary" completions bash > "$root/usr/share/bash-completion/completions/numapilot"
"$binary" completions zsh > "$root/usr/share/zsh/vendor-completions/_numapilot"
"$binary" completions fish > "$root/usr/share/fish/vendor_completions.d/numapilot.fish"
gzip -9n < README.md > "$root/usr/share/doc/numapilot/README.md.gz"
# README.md keeps a short row per command and links to docs/ for the detail (docs/daemon.md is the daemon's
# operating guide): they go beside it, under the same relative names.
install -d -m 0755 "$root/usr/share/doc/numapilot/docs"
for doc in docs/*.md; do
  gzip -9n < "$doc" > "$root/usr/share/doc/numapilot/docs/$(basename "$doc").gz"
done
install -d -m 0755 "$root/usr/share/doc/numapilot/examples"
install -m 0644 packaging/numapilot.toml packaging/prometheus-rules.yml packaging/prometheus-rules.test.yml \
  "$root/usr/share/doc/numapilot/examples/"
# Who built it: Debian's tools read DEBFULLNAME and DEBEMAIL; the default names the project.
maintainer="${DEBFULLNAME:-numapilot developers} <${DEBEMAIL:-numapilot@example.org}>"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
{
  echo "numapilot ($version-1) unstable; urgency=medium"
  echo
  echo "  * Package of numapilot $version, built from commit $commit"
  echo "    by scripts/package-deb.sh."
  echo
  echo " -- $maintainer  $(date -R -u -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)")"
} | gzip -9n > "$root/usr/share/doc/numapilot/changelog.Debian.gz"
# The crates linked into the binary (normal dependencies of the numapilot package), each with the
# licence its manifest declares; their licence and notice files are shipped beside the copyright.
crates=$(cargo tree --offline -p numapilot -e normal --prefix none --format '{p}|{l}' 2>/dev/null \
  || cargo tree -p numapilot -e normal --prefix none --format '{p}|{l}')
third="$root/usr/share/doc/numapilot/third-party"
install -d -m 0755 "$third"
{
  cat <<'EOF'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: numapilot
Comment: /usr/bin/numapilot links statically the Rust crates listed at the end, each under the licence
 its author gave it; their licence and notice files are in /usr/share/doc/numapilot/third-party/.
 Some are under Apache-2.0 only, which is compatible with version 3 of the GNU GPL: the binary as
 a whole is distributed under GPL-3.0 (numapilot's own "or any later version").

Files: *
Copyright: 2026 the numapilot developers
License: GPL-2.0-or-later
 This program is free software; you can redistribute it and/or modify it under the terms of the GNU
 General Public License as published by the Free Software Foundation; either version 2 of the
 License, or (at your option) any later version.
 .
 On Debian systems, the full texts of the GNU General Public License versions 2 and 3 can be found
 in /usr/share/common-licenses/GPL-2 and /usr/share/common-licenses/GPL-3.

Files: third-party/*
Copyright: the authors of each crate, as its licence files say
License: other
 The statically linked crates (name version | licence):
EOF
  echo "$crates" | sed 's/ (\*)$//' | LC_ALL=C sort -u | while IFS='|' read -r what licence; do
    [ -n "$what" ] || continue
    licence=${licence% (\*)}   # cargo tree's mark of a crate listed before
    case "$what" in *"(/"*) continue ;; esac   # this workspace's own crates
    set -- $what
    name=$1 ver=${2#v}
    echo " $name $ver | ${licence:-see its files}"
    src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"$name-$ver" 2>/dev/null | head -1)
    [ -n "$src" ] || continue
    for f in "$src"/LICEN[CS]E* "$src"/COPYING* "$src"/NOTICE* "$src"/COPYRIGHT*; do
      [ -f "$f" ] || continue
      install -d -m 0755 "$third/$name-$ver"
      install -m 0644 "$f" "$third/$name-$ver/"
    done
  done
} > "$root/usr/share/doc/numapilot/copyright"
find "$root/usr" "$root/lib" "$root/etc" -type f -exec chmod go-w {} +

installed_kb=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
# libgcc_s (unwinding) when the binary links it: Debian's libgcc-s1.
libgcc=""
# (grep reads all of it: -q would end the pipe early, objdump dies of SIGPIPE and pipefail says no.)
if objdump -p "$binary" | grep 'NEEDED *libgcc_s\.so\.1' >/dev/null; then libgcc=", libgcc-s1 (>= 4.2)"; fi
# numactl is suggested, not recommended: nothing in the package runs it (`numapilot run` is its
# compatible launcher, the daemon places with system calls).
cat > "$root/DEBIAN/control" <<EOF
Package: numapilot
Version: $version-1
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $installed_kb
Depends: libc6 (>= $glibc)$libgcc, init-system-helpers (>= 1.52)
Suggests: numactl, numad, fonts-dejavu-core
Section: admin
Priority: optional
Description: adaptive NUMA placement daemon and tools
 numapilot samples how threads touch memory, learns which threads belong
 together, models each node's load and interference, and places groups of
 threads and their memory on NUMA nodes while the machine runs.
 .
 Beside the daemon (numapilot.service, not enabled on install): the topology,
 numastat-style statistics, a numactl-compatible launcher, numad-style launch
 advice, a NUMA machine simulator and autonuma-benchmark as real programs.
EOF
echo /etc/numapilot.toml > "$root/DEBIAN/conffiles"
# Checksums of every file but the conffile (dpkg --verify; dpkg keeps the conffile's own).
(cd "$root" && find usr lib -type f | LC_ALL=C sort | xargs md5sum) > "$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/md5sums"

cat > "$root/DEBIAN/postinst" <<'EOF'
#!/bin/sh
# numapilot postinst: systemd learns the unit; an upgrade restarts a running daemon (its stop restores
# every process it placed). A first install enables nothing: the daemon changes where other processes
# run, so an operator turns it on. When dpkg undoes a failed upgrade, removal or deconfiguration
# (abort-upgrade, abort-remove, abort-deconfigure) the old package's postinst does the same, as
# debhelper's systemd snippets do; after a failed removal, whose prerm stopped the daemon, it is
# started again if enabled (deb-systemd-invoke starts no disabled unit).
set -e
case "$1" in
  configure | abort-upgrade | abort-remove | abort-deconfigure) ;;
  *) echo "numapilot postinst: unknown action '$1'" >&2; exit 1 ;;
esac
# The enablement is recorded (not made) with deb-systemd-helper, so a purge removes one the operator
# made; an enabled unit gets the links a changed unit adds.
if [ -z "${DPKG_ROOT:-}" ] && command -v deb-systemd-helper >/dev/null; then
  if deb-systemd-helper debian-installed numapilot.service \
    && deb-systemd-helper --quiet was-enabled numapilot.service; then
    deb-systemd-helper enable numapilot.service >/dev/null || true
  fi
  deb-systemd-helper update-state numapilot.service >/dev/null || true
fi
if [ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ]; then
  systemctl --system daemon-reload >/dev/null || true
  if [ "$1" = abort-remove ]; then
    deb-systemd-invoke start numapilot.service >/dev/null || true
  elif [ -n "$2" ]; then
    deb-systemd-invoke try-restart numapilot.service >/dev/null || true
  else
    echo "numapilot: installed, not started; to place processes: systemctl enable --now numapilot"
  fi
fi
exit 0
EOF
cat > "$root/DEBIAN/prerm" <<'EOF'
#!/bin/sh
# numapilot prerm: on removal (remove, and remove in-favour of a conflicting package) the daemon is
# stopped first; its SIGTERM puts every process it placed back. An upgrade (upgrade, and the new
# package's failed-upgrade after the old prerm failed) leaves it running: the new postinst restarts
# it. Deconfiguration (deconfigure in-favour, for a package that breaks this one) leaves it running
# too, as debhelper's systemd snippets do; the postinst's abort-deconfigure restarts it.
set -e
case "$1" in
  remove)
    if [ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ]; then
      deb-systemd-invoke stop numapilot.service >/dev/null 2>&1 || true
    fi
    ;;
  upgrade | failed-upgrade | deconfigure) ;;
  *) echo "numapilot prerm: unknown action '$1'" >&2; exit 1 ;;
esac
exit 0
EOF
cat > "$root/DEBIAN/postrm" <<'EOF'
#!/bin/sh
# numapilot postrm: systemd forgets the unit when its file has gone or changed back (remove,
# abort-install, abort-upgrade, disappear: another package replaced every file); a purge removes the
# journal directory, the runtime directory (the unit preserves it across stops: the state file, the
# socket, the lock) and the unit's enablement. An upgrade (upgrade, and the new package's
# failed-upgrade after the old postrm failed) leaves systemd to the new postinst, which reloads it.
set -e
case "$1" in
  remove | abort-install | abort-upgrade | disappear)
    if [ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ]; then
      systemctl --system daemon-reload >/dev/null || true
    fi
    ;;
  purge)
    rm -rf "${DPKG_ROOT:-}/var/log/numapilot" "${DPKG_ROOT:-}/run/numapilot"
    if [ -z "${DPKG_ROOT:-}" ] && command -v deb-systemd-helper >/dev/null; then
      deb-systemd-helper purge numapilot.service >/dev/null || true
    fi
    ;;
  upgrade | failed-upgrade) ;;
  *) echo "numapilot postrm: unknown action '$1'" >&2; exit 1 ;;
esac
exit 0
EOF
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm" "$root/DEBIAN/postrm"

mkdir -p "$out"
deb="$out/numapilot_${version}-1_${arch}.deb"
case "$compress" in xz|gzip|none) ;; *) echo "package-deb: --compress $compress: xz, gzip or none" >&2; exit 2 ;; esac
dpkg-deb --root-owner-group -Z"$compress" --build "$root" "$deb" > /dev/null
echo "$deb"
