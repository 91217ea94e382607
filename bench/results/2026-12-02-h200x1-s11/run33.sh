#!/usr/bin/env bash
# Session 11, device call 7: compute-sanitizer memcheck and racecheck over this session's new
# paths at 2 ranks: reduce plans (LL, Simple), broadcast (every root), the zero-copy allreduce on
# exact registrations and window views.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
D=/tmp/r33; mkdir -p $D
gunzip -c .gpu/bin/exec_plans.gz > $D/exec_plans; chmod +x $D/exec_plans
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
plans="=reduce_2gpu_ll_inplace,=reduce_2gpu_ll_outofplace,=reduce_2gpu_simple_outofplace,=broadcast_2gpu_ll_outofplace,=broadcast_2gpu_simple_inplace,=allreduce_2gpu_zerocopy_outofplace,=allreduce_2gpu_zerocopy_inplace"
for tool in memcheck racecheck; do
  PCL_SOURCE_DIR=$PWD PLANCCL_SOCKET_IFNAME=lo PLANCCL_TIMEOUT_S=60 timeout 230 \
    "$cs" --tool $tool --report-api-errors no --error-exitcode 9 \
    $D/exec_plans --only thread --quick --no-graph --no-faults --no-latency --ranks 2 --max-bytes 65536 --filter "$plans" \
    > $OUT/sanitize_$tool.log 2>&1
  echo "$tool: exit $?; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/sanitize_$tool.log | tail -1); $(grep -E '^exec_plans: [0-9]+ passed' $OUT/sanitize_$tool.log)"
done
