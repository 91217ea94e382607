#!/usr/bin/env bash
# Session 15, device call 2, after call 1's findings: sizes 8 bytes per rank apart (finer ones
# were forwarded), pcl_kflag32 as ((f - 1) mod (2^32 - 1)) + 1 with the scratch half from the
# 64-bit flag (call 1's "0 becomes 2" repeated flag 2 two calls after the wrap: 3 failures).
# shim_programs on this tree, on a library that never pins (must fail) and on HEAD (must fail);
# the host path over N sizes, this tree against HEAD 2cd1fc5, alternating; the wrap; refbench
# this tree against HEAD (the kernels' entry changed); the NCCL-API tests; every plan, quick.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r53; rm -rf $D; mkdir -p $D/bin $D/head $D/nopin
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
mv $D/bin/libplanccl_head.so $D/head/libplanccl.so
mv $D/bin/libplanccl_nopin.so $D/nopin/libplanccl.so
L=$OUT/all.log; : > $L
export PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
run() { # label, lib dir, test...
  local lab=$1 lib=$2; shift 2
  echo "==== $lab" >> $L
  LD_LIBRARY_PATH=$lib timeout 150 $D/bin/"$@" >> $L 2>&1; local rc=$?
  el "$lab rc $rc: $(sed -n "/^==== $lab\$/,\$p" $L | grep -E 'rank codes|passed|FAILED|evicted, want' | head -3 | tr '\n' ' ')"
}
run programs $D/bin shim_programs
grep -hE 'programs built' $L | head -2 | cut -c1-200
PLANCCL_TIMEOUT_S=5 run programs_nopin $D/nopin shim_programs
run programs_head $D/head shim_programs
H=$OUT/hostpath.log; : > $H
for i in 1 2 3; do
  for n in 1 256 1024 4096; do
    vs="new head"; [ $n -ge 4096 ] && vs="new head big"
    for v in $vs; do
      lib=$D/bin/libplanccl.so; [ $v = head ] && lib=$D/head/libplanccl.so
      lim=1024; [ $v = big ] && lim=8192
      PLANCCL_EXEC_PROGRAMS=$lim PLANCCL_PLAN_DIR=$PWD/plans/allreduce timeout 120 $D/bin/planccl-bench --lib $v=$lib \
        -g 2 --share-gpu --coll allreduce -b 1K -e 128K -f 128 -G 0 -n 10 --place out \
        --hostpath --hostpath-sizes $n 2>&1 |
        grep -E '^# host path (call|sizes|floor: interpreter-shaped kernel, cuLaunchKernel)|^ +(1024|131072) ' |
        sed "s/^/hp $i n=$n $v: /" >> $H
    done
  done
done
grep -E 'host path call' $H | sed -E 's/ +/ /g; s/# host path call: //; s/interpreter-shaped launch//' | cut -c1-120
grep -E 'host path sizes' $H | sed -E 's/ +/ /g; s/# host path sizes: //; s/cycles.*each://' | cut -c1-120
el "hostpath done"
run autoreg2 $D/bin shim_autoreg 2
run windows $D/bin shim_windows
PLANCCL_PLAN_DIR=$PWD/plans/allreduce run faults $D/bin shim_faults
unset PLANCCL_NCCL_LIB
timeout 60 $D/bin/kernel_fifo_watch >> $L 2>&1; el "kernel_fifo_watch rc $?"
timeout 200 $D/bin/exec_plans --only thread --quick --no-faults --no-latency --first-flag 0xffffffff --ranks 2,4,8 --max-bytes 16384 > $OUT/exec_wrap.log 2>&1
el "exec_plans wrap rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_wrap.log)"
grep -hE 'fail +[1-9]|FAIL' $OUT/exec_wrap.log | head -5
for i in 1 2; do
  for v in new head; do
    b=$D/bin/planccl-refbench; [ $v = head ] && b=$D/bin/planccl-refbench-head
    timeout 90 $b --ranks 2,4,8 > $D/rb.log 2>&1; rc=$?
    { echo "==== refbench $v $i rc $rc"; cat $D/rb.log; } >> $OUT/refbench.log
    el "refbench $v $i rc $rc: $(grep REFBENCH $D/rb.log | cut -c1-110)"
  done
done
timeout 150 $D/bin/exec_plans --only thread --quick --max-bytes 16384 --no-faults --ranks 2,4 > $OUT/exec_quick.log 2>&1
el "exec_plans quick rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_quick.log)"
grep -hE 'fail +[1-9]|FAIL' $OUT/exec_quick.log | head -5
