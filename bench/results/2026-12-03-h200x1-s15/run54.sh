#!/usr/bin/env bash
# Session 15, device call 3: the table grows when sizes cycle past it (call 2: 4096 sizes over
# 1024 + 128 programs rebuilt one per call, ~330 us); shim_programs made sensitive to a missing
# pin (the captured size is now the largest; call 2's library without pins passed it) and to the
# rebuild count; the host path over N sizes against HEAD; a build's cost from the INFO line.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r54; rm -rf $D; mkdir -p $D/bin $D/head $D/nopin
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
run programs $D/bin shim_programs
PLANCCL_TIMEOUT_S=5 run programs_nopin $D/nopin shim_programs
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
grep -E 'programs built' $H | grep 'rank 0' | sed -E 's/.*(rank 0.*)/\1/' | cut -c1-260 | head -12
el "hostpath done"
