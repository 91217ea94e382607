#!/usr/bin/env bash
# Session 16, device call 4: shim_multinode without reduce-scatter at 2 x 4 and 4 x 2 (call 3: the
# hierarchical reduce-scatter plans were never selected there, the calls went to NCCL), twice.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r64; rm -rf $D; mkdir -p $D/bin
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
export PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
for i in 1 2; do
  LD_LIBRARY_PATH=$D/bin timeout 200 $D/bin/shim_multinode > $OUT/multinode_$i.log 2>&1
  el "multinode $i rc $?: $(grep -E 'rank codes|shim_multinode:.*( s$|passed$|FAILED$)' $OUT/multinode_$i.log | tr '\n' ' ')"
done
