# Rig scenario "daemon-safety" (busybox sh, sourced after rig/guest/lib.sh), for crates/rig/tests/daemon.rs in the
# 2-node guest: the numapilot daemon's safety promises (issue 5 sections 2 and 5) on a real kernel, every one judged
# by the host from files this script reads itself (/proc/PID/status Cpus_allowed_list, the state file, the journal),
# never from the daemon's own account alone.
#
#   1. exclusions + restore on exit: a twin (moved), an excluded comm, a process pinned by numactl --cpunodebind=1
#      and one bound by numactl --membind=0 (both "placed themselves"); SIGTERM; the twin's affinity is back.
#   2. crash recovery: the daemon moves a process, kill -9, the state file still names it; a new daemon restores it.
#   3. churn + pid reuse: pid_max lowered so pids wrap, hundreds of short-lived processes while the daemon runs.
#   4. cpusets (run before 3): with `[actuation] cpuset = "v1"`, then "v2", the daemon moves a process into a cpuset
#      cgroup of its own; SIGTERM puts it back in its original cgroup and removes the one it made.
#   4b. a process an operator confined to a cpuset (run before 3) is managed within it, not left as self-pinned.
#   5. launch advice (run before 3): a job started on the daemon's advice (`advise --pid`) is adopted and held there.
#   6. CPU hotplug (run before 3): node 1's CPUs go offline and come back; the daemon reads the topology again each
#      time, never asks for an offline CPU, manages a process started meanwhile, and uses node 1 again after.
#   7. release (run before 3): a placed process whose name a reload excludes is put back at once and left alone.
echo 0 >/proc/sys/kernel/numa_balancing
mkdir -p /run/numapilot
: >/tmp/.rig.none
# Distinct comms for the twin and the excluded process: copies of rig-toucher (comm = the executable's name).
cp "$(command -v rig-toucher)" /tmp/twin
cp "$(command -v rig-toucher)" /tmp/excluded-t
cp "$(command -v rig-toucher)" /tmp/crashed-t
{
	rig_daemon_section 500
	echo '[exclude]'
	echo 'comm = ["excluded-t"]'
} >/tmp/np-safety.toml
rig_file kernel /proc/sys/kernel/osrelease
rig_run hw numactl --hardware
# Every daemon below leaves this shell alone (--exclude-pid $$): a moved shell would hand its narrowed affinity to
# the processes it starts, and their "original" would no longer be the machine's. What every process here starts
# with is this shell's affinity, read now.
safety_allowed() {
	grep '^Cpus_allowed_list:' "/proc/$2/status" >/tmp/.rig.al 2>/tmp/.rig.ale
	rig_send "$1" $? /tmp/.rig.al /tmp/.rig.ale
}
safety_allowed shell-allowed $$

# safety_allowed NAME PID (above): send PID's Cpus_allowed_list (from /proc/PID/status) as section NAME.

# safety_wait_applied PID SECS: wait until the journal has an applied set-affinity for PID.
safety_wait_applied() {
	_i=0
	while [ $_i -lt $(($2 * 5)) ]; do
		grep "\"pid\":$1," /run/numapilot/np-journal.jsonl 2>/dev/null | grep '"kind":"set-affinity"' |
			grep -q '"outcome":"applied"' && return 0
		_i=$((_i + 1))
		sleep 0.2
	done
	return 1
}

# safety_wait_started LOG SECS: wait until the daemon's log says it started.
safety_wait_started() {
	rig_wait_grep 'started, interval' "$1" "$2"
}

# --- 1. exclusions and restore on exit --------------------------------------------------------------------------
rm -f /run/numapilot/np-journal.jsonl /run/numapilot/state.json
rig_start excl 60 /tmp/excluded-t --mb 8 --threads 2 --loop
excl=$RIG_PID
rig_start pinned 60 numactl --cpunodebind=1 rig-toucher --mb 8 --threads 2 --loop
pinned=$RIG_PID
rig_start bound 60 numactl --membind=0 rig-toucher --mb 8 --threads 2 --loop
bound=$RIG_PID
for p in excl pinned bound; do
	eval "pid=\$$p"
	safety_allowed "$p-before" "$pid"
done
numapilot daemon --config /tmp/np-safety.toml --exclude-pid $$ >/tmp/np-1.log 2>&1 &
d1=$!
safety_wait_started /tmp/np-1.log 60
rig_start twin 60 /tmp/twin --mb 8 --threads 2 --loop
twin=$RIG_PID
safety_allowed twin-before "$twin"
safety_wait_applied "$twin" 60
echo $? >/tmp/.rig.w
rig_send twin-applied 0 /tmp/.rig.w /tmp/.rig.none
sleep 3
safety_allowed twin-moved "$twin"
for p in excl pinned bound; do
	eval "pid=\$$p"
	safety_allowed "$p-during" "$pid"
done
rig_file state-running /run/numapilot/state.json
rig_daemon_stop $d1 /tmp/np-1.log daemon1-exit
safety_allowed twin-after "$twin"
for p in excl pinned bound; do
	eval "pid=\$$p"
	safety_allowed "$p-after" "$pid"
done
rig_file state-after-term /run/numapilot/state.json
rig_file journal1 /run/numapilot/np-journal.jsonl
echo "twin=$twin excl=$excl pinned=$pinned bound=$bound" >/tmp/.rig.pids
rig_send pids1 0 /tmp/.rig.pids /tmp/.rig.none
kill "$twin" "$excl" "$pinned" "$bound"

# --- 2. crash recovery -------------------------------------------------------------------------------------------
rm -f /run/numapilot/np-journal.jsonl /run/numapilot/state.json
numapilot daemon --config /tmp/np-safety.toml --exclude-pid $$ >/tmp/np-2.log 2>&1 &
d2=$!
safety_wait_started /tmp/np-2.log 60
rig_start crashed 60 /tmp/crashed-t --mb 8 --threads 2 --loop
crashed=$RIG_PID
echo "$crashed" >/tmp/.rig.pid
rig_send crashed-pid 0 /tmp/.rig.pid /tmp/.rig.none
safety_allowed crashed-before "$crashed"
safety_wait_applied "$crashed" 60
echo $? >/tmp/.rig.w
rig_send crashed-applied 0 /tmp/.rig.w /tmp/.rig.none
sleep 1
kill -9 $d2
wait $d2
safety_allowed crashed-after-kill "$crashed"
rig_file state-after-kill /run/numapilot/state.json
rig_file journal2 /run/numapilot/np-journal.jsonl
# The new daemon excludes the crashed process's pid, so whatever its affinity is once it has started is the
# recovery's doing, not a new decision.
rm -f /run/numapilot/np-journal.jsonl
numapilot daemon --config /tmp/np-safety.toml --exclude-pid $$ --exclude-pid "$crashed" >/tmp/np-3.log 2>&1 &
d3=$!
safety_wait_started /tmp/np-3.log 60
safety_allowed crashed-recovered "$crashed"
rig_file state-after-recovery /run/numapilot/state.json
rig_daemon_stop $d3 /tmp/np-3.log daemon3-exit
rig_file journal3 /run/numapilot/np-journal.jsonl
kill "$crashed"

# --- 4. cpusets: cgroup v1, then v2 (before the churn) ----------------------------------------------------------
# The guest's init mounts no cgroups. A tmpfs on /sys/fs/cgroup holds the mount points, as systemd lays them out.
# safety_cpuset VERSION MOUNT PATTERN: a daemon with `[actuation] cpuset = VERSION` places a toucher; sends its
# /proc/PID/cgroup line (the one matching PATTERN), the cgroup's cpuset.cpus, cpuset.mems and Cpus_allowed_list while placed,
# the cgroup line and Cpus_allowed_list after SIGTERM, and what is left under MOUNT/numapilot.
safety_cpuset() {
	v=$1
	mnt=$2
	pat=$3
	rm -f /run/numapilot/np-journal.jsonl /run/numapilot/state.json
	{
		echo '[daemon]'
		echo 'interval_ms = 500'
		echo 'journal = "/run/numapilot/np-journal.jsonl"'
		echo 'state = "/run/numapilot/state.json"'
		echo 'socket = "/run/numapilot/numapilot.sock"'
		echo 'metrics = "off"'
		echo '[actuation]'
		echo "cpuset = \"$v\""
	} >/tmp/np-cs.toml
	numapilot daemon --config /tmp/np-cs.toml --exclude-pid $$ >/tmp/np-cs.log 2>&1 &
	d=$!
	safety_wait_started /tmp/np-cs.log 60
	rig_start "cs-$v" 60 /tmp/twin --mb 8 --threads 2 --loop
	cs=$RIG_PID
	safety_wait_applied "$cs" 60
	echo $? >/tmp/.rig.w
	rig_send "cs-$v-applied" 0 /tmp/.rig.w /tmp/np-cs.log
	sleep 1
	grep "$pat" "/proc/$cs/cgroup" >/tmp/.rig.cg
	rig_send "cs-$v-cgroup-during" $? /tmp/.rig.cg /tmp/.rig.none
	cg=$(cut -d: -f3 /tmp/.rig.cg)
	cat "$mnt$cg/cpuset.cpus" >/tmp/.rig.cc 2>/tmp/.rig.cce
	rig_send "cs-$v-cpus" $? /tmp/.rig.cc /tmp/.rig.cce
	cat "$mnt$cg/cpuset.mems" >/tmp/.rig.cc 2>/tmp/.rig.cce
	rig_send "cs-$v-mems" $? /tmp/.rig.cc /tmp/.rig.cce
	safety_allowed "cs-$v-during" "$cs"
	rig_daemon_stop $d /tmp/np-cs.log "cs-$v-exit"
	grep "$pat" "/proc/$cs/cgroup" >/tmp/.rig.cg
	rig_send "cs-$v-cgroup-after" $? /tmp/.rig.cg /tmp/.rig.none
	safety_allowed "cs-$v-after" "$cs"
	ls "$mnt/numapilot" >/tmp/.rig.left 2>&1
	rig_send "cs-$v-left" 0 /tmp/.rig.left /tmp/.rig.none
	rig_file "cs-$v-journal" /run/numapilot/np-journal.jsonl
	kill "$cs"
	wait "$cs" 2>/dev/null
}
mount -t tmpfs cgroup /sys/fs/cgroup
mkdir -p /sys/fs/cgroup/cpuset /sys/fs/cgroup/unified
# Kernels built without CONFIG_CPUSETS_V1 (Debian's 6.12: "Unknown subsys name 'cpuset'") refuse the v1 mount; the
# host test then judges v2 alone and says so (the v1 code is tested on the development host's v1 hierarchy).
if rig_run cs-v1-mount mount -t cgroup -o cpuset cpuset /sys/fs/cgroup/cpuset; then
	safety_cpuset v1 /sys/fs/cgroup/cpuset ':cpuset:'
	# The cpuset controller moves to the v2 hierarchy once its v1 hierarchy has no child cgroups and is unmounted.
	# A removed cgroup stays the hierarchy's child until its last reference goes (freed after an RCU grace period,
	# css_free_rwork_fn), and an unmount that still finds a child keeps the hierarchy for good (cgroup_kill_sb):
	# Debian 12's 6.1 kept it, and the v2 part below found no cpuset controller. So the unmount waits until
	# /proc/cgroups counts the root alone.
	rmdir /sys/fs/cgroup/cpuset/numapilot 2>/dev/null
	_i=0
	while [ $_i -lt 100 ] && [ "$(awk '$1 == "cpuset" { print $3 }' /proc/cgroups)" != 1 ]; do
		_i=$((_i + 1))
		sleep 0.1
	done
	umount /sys/fs/cgroup/cpuset
fi
mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified
_i=0
while [ $_i -lt 50 ] && ! grep -qw cpuset /sys/fs/cgroup/unified/cgroup.controllers; do
	_i=$((_i + 1))
	sleep 0.2
done
rig_run cs-v2-controllers cat /sys/fs/cgroup/unified/cgroup.controllers
safety_cpuset v2 /sys/fs/cgroup/unified '^0::'
# A process in a v2 cgroup with a limit of its own (pids.max, as systemd's TasksMax) is placed by affinity only:
# moved into numapilot's cgroup it would run without the limit.
echo +pids >/sys/fs/cgroup/unified/cgroup.subtree_control
mkdir /sys/fs/cgroup/unified/lim
echo 1000 >/sys/fs/cgroup/unified/lim/pids.max
cp /tmp/np-cs.toml /tmp/np-lim.toml
rm -f /run/numapilot/np-journal.jsonl /run/numapilot/state.json
numapilot daemon --config /tmp/np-lim.toml --exclude-pid $$ >/tmp/np-lim.log 2>&1 &
dl=$!
safety_wait_started /tmp/np-lim.log 60
sh -c 'echo $$ >/sys/fs/cgroup/unified/lim/cgroup.procs && exec /tmp/twin --mb 8 --threads 2 --loop' >/dev/null 2>&1 &
lim=$!
safety_wait_applied "$lim" 60
echo $? >/tmp/.rig.w
rig_send cs-lim-applied 0 /tmp/.rig.w /tmp/np-lim.log
sleep 1
grep '^0::' "/proc/$lim/cgroup" >/tmp/.rig.cg
rig_send cs-lim-cgroup-during $? /tmp/.rig.cg /tmp/.rig.none
safety_allowed cs-lim-during "$lim"
rig_daemon_stop $dl /tmp/np-lim.log cs-lim-exit
kill "$lim"
wait "$lim" 2>/dev/null
rmdir /sys/fs/cgroup/unified/lim

# --- 4b. a process an operator confined to a cpuset (v2, the daemon's cpuset mode off) ----------------------------
# A cgroup of CPUs 1-2 (one of each node) and both nodes' memory. A toucher first-touches 64 MiB on node 1 (run on CPU
# 2), then enters the cgroup and is widened to every CPU, which the cpuset cuts to 1-2: as wide as its cpuset,
# narrower than the machine. The
# daemon must manage it (not leave it as self-pinned) within its cpuset: a CPU set of one node's part of 1-2, and
# after SIGTERM its threads as the cpuset made them.
rm -f /run/numapilot/np-journal.jsonl /run/numapilot/state.json
ctr=/sys/fs/cgroup/unified/rig-ctr
echo +cpuset >/sys/fs/cgroup/unified/cgroup.subtree_control
mkdir -p "$ctr"
echo 0-1 >"$ctr/cpuset.mems"
echo 1-2 >"$ctr/cpuset.cpus"
cp "$(command -v rig-toucher)" /tmp/confined-t
rig_start confined 60 numapilot run --physcpubind=2 /tmp/confined-t --mb 64 --threads 1 --loop
cf=$RIG_PID
echo "$cf" >"$ctr/cgroup.procs"
# Its own mask back to every CPU (the kernel keeps a mask a task asked for across a cgroup move, 6.2 on, and cuts it
# to the cpuset): its threads are then as wide as the cpuset, as a container's processes start.
taskset -a -p -c 0-3 "$cf" >/tmp/.rig.ts 2>&1
rig_send confined-widen $? /tmp/.rig.ts /tmp/.rig.none
safety_allowed confined-before "$cf"
numapilot daemon --config /tmp/np-safety.toml --exclude-pid $$ >/tmp/np-7.log 2>&1 &
d7=$!
safety_wait_started /tmp/np-7.log 60
safety_wait_applied "$cf" 30
echo $? >/tmp/.rig.w
rig_send confined-applied 0 /tmp/.rig.w /tmp/np-7.log
sleep 1
safety_allowed confined-during "$cf"
rig_run confined-explain numapilot explain "$cf"
echo "$cf" >/tmp/.rig.pid
rig_send confined-pid 0 /tmp/.rig.pid /tmp/.rig.none
rig_daemon_stop $d7 /tmp/np-7.log daemon7-exit
safety_allowed confined-after "$cf"
rig_file journal7 /run/numapilot/np-journal.jsonl
kill "$cf"
wait "$cf" 2>/dev/null
rmdir "$ctr"
umount /sys/fs/cgroup/unified

# --- 5. launch advice (before the churn, which lowers pid_max) --------------------------------------------------
# A launcher asks the running daemon for nodes with its own pid (`numapilot advise --pid $$`, rule launch-advice) and
# execs Debian's numactl on the answer, keeping its pid; the daemon adopts the process as placed on its advice and
# leaves it there (rule launch-holds): no action on it, its CPUs as the launcher set them, before and after SIGTERM.
# A second job of the same size asked for at once gets the other node (each node holds one 250 MiB job: 465-502 MB).
rm -f /run/numapilot/np-journal.jsonl /run/numapilot/state.json
cp "$(command -v rig-toucher)" /tmp/launched-t
numapilot daemon --config /tmp/np-safety.toml --exclude-pid $$ >/tmp/np-5.log 2>&1 &
d5=$!
safety_wait_started /tmp/np-5.log 60
# advise is refused before the daemon's first step.
sleep 1.5
cat >/tmp/launch.sh <<'LAUNCH'
nodes=$(numapilot advise --cpus 1 --mem 250M --window-ms 300 --pid $$) || exit 3
echo "$nodes" >/tmp/launch.nodes
exec numactl --cpunodebind="$nodes" --preferred-many="$nodes" /tmp/launched-t --mb 250 --threads 1 --loop "$@"
LAUNCH
rig_start launched 60 sh /tmp/launch.sh
launched=$RIG_PID
rig_file launch-nodes /tmp/launch.nodes
rig_run launch-second numapilot advise --cpus 1 --mem 250M --window-ms 300
safety_allowed launched-first "$launched"
sleep 4
safety_allowed launched-later "$launched"
rig_run launch-explain numapilot explain "$launched"
echo "$launched" >/tmp/.rig.pid
rig_send launched-pid 0 /tmp/.rig.pid /tmp/.rig.none
rig_daemon_stop $d5 /tmp/np-5.log daemon5-exit
safety_allowed launched-after "$launched"
rig_file journal5 /run/numapilot/np-journal.jsonl
kill "$launched"

# --- 6. CPU hotplug (before the churn) ----------------------------------------------------------------------------
# Node 1's CPUs (2 and 3) go offline and come back while the daemon runs. A process whose memory is on node 1 (it
# first-touched it narrowed to node 1's CPUs, then was widened to every CPU, so it is the daemon's to manage) is
# running when they go; a second process starts while node 1 has no CPU; a third after they are back. The daemon must
# follow: never ask for an offline CPU (an EINVAL refusal), never take the kernel's online-only view of a mask for a
# self-pinned process, and use node 1 again once its CPUs are back.
rm -f /run/numapilot/np-journal.jsonl /run/numapilot/state.json
rig_start hp-node1 60 numapilot run --physcpubind=2-3 rig-toucher --mb 64 --threads 2 --loop
hp_node1=$RIG_PID
taskset -a -p -c 0-3 "$hp_node1" >/tmp/.rig.ts 2>&1
rig_send hp-widen $? /tmp/.rig.ts /tmp/.rig.none
numapilot daemon --config /tmp/np-safety.toml --exclude-pid $$ >/tmp/np-6.log 2>&1 &
d6=$!
safety_wait_started /tmp/np-6.log 60
sleep 3
safety_allowed hp-node1-before "$hp_node1"
echo 0 >/sys/devices/system/cpu/cpu3/online
echo 0 >/sys/devices/system/cpu/cpu2/online
rig_run hp-online-off cat /sys/devices/system/cpu/online
rig_start hp-off 60 rig-toucher --mb 32 --threads 2 --loop
hp_off=$RIG_PID
sleep 4
safety_allowed hp-off-during "$hp_off"
safety_allowed hp-node1-during "$hp_node1"
rig_run hp-off-explain numapilot explain "$hp_off"
echo 1 >/sys/devices/system/cpu/cpu2/online
echo 1 >/sys/devices/system/cpu/cpu3/online
rig_run hp-online-on cat /sys/devices/system/cpu/online
rig_start hp-on 60 rig-toucher --mb 32 --threads 2 --loop
hp_on=$RIG_PID
sleep 5
safety_allowed hp-node1-after "$hp_node1"
rig_run hp-node1-explain numapilot explain "$hp_node1"
printf '%s %s %s\n' "$hp_node1" "$hp_off" "$hp_on" >/tmp/.rig.pid
rig_send hp-pids 0 /tmp/.rig.pid /tmp/.rig.none
rig_daemon_stop $d6 /tmp/np-6.log daemon6-exit
rig_file journal6 /run/numapilot/np-journal.jsonl
kill "$hp_node1" "$hp_off" "$hp_on"

# --- 7. release on reload (before the churn) ----------------------------------------------------------------------
# The daemon places a process; the operator then excludes its name (the config file rewritten, SIGHUP): the
# process is put back at once (its original affinity, the state file without it, a journal "released" line) and
# not touched again while the daemon runs on.
rm -f /run/numapilot/np-journal.jsonl /run/numapilot/state.json
cp "$(command -v rig-toucher)" /tmp/released-t
cp /tmp/np-safety.toml /tmp/np-8.toml
numapilot daemon --config /tmp/np-8.toml --exclude-pid $$ >/tmp/np-8.log 2>&1 &
d8=$!
safety_wait_started /tmp/np-8.log 60
rig_start released 60 /tmp/released-t --mb 8 --threads 2 --loop
rel=$RIG_PID
safety_wait_applied "$rel" 60
echo $? >/tmp/.rig.w
rig_send released-applied 0 /tmp/.rig.w /tmp/np-8.log
sleep 1
safety_allowed released-moved "$rel"
rig_file state-before-release /run/numapilot/state.json
sed 's/^comm = \["excluded-t"\]$/comm = ["excluded-t", "released-t"]/' /tmp/np-safety.toml >/tmp/np-8.toml
kill -HUP $d8
rig_wait_grep 'released \(excluded by a configuration reload\)' /run/numapilot/np-journal.jsonl 30
echo $? >/tmp/.rig.w
rig_send released-journaled 0 /tmp/.rig.w /tmp/np-8.log
# A few more steps at 500 ms: nothing may move it again.
sleep 3
safety_allowed released-after "$rel"
rig_file state-after-release /run/numapilot/state.json
rig_daemon_stop $d8 /tmp/np-8.log daemon8-exit
rig_file journal8 /run/numapilot/np-journal.jsonl
echo "$rel" >/tmp/.rig.pid
rig_send released-pid 0 /tmp/.rig.pid /tmp/.rig.none
kill "$rel"
wait "$rel" 2>/dev/null

# --- 3. churn, with pids wrapping -------------------------------------------------------------------------------
rm -f /run/numapilot/np-journal.jsonl /run/numapilot/state.json
# The kernel's floor for pid_max is 301 (RESERVED_PIDS 300 + 1, kernel/pid.c); a low ceiling makes the hundreds of
# short-lived processes below reuse pids while the daemon tracks them.
echo 512 >/proc/sys/kernel/pid_max
echo "pid_max $(cat /proc/sys/kernel/pid_max)" >/tmp/.rig.pm
rig_send pid-max 0 /tmp/.rig.pm /tmp/.rig.none
numapilot daemon --config /tmp/np-safety.toml --exclude-pid $$ >/tmp/np-4.log 2>&1 &
d4=$!
safety_wait_started /tmp/np-4.log 60
read -r up0 _idle </proc/uptime
n=0
while [ $n -lt 400 ]; do
	# Short-lived processes, a dozen at a time: touchers that write 2 MiB and exit, and shells that spin a
	# few hundred ms (busy, so the daemon has a reason to place them before they are gone).
	k=0
	while [ $k -lt 6 ]; do
		rig-toucher --mb 2 --exit >/dev/null 2>&1 &
		sh -c 'i=0; while [ $i -lt 400 ]; do i=$((i + 1)); done' &
		k=$((k + 1))
	done
	n=$((n + 12))
	sleep 0.3
done
wait_ok=0
kill -0 $d4 2>/dev/null && wait_ok=1
read -r up1 _idle </proc/uptime
echo "spawned=$n alive=$wait_ok last_pid=$(cat /proc/loadavg | cut -d' ' -f5) up0=$up0 up1=$up1" >/tmp/.rig.churn
rig_send churn 0 /tmp/.rig.churn /tmp/.rig.none
sleep 2
rig_run status numapilot status
rig_daemon_stop $d4 /tmp/np-4.log daemon4-exit
rig_file state-after-churn /run/numapilot/state.json
rig_file journal4 /run/numapilot/np-journal.jsonl
# The guest powers off next; pid_max is not put back (and the scenario's exit code is its own, not a sysctl's).
true
