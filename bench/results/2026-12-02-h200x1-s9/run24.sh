#!/usr/bin/env bash
# Session 9, device call 8: after the review mends (EW form resolved once per accepted
# (dtype, op, packet), not per call): the one-phase plans --quick with the element-aligned cases, and
# planccl-refbench.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
D=/tmp/r24; mkdir -p $D
for b in exec_plans planccl-refbench; do gunzip -c .gpu/bin/$b.gz > $D/$b; chmod +x $D/$b; done
timeout 60 $D/exec_plans --quick --no-faults --no-latency --filter ll1 > $OUT/exec_plans_quick_call8.log 2>&1
echo "exec_plans --quick rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_plans_quick_call8.log)"
timeout 60 $D/planccl-refbench --ranks 2,4,8 > $OUT/refbench_call8.log 2>&1
echo "refbench rc $?"; grep -E '^ +[248] |REFBENCH' $OUT/refbench_call8.log | cut -c1-70
