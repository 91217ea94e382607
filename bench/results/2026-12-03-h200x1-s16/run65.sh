#!/usr/bin/env bash
# Session 16, device call 5: after the review (the shared exports and mappings now on one
# reference-counted list helper, transport/mem_shared.c; behaviour unchanged): the mem-sharing
# test, automatic registration, symmetric windows, the multi-node shapes.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r65; rm -rf $D; mkdir -p $D/bin
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
PLANCCL_DEBUG=INFO PLANCCL_DEBUG_SUBSYS=IPC timeout 100 $D/bin/transport_mem_share > $OUT/mem_share.log 2>&1
el "transport_mem_share rc $?: $(grep -E 'rank codes' $OUT/mem_share.log)"
export PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
for t in "shim_autoreg 2" "shim_autoreg 1" shim_windows shim_multinode; do
  LD_LIBRARY_PATH=$D/bin timeout 200 $D/bin/$t > $OUT/${t/ /_}.log 2>&1
  el "$t rc $?: $(grep -E 'rank codes|passed$|FAILED$' $OUT/${t/ /_}.log | tr '\n' ' ')"
done
