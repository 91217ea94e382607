#!/usr/bin/env bash
# Session 18, device call 2: the proxy's wake on launch (unit test on 16 cores; planccl-portbench
# round trips after quiet spells, the launch announced or not), the multi-node NCCL-API test with
# the hierarchical reduce-scatter now selected for unregistered buffers, rooted collectives with
# placement seen differently by root and non-root (shim_windows), and every port plan over TCP.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r73; rm -rf $D; mkdir -p $D/bin
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
nproc; nvidia-smi --query-gpu=name --format=csv,noheader
timeout 120 $D/bin/test_proxy > $OUT/test_proxy.log 2>&1; el "test_proxy rc $?: $(grep -E 'Checks' $OUT/test_proxy.log)"
export PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
LD_LIBRARY_PATH=$D/bin timeout 300 $D/bin/shim_multinode > $OUT/shim_multinode.log 2>&1
el "shim_multinode rc $?: $(grep -E 'rank codes|passed$|FAILED$|shim_multinode:.* s$|peer_dies' $OUT/shim_multinode.log | tr '\n' ' ')"
grep -h "pcl_path coll=ReduceScatter" /tmp/pcl_shim_multinode_* 2>/dev/null | head -2
LD_LIBRARY_PATH=$D/bin timeout 200 $D/bin/shim_windows > $OUT/shim_windows.log 2>&1
el "shim_windows rc $?: $(tail -2 $OUT/shim_windows.log | tr '\n' ' ')"
unset PLANCCL_NCCL_LIB
timeout 240 $D/bin/exec_plans --port-kind tcp --port-only --quick --ranks 2,4,8 > $OUT/exec_tcp.log 2>&1
el "exec_plans tcp rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_tcp.log)"
grep -E "FAIL|timed out" $OUT/exec_tcp.log | head -5
grep -E "reducescatter_.x.gpu_hier" $OUT/exec_tcp.log | head -8
P=$OUT/portbench.log; : > $P
pb() { # label, args...
  local lab=$1; shift
  echo "==== $lab" >> $P
  timeout 200 $D/bin/planccl-portbench -b 4K -e 4K -n 2 --threads "$@" >> $P 2>&1
  el "$lab rc $?: $(sed -n "/^==== $lab\$/,\$p" $P | grep -E 'one way \(round' | sed 's/.*round trips//')"
}
pb "device gap0" --device --lat-iters 500
for g in 20000 1000000; do
  n=40; [ $g -gt 100000 ] && n=10
  for k in kick no-kick; do
    a=""; [ $k = no-kick ] && a=--no-kick
    pb "device gap$g $k" --device --lat-iters $n --gap-us $g $a
  done
done
pb "host gap20000 kick" --lat-iters 40 --gap-us 20000
pb "host gap20000 no-kick" --lat-iters 40 --gap-us 20000 --no-kick
