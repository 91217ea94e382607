#!/usr/bin/env bash
# Session 8, device call 3: the world-1 PyTorch questions (does PyTorch call ncclReduceScatter at
# world size 1; does NCCL refuse float8 AVG) without planccl, the torch suite after its edits,
# racecheck over the zero-copy / thread-block-group plans and then LL / port plans to completion,
# and the TCP-only test_mn_ag_2x2 that failed its first case in calls 1 and 2.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo
L=$OUT; t0=$(date +%s); root=$PWD; D=/tmp/r14; mkdir -p $D
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
left() { echo $(( ${1:-520} - $(date +%s) + t0 )); }
cap() { local t; t=$(left); [ $t -gt $1 ] && t=$1; [ $t -lt 5 ] && t=5; echo $t; }
finish() { cp -r /tmp/pcl_torch_* $D/ 2>/dev/null; tar czf $L/logs.tgz -C /tmp r14; }
trap finish EXIT
OUT= scripts/gpu_check.sh build > $D/build.txt 2>&1 || { tail -40 $D/build.txt; exit 1; }
el "built"
export PCL_SOURCE_DIR=$root
export PLANCCL_NCCL_LIB=$(scripts/find_real_nccl.sh)
py=/opt/torch/.venv/bin/python3; [ -x $py ] || py=python3
( cd $D && NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL timeout $(cap 40) $py -m torch.distributed.run --standalone --nproc_per_node=1 $root/.gpu/probe2.py > $D/probe2_nccl.log 2>&1 )
el "probe2 without planccl rc $?: NCCL COLL lines: ReduceScatter $(grep -c 'ReduceScatter: opCount' $D/probe2_nccl.log), AllGather $(grep -c 'AllGather: opCount' $D/probe2_nccl.log)"
grep PROBE2 $D/probe2_nccl.log
PCL_TORCH_WORLDS=1 PCL_TORCH_EXTRA=0 timeout $(cap 90) test/torch/run.sh $root/build-gpu/install > $D/torch.log 2>&1
el "torch suite (world 1) rc $?"; grep -E 'FAIL|passed|note|refused' $D/torch.log | cut -c1-250 | head -14
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
rc_args="--only thread --quick --no-graph --no-faults --no-latency --ranks 2 --max-bytes 16384"
PLANCCL_TIMEOUT_S=60 timeout $(cap 160) $cs --tool racecheck --report-api-errors no --error-exitcode 9 \
  build-gpu/test/gpu/exec_plans $rc_args \
  --filter allreduce_2gpu_zerocopy_inplace,transfer_pack_tbg,test_ar2_simple_barrier_tbg,reduce_pack_tbg > $D/racecheck_zc_tbg.log 2>&1
el "racecheck zero-copy/tbg rc $?: $(grep -E 'RACECHECK SUMMARY' $D/racecheck_zc_tbg.log | tail -1); $(grep -E '^exec_plans: [0-9]+ passed' $D/racecheck_zc_tbg.log)"
PLANCCL_TIMEOUT_S=60 timeout $(cap 100) $cs --tool racecheck --report-api-errors no --error-exitcode 9 \
  build-gpu/test/gpu/exec_plans $rc_args \
  --filter test_ar2_ll,allreduce_2gpu_ll1_small,test_ag2_port,test_ar2_port_rppkt > $D/racecheck_ll_port.log 2>&1
el "racecheck ll/port rc $?: $(grep -E 'RACECHECK SUMMARY' $D/racecheck_ll_port.log | tail -1); $(grep -E '^exec_plans: [0-9]+ passed' $D/racecheck_ll_port.log)"
for i in 1 2; do
  PLANCCL_TIMEOUT_S=3 timeout $(cap 40) build-gpu/test/gpu/exec_plans --port-kind tcp --port-only --quick --ranks 4 --no-graph --filter test_mn_ag_2x2 > $D/tcp_ag_$i.log 2>&1
  el "tcp test_mn_ag_2x2 run $i rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $D/tcp_ag_$i.log)"; grep -E 'hang report|FAIL' $D/tcp_ag_$i.log | cut -c1-330 | head -4
done
