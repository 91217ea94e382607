#!/usr/bin/env bash
# Session 8, device call 2: the soak after its lazy-loading fix, exec_plans_tcp and the 4 x 2
# two-communicator check after TCP staging streams became one pair per device, the refbench
# phase breakdown of plan and reference side by side (PCL_KPROF build), and the world-1 PREMUL_SUM
# probe with and without planccl plus the torch suite.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo
L=$OUT; t0=$(date +%s); root=$PWD; D=/tmp/r13; mkdir -p $D
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
left() { echo $(( ${1:-565} - $(date +%s) + t0 )); }
cap() { local t; t=$(left); [ $t -gt $1 ] && t=$1; [ $t -lt 5 ] && t=5; echo $t; }
finish() { cp -r /tmp/pcl_torch_* $D/ 2>/dev/null; tar czf $L/logs.tgz -C /tmp r13; }
trap finish EXIT
OUT= scripts/gpu_check.sh build > $D/build.txt 2>&1 || { tail -40 $D/build.txt; exit 1; }
el "built"; grep took $D/build.txt
export PCL_SOURCE_DIR=$root
export PLANCCL_NCCL_LIB=$(scripts/find_real_nccl.sh)
timeout $(cap 90) build-gpu/test/gpu/exec_plans --ranks 2 --soak 1000000 > $D/soak.log 2>&1
el "soak rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $D/soak.log)"; grep -E 'soak|FAIL|hang' $D/soak.log | head -8
( cd build-gpu && timeout $(cap 150) ctest -R '^exec_plans_tcp$' -V --timeout 140 ) > $D/tcp.log 2>&1
el "exec_plans_tcp rc $?"; grep -E 'FAIL|exec_plans: [0-9]+|hang report' $D/tcp.log | cut -c1-300 | head -12
timeout $(cap 90) build-gpu/test/gpu/exec_plans --ranks 8 --quick --filter allreduce_4x2gpu_hier_ll > $D/4x2.log 2>&1
el "4x2 rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $D/4x2.log)"; grep -E 'two comm|alternat|FAIL' $D/4x2.log | head -6
PLANCCL_EW_KERNEL=1 timeout $(cap 70) build-gpu-prof/bench/planccl-refbench --ranks 2,4,8 > $D/refbench_prof.log 2>&1
el "refbench (PCL_KPROF) rc $?"; grep -E '^ +[248] |breakdown|REFBENCH' $D/refbench_prof.log | cut -c1-200 | head -40
py=/opt/torch/.venv/bin/python3; [ -x $py ] || py=python3
lib=$root/build-gpu/install/lib/libplanccl.so
( cd $D && timeout $(cap 40) $py -m torch.distributed.run --standalone --nproc_per_node=1 $root/.gpu/premul_probe.py > $D/probe_nccl.log 2>&1 )
el "probe without planccl rc $?"; grep PROBE $D/probe_nccl.log | grep -v ': ok' | head -8
( cd $D && LD_PRELOAD=$lib PLANCCL_DEBUG=WARN timeout $(cap 40) $py -m torch.distributed.run --standalone --nproc_per_node=1 $root/.gpu/premul_probe.py > $D/probe_planccl.log 2>&1 )
el "probe with planccl rc $?"; grep -E 'PROBE|PLANCCL' $D/probe_planccl.log | grep -v ': ok' | head -8
PCL_TORCH_WORLDS=1 PCL_TORCH_EXTRA=0 timeout $(cap 100) test/torch/run.sh $root/build-gpu/install > $D/torch.log 2>&1
el "torch suite (world 1) rc $?"; grep -E 'FAIL|passed|note' $D/torch.log | cut -c1-250 | head -14
