#!/usr/bin/env bash
# Session 15, device call 6 (a trial, dropped: see the README): programs of refused shapes leave the table at once (they held slots
# kept for good); shim_programs now starts with 100 refused sizes: this tree, and the previous
# commit's library (bb224b3, must fail: 50 rebuilds, two growths); the NCCL-API tests and the
# executor's quick set and wrap on this tree.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r57; rm -rf $D; mkdir -p $D/bin $D/prev
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
mv $D/bin/libplanccl_prev.so $D/prev/libplanccl.so
L=$OUT/all.log; : > $L
export PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
run() { # label, lib dir, test...
  local lab=$1 lib=$2; shift 2
  echo "==== $lab" >> $L
  LD_LIBRARY_PATH=$lib timeout 150 $D/bin/"$@" >> $L 2>&1; local rc=$?
  el "$lab rc $rc: $(sed -n "/^==== $lab\$/,\$p" $L | grep -E 'rank codes|passed|FAILED|want' | head -3 | tr '\n' ' ')"
}
run programs $D/bin shim_programs
run programs_prev $D/prev shim_programs
PLANCCL_PLAN_DIR=$PWD/plans/allreduce run faults $D/bin shim_faults
run windows $D/bin shim_windows
run autoreg2 $D/bin shim_autoreg 2
run autoreg1 $D/bin shim_autoreg 1
unset PLANCCL_NCCL_LIB
timeout 150 $D/bin/exec_plans --only thread --quick --max-bytes 16384 --no-faults --ranks 2,4 > $OUT/exec_quick.log 2>&1
el "exec_plans quick rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_quick.log)"
grep -hE 'fail +[1-9]|FAIL' $OUT/exec_quick.log | head -5
timeout 120 $D/bin/exec_plans --only thread --quick --no-faults --no-latency --first-flag 0xffffffff --ranks 2,4,8 --max-bytes 16384 > $OUT/exec_wrap.log 2>&1
el "exec_plans wrap rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_wrap.log)"
