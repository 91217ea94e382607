#!/usr/bin/env bash
# Session 16, device call 1: the flag-protocol probe (issue 11's nop goal), the new multi-node
# NCCL-API test (four processes posing as two hosts on one GPU, TCP port channels), and the
# two-process NCCL-API tests over the generalised helpers.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r61; rm -rf $D; mkdir -p $D/bin
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
$D/bin/planccl-flagprobe > $OUT/flagprobe_1.log 2>&1; el "flagprobe rc $?"
$D/bin/planccl-flagprobe > $OUT/flagprobe_2.log 2>&1; el "flagprobe rc $?"
export PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
L=$OUT/all.log; : > $L
run() { # label, test...
  local lab=$1; shift
  echo "==== $lab" >> $L
  LD_LIBRARY_PATH=$D/bin timeout 280 $D/bin/"$@" >> $L 2>&1; local rc=$?
  el "$lab rc $rc: $(sed -n "/^==== $lab\$/,\$p" $L | grep -E 'rank codes|passed|FAILED|want|lacks' | head -8 | tr '\n' ' ')"
}
run multinode shim_multinode
PLANCCL_PLAN_DIR=$PWD/plans/allreduce run faults shim_faults
run windows shim_windows
cat $OUT/flagprobe_1.log $OUT/flagprobe_2.log
