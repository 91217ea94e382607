#!/usr/bin/env bash
# Session 10, device call 2: after the review mend of the interpreter's and LL kernel's start
# (first program unit held in a register across the PDL wait): every plan --quick, PDL off and
# on; planccl-refbench once each.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
D=/tmp/r26; mkdir -p $D
for b in exec_plans planccl-refbench; do gunzip -c .gpu/bin/$b.gz > $D/$b; chmod +x $D/$b; done
for p in 0 1; do
  PLANCCL_PDL=$p timeout 150 $D/exec_plans --quick --max-bytes 65536 > $OUT/exec_plans_quick_call2_pdl$p.log 2>&1
  echo "exec_plans --quick PDL=$p rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_plans_quick_call2_pdl$p.log)"
  PLANCCL_PDL=$p timeout 60 $D/planccl-refbench --ranks 2,4,8 > $OUT/refbench_call2_pdl$p.log 2>&1
  echo "refbench PDL=$p rc $?: $(grep REFBENCH $OUT/refbench_call2_pdl$p.log | cut -c1-90)"
done
