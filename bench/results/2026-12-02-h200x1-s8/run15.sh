#!/usr/bin/env bash
# Session 8, device call 4 (binaries built on the CPU machine and carried in .gpu/bin, no build
# here): the EW kernel whose idle warps skip the descriptor decode, against the hand-written
# kernel, then every one-phase plan on it against the simulator.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
timeout 90 .gpu/bin/planccl-refbench --ranks 2,4,8 > $OUT/refbench_call4.log 2>&1
el "refbench rc $?"; grep -vE '^\s*$' $OUT/refbench_call4.log | grep -v '^# empty' | tail -11
timeout 120 .gpu/bin/exec_plans --quick --no-faults --no-latency --filter ll1 > $OUT/exec_plans_ll1_call4.log 2>&1
el "exec_plans --quick --filter ll1 rc $?"; sed -n '/^mode  *ranks/,$p' $OUT/exec_plans_ll1_call4.log | cut -c1-160 | tail -40
