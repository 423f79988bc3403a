# Rig scenario "checks" (busybox sh, sourced after rig/guest/lib.sh): runs Debian's numactl/numastat and ours side
# by side and sends the kernel's own files, for the judgements in crates/rig/tests/guests.rs. Needs node 1.
# Sections are evidence only; nothing here decides pass or fail.

rig_run uname uname -r
rig_file node-online /sys/devices/system/node/online
rig_file node1-cpulist /sys/devices/system/node/node1/cpulist
rig_run numad-version numad -V
# PCI devices: address, class, vendor, device, numa_node, then net:IFNAME and nvme:NAME children
rig_run pci sh -c 'for d in /sys/bus/pci/devices/*; do
	read -r c <"$d/class"; read -r v <"$d/vendor"; read -r i <"$d/device"; read -r n <"$d/numa_node"
	kids=""
	for k in "$d"/net/* "$d"/nvme/*; do
		[ -e "$k" ] || continue
		p=${k%/*}
		kids="$kids ${p##*/}:${k##*/}"
	done
	echo "${d##*/} $c $v $i $n$kids"
done'

# --- topology: the reference, ours, ours in numactl symlink mode ---------------------------------------------
rig_run hw numactl --hardware
rig_run topo numapilot topo
rig_run topo-json numapilot topo --json
rig_run compat-hw /opt/numapilot/compat/numactl --hardware
# The reference again after ours: free memory that moved for good between the reads (Debian 12's 6.1 guest freed
# 11 MB on node 1 between the first read and the symlink's) matches this one.
rig_run hw-after numactl --hardware

# --- system tables: ours read between two reads of Debian's numastat (the numastat symlink, so numastat's own
# "Token X not in hash table." lines are printed by both) ----------------------------------------------------
rig_run numapilot-size stat -c %s /usr/local/bin/numapilot
# Three sandwiches per table: another process's memory moving during one (a transient the test cannot tell from
# ours) spoils that one only, while an error in our arithmetic spoils all three.
for a in 1 2 3; do
	for t in compat n m; do
		opt=-$t
		[ $t = compat ] && opt=""
		# shellcheck disable=SC2086 # $opt is empty for the compatibility table
		rig_run "sys-$t-before-$a" numastat $opt
		# shellcheck disable=SC2086
		rig_run "sys-$t-ours-$a" /opt/numapilot/compat/numastat $opt
		# shellcheck disable=SC2086
		rig_run "sys-$t-after-$a" numastat $opt
	done
done

# --- a process with memory on every node, and one whose comm has spaces and parentheses ----------------------
rig_start spread 120 numactl --interleave=all rig-toucher --mb 32 --threads 3
if [ -n "$RIG_PID" ]; then
	rig_file spread-numa-maps "/proc/$RIG_PID/numa_maps"
	rig_run spread-numastat numastat -p "$RIG_PID"
	rig_run spread-stat numapilot stat -p "$RIG_PID"
	rig_run spread-numastat-again numastat -p "$RIG_PID"
	rig_run spread-threads numapilot stat --threads -p "$RIG_PID" --interval 300 --json
	SPREAD=$RIG_PID
fi
sh -c 'printf "a (b) c" >/proc/self/comm; sleep 3600; :' &
ODD=$!
# The child renames itself; wait (at most 30 s) until it has.
i=0
while [ "$(cat "/proc/$ODD/comm")" != "a (b) c" ] && [ $i -lt 300 ]; do
	sleep 0.1
	i=$((i + 1))
done
rig_file odd-comm "/proc/$ODD/comm"
rig_run odd-numastat numastat -p "$ODD"
rig_run odd-stat numapilot stat -p "$ODD"

# --- placement: ours, the numactl symlink to ours, and Debian's numactl as the reference -----------------------
for how in bound compat ref; do
	case $how in
	bound) launcher="numapilot run" ;;
	compat) launcher=/opt/numapilot/compat/numactl ;;
	ref) launcher=numactl ;;
	esac
	# shellcheck disable=SC2086 # $launcher is a command and its subcommand
	rig_start "$how" 120 $launcher --membind=1 --cpunodebind=1 rig-toucher --mb 16 --threads 4
	if [ -n "$RIG_PID" ]; then
		rig_file "$how-numa-maps" "/proc/$RIG_PID/numa_maps"
		rig_threads "$how" "$RIG_PID"
		kill "$RIG_PID"
	fi
done
if [ -n "${SPREAD:-}" ]; then
	# Negative control: the interleaved process must fail the node-1 placement check.
	rig_threads spread "$SPREAD"
fi

# --- bad node specs: exit 1, nothing run ---------------------------------------------------------------------
for spec in --membind=9 --cpunodebind=9 --membind=1-0 --interleave=x; do
	name=bad$(echo "$spec" | tr -c 'A-Za-z0-9\n' '_')
	rm -f /tmp/ran
	rig_run "$name" numapilot run "$spec" touch /tmp/ran
	rig_run "$name-ran" ls /tmp/ran
	rm -f /tmp/ran
	rig_run "ref-$name" numactl "$spec" touch /tmp/ran
	rig_run "ref-$name-ran" ls /tmp/ran
done

# --- the fixture capture script runs under busybox ------------------------------------------------------------
rig_run capture sh /usr/local/bin/capture-fixtures.sh -s -t /usr/local/bin/rig-toucher /tmp/fx
rig_run capture-files find /tmp/fx -type f
