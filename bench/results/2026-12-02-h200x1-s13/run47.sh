#!/usr/bin/env bash
# Session 13, device call 6: the cost of automatic registration's per-call vote on the 16-core
# H200 host (planccl-votebench, forked ranks), against a bootstrap allgather of 8 bytes.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PLANCCL_SOCKET_IFNAME=lo
gunzip -c .gpu/bin/planccl-votebench.gz > /tmp/vb && chmod +x /tmp/vb
for r in 2 4 8; do for rep in 1 2; do
  echo "== -r $r (run $rep)"; timeout 120 /tmp/vb -r $r -n 100000 | grep -E "vote|allgather"
done; done 2>&1 | tee $OUT/votebench.log
