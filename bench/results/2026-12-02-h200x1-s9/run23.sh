#!/usr/bin/env bash
# Session 9, device call 7: the PCL_KPROF phase breakdown of the per-form EW kernels beside the
# hand-written kernel's (the "after" of step 8's table).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
mkdir -p /tmp/r23; gunzip -c .gpu/bin/planccl-refbench-prof.gz > /tmp/r23/rb; chmod +x /tmp/r23/rb
timeout 90 /tmp/r23/rb --ranks 2,4,8 > $OUT/refbench_prof_call7.log 2>&1
echo "rc $?"; grep -vE '^\s*$' $OUT/refbench_prof_call7.log | grep -E 'breakdown|^ +[248] |REFBENCH'
