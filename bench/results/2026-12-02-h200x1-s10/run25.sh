#!/usr/bin/env bash
# Session 10, device call 1: programmatic dependent launch (PLANCCL_PDL). refbench
# of this tree with PDL off and on, alternating 3 times; the back-to-back
# checks (eager, two communicators, one graph) and every plan --quick with PDL on; the TCP port
# plans on the new device staging; planccl-portbench on host and GPU memory.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r25; mkdir -p $D/bin $OUT/logs; L=$OUT/logs
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for i in 1 2 3; do
  for v in pdl0 pdl1; do
    b=$D/bin/planccl-refbench; PLANCCL_PDL=$([ $v = pdl1 ] && echo 1 || echo 0) timeout 60 $b --ranks 2,4,8 > $L/refbench_${v}_$i.log 2>&1
    echo "== $v $i rc $? $(grep REFBENCH $L/refbench_${v}_$i.log | cut -c1-90)"
  done
done
el "A/B done"
for v in pdl0 pdl1; do echo "-- $v run 3"; grep -E '^ +[248] ' $L/refbench_${v}_3.log | cut -c1-84; done
PLANCCL_PDL=1 timeout 150 $D/bin/exec_plans --quick --max-bytes 65536 > $L/exec_plans_quick_pdl1.log 2>&1
el "exec_plans --quick PDL=1 rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $L/exec_plans_quick_pdl1.log)"
grep -E 'alternating|communicators|FAIL|first failure' $L/exec_plans_quick_pdl1.log | cut -c1-150 | head -24
timeout 110 $D/bin/exec_plans --port-kind tcp --port-only --quick --max-bytes 65536 --no-graph > $L/exec_tcp.log 2>&1
el "exec_plans tcp rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $L/exec_tcp.log)"
grep -E 'FAIL|first failure|fail +[1-9]' $L/exec_tcp.log | head -10
timeout 60 $D/bin/planccl-portbench -n 10 --lat-iters 5000 > $L/portbench_host.log 2>&1
el "portbench host rc $?"; grep -vE '^\s*$' $L/portbench_host.log | tail -14
timeout 60 $D/bin/planccl-portbench -b 4K -e 64M -n 5 --lat-iters 2000 --device > $L/portbench_device.log 2>&1
el "portbench --device rc $?"; grep -vE '^\s*$' $L/portbench_device.log | tail -14
