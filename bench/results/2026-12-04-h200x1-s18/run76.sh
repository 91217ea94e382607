#!/usr/bin/env bash
# Session 18, device call 5: issue 13's bandwidth goal (>= 10 GB/s at 64 MiB, host memory, two
# processes, 4 sockets) over more messages and runs than call 4's 10 per size (one run of which
# gave 9.8 GB/s), beside the plain sockets' floor of each run.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo
D=/tmp/r76; rm -rf $D; mkdir -p $D/bin
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
for run in 1 2 3 4 5 6; do
  timeout 120 $D/bin/planccl-portbench -b 64M -e 64M -n 40 --lat-iters 2000 > $OUT/bw64m_$run.log 2>&1
  echo "run $run rc $?: $(grep -E '^ +67108864' $OUT/bw64m_$run.log | awk '{print $3 " GB/s"}'), $(grep -o 'one way (round trip / 2) over [0-9]* round trips: median [0-9.]* us' $OUT/bw64m_$run.log | sed 's/.*median/one way/'), floor $(grep -o '4 sockets [0-9.]* GB/s' $OUT/bw64m_$run.log)"
done
