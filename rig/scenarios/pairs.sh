# Rig scenario "pairs" (busybox sh, sourced after rig/guest/lib.sh), for crates/rig/tests/pairs.rs in the 4-node
# guest: the daemon co-places processes that talk to each other or share memory, judged from the kernel's own files.
#
# Three pairs of unrelated processes (rig-pair, crates/rig/src/bin/rig-pair.rs; neither forks the other) and two
# loners, each started with its CPUs on one node so its memory is first-touched there, then widened back to every
# CPU (no affinity or memory policy of its own is left: the daemon's to place, crates/daemon/src/live/select.rs):
#
#   tcp     server (64 MiB buffer, node 1)  <- loopback TCP ->  client (12 MiB, node 2)
#   unix    server (64 MiB buffer, node 2)  <- unix socket  ->  client (12 MiB, node 3)
#   memfd   owner  (24 MiB memfd, node 3)   -- the same memfd -- user (28 MiB of its own, node 0); the descriptor
#           passed once by SCM_RIGHTS, the socket then closed: no socket is left between the two. Sized so the
#           shared memory decides: alone, the user's own 28 MiB outweigh the 24 it maps (it would stay on node 0);
#           as one group the memfd, which both map, outweighs them (48 MiB of the group's resident memory). Every
#           process stays under a quarter of a node's 384 MiB, so none is classified static-large (a class places a
#           process as a unit of its own, out of its group)
#   alone   two rig-toucher copies named rig-alone (16 MiB, nodes 0 and 1) that neither talk nor share
#
# With kernel NUMA balancing off, rig-sampler records every 500 ms each process's numa_maps and its threads' stat
# lines (field 39: the CPU each last ran on) for PAIRS_BEFORE_S seconds without a daemon, then with the daemon running
# (not a dry run) until its journal claims the work done (every pair placed by a move naming its tie, each client's
# page move ended) and PAIRS_AFTER_S seconds more, at most PAIRS_WINDOW_S seconds: the host judges from the
# kernel's files whether the claim holds. The host gets:
#   hw, node-cpus (node N: its cpulist, one line per node), pids (NAME=PID ...), NAME-start / NAME-widen,
#   samples (rig-sampler's record), daemon-start (the guest uptime when the daemon was started), settled (the uptime
#   when the journal claimed the work done; exit 1 if it never did), vmstat0/vmstat1 (/proc/vmstat around the
#   daemon's run), explain-NAME (`numapilot explain PID` at the end, for the servers, the owner and the loners),
#   allowed-NAME (Cpus_allowed_list at the end), journal, daemon-exit (its exit code after SIGTERM; stderr: its log).
#
# Settings (shell variables set before this script runs, e.g. a line prepended to it, or /rig/pairs.conf):
#   PAIRS_SIGNALS=off   the daemon with its socket and shared-memory sources off (`[signals] sockets = false`,
#                       `shared = false`): the check that those signals, and nothing else, bring the pairs together
#   PAIRS_BEFORE_S      seconds recorded before the daemon starts (default 2)
#   PAIRS_AFTER_S       seconds recorded after the journal claims the work done (default 3: six of the sampler's
#                       passes, twice what the judge needs to call a placement lasting)
#   PAIRS_WINDOW_S      the most seconds recorded with the daemon running (default 40; a run whose journal never
#                       claims the work done, as with PAIRS_SIGNALS=off, records this long)
#   PAIRS_SAMPLE_MS     rig-sampler's interval (default 500)
[ -f /rig/pairs.conf ] && . /rig/pairs.conf
: "${PAIRS_SIGNALS:=on}" "${PAIRS_BEFORE_S:=2}" "${PAIRS_AFTER_S:=3}" "${PAIRS_WINDOW_S:=40}" "${PAIRS_SAMPLE_MS:=500}"
echo 0 >/proc/sys/kernel/numa_balancing
ip link set lo up
mkdir -p /run/numapilot
: >/tmp/.rig.none
{
	rig_daemon_section 500
	echo '[exclude]'
	# The scenario's shells, sleeps and sampler (a few MiB each) are left alone; every process placed holds more.
	echo 'min_rss_mib = 6'
	if [ "$PAIRS_SIGNALS" = off ]; then
		echo '[signals]'
		echo 'sockets = false'
		echo 'shared = false'
	fi
} >/tmp/np-pairs.toml
rig_run config cat /tmp/np-pairs.toml
rig_run hw numactl --hardware
for n in /sys/devices/system/node/node[0-9]*; do
	echo "${n##*/node} $(cat "$n/cpulist")"
done >/tmp/.rig.nc
rig_send node-cpus 0 /tmp/.rig.nc /tmp/.rig.none
all=$(cat /sys/devices/system/cpu/online)
cp "$(command -v rig-toucher)" /tmp/rig-alone

# pairs_start NAME NODE CMD...: CMD started with its CPUs on NODE (so its memory is first-touched there) and, once
# ready, every thread widened to all CPUs: it then runs wherever the scheduler puts it, with no binding of its own.
pids=""
pairs_start() {
	_name=$1
	_node=$2
	shift 2
	rig_start "$_name" 60 numapilot run --cpunodebind="$_node" "$@"
	taskset -a -p -c "$all" "$RIG_PID" >/tmp/.rig.ts 2>&1
	rig_send "$_name-widen" $? /tmp/.rig.ts /tmp/.rig.none
	pids="$pids $_name=$RIG_PID"
}
pairs_start tcp-server 1 rig-pair server --tcp 7001 --mb 64
pairs_start tcp-client 2 rig-pair client --tcp 7001 --mb 12
pairs_start unix-server 2 rig-pair server --unix /tmp/pair.sock --mb 64
pairs_start unix-client 3 rig-pair client --unix /tmp/pair.sock --mb 12
pairs_start memfd-owner 3 rig-pair share-owner --unix /tmp/share.sock --mb 24
pairs_start memfd-user 0 rig-pair share-user --unix /tmp/share.sock --mb 28
pairs_start alone-a 0 /tmp/rig-alone --mb 16 --loop
pairs_start alone-b 1 /tmp/rig-alone --mb 16 --loop
echo "$pids" >/tmp/.rig.pids
rig_send pids 0 /tmp/.rig.pids /tmp/.rig.none

rm -f /tmp/pairs.stop /tmp/pairs.samples
rig-sampler rig-pair,rig-alone /tmp/pairs.samples "$PAIRS_SAMPLE_MS" /tmp/pairs.stop &
sampler=$!
sleep "$PAIRS_BEFORE_S"
rig_run vmstat0 cat /proc/vmstat
read -r up _idle </proc/uptime
echo "$up" >/tmp/.rig.up
numapilot daemon --config /tmp/np-pairs.toml --exclude-pid $$ --log info >/tmp/np-pairs.log 2>&1 &
daemon=$!
rig_send daemon-start 0 /tmp/.rig.up /tmp/.rig.none
# pairs_claimed: the journal has, for every pair, an applied set-affinity of one of its two members whose reason names
# a tie (a member already narrowed to the pair's node for its own memory needs no second action: the host's check,
# crates/rig/tests/pairs.rs, asks the same), and for each client a finished page move (the daemon's claim; the host
# checks it against the kernel's files). It asked for every member's set-affinity, so a pair placed by moving one
# member waited out the whole window (40 s) while the judgement passed.
pid_of() {
	for kv in $pids; do
		[ "${kv%%=*}" = "$1" ] && echo "${kv#*=}"
	done
}
pairs_claimed() {
	for pair in tcp-server:tcp-client unix-server:unix-client memfd-owner:memfd-user; do
		s=$(pid_of "${pair%%:*}")
		c=$(pid_of "${pair#*:}")
		grep -e "\"pid\":$s," -e "\"pid\":$c," /run/numapilot/np-journal.jsonl 2>/dev/null >/tmp/.rig.pair || return 1
		grep '"kind":"set-affinity"' /tmp/.rig.pair | grep '"outcome":"applied"' | grep -q 'tied by' || return 1
		grep "\"pid\":$c," /tmp/.rig.pair | grep -q '"event":"move-done"' || return 1
	done
}
_i=0
until pairs_claimed; do
	_i=$((_i + 1))
	[ $_i -ge $((PAIRS_WINDOW_S * 2)) ] && break
	sleep 0.5
done
read -r up _idle </proc/uptime
echo "$up" >/tmp/.rig.up
pairs_claimed
rig_send settled $? /tmp/.rig.up /tmp/.rig.none
sleep "$PAIRS_AFTER_S"
for kv in $pids; do
	name=${kv%%=*}
	pid=${kv#*=}
	# The daemon's own view of one member of each pair (its group names the other) and of each loner.
	case $name in
	*-client | memfd-user) ;;
	*) rig_run "explain-$name" numapilot explain "$pid" ;;
	esac
	grep '^Cpus_allowed_list:' "/proc/$pid/status" >/tmp/.rig.al 2>/tmp/.rig.ale
	rig_send "allowed-$name" $? /tmp/.rig.al /tmp/.rig.ale
done
rig_run vmstat1 cat /proc/vmstat
touch /tmp/pairs.stop
wait "$sampler"
rig_file samples /tmp/pairs.samples
kill -TERM "$daemon"
wait "$daemon"
echo $? >/tmp/.rig.rc
rig_send daemon-exit 0 /tmp/.rig.rc /tmp/np-pairs.log
rig_file journal /run/numapilot/np-journal.jsonl
for kv in $pids; do
	kill "${kv#*=}"
done
true
