#!/usr/bin/env bash
# Session 15, device call 7, after the review of the whole change (behaviour unchanged): the
# occupancy memo moved into the kernels module, one capture query per launch shared by the
# image wait and the table, TCP sends through one loop. The NCCL-API tests, every plan (quick),
# the wrap, the TCP port plans, and the first call of 1024 new sizes.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r58; rm -rf $D; mkdir -p $D/bin
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
L=$OUT/all.log; : > $L
export PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
run() { # label, test...
  local lab=$1; shift
  echo "==== $lab" >> $L
  LD_LIBRARY_PATH=$D/bin timeout 150 $D/bin/"$@" >> $L 2>&1; local rc=$?
  el "$lab rc $rc: $(sed -n "/^==== $lab\$/,\$p" $L | grep -E 'rank codes|passed|FAILED|want' | head -3 | tr '\n' ' ')"
}
PLANCCL_DEBUG=INFO PLANCCL_DEBUG_SUBSYS=EXEC PLANCCL_PLAN_DIR=$PWD/plans/allreduce timeout 120 $D/bin/planccl-bench \
  --lib new=$D/bin/libplanccl.so -g 2 --share-gpu --coll allreduce -b 1K -e 128K -f 128 -G 0 -n 10 \
  --place out --hostpath --hostpath-sizes 1024 > $OUT/hostpath.log 2>&1
el "hostpath rc $?"
grep -E '^# host path (call|sizes)|rank 0: 1025 programs built' $OUT/hostpath.log | sed -E 's/ +/ /g' | cut -c1-230
run programs shim_programs
PLANCCL_PLAN_DIR=$PWD/plans/allreduce run faults shim_faults
run windows shim_windows
run autoreg2 shim_autoreg 2
unset PLANCCL_NCCL_LIB
timeout 150 $D/bin/exec_plans --only thread --quick --max-bytes 16384 --no-faults --ranks 2,4 > $OUT/exec_quick.log 2>&1
el "exec_plans quick rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_quick.log)"
timeout 120 $D/bin/exec_plans --only thread --quick --no-faults --no-latency --first-flag 0xffffffff --ranks 2,4,8 --max-bytes 16384 > $OUT/exec_wrap.log 2>&1
el "exec_plans wrap rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_wrap.log)"
timeout 100 $D/bin/exec_plans --port-kind tcp --port-only --quick --no-graph --ranks 2 > $OUT/exec_tcp.log 2>&1
el "exec_plans tcp rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_tcp.log)"
