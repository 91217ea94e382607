#!/usr/bin/env bash
# Session 16, device call 3: exports and mappings shared per span (transport_mem_share, then
# automatic registration over them: shim_autoreg 2/1); shim_multinode with the 8-process shapes
# (2 hosts x 4 ranks, 4 hosts x 2 ranks) and a rank whose process dies (TCP goodbyes); the
# two-process NCCL-API tests; every port plan over TCP at the executor level. Most important first.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r63; rm -rf $D; mkdir -p $D/bin
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
PLANCCL_DEBUG=INFO PLANCCL_DEBUG_SUBSYS=IPC timeout 100 $D/bin/transport_mem_share > $OUT/mem_share.log 2>&1
el "transport_mem_share rc $?: $(grep -E 'rank codes' $OUT/mem_share.log)"
grep -E "check failed|mapped already" $OUT/mem_share.log | head -4
export PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
for t in "shim_autoreg 2" "shim_autoreg 1" shim_multinode shim_windows shim_faults; do
  [ "$t" = shim_faults ] && export PLANCCL_PLAN_DIR=$PWD/plans/allreduce
  LD_LIBRARY_PATH=$D/bin timeout 200 $D/bin/$t > $OUT/${t/ /_}.log 2>&1
  el "$t rc $?: $(grep -E 'rank codes|passed|FAILED|shim_multinode:.* s$' $OUT/${t/ /_}.log | tr '\n' ' ')"
  unset PLANCCL_PLAN_DIR
done
unset PLANCCL_NCCL_LIB
timeout 150 $D/bin/exec_plans --port-kind tcp --port-only --quick --ranks 2,4 > $OUT/exec_tcp.log 2>&1
el "exec_plans tcp rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_tcp.log)"
grep -E "FAIL|timed out|goodbye" $OUT/exec_tcp.log | head -5
