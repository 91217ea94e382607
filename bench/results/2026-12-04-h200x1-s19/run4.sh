#!/usr/bin/env bash
# Session 19, device call 4: planccl-autoregbench again, new and old library alternating with the
# order swapped every repetition (call 3's first run, on a fresh machine, was slow for both).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/s19; rm -rf $D; mkdir -p $D/bin $D/old
for f in .gpu/bin/libplanccl.so.gz .gpu/bin/libfakenccl.so.gz .gpu/bin/planccl-autoregbench.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
gunzip -c .gpu/old/libplanccl.so.gz > $D/old/libplanccl.so
mkdir -p $D/plans; for f in extra/allreduce/2gpu_zerocopy_inplace.json extra/allreduce/2gpu_zerocopy_outofplace.json allreduce/2gpu_ll1_inplace.json allreduce/2gpu_ll1_outofplace.json; do ln -sf $PWD/plans/$f $D/plans/; done
export PLANCCL_PLAN_DIR=$D/plans PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so PLANCCL_DEBUG=INFO PLANCCL_DEBUG_SUBSYS=SHIM
B=$OUT/autoregbench.log; : > $B
$D/bin/planccl-autoregbench --lib $D/bin/libplanccl.so -k 8 -p 1 > /dev/null 2>&1 # warm-up
for rep in 1 2 3 4; do
  order="new old"; [ $((rep % 2)) = 0 ] && order="old new"
  for k in 32 96; do
    for lib in $order; do
      L=$D/bin/libplanccl.so; [ $lib = old ] && L=$D/old/libplanccl.so
      echo "==== $lib k=$k rep $rep" >> $B
      timeout 200 $D/bin/planccl-autoregbench --lib $L -k $k -p 4 >> $B 2> $D/err.log
      rc=$?; x=$(grep -c "registered automatically" $D/err.log)
      echo "# exchanges logged (both ranks): $x" >> $B
      el "$lib k=$k rep $rep rc $rc: $(sed -n "/^==== $lib k=$k rep $rep\$/,\$p" $B | grep -E '^ +[0-9]' | awk '{printf "p%s %s ", $1, $2}') exch $x"
    done
  done
done
