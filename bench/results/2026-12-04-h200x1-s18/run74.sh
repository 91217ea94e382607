#!/usr/bin/env bash
# Session 18, device call 3: a call that runs only in segments through the NCCL API (the 8-rank
# Simple reduce at 590 MiB, shim_segments, new), the rooted and windowed NCCL-API test again,
# and the broadcast and reduce plans at the executor level (layouts now check scratch once).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r74; rm -rf $D; mkdir -p $D/bin
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
export PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
LD_LIBRARY_PATH=$D/bin timeout 300 $D/bin/shim_segments > $OUT/shim_segments.log 2>&1
el "shim_segments rc $?: $(grep -E 'rank codes|passed$|FAILED$' $OUT/shim_segments.log | tr '\n' ' ')"
LD_LIBRARY_PATH=$D/bin timeout 200 $D/bin/shim_windows > $OUT/shim_windows.log 2>&1
el "shim_windows rc $?: $(tail -2 $OUT/shim_windows.log | tr '\n' ' ')"
unset PLANCCL_NCCL_LIB
# "reduce_" alone would match the allreduce plans too: the reduce plans by exact name.
R==reduce_2gpu_ll_inplace,=reduce_2gpu_ll_outofplace,=reduce_2gpu_simple_inplace,=reduce_2gpu_simple_outofplace,=reduce_4gpu_ll_inplace,=reduce_4gpu_ll_outofplace,=reduce_4gpu_simple_inplace,=reduce_4gpu_simple_outofplace,=reduce_8gpu_ll_inplace,=reduce_8gpu_ll_outofplace,=reduce_8gpu_simple_inplace,=reduce_8gpu_simple_outofplace
for f in broadcast_ $R; do
  l=$(echo $f | cut -c1-10 | tr -d '=,')
  timeout 240 $D/bin/exec_plans --quick --filter $f > $OUT/exec_$l.log 2>&1
  el "exec_plans $l rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_$l.log)"
  grep -E "FAIL|timed out|segments" $OUT/exec_$l.log | head -8
done
