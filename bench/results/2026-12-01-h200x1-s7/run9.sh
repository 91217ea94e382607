#!/usr/bin/env bash
# Session 7, device call 1: everything written blind last session, plus the usual checks.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo
L=$OUT; t0=$(date +%s)
OUT= PCL_EXEC_PLANS_ARGS="--max-bytes 65536" PCL_EXEC_PLANS_TIMEOUT=300 PCL_REFBENCH_VARIANTS="ew" \
  PCL_REFBENCH_TIMEOUT=120 timeout 560 scripts/gpu_check.sh full > $L/gpu_check.txt 2>&1
echo "gpu_check rc $? after $(( $(date +%s) - t0 )) s"
tar czf $L/logs.tgz build-gpu/logs 2>/dev/null
grep -E 'took' $L/gpu_check.txt
sed -n '/===== summary/,$p' $L/gpu_check.txt
