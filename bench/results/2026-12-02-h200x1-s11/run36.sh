#!/usr/bin/env bash
# Session 11, device call 10: run35.sh again after the review mend (a call looks its buffers up
# in windows and registrations only when a zero-copy plan would run it registered).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
D=/tmp/r36; mkdir -p $D
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/$b; chmod +x $D/$b; done
export LD_LIBRARY_PATH=$D PLANCCL_NCCL_LIB=$D/libfakenccl.so
timeout 60 $D/shim_windows > $OUT/shim_windows_call10.log 2>&1
echo "shim_windows rc $?: $(tail -1 $OUT/shim_windows_call10.log)"
PLANCCL_PLAN_DIR=$PWD/plans/allreduce timeout 100 $D/shim_faults > $OUT/shim_faults_call10.log 2>&1
echo "shim_faults rc $?: $(tail -1 $OUT/shim_faults_call10.log)"
PLANCCL_DEBUG=INFO PLANCCL_DEBUG_SUBSYS=INIT PLANCCL_PLAN_DIR=$PWD/plans timeout 100 $D/shim_faults > $OUT/shim_faults_extra_call10.log 2>&1
echo "shim_faults, opt-in set rc $?: $(tail -1 $OUT/shim_faults_extra_call10.log)"
