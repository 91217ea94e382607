#!/usr/bin/env bash
# Session 8, device call 1: verify what session 7 wrote blind (soak, shim_faults, exec_plans_tcp
# --quick, torch world 1 after its fixes), planccl-bench on one GPU (1 rank, every model), and
# the refbench baseline for the speed work.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo
L=$OUT; t0=$(date +%s); root=$PWD; D=/tmp/r12; mkdir -p $D
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
left() { echo $(( ${1:-565} - $(date +%s) + t0 )); }
cap() { local t; t=$(left); [ $t -gt $1 ] && t=$1; [ $t -lt 5 ] && t=5; echo $t; }
finish() { cp -r /tmp/pcl_torch_* $D/ 2>/dev/null; tar czf $L/logs.tgz -C /tmp r12; }
trap finish EXIT
OUT= scripts/gpu_check.sh build > $D/build.txt 2>&1 || { tail -40 $D/build.txt; exit 1; }
el "built"; grep took $D/build.txt
export PCL_SOURCE_DIR=$root
export PLANCCL_NCCL_LIB=$(scripts/find_real_nccl.sh)
timeout $(cap 120) build-gpu/test/gpu/exec_plans --ranks 2 --soak 1000000 > $D/soak.log 2>&1
el "soak rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $D/soak.log)"; grep -E 'soak|FAIL' $D/soak.log | head -8
( cd build-gpu && timeout $(cap 170) ctest -R '^(shim_faults|exec_plans_tcp|shim_passthrough)$' -V --timeout 160 ) > $D/ctest.log 2>&1
el "ctest rc $?"; grep -E 'tests passed|Test +#[0-9]+:|\*\*\*|FAIL|shim_faults:' $D/ctest.log | head -30
B=build-gpu/install/bin/planccl-bench; [ -x $B ] || B=build-gpu/bench/planccl-bench
for m in thread single proc; do
  timeout $(cap 30) $B --coll all -b 1K -e 1M -f 32 -g 1 -n 20 -w 5 -G 10 --repeat 1 --model $m \
    --lib "planccl=$root/build-gpu/install/lib/libplanccl.so" --lib "nccl=$PLANCCL_NCCL_LIB" \
    --lib "nccl-symm=$PLANCCL_NCCL_LIB:symm" --baseline nccl --csv $D/bench_$m.csv > $D/bench_$m.log 2>&1
  el "planccl-bench -g 1 --model $m rc $?"; grep -cE '^ +[0-9]+ ' $D/bench_$m.log; grep -iE 'wrong|error|fail' $D/bench_$m.log | head -3
done
python3 bench/plot.py $D/bench_thread.csv --out $D/plot > $D/plot.log 2>&1; el "plot rc $?: $(ls $D/plot 2>/dev/null | tr '\n' ' ')"
PLANCCL_LL_KERNEL=1 PLANCCL_EW_KERNEL=1 timeout $(cap 80) build-gpu/bench/planccl-refbench --ranks 2,4,8 > $D/refbench.log 2>&1
el "refbench rc $?"; grep -vE '^\s*$' $D/refbench.log | grep -v '^# empty' | tail -12
py=/opt/torch/.venv/bin/python3; [ -x $py ] || py=python3
PCL_TORCH_WORLDS=1 PCL_TORCH_EXTRA=0 timeout $(cap 100) test/torch/run.sh $root/build-gpu/install > $D/torch.log 2>&1
el "torch suite (world 1) rc $?"; grep -E 'FAIL|passed|skip' $D/torch.log | head -14
