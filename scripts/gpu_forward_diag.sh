#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Where does a forwarded call's eager time go? AllGather and ReduceScatter (no default plan)
# side by side with the real NCCL in one process: the real NCCL against itself (the bench's own
# noise and order effect), planccl as installed, and planccl disabled (pure pass-through).
# Run after scripts/gpu_check.sh (or `gpu_check.sh build`) on a 2-GPU machine.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
root=$(cd "$(dirname "$0")/.." && pwd)
bench=$root/build-gpu/install/bin/planccl-bench
lib=$root/build-gpu/install/lib/libplanccl.so
nccl=${PLANCCL_NCCL_LIB:-$("$root/scripts/find_real_nccl.sh")}
for coll in allgather reducescatter; do
  for mode in control default PLANCCL_DISABLE=1; do
    first="planccl=$lib"
    [ $mode = control ] && first="nccl-again=$nccl"
    echo "## $coll, $mode: columns = ${first%%=*}-eager, nccl-eager, ${first%%=*}-graph, nccl-graph"
    env $([ $mode = PLANCCL_DISABLE=1 ] && echo "$mode") "$bench" --coll $coll -b 1K -e 1M -f 4 \
      -g 2 --repeat 3 --lib "$first" --lib "nccl=$nccl" 2>&1 | grep -E '^ +[0-9]+[KM]? '
  done
done
