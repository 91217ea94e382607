#!/usr/bin/env bash
# Session 9, device call 1 (binaries built on the CPU machine, carried gzipped in .gpu/bin):
# the EW kernel with its ranges in the kernel parameters and S's first load before the address
# shuffles (new) against HEAD's (old): correctness of every one-phase plan, then a same-run A/B
# of planccl-refbench alternating old/new 3 times, the PCL_KPROF breakdown, and the SASS of both
# kernels' 4-rank fp32 versions beside the reference's.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r17; mkdir -p $D/bin; trap 'tar czf $OUT/logs17.tgz -C /tmp r17/logs 2>/dev/null' EXIT
mkdir -p $D/logs; L=$D/logs
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
el "unpacked"
timeout 150 $D/bin/exec_plans --quick --no-faults --no-latency --filter ll1 > $L/exec_plans_ll1.log 2>&1
el "exec_plans --quick --filter ll1 rc $?"; sed -n '/^mode  *ranks/,$p' $L/exec_plans_ll1.log | cut -c1-150 | tail -14
for i in 1 2 3; do
  for v in old new; do
    b=$D/bin/planccl-refbench; [ $v = old ] && b=$b-old
    timeout 60 $b --ranks 2,4,8 > $L/ab_${v}_$i.log 2>&1
    echo "== $v $i rc $?"; grep -E '^ +[248] ' $L/ab_${v}_$i.log | awk '{print $1, $2, $3, $4, $5, $7}' | tr '\n' ';'; echo
    grep REFBENCH $L/ab_${v}_$i.log
  done
done
el "A/B done"
timeout 60 $D/bin/planccl-refbench-prof --ranks 2,4,8 > $L/refbench_prof.log 2>&1
el "prof rc $?"; grep -iE 'ready|phase|^ +[248] ' $L/refbench_prof.log | head -30
CUOBJ=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
for v in old new; do
  b=$D/bin/planccl-refbench; [ $v = old ] && b=$b-old
  $CUOBJ -sass $b 2>&1 | awk '/Function :/ {keep = ($0 ~ /pcl_kexec_ewIfLi4E|pcl_ref_allreduce_ll16ILi4E/)} keep' > $L/sass_$v.txt
  el "sass $v: $(wc -l < $L/sass_$v.txt) lines; functions: $(grep -c 'Function :' $L/sass_$v.txt)"
done
