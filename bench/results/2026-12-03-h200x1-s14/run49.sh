#!/usr/bin/env bash
# Session 14, device call 3 (call 2 found the setup's use-after-NULL, fixed): automatic
# registration (levels 2 and 1) on the fixed library, against a library that carries out drops
# inside a capture and against HEAD's (5933f8b) library, which must both fail the new capture
# case; shim_windows (now with NULL real handles, as NCCL_LOCAL_REGISTER=0 gives) on the new and
# on HEAD's library (which must fail case 34); shim_faults.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r49; rm -rf $D; mkdir -p $D/bin $D/mut $D/head
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
mv $D/bin/libplanccl_mut.so $D/mut/libplanccl.so; mv $D/bin/libplanccl_head.so $D/head/libplanccl.so
export PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
L=$OUT/shim.log; : > $L
run() { # label, lib dir, test...
  local lab=$1 lib=$2; shift 2
  echo "==== $lab" >> $L
  LD_LIBRARY_PATH=$lib timeout 200 $D/bin/"$@" >> $L 2>&1; local rc=$?
  el "$lab rc $rc: $(sed -n "/^==== $lab\$/,\$p" $L | grep -E 'rank codes|passed|FAILED|capture beside' | head -3 | tr '\n' ' ')"
}
run autoreg2 $D/bin shim_autoreg 2
run autoreg1 $D/bin shim_autoreg 1
run autoreg2_mutated $D/mut shim_autoreg 2
run autoreg2_head $D/head shim_autoreg 2
run windows $D/bin shim_windows
run windows_head $D/head shim_windows
PLANCCL_PLAN_DIR=$PWD/plans/allreduce run faults $D/bin shim_faults
# The plan / hand-written ratio on this tree (the interpreter's port push changed) against HEAD's
# (5933f8b), alternating; then the host path of a planned call, six more times.
unset PLANCCL_NCCL_LIB
for i in 1 2 3; do
  for v in new head; do
    b=$D/bin/planccl-refbench; [ $v = head ] && b=$D/bin/planccl-refbench-head
    timeout 90 $b --ranks 2,4,8 > $OUT/refbench_${v}_$i.log 2>&1
    el "refbench $v $i rc $?: $(grep REFBENCH $OUT/refbench_${v}_$i.log | cut -c1-110)"
  done
done
export PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
for i in 1 2 3 4 5 6; do
  PLANCCL_PLAN_DIR=$PWD/plans/allreduce timeout 60 $D/bin/planccl-bench --lib planccl=$D/bin/libplanccl.so \
    -g 2 --share-gpu --coll allreduce -b 1K -e 1K -G 0 -n 10 --place out --hostpath 2>&1 |
    grep -E '^# host path (call|floor: interpreter-shaped kernel, cuLaunchKernel|floor: empty kernel, cuLaunchKernel\(CUf)' |
    sed "s/^/hostpath $i: /" | tee -a $OUT/hostpath.log | cut -c1-140
done
