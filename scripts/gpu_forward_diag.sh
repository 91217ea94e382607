#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Where does a forwarded call's eager time go? ReduceScatter (no plan ships) through planccl as
# installed, with planccl disabled (pure pass-through, no planccl communicator state), and with
# every collective forced to NCCL, each next to the real NCCL in the same process.
# Run after scripts/gpu_check.sh built build-gpu on a 2-GPU machine.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
root=$(cd "$(dirname "$0")/.." && pwd)
bench=$root/build-gpu/install/bin/planccl-bench
lib=$root/build-gpu/install/lib/libplanccl.so
nccl=${PLANCCL_NCCL_LIB:-$("$root/scripts/find_real_nccl.sh")}
for mode in default PLANCCL_DISABLE=1 PLANCCL_FORCE_FALLBACK=all; do
  echo "## $mode"
  env $([ $mode = default ] || echo "$mode") "$bench" --coll reducescatter -b 1K -e 1M -f 4 -g 2 \
    -G 0 --repeat 3 --lib "planccl=$lib" --lib "nccl=$nccl" 2>&1 | grep -E '^ +[0-9]+[KM]? '
done
