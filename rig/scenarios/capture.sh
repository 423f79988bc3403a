# Rig scenario "capture" (busybox sh, sourced after rig/guest/lib.sh): captures a fixture directory with
# scripts/capture-fixtures.sh and sends it as a tar archive (section "fixture"). Besides the script's own sample
# processes (an interleaved toucher, a comm with spaces), a toucher bound to node 1 by Debian's numactl is captured.

rig_run uname uname -r
rig_start bound 120 numactl --membind=1 --cpunodebind=1 rig-toucher --mb 4 --threads 2
rig_run capture sh /usr/local/bin/capture-fixtures.sh -s -t /usr/local/bin/rig-toucher /tmp/fx $RIG_PID
rig_run fixture tar -C /tmp/fx -cf - .
