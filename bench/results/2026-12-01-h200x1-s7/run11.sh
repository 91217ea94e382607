#!/usr/bin/env bash
# Session 7, device call 3: the fault and cycle checks again, portbench on GPU memory after its
# fix, racecheck over the zero-copy and thread-block-group plans, and the torch suite at world
# size 1 with and without planccl (to tell suite expectations from planccl bugs).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo
L=$OUT; t0=$(date +%s); root=$PWD; D=/tmp/r11; mkdir -p $D
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
left() { echo $(( ${1:-470} - $(date +%s) + t0 )); }
finish() { cp -r /tmp/pcl_torch_* $D/ 2>/dev/null; tar czf $L/logs.tgz -C /tmp r11; }
trap finish EXIT
OUT= scripts/gpu_check.sh build > $D/build.txt 2>&1 || { tail -40 $D/build.txt; exit 1; }
el "built"
export PCL_SOURCE_DIR=$root
timeout 60 build-gpu/test/gpu/exec_plans --ranks 2 --max-bytes 16384 --filter test_ar2_ll,allreduce_2gpu_ll1_small > $D/faults.log 2>&1
el "exec_plans faults rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $D/faults.log)"
grep -E 'fault|cycles' $D/faults.log | grep -v '^  fault' | head -12
timeout 40 build-gpu/bench/planccl-portbench -b 4K -e 4M -n 5 --lat-iters 200 --device > $D/portbench_device.log 2>&1
el "portbench --device rc $?"; tail -9 $D/portbench_device.log
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
t=$(left 380); [ $t -gt 130 ] && t=130
PLANCCL_TIMEOUT_S=60 timeout $t $cs --tool racecheck --report-api-errors no --error-exitcode 9 \
  build-gpu/test/gpu/exec_plans --only thread --quick --no-graph --no-faults --ranks 2 --max-bytes 16384 \
  --filter allreduce_2gpu_zerocopy_inplace,transfer_pack_tbg,test_ar2_simple_barrier_tbg,reduce_pack_tbg > $D/racecheck.log 2>&1
el "racecheck rc $?: $(grep -E 'RACECHECK SUMMARY' $D/racecheck.log | tail -1); $(grep -E '^exec_plans: [0-9]+ passed' $D/racecheck.log)"
export PLANCCL_NCCL_LIB=$(scripts/find_real_nccl.sh)
py=/opt/torch/.venv/bin/python3; [ -x $py ] || py=python3
t=$(left 470); [ $t -gt 60 ] && {
  ( mkdir -p $D/ctl; cd $D && PCL_TORCH_RESULTS=$D/ctl PLANCCL_STATS=1 timeout $(( t / 2 )) $py -m torch.distributed.run --standalone --nproc_per_node=1 \
    $root/test/torch/pcl_torch_suite.py --backend nccl --expect-planccl 0 > $D/torch_noplanccl.log 2>&1 )
  el "torch without planccl rc $?"; grep -E '^\[rank 0\] (passed|FAIL)' $D/torch_noplanccl.log | head -12
  PCL_TORCH_WORLDS=1 PCL_TORCH_EXTRA=0 timeout $(( $(left 480) - 5 )) test/torch/run.sh $root/build-gpu/install > $D/torch.log 2>&1
  el "torch suite (world 1) rc $?"; grep -E 'FAIL|passed' $D/torch.log | head -12
}
