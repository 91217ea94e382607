#!/usr/bin/env bash
# Session 11, device call 9: the NCCL-API tests on the final tree (scratch capped and agreed):
# shim_windows and shim_faults over the fake NCCL, and shim_faults with the opt-in set loaded
# (its scratch then hits the 64 MiB cap).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
D=/tmp/r35; mkdir -p $D
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/$b; chmod +x $D/$b; done
export LD_LIBRARY_PATH=$D PLANCCL_NCCL_LIB=$D/libfakenccl.so
timeout 60 $D/shim_windows > $OUT/shim_windows_call9.log 2>&1
echo "shim_windows rc $?: $(tail -1 $OUT/shim_windows_call9.log)"
PLANCCL_PLAN_DIR=$PWD/plans/allreduce timeout 100 $D/shim_faults > $OUT/shim_faults_call9.log 2>&1
echo "shim_faults rc $?: $(tail -1 $OUT/shim_faults_call9.log)"
PLANCCL_DEBUG=INFO PLANCCL_DEBUG_SUBSYS=INIT PLANCCL_PLAN_DIR=$PWD/plans timeout 100 $D/shim_faults > $OUT/shim_faults_extra_call9.log 2>&1
echo "shim_faults, opt-in set rc $?: $(tail -1 $OUT/shim_faults_extra_call9.log)"
