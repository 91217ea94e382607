#!/usr/bin/env bash
# Session 19, device call 7: what the targeted calls left out, on the final library: the
# multi-node NCCL-API test (window views now built from per-rank offsets) and every plan on the
# GPU against the simulator up to 64 KiB, threads and processes (as gpu_check.sh core runs it).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/s19; rm -rf $D; mkdir -p $D/bin
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
PLANCCL_NCCL_LIB=$D/bin/libfakenccl.so LD_LIBRARY_PATH=$D/bin timeout 200 $D/bin/shim_multinode > $OUT/shim_multinode.log 2>&1
el "shim_multinode rc $?: $(grep -E 'passed$|FAILED$' $OUT/shim_multinode.log | tail -1)"
timeout 420 $D/bin/exec_plans --max-bytes 65536 > $OUT/exec_plans.log 2>&1
el "exec_plans rc $?: $(grep -E '^exec_plans: [0-9]+ passed' $OUT/exec_plans.log)"
grep -E "FAIL" $OUT/exec_plans.log | head -5
