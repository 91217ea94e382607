#!/usr/bin/env bash
# Session 11, device call 6: PDL as a build option. Plain build (PDL paths compiled out) against
# 4efb5b6, alternating 3 times, PDL off; the plain build with PLANCCL_PDL=1 (WARNed, ignored);
# the -DPCL_PDL=ON build with PLANCCL_PDL=1 twice and =0 once; every plan --quick on the plain
# build and on the PDL build with PDL on.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
D=/tmp/r32; mkdir -p $D
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/$b; chmod +x $D/$b; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
PLANCCL_PDL=0 timeout 60 $D/refbench_old --ranks 2 > /dev/null 2>&1 # warm-up (clocks)
for i in 1 2 3; do
  for v in old new; do
    PLANCCL_PDL=0 timeout 60 $D/refbench_$v --ranks 2,4,8 > $OUT/refbench6_${v}_$i.log 2>&1
    echo "== $v $i rc $? $(grep REFBENCH $OUT/refbench6_${v}_$i.log | cut -c1-90)"
  done
done
PLANCCL_PDL=1 timeout 60 $D/refbench_new --ranks 2 > $OUT/refbench6_new_pdl1_ignored.log 2>&1
echo "== new PLANCCL_PDL=1 rc $?: $(grep -c 'PLANCCL_PDL=1 ignored' $OUT/refbench6_new_pdl1_ignored.log) warning(s); $(grep '^# planned' $OUT/refbench6_new_pdl1_ignored.log)"
for p in 1 0 1; do
  PLANCCL_PDL=$p timeout 60 $D/refbench_pdl --ranks 2,4,8 > $OUT/refbench6_pdlbuild_pdl$p.log 2>&1
  echo "== PDL build PLANCCL_PDL=$p rc $? $(grep REFBENCH $OUT/refbench6_pdlbuild_pdl$p.log | cut -c1-90)"
done
timeout 200 $D/exec_plans --quick --max-bytes 65536 > $OUT/exec_plans_quick6_plain.log 2>&1
echo "exec_plans --quick plain build rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_plans_quick6_plain.log)"
PLANCCL_PDL=1 timeout 200 $D/exec_plans_pdl --quick --max-bytes 65536 > $OUT/exec_plans_quick6_pdlbuild.log 2>&1
echo "exec_plans --quick PDL build, PDL on rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_plans_quick6_pdlbuild.log)"
grep -h "alternating in one graph\|PDL edges" $OUT/exec_plans_quick6_*.log | head -6
