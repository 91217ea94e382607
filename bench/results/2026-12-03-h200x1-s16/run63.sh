#!/usr/bin/env bash
# Session 16, device call 3: shim_multinode with the 8-process shapes (2 hosts x 4 ranks, 4 hosts
# x 2 ranks: the hierarchical allreduce and reduce-scatter plans through the NCCL API), timed.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r63; rm -rf $D; mkdir -p $D/bin
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
export PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
for i in 1 2; do
  LD_LIBRARY_PATH=$D/bin timeout 500 $D/bin/shim_multinode > $OUT/multinode_$i.log 2>&1
  el "multinode $i rc $?: $(grep -E 'shim_multinode:' $OUT/multinode_$i.log | tr '\n' ' ')"
done
