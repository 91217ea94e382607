#!/usr/bin/env bash
# Session 14, device call 5, the final code (after the executor and TCP review mends): the vote's
# cost (planccl-votebench, with the read-line cache); kernel_fifo_watch; the NCCL-API tests
# (shim_autoreg 2/1, shim_windows with its new two-stream case, also on a library without the
# cross-stream ordering, which must fail it; shim_faults); every plan on the executor (thread
# ranks 2 and 4, up to 16 KiB) and the 4-rank port plans over TCP (trimmed to the device time left).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r51; rm -rf $D; mkdir -p $D/bin $D/noorder
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
mv $D/bin/libplanccl_noorder.so $D/noorder/libplanccl.so
L=$OUT/all.log; : > $L
for r in 2 4 8; do
  timeout 60 $D/bin/planccl-votebench -r $r -n 100000 >> $L 2>&1
  el "votebench -r $r: $(tail -3 $L | grep -E 'median' | tr '\n' ' ' | cut -c1-200)"
done
timeout 60 $D/bin/kernel_fifo_watch >> $L 2>&1; el "kernel_fifo_watch rc $?"
export PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
run() { # label, lib dir, test...
  local lab=$1 lib=$2; shift 2
  echo "==== $lab" >> $L
  LD_LIBRARY_PATH=$lib timeout 120 $D/bin/"$@" >> $L 2>&1; local rc=$?
  el "$lab rc $rc: $(sed -n "/^==== $lab\$/,\$p" $L | grep -E 'rank codes|passed|FAILED' | tr '\n' ' ')"
}
run autoreg2 $D/bin shim_autoreg 2
run autoreg1 $D/bin shim_autoreg 1
run windows $D/bin shim_windows
PLANCCL_TIMEOUT_S=5 run windows_noorder $D/noorder shim_windows
PLANCCL_PLAN_DIR=$PWD/plans/allreduce run faults $D/bin shim_faults
unset PLANCCL_NCCL_LIB
timeout 150 $D/bin/exec_plans --only thread --quick --max-bytes 16384 --no-faults --ranks 2,4 > $OUT/exec_quick.log 2>&1
el "exec_plans quick rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_quick.log)"
grep -E 'FAIL|fail +[1-9]' $OUT/exec_quick.log | head -5
timeout 100 $D/bin/exec_plans --port-kind tcp --port-only --quick --no-graph --ranks 4 > $OUT/exec_tcp.log 2>&1
el "exec_plans tcp rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_tcp.log)"
grep -hE 'hang report|staging copy' $OUT/exec_tcp.log | cut -c1-220 | head -4
