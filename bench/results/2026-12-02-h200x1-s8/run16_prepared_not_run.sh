#!/usr/bin/env bash
# Session 8, device call 5 (PREPARED, NEVER RUN: the device time was spent): A/B of the EW
# kernel before (planccl-refbench-old) and after a change (planccl-refbench), alternating 3 times.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
for i in 1 2 3; do
  for v in old new; do
    b=.gpu/bin/planccl-refbench; [ $v = old ] && b=$b-old
    timeout 40 $b --ranks 2,4,8 > $OUT/ab_${v}_$i.log 2>&1
    echo "== $v $i rc $?"; grep -E '^ +[248] ' $OUT/ab_${v}_$i.log | awk '{print $1, $2, $3, $4, $5, $7}'
    grep REFBENCH $OUT/ab_${v}_$i.log
  done
done
