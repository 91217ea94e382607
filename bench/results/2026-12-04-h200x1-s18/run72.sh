#!/usr/bin/env bash
# Session 18, device call 1: why the hierarchical reduce-scatter failed in shim_multinode at
# 2 x 4 and 4 x 2 (each call's path now in the rank logs), then the whole test again.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r72; rm -rf $D; mkdir -p $D/bin
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
export PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
for s in "2 hosts x 4" "4 hosts x 2"; do
  f=$OUT/shim_$(echo $s | tr -d ' ').log
  LD_LIBRARY_PATH=$D/bin timeout 200 $D/bin/shim_multinode "$s" > $f 2>&1
  el "$s rc $?"; grep -E "element|pcl_path coll=reducescatter|rank codes" $f | sort | uniq -c | head -20
done
