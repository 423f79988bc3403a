#!/bin/sh
# capture-fixtures.sh: copy the sysfs/procfs files numapilot reads, plus the outputs of the real Debian tools taken at
# the same moment, into a fixture directory (layout: notes in the repo's fixtures/README.md).
#
# usage: capture-fixtures.sh [-s] [-t TOUCHER] OUTDIR [PID...]
#        capture-fixtures.sh -r FIXTURE
#   OUTDIR      fixture directory to create (must not exist yet, or be empty)
#   PID...      processes whose /proc/PID files (and their threads) are captured, with `numastat -p PID` for each
#   -s          also start two sample processes, capture them, and stop them again:
#                 * a memory holder under `numactl --interleave=all` (memory spread over every node), which is
#                   TOUCHER (default: rig-toucher from PATH) with 8 MiB and 3 threads, or a shell holding a large
#                   variable when no toucher exists;
#                 * a process whose comm is "a (b) c" (spaces and parentheses), a copy of sleep where sleep is a real
#                   program, else a shell that renamed itself through /proc/self/comm (busybox, where sleep is an
#                   applet chosen by argv[0]).
#   -t TOUCHER  path of the memory-toucher program used by -s
#   -r FIXTURE  re-run numactl --hardware, numastat, -m and -n on an existing FIXTURE's own node files (frozen, as
#               below) and rewrite those expected/ files, keeping everything else (pids, process files); only on the
#               machine and kernel that captured it (checked against cmd.txt), whose page and huge page sizes the
#               tools also read. For fixtures captured before the tables were frozen.
#
# POSIX sh on purpose: it runs on the host (dash/bash) and inside the rig guests (busybox ash).
# Files that do not exist on a kernel (PSI off, no NUMA balancing, no cache index3) are skipped, never an error; so is a
# process that exits while it is being copied. The script only reads the system; the processes it starts are its own
# and are stopped on exit.
set -eu

usage() {
	echo "usage: $0 [-s] [-t TOUCHER] OUTDIR [PID...] | -r FIXTURE" >&2
	exit 2
}

spawn=0
toucher=""
refreeze=""
while getopts st:r: opt; do
	case $opt in
	s) spawn=1 ;;
	t) toucher=$OPTARG ;;
	r) refreeze=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))

# frozen DIR CMD...: CMD in a private mount namespace where /sys/devices/system/node is DIR (a captured copy).
frozen() {
	_fd=$1
	shift
	unshare -m sh -c 'mount --bind "$0" /sys/devices/system/node && exec "$@"' "$_fd" "$@"
}

if [ -n "$refreeze" ]; then
	[ $# -eq 0 ] || usage
	fx=$(cd "$refreeze" && pwd)
	want=$(sed -n 's/^kernel: //p' "$fx/expected/cmd.txt")
	if [ "$want" != "$(uname -r)" ]; then
		echo "capture-fixtures: $refreeze was captured on kernel '$want', this is $(uname -r); not re-running" >&2
		exit 1
	fi
	if ! frozen "$fx/sys/devices/system/node" true; then
		echo "capture-fixtures: cannot bind-mount in a private mount namespace (unshare -m, mount --bind)" >&2
		exit 1
	fi
	frozen "$fx/sys/devices/system/node" numactl --hardware >"$fx/expected/numactl-hardware.txt" 2>&1
	frozen "$fx/sys/devices/system/node" numastat >"$fx/expected/numastat.txt" 2>&1
	frozen "$fx/sys/devices/system/node" numastat -m >"$fx/expected/numastat-m.txt" 2>&1
	frozen "$fx/sys/devices/system/node" numastat -n >"$fx/expected/numastat-n.txt" 2>&1
	sed -i '/^system-tables: /,/^  /d' "$fx/expected/cmd.txt"
	{
		echo "system-tables: frozen   (numactl --hardware, numastat, -m, -n re-run $(date -u +%Y-%m-%d) by capture-fixtures.sh -r"
		echo "  with this fixture's sys/devices/system/node bind-mounted over /sys/devices/system/node: the files' figures exactly)"
	} >>"$fx/expected/cmd.txt"
	echo "capture-fixtures: re-ran the system tables of $refreeze on its own node files"
	exit 0
fi

[ $# -ge 1 ] || usage
out=$1
shift

for tool in numactl numastat; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "capture-fixtures: $tool not found (Debian package numactl); it is needed for expected/" >&2
		exit 1
	fi
done
if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
	echo "capture-fixtures: $out exists and is not empty; refusing to mix two captures" >&2
	exit 1
fi
mkdir -p "$out/expected"

# --- helpers -----------------------------------------------------------------------------------------------------

# Files are gathered into $files (kernel paths never contain spaces) and copied with ONE `cp --parents` (GNU and
# busybox both have it): a fork+exec per file costs ~20 ms under emulation, ~300 files would take seconds and the
# copies would be further apart in time. cp reads to EOF, so /proc files (size 0) and sysfs files (size 4096) copy
# right. An unreadable file is reported by cp and left out.
files=""
add() {
	for f in "$@"; do
		[ -f "$f" ] && files="$files $f"
	done
	return 0
}
flush() {
	if [ -n "$files" ]; then
		set -f
		# shellcheck disable=SC2086 # word splitting of the file list is the point
		cp --parents $files "$out" || true
		set +f
	fi
	files=""
}

# pause: sleep a tenth of a second where sleep accepts fractions (GNU, busybox), else one second.
pause() {
	sleep 0.1 2>/dev/null || sleep 1
}

started=""
tmp=""
cleanup() {
	for p in $started; do
		kill "$p" 2>/dev/null || true
	done
	for p in $started; do
		wait "$p" 2>/dev/null || true
	done
	if [ -n "$tmp" ]; then
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- sample processes (-s) ---------------------------------------------------------------------------------------

if [ "$spawn" = 1 ]; then
	tmp=$(mktemp -d)
	if [ -z "$toucher" ] && command -v rig-toucher >/dev/null 2>&1; then
		toucher=$(command -v rig-toucher)
	fi
	if [ -n "$toucher" ]; then
		[ -x "$toucher" ] || {
			echo "capture-fixtures: toucher $toucher is not executable" >&2
			exit 1
		}
		numactl --interleave=all "$toucher" --mb 8 --threads 3 --ready "$tmp/ready" &
		started="$started $!"
		i=0
		while [ ! -f "$tmp/ready" ]; do
			i=$((i + 1))
			if [ $i -gt 300 ]; then
				echo "capture-fixtures: $toucher did not report ready within 30 s" >&2
				exit 1
			fi
			pause
		done
		# The toucher is exec'd by numactl, so $! is its pid; the ready file says the same.
		set -- "$@" "$(cat "$tmp/ready")"
	else
		# 8 MiB string kept in the shell's heap, allocated under the interleave policy.
		numactl --interleave=all sh -c 'v=$(head -c 8388608 /dev/zero | tr "\0" x); while :; do sleep 3600; done' &
		started="$started $!"
		sleep 1
		set -- "$@" "$!"
	fi

	sleeper=$(command -v sleep)
	cp "$sleeper" "$tmp/a (b) c" 2>/dev/null || true
	if [ -x "$tmp/a (b) c" ] && "$tmp/a (b) c" 0 2>/dev/null; then
		"$tmp/a (b) c" 3600 &
		started="$started $!"
		set -- "$@" "$!"
	else
		# busybox: a copy of the binary would not know which applet it is. The shell renames itself (builtin printf,
		# so the write is done by the shell process itself) and stays alive waiting for its sleep.
		sh -c 'printf "a (b) c" >/proc/self/comm; sleep 3600; :' &
		started="$started $!"
		set -- "$@" "$!"
	fi
	# Until the child has exec'd (or renamed itself) its comm is still ours; wait for the new name, at most 30 s.
	odd=$!
	i=0
	until [ "$(cat "/proc/$odd/comm" 2>/dev/null)" = "a (b) c" ]; do
		i=$((i + 1))
		if [ $i -gt 300 ]; then
			echo "capture-fixtures: process $odd never took the comm \"a (b) c\"" >&2
			exit 1
		fi
		pause
	done
fi

# --- sysfs: nodes, then the real tools on exactly these copies ----------------------------------------------------

nd=/sys/devices/system/node
for n in online possible has_cpu has_memory has_normal_memory; do
	add "$nd/$n"
done
for d in "$nd"/node[0-9]*; do
	add "$d/cpulist" "$d/cpumap" "$d/meminfo" "$d/numastat" "$d/distance" "$d/vmstat"
done
flush

# The node counters move all the time, and running numastat moves them itself (its own page allocations count in
# numa_hit and MemFree), so "copy, run numastat, copy again" never gives two equal copies. Instead numastat and
# numactl --hardware run in a private mount namespace where /sys/devices/system/node IS the copy just taken: their
# figures are the fixture's figures exactly. Without unshare/mount (or the right to use them) they read the live
# files a moment after the copy, and cmd.txt says so ("system-tables: live").
frozen_dir=$(cd "$out$nd" && pwd)
if frozen "$frozen_dir" true 2>/dev/null; then
	tables=frozen
	sys() { frozen "$frozen_dir" "$@"; }
else
	tables=live
	sys() { "$@"; }
fi

{
	echo "# how the files in expected/ were produced (run by scripts/capture-fixtures.sh)"
	echo "kernel: $(uname -r)"
	echo "machine: $(uname -m)"
	echo "numactl-hardware.txt: numactl --hardware"
	echo "numastat.txt: numastat"
	echo "numastat-m.txt: numastat -m"
	echo "numastat-n.txt: numastat -n"
	echo "numactl-show.txt: numactl --show   (policy of the capturing shell)"
	echo "numastat-version: $(numastat -V 2>&1 | head -n 1)"
	if [ "$tables" = frozen ]; then
		echo "system-tables: frozen   (numactl --hardware, numastat, -m, -n ran with this fixture's sys/devices/system/node"
		echo "  bind-mounted over /sys/devices/system/node in a private mount namespace: their figures are the files' exactly)"
	else
		echo "system-tables: live   (no private mount namespace here: the tools read the live node files a moment after"
		echo "  they were copied; counters such as numa_hit and MemFree may differ a little)"
	fi
} >"$out/expected/cmd.txt"

sys numactl --hardware >"$out/expected/numactl-hardware.txt" 2>&1
sys numastat >"$out/expected/numastat.txt" 2>&1
sys numastat -m >"$out/expected/numastat-m.txt" 2>&1
sys numastat -n >"$out/expected/numastat-n.txt" 2>&1
numactl --show >"$out/expected/numactl-show.txt" 2>&1

# --- sysfs: CPUs -------------------------------------------------------------------------------------------------

cd_=/sys/devices/system/cpu
add $cd_/online $cd_/possible $cd_/present
for c in "$cd_"/cpu[0-9]*; do
	add "$c/online" "$c"/topology/*
	for k in "$c"/cache/index[0-9]*; do
		add "$k/level" "$k/type" "$k/shared_cpu_list" "$k/id"
	done
done

# --- sysfs: PCI devices (real directories in the fixture, not the kernel's symlinks) -----------------------------

# cp --parents creates real directories for the path components, the symlinked ADDR included.
subdirs=""
for p in /sys/bus/pci/devices/*; do
	[ -e "$p" ] || continue
	add "$p/class" "$p/vendor" "$p/device" "$p/numa_node"
	for s in "$p"/net/* "$p"/nvme/*; do
		[ -e "$s" ] && subdirs="$subdirs $out$s"
	done
done

# --- procfs: system-wide ----------------------------------------------------------------------------------------

add /proc/stat /proc/vmstat /proc/meminfo /proc/pressure/cpu /proc/pressure/memory /proc/pressure/io
add /proc/sys/kernel/numa_balancing
flush
if [ -n "$subdirs" ]; then
	# shellcheck disable=SC2086
	mkdir -p $subdirs
	# Git keeps no empty directory: a .keep file holds each interface/controller directory in place (readers list
	# the directory names under net/ and nvme/ and never look inside).
	for d in $subdirs; do
		: >"$d/.keep"
	done
fi

# --- procfs: processes and their threads -------------------------------------------------------------------------

captured=""
for pid in "$@"; do
	case $pid in
	'' | *[!0-9]*)
		echo "capture-fixtures: not a pid: $pid" >&2
		exit 1
		;;
	esac
	if [ ! -d "/proc/$pid" ]; then
		echo "capture-fixtures: process $pid is gone; skipped" >&2
		continue
	fi
	numastat -p "$pid" >"$out/expected/numastat-p-$pid.txt" 2>&1 || true
	for n in stat status numa_maps sched schedstat comm cmdline maps; do
		add "/proc/$pid/$n"
	done
	for t in "/proc/$pid"/task/*; do
		add "$t/stat" "$t/status" "$t/sched" "$t/schedstat" "$t/comm"
	done
	flush
	if [ -f "$out/proc/$pid/stat" ]; then
		captured="$captured $pid"
		echo "numastat-p-$pid.txt: numastat -p $pid   (comm: $(cat "$out/proc/$pid/comm" 2>/dev/null))" \
			>>"$out/expected/cmd.txt"
	else
		rm -f "$out/expected/numastat-p-$pid.txt"
		echo "capture-fixtures: process $pid exited during the capture; skipped" >&2
	fi
done
echo "pids:$captured" >>"$out/expected/cmd.txt"
echo "capture-fixtures: wrote $out (pids:$captured)"
