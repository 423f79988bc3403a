# Rig scenario "cost" (busybox sh, sourced after rig/guest/lib.sh): issue 5's "numad's cost on the same load, as a
# ratio". numad does nothing on a one-node host (it scans no process there), so the comparison runs here, in a
# multi-node guest: one load of sleeping multi-threaded processes, then Debian's numad and the numapilot daemon in
# turn on it, each alone, each at one evaluation a second, and the daemon once more with its defaults (1 s interval,
# idle back-off to 15 s). Kernel NUMA balancing is off throughout.
#
# Parameters come from /rig/cost.conf (shell assignments written by crates/rig/src/cost.rs, never by hand):
#   COST_PROCS   processes in the load           COST_THREADS threads per process (rig-toucher --threads)
#   COST_SECONDS measured seconds per daemon     COST_WARMUP  seconds a daemon runs before the first reading
#
# The host gets: cost-ready (processes and threads in the load), and one section per daemon run, cost-numad,
# cost-numapilot-1s, cost-numapilot-default, each one line "pid ticks0 up0 ticks1 up1 vmrss_kb": the daemon's
# utime + stime (clock ticks, /proc/PID/stat fields 14 and 15) and /proc/uptime at the two readings, and its VmRSS
# at the second. The host turns them into CPU per second and the ratio (crates/rig/src/cost.rs).
. /rig/cost.conf

echo 0 >/proc/sys/kernel/numa_balancing
mkdir -p /tmp/cost-ready /run/numapilot
: >/tmp/.rig.none

# The load: COST_PROCS rig-touchers of COST_THREADS threads and 1 MiB each, sleeping once touched.
i=0
while [ $i -lt "$COST_PROCS" ]; do
	rig-toucher --mb 1 --threads "$COST_THREADS" --ready "/tmp/cost-ready/$i" >/dev/null 2>&1 &
	i=$((i + 1))
done
n=0
tries=0
while [ $tries -lt 600 ]; do
	n=$(ls /tmp/cost-ready | wc -l)
	[ "$n" -ge "$COST_PROCS" ] && break
	tries=$((tries + 1))
	sleep 1
done
threads=$(ls -d /proc/[0-9]*/task/[0-9]* 2>/dev/null | wc -l)
echo "$n $threads" >/tmp/cost-ready.txt
rig_file cost-ready /tmp/cost-ready.txt
rig_note "load ready: $n processes, $threads threads in the guest"

# cost_reading PID: "ticks uptime" of PID now.
cost_reading() {
	# shellcheck disable=SC2046 # the stat line's fields
	set -- $(cat "/proc/$1/stat")
	read -r _up _idle </proc/uptime
	echo "$((${14} + ${15})) $_up"
}

# cost_measure NAME PID: reads PID's CPU after COST_WARMUP s and again COST_SECONDS s later, sends NAME.
cost_measure() {
	sleep "$COST_WARMUP"
	r0=$(cost_reading "$2")
	sleep "$COST_SECONDS"
	r1=$(cost_reading "$2")
	rss=$(grep VmRSS "/proc/$2/status" | tr -s ' ' | cut -d' ' -f2)
	echo "$2 $r0 $r1 $rss" >"/tmp/$1.txt"
	rig_file "$1" "/tmp/$1.txt"
}

# numad, one evaluation a second (-i 1:1, as in the race).
rm -f /var/run/numad.pid
rig_run cost-numad-start numad -i 1:1
sleep 1
if [ -f /var/run/numad.pid ]; then
	np=$(cat /var/run/numad.pid)
	cost_measure cost-numad "$np"
	kill "$np"
	sleep 1
	kill -9 "$np" 2>/dev/null
else
	rig_note "numad did not start (no pid file)"
fi

# cost_daemon NAME EXTRA_TOML: the numapilot daemon with the config below plus EXTRA_TOML in [daemon].
cost_daemon() {
	cat >/tmp/numapilot-cost.toml <<EOF
[daemon]
journal = ""
state = "/run/numapilot/state.json"
socket = "/run/numapilot/numapilot.sock"
metrics = "off"
$2
EOF
	rm -f /run/numapilot/state.json
	numapilot daemon --config /tmp/numapilot-cost.toml >/tmp/np-cost.log 2>&1 &
	dp=$!
	cost_measure "$1" "$dp"
	kill -TERM "$dp"
	wait "$dp"
	rig_send "$1-log" $? /tmp/np-cost.log /tmp/.rig.none
}

# One step a second, the back-off off (as numad's -i 1:1), then the defaults.
cost_daemon cost-numapilot-1s "interval_ms = 1000
idle_max_interval_ms = 1000"
cost_daemon cost-numapilot-default ""
