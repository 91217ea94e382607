#!/usr/bin/env bash
# Session 19, device call 5 (second try, 5b): automatic registration under PyTorch 2.11 (test/torch/
# pcl_autoreg_torch.py): two processes sharing the GPU, planccl preloaded over the fake NCCL (a sum
# is right only when planccl ran the call registered), the default allocator at level 2 and
# expandable segments at level 1, this library and the previous one (per buffer pair); level 1
# on the default allocator is the negative control (cudaMalloc memory is not registered there:
# every sum must come out wrong).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
D=/tmp/s19t; rm -rf $D; mkdir -p $D/new/lib $D/old/lib $D/new/share/planccl $D/old/share/planccl $D/plans
gunzip -c .gpu/bin/libplanccl.so.gz > $D/new/lib/libplanccl.so
gunzip -c .gpu/old/libplanccl.so.gz > $D/old/lib/libplanccl.so
gunzip -c .gpu/bin/libfakenccl.so.gz > $D/libfakenccl.so
# The installed layout: share/planccl/plans holds the default set only (plans/extra is opt-in; a
# link to the whole source folder would bring the scratch-staged Simple plans, which the registry
# prefers to the zero-copy one up to 32 MiB, and no call would vote: call 5's first try).
for l in new old; do mkdir -p $D/$l/share/planccl/plans; ln -sfn $PWD/plans/allreduce $D/$l/share/planccl/plans/allreduce; done
for f in extra/allreduce/2gpu_zerocopy_inplace.json extra/allreduce/2gpu_zerocopy_outofplace.json; do ln -sf $PWD/plans/$f $D/plans/; done
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.device_count(), "GPU")'
run() { # label lib level alloc-conf
  local lab=$1 lib=$2 lvl=$3 conf=$4
  PYTORCH_CUDA_ALLOC_CONF=$conf LD_PRELOAD=$D/$lib/lib/libplanccl.so PLANCCL_NCCL_LIB=$D/libfakenccl.so \
    PLANCCL_PLAN_DIR=$D/plans PLANCCL_AUTO_REG=$lvl PLANCCL_STATS=1 \
    timeout 240 python3 test/torch/pcl_autoreg_torch.py --iters 60 --logs $D/logs_$lab > $OUT/torch_$lab.log 2>&1
  local rc=$?
  cp $D/logs_$lab/rank0.log $OUT/torch_${lab}_rank0.log 2>/dev/null
  el "$lab rc $rc: $(grep -E 'rank [01]:|passed|FAILED' $OUT/torch_$lab.log | sed 's/pcl_autoreg_torch: //' | tr '\n' ' ')"
}
run new_l2 new 2 ""
run old_l2 old 2 ""
run new_l1_exp new 1 expandable_segments:True
run old_l1_exp old 1 expandable_segments:True
run new_l1_control new 1 ""
tail -30 $OUT/torch_new_l2.log
