#!/usr/bin/env bash
# Session 19, device calls 8 and 11: shim_autoreg with the full-table case (64 allocations fill every
# slot; a call whose input is in the oldest slot and whose output is new), both levels; call 11
# with 1026 calls at per-rank offsets moving through a cuMem span (more views than kept).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/s19; rm -rf $D; mkdir -p $D/bin
for f in .gpu/bin/libplanccl.so.gz .gpu/bin/libfakenccl.so.gz .gpu/bin/shim_autoreg.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
export PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
for lvl in 2 1; do
  LD_LIBRARY_PATH=$D/bin timeout 200 $D/bin/shim_autoreg $lvl > $OUT/shim_autoreg_$lvl.log 2>&1
  el "shim_autoreg $lvl rc $?: $(tail -2 $OUT/shim_autoreg_$lvl.log | tr '\n' ' ')"
done
