# Rig scenario "capture" (busybox sh, sourced after rig/guest/lib.sh): captures a fixture directory with
# scripts/capture-fixtures.sh and sends it as a tar archive (section "fixture"). Besides the script's own sample
# processes (an interleaved toucher, a comm with spaces), it captures, in this order:
#   1. a toucher bound to node 1 by Debian's numactl (--membind=1 --cpunodebind=1);
#   2. a toucher the kernel's NUMA balancing has worked on: started on node 0's CPUs with the default policy (so
#      its pages are first-touched on node 0), then moved with all its threads to node 1's CPUs (taskset -a) while
#      it keeps writing its pages (--loop) and numa_balancing is 1; once its sched files show migrated pages and a
#      preferred node it is stopped (SIGSTOP) so its pages and counters hold still while they are copied. Its pid is recorded in
#      expected/cmd.txt as "balancing: pid N ...".

rig_run uname uname -r
rig_start bound 120 numactl --membind=1 --cpunodebind=1 rig-toucher --mb 4 --threads 2
BOUND=$RIG_PID

echo 1 >/proc/sys/kernel/numa_balancing
rig_start moved 120 numactl --cpunodebind=0 rig-toucher --mb 8 --threads 2 --loop
MOVED=$RIG_PID
node1_cpus=$(cat /sys/devices/system/node/node1/cpulist)
rig_run moved-taskset taskset -a -p -c "$node1_cpus" "$MOVED"
# Wait (at most 120 s of guest time) until balancing has migrated pages of some thread and chosen a preferred node
# for some thread (which takes recorded hinting faults).
balanced() {
	grep -q 'numa_pages_migrated *: *[1-9]' /proc/"$MOVED"/task/*/sched 2>/dev/null &&
		grep -q 'numa_preferred_nid *: *[0-9]' /proc/"$MOVED"/task/*/sched 2>/dev/null
}
i=0
until balanced || [ $i -ge 1200 ]; do
	sleep 0.1
	i=$((i + 1))
done
rig_run moved-wait echo "waited $i tenths of a second for migrated pages"
kill -STOP "$MOVED"

rig_run capture sh /usr/local/bin/capture-fixtures.sh -s -t /usr/local/bin/rig-toucher /tmp/fx $BOUND $MOVED
echo "balancing: pid $MOVED rig-toucher --mb 8 --threads 2 --loop, started under numactl --cpunodebind=0 (pages on node 0), moved by taskset -a to node 1's CPUs ($node1_cpus) with numa_balancing=1, stopped (SIGSTOP) after $i tenths of a second once its sched showed migrated pages and a preferred node" >>/tmp/fx/expected/cmd.txt
kill -CONT "$MOVED"
rig_run fixture tar -C /tmp/fx -cf - .
