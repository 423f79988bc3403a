# Rig scenario "sampling" (busybox sh, sourced after rig/guest/lib.sh), for crates/rig/tests/daemon.rs in the 2-node
# guest: the daemon's access sampler on a real multi-node kernel. QEMU's TCG has no PMU, so the sampler is the
# page-fault fallback, asked for with `[signals] page_faults = true`. After the daemon has started, an application
# pinned to node 1's CPUs first-touches 64 MiB there; the scenario then waits (60 s at most) for `numapilot status
# --json` to count 64 used samples or more (the daemon does not back off here) and sends that status (exit 0 when it
# did, 1 on timeout), then the application's numastat and the daemon's exit. Judged by the host
# (`access_samples_reach_the_model_on_a_real_kernel`).
echo 0 >/proc/sys/kernel/numa_balancing
mkdir -p /run/numapilot
{
	rig_daemon_section 500
	# No back-off: the sampler stays at its base period (16 faults a sample).
	echo 'idle_max_interval_ms = 500'
	echo '[signals]'
	echo 'page_faults = true'
} >/tmp/np-sampling.toml
numapilot daemon --config /tmp/np-sampling.toml --exclude-pid $$ >/tmp/np.log 2>&1 &
d=$!
rig_wait_grep 'started, interval' /tmp/np.log 60
cp "$(command -v rig-toucher)" /tmp/app
rig_start app 90 taskset -c 2-3 /tmp/app --mb 64 --threads 1
app=$RIG_PID
# used FILE: the samples a status (JSON) counts as used: read less every discard.
used() {
	_u=$(grep -oE '"(samples|not_accesses|undecodable|no_thread|unplaced)": [0-9]+' "$1" |
		sed 's/"samples": /+/; s/"[a-z_]*": /-/' | tr -d '\n')
	echo $((0 $_u))
}
# At least 64 used: samples mapped to a node of the real kernel. Not all are the application's: the guest's other
# processes fault too, this loop's `numapilot status` calls among them (gone by the next drain, so their samples are
# on no node: 414 of 944 in a run that waited 8.6 s for 512).
_i=0
until numapilot status --json >/tmp/.rig.st 2>/tmp/.rig.ste && grep -q '"access_sampler": {' /tmp/.rig.st &&
	[ "$(used /tmp/.rig.st)" -ge 64 ]; do
	_i=$((_i + 1))
	[ $_i -gt 300 ] && break
	sleep 0.2
done
[ $_i -le 300 ]
rig_send status $? /tmp/.rig.st /tmp/.rig.ste
rig_run app-numastat numastat -p "$app"
rig_daemon_stop $d /tmp/np.log daemon-exit
kill "$app"
wait 2>/dev/null
