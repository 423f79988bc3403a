# Rig scenario "cpuset-v2-migrate" (busybox sh, sourced after rig/guest/lib.sh): does a cgroup v2 cpuset move a
# joining process's memory to its cpuset.mems? Two rig-touchers first-touch 64 MiB each on node 0 (CPU 0); one joins
# cgroup a (cpus 2-3, mems 1: what numapilot's v2 cgroups wrote before cab8d58), the other cgroup b (cpus 2-3, mems
# left empty: the parent's, as they do now). numastat -p before and after each join. Evidence for
# crates/actuate/src/cgroup.rs (Limits): `cargo run -p numapilot-rig --bin numapilot-rig -- boot 2node
# rig/scenarios/cpuset-v2-migrate.sh`, sections in rig/out/2node/result.json.
mount -t tmpfs cgroup /sys/fs/cgroup
mkdir -p /sys/fs/cgroup/unified
mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified
cg=/sys/fs/cgroup/unified
_i=0
while [ $_i -lt 50 ] && ! grep -qw cpuset $cg/cgroup.controllers; do _i=$((_i + 1)); sleep 0.2; done
echo +cpuset > $cg/cgroup.subtree_control
mkdir $cg/a $cg/b
echo 2-3 > $cg/a/cpuset.cpus
echo 1 > $cg/a/cpuset.mems
echo 2-3 > $cg/b/cpuset.cpus
# b: mems left empty (the parent's)
taskset -c 0 rig-toucher --mb 64 --ready /tmp/t1.ready &
p1=$!
taskset -c 0 rig-toucher --mb 64 --ready /tmp/t2.ready &
p2=$!
while [ ! -e /tmp/t1.ready ] || [ ! -e /tmp/t2.ready ]; do sleep 0.2; done
rig_run before1 numastat -p $p1
rig_run before2 numastat -p $p2
rig_run join-a sh -c "echo $p1 > $cg/a/cgroup.procs"
rig_run join-b sh -c "echo $p2 > $cg/b/cgroup.procs"
sleep 1
rig_run after-a numastat -p $p1
rig_run after-b numastat -p $p2
rig_run mems-b cat $cg/b/cpuset.mems $cg/b/cpuset.mems.effective
kill $p1 $p2
