#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs test_torch_passthrough.py on 2 GPUs with planccl preloaded into an unchanged PyTorch.
# Usage: test/torch/run.sh [install prefix]   (default: build/install)
# PCL_TORCH_PYTHON=<python> picks the interpreter; otherwise the first of python3, python and
# /opt/*/bin/python3, ~/.venv*/bin/python3 that imports torch. Exits 77 without torch or 2 GPUs.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix=${1:-$root/build/install}
lib="$prefix/lib/libplanccl.so"
[ -f "$lib" ] || { echo "no $lib: build and install planccl first (cmake --install)" >&2; exit 1; }

py=${PCL_TORCH_PYTHON:-}
if [ -z "$py" ]; then
  for cand in python3 python /opt/*/bin/python3 "$HOME"/.venv*/bin/python3 /usr/local/bin/python3; do
    command -v "$cand" >/dev/null 2>&1 || [ -x "$cand" ] || continue
    if "$cand" -c 'import torch' >/dev/null 2>&1; then py=$cand; break; fi
  done
fi
[ -n "$py" ] || { echo "no python with torch found: skipped" >&2; exit 77; }
ngpu=$("$py" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
[ "${ngpu:-0}" -ge 2 ] || { echo "needs 2 GPUs, found ${ngpu:-0}: skipped" >&2; exit 77; }

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_DEBUG=${PLANCCL_DEBUG:-INFO} PLANCCL_DEBUG_SUBSYS=${PLANCCL_DEBUG_SUBSYS:-SHIM}
export TORCH_NCCL_ASYNC_ERROR_HANDLING=1
# PLANCCL_STATS=1: each communicator prints, at destroy, its calls and bytes per collective and
# path (plan name, or nccl and why); the summary below adds up the planned calls.
export PLANCCL_STATS=${PLANCCL_STATS:-1}
log=$(mktemp /tmp/pcl_torch_XXXXXX.log)
echo "== torch through planccl: $("$py" -c 'import torch; print(torch.__version__)') with LD_PRELOAD=$lib"
LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}" timeout 600 "$py" -m torch.distributed.run \
  --standalone --nproc_per_node=2 "$here/test_torch_passthrough.py" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
echo "== planccl stats (calls that ran on plans, per communicator and rank):"
grep -E 'planccl stats: .*(calls ran on plans| plan )' "$log" || echo "   (no stats printed)"
rm -f "$log"
[ $rc = 0 ] && echo "== torch through planccl: passed" || echo "== torch through planccl: FAILED (rc $rc)"
exit $rc
