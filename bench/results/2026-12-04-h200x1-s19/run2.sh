#!/usr/bin/env bash
# Session 19, device call 2: planccl-autoregbench (host call time now apart from the synchronised
# call, whose ~4.7 ms on one shared GPU is two processes time-slicing it) against the previous
# library (agreement per buffer pair), with the exchanges counted in the ranks' logs.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/s19; rm -rf $D; mkdir -p $D/bin $D/old
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
gunzip -c .gpu/old/libplanccl.so.gz > $D/old/libplanccl.so
mkdir -p $D/plans; for f in extra/allreduce/2gpu_zerocopy_inplace.json extra/allreduce/2gpu_zerocopy_outofplace.json allreduce/2gpu_ll1_inplace.json allreduce/2gpu_ll1_outofplace.json; do ln -sf $PWD/plans/$f $D/plans/; done
export PLANCCL_PLAN_DIR=$D/plans PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
export PLANCCL_DEBUG=INFO PLANCCL_DEBUG_SUBSYS=SHIM
B=$OUT/autoregbench.log; : > $B
for rep in 1 2 3; do
  for k in 32 96; do
    for lib in new old; do
      L=$D/bin/libplanccl.so; [ $lib = old ] && L=$D/old/libplanccl.so
      echo "==== $lib k=$k rep $rep" >> $B
      timeout 200 $D/bin/planccl-autoregbench --lib $L -k $k -p 3 >> $B 2> $D/err.log
      rc=$?
      x=$(grep -c "registered automatically" $D/err.log)
      echo "# exchanges logged (both ranks): $x" >> $B
      el "$lib k=$k rep $rep rc $rc: $(sed -n "/^==== $lib k=$k rep $rep\$/,\$p" $B | grep -E '^ +[0-9]' | awk '{printf "p%s %s/%s/%s ", $1, $2, $3, $5}') exch $x $(sed -n "/^==== $lib k=$k rep $rep\$/,\$p" $B | grep 'result')"
    done
  done
done
