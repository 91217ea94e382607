/* SPDX-License-Identifier: MIT
 * The plan's nodes: nranks_per_node inferred from the memory channels when the JSON omits it
 * (MSCCL++'s plans do), no memory channel between ranks of different nodes, and which roots a
 * rooted plan can be relabelled to. */
#include <stdio.h>

#include "plan_int.h"

/* Smallest node size n (a divisor of n_gpus) such that every memory channel joins ranks of one
 * node, node k being ranks [k n, (k + 1) n): NVLink reaches only inside a host, so the ranks a
 * plan connects by memory channels are its hosts. A plan with no memory channel is one node:
 * its port channels may run inside a host as well as between hosts. */
static int infer_node_size(const pcl_plan_t *p) {
  int any = 0;
  for (int g = 0; g < p->n_gpus; g++)
    any |= p->gpus[g].n_channels[PCL_PLAN_CHAN_MEMORY] > 0;
  if (!any)
    return p->n_gpus;
  for (int n = 1; n < p->n_gpus; n++) {
    if (p->n_gpus % n)
      continue;
    int ok = 1;
    for (int g = 0; ok && g < p->n_gpus; g++) {
      const pcl_plan_gpu_t *gpu = &p->gpus[g];
      for (int i = 0; ok && i < gpu->n_channels[PCL_PLAN_CHAN_MEMORY]; i++)
        ok = gpu->channels[PCL_PLAN_CHAN_MEMORY][i].peer / n == g / n;
    }
    if (ok)
      return n;
  }
  return p->n_gpus;
}

ncclResult_t pcl_plan_check_nodes(pcl_plan_t *p, pcl_plan_ctx_t *c) {
  if (!p->nranks_per_node_given)
    p->nranks_per_node = infer_node_size(p);
  const int n = p->nranks_per_node;
  for (int g = 0; g < p->n_gpus; g++) {
    const pcl_plan_gpu_t *gpu = &p->gpus[g];
    for (int i = 0; i < gpu->n_channels[PCL_PLAN_CHAN_MEMORY]; i++) {
      int peer = gpu->channels[PCL_PLAN_CHAN_MEMORY][i].peer;
      if (peer / n == g / n)
        continue;
      pcl_plan_path_pop(c, 0);
      pcl_plan_path_key(c, "gpus");
      pcl_plan_path_idx(c, g);
      return pcl_plan_fail(c, "channels",
                           "memory channel %d connects rank %d (node %d) to rank %d (node %d): "
                           "memory channels stay inside a node of %d ranks (nranks_per_node)",
                           i, g, g / n, peer, peer / n, n);
    }
  }
  return ncclSuccess;
}

int pcl_plan_root_shift(const pcl_plan_t *p, int root) {
  if (p->collective != PCL_PLAN_COLL_BROADCAST && p->collective != PCL_PLAN_COLL_REDUCE)
    return 0;
  const int n = p->n_gpus, g = p->nranks_per_node;
  if (root < 0 || root >= n)
    return -1;
  /* A rotation by a multiple of the node size maps node i onto node i + root / g whole; any
   * other would bind a plan's memory channel to a rank on another node. */
  if (g > 0 && g < n && root % g != 0)
    return -1;
  return root;
}
