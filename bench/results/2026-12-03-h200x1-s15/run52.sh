#!/usr/bin/env bash
# Session 15, device call 1: the program table and the decision cache (host path over many
# message sizes, this tree against HEAD 2cd1fc5, alternating), shim_programs (eviction, a graph
# captured after eviction began; also on a library that never pins, which must fail it), the
# 32-bit flag wrap (exec_plans --first-flag 0xffffffff, also with kernels without pcl_kflag32,
# which must fail), and the earlier NCCL-API tests and executor checks on the final code.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r52; rm -rf $D; mkdir -p $D/bin $D/head $D/nopin
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
PLANCCL_TIMEOUT_S=5 run programs_nopin $D/nopin shim_programs
run programs_head $D/head shim_programs
# The host path: N sizes cycled, 1 KB up by 4 bytes; new and head alternating.
H=$OUT/hostpath.log; : > $H
for i in 1 2; do
  for n in 1 64 512 2048 4096; do
    vs="new head"; [ $n -ge 2048 ] && vs="new head big"
    for v in $vs; do
      lib=$D/bin/libplanccl.so; [ $v = head ] && lib=$D/head/libplanccl.so
      lim=1024; [ $v = big ] && lim=8192
      PLANCCL_EXEC_PROGRAMS=$lim PLANCCL_PLAN_DIR=$PWD/plans/allreduce timeout 120 $D/bin/planccl-bench --lib $v=$lib \
        -g 2 --share-gpu --coll allreduce -b 1K -e 32K -f 32 -G 0 -n 10 --place out \
        --hostpath --hostpath-sizes $n 2>&1 |
        grep -E '^# host path (call|sizes|floor: interpreter-shaped kernel, cuLaunchKernel)' |
        sed "s/^/hp $i n=$n $v: /" >> $H
    done
  done
done
grep -E 'host path call' $H | sed -E 's/ +/ /g' | cut -c1-150
grep -E 'host path sizes' $H | sed -E 's/ +/ /g; s/cycles.*each://' | cut -c1-150
run autoreg2 $D/bin shim_autoreg 2
run autoreg1 $D/bin shim_autoreg 1
run windows $D/bin shim_windows
PLANCCL_PLAN_DIR=$PWD/plans/allreduce run faults $D/bin shim_faults
unset PLANCCL_NCCL_LIB
timeout 60 $D/bin/kernel_fifo_watch >> $L 2>&1; el "kernel_fifo_watch rc $?"
timeout 150 $D/bin/exec_plans --only thread --quick --no-faults --no-latency --first-flag 0xffffffff > $OUT/exec_wrap.log 2>&1
el "exec_plans wrap rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_wrap.log)"
timeout 100 $D/bin/exec_plans_nowrap --only thread --quick --no-faults --no-latency --first-flag 0xffffffff --ranks 2 --max-bytes 16384 > $OUT/exec_nowrap.log 2>&1
el "exec_plans nowrap (must fail) rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_nowrap.log)"
timeout 150 $D/bin/exec_plans --only thread --quick --max-bytes 16384 --no-faults --ranks 2,4 > $OUT/exec_quick.log 2>&1
el "exec_plans quick rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_quick.log)"
grep -hE 'FAIL|fail +[1-9]' $OUT/exec_quick.log $OUT/exec_wrap.log | head -5
