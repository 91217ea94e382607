#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The PyTorch end-to-end suite: pcl_torch_suite.py under torchrun with planccl preloaded, at world
# size 1, 2 and all GPUs, default and opt-in plans, plus runs without planccl for the DDP losses.
# Usage: test/torch/run.sh [install prefix]   (default: build/install)
#   PCL_TORCH_PYTHON=<python>   interpreter (else the first of python3, python, ... importing torch)
#   PCL_TORCH_WORLDS="1 2 8"    world sizes (default: 1, 2 and the GPU count, as GPUs allow)
#   PCL_TORCH_EXTRA=0           skip the pass with PLANCCL_PLAN_DIR=<prefix>/share/planccl/plans-extra
#   PCL_TORCH_ARGS="--only ddp" extra suite arguments
#   PCL_TORCH_BACKEND=gloo      CPU dry run without planccl (predicted stats fed to the checker)
#   PCL_TORCH_NCCL=<libnccl.so.2>  a real NCCL for both sides: preloaded by the runs without
#                               planccl, planccl's PLANCCL_NCCL_LIB in the others. With NCCL 2.30
#                               or later under the MPS daemon (scripts/mps_run.sh), ranks share
#                               GPUs: the default worlds are then 2 and 4 on one GPU.
# Exits 77 without torch or a GPU (gloo: without torch).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix=${1:-$root/build/install}
backend=${PCL_TORCH_BACKEND:-nccl}
lib="$prefix/lib/libplanccl.so"

py=${PCL_TORCH_PYTHON:-}
if [ -z "$py" ]; then
  for cand in python3 python /opt/*/bin/python3 "$HOME"/.venv*/bin/python3 /usr/local/bin/python3; do
    command -v "$cand" >/dev/null 2>&1 || [ -x "$cand" ] || continue
    if "$cand" -c 'import torch' >/dev/null 2>&1; then py=$cand; break; fi
  done
fi
[ -n "$py" ] || { echo "no python with torch found: skipped" >&2; exit 77; }

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TORCH_NCCL_ASYNC_ERROR_HANDLING=${TORCH_NCCL_ASYNC_ERROR_HANDLING:-1}
export CUBLAS_WORKSPACE_CONFIG=:4096:8 OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
# Stats go to each rank's stderr at communicator destroy; the suite reads its own stderr.
export PLANCCL_STATS=1 PLANCCL_DEBUG=${PLANCCL_DEBUG:-WARN}
out=$(mktemp -d /tmp/pcl_torch_XXXXXX)
export PCL_TORCH_RESULTS=$out PCL_PREFIX=$prefix
suite="$here/pcl_torch_suite.py"
args=(${PCL_TORCH_ARGS:-})
"$py" "$here/pcl_expect.py" "$prefix" | tail -1 || exit 1

if [ "$backend" = gloo ]; then
  worlds=${PCL_TORCH_WORLDS:-"1 2"}
  ngpu=0
else
  [ -f "$lib" ] || { echo "no $lib: build and install planccl first (cmake --install)" >&2; exit 1; }
  ngpu=$("$py" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
  [ "${ngpu:-0}" -ge 1 ] || { echo "needs a GPU, found ${ngpu:-0}: skipped" >&2; exit 77; }
  worlds=${PCL_TORCH_WORLDS:-"1 $( [ "$ngpu" -ge 2 ] && echo 2) $( [ "$ngpu" -gt 2 ] && echo "$ngpu")"}
  if [ -n "${PCL_TORCH_NCCL:-}" ]; then
    # NCCL >= 2.30 takes several ranks per GPU (the suite binds LOCAL_RANK mod the GPU count).
    export PLANCCL_NCCL_LIB=$PCL_TORCH_NCCL NCCL_MULTI_RANK_GPU_ENABLE=1
    [ "$ngpu" = 1 ] && worlds=${PCL_TORCH_WORLDS:-"2 4"}
  fi
  # NCCL functions this torch calls that planccl does not define would reach the real library
  # with planccl's communicator handle: name them (a call to one of them is a crash, not a skip).
  tlib=$("$py" -c 'import torch,os; print(os.path.join(os.path.dirname(torch.__file__),"lib","libtorch_cuda.so"))')
  if command -v nm >/dev/null && [ -f "$tlib" ]; then
    missing=$(comm -23 <(nm -D --undefined-only "$tlib" | grep -o 'nccl[A-Za-z0-9_]*' | sort -u) \
                       <(nm -D --defined-only "$lib" | grep -o ' nccl[A-Za-z0-9_]*' | tr -d ' ' | sort -u))
    [ -n "$missing" ] && echo "== note: torch uses NCCL functions planccl lacks: $(echo $missing)"
  fi
fi
echo "== torch $("$py" -c 'import torch; print(torch.__version__)') backend $backend, worlds: $worlds; results in $out"

fails=0
run() { # name, world, preload(0/1), suite args...
  local name=$1 w=$2 pre=$3; shift 3
  local t0=$SECONDS rc
  if [ "$pre" = 1 ]; then
    LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}" timeout 900 "$py" -m torch.distributed.run \
      --standalone --nproc_per_node="$w" "$suite" --backend "$backend" "$@" >"$out/$name.log" 2>&1
  else
    LD_PRELOAD="${PCL_TORCH_NCCL:-}${LD_PRELOAD:+${PCL_TORCH_NCCL:+:}$LD_PRELOAD}" timeout 900 \
      "$py" -m torch.distributed.run --standalone --nproc_per_node="$w" "$suite" \
      --backend "$backend" "$@" >"$out/$name.log" 2>&1
  fi
  rc=$?
  grep -E '^\[rank 0\] (passed|stats|FAIL|note|ddp:|all_reduce:)' "$out/$name.log" | sed 's/^/   /'
  if [ $rc = 0 ]; then
    echo "== $name: passed ($((SECONDS - t0)) s)"
  else
    fails=$((fails + 1))
    echo "== $name: FAILED (rc $rc, $((SECONDS - t0)) s); last lines of $out/$name.log:"
    grep -E 'FAIL|Error|error' "$out/$name.log" | grep -v '^\s*$' | head -30 | sed 's/^/   /'
  fi
}

for w in $worlds; do
  ref="$out/ref_w$w"
  mkdir -p "$ref"
  if [ "$backend" = gloo ]; then
    PCL_TORCH_RESULTS=$ref run "gloo_ddp_ref_w$w" "$w" 0 --only ddp --expect-planccl 0
    run "gloo_w$w" "$w" 0 --fake-stats --ddp-reference "$ref" "${args[@]}"
    continue
  fi
  # The same DDP loop without planccl first: the planccl run compares its losses with these.
  PCL_TORCH_RESULTS=$ref run "ddp_ref_w$w" "$w" 0 --only ddp --expect-planccl 0
  run "planccl_w$w" "$w" 1 --expect-planccl 1 --ddp-reference "$ref" "${args[@]}"
  if [ "${PCL_TORCH_EXTRA:-1}" = 1 ] && [ "$w" -ge 2 ] && [ -d "$prefix/share/planccl/plans-extra" ]; then
    PLANCCL_PLAN_DIR="$prefix/share/planccl/plans-extra" \
      run "planccl_extra_w$w" "$w" 1 --expect-planccl 1 --ddp-reference "$ref" \
      --skip symm_mem,mem_registration "${args[@]}"
  fi
done

if [ "$backend" = nccl ] && [ "$ngpu" -ge 2 ]; then
  # Process-global choices get their own torchrun: torch's NCCL symmetric-memory backend (the
  # device-API user), and TorchComms (PyTorch's newer NCCL backend) when it is installed.
  if "$py" -c 'import torch.distributed._symmetric_memory as s; assert hasattr(s, "set_backend")' 2>/dev/null; then
    run "planccl_symm_nccl_w2" 2 1 --expect-planccl 1 --only symm_mem --symm-backend NCCL
  fi
  if "$py" -c 'import torchcomms' 2>/dev/null; then
    TORCH_DISTRIBUTED_USE_TORCHCOMMS=1 run "planccl_torchcomms_w2" 2 1 --expect-planccl 1 \
      --lenient-stats --only basic,all_reduce,all_gather,reduce_scatter,broadcast_reduce,async_barrier
  else
    echo "== torchcomms not installed: PyTorch's TorchComms NCCL backend not tested"
  fi
fi

if [ $fails = 0 ]; then echo "== torch through planccl: passed"; else echo "== torch through planccl: $fails run(s) FAILED (logs in $out)"; fi
[ $fails = 0 ]
