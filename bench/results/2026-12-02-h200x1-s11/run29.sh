#!/usr/bin/env bash
# Session 11, device call 3: the kernels issue neither the PDL wait nor the flag load behind it
# when launched without PDL (the order of 4efb5b6 again). planccl-refbench of 4efb5b6 and of
# this tree (PDL off) alternating 3 times, this tree with PDL on twice; every plan --quick with
# PDL off and on.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
D=/tmp/r29; mkdir -p $D
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/$b; chmod +x $D/$b; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for i in 1 2 3; do
  for v in old new; do
    PLANCCL_PDL=0 timeout 60 $D/refbench_$v --ranks 2,4,8 > $OUT/refbench3_${v}_$i.log 2>&1
    echo "== $v $i rc $? $(grep REFBENCH $OUT/refbench3_${v}_$i.log | cut -c1-90)"
  done
done
for i in 1 2; do
  PLANCCL_PDL=1 timeout 60 $D/refbench_new --ranks 2,4,8 > $OUT/refbench3_pdl1_$i.log 2>&1
  echo "== new PDL=1 $i rc $? $(grep REFBENCH $OUT/refbench3_pdl1_$i.log | cut -c1-90)"
done
for p in 0 1; do
  PLANCCL_PDL=$p timeout 200 $D/exec_plans --quick --max-bytes 65536 > $OUT/exec_plans_quick3_pdl$p.log 2>&1
  echo "exec_plans --quick PDL=$p rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_plans_quick3_pdl$p.log)"
done
