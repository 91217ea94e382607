#!/usr/bin/env bash
# Session 15, device call 5, the final code: a new size's image copy no longer waited for on the
# host (its first launch waits for an event instead); the host path and first calls over 1 and
# 1024 sizes (this tree, HEAD); shim_programs, shim_faults (ncclCommGetAsyncError reworked),
# shim_windows, shim_autoreg 2; the wrap; every plan (quick); the TCP port plans (sends now
# bounded per stall).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r56; rm -rf $D; mkdir -p $D/bin $D/head
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
mv $D/bin/libplanccl_head.so $D/head/libplanccl.so
L=$OUT/all.log; : > $L
export PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
run() { # label, lib dir, test...
  local lab=$1 lib=$2; shift 2
  echo "==== $lab" >> $L
  LD_LIBRARY_PATH=$lib timeout 150 $D/bin/"$@" >> $L 2>&1; local rc=$?
  el "$lab rc $rc: $(sed -n "/^==== $lab\$/,\$p" $L | grep -E 'rank codes|passed|FAILED|want' | head -3 | tr '\n' ' ')"
}
H=$OUT/hostpath.log; : > $H
for i in 1 2; do
  for n in 1 1024; do
    for v in new head; do
      lib=$D/bin/libplanccl.so; [ $v = head ] && lib=$D/head/libplanccl.so
      PLANCCL_DEBUG=INFO PLANCCL_DEBUG_SUBSYS=EXEC PLANCCL_PLAN_DIR=$PWD/plans/allreduce timeout 120 $D/bin/planccl-bench --lib $v=$lib \
        -g 2 --share-gpu --coll allreduce -b 1K -e 128K -f 128 -G 0 -n 10 --place out \
        --hostpath --hostpath-sizes $n > $D/hp.log 2>&1
      echo "rc $?" | sed "s/^/hp $i n=$n $v: /" >> $H
      grep -E '^# host path (call|sizes|floor: interpreter-shaped kernel, cuLaunchKernel)|programs built|^ +(1024|131072) ' $D/hp.log |
        sed "s/^/hp $i n=$n $v: /" >> $H
    done
  done
done
grep -E 'host path call|: rc [1-9]' $H | sed -E 's/ +/ /g; s/# host path call: //; s/interpreter-shaped launch//' | cut -c1-120
grep -E 'host path sizes' $H | sed -E 's/ +/ /g; s/# host path sizes: //; s/cycles.*each://' | cut -c1-120
grep -E 'programs built' $H | grep 'rank 0' | grep ' new: ' | sed -E 's/.*(rank 0: [0-9]+ programs built).*(a build took.*)/\1 \2/' | head -4
el "hostpath done"
run programs $D/bin shim_programs
PLANCCL_PLAN_DIR=$PWD/plans/allreduce run faults $D/bin shim_faults
run windows $D/bin shim_windows
run autoreg2 $D/bin shim_autoreg 2
unset PLANCCL_NCCL_LIB
timeout 150 $D/bin/exec_plans --only thread --quick --max-bytes 16384 --no-faults --ranks 2,4 > $OUT/exec_quick.log 2>&1
el "exec_plans quick rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_quick.log)"
grep -hE 'fail +[1-9]|FAIL' $OUT/exec_quick.log | head -5
timeout 120 $D/bin/exec_plans --only thread --quick --no-faults --no-latency --first-flag 0xffffffff --ranks 2,4 --max-bytes 16384 > $OUT/exec_wrap.log 2>&1
el "exec_plans wrap rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_wrap.log)"
timeout 150 $D/bin/exec_plans --port-kind tcp --port-only --quick --no-graph --ranks 2,4 > $OUT/exec_tcp.log 2>&1
el "exec_plans tcp rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_tcp.log)"
grep -hE 'hang report|staging copy|stops receiving' $OUT/exec_tcp.log | cut -c1-220 | head -4
