#!/usr/bin/env bash
# Session 12, device call 7, after the review's refactors (segment wrapper, one put path for
# TCP): segmented calls at 2 and 4 ranks, the TCP port plans, planccl-portbench host and GPU.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r43; mkdir -p $D/bin
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
F=simple_pipe,broadcast_2gpu_simple,=reduce_2gpu_simple_inplace,=reduce_4gpu_simple_outofplace
timeout 200 $D/bin/exec_plans --only thread --ranks 2,4 --filter $F --scratch-bytes 3145728 --max-bytes 4194304 --quick --no-latency --no-faults > $OUT/exec_segments.log 2>&1
el "exec_plans segments rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_segments.log)"
grep -E '^thread .*(segments|FAIL)|first failure' $OUT/exec_segments.log | cut -c1-150
timeout 200 $D/bin/exec_plans --port-kind tcp --port-only --quick --no-graph > $OUT/exec_tcp.log 2>&1
el "exec_plans tcp rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_tcp.log)"
grep -E 'FAIL|first failure' $OUT/exec_tcp.log | head
for m in "" "--device"; do
  timeout 60 $D/bin/planccl-portbench -b 1M -e 64M -n 10 --lat-iters 1000 $m > $OUT/portbench$m.log 2>&1
  el "portbench $m rc $?"; grep -E '^ +67108864|one way|bandwidth floor|result' $OUT/portbench$m.log | cut -c1-160
done
