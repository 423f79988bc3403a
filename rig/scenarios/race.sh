# Rig scenario "race" (busybox sh, sourced after rig/guest/lib.sh): issue 5 section 5's race. The same
# autonuma-benchmark workloads (numa01-like: two processes; numa02-like: one process, slices per thread), memory
# forced onto node 0 at first touch, under four balancers: off (numa_balancing=0, nothing else), kernel
# (numa_balancing=1), numad (Debian's, numa_balancing=0) and numapilot (the daemon, numa_balancing=0).
#
# Parameters come from /rig/race.conf (shell assignments written by crates/rig/src/race.rs, never by hand):
#   RACE_CASES   "TEST:COND:REP ..."  e.g. "numa01:off:1 numa02:numapilot:1"
#   RACE_MB01    MiB per numa01 process      RACE_MB02    MiB of the numa02 process
#   RACE_THREADS threads per process (one node's CPUs)   RACE_SECONDS bench run length, s
#   RACE_INTERVAL_MS the daemon's step interval
#   RACE_SAMPLE_MS ms between two passes of the judge's sampler (rig-sampler)
#   RACE_RECORDER_S seconds between two samples of the bench's recorder (its --interval)
#   RACE_DAEMON_FLAGS flags for `numapilot daemon` (diagnosis, e.g. --include-pinned); default
#                    `--log info,numapilot_daemon::run=debug`: the daemon log then dates every step, new-thread
#                    event and standing order on the monotonic clock (the samples use /proc/uptime, boot time:
#                    the same in a guest that never suspends)
#
# Per case NAME = TEST-COND-REP the host gets: NAME-bench (numapilot bench --json), NAME-samples (the scenario's
# own record by rig-sampler, every RACE_SAMPLE_MS ms, of every worker's numa_maps and its threads' stat lines: the
# judge's evidence, independent of the recorder), NAME-vmstat0/1 (/proc/vmstat before and after), and for
# numad/numapilot their log or journal.
. /rig/race.conf

# race_pids TEST: pids of processes named TEST, one per line. One grep over every comm file: a loop of one cat per
# process takes seconds per pass in the 8-vCPU guest under TCG.
race_pids() {
	grep -lx "$1" /proc/[0-9]*/comm 2>/dev/null | cut -d/ -f3
}

cat >/tmp/numapilot-race.toml <<EOF
[daemon]
interval_ms = $RACE_INTERVAL_MS
journal = "/run/numapilot/np-journal.jsonl"
state = "/run/numapilot/state.json"
socket = "/run/numapilot/numapilot.sock"
metrics = "off"

[exclude]
# Leave the scenario's shells and sleeps alone (a few MiB each), as numad leaves processes under its RSS threshold:
# a shell the daemon placed would hand its node to the workers it starts (they would be the daemon's to manage, but
# no longer start where they start under the other policies). The workers hold 32-64 MiB.
min_rss_mib = 16
EOF
mkdir -p /run/numapilot
rig_run hw numactl --hardware
rig_run numad-version numad -V
: >/tmp/.rig.none

for case in $RACE_CASES; do
	test=${case%%:*}
	rest=${case#*:}
	cond=${rest%%:*}
	rep=${rest#*:}
	name="$test-$cond-$rep"
	mb=$RACE_MB01
	[ "$test" = numa02 ] && mb=$RACE_MB02
	rig_note "race case $name ($mb MiB, $RACE_THREADS threads, $RACE_SECONDS s)"
	case $cond in
	kernel) echo 1 >/proc/sys/kernel/numa_balancing ;;
	*) echo 0 >/proc/sys/kernel/numa_balancing ;;
	esac
	bal=""
	case $cond in
	numad)
		rm -f /var/log/numad.log
		# -i 1:1: evaluate every second (numad's -i MAX alone keeps the default 5 s minimum and refuses a MAX below
		# it); -l 6: verbose, so its decisions are in the log the host prints.
		rig_run "$name-numad-start" numad -i 1:1 -l 6
		sleep 1
		;;
	numapilot)
		rm -f /run/numapilot/np-journal.jsonl /run/numapilot/state.json
		# shellcheck disable=SC2086 # a list of flags
		numapilot daemon --config /tmp/numapilot-race.toml ${RACE_DAEMON_FLAGS:---log info,numapilot_daemon::run=debug} >/tmp/np-daemon.log 2>&1 &
		bal=$!
		sleep 2
		;;
	esac
	rm -f /tmp/race.stop /tmp/race.samples
	rig_run "$name-vmstat0" cat /proc/vmstat
	read -r up0 _idle </proc/uptime
	echo "L $up0" >/tmp/race.samples
	# Guards: the bench kills its workers after 4x the run length (reported as timed out), and busybox timeout
	# kills the bench itself after 6x, so one stuck case cannot eat the guest's whole time budget.
	timeout $((RACE_SECONDS * 6)) numapilot bench "$test" --mb "$mb" --threads "$RACE_THREADS" \
		--seconds "$RACE_SECONDS" --force-node 0 --interval "$RACE_RECORDER_S" --timeout $((RACE_SECONDS * 4)) --json \
		>/tmp/race-bench.json 2>/tmp/race-bench.err &
	bench=$!
	# The judge's reads (rig-sampler, the rig's own reader: kernel files copied verbatim, format in its source).
	rig-sampler "$test" /tmp/race.samples "$RACE_SAMPLE_MS" /tmp/race.stop &
	sampler=$!
	if [ "$cond" = numad ]; then
		# numad skips processes under 300 MB (its MEMORY_THRESHOLD); name ours explicitly, as an administrator
		# would for a small guest: `numad -p PID` hands the pid to the running daemon's inclusion list.
		i=0
		want=1
		[ "$test" = numa01 ] && want=2
		while [ $i -lt 20 ] && [ "$(race_pids "$test" | wc -l)" -lt $want ]; do
			i=$((i + 1))
			sleep 0.5
		done
		if [ -f /var/run/numad.pid ] && kill -0 "$(cat /var/run/numad.pid)" 2>/dev/null; then
			for p in $(race_pids "$test"); do
				rig_note "numad -p $p"
				timeout 10 numad -p "$p"
			done
		fi
		rig_note "waiting for the bench"
	fi
	if [ "$cond" = numapilot ]; then
		# Half-way: the daemon's own view of every worker (the "why" when it does not act).
		sleep $((RACE_SECONDS / 2))
		for p in $(race_pids "$test"); do
			rig_run "$name-explain-$p" numapilot explain "$p"
		done
	fi
	wait $bench
	brc=$?
	rig_note "bench exit $brc"
	touch /tmp/race.stop
	wait $sampler
	rig_send "$name-bench" $brc /tmp/race-bench.json /tmp/race-bench.err
	rig_run "$name-vmstat1" cat /proc/vmstat
	rig_file "$name-samples" /tmp/race.samples
	case $cond in
	numad)
		[ -f /var/run/numad.pid ] && kill "$(cat /var/run/numad.pid)"
		sleep 1
		[ -f /var/run/numad.pid ] && kill -9 "$(cat /var/run/numad.pid)" 2>/dev/null
		rig_file "$name-numad-log" /var/log/numad.log
		;;
	numapilot)
		kill -TERM $bal
		wait $bal
		drc=$?
		rig_send "$name-daemon-log" $drc /tmp/np-daemon.log /tmp/.rig.none
		rig_file "$name-journal" /run/numapilot/np-journal.jsonl
		;;
	esac
done
echo 0 >/proc/sys/kernel/numa_balancing
