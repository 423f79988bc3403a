# Rig scenario "uring" (busybox sh, sourced after rig/guest/lib.sh), for crates/rig/tests/daemon.rs in the 2-node
# guest: an io_uring program placed by the daemon on a kernel whose io-wq workers take set-affinity (>= 6.3; the
# rig's is 6.12). The program (rig-toucher --uring 4, copied as /tmp/uring-t) first-touches 32 MiB from CPU 2
# (node 1), keeps two threads writing it, and has four io-wq workers ("iou-wrk-TID" threads of its own) blocked in
# forced-async opens of a FIFO nobody writes. Started under `taskset -c 2`, so every thread, the workers included,
# is then widened to the machine (`taskset -a -p -c 0-3`) as a program started without taskset has it. The daemon
# runs; once it journals an applied set-affinity on the program, the scenario waits (30 s at most) until every
# thread carries the main thread's mask, then sends every thread's stat and status, numa_maps, `explain` and
# `status`; after SIGTERM, every thread's status again. The host judges from those reads
# (`an_io_uring_programs_workers_are_placed_with_it_and_restored`).
echo 0 >/proc/sys/kernel/numa_balancing
mkdir -p /run/numapilot
: >/tmp/.rig.none
rig_daemon_section 500 >/tmp/np-uring.toml
rig_file kernel /proc/sys/kernel/osrelease
rig_run hw numactl --hardware
rig_file shell-status /proc/$$/status
cp "$(command -v rig-toucher)" /tmp/uring-t
rig_start app 90 taskset -c 2 /tmp/uring-t --mb 32 --threads 2 --loop --uring 4
app=$RIG_PID
taskset -a -p -c 0-3 "$app" >/tmp/.rig.ts 2>&1
rig_send app-widen $? /tmp/.rig.ts /tmp/.rig.none
rig_threads app-before "$app"

# uring_masks PID: the distinct Cpus_allowed_list values of PID's threads, one a line.
uring_masks() {
	for _t in /proc/$1/task/*; do grep '^Cpus_allowed_list:' "$_t/status"; done | sort -u
}

numapilot daemon --config /tmp/np-uring.toml --exclude-pid $$ >/tmp/np.log 2>&1 &
d=$!
rig_wait_grep 'started, interval' /tmp/np.log 60
_i=0
until grep "\"pid\":$app," /run/numapilot/np-journal.jsonl 2>/dev/null | grep '"kind":"set-affinity"' |
	grep -q '"outcome":"applied"'; do
	_i=$((_i + 1))
	[ $_i -gt 300 ] && break
	sleep 0.2
done
[ $_i -le 300 ]
echo $? >/tmp/.rig.w
rig_send app-applied 0 /tmp/.rig.w /tmp/np.log
# One mask on every thread, and not the original: the placement as the kernel holds it.
_i=0
until [ "$(uring_masks "$app" | wc -l)" = 1 ] && ! uring_masks "$app" | grep -q '	0-3$'; do
	_i=$((_i + 1))
	[ $_i -gt 150 ] && break
	sleep 0.2
done
uring_masks "$app" >/tmp/.rig.m
[ $_i -le 150 ]
rig_send app-settled $? /tmp/.rig.m /tmp/.rig.none
rig_threads app-during "$app"
rig_file app-numa-maps "/proc/$app/numa_maps"
rig_run explain numapilot explain "$app"
rig_run status numapilot status
rig_daemon_stop $d /tmp/np.log daemon-exit
rig_file journal /run/numapilot/np-journal.jsonl
rig_threads app-after "$app"
kill "$app"
wait 2>/dev/null
