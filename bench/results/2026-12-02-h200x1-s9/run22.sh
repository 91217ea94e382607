#!/usr/bin/env bash
# Session 9, device call 6: compute-sanitizer memcheck over the per-form EW kernels: every
# one-phase plan (--quick), aligned and element-aligned buffers, LL16 and LL8.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r22; mkdir -p $D/bin $D/logs; L=$D/logs; trap 'tar czf $OUT/logs22.tgz -C /tmp r22/logs 2>/dev/null' EXIT
gunzip -c .gpu/bin/exec_plans.gz > $D/bin/exec_plans; chmod +x $D/bin/exec_plans
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
PLANCCL_TIMEOUT_S=60 timeout 330 $cs --tool memcheck --report-api-errors no --error-exitcode 9 $D/bin/exec_plans --only thread --max-bytes 65536 --quick --no-faults --no-latency --no-graph --filter ll1 > $L/memcheck_ll1.log 2>&1
el "memcheck rc $?: $(grep -E 'ERROR SUMMARY' $L/memcheck_ll1.log | tail -1); $(grep -E '^exec_plans: [0-9]+ passed' $L/memcheck_ll1.log)"
grep -E '^thread' $L/memcheck_ll1.log | head -30
