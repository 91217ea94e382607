#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# compute-sanitizer memcheck and racecheck over a representative subset of the executor's GPU
# test (two ranks as threads, the quick dtype set, the plans named by PCL_SANITIZE_PLANS: LL,
# packet, zero-copy, port-channel and thread-block-group ones). Run after scripts/gpu_check.sh built
# build-gpu on a 2-GPU machine; logs go to $OUT or build-gpu/logs. API errors are not reported:
# planccl checks every CUDA call itself, and probes such as enabling peer access that is already
# enabled return errors on purpose (memcheck counted 38 of those and 0 memory errors).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
root=$(cd "$(dirname "$0")/.." && pwd)
logs=${OUT:-$root/build-gpu/logs}
mkdir -p "$logs"
bin=$root/build-gpu/test/gpu/exec_plans
[ -x "$bin" ] || { echo "build first: scripts/gpu_check.sh" >&2; exit 1; }
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
[ -n "$cs" ] || { echo "compute-sanitizer not found: skipped" >&2; exit 77; }
rc=0
for tool in memcheck racecheck; do
  PCL_SOURCE_DIR=$root PLANCCL_SOCKET_IFNAME=lo timeout "${PCL_SANITIZE_TIMEOUT:-150}" "$cs" --tool $tool --report-api-errors no --error-exitcode 9 \
    "$bin" --only thread --quick --max-bytes 65536 --filter "${PCL_SANITIZE_PLANS:-ll1_outofplace,allreduce_pkt,ar2_simple,ag2_port,reduce_pack_tbg}" >"$logs/sanitize_$tool.log" 2>&1
  r=$?
  echo "$tool: exit $r ($(grep -c 'ERROR SUMMARY: 0 errors' "$logs/sanitize_$tool.log") clean summaries)"
  [ $r = 0 ] || rc=1
done
exit $rc
