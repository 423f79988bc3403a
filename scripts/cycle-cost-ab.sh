#!/bin/bash
# Two builds of the daemon-cycle cost example compared at the same moments on one load.
#
#   scripts/cycle-cost-ab.sh OLD NEW [PAIRS]
#
# OLD and NEW are cycle_cost binaries (`cargo build --release -p numapilot-daemon --example
# cycle_cost` leaves one in target/release/examples/; copy it aside before the change). The
# machine this runs on is shared, so two runs one after the other see different noise: this
# starts the example's own load once (1,000 processes of 10 threads, 20 of them busy 5 ms of each
# 100 ms: the example's defaults, its `--child` mode of OLD's binary), then runs OLD and NEW side
# by side PAIRS times (default 3), both observing that load (`--procs 0 --cycles 30 --warmup 35`),
# and prints for each pair the load average, each build's CPU a cycle (all of it and the
# observation's), median and worst wall, and NEW / OLD of the CPU. The load is killed at the end
# (its processes die with the shell that started them). Root, as the example.
set -euo pipefail

old=${1:?usage: $0 OLD NEW [PAIRS]}
new=${2:?usage: $0 OLD NEW [PAIRS]}
pairs=${3:-3}
for b in "$old" "$new"; do
    [ -x "$b" ] || { echo "$0: not an executable: $b" >&2; exit 2; }
done
case $pairs in '' | *[!0-9]*) echo "$0: PAIRS must be a number: $pairs" >&2; exit 2 ;; esac

out=$(mktemp -d)
(
    for i in $(seq 0 999); do
        mode=sleep
        [ "$i" -lt 20 ] && mode=spin
        "$old" --child "$mode" --threads 10 --duty 5 </dev/null >/dev/null 2>&1 &
    done
    wait
) &
load=$!
trap 'kill "$load" 2>/dev/null || true; rm -rf "$out"' EXIT
# Let every child start its threads (the example waits 3 s for its own).
sleep 5

# The summary line's figures: cpu, observe cpu, median wall, worst wall.
figures() {
    tail -1 "$1" | sed -E 's/.*median wall ([0-9.]+) ms, worst wall ([0-9.]+) ms.*cpu ([0-9.]+) ms per cycle \(observe ([0-9.]+) ms.*/\3 \4 \1 \2/'
}

for i in $(seq 1 "$pairs"); do
    before=$(cut -d' ' -f1-3 /proc/loadavg)
    "$old" --procs 0 --cycles 30 --warmup 35 >"$out/old.$i" &
    a=$!
    "$new" --procs 0 --cycles 30 --warmup 35 >"$out/new.$i" &
    b=$!
    wait "$a" "$b"
    read -r oc oo om ow <<<"$(figures "$out/old.$i")"
    read -r nc no nm nw <<<"$(figures "$out/new.$i")"
    echo "pair $i (load average $before -> $(cut -d' ' -f1-3 /proc/loadavg)): CPU a cycle old $oc ms (observe $oo), new $nc ms (observe $no); median wall old $om, new $nm ms; worst wall old $ow, new $nw ms; new / old CPU $(awk -v n="$nc" -v o="$oc" 'BEGIN { printf "%.3f", n / o }'), observe $(awk -v n="$no" -v o="$oo" 'BEGIN { printf "%.3f", n / o }')"
done
