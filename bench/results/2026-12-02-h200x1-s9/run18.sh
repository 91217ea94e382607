#!/usr/bin/env bash
# Session 9, device call 2: is the EW kernel's gap its code size? HEAD's EW kernel (old) against
# the same source built with -DPCL_KEW_SLIM (one variant per kernel: sum, aligned, LL16; no
# dispatch tree), alternating 3 times, and their SASS sizes.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo PCL_SOURCE_DIR=$PWD
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/r18; mkdir -p $D/bin $D/logs; L=$D/logs; trap 'tar czf $OUT/logs18.tgz -C /tmp r18/logs 2>/dev/null' EXIT
for f in .gpu/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > $D/bin/$b; chmod +x $D/bin/$b; done
for i in 1 2 3; do
  for v in old slim; do
    b=$D/bin/planccl-refbench-$v
    timeout 60 $b --ranks 2,4,8 > $L/ab_${v}_$i.log 2>&1
    echo "== $v $i rc $?"; grep -E '^ +[248] ' $L/ab_${v}_$i.log | awk '{print $1, $2, $3, $4, $5, $7}' | tr '\n' ';'; echo
    grep REFBENCH $L/ab_${v}_$i.log
  done
done
el "A/B done"
CUOBJ=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
for v in old slim; do
  $CUOBJ -sass $D/bin/planccl-refbench-$v 2>&1 | awk '/Function :/ {keep = ($0 ~ /pcl_kexec_ewIfLi[248]E|pcl_ref_allreduce_ll16ILi[248]E/)} keep' > $L/sass_$v.txt
  el "sass $v: $(grep -c 'Function :' $L/sass_$v.txt) functions"; awk '/Function :/ {if (n) print f, n; f=$3; n=0} /^ +\/\*[0-9a-f]+\*\// {n++} END {print f, n}' $L/sass_$v.txt
done
