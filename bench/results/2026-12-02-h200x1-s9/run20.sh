#!/usr/bin/env bash
# Session 9, device call 4: the full exec_plans table (every plan and group, --max-bytes 65536
# as in session 7's full run) on the per-form EW kernels, the LL kernel where they would run
# (PLANCCL_EW_KERNEL=0), every port plan over TCP, and the TCP portbench on GPU memory (outbox).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r20; mkdir -p $D/bin $D/logs; L=$D/logs; trap 'tar czf $OUT/logs20.tgz -C /tmp r20/logs 2>/dev/null' EXIT
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
timeout 250 $D/bin/exec_plans --max-bytes 65536 > $L/exec_plans.log 2>&1
el "exec_plans --max-bytes 65536 rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $L/exec_plans.log)"
grep -E 'FAIL|first failure' $L/exec_plans.log | head -10
PLANCCL_EW_KERNEL=0 timeout 60 $D/bin/exec_plans --quick --no-faults --no-latency --filter ll1 > $L/exec_plans_ll1_ewoff.log 2>&1
el "PLANCCL_EW_KERNEL=0 --filter ll1 rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $L/exec_plans_ll1_ewoff.log)"
timeout 110 $D/bin/exec_plans --port-kind tcp --port-only --quick --max-bytes 65536 --no-graph > $L/exec_tcp.log 2>&1
el "exec_plans tcp rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $L/exec_tcp.log)"
grep -E 'FAIL|first failure|fail +[1-9]' $L/exec_tcp.log | head -10
timeout 60 $D/bin/planccl-portbench -b 4K -e 16M -n 5 --lat-iters 500 --device > $L/portbench_device.log 2>&1
el "portbench --device rc $?"; grep -vE '^\s*$' $L/portbench_device.log | tail -14
