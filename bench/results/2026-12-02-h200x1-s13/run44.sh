#!/usr/bin/env bash
# Session 13, device calls 2, 3 and 5 (5: the final code): automatic registration through the NCCL API (shim_autoreg at levels
# 2 and 1), and the NCCL-API tests whose helpers moved into shim_mp.h (shim_windows, shim_faults).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r44; mkdir -p $D/bin
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
export LD_LIBRARY_PATH=$D/bin PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
for t in "shim_autoreg 2" "shim_autoreg 1" "shim_windows" "shim_faults"; do
  set -- $t
  [ $1 = shim_faults ] && export PLANCCL_PLAN_DIR=$PWD/plans/allreduce  # the built-in path is this machine's
  timeout 200 $D/bin/$t > $OUT/$1${2:-}.log 2>&1
  el "$t rc $?: $(tail -1 $OUT/$1${2:-}.log)"
done
grep -h "rank codes\|check failed" $OUT/*.log | head -20
