#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what is missing, builds and installs planccl under build/install, then runs the main
# job: with two or more GPUs the side-by-side benchmark (planccl vs the real NCCL, same run);
# with one GPU the plan vs hand-written kernel benchmark (ranks sharing it); without GPUs the CPU
# simulation of every shipped plan, as a table.
set -euo pipefail
source "$(dirname "$0")/scripts/common.sh"
cd "$PCL_ROOT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

pcl_install_deps
mkdir -p build
pcl_build build -DPCL_BUILD_TESTS=OFF
cmake --install build >/dev/null
prefix=$PCL_ROOT/build/install

ngpus=0
command -v nvidia-smi >/dev/null && ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "$ngpus" -ge 2 ]; then
  real=${PLANCCL_NCCL_LIB:-$(scripts/find_real_nccl.sh)}
  [ -n "$real" ] || { echo "no real libnccl.so.2 found; set PLANCCL_NCCL_LIB" >&2; exit 1; }
  export PLANCCL_NCCL_LIB=$real
  for coll in allreduce allgather reducescatter; do
    "$prefix/bin/planccl-bench" --coll "$coll" -b 1K -e 256M -f 4 -g 2 \
      --lib "planccl=$prefix/lib/libplanccl.so" --lib "nccl=$real"
  done
  "$prefix/bin/planccl-bench" --coll allreduce -b 1K -e 1K -g 2 -G 0 -n 10 --hostpath \
    --lib "planccl=$prefix/lib/libplanccl.so" --lib "nccl=$real" | grep '^# host path'
elif [ "$ngpus" -eq 1 ]; then
  pcl_log "one GPU: the shipped allreduce plans against a hand-written kernel, ranks sharing it"
  PCL_SOURCE_DIR=$PCL_ROOT "$prefix/bin/planccl-refbench" --ranks 2,4,8
else
  # The default set first, then the opt-in one; fp32 sum LL16 up to 16 KiB here (./test.sh runs
  # every dtype, op and packet format).
  pcl_log "no GPUs here: every shipped plan on the CPU simulator (fp32 sum, LL16, up to 16 KiB)"
  "$prefix/bin/planccl-plan" simulate --max-bytes 16K \
    $(find "$prefix/share/planccl/plans" -name "*.json" | sort) \
    $(find "$prefix/share/planccl/plans-extra" -name "*.json" | sort)
fi
