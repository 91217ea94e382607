#!/usr/bin/env bash
# Session 7, device call 2: the userbuf fix (hierarchical reduce-scatter), kernel faults and hang
# reports, port plans over TCP, the refbench, torch at world size 1, portbench on GPU memory, and
# compute-sanitizer over the LL, zero-copy, port and thread-block-group plans.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo
L=$OUT; t0=$(date +%s); root=$PWD
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
mkdir -p /tmp/r10
OUT= scripts/gpu_check.sh build > /tmp/r10/build.txt 2>&1 || { tail -40 /tmp/r10/build.txt; exit 1; }
el "built: $(grep took /tmp/r10/build.txt | tr '\n' ' ')"
export PCL_SOURCE_DIR=$root
timeout 200 build-gpu/test/gpu/exec_plans --max-bytes 65536 > /tmp/r10/exec_plans.log 2>&1
el "exec_plans rc $?: $(grep -E '^exec_plans: [0-9]+ passed' /tmp/r10/exec_plans.log)"
grep -E 'FAIL|fault|first failure|refused$' /tmp/r10/exec_plans.log | head -30
grep -E '^thread +(4|8) +(2|4) ' /tmp/r10/exec_plans.log | grep -E 'reducescatter|two comm|hier' | head -20
timeout 100 build-gpu/test/gpu/exec_plans --port-kind tcp --port-only --quick --max-bytes 65536 --no-graph > /tmp/r10/exec_tcp.log 2>&1
el "exec_plans tcp rc $?: $(grep -E '^exec_plans: [0-9]+ passed' /tmp/r10/exec_tcp.log)"
grep -E 'FAIL|first failure' /tmp/r10/exec_tcp.log | head -10
PLANCCL_LL_KERNEL=1 PLANCCL_EW_KERNEL=1 timeout 90 build-gpu/bench/planccl-refbench --ranks 2,4,8 > /tmp/r10/refbench.log 2>&1
el "refbench rc $?"; grep -vE '^\s*$|^# empty' /tmp/r10/refbench.log | tail -12
timeout 60 build-gpu/bench/planccl-portbench -b 4K -e 16M -n 5 --lat-iters 500 --device > /tmp/r10/portbench_device.log 2>&1
el "portbench --device rc $?"; tail -12 /tmp/r10/portbench_device.log
export PLANCCL_NCCL_LIB=$(scripts/find_real_nccl.sh)
PCL_TORCH_WORLDS=1 timeout 150 test/torch/run.sh $root/build-gpu/install > /tmp/r10/torch.log 2>&1
el "torch suite (world 1) rc $?"; tail -15 /tmp/r10/torch.log
left=$(( 540 - $(date +%s) + t0 ))
if [ $left -gt 60 ]; then
  PCL_SANITIZE_TIMEOUT=$(( left / 2 - 5 )) OUT=/tmp/r10 timeout $(( left - 5 )) scripts/gpu_sanitize.sh > /tmp/r10/sanitize.txt 2>&1
  el "sanitize rc $?"; cat /tmp/r10/sanitize.txt
fi
tar czf /tmp/r10.tgz -C $L logs
