#!/usr/bin/env bash
# Session 9, device call 3: the EW kernels compiled one per form (reduction, packet, alignment;
# no branch tree inside) against HEAD's, alternating 3 times; then the full exec_plans run
# (every plan, every dtype/op/packet/placement, graphs, faults) on the new build (issue 10).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r19; mkdir -p $D/bin $D/logs; L=$D/logs; trap 'tar czf $OUT/logs19.tgz -C /tmp r19/logs 2>/dev/null' EXIT
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
for i in 1 2 3; do
  for v in old new; do
    b=$D/bin/planccl-refbench; [ $v = old ] && b=$b-old
    timeout 60 $b --ranks 2,4,8 > $L/ab_${v}_$i.log 2>&1
    echo "== $v $i rc $?"; grep -E '^ +[248] ' $L/ab_${v}_$i.log | awk '{print $1, $2, $3, $4, $5, $7}' | tr '\n' ';'; echo
    grep REFBENCH $L/ab_${v}_$i.log
  done
done
el "A/B done"
timeout 470 $D/bin/exec_plans > $L/exec_plans_full.log 2>&1
rc=$?; el "exec_plans (full) rc $rc"
sed -n '/^mode  *ranks/,$p' $L/exec_plans_full.log | grep -vE ' ok *$' | cut -c1-160 | tail -30
grep -cE ' ok *$' $L/exec_plans_full.log
grep -E '^exec_plans: [0-9]+ passed' $L/exec_plans_full.log
