#!/usr/bin/env bash
# Session 11, device call 1: broadcast and reduce from every root (relabelled plans), the new
# reduce plans, zero-copy plans on exact registrations and on window views; every plan --quick
# (regressions); windows and roots through the NCCL API over the fake NCCL (shim_windows).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
D=/tmp/r27; mkdir -p $D
for b in exec_plans shim_windows shim_faults libplanccl.so libfakenccl.so; do
  gunzip -c .gpu/bin/$b.gz > $D/$b; chmod +x $D/$b
done
R=reduce_; F="broadcast_,zerocopy"
for n in 2 4 8; do for k in ll simple; do for p in inplace outofplace; do
  F="$F,=${R}${n}gpu_${k}_${p}"; done; done; done
timeout 300 $D/exec_plans --filter "$F" --max-bytes 262144 > $OUT/exec_rooted_zerocopy.log 2>&1
echo "exec_plans rooted+zerocopy rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_rooted_zerocopy.log)"
timeout 200 $D/exec_plans --quick --max-bytes 65536 > $OUT/exec_plans_quick.log 2>&1
echo "exec_plans --quick rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_plans_quick.log)"
export LD_LIBRARY_PATH=$D
PLANCCL_NCCL_LIB=$D/libfakenccl.so timeout 60 $D/shim_windows > $OUT/shim_windows.log 2>&1
echo "shim_windows rc $?: $(tail -1 $OUT/shim_windows.log)"
PLANCCL_PLAN_DIR=$PWD/plans/allreduce PLANCCL_NCCL_LIB=$D/libfakenccl.so timeout 100 $D/shim_faults > $OUT/shim_faults.log 2>&1
echo "shim_faults rc $?: $(tail -1 $OUT/shim_faults.log)"
