#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs shim_passthrough three times, once per way planccl can find the real NCCL: next to a loaded
# libtorch (the torch wheel's nvidia/nccl package), through LD_LIBRARY_PATH, and through
# PLANCCL_NCCL_LIB. Without a torch wheel only the system discovery run is made.
# Usage: shim_passthrough.sh <path to shim_passthrough> [python]
set -uo pipefail
bin=$1
py=${2:-${PCL_TORCH_PYTHON:-python3}}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_DEBUG=${PLANCCL_DEBUG:-INFO} PLANCCL_DEBUG_SUBSYS=${PLANCCL_DEBUG_SUBSYS:-SHIM}
unset PLANCCL_NCCL_LIB

run() { # name, then env assignments
  local name=$1; shift
  echo "== shim_passthrough: $name"
  env "$@" "$bin"
  local rc=$?
  [ $rc = 77 ] && exit 77
  [ $rc = 0 ] || { echo "== shim_passthrough: $name FAILED (rc $rc)"; exit 1; }
}

torch_lib=$("$py" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so"))' 2>/dev/null || true)
if [ -n "$torch_lib" ] && [ -f "$torch_lib" ]; then
  site=$(dirname "$(dirname "$(dirname "$torch_lib")")")
  nccl=$(ls "$site"/nvidia/nccl/lib/libnccl.so.2 "$site"/nvidia/cu13/lib/libnccl.so.2 2>/dev/null | head -1)
  run "discovery next to libtorch" PCL_TEST_TORCH_LIB="$torch_lib"
  if [ -n "$nccl" ]; then
    run "discovery through LD_LIBRARY_PATH" LD_LIBRARY_PATH="$(dirname "$nccl")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    run "PLANCCL_NCCL_LIB" PLANCCL_NCCL_LIB="$nccl"
  fi
else
  echo "== no torch wheel found with $py: system discovery only"
  run "system discovery"
fi
echo "== shim_passthrough: all runs passed"
