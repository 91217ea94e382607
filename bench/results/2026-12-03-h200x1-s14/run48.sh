#!/usr/bin/env bash
# Session 14, device call 1: the FIFO-full watchdog (kernel_fifo_watch); automatic registration's
# new rounds (shim_autoreg at levels 2 and 1, and a library that carries out drops inside a
# capture, which must fail); the NCCL-API tests; the host path of a planned call with two ranks
# sharing the GPU (planccl-bench --share-gpu over the fake NCCL); the vote's cost; the port plans
# on the changed push (copy engine and TCP); refbench.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r48; mkdir -p $D/bin $D/mut
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
mv $D/bin/libplanccl_mut.so $D/mut/libplanccl.so
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader; nproc
timeout 60 $D/bin/kernel_fifo_watch > $OUT/kernel_fifo_watch.log 2>&1
el "kernel_fifo_watch rc $?: $(tail -1 $OUT/kernel_fifo_watch.log)"
export PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
for t in "shim_autoreg 2" "shim_autoreg 1" "shim_windows" "shim_faults"; do
  set -- $t
  [ $1 = shim_faults ] && export PLANCCL_PLAN_DIR=$PWD/plans/allreduce
  LD_LIBRARY_PATH=$D/bin timeout 200 $D/bin/$t > $OUT/$1${2:-}.log 2>&1
  el "$t rc $?: $(tail -1 $OUT/$1${2:-}.log)"
done
unset PLANCCL_PLAN_DIR
LD_LIBRARY_PATH=$D/mut timeout 200 $D/bin/shim_autoreg 2 > $OUT/shim_autoreg2_mutated.log 2>&1
el "shim_autoreg 2 on the mutated library rc $? (must fail): $(grep -h 'rank codes\|capture beside' $OUT/shim_autoreg2_mutated.log $OUT/*mutated* 2>/dev/null | head -3 | tr '\n' ' ')"
grep -rh "capture beside\|rank codes" /tmp/pcl* 2>/dev/null | head -4
# Host path of a planned 1 KB allreduce, 2 ranks (threads) sharing the GPU, over the fake NCCL.
for i in 1 2 3; do
  PLANCCL_PLAN_DIR=$PWD/plans/allreduce timeout 120 $D/bin/planccl-bench --lib planccl=$D/bin/libplanccl.so \
    -g 2 --share-gpu --coll allreduce -b 1K -e 1K -G 0 -n 10 --place out --hostpath > $OUT/hostpath_$i.log 2>&1
  el "hostpath $i rc $?"; grep '^# host path' $OUT/hostpath_$i.log | grep -v breakdown
done
PLANCCL_PLAN_DIR=$PWD/plans/allreduce timeout 120 $D/bin/planccl-bench --lib planccl=$D/bin/libplanccl.so \
  -g 2 --share-gpu --coll allreduce -b 1K -e 64K -f 8 --place both > $OUT/bench_share.log 2>&1
el "planccl-bench --share-gpu 1K..64K rc $?"; grep -E "^ +[0-9]+" $OUT/bench_share.log | head -8
unset PLANCCL_NCCL_LIB
for r in 2 4 8; do
  timeout 60 $D/bin/planccl-votebench -r $r -n 100000 > $OUT/votebench_$r.log 2>&1
  el "votebench $r rc $?: $(grep -i 'median' $OUT/votebench_$r.log | head -2 | tr '\n' ' ')"
done
timeout 240 $D/bin/exec_plans --port-only --quick --no-graph > $OUT/exec_port_ce.log 2>&1
el "exec_plans port ce rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_port_ce.log)"
timeout 300 $D/bin/exec_plans --port-kind tcp --port-only --quick > $OUT/exec_port_tcp.log 2>&1
el "exec_plans port tcp rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_port_tcp.log)"
grep -hE 'hang report|staging copy' $OUT/exec_port_tcp.log | cut -c1-260 | head -6
grep -E 'FAIL|first failure|fail +[1-9]' $OUT/exec_port_*.log | head -6
timeout 120 $D/bin/planccl-refbench --ranks 2,4,8 > $OUT/refbench.log 2>&1
el "refbench rc $?: $(grep REFBENCH $OUT/refbench.log | cut -c1-120)"
