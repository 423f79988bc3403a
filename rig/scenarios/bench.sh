# Rig scenario "bench" (busybox sh, sourced after rig/guest/lib.sh), for crates/rig/tests/bench.rs in the 2-node
# guest: `numapilot bench` on a real two-node kernel, its recorder checked against numa_maps read here, and the
# issue's numa02/numa01 "memory forced onto node 0" runs with kernel NUMA balancing off and on.

rig_run hw numactl --hardware

# 1. Balancing off: memory forced onto node 0 stays there. While the run is under way, numa_maps and the threads'
#    stat files of the worker process are read here, independently of the recorder.
echo 0 >/proc/sys/kernel/numa_balancing
numapilot bench numa02 --mb 64 --threads 2 --seconds 8 --force-node 0 --interval 1 --json \
	>/tmp/bench-off.json 2>/tmp/bench-off.err &
bg=$!
wpid=""
i=0
# The worker names itself numa02 (comm); it is running once its two bench-t threads exist (3 tasks). `read` is a
# shell builtin: no fork per /proc entry, which under emulation costs milliseconds each.
while [ $i -lt 200 ] && kill -0 $bg 2>/dev/null; do
	if [ -z "$wpid" ]; then
		for d in /proc/[0-9]*; do
			c=""
			read -r c <"$d/comm" 2>/dev/null
			[ "$c" = numa02 ] && wpid=${d#/proc/}
		done
	fi
	if [ -n "$wpid" ]; then
		n=0
		for t in /proc/"$wpid"/task/*; do n=$((n + 1)); done
		[ $n -ge 3 ] && break
	fi
	i=$((i + 1))
	sleep 0.1
done
rig_note "bench worker pid: '$wpid' after $i polls"
echo "$wpid" >/tmp/.rig.wpid
: >/tmp/.rig.none
rig_send off-worker-pid 0 /tmp/.rig.wpid /tmp/.rig.none
if [ -n "$wpid" ]; then
	sleep 2
	rig_file off-numa-maps "/proc/$wpid/numa_maps"
	rig_threads off "$wpid"
fi
wait $bg
rig_send bench-off $? /tmp/bench-off.json /tmp/bench-off.err

# 2. Kernel NUMA balancing on, same sizes: does the kernel pull the memory to the threads, how fast, how many pages.
echo 1 >/proc/sys/kernel/numa_balancing
rig_run bench-on numapilot bench numa02 --mb 64 --threads 2 --seconds 20 --force-node 0 --interval 1 --json
rig_run bench01-on numapilot bench numa01 --mb 32 --threads 1 --seconds 20 --force-node 0 --interval 1 --json
echo 0 >/proc/sys/kernel/numa_balancing

# 3. A bad flag inside the guest names the flag and exits 1.
rig_run bad numapilot bench numa02 --force-node 5
true
