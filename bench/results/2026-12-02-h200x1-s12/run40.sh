#!/usr/bin/env bash
# Session 12, device call 4: calls in segments (executor/exec_segment.c). With a 1 MiB scratch,
# the pipelined allreduce and the Simple broadcast and reduce at 2 and 4 ranks run their 4 MiB
# cases as consecutive calls, every output equal to the simulator's (graphs included); then every
# plan --quick at the default scratch (nothing else changed).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r40; mkdir -p $D/bin
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
F=simple_pipe,broadcast_2gpu_simple,broadcast_4gpu_simple,=reduce_2gpu_simple_inplace,=reduce_2gpu_simple_outofplace,=reduce_4gpu_simple_inplace,=reduce_4gpu_simple_outofplace
timeout 330 $D/bin/exec_plans --only thread --ranks 2,4 --filter $F --scratch-bytes 1048576 --max-bytes 4194304 --quick --no-latency --no-faults > $OUT/exec_segments.log 2>&1
el "exec_plans segments rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_segments.log)"
grep -E 'segments|FAIL|first failure|graph' $OUT/exec_segments.log | cut -c1-150 | head -40
timeout 240 $D/bin/exec_plans --quick --max-bytes 65536 --no-latency > $OUT/exec_quick.log 2>&1
el "exec_plans --quick rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_quick.log)"
grep -E 'FAIL|first failure' $OUT/exec_quick.log | head -10
