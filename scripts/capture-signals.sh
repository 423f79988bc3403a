#!/bin/sh
# capture-signals.sh: real inputs for the live-signal parsers and `numapilot replay`, captured on this machine.
#
# usage: capture-signals.sh OUTDIR
#   OUTDIR/perf/page-faults.script   `perf script -F pid,tid,cpu,time,addr,data_src,phys_addr` of a real
#                                    `perf record -e page-faults -c 16 -d --phys-data --sample-cpu` of two instances of
#                                    scripts/signals-workload.c run at once (software event: this host has no PMU, so no
#                                    weight column; perf refuses `-F weight` for events recorded without it)
#   OUTDIR/perf/cmd.txt              the commands, perf and kernel versions, the workload pids
#   OUTDIR/root/proc/net/{tcp,tcp6,unix}  the socket tables (under root/, a root for the readers; not a top-level proc/,
#                                    which the per-task fixture tests would take for a capture-fixtures.sh directory)
#                                    while one loopback TCP connection and one unix socketpair exist
#   OUTDIR/expected/sockets.txt      the inodes of both ends of that connection (from /proc/PID/fd), for the tests
#
# Needs: perf (Debian linux-perf), gcc, python3. Runs as root (perf_event_paranoid 2 otherwise refuses addresses).
set -eu
[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
out=$1
here=$(cd "$(dirname "$0")" && pwd)
[ ! -e "$out" ] || [ -z "$(ls -A "$out")" ] || { echo "$out exists and is not empty" >&2; exit 1; }
mkdir -p "$out/perf" "$out/root/proc/net" "$out/expected"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

gcc -O1 -pthread -o "$tmp/workload" "$here/signals-workload.c"
perf record -q -e page-faults -c 16 -d --phys-data --sample-cpu -o "$tmp/pf.data" -- \
	sh -c "'$tmp/workload' & '$tmp/workload'; wait" >"$tmp/pids.txt"
perf script -i "$tmp/pf.data" -F pid,tid,cpu,time,addr,data_src,phys_addr >"$out/perf/page-faults.script"
{
	echo "perf record -e page-faults -c 16 -d --phys-data --sample-cpu -- sh -c 'workload & workload; wait'"
	echo "perf script -F pid,tid,cpu,time,addr,data_src,phys_addr"
	echo "workload: scripts/signals-workload.c (4 threads, pairs 0+1 and 2+3 share one 2 MiB slice each)"
	echo "workload pids: $(tr '\n' ' ' <"$tmp/pids.txt")"
	echo "perf: $(perf --version)"
	echo "kernel: $(uname -r) $(uname -m)"
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$out/perf/cmd.txt"

# One loopback TCP connection and one unix socketpair held open by a python process while the tables are copied.
python3 - "$out" <<'PY'
import os, socket, sys
out = sys.argv[1]
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
c = socket.create_connection(l.getsockname()); s, _ = l.accept()
a, b = socket.socketpair()
for name in ("tcp", "tcp6", "unix"):
    with open(f"/proc/net/{name}", "rb") as f, open(f"{out}/root/proc/net/{name}", "wb") as g:
        g.write(f.read())
ino = lambda x: os.fstat(x.fileno()).st_ino
with open(f"{out}/expected/sockets.txt", "w") as f:
    f.write(f"tcp {ino(c)} {ino(s)} {c.getsockname()[1]} {s.getsockname()[1]}\n")
    f.write(f"unix {ino(a)} {ino(b)}\n")
PY
echo "captured into $out"
