#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Automatic registration under PyTorch (pcl_autoreg_torch.py), both allocators: the default one at
# PLANCCL_AUTO_REG=2 and expandable segments at 1, planccl preloaded from an install prefix, only
# the 2-GPU zero-copy allreduce of the opt-in set added (so a call >= 128 KiB runs on planccl only
# registered). One GPU: the ranks share it over the recording fake NCCL (a sum is right only when
# planccl ran the call); two or more: the real NCCL (PLANCCL_NCCL_LIB, else found).
# Usage: test/torch/autoreg.sh <install prefix> <fake NCCL library>. Exits 77 without torch/GPU.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=${1:?install prefix}
fake=${2:?fake NCCL library}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null || { echo "autoreg: no torch or GPU: skipped"; exit 77; }
ngpu=$(python3 -c 'import torch; print(torch.cuda.device_count())')
nccl=$fake
[ "$ngpu" -ge 2 ] && nccl=${PLANCCL_NCCL_LIB:-$("$here/../../scripts/find_real_nccl.sh")}
dir=$(mktemp -d /tmp/pcl_autoreg_XXXXXX)
mkdir -p "$dir/plans"
ln -s "$prefix"/share/planccl/plans-extra/allreduce/2gpu_zerocopy_*.json "$dir/plans/"
rc=0
run() { # level, PYTORCH_CUDA_ALLOC_CONF
  echo "== PLANCCL_AUTO_REG=$1 PYTORCH_CUDA_ALLOC_CONF=$2, $ngpu GPU(s), NCCL $nccl"
  PYTORCH_CUDA_ALLOC_CONF=$2 LD_PRELOAD="$prefix/lib/libplanccl.so" PLANCCL_NCCL_LIB=$nccl \
    PLANCCL_PLAN_DIR="$dir/plans" PLANCCL_AUTO_REG=$1 PLANCCL_STATS=1 \
    timeout 300 python3 "$here/pcl_autoreg_torch.py" --logs "$dir/logs_$1" || rc=1
}
run 2 ""
run 1 expandable_segments:True
rm -rf "$dir"
exit $rc
