#!/usr/bin/env bash
# Session 15, device call 4: a new size's build without the occupancy queries (call 3: a build
# took 355-717 us on the host, 14-177 of it copying; the occupancy of every kernel variant was
# asked again at each build); the host path over N sizes against HEAD; shim_programs; the NCCL-API
# tests and every plan (quick) on the final library.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r55; rm -rf $D; mkdir -p $D/bin $D/head $D/nopin
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
mv $D/bin/libplanccl_head.so $D/head/libplanccl.so
mv $D/bin/libplanccl_nopin.so $D/nopin/libplanccl.so
L=$OUT/all.log; : > $L
export PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
run() { # label, lib dir, test...
  local lab=$1 lib=$2; shift 2
  echo "==== $lab" >> $L
  LD_LIBRARY_PATH=$lib timeout 150 $D/bin/"$@" >> $L 2>&1; local rc=$?
  el "$lab rc $rc: $(sed -n "/^==== $lab\$/,\$p" $L | grep -E 'rank codes|passed|FAILED|want' | head -3 | tr '\n' ' ')"
}
H=$OUT/hostpath.log; : > $H
for i in 1 2 3; do
  for n in 1 1024 4096; do
    for v in new head; do
      lib=$D/bin/libplanccl.so; [ $v = head ] && lib=$D/head/libplanccl.so
      PLANCCL_DEBUG=INFO PLANCCL_DEBUG_SUBSYS=EXEC PLANCCL_PLAN_DIR=$PWD/plans/allreduce timeout 120 $D/bin/planccl-bench --lib $v=$lib \
        -g 2 --share-gpu --coll allreduce -b 1K -e 128K -f 128 -G 0 -n 10 --place out \
        --hostpath --hostpath-sizes $n > $D/hp.log 2>&1
      grep -E '^# host path (call|sizes|floor: interpreter-shaped kernel, cuLaunchKernel)|programs built|table now holds' $D/hp.log |
        sed "s/^/hp $i n=$n $v: /" >> $H
    done
  done
done
grep -E 'host path call' $H | sed -E 's/ +/ /g; s/# host path call: //; s/interpreter-shaped launch//' | cut -c1-120
grep -E 'host path sizes' $H | sed -E 's/ +/ /g; s/# host path sizes: //; s/cycles.*each://' | cut -c1-120
grep -E 'programs built' $H | grep 'rank 0' | grep ' new: ' | sed -E 's/.*(rank 0: [0-9]+ programs built, [0-9]+ evicted).*(a build took.*)/\1 \2/' | head -9
el "hostpath done"
run programs $D/bin shim_programs
run autoreg2 $D/bin shim_autoreg 2
run autoreg1 $D/bin shim_autoreg 1
run windows $D/bin shim_windows
PLANCCL_PLAN_DIR=$PWD/plans/allreduce run faults $D/bin shim_faults
unset PLANCCL_NCCL_LIB
timeout 150 $D/bin/exec_plans --only thread --quick --max-bytes 16384 --no-faults --ranks 2,4 > $OUT/exec_quick.log 2>&1
el "exec_plans quick rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_quick.log)"
grep -hE 'fail +[1-9]|FAIL' $OUT/exec_quick.log | head -5
timeout 150 $D/bin/exec_plans --port-kind tcp --port-only --quick --no-graph --ranks 2,4 > $OUT/exec_tcp.log 2>&1
el "exec_plans tcp rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_tcp.log)"
grep -hE 'hang report|staging copy|stops receiving' $OUT/exec_tcp.log | cut -c1-220 | head -4
