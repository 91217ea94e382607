#!/usr/bin/env bash
# Session 11, device call 4: is it the PDL instructions' presence? planccl-refbench of 4efb5b6,
# of this tree, and of this tree built with -DPCL_NO_PDL_CODE (no griddepcontrol instruction in
# any kernel), PDL off, alternating 3 times.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
D=/tmp/r30; mkdir -p $D
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/$b; chmod +x $D/$b; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
PLANCCL_PDL=0 timeout 60 $D/refbench_old --ranks 2 > /dev/null 2>&1 # warm-up (clocks)
for i in 1 2 3; do
  for v in old new nopdl; do
    PLANCCL_PDL=0 timeout 60 $D/refbench_$v --ranks 2,4,8 > $OUT/refbench4_${v}_$i.log 2>&1
    echo "== $v $i rc $? $(grep REFBENCH $OUT/refbench4_${v}_$i.log | cut -c1-90)"
  done
done
