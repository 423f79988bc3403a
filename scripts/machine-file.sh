#!/usr/bin/env bash
# A machine file of NODES nodes x CPUS CPUs each (SMT 2, 8 cores per last-level cache, 2 nodes per
# package, distances 10 / 11 in a package / 21 between packages, 64 GB a node), numbered as Linux
# numbers x86 CPUs: the first threads of every core first, the second threads half the machine
# later. For measuring how topology, simulator and policy grow with the machine (README.md's
# performance table: 4,096 to 65,536 CPUs).
# Usage: scripts/machine-file.sh NODES CPUS > FILE.toml   (CPUS even; NODES x CPUS at most 65,536)
set -euo pipefail
if [ $# -ne 2 ] || ! [[ $1 =~ ^[1-9][0-9]*$ && $2 =~ ^[1-9][0-9]*$ ]] || [ $(($2 % 2)) -ne 0 ] || [ $(($1 * $2)) -gt 65536 ]; then
  echo "usage: $0 NODES CPUS  (CPUS per node, even; NODES x CPUS at most 65536)" >&2
  exit 2
fi
awk -v nodes="$1" -v cpn="$2" 'BEGIN {
  half = nodes * cpn / 2; cores = cpn / 2
  printf "name = \"synthetic-%dn%dc\"\ndescription = \"synthetic: %d nodes x %d CPUs, SMT 2\"\n", nodes, nodes * cpn, nodes, cpn
  print "smt = 2\ncores_per_llc = 8\ndistances = ["
  for (i = 0; i < nodes; i++) {
    row = ""
    for (j = 0; j < nodes; j++) row = row (j ? ", " : "") (i == j ? 10 : (int(i / 2) == int(j / 2) ? 11 : 21))
    print "  [" row "],"
  }
  print "]"
  for (i = 0; i < nodes; i++) {
    a = i * cores; b = half + i * cores
    printf "\n[[nodes]]\nid = %d\ncpus = \"%d-%d,%d-%d\"\nmem_gb = 64\npackage = %d\n", i, a, a + cores - 1, b, b + cores - 1, int(i / 2)
  }
}'
