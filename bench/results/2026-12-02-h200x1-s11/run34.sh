#!/usr/bin/env bash
# Session 11, device call 8: shim_windows with a registration whose exchange fails (pinned host
# memory): WARNed once on each rank, not retried, the calls run unregistered.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
D=/tmp/r34; mkdir -p $D
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/$b; chmod +x $D/$b; done
LD_LIBRARY_PATH=$D PLANCCL_NCCL_LIB=$D/libfakenccl.so timeout 60 $D/shim_windows > $OUT/shim_windows_call8.log 2>&1
echo "shim_windows rc $?: $(tail -1 $OUT/shim_windows_call8.log)"
