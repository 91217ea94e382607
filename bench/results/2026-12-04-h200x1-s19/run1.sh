#!/usr/bin/env bash
# Session 19, device call 1: automatic registration agreed per allocation (views at each rank's
# own offsets): shim_autoreg at both levels, shim_windows (symmetric views, now built from
# per-rank offsets), transport_mem_share, the zero-copy plans through views (exec_plans), and
# planccl-autoregbench against the previous library (per buffer pair) on the same GPU.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/s19; rm -rf $D; mkdir -p $D/bin $D/old
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
gunzip -c .gpu/old/libplanccl.so.gz > $D/old/libplanccl.so
nproc; nvidia-smi --query-gpu=name --format=csv,noheader
export PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
for t in "shim_autoreg 2" "shim_autoreg 1" shim_windows; do
  log=$OUT/$(echo $t | tr ' ' _).log
  LD_LIBRARY_PATH=$D/bin timeout 200 $D/bin/$t > $log 2>&1
  el "$t rc $?: $(tail -2 $log | tr '\n' ' ')"
done
grep -h "registered automatically\|dropped: its memory" /tmp/pcl_shim_autoreg_*/*.log 2>/dev/null | head -3
unset PLANCCL_NCCL_LIB
timeout 120 $D/bin/transport_mem_share > $OUT/transport_mem_share.log 2>&1
el "transport_mem_share rc $?: $(tail -1 $OUT/transport_mem_share.log)"
timeout 300 $D/bin/exec_plans --only thread --filter zerocopy --ranks 2,4,8 > $OUT/exec_zerocopy.log 2>&1
el "exec_plans zerocopy rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_zerocopy.log)"
grep -E "FAIL" $OUT/exec_zerocopy.log | head -5
# The bench: the plans the zero-copy allreduce needs, new and old library alternating.
mkdir -p $D/plans; for f in extra/allreduce/2gpu_zerocopy_inplace.json extra/allreduce/2gpu_zerocopy_outofplace.json allreduce/2gpu_ll1_inplace.json allreduce/2gpu_ll1_outofplace.json; do ln -sf $PWD/plans/$f $D/plans/; done
export PLANCCL_PLAN_DIR=$D/plans PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
B=$OUT/autoregbench.log; : > $B
for rep in 1 2; do
  for k in 32 96; do
    for lib in new old; do
      L=$D/bin/libplanccl.so; [ $lib = old ] && L=$D/old/libplanccl.so
      echo "==== $lib k=$k rep $rep" >> $B
      timeout 200 $D/bin/planccl-autoregbench --lib $L -k $k -p 3 >> $B 2>&1
      el "autoregbench $lib k=$k rep $rep rc $?: $(sed -n "/^==== $lib k=$k rep $rep\$/,\$p" $B | grep -E '^ +[0-9]' | awk '{printf "pass%s %s/%s ", $1, $2, $3}') $(sed -n "/^==== $lib k=$k rep $rep\$/,\$p" $B | grep 'result')"
    done
  done
done
