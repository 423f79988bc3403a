# Rig scenario "ebpf" (busybox sh, sourced after rig/guest/lib.sh): the eBPF wake-up tracer on the guest's kernel.
# numapilot-wakeups (crates/ebpf, built with the ebpf feature and put in the guest by crates/rig/tests/ebpf.rs)
# loads the tracer, runs a futex ping-pong between two threads of a child process and prints the drained pairs as
# JSON; the test judges them. The guest's init mounts no tracefs, so the first run mounts it (--mount-tracefs).
rig_run kernel uname -r
rig_run wakeups numapilot-wakeups --round-trips 300 --mount-tracefs
# One pair slot for the whole guest: the other direction's wake-ups must be counted as dropped.
rig_run wakeups-full numapilot-wakeups --round-trips 300 --max-pairs 1
# The whole run (tracer, parent, child and both threads) on node 1's CPUs only, so the wake-ups happen on other
# CPUs than the first run's may have: the tracer counts on every CPU.
rig_run wakeups-node1 numactl --cpunodebind=1 numapilot-wakeups --round-trips 300
