#!/usr/bin/env bash
# Session 12, device call 1: TCP port channels. The copy probe (one process alone on the GPU, two
# taking turns); planccl-portbench before (9b05354) and after striping (PLANCCL_TCP_STREAMS 1, 2,
# 4, 8) on host and GPU memory, processes and threads; the TCP port plans on the GPU.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r37; mkdir -p $D/bin; L=$OUT/all.log; : > $L
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader; nproc
pb() { # label, binary, args...
  local lab=$1; shift; echo "==== $lab: $*" >> $L
  timeout 120 "$@" >> $L 2>&1; local rc=$?
  el "$lab rc $rc"
  awk -v lab="$lab" '/^ +[0-9]+ /{if($1==65536||$1==1048576||$1==16777216||$1==67108864) printf "  %-22s %9s B %10s us %7s GB/s wrong %s\n", lab, $1, $2, $3, $4} /one way/{sub(/^# /,""); printf "  %-22s %s\n", lab, substr($0,1,110)}' <(sed -n "/^==== $lab:/,/^====/p" $L)
}
pb probe $D/bin/planccl-portbench --probe
grep -A3 "GPU copies" $L | tail -3
pb host_old $D/bin/planccl-portbench-old -b 64K -e 64M -n 10 --lat-iters 2000
for s in 1 2 4 8; do PLANCCL_TCP_STREAMS=$s pb host_s$s $D/bin/planccl-portbench -b 64K -e 64M -n 10 --lat-iters 2000; done
pb dev_old $D/bin/planccl-portbench-old -b 64K -e 64M -n 5 --lat-iters 1000 --device
for s in 1 4 8; do PLANCCL_TCP_STREAMS=$s pb dev_s$s $D/bin/planccl-portbench -b 64K -e 64M -n 5 --lat-iters 1000 --device; done
for s in 1 4; do PLANCCL_TCP_STREAMS=$s pb devthr_s$s $D/bin/planccl-portbench -b 64K -e 64M -n 5 --lat-iters 1000 --device --threads; done
PLANCCL_TCP_STREAMS=4 pb hostthr_s4 $D/bin/planccl-portbench -b 64K -e 64M -n 10 --lat-iters 2000 --threads
timeout 240 $D/bin/exec_plans --port-kind tcp --port-only --quick --max-bytes 2097152 --no-graph > $OUT/exec_tcp.log 2>&1
el "exec_plans tcp (4 streams) rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_tcp.log)"
grep -E 'FAIL|first failure|fail +[1-9]' $OUT/exec_tcp.log | head -10
