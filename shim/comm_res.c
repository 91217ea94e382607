/* SPDX-License-Identifier: MIT
 * planccl's resources of one communicator: topology, eligibility, scratch buffer, memory channels
 * to every peer and the executor context. Built collectively; every decision that could differ
 * between ranks (a failed allocation, a different plan set) is agreed through a bootstrap
 * allgather, so either all ranks are planned or all run pass-through. */
#include <stdio.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "alloc.h"
#include "comm_int.h"
#include "exec.h"
#include "kernels.h"
#include "log.h"
#include "pcl_check.h"
#include "mem.h"
#include "memchan.h"
#include "portchan.h"
#include "param.h"
#include "topo.h"

/* What each rank contributes to an agreement round. */
struct agree {
  uint64_t plans_hash; /* the plans this rank would select from */
  int32_t ok;          /* this rank's step succeeded */
  int32_t pad;
};

/* Hash of the plans usable for (world, rpn): every rank must select from the same set. */
static uint64_t plans_hash(const pcl_registry_t *reg, int world, int rpn) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < pcl_registry_count(reg); i++) {
    const pcl_plan_t *p = pcl_registry_plan(reg, i);
    if (p->n_gpus != world || p->nranks_per_node != rpn) continue;
    uint64_t v[5] = {(uint64_t)p->collective, p->min_message_size, p->max_message_size,
                     (uint64_t)(int64_t)p->priority, (uint64_t)p->inplace};
    for (const char *s = p->name; s && *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    for (int k = 0; k < 5; k++) h = (h ^ v[k]) * 1099511628211ull;
  }
  return h;
}

/* Most memory channels any plan for (world, rpn) opens from one rank to one peer. */
/* The most channels of `type` any selectable plan opens from one rank to one peer (at least
 * `floor`). */
static int max_channels_per_peer(const pcl_registry_t *reg, int world, int rpn, int type,
                                 int floor) {
  int most = floor;
  for (int i = 0; i < pcl_registry_count(reg); i++) {
    const pcl_plan_t *p = pcl_registry_plan(reg, i);
    if (p->n_gpus != world || p->nranks_per_node != rpn) continue;
    for (int g = 0; g < p->n_gpus; g++) {
      const pcl_plan_gpu_t *gpu = &p->gpus[g];
      const pcl_plan_channel_t *ch = gpu->channels[type];
      for (int a = 0; a < gpu->n_channels[type]; a++) {
        int k = 0;
        for (int b = 0; b < gpu->n_channels[type]; b++) k += ch[b].peer == ch[a].peer;
        if (k > most) most = k;
      }
    }
  }
  return most;
}

/* One agreement round: 1 when every rank reported ok with the same plans hash. */
static ncclResult_t agree_all(pcl_bootstrap_t *boot, int ok, uint64_t hash, int *all_ok,
                              int *same_plans) {
  int n = pcl_bootstrap_nranks(boot), r = pcl_bootstrap_rank(boot);
  struct agree *all = NULL;
  if (PCL_CALLOC(all, (size_t)n, "agreement") == NULL) return ncclSystemError;
  all[r].ok = ok;
  all[r].plans_hash = hash;
  ncclResult_t res = pcl_bootstrap_allgather(boot, all, sizeof(*all));
  *all_ok = res == ncclSuccess;
  *same_plans = 1;
  for (int i = 0; i < n && res == ncclSuccess; i++) {
    *all_ok &= all[i].ok != 0;
    *same_plans &= all[i].plans_hash == hash;
  }
  pcl_free(all);
  return res;
}

static void fill_caps(struct pcl_kernel_caps *caps) {
  memset(caps, 0, sizeof(*caps));
  for (int t = 0; t < (int)ncclNumTypes; t++) {
    if (!pcl_kernels_dtype_supported((ncclDataType_t)t)) continue;
    caps->dtypes |= 1u << t;
    for (int op = 0; op < (int)ncclNumOps; op++)
      if (pcl_kernels_redop_supported((ncclDataType_t)t, (ncclRedOp_t)op))
        caps->redops[t] |= 1u << op;
  }
}

void pcl_comm_res_destroy(struct pcl_comm_pcl *p, int abort) {
  if (p == NULL) return;
  int prev = -1;
  cudaGetDevice(&prev);
  cudaSetDevice(p->cuda_dev);
  if (abort && p->exec != NULL) pcl_exec_abort(p->exec);
  /* Our kernels finish (or, aborted, give up) before their channels and scratch go away. A
   * kernel waits only for peers that already launched the same call, so this never waits on a
   * peer that is not itself making progress. */
  cudaDeviceSynchronize();
  pcl_exec_ctx_destroy(p->exec);
  pcl_portchan_destroy(p->portchan); /* before the memory channels that map its semaphores */
  pcl_memchan_destroy(p->memchan);
  pcl_mem_free(p->scratch);
  pcl_topo_destroy(p->topo);
  pcl_bootstrap_destroy(p->boot);
  if (prev >= 0) cudaSetDevice(prev);
  pcl_free(p);
}

#define WHY(...) snprintf(why, whylen, __VA_ARGS__)

ncclResult_t pcl_comm_res_create(pcl_bootstrap_t *boot, int cuda_dev, struct pcl_comm_pcl **out,
                                 char *why, size_t whylen) {
  ncclResult_t res = ncclSuccess;
  struct pcl_comm_pcl *p = NULL;
  int all_ok = 0, same = 0;
  *out = NULL;
  why[0] = '\0';
  if (PCL_CALLOC(p, 1, "planccl comm part") == NULL) {
    /* Nobody else knows: still take part in nothing and let the peers time out? No: destroy
     * the bootstrap, whose closed sockets make the peers' next step fail quickly. */
    pcl_bootstrap_destroy(boot);
    WHY("out of memory");
    return ncclSuccess;
  }
  p->boot = boot;
  p->cuda_dev = cuda_dev;
  p->rank = pcl_bootstrap_rank(boot);
  p->nranks = pcl_bootstrap_nranks(boot);
  p->reg = pcl_shim_registry();
  fill_caps(&p->caps);

  /* Topology: collective, identical picture on every rank. */
  res = pcl_topo_create(boot, cuda_dev, &p->topo);
  if (res != ncclSuccess) {
    WHY("topology discovery failed");
    goto passthrough;
  }
  p->ranks_per_node = pcl_topo_ranks_per_node(p->topo);
  p->local_rank = pcl_topo_local_rank(p->topo, p->rank);
  /* Everything below up to the first agreement is computed from the shared topology and the
   * registry, so every rank reaches the same verdict. */
  if (pcl_topo_nnodes(p->topo) != 1) {
    WHY("ranks on %d hosts (multi-node plans are not run yet)", pcl_topo_nnodes(p->topo));
    goto passthrough;
  }
  for (int a = 0; a < p->nranks; a++)
    for (int b = 0; b < p->nranks; b++)
      if (a != b && !pcl_topo_peer_access(p->topo, a, b)) {
        WHY("no peer access from rank %d's GPU to rank %d's", a, b);
        goto passthrough;
      }
  uint64_t need = pcl_registry_max_scratch_bytes(p->reg, p->nranks, p->ranks_per_node, UINT64_MAX);
  uint64_t hash = plans_hash(p->reg, p->nranks, p->ranks_per_node);
  if (need == 0) {
    WHY("no plans for %d ranks with %d per node", p->nranks, p->ranks_per_node);
    goto passthrough;
  }
  uint64_t scratch = pcl_param_scratch_bytes() > 0 ? (uint64_t)pcl_param_scratch_bytes() : need;
  scratch = (scratch + 4095) & ~(uint64_t)4095;

  /* Local steps that may fail on one rank only: scratch allocation. Then agree. */
  int ok = pcl_mem_alloc(cuda_dev, scratch, PCL_MEM_ALLOC_AUTO, &p->scratch) == ncclSuccess;
  PCL_CHECK_GOTO(agree_all(boot, ok, hash, &all_ok, &same), res, fail_comm);
  if (!same) {
    WHY("ranks loaded different plans (check PLANCCL_PLAN_DIR on every rank)");
    goto passthrough;
  }
  if (!all_ok) {
    WHY("%s", ok ? "a peer could not allocate its scratch buffer"
                 : "could not allocate the scratch buffer");
    goto passthrough;
  }
  p->scratch_bytes = p->scratch->bytes;

  /* Memory channels to every peer: collective, agrees on its own (all succeed or all fail). */
  pcl_memchan_config_t mcfg;
  memset(&mcfg, 0, sizeof(mcfg));
  mcfg.cuda_dev = cuda_dev;
  mcfg.nchannels = max_channels_per_peer(p->reg, p->nranks, p->ranks_per_node,
                                         PCL_PLAN_CHAN_MEMORY, 1);
  mcfg.scratch = p->scratch->ptr;
  mcfg.scratch_bytes = p->scratch_bytes;
  if (pcl_memchan_create(boot, &mcfg, &p->memchan) != ncclSuccess) {
    p->memchan = NULL;
    WHY("memory channels could not be set up");
    goto passthrough;
  }

  /* Port channels (a proxy thread) only when some selectable plan uses them; collective and
   * agreeing on its own like the memory channels. */
  int nport = max_channels_per_peer(p->reg, p->nranks, p->ranks_per_node, PCL_PLAN_CHAN_PORT, 0);
  if (nport > PCL_PORTCHAN_MAX_CHANNELS) {
    WHY("plans open %d port channels to one peer (at most %d)", nport, PCL_PORTCHAN_MAX_CHANNELS);
    goto passthrough;
  }
  if (nport > 0) {
    /* One host with peer access everywhere (checked above): the copy engine to every peer. */
    pcl_portchan_config_t pcfg = {.cuda_dev = cuda_dev, .bus_id = NULL, .nchannels = nport,
                                  .kind = NULL, .memchan = p->memchan,
                                  .scratch = p->scratch->ptr, .scratch_bytes = p->scratch_bytes};
    const pcl_topo_rank_t *me = pcl_topo_rank_info(p->topo, p->rank);
    if (me != NULL) pcfg.bus_id = me->bus_id;
    res = pcl_portchan_create(boot, &pcfg, &p->portchan);
    if (res != ncclSuccess) {
      p->portchan = NULL;
      res = ncclSuccess;
      WHY("port channels could not be set up");
      goto passthrough;
    }
  }

  /* Executor context (loads every kernel variant on this device before any can spin). */
  pcl_exec_config_t ecfg = {.cuda_dev = cuda_dev, .rank = p->rank, .nranks = p->nranks,
                            .memchan = p->memchan, .portchan = p->portchan,
                            .scratch = p->scratch->ptr,
                            .scratch_bytes = p->scratch_bytes,
                            .timeout_s = pcl_param_timeout_s(),
                            .dev_ranks = pcl_topo_max_ranks_per_gpu(p->topo)};
  ok = pcl_exec_ctx_create(&ecfg, &p->exec) == ncclSuccess;
  if (!ok) p->exec = NULL;
  PCL_CHECK_GOTO(agree_all(boot, ok, hash, &all_ok, &same), res, fail_comm);
  if (!all_ok) {
    WHY("%s", ok ? "a peer could not create its executor" : "could not create the executor");
    goto passthrough;
  }
  size_t chan_bytes = 2 * (size_t)p->nranks * (size_t)mcfg.nchannels * 8;
  PCL_INFO(PCL_LOG_INIT | PCL_LOG_SHIM, "rank %d/%d dev %d: planccl ready (%d ranks per node): "
           "GPU memory %.2f MiB (scratch %.2f MiB, channels %zu B x %d per peer, executor state)",
           p->rank, p->nranks, cuda_dev, p->ranks_per_node,
           (double)(p->scratch_bytes + chan_bytes) / 1048576.0,
           (double)p->scratch_bytes / 1048576.0, chan_bytes, mcfg.nchannels);
  *out = p;
  return ncclSuccess;

fail_comm:
  /* A bootstrap step failed: peers see the same failure (closed sockets, timeouts). */
  WHY("bootstrap agreement failed (%s)", ncclGetErrorString(res));
passthrough:
  pcl_comm_res_destroy(p, 0);
  return ncclSuccess;
}
