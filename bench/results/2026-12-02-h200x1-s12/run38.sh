#!/usr/bin/env bash
# Session 12, device call 2: where the GPU-memory TCP path's time goes. The copy probe in five
# turn-taking modes; planccl-portbench with the plain-TCP bandwidth floor (1 and 4 sockets).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo
D=/tmp/r38; mkdir -p $D/bin; L=$OUT/all.log; : > $L
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
P=$D/bin/planccl-portbench
run() { echo "==== $*" | tee -a $L; timeout 120 "$@" > $D/o 2>&1; echo "rc $?" >> $D/o; cat $D/o >> $L; grep -E "^#|rc " $D/o | grep -v "planccl-portbench:" | cut -c1-200; }
run $P --probe
for s in 1 4; do PLANCCL_TCP_STREAMS=$s run $P -b 1M -e 64M -n 10 --lat-iters 1000; done
PLANCCL_TCP_STREAMS=4 run $P -b 1M -e 64M -n 10 --lat-iters 1000 --threads
PLANCCL_TCP_STREAMS=4 run $P -b 1M -e 64M -n 5 --lat-iters 1000 --device
