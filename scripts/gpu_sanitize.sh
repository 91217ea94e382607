#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# compute-sanitizer memcheck and racecheck over the executor's GPU test on whatever GPUs there are
# (one is enough: ranks as threads share it): the quick dtype set, sizes up to 64 KiB, the plans
# named by PCL_SANITIZE_PLANS (LL on the fast path and on the interpreter, zero-copy, port-channel
# and thread-block-group ones). Run after scripts/gpu_check.sh built build-gpu; logs go to $OUT
# or build-gpu/logs. API errors are not reported: planccl checks every CUDA call itself, and
# probes such as enabling peer access that is already enabled return errors on purpose.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
root=$(cd "$(dirname "$0")/.." && pwd)
logs=${OUT:-$root/build-gpu/logs}
mkdir -p "$logs"
bin=$root/build-gpu/test/gpu/exec_plans
[ -x "$bin" ] || { echo "build first: scripts/gpu_check.sh build" >&2; exit 1; }
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
[ -n "$cs" ] || { echo "compute-sanitizer not found: skipped" >&2; exit 77; }
plans=${PCL_SANITIZE_PLANS:-2gpu_ll1_small_outofplace,allreduce_pkt,=allreduce,test_ar2_port_rppkt,test_ar2_port_recspkt,test_ag2_port,reduce_pack_tbg,transfer_pack_tbg,test_ar2_simple_barrier_tbg,allreduce_2gpu_zerocopy_inplace}
rc=0
for tool in memcheck racecheck; do
  PCL_SOURCE_DIR=$root PLANCCL_SOCKET_IFNAME=lo PLANCCL_TIMEOUT_S=60 timeout "${PCL_SANITIZE_TIMEOUT:-150}" \
    "$cs" --tool $tool --report-api-errors no --error-exitcode 9 \
    "$bin" --only thread --quick --no-graph --no-faults --no-latency --ranks 2 --max-bytes 65536 --filter "$plans" \
    >"$logs/sanitize_$tool.log" 2>&1
  r=$?
  echo "$tool: exit $r; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/sanitize_$tool.log" | tail -1); $(grep -E '^exec_plans: [0-9]+ passed' "$logs/sanitize_$tool.log")"
  [ $r = 0 ] || rc=1
done
exit $rc
