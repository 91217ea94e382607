#!/usr/bin/env bash
# Session 9, device call 5: exec_plans with the new element-aligned (misaligned) cases, which run
# the EW kernels' unaligned forms: the one-phase plans, then every plan (--quick).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r21; mkdir -p $D/bin $D/logs; L=$D/logs; trap 'tar czf $OUT/logs21.tgz -C /tmp r21/logs 2>/dev/null' EXIT
gunzip -c .gpu/bin/exec_plans.gz > $D/bin/exec_plans; chmod +x $D/bin/exec_plans
timeout 60 $D/bin/exec_plans --quick --no-faults --no-latency --filter ll1 > $L/ll1.log 2>&1
el "ll1 rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $L/ll1.log)"; grep -E '^thread +[248] .*ll1' $L/ll1.log | head -4
timeout 230 $D/bin/exec_plans --quick --max-bytes 65536 > $L/quick.log 2>&1
el "quick rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $L/quick.log)"; grep -E 'FAIL|first failure|misaligned' $L/quick.log | head
