# Rig scenario "own-mems" (busybox sh, sourced after rig/guest/lib.sh), for crates/rig/tests/daemon.rs in the 2-node
# guest: the daemon's own memory nodes followed while it runs. The daemon starts in a cgroup v2 cpuset of both nodes'
# memory; its cpuset's mems are then narrowed to node 0 (what `systemctl set-property numapilot.service
# AllowedMemoryNodes=0` writes to its unit's cgroup) and widened back to 0-1. After each change the scenario waits
# (60 s at most) for `numapilot status --json` to show it, and sends that status (exit 0 when it showed, 1 on timeout)
# with the daemon's Mems_allowed_list as the kernel reports it; at the end the daemon's log and journal.
echo 0 >/proc/sys/kernel/numa_balancing
mkdir -p /run/numapilot
: >/tmp/.rig.none
rig_daemon_section 300 >/tmp/np-mems.toml
# The guest's init mounts no cgroups: a tmpfs holds the mount point, as systemd lays it out.
mount -t tmpfs cgroup /sys/fs/cgroup
mkdir -p /sys/fs/cgroup/unified
mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified
echo +cpuset >/sys/fs/cgroup/unified/cgroup.subtree_control
cg=/sys/fs/cgroup/unified/np-daemon
mkdir "$cg"
echo 0-3 >"$cg/cpuset.cpus"
echo 0-1 >"$cg/cpuset.mems"
rig_file mems-cgroup "$cg/cpuset.mems.effective"
# mems_status NAME PATTERN: waits until the daemon's status (JSON) matches PATTERN (grep -E), then sends it as NAME
# (exit 0; 1 when 60 s passed first), and the daemon's Mems_allowed_list as NAME-kernel.
mems_status() {
	_i=0
	until numapilot status --json >/tmp/.rig.st 2>/tmp/.rig.ste && grep -qE "$2" /tmp/.rig.st; do
		_i=$((_i + 1))
		[ $_i -gt 300 ] && break
		sleep 0.2
	done
	grep -qE "$2" /tmp/.rig.st
	rig_send "$1" $? /tmp/.rig.st /tmp/.rig.ste
	grep '^Mems_allowed_list:' "/proc/$d/status" >/tmp/.rig.ma 2>/tmp/.rig.mae
	rig_send "$1-kernel" $? /tmp/.rig.ma /tmp/.rig.mae
}
# The daemon in the cgroup from its first instruction (the shell moves itself in, then becomes the daemon).
sh -c "echo \$\$ >$cg/cgroup.procs && exec numapilot daemon --config /tmp/np-mems.toml --exclude-pid $$" \
	>/tmp/np.log 2>&1 &
d=$!
rig_wait_grep 'started, interval' /tmp/np.log 60
mems_status mems-start '"own_memory_nodes": "0-1"'
echo 0 >"$cg/cpuset.mems"
mems_status mems-narrowed '"pages_unmovable_to": "1"'
echo 0-1 >"$cg/cpuset.mems"
mems_status mems-widened '"pages_unmovable_to": ""'
rig_daemon_stop $d /tmp/np.log daemon-exit
rig_file journal /run/numapilot/np-journal.jsonl
