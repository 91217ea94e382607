#!/usr/bin/env bash
# Session 11, device call 2: ncclCommRegister'ed buffers through the NCCL API (shim_windows, now
# with rank-specific offsets) and shim_faults on the new dispatcher; planccl-refbench of
# 4efb5b6 (before PDL) and of this tree (PDL off), alternating 3 times: the A/B that session 10
# left open; then this tree with PDL on twice (how often the outliers come).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
D=/tmp/r28; mkdir -p $D
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/$b; chmod +x $D/$b; done
export LD_LIBRARY_PATH=$D
PLANCCL_NCCL_LIB=$D/libfakenccl.so timeout 60 $D/shim_windows > $OUT/shim_windows_call2.log 2>&1
echo "shim_windows rc $?: $(tail -1 $OUT/shim_windows_call2.log)"
PLANCCL_PLAN_DIR=$PWD/plans/allreduce PLANCCL_NCCL_LIB=$D/libfakenccl.so timeout 100 $D/shim_faults > $OUT/shim_faults_call2.log 2>&1
echo "shim_faults rc $?: $(tail -1 $OUT/shim_faults_call2.log)"
unset LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for i in 1 2 3; do
  for v in old new; do
    PLANCCL_PDL=0 timeout 60 $D/refbench_$v --ranks 2,4,8 > $OUT/refbench_${v}_$i.log 2>&1
    echo "== $v $i rc $? $(grep REFBENCH $OUT/refbench_${v}_$i.log | cut -c1-90)"
  done
done
for i in 1 2; do
  PLANCCL_PDL=1 timeout 60 $D/refbench_new --ranks 2,4,8 > $OUT/refbench_pdl1_$i.log 2>&1
  echo "== new PDL=1 $i rc $? $(grep REFBENCH $OUT/refbench_pdl1_$i.log | cut -c1-90)"
done
for v in old_3 new_3 pdl1_2; do echo "-- $v"; grep -E '^ +[248] ' $OUT/refbench_$v.log | cut -c1-84; done
