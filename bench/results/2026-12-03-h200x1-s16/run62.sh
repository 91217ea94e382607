#!/usr/bin/env bash
# Session 16, device call 2: shim_multinode after the proxy drains at destroy (call 1: the
# 2 x 1 case hung, its last signal lost); the flag probe with the parameter, module-variable
# and two-load variants; the TCP port plans at the executor level (every port plan over TCP).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r62; rm -rf $D; mkdir -p $D/bin
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
$D/bin/planccl-flagprobe > $OUT/flagprobe_1.log 2>&1; el "flagprobe rc $?"
export PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
L=$OUT/all.log; : > $L
run() { # label, test...
  local lab=$1; shift
  echo "==== $lab" >> $L
  LD_LIBRARY_PATH=$D/bin timeout 280 $D/bin/"$@" >> $L 2>&1; local rc=$?
  el "$lab rc $rc: $(sed -n "/^==== $lab\$/,\$p" $L | grep -E 'rank codes|passed|FAILED|want|lacks' | head -8 | tr '\n' ' ')"
}
run multinode shim_multinode
run multinode2 shim_multinode
PLANCCL_PLAN_DIR=$PWD/plans/allreduce run faults shim_faults
unset PLANCCL_NCCL_LIB
timeout 200 $D/bin/exec_plans --port-kind tcp --port-only --quick > $OUT/exec_tcp.log 2>&1
el "exec_plans tcp rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_tcp.log)"
grep -E "FAIL|timed out" $OUT/exec_tcp.log | head -5
$D/bin/planccl-flagprobe > $OUT/flagprobe_2.log 2>&1; el "flagprobe rc $?"
cat $OUT/flagprobe_1.log $OUT/flagprobe_2.log
