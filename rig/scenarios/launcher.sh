# Rig scenario "launcher" (busybox sh, sourced after rig/guest/lib.sh), for crates/rig/tests/launcher.rs in the
# 4-node guest: `numapilot run` and the numactl symlink to it against Debian's numactl, option set by option set, each
# launcher starting a probe that reports what it inherited. Sections are evidence only; the host judges.
#
# The rows: /rig/launcher.rows (the test writes it from its own table), one a line:
#   PHASE NAME [OPTION...]     OPTIONs split on blanks (no quoting); NAME [a-z0-9-]
# run phase by phase, in this order, each phase's rows in file order:
#   whole     the machine as booted (nodes 0-3, CPUs 0-1, 2-3, 4-5, 6-7)
#   taskset   each launcher started under `taskset -c 2-5` (a CPU affinity narrower than the cpuset)
#   cpuset    the scenario's shell in a cgroup v2 cpuset with cpus 2-5 and mems 1-3 (node 0 outside Mems_allowed,
#             node 3 inside it with none of its CPUs allowed)
#   memonly   after CPUs 6 and 7 are taken offline: node 3 keeps its memory and has no CPU (a memory-only node as
#             the kernel shows one: empty cpulist, out of has_cpu)
#
# For each row and launcher (ref: Debian's numactl; run: `numapilot run`; compat: /opt/numapilot/compat/numactl,
# the symlink), section NAME.LAUNCHER: the launcher with the row's options and the probe
#   sh -c '/usr/bin/numactl --show; echo --; exec rig-toucher --mb 4 --report'
# so its stdout is Debian's `numactl --show` of what the command inherited, a line `--`, then the kernel's own view
# (rig-toucher --report: Cpus_allowed_list, Mems_allowed_list and SigIgn of its status, and the numa_maps line of
# the 4 MiB it touched: policy and pages per node). Empty stdout: nothing ran. A row whose options hold -s or
# --show runs no probe: its section is the launcher's own --show.
# Transparent huge pages are off: a 2 MiB page of the 4 MiB goes to one node whole, so an interleave's page counts
# would depend on where the buffer happens to be aligned (crates/rig/src/launcher.rs).
# Also sent: thp (the THP setting after the change), hw (numactl --hardware), taskset (the affinity the taskset
# phase starts from), cpuset (the cgroup's effective cpus and mems and the shell's status lines inside it), memonly
# (node 3's cpulist, has_cpu, has_memory and the online CPUs after the offlining), phase-PHASE (the guest's uptime
# at the phase's start, for the timing).
PROBE='/usr/bin/numactl --show; echo --; exec rig-toucher --mb 4 --report'

echo never >/sys/kernel/mm/transparent_hugepage/enabled
rig_file thp /sys/kernel/mm/transparent_hugepage/enabled
rig_run hw numactl --hardware

# launcher_phase PHASE [PREFIX...]: every row of PHASE under the three launchers, each started as PREFIX... LAUNCHER.
launcher_phase() {
	_lp=$1
	shift
	read -r _up _idle </proc/uptime
	echo "$_up" >/tmp/.rig.up
	: >/tmp/.rig.none
	rig_send "phase-$_lp" 0 /tmp/.rig.up /tmp/.rig.none
	while read -r _phase _name _opts; do
		[ "$_phase" = "$_lp" ] || continue
		for _how in ref run compat; do
			case $_how in
			ref) _l=numactl ;;
			run) _l="numapilot run" ;;
			compat) _l=/opt/numapilot/compat/numactl ;;
			esac
			# shellcheck disable=SC2086 # $_l is a command and its subcommand, $_opts the row's options
			case " $_opts " in
			*" -s "* | *" --show "*) rig_run "$_name.$_how" "$@" $_l $_opts </dev/null ;;
			*) rig_run "$_name.$_how" "$@" $_l $_opts sh -c "$PROBE" </dev/null ;;
			esac
		done
	done </rig/launcher.rows
}

launcher_phase whole

rig_run taskset taskset -c 2-5 grep Cpus_allowed_list /proc/self/status
launcher_phase taskset taskset -c 2-5

mount -t tmpfs cgroup /sys/fs/cgroup
mkdir -p /sys/fs/cgroup/unified
mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified
cg=/sys/fs/cgroup/unified
# The cpuset controller is listed once the cgroup2 mount is up (as in cpuset-v2-migrate.sh): wait for it, at most 10 s.
_i=0
while [ $_i -lt 50 ] && ! grep -qw cpuset $cg/cgroup.controllers; do
	_i=$((_i + 1))
	sleep 0.2
done
echo +cpuset >$cg/cgroup.subtree_control
mkdir $cg/launcher
echo 2-5 >$cg/launcher/cpuset.cpus
echo 1-3 >$cg/launcher/cpuset.mems
echo $$ >$cg/launcher/cgroup.procs
rig_run cpuset sh -c "cat $cg/launcher/cpuset.cpus.effective $cg/launcher/cpuset.mems.effective; \
	grep -E '^(Cpus|Mems)_allowed_list' /proc/self/status"
launcher_phase cpuset
echo $$ >$cg/cgroup.procs

echo 0 >/sys/devices/system/cpu/cpu6/online
echo 0 >/sys/devices/system/cpu/cpu7/online
rig_run memonly sh -c 'for f in node/node3/cpulist node/has_cpu node/has_memory cpu/online; do
	echo "$f: $(cat /sys/devices/system/$f)"
done'
launcher_phase memonly
