#!/usr/bin/env bash
# Session 12, device call 5: calls in segments at 4 and 8 ranks (8 MiB scratch, 8 MiB calls:
# the pipelined allreduce in 2 segments, the Simple reduce in 4 or 8).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r41; mkdir -p $D/bin
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
F==allreduce_4gpu_simple_pipe_outofplace,=reduce_4gpu_simple_inplace,=allreduce_8gpu_simple_pipe_inplace,=reduce_8gpu_simple_outofplace,=broadcast_8gpu_simple_inplace
timeout 450 $D/bin/exec_plans --only thread --ranks 4,8 --filter $F --scratch-bytes 8388608 --max-bytes 8388608 --quick --no-latency --no-faults > $OUT/exec_segments8.log 2>&1
el "exec_plans segments rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_segments8.log)"
grep -E '^thread|FAIL|first failure' $OUT/exec_segments8.log | cut -c1-150 | head -40
