# Rig scenario "isolated" (busybox sh, sourced after rig/guest/lib.sh), for crates/rig/tests/daemon.rs: the 2-node
# guest booted with `isolcpus=3` (CPU 3, the second of node 1, isolated from the scheduler's balancing), or with
# `nohz_full=3` and init's affinity 0-2 (tuned's cpu-partitioning, below). Every process's default mask is then 0-2.
# A real-time-like task runs pinned to the isolated CPU 3 (spinning, or waking every 50 ms under nohz_full=), two more spin
# pinned to CPUs 0 and 1 (node 0 full), and an application with the default mask 0-2 has its 64 MiB on node 1 (first
# touched from CPU 2). The daemon, with its defaults (`reserve_isolated = true`), must manage the application (its
# mask 0-2 is not a pin of its own) and place it on node 1's usable CPU 2 alone, never on CPU 3, where the kernel
# would never balance it away; status names the reserved CPU. Judged from /proc by the host
# (`isolated_cpus_are_never_placed_on`).
echo 0 >/proc/sys/kernel/numa_balancing
mkdir -p /run/numapilot
: >/tmp/.rig.none
rig_daemon_section 500 >/tmp/np-iso.toml
rig_file isolated /sys/devices/system/cpu/isolated
rig_file nohz-full /sys/devices/system/cpu/nohz_full
# The partitioned guest (booted `nohz_full=3`, no isolcpus) as tuned's cpu-partitioning profile leaves a host:
# systemd's CPUAffinity= the CPUs but 3, emulated here on init and this shell, whose children inherit it.
if [ -z "$(cat /sys/devices/system/cpu/isolated)" ]; then
    taskset -p -c 0-2 1 >/tmp/.rig.ts 2>&1 && taskset -p -c 0-2 $$ >>/tmp/.rig.ts 2>&1
    rig_send init-affinity $? /tmp/.rig.ts /tmp/.rig.none
fi
rig_file init-status /proc/1/status
rig_file shell-status /proc/$$/status

# The task on CPU 3 spins under isolcpus=. Under nohz_full= it wakes every 50 ms instead (a cyclictest-like
# periodic task): one task spinning there stops CPU 3's tick, and single-threaded TCG then lets that vCPU run
# until QEMU's round-robin kick, every 100 ms (TCG_KICK_PERIOD in QEMU's accel/tcg/tcg-accel-ops-rr.h), where a
# ticking vCPU yields every 4 ms: the other three vCPUs got a few percent of the host thread, and every step of
# this scenario took 7-10x as long as under isolcpus= (135-590 s against 19 s).
if [ -z "$(cat /sys/devices/system/cpu/isolated)" ]; then
    taskset -c 3 sh -c 'while :; do sleep 0.05; done' &
else
    taskset -c 3 sh -c 'while :; do :; done' &
fi
rt=$!
taskset -c 0 sh -c 'while :; do :; done' &
s0=$!
taskset -c 1 sh -c 'while :; do :; done' &
s1=$!
cp "$(command -v rig-toucher)" /tmp/app
rig_start app 90 taskset -c 2 /tmp/app --mb 64 --threads 1 --loop
app=$RIG_PID
# Back to the default mask of this machine, as a process started without taskset has it.
taskset -a -p -c 0-2 "$app" >/tmp/.rig.ts 2>&1
rig_send app-widen $? /tmp/.rig.ts /tmp/.rig.none
rig_run app-numastat numastat -p "$app"
rig_threads app-before "$app"
numapilot daemon --config /tmp/np-iso.toml --exclude-pid $$ >/tmp/np.log 2>&1 &
d=$!
rig_wait_grep 'started, interval' /tmp/np.log 60
rig_wait_grep "\"pid\":$app,.*\"outcome\":\"applied\"" /run/numapilot/np-journal.jsonl 60
echo $? >/tmp/.rig.w
rig_send app-applied 0 /tmp/.rig.w /tmp/np.log
sleep 2
rig_threads app-during "$app"
rig_file rt-during "/proc/$rt/status"
rig_run status numapilot status
rig_daemon_stop $d /tmp/np.log daemon-exit
rig_file journal /run/numapilot/np-journal.jsonl
rig_threads app-after "$app"
kill "$app" "$rt" "$s0" "$s1"
wait 2>/dev/null
