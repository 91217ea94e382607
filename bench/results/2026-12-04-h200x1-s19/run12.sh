#!/usr/bin/env bash
# Session 19, device call 12, after the review: a slot's allocations kept one by one (a call checks
# only those under its buffers, the turn check 16 per call), the bench's outputs poisoned:
# shim_autoreg at both levels, transport_mem_share, planccl-autoregbench once, and the PyTorch
# check from an install tree (test/torch/autoreg.sh).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/s19; rm -rf $D; mkdir -p $D/bin
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
for lvl in 2 1; do
  PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so LD_LIBRARY_PATH=$D/bin timeout 200 $D/bin/shim_autoreg $lvl > $OUT/shim_autoreg_$lvl.log 2>&1
  el "shim_autoreg $lvl rc $?: $(tail -2 $OUT/shim_autoreg_$lvl.log | tr '\n' ' ')"
done
timeout 120 $D/bin/transport_mem_share > $OUT/transport_mem_share.log 2>&1
el "transport_mem_share rc $?: $(tail -1 $OUT/transport_mem_share.log)"
mkdir -p $D/plans; for f in extra/allreduce/2gpu_zerocopy_inplace.json extra/allreduce/2gpu_zerocopy_outofplace.json allreduce/2gpu_ll1_inplace.json allreduce/2gpu_ll1_outofplace.json; do ln -sf $PWD/plans/$f $D/plans/; done
PLANCCL_PLAN_DIR=$D/plans PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so timeout 200 $D/bin/planccl-autoregbench --lib $D/bin/libplanccl.so -k 96 -p 3 > $OUT/autoregbench.log 2>&1
el "autoregbench rc $?: $(grep -E '^ +[0-9]|result' $OUT/autoregbench.log | tr '\n' ' ')"
rm -rf /tmp/pfx && cp -r .gpu/prefix /tmp/pfx && gunzip /tmp/pfx/lib/libplanccl.so.gz
test/torch/autoreg.sh /tmp/pfx $D/bin/libfakenccl.so > $OUT/torch_autoreg.log 2>&1
el "torch autoreg rc $?: $(grep -E 'rank 0:|passed|FAILED' $OUT/torch_autoreg.log | tr '\n' ' ')"
