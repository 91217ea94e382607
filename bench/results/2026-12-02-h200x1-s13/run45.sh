#!/usr/bin/env bash
# Session 13, device call 4: shim_autoreg against a library whose vote ignores the buffers'
# identity (a pair found by address counts as held): the free-and-reallocate and remap checks
# must fail. .gpu/mut/libplanccl.so.gz was built from comm_auto.c with that one line changed.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
D=/tmp/r45; mkdir -p $D/bin $D/mut
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
gunzip -c .gpu/mut/libplanccl.so.gz > $D/mut/libplanccl.so
export PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
for lvl in 2 1; do
  LD_LIBRARY_PATH=$D/mut timeout 100 $D/bin/shim_autoreg $lvl > $OUT/mut$lvl.log 2>&1
  echo "mutated, level $lvl: rc $? $(grep -h 'rank codes' $OUT/mut$lvl.log)"
  grep -h "check failed" $OUT/mut$lvl.log | head -4
done
