#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Prints the path of the real libnccl.so.2: the nvidia-nccl Python package beside PyTorch first,
# then $CUDA_HOME/lib64. Prints nothing if none is found.
for py in python3 python; do
  command -v $py >/dev/null || continue
  d=$($py -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null) || continue
  [ -f "$d/libnccl.so.2" ] && { echo "$d/libnccl.so.2"; exit 0; }
done
cuda=${CUDA_HOME:-/usr/local/cuda}
[ -f "$cuda/lib64/libnccl.so.2" ] && echo "$cuda/lib64/libnccl.so.2"
exit 0
