#!/usr/bin/env bash
# Session 14, device call 4: shim_autoreg at levels 2 and 1 after its skip-a-call case moved to
# the cuMem buffer (a "no" vote, as cudaMalloc memory's at level 1, no longer waits for peers).
set -uo pipefail
D=/tmp/r50; rm -rf $D; mkdir -p $D/bin
for f in .gpu/bin/libplanccl.so.gz .gpu/bin/libfakenccl.so.gz .gpu/bin/shim_autoreg.gz; do
  b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b
done
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
for l in 2 1; do
  LD_LIBRARY_PATH=$D/bin timeout 100 $D/bin/shim_autoreg $l > $OUT/shim_autoreg$l.log 2>&1
  echo "level $l rc $?: $(grep -E 'rank codes|passed|FAILED' $OUT/shim_autoreg$l.log | tr '\n' ' ')"
done
