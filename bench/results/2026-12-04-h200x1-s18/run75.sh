#!/usr/bin/env bash
# Session 18, device call 4: issue 13's TCP goals again on the current code (the proxy now dozes
# on a futex after long idle spells): planccl-portbench as in session 12's table, host memory
# between two processes (4 sockets, the default), then GPU memory between two threads.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r75; rm -rf $D; mkdir -p $D/bin
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
for run in 1 2; do
  timeout 240 $D/bin/planccl-portbench -b 1M -e 64M -n 10 --lat-iters 1000 > $OUT/portbench_host_$run.log 2>&1
  el "host processes run $run rc $?"; grep -vE "^$" $OUT/portbench_host_$run.log | tail -12
done
timeout 240 $D/bin/planccl-portbench -b 1M -e 64M -n 10 --lat-iters 1000 --device --threads > $OUT/portbench_device_threads.log 2>&1
el "device threads rc $?"; grep -vE "^$" $OUT/portbench_device_threads.log | tail -12
