#!/usr/bin/env bash
# Session 19, device call 3 (call 3 on gpu_check.sh core was lost: the machine was taken back):
# the final code's NCCL-API GPU tests over the fake NCCL, the transport tests, the executor's
# plans (quick, 2 and 4 ranks; every zero-copy plan at full sizes) and planccl-autoregbench.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/s19; rm -rf $D; mkdir -p $D/bin $D/old
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
gunzip -c .gpu/old/libplanccl.so.gz > $D/old/libplanccl.so
export PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so
for t in "shim_autoreg 2" "shim_autoreg 1" shim_windows shim_faults shim_programs shim_segments; do
  log=$OUT/$(echo $t | tr ' ' _).log
  LD_LIBRARY_PATH=$D/bin timeout 240 $D/bin/$t > $log 2>&1
  el "$t rc $?: $(tail -2 $log | tr '\n' ' ' | cut -c1-150)"
done
unset PLANCCL_NCCL_LIB
for t in transport_mem_share transport_memchan; do
  timeout 120 $D/bin/$t > $OUT/$t.log 2>&1; el "$t rc $?: $(tail -1 $OUT/$t.log | cut -c1-150)"
done
timeout 300 $D/bin/exec_plans --only thread --filter zerocopy --ranks 2,4,8 > $OUT/exec_zerocopy.log 2>&1
el "exec_plans zerocopy rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_zerocopy.log)"
timeout 300 $D/bin/exec_plans --only thread --quick --max-bytes 16384 --no-faults --ranks 2,4 > $OUT/exec_quick.log 2>&1
el "exec_plans quick rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_quick.log)"
grep -hE "FAIL" $OUT/exec_*.log | head -5
mkdir -p $D/plans; for f in extra/allreduce/2gpu_zerocopy_inplace.json extra/allreduce/2gpu_zerocopy_outofplace.json allreduce/2gpu_ll1_inplace.json allreduce/2gpu_ll1_outofplace.json; do ln -sf $PWD/plans/$f $D/plans/; done
export PLANCCL_PLAN_DIR=$D/plans PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so PLANCCL_DEBUG=INFO PLANCCL_DEBUG_SUBSYS=SHIM
B=$OUT/autoregbench.log; : > $B
for k in 32 96; do
  for lib in new old; do
    L=$D/bin/libplanccl.so; [ $lib = old ] && L=$D/old/libplanccl.so
    echo "==== $lib k=$k" >> $B
    timeout 200 $D/bin/planccl-autoregbench --lib $L -k $k -p 3 >> $B 2> $D/err.log
    rc=$?; x=$(grep -c "registered automatically" $D/err.log)
    echo "# exchanges logged (both ranks): $x" >> $B
    el "$lib k=$k rc $rc: $(sed -n "/^==== $lib k=$k\$/,\$p" $B | grep -E '^ +[0-9]' | awk '{printf "p%s %s/%s/%s ", $1, $2, $3, $5}') exch $x"
  done
done
